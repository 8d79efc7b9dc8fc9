/**
 * The fonts for a long chat's characters, found before a reader scrolls to them.
 *
 * Scrolling back through a 1,000-message chat of model-shaped Markdown, the
 * frames that rendered the first answers with Chinese, Japanese, Korean,
 * emoji or formulas took 40–67 ms of layout alone (traced), most of it in
 * fonts, not in the script that lazy.ts budgets:
 *
 * - **Fallback fonts.** For a character its fonts do not have, Chromium asks
 *   the browser process (fontconfig) for a fallback font: 0.4–0.5 ms a round
 *   trip (`FontCache::FallbackFontForCharacter` in `Layout`), 50 of them in one
 *   frame. It asks once per run of text, for the run's first character without
 *   a glyph, and keeps the answer per character; so which characters are asked
 *   for depends on how the text falls into runs. A formula's one-letter `<mi>`
 *   is laid out as its mathematical italic (U+1D44E 𝑎 for a): a character of
 *   its own, asked for letter by letter (26 asks, 76 ms, for a–z, traced).
 * - **Strikes.** Each size and weight of a font is a strike whose rendering
 *   settings Chromium asks the browser process for once (1–5 ms each, 40 ms
 *   once while the browser process was busy): 8–12 of them in one frame for
 *   the first headings, tables and code with Chinese in them.
 *
 * So the characters of deferred messages that may need a fallback font (every
 * character beyond Latin, spaces aside) are laid out, hidden, before they
 * scroll into view ({@link GlyphWarmer}): each in an inline block of its own
 * (a run of its own: ten inline spans are one run and ask once; ten inline
 * blocks ask ten times, traced), a formula's letters as MathML `<mi>`s, and the
 * first character of each script (Han, kana, Hangul, emoji, and other blocks
 * of 256 code points) in each style of the messages' Markdown (`.nbs-md`
 * headings, bold, italic, code, table heads, quotes: the strikes). lazy.ts
 * gives it the frames with nothing else to do, a time budget each:
 * {@link GlyphWarmer.step} lays a batch out at once (a forced layout of its
 * box) and times it, sizes the next batch from what an item cost, lays the
 * samples in a style out one a batch (a strike's cost is not known ahead),
 * and stops when the budget is spent. Each character is laid out once per
 * page ({@link pageGlyphs}: the browser's answers are the page's). Traced with
 * Chinese and emoji fonts installed, the frames scrolling back to those
 * answers asked the browser process nothing more for their characters
 * (40–43 asks before, 0 after) and for 3–5 strikes instead of 8–9.
 *
 * A chunk of its own (chunks/glyphs.ts, about 3 KB), asked for once a list
 * keeps placeholders whose text has such characters (a long history): a chat
 * without one never loads it.
 *
 * Runs on the browser's main thread only; a {@link GlyphWarmer} is owned by
 * the document it warms.
 */
import { MAYBE_FALLBACK } from "./fallback";

