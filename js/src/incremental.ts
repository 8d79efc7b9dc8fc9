/**
 * Incremental Markdown rendering of one streaming message: owns the DOM inside
 * its container (`div.nbs-text.nbs-md`).
 *
 * The text is cut in two at a top-level block boundary:
 *
 *   [ frozen chunks ............................ | open tail ]
 *     rendered once, never touched again           re-rendered per frame
 *
 * Each frame parses only the tail (text after the last cut). When the tail
 * holds a top-level block that starts at line L > 0, and lines L and L + 1 are
 * complete (end in a newline), everything before line L is final: no later
 * text can change how it parses (block parsing in CommonMark goes line by
 * line; the only look-ahead that can end a preceding block is a table's
 * delimiter row, one line down, hence L + 1). That prefix becomes a frozen
 * chunk: parsed and rendered once on its own, its nodes appended for good.
 * So a frame costs what the open tail costs (usually one block), not what the
 * answer costs. A single block that stays open (one huge list, table, fence or
 * paragraph) is re-rendered while it grows; the cost follows that block.
 *
 * Reference-style links are the one thing that reaches backwards: a
 * definition (`[x]: url`) anywhere applies to the whole text. Every parse
 * starts from the definitions of the frozen chunks; when a newly frozen
 * chunk defines a label no one knew, the earlier chunks are rendered again
 * (rare: once per new label).
 *
 * The sanitizer (most of a frame's script) runs on what changed: the tail is
 * rendered block by block, and a block whose HTML is the one the previous
 * render sanitized keeps the nodes it made (see `MarkdownSink.update`).
 * DOM updates are minimal: the new nodes are compared with the shown ones,
 * block by block (`isEqualNode`), and only the blocks that differ are
 * replaced. Inserted blocks may skip layout while out of sight only once they
 * were laid out (sized.ts). A block that moves from the tail into a frozen chunk keeps its
 * node. Once the text is complete ({@link MarkdownSink.finish}) the tail is
 * frozen too, and the result equals a one-shot render of the whole text
 * ({@link renderOnce}); the property tests check this for random splits.
 *
 * Math (math.ts) follows the same cut: a display formula is one block, and
 * while the text grows, a formula whose closer has not arrived shows its
 * source dimmed (`mathOpen` in the tail's env); frozen chunks and the
 * finished text render as the one-shot render does. A formula the frame's
 * typesetting budget left for later (math.ts `mathDeferrals`) shows its
 * source meanwhile, in a frozen chunk too: each chunk remembers whether its
 * render left one, and the re-render that follows ({@link MarkdownSink.replace}
 * with the same text, from messages.ts in a following frame) renders only
 * those chunks again, replacing only their blocks that held one (a highlighted
 * code block beside it is kept), and the tail; so a closed block never keeps
 * a formula pending, and the result is the one-shot render's once all are typeset.
 *
 * Line breaks are normalized as markdown-it does (CRLF and CR to LF), holding
 * back a trailing CR that may be the first half of a CRLF split across deltas.
 * Runs on the browser's main thread, inside the frame loop's render.
 */
import { misses } from "./chunks";
import {
  codeLanguage,
  type MarkdownEnv,
  parse,
  type References,
  renderHtml,
  renderTokens,
  type Token,
} from "./markdown";
import { DEFERRED_SELECTOR, mathDeferrals } from "./math";
import { sanitize } from "./sanitize";
import { forget, markWhenLaidOut, SIZED_CLASS, type SizedMode } from "./sized";

/** What renders the text of one message into its container. */
export interface Sink {
  /** Shows `text` instead of whatever was shown; `complete`: it will not grow. */
  replace(text: string, complete?: boolean): void;
  /** Shows `text` after what is shown. */
  append(text: string): void;
  /** The text is complete: render what was open as closed. */
  finish(): void;
}

export interface MarkdownOptions {
  /** called for each `code` element of a closed code block once it is in the DOM */
  onClosedCode?: (code: HTMLElement) => void;
  /** how a laid-out block is allowed to skip layout (sized.ts; "batched" by default) */
  sized?: SizedMode;
}

