/**
 * The heavy renderers, loaded on first use: Temml for math (about 208 KB
 * minified), highlight.js for code (about 68 KB), the table of HTML's named
 * character references (about 23 KB) and linkify-it, which finds bare URLs
 * and e-mail addresses (about 12 KB), are not in the bundle every view
 * parses; each is a module of its own (`chunks/math.ts`,
 * `chunks/highlight.ts`, `chunks/entities.ts`, `chunks/linkify.ts`, built
 * into `nbstream/static/`), fetched the first time a formula, a closed code
 * block, a rarer `&name;` or text that may hold a link is rendered. So is
 * the glyph warmer (`chunks/glyphs.ts`, glyphs.ts), the first time a long
 * history keeps placeholders with characters beyond Latin (lazy.ts), and the
 * cards of tool calls (`chunks/tools.ts`, toolcard.ts), the first time a reply
 * calls a tool (a plain chat never shows one). That chunk is no leaf: it takes
 * what it runs of the bundle in its options (toolhost.ts), never a copy.
 *
 * This module is the bundle's side: a registry of the chunks loaded so far.
 * {@link chunk} returns a loaded chunk, or null after asking for it once; the
 * renderers then show a formula's source (dimmed, as while it streams), the
 * code plain, the `&name;` as written or a bare URL as text, and {@link onChunk} tells them when
 * it arrived, to render again. A Markdown renderer that could not render
 * something for want of a chunk says so ({@link noteMiss}): the message list
 * compares {@link misses} before and after rendering a message, and renders
 * it again when the chunk arrives.
 * Where the chunks come from: the kernel's runtime widget
 * (`nbstream/widgets/runtime.py`), whose model every view hands over
 * ({@link addRuntime}, from loader.ts). Its `chunks` trait (name -> ES module
 * text) holds those the kernel sent: it sends one when a message needs it,
 * or when a view asks (a `{kind: "chunk", name}` message to the runtime
 * model). A chunk is imported when a renderer asks for it, but for the
 * {@link EAGER} ones, imported as soon as a runtime holds them: the kernel
 * sends the tools chunk with a reply's first tool part, so that its cards
 * render without a wait. A notebook saved with widget state keeps them, so a saved notebook
 * and an offline page still render them; a chunk no runtime has is asked of
 * every runtime on the page (a saved page with no kernel cannot answer: its
 * formulas stay as their source). Each chunk is imported once (a Blob URL, as
 * anywidget imports `_esm`); `globalThis.__nbstreamChunkLoads` lists those
 * imported, in order, for tests. The standalone bundle (standalone.ts, for
 * marimo) provides them all at once. Tests set their own {@link ChunkHost}.
 *
 * The registry is per bundle copy (one per page and version). Chunks are
 * never trusted more than the bundle's own code: what they return still goes
 * through the sanitizer. Runs on the browser's main thread only.
 */

import type { Match as LinkifyMatch } from "linkify-it";
import type { GlyphWarmer } from "./glyphs";
import type { ChunkMsg, ChunkName } from "./protocol";
import type { ToolParts } from "./toolcard";

/** The chunks there are (declared in nbstream/widgets/protocol.py). */
export type { ChunkName };

/** What the math chunk exports (chunks/math.ts). */
export interface MathChunk {
  /** MathML for `tex`, or null when it does not parse (or is too long). */
  renderTeX(tex: string, display: boolean): string | null;
}

/** What the entities chunk exports (chunks/entities.ts). */
export interface EntitiesChunk {
  /** `&name;` decoded, or as it is where `name` is none of HTML's. */
  decodeHTMLStrict(str: string): string;
}

/** What the highlighting chunk exports (chunks/highlight.ts). */
export interface HighlightChunk {
  /** Highlighted HTML of `code` in `language`, or null for a language it does not know. */
  highlight(code: string, language: string): string | null;
  /** The language names it knows (aliases work too). */
  languages(): string[];
}

/** linkify-it as markdown-it calls it (its `md.linkify`; see linkify.ts). */
export interface LinkifyEngine {
  test(text: string): boolean;
  match(text: string): LinkifyMatch[] | null;
  matchAtStart(text: string): LinkifyMatch | null;
}

/** What the linkify chunk exports (chunks/linkify.ts): linkify-it's class. */
export interface LinkifyChunk {
  LinkifyIt: new () => LinkifyEngine;
}

/** What the glyphs chunk exports (chunks/glyphs.ts; see glyphs.ts). */
export interface GlyphsChunk {
  /** The glyph warmer of the page `doc` (one for every list on it). */
  pageGlyphs(doc: Document): GlyphWarmer;
}

/** What the tools chunk exports (chunks/tools.ts; see toolcard.ts, toolhost.ts). */
export interface ToolsChunk {
  /** a reply's tool parts; its options' `kit` is what it runs of the bundle */
  ToolParts: typeof ToolParts;
}

interface Chunks {
  math: MathChunk;
  highlight: HighlightChunk;
  entities: EntitiesChunk;
  linkify: LinkifyChunk;
  glyphs: GlyphsChunk;
  tools: ToolsChunk;
}

/**
 * Chunks imported as soon as a runtime holds them, asked for or not: the
 * kernel sends the tools chunk only with a reply's first tool part, which the
 * view renders at once, so the import runs while that update is on its way.
 */
export const EAGER: readonly ChunkName[] = ["tools"];

/** Where chunks come from: asked once per chunk; it calls {@link provideChunk} when loaded. */
export interface ChunkHost {
  request(name: ChunkName): void;
}

let host: ChunkHost | null = null;
const loaded = new Map<ChunkName, unknown>();
const asked = new Set<ChunkName>();
const listeners = new Map<ChunkName, Set<() => void>>();

