// @vitest-environment jsdom
// The conversation's Markdown ("Copy all"): the same as ChatWidget.to_markdown(),
// checked against a fixture that tests/test_conversation_file.py checks too.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mountChat } from "../src/chat";
import { conversationMarkdown, type TranscriptEntry } from "../src/transcript";
import { FakeFrames, FakeModel } from "./fakes";

interface Case {
  name: string;
  messages: { role: string; text: string; status: string }[];
  markdown: string;
}

const fixture = JSON.parse(
  readFileSync(join(__dirname, "..", "..", "tests", "data", "conversation_markdown.json"), "utf8"),
) as { cases: Case[] };

/** The per-message state keys a kernel sends for finished messages (one delta each). */
function keysOf(messages: readonly TranscriptEntry[]): Record<string, unknown> {
  const state: Record<string, unknown> = { last_id: messages.length, live: {}, removed: 0 };
  messages.forEach((m, i) => {
    const id = `m${i + 1}`;
    if (m.role === "user") {
      state[id] = { role: "user", seq: 0, status: "done", stats: {}, text: m.text };
      return;
    }
    const seq = m.text === "" ? 0 : 1;
    state[id] = { role: "assistant", seq, status: m.status, stats: {}, finish_reason: "stop" };
    if (seq === 1) {
      state[`${id}.1`] = m.text;
    }
  });
  return state;
}

describe("conversationMarkdown", () => {
  it.each(fixture.cases.map((c) => [c.name, c] as const))("%s: as the fixture says", (_, c) => {
    expect(conversationMarkdown(c.messages)).toBe(c.markdown);
  });

  it("is empty for no messages, and ends with one newline otherwise", () => {
    expect(conversationMarkdown([])).toBe("");
    expect(conversationMarkdown([{ role: "user", text: "hi\n\n", status: "done" }])).toBe(
      "## You\n\nhi\n",
    );
  });
});

describe("Copy all", () => {
  afterEach(() => {
    document.body.textContent = "";
    Reflect.deleteProperty(navigator, "clipboard");
  });

  const mount = (state: Record<string, unknown>) => {
    const model = new FakeModel(state as never);
    const frames = new FakeFrames();
    const el = document.createElement("div");
    document.body.appendChild(el);
    const cleanup = mountChat(model, el, { scheduler: frames, now: () => 0, idle: null });
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
    const button = el.querySelector("button.nbs-copy-all") as HTMLButtonElement;
    return { model, frames, el, cleanup, writes, button };
  };

  const withText = fixture.cases.filter((c) => c.messages.length > 0);
  it.each(withText.map((c) => [c.name, c] as const))(
    "%s: copies what the view shows, as the fixture says",
    async (_, c) => {
      const v = mount(keysOf(c.messages));
      expect(v.el.querySelectorAll(".nbs-message").length).toBe(c.messages.length);
      expect(v.button.disabled).toBe(false);
      v.button.click();
      await vi.waitFor(() => expect(v.writes).toEqual([c.markdown]));
      await vi.waitFor(() => expect(v.button.textContent).toBe("Copied"));
      v.cleanup();
    },
  );

  it("is disabled while there is nothing, and copies a message that came later", async () => {
    const v = mount({ last_id: 0, live: {}, removed: 0 });
    expect(v.button.disabled).toBe(true);
    v.model.update(keysOf([{ role: "user", text: "later?", status: "done" }]));
    v.frames.frame();
    expect(v.button.disabled).toBe(false);
    v.button.click();
    await vi.waitFor(() => expect(v.writes).toEqual(["## You\n\nlater?\n"]));
    v.cleanup();
  });
});
