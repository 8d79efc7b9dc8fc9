/**
 * Math in Markdown: the markdown-it rules that find TeX formulas, and their
 * rendering to MathML with Temml. Pure text in, HTML text out; no DOM. What it
 * returns goes through the sanitizer (sanitize.ts) like every other block.
 *
 * Delimiters: `$…$` and `\(…\)` inline; `$$…$$` and `\[…\]` as display math,
 * on lines of their own (a block) or inside a paragraph. A `$` follows
 * Pandoc's rule so that prices stay text (`$5 and $10`): an opening `$` is
 * followed by a non-space, a closing `$` is preceded by a non-space and not
 * followed by a digit. `\$` is a dollar sign.
 *
 * Streaming. A formula is shown only once its closing delimiter arrived:
 * - A display block (`$$` or `\[` at the start of a line) that is not closed
 *   runs to the end of its container, as one block. The rule never looks
 *   further than that, so the line-by-line cut of incremental.ts stays right
 *   (a paragraph before an open `$$` is final; nothing after it is parsed yet).
 *   While the text may still grow, that block shows its source, dimmed
 *   (`.nbs-math-pending`); once the text is complete, an unclosed block shows
 *   its source as text.
 * - Inline: in the last paragraph of a text that may grow (`env.mathOpen`),
 *   an opener whose closer has not arrived shows the rest of the paragraph as
 *   its source, dimmed, in place; without `mathOpen` it is plain text, as
 *   Markdown. So the complete text renders the same however it was streamed.
 * A formula that Temml cannot parse shows its source (`.nbs-math-source`),
 * never an error message or an exception.
 *
 * Why Temml and not KaTeX: both parse the same TeX, but KaTeX's MathML output
 * is meant as an accessible companion to its HTML and font files, whereas
 * Temml writes MathML for the browser's own math renderer (MathML Core, in
 * Chromium, Firefox and Safari) and needs no fonts; and bundled, Temml is the
 * smaller (about 59 KB against 77 KB gzip). Temml is not in the bundle: it is
 * the math chunk (chunks/math.ts, with its settings for untrusted input),
 * loaded on the first formula (chunks.ts). Until it is there, a formula shows
 * its source, dimmed, as one still waiting for its closer does; the list
 * renders the messages that showed one again once it arrived (chunks.ts
 * `noteMiss`). Rendered formulas are cached by source: the open
 * tail is re-rendered every frame, its finished formulas should cost nothing.
 *
 * Typesetting within a frame's budget. Temml takes a few ms a formula (more
 * while its code is cold), so an answer with many formulas rendered in one
 * task (a long chat opened on such an answer: its end is rendered in the
 * first frame) was a long task of its own. The formulas typeset in one task
 * (a frame's callback: the window ends at the first microtask checkpoint
 * after it) take at most the page loop's script budget (`budget`,
 * scheduler.ts `FRAME_BUDGET_MS`), one formula at least; the others come out
 * as their source, escaped, in an element with the class the formula gets
 * plus `.nbs-math-pending.nbs-math-deferred` (dimmed, as a formula waiting
 * for its closer), and {@link mathDeferrals} counts them: the message list
 * renders such a message again in a following frame (messages.ts), whose
 * renderer re-renders only the blocks that hold one (incremental.ts), until
 * every formula is typeset. The cache keeps what the current window used
 * (it may grow past its size for that window), so a message with more
 * formulas than the cache holds still converges.
 * Runs on the browser's main thread (called by the Markdown renderer); the
 * budget's state is per bundle copy, as the cache.
 */
import type { MarkdownIt, StateBlock, StateCore, StateInline, Token } from "markdown-it";
import { chunk, noteMiss, onChunk } from "./chunks";
import { FRAME_BUDGET_MS } from "./scheduler";

/** Longest formula source rendered; a longer one shows its source. */
export const MATH_MAX_CHARS = 4000;
/** Formulas kept typeset, at least (more while one window uses more). */
export const CACHE_SIZE = 256;

/** How the time spent typesetting is measured and bounded. */
export interface MathBudget {
  /** a monotonic clock in ms */
  now(): number;
  /** ms of typesetting one task may spend (one formula at least) */
  budgetMs: number;
}

/** The budget in force: the page loop's script budget on `performance.now`. */
const defaultBudget: MathBudget = {
  now: () => performance.now(),
  budgetMs: FRAME_BUDGET_MS,
};
let budget: MathBudget | null = defaultBudget;

/**
 * Sets how typesetting is bounded (tests give a clock of their own); null:
 * no bound (every formula typeset at once); no argument: the default.
 */
export function setMathBudget(b: MathBudget | null = defaultBudget): void {
  budget = b;
}

