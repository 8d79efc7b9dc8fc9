/**
 * A reply's tool calls (#20), and the rounds of the agent loop after them: owns
 * one `div.nbs-tool-parts`, which messages.ts puts after the reply's first text
 * (its head: the model's thinking and first words, shown as any reply's).
 *
 *   div.nbs-tool-parts
 *     div.nbs-tool[data-state][data-call=n]       one card per call, in order
 *       div.nbs-tool-head    span.nbs-tool-name (the tool's name, as text),
 *                            span.nbs-tool-state ("waiting for your approval"...),
 *                            span.nbs-tool-time ("0.4 s", once it ran)
 *       pre.nbs-tool-args    the arguments as they stream (text nodes, appended;
 *                            a bounded height that scrolls, so the card does not
 *                            jump as they grow); span.nbs-tool-cut if the kernel
 *                            left some out
 *       div.nbs-tool-approval   while it waits: Allow, Always allow (where offered),
 *                            Deny (button.nbs-tool-decide[data-decision]); the kernel
 *                            checks every answer, this view only asks
 *       div.nbs-tool-error   why it ended in error / denied / cancelled
 *       details.nbs-tool-result   what it returned: an image, an HTML table or
 *                            Markdown (sanitized like model output), and the text
 *                            the model was told; folded when long
 *     div.nbs-round          a later round: its reasoning block and its answer
 *
 * Everything from the kernel here is hostile text: names, ids, arguments and
 * results go in as text nodes or through the sanitizer (sanitize.ts); an image
 * only as a PNG / JPEG `data:` URL of base64 characters, never a URL that would
 * load something. Only messages.ts creates it, from its paint; the buttons are
 * handled by the view's one delegated click listener (view.ts). Runs on the
 * browser's main thread only.
 *
 * It is the tools chunk (chunks/tools.ts, built into `static/tools.js`): a
 * plain chat never shows a card, so the bundle a page parses at first render
 * does not carry this module (chunks.ts). It imports only types of the bundle:
 * what it runs of the bundle's (the reasoning block of a later round, the
 * Markdown sinks, the sanitizer, the labels of the states) comes in
 * {@link ToolPartsOptions.kit}, the bundle's own copies (toolhost.ts), so that
 * nothing is bundled twice and a result's HTML goes through the very sanitizer
 * the rest of the view uses. build.mjs fails if the chunk bundles another module.
 */
import type { Entry } from "./buffer";
import type { Highlighter } from "./highlight";
import type { FullSink, MarkdownSink, renderOnce, Sink } from "./incremental";
import type { ToolCallMeta, ToolRun } from "./protocol";
import type { ReasoningBlock } from "./reasoning";
import type { sanitize } from "./sanitize";
import type { SizedMode } from "./sized";
import type { toolStateLabel } from "./status";

/** What the tools chunk runs of the bundle: the bundle's own (toolhost.ts `TOOL_KIT`). */
export interface ToolKit {
  ReasoningBlock: typeof ReasoningBlock;
  FullSink: typeof FullSink;
  MarkdownSink: typeof MarkdownSink;
  /** Markdown rendered whole and sanitized (a result's `text/markdown`) */
  renderOnce: typeof renderOnce;
  /** the view's sanitizer (a result's `text/html`) */
  sanitize: typeof sanitize;
  toolStateLabel: typeof toolStateLabel;
  FINAL_STATUSES: ReadonlySet<string>;
  FINAL_TOOL_STATES: ReadonlySet<string>;
}

export interface ToolPartsOptions {
  highlighter: Highlighter | null;
  /** "full": the naive renderer (benchmarks) */
  markdown: "incremental" | "full";
  /** how laid-out blocks skip layout (sized.ts; "at-once": the previous way, benchmarks) */
  sized: SizedMode;
  signal: AbortSignal;
  /** what it runs of the bundle (see the module's comment) */
  kit: ToolKit;
}

/** A result longer than this (characters) shows folded, and so does a rich one. */
export const RESULT_FOLD_CHARS = 600;

const BASE64 = /^[A-Za-z0-9+/=\s]+$/;

