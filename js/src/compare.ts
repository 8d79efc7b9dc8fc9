/**
 * The widget's DOM for mode "compare": several sources answer the same
 * prompts side by side. Owns everything under its root `div.nbs-chat`.
 *
 *   div.nbs-chat.nbs-mode-compare[data-mode=compare]
 *     div.nbs-header                span.nbs-title, span.nbs-source
 *     div.nbs-panes                 a CSS grid: one column per pane, stacked when narrow
 *       section.nbs-pane[data-pane=i][data-status]
 *         div.nbs-pane-head         span.nbs-pane-label, span.nbs-pane-status (the
 *                                   latest reply's status line, live rate included),
 *                                   button.nbs-pane-stop
 *         div.nbs-scroll            the prompts and this pane's answers (messages.ts)
 *     div.nbs-form                  the composer (composer.ts: files for the next prompt),
 *                                   textarea.nbs-input (Enter asks every pane),
 *                                   button.nbs-send, .nbs-stop (all panes), .nbs-clear
 *     div.nbs-live
 *
 * Routing: an assistant message goes to the pane its `pane` key names (pane 0
 * if it has none); user messages (the shared prompts) are shown in every
 * pane, so each column reads as its own conversation. A pane that the
 * `panes` trait does not list yet is added when a message names it. The
 * rendering of each message is messages.ts's, as in the chat.
 * Runs on the browser's main thread only.
 */
import type { Changes, Entry } from "./buffer";
import type { MessageList } from "./messages";
import type { PaneInfo } from "./protocol";
import { BaseView, type Summary, type ViewActions, type ViewOptions } from "./view";

interface Pane {
  el: HTMLElement;
  label: HTMLElement;
  status: HTMLElement;
  stop: HTMLButtonElement;
  list: MessageList;
  /** the id of the pane's latest assistant message, if any */
  latest: string | null;
  shownStatus: string;
}

/** The pane an entry belongs to; null for the shared prompts (every pane). */
export function paneOf(e: Readonly<Entry>): number | null {
  return e.role === "assistant" ? (e.pane ?? 0) : null;
}

export class CompareView extends BaseView {
  private readonly grid: HTMLElement;
  private readonly panes: Pane[] = [];
  private labels: readonly PaneInfo[] = [];
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly clearButton: HTMLButtonElement;
  /** the last order painted, to route the messages of a pane added later */
  private order: readonly string[] = [];

  constructor(
    doc: Document,
    actions: ViewActions,
    options: ViewOptions,
    /** the messages as the buffer holds them (for their pane) */
    private readonly lookup: (id: string) => Readonly<Entry> | undefined,
  ) {
    super(doc, actions, options, "compare");
    this.root.classList.add("nbs-mode-compare");
    this.grid = this.make("div", "nbs-panes");

    const form = this.make("div", "nbs-form");
    this.input = this.make("textarea", "nbs-input");
    this.input.rows = 2;
    this.input.setAttribute("aria-label", "Prompt for every pane");
    this.input.placeholder = "Message";
    const buttons = this.make("div", "nbs-buttons");
    this.sendButton = this.button("nbs-send", "Send", "Send to every pane (Enter)");
    this.sendButton.disabled = true;
    this.stopButton = this.button("nbs-stop", "Stop all", "Stop every pane (Escape)");
    this.stopButton.disabled = true;
    this.clearButton = this.button("nbs-clear", "Clear", "Clear every pane");
    this.clearButton.disabled = true;
    buttons.append(this.sendButton, this.stopButton, this.clearButton);
    form.append(this.input, buttons);
    this.makeComposer(form, this.input, () => this.updateSend());

    this.root.append(this.header, this.grid, form, this.live);

    const opts = { signal: this.listeners.signal };
    this.input.addEventListener(
      "keydown",
      (ev) => this.onInputKeydown(ev, () => this.submit()),
      opts,
    );
    this.input.addEventListener("input", () => this.updateSend(), opts);
    this.sendButton.addEventListener("click", () => this.submit(), opts);
    this.stopButton.addEventListener("click", () => this.actions.stop(), opts);
    this.clearButton.addEventListener(
      "click",
      () => {
        this.actions.clear();
        for (const p of this.panes) p.list.follow();
        this.input.focus();
      },
      opts,
    );
  }

  override setPlaceholder(placeholder: string): void {
    this.input.placeholder = placeholder || "Message";
  }

  override setPanes(panes: readonly PaneInfo[]): void {
    this.labels = panes;
    const before = this.panes.length;
    this.ensurePanes(panes.length);
    this.panes.forEach((p, i) => {
      this.setPaneLabel(p, i);
    });
    if (this.panes.length > before && this.order.length > 0) {
      // a pane added later gets the prompts it missed (rare: the panes are set once)
      this.route();
      this.paintUnpainted(performance.now());
    }
  }