interface Cached {
  html: string | null;
  /** the budget window that used it last */
  window: number;
}

const cache = new Map<string, Cached>();
/** the current budget window (a task), its typesetting time and formulas so far */
let windowId = 0;
let windowOpen = false;
let spentMs = 0;
let typeset = 0;
/** formulas left for a later frame so far */
let deferred = 0;

function openWindow(): void {
  if (windowOpen) {
    return;
  }
  windowOpen = true;
  windowId++;
  spentMs = 0;
  typeset = 0;
  // the task ends at the next microtask checkpoint: the next one is a new window
  queueMicrotask(() => {
    windowOpen = false;
  });
}

/**
 * How many formulas were left for a later frame so far: a renderer compares
 * it before and after rendering, as chunks.ts `misses` for chunks, and renders
 * again in a following frame when it grew.
 */
export function mathDeferrals(): number {
  return deferred;
}

/** The number of formulas cached (tests). */
export function mathCacheSize(): number {
  return cache.size;
}

/** Empties the cache (tests). */
export function clearMathCache(): void {
  cache.clear();
}

/**
 * MathML for `tex`, or null when it does not parse (or is too long), or
 * undefined while the math chunk is not loaded (it is asked for then), or
 * false when this task's typesetting budget is spent (typeset in a later
 * frame; {@link mathDeferrals} counts it). The result still has to pass the
 * sanitizer.
 */
export function renderMath(tex: string, display: boolean): string | null | undefined | false {
  const key = `${display ? "D" : "I"}${tex}`;
  openWindow();
  const hit = cache.get(key);
  if (hit !== undefined) {
    // most recently used last, kept while this window lasts
    cache.delete(key);
    hit.window = windowId;
    cache.set(key, hit);
    return hit.html;
  }
  let html: string | null = null;
  if (tex.trim() !== "" && tex.length <= MATH_MAX_CHARS) {
    const engine = chunk("math");
    if (engine === null) {
      noteMiss("math");
      onChunk("math", warmUp); // once: a Set
      return undefined;
    }
    if (budget !== null && typeset > 0 && spentMs >= budget.budgetMs) {
      deferred++;
      return false;
    }
    const t0 = budget?.now() ?? 0;
    html = engine.renderTeX(tex, display);
    spentMs += (budget?.now() ?? 0) - t0;
    typeset++;
  }
  cache.set(key, { html, window: windowId });
  // the least recently used go, but never one this window used: a message with more
  // formulas than the cache holds, rendered again each frame, would evict its own
  while (cache.size > CACHE_SIZE) {
    const [oldest, entry] = cache.entries().next().value as [string, Cached];
    if (entry.window === windowId) {
      break;
    }
    cache.delete(oldest);
  }
  return html;
}

/** What {@link warmUp} typesets: a display formula of the usual constructs. */
export const WARM_TEX = "\\frac{a_i}{\\sqrt{b^2 + 1}} = \\sum_{k=1}^{n} \\alpha_k \\, x^{k}";

/**
 * Typesets {@link WARM_TEX} and drops it, in the task the math chunk arrived
 * in: Temml's first formula compiles its code (~20 ms of the frame that
 * rendered a 100-message chat's formulas again once it arrived, traced), and
 * that frame is then left its budget for the formulas themselves. Not counted
 * in any frame's budget, not cached.
 */
function warmUp(): void {
  try {
    chunk("math")?.renderTeX(WARM_TEX, true);
  } catch {
    // a warm-up only: the formulas themselves say what fails
  }
}

/** The classes of a formula left for a later frame (its source shows meanwhile, dimmed). */
export const DEFERRED = "nbs-math-pending nbs-math-deferred";
/** The selector of such a formula. */
export const DEFERRED_SELECTOR = ".nbs-math-deferred";

/** The env keys the math rules read. */
export interface MathEnv {
  /** the text may still grow: an unclosed formula at its end is pending, not text */
  mathOpen?: boolean;
  /** (set by the rules) the children of the inline token that may still grow */
  mathLastInline?: Token[] | undefined;
}

const CLOSER: Record<string, string> = { $: "$", $$: "$$", "\\(": "\\)", "\\[": "\\]" };

const DOLLAR = 0x24;
const BACKSLASH = 0x5c;

function isDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x39;
}

function isBlank(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || Number.isNaN(code);
}

/** Whether the character at `pos` is escaped by an odd run of backslashes before it. */
function escaped(src: string, pos: number, from: number): boolean {
  let n = 0;
  for (let i = pos - 1; i >= from && src.charCodeAt(i) === BACKSLASH; i--) {
    n++;
  }
  return n % 2 === 1;
}

