// @vitest-environment jsdom
// The code block being written is built without the sanitizer (incremental.ts
// `codeBlockNodes`) and grown in place: the same DOM as sanitizing markdown.ts's HTML,
// on hostile fences, every prefix; blocks that are not a top-level code block still go
// through the sanitizer. Every prefix of the benchmark corpus's answers:
// incremental.code.exhaustive.test.ts.
import { describe, expect, it } from "vitest";
import { codeBlockNodes, MarkdownSink } from "../src/incremental";
import { codeLanguage, parse, renderTokens } from "../src/markdown";
import { sanitize } from "../src/sanitize";
import { SIZED_CLASS } from "../src/sized";
import { everyPrefix, oneShot, oneShotOpen } from "./incremental_helpers";

const html = (nodes: readonly Node[]): string => {
  const el = document.createElement("div");
  el.append(...nodes.map((n) => n.cloneNode(true)));
  return el.innerHTML;
};

/** Fences whose every part is hostile, or odd: the info string, the text, the closing. */
const HOSTILE: Record<string, string> = {
  infoHtml: '```<img src=x onerror="alert(1)">\nx\n```',
  infoQuote: '```py"onclick="alert(1)\nx = 1\n',
  infoClass: "```jp-OutputArea\nx\n",
  infoLong: `\`\`\`${"a".repeat(41)}\nx\n`,
  infoEntity: "```&#x70;ython extra words\nprint(1)\n",
  infoEscaped: "```py\\+\nx\n",
  bodyCode: "```html\n</code></pre><script>alert(1)</script>\n<p>after</p>\n",
  bodyCommand:
    '```\n<div data-commandlinker-command="terminal:create-new">click</div>\n<a href="javascript:alert(1)">x</a>\n',
  bodyEntities: "```\n&amp; &lt;b&gt; &#0; &nbsp; \u00a0\n",
  bodyNul: '```c\nchar s[] = "a\0b";\n',
  bodyCrlf: "```\r\nline one\r\nline two\rline three\r\n",
  bodyTabs: "```\n\tindented\n  \t mixed\n",
  bodyComment: "```\n<!-- x --> <![CDATA[ y ]]> <?pi?>\n",
  bodyMath: "```\n$x$ \\(y\\) $$z$$\n",
  bodyEmpty: "```py\n",
  bodyBlankLines: "```\n\n\n\nx\n\n",
  tilde: "~~~ts {1,3}\nconst a = 1;\n~~~~\n",
  longerClose: "````md\n```\ninner\n```\n````\nafter\n",
  indentedFence: "  ```py\n  a = 1\n    b = 2\nc = 3\n",
  indentedCode: "para\n\n    indented code\n    <b>bold?</b>\n",
  inList: "- item\n\n  ```py\n  x = '<script>'\n  ```\n",
  inQuote: "> ```js\n> let a = '</code>';\n",
  closedLater: "```py\ndef f():\n    return '</pre>'\n```\n\nafter the fence\n",
  astral: "```\n😀 𝒳 中文\n",
};

describe("codeBlockNodes makes what the sanitizer makes of the code block's HTML", () => {
  it.each(Object.entries(HOSTILE))("%s, at every prefix", (_name, text) => {
    for (let n = 1; n <= text.length; n++) {
      const env = {};
      const tokens = parse(text.slice(0, n).replace(/\r\n?/g, "\n").replace(/\0/g, "\uFFFD"), env);
      for (const token of tokens) {
        if (token.level !== 0 || (token.type !== "fence" && token.type !== "code_block")) {
          continue;
        }
        const built = codeBlockNodes(document, {
          content: token.content,
          lang: codeLanguage(token),
        });
        const sanitized = [...sanitize(document, renderTokens([token], env)).childNodes];
        expect(html(built)).toBe(html(sanitized));
        expect(built.length).toBe(sanitized.length);
        expect(built.map((node, i) => node.isEqualNode(sanitized[i] as Node))).toEqual(
          sanitized.map(() => true),
        );
      }
    }
  });

  it("the language is a class only when LANG_RE allows it", () => {
    const lang = (text: string) => codeLanguage(parse(text, {})[0] as never);
    expect(lang("```py extra\nx\n")).toBe("py");
    expect(lang("```c++\nx\n")).toBe("c++");
    expect(lang('```py"onclick="x\nx\n')).toBe("");
    expect(lang("```<b>\nx\n")).toBe("");
    expect(lang(`\`\`\`${"a".repeat(41)}\nx\n`)).toBe("");
    expect(lang("    indented\n")).toBe("");
  });
});

