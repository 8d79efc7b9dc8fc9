/**
 * Whether this view still talks to a live kernel.
 *
 * A view can outlive what it shows: the kernel restarts or dies mid-answer, or
 * a notebook saved mid-stream is reopened with a new kernel that never knew
 * this widget. Without a kernel nothing will ever change again, so the view
 * must stop saying "streaming", keep what it shows, and say that the chat is
 * not connected (view.ts shows it; the messages keep their text).
 *
 * How the view knows, from the front end's own signals and messages:
 *
 * - The widget model's `comm_live` (jupyter-widgets: whether the model has a
 *   comm to a kernel that knows it; the view finds its model through the
 *   `_model_ref` trait, its model id). True means **live**, even when the
 *   kernel cannot hear this page (JupyterLab can route a reloaded page's comm
 *   messages to a subshell the kernel does not know: updates still arrive).
 *   Its `comm_live_update` event makes the view look again.
 * - Every view says hello when it renders (and again whenever the link may have
 *   changed); the kernel answers every hello with a `welcome` (the pump sends it
 *   after the state it brings; `WelcomeMsg` in protocol.py). A welcome, or any
 *   state update from the kernel, means **live**: so in front ends whose models
 *   have no `comm_live` (marimo), the answer alone decides.
 * - Where the front end has a kernel object (JupyterLab, Notebook 7, Voilà:
 *   `widget_manager.kernel`), its status says more: `restarting`,
 *   `autorestarting`, `dead` or its disposal mean **lost** at once (measured in
 *   JupyterLab 4.6: a restart from the page triggers `restarting` and the
 *   model's `comm_live_update` within milliseconds; a shutdown `dead`), and so
 *   does `starting`: a new kernel process, which never knew this widget (a
 *   restart through the server's REST API shows the page only that). Its connection
 *   status coming back to `connected` (the browser's link to the server dropped
 *   and came back) makes the view say hello again, so that what was lost
 *   meanwhile (a final meta) is sent again.
 * - With `comm_live` false (or unknown), a hello that stays unanswered while that
 *   kernel is idle for
 *   {@link UNANSWERED_IDLE_MS} means **lost** (a reopened notebook: the new
 *   kernel does not know the widget). A busy kernel is given all the time it
 *   needs (a cell may run for hours; comm messages wait for it). With no kernel
 *   object at all, the hello must be answered within {@link UNANSWERED_MS}
 *   (marimo answers at once; a static page, such as nbconvert's HTML, never).
 *
 * - A kernel shut down from elsewhere (another tab, the REST API) tells the page
 *   nothing at all (measured). So while a message is live, a kernel silent for
 *   {@link SILENT_MS} is asked again (a hello; the pump answers at once, whatever
 *   the model is doing), and the rule above decides.
 *
 * - The page unloading (`pagehide`: its browser tab closed, a Notebook 7 page
 *   left, or a reload) says a page's bye while the socket is still open (the
 *   kernel waits longer for such a view: a reload's views come back; presence.py).
 *   A page restored from the back-forward cache (`pageshow`, persisted) says hello.
 *
 * A later welcome makes the view live again (a false alarm costs nothing).
 * Runs on the browser's main thread; the timer is injected for tests.
 */

/** `connecting`: hello sent, no answer yet; `live`: answered; `lost`: no kernel. */
export type ConnectionState = "connecting" | "live" | "lost";

/** Why a view is not connected (what it tells the user). */
export type LostReason = "restarted" | "stopped" | "no-answer";

/** An idle kernel that leaves a hello unanswered this long: not connected, ms. */
export const UNANSWERED_IDLE_MS = 2500;
/** With no kernel to watch: a hello unanswered this long means not connected, ms. */
export const UNANSWERED_MS = 5000;
/** How often an unanswered hello is looked at, ms. */
export const CHECK_MS = 250;
/** A message is live and the kernel said nothing for this long: ask it, ms. */
export const SILENT_MS = 3000;
/** How long after an unanswered hello a kernel's info reply still says it restarted, ms. */
export const KERNEL_INFO_MS = 15_000;

