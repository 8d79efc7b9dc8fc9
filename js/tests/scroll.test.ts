// @vitest-environment jsdom
// Scrolling that respects the reader (scroll.ts, and the list that drives it in
// messages.ts): follow only at the bottom, stop at the top of a long reply,
// keep the reader's place, "Jump to latest", never scroll the page. jsdom has
// no layout, so a small fake gives the list and its messages a geometry.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mountChat } from "../src/chat";
import { ANCHOR_GAP_PX, ScrollFollower, STICK_PX } from "../src/scroll";
import { FakeFrames, FakeModel, message } from "./fakes";

/**
 * A scrolling box of `client` px showing content of `height` px; scrollTop is
 * clamped as a browser clamps it; children report their rect from their
 * offset in the content (`offsets`).
 */
class Geometry {
  height = 0;
  top = 0;
  readonly offsets = new Map<Element, number>();

  constructor(
    readonly el: HTMLElement,
    readonly client: number,
  ) {
    Object.defineProperty(el, "scrollHeight", { get: () => Math.max(this.height, client) });
    Object.defineProperty(el, "clientHeight", { get: () => client });
    Object.defineProperty(el, "scrollTop", {
      get: () => this.top,
      set: (v: number) => {
        this.top = Math.max(0, Math.min(v, Math.max(this.height, client) - client));
      },
    });
    el.getBoundingClientRect = () => rect(100);
  }

  /** `child` starts `offset` px into the content. */
  place(child: Element, offset: number): void {
    this.offsets.set(child, offset);
    child.getBoundingClientRect = () => rect(100 + (this.offsets.get(child) ?? 0) - this.top);
  }

  /** The user scrolls to `top` (the browser then fires a scroll event). */
  userScroll(top: number): void {
    this.el.scrollTop = top;
    this.el.dispatchEvent(new Event("scroll"));
  }

  get atBottom(): boolean {
    return this.height - this.top - this.client <= STICK_PX;
  }
}

const rect = (top: number): DOMRect =>
  ({ top, bottom: top, left: 0, right: 0, width: 0, height: 0, x: 0, y: top }) as DOMRect;

function follower(client = 400) {
  const list = document.createElement("div");
  const jump = document.createElement("button");
  const g = new Geometry(list, client);
  const controller = new AbortController();
  const f = new ScrollFollower(list, jump, controller.signal);
  const reply = (offset: number) => {
    const el = document.createElement("div");
    list.appendChild(el);
    g.place(el, offset);
    return el;
  };
  return { list, jump, g, f, reply, controller };
}

