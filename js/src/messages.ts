/**
 * One scrolling list of messages: owns a `div.nbs-scroll` and everything in it.
 * Every layout (chat, stream, each pane of compare) is made of these, so a
 * message renders the same way everywhere: one copy of the rendering.
 *
 *   div.nbs-scroll
 *     div.nbs-messages          the scrollable list; follows new text unless scrolled up
 *       div.nbs-message[data-id][data-role][data-status][data-pane][data-finish]
 *         span.nbs-who          who speaks, for screen readers only
 *         div.nbs-attachments   a question's attachments (attachments.ts), if any
 *         details.nbs-reasoning the model's thinking (reasoning.ts), only in a reply
 *                               that has some: a reply without looks as before
 *         div.nbs-text          the text: Markdown (.nbs-md, see incremental.ts) for
 *                               the assistant, plain Text nodes (text.ts) otherwise
 *         div.nbs-footer        span.nbs-branch (a message with alternatives: button
 *                               .nbs-branch-prev, span.nbs-branch-pos "2 / 3",
 *                               button.nbs-branch-next; each button's data-target is
 *                               the sibling it shows), span.nbs-status (a human
 *                               label), button.nbs-copy-msg, button.nbs-edit (a
 *                               question, where the widget can edit it),
 *                               button.nbs-continue (a reply cut at the token limit,
 *                               where the widget can continue it)
 *         details.nbs-detail    the traceback of an error, on demand
 *     button.nbs-jump           "Jump to latest", while the list does not follow (scroll.ts)
 *
 * Messages change only in {@link MessageList.paint}, which the owning view
 * calls from the frame loop's render with what changed. Model output reaches
 * the DOM only as sanitized Markdown (incremental.ts, sanitize.ts) or as Text
 * nodes. Clicks on copy buttons and image placeholders are handled by the
 * owning view's one delegated listener, which reads a message's text with
 * {@link MessageList.entry}. Runs on the browser's main thread only.
 */
import { MessageAttachments } from "./attachments";
import type { Siblings } from "./branches";
import type { Entry, MessageChange } from "./buffer";
import { type ChunkName, chunk, missedChunks, noteMiss, onChunk } from "./chunks";
import { browserScheduler, type FrameScheduler, type Timer } from "./frame";
import type { Highlighter } from "./highlight";
import {
  FullSink,
  MarkdownSink,
  type Sink,
  undoneNow,
  undoneSince,
  type WarmPart,
  warmUp,
} from "./incremental";
import { ATTACH_CHUNK, ATTACH_FIRST, LazyRenderer } from "./lazy";
import { FINAL_STATUSES, type ToolRun } from "./protocol";
import { ReasoningBlock } from "./reasoning";
import { ScrollFollower } from "./scroll";
import type { SizedMode } from "./sized";
import { isWaiting, LiveRate, statusLabel, statusTitle } from "./status";
import { TextSink } from "./text";
import type { ToolParts } from "./toolcard";
import { paintPendingTools, TOOL_KIT } from "./toolhost";

/** How assistant messages are rendered: incremental Markdown, or (benchmarks) the naive way. */
export type MarkdownMode = "incremental" | "full";

export interface ListOptions {
  /** where closed code blocks get highlighted; null: never */
  highlighter: Highlighter | null;
  markdown: MarkdownMode;
  /** how laid-out blocks skip layout (sized.ts; "at-once": the previous way, benchmarks) */
  sized: SizedMode;
  /** characters of message text shown, summed over the messages (for benchmarks) */
  onChars?: ((delta: number) => void) | undefined;
  /** removes the list's DOM listeners when aborted */
  signal: AbortSignal;
  /** the list's accessible name */
  label: string;
  /** a reply cut at the token limit gets a Continue button (chat) */
  canContinue?: boolean;
  /** a question gets an Edit button (chat) */
  canEdit?: boolean;
  /** render finished answers lazily (lazy.ts); null or absent: every answer at once */
  lazy?: LazyDeps | null;
  /**
   * Has messages rendered whole in the next frame, as a change of their own
   * (buffer.ts `rerender`): a chunk they missed arrived, or formulas the
   * frame's typesetting budget left wait (math.ts). Absent: rendered from the
   * entry last painted, at once for a chunk, in a frame of the list's own for
   * formulas (a list whose entries never change between paints).
   */
  rerender?: ((ids: readonly string[]) => void) | undefined;
}

/** What lazy rendering of a long list needs (lazy.ts). */
export interface LazyDeps {
  scheduler: FrameScheduler;
  /** placeholders are `hidden="until-found"` (lazy.ts) */
  untilFound: boolean;
  now: () => number;
  timer: Timer;
}

/** The status line of a message that was live when its kernel went away. */
export const DISCONNECTED_LABEL = "cut off: not connected to the kernel";

