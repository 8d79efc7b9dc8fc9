/**
 * The anywidget front-end module of every nbstream widget (ChatWidget,
 * StreamView, Compare; the `mode` trait picks the layout): `initialize` and
 * `render` only. Each rendered view keeps its own conversation buffer (its own
 * sequence numbers), so there is no model-level state to set up; see chat.ts
 * for the wiring of one view.
 */
import type { Initialize, Render } from "@anywidget/types";
import { mountChat } from "./chat";
import { setDefaultAckGap } from "./frame";
import type { ChatTraits } from "./protocol";
import { setSizedBatch } from "./sized";

/** Nothing is shared between the views of one model. */
const initialize: Initialize<ChatTraits> = () => undefined;

interface BenchOptions {
  markdown?: unknown;
  acks?: unknown;
  sized?: unknown;
  /** least ms between a view's ack rounds (an experiment; the default is ACK_GAP_MS) */
  ackGapMs?: unknown;
  /** "per-view": each view requests its own animation frames (the previous way; scheduler.ts) */
  frames?: unknown;
}

/**
 * Benchmarks compare with the previous ways by setting
 * `window.__nbstreamOptions = { markdown: "full", acks: "every-frame", sized: "at-once" }`
 * before a view renders; `ackGapMs: 500` tries another gap between ack rounds;
 * `frames: "per-view"` gives each view its own animation-frame loop instead of
 * the page's one loop with its budget (scheduler.ts).
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
    ...(opts?.frames === "per-view" ? { frames: "per-view" as const } : {}),
  });
};

export default { initialize, render };
