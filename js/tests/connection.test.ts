// Whether a view is connected to its kernel (connection.ts), with a fake kernel
// (lumino-like signals), a fake model `comm_live` and a hand-driven interval.
import { describe, expect, it } from "vitest";
import {
  CHECK_MS,
  Connection,
  type ConnectionState,
  KERNEL_INFO_MS,
  type KernelLike,
  type LostReason,
  lostMessage,
  SILENT_MS,
  type SignalLike,
  UNANSWERED_IDLE_MS,
  UNANSWERED_MS,
} from "../src/connection";

class FakeSignal<T> implements SignalLike<T> {
  readonly slots = new Set<(sender: unknown, value: T) => void>();
  connect(slot: (sender: unknown, value: T) => void): boolean {
    this.slots.add(slot);
    return true;
  }
  disconnect(slot: (sender: unknown, value: T) => void): boolean {
    return this.slots.delete(slot);
  }
  emit(value: T): void {
    for (const s of [...this.slots]) {
      s(null, value);
    }
  }
}

class FakeKernel implements KernelLike {
  status = "idle";
  readonly statusChanged = new FakeSignal<string>();
  readonly connectionStatusChanged = new FakeSignal<string>();
  readonly disposed = new FakeSignal<undefined>();
  setStatus(s: string): void {
    this.status = s;
    this.statusChanged.emit(s);
  }
}

/** A kernel asked for its info: the test answers (or not) by hand. */
class AskedKernel extends FakeKernel {
  readonly asked: { resolve: (reply: unknown) => void; reject: (e: unknown) => void }[] = [];
  requestKernelInfo(): Promise<unknown> {
    return new Promise((resolve, reject) => this.asked.push({ resolve, reject }));
  }
  /** the one request asked so far */
  only(): { resolve: (reply: unknown) => void; reject: (e: unknown) => void } {
    expect(this.asked).toHaveLength(1);
    const [request] = this.asked;
    if (request === undefined) {
      throw new Error("not asked");
    }
    return request;
  }
}

const settled = (): Promise<void> => new Promise((r) => setTimeout(r, 0));

function setup(opts: { kernel?: FakeKernel | null; commLive?: boolean | null } = {}) {
  let t = 0;
  let tick: (() => void) | null = null;
  const hellos: number[] = [];
  const states: [ConnectionState, LostReason | null][] = [];
  const live = { value: opts.commLive === undefined ? null : opts.commLive };
  const kernel = opts.kernel === undefined ? new FakeKernel() : opts.kernel;
  const c = new Connection({
    hello: () => hellos.push(t),
    onChange: (s, r) => states.push([s, r]),
    kernel,
    commLive: () => live.value,
    now: () => t,
    interval: {
      set: (cb) => {
        tick = cb;
        return 1;
      },
      clear: () => {
        tick = null;
      },
    },
  });
  /** lets `ms` pass, the interval firing every CHECK_MS */
  const pass = (ms: number): void => {
    for (let left = ms; left > 0; left -= CHECK_MS) {
      t += Math.min(CHECK_MS, left);
      tick?.();
    }
  };
  return { c, hellos, states, kernel, live, pass, armed: () => tick !== null };
}

describe("a notebook closing", () => {
  it("says goodbye when the document's session closes, once, and not once disposed", () => {
    const session = { disposed: new FakeSignal<undefined>() };
    let byes = 0;
    const make = () =>
      new Connection({
        hello: () => undefined,
        onChange: () => undefined,
        kernel: new FakeKernel(),
        session,
        goodbye: () => {
          byes++;
        },
        commLive: () => true,
        now: () => 0,
      });
    const c = make();
    session.disposed.emit(undefined);
    expect(byes).toBe(1);
    c.dispose();
    expect(session.disposed.slots.size).toBe(0);
    // a goodbye that cannot be sent (the connection went first) is no error
    const failing = new Connection({
      hello: () => undefined,
      onChange: () => undefined,
      kernel: null,
      session,
      goodbye: () => {
        throw new Error("Cannot send");
      },
      commLive: () => null,
      now: () => 0,
    });
    expect(() => session.disposed.emit(undefined)).not.toThrow();
    failing.dispose();
    session.disposed.emit(undefined);
    expect(byes).toBe(1);
  });
});