/** Sets where chunks come from; chunks asked for before are asked again there. */
export function setChunkHost(h: ChunkHost | null): void {
  host = h;
  if (h !== null) {
    for (const name of asked) {
      if (!loaded.has(name)) {
        h.request(name);
      }
    }
  }
}

/** The chunk `name` if it is loaded; otherwise asks for it (once) and returns null. */
export function chunk<K extends ChunkName>(name: K): Chunks[K] | null {
  const mod = loaded.get(name);
  if (mod !== undefined) {
    return mod as Chunks[K];
  }
  if (!asked.has(name)) {
    asked.add(name);
    host?.request(name);
  }
  return null;
}

let missCount = 0;
const missed = new Set<ChunkName>();

/**
 * A Markdown renderer showed something as its source because chunk `name` is
 * not loaded yet (it asked for it with {@link chunk}).
 */
export function noteMiss(name: ChunkName): void {
  missCount++;
  missed.add(name);
}

/** The chunks renderers missed that are still not loaded. */
export function missedChunks(): ChunkName[] {
  return [...missed].filter((name) => !loaded.has(name));
}

/**
 * How many times renderers missed a chunk so far: the message list compares
 * it before and after rendering a message, to render that message again once
 * the chunk arrives.
 */
export function misses(): number {
  return missCount;
}

/** Whether chunk `name` is loaded (asks for nothing). */
export function hasChunk(name: ChunkName): boolean {
  return loaded.has(name);
}

/** The chunks loaded so far (tests and the page's own checks read it). */
export function loadedChunks(): ChunkName[] {
  return [...loaded.keys()];
}

/** Hands over a loaded chunk; tells those waiting for it. A chunk is provided once. */
export function provideChunk<K extends ChunkName>(name: K, mod: Chunks[K]): void {
  if (loaded.has(name)) {
    return;
  }
  loaded.set(name, mod);
  for (const cb of [...(listeners.get(name) ?? [])]) {
    try {
      cb();
    } catch (err) {
      console.error(`nbstream: rendering again after the ${name} chunk loaded failed`, err);
    }
  }
}

/** Calls `cb` when chunk `name` is provided; returns the function that stops that. */
export function onChunk(name: ChunkName, cb: () => void): () => void {
  let set = listeners.get(name);
  if (set === undefined) {
    set = new Set();
    listeners.set(name, set);
  }
  set.add(cb);
  return () => set.delete(cb);
}

/** Forgets every chunk, request and listener (tests). */
export function resetChunks(): void {
  loaded.clear();
  asked.clear();
  missed.clear();
  listeners.clear();
  host = null;
  runtimes.clear();
  importing.clear();
}

/** What chunks need of a runtime model (the widget manager's WidgetModel). */
export interface RuntimeModel {
  get(key: string): unknown;
  on(event: string, cb: () => void): void;
  send(content: unknown): void;
}

const runtimes = new Set<RuntimeModel>();
const importing = new Set<ChunkName>();
const LOADS = "__nbstreamChunkLoads";

function chunkCode(runtime: RuntimeModel, name: ChunkName): string | null {
  const all = runtime.get("chunks");
  const code =
    typeof all === "object" && all !== null ? (all as Record<string, unknown>)[name] : null;
  return typeof code === "string" && code !== "" ? code : null;
}

/** Imports chunk `name` from the first runtime that holds it; returns whether one did. */
function importFromRuntimes(name: ChunkName): boolean {
  if (importing.has(name) || loaded.has(name)) {
    return true;
  }
  for (const runtime of runtimes) {
    const code = chunkCode(runtime, name);
    if (code === null) {
      continue;
    }
    importing.add(name);
    // in a task of its own, not in the frame that asked: a chunk's text copied into a
    // Blob and its import begun cost 5-7 ms of a 68 KB chunk (traced: in the frame that
    // showed a long chat's end, its first closed code block asked for highlighting)
    setTimeout(() => {
      const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
      import(/* @vite-ignore */ url)
        .then((mod: Chunks[typeof name]) => {
          const g = globalThis as { [LOADS]?: string[] };
          g[LOADS] ??= [];
          g[LOADS].push(name);
          provideChunk(name, mod);
        })
        .catch((err: unknown) => {
          importing.delete(name);
          console.error(`nbstream: the ${name} chunk could not be loaded`, err);
        })
        .finally(() => URL.revokeObjectURL(url));
    }, 0);
    return true;
  }
  return false;
}

/** The host over the runtime models: a chunk from one that has it, else ask them all. */
const runtimeHost: ChunkHost = {
  request(name) {
    if (importFromRuntimes(name)) {
      return;
    }
    for (const runtime of runtimes) {
      try {
        const msg: ChunkMsg = { kind: "chunk", name };
        runtime.send(msg);
      } catch {
        // a saved page with no kernel: nothing can answer
      }
    }
  },
};

/**
 * A view's runtime model (loader.ts hands it over): chunks asked for come
 * from it, now or when the kernel sends them.
 */
export function addRuntime(runtime: RuntimeModel): void {
  if (runtimes.has(runtime)) {
    return;
  }
  runtimes.add(runtime);
  if (host === null) {
    setChunkHost(runtimeHost);
  }
  const onChange = (): void => {
    for (const name of EAGER) {
      if (!asked.has(name) && chunkCode(runtime, name) !== null) {
        asked.add(name);
      }
    }
    for (const name of asked) {
      if (!loaded.has(name)) {
        importFromRuntimes(name);
      }
    }
  };
  runtime.on("change:chunks", onChange);
  onChange();
}