/** The live rate in a status line changes at most this often (ms). */
const RATE_EVERY_MS = 500;

const WHO: Record<string, string> = { user: "You", assistant: "Assistant", system: "System" };

interface MessageNode {
  el: HTMLElement;
  textEl: HTMLElement;
  sink: Sink;
  /** whether the sink renders Markdown (assistant) or plain text */
  markdown: boolean;
  /** its Markdown rendering failed once: plain text from then on */
  failed: boolean;
  /** characters of text shown */
  length: number;
  footer: HTMLElement;
  status: HTMLElement;
  copy: HTMLButtonElement | null;
  /** the reasoning block, once the message has reasoning */
  reasoning: ReasoningBlock | null;
  /** its tool calls and the later rounds of the agent loop (toolcard.ts), once it has some */
  tools: ToolParts | null;
  /** what stands for them as text until the tools chunk is there (toolhost.ts) */
  toolsPending: HTMLElement | null;
  /** the Continue button, once the message was cut at the token limit */
  cont: HTMLButtonElement | null;
  /** the Edit button of a question */
  edit: HTMLButtonElement | null;
  /** the `‹ 2 / 3 ›` switch, while the message has alternatives */
  nav: HTMLElement | null;
  shownNav: string;
  detail: HTMLDetailsElement | null;
  detailText: string | null;
  entry: Readonly<Entry> | null;
  rate: LiveRate | null;
  shownRate: number | null;
  rateAt: number;
  /** what is shown, to skip DOM writes that change nothing */
  shownStatus: string;
  shownRole: string;
  shownLabel: string;
  shownWaiting: boolean;
}

export function makeElement<K extends keyof HTMLElementTagNameMap>(
  doc: Document,
  tag: K,
  className: string,
): HTMLElementTagNameMap[K] {
  const el = doc.createElement(tag);
  el.className = className;
  return el;
}

export function makeButton(
  doc: Document,
  className: string,
  text: string,
  label: string,
): HTMLButtonElement {
  const b = makeElement(doc, "button", className);
  b.type = "button";
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.title = label;
  return b;
}

export class MessageList {
  /** `div.nbs-scroll`: the list and its jump button */
  readonly el: HTMLDivElement;
  /** `div.nbs-messages`: the scrolling list itself */
  readonly list: HTMLDivElement;
  private readonly doc: Document;
  private readonly scroll: ScrollFollower;
  private readonly nodes = new Map<string, MessageNode>();
  /** ids of the nodes created and not painted yet */
  private readonly fresh = new Set<string>();
  /** the ids shown, in order */
  private order: readonly string[] = [];
  /**
   * How many of the first ids of {@link order} have no node yet: a long
   * history arriving at once is put in the DOM from its end, a chunk per frame
   * (lazy.ts); 0 once every message is in. Their entries wait in
   * {@link waitingEntries} (painted when their node is made).
   */
  private waiting = 0;
  /** the text the renderer's warm-up lays out, hidden, until the list settles (see warm) */
  private warmEl: HTMLElement | null = null;
  /** the glyphs chunk was asked for, and its arrival listened for (lazy.ts `glyphs`) */
  private glyphsAsked = false;
  private readonly waitingEntries = new Map<string, Readonly<Entry> | null>();
  /**
   * messages rendered while a chunk they needed (math, entities) was not
   * there: rendered again when one comes (chunks.ts)
   */
  private readonly chunkWaiting = new Set<MessageNode>();
  /**
   * messages rendered with formulas the frame's budget left for later
   * (math.ts), without a `rerender` option: rendered again in the next frame
   */
  private readonly mathWaiting = new Set<MessageNode>();
  private mathFrame: { scheduler: FrameScheduler; handle: number } | null = null;
  private mathListening = false;
  /** the chunks listened for, each with the function that stops listening */
  private readonly chunkListeners = new Map<ChunkName, () => void>();
  /** the replies' tool parts painted since the last settle (their layout reads wait for it) */
  private readonly toolsToSettle = new Set<ToolParts>();
  /** a question's attachments (thumbnails, file chips) */
  private readonly attachments: MessageAttachments;
  /** whether the widget is connected to a kernel (connection.ts): when not, a live
   * message is shown as cut off, not as streaming */
  private connected = true;