/** Every character that may need a fallback font (fallback.ts), for `match`. */
const ALL_MAYBE_FALLBACK = new RegExp(MAYBE_FALLBACK.source, "gu");
/** Text that may hold a formula (math.ts typesets `$…$`, `$$…$$`, `\(…\)` and `\[…\]`). */
const MAYBE_MATH = /\$|\\\(|\\\[/;
/**
 * The letters a formula shows in italics: MathML lays an `<mi>` of one letter
 * out as its mathematical italic (U+1D44E 𝑎 for a), a character no text has,
 * asked for again, one letter at a time (26 asks, 76 ms, for the first formula
 * with a–z in a plain page, traced).
 */
const MATH_LETTERS = [
  ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
  ..."αβγδεζηθικλμνξοπρστυφχψω",
];
const MATHML = "http://www.w3.org/1998/Math/MathML";
/**
 * The styles a message's Markdown shows text in (widget.css `.nbs-md`): each
 * size and weight of a fallback font is a "strike" the browser asks the
 * browser process about once (1–5 ms each, traced: 8–12 of them in one frame
 * scrolling back to the first answers with headings and tables in Chinese).
 */
export const STYLES = [
  "h1",
  "h2",
  "h3",
  "h4",
  "strong",
  "em",
  "code",
  "pre",
  "th",
  "blockquote",
] as const;
type Style = (typeof STYLES)[number];
/** One thing to lay out: a character (of text or a formula), or a script's sample in a style. */
type Item =
  | { kind: "text" | "math"; glyph: string }
  | { kind: "style"; glyph: string; style: Style }
  | { kind: "math-sizes"; glyph: "" };
/** The first batch a frame lays out (characters), before it has timed one. */
const FIRST_BATCH = 8;
/** The largest batch laid out at once (characters). */
const MAX_BATCH = 256;

/** The characters of `text` that may need a fallback font, in order, repeated ones too. */
export function glyphsOf(text: string): string[] {
  return text.match(ALL_MAYBE_FALLBACK) ?? [];
}

/** What one {@link GlyphWarmer.step} did, for tests and benchmarks. */
export interface GlyphStep {
  /** characters laid out */
  glyphs: number;
  /** batches (forced layouts) */
  batches: number;
}

export class GlyphWarmer {
  /** every character queued so far (laid out, or waiting) */
  private readonly seen = new Set<string>();
  /** what waits to be laid out, from `head` on */
  private queue: Item[] = [];
  /** the scripts seen (a key per script, {@link scriptOf}) */
  private readonly scripts = new Set<string>();
  /** the formulas' letters are queued */
  private mathQueued = false;
  private head = 0;
  /** ms a character of text or of a formula cost in the last timed batch of its kind */
  private readonly perGlyphMs = new Map<Item["kind"], number>();
  /** characters laid out so far, for tests and benchmarks */
  warmed = 0;

  /** Queues the characters of `text` that the page has not laid out or queued yet. */
  add(text: string): void {
    const samples: string[] = [];
    for (const g of glyphsOf(text)) {
      if (!this.seen.has(g)) {
        this.seen.add(g);
        this.queue.push({ kind: "text", glyph: g });
        const script = scriptOf(g);
        if (!this.scripts.has(script)) {
          this.scripts.add(script);
          samples.push(g);
        }
      }
    }
    // a script new to the page: its first character in each style, after the characters
    for (const style of STYLES) {
      for (const g of samples) {
        this.queue.push({ kind: "style", glyph: g, style });
      }
    }
    if (!this.mathQueued && MAYBE_MATH.test(text)) {
      this.mathQueued = true;
      for (const g of MATH_LETTERS) {
        this.queue.push({ kind: "math", glyph: g });
      }
      this.queue.push({ kind: "math-sizes", glyph: "" });
    }
  }

  /** Characters waiting to be laid out. */
  get pending(): number {
    return this.queue.length - this.head;
  }

  /**
   * Lays out waiting characters in `box` (hidden: visibility hidden, no size
   * of its own), a batch at a time, each batch read back at once (a forced
   * layout) and timed with `now`, while the time since the step began is
   * under `budgetMs` (one batch at least). Leaves `box` empty.
   */
  step(box: HTMLElement, now: () => number, budgetMs: number): GlyphStep {
    const start = now();
    const done: GlyphStep = { glyphs: 0, batches: 0 };
    while (this.pending > 0) {
      const used = now() - start;
      if (done.batches > 0 && used >= budgetMs) {
        break;
      }
      const kind = (this.queue[this.head] as Item).kind;
      const per = this.perGlyphMs.get(kind);
      // A sample in a style or a formula's sizes may each cost a strike (1–40 ms, traced,
      // as busy as the browser process is): one a batch, so the budget is checked
      // between them. Characters come in batches sized from what one cost.
      const n =
        kind === "style" || kind === "math-sizes"
          ? 1
          : per === undefined
            ? FIRST_BATCH
            : Math.max(1, Math.min(MAX_BATCH, Math.floor((budgetMs - used) / per)));
      let end = this.head;
      while (end < this.queue.length && end - this.head < n && this.queue[end]?.kind === kind) {
        end++;
      }
      const batch = this.queue.slice(this.head, end);
      this.head = end;
      const t0 = now();
      box.replaceChildren(...batchNodes(box.ownerDocument, batch));
      void box.getBoundingClientRect(); // lays it out now: the fallback fonts are asked for here
      this.perGlyphMs.set(kind, Math.max(0.001, (now() - t0) / batch.length));
      done.glyphs += batch.length;
      done.batches++;
    }
    box.replaceChildren();
    if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head); // what was laid out goes
      this.head = 0;
    }
    this.warmed += done.glyphs;
    return done;
  }
}

/**
 * A key for the script of the character `g`: characters of one script mostly
 * come from one fallback font (emoji, Han, kana, Hangul; other characters by
 * their block of 256 code points).
 */
export function scriptOf(g: string): string {
  if (/\p{Extended_Pictographic}/u.test(g)) {
    return "emoji";
  }
  if (/\p{Script=Han}/u.test(g)) {
    return "han";
  }
  if (/[\p{Script=Hiragana}\p{Script=Katakana}]/u.test(g)) {
    return "kana";
  }
  if (/\p{Script=Hangul}/u.test(g)) {
    return "hangul";
  }
  return `u${((g.codePointAt(0) ?? 0) >> 8).toString(16)}`;
}

function mathml(doc: Document, tag: string, ...children: (Element | string)[]): Element {
  const el = doc.createElementNS(MATHML, tag);
  el.append(...children);
  return el;
}

/**
 * A batch as nodes, in a `.nbs-md` block (the messages' Markdown styles):
 * each character an inline block of its own (the browser asks for a fallback
 * font once per run of text, for its first character without one, and keeps
 * the answer per character: a run of ten new characters, or ten inline spans,
 * asks for one; ten inline blocks ask for ten, traced), a formula's letters as
 * `<mi>`s of one `<math>`, a script's sample in an element of its style, and
 * a formula's sizes (display, inline, scripts) as one of each.
 */
function batchNodes(doc: Document, batch: Item[]): Node[] {
  const md = doc.createElement("div");
  md.className = "nbs-md";
  let math: Element | null = null;
  for (const item of batch) {
    if (item.kind === "math") {
      if (math === null) {
        math = mathml(doc, "math");
        md.append(math);
      }
      math.append(mathml(doc, "mi", item.glyph));
    } else if (item.kind === "math-sizes") {
      const scripts = () =>
        mathml(
          doc,
          "msubsup",
          mathml(doc, "mi", "x"),
          mathml(doc, "mi", "i"),
          mathml(doc, "mn", "2"),
        );
      const block = mathml(doc, "math", scripts(), mathml(doc, "mo", "="), mathml(doc, "mo", "∑"));
      block.setAttribute("display", "block");
      md.append(block, mathml(doc, "math", scripts()));
    } else {
      const el = doc.createElement(item.kind === "style" ? item.style : "span");
      el.style.display = "inline-block"; // a run of its own (inline spans are shaped as one)
      el.textContent = item.glyph;
      md.append(el);
    }
  }
  return [md];
}

const warmers = new WeakMap<Document, GlyphWarmer>();

/** The glyph warmer of the page `doc` (one for every chat on it). */
export function pageGlyphs(doc: Document): GlyphWarmer {
  let w = warmers.get(doc);
  if (w === undefined) {
    w = new GlyphWarmer();
    warmers.set(doc, w);
  }
  return w;
}