interface Chunk {
  text: string;
  nodes: Node[];
  /** its render missed a chunk (chunks.ts): only a whole re-render shows it right */
  missed: boolean;
  /** its render left formulas for a later frame (math.ts): rendered again then */
  mathLeft: boolean;
}

/**
 * A run of whole top-level blocks of the open tail, sanitized in one call:
 * the HTML of each block, and the nodes the sanitizer made of them (the
 * shown ones once reconciled).
 */
interface Segment {
  blocks: string[];
  nodes: Node[];
  /** a code block built by {@link codeBlockNodes} (not sanitized): its text, grown in place */
  code?: Code;
}

/** A code block that is a whole top-level block: its text and its language ("" for none). */
export interface Code {
  content: string;
  lang: string;
}

/** What a render left undone: counters of chunks.ts and math.ts, before it. */
export interface Undone {
  misses: number;
  deferrals: number;
}

export function undoneNow(): Undone {
  return { misses: misses(), deferrals: mathDeferrals() };
}

/** Whether a chunk was missed, or a formula left for later, since `before`. */
export function undoneSince(before: Undone): { missed: boolean; mathLeft: boolean } {
  return { missed: misses() !== before.misses, mathLeft: mathDeferrals() !== before.deferrals };
}

/** Whether `node` is, or holds, a formula left for a later frame. */
function holdsDeferred(node: Node): boolean {
  if (node.nodeType !== 1) {
    return false;
  }
  const el = node as Element;
  return el.matches(DEFERRED_SELECTOR) || el.querySelector(DEFERRED_SELECTOR) !== null;
}

/** Where the open tail starts: its offset in the tail text, and its first token. */
interface Cut {
  offset: number;
  index: number;
}

/**
 * The last safe cut in `tail`: before the last top-level block that starts on
 * a line L > 0 with lines L and L + 1 complete; {0, 0} when there is none.
 */
export function findCut(tail: string, tokens: readonly Token[]): Cut {
  const starts = [0];
  for (let i = tail.indexOf("\n"); i !== -1; i = tail.indexOf("\n", i + 1)) {
    starts.push(i + 1);
  }
  for (let k = tokens.length - 1; k > 0; k--) {
    const t = tokens[k] as Token;
    if (t.level !== 0 || t.nesting === -1 || !t.map) {
      continue;
    }
    const line = t.map[0];
    // line L + 1 is complete when a line starts after it
    if (line > 0 && line + 2 < starts.length) {
      return { offset: starts[line] as number, index: k };
    }
  }
  return { offset: 0, index: 0 };
}

/**
 * The HTML of each top-level block of `tokens` (whole blocks, as a parse or a
 * slice at a top-level boundary gives them); joined, the HTML of them all.
 */
export function renderBlocks(tokens: Token[], env: MarkdownEnv): string[] {
  const out: string[] = [];
  let start = 0;
  while (start < tokens.length) {
    let end = start + 1;
    if ((tokens[start] as Token).nesting === 1) {
      // an open token at level 0 closes at the next level-0 token
      while (end < tokens.length && (tokens[end] as Token).level !== 0) {
        end++;
      }
      end = Math.min(end + 1, tokens.length);
    }
    out.push(renderTokens(tokens.slice(start, end), env));
    start = end;
  }
  return out;
}

/**
 * The nodes the sanitizer makes of markdown.ts's HTML for a code block
 * (`codeBlock`: a bar with the language's label and the copy button, then
 * `pre > code` holding the text, then a line break), built without parsing
 * any HTML: the text is a text node's data and never markup (whatever it
 * holds: `</code>`, `<script>`, an attribute), and the language, the one
 * value that becomes attributes, is one {@link codeLanguage} allowed
 * (`LANG_RE`), which the sanitizer's class filter allows too. The same
 * elements, attributes (in the same order) and text as `sanitize(doc,
 * html)`; js/tests/incremental.test.ts checks both on the corpus and on
 * hostile fences. (One difference no one sees: Chromium's HTML parser cuts
 * a text over 65,536 characters into several text nodes; this is one.)
 */
