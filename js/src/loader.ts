/**
 * The small module every nbstream widget stores as its `_esm` (a few hundred
 * bytes), instead of the whole front end. The front end (widget.js and
 * widget.css, ~250 KB) travels once per kernel in one shared runtime model
 * (`nbstream/widgets/runtime.py`: a plain `@jupyter-widgets/base` WidgetModel with
 * `bundle`, `css` and `version` traits), so a notebook saved with widget state
 * stores it once, however many widgets it shows.
 *
 * A view looks up the runtime model named by its `_runtime` trait
 * ("IPY_MODEL_<id>") in the widget manager, imports its bundle (a Blob URL, as
 * anywidget does with `_esm`) and adds its CSS once per page and version,
 * then hands the view to the bundle's `render`. The import is shared by every
 * view on the page through a registry on `globalThis` keyed by the version:
 * this module itself is imported anew for each widget model.
 *
 * The heavy renderers (Temml for math, highlight.js for code, the table of
 * HTML's character references) are chunks
 * the bundle fetches from the runtime model on first use (js/src/chunks.ts):
 * each view hands the bundle its runtime model (`chunks.addRuntime`).
 *
 * In marimo (`runtime.standalone()`) widgets carry the whole front end,
 * chunks included (standalone.ts), and this module is not used.
 *
 * Runs on the browser's main thread, in anywidget's `render`.
 */
import type { AnyModel, Initialize, Render } from "@anywidget/types";

/** What the bundle (index.ts) exports as its default. */
interface FrontEnd {
  render: Render;
  /** chunks.ts: the runtime models the chunks come from */
  chunks?: { addRuntime(runtime: unknown): void };
}

interface RuntimeTraits {
  bundle: string;
  css: string;
  version: string;
}

const REGISTRY = "__nbstreamRuntimes";
const PREFIX = "IPY_MODEL_";

function registry(): Map<string, Promise<FrontEnd>> {
  const g = globalThis as { [REGISTRY]?: Map<string, Promise<FrontEnd>> };
  g[REGISTRY] ??= new Map();
  return g[REGISTRY];
}

function addCss(css: string, version: string): void {
  const id = `nbstream-css-${version}`;
  if (css.length === 0 || document.getElementById(id) !== null) {
    return;
  }
  const style = document.createElement("style");
  style.id = id;
  style.textContent = css;
  document.head.appendChild(style);
}

async function importBundle(bundle: string): Promise<FrontEnd> {
  const url = URL.createObjectURL(new Blob([bundle], { type: "text/javascript" }));
  try {
    const mod = (await import(/* @vite-ignore */ url)) as { default?: FrontEnd };
    if (typeof mod.default?.render !== "function") {
      throw new Error("the runtime bundle has no render");
    }
    return mod.default;
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** The front end named by the widget's `_runtime` trait, imported once per page and version. */
export async function frontEnd(model: AnyModel): Promise<FrontEnd> {
  const ref = model.get("_runtime");
  if (typeof ref !== "string" || !ref.startsWith(PREFIX)) {
    throw new Error("this widget names no runtime (_runtime)");
  }
  const runtime = await model.widget_manager.get_model<RuntimeTraits>(ref.slice(PREFIX.length));
  const version = String(runtime.get("version"));
  let loading = registry().get(version);
  if (loading === undefined) {
    addCss(String(runtime.get("css") ?? ""), version);
    loading = importBundle(String(runtime.get("bundle")));
    registry().set(version, loading);
    loading.catch(() => registry().delete(version)); // a later view may try again
  }
  const fe = await loading;
  fe.chunks?.addRuntime(runtime);
  return fe;
}

const initialize: Initialize = () => undefined;

const render: Render = async (props) => {
  try {
    const fe = await frontEnd(props.model);
    return await fe.render(props);
  } catch (err) {
    props.el.textContent = `nbstream: the front end could not be loaded (${String(
      err instanceof Error ? err.message : err,
    )}).`;
    return undefined;
  }
};

export default { initialize, render };
