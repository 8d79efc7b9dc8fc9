// markdown-it's Unicode classes (ucmicro.ts, standing in for the `uc.micro`
// package in the bundle): every class matches exactly the code points the
// package's tables match, over all of Unicode, and markdown-it's emphasis
// rules (which read P and S) render as CommonMark says around punctuation and
// symbols of several scripts.
import { Any, Cc, Cf, P, S, Z } from "uc.micro";
import { describe, expect, it } from "vitest";
import { renderHtml } from "../src/markdown";
import * as mine from "../src/ucmicro";

/** each class: the package's expression and ours */
const CLASSES: [string, RegExp, RegExp][] = [
  ["Any", Any, mine.Any],
  ["Cc", Cc, mine.Cc],
  ["Cf", Cf, mine.Cf],
  ["P", P, mine.P],
  ["S", S, mine.S],
  ["Z", Z, mine.Z],
];

describe("ucmicro.ts", () => {
  it("matches what uc.micro matches, code point by code point", () => {
    const differ: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      const ch = cp >= 0xd800 && cp <= 0xdfff ? String.fromCharCode(cp) : String.fromCodePoint(cp);
      for (const [k, theirs, ours] of CLASSES) {
        if (theirs.test(ch) !== ours.test(ch)) {
          differ.push(`${k} U+${cp.toString(16)}`);
        }
      }
    }
    expect(differ.slice(0, 10)).toEqual([]);
  });

  it("is what markdown-it's emphasis rules read: punctuation and symbols of any script", () => {
    // a delimiter run after punctuation (here a CJK full stop, a symbol) opens emphasis
    expect(renderHtml("中文。*强调*后")).toContain("<em>强调</em>");
    expect(renderHtml("a*€*b")).not.toContain("<em>"); // € is a symbol (S)
    expect(renderHtml("a*。*b")).not.toContain("<em>"); // 。 is punctuation (P)
    expect(renderHtml("«*quoted*»")).toContain("<em>quoted</em>");
  });
});