export function codeBlockNodes(doc: Document, code: Code): Node[] {
  const el = (tag: string, cls = "", ...children: Node[]): HTMLElement => {
    const e = doc.createElement(tag);
    if (cls !== "") {
      e.className = cls;
    }
    e.append(...children);
    return e;
  };
  const label = el("span", "nbs-code-lang");
  if (code.lang !== "") {
    label.title = code.lang;
  }
  const copy = doc.createElement("button");
  copy.type = "button";
  copy.className = "nbs-copy-code";
  copy.setAttribute("aria-label", "Copy code");
  const text = el("code", code.lang && `language-${code.lang}`);
  text.textContent = code.content; // "" makes no text node, as the parser makes none
  return [
    el("div", "nbs-code", el("div", "nbs-code-bar", label, copy), el("pre", "", text)),
    doc.createTextNode("\n"),
  ];
}

/**
 * Makes the block `block` of {@link codeBlockNodes} that shows the text
 * `from` show `to`, in place: its text node grows by what was added, or,
 * where `to` does not continue `from`, the text is set whole.
 */
function growCode(block: Node, from: string, to: string): void {
  const code = block.lastChild?.firstChild as Element; // pre > code
  const text = code.firstChild;
  if (
    to !== "" &&
    text?.nodeType === 3 &&
    text === code.lastChild &&
    (text as Text).length === from.length &&
    to.startsWith(from)
  ) {
    (text as Text).appendData(to.slice(from.length));
  } else {
    code.textContent = to;
  }
}

function normalize(text: string): string {
  return text.replace(/\r\n?/g, "\n").replace(/\0/g, "\uFFFD");
}

/** A whole Markdown text, rendered and sanitized in one go (the reference for the above). */
export function renderOnce(doc: Document, text: string): DocumentFragment {
  return sanitize(doc, renderHtml(text));
}

/** What {@link warmUp} renders: a little of what models write (no formula: math loads on demand). */
const WARM_TEXT = [
  "## A heading",
  "",
  "Some *emphasis*, **strong** text, `inline code`, a [link](https://example.com) and 中文 😀.",
  "",
  "1. a numbered item",
  "   - a nested bullet",
  "",
  "| a | b |",
  "|:--|--:|",
  "| 1 | 2 |",
  "",
  "> a quote",
  "",
  "```python",
  "print('x')",
  "```",
  "",
].join("\n");

/** The parts of the renderer {@link warmUp} prepares, one at a time. */
export type WarmPart = "parser" | "sanitizer" | "layout";

/** The warm text's HTML, kept from the parser's warm-up for the sanitizer's. */
let warmHtml: string | null = null;

/**
 * Renders a short text of the usual Markdown through the parser and the
 * renderer (`"parser"`, markdown-it) or the sanitizer (`"sanitizer"`,
 * DOMPurify), and drops it: V8 compiles their code the first time it runs
 * (~25 ms of a 1,000-message chat's first render in JupyterLab, traced; the
 * two parts ~15 and ~20 ms cold, in frames of their own), so a caller that
 * has frames to spare before a costly first render (lazy.ts, a history's
 * end) moves that compiling into them. About 1 ms once compiled. `"layout"`
 * returns the text rendered, for the caller to lay out where nobody sees it
 * (the browser's first shaping and line breaking of Chinese text and emoji
 * cost ~15–20 ms of the first layout that has them, traced); the others
 * return null.
 */
export function warmUp(doc: Document, part: WarmPart): DocumentFragment | null {
  if (part === "layout") {
    return renderOnce(doc, WARM_TEXT);
  }
  if (part === "parser") {
    warmHtml = renderHtml(WARM_TEXT);
  } else {
    sanitize(doc, warmHtml ?? renderHtml(WARM_TEXT));
    warmHtml = null;
  }
  return null;
}

/**
 * The naive way, for benchmarks only: every render parses, sanitizes and
 * replaces the whole text. Its cost grows with the answer.
 */
export class FullSink implements Sink {
  private text = "";

