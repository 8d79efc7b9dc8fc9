import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  CURRENT_KEY,
  deltaKey,
  FINAL_STATUSES,
  LAST_ID_KEY,
  LIVE_KEY,
  type MessageMeta,
  type MessageState,
  metaKey,
  REMOVED_KEY,
  STATE_TRAIT,
  type Status,
  type StopMsg,
  toMessageMeta,
  toMessageState,
  type ViewMsg,
} from "../src/protocol";

// protocol.ts mirrors nbstream/widgets/protocol.py (statuses: nbstream/core/pieces.py); these
// checks catch drift between them.
const pyFile = (...parts: string[]): string =>
  readFileSync(join(__dirname, "..", "..", "nbstream", ...parts), "utf8");
const py = `${pyFile("core", "pieces.py")}\n${pyFile("widgets", "protocol.py")}`;

const block = (start: RegExp): string => {
  const from = py.search(start);
  expect(from).toBeGreaterThanOrEqual(0);
  const rest = py.slice(from);
  const end = rest.slice(1).search(/\n(?:class |[A-Za-z_]+\s*[:=])/);
  return end === -1 ? rest : rest.slice(0, end + 1);
};

const quoted = (text: string) => [...text.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]);

describe("protocol mirrors protocol.py", () => {
  it("the state keys", () => {
    expect(py).toMatch(new RegExp(`older nbstream,[\\s\\S]*\`\`${STATE_TRAIT}\`\` list`));
    for (const [name, key] of [
      ["LAST_ID_KEY", LAST_ID_KEY],
      ["LIVE_KEY", LIVE_KEY],
      ["REMOVED_KEY", REMOVED_KEY],
      ["CURRENT_KEY", CURRENT_KEY],
    ]) {
      expect(py).toMatch(new RegExp(`^${name} = "${key}"$`, "m"));
    }
    expect(metaKey(17)).toBe("m17");
    expect(deltaKey("m17", 3)).toBe("m17.3");
    expect(py).toMatch(/return f"m\{number\}"/);
    expect(py).toMatch(/return f"\{message_id\}\.\{seq\}"/);
  });

  it("MessageMeta fields, the optional ones apart", () => {
    const fields = (start: RegExp) =>
      [...block(start).matchAll(/^ {4}(\w+): /gm)].map((m) => m[1]).sort();
    const meta = toMessageMeta({}) as MessageMeta;
    expect(fields(/^class MessageMeta\(/m)).toEqual(
      Object.keys(meta)
        .filter((k) => k !== "error" && k !== "detail")
        .sort(),
    );
    const full = toMessageMeta({
      pane: 1,
      text: "t",
      finish_reason: null,
      error: "e",
      detail: "d",
      progress: { text: "loading model", fraction: 0.5 },
      options: { temperature: 0 },
      parent: null,
      attachments: [{ name: "a.png", mime: "image/png", size: 1, kind: "image" }],
    });
    expect(fields(/^class MessageMetaExtras\(TypedDict, total=False\)/m)).toEqual(
      [
        "attachments",
        "detail",
        "error",
        "finish_reason",
        "options",
        "pane",
        "parent",
        "progress",
        "text",
      ].filter((k) => k in (full as object)),
    );
    // the progress a loading reply carries
    expect(fields(/^class LoadingMeta\(TypedDict\)/m)).toEqual(
      Object.keys(full?.progress as object).sort(),
    );
  });

  it("statuses and final statuses", () => {
    const all: Record<Status, true> = {
      queued: true,
      loading: true,
      running: true,
      done: true,
      stopped: true,
      error: true,
      timeout: true,
    };
    expect(quoted(block(/^Status = Literal\[/m)).sort()).toEqual(Object.keys(all).sort());
    expect(quoted(block(/^FINAL_STATUSES/m)).sort()).toEqual([...FINAL_STATUSES].sort());
  });

  it("MessageState fields, the optional ones apart", () => {
    const fields = (start: RegExp) =>
      [...block(start).matchAll(/^ {4}(\w+): /gm)].map((m) => m[1]).sort();
    const required = Object.keys(toMessageState({ id: "x" }) as MessageState);
    expect(fields(/^class MessageState\(/m)).toEqual(required.sort());
    const optional = Object.keys(
      toMessageState({
        id: "x",
        pane: 1,
        finish_reason: "stop",
        options: { top_p: 0.5 },
        parent: "m1",
        attachments: [{ name: "a.csv", mime: "text/csv", size: 1, kind: "text" }],
      }) as MessageState,
    ).filter((k) => !required.includes(k));
    expect(fields(/^class MessageStateExtras\(TypedDict, total=False\)/m)).toEqual(optional.sort());
    expect(optional.sort()).toEqual(["attachments", "finish_reason", "options", "pane", "parent"]);
  });

  it("StopMsg fields", () => {
    const fields = [...block(/^class StopMsg/m).matchAll(/^ {4}(\w+): /gm)].map((m) => m[1]);
    const stop: Required<StopMsg> = { kind: "stop", id: "m1", pane: 0 };
    expect(fields.sort()).toEqual(Object.keys(stop).sort());
  });

  it("message kinds", () => {
    const kinds = [...py.matchAll(/kind: Literal\["(\w+)"\]/g)].map((m) => m[1]);
    const view: Record<ViewMsg["kind"], true> = {
      send: true,
      stop: true,
      regenerate: true,
      clear: true,
      continue: true,
      switch: true,
      edit: true,
      system_prompt: true,
      hello: true,
      resync: true,
      ack: true,
    };
    // and the kernel's custom messages to the view
    expect(kinds.sort()).toEqual([...Object.keys(view), "delta", "refused"].sort());
  });
});
