// @vitest-environment jsdom
// Messages made of parts, read from per-message state keys: the key reader and
// the buffer (order, gaps, removals, reloads), and how the view shows them
// (the reasoning block, finish reasons, Continue).
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { Conversation, RESYNC_RETRY_MS } from "../src/buffer";
import { mountChat } from "../src/chat";
import { KeyReader } from "../src/keys";
import type { ViewMsg } from "../src/protocol";
import { FakeFrames, FakeModel, replyState as reply, userState as user } from "./fakes";

type State = Record<string, unknown>;

/** A model holding `state` as a kernel's update messages leave it. */
class Keys {
  readonly state: State = {};
  get(k: string): unknown {
    return this.state[k];
  }
  set(s: State): void {
    Object.assign(this.state, s);
  }
}

describe("KeyReader", () => {
  it("enumerates m1..last_id in order and applies deltas in order, parts apart", () => {
    const model = new Keys();
    const conv = new Conversation();
    const reader = new KeyReader(model, conv);
    model.set({
      last_id: 2,
      m1: user("Why?"),
      m2: reply("running", 0),
      live: { m2: 0 },
    });
    expect(reader.sync(0)).toEqual({ changed: true, deltas: 0, resyncs: [] });
    model.set({ "m2.1": [["reasoning", "Hmm, "]], live: { m2: 1 } });
    model.set({
      "m2.2": [
        ["reasoning", "yes."],
        ["answer", "Be"],
      ],
      live: { m2: 2 },
    });
    reader.sync(1);
    model.set({ "m2.3": "cause.", m2: reply("done", 3, { finish_reason: "stop" }), live: {} });
    reader.sync(2);
    expect(conv.list().map((e) => [e.id, e.role, e.text, e.reasoning, e.seq, e.status])).toEqual([
      ["m1", "user", "Why?", "", 0, "done"],
      ["m2", "assistant", "Because.", "Hmm, yes.", 3, "done"],
    ]);
    expect(conv.get("m2")?.finish_reason).toBe("stop");
  });

  it("a view created at any point, with keys in any order, ends with the same text", () => {
    const body = fc.oneof(
      fc.string({ maxLength: 6 }),
      fc.array(
        fc.tuple(fc.constantFrom("reasoning", "answer", "tool"), fc.string({ maxLength: 5 })),
        {
          maxLength: 3,
        },
      ),
    );
    fc.assert(
      fc.property(fc.array(body, { minLength: 1, maxLength: 12 }), fc.nat(), (bodies, seed) => {
        // the updates a kernel sends: one delta each, then the final meta
        const updates: State[] = [{ last_id: 1, m1: reply("running", 0), live: { m1: 0 } }];
        bodies.forEach((b, i) => {
          updates.push({ [`m1.${i + 1}`]: b, live: { m1: i + 1 } });
        });
        updates.push({ m1: reply("done", bodies.length, { finish_reason: "stop" }), live: {} });
        const expected = { text: "", reasoning: "" };
        for (const b of bodies) {
          if (typeof b === "string") {
            expected.text += b;
          } else {
            for (const [k, t] of b) {
              if (k === "answer") expected.text += t;
              if (k === "reasoning") expected.reasoning += t;
            }
          }
        }
        // a view that starts after `start` updates (it reads the model as it is then)
        const start = seed % updates.length;
        const model = new Keys();
        const conv = new Conversation();
        const reader = new KeyReader(model, conv);
        updates.forEach((u, i) => {
          model.set(u);
          if (i >= start) {
            expect(reader.sync(i).resyncs).toEqual([]);
          }
        });
        const e = conv.get("m1");
        expect(e?.text).toBe(expected.text);
        expect(e?.reasoning).toBe(expected.reasoning);
        expect(e?.seq).toBe(bodies.length);
      }),
    );
  });

  it("a lost delta: live names a higher seq, so it asks once, and again only after a while", () => {
    const model = new Keys();
    const conv = new Conversation();
    const reader = new KeyReader(model, conv);
    model.set({ last_id: 1, m1: reply("running", 0), "m1.1": "a", live: { m1: 1 } });
    reader.sync(0);
    // m1.2 is lost (the server dropped its update); m1.3 arrives
    model.set({ "m1.3": "c", live: { m1: 3 } });
    expect(reader.sync(10).resyncs).toEqual([{ kind: "resync", id: "m1", have: 1 }]);
    model.set({ "m1.4": "d", live: { m1: 4 } });
    expect(reader.sync(20).resyncs).toEqual([]);
    expect(reader.sync(10 + RESYNC_RETRY_MS).resyncs).toEqual([
      { kind: "resync", id: "m1", have: 1 },
    ]);
    // the kernel's answer: the missing keys again, and the meta
    model.set({ "m1.2": "b", "m1.3": "c", "m1.4": "d", m1: reply("running", 4) });
    const r = reader.sync(5000);
    expect(r.resyncs).toEqual([]);
    expect(conv.get("m1")?.text).toBe("abcd");
  });

  it("a final meta whose deltas are missing asks for them; complete, it stops watching", () => {
    const model = new Keys();
    const conv = new Conversation();
    const reader = new KeyReader(model, conv);
    model.set({ last_id: 1, m1: reply("done", 2, { finish_reason: "length" }), "m1.1": "x" });
    expect(reader.sync(0).resyncs).toEqual([{ kind: "resync", id: "m1", have: 1 }]);
    model.set({ "m1.2": "y" });
    expect(reader.sync(1).changed).toBe(true);
    expect(conv.get("m1")?.text).toBe("xy");
    // complete: a later change (of another key) does not read it again
    model.set({ "m1.3": "never" });
    expect(reader.sync(2)).toEqual({ changed: false, deltas: 0, resyncs: [] });
  });

  it("removed messages (null metas) leave the view when `removed` changes", () => {
    const model = new Keys();
    const conv = new Conversation();
    const reader = new KeyReader(model, conv);
    model.set({ last_id: 2, removed: 0, m1: user("a"), m2: reply("done", 1), "m2.1": "b" });
    reader.sync(0);
    expect(conv.ids()).toEqual(["m1", "m2"]);
    model.set({ m1: null, m2: null, "m2.1": null, removed: 1, last_id: 3, m3: user("c") });
    expect(reader.sync(1).changed).toBe(true);
    expect(conv.ids()).toEqual(["m3"]);
  });

  it("reads only the messages that can change: not the finished ones", () => {
    const model = new Keys();
    const conv = new Conversation();
    const reader = new KeyReader(model, conv);
    const s: State = { last_id: 400 };
    for (let n = 1; n <= 400; n++) {
      s[`m${n}`] = n % 2 ? user(`q${n}`) : reply("done", 1);
      if (n % 2 === 0) s[`m${n}.1`] = `a${n}`;
    }
    model.set(s);
    reader.sync(0);
    let reads = 0;
    const counting = {
      get: (k: string) => {
        reads++;
        return model.get(k);
      },
    };
    const again = new KeyReader(counting, conv);
    again.sync(0);
    const first = reads;
    reads = 0;
    model.set({ last_id: 401, m401: reply("running", 0), live: { m401: 0 } });
    again.sync(1);
    expect(first).toBeGreaterThan(400);
    expect(reads).toBeLessThan(10);
  });
});

