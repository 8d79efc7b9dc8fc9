// @vitest-environment jsdom
// Attachments in the view (#21): the wire shapes (generated from protocol.py) are checked; a
// question's attachments show as thumbnails (data: URLs of the previews' bytes) or file
// chips, hostile names as text; the composer takes files the policy allows, says why
// for the others, sends the rest as the Send's buffers, and gets a refused draft back.
import { afterEach, describe, expect, it } from "vitest";
import {
  humanBytes,
  kindOf,
  MessageAttachments,
  mimeMatches,
  type ShownAttachment,
  takes,
  toAttachmentMetas,
  toPolicy,
} from "../src/attachments";
import { mountChat } from "../src/chat";
import { acceptAttribute, Composer, typeOf } from "../src/composer";
import type { AttachmentMeta, AttachmentPolicy } from "../src/protocol";
import { FakeFrames, FakeModel } from "./fakes";

const HOSTILE = `<img src=x onerror="window.__nbsCanary=1">"><script>window.__nbsCanary=2</script>.png`;
const PNG_1PX = Uint8Array.from(
  atob(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  ),
  (c) => c.charCodeAt(0),
);
const SVG = `<svg xmlns="http://www.w3.org/2000/svg" onload="window.__nbsCanary=3"><script>window.__nbsCanary=4</script></svg>`;

const POLICY: Required<AttachmentPolicy> = {
  accepts: [["*/*"]],
  max_count: 3,
  max_bytes: 1000,
  max_message_bytes: 1500,
  max_chat_bytes: 10_000,
  max_image_side: 2048,
};

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
  delete (window as unknown as Record<string, unknown>).__nbsCanary;
});

describe("the wire shapes (generated from protocol.py) are checked", () => {
  it("a well-formed AttachmentMeta and policy come through whole: no declared field dropped", () => {
    // Required<>: a field added to protocol.py fails tsc here until the check keeps it
    const full: Required<AttachmentMeta> = {
      name: "a.png",
      mime: "image/png",
      size: 1,
      kind: "image",
      width: 1,
      height: 1,
      note: "n",
      excerpt: "e",
      preview: { key: "m1.a1", mime: "image/png", width: 1, height: 1 },
    };
    expect(toAttachmentMetas([full])).toEqual([full]);
    expect(toPolicy(POLICY)).toEqual(POLICY);
  });

  it("attachments are checked: malformed entries dropped, names bounded, previews images only", () => {
    const got = toAttachmentMetas([
      { name: "x".repeat(500), mime: "text/csv", size: 3, kind: "text", excerpt: "a,b" },
      { name: 5, mime: "image/png" },
      "nope",
      {
        name: "p.png",
        mime: "image/png",
        size: -1,
        kind: "image",
        width: 2,
        height: 3,
        preview: { key: "m1.a1", mime: "text/html", width: 1, height: 1 },
      },
      {
        name: "q.png",
        mime: "image/png",
        size: 9,
        kind: "image",
        preview: { key: "conversation", mime: "image/png", width: 1, height: 1 },
      },
      {
        name: "s.svg",
        mime: "image/svg+xml",
        size: 9,
        kind: "text",
        preview: { key: "m2.a1", mime: "IMAGE/SVG+XML", width: 0, height: 0 },
      },
    ]);
    expect(got.map((a) => a.name.length)).toEqual([200, 5, 5, 5]);
    expect(got[0]?.excerpt).toBe("a,b");
    expect(got[1]).toEqual({
      name: "p.png",
      mime: "image/png",
      size: 0,
      kind: "image",
      width: 2,
      height: 3,
    });
    expect(got[2]?.preview).toBeUndefined(); // a key that is not an attachment's
    expect(got[3]?.preview).toEqual({ key: "m2.a1", mime: "image/svg+xml", width: 0, height: 0 });
    expect(toAttachmentMetas(undefined)).toEqual([]);
    expect(toPolicy(undefined)).toBeNull();
    expect(toPolicy({ ...POLICY, accepts: [["image/*", 3], "x"] })?.accepts).toEqual([["image/*"]]);
  });

  it("kinds, patterns and sizes as the kernel reckons them", () => {
    expect(
      ["image/png", "image/svg+xml", "text/csv", "application/json", "application/pdf"].map(kindOf),
    ).toEqual(["image", "text", "text", "text", "file"]);
    expect(mimeMatches("image/png", "image/*") && !mimeMatches("image/png", "text/*")).toBe(true);
    expect(takes([["text/*"]], "image/svg+xml")).toBe(true); // markup goes as text
    expect(takes([["text/*"]], "image/png")).toBe(false);
    expect(takes([["*/*"], ["text/*"]], "image/png")).toBe(false); // every pane must take it
    expect([812, 23_962, 8 << 20].map(humanBytes)).toEqual(["812 B", "23.4 KB", "8.0 MB"]);
    expect(acceptAttribute({ ...POLICY, accepts: [["text/*"]] })).not.toMatch(/image\/png/);
    expect(acceptAttribute({ ...POLICY, accepts: [["text/*", "image/png"]] })).toMatch(
      /image\/png/,
    );
    expect(acceptAttribute(POLICY)).toBe(""); // anything
    expect(typeOf({ name: "notes.MD", type: "" })).toBe("text/markdown");
  });
});