  constructor(private readonly el: HTMLElement) {}

  replace(text: string): void {
    this.text = text;
    this.el.replaceChildren(renderOnce(this.el.ownerDocument, this.text));
  }

  append(text: string): void {
    this.replace(this.text + text);
  }

  finish(): void {}
}

/**
 * Whether the shown block `shown` renders as the fresh `fresh` does: equal
 * nodes, not counting the class sized.ts adds to a shown block once it was
 * laid out (`fresh` is detached: marking it for the comparison costs nothing).
 */
function sameBlock(shown: Node, fresh: Node): boolean {
  if (shown.nodeType !== 1 || fresh.nodeType !== 1) {
    return shown.isEqualNode(fresh);
  }
  const marked = (shown as Element).classList.contains(SIZED_CLASS);
  const classes = (fresh as Element).classList;
  const hadClass = (fresh as Element).hasAttribute("class");
  if (marked) {
    classes.add(SIZED_CLASS);
  }
  const equal = shown.isEqualNode(fresh);
  if (marked && !equal) {
    // inserted as new: it must be laid out before it may skip layout
    classes.remove(SIZED_CLASS);
    if (!hadClass) {
      (fresh as Element).removeAttribute("class");
    }
  }
  return equal;
}

/** Calls `fn` with each closed code block's `code` element among `nodes`. */
function eachCode(nodes: readonly Node[], fn: (code: HTMLElement) => void): void {
  for (const node of nodes) {
    if (node.nodeType === 1) {
      for (const code of (node as Element).querySelectorAll<HTMLElement>("pre > code")) {
        fn(code);
      }
    }
  }
}

export class MarkdownSink implements Sink {
  /** the normalized text shown (a held-back CR excluded) */
  private text = "";
  private heldCR = false;
  /** length of the text rendered in frozen chunks */
  private frozen = 0;
  private readonly chunks: Chunk[] = [];
  private refs: References = {};
  /** nodes of the open tail, in order, after the chunks' nodes */
  private tail: Node[] = [];
  /** the open tail's blocks as sanitized, in order: their nodes make up {@link tail} */
  private segments: Segment[] = [];
  private finished = false;
  /** the open tail's latest render left formulas for a later frame */
  private tailMathLeft = false;
  /** length of the tail parsed by the latest render (what a frame costs) */
  lastTailChars = 0;
  /** how many times earlier chunks were rendered again (new reference labels) */
  rebuilds = 0;
  /** how many frozen chunks were rendered again for formulas left for later */
  retypesets = 0;
  /** how many times the sanitizer ran (what a frame costs most) */
  sanitizeCalls = 0;
  /** how many times the code block being written was built without the sanitizer */
  builtCode = 0;
  /** how many times it was grown in place (its nodes kept) */
  grownCode = 0;

  constructor(
    private readonly el: HTMLElement,
    private readonly options: MarkdownOptions = {},
  ) {}

  replace(text: string, complete = false): void {
    if (this.replaceKeeping(text, complete)) {
      return;
    }
    forget([...this.el.childNodes]);
    this.el.textContent = "";
    this.text = "";
    this.heldCR = false;
    this.frozen = 0;
    this.chunks.length = 0;
    this.refs = {};
    this.tail = [];
    this.segments = [];
    this.finished = false;
    this.push(text);
    if (complete) {
      this.finish();
    } else {
      this.update(false);
    }
  }

