/**
 * The chat's DOM: owns everything under the root `div.nbs-chat`.
 *
 *   div.nbs-chat
 *     div.nbs-header          span.nbs-title, span.nbs-source (hidden when both empty)
 *     div.nbs-messages        the scrollable list; sticks to the bottom unless scrolled up
 *       div.nbs-message[data-id][data-role][data-status]
 *         span.nbs-who        who speaks, for screen readers only
 *         div.nbs-text        the text (see text.ts: Text nodes only)
 *         span.nbs-status     a human label for the status
 *         details.nbs-detail  the traceback of an error, on demand
 *     div.nbs-form            textarea.nbs-input, button.nbs-send, button.nbs-stop
 *     div.nbs-live            polite live region: status changes, never tokens
 *
 * Messages change only in {@link ChatView.paint}, which the frame loop calls
 * at most once per animation frame with what changed; the header, the
 * placeholder and the input box change outside it (rarely, or on user input). Model output is set through
 * `textContent` and Text nodes only, never as HTML. User input is handed to
 * the `actions` given at construction; the view sends nothing itself.
 * Runs on the browser's main thread only.
 */
import type { Changes, Entry } from "./buffer";
import { TextSink } from "./text";

/** What the user can ask for; `stop` returns whether there was anything to stop. */
export interface ViewActions {
  send(text: string): void;
  stop(): boolean;
}

/** Within this many pixels of the bottom, the list follows new text. */
const STICK_PX = 24;

const WHO: Record<string, string> = { user: "You", assistant: "Assistant", system: "System" };

interface MessageNode {
  el: HTMLElement;
  text: TextSink;
  status: HTMLElement;
  detail: HTMLDetailsElement | null;
  detailText: string | null;
  /** what is shown, to skip DOM writes that change nothing */
  shownStatus: string;
  shownRole: string;
  shownLabel: string;
}

function formatNumber(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(1);
}

function finite(x: unknown): number | null {
  return typeof x === "number" && Number.isFinite(x) ? x : null;
}

/** The human label for a message's status ("" where none is shown). */
export function statusLabel(e: Readonly<Entry>): string {
  const status: string = e.status;
  if (e.role === "user" && status === "done") {
    return "";
  }
  switch (status) {
    case "queued":
      return "queued";
    case "loading":
      return "loading model…";
    case "running":
      return e.text.length === 0 ? "waiting for first token…" : "streaming";
    case "done": {
      if (e.role !== "assistant") {
        return "";
      }
      const parts = ["done"];
      const tokens = finite(e.stats.tokens);
      const rate = finite(e.stats.tokens_per_s);
      if (tokens !== null) {
        parts.push(`${formatNumber(tokens)} ${tokens === 1 ? "token" : "tokens"}`);
      }
      if (rate !== null) {
        parts.push(`${rate.toFixed(1)} tok/s`);
      }
      return parts.join(" · ");
    }
    case "stopped":
      return "stopped";
    case "error":
      return e.error ? `error: ${e.error}` : "error";
    case "timeout":
      return e.error ? `timeout: ${e.error}` : "timeout";
    default:
      return status;
  }
}

export class ChatView {
  readonly root: HTMLDivElement;
  private readonly doc: Document;
  private readonly header: HTMLElement;
  private readonly titleEl: HTMLElement;
  private readonly sourceEl: HTMLElement;
  private readonly list: HTMLElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly live: HTMLElement;
  private readonly nodes = new Map<string, MessageNode>();
  private readonly listeners = new AbortController();
  /** whether the list follows new text (the user has not scrolled up) */
  private stuck = true;