describe("a page unloading", () => {
  class FakePage {
    readonly listeners = new Map<string, Set<(e: { persisted?: boolean }) => void>>();
    addEventListener(type: string, fn: (e: { persisted?: boolean }) => void): void {
      const set = this.listeners.get(type) ?? new Set();
      set.add(fn);
      this.listeners.set(type, set);
    }
    removeEventListener(type: string, fn: (e: { persisted?: boolean }) => void): void {
      this.listeners.get(type)?.delete(fn);
    }
    fire(type: string, persisted = false): void {
      for (const fn of [...(this.listeners.get(type) ?? [])]) {
        fn({ persisted });
      }
    }
    count(): number {
      return [...this.listeners.values()].reduce((n, s) => n + s.size, 0);
    }
  }

  it("says a page's bye on pagehide, hello when restored from the cache, nothing once disposed", () => {
    const page = new FakePage();
    const byes: string[] = [];
    let hellos = 0;
    const kernel = new FakeKernel();
    const c = new Connection({
      hello: () => {
        hellos++;
      },
      onChange: () => undefined,
      kernel,
      goodbye: (leaving) => {
        byes.push(leaving);
      },
      page,
      commLive: () => true,
      now: () => 0,
    });
    page.fire("pagehide");
    expect(byes).toEqual(["page"]);
    page.fire("pageshow", false); // a fresh load's pageshow: the view said hello at render
    expect(hellos).toBe(0);
    page.fire("pageshow", true); // back from the back-forward cache
    expect(hellos).toBe(1);
    kernel.setStatus("dead"); // a lost kernel: no one to tell
    page.fire("pagehide");
    expect(byes).toEqual(["page"]);
    c.dispose();
    expect(page.count()).toBe(0);
  });

  it("a bye that cannot be sent on pagehide is no error", () => {
    const page = new FakePage();
    const c = new Connection({
      hello: () => undefined,
      onChange: () => undefined,
      kernel: null,
      goodbye: () => {
        throw new Error("Cannot send");
      },
      page,
      commLive: () => null,
      now: () => 0,
    });
    expect(() => page.fire("pagehide")).not.toThrow();
    c.dispose();
  });
});