  /**
   * The same text again (or more of it) while formulas wait for a later
   * frame: keeps the frozen chunks, renders again those that left a formula
   * for later, and the tail. Returns false (nothing done) where a whole
   * render is needed: nothing waits for the budget, a chunk missed a chunk
   * (its text would differ in places no class marks), the frozen text is not
   * a prefix of `text`, or a complete text is reopened.
   */
  private replaceKeeping(text: string, complete: boolean): boolean {
    if (
      this.chunks.length === 0 ||
      (this.finished && !complete) ||
      !(this.tailMathLeft || this.chunks.some((c) => c.mathLeft)) ||
      this.chunks.some((c) => c.missed) ||
      this.chunks[0]?.nodes[0]?.parentNode !== this.el
    ) {
      return false;
    }
    const frozenText = this.text.slice(0, this.frozen);
    const before = { text: this.text, heldCR: this.heldCR };
    this.text = "";
    this.heldCR = false;
    this.push(text);
    // a finished text's last chunk was closed as final: only the same text keeps it
    if (this.finished ? this.text !== frozenText : !this.text.startsWith(frozenText)) {
      this.text = before.text;
      this.heldCR = before.heldCR;
      return false;
    }
    for (const chunk of this.chunks) {
      if (chunk.mathLeft) {
        this.retypeset(chunk);
      }
    }
    this.finished = false;
    if (complete) {
      this.finish();
    } else {
      this.update(false);
    }
    return true;
  }

  /**
   * Renders a frozen chunk that left formulas for later again, and puts in
   * place of its blocks that held one the fresh ones (the others, equal but
   * for what was done to them since, such as highlighting, stay).
   */
  private retypeset(chunk: Chunk): void {
    this.retypesets++;
    const doc = this.el.ownerDocument;
    const { nodes: fresh, missed, mathLeft } = this.renderChunk(chunk.text);
    chunk.missed = missed;
    chunk.mathLeft = mathLeft;
    const old = chunk.nodes;
    const changed: Node[] = [];
    if (fresh.length === old.length) {
      for (let i = 0; i < old.length; i++) {
        const shown = old[i] as Node;
        const next = fresh[i] as Node;
        if (holdsDeferred(shown) && !sameBlock(shown, next)) {
          this.el.replaceChild(next, shown);
          forget([shown]);
          old[i] = next;
          changed.push(next);
        }
      }
    } else {
      // (not expected: the same text parses to the same blocks) all of it, in place
      const fragment = doc.createDocumentFragment();
      for (const node of fresh) {
        fragment.appendChild(node);
      }
      this.el.insertBefore(fragment, old[0] ?? null);
      for (const node of old) {
        this.el.removeChild(node);
      }
      forget(old);
      chunk.nodes = fresh;
      changed.push(...fresh);
    }
    markWhenLaidOut(changed, this.options.sized);
    this.closed(changed);
  }

  append(text: string): void {
    if (this.finished) {
      // A complete text that grows after all (a state entry extending it): start over.
      this.replace(this.text + text);
      return;
    }
    this.push(text);
    this.update(false);
  }

  finish(): void {
    if (this.finished) {
      return;
    }
    if (this.heldCR) {
      this.heldCR = false;
      this.text += "\n";
    }
    this.update(true);
    this.finished = true;
  }

  /** The source text rendered so far (normalized), for tests. */
  get source(): string {
    return this.text;
  }

  private push(raw: string): void {
    let s = this.heldCR ? `\r${raw}` : raw;
    this.heldCR = s.endsWith("\r");
    if (this.heldCR) {
      s = s.slice(0, -1);
    }
    this.text += normalize(s);
  }

