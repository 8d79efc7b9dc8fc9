/**
 * Long conversations render what is on screen first, the rest as it comes
 * near: owns which messages of one list are *deferred* (placeholders) and
 * when each is rendered; messages.ts does the rendering itself.
 *
 * A chat opened with a thousand earlier answers used to parse, sanitize and
 * lay out all of them in the task that showed it (2.55 s). Now:
 *
 * - **A placeholder per finished message.** A finished message painted for
 *   the first time is deferred: its text element holds the message's source
 *   as one Text node, and the message element is `hidden="until-found"` (its
 *   content skips style, layout and paint, and still counts for
 *   find-in-page), at an estimated height (`contain-intrinsic-size`,
 *   {@link estimateHeight}); its footer waits too (`.nbs-deferred`). So it
 *   costs one box of layout and one paint layer, and the scroll height is
 *   about right. (The hidden part is the whole message, not its text alone:
 *   after every frame that moves the list, the browser hit-tests the mouse's
 *   place and walks every paint layer of the page that is not hit first; a
 *   message with `contain: content` around a hidden text was two layers, and
 *   hit tests at the end of a 1,000-message chat took 7–9 ms each against
 *   2–3 ms this way.) (`content-visibility: auto` would do the same, but each
 *   such element costs the browser an intersection check in every frame that
 *   moves it: 10 ms a frame for a thousand. Where `until-found` is not
 *   supported, the source shows, dimmed, under `content-visibility: auto`.)
 * - **The end, at once.** After a paint, while the list follows its bottom
 *   (a chat is stick-to-bottom), the deferred messages at the end are
 *   rendered in the same task, from the last one up, until
 *   {@link TAIL_CHARS} of text fill the view, within a frame's budget (the
 *   last message always): the first paint shows the end, and the next frames
 *   what the budget left above it.
 * - **A long history into the DOM from its end.** When many messages arrive
 *   at once, the list puts the last {@link ATTACH_FIRST} in the DOM (in the
 *   frame after the one that reconciled them), then the older ones above them, {@link ATTACH_CHUNK} at a time within a
 *   frame's budget ({@link LazyHost.attach}), so the task that shows a chat
 *   does not grow with its history.
 * - **A history's end in frames of its own** ({@link LazyRenderer.holdEnd}).
 *   Not in the first frame after the view was made: that one is the page's
 *   first style, layout and paint of it (13–55 ms traced at load ~3; chat.ts
 *   `unpainted`). The frame that reconciles a history (its order, branch
 *   and entries: the work that grows with it) creates none of its elements;
 *   the next puts the last {@link ATTACH_FIRST} in the DOM as placeholders
 *   (the first run of the list's element code: cold). They were one frame,
 *   of 31–78 ms in the benchmark's traces at loads 1–2.8 (40 ms at load
 *   1.3: 24 ms of it script, the 20 messages' elements and chrome about
 *   60 % of that); as two, at load ~2, 27 ms (15 ms of it script) and 33 ms
 *   (18 ms of script, nearly all the 20 elements); at load ~5 the first was
 *   once 68 ms: a major GC (21 ms) and the page's first paint of the view
 *   (23 ms), which came in the same frame (hence the frame before, above).
 *   Neither renders the end: the list stays invisible
 *   ({@link OPENING_CLASS}) while the next three frames prepare the
 *   renderer ({@link LazyHost.warm}: the first Markdown rendered in a page
 *   compiles the parser and renderer, then the sanitizer, ~25 ms of V8
 *   compiling in all, traced, and 30–42 ms in one frame at the benchmark's
 *   load; then a short text of it is laid out, hidden: the first layout of
 *   Chinese text and emoji cost ~15–20 ms more of the end's frame); the
 *   frame after renders the end, the list's content still skipped
 *   (`content-visibility: hidden` while it opens: no style or layout of it),
 *   and the next shows the list, at its bottom: its layout. Each was one task
 *   before: a 1,000-message chat opened in JupyterLab took 107–122 ms in one
 *   (traced), and 28–39 ms a task this way; the frame that rendered the end
 *   and laid it out took 43–61 ms (traced) until they were two. No frame
 *   shows the placeholders where the end will be.
 * - **What comes near, a batch per frame.** After a scroll (and after new
 *   placeholders or messages came in), a frame finds the messages within one
 *   view height above and below the view (a binary search over their
 *   positions: no observer per message, which would cost every frame) and
 *   renders the deferred ones, nearest first, at most
 *   {@link FRAME_BUDGET_MS} of rendering a frame (one at least), so
 *   scrolling back through a long chat keeps its frames.
 * - **Fonts ahead of the reader.** Frames with nothing else to do lay the
 *   placeholders' characters beyond Latin out, hidden ({@link LazyOptions.glyphs},
 *   glyphs.ts: a chunk asked for once placeholders stay after the end
 *   rendered), so that the browser has found their fallback fonts and strikes
 *   before they scroll into view: the first answers in Chinese, with emoji or
 *   formulas, cost 40–67 ms of layout in the frame that rendered them.
 * - **The reader's place.** A placeholder above the top of the view that
 *   renders taller or shorter than estimated would move what the reader looks
 *   at (the list opts out of the browser's scroll anchoring: it follows its
 *   bottom itself), so the list is scrolled by the difference in the same
 *   frame ({@link LazyHost.shift}).
 *
 * Search in the page still finds every message: a placeholder's text is in
 * the DOM, and `content-visibility: auto` text is found by the browser's
 * find-in-page, which scrolls to it (it is then rendered). JupyterLab's own
 * search ("Search Cell Outputs") wraps its matches in `mark` elements and
 * keeps their nodes; rendering would drop them, so a placeholder holding a
 * `mark` stays as it is until that search ends (tried again every
 * {@link MARK_RETRY_MS}). Copy all and the kernel's `to_markdown()` read the
 * messages, never the DOM.
 *
 * The frame scheduler, the clock and the timer are injected, so tests drive
 * everything by hand; in a page the frames are the page loop's
 * (scheduler.ts `loopScheduler`: one animation-frame callback for every view,
 * this work after what streams). A frame is asked for only once the list
 * settled with placeholders left ({@link LazyRenderer.flush}), after a scroll,
 * or while a history enters the DOM. Runs on the browser's main thread only.
 */