describe("ScrollFollower", () => {
  it("follows the bottom while the reader is there; a short reply never stops it", () => {
    const { jump, g, f, reply } = follower();
    const r = reply(900);
    for (let h = 1000; h <= 1250; h += 50) {
      g.height = h; // the reply grows, still shorter than the list
      f.settle(r);
      expect(g.top).toBe(h - 400);
      expect(jump.hidden).toBe(true);
    }
  });

  it("stops at the top of a long reply once it reaches the list's top, and offers the jump", () => {
    const { jump, g, f, reply } = follower();
    const r = reply(1000);
    const seen: number[] = [];
    for (let h = 1100; h <= 3000; h += 100) {
      g.height = h;
      f.settle(r);
      seen.push(g.top);
    }
    const stop = 1000 - ANCHOR_GAP_PX;
    // followed the bottom while the reply's top was in view, then stayed at its top
    expect(seen.slice(0, 3)).toEqual([700, 800, 900]);
    expect(seen.slice(3).every((t) => t === stop)).toBe(true);
    expect(f.isFollowing).toBe(false);
    expect(jump.hidden).toBe(false);
  });

  it("stopping just short of the bottom is not the reader coming back to it", () => {
    const { jump, g, f, reply } = follower();
    const r = reply(1000);
    g.height = 1400 - ANCHOR_GAP_PX + 10; // the reply just outgrew the list
    f.settle(r);
    expect(g.top).toBe(1000 - ANCHOR_GAP_PX);
    g.el.dispatchEvent(new Event("scroll")); // the event of the view's own scroll
    expect(f.isFollowing).toBe(false);
    g.height += 300;
    f.settle(r);
    expect(g.top).toBe(1000 - ANCHOR_GAP_PX);
    expect(jump.hidden).toBe(false);
  });

  it("a reply taller than the list when first shown is shown from its top", () => {
    const { g, f, reply } = follower();
    const r = reply(200);
    g.height = 5000;
    f.settle(r);
    expect(g.top).toBe(200 - ANCHOR_GAP_PX);
  });

  it("stops once per reply: back at the bottom, the reader follows it to its end", () => {
    const { jump, g, f, reply } = follower();
    const r = reply(1000);
    g.height = 2000;
    f.settle(r);
    expect(g.top).toBe(1000 - ANCHOR_GAP_PX);
    g.userScroll(g.height); // the reader goes to the bottom
    expect(jump.hidden).toBe(true);
    for (let h = 2100; h <= 2500; h += 100) {
      g.height = h;
      f.settle(r);
      expect(g.top).toBe(h - 400);
    }
    // the next long reply stops the list again, at its own top
    const next = reply(2600);
    g.height = 3500;
    f.settle(next);
    expect(g.top).toBe(2600 - ANCHOR_GAP_PX);
    expect(jump.hidden).toBe(false);
  });

  it("keeps the reader's place when they scrolled up; the jump follows again", () => {
    const { jump, g, f } = follower();
    g.height = 1000;
    f.settle(null);
    g.userScroll(250);
    expect(jump.hidden).toBe(false);
    for (let h = 1100; h <= 2000; h += 100) {
      g.height = h;
      f.settle(null);
      expect(g.top).toBe(250);
    }
    jump.click();
    expect(g.top).toBe(2000 - 400);
    expect(jump.hidden).toBe(true);
    g.height = 2100;
    f.settle(null);
    expect(g.top).toBe(1700);
  });

  it("text that grew before a scroll event is not the reader scrolling up", () => {
    const { jump, g, f } = follower();
    g.height = 1000;
    f.settle(null);
    g.height = 1300; // grew; the scroll event of the last settle comes late
    g.el.dispatchEvent(new Event("scroll"));
    expect(jump.hidden).toBe(true);
    f.settle(null);
    expect(g.top).toBe(900);
  });

  it("near the bottom counts as the bottom", () => {
    const { jump, g, f } = follower();
    g.height = 1000;
    f.settle(null);
    g.userScroll(300);
    expect(f.isFollowing).toBe(false);
    g.userScroll(600 - STICK_PX + 1);
    expect(f.isFollowing).toBe(true);
    expect(jump.hidden).toBe(true);
  });

  it("settles again when a message takes its real height after the frame", () => {
    const observers: { cb: () => void; targets: Set<Element> }[] = [];
    class FakeResizeObserver {
      readonly targets = new Set<Element>();
      constructor(readonly cb: () => void) {
        observers.push(this);
      }
      observe(el: Element) {
        this.targets.add(el);
      }
      unobserve(el: Element) {
        this.targets.delete(el);
      }
      disconnect() {
        this.targets.clear();
      }
    }
    vi.stubGlobal("ResizeObserver", FakeResizeObserver);
    const { g, f, reply, list, controller } = follower();
    const r = reply(100);
    g.height = 450;
    f.settle(r);
    expect(g.top).toBe(50);
    const ro = observers[0] as (typeof observers)[number];
    expect([...ro.targets]).toEqual([r]);
    g.height = 480; // blocks that came into view took their real height
    ro.cb();
    expect(g.top).toBe(80);
    // a removed message is no longer watched
    list.removeChild(r);
    const next = reply(500);
    f.settle(next);
    expect([...ro.targets]).toEqual([next]);
    controller.abort();
    expect(ro.targets.size).toBe(0);
    vi.unstubAllGlobals();
  });

  it("stops listening when its signal aborts", () => {
    const { jump, g, f, controller } = follower();
    g.height = 1000;
    f.settle(null);
    controller.abort();
    g.userScroll(100);
    expect(f.isFollowing).toBe(true);
    jump.click();
    expect(g.top).toBe(100);
  });
});

