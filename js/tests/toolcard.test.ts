// @vitest-environment jsdom
// Tool calls (#20) as the view shows them: cards between a reply's first words and
// its later rounds, arguments streaming, approval buttons that send the answer, the
// result (rich and sanitized), and hostile text that stays text.
import { afterEach, describe, expect, it } from "vitest";
import { Conversation } from "../src/buffer";
import { mountChat } from "../src/chat";
import { KeyReader } from "../src/keys";
import { toDeltaParts, toToolMetas } from "../src/protocol";
import type { FrameWork, PageFrames } from "../src/scheduler";
import {
  toolCall as call,
  FakeFrames,
  FakeModel,
  replyState as reply,
  userState as user,
} from "./fakes";

type State = Record<string, unknown>;

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
});

function mount(state: State) {
  const model = new FakeModel();
  model.update(state);
  const frames = new FakeFrames();
  const el = document.createElement("div");
  document.body.appendChild(el);
  const cleanup = mountChat(model, el, { scheduler: frames, now: () => 0, idle: null });
  cleanups.push(cleanup);
  const msg = (id: string) => el.querySelector<HTMLElement>(`.nbs-message[data-id="${id}"]`);
  const card = (id: string, n = 0) =>
    msg(id)?.querySelector<HTMLElement>(`.nbs-tool[data-call="${n}"]`);
  return { model, frames, el, msg, card };
}

describe("the protocol's tool runs", () => {
  it("keeps the runs in order only when a delta has the tool loop's, and checks them", () => {
    expect(toDeltaParts([["answer", "a"]])).toEqual({ text: "a", reasoning: "", runs: null });
    expect(
      toDeltaParts([
        ["answer", "Let me look. "],
        ["tool", '{"ci', 0],
        ["tool", "x", -1], // a bad call number: skipped
        ["tool_result", "18", 0, { "text/html": "<b>18</b>" }],
        ["round", "", 1],
        ["answer", "It is 18."],
        ["mystery", "?"],
      ]),
    ).toEqual({
      text: "Let me look. It is 18.",
      reasoning: "",
      runs: [
        { type: "answer", text: "Let me look. " },
        { type: "tool", n: 0, text: '{"ci' },
        { type: "tool_result", n: 0, text: "18", display: { "text/html": "<b>18</b>" } },
        { type: "round", n: 1 },
        { type: "answer", text: "It is 18." },
      ],
    });
    expect(toToolMetas([{ id: 1 }, call("bogus"), "x"])).toEqual([
      null,
      { id: "call_1", name: "get_weather", state: "cancelled", round: 0 },
      null,
    ]);
  });

  it("the buffer keeps a reply's head apart from its tool-loop tail", () => {
    const conv = new Conversation();
    const state: State = {
      last_id: 1,
      m1: reply("running", 0),
      "m1.1": [
        ["reasoning", "hm "],
        ["answer", "Let me look. "],
      ],
      "m1.2": [
        ["tool", "{}", 0],
        ["tool_result", "ok", 0, {}],
      ],
      "m1.3": [
        ["round", "", 1],
        ["answer", "Done."],
      ],
      live: { m1: 3 },
    };
    const reader = new KeyReader({ get: (k) => state[k] }, conv);
    reader.sync(0);
    const e = conv.get("m1");
    expect(e?.text).toBe("Let me look. Done.");
    expect(e?.toolHead).toEqual({ text: 13, reasoning: 3 });
    expect(e?.toolTail?.map((r) => r.type)).toEqual(["tool", "tool_result", "round", "answer"]);
  });
});

