/**
 * The widget's DOM, for the modes "chat" and "stream": owns everything under
 * the root `div.nbs-chat` (the root of every mode; `data-mode` tells them apart).
 *
 *   div.nbs-chat[data-mode=chat]
 *     div.nbs-header            span.nbs-title, span.nbs-source (hidden when both empty)
 *     div.nbs-system            the system prompt, collapsible and editable (system.ts;
 *                               hidden when there is none)
 *     div.nbs-scroll            the messages (messages.ts)
 *     div.nbs-form              div.nbs-attach-notice, div.nbs-attach-tray, button.nbs-attach
 *                               (composer.ts: files for the next message, picked, pasted
 *                               or dropped onto the widget), textarea.nbs-input,
 *                               button.nbs-send, .nbs-stop,
 *                               .nbs-regenerate, .nbs-clear, .nbs-system-add (shown
 *                               while there is no system prompt), .nbs-copy-all (the
 *                               conversation shown, as Markdown: transcript.ts)
 *     div.nbs-live              polite live region: status changes, never tokens
 *
 *   div.nbs-chat.nbs-mode-stream[data-mode=stream]    one live answer under a cell
 *     div.nbs-header            span.nbs-title, span.nbs-source, button.nbs-stop
 *                               (the Stop button is there only while the answer is live)
 *     div.nbs-scroll            the prompt, compact, if any; then the answer
 *     div.nbs-live
 *
 * The compare layout (compare.ts) shares {@link BaseView}: the header, the live
 * region, code highlighting, and the one delegated click listener for copy
 * buttons and image placeholders.
 *
 * Messages change only in `paint`, which the frame loop calls at most once
 * per animation frame with what changed; the header, the buttons' states and
 * the input box change outside it (rarely, or on user input), and closed code
 * blocks are highlighted in idle time (highlight.ts). Images in model output
 * are placeholders until clicked. User input is handed to the `actions` given
 * at construction; the view sends nothing itself. Runs on the browser's main
 * thread only.
 */
import type { Siblings } from "./branches";
import type { Changes, Entry, MessageChange } from "./buffer";
import { Composer } from "./composer";
import { type ConnectionState, type LostReason, lostMessage } from "./connection";
import { Highlighter, type IdleScheduler } from "./highlight";
import { type LazyDeps, type MarkdownMode, MessageList, makeButton, makeElement } from "./messages";
import type { AttachmentPolicy, PaneInfo, SendAttachment } from "./protocol";
import { loadableImageUrl } from "./sanitize";
import type { SizedMode } from "./sized";
import { SystemPromptBar } from "./system";
import { conversationMarkdown } from "./transcript";

export type { MarkdownMode } from "./messages";

/** A Send's attachments: descriptors, their bytes (the message's buffers), and its number. */
export interface SendAttachments {
  attachments: SendAttachment[];
  buffers: ArrayBuffer[];
  draft: number;
}

/** What the user can ask for; the stops return whether there was anything to stop. */
export interface ViewActions {
  send(text: string, attachments?: SendAttachments): void;
  /** chat and stream: the live reply; compare: every pane */
  stop(): boolean;
  /** compare: the live reply of one pane */
  stopPane(pane: number): boolean;
  regenerate(): void;
  clear(): void;
  /** chat: ask the model to go on from reply `id` (cut at the token limit) */
  continueReply(id: string): void;
  /** chat: show the branch through message `id` (an alternative at its place) */
  switchTo(id: string): void;
  /** chat: ask `text` in place of the question `id` (a new branch) */
  edit(id: string, text: string): void;
  /** chat: the user edited the system prompt ("": none) */
  setSystemPrompt(text: string): void;
  /** a person's answer to the approval card of tool call `call` in reply `id` (the kernel checks it) */
  approveTool(id: string, call: string, decision: "allow" | "always" | "deny"): void;
}