/** A `@lumino/signaling` signal, as far as this module uses one. */
export interface SignalLike<T> {
  connect(slot: (sender: unknown, value: T) => void): boolean;
  disconnect(slot: (sender: unknown, value: T) => void): boolean;
}

/** What a front end's kernel connection offers (JupyterLab's `Kernel.IKernelConnection`). */
export interface KernelLike {
  readonly status?: string;
  readonly statusChanged?: SignalLike<string>;
  readonly connectionStatusChanged?: SignalLike<string>;
  readonly disposed?: SignalLike<undefined>;
  /** asks the kernel for its info: a reply means a kernel is running there */
  requestKernelInfo?(): Promise<unknown>;
}

export interface Interval {
  set(callback: () => void, ms: number): number;
  clear(handle: number): void;
}

export interface ConnectionDeps {
  /** sends a hello to the kernel */
  hello(): void;
  /** the state changed (`reason` set when lost) */
  onChange(state: ConnectionState, reason: LostReason | null): void;
  /** the front end's kernel, if it has one */
  kernel: KernelLike | null;
  /**
   * The front end's session of the document this view is in, if it has one
   * (JupyterLab's and Notebook 7's notebook `sessionContext`): it is disposed
   * when the notebook closes, before the page's kernel connection goes.
   */
  session?: { readonly disposed?: SignalLike<undefined> } | null;
  /**
   * Tells the kernel this view is leaving (a bye): called when the view's notebook
   * closes, while the kernel can still be told (see {@link Connection}), and with
   * `"page"` when the whole page unloads (closed or reloading).
   */
  goodbye?(leaving: "view" | "page"): void;
  /** the view's window, whose `pagehide` and `pageshow` say the page leaves and comes back */
  page?: PageLike | null;
  /** the widget model's `comm_live`; null where the front end does not say */
  commLive(): boolean | null;
  /** a monotonic clock, ms */
  now(): number;
  /** runs the periodic check; `setInterval` by default */
  interval?: Interval;
}

/** the part of a `Window` the connection listens to */
export interface PageLike {
  addEventListener(
    type: "pagehide" | "pageshow",
    listener: (e: { persisted?: boolean }) => void,
  ): void;
  removeEventListener(
    type: "pagehide" | "pageshow",
    listener: (e: { persisted?: boolean }) => void,
  ): void;
}

const DEAD = new Set(["restarting", "autorestarting", "dead", "terminating"]);

function reasonOf(status: string): LostReason {
  return status === "dead" || status === "terminating" ? "stopped" : "restarted";
}

const globalInterval: Interval = {
  set: (cb, ms) => globalThis.setInterval(cb, ms) as unknown as number,
  clear: (h) => globalThis.clearInterval(h),
};

export class Connection {
  private stateNow: ConnectionState = "connecting";
  private reasonNow: LostReason | null = null;
  /** a hello is out, unanswered */
  private awaiting = false;
  /** while awaiting: the idle time (or, with no kernel, the time) since the hello */
  private waited = 0;
  /** when the kernel was last heard from (a welcome, a state update), ms */
  private lastHeard: number;
  /** a message is live: silence from the kernel is worth a question */
  private active = false;
  /** the kernel heard this widget once: a new kernel process later is a restart */
  private wasLive = false;
  private lastCheck: number;
  private timer: number | null = null;
  private disposed = false;
  private readonly interval: Interval;

  constructor(private readonly deps: ConnectionDeps) {
    this.interval = deps.interval ?? globalInterval;
    this.lastHeard = this.lastCheck = deps.now();
    const k = deps.kernel;
    k?.statusChanged?.connect(this.onStatus);
    k?.connectionStatusChanged?.connect(this.onLink);
    k?.disposed?.connect(this.onDisposed);
    deps.session?.disposed?.connect(this.onClosing);
    deps.page?.addEventListener("pagehide", this.onPageHide);
    deps.page?.addEventListener("pageshow", this.onPageShow);
  }