  constructor(
    doc: Document,
    private readonly options: ListOptions,
  ) {
    this.doc = doc;
    this.attachments = new MessageAttachments(doc);
    this.el = makeElement(doc, "div", "nbs-scroll");
    this.list = makeElement(doc, "div", "nbs-messages");
    this.list.setAttribute("role", "list");
    this.list.setAttribute("aria-label", options.label);
    this.list.tabIndex = 0;
    const jump = makeButton(doc, "nbs-jump", "Jump to latest ↓", "Jump to the latest message");
    this.el.append(this.list, jump);
    this.scroll = new ScrollFollower(this.list, jump, options.signal);
    const lazy = options.lazy;
    if (lazy != null) {
      this.lazy = new LazyRenderer({
        root: this.list,
        signal: options.signal,
        untilFound: lazy.untilFound,
        scheduler: lazy.scheduler,
        now: lazy.now,
        timer: lazy.timer,
        glyphs: () => {
          const glyphs = chunk("glyphs"); // asks for it the first time
          if (glyphs === null && !this.glyphsAsked) {
            this.glyphsAsked = true;
            const off = onChunk("glyphs", () => {
              off();
              this.lazy?.look();
            });
            options.signal.addEventListener("abort", off, { once: true });
          }
          return glyphs?.pageGlyphs(this.doc) ?? null;
        },
        host: {
          render: (el) => this.renderDeferred(el, lazy.now()),
          chars: (el) => this.nodeOf(el)?.entry?.text.length ?? 0,
          elements: () => this.list.children,
          following: () => this.scroll.isFollowing,
          shift: (dy) => this.scroll.shift(dy),
          settled: () => this.settle(),
          warm: (part) => this.warm(part),
          attach: () => this.attachChunk(),
        },
      });
    }
  }

  /** Deferred rendering of finished answers (null: every answer renders at once). */
  readonly lazy: LazyRenderer | null = null;

  /**
   * The widget's kernel is (or no longer is) connected: every message still live
   * says so on its status line, keeping its text (see connection.ts). `now`: ms.
   */
  setConnected(connected: boolean, now: number): void {
    if (this.connected === connected) {
      return;
    }
    this.connected = connected;
    for (const node of this.nodes.values()) {
      if (node.entry !== null && !FINAL_STATUSES.has(node.entry.status)) {
        this.updateChrome(node, node.entry, now);
      }
    }
  }

  /** The message as last painted, if this list shows it. */
  entry(id: string): Readonly<Entry> | null {
    return this.nodes.get(id)?.entry ?? this.waitingEntries.get(id) ?? null;
  }

  /** The messages as last painted, in the order shown (those not painted yet left out). */
  entries(): Readonly<Entry>[] {
    const out: Readonly<Entry>[] = [];
    for (const id of this.order) {
      const entry = this.entry(id);
      if (entry !== null) {
        out.push(entry);
      }
    }
    return out;
  }

  /**
   * Shows each message's place among its alternatives (`‹ 2 / 3 ›`), from the
   * branch computed after the last reconcile (branches.ts); none for the others.
   */
  setSiblings(siblings: ReadonlyMap<string, Siblings>): void {
    for (const [id, node] of this.nodes) {
      const s = siblings.get(id) ?? null;
      const key = s === null ? "" : `${s.index}/${s.count}/${s.prev}/${s.next}`;
      if (node.shownNav === key) {
        continue;
      }
      node.shownNav = key;
      if (s === null) {
        node.nav?.remove();
        node.nav = null;
      } else {
        if (node.nav === null) {
          const nav = makeElement(this.doc, "span", "nbs-branch");
          const prev = makeButton(this.doc, "nbs-branch-prev", "‹", "Show the previous version");
          const pos = makeElement(this.doc, "span", "nbs-branch-pos");
          const next = makeButton(this.doc, "nbs-branch-next", "›", "Show the next version");
          nav.append(prev, pos, next);
          node.footer.prepend(nav);
          node.nav = nav;
        }
        const [prev, pos, next] = node.nav.children as unknown as [
          HTMLButtonElement,
          HTMLElement,
          HTMLButtonElement,
        ];
        prev.dataset.target = s.prev ?? "";
        prev.disabled = s.prev === null;
        next.dataset.target = s.next ?? "";
        next.disabled = s.next === null;
        pos.textContent = `${s.index} / ${s.count}`;
        pos.setAttribute("aria-label", `version ${s.index} of ${s.count}`);
      }
      this.updateFooter(node);
    }
  }

  /** The status label shown for message `id` ("" if none, or not shown here). */
  label(id: string): string {
    return this.nodes.get(id)?.shownLabel ?? "";
  }

  /** The ids of the messages this list shows but has not painted yet. */
  unpainted(): string[] {
    return this.fresh.size === 0 ? [] : [...this.fresh];
  }