/** The conversation as the buttons see it. */
export interface Summary {
  /** a reply is queued, loading or running */
  active: boolean;
  /** the panes (compare) with a reply that is queued, loading or running */
  activePanes: ReadonlySet<number>;
  /** there is an assistant reply to regenerate */
  hasReply: boolean;
  /** there is no message at all */
  empty: boolean;
}

export interface ViewOptions {
  /** where closed code blocks get highlighted; null: never */
  idle: IdleScheduler | null;
  markdown?: MarkdownMode;
  /** how laid-out blocks skip layout (sized.ts; "batched" as shipped) */
  sized?: SizedMode;
  /** characters of message text shown, summed over the messages (for benchmarks) */
  onChars?: (delta: number) => void;
  /** render finished answers as they come near (lazy.ts); null or absent: all at once */
  lazy?: LazyDeps | null;
  /** messages to render whole in the next frame (a chunk they missed arrived) */
  rerender?: (ids: readonly string[]) => void;
}

/** What the mount (chat.ts) drives, whatever the mode. */
export interface WidgetView {
  readonly root: HTMLDivElement;
  /**
   * The frame's DOM work: renders `changes` and sets the buttons from
   * `summary`; it writes and never reads layout. `now` is the frame's time
   * (ms, monotonic). Status changes go to the live region when `announce`
   * (not for the history shown on render).
   */
  paint(changes: Changes, summary: Summary, now: number, announce?: boolean): void;
  /**
   * After a frame's paints: keeps the lists at the bottom unless the user
   * scrolled away. It reads layout, so the frame loop calls it once every view
   * on the page painted (the page is laid out once per frame, not per view).
   */
  settle(): void;
  /**
   * Whether the view is in sight (or near it): out of sight, its messages are
   * not rendered by the browser (`content-visibility: hidden`, at their last
   * size) until it comes back. The page's frame loop says so.
   */
  setInSight(inSight: boolean): void;
  setTitle(title: string): void;
  setSourceLabel(label: string): void;
  setPlaceholder(placeholder: string): void;
  setPanes(panes: readonly PaneInfo[]): void;
  /** chat: each shown message's place among its alternatives (set before a paint) */
  setSiblings(siblings: ReadonlyMap<string, Siblings>): void;
  /** The kernel's system prompt (null: none); shown by the chat layout only. */
  setSystemPrompt(prompt: string | null): void;
  /** What the user may attach (null: nothing; an older kernel). */
  setAttachmentPolicy(policy: AttachmentPolicy | null): void;
  /** The kernel refused the Send `draft` (its attachments): give it back, say `reason`. */
  refused(draft: number, reason: string): void;
  /**
   * Whether the widget is connected to a kernel (connection.ts). When it is not, the
   * view says so, shows live messages as cut off and offers nothing that asks the
   * kernel (the next paint keeps those controls disabled). `now`: ms, monotonic.
   */
  setConnection(state: ConnectionState, reason: LostReason | null, now: number): void;
  /** Removes the view's DOM listeners, timers and pending highlighting. */
  dispose(): void;
  /** Highlights the queued code blocks now (tests). */
  flushHighlighting(): void;
}

/** Buttons that only work in this page (copying): everything else asks the kernel. */
const LOCAL_BUTTONS = [
  "nbs-copy-all",
  "nbs-copy-msg",
  "nbs-copy-code",
  "nbs-copy-reasoning",
  "nbs-img",
  "nbs-jump",
  "nbs-reasoning-toggle",
  "nbs-system-toggle",
  "nbs-att-thumb", // shows an attachment's preview larger
  "nbs-attach-remove", // takes a file off the tray before sending
];

function asksTheKernel(b: HTMLButtonElement): boolean {
  return !LOCAL_BUTTONS.some((c) => b.classList.contains(c));
}

/** How long a copy button says "Copied" (ms). */
const COPIED_MS = 1500;

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