describe("the tool-call card", () => {
  it("streams the arguments, asks, sends the answer, shows the result and the next round", () => {
    const v = mount({ last_id: 2, m1: user("Weather?"), m2: reply("running", 0), live: { m2: 0 } });
    v.model.update({
      "m2.1": [
        ["reasoning", "I need the weather."],
        ["answer", "Let me check. "],
        ["tool", '{"city": "Pa', 0],
      ],
      m2: reply("running", 1, { tools: [call("streaming")] }),
      live: { m2: 1 },
    });
    v.frames.frame();
    const card = v.card("m2");
    expect(card?.dataset.state).toBe("streaming");
    expect(card?.querySelector(".nbs-tool-name")?.textContent).toBe("get_weather");
    expect(card?.querySelector(".nbs-tool-args")?.textContent).toBe('{"city": "Pa');
    // the card sits after the reply's first words; the reasoning above them, folded
    const kids = [...(v.msg("m2")?.children ?? [])].map((c) => c.className);
    expect(kids.indexOf("nbs-reasoning")).toBeLessThan(kids.indexOf("nbs-text nbs-md"));
    expect(kids.indexOf("nbs-text nbs-md")).toBeLessThan(kids.indexOf("nbs-tool-parts"));
    expect(v.msg("m2")?.querySelector<HTMLDetailsElement>(".nbs-reasoning")?.open).toBe(false);
    const argsNode = card?.querySelector(".nbs-tool-args")?.firstChild;
    v.model.update({
      "m2.2": [["tool", 'ris"}', 0]],
      m2: reply("running", 2, { tools: [call("awaiting_approval", { asks: true, always: true })] }),
      live: { m2: 2 },
    });
    v.frames.frame();
    // appended to the same text node: no re-render, no jump
    expect(card?.querySelector(".nbs-tool-args")?.firstChild).toBe(argsNode);
    expect(card?.querySelector(".nbs-tool-args")?.textContent).toBe('{"city": "Paris"}');
    expect(card?.querySelector(".nbs-tool-state")?.textContent).toBe("waiting for your approval");
    expect(v.msg("m2")?.querySelector(".nbs-status")?.textContent).toBe(
      "waiting for your approval",
    );
    const buttons = [...(card?.querySelectorAll<HTMLButtonElement>("button") ?? [])];
    expect(buttons.map((b) => b.textContent)).toEqual(["Allow", "Always allow", "Deny"]);
    buttons[0]?.click();
    expect(v.model.sent.filter((m) => m.kind === "tool_approval")).toEqual([
      { kind: "tool_approval", id: "m2", call: "call_1", decision: "allow" },
    ]);
    expect(buttons.every((b) => b.disabled)).toBe(true); // one answer per card
    v.model.update({
      "m2.3": [
        ["tool_result", "18 °C, sunny", 0, {}],
        ["round", "", 1],
        ["answer", "It is **18 °C**."],
      ],
      m2: reply("done", 3, {
        finish_reason: "stop",
        tools: [call("done", { asks: true, always: true, ms: 412 })],
      }),
      live: {},
    });
    v.frames.frame();
    expect(card?.querySelector(".nbs-tool-approval")).toBeNull();
    expect(card?.querySelector(".nbs-tool-time")?.textContent).toBe("412 ms");
    const result = card?.querySelector<HTMLDetailsElement>(".nbs-tool-result");
    expect(result?.open).toBe(true); // short: shown
    expect(result?.querySelector(".nbs-tool-text")?.textContent).toBe("18 °C, sunny");
    const round = v.msg("m2")?.querySelector(".nbs-tool-parts > .nbs-round");
    expect(round?.querySelector(".nbs-text strong")?.textContent).toBe("18 °C");
    expect(v.msg("m2")?.querySelector(":scope > .nbs-text")?.textContent?.trim()).toBe(
      "Let me check.",
    );
  });

  it("the arguments follow their end, read after every view wrote (not in the paint)", () => {
    // a layout for the arguments' box in jsdom: 10 px a character, 100 px high, scrollTop kept
    const reads: string[] = [];
    const tops = new WeakMap<Element, number>();
    const proto = HTMLPreElement.prototype;
    const saved = ["scrollHeight", "clientHeight", "scrollTop"].map(
      (k) => [k, Object.getOwnPropertyDescriptor(proto, k)] as const,
    );
    Object.defineProperty(proto, "scrollHeight", {
      configurable: true,
      get(this: HTMLElement) {
        reads.push("scrollHeight");
        return (this.textContent?.length ?? 0) * 10;
      },
    });
    Object.defineProperty(proto, "clientHeight", { configurable: true, get: () => 100 });
    Object.defineProperty(proto, "scrollTop", {
      configurable: true,
      get(this: HTMLElement) {
        reads.push("scrollTop");
        return tops.get(this) ?? 0;
      },
      set(this: HTMLElement, v: number) {
        const max = Math.max(0, (this.textContent?.length ?? 0) * 10 - 100);
        tops.set(this, Math.min(max, Math.max(0, v)));
      },
    });
    cleanups.push(() => {
      for (const [k, d] of saved) {
        if (d === undefined) {
          delete (proto as unknown as Record<string, unknown>)[k];
        } else {
          Object.defineProperty(proto, k, d);
        }
      }
    });
    // a page loop by hand: run (writes), then settle (reads), as scheduler.ts does
    let work: FrameWork | null = null;
    const page: PageFrames = {
      register(w) {
        work = w;
        return { request: () => undefined, pending: false, dispose: () => undefined };
      },
      stats: {} as PageFrames["stats"],
    };
    const model = new FakeModel();
    model.update({ last_id: 2, m1: user("?"), m2: reply("running", 0), live: { m2: 0 } });
    const el = document.createElement("div");
    document.body.appendChild(el);
    cleanups.push(mountChat(model, el, { frames: page, now: () => 0, idle: null }));
    const pre = () => el.querySelector<HTMLPreElement>(".nbs-tool-args");
    let seq = 0;
    const args = (text: string) => {
      seq += 1;
      model.update({
        [`m2.${seq}`]: [["tool", text, 0]],
        m2: reply("running", seq, { tools: [call("streaming")] }),
        live: { m2: seq },
      });
      reads.length = 0;
      (work as FrameWork | null)?.run(0);
      const inPaint = reads.length;
      (work as FrameWork | null)?.settle?.();
      return inPaint;
    };
    expect(args('{"query": "')).toBe(0); // the paint reads no layout
    expect(reads).toContain("scrollHeight"); // the settle does
    expect(args("x".repeat(50))).toBe(0);
    expect(pre()?.scrollTop).toBe(610 - 100); // at the end: 61 characters
    // a batch taller than the old 40 px slack still follows (the page loop batches)
    args("y".repeat(30));
    expect(pre()?.scrollTop).toBe(910 - 100);
    // the user scrolls up in it: left there while more arrives
    const box = pre() as HTMLPreElement;
    box.scrollTop = 200;
    args("z".repeat(5));
    expect(box.scrollTop).toBe(200);
    // back at the end: followed again
    box.scrollTop = 10_000;
    args("w".repeat(5));
    expect(box.scrollTop).toBe(1010 - 100);
  });

  it("a reply shown whole (a saved notebook) renders its cards and rounds the same", () => {
    const v = mount({
      last_id: 2,
      m1: user("?"),
      m2: reply("done", 1, {
        finish_reason: "max_tool_rounds",
        tools: [
          call("done", { ms: 5 }),
          { ...call("denied"), id: "c2", error: "denied by the user" },
        ],
      }),
      "m2.1": [
        ["tool", '{"a": 1}', 0],
        ["tool", "{}", 1],
        ["tool_result", "x".repeat(700), 0, {}],
        ["tool_result", "The user denied this tool call.", 1, {}],
        ["round", "", 1],
        ["answer", "ok"],
      ],
      live: {},
    });
    v.frames.frame();
    expect(v.card("m2", 0)?.dataset.state).toBe("done");
    expect(v.card("m2", 0)?.querySelector<HTMLDetailsElement>(".nbs-tool-result")?.open).toBe(
      false,
    ); // long: folded
    expect(v.card("m2", 1)?.querySelector(".nbs-tool-error")?.textContent).toBe(
      "denied by the user",
    );
    expect(v.card("m2", 1)?.querySelector("button")).toBeNull();
    expect(v.msg("m2")?.querySelector(".nbs-status")?.textContent).toContain(
      "stopped after the most tool rounds allowed (max_tool_rounds)",
    );
  });

  it("shows a rich result sanitized, an image only as base64 data, hostile text as text", () => {
    const hostile = '<img src=x onerror="window.__pwned=1">';
    const v = mount({
      last_id: 2,
      m1: user("?"),
      m2: reply("running", 1, {
        tools: [
          call("awaiting_approval", { asks: true, name: hostile, id: hostile }),
          { ...call("done"), id: "c2" },
          { ...call("done"), id: "c3" },
        ],
      }),
      "m2.1": [
        ["tool", `{"q": "${hostile}"}`, 0],
        ["tool", "{}", 1],
        ["tool", "{}", 2],
        [
          "tool_result",
          hostile,
          1,
          {
            "text/html": `<table><tr><td data-commandlinker-command="help:about" onclick="x()">1</td></tr></table><script>window.__pwned=2</script>`,
          },
        ],
        ["tool_result", "img", 2, { "image/png": "iVBORw0KGgo=", "image/jpeg": "javascript:x" }],
      ],
      live: { m2: 1 },
    });
    v.frames.frame();
    const first = v.card("m2", 0);
    expect(first?.querySelector(".nbs-tool-name")?.textContent).toBe(hostile);
    expect(first?.querySelector("img")).toBeNull();
    expect(first?.querySelector<HTMLButtonElement>(".nbs-tool-allow")?.dataset.call).toBe(hostile);
    const html = v.card("m2", 1)?.querySelector(".nbs-tool-html");
    expect(html?.querySelector("td")?.textContent).toBe("1");
    expect(html?.querySelector("[onclick], [data-commandlinker-command], script")).toBeNull();
    const told = v.card("m2", 1)?.querySelector(".nbs-tool-told .nbs-tool-text");
    expect(told?.textContent).toBe(hostile);
    const img = v.card("m2", 2)?.querySelector<HTMLImageElement>("img.nbs-tool-image");
    expect(img?.getAttribute("src")).toBe("data:image/png;base64,iVBORw0KGgo=");
    expect((window as unknown as { __pwned?: number }).__pwned).toBeUndefined();
  });
});