  /**
   * Makes the list's children match `order`, creating and removing nodes.
   * With lazy rendering, a long history arriving at once (more than
   * {@link ATTACH_FIRST} new messages, while the list follows its bottom)
   * goes into the DOM from its end: none in this frame (it reconciles the
   * order and keeps the entries, no more: a frame's work that grows with the
   * history), the last {@link ATTACH_FIRST} in the next one, the rest a chunk
   * per frame above them ({@link attachChunk}); their entries wait meanwhile
   * (painted when their node is made). Messages that arrive
   * above those shown (a loaded history comes newest slice first) wait and
   * enter the same way, with no second hold of the end.
   */
  reconcile(order: readonly string[]): void {
    const keep = new Set(order);
    for (const [id, node] of this.nodes) {
      if (!keep.has(id)) {
        this.countChars(node, 0);
        this.lazy?.forget(node.el);
        node.el.remove();
        this.nodes.delete(id);
        this.fresh.delete(id);
      }
    }
    // none of the list's messages in the DOM yet: a history's end goes in a frame after
    // the one that reconciled it (attachChunk, lazy.ts), and until then all of it waits
    const noneIn = this.waiting > 0 && this.waiting >= this.order.length;
    const firstIn = this.waiting > 0 && !noneIn ? this.order[this.waiting] : undefined;
    let waiting = 0;
    let history = false;
    if (this.lazy !== null) {
      // new messages after the last one this list has, and whether any came above its first
      let added = 0;
      let first = -1;
      let above = false;
      for (let i = 0; i < order.length; i++) {
        const id = order[i] as string;
        if (this.nodes.has(id) || this.waitingEntries.has(id)) {
          first = first < 0 ? i : first;
          added = 0;
        } else {
          added++;
          above = above || first < 0;
        }
      }
      if (noneIn) {
        waiting = order.length; // still waiting for the frame that puts the end in
      } else if (firstIn !== undefined) {
        // still attaching: the messages above the first one in the DOM keep waiting
        waiting = Math.max(0, order.indexOf(firstIn));
      } else if (above && first > 0) {
        // older messages arrived above those shown (a history comes newest slice
        // first, nbstream/widgets/wire.py history_slices): they go into the DOM a
        // chunk a frame, above, keeping the reader's place (lazy.ts)
        waiting = first;
      }
      if (added > ATTACH_FIRST && this.scroll.isFollowing) {
        // a history arriving at once (even after a first message): this frame builds no
        // message of it; the next puts its end in the DOM, then it renders in frames of
        // its own (lazy.ts holdEnd), the older messages a chunk a frame above
        waiting = order.length;
        history = true;
      }
    }
    const waitingBefore = this.waitingEntries;
    const stillWaiting = new Map<string, Readonly<Entry> | null>();
    for (let i = 0; i < waiting; i++) {
      const id = order[i] as string;
      const node = this.nodes.get(id);
      if (node !== undefined) {
        // (only when messages above moved in; rare) it keeps its node, out of the DOM
        node.el.remove();
        continue;
      }
      stillWaiting.set(id, waitingBefore.get(id) ?? null);
    }
    waitingBefore.clear();
    for (const [id, entry] of stillWaiting) {
      waitingBefore.set(id, entry);
    }
    let expected: Element | null = this.list.firstElementChild;
    for (let i = waiting; i < order.length; i++) {
      const id = order[i] as string;
      const node = this.nodes.get(id) ?? this.makeNode(id);
      if (node.el === expected) {
        expected = expected.nextElementSibling;
      } else {
        this.list.insertBefore(node.el, expected);
      }
    }
    this.order = order.slice();
    this.waiting = waiting;
    if (history) {
      this.lazy?.holdEnd();
    }
    if (waiting > 0) {
      this.lazy?.wake();
    }
  }

  /** A new node for `id`, painted from its waiting entry if it has one, else fresh. */
  private makeNode(id: string): MessageNode {
    const node = this.createNode(id);
    this.nodes.set(id, node);
    const entry = this.waitingEntries.get(id) ?? null;
    this.waitingEntries.delete(id);
    if (entry === null) {
      this.fresh.add(id);
    } else {
      this.paintNode(node, entry, true, "", "", [], this.options.lazy?.now() ?? 0);
    }
    return node;
  }

  /**
   * Puts the next waiting messages in the DOM, above those in it: the last
   * {@link ATTACH_FIRST} when none is in yet (a history's end), else the next
   * {@link ATTACH_CHUNK}; returns whether more wait.
   */
  private attachChunk(): boolean {
    const count = this.waiting >= this.order.length ? ATTACH_FIRST : ATTACH_CHUNK;
    const from = Math.max(0, this.waiting - count);
    const fragment = this.doc.createDocumentFragment();
    for (let i = from; i < this.waiting; i++) {
      const id = this.order[i] as string;
      fragment.appendChild((this.nodes.get(id) ?? this.makeNode(id)).el);
    }
    this.list.insertBefore(fragment, this.list.firstElementChild);
    this.waiting = from;
    return from > 0;
  }

