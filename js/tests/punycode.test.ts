// @vitest-environment jsdom
// markdown-it's host names through the URL parser (punycode.ts, standing in
// for the `punycode.js` package in the bundle): an internationalized name in a
// link's href becomes its ASCII form, an ASCII name is unchanged, a name that
// would parse as more than a host is refused, and a bare link's text shows the
// name as written.
import { describe, expect, it } from "vitest";
import { renderHtml } from "../src/markdown";
import { toASCII, toUnicode } from "../src/punycode";

describe("punycode.ts", () => {
  it("gives an internationalized host name its ASCII form, as the URL standard does", () => {
    expect(toASCII("bücher.example")).toBe("xn--bcher-kva.example");
    expect(toASCII("例子.测试")).toBe("xn--fsqu00a.xn--0zwm56d");
    expect(toASCII("BÜCHER.example")).toBe("xn--bcher-kva.example");
  });

  it("leaves an ASCII name as it is, and refuses what is not a host name", () => {
    expect(toASCII("Example.ORG")).toBe("Example.ORG");
    expect(toASCII("xn--bcher-kva.example")).toBe("xn--bcher-kva.example");
    for (const bad of ["é.example/evil", "é@evil.example", "é.example:80", "é#x", "é x"]) {
      expect(() => toASCII(bad)).toThrow();
    }
  });

  it("shows a name as written in a link's text", () => {
    expect(toUnicode("xn--bcher-kva.example")).toBe("xn--bcher-kva.example");
    expect(toUnicode("bücher.example")).toBe("bücher.example");
  });

  it("is what markdown-it uses: hrefs in ASCII, the text as the model wrote it", () => {
    const html = renderHtml("[books](https://bücher.example/a) and https://bücher.example/b");
    expect(html).toContain('href="https://xn--bcher-kva.example/a"');
    expect(html).toContain('href="https://xn--bcher-kva.example/b"');
    expect(html).toContain(">https://bücher.example/b</a>");
  });
});
