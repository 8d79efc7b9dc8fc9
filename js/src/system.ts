/**
 * The system prompt at the top of a chat: one collapsible line, editable in
 * place. Owns everything under `div.nbs-system`:
 *
 *   div.nbs-system[hidden]         hidden while there is no system prompt and none is written
 *     button.nbs-system-toggle     aria-expanded; "System" and span.nbs-system-preview
 *                                  (the first line, ellipsized by CSS)
 *     div.nbs-system-body          (expanded) div.nbs-system-text (the whole prompt),
 *                                  button.nbs-system-edit
 *     div.nbs-system-editor        (editing) textarea.nbs-system-input,
 *                                  button.nbs-system-save, button.nbs-system-cancel
 *
 * The prompt shown is the kernel's (the synced `system_prompt` trait, given to
 * {@link SystemPromptBar.set}). An edit is handed to `save` (the mount sends a
 * `system_prompt` message) and shown at once; the kernel's echo then confirms
 * it. Saving: Ctrl/Cmd+Enter, the Save button, or leaving the box; Escape or
 * Cancel leaves the prompt as it was. A blank prompt is no prompt. The prompt
 * is plain text (`textContent`), never HTML. Runs on the browser's main thread.
 */
import { makeButton, makeElement } from "./messages";

/** The line shown collapsed: the first non-blank line, with "…" when more follows. */
export function firstLine(text: string): string {
  const lines = text.trim().split(/\r?\n/);
  const first = (lines[0] ?? "").trim();
  return lines.length > 1 ? `${first} …` : first;
}

export class SystemPromptBar {
  readonly el: HTMLDivElement;
  private readonly toggle: HTMLButtonElement;
  private readonly preview: HTMLElement;
  private readonly body: HTMLElement;
  private readonly full: HTMLElement;
  private readonly editor: HTMLElement;
  private readonly input: HTMLTextAreaElement;
  private readonly cancelButton: HTMLButtonElement;
  private prompt = "";
  private expanded = false;
  private editing = false;

  constructor(
    doc: Document,
    private readonly save: (text: string) => void,
    signal: AbortSignal,
    /** told when the bar shows or hides (the "add" button shows when it is hidden) */
    private readonly onShown: (shown: boolean) => void = () => {},
  ) {
    const make = <K extends keyof HTMLElementTagNameMap>(tag: K, cls: string) =>
      makeElement(doc, tag, cls);
    this.el = make("div", "nbs-system");
    this.toggle = make("button", "nbs-system-toggle");
    this.toggle.type = "button";
    this.toggle.setAttribute("aria-expanded", "false");
    this.toggle.title = "Show the system prompt";
    const label = make("span", "nbs-system-label");
    label.textContent = "System";
    this.preview = make("span", "nbs-system-preview");
    this.toggle.append(label, this.preview);

    this.body = make("div", "nbs-system-body");
    this.full = make("div", "nbs-system-text");
    const edit = makeButton(doc, "nbs-system-edit", "Edit", "Edit the system prompt");
    this.body.append(this.full, edit);

    this.editor = make("div", "nbs-system-editor");
    this.input = make("textarea", "nbs-system-input");
    this.input.rows = 3;
    this.input.setAttribute("aria-label", "System prompt");
    this.input.placeholder = "Instructions sent first to the model with each question";
    const row = make("div", "nbs-system-actions");
    const saveButton = makeButton(doc, "nbs-system-save", "Save", "Save (Ctrl+Enter)");
    this.cancelButton = makeButton(doc, "nbs-system-cancel", "Cancel", "Cancel (Escape)");
    const hint = make("span", "nbs-system-hint");
    hint.textContent = "Applies to the next question · Ctrl+Enter saves · Esc cancels";
    row.append(saveButton, this.cancelButton, hint);
    this.editor.append(this.input, row);
    this.el.append(this.toggle, this.body, this.editor);

    const opts = { signal };
    this.toggle.addEventListener("click", () => this.setExpanded(!this.expanded), opts);
    edit.addEventListener("click", () => this.edit(), opts);
    saveButton.addEventListener("click", () => this.commit(), opts);
    this.cancelButton.addEventListener("click", () => this.cancel(), opts);
    this.input.addEventListener("keydown", (ev) => this.onKeydown(ev), opts);
    this.input.addEventListener("blur", (ev) => this.onBlur(ev), opts);
    this.render();
  }

  /** The kernel's system prompt (null or "": none). An edit in progress is kept. */
  set(prompt: string | null): void {
    this.prompt = prompt ?? "";
    this.render();
  }

  /** The prompt shown ("" for none). */
  get text(): string {
    return this.prompt;
  }

  get isEditing(): boolean {
    return this.editing;
  }

  /** Opens the editor on the current prompt (also how a prompt is added). */
  edit(): void {
    this.editing = true;
    this.input.value = this.prompt;
    this.render();
    this.input.focus();
  }

  /** Saves what the editor holds, if it changed, and closes it. */
  commit(): void {
    if (!this.editing) {
      return;
    }
    const text = this.input.value.trim() === "" ? "" : this.input.value;
    this.editing = false;
    if (text !== this.prompt) {
      this.prompt = text;
      this.save(text);
    }
    this.render();
  }

  /** Closes the editor, leaving the prompt as it was. */
  cancel(): void {
    if (!this.editing) {
      return;
    }
    this.editing = false;
    this.input.value = this.prompt;
    this.render();
  }

  private setExpanded(expanded: boolean): void {
    this.expanded = expanded;
    this.render();
  }

  private onKeydown(ev: KeyboardEvent): void {
    if (ev.key === "Enter") {
      ev.stopPropagation(); // JupyterLab runs the cell on Shift+Enter
      if ((ev.ctrlKey || ev.metaKey) && !ev.isComposing) {
        ev.preventDefault();
        this.commit();
      }
    } else if (ev.key === "Escape") {
      // not the widget's Stop, not JupyterLab's command mode: just this editor
      ev.preventDefault();
      ev.stopPropagation();
      this.cancel();
    }
  }

  private onBlur(ev: FocusEvent): void {
    // the editor's own buttons act on their click (Cancel must not save first)
    const to = ev.relatedTarget as Node | null;
    if (to !== null && this.editor.contains(to)) {
      return;
    }
    this.commit();
  }

  private render(): void {
    const has = this.prompt !== "";
    const shown = has || this.editing;
    const hide = (el: HTMLElement, hidden: boolean) => {
      if (el.hidden !== hidden) {
        el.hidden = hidden;
      }
    };
    const wasShown = !this.el.hidden;
    hide(this.el, !shown);
    this.preview.textContent = firstLine(this.prompt);
    this.full.textContent = this.prompt;
    this.toggle.setAttribute("aria-expanded", String(this.expanded && !this.editing));
    this.toggle.title = this.expanded ? "Hide the system prompt" : "Show the system prompt";
    hide(this.toggle, this.editing);
    hide(this.body, !this.expanded || this.editing || !has);
    hide(this.editor, !this.editing);
    if (wasShown !== shown) {
      this.onShown(shown);
    }
  }
}