  /**
   * Renders one message's change, if this list shows the message. `now` is the
   * frame's time (ms, monotonic). Returns the message's new status label when
   * an assistant message's status changed (for the live region), else null.
   */
  paint(change: MessageChange, now: number): string | null {
    const e = change.entry;
    const node = this.nodes.get(e.id);
    if (node === undefined) {
      if (this.waitingEntries.has(e.id)) {
        this.waitingEntries.set(e.id, e); // painted whole when its node is made
      }
      return null;
    }
    this.fresh.delete(e.id);
    const statusChanged = node.shownStatus !== e.status;
    this.paintNode(
      node,
      e,
      change.replaced,
      change.appended,
      change.reasoningAppended,
      change.tail ?? [],
      now,
    );
    return statusChanged && e.role === "assistant" ? node.shownLabel : null;
  }

  /** Renders `e` into its node: what changed, or all of it the first time. */
  private paintNode(
    node: MessageNode,
    e: Readonly<Entry>,
    replacedText: boolean,
    appended: string,
    reasoningAppended: string,
    tail: readonly ToolRun[],
    now: number,
  ): void {
    // a node painted for the first time shows the whole text, whatever the change says
    const first = node.entry === null;
    const replaced = replacedText || first;
    node.entry = e;
    const final = FINAL_STATUSES.has(e.status);
    const lazy = this.lazy;
    if (lazy?.isDeferred(node.el)) {
      lazy.update(node.el, e.text); // (a finished message whose lost deltas came late)
      this.countChars(node, e.text.length);
    } else if (lazy !== null && first && final) {
      // a finished message shown for the first time: rendered when it comes near (lazy.ts)
      lazy.defer(node.el, node.textEl, e.text);
      this.countChars(node, e.text.length);
    } else {
      this.renderText(node, e, replaced, appended, reasoningAppended, tail, final, now);
    }
    this.updateChrome(node, e, now);
  }

  /**
   * After a frame's paints: keep the list at the bottom unless the user
   * scrolled away, and stop at the top of a reply being written once it is
   * taller than the list (scroll.ts).
   */
  settle(): void {
    this.lazy?.renderTail();
    if (this.warmEl !== null && this.lazy?.holdingEnd !== true) {
      this.warmEl.remove(); // laid out in the frame before the end rendered: done
      this.warmEl = null;
    }
    for (const tools of this.toolsToSettle) {
      tools.settle();
    }
    this.toolsToSettle.clear();
    if (this.lazy?.holdingEnd === true) {
      // a history whose end renders in frames of its own, the list not shown: it settles
      // there (reading its layout now would lay it out in the task that built it)
      return;
    }
    const last = this.list.lastElementChild as HTMLElement | null;
    if (last === null) {
      // nothing to keep at the bottom: no layout read (a chat's view is made empty, its
      // history coming in the kernel's updates after it; the read laid the page out in
      // the task that made the view: 6-7 ms of style and layout of its 21-28, traced)
      this.lazy?.flush();
      return;
    }
    const live = last.dataset.role === "assistant" && last.getAttribute("aria-busy") === "true";
    this.scroll.settle(live ? last : null);
    this.lazy?.flush();
  }

  /**
   * Warms a part of the renderer (lazy.ts, before a history's end renders);
   * the layout's part is a short rendered text laid out beside the list,
   * hidden and of no height, until the list settles.
   */
  private warm(part: WarmPart): void {
    const fragment = warmUp(this.doc, part);
    if (fragment === null || this.list.parentElement === null) {
      return;
    }
    this.warmEl?.remove();
    this.warmEl = makeElement(this.doc, "div", "nbs-warm");
    this.warmEl.setAttribute("aria-hidden", "true");
    const text = makeElement(this.doc, "div", "nbs-text nbs-md");
    text.append(fragment);
    this.warmEl.append(text);
    this.list.after(this.warmEl);
  }

  /** Renders a deferred answer whole (lazy.ts asks); returns its text length. */
  private renderDeferred(el: HTMLElement, now: number): number {
    const node = this.nodeOf(el);
    const e = node?.entry;
    if (node === undefined || e == null) {
      return 0;
    }
    this.renderText(node, e, true, "", "", [], FINAL_STATUSES.has(e.status), now);
    return e.text.length;
  }

  private nodeOf(el: HTMLElement): MessageNode | undefined {
    const id = el.dataset.id;
    return id === undefined ? undefined : this.nodes.get(id);
  }

  /** The message's text, reasoning and tool calls, from `e` and what changed. */
  private renderText(
    node: MessageNode,
    e: Readonly<Entry>,
    replaced: boolean,
    appended: string,
    reasoningAppended: string,
    tail: readonly ToolRun[],
    final: boolean,
    now: number,
  ): void {
    const undone = undoneNow();
    this.renderParts(node, e, replaced, appended, reasoningAppended, tail, final, now);
    const { missed, mathLeft } = undoneSince(undone);
    if (missed) {
      this.waitForChunks(node);
    }
    if (mathLeft) {
      this.typesetLater(node);
    }
  }