  /**
   * One render: parse the tail, freeze what became final, re-render the rest.
   *
   * The tail is rendered block by block, and only the blocks whose HTML
   * differs from the previous render's are sanitized: a block the previous
   * render sanitized from the same HTML keeps the nodes it made (the shown
   * ones; the sanitizer gives the same nodes for the same HTML), so a frame
   * sanitizes the block being written, not the finished blocks the tail
   * still holds, nor, when they freeze, the chunk's blocks again. What no
   * previous render sanitized from the same HTML is sanitized now, in at most
   * three calls: a new chunk's blocks, the tail's blocks before its last, and
   * the last block (the one that grows) alone, so that the next frame keeps
   * the others. Nothing is kept across renders but the shown nodes of the
   * previous one: every node shown came out of the sanitizer.
   */
  private update(final: boolean): void {
    const tail = this.text.slice(this.frozen);
    this.lastTailChars = tail.length;
    // while the text grows, a formula still waiting for its closer shows as pending source
    const env: MarkdownEnv = { references: { ...this.refs }, mathOpen: !final };
    const undone = undoneNow();
    const tokens = parse(tail, env);
    const cut = final ? { offset: tail.length, index: tokens.length } : findCut(tail, tokens);

    let chunk: Chunk | null = null;
    let chunkBlocks: string[] = [];
    let chunkRefs: References = {};
    if (cut.offset > 0) {
      let left: { missed: boolean; mathLeft: boolean };
      if (cut.index === tokens.length) {
        // The parse saw exactly the chunk's text: reuse it.
        chunkBlocks = renderBlocks(tokens, env);
        chunkRefs = env.references ?? {};
        left = undoneSince(undone);
      } else {
        const chunkUndone = undoneNow();
        const chunkEnv: MarkdownEnv = { references: { ...this.refs } };
        chunkBlocks = renderBlocks(parse(tail.slice(0, cut.offset), chunkEnv), chunkEnv);
        chunkRefs = chunkEnv.references ?? {};
        left = undoneSince(chunkUndone);
      }
      chunk = { text: tail.slice(0, cut.offset), nodes: [], ...left };
    }
    const restUndone = undoneNow();
    const restBlocks = cut.index < tokens.length ? renderBlocks(tokens.slice(cut.index), env) : [];
    this.tailMathLeft = undoneSince(restUndone).mathLeft;
    // the block being written, when it is a code block (most often a fence not closed yet)
    const last = tokens[tokens.length - 1];
    const lastCode =
      restBlocks.length > 0 &&
      last !== undefined &&
      last.level === 0 &&
      (last.type === "fence" || last.type === "code_block")
        ? { content: last.content, lang: codeLanguage(last) }
        : null;

    // the previous render's segments, kept while the new blocks start with theirs
    const shown = { segments: this.segments, at: 0 };
    const chunkSegments = this.segmentsOf(chunkBlocks, shown, false);
    const restSegments = this.segmentsOf(restBlocks, shown, true, lastCode);
    const next = [...chunkSegments, ...restSegments].flatMap((seg) => seg.nodes);
    this.reconcile(next);
    // the segments hold the nodes shown now (reconcile keeps equal shown nodes)
    let at = 0;
    for (const seg of [...chunkSegments, ...restSegments]) {
      seg.nodes = next.slice(at, at + seg.nodes.length);
      at += seg.nodes.length;
    }
    this.segments = restSegments;
    if (chunk !== null) {
      const chunkNodes = chunkSegments.reduce((n, seg) => n + seg.nodes.length, 0);
      chunk.nodes = next.slice(0, chunkNodes);
      this.tail = next.slice(chunkNodes);
      this.chunks.push(chunk);
      this.frozen += chunk.text.length;
      const learned = this.learn(chunkRefs);
      if (learned && this.chunks.length > 1) {
        this.rebuild();
      } else {
        this.closed(chunk.nodes);
      }
    } else {
      this.tail = next;
    }
  }