import { MAYBE_FALLBACK } from "./fallback";
import type { FrameScheduler, Timer } from "./frame";
import type { GlyphWarmer } from "./glyphs";
import type { WarmPart } from "./incremental";
// most time spent rendering placeholders in one animation frame (ms; one message at least):
// the page loop's budget for a frame's script
import { FRAME_BUDGET_MS } from "./scheduler";

/** Text rendered at once at the end of a list that follows its bottom (characters). */
export const TAIL_CHARS = 2000;
/**
 * Messages a list puts in the DOM at once when many arrive together (a chat
 * opened with its history), in the frame after the one that reconciled them:
 * the last ones; the older ones follow,
 * {@link ATTACH_CHUNK} a frame, above them.
 */
export const ATTACH_FIRST = 20;
/**
 * Older messages added above at a time, after the first {@link ATTACH_FIRST}:
 * as many chunks a frame as {@link FRAME_BUDGET_MS} allows (one at least).
 */
export const ATTACH_CHUNK = 25;
/** The class of a list whose end waits for its frame ({@link LazyRenderer.holdEnd}): not shown. */
export const OPENING_CLASS = "nbs-opening";
/** The parts of the renderer a held end warms, a frame each, in order ({@link LazyHost.warm}). */
const WARM_STEPS: readonly WarmPart[] = ["parser", "sanitizer", "layout"];
/** A placeholder holding a search match is tried again after this long (ms). */
export const MARK_RETRY_MS = 1000;
/** The class of a deferred message element. */
export const DEFERRED_CLASS = "nbs-deferred";

/** Whether the browser can skip a placeholder's layout (else nothing is deferred). */
export function canDefer(win: Window & typeof globalThis): boolean {
  return typeof win.CSS?.supports === "function" && win.CSS.supports("content-visibility", "auto");
}

/** Whether the browser has `hidden="until-found"` (else a placeholder shows its source). */
export function hasUntilFound(win: Window & typeof globalThis): boolean {
  return "onbeforematch" in win.HTMLElement.prototype;
}

/**
 * An estimated height (px) of the rendered Markdown `text` in a list `width`
 * px wide: lines of prose wrapped at the width, code lines, table rows,
 * headings and the gaps between blocks, plus the message's footer. Only the
 * scroll height depends on it (a placeholder renders before it is seen), and
 * the reader's place is kept when it was wrong (see the module comment).
 */
