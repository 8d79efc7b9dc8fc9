/**
 * Reads a kernel's per-message state keys from the widget model into the
 * view's conversation buffer (buffer.ts). Pure: the model is only read through
 * `get`, the clock is given.
 *
 * The keys (see `nbstream/widgets/protocol.py`): `last_id` says which ids exist
 * (`m1 .. m<last_id>`, in order); `m<i>` is a message's meta (null once
 * removed); `m<i>.<s>` its s-th delta, immutable; `live` the seq of each
 * streaming message; `removed` counts removals.
 *
 * After any change of the model, {@link KeyReader.sync} looks only at what can
 * have changed: ids above the last one seen, and the messages it still
 * watches (not yet complete: live, or final with deltas still missing), so its
 * cost does not grow with the conversation. For each it takes a new meta (by
 * identity: the model replaces the object on update) and applies the deltas
 * present after the buffer's seq, in order, until one is missing. When `live`
 * or a final meta names a higher seq than the deltas present, a delta was lost:
 * it reports a resync, at most once per message per {@link RESYNC_RETRY_MS}
 * (a resync can be lost too). A change of `removed` makes it look at every
 * message once, for the removed ones. Runs on the browser's main thread only.
 */
import { bytesOf, type ShownPreview } from "./attachments";
import { type Conversation, RESYNC_RETRY_MS } from "./buffer";
import {
  deltaKey,
  FINAL_STATUSES,
  LAST_ID_KEY,
  LIVE_KEY,
  type MessageMeta,
  metaKey,
  REMOVED_KEY,
  type ResyncMsg,
  toDeltaParts,
  toMessageMeta,
} from "./protocol";

/** What the reader needs of the model. */
export interface KeyModel {
  get(key: string): unknown;
}

function count(x: unknown): number {
  return typeof x === "number" && Number.isInteger(x) && x >= 0 ? x : 0;
}

export class KeyReader {
  private lastId = 0;
  private removed = 0;
  /** the meta object last taken per message (the model replaces it on update) */
  private readonly metas = new Map<string, unknown>();
  /** messages that may still change: their meta is absent, live, or deltas are missing */
  private readonly watch = new Set<string>();
  /** when a resync was last reported per message */
  private readonly resyncAt = new Map<string, number>();

  constructor(
    private readonly model: KeyModel,
    private readonly conversation: Conversation,
  ) {}

  /** Whether the model holds per-message keys at all (a kernel of this version). */
  present(): boolean {
    return this.model.get(LAST_ID_KEY) !== undefined;
  }

  /**
   * Takes what changed in the model into the buffer. Returns whether the buffer
   * changed (a frame is due), the number of deltas applied, and the resyncs to
   * send. `now`: ms, monotonic.
   */
  sync(now: number): { changed: boolean; deltas: number; resyncs: ResyncMsg[] } {
    const last = count(this.model.get(LAST_ID_KEY));
    for (let n = this.lastId + 1; n <= last; n++) {
      this.watch.add(metaKey(n));
    }
    this.lastId = Math.max(this.lastId, last);
    const removed = count(this.model.get(REMOVED_KEY));
    if (removed !== this.removed) {
      this.removed = removed;
      for (const id of this.conversation.ids()) {
        this.watch.add(id);
      }
    }
    const rawLive = this.model.get(LIVE_KEY);
    const live =
      typeof rawLive === "object" && rawLive !== null ? (rawLive as Record<string, unknown>) : {};
    for (const id of Object.keys(live)) {
      if (/^m\d+$/.test(id)) {
        this.watch.add(id);
      }
    }
    let changed = false;
    let deltas = 0;
    const resyncs: ResyncMsg[] = [];
    for (const id of [...this.watch]) {
      const raw = this.model.get(id);
      if (raw === undefined) {
        continue; // not arrived yet (or lost: `live` or a later update will tell)
      }
      if (raw === null) {
        if (this.conversation.seqOf(id) >= 0) {
          this.conversation.remove(id);
          changed = true;
        }
        this.forget(id);
        continue;
      }
      let meta: MessageMeta | null = null;
      if (raw !== this.metas.get(id)) {
        meta = toMessageMeta(raw);
        if (meta === null) {
          this.forget(id);
          continue;
        }
        this.withPreviews(meta);
        this.metas.set(id, raw);
        this.conversation.applyMeta(id, meta);
        changed = true;
      }
      meta ??= toMessageMeta(raw) as MessageMeta;
      const applied = this.pull(id);
      deltas += applied;
      changed = changed || applied > 0;
      const have = this.conversation.seqOf(id);
      const target = Math.max(meta.seq, count(live[id]));
      if (have < target) {
        const at = this.resyncAt.get(id);
        if (at === undefined || now - at >= RESYNC_RETRY_MS) {
          this.resyncAt.set(id, now);
          resyncs.push({ kind: "resync", id, have });
        }
      } else if (FINAL_STATUSES.has(meta.status)) {
        this.watch.delete(id); // complete: nothing of it changes any more
        this.resyncAt.delete(id);
      }
    }
    return { changed, deltas, resyncs };
  }

  /** Applies the deltas of `id` present after the buffer's seq, in order; returns how many. */
  private pull(id: string): number {
    let applied = 0;
    let seq = this.conversation.seqOf(id) + 1;
    let parts = seq > 0 ? toDeltaParts(this.model.get(deltaKey(id, seq))) : null;
    while (parts !== null && this.conversation.applyParts(id, seq, parts)) {
      applied++;
      seq++;
      parts = toDeltaParts(this.model.get(deltaKey(id, seq)));
    }
    return applied;
  }

  /** Fills in the bytes of a user message's attachment previews (keys `m<i>.a<k>`). */
  private withPreviews(meta: MessageMeta): void {
    for (const a of meta.attachments ?? []) {
      const preview: ShownPreview | undefined = a.preview; // a fresh copy (protocol.ts)
      if (preview !== undefined) {
        const data = bytesOf(this.model.get(preview.key));
        if (data !== null) {
          preview.data = data;
        }
      }
    }
  }

  private forget(id: string): void {
    this.watch.delete(id);
    this.metas.delete(id);
    this.resyncAt.delete(id);
  }
}