/** What every layout has: root, header, live region, highlighting, clicks, timers. */
export abstract class BaseView implements WidgetView {
  readonly root: HTMLDivElement;
  protected readonly doc: Document;
  protected readonly header: HTMLElement;
  protected readonly live: HTMLElement;
  protected readonly listeners = new AbortController();
  protected readonly highlighter: Highlighter | null;
  /** the message lists, for the delegated click listener */
  protected readonly lists: MessageList[] = [];
  private readonly titleEl: HTMLElement;
  private readonly sourceEl: HTMLElement;
  private readonly timers = new Set<number>();
  /** files for the next message (a layout with an input box makes one: makeComposer) */
  protected composer: Composer | null = null;
  private composerInput: HTMLTextAreaElement | null = null;
  private policy: AttachmentPolicy | null = null;
  /** Sends whose attachments may still be refused: their text and files, by number */
  private readonly drafts = new Map<number, { text: string; files: File[] }>();
  private draftCount = 0;
  /** Sends go out in order, each after its files were read */
  private sending: Promise<void> = Promise.resolve();
  private inFlight = 0;
  /** whether a kernel hears this widget (see {@link WidgetView.setConnection}) */
  protected connected = true;
  /** `div.nbs-offline`, made when the widget first loses its kernel */
  private offline: HTMLElement | null = null;

  constructor(
    doc: Document,
    protected readonly actions: ViewActions,
    protected readonly options: ViewOptions,
    mode: string,
  ) {
    this.doc = doc;
    this.highlighter = options.idle === null ? null : new Highlighter(options.idle);
    this.root = this.make("div", "nbs-chat");
    this.root.dataset.mode = mode;

    this.header = this.make("div", "nbs-header");
    this.titleEl = this.make("span", "nbs-title");
    this.sourceEl = this.make("span", "nbs-source");
    this.header.append(this.titleEl, this.sourceEl);
    this.header.hidden = true;

    this.live = this.make("div", "nbs-live");
    this.live.setAttribute("role", "status");
    this.live.setAttribute("aria-live", "polite");

    const opts = { signal: this.listeners.signal };
    this.root.addEventListener("keydown", (ev) => this.onRootKeydown(ev), opts);
    this.root.addEventListener("click", (ev) => this.onClick(ev), opts);
  }

  abstract paint(changes: Changes, summary: Summary, now: number, announce?: boolean): void;

  setTitle(title: string): void {
    this.titleEl.textContent = title;
    this.updateHeader();
  }

  setSourceLabel(label: string): void {
    this.sourceEl.textContent = label;
    this.updateHeader();
  }

  setPlaceholder(_placeholder: string): void {}

  setPanes(_panes: readonly PaneInfo[]): void {}

  setSiblings(_siblings: ReadonlyMap<string, Siblings>): void {}

  setConnection(state: ConnectionState, reason: LostReason | null, now: number): void {
    this.root.dataset.connection = state;
    const connected = state !== "lost";
    if (!connected) {
      if (this.offline === null) {
        this.offline = this.make("div", "nbs-offline");
        this.offline.setAttribute("role", "note");
        this.header.after(this.offline);
      }
      const text = lostMessage(reason);
      if (this.offline.textContent !== text) {
        this.offline.textContent = text;
        this.announce(text);
      }
    }
    if (this.offline !== null) {
      this.setHidden(this.offline, connected);
    }
    if (connected === this.connected) {
      return;
    }
    this.connected = connected;
    for (const list of this.lists) {
      list.setConnected(connected, now);
    }
    for (const input of this.root.querySelectorAll<HTMLTextAreaElement>("textarea.nbs-input")) {
      input.disabled = !connected;
    }
    for (const b of this.root.querySelectorAll<HTMLButtonElement>("button")) {
      if (asksTheKernel(b)) {
        this.setDisabled(b, b.disabled);
      }
    }
  }