export function estimateHeight(text: string, width: number): number {
  const cols = Math.max(20, Math.floor((Math.min(width, 1400) * 0.88 - 24) / 7.4));
  let h = 20; // the footer (the message's padding and border are outside the text)
  let fence = false;
  let previousBlank = true;
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (/^(```|~~~)/.test(t)) {
      h += fence ? 12 : 34; // the code bar and the block's padding
      fence = !fence;
    } else if (fence) {
      h += 17;
    } else if (t === "") {
      previousBlank = true;
      continue;
    } else if (t.startsWith("|")) {
      h += /^\|[\s:|-]+\|?$/.test(t) ? 0 : 27;
    } else if (t.startsWith("#")) {
      h += 32;
    } else if (t.startsWith("$$")) {
      h += 36;
    } else {
      h += Math.ceil(t.length / cols) * 20;
    }
    if (previousBlank && !fence) {
      h += 10; // the gap between two blocks
    }
    previousBlank = false;
  }
  return Math.round(h);
}

/** What the list does for the renderer. */
export interface LazyHost {
  /** Renders the deferred message whose element is `el`; returns its text length. */
  render(el: HTMLElement): number;
  /** Text length of the message whose element is `el` (rendered or deferred). */
  chars(el: HTMLElement): number;
  /** The message elements in the DOM, in order. */
  elements(): ArrayLike<Element>;
  /** Whether the list follows its bottom (then the end is rendered at once). */
  following(): boolean;
  /** Scrolls the list by `dy` px (the reader's place, after heights changed above it). */
  shift(dy: number): void;
  /** After a batch rendered in a frame of its own: settle the list (follow the bottom). */
  settled(): void;
  /**
   * Prepares a part of the renderer for the messages about to render
   * (compiles its code paths, or lays out, a small text of its own): called
   * in the three frames before a held end renders
   * ({@link LazyRenderer.holdEnd}), the parser's part, the sanitizer's, then
   * the layout's (what it lays out goes once the end rendered: `settled`).
   */
  warm(part: WarmPart): void;
  /**
   * Adds the next chunk of messages waiting to be put in the DOM (above
   * those in it); returns whether more wait.
   */
  attach(): boolean;
}

export interface LazyOptions {
  /** the scrolling list (the messages' parent) */
  root: HTMLElement;
  scheduler: FrameScheduler;
  now: () => number;
  timer: Timer;
  host: LazyHost;
  /** removes the scroll listener when aborted */
  signal: AbortSignal;
  /** placeholders are `hidden="until-found"` (else their source shows, dimmed) */
  untilFound: boolean;
  /** ms of rendering per frame (default {@link FRAME_BUDGET_MS}) */
  budgetMs?: number;
  /**
   * The page's glyph warmer (glyphs.ts), which finds the fonts for the
   * characters of deferred messages in frames with nothing else to do; null
   * while it loads (a chunk: asked for by the call; the host calls
   * {@link LazyRenderer.look} when it arrives). None: not warmed.
   */
  glyphs?: () => GlyphWarmer | null;
}

/** Counters for tests and benchmarks. */
export interface LazyCounters {
  /** messages deferred so far */
  deferred: number;
  /** deferred messages rendered at the end, at once */
  tail: number;
  /** deferred messages rendered as they came near */
  near: number;
  /** frames that rendered placeholders */
  frames: number;
  /** frames that laid out characters for their fonts ({@link LazyOptions.glyphs}) */
  glyphFrames: number;
}

export class LazyRenderer {
  /** deferred message elements, each with its text element */
  private readonly deferred = new Map<HTMLElement, HTMLElement>();
  private frame: number | null = null;
  private retry: number | null = null;
  /** the host has messages waiting to be put in the DOM */
  private attaching = false;
  /** a frame should look for placeholders near the view */
  private looking = false;
  /**
   * a history's end waits for frames of its own: 6 (put the end in the DOM
   * next), 5 (warm the parser next), 4 (the sanitizer next), 3 (the layout
   * next), 2 (render the end next, the list's content skipped), 1 (show it
   * next), 0
   */
  private holding: 0 | 1 | 2 | 3 | 4 | 5 | 6 = 0;
  private disposed = false;
  /** the list's width for estimates, as last seen in a frame (never read while painting) */
  private width = 700;
  /** sees search marks come into placeholders and go (null: no MutationObserver) */
  private readonly marks: MutationObserver | null;
  readonly counters: LazyCounters = { deferred: 0, tail: 0, near: 0, frames: 0, glyphFrames: 0 };
  /** where {@link LazyOptions.glyphs} lays characters out, hidden (in the page's body) */
  private glyphBox: HTMLElement | null = null;
  /** the list was out of sight, or the warmer loading, when characters were to be laid out */
  private glyphsParked = false;
  /** the page's glyph warmer, once loaded */
  private warmer: GlyphWarmer | null = null;
  /** texts of deferred messages with characters beyond Latin, not yet given to the warmer */
  private glyphTexts: string[] = [];

  constructor(private readonly options: LazyOptions) {
    const opts = { passive: true, signal: options.signal };
    // A list that follows its bottom scrolls every frame while an answer streams: its
    // end is rendered (renderTail), so there is nothing to look for, and looking would
    // lay the page out once more per frame. The reader's own scroll up stops the
    // following first (scroll.ts listens before this).
    options.root.addEventListener(
      "scroll",
      () => this.options.host.following() || this.look(),
      opts,
    );
    // find-in-page shows a placeholder's source and scrolls to it (rendered then)
    options.root.addEventListener("beforematch", () => this.look(), opts);
    options.signal.addEventListener("abort", () => this.dispose(), { once: true });
    const Observer = options.root.ownerDocument.defaultView?.MutationObserver;
    this.marks = Observer === undefined ? null : new Observer((records) => this.onMarks(records));
  }

  /** A search put marks into placeholders (show their source) or took them out (render). */
  private onMarks(records: MutationRecord[]): void {
    let changed = false;
    for (const r of records) {
      const el = (r.target as Element).parentElement as HTMLElement | null;
      if (el === null || this.deferred.get(el) !== r.target) {
        continue; // rendered since
      }
      changed = true;
      if ((r.target as Element).querySelector("mark") !== null) {
        el.removeAttribute("hidden");
      }
    }
    if (changed) {
      this.look();
    }
  }

  /** ms of rendering allowed in one frame (or in the task that renders the end) */
  private get budgetMs(): number {
    return this.options.budgetMs ?? FRAME_BUDGET_MS;
  }

  /** Whether the message element `el` is deferred. */
  isDeferred(el: HTMLElement): boolean {
    return this.deferred.has(el);
  }

  /** How many messages are deferred now. */
  get size(): number {
    return this.deferred.size;
  }

  /**
   * Defers the message `el`: its text element `textEl` shows `text` as a
   * placeholder of an estimated height until it is rendered.
   */
  defer(el: HTMLElement, textEl: HTMLElement, text: string): void {
    if (!this.deferred.has(el)) {
      this.counters.deferred++;
    }
    el.classList.add(DEFERRED_CLASS);
    textEl.textContent = text;
    this.noteGlyphs(text);
    const height = estimateHeight(text, this.width);
    // the message's size while hidden; the text's while it shows its source (a search
    // mark in it, or no `until-found`: `content-visibility: auto`)
    const size = `auto ${height}px`;
    textEl.style.setProperty("contain-intrinsic-size", size);
    if (this.options.untilFound) {
      el.style.setProperty("contain-intrinsic-size", size);
      el.setAttribute("hidden", "until-found");
    }
    if (!this.deferred.has(el)) {
      this.marks?.observe(textEl, { childList: true });
    }
    this.deferred.set(el, textEl);
    this.looking = true; // asked for in flush(), if the end did not render it at once
  }

  /** The placeholder of a deferred message shows `text` now (it grew or was replaced). */
  update(el: HTMLElement, text: string): void {
    const textEl = this.deferred.get(el);
    if (textEl !== undefined && textEl.textContent !== text) {
      textEl.textContent = text;
      this.noteGlyphs(text);
    }
  }

  /**
   * Stops deferring `el` (it is about to be rendered, or was removed): its
   * text element is a plain, empty `.nbs-text` again.
   */
  forget(el: HTMLElement): void {
    const textEl = this.deferred.get(el);
    if (textEl === undefined) {
      return;
    }
    this.deferred.delete(el);
    el.classList.remove(DEFERRED_CLASS);
    el.removeAttribute("hidden");
    for (const e of [el, textEl]) {
      e.style.removeProperty("contain-intrinsic-size");
      if (e.style.length === 0) {
        e.removeAttribute("style"); // no empty `style=""` left around rendered model text
      }
    }
    textEl.textContent = "";
  }

  /**
   * After a paint: while the list follows its bottom, renders the deferred
   * messages at its end, from the last one up, until {@link TAIL_CHARS} of
   * text (rendered or not) are below, within a frame's budget
   * ({@link FRAME_BUDGET_MS}): the last one always, the ones above it while
   * the budget lasts. What the budget leaves is in view: {@link flush} asks
   * for the next frame, which renders it nearest first (a chat opened with a
   * long history showed its end in one task that rendered a view's worth of
   * Markdown, code and math: one long task of its own).
   */
  renderTail(): void {
    const { host } = this.options;
    if (this.deferred.size === 0 || !host.following()) {
      return;
    }
    if (this.holding > 0) {
      return; // in its frames (tick)
    }
    this.renderEnd();
  }

  /** {@link renderTail}'s work: the deferred messages at the end, within a frame's budget. */
  private renderEnd(): void {
    const { host, now } = this.options;
    const budget = this.budgetMs;
    const start = now();
    let rendered = 0;
    let chars = 0;
    for (
      let el = this.options.root.lastElementChild as HTMLElement | null;
      el !== null && chars < TAIL_CHARS;
      el = el.previousElementSibling as HTMLElement | null
    ) {
      if (this.deferred.has(el)) {
        if (this.blocked(el)) {
          continue;
        }
        if (rendered > 0 && now() - start >= budget) {
          this.looking = true; // the rest of the end: the next frame (flush)
          return;
        }
        this.forget(el);
        chars += host.render(el);
        rendered++;
        this.counters.tail++;
      } else {
        chars += host.chars(el);
      }
    }
  }

  /** Renders `el` now if it is deferred; returns whether it was. */
  renderNow(el: HTMLElement): boolean {
    if (!this.deferred.has(el)) {
      return false;
    }
    this.forget(el);
    this.options.host.render(el);
    return true;
  }

  /**
   * A history arrived at once at the end of a list that follows its bottom:
   * its end renders in frames of its own, not in the task that built the
   * list (see the module comment), and the list is not shown until then.
   */
  holdEnd(): void {
    if (this.disposed || !this.options.host.following()) {
      return;
    }
    if (this.holding === 0) {
      this.options.root.classList.add(OPENING_CLASS);
    }
    this.holding = 6;
    this.request();
  }

  /** Whether a history's end waits for its frames ({@link holdEnd}). */
  get holdingEnd(): boolean {
    return this.holding > 0;
  }

  /** Asks for a frame that puts waiting messages in the DOM ({@link LazyHost.attach}). */
  wake(): void {
    this.attaching = true;
    this.request();
  }

  /**
   * After the list settled (its end rendered at once while it follows its
   * bottom): asks for the frame that looks for the placeholders made since,
   * if any are left. So a chat streaming at its bottom, whose new questions
   * are deferred and rendered at once, asks for no frame of its own.
   */
  flush(): void {
    this.glyphsParked = false;
    if (this.deferred.size === 0) {
      this.looking = false;
      this.glyphTexts = []; // rendered: their characters were laid out
    }
    this.request(); // if looking, or characters wait for their fonts
  }

  /** Asks for a frame that renders the placeholders near the view (if any). */
  look(): void {
    this.glyphsParked = false;
    if (this.deferred.size > 0) {
      this.looking = true;
      this.request();
    }
  }

  /** Stops; nothing is rendered any more. */
  dispose(): void {
    this.disposed = true;
    this.marks?.disconnect();
    this.glyphBox?.remove();
    this.glyphBox = null;
    if (this.frame !== null) {
      this.options.scheduler.cancel(this.frame);
      this.frame = null;
    }
    if (this.retry !== null) {
      this.options.timer.clear(this.retry);
      this.retry = null;
    }
  }

  private request(): void {
    if (
      this.frame === null &&
      (this.looking || this.attaching || this.holding > 0 || this.glyphsWaiting()) &&
      !this.disposed
    ) {
      this.frame = this.options.scheduler.request(this.tick);
    }
  }

  /**
   * Whether characters of deferred messages wait to be laid out for their
   * fonts (not while parked: the list out of sight, a search's marks in it,
   * or the warmer loading; see {@link warmGlyphs}).
   */
  private glyphsWaiting(): boolean {
    return (
      !this.glyphsParked &&
      ((this.glyphTexts.length > 0 && this.deferred.size > 0) || (this.warmer?.pending ?? 0) > 0)
    );
  }

  /** Keeps `text` for the glyph warmer if it has characters that may need a fallback font. */
  private noteGlyphs(text: string): void {
    if (this.options.glyphs !== undefined && MAYBE_FALLBACK.test(text)) {
      if (this.warmer !== null) {
        this.warmer.add(text);
      } else {
        this.glyphTexts.push(text);
      }
    }
  }

  /**
   * A frame with nothing else to do lays out characters of the deferred
   * messages, hidden, for `budgetMs` (glyphs.ts), so that the browser has
   * found their fonts before they scroll into view.
   */
  private warmGlyphs(budgetMs: number): void {
    if (this.warmer === null) {
      // asked for only once placeholders stay after the end rendered: a long history
      if (this.glyphTexts.length === 0 || this.deferred.size === 0) {
        return;
      }
      this.warmer = this.options.glyphs?.() ?? null;
      if (this.warmer === null) {
        this.glyphsParked = true; // loading: the host looks again when it arrives
        return;
      }
    }
    const glyphs = this.warmer;
    const start = this.options.now();
    while (this.glyphTexts.length > 0 && this.options.now() - start < budgetMs / 2) {
      for (const text of this.glyphTexts.splice(0, 25)) {
        glyphs.add(text);
      }
    }
    if (glyphs.pending === 0) {
      return;
    }
    budgetMs -= this.options.now() - start;
    const root = this.options.root;
    // A list the browser skips (its cell out of sight: JupyterLab's `content-visibility:
    // auto`) would be styled and laid out whole by the read of a box beside it: the
    // characters wait until the list is looked at again (look, flush).
    if (root.checkVisibility?.({ contentVisibilityAuto: true }) === false) {
      this.glyphsParked = true;
      return;
    }
    // JupyterLab's search over outputs is open (its marks are in the list): the
    // characters wait until it closes (onMarks looks again), as the marked
    // placeholders do
    if (root.querySelector("mark") !== null) {
      this.glyphsParked = true;
      return;
    }
    if (this.glyphBox === null) {
      // In the page's body, not in the output: the output's DOM stays still while
      // characters are laid out (JupyterLab's search over cell outputs lost its current
      // match while warming ran, traced in tests/test_browser_long_chat.py; what fixed
      // that is waiting while its marks are in the list, above). In the list's font,
      // so that the sizes are the messages' (the strikes, glyphs.ts).
      const doc = root.ownerDocument;
      this.glyphBox = doc.createElement("div");
      this.glyphBox.className = "nbs-warm";
      this.glyphBox.setAttribute("aria-hidden", "true");
      const font = doc.defaultView?.getComputedStyle(root).font;
      if (font) {
        this.glyphBox.style.font = font;
      }
      doc.body.append(this.glyphBox);
    }
    glyphs.step(this.glyphBox, this.options.now, budgetMs);
    this.counters.glyphFrames++;
    if (glyphs.pending === 0 && this.glyphTexts.length === 0) {
      this.glyphBox.remove();
      this.glyphBox = null;
    }
  }

  /**
   * Whether a search match (JupyterLab's `mark`) sits in `el`'s placeholder;
   * such a placeholder shows its source (an attribute change: that search
   * only restarts when nodes change).
   */
  private blocked(el: HTMLElement): boolean {
    const textEl = this.deferred.get(el);
    if (textEl?.querySelector("mark") == null) {
      return false;
    }
    el.removeAttribute("hidden");
    if (this.retry === null && !this.disposed) {
      this.retry = this.options.timer.set(() => {
        this.retry = null;
        this.look();
      }, MARK_RETRY_MS);
    }
    return true;
  }

  /**
   * The deferred messages within one view height of the view, nearest first:
   * a binary search for the first message that ends below the margin's top
   * (the messages are in order, so their positions grow), then a walk down.
   */
  near(): HTMLElement[] {
    const root = this.options.root;
    const els = this.options.host.elements();
    if (els.length === 0) {
      return [];
    }
    const box = root.getBoundingClientRect();
    if (box.width > 0) {
      this.width = box.width;
    }
    const view = root.clientHeight;
    const top = box.top + root.clientTop;
    const from = top - view;
    const to = top + 2 * view;
    let lo = 0;
    let hi = els.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((els[mid] as HTMLElement).getBoundingClientRect().bottom < from) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const found: { el: HTMLElement; distance: number; i: number }[] = [];
    for (let i = lo; i < els.length; i++) {
      const el = els[i] as HTMLElement;
      const r = el.getBoundingClientRect();
      if (r.top > to) {
        break;
      }
      if (this.deferred.has(el)) {
        found.push({ el, distance: Math.max(0, top - r.bottom, r.top - (top + view)), i });
      }
    }
    // nearest first; among those in view (distance 0), the lowest first
    return found.sort((a, b) => a.distance - b.distance || b.i - a.i).map((f) => f.el);
  }

  /** One frame: a chunk of waiting messages, or the placeholders near the view. */
  private readonly tick = (): void => {
    this.frame = null;
    if (this.disposed) {
      return;
    }
    const { host, now, root } = this.options;
    if (this.holding === 6) {
      // the history's end into the DOM, as placeholders: not in the frame that built
      // its state (reconciled its order), each half of that work a frame
      this.holding = 5;
      if (this.attaching) {
        this.attaching = host.attach();
      }
      this.request();
      return;
    }
    if (this.holding >= 3) {
      host.warm(WARM_STEPS[5 - this.holding] as WarmPart);
      this.holding = (this.holding - 1) as 2 | 3 | 4;
      this.request();
      return; // a part of the renderer's first run is this frame's work
    }
    if (this.holding === 2) {
      // the end rendered, not yet laid out: the list's content is skipped while it opens
      this.holding = 1;
      if (host.following()) {
        this.renderEnd();
      }
      this.request();
      return;
    }
    if (this.holding === 1) {
      this.holding = 0;
      root.classList.remove(OPENING_CLASS);
      host.settled(); // the end rendered (renderTail), the list at its bottom
      this.request();
      return;
    }
    if (this.attaching) {
      const before = host.following() ? 0 : root.scrollHeight;
      const budget = this.budgetMs;
      const start = now();
      do {
        this.attaching = host.attach();
      } while (this.attaching && now() - start < budget);
      this.looking = this.deferred.size > 0;
      if (host.following()) {
        host.settled();
      } else {
        host.shift(root.scrollHeight - before); // added above the reader's place
      }
      this.request();
      return; // a chunk is this frame's work
    }
    this.looking = false;
    const budget = this.budgetMs;
    if (this.deferred.size === 0) {
      this.warmGlyphs(budget);
      this.request();
      return;
    }
    const start = now();
    const near = this.near();
    const following = host.following();
    // the placeholders that start above the view move what the reader sees when
    // they render: their heights, read before anything is written (one layout)
    const before = new Map<HTMLElement, number>();
    if (!following) {
      const top = root.getBoundingClientRect().top + root.clientTop;
      for (const el of near) {
        const r = el.getBoundingClientRect();
        if (r.top < top) {
          before.set(el, r.height);
        }
      }
    }
    let rendered = 0;
    let left = false;
    for (const el of near) {
      if (rendered > 0 && now() - start >= budget) {
        left = true;
        break;
      }
      if (this.blocked(el)) {
        continue;
      }
      this.forget(el);
      host.render(el);
      rendered++;
    }
    if (rendered > 0) {
      this.counters.near += rendered;
      this.counters.frames++;
      if (following) {
        host.settled();
      } else {
        let dy = 0;
        for (const [el, height] of before) {
          if (!this.deferred.has(el)) {
            dy += el.getBoundingClientRect().height - height;
          }
        }
        if (Math.abs(dy) >= 0.5) {
          host.shift(dy);
        }
      }
    }
    // rendered messages may be shorter than estimated: more may have come near
    if (left || rendered > 0) {
      this.looking = true;
    } else {
      this.warmGlyphs(budget - (now() - start)); // nothing near: a frame to spare
    }
    this.request();
  };
}
