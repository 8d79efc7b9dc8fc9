// @vitest-environment jsdom
// The cards of tool calls are a chunk (chunks/tools.ts, toolcard.ts, toolhost.ts): a
// plain chat, a thinking model's too, never asks for it; a reply whose tool part comes
// before it asks once, shows each call's name and state (and the later rounds'
// answers) as text meanwhile, hostile names staying text, then renders its cards once
// it arrives, approval buttons and all, and streams on; a runtime that holds the chunk
// has it imported before any message needs it (chunks.ts EAGER).
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { mountChat } from "../src/chat";
import {
  addRuntime,
  type ChunkName,
  chunk,
  hasChunk,
  provideChunk,
  type RuntimeModel,
  resetChunks,
  setChunkHost,
} from "../src/chunks";
import * as entities from "../src/chunks/entities";
import * as highlight from "../src/chunks/highlight";
import * as linkify from "../src/chunks/linkify";
import * as math from "../src/chunks/math";
import * as tools from "../src/chunks/tools";
import {
  toolCall as call,
  FakeFrames,
  FakeModel,
  replyState as reply,
  userState as user,
} from "./fakes";

type State = Record<string, unknown>;

let requests: ChunkName[] = [];
const cleanups: (() => void)[] = [];

beforeEach(() => {
  resetChunks();
  requests = [];
  setChunkHost({ request: (name) => requests.push(name) });
  // the text renderers are there, as on a page once they arrived: only tools is missing
  provideChunk("math", math);
  provideChunk("highlight", highlight);
  provideChunk("entities", entities);
  provideChunk("linkify", linkify);
});

afterEach(() => {
  for (const c of cleanups.splice(0)) {
    c();
  }
  vi.unstubAllGlobals();
  provideChunk("tools", tools); // as setup.ts left it
});

function mount(state: State) {
  const model = new FakeModel();
  model.update(state);
  const frames = new FakeFrames();
  const el = document.createElement("div");
  document.body.append(el);
  cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle: null }));
  cleanups.push(() => el.remove());
  const msg = (id: string) => el.querySelector<HTMLElement>(`.nbs-message[data-id="${id}"]`);
  return { model, frames, el, msg };
}