  /** chat: the user asked to edit the question `id` */
  protected startEdit(_id: string): void {}
  setSystemPrompt(_prompt: string | null): void {}

  setAttachmentPolicy(policy: AttachmentPolicy | null): void {
    this.policy = policy;
    this.composer?.update();
  }

  refused(draft: number, reason: string): void {
    const d = this.drafts.get(draft);
    this.drafts.delete(draft);
    if (d === undefined || this.composer === null) {
      return;
    }
    const input = this.composerInput;
    if (input !== null && input.value.trim() === "") {
      input.value = d.text; // the question comes back too, unless something new was typed
      input.dispatchEvent(new Event("input"));
    }
    this.composer.restore(d.files, reason);
  }

  /**
   * Gives the layout's form a composer: the Attach button before `input`, the
   * tray and the notice above it; files dropped anywhere on the widget.
   */
  protected makeComposer(
    form: HTMLElement,
    input: HTMLTextAreaElement,
    onChange: () => void,
  ): void {
    const composer = new Composer(this.doc, this.root, input, {
      policy: () => this.policy,
      label: () => this.sourceEl.textContent || "This model",
      onChange,
      signal: this.listeners.signal,
    });
    form.insertBefore(composer.notice, input);
    form.insertBefore(composer.tray, input);
    form.insertBefore(composer.button, input);
    form.appendChild(composer.input);
    this.composer = composer;
    this.composerInput = input;
    composer.update();
  }

  /**
   * Sends `text` with the composer's files. Reading the files takes a moment
   * (a promise): Sends stay in order, and one without files and nothing ahead
   * of it goes at once.
   */
  protected sendWithAttachments(text: string): void {
    const composer = this.composer;
    if ((composer === null || composer.count === 0) && this.inFlight === 0) {
      this.actions.send(text);
      return;
    }
    const taking = composer === null ? Promise.resolve(null) : composer.take();
    this.inFlight++;
    this.sending = this.sending
      .then(async () => {
        const draft = await taking;
        if (draft === null) {
          this.actions.send(text);
          return;
        }
        const n = ++this.draftCount;
        this.drafts.set(n, { text, files: draft.files });
        for (const old of this.drafts.keys()) {
          if (this.drafts.size <= 4) {
            break;
          }
          this.drafts.delete(old); // keep the last few: a refusal comes at once
        }
        this.actions.send(text, {
          attachments: draft.attachments,
          buffers: draft.buffers,
          draft: n,
        });
      })
      .catch((err: unknown) => {
        console.error("nbstream: sending the attachments failed", err);
        this.composer?.say("The attachments could not be read; nothing was sent.");
      })
      .finally(() => {
        this.inFlight--;
      });
  }

  dispose(): void {
    this.composer?.dispose();
    this.listeners.abort();
    this.highlighter?.dispose();
    const win = this.doc.defaultView;
    for (const t of this.timers) {
      win?.clearTimeout(t);
    }
    this.timers.clear();
  }

  flushHighlighting(): void {
    this.highlighter?.flush();
  }

  settle(): void {
    for (const list of this.lists) {
      list.settle();
    }
  }

  setInSight(inSight: boolean): void {
    this.root.classList.toggle("nbs-out-of-sight", !inSight);
  }

  protected newList(label: string, canContinue = false, canEdit = false): MessageList {
    const list = new MessageList(this.doc, {
      canContinue,
      canEdit,
      highlighter: this.highlighter,
      markdown: this.options.markdown ?? "incremental",
      sized: this.options.sized ?? "batched",
      onChars: this.options.onChars,
      signal: this.listeners.signal,
      label,
      lazy: this.options.lazy ?? null,
      rerender: this.options.rerender,
    });
    this.lists.push(list);
    return list;
  }

  /** Paints `change` into every list that shows it; returns the last status label that changed. */
  protected paintChange(change: MessageChange, now: number): string | null {
    let label: string | null = null;
    for (const list of this.lists) {
      label = list.paint(change, now) ?? label;
    }
    return label;
  }

