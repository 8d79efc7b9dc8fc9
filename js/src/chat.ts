/**
 * One rendered chat: wires a widget model to a conversation buffer, a frame
 * loop and a view, and owns the listeners between them.
 *
 * Data flow: the `conversation` trait and delta messages go into the buffer
 * (buffer.ts), which says whether a frame is due or a resync must be sent; the
 * frame loop (frame.ts) renders the buffer's changes into the view (view.ts)
 * once per animation frame and acks what it rendered. User actions from the
 * view go to the kernel as `send`, `stop`, `regenerate` and `clear` messages.
 *
 * Everything here runs on the browser's main thread, in model callbacks and
 * animation frames; nothing blocks.
 */
import type { AnyModel } from "@anywidget/types";
import { Conversation } from "./buffer";
import {
  browserScheduler,
  type Counters,
  FrameLoop,
  type FrameScheduler,
  newCounters,
} from "./frame";
import { browserIdle, type IdleScheduler } from "./highlight";
import { type ChatTraits, isDeltaMsg, STATE_TRAIT, type ViewMsg } from "./protocol";
import { ChatView, type MarkdownMode, type Summary } from "./view";

export interface MountOptions {
  /** frame scheduler; the browser's `requestAnimationFrame` by default */
  scheduler?: FrameScheduler;
  /** monotonic clock in ms; `performance.now` by default */
  now?: () => number;
  /** idle-time scheduler for code highlighting; the browser's by default, null: none */
  idle?: IdleScheduler | null;
  /** how assistant messages render ("full": the naive way, for benchmarks) */
  markdown?: MarkdownMode;
}

/** The root element, with the counters that tests and benchmarks read. */
export type ChatRoot = HTMLDivElement & { __nbstream: Counters };

function text(x: unknown): string {
  return typeof x === "string" ? x : "";
}

/** Renders a chat for `model` into `el`; returns the cleanup function. */
export function mountChat(
  model: AnyModel<ChatTraits>,
  el: HTMLElement,
  options: MountOptions = {},
): () => void {
  const doc = el.ownerDocument;
  const win = doc.defaultView ?? window;
  const scheduler = options.scheduler ?? browserScheduler(win);
  const now = options.now ?? (() => performance.now());
  const idle = options.idle === undefined ? browserIdle(win) : options.idle;
  const counters = newCounters();
  const conversation = new Conversation();
  const send = (msg: ViewMsg): void => model.send(msg);

  const view = new ChatView(
    doc,
    {
      send: (prompt) => send({ kind: "send", text: prompt }),
      stop: () => {
        const active = conversation.firstActive();
        if (active === undefined) {
          return false;
        }
        send({ kind: "stop", id: active.id });
        return true;
      },
      regenerate: () => send({ kind: "regenerate" }),
      clear: () => send({ kind: "clear" }),
    },
    {
      idle,
      markdown: options.markdown ?? "incremental",
      onChars: (delta) => {
        counters.chars += delta;
      },
    },
  );
  (view.root as ChatRoot).__nbstream = counters;

  const summary = (): Summary => {
    const all = conversation.list();
    return {
      active: conversation.firstActive() !== undefined,
      hasReply: all.some((e) => e.role === "assistant"),
      empty: all.length === 0,
    };
  };
  const render = (t: number, announce = true) => {
    const changes = conversation.take();
    if (changes === null) {
      return null;
    }
    view.paint(changes, summary(), t, announce);
    return changes.acks;
  };
  const loop = new FrameLoop({ scheduler, now, render: (t) => render(t), ack: send, counters });

  const onState = (): void => {
    if (conversation.applyState(model.get(STATE_TRAIT))) {
      loop.request();
    }
  };
  const onCustom = (content: unknown): void => {
    if (!isDeltaMsg(content)) {
      return;
    }
    counters.deltas++;
    const result = conversation.applyDelta(content);
    if (result.resync !== null) {
      counters.resyncs++;
      send(result.resync);
    }
    if (result.outcome === "applied") {
      loop.request();
    }
  };
  const onTitle = (): void => view.setTitle(text(model.get("title")));
  const onSource = (): void => view.setSourceLabel(text(model.get("source_label")));
  const onPlaceholder = (): void => view.setPlaceholder(text(model.get("placeholder")));

  model.on(`change:${STATE_TRAIT}`, onState);
  model.on("msg:custom", onCustom);
  model.on("change:title", onTitle);
  model.on("change:source_label", onSource);
  model.on("change:placeholder", onPlaceholder);

  onTitle();
  onSource();
  onPlaceholder();
  el.appendChild(view.root);
  // The saved or current conversation is shown at once, not a frame later,
  // and without announcing its statuses.
  conversation.applyState(model.get(STATE_TRAIT));
  render(now(), false);
  send({ kind: "hello" });

  return () => {
    model.off(`change:${STATE_TRAIT}`, onState);
    model.off("msg:custom", onCustom);
    model.off("change:title", onTitle);
    model.off("change:source_label", onSource);
    model.off("change:placeholder", onPlaceholder);
    loop.dispose();
    view.dispose();
    view.root.remove();
  };
}
