// @vitest-environment jsdom
// A system prompt you can see (issue 13, item 5): the collapsible line at the
// top of a chat, editing it in place (Ctrl+Enter or leaving the box saves,
// Escape and Cancel do not), the "System prompt" button that adds one, and the
// generation options in force on each reply's status line, on hover.
import { afterEach, describe, expect, it } from "vitest";
import { mountChat } from "../src/chat";
import type { ChatTraits, MessageState } from "../src/protocol";
import { optionsSummary, statusTitle } from "../src/status";
import { firstLine } from "../src/system";
import { FakeFrames, FakeModel, message } from "./fakes";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
});

const mount = (traits: Partial<ChatTraits> = {}) => {
  const model = new FakeModel({ conversation: [], ...traits });
  const frames = new FakeFrames();
  const el = document.createElement("div");
  document.body.appendChild(el);
  cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle: null }));
  model.drain("hello");
  const $ = <T extends HTMLElement = HTMLElement>(sel: string) => el.querySelector(sel) as T;
  const key = (target: HTMLElement, key: string, init: KeyboardEventInit = {}) => {
    const ev = new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true, ...init });
    target.dispatchEvent(ev);
    return ev;
  };
  return {
    model,
    frames,
    el,
    $,
    key,
    bar: $(".nbs-system"),
    toggle: $<HTMLButtonElement>(".nbs-system-toggle"),
    preview: $(".nbs-system-preview"),
    body: $(".nbs-system-body"),
    editor: $(".nbs-system-editor"),
    input: $<HTMLTextAreaElement>(".nbs-system-input"),
    add: $<HTMLButtonElement>(".nbs-system-add"),
    edit: $<HTMLButtonElement>(".nbs-system-edit"),
    cancel: $<HTMLButtonElement>(".nbs-system-cancel"),
    save: $<HTMLButtonElement>(".nbs-system-save"),
  };
};

describe("firstLine", () => {
  it("is the first line, marked when more follows", () => {
    expect(firstLine("Be brief.")).toBe("Be brief.");
    expect(firstLine("\n  Be brief.  \nUse French.")).toBe("Be brief. …");
    expect(firstLine("")).toBe("");
  });
});

describe("the system prompt line", () => {
  it("is hidden with no prompt, and the add button shows instead", () => {
    const v = mount();
    expect(v.bar.hidden).toBe(true);
    expect(v.add.hidden).toBe(false);
    v.model.set("system_prompt", "You are terse.\nAnswer in French.");
    expect(v.bar.hidden).toBe(false);
    expect(v.add.hidden).toBe(true);
    v.model.set("system_prompt", null);
    expect(v.bar.hidden).toBe(true);
    expect(v.add.hidden).toBe(false);
  });

  it("is collapsed to its first line, and expands to the whole prompt", () => {
    const v = mount({ system_prompt: "You are terse.\nAnswer in French." });
    expect(v.preview.textContent).toBe("You are terse. …");
    expect(v.toggle.getAttribute("aria-expanded")).toBe("false");
    expect(v.body.hidden).toBe(true);
    v.toggle.click();
    expect(v.toggle.getAttribute("aria-expanded")).toBe("true");
    expect(v.body.hidden).toBe(false);
    expect(v.$(".nbs-system-text").textContent).toBe("You are terse.\nAnswer in French.");
    v.toggle.click();
    expect(v.body.hidden).toBe(true);
  });

  it("is text, never HTML", () => {
    const v = mount({ system_prompt: "<img src=x onerror=alert(1)>" });
    v.toggle.click();
    expect(v.el.querySelector(".nbs-system img")).toBeNull();
    expect(v.$(".nbs-system-text").textContent).toBe("<img src=x onerror=alert(1)>");
  });
});