describe("the chat view's list", () => {
  let cleanup: (() => void) | null = null;
  afterEach(() => {
    cleanup?.();
    cleanup = null;
    document.body.textContent = "";
    vi.restoreAllMocks();
  });

  const mount = () => {
    const model = new FakeModel({
      conversation: [message("q", { role: "user", text: "Q?", status: "done" }), message("a")],
    });
    const frames = new FakeFrames();
    const el = document.createElement("div");
    document.body.appendChild(el);
    cleanup = mountChat(model, el, { scheduler: frames, now: () => 0, idle: null });
    frames.frame();
    const list = el.querySelector(".nbs-messages") as HTMLElement;
    const jump = el.querySelector(".nbs-jump") as HTMLButtonElement;
    const reply = el.querySelector('.nbs-message[data-id="a"]') as HTMLElement;
    const g = new Geometry(list, 400);
    g.height = 120;
    g.place(el.querySelector('.nbs-message[data-id="q"]') as HTMLElement, 0);
    g.place(reply, 60);
    return { model, frames, list, jump, reply, g };
  };

  it("one long paragraph: at every frame the list is at the bottom or offers the jump", () => {
    const { model, frames, jump, reply, g } = mount();
    const scrollIntoView = vi.fn();
    Element.prototype.scrollIntoView = scrollIntoView;
    const pageScroll = vi.spyOn(window, "scrollTo").mockImplementation(() => {});
    const focus = vi.spyOn(HTMLElement.prototype, "focus");
    let stoppedAt = -1;
    for (let seq = 1; seq <= 80; seq++) {
      model.delta("a", seq, "word ".repeat(12)); // no blank line: one paragraph
      g.height += 20; // the paragraph's height follows its text
      frames.frame();
      expect(reply.querySelectorAll(".nbs-md > p").length).toBe(1);
      expect(g.atBottom || !jump.hidden, `frame ${seq}`).toBe(true);
      if (stoppedAt === -1 && !jump.hidden) {
        stoppedAt = seq;
      }
    }
    // it followed until the reply's top reached the list's top, then stayed there
    expect(stoppedAt).toBeGreaterThan(1);
    expect(g.top).toBe(60 - ANCHOR_GAP_PX);
    // streaming never scrolls the page or moves the focus
    expect(scrollIntoView).not.toHaveBeenCalled();
    expect(pageScroll).not.toHaveBeenCalled();
    expect(focus).not.toHaveBeenCalled();
  });

  it("the reader's place is kept while the reply streams, until they jump", () => {
    const { model, frames, jump, g } = mount();
    model.delta("a", 1, "start\n\n");
    g.height = 2000;
    frames.frame(); // a long reply: shown from its top
    expect(g.top).toBe(60 - ANCHOR_GAP_PX);
    jump.click(); // the reader goes to the latest text
    expect(g.atBottom).toBe(true);
    g.userScroll(500); // and scrolls up to read
    for (let seq = 2; seq <= 20; seq++) {
      model.delta("a", seq, "more text\n\n");
      g.height += 50;
      frames.frame();
      expect(g.top).toBe(500);
      expect(jump.hidden).toBe(false);
    }
    jump.click();
    expect(g.atBottom).toBe(true);
    model.delta("a", 21, "end");
    g.height += 50;
    frames.frame();
    expect(g.atBottom).toBe(true);
  });
});

describe("widget.css", () => {
  it("skips rendering only for blocks no longer written (never the last, open block) and placeholders of finished messages", () => {
    const css = readFileSync(join(__dirname, "..", "src", "widget.css"), "utf8").replace(
      /\/\*[\s\S]*?\*\//g,
      "",
    );
    const rules = [...css.matchAll(/([^{}]+)\{([^}]*)\}/g)].filter(([, , body]) =>
      /content-visibility:\s*auto/.test(body ?? ""),
    );
    expect(rules.length).toBeGreaterThan(0);
    for (const [, selector] of rules) {
      for (const s of (selector ?? "").split(",")) {
        // a deferred message (lazy.ts) is a finished one: nothing is written into it
        // (its source shown where `hidden="until-found"` is not supported: `:not([hidden])`)
        expect(s.trim()).toMatch(/:not\(:last-child\)$|^\.nbs-deferred[ :]/);
      }
    }
  });
});