  protected announce(text: string): void {
    if (text !== "") {
      this.live.textContent = text;
    }
  }

  protected make<K extends keyof HTMLElementTagNameMap>(
    tag: K,
    className: string,
  ): HTMLElementTagNameMap[K] {
    return makeElement(this.doc, tag, className);
  }

  protected button(className: string, text: string, label: string): HTMLButtonElement {
    return makeButton(this.doc, className, text, label);
  }

  /** Sets `b.disabled`; a control that asks the kernel stays disabled while not connected. */
  protected setDisabled(b: HTMLButtonElement, disabled: boolean): void {
    const d = disabled || (!this.connected && asksTheKernel(b));
    if (b.disabled !== d) {
      b.disabled = d;
    }
  }

  protected setHidden(el: HTMLElement, hidden: boolean): void {
    if (el.hidden !== hidden) {
      el.hidden = hidden;
    }
  }

  /** The header shows when it has something to show. */
  protected updateHeader(): void {
    this.setHidden(this.header, !this.titleEl.textContent && !this.sourceEl.textContent);
  }

  /** An input box's keys: Enter sends (`submit`), Shift+Enter is a new line. */
  protected onInputKeydown(ev: KeyboardEvent, submit: () => void): void {
    if (ev.key === "Enter") {
      // Keep JupyterLab from also acting on Enter (Shift+Enter runs the cell).
      ev.stopPropagation();
      // A new line, or an input method confirming a candidate (Safari reports
      // that Enter with keyCode 229 after the composition ended).
      if (ev.shiftKey || ev.isComposing || ev.keyCode === 229) {
        return;
      }
      ev.preventDefault();
      submit();
    }
  }

  /** Escape anywhere in the widget stops what runs. */
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
    } else if (
      button.classList.contains("nbs-copy-msg") ||
      button.classList.contains("nbs-copy-reasoning")
    ) {
      const id = button.closest<HTMLElement>(".nbs-message")?.dataset.id;
      const entry =
        id === undefined ? null : this.lists.find((l) => l.el.contains(button))?.entry(id);
      const reasoning = button.classList.contains("nbs-copy-reasoning");
      this.copy(button, (reasoning ? entry?.reasoning : entry?.text) ?? "");
    } else if (
      button.classList.contains("nbs-branch-prev") ||
      button.classList.contains("nbs-branch-next")
    ) {
      const target = button.dataset.target;
      if (target) {
        this.actions.switchTo(target);
      }
    } else if (button.classList.contains("nbs-edit")) {
      const id = button.closest<HTMLElement>(".nbs-message")?.dataset.id;
      if (id !== undefined) {
        this.startEdit(id);
      }
    } else if (button.classList.contains("nbs-continue")) {
      const id = button.closest<HTMLElement>(".nbs-message")?.dataset.id;
      if (id !== undefined) {
        button.disabled = true;
        this.actions.continueReply(id);
      }
    } else if (button.classList.contains("nbs-tool-decide")) {
      const id = button.closest<HTMLElement>(".nbs-message")?.dataset.id;
      const call = button.dataset.call;
      const decision = button.dataset.decision;
      if (
        id !== undefined &&
        call !== undefined &&
        (decision === "allow" || decision === "always" || decision === "deny")
      ) {
        // one answer per card: its buttons wait for the kernel's word (the next meta)
        for (const b of button.parentElement?.querySelectorAll("button") ?? []) {
          b.disabled = true;
        }
        this.actions.approveTool(id, call, decision);
      }
    } else if (button.classList.contains("nbs-img")) {
      ev.preventDefault(); // a placeholder inside a link loads the image, and only that
      this.loadImage(button);
    }
  }

  /** Copies `text`, and says "Copied" (or "Copy failed") on `button` for a moment. */
  protected copy(button: HTMLButtonElement, text: string): void {
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
}