function make<K extends keyof HTMLElementTagNameMap>(
  doc: Document,
  tag: K,
  cls: string,
): HTMLElementTagNameMap[K] {
  const el = doc.createElement(tag);
  el.className = cls;
  return el;
}

function seconds(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

class ToolCard {
  readonly el: HTMLDivElement;
  private readonly doc: Document;
  private readonly kit: ToolKit;
  private readonly name: HTMLElement;
  private readonly state: HTMLElement;
  private readonly time: HTMLElement;
  private readonly args: HTMLPreElement;
  private readonly cut: HTMLElement;
  private readonly error: HTMLElement;
  private approval: HTMLElement | null = null;
  private result: HTMLDetailsElement | null = null;
  private argsNode: Text;
  private argsLength = 0;
  /** the arguments grew since the last settle: follow their end there */
  private argsGrew = false;
  /** the arguments' scrollTop this card last set (the user scrolled up: it is less) */
  private argsTop = 0;
  private shown = "";

  constructor(doc: Document, n: number, kit: ToolKit) {
    this.doc = doc;
    this.kit = kit;
    this.el = make(doc, "div", "nbs-tool");
    this.el.dataset.call = String(n);
    this.el.setAttribute("role", "group");
    const head = make(doc, "div", "nbs-tool-head");
    this.name = make(doc, "span", "nbs-tool-name");
    this.state = make(doc, "span", "nbs-tool-state");
    this.time = make(doc, "span", "nbs-tool-time");
    head.append(this.name, this.state, this.time);
    this.args = make(doc, "pre", "nbs-tool-args");
    this.args.tabIndex = 0; // scrollable by keyboard
    this.args.setAttribute("aria-label", "Arguments");
    this.argsNode = doc.createTextNode("");
    this.args.append(this.argsNode);
    this.cut = make(doc, "span", "nbs-tool-cut");
    this.cut.hidden = true;
    this.error = make(doc, "div", "nbs-tool-error");
    this.error.hidden = true;
    this.el.append(head, this.args, this.cut, this.error);
  }

  appendArgs(text: string): void {
    if (text === "") {
      return;
    }
    // one text node grows (appendData), a fresh one past 4 KB: never a re-render
    if (this.argsNode.length > 4096) {
      this.argsNode = this.doc.createTextNode("");
      this.args.append(this.argsNode);
    }
    this.argsNode.appendData(text);
    this.argsLength += text.length;
    this.argsGrew = true; // followed in settle(): reading layout here would lay the page out
  }

  /**
   * After the frame's paints (the page loop calls it once every view wrote):
   * follow the arguments' end while they stream, unless the user scrolled up
   * in them since this card last scrolled them (back near the end: followed again).
   */
  settle(): void {
    if (!this.argsGrew) {
      return;
    }
    this.argsGrew = false;
    const pre = this.args;
    const top = pre.scrollTop;
    if (top >= this.argsTop - 1 || pre.scrollHeight - top - pre.clientHeight < 40) {
      pre.scrollTop = pre.scrollHeight;
      this.argsTop = pre.scrollTop;
    }
  }

  /** What the tool returned (once): its text, and the richest display the view takes. */
  setResult(text: string, display: Record<string, unknown>): void {
    this.result?.remove();
    const details = make(this.doc, "details", "nbs-tool-result");
    const summary = make(this.doc, "summary", "nbs-tool-result-summary");
    summary.textContent = "Result";
    details.append(summary);
    const rich = this.richDisplay(display);
    if (rich !== null) {
      details.append(rich);
      const told = make(this.doc, "details", "nbs-tool-told");
      const s = make(this.doc, "summary", "nbs-tool-told-summary");
      s.textContent = "What the model was told";
      const pre = make(this.doc, "pre", "nbs-tool-text");
      pre.textContent = text;
      told.append(s, pre);
      details.append(told);
    } else {
      const pre = make(this.doc, "pre", "nbs-tool-text");
      pre.textContent = text;
      details.append(pre);
    }
    const omitted = display.omitted;
    if (typeof omitted === "object" && omitted !== null) {
      const note = make(this.doc, "div", "nbs-tool-omitted");
      const sizes = Object.entries(omitted as Record<string, unknown>)
        .filter(([, v]) => typeof v === "number")
        .map(([k, v]) => `${k} (${Math.round((v as number) / 1000)} KB)`);
      note.textContent = `Left out for its size: ${sizes.join(", ")}`;
      details.append(note);
    }
    details.open = rich === null && text.length <= RESULT_FOLD_CHARS;
    this.result = details;
    this.el.append(details);
  }

  /** An image, an HTML fragment or Markdown, sanitized; null when there is none. */
  private richDisplay(display: Record<string, unknown>): HTMLElement | null {
    for (const mime of ["image/png", "image/jpeg"]) {
      const data = display[mime];
      if (typeof data === "string" && data.length > 0 && BASE64.test(data)) {
        const img = make(this.doc, "img", "nbs-tool-image");
        img.alt = "the tool's image";
        img.src = `data:${mime};base64,${data.replace(/\s+/g, "")}`;
        return img;
      }
    }
    const html = display["text/html"];
    if (typeof html === "string") {
      const div = make(this.doc, "div", "nbs-tool-html nbs-md");
      div.append(this.kit.sanitize(this.doc, html));
      return div;
    }
    const md = display["text/markdown"];
    if (typeof md === "string") {
      const div = make(this.doc, "div", "nbs-tool-markdown nbs-md");
      div.append(this.kit.renderOnce(this.doc, md));
      return div;
    }
    return null;
  }

  /** The chrome from the call's meta; writes only what changed. */
  update(meta: ToolCallMeta | null, replyFinal: boolean): void {
    if (meta === null) {
      return;
    }
    const asking = meta.state === "awaiting_approval" && !replyFinal;
    const key = JSON.stringify([meta, asking]);
    if (key === this.shown) {
      return;
    }
    this.shown = key;
    const label = this.kit.toolStateLabel(meta.state);
    this.el.dataset.state = meta.state;
    this.el.setAttribute("aria-label", `Tool call ${meta.name}: ${label}`);
    this.name.textContent = meta.name;
    this.state.textContent = label;
    this.time.textContent = meta.ms === undefined ? "" : seconds(meta.ms);
    this.time.hidden = meta.ms === undefined;
    this.cut.hidden = meta.cut === undefined;
    this.cut.textContent =
      meta.cut === undefined ? "" : `… ${meta.cut.toLocaleString("en-US")} more characters`;
    const error = meta.error ?? "";
    this.error.hidden = error === "" || !this.kit.FINAL_TOOL_STATES.has(meta.state);
    this.error.textContent = error;
    if (asking && this.approval === null) {
      this.approval = this.makeApproval(meta);
      this.args.after(this.approval);
    } else if (!asking && this.approval !== null) {
      this.approval.remove();
      this.approval = null;
    }
  }

  private makeApproval(meta: ToolCallMeta): HTMLElement {
    const box = make(this.doc, "div", "nbs-tool-approval");
    const ask = make(this.doc, "span", "nbs-tool-ask");
    ask.textContent = `Run ${meta.name} with these arguments?`;
    box.append(ask);
    const button = (decision: string, text: string, label: string) => {
      const b = make(this.doc, "button", `nbs-tool-decide nbs-tool-${decision}`);
      b.type = "button";
      b.textContent = text;
      b.title = label;
      b.setAttribute("aria-label", label);
      b.dataset.decision = decision;
      b.dataset.call = meta.id;
      return b;
    };
    box.append(button("allow", "Allow", `Allow this call of ${meta.name}`));
    if (meta.always === true) {
      box.append(button("always", "Always allow", `Allow ${meta.name} from now on, in this chat`));
    }
    box.append(button("deny", "Deny", `Deny this call of ${meta.name} (the model is told)`));
    return box;
  }
}

/** A later round of the loop: its reasoning and its answer text. */
interface Round {
  el: HTMLDivElement;
  reasoning: ReasoningBlock | null;
  reasoningText: string;
  textEl: HTMLDivElement | null;
  sink: Sink | null;
  text: string;
}

export class ToolParts {
  readonly el: HTMLDivElement;
  private readonly doc: Document;
  private readonly cards = new Map<number, ToolCard>();
  private readonly rounds: Round[] = [];
  /** where text goes now: null after a card or a round marker (the next text opens a round) */
  private current: Round | null = null;

  constructor(
    doc: Document,
    private readonly options: ToolPartsOptions,
  ) {
    this.doc = doc;
    this.el = make(doc, "div", "nbs-tool-parts");
  }

  /** The frame's update: new runs in order (or all of them, `replaced`), then the cards' chrome. */
  paint(e: Readonly<Entry>, replaced: boolean, tail: readonly ToolRun[], now: number): void {
    const final = this.options.kit.FINAL_STATUSES.has(e.status);
    if (replaced) {
      this.el.textContent = "";
      this.cards.clear();
      this.rounds.length = 0;
      this.current = null;
    }
    for (const run of replaced ? (e.toolTail ?? []) : tail) {
      this.add(run, e, now);
    }
    const tools = e.tools ?? [];
    for (const [n, card] of this.cards) {
      card.update(tools[n] ?? null, final);
    }
    const last = this.rounds[this.rounds.length - 1];
    for (const r of this.rounds) {
      if (r.reasoning !== null) {
        const live = !final && r === last && r.text === "";
        r.reasoning.paint(this.roundEntry(r, live ? e.status : "done"), false, "", now);
      }
      if (final) {
        r.sink?.finish();
      }
    }
  }

  /** After the frame's paints: what reads layout (the cards' arguments follow their end). */
  settle(): void {
    for (const card of this.cards.values()) {
      card.settle();
    }
  }

  private add(run: ToolRun, e: Readonly<Entry>, now: number): void {
    switch (run.type) {
      case "tool": {
        let card = this.cards.get(run.n);
        if (card === undefined) {
          card = new ToolCard(this.doc, run.n, this.options.kit);
          this.cards.set(run.n, card);
          this.el.append(card.el);
          this.current = null;
        }
        card.appendArgs(run.text);
        return;
      }
      case "tool_result":
        this.cards.get(run.n)?.setResult(run.text, run.display);
        return;
      case "round":
        this.current = null;
        return;
      case "reasoning": {
        if (run.text === "") {
          return;
        }
        const r = this.round();
        if (r.reasoning === null) {
          r.reasoning = new this.options.kit.ReasoningBlock(
            this.doc,
            {
              highlighter: this.options.highlighter,
              markdown: this.options.markdown,
              sized: this.options.sized,
            },
            this.options.signal,
          );
          r.el.prepend(r.reasoning.el);
        }
        r.reasoningText += run.text;
        r.reasoning.paint(this.roundEntry(r, e.status), false, run.text, now);
        return;
      }
      case "answer": {
        if (run.text === "") {
          return;
        }
        const r = this.round();
        if (r.sink === null) {
          r.textEl = make(this.doc, "div", "nbs-text nbs-md");
          r.el.append(r.textEl);
          r.sink = this.makeSink(r.textEl);
        }
        r.text += run.text;
        r.sink.append(run.text);
        return;
      }
    }
  }

  private round(): Round {
    if (this.current === null) {
      const el = make(this.doc, "div", "nbs-round");
      this.el.append(el);
      this.current = { el, reasoning: null, reasoningText: "", textEl: null, sink: null, text: "" };
      this.rounds.push(this.current);
    }
    return this.current;
  }

  /** What a round's reasoning block reads: the round's own texts, the reply's status. */
  private roundEntry(r: Round, status: string): Readonly<Entry> {
    return {
      id: "",
      role: "assistant",
      text: r.text,
      reasoning: r.reasoningText,
      seq: 0,
      status: status as Entry["status"],
      error: null,
      detail: null,
      stats: {},
    };
  }

  private makeSink(el: HTMLElement): Sink {
    const { kit, highlighter } = this.options;
    if (this.options.markdown === "full") {
      return new kit.FullSink(el);
    }
    return new kit.MarkdownSink(el, {
      sized: this.options.sized,
      ...(highlighter === null ? {} : { onClosedCode: (code) => highlighter.enqueue(code) }),
    });
  }
}
