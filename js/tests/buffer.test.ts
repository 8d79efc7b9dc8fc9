import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Conversation, RESYNC_RETRY_MS } from "../src/buffer";
import type { DeltaMsg } from "../src/protocol";
import { message } from "./fakes";

const delta = (id: string, seq: number, text: string): DeltaMsg => ({
  kind: "delta",
  id,
  seq,
  text,
});

describe("Conversation: sequence rules", () => {
  it("appends the next delta and ignores one already contained", () => {
    const c = new Conversation();
    c.applyState([message("a", { text: "He", seq: 1 })]);
    expect(c.applyDelta(delta("a", 2, "llo")).outcome).toBe("applied");
    expect(c.applyDelta(delta("a", 2, "llo")).outcome).toBe("stale");
    expect(c.applyDelta(delta("a", 1, "He")).outcome).toBe("stale");
    expect(c.get("a")).toMatchObject({ text: "Hello", seq: 2 });
  });

  it("a state entry with a lower seq keeps the text but takes the status", () => {
    const c = new Conversation();
    c.applyState([message("a")]);
    c.applyDelta(delta("a", 1, "one "));
    c.applyDelta(delta("a", 2, "two"));
    c.applyState([message("a", { text: "one ", seq: 1, status: "running", stats: { x: 1 } })]);
    expect(c.get("a")).toMatchObject({ text: "one two", seq: 2, stats: { x: 1 } });
  });

  it("a state entry with a higher seq replaces the text", () => {
    const c = new Conversation();
    c.applyState([message("a", { text: "abc", seq: 3 })]);
    c.take();
    c.applyState([message("a", { text: "xyz!", seq: 4 })]);
    const ch = c.take();
    expect(ch?.messages[0]).toMatchObject({ replaced: true, appended: "" });
    expect(c.get("a")).toMatchObject({ text: "xyz!", seq: 4 });
  });

  it("a state entry that extends the text is rendered as an append", () => {
    const c = new Conversation();
    c.applyState([message("a", { text: "abc", seq: 1 })]);
    c.take();
    c.applyState([message("a", { text: "abcdef", seq: 3 })]);
    expect(c.take()?.messages[0]).toMatchObject({ replaced: false, appended: "def" });
  });

  it("reports a gap once, until a state entry repairs it", () => {
    const c = new Conversation();
    c.applyState([message("a")]);
    c.applyDelta(delta("a", 1, "a"));
    expect(c.applyDelta(delta("a", 3, "c"))).toEqual({
      outcome: "gap",
      resync: { kind: "resync", id: "a", have: 1 },
    });
    expect(c.applyDelta(delta("a", 4, "d"))).toEqual({ outcome: "gap", resync: null });
    // A state that does not hold every dropped delta does not repair it.
    c.applyState([message("a", { text: "abc", seq: 3 })]);
    expect(c.applyDelta(delta("a", 5, "e")).resync).toBeNull();
    c.applyState([message("a", { text: "abcde", seq: 5 })]);
    expect(c.applyDelta(delta("a", 6, "f")).outcome).toBe("applied");
    expect(c.applyDelta(delta("a", 8, "h")).resync).toEqual({ kind: "resync", id: "a", have: 6 });
  });

  it("reports an unknown message once, with have 0", () => {
    const c = new Conversation();
    expect(c.applyDelta(delta("x", 1, "hi")).resync).toEqual({ kind: "resync", id: "x", have: 0 });
    expect(c.applyDelta(delta("x", 2, "!")).resync).toBeNull();
    c.applyState([message("x", { text: "hi!", seq: 2 })]);
    expect(c.applyDelta(delta("x", 3, "?")).outcome).toBe("applied");
    expect(c.get("x")?.text).toBe("hi!?");
  });

  it("sends an unanswered resync again, at most once per RESYNC_RETRY_MS", () => {
    // a resync can be lost (a page reload racing JupyterLab's comm subshell)
    const c = new Conversation();
    c.applyState([message("a", { text: "a", seq: 1 })]);
    const gap = (seq: number, now: number) => c.applyDelta(delta("a", seq, "x"), now).resync;
    expect(gap(3, 10_000)).toEqual({ kind: "resync", id: "a", have: 1 });
    expect(gap(4, 10_000 + RESYNC_RETRY_MS - 1)).toBeNull();
    expect(gap(5, 10_000 + RESYNC_RETRY_MS)).toEqual({ kind: "resync", id: "a", have: 1 });
    expect(gap(6, 10_000 + RESYNC_RETRY_MS + 500)).toBeNull();
    // the answer comes: the view holds everything it dropped, no more resyncs
    c.applyState([message("a", { text: "axxxxx", seq: 6 })]);
    expect(c.applyDelta(delta("a", 7, "y"), 20_000).outcome).toBe("applied");
    // an unknown message too
    expect(c.applyDelta(delta("z", 4, "?"), 0).resync).toEqual({
      kind: "resync",
      id: "z",
      have: 0,
    });
    expect(c.applyDelta(delta("z", 5, "?"), 999).resync).toBeNull();
    expect(c.applyDelta(delta("z", 6, "?"), 1000).resync).toEqual({
      kind: "resync",
      id: "z",
      have: 0,
    });
  });

  it("ignores deltas of a final message", () => {
    const c = new Conversation();
    c.applyState([message("a", { text: "partial", seq: 2, status: "stopped" })]);
    expect(c.applyDelta(delta("a", 3, " more"))).toEqual({ outcome: "stale", resync: null });
    expect(c.applyDelta(delta("a", 9, " more"))).toEqual({ outcome: "stale", resync: null });
    expect(c.get("a")?.text).toBe("partial");
  });

  it("follows the list: order, additions, removals, malformed entries", () => {
    const c = new Conversation();
    c.applyState([message("a"), message("b"), { nope: true }, message("a"), 7]);
    expect(c.take()?.order).toEqual(["a", "b"]);
    c.applyState([message("b"), message("c")]);
    expect(c.take()?.order).toEqual(["b", "c"]);
    expect(c.get("a")).toBeUndefined();
    expect(c.applyState([message("b"), message("c")])).toBe(false);
    expect(c.take()).toBeNull();
    c.applyState(undefined);
    expect(c.list()).toEqual([]);
  });

  it("fills what a state entry lacks", () => {
    const c = new Conversation();
    c.applyState([{ id: "m", seq: -3, stats: [1] }]);
    expect(c.get("m")).toMatchObject({
      id: "m",
      role: "assistant",
      text: "",
      seq: 0,
      status: "done",
      error: null,
      detail: null,
      stats: {},
    });
  });

  it("names the oldest active reply", () => {
    const c = new Conversation();
    c.applyState([
      message("u", { role: "user", status: "done" }),
      message("a", { status: "done" }),
      message("b", { status: "running" }),
      message("c", { status: "queued" }),
    ]);
    expect(c.firstActive()?.id).toBe("b");
    c.applyState([message("b", { status: "stopped" }), message("c", { status: "queued" })]);
    expect(c.firstActive()?.id).toBe("c");
    c.applyState([message("c", { status: "error" })]);
    expect(c.firstActive()).toBeUndefined();
  });

  it("take: appends since the last take, one ack per message with its highest seq", () => {
    const c = new Conversation();
    c.applyState([message("a"), message("b")]);
    c.take();
    for (let i = 1; i <= 5; i++) {
      c.applyDelta(delta("a", i, `a${i}`));
      c.applyDelta(delta("b", i, `b${i}`));
    }
    const ch = c.take();
    expect(ch?.order).toBeNull();
    expect(ch?.messages.map((m) => [m.entry.id, m.appended, m.replaced, m.meta])).toEqual([
      ["a", "a1a2a3a4a5", false, false],
      ["b", "b1b2b3b4b5", false, false],
    ]);
    expect(ch?.acks).toEqual([
      { id: "a", seq: 5 },
      { id: "b", seq: 5 },
    ]);
    expect(c.take()).toBeNull();
  });

  it("take: a replace in the same frame swallows earlier appends", () => {
    const c = new Conversation();
    c.applyState([message("a")]);
    c.take();
    c.applyDelta(delta("a", 1, "x"));
    c.applyState([message("a", { text: "new text", seq: 4 })]);
    c.applyDelta(delta("a", 5, "!"));
    const ch = c.take();
    expect(ch?.messages[0]).toMatchObject({ replaced: true, appended: "" });
    expect(ch?.messages[0]?.entry.text).toBe("new text!");
    expect(ch?.acks).toEqual([{ id: "a", seq: 5 }]);
  });

  it("take: a status change alone is chrome, with no ack", () => {
    const c = new Conversation();
    c.applyState([message("a")]);
    c.take();
    c.applyState([message("a", { status: "done", stats: { tokens: 3 } })]);
    const ch = c.take();
    expect(ch?.messages[0]).toMatchObject({ meta: true, replaced: false, appended: "" });
    expect(ch?.acks).toEqual([]);
  });
});