/** The opener at `pos`, if any: `$$`, `$`, `\(` or `\[`. */
function openerAt(src: string, pos: number): string | null {
  const c = src.charCodeAt(pos);
  if (c === DOLLAR) {
    return src.charCodeAt(pos + 1) === DOLLAR ? "$$" : "$";
  }
  if (c === BACKSLASH) {
    const n = src.charCodeAt(pos + 1);
    if (n === 0x28) {
      return "\\(";
    }
    if (n === 0x5b) {
      return "\\[";
    }
  }
  return null;
}

interface Close {
  /** where the closer starts, or -1 when there is none */
  at: number;
  /** the closer is the last character so far: what follows could still change it */
  undecided: boolean;
  /** there is none and no later text can bring one (a `$` that cannot close came first) */
  never: boolean;
}

/** Finds the closer of the formula opened by `open` whose content starts at `start`. */
function findClose(src: string, start: number, max: number, open: string): Close {
  const close = CLOSER[open] as string;
  for (let at = src.indexOf(close, start); at !== -1 && at < max; at = src.indexOf(close, at + 1)) {
    if (open === "$") {
      if (escaped(src, at, start)) {
        continue;
      }
      // Pandoc: no space before the closer, no digit after it; the first
      // unescaped `$` decides (a `$` that cannot close ends the search).
      const ok = !isBlank(src.charCodeAt(at - 1)) && !isDigit(src.charCodeAt(at + 1));
      return ok
        ? { at, undecided: at + 1 >= max, never: false }
        : { at: -1, undecided: false, never: true };
    }
    if (open === "$$") {
      if (!escaped(src, at, start)) {
        return { at, undecided: false, never: false };
      }
      continue;
    }
    // `\)` or `\]`: its backslash must not itself be escaped
    if (!escaped(src, at, start)) {
      return { at, undecided: false, never: false };
    }
  }
  return { at: -1, undecided: false, never: false };
}

function mathInline(state: StateInline, silent: boolean): boolean {
  const src = state.src;
  const pos = state.pos;
  const open = openerAt(src, pos);
  if (open === null) {
    return false;
  }
  const start = pos + open.length;
  if (open === "$" && isBlank(src.charCodeAt(start))) {
    return false; // `$ 5`: a dollar sign
  }
  const found = findClose(src, start, state.posMax, open);
  const content = found.at === -1 ? "" : src.slice(start, found.at);
  const env = state.env as MathEnv;
  const growing = env.mathOpen === true && env.mathLastInline === state.tokens;
  if (found.at === -1 || content.trim() === "" || (found.undecided && growing)) {
    // No formula (yet). In the paragraph still being written, the source from
    // here on waits, dimmed, for its closer; elsewhere the opener is text.
    if (
      !silent &&
      growing &&
      !found.never &&
      (found.at === -1 || found.undecided) &&
      state.posMax === src.length &&
      !(open === "$" && isDigit(src.charCodeAt(start)))
    ) {
      const token = state.push("math_pending", "", 0);
      token.content = src.slice(pos);
      state.pos = state.posMax;
      return true;
    }
    if (open === "$" || open === "$$") {
      if (!silent) {
        state.pending += open;
      }
      state.pos += open.length;
      return true;
    }
    return false; // `\(` and `\[`: the escape rule makes them `(` and `[`
  }
  if (!silent) {
    const token = state.push("math_inline", "math", 0);
    token.content = content;
    token.markup = open;
  }
  state.pos = found.at + (CLOSER[open] as string).length;
  return true;
}

/** Whether the line `line` ends (trailing spaces aside) with `close`; returns where `close` starts, or -1. */
function lineEndsWith(state: StateBlock, line: number, from: number, close: string): number {
  const end = state.skipSpacesBack(state.eMarks[line] as number, from);
  const at = end - close.length;
  return at >= from && state.src.slice(at, end) === close ? at : -1;
}