  /**
   * Renders `node` again in a following frame: the frame's typesetting budget
   * left formulas for later (math.ts); its renderer renders again only the
   * blocks that hold one (incremental.ts), and a render that still leaves one
   * comes here again, one formula a frame at least.
   */
  private typesetLater(node: MessageNode): void {
    const id = node.entry?.id;
    if (id === undefined) {
      return;
    }
    const rerender = this.options.rerender;
    if (rerender !== undefined) {
      // as a change of the next frame, as for a chunk (see chunkArrived)
      rerender([id]);
      return;
    }
    this.mathWaiting.add(node);
    if (this.mathFrame !== null || this.options.signal.aborted) {
      return;
    }
    const scheduler =
      this.options.lazy?.scheduler ?? browserScheduler(this.doc.defaultView ?? window);
    const frame = { scheduler, handle: 0 };
    this.mathFrame = frame;
    frame.handle = scheduler.request(() => this.typesetFrame());
    if (!this.mathListening) {
      this.mathListening = true;
      this.options.signal.addEventListener(
        "abort",
        () => {
          this.mathFrame?.scheduler.cancel(this.mathFrame.handle);
          this.mathFrame = null;
          this.mathWaiting.clear();
        },
        { once: true },
      );
    }
  }

  /** A frame of the list's own: the messages whose formulas wait, rendered again. */
  private typesetFrame(): void {
    this.mathFrame = null;
    const waiting = [...this.mathWaiting];
    this.mathWaiting.clear();
    const now = this.options.lazy?.now() ?? 0;
    for (const n of waiting) {
      const e = n.entry;
      if (e !== null && this.nodes.get(e.id) === n && !this.lazy?.isDeferred(n.el)) {
        this.renderText(n, e, true, "", "", [], FINAL_STATUSES.has(e.status), now);
      }
    }
    this.settle();
  }

  /**
   * Renders `node` again, whole, once a chunk that a renderer missed is there
   * (chunks.ts); a message that still misses one waits on.
   */
  private waitForChunks(node: MessageNode): void {
    this.chunkWaiting.add(node);
    if (this.chunkListeners.size === 0) {
      this.options.signal.addEventListener("abort", () => this.stopListening(), { once: true });
    }
    for (const name of missedChunks()) {
      if (!this.chunkListeners.has(name)) {
        this.chunkListeners.set(
          name,
          onChunk(name, () => this.chunkArrived()),
        );
      }
    }
  }

  private stopListening(): void {
    for (const off of this.chunkListeners.values()) {
      off();
    }
    this.chunkListeners.clear();
  }

  private chunkArrived(): void {
    this.stopListening();
    const waiting = [...this.chunkWaiting];
    this.chunkWaiting.clear();
    const shown = waiting.filter((n) => {
      const e = n.entry;
      return e !== null && this.nodes.get(e.id) === n && !this.lazy?.isDeferred(n.el);
    });
    const rerender = this.options.rerender;
    if (rerender !== undefined) {
      // in the next frame, as a change: the entry may already hold text that arrived
      // since it was painted, which that frame appends (rendering it whole here would
      // show that text twice)
      rerender(shown.map((n) => (n.entry as Readonly<Entry>).id));
      return;
    }
    const now = this.options.lazy?.now() ?? 0;
    for (const n of shown) {
      const e = n.entry as Readonly<Entry>;
      this.renderText(n, e, true, "", "", [], FINAL_STATUSES.has(e.status), now);
    }
    this.settle();
  }

  private renderParts(
    node: MessageNode,
    e: Readonly<Entry>,
    replaced: boolean,
    appended: string,
    reasoningAppended: string,
    tail: readonly ToolRun[],
    final: boolean,
    now: number,
  ): void {
    // a reply in the tool loop: its head (the text before its first call) shows here
    // as any reply's text; the calls and later rounds in node.tools (toolcard.ts)
    const head = headOf(e);
    try {
      this.updateText(node, head, replaced, appended, final, now);
    } catch (err) {
      // A renderer that fails must not take the view down: show this
      // message as plain text from now on.
      console.error("nbstream: rendering a message failed; showing it as plain text", err);
      node.failed = true;
      node.markdown = false;
      node.sink = new TextSink(node.textEl);
      node.textEl.className = "nbs-text";
      node.sink.replace(head.text);
      this.countChars(node, head.text.length);
    }
    this.attachments.paint(node.el, node.textEl, e.attachments);
    if (e.role === "assistant" && (head.reasoning !== "" || node.reasoning !== null)) {
      if (node.reasoning === null) {
        node.reasoning = new ReasoningBlock(
          this.doc,
          {
            highlighter: this.options.highlighter,
            markdown: this.options.markdown,
            sized: this.options.sized,
          },
          this.options.signal,
        );
        node.textEl.before(node.reasoning.el);
      }
      node.reasoning.paint(head, replaced, reasoningAppended, now);
    }
    if (
      e.role === "assistant" &&
      (e.toolHead !== undefined || node.tools !== null || node.toolsPending !== null)
    ) {
      this.paintTools(node, e, replaced, tail, now);
    }
  }