describe("a question's attachments in a message", () => {
  const meta = (over: Partial<ShownAttachment> = {}): ShownAttachment => ({
    name: HOSTILE,
    mime: "image/png",
    size: 2048,
    kind: "image",
    ...(over.kind === undefined || over.kind === "image" ? { width: 640, height: 480 } : {}),
    ...over,
  });

  it("show as thumbnails from the preview's bytes, names as text only", () => {
    const host = document.createElement("div");
    const text = document.createElement("div");
    host.append(text);
    document.body.append(host);
    const shown = new MessageAttachments(document);
    const list = [
      meta({ preview: { key: "m1.a1", mime: "image/png", width: 1, height: 1, data: PNG_1PX } }),
      meta({
        name: "d.svg",
        mime: "image/svg+xml",
        kind: "text",
        preview: {
          key: "m1.a2",
          mime: "image/svg+xml",
          width: 0,
          height: 0,
          data: new TextEncoder().encode(SVG),
        },
      }),
      meta({ name: "t.csv", mime: "text/csv", kind: "text", excerpt: `${HOSTILE}\na,b` }),
      meta({ name: "r.pdf", mime: "application/pdf", kind: "file" }),
      meta({ name: "lost.png" }), // the preview's key is not there: a chip
    ];
    shown.paint(host, text, list);
    shown.paint(host, text, list); // once
    expect(host.querySelectorAll(".nbs-attachments").length).toBe(1);
    const imgs = [...host.querySelectorAll<HTMLImageElement>("img.nbs-att-img")];
    expect(imgs.map((i) => i.getAttribute("src")?.slice(0, 26))).toEqual([
      "data:image/png;base64,iVBO",
      "data:image/svg+xml;base64,",
    ]);
    expect(imgs[0]?.alt).toBe(HOSTILE);
    // nothing of a name, a note or an excerpt became markup
    expect(host.querySelector("script, [onerror], [onload], svg, iframe")).toBeNull();
    expect(host.querySelector("pre.nbs-att-excerpt")?.textContent).toBe(`${HOSTILE}\na,b`);
    expect([...host.querySelectorAll(".nbs-att-name")].map((e) => e.textContent)).toEqual([
      "t.csv (text/csv, 2.0 KB)",
      "r.pdf (application/pdf, 2.0 KB)",
      "lost.png (image/png, 640×480 px, 2.0 KB)",
    ]);
    expect(host.firstElementChild?.className).toBe("nbs-attachments"); // before the text
    const thumb = host.querySelector<HTMLButtonElement>("button.nbs-att-thumb");
    expect(thumb?.getAttribute("aria-expanded")).toBe("false");
    thumb?.click();
    expect(thumb?.getAttribute("aria-expanded")).toBe("true");
    expect((window as unknown as Record<string, unknown>).__nbsCanary).toBeUndefined();
  });

  it("come from the message's keys through the whole view, and stay usable without a kernel", () => {
    const model = new FakeModel();
    const slots = new Set<(sender: unknown, status: string) => void>();
    const signal = <T>() => ({ connect: () => true, disconnect: () => true }) as unknown as T;
    const kernel = {
      status: "idle",
      statusChanged: {
        connect: (slot: (sender: unknown, status: string) => void) => slots.add(slot) !== null,
        disconnect: (slot: (sender: unknown, status: string) => void) => slots.delete(slot),
      },
      connectionStatusChanged: signal<never>(),
      disposed: signal<never>(),
    };
    (model.widget_manager as Record<string, unknown>).kernel = kernel;
    const el = document.createElement("div");
    document.body.append(el);
    const frames = new FakeFrames();
    cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0 }));
    model.update({
      last_id: 1,
      live: {},
      removed: 0,
      current: "m1",
      m1: {
        role: "user",
        seq: 0,
        status: "done",
        stats: {},
        text: "What is it?",
        parent: null,
        attachments: [
          {
            ...meta({ name: "shot.png" }),
            preview: { key: "m1.a1", mime: "image/png", width: 1, height: 1 },
          },
        ],
      },
      "m1.a1": new DataView(PNG_1PX.buffer),
    });
    frames.frame();
    const img = el.querySelector<HTMLImageElement>('.nbs-message[data-id="m1"] img.nbs-att-img');
    expect(img?.getAttribute("src")).toMatch(/^data:image\/png;base64,iVBORw0KGgo/);
    expect(img?.alt).toBe("shot.png");
    // the kernel goes away (a saved notebook reopened, a restart): what asks the kernel is
    // disabled, but a thumbnail still shows larger (it is this page's alone)
    kernel.status = "dead";
    for (const slot of slots) slot(null, "dead");
    frames.frame();
    expect(el.querySelector(".nbs-chat")?.getAttribute("data-connection")).toBe("lost");
    expect(el.querySelector<HTMLButtonElement>("button.nbs-send")?.disabled).toBe(true);
    const thumb = el.querySelector<HTMLButtonElement>("button.nbs-att-thumb");
    expect(thumb?.disabled).toBe(false);
    thumb?.click();
    expect(thumb?.getAttribute("aria-expanded")).toBe("true");
  });
});

