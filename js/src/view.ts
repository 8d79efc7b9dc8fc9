/**
 * The chat's DOM: owns everything under the root `div.nbs-chat`.
 *
 *   div.nbs-chat
 *     div.nbs-header            span.nbs-title, span.nbs-source (hidden when both empty)
 *     div.nbs-scroll
 *       div.nbs-messages        the scrollable list; follows new text unless scrolled up
 *         div.nbs-message[data-id][data-role][data-status]
 *           span.nbs-who        who speaks, for screen readers only
 *           div.nbs-text        the text: Markdown (.nbs-md, see incremental.ts) for
 *                               the assistant, plain Text nodes (text.ts) otherwise
 *           div.nbs-footer      span.nbs-status (a human label), button.nbs-copy-msg
 *           details.nbs-detail  the traceback of an error, on demand
 *       button.nbs-jump         "Jump to latest", while the user has scrolled up
 *     div.nbs-form              textarea.nbs-input, button.nbs-send, .nbs-stop,
 *                               .nbs-regenerate, .nbs-clear
 *     div.nbs-live              polite live region: status changes, never tokens
 *
 * Messages change only in {@link ChatView.paint}, which the frame loop calls
 * at most once per animation frame with what changed; the header, the buttons'
 * states and the input box change outside it (rarely, or on user input), and
 * closed code blocks are highlighted in idle time (highlight.ts).
 *
 * Model output reaches the DOM only as sanitized Markdown (incremental.ts,
 * sanitize.ts) or as Text nodes. Images in it are placeholders until clicked;
 * copy buttons and image placeholders are handled by one delegated listener.
 * User input is handed to the `actions` given at construction; the view sends
 * nothing itself. Runs on the browser's main thread only.
 */
import type { Changes, Entry } from "./buffer";
import { Highlighter, type IdleScheduler } from "./highlight";
import { FullSink, MarkdownSink, type Sink } from "./incremental";
import { FINAL_STATUSES } from "./protocol";
import { loadableImageUrl } from "./sanitize";
import { isWaiting, LiveRate, statusLabel } from "./status";
import { TextSink } from "./text";

/** What the user can ask for; `stop` returns whether there was anything to stop. */
export interface ViewActions {
  send(text: string): void;
  stop(): boolean;
  regenerate(): void;
  clear(): void;
}

/** The conversation as the buttons see it. */
export interface Summary {
  /** a reply is queued, loading or running */
  active: boolean;
  /** there is an assistant reply to regenerate */
  hasReply: boolean;
  /** there is no message at all */
  empty: boolean;
}

/** How assistant messages are rendered: incremental Markdown, or (benchmarks) the naive way. */
export type MarkdownMode = "incremental" | "full";

export interface ViewOptions {
  /** where closed code blocks get highlighted; null: never */
  idle: IdleScheduler | null;
  markdown?: MarkdownMode;
  /** characters of message text shown, summed over the messages (for benchmarks) */
  onChars?: (delta: number) => void;
}

/** Within this many pixels of the bottom, the list follows new text. */
const STICK_PX = 24;
/** The live rate in a status line changes at most this often (ms). */
const RATE_EVERY_MS = 500;
/** How long a copy button says "Copied" (ms). */
const COPIED_MS = 1500;

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

