// @vitest-environment jsdom
// The sanitizer and the Markdown pipeline against the XSS corpus that the
// browser test streams through a real widget (tests/browser/xss_payloads.json).
// jsdom runs no script, so here the checks are on the DOM that results; the
// browser test also checks that nothing executes.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MarkdownSink, renderOnce } from "../src/incremental";
import { loadableImageUrl, purifierFor, safeLinkUrl, sanitize } from "../src/sanitize";

const PAYLOADS: { name: string; text: string }[] = JSON.parse(
  readFileSync(join(__dirname, "..", "..", "tests", "browser", "xss_payloads.json"), "utf8"),
);

// MathML is allowed (formulas); its risky parts are not (maction, semantics, annotation).
const FORBIDDEN_TAGS =
  "script, style, iframe, frame, object, embed, img, svg, maction, semantics, annotation, annotation-xml, mglyph, form, input, textarea, select, video, audio, source, meta, base, link, template, noscript, x-nbs, marquee, details, body";
const CLASS_RE = /^(?:nbs-[a-z-]+|hljs(?:-[a-z_-]+)?|language-[A-Za-z0-9_+#.-]{1,40})$/;
const ALLOWED_ATTRS = new Set([
  "href",
  "title",
  "class",
  "start",
  "type",
  "aria-label",
  "target",
  "rel",
  // MathML presentation attributes (lengths bounded, colours plain: checked below)
  "accent",
  "columnalign",
  "depth",
  "display",
  "displaystyle",
  "fence",
  "form",
  "height",
  "lspace",
  "mathbackground",
  "mathcolor",
  "mathsize",
  "mathvariant",
  "movablelimits",
  "notation",
  "rspace",
  "scriptlevel",
  "stretchy",
  "width",
]);

const LENGTH_ATTRS = ["width", "height", "depth", "lspace", "rspace", "mathsize"];

/** Every reason `root` is unsafe; empty when it is safe. */
function violations(root: ParentNode): string[] {
  const out: string[] = [];
  for (const el of root.querySelectorAll(FORBIDDEN_TAGS)) {
    out.push(`tag ${el.tagName}`);
  }
  for (const el of root.querySelectorAll("*")) {
    for (const name of el.getAttributeNames()) {
      if (!ALLOWED_ATTRS.has(name)) {
        out.push(`attribute ${name} on ${el.tagName}`);
      }
    }
    for (const name of LENGTH_ATTRS) {
      const v = el.getAttribute(name);
      if (
        v !== null &&
        !/^-?(?:\d{1,2}(?:\.\d+)?|\.\d+)(?:em|ex)?$|^-?\d{1,3}(?:\.\d+)?(?:pt|px)$/.test(v)
      ) {
        out.push(`length ${name}=${v} on ${el.tagName}`);
      }
    }
    for (const name of ["mathcolor", "mathbackground"]) {
      const v = el.getAttribute(name);
      if (v !== null && !/^(?:#[0-9a-f]{3,8}|[a-z]+)$/i.test(v)) {
        out.push(`colour ${name}=${v} on ${el.tagName}`);
      }
    }
    const cls = el.getAttribute("class");
    for (const c of cls === null ? [] : cls.split(/\s+/)) {
      if (!CLASS_RE.test(c)) {
        out.push(`class ${c}`);
      }
    }
    const href = el.getAttribute("href");
    if (href !== null) {
      if (el.tagName !== "A" || !/^(?:https?:\/\/|mailto:)/i.test(href)) {
        out.push(`href ${href} on ${el.tagName}`);
      }
      if (
        el.getAttribute("rel") !== "noopener noreferrer" ||
        el.getAttribute("target") !== "_blank"
      ) {
        out.push(`link without rel/target: ${href}`);
      }
    }
  }
  return out;
}

const fragmentRoot = (fragment: DocumentFragment) => {
  const div = document.createElement("div");
  div.appendChild(fragment);
  return div;
};

describe("the XSS corpus", () => {
  it("has at least 40 payloads, each named once", () => {
    expect(PAYLOADS.length).toBeGreaterThanOrEqual(40);
    expect(new Set(PAYLOADS.map((p) => p.name)).size).toBe(PAYLOADS.length);
  });

  it.each(PAYLOADS.map((p) => [p.name, p.text]))("%s: as Markdown", (_name, text) => {
    const root = fragmentRoot(renderOnce(document, text));
    expect(violations(root)).toEqual([]);
  });

  it.each(PAYLOADS.map((p) => [p.name, p.text]))("%s: as HTML, sanitizer alone", (_name, text) => {
    const root = fragmentRoot(sanitize(document, text));
    expect(violations(root)).toEqual([]);
  });

  it("streamed in random pieces, every intermediate frame is safe", () => {
    const all = PAYLOADS.map((p) => p.text).join("\n\n");
    fc.assert(
      fc.property(fc.array(fc.nat({ max: all.length }), { maxLength: 80 }), (cuts) => {
        const el = document.createElement("div");
        const sink = new MarkdownSink(el);
        let prev = 0;
        for (const c of [...new Set(cuts)].sort((a, b) => a - b).concat(all.length)) {
          sink.append(all.slice(prev, c));
          prev = c;
          expect(violations(el)).toEqual([]);
        }
        sink.finish();
        expect(violations(el)).toEqual([]);
      }),
      { numRuns: 15 },
    );
  }, 60_000);

  it.each(PAYLOADS.map((p) => [p.name, p.text]))(
    "%s: in every path of a stream (the block being written, kept, frozen)",
    (_name, text) => {
      // the payload between two paragraphs, three characters a frame: it is the block being
      // written, then a finished block of the tail that keeps its nodes, then a frozen chunk
      const all = `Before it.\n\n${text}\n\nAfter it, a paragraph that grows.\n\nEnd.\n`;
      const el = document.createElement("div");
      const sink = new MarkdownSink(el);
      for (let i = 0; i < all.length; i += 3) {
        sink.append(all.slice(i, i + 3));
        expect(violations(el)).toEqual([]);
      }
      sink.finish();
      expect(violations(el)).toEqual([]);
      expect(el.innerHTML).toBe(fragmentRoot(renderOnce(document, all)).innerHTML);
    },
  );
});

describe("sanitizer policy", () => {
  const html = (s: string) => fragmentRoot(sanitize(document, s)).innerHTML;

  it("keeps safe links, opening in a new tab without opener or referrer", () => {
    expect(html('<a href="https://example.com/a?b=1">x</a>')).toBe(
      '<a href="https://example.com/a?b=1" target="_blank" rel="noopener noreferrer">x</a>',
    );
    expect(html('<a href="mailto:a@b.example">m</a>')).toContain('href="mailto:a@b.example"');
  });

  it("drops every other href, keeping the text", () => {
    for (const href of [
      "javascript:x",
      "/api/kernels",
      "../lab",
      "#top",
      "data:text/html,x",
      "ftp://x",
    ]) {
      expect(html(`<a href="${href}">t</a>`)).toBe("<a>t</a>");
    }
  });

  it("drops data attributes, styles, ids, names and handlers; filters classes", () => {
    expect(
      html(
        '<p id="a" name="b" style="color:red" class="jp-Dialog nbs-md hljs-keyword" data-commandlinker-command="x" onclick="y">t</p>',
      ),
    ).toBe('<p class="nbs-md hljs-keyword">t</p>');
  });

  it("forces buttons to type=button, without commands", () => {
    expect(html('<button type="submit" commandfor="d" command="show-modal">b</button>')).toBe(
      '<button type="button">b</button>',
    );
  });

  it("clean input loses nothing, not even the body it is parsed into (else each call copies it)", () => {
    const input =
      '<h2>t</h2>\n<ul>\n<li>a <a href="https://x.example">l</a></li>\n</ul>\n<p>p</p>\n';
    const out = sanitize(document, input);
    expect(purifierFor(document).removed).toEqual([]);
    expect(fragmentRoot(out).innerHTML).toBe(
      input.replace('">l', '" target="_blank" rel="noopener noreferrer">l'),
    );
  });

  it("a body tag anywhere in the input leaves no body and none of its attributes", () => {
    for (const input of [
      '<body onload="x" data-commandlinker-command="help:about" class="nbs-x">t</body>',
      '<p>a</p><body onclick="x"><p>b</p></body>',
      '<svg><body onload="x">t</body></svg>',
      '<math><mi><body onload="x">t</body></mi></math>',
      '<math><mtext><body onload="x"><mglyph><style><img src=x onerror="x">',
      '<table><body onload="x"><tr><td>t</td></tr></table>',
      '<template><body onload="x">t</body></template>',
      '<noscript><body onload="x"><p title="</noscript><img src=x onerror=x>">',
      "<html><body onpageshow=x><body data-commandlinker-command=x>t",
      '<form><math><mtext></form><form><mglyph><body onload="x">',
    ]) {
      const root = fragmentRoot(sanitize(document, input));
      expect(violations(root), input).toEqual([]);
      expect(root.innerHTML, input).not.toMatch(/onload|onclick|onerror|onpageshow|commandlinker/);
    }
  });

  it("HTML with no body (a frameset document) gives nothing, not an error", () => {
    for (const input of ['<div id="x"><frameset onload="x">', "<frameset><frame src=x>"]) {
      expect(fragmentRoot(sanitize(document, input)).innerHTML, input).toBe("");
    }
  });

  it("links and images that may load", () => {
    expect(safeLinkUrl("https://x.example")).toBe(true);
    expect(safeLinkUrl("javascript:alert(1)")).toBe(false);
    expect(safeLinkUrl("java\tscript:alert(1)")).toBe(false);
    expect(safeLinkUrl("relative/path")).toBe(false);
    expect(loadableImageUrl("https://x.example/a.png")).toBe("https://x.example/a.png");
    expect(loadableImageUrl(" data:image/png;base64,AAAA")).toBe("data:image/png;base64,AAAA");
    expect(loadableImageUrl("data:image/svg+xml;base64,AAAA")).toBeNull();
    expect(loadableImageUrl("javascript:alert(1)")).toBeNull();
    expect(loadableImageUrl("/files/x.png")).toBeNull();
  });
});

describe("Markdown output", () => {
  const md = (s: string) => fragmentRoot(renderOnce(document, s));

  it("renders an image as a placeholder that shows its URL and loads nothing", () => {
    const root = md("![a cat](https://cats.example/c.png)");
    expect(root.querySelector("img")).toBeNull();
    const b = root.querySelector("button.nbs-img");
    expect(b?.querySelector(".nbs-img-alt")?.textContent).toBe("a cat");
    expect(b?.querySelector(".nbs-img-url")?.textContent).toBe("https://cats.example/c.png");
  });

  it("wraps code blocks with a copy button, and tables in a scroll box with aligned cells", () => {
    const root = md("```py\nx = 1\n```\n\n| a | b |\n|:-:|--:|\n| 1 | 2 |\n");
    expect(root.querySelector(".nbs-code > .nbs-code-bar > button.nbs-copy-code")).not.toBeNull();
    expect(root.querySelector(".nbs-code-lang")?.getAttribute("title")).toBe("py");
    expect(root.querySelector("pre > code.language-py")?.textContent).toBe("x = 1\n");
    expect(root.querySelector(".nbs-table > table th")?.className).toBe("nbs-align-center");
    expect(root.querySelector("td:last-child")?.className).toBe("nbs-align-right");
    expect(root.querySelector("[style]")).toBeNull();
  });

  it("escapes raw HTML: it shows as the text it is", () => {
    const root = md("Use <b>bold</b> & <script>x</script>");
    expect(root.querySelector("b, script")).toBeNull();
    expect(root.textContent?.trim()).toBe("Use <b>bold</b> & <script>x</script>");
  });

  it("keeps the text of a message free of button labels (they are CSS-generated)", () => {
    const root = md("```js\nlet a;\n```");
    expect(root.textContent?.trim()).toBe("let a;");
  });
});