describe("editing the system prompt", () => {
  it("Ctrl+Enter saves: one system_prompt message, shown at once", () => {
    const v = mount({ system_prompt: "Old." });
    v.toggle.click();
    v.edit.click();
    expect(v.editor.hidden).toBe(false);
    expect(v.input.value).toBe("Old.");
    expect(document.activeElement).toBe(v.input);
    v.input.value = "New prompt.\nSecond line.";
    const plain = v.key(v.input, "Enter"); // a new line, not a save
    expect(plain.defaultPrevented).toBe(false);
    expect(v.model.sent).toEqual([]);
    const ev = v.key(v.input, "Enter", { ctrlKey: true });
    expect(ev.defaultPrevented).toBe(true);
    expect(v.model.drain("system_prompt")).toEqual([
      { kind: "system_prompt", text: "New prompt.\nSecond line." },
    ]);
    expect(v.editor.hidden).toBe(true);
    expect(v.preview.textContent).toBe("New prompt. …");
    // the kernel's echo changes nothing more
    v.model.set("system_prompt", "New prompt.\nSecond line.");
    expect(v.preview.textContent).toBe("New prompt. …");
    expect(v.model.sent).toEqual([]);
  });

  it("Cmd+Enter and the Save button save too", () => {
    const v = mount({ system_prompt: "A" });
    v.toggle.click();
    v.edit.click();
    v.input.value = "B";
    v.key(v.input, "Enter", { metaKey: true });
    v.edit.click();
    v.input.value = "C";
    v.save.click();
    expect(v.model.drain("system_prompt").map((m) => m.text)).toEqual(["B", "C"]);
  });

  it("Escape cancels, and neither stops the running reply nor reaches JupyterLab", () => {
    const v = mount({
      system_prompt: "Keep me.",
      conversation: [message("m1", { status: "running" })] as MessageState[],
    });
    v.toggle.click();
    v.edit.click();
    v.input.value = "Throw me away.";
    let reachedDocument = false;
    const listener = () => {
      reachedDocument = true;
    };
    document.addEventListener("keydown", listener);
    const ev = v.key(v.input, "Escape");
    document.removeEventListener("keydown", listener);
    expect(ev.defaultPrevented).toBe(true);
    expect(reachedDocument).toBe(false);
    expect(v.model.sent).toEqual([]); // no stop, no system_prompt
    expect(v.editor.hidden).toBe(true);
    expect(v.preview.textContent).toBe("Keep me.");
    // the box's blur after closing saves nothing
    v.input.dispatchEvent(new FocusEvent("blur"));
    expect(v.model.sent).toEqual([]);
  });

  it("leaving the box saves; Cancel does not save first", () => {
    const v = mount({ system_prompt: "A" });
    v.toggle.click();
    v.edit.click();
    v.input.value = "B";
    v.input.dispatchEvent(new FocusEvent("blur", { relatedTarget: null }));
    expect(v.model.drain("system_prompt").map((m) => m.text)).toEqual(["B"]);
    v.edit.click();
    v.input.value = "C";
    v.input.dispatchEvent(new FocusEvent("blur", { relatedTarget: v.cancel }));
    v.cancel.click();
    expect(v.model.sent).toEqual([]);
    expect(v.preview.textContent).toBe("B");
  });

  it("an unchanged prompt sends nothing", () => {
    const v = mount({ system_prompt: "Same." });
    v.toggle.click();
    v.edit.click();
    v.key(v.input, "Enter", { ctrlKey: true });
    expect(v.model.sent).toEqual([]);
  });

  it("the add button opens an empty editor; a blank one adds nothing", () => {
    const v = mount();
    v.add.click();
    expect(v.bar.hidden).toBe(false);
    expect(v.editor.hidden).toBe(false);
    expect(v.input.value).toBe("");
    v.input.value = "   ";
    v.key(v.input, "Enter", { ctrlKey: true });
    expect(v.model.sent).toEqual([]);
    expect(v.bar.hidden).toBe(true);
    v.add.click();
    v.input.value = "Be kind.";
    v.key(v.input, "Enter", { ctrlKey: true });
    expect(v.model.drain("system_prompt")).toEqual([{ kind: "system_prompt", text: "Be kind." }]);
    expect(v.bar.hidden).toBe(false);
    expect(v.add.hidden).toBe(true);
  });

  it("emptying the prompt removes it", () => {
    const v = mount({ system_prompt: "Gone soon." });
    v.toggle.click();
    v.edit.click();
    v.input.value = "";
    v.key(v.input, "Enter", { ctrlKey: true });
    expect(v.model.drain("system_prompt")).toEqual([{ kind: "system_prompt", text: "" }]);
    expect(v.bar.hidden).toBe(true);
    expect(v.add.hidden).toBe(false);
  });

  it("a change from Python while editing keeps what the user is writing", () => {
    const v = mount({ system_prompt: "A" });
    v.toggle.click();
    v.edit.click();
    v.input.value = "mine";
    v.model.set("system_prompt", "from Python");
    expect(v.input.value).toBe("mine");
    expect(v.editor.hidden).toBe(false);
    v.key(v.input, "Escape");
    expect(v.preview.textContent).toBe("from Python");
  });

  it("the stream layout has no system prompt line", () => {
    const v = mount({ mode: "stream", system_prompt: "x" });
    expect(v.bar).toBeNull();
    expect(v.add).toBeNull();
  });
});

describe("the options in force, on the status line's hover", () => {
  it("optionsSummary reads numbers plainly and quotes text", () => {
    expect(optionsSummary({ temperature: 0.2, max_new_tokens: 200, stop: ["\n\n"] })).toBe(
      'temperature 0.2 · max_new_tokens 200 · stop ["\\n\\n"]',
    );
    expect(optionsSummary(undefined)).toBe("");
    expect(optionsSummary({})).toBe("");
  });

  it("statusTitle: options first, then what the figures mean once done", () => {
    const e = message("m1", { status: "running", options: { temperature: 0 } });
    expect(statusTitle(e)).toBe("Generation options: temperature 0");
    expect(statusTitle({ ...e, status: "done" })).toMatch(
      /^Generation options: temperature 0\nTTFT: time to first token/,
    );
    expect(statusTitle(message("m2", { role: "user" }))).toBe("");
    expect(statusTitle(message("m3", { status: "done" }))).toMatch(/^TTFT/);
  });

  it("each reply's status element carries its own options (from the meta keys)", () => {
    const v = mount();
    const reply = (status: string, options?: Record<string, unknown>) => ({
      role: "assistant",
      seq: 1,
      status,
      stats: {},
      ...(options === undefined ? {} : { options }),
    });
    v.model.update({
      last_id: 2,
      m1: reply("done", { temperature: 0.2, max_new_tokens: 200 }),
      "m1.1": "one",
      m2: reply("running", { temperature: 0.9 }),
      "m2.1": "two",
      live: { m2: 1 },
    });
    v.frames.frame();
    const status = (id: string) =>
      v.el.querySelector(`.nbs-message[data-id="${id}"] .nbs-status`) as HTMLElement;
    expect(status("m1").title).toMatch(
      /^Generation options: temperature 0\.2 · max_new_tokens 200\n/,
    );
    expect(status("m2").title).toBe("Generation options: temperature 0.9");
    v.model.update({ m2: reply("done") }); // a meta without options: none shown
    v.frames.frame();
    expect(status("m2").title).toMatch(/^TTFT/);
  });
});