describe("the composer", () => {
  const setup = (policy: AttachmentPolicy | null = POLICY) => {
    const model = new FakeModel({ source_label: "Tiny", attachment_policy: policy } as never);
    const el = document.createElement("div");
    document.body.append(el);
    const frames = new FakeFrames();
    cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0 }));
    const $ = <T extends Element = HTMLElement>(sel: string) => el.querySelector(sel) as T;
    return {
      model,
      el,
      input: $<HTMLTextAreaElement>("textarea.nbs-input"),
      send: $<HTMLButtonElement>("button.nbs-send"),
      attach: $<HTMLButtonElement>("button.nbs-attach"),
      picker: $<HTMLInputElement>("input.nbs-attach-input"),
      tray: $<HTMLElement>(".nbs-attach-tray"),
      notice: $<HTMLElement>(".nbs-attach-notice"),
      drop: (files: File[]) => {
        const ev = new Event("drop", { bubbles: true, cancelable: true }) as Event & {
          dataTransfer: { files: File[]; types: string[] };
        };
        ev.dataTransfer = { files, types: ["Files"] };
        $(".nbs-chat").dispatchEvent(ev);
        return ev;
      },
      paste: (files: File[]) => {
        const ev = new Event("paste", { bubbles: true, cancelable: true }) as Event & {
          clipboardData: { files: File[] };
        };
        ev.clipboardData = { files };
        $("textarea.nbs-input").dispatchEvent(ev);
        return ev;
      },
    };
  };
  const settle = () => new Promise((r) => setTimeout(r, 20));
  const csv = (name = "data.csv", size = 10) =>
    new File(["a".repeat(size)], name, { type: "text/csv" });
  const image = (name = "shot.png") => new File([PNG_1PX], name, { type: "image/png" });

  it("is keyboard reachable, and hidden for an older kernel", async () => {
    const v = setup();
    expect(v.attach.hidden).toBe(false);
    expect(v.attach.tagName).toBe("BUTTON");
    expect(v.attach.getAttribute("aria-label")).toMatch(/Attach files/);
    expect(v.picker.hidden && v.picker.tabIndex === -1 && v.picker.multiple).toBe(true);
    const old = setup(null);
    expect(old.attach.hidden).toBe(true);
    old.drop([csv()]);
    await settle();
    expect(old.notice.textContent).toBe("This widget takes no attachments.");
  });

  it("takes dropped and pasted files into the tray, each with a remove button", async () => {
    const v = setup();
    expect(v.drop([csv(), image()]).defaultPrevented).toBe(true);
    await settle();
    expect(v.paste([image("image.png")]).defaultPrevented).toBe(true);
    await settle();
    const labels = [...v.tray.querySelectorAll(".nbs-attach-label")].map((e) => e.textContent);
    expect(labels).toEqual(["data.csv (10 B)", "shot.png (70 B)", "pasted.png (70 B)"]);
    expect(v.tray.hidden).toBe(false);
    const removes = [...v.tray.querySelectorAll<HTMLButtonElement>("button.nbs-attach-remove")];
    expect(removes.map((b) => b.getAttribute("aria-label"))).toEqual([
      "Remove data.csv",
      "Remove shot.png",
      "Remove pasted.png",
    ]);
    removes[1]?.click();
    expect(v.tray.querySelectorAll(".nbs-attach-item").length).toBe(2);
    expect(document.activeElement).toBe(removes[2]); // the keyboard stays in the tray
    // text pasted stays the input box's
    expect(v.paste([]).defaultPrevented).toBe(false);
  });

  it("says why it does not take a file: type, count, size", async () => {
    const v = setup({ ...POLICY, accepts: [["text/*"]], max_count: 2 });
    v.drop([image()]);
    await settle();
    expect(v.notice.textContent).toBe("Not attached: Tiny takes no images (shot.png).");
    expect(v.notice.getAttribute("role")).toBe("alert");
    v.drop([csv("big.csv", 1001)]);
    await settle();
    expect(v.notice.textContent).toMatch(/big\.csv is 1001 B; the limit is 1000 B/);
    v.drop([csv("a.csv", 800), csv("b.csv", 800)]);
    await settle();
    expect(v.notice.textContent).toMatch(/a message takes at most 1\.5 KB/);
    v.drop([csv("c.csv"), csv("d.csv")]);
    await settle();
    expect(v.notice.textContent).toMatch(/at most 2 attachments per message/);
    expect(v.tray.querySelectorAll(".nbs-attach-item").length).toBe(2);
    expect(v.picker.accept).toMatch(/text\/\*/);
    expect(v.picker.accept).not.toMatch(/image\/png/);
  });

  it("sends the files as the Send's buffers, and gets a refused draft back", async () => {
    const v = setup();
    v.drop([csv("data.csv", 4)]);
    await settle();
    v.model.drain("hello");
    v.input.value = "Sum it";
    v.input.dispatchEvent(new Event("input"));
    v.send.click();
    expect(v.input.value).toBe("");
    expect(v.tray.hidden).toBe(true);
    await settle();
    expect(v.model.sent).toEqual([
      { kind: "send", text: "Sum it", attachments: [{ name: "data.csv", size: 4 }], draft: 1 },
    ]);
    const [buffers] = v.model.sentBuffers;
    expect(buffers?.map((b) => new TextDecoder().decode(b as ArrayBuffer))).toEqual(["aaaa"]);
    // the kernel refuses it: the question and the file come back, with the reason
    v.model.custom({ kind: "refused", draft: 1, reason: "Tiny takes no text/csv files" });
    await settle();
    expect(v.input.value).toBe("Sum it");
    expect(v.tray.querySelectorAll(".nbs-attach-item").length).toBe(1);
    expect(v.notice.textContent).toBe("Not sent: Tiny takes no text/csv files");
    // a Send without files goes at once, as before
    v.model.drain("send");
    v.send.click();
    await settle();
    expect(v.model.sent[0]).toMatchObject({ kind: "send", text: "Sum it", draft: 2 });
  });

  it("a Compare view attaches the same way, every pane's source asked", async () => {
    const model = new FakeModel({
      mode: "compare",
      panes: [{ label: "A" }, { label: "B" }],
      attachment_policy: { ...POLICY, accepts: [["*/*"], ["text/*"]] },
    } as never);
    const el = document.createElement("div");
    document.body.append(el);
    cleanups.push(mountChat(model, el, { scheduler: new FakeFrames(), now: () => 0 }));
    const root = el.querySelector(".nbs-chat") as HTMLElement;
    expect(root.querySelector("button.nbs-attach")).not.toBeNull();
    const drop = (files: File[]) => {
      const ev = new Event("drop", { bubbles: true, cancelable: true }) as Event & {
        dataTransfer: { files: File[]; types: string[] };
      };
      ev.dataTransfer = { files, types: ["Files"] };
      root.dispatchEvent(ev);
    };
    drop([image()]); // pane B's source takes text only
    await settle();
    expect(root.querySelector(".nbs-attach-notice")?.textContent).toMatch(/takes no images/);
    drop([csv()]);
    await settle();
    model.drain("hello");
    const input = root.querySelector("textarea.nbs-input") as HTMLTextAreaElement;
    input.value = "both?";
    input.dispatchEvent(new Event("input"));
    (root.querySelector("button.nbs-send") as HTMLButtonElement).click();
    await settle();
    expect(model.sent).toEqual([
      { kind: "send", text: "both?", attachments: [{ name: "data.csv", size: 10 }], draft: 1 },
    ]);
    expect(model.sentBuffers[0]?.length).toBe(1);
  });

  it("a standalone composer clears and disposes", async () => {
    const root = document.createElement("div");
    const input = document.createElement("textarea");
    root.append(input);
    document.body.append(root);
    const ac = new AbortController();
    const c = new Composer(document, root, input, {
      policy: () => POLICY,
      label: () => "S",
      onChange: () => {},
      signal: ac.signal,
    });
    await c.add([csv()]);
    expect(c.count).toBe(1);
    const draft = await c.take();
    expect(draft?.attachments).toEqual([{ name: "data.csv", size: 10 }]);
    expect(c.count).toBe(0);
    expect(await c.take()).toBeNull();
    c.dispose();
    ac.abort();
  });
});