  paint(changes: Changes, summary: Summary, now: number, announce = true): void {
    if (changes.order !== null) {
      this.order = changes.order;
      this.route();
    }
    let announcement = "";
    for (const change of changes.messages) {
      const label = this.paintChange(change, now);
      const pane = paneOf(change.entry);
      if (label !== null && pane !== null) {
        const name = this.panes[pane]?.label.textContent ?? "";
        announcement = name === "" ? label : `${name}: ${label}`;
      }
    }
    this.paintUnpainted(now);
    if (announce) {
      this.announce(announcement);
    }
    this.panes.forEach((p, i) => {
      this.updatePaneStatus(p);
      this.setDisabled(p.stop, !summary.activePanes.has(i));
    });
    this.setDisabled(this.stopButton, !summary.active);
    this.setDisabled(this.clearButton, summary.empty);
  }

  /**
   * Messages a list shows with no change this frame (the prompts a pane added
   * later missed) are painted whole, from the buffer.
   */
  private paintUnpainted(now: number): void {
    for (const p of this.panes) {
      for (const id of p.list.unpainted()) {
        const entry = this.lookup(id);
        if (entry !== undefined) {
          p.list.paint(
            { entry, replaced: true, appended: "", reasoningAppended: "", meta: true },
            now,
          );
        }
      }
    }
  }

  /** Gives each pane's list its messages, in order. */
  private route(): void {
    const perPane: string[][] = this.panes.map(() => []);
    const shared: string[] = [];
    for (const id of this.order) {
      const e = this.lookup(id);
      if (e === undefined) {
        continue;
      }
      const pane = paneOf(e);
      if (pane === null) {
        shared.push(id);
        for (const ids of perPane) ids.push(id);
        continue;
      }
      while (perPane.length <= pane) {
        perPane.push([...shared]);
      }
      (perPane[pane] as string[]).push(id);
    }
    this.ensurePanes(perPane.length);
    this.panes.forEach((p, i) => {
      const ids = perPane[i] ?? shared;
      p.list.reconcile(ids);
      p.latest = null;
      for (let k = ids.length - 1; k >= 0; k--) {
        const e = this.lookup(ids[k] as string);
        if (e !== undefined && e.role === "assistant") {
          p.latest = e.id;
          break;
        }
      }
    });
  }

  private ensurePanes(n: number): void {
    while (this.panes.length < Math.max(n, 1)) {
      const i = this.panes.length;
      const el = this.make("section", "nbs-pane");
      el.dataset.pane = String(i);
      const head = this.make("div", "nbs-pane-head");
      const label = this.make("span", "nbs-pane-label");
      const status = this.make("span", "nbs-pane-status");
      const stop = this.button("nbs-pane-stop", "Stop", "Stop this pane");
      stop.disabled = true;
      head.append(label, status, stop);
      const list = this.newList(`Pane ${i + 1}`);
      el.append(head, list.el);
      this.grid.appendChild(el);
      const pane: Pane = { el, label, status, stop, list, latest: null, shownStatus: "" };
      stop.addEventListener("click", () => this.actions.stopPane(i), {
        signal: this.listeners.signal,
      });
      this.panes.push(pane);
      this.setPaneLabel(pane, i);
    }
    this.grid.style.setProperty("--nbs-pane-count", String(this.panes.length));
  }

  private setPaneLabel(p: Pane, i: number): void {
    const name = this.labels[i]?.label || `Pane ${i + 1}`;
    if (p.label.textContent !== name) {
      p.label.textContent = name;
      p.label.title = name;
      p.el.setAttribute("aria-label", name);
      p.list.list.setAttribute("aria-label", `Answers of ${name}`);
      p.stop.setAttribute("aria-label", `Stop ${name}`);
      p.stop.title = `Stop ${name}`;
    }
  }

  /** The pane's head repeats its latest reply's status line (live rate included). */
  private updatePaneStatus(p: Pane): void {
    const latest = p.latest === null ? undefined : this.lookup(p.latest);
    const label = p.latest === null ? "" : p.list.label(p.latest);
    if (p.status.textContent !== label) {
      p.status.textContent = label;
      p.status.title = label;
    }
    const status = latest?.status ?? "";
    if (p.shownStatus !== status) {
      p.shownStatus = status;
      if (status === "") {
        delete p.el.dataset.status;
      } else {
        p.el.dataset.status = status;
      }
    }
  }

  private updateSend(): void {
    this.setDisabled(this.sendButton, this.input.value.trim() === "");
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (text === "") {
      return;
    }
    this.sendWithAttachments(text);
    this.input.value = "";
    this.updateSend();
    for (const p of this.panes) p.list.follow();
  }
}