  /**
   * A reply's tool calls and later rounds: their cards, from the tools chunk
   * (toolcard.ts); until it is there (asked for once), each call's name and
   * state as text, and the message renders again when it comes (chunks.ts).
   */
  private paintTools(
    node: MessageNode,
    e: Readonly<Entry>,
    replaced: boolean,
    tail: readonly ToolRun[],
    now: number,
  ): void {
    let all = replaced;
    if (node.tools === null) {
      const tools = chunk("tools");
      if (tools === null) {
        noteMiss("tools");
        if (node.toolsPending === null) {
          node.toolsPending = makeElement(this.doc, "div", "nbs-tool-parts nbs-tool-pending");
          node.textEl.after(node.toolsPending);
        }
        paintPendingTools(node.toolsPending, e);
        return;
      }
      node.tools = new tools.ToolParts(this.doc, {
        highlighter: this.options.highlighter,
        markdown: this.options.markdown,
        sized: this.options.sized,
        signal: this.options.signal,
        kit: TOOL_KIT,
      });
      node.toolsPending?.remove();
      node.toolsPending = null;
      node.textEl.after(node.tools.el);
      all = true; // every run so far, whatever this paint appends
    }
    this.toolsToSettle.add(node.tools);
    try {
      node.tools.paint(e, all, all ? [] : tail, now);
    } catch (err) {
      console.error("nbstream: rendering a reply's tool calls failed", err);
    }
  }

  /** Follow new text again, from now on. */
  follow(): void {
    this.scroll.follow();
  }

  /** The footer shows when it has something to show. */
  private updateFooter(node: MessageNode): void {
    const hidden =
      node.status.hidden &&
      (node.copy === null || node.copy.hidden) &&
      node.cont === null &&
      node.edit === null &&
      node.nav === null;
    if (node.footer.hidden !== hidden) {
      node.footer.hidden = hidden;
    }
  }

  private countChars(node: MessageNode, length: number): void {
    this.options.onChars?.(length - node.length);
    node.length = length;
  }

  private createNode(id: string): MessageNode {
    const make = <K extends keyof HTMLElementTagNameMap>(tag: K, cls: string) =>
      makeElement(this.doc, tag, cls);
    const el = make("div", "nbs-message");
    el.setAttribute("role", "listitem");
    el.dataset.id = id;
    const who = make("span", "nbs-who");
    const textEl = make("div", "nbs-text");
    const footer = make("div", "nbs-footer");
    const status = make("span", "nbs-status");
    status.hidden = true;
    footer.hidden = true;
    footer.append(status);
    el.append(who, textEl, footer);
    return {
      el,
      textEl,
      footer,
      sink: new TextSink(textEl),
      markdown: false,
      failed: false,
      length: 0,
      status,
      copy: null,
      reasoning: null,
      tools: null,
      toolsPending: null,
      cont: null,
      edit: null,
      nav: null,
      shownNav: "",
      detail: null,
      detailText: null,
      entry: null,
      rate: null,
      shownRate: null,
      rateAt: Number.NEGATIVE_INFINITY,
      shownStatus: "",
      shownRole: "",
      shownLabel: "",
      shownWaiting: false,
    };
  }

  /** Hands the message's new text to its sink. */
  private updateText(
    node: MessageNode,
    e: Readonly<Entry>,
    replaced: boolean,
    appended: string,
    final: boolean,
    now: number,
  ): void {
    if (this.ensureSink(node, e.role) || replaced) {
      this.countChars(node, e.text.length);
      node.sink.replace(e.text, final);
    } else if (appended.length > 0) {
      this.countChars(node, node.length + appended.length);
      node.sink.append(appended);
      if (e.status === "running") {
        node.rate ??= new LiveRate();
        node.rate.add(now, appended.length);
      }
    }
    if (final) {
      node.sink.finish();
    }
  }

  /** Gives the node the sink its role needs; returns whether it made a new one. */
  private ensureSink(node: MessageNode, role: string): boolean {
    const markdown = role === "assistant" && !node.failed;
    if (node.markdown === markdown) {
      return false;
    }
    node.markdown = markdown;
    node.textEl.textContent = "";
    node.textEl.className = markdown ? "nbs-text nbs-md" : "nbs-text";
    if (!markdown) {
      node.sink = new TextSink(node.textEl);
    } else if (this.options.markdown === "full") {
      node.sink = new FullSink(node.textEl);
    } else {
      const highlighter = this.options.highlighter;
      node.sink = new MarkdownSink(node.textEl, {
        sized: this.options.sized,
        ...(highlighter === null ? {} : { onClosedCode: (code) => highlighter.enqueue(code) }),
      });
    }
    return true;
  }