// ------------------------------------------------------------------ the view
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
  let t = 0;
  const cleanup = mountChat(model, el, { scheduler: frames, now: () => t, idle: null });
  cleanups.push(cleanup);
  const msg = (id: string) => el.querySelector<HTMLElement>(`.nbs-message[data-id="${id}"]`);
  return {
    model,
    frames,
    el,
    msg,
    at: (ms: number) => {
      t = ms;
    },
    block: (id: string) => msg(id)?.querySelector<HTMLDetailsElement>("details.nbs-reasoning"),
    label: (id: string) => msg(id)?.querySelector(".nbs-reasoning-label")?.textContent,
    answer: (id: string) => msg(id)?.querySelector(":scope > .nbs-text")?.textContent?.trim(),
    thinking: (id: string) => msg(id)?.querySelector(".nbs-reasoning-text")?.textContent?.trim(),
    status: (id: string) => msg(id)?.querySelector(".nbs-status")?.textContent,
  };
}

describe("the reasoning block", () => {
  it("is open with a live 'Thinking… n s', folds to 'Thought for n s' when the answer starts", () => {
    const v = mount({ last_id: 2, m1: user("Why?"), m2: reply("running", 0), live: { m2: 0 } });
    expect(v.block("m2")).toBeNull(); // no reasoning, no block
    v.at(1000);
    v.model.update({ "m2.1": [["reasoning", "Let me *think*."]], live: { m2: 1 } });
    v.frames.frame();
    expect(v.block("m2")?.open).toBe(true);
    expect(v.label("m2")).toBe("Thinking… 0 s");
    expect(v.status("m2")).toBe("thinking…");
    expect(v.thinking("m2")).toBe("Let me think.");
    expect(v.msg("m2")?.querySelector(".nbs-reasoning-text em")?.textContent).toBe("think");
    v.at(5000);
    v.model.update({ "m2.2": [["reasoning", " More."]], live: { m2: 2 } });
    v.frames.frame();
    expect(v.label("m2")).toBe("Thinking… 4 s");
    const live = v.msg("m2")?.querySelector(".nbs-reasoning [aria-live=polite]");
    expect(live?.textContent).toBe("Thinking"); // the seconds are not announced
    v.at(13000);
    v.model.update({ "m2.3": "The answer.", live: { m2: 3 } });
    v.frames.frame();
    expect(v.block("m2")?.open).toBe(false);
    expect(v.label("m2")).toBe("Thought for 12 s");
    expect(live?.textContent).toBe("Thought for 12 s");
    expect(v.answer("m2")).toBe("The answer.");
    // the kernel's figure wins once the reply ends
    v.model.update({
      m2: reply("done", 3, { finish_reason: "stop", stats: { reasoning_ms: 11800 } }),
      live: {},
    });
    v.frames.frame();
    expect(v.label("m2")).toBe("Thought for 12 s");
    // it sits above the answer
    const kids = [...(v.msg("m2")?.children ?? [])].map((c) => c.className);
    expect(kids.indexOf("nbs-reasoning")).toBeLessThan(kids.indexOf("nbs-text nbs-md"));
  });

  it("the user's click wins over folding; a saved reply shows it folded", () => {
    const v = mount({
      last_id: 1,
      m1: reply("done", 1, { finish_reason: "stop", stats: { reasoning_ms: 1500 } }),
      "m1.1": [
        ["reasoning", "plan"],
        ["answer", "done"],
      ],
    });
    expect(v.block("m1")?.open).toBe(false);
    expect(v.label("m1")).toBe("Thought for 1.5 s");
    const w = mount({ last_id: 1, m1: reply("running", 0), live: { m1: 0 } });
    w.model.update({ "m1.1": [["reasoning", "a"]], live: { m1: 1 } });
    w.frames.frame();
    const block = w.block("m1") as HTMLDetailsElement;
    block.open = false; // the user folds it while it thinks...
    block.dispatchEvent(new Event("toggle"));
    w.model.update({ "m1.2": "answer", live: { m1: 2 } });
    w.frames.frame();
    expect(block.open).toBe(false);
    block.open = true; // ...and opens it again: it stays open
    block.dispatchEvent(new Event("toggle"));
    w.model.update({ m1: reply("done", 2, { finish_reason: "stop" }), live: {} });
    w.frames.frame();
    expect(block.open).toBe(true);
  });

  it("has its own copy button, which copies the reasoning only", async () => {
    const copied: string[] = [];
    Object.defineProperty(window.navigator, "clipboard", {
      value: { writeText: async (t: string) => void copied.push(t) },
      configurable: true,
    });
    const v = mount({
      last_id: 1,
      m1: reply("done", 1, { finish_reason: "stop" }),
      "m1.1": [
        ["reasoning", "why"],
        ["answer", "what"],
      ],
    });
    v.msg("m1")?.querySelector<HTMLButtonElement>("button.nbs-copy-reasoning")?.click();
    v.msg("m1")?.querySelector<HTMLButtonElement>("button.nbs-copy-msg")?.click();
    await new Promise((r) => setTimeout(r, 0));
    expect(copied).toEqual(["why", "what"]);
  });

  it("a reply without reasoning looks as before", () => {
    const v = mount({
      last_id: 1,
      m1: reply("done", 1, { finish_reason: "stop" }),
      "m1.1": "plain",
    });
    expect(v.block("m1")).toBeNull();
    expect([...(v.msg("m1")?.children ?? [])].map((c) => c.className)).toEqual([
      "nbs-who",
      "nbs-text nbs-md",
      "nbs-footer",
    ]);
    expect(v.status("m1")).toBe("done");
  });
});