describe("the code block being written: built, grown in place, the sanitized DOM", () => {
  it.each(Object.entries(HOSTILE))("hostile %s: every prefix", (_name, text) => {
    const el = document.createElement("div");
    everyPrefix(text);
    // and in random-sized pieces, with what was shown checked for anything live
    const sink = new MarkdownSink(el);
    for (const piece of text.match(/[\s\S]{1,3}/g) ?? []) {
      sink.append(piece);
      expect(el.innerHTML).toBe(oneShotOpen(sink.source));
      expect(
        el.querySelector("script, img, [onerror], [onclick], [data-commandlinker-command]"),
      ).toBeNull();
    }
  });

  it("grows the shown text node: the block's nodes are kept while it is written", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("Intro\n\n```py\ndef f(");
    const code = el.querySelector("pre > code");
    const text = code?.firstChild;
    const calls = sink.sanitizeCalls;
    for (const piece of ["x):\n", "    return '</code><script>'", "\n"]) {
      sink.append(piece);
      expect(el.querySelector("pre > code")).toBe(code);
      expect(code?.firstChild).toBe(text);
      expect(code?.childNodes.length).toBe(1);
      expect(el.innerHTML).toBe(oneShotOpen(sink.source));
    }
    expect(sink.sanitizeCalls).toBe(calls); // no call for the growing block
    expect(code?.textContent).toBe("def f(x):\n    return '</code><script>'\n");
    expect(el.querySelector("script")).toBeNull();
  });

  it("a closing line that turns out not to close is taken back", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("```\na\n``");
    expect(el.querySelector("code")?.textContent).toBe("a\n``");
    sink.append("`"); // closes: the text is "a\n" again
    expect(el.innerHTML).toBe(oneShotOpen(sink.source));
    expect(el.querySelector("code")?.textContent).toBe("a\n");
    sink.append("` not a fence\nb\n```\n\nnext");
    expect(el.innerHTML).toBe(oneShotOpen(sink.source));
    sink.finish();
    expect(el.innerHTML).toBe(oneShot(sink.source));
  });

  it("the fence closed later is highlighted as before: the grown node, once, when it freezes", () => {
    const seen: HTMLElement[] = [];
    const el = document.createElement("div");
    const sink = new MarkdownSink(el, { onClosedCode: (c) => seen.push(c) });
    sink.append("```ts\nconst a");
    const code = el.querySelector("pre > code");
    expect(code?.className).toBe("language-ts");
    sink.append(" = 1;\n```\n");
    expect(seen).toEqual([]); // still the open tail (nothing after it yet)
    sink.append("\nafter\n\nmore\n");
    expect(seen).toEqual([code]);
    expect(code?.textContent).toBe("const a = 1;\n");
    expect(el.querySelector("pre > code")).toBe(code);
    sink.finish();
    expect(seen).toEqual([code]);
    expect(el.innerHTML).toBe(oneShot(sink.source));
  });

  it("a fence in a list item or a quote, or a changed language, goes through the sanitizer", () => {
    for (const text of [HOSTILE.inList, HOSTILE.inQuote] as string[]) {
      const el = document.createElement("div");
      const sink = new MarkdownSink(el);
      for (const ch of text) {
        sink.append(ch);
      }
      expect(sink.builtCode + sink.grownCode).toBe(0);
      expect(el.innerHTML).toBe(oneShotOpen(sink.source));
    }
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("```p");
    sink.append("\nx");
    const first = el.querySelector("pre > code");
    expect(first?.className).toBe("language-p");
    sink.replace("```py\nx");
    expect(el.querySelector("pre > code")?.className).toBe("language-py");
    expect(el.innerHTML).toBe(oneShotOpen(sink.source));
  });

  it("a grown block is laid out in full again (loses the class that lets it skip layout)", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("```\na");
    const block = el.querySelector(".nbs-code") as Element;
    block.classList.add(SIZED_CLASS); // as sized.ts does once it was laid out
    sink.append("b");
    expect(el.querySelector(".nbs-code")).toBe(block);
    expect(block.classList.contains(SIZED_CLASS)).toBe(false);
    expect(el.innerHTML).toBe(oneShotOpen(sink.source));
  });
});