  get state(): ConnectionState {
    return this.stateNow;
  }

  get reason(): LostReason | null {
    return this.reasonNow;
  }

  /**
   * Says hello (at render, and whenever the link may have changed). A model whose
   * comm is live needs no answer; otherwise the answer is awaited.
   */
  hello(): void {
    if (this.disposed) {
      return;
    }
    this.deps.hello();
    if (this.deps.commLive() === true && !this.kernelDead()) {
      this.heard();
    } else {
      this.await();
    }
  }

  /**
   * The kernel answered a hello, or sent state: it hears this widget. (Not after
   * its kernel restarted or stopped: that widget's comm is gone for good.)
   */
  heard(): void {
    this.lastHeard = this.deps.now();
    if (this.gone()) {
      return;
    }
    this.wasLive = true;
    this.awaiting = false;
    this.rearm();
    this.set("live", null);
  }

  /**
   * Whether a message is live (queued, loading, running). While one is, a kernel
   * silent for {@link SILENT_MS} is asked whether it is still there (a kernel shut
   * down from elsewhere tells this page nothing).
   */
  setActive(active: boolean): void {
    if (this.active !== active) {
      this.active = active;
      this.lastHeard = Math.max(this.lastHeard, this.deps.now() - SILENT_MS / 2);
      this.rearm();
    }
  }

  /**
   * The front end says the model's link to its kernel changed (`comm_live_update`):
   * after a restart it dies; after a page load it may come alive. Ask again.
   */
  linkChanged(): void {
    this.hello();
  }

  dispose(): void {
    this.disposed = true;
    this.awaiting = false;
    this.active = false;
    this.rearm();
    const k = this.deps.kernel;
    k?.statusChanged?.disconnect(this.onStatus);
    k?.connectionStatusChanged?.disconnect(this.onLink);
    k?.disposed?.disconnect(this.onDisposed);
    this.deps.session?.disposed?.disconnect(this.onClosing);
    this.deps.page?.removeEventListener("pagehide", this.onPageHide);
    this.deps.page?.removeEventListener("pageshow", this.onPageShow);
  }

  /** its kernel restarted or stopped: nothing will ever bring this widget back */
  private gone(): boolean {
    return this.reasonNow === "restarted" || this.reasonNow === "stopped";
  }

  private kernelDead(): boolean {
    const status = this.deps.kernel?.status;
    return status !== undefined && DEAD.has(status);
  }

  private await(): void {
    if (this.gone()) {
      return; // a hello could only reach a kernel that never knew this widget
    }
    if (!this.awaiting) {
      this.awaiting = true;
      this.waited = 0;
      this.lastCheck = this.deps.now();
    }
    this.rearm();
  }

  private readonly onStatus = (_: unknown, status: string): void => {
    if (DEAD.has(status)) {
      this.lose(reasonOf(status));
    } else if (status === "starting") {
      // a new kernel process: it never knew this widget (a restart from elsewhere, or
      // the kernel of a reopened notebook). Restarted, if the old one ever heard it
      // (its silence may have been noticed first, as no answer)
      this.lose(this.wasLive ? "restarted" : "no-answer");
    }
  };

  private readonly onLink = (_: unknown, status: string): void => {
    if (status === "connected" && !this.gone()) {
      this.hello(); // the link came back: catch up on what it may have lost
    }
  };

  private readonly onDisposed = (): void => {
    this.lose("stopped");
  };

  /**
   * The notebook closes (its tab closed): say bye now. JupyterLab disposes the
   * page's kernel connection right after the session, and the views after that,
   * when nothing can be sent any more (measured: a send from the kernel's disposal
   * or the view's removal throws "Cannot send"). So a reply of a chat whose
   * notebook was closed would run to its end for nobody.
   */
  private readonly onClosing = (): void => {
    if (!this.disposed) {
      try {
        this.deps.goodbye?.("view");
      } catch {
        // no connection left to say it on
      }
    }
  };

