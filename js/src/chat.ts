/**
 * One rendered widget, whatever its mode: wires a widget model to a
 * conversation buffer, a frame loop and a view, and owns the listeners between
 * them. Every mode (chat, stream, compare) goes through this one pipeline;
 * only the view differs (view.ts for chat and stream, compare.ts for compare),
 * and each view renders its messages with messages.ts.
 *
 * Data flow: after any change of the model, the per-message state keys are
 * read into the buffer (keys.ts into buffer.ts), which says whether a frame is
 * due; the reader says whether a resync must be sent. (An older kernel's
 * `conversation` trait and delta messages go into the same buffer.) The frame
 * loop (frame.ts) renders the buffer's changes into the view at most once per
 * animation frame, when the page's one loop (scheduler.ts) gives this view its
 * turn, and acks what it rendered. User actions from the view go to
 * the kernel as `send` (with attachments: their bytes as the message's
 * buffers), `stop`, `regenerate`, `clear`, `continue` and `system_prompt`
 * messages; a `refused` message gives a Send's attachments back.
 *
 * The `mode` trait is read once, when the view renders.
 * Everything here runs on the browser's main thread, in model callbacks and
 * animation frames; nothing blocks.
 */
import type { AnyModel } from "@anywidget/types";
import { toPolicy } from "./attachments";
import { visibleBranch } from "./branches";
import { type Changes, Conversation } from "./buffer";
import { CompareView, paneOf } from "./compare";
import { Connection, type KernelLike, type SignalLike } from "./connection";
import {
  browserScheduler,
  type Counters,
  FrameLoop,
  type FrameScheduler,
  newCounters,
} from "./frame";
import { browserIdle, type IdleScheduler } from "./highlight";
import { type KeyModel, KeyReader } from "./keys";
import { ATTACH_FIRST, canDefer, hasUntilFound } from "./lazy";
import {
  type ChatTraits,
  CURRENT_KEY,
  FINAL_STATUSES,
  isDeltaMsg,
  isRefusedMsg,
  isWelcomeMsg,
  STATE_TRAIT,
  toMode,
  toPanes,
  type ViewDebug,
  type ViewMsg,
} from "./protocol";
import { loopScheduler, type PageFrames, pageFrames } from "./scheduler";
import type { SizedMode } from "./sized";
import {
  ChatView,
  type MarkdownMode,
  type Summary,
  type ViewActions,
  type ViewOptions,
  type WidgetView,
} from "./view";

export interface MountOptions {
  /**
   * Where frames come from: the page's one loop (scheduler.ts; the default,
   * unless `scheduler` is given), another loop (tests), or "per-view": this
   * view's own animation frames (the previous way, for benchmarks).
   */
  frames?: PageFrames | "per-view";
  /** this view's own frame scheduler (per-view frames); the browser's `requestAnimationFrame` by default */
  scheduler?: FrameScheduler;
  /** monotonic clock in ms; `performance.now` by default */
  now?: () => number;
  /** idle-time scheduler for code highlighting; the browser's by default, null: none */
  idle?: IdleScheduler | null;
  /** how assistant messages render ("full": the naive way, for benchmarks) */
  markdown?: MarkdownMode;
  /**
   * render finished messages as they come near (lazy.ts); by default where
   * the browser can skip a placeholder's layout; false: all at once
   */
  lazy?: boolean;
  /** least ms between two rounds of acks (frame.ts ACK_GAP_MS by default; 0: every frame) */
  ackGapMs?: number;
  /** how laid-out blocks skip layout (sized.ts; "batched" by default) */
  sized?: SizedMode;
}

/**
 * What a widget's `debug` trait asks of its views (nbstream/widgets/protocol.py
 * ViewDebug: benchmarks measure the previous ways with it), as mount options;
 * nothing for the switches left as shipped.
 */
export function debugMountOptions(debug: ViewDebug): MountOptions {
  const out: MountOptions = {};
  if (debug.markdown !== undefined) {
    out.markdown = debug.markdown;
  }
  if (debug.acks === "every-frame") {
    out.ackGapMs = 0;
  } else if (debug.ack_gap_ms !== undefined) {
    out.ackGapMs = debug.ack_gap_ms;
  }
  if (debug.sized !== undefined) {
    out.sized = debug.sized;
  }
  if (debug.lazy === "off") {
    out.lazy = false;
  }
  if (debug.frames === "per-view") {
    out.frames = "per-view";
  }
  return out;
}

/** The root element, with the counters that tests and benchmarks read. */
export type ChatRoot = HTMLDivElement & { __nbstream: Counters };

