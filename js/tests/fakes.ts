// Test doubles: an anywidget model that records what the view sends, and an
// animation-frame scheduler driven by hand.
import type { AnyModel } from "@anywidget/types";
import type { FrameScheduler } from "../src/frame";
import type { ChatTraits, MessageState, ViewMsg } from "../src/protocol";

// Callbacks take what anywidget passes (content, buffers) or nothing.
type Handler = (...args: never[]) => void;

export class FakeModel implements AnyModel<ChatTraits> {
  readonly sent: ViewMsg[] = [];
  /** the binary buffers of each message sent (attachments), in the order of `sent` */
  readonly sentBuffers: unknown[][] = [];
  private readonly traits: Partial<ChatTraits>;
  private readonly handlers = new Map<string, Set<Handler>>();
  widget_manager = {
    get_model: () => Promise.reject(new Error("not in a widget manager")),
  };

  constructor(traits: Partial<ChatTraits> = {}) {
    this.traits = { ...traits };
  }

  get<K extends keyof ChatTraits>(key: K): ChatTraits[K] {
    return this.traits[key] as ChatTraits[K];
  }

  set<K extends keyof ChatTraits>(key: K, value: ChatTraits[K]): void {
    this.traits[key] = value;
    this.emit(`change:${key}`);
    this.emit("change");
  }

  /**
   * An ipywidgets `update` message from the kernel, as Backbone applies it:
   * every key set first, then one `change:<key>` per key that changed, then
   * one `change`. A value equal to the one held is no change (Backbone compares).
   */
  update(state: Record<string, unknown>): void {
    const loose = this.traits as Record<string, unknown>;
    const changed: string[] = [];
    for (const [k, v] of Object.entries(state)) {
      if (JSON.stringify(loose[k]) !== JSON.stringify(v)) {
        changed.push(k);
      }
      loose[k] = v;
    }
    for (const k of changed) {
      this.emit(`change:${k}`);
    }
    if (changed.length > 0) {
      this.emit("change");
    }
  }

  on(eventName: string, callback: Handler): void {
    let set = this.handlers.get(eventName);
    if (set === undefined) {
      set = new Set();
      this.handlers.set(eventName, set);
    }
    set.add(callback);
  }

  off(eventName?: string | null, callback?: Handler | null): void {
    if (eventName == null) {
      this.handlers.clear();
    } else if (callback == null) {
      this.handlers.delete(eventName);
    } else {
      this.handlers.get(eventName)?.delete(callback);
    }
  }

  save_changes(): void {}

  send(content: unknown, _callbacks?: unknown, buffers?: unknown[]): void {
    this.sent.push(content as ViewMsg);
    this.sentBuffers.push(buffers ?? []);
  }

  /** A custom message from the kernel. */
  custom(content: unknown): void {
    this.emit("msg:custom", content, []);
  }

  /** A delta from the kernel. */
  delta(id: string, seq: number, text: string): void {
    this.custom({ kind: "delta", id, seq, text });
  }

  listenerCount(): number {
    let n = 0;
    for (const set of this.handlers.values()) {
      n += set.size;
    }
    return n;
  }

  /** What the view sent of one kind, and forgets everything sent. */
  drain<K extends ViewMsg["kind"]>(kind: K): Extract<ViewMsg, { kind: K }>[] {
    const out = this.sent.filter((m): m is Extract<ViewMsg, { kind: K }> => m.kind === kind);
    this.sent.length = 0;
    this.sentBuffers.length = 0;
    return out;
  }

  private emit(eventName: string, ...args: unknown[]): void {
    for (const h of [...(this.handlers.get(eventName) ?? [])]) {
      (h as (...a: unknown[]) => void)(...args);
    }
  }
}

export class FakeFrames implements FrameScheduler {
  private next = 1;
  private readonly callbacks = new Map<number, () => void>();
  requests = 0;
  cancels = 0;

  request(callback: () => void): number {
    this.requests++;
    const handle = this.next++;
    this.callbacks.set(handle, callback);
    return handle;
  }

  cancel(handle: number): void {
    this.cancels++;
    this.callbacks.delete(handle);
  }

  get pending(): number {
    return this.callbacks.size;
  }

  /** Runs one animation frame: the callbacks requested before it. */
  frame(): void {
    const due = [...this.callbacks.values()];
    this.callbacks.clear();
    for (const cb of due) {
      cb();
    }
  }
}

/** A clock that advances by `step` ms per reading. */
export function steppingClock(step = 1): () => number {
  let t = 0;
  return () => {
    t += step;
    return t;
  };
}

export function message(id: string, over: Partial<MessageState> = {}): MessageState {
  return {
    id,
    role: "assistant",
    text: "",
    reasoning: "",
    seq: 0,
    status: "running",
    error: null,
    detail: null,
    stats: {},
    ...over,
  };
}

/** A kernel's per-message state of a question (the keys the view reads). */
export const userState = (text: string) => ({
  role: "user",
  seq: 0,
  status: "done",
  stats: {},
  text,
});

/** A kernel's per-message state of a reply, with more keys in `extra`. */
export const replyState = (status: string, seq: number, extra: Record<string, unknown> = {}) => ({
  role: "assistant",
  seq,
  status,
  stats: {},
  ...extra,
});

/** A tool call of a reply's parts (`get_weather`, round 0), with more keys in `extra`. */
export const toolCall = (state: string, extra: Record<string, unknown> = {}) => ({
  id: "call_1",
  name: "get_weather",
  state,
  round: 0,
  ...extra,
});
