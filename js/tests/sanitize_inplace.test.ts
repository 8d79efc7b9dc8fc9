// @vitest-environment jsdom
// The in-place path of sanitize() (HTML parsed into a reused inert body, DOMPurify with
// IN_PLACE) against the string path it replaces for most calls (sanitizeParsed): the same
// nodes for everything markdown.ts emits, never more for hostile input, and the inert body
// empty after every call. jsdom's parser is not Chromium's: benchmarks/sanitize_cost.mjs
// --check compares both paths in Chromium, over the corpus and DOMPurify's own vectors.
import { describe, expect, it } from "vitest";
import { renderHtml } from "../src/markdown";
import { inertBodyFor, parsesInPlace, sanitize, sanitizeParsed } from "../src/sanitize";
import { CORPUS } from "./corpus";

const html = (frag: DocumentFragment): string => {
  const div = document.createElement("div");
  div.append(frag);
  return div.innerHTML;
};

const HOSTILE = [
  "<p>a<script>alert(1)</script>b</p>",
  '<p onclick="alert(1)" onmouseover=alert(1)>x</p>',
  '<div data-commandlinker-command="terminal:create-new" data-commandlinker-args="{}">c</div>',
  '<a href="javascript:alert(1)">j</a><a href=" JaVaScRiPt:alert(1)">k</a><a href="/api/x">r</a>',
  '<img src=x onerror="alert(1)"><image src=x onerror=alert(1)>',
  '<svg onload="alert(1)"><a xlink:href="javascript:alert(1)"><text>t</text></a></svg>',
  '<style>*{display:none}</style><p style="position:fixed">s</p>',
  '<math><maction actiontype="statusline"><mi>x</mi></maction><semantics><mi>y</mi><annotation-xml encoding="text/html"><img src=x onerror=alert(1)></annotation-xml></semantics></math>',
  '<p id="attributes" name="removeChild">clobber</p><form id="x"><input name="nodeName"></form>',
  '<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;img src=1 onerror=alert(1)&gt;">',
  '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
  '<template><script>alert(1)</script></template><iframe src="javascript:alert(1)"></iframe>',
  '<button type="submit" formaction="javascript:alert(1)" commandfor="d" command="show-modal">b</button>',
];

const FORBIDDEN =
  "script, style, img, image, svg, iframe, form, input, template, noscript, maction, semantics, annotation-xml, mglyph";

describe("the in-place path", () => {
  it("takes what markdown.ts emits, and turns away HTML a body parses unlike a document", () => {
    expect(parsesInPlace("<h2>t</h2>\n")).toBe(true);
    expect(parsesInPlace(renderHtml(CORPUS[Object.keys(CORPUS)[0] as string] as string))).toBe(
      true,
    );
    for (const s of [
      "<div><frameset>",
      "<FRAMESET onload=x>",
      "<html><p>x",
      "</body><p>x",
      "<head>",
      "<title>t</title> <p>x",
      "<!doctype html><p>a<table>",
      "<!-- c -->\n<p>x",
      "\r\n<p>x",
      "\f<p>x",
      "\uFEFF<p>x",
      "<p>a</p><noscript>b</noscript>",
      "<p>a</p><template>",
    ]) {
      expect(parsesInPlace(s), s).toBe(false);
    }
    expect(parsesInPlace("<p>title and body and html as words</p>")).toBe(true);
    expect(parsesInPlace("<htmlx>")).toBe(true);
  });

  it("gives the string path's nodes for every block of the corpus, and for every answer whole", () => {
    let inPlace = 0;
    for (const [name, text] of Object.entries(CORPUS)) {
      const whole = renderHtml(text);
      for (const part of [whole, ...whole.split(/\n(?=<)/)]) {
        if (part === "") continue;
        if (parsesInPlace(part)) inPlace++;
        expect(html(sanitize(document, part)), name).toBe(html(sanitizeParsed(document, part)));
        expect(inertBodyFor(document).childNodes.length).toBe(0);
      }
    }
    expect(inPlace).toBeGreaterThan(Object.keys(CORPUS).length);
  });

  it("lets through nothing the string path removes, and leaves its inert body empty", () => {
    for (const input of HOSTILE) {
      const out = sanitize(document, input);
      expect(inertBodyFor(document).childNodes.length, input).toBe(0);
      const div = document.createElement("div");
      div.append(out);
      expect(div.querySelector(FORBIDDEN), input).toBeNull();
      for (const el of div.querySelectorAll("*")) {
        for (const attr of el.getAttributeNames()) {
          expect(attr, input).not.toMatch(
            /^(?:on|data-|id$|name$|style$|src$|xlink:|formaction$|command)/,
          );
        }
        const href = el.getAttribute("href");
        if (href !== null) expect(href, input).toMatch(/^https?:|^mailto:/);
      }
      expect(div.innerHTML, input).toBe(html(sanitizeParsed(document, input)));
    }
  });

  it("nodes come out owned by the view's document, and a later call does not touch them", () => {
    const first = sanitize(document, "<p>one</p>");
    const kept = [...first.childNodes];
    expect(kept.every((n) => n.ownerDocument === document)).toBe(true);
    sanitize(document, "<p>two</p>");
    expect((kept[0] as Element).outerHTML).toBe("<p>one</p>");
  });

  it("a frameset-shaped input still gives an empty fragment", () => {
    for (const input of ["<div><frameset><frame src=x></frameset>", "<frameset onload=alert(1)>"]) {
      expect(sanitize(document, input).childNodes.length, input).toBe(0);
      expect(inertBodyFor(document).childNodes.length).toBe(0);
    }
  });

  it("many calls: the body stays empty and the nodes keep coming (a new inert document now and then)", () => {
    for (let i = 0; i < 100; i++) {
      expect(html(sanitize(document, `<p>n${i}<img src=x onerror=alert(1)></p>`))).toBe(
        `<p>n${i}</p>`,
      );
      expect(inertBodyFor(document).childNodes.length).toBe(0);
    }
  });
});