/** Copies `text` to the clipboard; resolves to whether it worked. */
export async function copyText(doc: Document, text: string): Promise<boolean> {
  const clipboard = doc.defaultView?.navigator.clipboard;
  if (clipboard !== undefined && typeof clipboard.writeText === "function") {
    try {
      await clipboard.writeText(text);
      return true;
    } catch {
      // not allowed here (an insecure context, a denied permission): try the old way
    }
  }
  const area = doc.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "nbs-offscreen";
  doc.body.appendChild(area);
  area.select();
  let ok = false;
  try {
    ok = doc.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

export class ChatView {
  readonly root: HTMLDivElement;
  private readonly doc: Document;
  private readonly header: HTMLElement;
  private readonly titleEl: HTMLElement;
  private readonly sourceEl: HTMLElement;
  private readonly list: HTMLElement;
  private readonly jump: HTMLButtonElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly regenerateButton: HTMLButtonElement;
  private readonly clearButton: HTMLButtonElement;
  private readonly live: HTMLElement;
  private readonly nodes = new Map<string, MessageNode>();
  private readonly listeners = new AbortController();
  private readonly highlighter: Highlighter | null;
  private readonly timers = new Set<number>();
  /** whether the list follows new text (the user has not scrolled up) */
  private stuck = true;
  /** the scrollTop the view last set, to tell the user's scrolling from ours */
  private setTop = 0;

  constructor(
    doc: Document,
    private readonly actions: ViewActions,
    private readonly options: ViewOptions,
  ) {
    this.doc = doc;
    this.highlighter = options.idle === null ? null : new Highlighter(options.idle);
    this.root = this.make("div", "nbs-chat");

    this.header = this.make("div", "nbs-header");
    this.titleEl = this.make("span", "nbs-title");
    this.sourceEl = this.make("span", "nbs-source");
    this.header.append(this.titleEl, this.sourceEl);
    this.header.hidden = true;

    const scroll = this.make("div", "nbs-scroll");
    this.list = this.make("div", "nbs-messages");
    this.list.setAttribute("role", "list");
    this.list.setAttribute("aria-label", "Conversation");
    this.list.tabIndex = 0;
    this.jump = this.button("nbs-jump", "Jump to latest ↓", "Jump to the latest message");
    this.jump.hidden = true;
    scroll.append(this.list, this.jump);

    const form = this.make("div", "nbs-form");
    this.input = this.make("textarea", "nbs-input");
    this.input.rows = 2;
    this.input.setAttribute("aria-label", "Message");
    this.input.placeholder = "Message";
    const buttons = this.make("div", "nbs-buttons");
    this.sendButton = this.button("nbs-send", "Send", "Send message (Enter)");
    this.sendButton.disabled = true;
    this.stopButton = this.button("nbs-stop", "Stop", "Stop the reply (Escape)");
    this.stopButton.disabled = true;
    this.regenerateButton = this.button(
      "nbs-regenerate",
      "Regenerate",
      "Regenerate the last answer",
    );
    this.regenerateButton.disabled = true;
    this.clearButton = this.button("nbs-clear", "Clear", "Clear the conversation");
    this.clearButton.disabled = true;
    buttons.append(this.sendButton, this.stopButton, this.regenerateButton, this.clearButton);
    form.append(this.input, buttons);

    this.live = this.make("div", "nbs-live");
    this.live.setAttribute("role", "status");
    this.live.setAttribute("aria-live", "polite");

    this.root.append(this.header, scroll, form, this.live);

    const opts = { signal: this.listeners.signal };
    this.input.addEventListener("keydown", (ev) => this.onKeydown(ev), opts);
    this.input.addEventListener("input", () => this.updateSend(), opts);
    this.root.addEventListener("keydown", (ev) => this.onRootKeydown(ev), opts);
    this.root.addEventListener("click", (ev) => this.onClick(ev), opts);
    this.sendButton.addEventListener("click", () => this.submit(), opts);
    this.stopButton.addEventListener("click", () => this.actions.stop(), opts);
    this.regenerateButton.addEventListener("click", () => this.regenerate(), opts);
    this.clearButton.addEventListener("click", () => this.clear(), opts);
    this.jump.addEventListener("click", () => this.follow(), opts);
    this.list.addEventListener("scroll", () => this.onScroll(), { ...opts, passive: true });
  }

  setTitle(title: string): void {
    this.titleEl.textContent = title;
    this.updateHeader();
  }

  setSourceLabel(label: string): void {
    this.sourceEl.textContent = label;
    this.updateHeader();
  }

  setPlaceholder(placeholder: string): void {
    this.input.placeholder = placeholder || "Message";
  }

  /**
   * The frame's DOM work: renders `changes`, sets the buttons from `summary`,
   * and keeps the list at the bottom unless the user scrolled away. `now` is
   * the frame's time (ms, monotonic). Status changes go to the live region
   * when `announce` (not for the history shown on render).
   */
  paint(changes: Changes, summary: Summary, now: number, announce = true): void {
    if (changes.order !== null) {
      this.reconcile(changes.order);
    }
    let announcement = "";
    for (const change of changes.messages) {
      const node = this.nodes.get(change.entry.id);
      if (node === undefined) {
        continue;
      }
      const e = change.entry;
      node.entry = e;
      const final = FINAL_STATUSES.has(e.status);
      try {
        this.updateText(node, e, change.replaced, change.appended, final, now);
      } catch (err) {
        // A renderer that fails must not take the chat down: show this
        // message as plain text from now on.
        console.error("nbstream: rendering a message failed; showing it as plain text", err);
        node.failed = true;
        node.markdown = false;
        node.sink = new TextSink(node.textEl);
        node.textEl.className = "nbs-text";
        node.sink.replace(e.text);
        this.countChars(node, e.text.length);
      }
      const statusChanged = node.shownStatus !== e.status;
      this.updateChrome(node, e, now);
      if (announce && statusChanged && e.role === "assistant") {
        announcement = node.shownLabel;
      }
    }
    if (announcement !== "") {
      this.live.textContent = announcement;
    }
    this.setDisabled(this.stopButton, !summary.active);
    this.setDisabled(this.regenerateButton, summary.active || !summary.hasReply);
    this.setDisabled(this.clearButton, summary.empty);
    if (this.stuck) {
      this.scrollToBottom();
    }
  }

  /** Removes the view's DOM listeners, timers and pending highlighting. */
  dispose(): void {
    this.listeners.abort();
    this.highlighter?.dispose();
    const win = this.doc.defaultView;
    for (const t of this.timers) {
      win?.clearTimeout(t);
    }
    this.timers.clear();
  }

  /** Highlights the queued code blocks now (tests). */
  flushHighlighting(): void {
    this.highlighter?.flush();
  }

  private make<K extends keyof HTMLElementTagNameMap>(
    tag: K,
    className: string,
  ): HTMLElementTagNameMap[K] {
    const el = this.doc.createElement(tag);
    el.className = className;
    return el;
  }

  private button(className: string, text: string, label: string): HTMLButtonElement {
    const b = this.make("button", className);
    b.type = "button";
    b.textContent = text;
    b.setAttribute("aria-label", label);
    b.title = label;
    return b;
  }

  private setDisabled(b: HTMLButtonElement, disabled: boolean): void {
    if (b.disabled !== disabled) {
      b.disabled = disabled;
    }
  }

  private updateHeader(): void {
    this.header.hidden = !this.titleEl.textContent && !this.sourceEl.textContent;
  }

  private updateSend(): void {
    this.setDisabled(this.sendButton, this.input.value.trim() === "");
  }

  private countChars(node: MessageNode, length: number): void {
    this.options.onChars?.(length - node.length);
    node.length = length;
  }

  /** Makes the list's children match `order`, creating and removing nodes. */
  private reconcile(order: readonly string[]): void {
    const keep = new Set(order);
    for (const [id, node] of this.nodes) {
      if (!keep.has(id)) {
        this.countChars(node, 0);
        node.el.remove();
        this.nodes.delete(id);
      }
    }
    let expected: Element | null = this.list.firstElementChild;
    for (const id of order) {
      let node = this.nodes.get(id);
      if (node === undefined) {
        node = this.createNode(id);
        this.nodes.set(id, node);
      }
      if (node.el === expected) {
        expected = expected.nextElementSibling;
      } else {
        this.list.insertBefore(node.el, expected);
      }
    }
  }

  private createNode(id: string): MessageNode {
    const el = this.make("div", "nbs-message");
    el.setAttribute("role", "listitem");
    el.dataset.id = id;
    const who = this.make("span", "nbs-who");
    const textEl = this.make("div", "nbs-text");
    const footer = this.make("div", "nbs-footer");
    const status = this.make("span", "nbs-status");
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
      const highlighter = this.highlighter;
      node.sink = new MarkdownSink(
        node.textEl,
        highlighter === null ? {} : { onClosedCode: (code) => highlighter.enqueue(code) },
      );
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
        node.copy = this.button("nbs-copy-msg", "Copy", "Copy this answer as Markdown");
        node.status.after(node.copy);
      }
    }
    if (node.copy !== null && node.copy.hidden !== (e.text === "")) {
      node.copy.hidden = e.text === "";
    }
    if (node.shownStatus !== e.status) {
      node.shownStatus = e.status;
      node.el.dataset.status = e.status;
      if (e.status === "queued" || e.status === "loading" || e.status === "running") {
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
    const label = statusLabel(e, e.status === "running" ? node.shownRate : null);
    if (node.shownLabel !== label) {
      node.shownLabel = label;
      node.status.textContent = label;
      node.status.hidden = label === "";
      node.status.title =
        e.status === "done" || e.status === "stopped"
          ? "TTFT: time to first token. A piece is what the source emitted at once (a token for a local model)."
          : "";
    }
    const footerHidden = node.status.hidden && (node.copy === null || node.copy.hidden);
    if (node.footer.hidden !== footerHidden) {
      node.footer.hidden = footerHidden;
    }
    const waiting = isWaiting(e);
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
        const details = this.make("details", "nbs-detail");
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

  private onKeydown(ev: KeyboardEvent): void {
    if (ev.key === "Enter") {
      // Keep JupyterLab from also acting on Enter (Shift+Enter runs the cell).
      ev.stopPropagation();
      // A new line, or an input method confirming a candidate (Safari reports
      // that Enter with keyCode 229 after the composition ended).
      if (ev.shiftKey || ev.isComposing || ev.keyCode === 229) {
        return;
      }
      ev.preventDefault();
      this.submit();
    }
  }

  /** Escape anywhere in the widget stops the running reply. */
  private onRootKeydown(ev: KeyboardEvent): void {
    if (ev.key === "Escape" && !ev.defaultPrevented && this.actions.stop()) {
      ev.preventDefault();
      ev.stopPropagation();
    }
  }

  private onClick(ev: MouseEvent): void {
    const target = ev.target as Element | null;
    const button = target?.closest?.("button");
    if (!button || !this.root.contains(button)) {
      return;
    }
    if (button.classList.contains("nbs-copy-code")) {
      const code = button.closest(".nbs-code")?.querySelector("pre > code");
      this.copy(button, code?.textContent ?? "");
    } else if (button.classList.contains("nbs-copy-msg")) {
      const id = button.closest<HTMLElement>(".nbs-message")?.dataset.id;
      const node = id === undefined ? undefined : this.nodes.get(id);
      this.copy(button, node?.entry?.text ?? "");
    } else if (button.classList.contains("nbs-img")) {
      ev.preventDefault(); // a placeholder inside a link loads the image, and only that
      this.loadImage(button);
    }
  }

  private copy(button: HTMLButtonElement, text: string): void {
    const label = button.getAttribute("aria-label") ?? "";
    const shown = button.textContent ?? "";
    void copyText(this.doc, text).then((ok) => {
      // the code button's visible label is CSS-generated from the class; the
      // message button's is its text; screen readers hear the aria-label
      button.classList.add(ok ? "nbs-copied" : "nbs-copy-failed");
      button.setAttribute("aria-label", ok ? "Copied" : "Copy failed");
      if (shown !== "") {
        button.textContent = ok ? "Copied" : "Copy failed";
      }
      const win = this.doc.defaultView;
      if (win === null) {
        return;
      }
      const t = win.setTimeout(() => {
        this.timers.delete(t);
        button.classList.remove("nbs-copied", "nbs-copy-failed");
        button.setAttribute("aria-label", label);
        if (shown !== "") {
          button.textContent = shown;
        }
      }, COPIED_MS);
      this.timers.add(t);
    });
  }

  /** The user asked for this image: load it, with no referrer. */
  private loadImage(button: HTMLButtonElement): void {
    const url = loadableImageUrl(button.querySelector(".nbs-img-url")?.textContent ?? "");
    if (url === null) {
      button.classList.add("nbs-img-blocked");
      button.title = "This image URL is not loaded (only http, https and raster data: images are)";
      return;
    }
    const img = this.doc.createElement("img");
    img.className = "nbs-img-loaded";
    img.referrerPolicy = "no-referrer";
    img.alt = button.querySelector(".nbs-img-alt")?.textContent ?? "";
    img.src = url;
    button.replaceWith(img);
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (text === "") {
      return;
    }
    this.actions.send(text);
    this.input.value = "";
    this.updateSend();
    this.follow(); // the next paint shows the new message at the bottom
  }

  private regenerate(): void {
    this.actions.regenerate();
    this.follow();
  }

  private clear(): void {
    this.actions.clear();
    this.follow();
    this.input.focus();
  }

  /** Follow new text again, from now on. */
  private follow(): void {
    this.stuck = true;
    if (!this.jump.hidden) {
      this.jump.hidden = true;
    }
    this.scrollToBottom();
  }

  private scrollToBottom(): void {
    const l = this.list;
    l.scrollTop = l.scrollHeight;
    this.setTop = l.scrollTop;
  }

  private onScroll(): void {
    const l = this.list;
    const atBottom = l.scrollHeight - l.scrollTop - l.clientHeight <= STICK_PX;
    if (atBottom) {
      this.stuck = true;
    } else if (l.scrollTop < this.setTop - 1) {
      // The user moved up (the view only ever scrolls down): stop following.
      // Text that grew since the view last scrolled leaves scrollTop as it was.
      this.stuck = false;
    }
    this.setTop = l.scrollTop;
    if (this.jump.hidden !== this.stuck) {
      this.jump.hidden = this.stuck;
    }
  }
}
