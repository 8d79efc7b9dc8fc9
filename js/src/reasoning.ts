/**
 * The reasoning block of an assistant message: the model's thinking, shown
 * above its answer. Owns one `details.nbs-reasoning` and everything in it:
 *
 *   details.nbs-reasoning[data-phase=thinking|done]
 *     summary.nbs-reasoning-summary   span.nbs-reasoning-label: "Thinking… 4 s",
 *                                     then "Thought for 12 s"
 *     div.nbs-reasoning-body          div.nbs-reasoning-text.nbs-md (the same sanitized,
 *                                     incremental Markdown as the answer),
 *                                     button.nbs-copy-reasoning
 *     span.nbs-offscreen[aria-live=polite]   says "Thinking" and "Thought for
 *                                     12 s" once each: screen readers hear the
 *                                     phases, never the tokens or the seconds
 *
 * It is open while the model thinks and folds when the answer starts (or the
 * reply ends); a click on the summary opens or folds it, and from then on the
 * user's choice wins. A reply shown whole (a saved notebook, a reload) shows it
 * folded. The seconds while thinking are this view's own clock since the first
 * reasoning arrived; once done, the kernel's `reasoning_ms` where the reply's
 * stats have it. Only messages.ts creates it, from its paint; the copy button
 * is handled by the view's one delegated click listener. Runs on the browser's
 * main thread only.
 */
import type { Entry } from "./buffer";
import type { Highlighter } from "./highlight";
import { FullSink, MarkdownSink, type Sink } from "./incremental";
import { FINAL_STATUSES } from "./protocol";
import type { SizedMode } from "./sized";
import { TextSink } from "./text";

export interface ReasoningOptions {
  highlighter: Highlighter | null;
  /** "full": the naive renderer (benchmarks) */
  markdown: "incremental" | "full";
  /** how laid-out blocks skip layout (sized.ts) */
  sized: SizedMode;
}

/** "4 s", "12 s", "1.5 s" */
export function seconds(ms: number, decimals = false): string {
  const s = Math.max(0, ms) / 1000;
  return decimals && s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

/** Whether `e` is still thinking: live, with reasoning and no answer yet. */
export function isThinking(e: Readonly<Entry>): boolean {
  return !FINAL_STATUSES.has(e.status) && e.reasoning !== "" && e.text === "";
}

export class ReasoningBlock {
  readonly el: HTMLDetailsElement;
  private readonly label: HTMLElement;
  private readonly announcer: HTMLElement;
  private readonly textEl: HTMLElement;
  private sink: Sink;
  private failed = false;
  /** when this view first saw reasoning live, and when thinking ended (view clock) */
  private startedAt: number | null = null;
  private endedAt: number | null = null;
  private phase: "" | "thinking" | "done" = "";
  private shownLabel = "";
  /** the open state the block last set itself; a toggle to anything else is the user's */
  private setOpen = false;
  private userChose = false;

  constructor(
    doc: Document,
    private readonly options: ReasoningOptions,
    signal: AbortSignal,
  ) {
    const make = <K extends keyof HTMLElementTagNameMap>(tag: K, cls: string) => {
      const el = doc.createElement(tag);
      el.className = cls;
      return el;
    };
    this.el = make("details", "nbs-reasoning");
    const summary = make("summary", "nbs-reasoning-summary");
    this.label = make("span", "nbs-reasoning-label");
    summary.append(this.label);
    const body = make("div", "nbs-reasoning-body");
    this.textEl = make("div", "nbs-reasoning-text nbs-md");
    const copy = make("button", "nbs-copy-reasoning");
    copy.type = "button";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy the reasoning as Markdown");
    copy.title = "Copy the reasoning as Markdown";
    body.append(this.textEl, copy);
    this.announcer = make("span", "nbs-offscreen");
    this.announcer.setAttribute("aria-live", "polite");
    this.el.append(summary, body, this.announcer);
    this.sink = this.makeSink();
    this.el.addEventListener(
      "toggle",
      () => {
        if (this.el.open !== this.setOpen) {
          this.userChose = true;
          this.setOpen = this.el.open;
        }
      },
      { signal },
    );
  }

  /** The frame's update: the new reasoning text, the label, open or folded. */
  paint(e: Readonly<Entry>, replaced: boolean, appended: string, now: number): void {
    const final = FINAL_STATUSES.has(e.status);
    try {
      if (replaced) {
        this.sink.replace(e.reasoning, final);
      } else if (appended !== "") {
        this.sink.append(appended);
      }
      if (final) {
        this.sink.finish();
      }
    } catch (err) {
      if (this.failed) {
        throw err;
      }
      console.error("nbstream: rendering reasoning failed; showing it as plain text", err);
      this.failed = true;
      this.textEl.className = "nbs-reasoning-text";
      this.sink = new TextSink(this.textEl);
      this.sink.replace(e.reasoning);
    }
    const thinking = isThinking(e);
    if (thinking) {
      this.startedAt ??= now;
    } else if (this.startedAt !== null) {
      this.endedAt ??= now;
    }
    const phase = thinking ? "thinking" : "done";
    if (phase !== this.phase) {
      const first = this.phase === "";
      this.phase = phase;
      this.el.dataset.phase = phase;
      // open while thinking; folded once the answer starts, and when shown whole
      if (!this.userChose && (first || phase === "done")) {
        this.open(thinking);
      }
    }
    const label = thinking
      ? `Thinking… ${seconds(now - (this.startedAt ?? now))}`
      : this.doneLabel(e);
    if (label !== this.shownLabel) {
      this.shownLabel = label;
      this.label.textContent = label;
      const said = thinking ? "Thinking" : label;
      if (this.announcer.textContent !== said) {
        this.announcer.textContent = said;
      }
    }
  }

  private doneLabel(e: Readonly<Entry>): string {
    const ms = e.stats.reasoning_ms;
    if (typeof ms === "number" && Number.isFinite(ms)) {
      return `Thought for ${seconds(ms, true)}`;
    }
    if (this.startedAt !== null && this.endedAt !== null) {
      return `Thought for ${seconds(this.endedAt - this.startedAt, true)}`;
    }
    return "Thought";
  }

  private open(open: boolean): void {
    this.setOpen = open;
    if (this.el.open !== open) {
      this.el.open = open;
    }
  }

  private makeSink(): Sink {
    if (this.options.markdown === "full") {
      return new FullSink(this.textEl);
    }
    const highlighter = this.options.highlighter;
    return new MarkdownSink(this.textEl, {
      sized: this.options.sized,
      ...(highlighter === null ? {} : { onClosedCode: (code) => highlighter.enqueue(code) }),
    });
  }
}
