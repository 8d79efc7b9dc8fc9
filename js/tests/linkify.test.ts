// Bare URLs and addresses (linkify.ts): markdown-it's linkifier is linkify.ts,
// which hands text to linkify-it (the linkify chunk) once it is loaded and
// notes a miss before. Checked here: with the chunk loaded, the view links
// exactly what markdown-it with linkify-it itself links; MAYBE_LINK, the check
// that spares the chunk, holds for every text linkify-it finds a link in (a
// text it passes over would stay unlinked after the chunk arrived); without the
// chunk, text that may hold a link asks for it and notes a miss, and text that
// cannot asks for nothing.
import fc from "fast-check";
import { LinkifyIt as Real } from "linkify-it";
import MarkdownIt from "markdown-it";
import { afterEach, describe, expect, it } from "vitest";
import { type ChunkName, misses, provideChunk, resetChunks, setChunkHost } from "../src/chunks";
import * as entities from "../src/chunks/entities";
import * as highlight from "../src/chunks/highlight";
import * as linkifyChunk from "../src/chunks/linkify";
import * as math from "../src/chunks/math";
import { LinkifyIt, MAYBE_LINK } from "../src/linkify";
import { renderHtml } from "../src/markdown";

const TEXTS = [
  "See https://example.org/a?b=1&c=2#d, then stop.",
  "HTTP://EXAMPLE.ORG and ftp://files.example.org/x.tar.gz",
  "Protocol-relative: //cdn.example.org/lib.js and a/b//c",
  "Mail ada.lovelace@example.org or mailto:bob@example.org.",
  "(https://example.org/wiki/Foo_(bar)) and <https://example.org/angle>",
  "A link [named](https://example.org/named) and a bare https://example.org/bare",
  "`https://in.code/span` and `me@in.code`, but https://outside.org",
  "**https://bold.example.org** _me@italic.example.org_",
  "http: alone, https:/one-slash, x@y without a dot, @decorator, 1 @ 2",
  "中文 https://例子.测试/路径 😀 and 名前@example.jp",
  "- item https://example.org/list\n- item two\n\n| a | b |\n|---|---|\n| https://t.org | c@d.org |\n",
  "```\nhttps://in.fence.org\n```\n\n    https://indented.org\n",
];

/** What the property test builds texts of: schemes, separators, hosts, other scripts. */
const PIECES =
  "http https ftp mailto HTTPS : / // @ . - + _ a ex example org com x.org 1 ( ) [ ] < > \" ' ` é 名 例子 😀".split(
    " ",
  );

afterEach(() => {
  // leave the next tests as setup.ts left them: every chunk loaded
  provideChunk("math", math);
  provideChunk("highlight", highlight);
  provideChunk("entities", entities);
  provideChunk("linkify", linkifyChunk);
});

describe("linkify", () => {
  it("with the chunk loaded, the view links what markdown-it with linkify-it links", () => {
    const reference = new MarkdownIt("default", { html: false, linkify: true });
    reference.linkify = new Real() as unknown as typeof reference.linkify;
    const ours = new MarkdownIt("default", { html: false, linkify: true });
    expect(ours.linkify).toBeInstanceOf(LinkifyIt); // markdown-it's `linkify-it` is linkify.ts
    for (const text of TEXTS) {
      expect(ours.render(text)).toBe(reference.render(text));
    }
    // and the view's own parser (its rules on top) links them
    const html = renderHtml(TEXTS[0] as string);
    expect(html).toContain('href="https://example.org/a?b=1&amp;c=2#d"');
  });

  it("MAYBE_LINK holds wherever linkify-it finds a link", () => {
    const real = new Real();
    const piece = fc.constantFrom(...PIECES, " ", "\n");
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 24 }), (pieces) => {
        const text = pieces.join("");
        if (real.test(text) || real.matchAtStart(text) !== null) {
          expect(MAYBE_LINK.test(text)).toBe(true);
        }
      }),
      { numRuns: 5000 },
    );
    for (const text of TEXTS) {
      if (real.test(text)) {
        expect(MAYBE_LINK.test(text)).toBe(true);
      }
    }
  });

  it("without the chunk, text that may hold a link asks for it once and notes a miss", () => {
    resetChunks();
    const requests: ChunkName[] = [];
    setChunkHost({ request: (name) => requests.push(name) });
    const before = misses();
    const plain = renderHtml("No link here: a/b, x:y, `@decorator`, 1 @ 2.");
    expect(plain).not.toContain("<a ");
    expect(requests).toEqual([]);
    expect(misses()).toBe(before);
    // an address alone (markdown-it's inline rule only looks at `scheme://`)
    expect(renderHtml("Write to me@example.org")).not.toContain("<a ");
    expect(requests).toEqual(["linkify"]);
    const html = renderHtml("See https://example.org/x and me@example.org");
    expect(html).not.toContain("<a ");
    expect(html).toContain("https://example.org/x"); // as text, until the chunk comes
    expect(requests).toEqual(["linkify"]);
    expect(misses()).toBeGreaterThan(before);
    renderHtml("More: https://example.org/y");
    expect(requests).toEqual(["linkify"]); // asked once
    provideChunk("linkify", linkifyChunk);
    expect(renderHtml("See https://example.org/x")).toContain('<a href="https://example.org/x"');
  });

  it("an explicit Markdown link needs no chunk", () => {
    resetChunks();
    const requests: ChunkName[] = [];
    setChunkHost({ request: (name) => requests.push(name) });
    const html = renderHtml(
      "A [named link](https://example.org/named) and <https://example.org/auto>",
    );
    expect(html).toContain('href="https://example.org/named"');
    expect(html).toContain('href="https://example.org/auto"');
    expect(requests).toEqual([]);
  });
});
