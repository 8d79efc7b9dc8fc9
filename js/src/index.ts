/**
 * The anywidget front-end module of every nbstream widget (ChatWidget,
 * StreamView, Compare; the `mode` trait picks the layout): `initialize` and
 * `render`, and `chunks`, through which the loader provides the heavy
 * renderers on demand (chunks.ts). Each rendered view keeps its own conversation buffer (its own
 * sequence numbers), so there is no model-level state to set up; see chat.ts
 * for the wiring of one view.
 */
import type { Initialize, Render } from "@anywidget/types";
import { mountChat } from "./chat";
import { addRuntime, loadedChunks, type RuntimeModel } from "./chunks";
import { setDefaultAckGap } from "./frame";
import type { ChatTraits } from "./protocol";
import { setSizedBatch } from "./sized";

/** Nothing is shared between the views of one model. */
const initialize: Initialize<ChatTraits> = () => undefined;

interface BenchOptions {
  markdown?: unknown;
  acks?: unknown;
  sized?: unknown;
  /** "off": every answer renders at once (the previous way) */
  lazy?: unknown;
  /** least ms between a view's ack rounds (an experiment; the default is ACK_GAP_MS) */
  ackGapMs?: unknown;
}

/**
 * Benchmarks compare with the previous ways by setting
 * `window.__nbstreamOptions = { markdown: "full", acks: "every-frame", sized: "at-once", lazy: "off" }`
 * before a view renders; `ackGapMs: 500` tries another gap between ack rounds.
 */
function benchOptions(el: HTMLElement): BenchOptions | undefined {
  return (el.ownerDocument.defaultView as { __nbstreamOptions?: BenchOptions })?.__nbstreamOptions;
}

const render: Render<ChatTraits> = ({ model, el }) => {
  const opts = benchOptions(el);
  if (opts?.acks === "every-frame") {
    setDefaultAckGap(0);
  } else if (typeof opts?.ackGapMs === "number") {
    setDefaultAckGap(opts.ackGapMs);
  }
  if (opts?.sized === "at-once") {
    setSizedBatch(0);
  }
  return mountChat(model, el, {
    markdown: opts?.markdown === "full" ? "full" : "incremental",
    ...(opts?.lazy === "off" ? { lazy: false } : {}),
  });
};

/**
 * The chunks (chunks.ts): the loader (loader.ts) hands over each view's
 * runtime model, which they come from.
 */
const chunks = {
  addRuntime: (runtime: unknown) => addRuntime(runtime as RuntimeModel),
  loaded: loadedChunks,
};

export default { initialize, render, chunks };