function mathBlock(
  state: StateBlock,
  startLine: number,
  endLine: number,
  silent: boolean,
): boolean {
  if ((state.sCount[startLine] as number) - state.blkIndent >= 4) {
    return false; // an indented code block
  }
  const begin = (state.bMarks[startLine] as number) + (state.tShift[startLine] as number);
  const open = openerAt(state.src, begin);
  if (open !== "$$" && open !== "\\[") {
    return false;
  }
  const close = CLOSER[open] as string;
  const first = begin + open.length;
  const firstEnd = state.eMarks[startLine] as number;
  // A closer inside the first line that does not end it: inline display math in a paragraph.
  const inner = state.src.indexOf(close, first);
  let closedAt = lineEndsWith(state, startLine, first, close);
  if (inner !== -1 && inner < firstEnd && inner !== closedAt) {
    return false;
  }
  if (silent) {
    return true;
  }
  let content: string;
  let line = startLine;
  if (closedAt !== -1) {
    content = state.src.slice(first, closedAt);
  } else {
    const parts = [state.src.slice(first, firstEnd)];
    for (line = startLine + 1; line < endLine; line++) {
      const b = (state.bMarks[line] as number) + (state.tShift[line] as number);
      const e = state.eMarks[line] as number;
      if (b < e && (state.sCount[line] as number) < state.blkIndent) {
        break; // the container ended
      }
      closedAt = lineEndsWith(state, line, b, close);
      if (closedAt !== -1) {
        parts.push(state.src.slice(b, closedAt));
        break;
      }
      parts.push(state.src.slice(b, e));
    }
    content = parts.join("\n");
  }
  const closed = closedAt !== -1;
  const next = closed ? line + 1 : line;
  const token = state.push("math_block", "math", 0);
  token.block = true;
  token.content = content;
  token.markup = open;
  token.map = [startLine, next];
  token.meta = { closed, toEnd: !closed && next >= endLine };
  state.line = next;
  return true;
}

/** Before the inline rules run: note which paragraph may still grow. */
function markLastInline(state: StateCore): void {
  const env = state.env as MathEnv;
  env.mathLastInline = undefined;
  if (env.mathOpen !== true || /\n[ \t]*\n[ \t]*$/.test(state.src)) {
    return;
  }
  const tokens = state.tokens;
  const lineDone = state.src.endsWith("\n");
  for (let i = tokens.length - 1; i >= 0; i--) {
    const t = tokens[i] as Token;
    if (t.type === "inline") {
      // a paragraph goes on over lines; a heading or a table row ends with its line
      if (!lineDone || tokens[i - 1]?.type === "paragraph_open") {
        env.mathLastInline = t.children ?? undefined;
      }
      return;
    }
    if (t.nesting !== -1) {
      return; // the last block has no inline content (a fence, a rule, a formula)
    }
  }
}

/** The markdown-it plugin: math rules and their renderers. */
export function mathPlugin(md: MarkdownIt): void {
  const { escapeHtml } = md.utils;
  md.inline.ruler.before("escape", "math_inline", mathInline);
  md.block.ruler.before("fence", "math_block", mathBlock, {
    alt: ["paragraph", "reference", "blockquote", "list"],
  });
  md.core.ruler.before("inline", "math_last_inline", markLastInline);

  const source = (open: string, tex: string, closed: boolean): string =>
    escapeHtml(open + tex + (closed ? (CLOSER[open] as string) : ""));

  md.renderer.rules.math_inline = (tokens, idx) => {
    const t = tokens[idx] as Token;
    const display = t.markup === "$$" || t.markup === "\\[";
    const html = renderMath(t.content, display);
    if (html === false) {
      // typeset in a later frame: its source meanwhile, where the formula goes
      const cls = `nbs-math${display ? " nbs-math-display" : ""} ${DEFERRED}`;
      return `<span class="${cls}">${source(t.markup, t.content, true)}</span>`;
    }
    if (html === undefined) {
      return `<span class="nbs-math-pending">${source(t.markup, t.content, true)}</span>`;
    }
    if (html === null) {
      return `<span class="nbs-math-source">${source(t.markup, t.content, true)}</span>`;
    }
    return `<span class="nbs-math${display ? " nbs-math-display" : ""}">${html}</span>`;
  };
  md.renderer.rules.math_pending = (tokens, idx) =>
    `<span class="nbs-math-pending">${escapeHtml((tokens[idx] as Token).content)}</span>`;
  md.renderer.rules.math_block = (tokens, idx, _options, env) => {
    const t = tokens[idx] as Token;
    const meta = t.meta as { closed: boolean; toEnd: boolean };
    if (!meta.closed) {
      const pending = meta.toEnd && (env as MathEnv).mathOpen === true;
      const cls = pending ? "nbs-math-pending" : "nbs-math-source";
      return `<div class="nbs-math-block ${cls}">${source(t.markup, t.content, false)}</div>\n`;
    }
    const html = renderMath(t.content, true);
    if (html === false) {
      return `<div class="nbs-math-block ${DEFERRED}">${source(t.markup, t.content, true)}</div>\n`;
    }
    if (html === undefined) {
      return `<div class="nbs-math-block nbs-math-pending">${source(t.markup, t.content, true)}</div>\n`;
    }
    if (html === null) {
      return `<div class="nbs-math-block nbs-math-source">${source(t.markup, t.content, true)}</div>\n`;
    }
    return `<div class="nbs-math-block">${html}</div>\n`;
  };
}