  /**
   * Segments for `blocks`: the shown segments from `shown.at` on whose blocks
   * come next (same HTML), then, from the first that differs, new ones
   * sanitized now: with `lastAlone` the last block in a call of its own.
   *
   * With `lastCode` (the last block is a code block: its text and language)
   * that last block is not sanitized but built ({@link codeBlockNodes}: the
   * same nodes, with no HTML parsed), and where the shown segment in its
   * place was built so too, its nodes are kept and their text grown in place
   * ({@link growCode}): a code block being written costs what was added, not
   * its length.
   */
  private segmentsOf(
    blocks: readonly string[],
    shown: { segments: readonly Segment[]; at: number },
    lastAlone: boolean,
    lastCode: Code | null = null,
  ): Segment[] {
    const out: Segment[] = [];
    let i = 0;
    let differing: Segment | null = null;
    while (i < blocks.length && shown.at < shown.segments.length) {
      const seg = shown.segments[shown.at] as Segment;
      if (
        seg.blocks.length > blocks.length - i ||
        seg.blocks.some((html, k) => html !== blocks[i + k])
      ) {
        differing = seg;
        shown.at = shown.segments.length; // nothing after a difference is kept
        break;
      }
      out.push(seg);
      i += seg.blocks.length;
      shown.at++;
    }
    const split = lastAlone ? Math.max(i, blocks.length - 1) : blocks.length;
    if (split > i) {
      const run = blocks.slice(i, split);
      out.push({ blocks: run, nodes: this.sanitized(run.join("")) });
    }
    if (blocks.length > split) {
      const run = blocks.slice(split);
      if (lastCode === null) {
        out.push({ blocks: run, nodes: this.sanitized(run.join("")) });
      } else if (differing?.code?.lang === lastCode.lang && split === i) {
        // the code block shown in the same place, built: its text grown
        this.grownCode++;
        const block = differing.nodes[0] as Element;
        growCode(block, differing.code.content, lastCode.content);
        // as a new block would be: laid out in full until it was laid out at its new size
        forget([block]);
        block.classList.remove(SIZED_CLASS);
        markWhenLaidOut([block], this.options.sized);
        out.push({ blocks: run, nodes: differing.nodes, code: lastCode });
      } else {
        this.builtCode++;
        const nodes = codeBlockNodes(this.el.ownerDocument, lastCode);
        out.push({ blocks: run, nodes, code: lastCode });
      }
    }
    return out;
  }

  /** `html` sanitized, as nodes of the view's document. */
  private sanitized(html: string): Node[] {
    this.sanitizeCalls++;
    return [...sanitize(this.el.ownerDocument, html).childNodes];
  }

  /** Makes the nodes after the frozen chunks equal `next`, keeping equal ones (updates `next`). */
  private reconcile(next: Node[]): void {
    const old = this.tail;
    let i = 0;
    while (
      i < old.length &&
      i < next.length &&
      (old[i] === next[i] || sameBlock(old[i] as Node, next[i] as Node))
    ) {
      next[i] = old[i] as Node;
      i++;
    }
    const removed = old.slice(i);
    for (const node of removed) {
      this.el.removeChild(node);
    }
    forget(removed);
    if (i < next.length) {
      const added = next.slice(i);
      const fragment = this.el.ownerDocument.createDocumentFragment();
      for (const node of added) {
        fragment.appendChild(node);
      }
      this.el.appendChild(fragment);
      markWhenLaidOut(added, this.options.sized);
    }
  }

  /** Adds the definitions of labels not yet known; returns whether there were any. */
  private learn(refs: References): boolean {
    let learned = false;
    for (const label of Object.keys(refs)) {
      if (!Object.hasOwn(this.refs, label)) {
        this.refs[label] = refs[label] as References[string];
        learned = true;
      }
    }
    return learned;
  }

  /** Renders every frozen chunk again with all the definitions known now. */
  private rebuild(): void {
    this.rebuilds++;
    const doc = this.el.ownerDocument;
    const fragment = doc.createDocumentFragment();
    for (const chunk of this.chunks) {
      for (const node of chunk.nodes) {
        this.el.removeChild(node);
      }
      forget(chunk.nodes);
      Object.assign(chunk, this.renderChunk(chunk.text));
      for (const node of chunk.nodes) {
        fragment.appendChild(node);
      }
    }
    this.el.insertBefore(fragment, this.tail[0] ?? null);
    for (const chunk of this.chunks) {
      markWhenLaidOut(chunk.nodes, this.options.sized);
      this.closed(chunk.nodes);
    }
  }

  /** A frozen chunk's text rendered with the definitions known now, and what it left undone. */
  private renderChunk(text: string): { nodes: Node[]; missed: boolean; mathLeft: boolean } {
    const env: MarkdownEnv = { references: { ...this.refs } };
    const undone = undoneNow();
    const html = renderTokens(parse(text, env), env);
    const left = undoneSince(undone);
    return { nodes: [...sanitize(this.el.ownerDocument, html).childNodes], ...left };
  }

  private closed(nodes: readonly Node[]): void {
    const fn = this.options.onClosedCode;
    if (fn !== undefined) {
      eachCode(nodes, fn);
    }
  }
}