describe("finish reasons", () => {
  it("no end marker is said; a reply cut at the limit offers Continue", () => {
    const v = mount({
      last_id: 2,
      m1: reply("done", 1, { finish_reason: null }),
      "m1.1": "half",
      m2: reply("done", 1, { finish_reason: "length", stats: { tokens: 256 } }),
      "m2.1": "cut",
    });
    expect(v.status("m1")).toBe("done · the stream ended without an end marker");
    expect(v.msg("m1")?.querySelector(".nbs-continue")).toBeNull();
    expect(v.status("m2")).toBe("done · cut at 256 tokens · 256 tokens");
    const cont = v.msg("m2")?.querySelector<HTMLButtonElement>("button.nbs-continue");
    expect(cont?.textContent).toBe("Continue");
    cont?.click();
    expect(v.model.sent.filter((m: ViewMsg) => m.kind === "continue")).toEqual([
      { kind: "continue", id: "m2" },
    ]);
    expect(cont?.disabled).toBe(true);
  });

  it("the model's update events drive the view: a lost delta asks for a resync", () => {
    const v = mount({ last_id: 1, m1: reply("running", 0), "m1.1": "a", live: { m1: 1 } });
    v.model.update({ "m1.3": "c", live: { m1: 3 } });
    expect(v.model.sent.filter((m: ViewMsg) => m.kind === "resync")).toEqual([
      { kind: "resync", id: "m1", have: 1 },
    ]);
    v.model.update({ "m1.2": "b" });
    v.frames.frame();
    expect(v.answer("m1")).toBe("abc");
  });
});
