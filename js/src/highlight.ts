/**
 * Syntax highlighting of closed code blocks, off the critical path.
 *
 * highlight.js core with a handful of languages registered explicitly (not
 * the 190-language bundle), registered on the first block to highlight.
 * Blocks are queued as they close (incremental.ts) and highlighted in idle
 * time (`requestIdleCallback`, a timer where there is none), as many per idle
 * period as its deadline allows, so highlighting never delays a frame or the
 * first paint. A block of an unknown or unnamed language stays plain (no
 * auto-detection: it would run every grammar on every block), and so does one
 * over {@link MAX_CHARS}. highlight.js escapes the code it wraps; its output
 * still passes through the sanitizer. Runs on the browser's main thread.
 */
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import diff from "highlight.js/lib/languages/diff";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { sanitize } from "./sanitize";

const LANGUAGES = {
  bash,
  c,
  cpp,
  diff,
  javascript,
  json,
  markdown,
  python,
  rust,
  shell,
  sql,
  typescript,
  xml,
  yaml,
};

/** Blocks longer than this stay plain: highlighting them could take a long task. */
export const MAX_CHARS = 20_000;

let registered = false;

function register(): void {
  if (!registered) {
    registered = true;
    for (const [name, language] of Object.entries(LANGUAGES)) {
      hljs.registerLanguage(name, language);
    }
  }
}

/** The registered language names (aliases such as `py`, `js`, `html` work too). */
export function languages(): string[] {
  register();
  return hljs.listLanguages();
}

/**
 * Highlights one `code` element now, if its `language-*` class names a known
 * language; returns whether it did.
 */
export function highlightElement(code: HTMLElement): boolean {
  if (code.classList.contains("hljs")) {
    return false;
  }
  const name = /(?:^|\s)language-([A-Za-z0-9_+#.-]+)/.exec(code.className)?.[1];
  if (name === undefined) {
    return false;
  }
  register();
  const text = code.textContent ?? "";
  if (hljs.getLanguage(name) === undefined || text.length > MAX_CHARS) {
    return false;
  }
  const html = hljs.highlight(text, { language: name, ignoreIllegals: true }).value;
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

/** A queue of code blocks highlighted in idle time. */
export class Highlighter {
  private readonly queue: HTMLElement[] = [];
  private handle: number | null = null;
  /** blocks highlighted so far */
  done = 0;

  constructor(private readonly idle: IdleScheduler) {}

  enqueue(code: HTMLElement): void {
    this.queue.push(code);
    if (this.handle === null) {
      this.handle = this.idle.request(this.run);
    }
  }

  /** Highlights everything queued now (tests). */
  flush(): void {
    this.run({ timeRemaining: () => Number.POSITIVE_INFINITY });
  }

  dispose(): void {
    this.queue.length = 0;
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
