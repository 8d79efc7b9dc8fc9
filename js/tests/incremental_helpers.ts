// Helpers of the incremental Markdown tests (incremental.test.ts and the exhaustive
// incremental.exhaustive.test.ts): one-shot renders to compare with, and streams of
// random deltas grouped into frames.
import fc from "fast-check";
import { expect } from "vitest";
import { MarkdownSink, renderOnce } from "../src/incremental";
import { parse, renderTokens } from "../src/markdown";
import { sanitize } from "../src/sanitize";
import { ALL, CORPUS } from "./corpus";

export const oneShot = (text: string): string => {
  const el = document.createElement("div");
  el.appendChild(renderOnce(document, text));
  return el.innerHTML;
};

/** Cuts `text` at the given positions (any positions, sorted and deduplicated). */
export const split = (text: string, cuts: number[]): string[] => {
  const at = [...new Set(cuts.map((c) => Math.min(text.length, Math.max(0, c))))].sort(
    (a, b) => a - b,
  );
  const out: string[] = [];
  let prev = 0;
  for (const c of [...at, text.length]) {
    if (c > prev) {
      out.push(text.slice(prev, c));
      prev = c;
    }
  }
  return out;
};

/** Random deltas, grouped at random into frames (each frame renders once). */
export const stream = (text: string) =>
  fc
    .tuple(
      fc.array(fc.nat({ max: text.length }), { maxLength: Math.min(120, text.length) }),
      fc.array(fc.boolean(), { minLength: 200, maxLength: 200 }),
    )
    .map(([cuts, frameEnds]) => {
      const deltas = split(text, cuts);
      const frames: string[] = [];
      let acc = "";
      deltas.forEach((d, i) => {
        acc += d;
        if (frameEnds[i % frameEnds.length] || i === deltas.length - 1) {
          frames.push(acc);
          acc = "";
        }
      });
      return frames;
    });

export const hasReferenceDefinitions = (text: string) => /^ {0,3}\[[^\]]+\]:/m.test(text);

export const docs = Object.entries({ ...CORPUS, all: ALL });

/** Documents with math: every delimiter, prices, escapes, failures, unclosed formulas. */
export const MATH_DOCS: Record<string, string> = {
  inline:
    "Euler: $e^{i\\pi} + 1 = 0$, and \\(a^2 + b^2 = c^2\\) holds.\nIt costs $5 and $10, or \\$3.\n",
  display:
    "The sum:\n\n$$\n\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}\n$$\n\nand\n\\[\n\\int_0^1 x\\,dx = \\tfrac12\n\\]\nafter.\n",
  mixed:
    "# Formulas\n\n- a list with $x_1$\n- and $$\\sqrt{2}$$ inline display\n\n> quoted \\(\\alpha\\)\n\n| a | b |\n|---|---|\n| $x$ | \\(y\\) |\n\n```\n$not math$\n```\n\n`$code$` then $\\frac{a}{b}$ end",
  broken:
    "Bad: $\\frac{a}{$ and $x^$ and \\(\\left(\\).\n\n$$\n\\begin{matrix} a \\end{pmatrix}\n$$\n",
  unclosed: "Text $x + y and more\n\nnext $$ still open\n\n$$\n\\frac{a}{b}\n\nno close",
  dense: "$a$$b$ $ c$ $d $ $$e$$$f$ \\\\(g\\\\) \\(h\\) $i$5 $j$.\n$$k$$\n\\[l\\]\n",
};

/** What the sink should show for `text` while it may still grow: a one-shot parse of it as open text. */
export const oneShotOpen = (text: string): string => {
  const env = { mathOpen: true };
  const el = document.createElement("div");
  el.appendChild(sanitize(document, renderTokens(parse(text, env), env)));
  return el.innerHTML;
};

/**
 * Streams `text` character by character into a sink; after each character whose frame
 * built the code block being written without the sanitizer, the DOM must be the
 * one-shot's, and after the end too. Returns the sink (its counters).
 */
export function everyPrefix(text: string): MarkdownSink {
  const el = document.createElement("div");
  const sink = new MarkdownSink(el);
  for (const ch of text) {
    const built = sink.builtCode + sink.grownCode;
    sink.append(ch);
    if (sink.builtCode + sink.grownCode !== built) {
      // a frame whose code block did not go through the sanitizer
      expect(el.innerHTML).toBe(oneShotOpen(sink.source));
    }
  }
  sink.finish();
  expect(el.innerHTML).toBe(oneShot(text));
  return sink;
}