  /** Role, status label, copy button and error details; writes only what differs. */
  private updateChrome(node: MessageNode, e: Readonly<Entry>, now: number): void {
    if (node.shownRole !== e.role) {
      node.shownRole = e.role;
      node.el.dataset.role = e.role;
      (node.el.firstElementChild as HTMLElement).textContent = `${WHO[e.role] ?? e.role}:`;
      if (e.role === "assistant" && node.copy === null) {
        node.copy = makeButton(this.doc, "nbs-copy-msg", "Copy", "Copy this answer as Markdown");
        node.status.after(node.copy);
      }
      if (e.role === "user" && node.edit === null && this.options.canEdit === true) {
        node.edit = makeButton(
          this.doc,
          "nbs-edit",
          "Edit",
          "Edit this question (the answer to the new one is a new branch)",
        );
        node.status.after(node.edit);
      }
    }
    const pane = e.pane === undefined ? undefined : String(e.pane);
    if (node.el.dataset.pane !== pane) {
      if (pane === undefined) {
        delete node.el.dataset.pane;
      } else {
        node.el.dataset.pane = pane;
      }
    }
    if (node.copy !== null && node.copy.hidden !== (e.text === "")) {
      node.copy.hidden = e.text === "";
    }
    const cut = !this.connected && !FINAL_STATUSES.has(e.status);
    const shown = cut ? `${e.status}-disconnected` : e.status;
    if (node.shownStatus !== shown) {
      node.shownStatus = shown;
      node.el.dataset.status = e.status;
      node.el.classList.toggle("nbs-disconnected", cut);
      if (!cut && (e.status === "queued" || e.status === "loading" || e.status === "running")) {
        node.el.setAttribute("aria-busy", "true");
      } else {
        node.el.removeAttribute("aria-busy");
        node.rate = null;
        node.shownRate = null;
      }
    }
    if (node.rate !== null && now - node.rateAt >= RATE_EVERY_MS) {
      node.shownRate = node.rate.perSecond();
      node.rateAt = now;
    }
    const label = cut
      ? DISCONNECTED_LABEL
      : statusLabel(e, e.status === "running" ? node.shownRate : null);
    if (node.shownLabel !== label) {
      node.shownLabel = label;
      node.status.textContent = label;
      node.status.hidden = label === "";
    }
    const title = statusTitle(e);
    if (node.status.title !== title) {
      node.status.title = title;
    }
    const finish = e.finish_reason === undefined ? undefined : String(e.finish_reason);
    if (node.el.dataset.finish !== finish) {
      if (finish === undefined) {
        delete node.el.dataset.finish;
      } else {
        node.el.dataset.finish = finish;
      }
      const cut = e.finish_reason === "length" && this.options.canContinue === true;
      if (cut && node.cont === null) {
        node.cont = makeButton(
          this.doc,
          "nbs-continue",
          "Continue",
          "Ask the model to go on from where it was cut",
        );
        (node.copy ?? node.status).after(node.cont);
      } else if (!cut && node.cont !== null) {
        node.cont.remove();
        node.cont = null;
      }
    }
    this.updateFooter(node);
    const waiting = !cut && isWaiting(e);
    if (node.shownWaiting !== waiting) {
      node.shownWaiting = waiting;
      node.status.classList.toggle("nbs-waiting", waiting);
    }
    const detail = (e.status === "error" || e.status === "timeout") && e.detail ? e.detail : null;
    if (node.detailText !== detail) {
      node.detailText = detail;
      node.detail?.remove();
      node.detail = null;
      if (detail !== null) {
        const details = makeElement(this.doc, "details", "nbs-detail");
        const summary = this.doc.createElement("summary");
        summary.textContent = "details";
        const pre = this.doc.createElement("pre");
        pre.textContent = detail;
        details.append(summary, pre);
        node.el.appendChild(details);
        node.detail = details;
      }
    }
  }
}

/**
 * The part of a reply shown as any reply's text and reasoning: all of it, or, in the
 * tool loop, what came before its first call (the rest is toolcard.ts's); its
 * thinking is over once the calls came.
 */
function headOf(e: Readonly<Entry>): Readonly<Entry> {
  const at = e.toolHead;
  if (at === undefined) {
    return e;
  }
  return {
    ...e,
    text: e.text.slice(0, at.text),
    reasoning: e.reasoning.slice(0, at.reasoning),
    status: FINAL_STATUSES.has(e.status) ? e.status : "done",
  };
}
