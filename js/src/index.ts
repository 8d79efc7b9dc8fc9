/**
 * The anywidget front-end module of every nbstream widget (ChatWidget,
 * StreamView, Compare; the `mode` trait picks the layout): `initialize` and
 * `render` only. Each rendered view keeps its own conversation buffer (its own
 * sequence numbers), so there is no model-level state to set up; see chat.ts
 * for the wiring of one view.
 */
import type { Initialize, Render } from "@anywidget/types";
import { mountChat } from "./chat";
import type { ChatTraits } from "./protocol";

/** Nothing is shared between the views of one model. */
const initialize: Initialize<ChatTraits> = () => undefined;

/**
 * Benchmarks compare with the naive way by setting
 * `window.__nbstreamOptions = { markdown: "full" }` before a view renders.
 */
function markdownMode(el: HTMLElement): "incremental" | "full" {
  const opts = (el.ownerDocument.defaultView as { __nbstreamOptions?: { markdown?: unknown } })
    ?.__nbstreamOptions;
  return opts?.markdown === "full" ? "full" : "incremental";
}

const render: Render<ChatTraits> = ({ model, el }) =>
  mountChat(model, el, { markdown: markdownMode(el) });

export default { initialize, render };