// ---------------------------------------------------------------------------
// Property: a kernel that numbers its deltas, a wire that loses, repeats and
// delays (stale state snapshots), and a renderer that takes changes at random
// frames. Whatever happens, the view's text is always exactly the first `seq`
// deltas, never goes back, a gap is reported once until the view holds every
// delta it dropped, and the final state makes the text whole.

type Event =
  | { t: "next" } // the kernel sends the next delta, delivered
  | { t: "drop" } // the kernel sends the next delta, lost on the wire
  | { t: "dup"; back: number } // an earlier delta arrives again
  | { t: "state"; lag: number } // a state snapshot, possibly stale
  | { t: "answer" } // the kernel answers outstanding resyncs with its state
  | { t: "frame" }; // the renderer takes the changes

const eventArb: fc.Arbitrary<Event> = fc.oneof(
  { weight: 8, arbitrary: fc.constant({ t: "next" } as const) },
  { weight: 1, arbitrary: fc.constant({ t: "drop" } as const) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("dup" as const), back: fc.nat(5) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("state" as const), lag: fc.nat(4) }) },
  { weight: 1, arbitrary: fc.constant({ t: "answer" } as const) },
  { weight: 3, arbitrary: fc.constant({ t: "frame" } as const) },
);

const pieceArb = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 6 }),
  fc.constantFrom("\n", " ", "<img src=x onerror=alert(1)>", "😀", "é"),
);

