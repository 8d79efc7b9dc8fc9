// @vitest-environment jsdom
// Math in Markdown (math.ts through markdown.ts, incremental.ts and the
// sanitizer): the four delimiters, prices that stay text, formulas that appear
// only when closed, failures that show their source, the untrusted-input
// settings, and copy giving the TeX source.
import { afterEach, describe, expect, it, vi } from "vitest";
import { mountChat } from "../src/chat";
import { MarkdownSink, renderOnce } from "../src/incremental";
import { MATH_MAX_CHARS, renderMath } from "../src/math";
import { mathLengthOk } from "../src/sanitize";
import { FakeFrames, FakeModel, message } from "./fakes";

const render = (text: string): HTMLElement => {
  const el = document.createElement("div");
  el.appendChild(renderOnce(document, text));
  return el;
};

const MATHML = "http://www.w3.org/1998/Math/MathML";

describe("delimiters", () => {
  it.each([
    ["$x^2$", "inline", false],
    ["\\(x^2\\)", "inline", false],
    ["$$x^2$$", "inline display", true],
    ["\\[x^2\\]", "inline display", true],
    ["$$\nx^2\n$$", "block", true],
    ["\\[\nx^2\n\\]", "block", true],
    ["$$x^2$$\n", "one-line block", true],
  ])("%s renders as MathML (%s)", (text, _kind, display) => {
    const el = render(`before\n\n${text}\n\nafter`);
    const math = el.querySelector("math");
    expect(math?.namespaceURI).toBe(MATHML);
    expect(math?.querySelector("msup")).not.toBeNull();
    expect(math?.getAttribute("display") === "block").toBe(display);
    expect(el.querySelector(".nbs-math-source, .nbs-math-pending")).toBeNull();
    expect(el.textContent).not.toContain("x^2");
  });

  it.each([
    ["It costs $5 and $10.", "$5 and $10"],
    ["between $ 1 and 2 $ here", "$ 1 and 2 $"],
    ["escaped \\$x\\$ stays", "$x$"],
    ["in code `$x$` stays", "$x$"],
    ["$x $ has a space before the closer", "$x $"],
    ["$x$5 a digit after the closer", "$x$5"],
  ])("%s stays text", (text, shown) => {
    const el = render(text);
    expect(el.querySelector("math")).toBeNull();
    expect(el.textContent).toContain(shown);
  });

  it("ignores math in code blocks and keeps prices next to a formula", () => {
    const el = render("```\n$$x$$\n```\n\nPay $5, then $a+b$ is $c$; $10 left.");
    expect(el.querySelector("pre")?.textContent).toBe("$$x$$\n");
    expect(el.querySelectorAll("math").length).toBe(2);
    expect(el.textContent).toContain("Pay $5, then");
    expect(el.textContent).toContain("$10 left.");
  });
});

describe("a formula that does not parse shows its source, never an exception", () => {
  it.each([
    "$\\frac{a}{$",
    "$x^$",
    "\\(\\left( x\\)",
    "$$\n\\begin{matrix} a \\end{pmatrix}\n$$",
    "$\\undefinedmacro{x}$",
  ])("%s", (text) => {
    const el = render(text);
    expect(el.querySelector("math")).toBeNull();
    const src = el.querySelector(".nbs-math-source");
    expect(src).not.toBeNull();
    expect(el.textContent?.replace(/\s+/g, " ").trim()).toBe(text.replace(/\s+/g, " "));
  });

  it("a formula that is too long shows its source", () => {
    expect(renderMath("x+".repeat(MATH_MAX_CHARS), false)).toBeNull();
  });
});

describe("untrusted input", () => {
  it.each([
    "\\href{javascript:alert(1)}{x}",
    "\\url{javascript:alert(1)}",
    "\\htmlData{foo=bar}{x}",
    "\\class{jp-Dialog}{x}",
    "\\style{position:fixed}{x}",
    "\\includegraphics{https://example.invalid/x.png}",
    "\\def\\a{\\a\\a}\\a",
  ])("%s is refused (trust off, expansion bounded)", (tex) => {
    expect(renderMath(tex, false)).toBeNull();
  });

  it("sizes are capped, and the sanitizer drops lengths past its own bound", () => {
    const el = render("$\\rule{99999em}{99999em}$ $\\kern{99999pt}x$");
    for (const node of el.querySelectorAll("mspace")) {
      for (const name of ["width", "height"]) {
        const v = node.getAttribute(name);
        expect(v === null || mathLengthOk(v)).toBe(true);
      }
    }
    expect(mathLengthOk("20em")).toBe(true);
    expect(mathLengthOk("200pt")).toBe(true);
    expect(mathLengthOk("1e9em")).toBe(false);
    expect(mathLengthOk("26em")).toBe(false);
    expect(mathLengthOk("calc(100vh)")).toBe(false);
  });

  it("no style, id, href or data attribute survives on MathML", () => {
    const el = render(
      "$\\color{red}{x}$ $\\boxed{y}$ $$\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}$$ $\\tag{1} z$",
    );
    expect(el.querySelectorAll("math").length).toBeGreaterThan(2);
    for (const node of el.querySelectorAll("*")) {
      for (const name of node.getAttributeNames()) {
        expect(name).not.toMatch(/^(?:style|id|href|on|data-|xlink)/);
      }
    }
  });

  it("a \\gdef in one formula does not reach the next", () => {
    expect(renderMath("\\gdef\\nbsx{7} \\nbsx", false)).not.toBeNull();
    expect(renderMath("\\nbsx", false)).toBeNull();
  });
});