/** The chat (an input box under the conversation) and the stream (no input box). */
export class ChatView extends BaseView {
  private readonly messages: MessageList;
  private readonly stream: boolean;
  private readonly input: HTMLTextAreaElement | null = null;
  private readonly sendButton: HTMLButtonElement | null = null;
  private readonly stopButton: HTMLButtonElement;
  private readonly regenerateButton: HTMLButtonElement | null = null;
  private readonly clearButton: HTMLButtonElement | null = null;
  private readonly copyAllButton: HTMLButtonElement | null = null;
  /** "Editing a question · Cancel", shown while the input box holds an edit */
  private readonly editing: HTMLElement | null = null;
  /** the question being edited (Send asks the new text in its place) */
  private editId: string | null = null;
  private siblings: ReadonlyMap<string, Siblings> = new Map();
  private readonly system: SystemPromptBar | null = null;

  constructor(
    doc: Document,
    actions: ViewActions,
    options: ViewOptions,
    layout: "chat" | "stream" = "chat",
    /** the messages held, to paint one that comes into view (another branch) */
    private readonly lookup: (id: string) => Readonly<Entry> | undefined = () => undefined,
  ) {
    super(doc, actions, options, layout);
    this.stream = layout === "stream";
    this.messages = this.stream ? this.newList("Answer") : this.newList("Conversation", true, true);
    const opts = { signal: this.listeners.signal };

    if (this.stream) {
      this.root.classList.add("nbs-mode-stream");
      this.stopButton = this.button("nbs-stop", "Stop", "Stop the answer (Escape)");
      this.stopButton.hidden = true;
      this.header.append(this.stopButton);
      this.stopButton.addEventListener("click", () => this.actions.stop(), opts);
      this.root.append(this.header, this.messages.el, this.live);
      return;
    }

    const form = this.make("div", "nbs-form");
    const input = this.make("textarea", "nbs-input");
    input.rows = 2;
    input.setAttribute("aria-label", "Message");
    input.placeholder = "Message";
    const buttons = this.make("div", "nbs-buttons");
    const send = this.button("nbs-send", "Send", "Send message (Enter)");
    send.disabled = true;
    this.stopButton = this.button("nbs-stop", "Stop", "Stop the reply (Escape)");
    this.stopButton.disabled = true;
    const regenerate = this.button("nbs-regenerate", "Regenerate", "Regenerate the last answer");
    regenerate.disabled = true;
    const clear = this.button("nbs-clear", "Clear", "Clear the conversation");
    clear.disabled = true;
    const addSystem = this.button("nbs-system-add", "System prompt", "Add a system prompt");
    const copyAll = this.button("nbs-copy-all", "Copy all", "Copy the conversation as Markdown");
    copyAll.disabled = true;
    buttons.append(send, this.stopButton, regenerate, clear, addSystem, copyAll);
    const editing = this.make("div", "nbs-editing");
    editing.hidden = true;
    const editingText = this.make("span", "nbs-editing-text");
    editingText.textContent = "Editing a question: Send asks it as a new branch";
    const cancelEdit = this.button("nbs-edit-cancel", "Cancel", "Cancel the edit");
    editing.append(editingText, cancelEdit);
    form.append(editing, input, buttons);
    this.makeComposer(form, input, () => this.updateSend());
    this.editing = editing;
    this.input = input;
    this.sendButton = send;
    this.regenerateButton = regenerate;
    this.clearButton = clear;
    this.copyAllButton = copyAll;
    this.system = new SystemPromptBar(
      doc,
      (text) => this.actions.setSystemPrompt(text),
      this.listeners.signal,
      (shown) => this.setHidden(addSystem, shown),
    );

    this.root.append(this.header, this.system.el, this.messages.el, form, this.live);

    input.addEventListener("keydown", (ev) => this.onInputKeydown(ev, () => this.submit()), opts);
    input.addEventListener("input", () => this.updateSend(), opts);
    send.addEventListener("click", () => this.submit(), opts);
    this.stopButton.addEventListener("click", () => this.actions.stop(), opts);
    regenerate.addEventListener("click", () => this.regenerate(), opts);
    clear.addEventListener("click", () => this.clear(), opts);
    cancelEdit.addEventListener("click", () => this.stopEditing(true), opts);
    copyAll.addEventListener(
      "click",
      () => this.copy(copyAll, conversationMarkdown(this.messages.entries())),
      opts,
    );
    addSystem.addEventListener("click", () => this.system?.edit(), opts);
  }