describe("connection", () => {
  it("a welcome makes the view live; the checks stop", () => {
    const s = setup();
    s.c.hello();
    expect(s.hellos).toHaveLength(1);
    expect(s.c.state).toBe("connecting");
    s.pass(1000);
    s.c.heard();
    expect(s.states).toEqual([["live", null]]);
    expect(s.armed()).toBe(false);
    s.pass(10 * UNANSWERED_IDLE_MS);
    expect(s.c.state).toBe("live");
  });

  it("a model whose comm is live is live at once, without waiting for the answer", () => {
    const s = setup({ commLive: true });
    s.c.hello();
    expect(s.states).toEqual([["live", null]]);
  });

  it("an idle kernel that leaves the hello unanswered: not connected", () => {
    const s = setup({ commLive: false }); // a reopened notebook: a new kernel
    s.c.hello();
    s.pass(UNANSWERED_IDLE_MS - CHECK_MS);
    expect(s.c.state).toBe("connecting");
    s.pass(CHECK_MS);
    expect(s.states).toEqual([["lost", "no-answer"]]);
    // a late answer (a false alarm) makes it live again
    s.c.heard();
    expect(s.c.state).toBe("live");
  });

  it("a busy kernel is given all the time it needs", () => {
    const s = setup({ commLive: false });
    s.kernel?.setStatus("busy"); // a long cell: comm messages wait for it
    s.c.hello();
    s.pass(100 * UNANSWERED_IDLE_MS);
    expect(s.c.state).toBe("connecting");
    s.kernel?.setStatus("idle");
    s.pass(UNANSWERED_IDLE_MS);
    expect(s.c.state).toBe("lost");
  });

  it("with no kernel object, an answer must come within UNANSWERED_MS", () => {
    const s = setup({ kernel: null }); // nbconvert's HTML: no kernel at all
    s.c.hello();
    s.pass(UNANSWERED_MS - CHECK_MS);
    expect(s.c.state).toBe("connecting");
    s.pass(CHECK_MS);
    expect(s.states).toEqual([["lost", "no-answer"]]);
  });

  it.each([
    ["restarting", "restarted"],
    ["autorestarting", "restarted"],
    ["dead", "stopped"],
  ] as const)("kernel status %s: lost at once (%s), and for good", (status, reason) => {
    const s = setup({ commLive: true });
    s.c.hello();
    s.kernel?.setStatus(status);
    expect(s.states).toEqual([
      ["live", null],
      ["lost", reason],
    ]);
    // the widget's comm is gone: nothing it hears afterwards makes it live
    s.c.heard();
    s.c.linkChanged();
    expect(s.c.state).toBe("lost");
  });

  it("a new kernel process (status starting, a restart from elsewhere): lost", () => {
    const s = setup({ commLive: true }); // the page keeps the old comm: no comm_live_update
    s.c.hello();
    s.kernel?.setStatus("starting");
    expect(s.states).toEqual([
      ["live", null],
      ["lost", "restarted"],
    ]);
  });

  it("a restart noticed first as silence is still said to be a restart", () => {
    const s = setup({ commLive: true });
    s.c.hello();
    s.c.setActive(true);
    s.pass(SILENT_MS + UNANSWERED_IDLE_MS + 2 * CHECK_MS); // the old kernel went quiet
    expect(s.c.reason).toBe("no-answer");
    s.kernel?.setStatus("starting"); // then the new one started
    expect(s.states.at(-1)).toEqual(["lost", "restarted"]);
  });

  it("a live message and a silent kernel: asked again; no answer from an idle kernel: lost", () => {
    // a kernel shut down from elsewhere tells the page nothing; the model's comm
    // still looks live from here
    const s = setup({ commLive: true });
    s.c.hello();
    s.c.setActive(true);
    s.pass(SILENT_MS - CHECK_MS);
    s.c.heard(); // a delta
    s.pass(SILENT_MS - CHECK_MS);
    expect(s.hellos).toHaveLength(1); // never silent long enough yet
    s.pass(2 * CHECK_MS);
    expect(s.hellos).toHaveLength(2); // asked
    expect(s.c.state).toBe("live"); // (a live comm is no answer to that question)
    s.pass(UNANSWERED_IDLE_MS);
    expect(s.states).toEqual([
      ["live", null],
      ["lost", "no-answer"],
    ]);
  });

  it("a kernel that heard the view, silent to its hello, answers for its info: restarted", async () => {
    // a restart from elsewhere whose `starting` the page missed (Notebook 7)
    const kernel = new AskedKernel();
    const s = setup({ kernel, commLive: true });
    s.c.hello();
    s.c.setActive(true);
    s.pass(SILENT_MS + UNANSWERED_IDLE_MS + 2 * CHECK_MS);
    expect(s.c.reason).toBe("no-answer");
    expect(kernel.asked).toHaveLength(1);
    kernel.only().resolve({ content: { status: "ok" } });
    await settled();
    expect(s.states).toEqual([
      ["live", null],
      ["lost", "no-answer"],
      ["lost", "restarted"],
    ]);
  });

  it("no info either (a kernel shut down), or too late: still no answer", async () => {
    for (const late of [false, true]) {
      const kernel = new AskedKernel();
      const s = setup({ kernel, commLive: true });
      s.c.hello();
      s.c.setActive(true);
      s.pass(SILENT_MS + UNANSWERED_IDLE_MS + 2 * CHECK_MS);
      expect(kernel.asked).toHaveLength(1);
      if (late) {
        s.pass(KERNEL_INFO_MS + CHECK_MS);
        kernel.only().resolve({ content: { status: "ok" } });
      } else {
        kernel.only().reject(new Error("Kernel is disposed"));
      }
      await settled();
      expect(s.states).toEqual([
        ["live", null],
        ["lost", "no-answer"],
      ]);
    }
  });

  it("a view that never heard its kernel (a reopened notebook) does not ask it", () => {
    const kernel = new AskedKernel();
    const s = setup({ kernel, commLive: false });
    s.c.hello();
    s.pass(UNANSWERED_IDLE_MS + CHECK_MS);
    expect(s.c.reason).toBe("no-answer");
    expect(kernel.asked).toHaveLength(0);
  });

  it("the question answered: still live, and asked again only after a new silence", () => {
    const s = setup({ commLive: true });
    s.c.hello();
    s.c.setActive(true);
    s.pass(SILENT_MS + CHECK_MS);
    expect(s.hellos).toHaveLength(2);
    s.c.heard(); // the welcome
    s.pass(SILENT_MS - 2 * CHECK_MS);
    expect(s.hellos).toHaveLength(2);
    expect(s.c.state).toBe("live");
  });

  it("no live message: silence is normal, nothing is asked", () => {
    const s = setup({ commLive: true });
    s.c.hello();
    s.pass(10 * SILENT_MS);
    expect(s.hellos).toHaveLength(1);
    expect(s.armed()).toBe(false);
  });

  it("the kernel object disposed: lost", () => {
    const s = setup({ commLive: true });
    s.c.hello();
    s.kernel?.disposed.emit(undefined);
    expect(s.c.state).toBe("lost");
    expect(s.c.reason).toBe("stopped");
  });

  it("the link to the server back: hello again, so that what was lost comes again", () => {
    const s = setup({ commLive: true });
    s.c.hello();
    s.kernel?.connectionStatusChanged.emit("disconnected");
    expect(s.c.state).toBe("live"); // a dropped connection is not a dead kernel
    s.kernel?.connectionStatusChanged.emit("connecting");
    s.kernel?.connectionStatusChanged.emit("connected");
    expect(s.hellos).toHaveLength(2);
  });

  it("comm_live changing makes the view look again", () => {
    const s = setup({ commLive: false }); // a page load: restored before the kernel
    s.c.hello();
    s.pass(CHECK_MS);
    s.live.value = true; // the manager reconnected the model to the kernel
    s.c.linkChanged();
    expect(s.c.state).toBe("live");
    expect(s.hellos).toHaveLength(2);
  });

  it("dispose stops listening", () => {
    const s = setup();
    s.c.hello();
    s.c.dispose();
    expect(s.kernel?.statusChanged.slots.size).toBe(0);
    expect(s.kernel?.connectionStatusChanged.slots.size).toBe(0);
    expect(s.armed()).toBe(false);
    s.kernel?.setStatus("dead");
    expect(s.states).toEqual([]);
  });

  it("says why, and what to do", () => {
    expect(lostMessage("restarted")).toMatch(/^The kernel restarted: .*Run its cell again/);
    expect(lostMessage("stopped")).toMatch(/^The kernel stopped/);
    expect(lostMessage("no-answer")).toMatch(/^No kernel is running this chat/);
  });
});