  constructor(
    doc: Document,
    private readonly actions: ViewActions,
  ) {
    this.doc = doc;
    this.root = this.make("div", "nbs-chat");

    this.header = this.make("div", "nbs-header");
    this.titleEl = this.make("span", "nbs-title");
    this.sourceEl = this.make("span", "nbs-source");
    this.header.append(this.titleEl, this.sourceEl);
    this.header.hidden = true;

    this.list = this.make("div", "nbs-messages");
    this.list.setAttribute("role", "list");
    this.list.setAttribute("aria-label", "Conversation");
    this.list.tabIndex = 0;

    const form = this.make("div", "nbs-form");
    this.input = this.make("textarea", "nbs-input");
    this.input.rows = 2;
    this.input.setAttribute("aria-label", "Message");
    this.input.placeholder = "Message";
    this.sendButton = this.make("button", "nbs-send");
    this.sendButton.type = "button";
    this.sendButton.textContent = "Send";
    this.sendButton.setAttribute("aria-label", "Send message");
    this.stopButton = this.make("button", "nbs-stop");
    this.stopButton.type = "button";
    this.stopButton.textContent = "Stop";
    this.stopButton.setAttribute("aria-label", "Stop the reply");
    this.stopButton.disabled = true;
    form.append(this.input, this.sendButton, this.stopButton);

    this.live = this.make("div", "nbs-live");
    this.live.setAttribute("role", "status");
    this.live.setAttribute("aria-live", "polite");

    this.root.append(this.header, this.list, form, this.live);

    const opts = { signal: this.listeners.signal };
    this.input.addEventListener("keydown", (ev) => this.onKeydown(ev), opts);
    this.sendButton.addEventListener("click", () => this.submit(), opts);
    this.stopButton.addEventListener("click", () => this.actions.stop(), opts);
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
   * The frame's DOM work: renders `changes`, enables Stop while `active`, and
   * keeps the list at the bottom unless the user scrolled away. Status changes
   * go to the live region when `announce` (not for the history shown on render).
   */
  paint(changes: Changes, active: boolean, announce = true): void {
    if (changes.order !== null) {
      this.reconcile(changes.order);
    }
    let announcement = "";
    for (const change of changes.messages) {
      const node = this.nodes.get(change.entry.id);
      if (node === undefined) {
        continue;
      }
      if (change.replaced) {
        node.text.replace(change.entry.text);
      } else if (change.appended.length > 0) {
        node.text.append(change.appended);
      }
      const statusChanged = node.shownStatus !== change.entry.status;
      this.updateChrome(node, change.entry);
      if (announce && statusChanged && change.entry.role === "assistant") {
        announcement = node.shownLabel;
      }
    }
    if (announcement !== "") {
      this.live.textContent = announcement;
    }
    if (this.stopButton.disabled === active) {
      this.stopButton.disabled = !active;
    }
    if (this.stuck) {
      this.list.scrollTop = this.list.scrollHeight;
    }
  }

  /** Removes the view's DOM listeners. */
  dispose(): void {
    this.listeners.abort();
  }

  private make<K extends keyof HTMLElementTagNameMap>(
    tag: K,
    className: string,
  ): HTMLElementTagNameMap[K] {
    const el = this.doc.createElement(tag);
    el.className = className;
    return el;
  }

  private updateHeader(): void {
    this.header.hidden = !this.titleEl.textContent && !this.sourceEl.textContent;
  }

  /** Makes the list's children match `order`, creating and removing nodes. */
  private reconcile(order: readonly string[]): void {
    const keep = new Set(order);
    for (const [id, node] of this.nodes) {
      if (!keep.has(id)) {
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
    const text = this.make("div", "nbs-text");
    const status = this.make("span", "nbs-status");
    el.append(who, text, status);
    return {
      el,
      text: new TextSink(text),
      status,
      detail: null,
      detailText: null,
      shownStatus: "",
      shownRole: "",
      shownLabel: "",
    };
  }

  /** Role, status label and error details; writes only what differs. */
  private updateChrome(node: MessageNode, e: Readonly<Entry>): void {
    if (node.shownRole !== e.role) {
      node.shownRole = e.role;
      node.el.dataset.role = e.role;
      (node.el.firstElementChild as HTMLElement).textContent = `${WHO[e.role] ?? e.role}:`;
    }
    if (node.shownStatus !== e.status) {
      node.shownStatus = e.status;
      node.el.dataset.status = e.status;
      if (e.status === "queued" || e.status === "loading" || e.status === "running") {
        node.el.setAttribute("aria-busy", "true");
      } else {
        node.el.removeAttribute("aria-busy");
      }
    }
    const label = statusLabel(e);
    if (node.shownLabel !== label) {
      node.shownLabel = label;
      node.status.textContent = label;
      node.status.hidden = label === "";
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
    } else if (ev.key === "Escape") {
      if (this.actions.stop()) {
        ev.preventDefault();
        ev.stopPropagation();
      }
    }
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (text === "") {
      return;
    }
    this.actions.send(text);
    this.input.value = "";
    this.stuck = true; // the next paint shows the new message at the bottom
  }

  private onScroll(): void {
    const l = this.list;
    this.stuck = l.scrollHeight - l.scrollTop - l.clientHeight <= STICK_PX;
  }
}