  /**
   * The page unloads (its tab closed, or a reload: the same event). Its socket is
   * still open here, and what is sent now reaches the kernel (measured: tests/browser/
   * page_closed.mjs); the kernel gives such a view longer to come back (presence.py).
   */
  private readonly onPageHide = (): void => {
    if (!this.disposed && !this.gone()) {
      try {
        this.deps.goodbye?.("page");
      } catch {
        // no connection left to say it on
      }
    }
  };

  /** A page restored from the back-forward cache: its views are on it again. */
  private readonly onPageShow = (e: { persisted?: boolean }): void => {
    if (e.persisted === true && !this.gone()) {
      this.hello();
    }
  };

  private lose(reason: LostReason): void {
    this.awaiting = false;
    this.set("lost", reason);
    this.rearm();
  }

  private set(state: ConnectionState, reason: LostReason | null): void {
    if (this.disposed || (state === this.stateNow && reason === this.reasonNow)) {
      return;
    }
    this.stateNow = state;
    this.reasonNow = reason;
    this.deps.onChange(state, reason);
  }

  /** The interval runs while an answer is awaited or a message is live (and the kernel may come back). */
  private rearm(): void {
    const needed = !this.disposed && !this.gone() && (this.awaiting || this.active);
    if (needed && this.timer === null) {
      this.timer = this.interval.set(this.check, CHECK_MS);
    } else if (!needed && this.timer !== null) {
      this.interval.clear(this.timer);
      this.timer = null;
    }
  }

  private readonly check = (): void => {
    const t = this.deps.now();
    const elapsed = t - this.lastCheck;
    this.lastCheck = t;
    const k = this.deps.kernel;
    const status = k?.status;
    if (status !== undefined && DEAD.has(status)) {
      this.lose(reasonOf(status));
      return;
    }
    if (!this.awaiting) {
      if (this.active && this.stateNow !== "lost" && t - this.lastHeard >= SILENT_MS) {
        this.deps.hello(); // silence mid-answer: is the kernel still there?
        this.await();
      }
      return;
    }
    if (this.stateNow !== "live" && this.deps.commLive() === true) {
      this.heard(); // the front end connected the model meanwhile (a page load)
      return;
    }
    if (k === null || status === undefined) {
      this.waited += elapsed;
      if (this.waited >= UNANSWERED_MS) {
        this.lose("no-answer");
      }
      return;
    }
    if (status === "idle") {
      this.waited += elapsed; // a busy kernel reads comm messages when its cell ends
      if (this.waited >= UNANSWERED_IDLE_MS) {
        this.lose("no-answer");
        this.askKernel();
      }
    }
  };

  /**
   * A kernel that heard this widget once does not answer its hello: restarted, or
   * shut down? A restart reaches the page only as the new process's `starting`, which
   * it can miss (the server links the page to the new kernel after that status went
   * out). A kernel that answers for its info is running, and does not know this
   * widget: another process, so a restart. No reply: no kernel is running it.
   */
  private askKernel(): void {
    const kernel = this.deps.kernel;
    if (!this.wasLive || typeof kernel?.requestKernelInfo !== "function") {
      return;
    }
    const asked = this.deps.now();
    kernel.requestKernelInfo().then(
      (reply) => {
        const inTime = this.deps.now() - asked <= KERNEL_INFO_MS;
        if (reply !== undefined && inTime && this.reasonNow === "no-answer") {
          this.lose("restarted");
        }
      },
      () => undefined, // no kernel to ask: it stays "no answer"
    );
  }
}

/** What the view says when a chat is not connected. */
export function lostMessage(reason: LostReason | null): string {
  const why =
    reason === "restarted"
      ? "The kernel restarted"
      : reason === "stopped"
        ? "The kernel stopped"
        : "No kernel is running this chat";
  return `${why}: this chat is not connected, and shows what it received. Run its cell again for a live chat.`;
}