function text(x: unknown): string {
  return typeof x === "string" ? x : "";
}

/** Renders the widget `model` into `el` in its mode; returns the cleanup function. */
export function mountChat(
  model: AnyModel<ChatTraits>,
  el: HTMLElement,
  options: MountOptions = {},
): () => void {
  const doc = el.ownerDocument;
  const win = doc.defaultView ?? window;
  const scheduler = options.scheduler ?? browserScheduler(win);
  // an injected scheduler (tests) means frames of this view's own, unless a loop is given too
  const page =
    options.frames === "per-view"
      ? null
      : (options.frames ?? (options.scheduler === undefined ? pageFrames(win) : null));
  const now = options.now ?? (() => performance.now());
  const idle = options.idle === undefined ? browserIdle(win) : options.idle;
  const counters = newCounters();
  /** this view's id in its hello and bye (the kernel counts the views on the page) */
  const viewId = `v${Math.random().toString(36).slice(2, 12)}${Date.now().toString(36)}`;
  const conversation = new Conversation();
  /** a message to the kernel (a Send's attachments: their bytes as its buffers, in order) */
  const send = (msg: ViewMsg, buffers?: ArrayBuffer[]): void =>
    buffers === undefined ? model.send(msg) : model.send(msg, undefined, buffers);
  let saidBye = false;
  /** tells the kernel this view left (once: its notebook closing, or its removal) */
  const sayBye = (): void => {
    if (!saidBye) {
      saidBye = true;
      send({ kind: "bye", view: viewId });
    }
  };

  const mode = toMode(model.get("mode"));
  /** whether a reply (of pane `pane`, or of any) is queued, loading or running */
  const live = (pane: number | null): boolean =>
    conversation
      .list()
      .some(
        (e) =>
          e.role !== "user" &&
          !FINAL_STATUSES.has(e.status) &&
          (pane === null || paneOf(e) === pane),
      );
  const actions: ViewActions = {
    send: (prompt, attached) => {
      if (attached === undefined) {
        send({ kind: "send", text: prompt });
        return;
      }
      // the attachments' bytes travel as the message's binary buffers (#21)
      send(
        { kind: "send", text: prompt, attachments: attached.attachments, draft: attached.draft },
        attached.buffers,
      );
    },
    stop: () => {
      // One meaning of Stop (button, Escape, chat.stop(), interrupt): the kernel stops
      // the running reply and cancels this widget's queued ones, every pane in a Compare.
      if (!live(null)) {
        return false;
      }
      send({ kind: "stop" });
      return true;
    },
    stopPane: (pane) => {
      if (!live(pane)) {
        return false;
      }
      send({ kind: "stop", pane });
      return true;
    },
    regenerate: () => send({ kind: "regenerate" }),
    clear: () => send({ kind: "clear" }),
    continueReply: (id) => send({ kind: "continue", id }),
    switchTo: (id) => send({ kind: "switch", id }),
    edit: (id, prompt) => send({ kind: "edit", id, text: prompt }),
    setSystemPrompt: (text) => send({ kind: "system_prompt", text }),
    approveTool: (id, call, decision) => send({ kind: "tool_approval", id, call, decision }),
  };
  const lazy = options.lazy ?? canDefer(win);
  /** the view's root, once it is built (the lazy frames' place in the page loop) */
  let rootEl: Element | null = null;
  // a long chat's own frames (lazy.ts: its history entering the DOM, the placeholders a
  // reader scrolls to) are the page loop's too: one callback a frame for the page, and
  // their turn after what streams ("later": spaced while several views stream, seldom
  // while out of sight)
  const lazyFrames = lazy && page !== null ? loopScheduler(page, () => rootEl, "later") : null;
  const viewOptions: ViewOptions = {
    idle,
    lazy: !lazy
      ? null
      : {
          scheduler: lazyFrames ?? scheduler,
          untilFound: hasUntilFound(win),
          now,
          timer: {
            set: (cb, ms) => win.setTimeout(cb, ms) as unknown as number,
            clear: (h) => win.clearTimeout(h),
          },
        },
    markdown: options.markdown ?? "incremental",
    sized: options.sized ?? "batched",
    onChars: (delta) => {
      counters.chars += delta;
    },
    // a chunk a message missed arrived: rendered whole in the next frame (buffer.ts)
    rerender: (ids) => {
      for (const id of ids) {
        conversation.rerender(id);
      }
      loop.request();
    },
  };
  const view: WidgetView =
    mode === "compare"
      ? new CompareView(doc, actions, viewOptions, (id) => conversation.get(id))
      : new ChatView(doc, actions, viewOptions, mode, (id) => conversation.get(id));
  (view.root as ChatRoot).__nbstream = counters;
  rootEl = view.root;

  const summary = (): Summary => {
    const all = conversation.list();
    const activePanes = new Set<number>();
    let active = false;
    const connected = connection.state !== "lost"; // nothing runs without a kernel
    for (const e of all) {
      if (connected && e.role !== "user" && !FINAL_STATUSES.has(e.status)) {
        active = true;
        const pane = paneOf(e);
        if (pane !== null) {
          activePanes.add(pane);
        }
      }
    }
    return {
      active,
      activePanes,
      hasReply: all.some((e) => e.role === "assistant"),
      empty: all.length === 0,
    };
  };
  /** the last message of the branch shown (the kernel's `current` key; null: the newest) */
  let current: string | null = null;
  /** `current` changed since the last frame: the branch shown must be computed again */
  let branchDirty = false;
  const readCurrent = (): boolean => {
    const raw = model.get(CURRENT_KEY);
    const value = typeof raw === "string" ? raw : null;
    if (value === current) {
      return false;
    }
    current = value;
    branchDirty = true;
    return true;
  };
  /** a history waits for the first frame, which announces none of its statuses */
  let quiet = false;
  /**
   * no frame ran since the view was made: the page's next frame styles, lays
   * out and paints it for the first time (the chat's chrome, and JupyterLab's
   * output around it), so a history waiting for it is reconciled in the frame
   * after, not on top of that (see the end of mountChat)
   */
  let unpainted = lazy;
  const render = (t: number, announce = !quiet) => {
    let changes: Changes | null = conversation.take();
    if (changes === null && !branchDirty) {
      return null;
    }
    changes ??= { order: null, messages: [], acks: [] };
    if (mode === "chat" && (changes.order !== null || branchDirty)) {
      // a chat shows one branch of its conversation (branches.ts)
      const branch = visibleBranch(conversation.list(), current);
      view.setSiblings(branch.siblings);
      changes = { ...changes, order: branch.order };
    }
    branchDirty = false;
    quiet = false;
    view.paint(changes, summary(), t, announce);
    connection.setActive(live(null));
    return changes.acks;
  };
  const loop = new FrameLoop({
    scheduler,
    page,
    root: view.root,
    // a stream's end shows at once; a new message, a status or another branch soon;
    // more text of a stream when the page loop's budget gives it a turn
    priority: () => {
      const kind = conversation.pendingKind();
      return kind === "ended" ? "now" : kind === "changed" || branchDirty ? "soon" : "later";
    },
    now,
    render: (t) => {
      if (unpainted) {
        unpainted = false;
        if (conversation.hasChanges() && conversation.list().length > ATTACH_FIRST) {
          loop.request(); // (the next frame)
          return null;
        }
      }
      return render(t);
    },
    settle: () => view.settle(),
    sight: (inSight) => view.setInSight(inSight),
    ack: send,
    counters,
    ...(options.ackGapMs === undefined ? {} : { ackGapMs: options.ackGapMs }),
  });

  const keys = new KeyReader(model as unknown as KeyModel, conversation);
  /** Any change of the model: read the per-message keys (cheap: only what can have changed). */
  const onChange = (): void => {
    connection.heard(); // (only a kernel changes the model)
    if (!keys.present()) {
      return;
    }
    if (readCurrent()) {
      loop.request();
    }
    const result = keys.sync(now());
    counters.deltas += result.deltas;
    for (const r of result.resyncs) {
      counters.resyncs++;
      send(r);
    }
    if (result.changed) {
      loop.request();
    }
  };
  const onState = (): void => {
    if (conversation.applyState(model.get(STATE_TRAIT))) {
      loop.request();
    }
  };
  const onCustom = (content: unknown): void => {
    if (isWelcomeMsg(content)) {
      connection.heard();
      return;
    }
    if (isRefusedMsg(content)) {
      view.refused(content.draft, content.reason);
      return;
    }
    if (!isDeltaMsg(content)) {
      return;
    }
    counters.deltas++;
    const result = conversation.applyDelta(content, now());
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
  const onPanes = (): void => view.setPanes(toPanes(model.get("panes")));
  const onSystem = (): void => {
    const prompt = model.get("system_prompt");
    view.setSystemPrompt(typeof prompt === "string" ? prompt : null);
  };
  const onPolicy = (): void => view.setAttachmentPolicy(toPolicy(model.get("attachment_policy")));

  const wm = model.widget_manager as unknown as {
    kernel?: KernelLike | null;
    /** JupyterLab's notebook widget manager: the notebook's document context */
    context?: { sessionContext?: { disposed?: SignalLike<undefined> } | null } | null;
    get_model?: (id: string) => Promise<{ comm_live?: unknown }> | undefined;
  };
  /** the jupyter-widgets model behind the proxy anywidget hands us, once found (its
   * `comm_live` says whether a kernel knows this widget); null: none, or not yet */
  let backing: { comm_live?: unknown } | null = null;
  const ref = model.get("_model_ref");
  if (typeof ref === "string" && ref !== "" && typeof wm.get_model === "function") {
    Promise.resolve(wm.get_model(ref))
      .then((m) => {
        backing = m ?? null;
        connection.linkChanged();
      })
      .catch(() => undefined); // a front end that does not know it: messages decide
  }
  const connection: Connection = new Connection({
    hello: () => send({ kind: "hello", view: viewId }),
    kernel: wm.kernel ?? null,
    session: wm.context?.sessionContext ?? null,
    goodbye: (leaving) => {
      if (leaving === "view") {
        sayBye();
      } else if (!saidBye) {
        send({ kind: "bye", view: viewId, leaving }); // (a reload says hello again)
      }
    },
    page: win,
    commLive: () =>
      backing !== null && typeof backing.comm_live === "boolean" ? backing.comm_live : null,
    now,
    onChange: (state, reason) => {
      const t = now();
      view.setConnection(state, reason, t);
      view.paint({ order: null, messages: [], acks: [] }, summary(), t, false);
      if (!quiet) {
        // outside a frame: paint writes, settle reads layout after it (a history
        // waiting for its first frame settles there: no layout forced in this task)
        view.settle();
      }
    },
  });
  const onCommLive = (): void => connection.linkChanged();

  model.on("change", onChange);
  model.on("comm_live_update", onCommLive);
  model.on(`change:${STATE_TRAIT}`, onState);
  model.on("msg:custom", onCustom);
  model.on("change:title", onTitle);
  model.on("change:source_label", onSource);
  model.on("change:placeholder", onPlaceholder);
  model.on("change:panes", onPanes);
  model.on("change:system_prompt", onSystem);
  model.on("change:attachment_policy", onPolicy);

  onTitle();
  onSource();
  onPlaceholder();
  onPanes();
  onSystem();
  onPolicy();
  el.appendChild(view.root);
  // The saved or current conversation is shown at once, not a frame later,
  // and without announcing its statuses. A long history is built in the first
  // frame instead: this task already evaluated the module and built the view
  // (26-31 ms traced; with a 1,000-message list built and laid out in it too,
  // 72-90 ms), and its end shows in frames of its own anyway (lazy.ts holdEnd),
  // so nothing shows later for it. A view made empty (a history given with
  // `messages=` or `load` comes in the kernel's updates after it) settles with no
  // layout read (messages.ts settle): that read laid the page out here, 6-7 ms
  // of style and layout in traces of this task.
  if (keys.present()) {
    readCurrent();
    for (const r of keys.sync(now()).resyncs) {
      counters.resyncs++;
      send(r);
    }
  } else {
    conversation.applyState(model.get(STATE_TRAIT));
  }
  if (lazy && conversation.list().length > ATTACH_FIRST) {
    quiet = true;
  } else {
    render(now(), false);
    view.settle();
  }
  if (lazy) {
    // the first frame after this task is the page's first paint of the view: it
    // builds no history (one that comes before it, in the kernel's updates or saved
    // with the notebook, is reconciled in the next); 27 ms at load ~2 and 68 ms at
    // load ~5 (traced) when both were one frame
    loop.request();
  }
  connection.hello();

  return () => {
    // removed from the page (a cleared output, a cell run again): the kernel stops what
    // no view watches any more, unless another view of the widget remains or comes
    // back. (A closed notebook said it already, when its session closed: connection.ts.)
    try {
      sayBye();
    } catch {
      // no connection left to say it on
    }
    model.off("change", onChange);
    model.off("comm_live_update", onCommLive);
    connection.dispose();
    model.off(`change:${STATE_TRAIT}`, onState);
    model.off("msg:custom", onCustom);
    model.off("change:title", onTitle);
    model.off("change:source_label", onSource);
    model.off("change:placeholder", onPlaceholder);
    model.off("change:panes", onPanes);
    model.off("change:system_prompt", onSystem);
    model.off("change:attachment_policy", onPolicy);
    loop.dispose();
    lazyFrames?.dispose();
    view.dispose();
    view.root.remove();
  };
}