describe("Conversation: property", () => {
  it("ends with the source text, never duplicates, reports each gap once", () => {
    fc.assert(
      fc.property(
        fc.array(pieceArb, { minLength: 1, maxLength: 40 }),
        fc.array(eventArb, { maxLength: 80 }),
        (pieces, events) => {
          const prefix = (n: number) => pieces.slice(0, n).join("");
          const c = new Conversation();
          c.applyState([message("m")]);
          let sent = 0; // deltas the kernel has numbered so far
          let lastSeq = 0;
          let gapUntil: number | null = null; // highest seq dropped since the last report
          let resyncs = 0;
          let rendered = "";
          let lost = false;

          const check = () => {
            const e = c.get("m");
            expect(e).toBeDefined();
            if (e === undefined) return;
            expect(e.seq).toBeGreaterThanOrEqual(lastSeq);
            expect(e.seq).toBeLessThanOrEqual(sent);
            expect(e.text).toBe(prefix(e.seq));
            lastSeq = e.seq;
            if (gapUntil !== null && e.seq >= gapUntil) gapUntil = null;
          };
          const frame = () => {
            const ch = c.take();
            for (const m of ch?.messages ?? []) {
              rendered = m.replaced ? m.entry.text : rendered + m.appended;
            }
            for (const a of ch?.acks ?? []) {
              expect(a).toEqual({ id: "m", seq: c.get("m")?.seq });
            }
            expect(rendered).toBe(c.get("m")?.text);
          };
          const deliver = (seq: number) => {
            const before = c.get("m")?.seq ?? 0;
            const r = c.applyDelta(delta("m", seq, pieces[seq - 1] ?? ""));
            if (seq > before + 1) {
              expect(r.outcome).toBe("gap");
              if (gapUntil === null) {
                expect(r.resync).toEqual({ kind: "resync", id: "m", have: before });
                gapUntil = seq;
                resyncs++;
              } else {
                expect(r.resync).toBeNull();
                gapUntil = Math.max(gapUntil, seq);
              }
            } else {
              expect(r.outcome).toBe(seq === before + 1 ? "applied" : "stale");
              expect(r.resync).toBeNull();
            }
            check();
          };
          const state = (seq: number, status: "running" | "done" = "running") => {
            c.applyState([message("m", { text: prefix(seq), seq, status })]);
            check();
          };

          for (const ev of events) {
            if (sent >= pieces.length && (ev.t === "next" || ev.t === "drop")) continue;
            switch (ev.t) {
              case "next":
                deliver(++sent);
                break;
              case "drop":
                ++sent;
                lost = true;
                break;
              case "dup":
                if (sent > 0) deliver(Math.max(1, sent - ev.back));
                break;
              case "state":
                state(Math.max(0, sent - ev.lag));
                break;
              case "answer":
                if (gapUntil !== null) state(sent);
                break;
              case "frame":
                frame();
                break;
            }
          }
          while (sent < pieces.length) deliver(++sent);
          state(pieces.length, "done");
          frame();
          expect(c.get("m")?.text).toBe(pieces.join(""));
          if (!lost) expect(resyncs).toBe(0);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("Conversation: what kind of change waits (for the page's frame loop)", () => {
  it("tells more text from other changes, and a reply's end from both", () => {
    const c = new Conversation();
    expect(c.pendingKind()).toBe("appended"); // nothing
    c.applyState([message("q", { role: "user", status: "done", text: "hi" }), message("a")]);
    expect(c.pendingKind()).toBe("changed"); // new messages; a question is final from the start
    c.take();
    c.applyDelta(delta("a", 1, "more "));
    c.applyDelta(delta("a", 2, "text"));
    expect(c.pendingKind()).toBe("appended");
    c.take();
    c.applyState([
      message("q", { role: "user", status: "done", text: "hi" }),
      message("a", { text: "more text", seq: 2, status: "running", error: "slow" }),
    ]);
    expect(c.pendingKind()).toBe("changed"); // chrome
    c.take();
    c.applyDelta(delta("a", 3, "!"));
    c.applyState([
      message("q", { role: "user", status: "done", text: "hi" }),
      message("a", { text: "more text!", seq: 3, status: "done" }),
    ]);
    expect(c.pendingKind()).toBe("ended");
    c.take();
    expect(c.pendingKind()).toBe("appended");
  });
});
