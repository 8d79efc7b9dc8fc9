import { describe, expect, it } from "vitest";
import {
  deltaKey,
  FINAL_STATUSES,
  FINAL_TOOL_STATES,
  isRefusedMsg,
  metaKey,
  type Status,
  toDeltaParts,
  toLoadingMeta,
  toMessageMeta,
  toMessageState,
  toMode,
  toPanes,
} from "../src/protocol";

// The types and constants are generated from nbstream/widgets/protocol.py
// (scripts/gen_protocol.py; `make lint` fails when protocol.gen.ts is stale), so
// nothing here checks them against the Python source: these are the checks of
// what arrives over the wire, which are written by hand.

describe("state keys", () => {
  it("name messages and their deltas as the kernel does", () => {
    expect(metaKey(17)).toBe("m17");
    expect(deltaKey("m17", 3)).toBe("m17.3");
  });
});

describe("final statuses", () => {
  it("are the four endings", () => {
    const final: Status[] = ["done", "stopped", "error", "timeout"];
    expect([...FINAL_STATUSES].sort()).toEqual([...final].sort());
    for (const live of ["queued", "loading", "running"] satisfies Status[]) {
      expect(FINAL_STATUSES.has(live)).toBe(false);
    }
  });
});

describe("final tool states", () => {
  it("are the four endings of a call", () => {
    expect([...FINAL_TOOL_STATES].sort()).toEqual(["cancelled", "denied", "done", "error"]);
    expect(FINAL_TOOL_STATES.has("awaiting_approval")).toBe(false);
  });
});

describe("toMessageMeta", () => {
  it("completes a bare meta and leaves the optional keys out", () => {
    expect(toMessageMeta({})).toEqual({
      role: "assistant",
      seq: 0,
      status: "done",
      stats: {},
      error: null,
      detail: null,
    });
    expect(toMessageMeta(null)).toBeNull();
    expect(toMessageMeta([1])).toBeNull();
  });

  it("keeps every optional key of the right type, and drops the malformed", () => {
    const full = toMessageMeta({
      role: "user",
      seq: 4,
      status: "running",
      stats: { tokens: 3 },
      pane: 1,
      text: "t",
      finish_reason: null,
      error: "e",
      detail: "d",
      progress: { text: "loading model", fraction: 0.5 },
      options: { temperature: 0 },
      parent: null,
      tools: [{ id: "c", name: "f", state: "done", round: 0 }, { id: 3 }],
      attachments: [{ name: "a.png", mime: "image/png", size: 1, kind: "image" }],
    });
    expect(full).toEqual({
      role: "user",
      seq: 4,
      status: "running",
      stats: { tokens: 3 },
      pane: 1,
      text: "t",
      finish_reason: null,
      error: "e",
      detail: "d",
      progress: { text: "loading model", fraction: 0.5 },
      options: { temperature: 0 },
      parent: null,
      // a malformed call is null, so that each keeps its call's number
      tools: [{ id: "c", name: "f", state: "done", round: 0 }, null],
      attachments: [{ name: "a.png", mime: "image/png", size: 1, kind: "image" }],
    });
    const bad = toMessageMeta({
      seq: -1,
      pane: 1.5,
      text: 3,
      finish_reason: 7,
      parent: 9,
      progress: { text: "  " },
      options: [1],
      stats: "x",
      tools: { id: "c" },
      attachments: "a.png",
    });
    expect(bad).toEqual({
      role: "assistant",
      seq: 0,
      status: "done",
      stats: {},
      error: null,
      detail: null,
    });
  });

  it("keeps a status or finish reason it does not know, as sent (a newer kernel)", () => {
    const meta = toMessageMeta({ status: "thinking", finish_reason: "content_filter" });
    expect(meta?.status).toBe("thinking");
    expect(meta?.finish_reason).toBe("content_filter");
  });
});

describe("toLoadingMeta", () => {
  it("keeps a report with text; a fraction outside 0..1 is unknown", () => {
    expect(toLoadingMeta({ text: "loading model", fraction: 0.25 })).toEqual({
      text: "loading model",
      fraction: 0.25,
    });
    expect(toLoadingMeta({ text: "x", fraction: 2 })).toEqual({ text: "x", fraction: null });
    expect(toLoadingMeta({ text: "x", fraction: Number.NaN })?.fraction).toBeNull();
    expect(toLoadingMeta({ text: "" })).toBeNull();
    expect(toLoadingMeta("loading")).toBeNull();
    expect(toLoadingMeta({ text: "y".repeat(500) })?.text.length).toBe(200);
  });
});

describe("toMessageState", () => {
  it("needs an id and completes the rest", () => {
    expect(toMessageState({ text: "no id" })).toBeNull();
    expect(toMessageState({ id: "x" })).toEqual({
      id: "x",
      role: "assistant",
      text: "",
      reasoning: "",
      seq: 0,
      status: "done",
      error: null,
      detail: null,
      stats: {},
    });
    const full = toMessageState({
      id: "x",
      pane: 1,
      finish_reason: "stop",
      options: { top_p: 0.5 },
      parent: "m1",
      attachments: [{ name: "a.csv", mime: "text/csv", size: 1, kind: "text" }, 7],
    });
    expect(full).toMatchObject({
      pane: 1,
      finish_reason: "stop",
      options: { top_p: 0.5 },
      parent: "m1",
      attachments: [{ name: "a.csv", mime: "text/csv", size: 1, kind: "text" }],
    });
  });
});

describe("isRefusedMsg", () => {
  it("takes a refusal with its draft number and reason, nothing else", () => {
    expect(isRefusedMsg({ kind: "refused", draft: 3, reason: "too large" })).toBe(true);
    expect(isRefusedMsg({ kind: "refused", draft: 1.5, reason: "x" })).toBe(false);
    expect(isRefusedMsg({ kind: "refused", draft: 1 })).toBe(false);
    expect(isRefusedMsg({ kind: "delta", draft: 1, reason: "x" })).toBe(false);
    expect(isRefusedMsg(null)).toBe(false);
  });
});

describe("delta bodies, modes and panes", () => {
  it("reads a body's parts and skips a part type it does not know", () => {
    expect(toDeltaParts("abc")).toEqual({ text: "abc", reasoning: "" });
    expect(
      toDeltaParts([
        ["reasoning", "r"],
        ["answer", "a"],
        ["tool-call", "?"],
        ["answer", "b"],
      ]),
    ).toEqual({ text: "ab", reasoning: "r", runs: null });
    expect(toDeltaParts(null)).toBeNull();
    expect(toDeltaParts(7)).toBeNull();
  });

  it("lays an unknown mode out as a chat and names a pane without a label", () => {
    expect(toMode("compare")).toBe("compare");
    expect(toMode("carousel")).toBe("chat");
    expect(toPanes([{ label: "a" }, {}, "x"])).toEqual([
      { label: "a" },
      { label: "Pane 2" },
      { label: "Pane 3" },
    ]);
  });
});