describe("the tools chunk", () => {
  it("a plain chat, a thinking model's too, never asks for it", () => {
    const v = mount({
      last_id: 2,
      m1: user("Hi"),
      m2: reply("running", 1),
      "m2.1": [
        ["reasoning", "The user greets me."],
        ["answer", "Hello! "],
      ],
      live: { m2: 1 },
    });
    v.frames.frame();
    v.model.update({ "m2.2": "How can I help?", m2: reply("done", 2), live: {} });
    v.frames.frame();
    expect(v.msg("m2")?.querySelector(".nbs-reasoning")).not.toBeNull();
    expect(v.msg("m2")?.querySelector(".nbs-tool-parts")).toBeNull();
    expect(requests).toEqual([]);
    expect(hasChunk("tools")).toBe(false);
  });

  it("a tool part before the chunk shows the call as text, then its card once the chunk comes", () => {
    const v = mount({ last_id: 2, m1: user("Weather?"), m2: reply("running", 0), live: { m2: 0 } });
    v.model.update({
      "m2.1": [
        ["answer", "Let me check. "],
        ["tool", '{"city": "Pa', 0],
      ],
      m2: reply("running", 1, { tools: [call("streaming")] }),
      live: { m2: 1 },
    });
    v.frames.frame();
    expect(requests).toEqual(["tools"]);
    const m2 = () => v.msg("m2") as HTMLElement;
    expect(m2().querySelector(".nbs-tool")).toBeNull();
    const pending = () => m2().querySelector<HTMLElement>(".nbs-tool-pending");
    expect(pending()?.textContent).toBe("get_weather: writing the call…");
    // after the reply's first words, where the cards go
    expect(m2().querySelector(":scope > .nbs-text")?.nextElementSibling).toBe(pending());
    // more of the call, and it comes to ask: the line follows; asked for once
    v.model.update({
      "m2.2": [["tool", 'ris"}', 0]],
      m2: reply("running", 2, { tools: [call("awaiting_approval", { asks: true })] }),
      live: { m2: 2 },
    });
    v.frames.frame();
    expect(pending()?.textContent).toBe("get_weather: waiting for your approval");
    expect(requests).toEqual(["tools"]);

    provideChunk("tools", tools);
    v.frames.frame(); // rendered again in the next frame
    expect(pending()).toBeNull();
    const card = m2().querySelector<HTMLElement>('.nbs-tool[data-call="0"]');
    expect(card?.dataset.state).toBe("awaiting_approval");
    expect(card?.querySelector(".nbs-tool-args")?.textContent).toBe('{"city": "Paris"}');
    expect(m2().querySelectorAll(".nbs-tool").length).toBe(1);
    expect(m2().querySelector(":scope > .nbs-text")?.textContent?.trim()).toBe("Let me check.");
    // the approval works as it always did
    const buttons = [...(card?.querySelectorAll<HTMLButtonElement>("button") ?? [])];
    expect(buttons.map((b) => b.textContent)).toEqual(["Allow", "Deny"]);
    buttons[0]?.click();
    expect(v.model.sent.filter((m) => m.kind === "tool_approval")).toEqual([
      { kind: "tool_approval", id: "m2", call: "call_1", decision: "allow" },
    ]);
    // and the reply streams on into the same card, then its next round
    v.model.update({
      "m2.3": [
        [
          "tool_result",
          "18 °C",
          0,
          {
            "text/html": '<table><tr><td onclick="x()">18</td></tr></table><img src=x onerror=y()>',
          },
        ],
        ["round", "", 1],
        ["answer", "It is **18 °C**."],
      ],
      m2: reply("done", 3, { finish_reason: "stop", tools: [call("done", { ms: 40 })] }),
      live: {},
    });
    v.frames.frame();
    expect(m2().querySelector('.nbs-tool[data-call="0"]')).toBe(card);
    // the result's HTML went through the view's sanitizer (the kit's)
    expect(card?.querySelector(".nbs-tool-html td")?.textContent).toBe("18");
    expect(card?.querySelector(".nbs-tool-html [onclick], .nbs-tool-html [onerror]")).toBeNull();
    expect(m2().querySelector(".nbs-round .nbs-text strong")?.textContent).toBe("18 °C");
    expect(requests).toEqual(["tools"]);
  });

  it("a finished reply from before the chunk shows its calls and later answers as text", () => {
    const hostile = '<img src=x onerror="window.__pwned=1">';
    const v = mount({
      last_id: 2,
      m1: user("Weather?"),
      m2: reply("done", 1, {
        finish_reason: "stop",
        tools: [call("done", { name: hostile }), call("denied", { id: "call_2" })],
      }),
      "m2.1": [
        ["answer", "Let me check. "],
        ["tool", "{}", 0],
        ["tool", "{}", 1],
        ["tool_result", "<b>18</b>", 0, { "text/html": hostile }],
        ["round", "", 1],
        ["answer", "It is <i>18</i>."],
      ],
      live: {},
    });
    v.frames.frame();
    const pending = v.msg("m2")?.querySelector<HTMLElement>(".nbs-tool-pending");
    const lines = [...(pending?.children ?? [])].map((c) => [c.className, c.textContent]);
    expect(lines).toEqual([
      ["nbs-tool-line", `${hostile}: done`],
      ["nbs-tool-line", "get_weather: denied"],
      ["nbs-tool-said", "It is <i>18</i>."],
    ]);
    expect(pending?.querySelector("img, i, b")).toBeNull(); // text, never markup
    expect(requests).toEqual(["tools"]);
    provideChunk("tools", tools);
    v.frames.frame();
    const names = [...(v.msg("m2")?.querySelectorAll(".nbs-tool-name") ?? [])];
    expect(names.map((n) => n.textContent)).toEqual([hostile, "get_weather"]);
    expect(v.msg("m2")?.querySelector(".nbs-tool-pending")).toBeNull();
  });

  it("a runtime that holds the chunk has it imported before a message asks", async () => {
    // the kernel sends it with a reply's first tool part: the view imports it then, so
    // that the card renders at once (a Blob URL in a page; a data: URL here)
    resetChunks();
    const code = "export class ToolParts {}";
    let made = 0;
    vi.stubGlobal("URL", {
      createObjectURL: () => {
        made++;
        return `data:text/javascript,${encodeURIComponent(code)}`;
      },
      revokeObjectURL: () => {},
    });
    const listeners: (() => void)[] = [];
    const state: Record<string, unknown> = { chunks: {} };
    const sent: unknown[] = [];
    const runtime: RuntimeModel = {
      get: (key) => state[key],
      on: (_event, cb) => listeners.push(cb),
      send: (content) => sent.push(content),
    };
    addRuntime(runtime);
    expect(hasChunk("tools")).toBe(false);
    state.chunks = { tools: code };
    for (const cb of listeners) cb();
    // not in the task that found it (a frame, often): in one of its own
    expect(made).toBe(0);
    await vi.waitFor(() => expect(hasChunk("tools")).toBe(true));
    expect(made).toBe(1);
    expect(typeof chunk("tools")?.ToolParts).toBe("function");
    expect(sent).toEqual([]); // nothing asked of the kernel
    // a chunk that is not eager stays where it is until something asks for it
    state.chunks = { tools: code, math: "export function renderTeX() { return null; }" };
    for (const cb of listeners) cb();
    expect(hasChunk("math")).toBe(false);
    provideChunk("math", math); // (as setup.ts left it)
  });
});