  override setSystemPrompt(prompt: string | null): void {
    this.system?.set(prompt);
  }

  override setPlaceholder(placeholder: string): void {
    if (this.input !== null) {
      this.input.placeholder = placeholder || "Message";
    }
  }

  override setSiblings(siblings: ReadonlyMap<string, Siblings>): void {
    this.siblings = siblings;
  }

  paint(changes: Changes, summary: Summary, now: number, announce = true): void {
    if (changes.order !== null) {
      this.messages.reconcile(changes.order);
    }
    let announcement = "";
    for (const change of changes.messages) {
      announcement = this.paintChange(change, now) ?? announcement;
    }
    // a message that came into view (another branch shown) is painted whole
    for (const id of this.messages.unpainted()) {
      const entry = this.lookup(id);
      if (entry !== undefined) {
        this.paintChange(
          { entry, replaced: true, appended: "", reasoningAppended: "", meta: true },
          now,
        );
      }
    }
    if (changes.order !== null) {
      this.messages.setSiblings(this.siblings);
    }
    if (announce) {
      this.announce(announcement);
    }
    if (this.stream) {
      this.setHidden(this.stopButton, !summary.active);
      this.updateHeader();
    } else {
      this.setDisabled(this.stopButton, !summary.active);
    }
    if (this.regenerateButton !== null) {
      this.setDisabled(this.regenerateButton, summary.active || !summary.hasReply);
    }
    if (this.clearButton !== null) {
      this.setDisabled(this.clearButton, summary.empty);
    }
    if (this.copyAllButton !== null) {
      this.setDisabled(this.copyAllButton, summary.empty);
    }
  }

  protected override updateHeader(): void {
    super.updateHeader();
    if (this.stream && !this.stopButton.hidden) {
      this.setHidden(this.header, false);
    }
  }

  private updateSend(): void {
    if (this.input !== null && this.sendButton !== null) {
      this.setDisabled(this.sendButton, this.input.value.trim() === "");
    }
  }

  protected override startEdit(id: string): void {
    const entry = this.lookup(id);
    if (this.input === null || this.editing === null || entry === undefined) {
      return;
    }
    this.editId = id;
    this.input.value = entry.text;
    this.editing.hidden = false;
    this.updateSend();
    this.input.focus();
  }

  /** Leaves edit mode; `clear`: empty the input box too (Cancel). */
  private stopEditing(clear: boolean): void {
    this.editId = null;
    if (this.editing !== null) {
      this.editing.hidden = true;
    }
    if (clear && this.input !== null) {
      this.input.value = "";
      this.updateSend();
    }
  }

  private submit(): void {
    if (this.input === null) {
      return;
    }
    const text = this.input.value.trim();
    if (text === "") {
      return;
    }
    if (this.editId !== null) {
      this.actions.edit(this.editId, text);
      this.stopEditing(false);
    } else {
      this.sendWithAttachments(text);
    }
    this.input.value = "";
    this.updateSend();
    this.messages.follow(); // the next paint shows the new message at the bottom
  }

  private regenerate(): void {
    this.actions.regenerate();
    this.messages.follow();
  }

  private clear(): void {
    this.actions.clear();
    this.messages.follow();
    this.input?.focus();
  }
}
