/**
 * The anywidget front-end module of every nbstream widget (ChatWidget,
 * StreamView, Compare; the `mode` trait picks the layout): `initialize` and
 * `render`, and `chunks`, through which the loader provides the heavy
 * renderers on demand (chunks.ts). Each rendered view keeps its own
 * conversation buffer (its own sequence numbers), so there is no model-level
 * state to set up; see chat.ts for the wiring of one view.
 *
 * A view renders as shipped unless its widget's `debug` trait (set in Python,
 * `chat.debug = {"markdown": "full"}`; ViewDebug in nbstream/widgets/protocol.py)
 * switches a part back to a previous way, which benchmarks measure side by side
 * with the shipped one. It is read once, when the view renders.
 */
import type { Initialize, Render } from "@anywidget/types";
import { debugMountOptions, mountChat } from "./chat";
import { addRuntime, loadedChunks, type RuntimeModel } from "./chunks";
import { type ChatTraits, toViewDebug } from "./protocol";

/** Nothing is shared between the views of one model. */
const initialize: Initialize<ChatTraits> = () => undefined;

const render: Render<ChatTraits> = ({ model, el }) =>
  mountChat(model, el, debugMountOptions(toViewDebug(model.get("debug"))));

/**
 * The chunks (chunks.ts): the loader (loader.ts) hands over each view's
 * runtime model, which they come from.
 */
const chunks = {
  addRuntime: (runtime: unknown) => addRuntime(runtime as RuntimeModel),
  loaded: loadedChunks,
};

export default { initialize, render, chunks };
