/**
 * Syntax highlighting of closed code blocks, off the critical path.
 *
 * highlight.js (core and a handful of languages) is the highlighting chunk
 * (chunks/highlight.ts), loaded the first time a closed block names a
 * language (chunks.ts): a page whose answers have no code never parses it.
 * Blocks are queued as they close (incremental.ts) and highlighted in idle
 * time (`requestIdleCallback`, a timer where there is none), as many per
 * idle period as its deadline allows, so highlighting never delays a frame
 * or the first paint; the queue waits for the chunk. A block of an unknown or
 * unnamed language stays plain (no auto-detection: it would run every
 * grammar on every block), and so does one over {@link MAX_CHARS}.
 * highlight.js escapes the code it wraps; its output still passes through the
 * sanitizer. Runs on the browser's main thread.
 */
import { chunk, onChunk } from "./chunks";
import { sanitize } from "./sanitize";

/** Blocks longer than this stay plain: highlighting them could take a long task. */
export const MAX_CHARS = 20_000;

/** The language a `code` element names (its `language-*` class), if any. */
function languageOf(code: HTMLElement): string | undefined {
  return /(?:^|\s)language-([A-Za-z0-9_+#.-]+)/.exec(code.className)?.[1];
}

/** The language names the highlighter knows ([] until its chunk is loaded). */
export function languages(): string[] {
  return chunk("highlight")?.languages() ?? [];
}

/**
 * Highlights one `code` element now, if its `language-*` class names a known
 * language; returns whether it did (false too while the chunk is not loaded).
 */
export function highlightElement(code: HTMLElement): boolean {
  if (code.classList.contains("hljs")) {
    return false;
  }
  const name = languageOf(code);
  if (name === undefined) {
    return false;
  }
  const engine = chunk("highlight");
  const text = code.textContent ?? "";
  if (engine === null || text.length > MAX_CHARS) {
    return false;
  }
  const html = engine.highlight(text, name);
  if (html === null) {
    return false;
  }
  code.replaceChildren(sanitize(code.ownerDocument, html));
  code.classList.add("hljs");
  return true;
}

/** The part of an idle deadline the queue reads. */
export interface IdleDeadline {
  timeRemaining(): number;
}

/** What `requestIdleCallback` / `cancelIdleCallback` provide. */
export interface IdleScheduler {
  request(callback: (deadline: IdleDeadline) => void): number;
  cancel(handle: number): void;
}

/** The browser's idle callbacks; a short timer with a small budget where there are none. */
export function browserIdle(win: Window & typeof globalThis): IdleScheduler {
  if (typeof win.requestIdleCallback === "function") {
    return {
      request: (cb) => win.requestIdleCallback(cb, { timeout: 2000 }),
      cancel: (h) => win.cancelIdleCallback(h),
    };
  }
  return {
    request: (cb) => {
      const start = win.performance.now();
      return win.setTimeout(
        () => cb({ timeRemaining: () => Math.max(0, 8 - (win.performance.now() - start)) }),
        50,
      ) as unknown as number;
    },
    cancel: (h) => win.clearTimeout(h),
  };
}

/** A queue of code blocks highlighted in idle time (once the highlighting chunk is there). */
export class Highlighter {
  private readonly queue: HTMLElement[] = [];
  private handle: number | null = null;
  /** stops waiting for the chunk; set while the queue waits for it */
  private unwait: (() => void) | null = null;
  /** blocks highlighted so far */
  done = 0;

  constructor(private readonly idle: IdleScheduler) {}

  /** Queues a closed block; one that names no language is left plain at once. */
  enqueue(code: HTMLElement): void {
    if (languageOf(code) === undefined) {
      return;
    }
    this.queue.push(code);
    if (chunk("highlight") === null) {
      // asked for now; the queue runs when it is there
      this.unwait ??= onChunk("highlight", () => {
        this.unwait?.();
        this.unwait = null;
        this.schedule();
      });
      return;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.handle === null && this.queue.length > 0) {
      this.handle = this.idle.request(this.run);
    }
  }

  /** Highlights everything queued now (tests). */
  flush(): void {
    this.run({ timeRemaining: () => Number.POSITIVE_INFINITY });
  }

  dispose(): void {
    this.queue.length = 0;
    this.unwait?.();
    this.unwait = null;
    if (this.handle !== null) {
      this.idle.cancel(this.handle);
      this.handle = null;
    }
  }

  private readonly run = (deadline: IdleDeadline): void => {
    if (this.handle !== null) {
      this.idle.cancel(this.handle);
      this.handle = null;
    }
    if (chunk("highlight") === null) {
      return; // the queue waits for the chunk (enqueue listens for it)
    }
    let first = true;
    while (this.queue.length > 0 && (first || deadline.timeRemaining() > 4)) {
      const code = this.queue.shift() as HTMLElement;
      // a block removed since (the conversation was cleared) is skipped
      try {
        if (code.isConnected && highlightElement(code)) {
          this.done++;
          first = false;
        }
      } catch (err) {
        console.error("nbstream: highlighting a code block failed; it stays plain", err);
      }
    }
    if (this.queue.length > 0) {
      this.handle = this.idle.request(this.run);
    }
  };
}