describe("streaming: a formula appears only when complete", () => {
  const stream = (parts: string[]) => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    const frames = parts.map((p) => {
      sink.append(p);
      return el.innerHTML;
    });
    sink.finish();
    return { el, frames };
  };

  it("an inline formula is pending (its source, dimmed) until its closer arrives", () => {
    const { el, frames } = stream(["Let $\\frac{a", "}{b} + c", "$ be it."]);
    expect(frames[0]).toContain('<span class="nbs-math-pending">$\\frac{a</span>');
    expect(frames[1]).toContain('<span class="nbs-math-pending">$\\frac{a}{b} + c</span>');
    expect(frames[2]).toContain("<math>");
    expect(frames[2]).not.toContain("nbs-math-pending");
    expect(el.querySelector("mfrac")).not.toBeNull();
  });

  it("a closing $ at the very end waits for the next character (a digit would undo it)", () => {
    const { el, frames } = stream(["It is $x$", "5 now."]);
    expect(frames[0]).toContain("nbs-math-pending");
    expect(frames[0]).not.toContain("<math");
    expect(el.querySelector("math")).toBeNull();
    expect(el.textContent?.trim()).toBe("It is $x$5 now.");
  });

  it("a price is not dimmed while it streams", () => {
    const { frames } = stream(["It costs $5", " and $10 more"]);
    for (const f of frames) {
      expect(f).not.toContain("nbs-math-pending");
    }
  });

  it("a display block is pending until its closing line, then becomes one formula", () => {
    const { el, frames } = stream(["Sum:\n\n$$\n\\sum_i", " i\n\n= n\n$", "$\nafter"]);
    expect(frames[0]).toContain('class="nbs-math-block nbs-math-pending"');
    expect(frames[1]).toContain('class="nbs-math-block nbs-math-pending"');
    expect(frames[1]).not.toContain("<math");
    expect(frames[2]).toContain("<math");
    expect(el.querySelectorAll("math").length).toBe(1);
    expect(el.querySelector("p:last-child")?.textContent).toBe("after");
  });

  it("a pending paragraph that ended is text, not pending", () => {
    const { frames } = stream(["costs $x more", "\n\nnext"]);
    expect(frames[0]).toContain("nbs-math-pending");
    expect(frames[1]).not.toContain("nbs-math-pending");
    expect(frames[1]).toContain("costs $x more");
  });

  it("an unclosed block in a finished text shows its source, not dimmed", () => {
    const { el } = stream(["$$\n\\frac{a}{b}\n"]);
    expect(el.querySelector(".nbs-math-source")?.textContent).toBe("$$\n\\frac{a}{b}");
    expect(el.querySelector(".nbs-math-pending")).toBeNull();
  });

  it("valid math never shows an error at any prefix, and formulas never go away", () => {
    const text =
      "Euler $e^{i\\pi}+1=0$ and \\(\\sqrt{2}\\), then\n\n$$\n\\int_0^1 x^2\\,dx = \\frac13\n$$\n\nand \\[\\sum_{k=1}^n k\\] with $$a_1$$ done.\n";
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    let formulas = 0;
    for (const ch of text) {
      sink.append(ch);
      expect(el.querySelector(".nbs-math-source"), JSON.stringify(sink.source)).toBeNull();
      const n = el.querySelectorAll("math").length;
      expect(n).toBeGreaterThanOrEqual(formulas);
      formulas = n;
    }
    sink.finish();
    expect(formulas).toBe(5);
  });
});

describe("copy", () => {
  afterEach(() => {
    document.body.textContent = "";
    vi.restoreAllMocks();
  });

  it("copying a reply copies its Markdown, with the TeX source of its formulas", async () => {
    const text = "Area: $\\pi r^2$, and\n\n$$\n\\int_0^1 x\\,dx\n$$\n";
    const model = new FakeModel({ conversation: [message("a", { text, status: "done" })] });
    const frames = new FakeFrames();
    const el = document.createElement("div");
    document.body.appendChild(el);
    const cleanup = mountChat(model, el, { scheduler: frames, now: () => 0, idle: null });
    frames.frame();
    const writes: string[] = [];
    Object.defineProperty(navigator, "clipboard", {
      configurable: true,
      value: {
        writeText: (t: string) => {
          writes.push(t);
          return Promise.resolve();
        },
      },
    });
    expect(el.querySelectorAll(".nbs-md math").length).toBe(2);
    (el.querySelector("button.nbs-copy-msg") as HTMLButtonElement).click();
    await vi.waitFor(() => expect(writes).toEqual([text]));
    cleanup();
  });
});
