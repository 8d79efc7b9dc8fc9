/**
 * Scrolling that respects the reader: owns the scroll position of one
 * scrolling list of messages (`div.nbs-messages`) and the visibility of its
 * "Jump to latest" button. The list (messages.ts) tells it when a frame was
 * painted ({@link ScrollFollower.settle}) and when the user asks to follow
 * again ({@link ScrollFollower.follow}); it listens to the list's scroll events.
 *
 * The rules:
 * - The list follows new text only while the reader is at the bottom (within
 *   {@link STICK_PX}). Scrolling up stops following, and "Jump to latest"
 *   shows; scrolling back to the bottom, or the button, follows again.
 * - A long reply is read from its beginning: while following, once the top of
 *   the reply being written (the `anchor`) would scroll above the top of the
 *   list's viewport, the list stops there instead, stops following, and shows
 *   "Jump to latest". It does that once per reply: a reader who then goes back
 *   to the bottom follows that reply to its end.
 * - Blocks out of sight skip layout (`content-visibility: auto` in widget.css)
 *   and count at their last laid-out height (never less: sized.ts), or at an
 *   estimated one until they come into view; when the list
 *   follows, the jump to the bottom brings some into view, they take their
 *   real height, and the bottom moves after the frame was painted. A
 *   ResizeObserver on the last messages ({@link WATCHED}) settles the list again when that happens,
 *   so a finished reply still ends at its bottom.
 * - Only the list's own `scrollTop` is ever set: nothing here scrolls the
 *   page (no `scrollIntoView`, no focus), so the notebook around the widget
 *   stays where the reader left it while a reply streams.
 * Runs on the browser's main thread (the frame loop's render, and scroll events).
 */

/** Within this many pixels of the bottom, the list follows new text. */
export const STICK_PX = 24;
/** Space left above a long reply's top when the list stops at it (px). */
export const ANCHOR_GAP_PX = 4;
/**
 * Messages watched for size changes: the last ones. Only they can move the
 * bottom while the list follows it (what is above the view keeps its height,
 * and lazy.ts settles the list after rendering anything there), and watching
 * a thousand messages would cost every frame.
 */
export const WATCHED = 16;

export class ScrollFollower {
  private following = true;
  /** the scrollTop the view last set, to tell the user's scrolling from ours */
  private setTop = 0;
  /** the reply the list already stopped at (once per reply) */
  private stoppedAt: Element | null = null;
  /** the reply being written at the last settle */
  private anchor: Element | null = null;
  /** watches the messages' sizes (null where the browser has no ResizeObserver) */
  private readonly resizes: ResizeObserver | null;
  private readonly observed = new Set<Element>();

  /**
   * `list`: the scrolling element; `jump`: the "Jump to latest" button, shown
   * while the list does not follow. Listens until `signal` aborts.
   */
  constructor(
    private readonly list: HTMLElement,
    private readonly jump: HTMLElement,
    signal: AbortSignal,
  ) {
    jump.hidden = true;
    jump.addEventListener("click", () => this.follow(), { signal });
    list.addEventListener("scroll", () => this.onScroll(), { signal, passive: true });
    const Observer = list.ownerDocument.defaultView?.ResizeObserver;
    this.resizes = Observer === undefined ? null : new Observer(() => this.onResize());
    signal.addEventListener("abort", () => this.resizes?.disconnect(), { once: true });
  }

  /** Whether the list follows new text. */
  get isFollowing(): boolean {
    return this.following;
  }

  /**
   * After a frame's paints: keep the list at the bottom if it follows, or at
   * the top of `anchor` (the reply being written, if any) once that reply is
   * taller than what the list shows.
   */
  settle(anchor: Element | null = null): void {
    this.anchor = anchor;
    this.observeChildren();
    if (!this.following) {
      return;
    }
    const l = this.list;
    const bottom = l.scrollHeight - l.clientHeight;
    if (anchor !== null && anchor !== this.stoppedAt && anchor.parentElement === l) {
      const top = Math.max(this.offsetOf(anchor) - ANCHOR_GAP_PX, 0);
      if (bottom > top) {
        this.stoppedAt = anchor;
        this.scrollTo(top);
        this.setFollowing(false);
        return;
      }
    }
    this.scrollTo(l.scrollHeight); // the browser stops at the bottom
  }

  /** Follow new text again, from now on (the button; a question just sent). */
  follow(): void {
    this.setFollowing(true);
    this.scrollTo(this.list.scrollHeight);
  }

  /**
   * Scrolls by `dy` px without counting as the reader's scrolling (lazy.ts:
   * what was above the view changed height; the reader's place holds).
   */
  shift(dy: number): void {
    this.scrollTo(this.list.scrollTop + dy);
  }

  /** A message changed size outside a paint (a block came into view and took its real height). */
  private onResize(): void {
    if (this.following) {
      this.settle(this.anchor);
    }
  }

  private observeChildren(): void {
    if (this.resizes === null) {
      return;
    }
    const last = new Set<Element>();
    for (
      let child = this.list.lastElementChild;
      child !== null && last.size < WATCHED;
      child = child.previousElementSibling
    ) {
      last.add(child);
    }
    for (const el of this.observed) {
      if (!last.has(el)) {
        this.observed.delete(el);
        this.resizes.unobserve(el);
      }
    }
    for (const el of last) {
      if (!this.observed.has(el)) {
        this.observed.add(el);
        this.resizes.observe(el);
      }
    }
  }

  /** Where `el` starts in the list's scrolled content (px from the content's top). */
  private offsetOf(el: Element): number {
    const l = this.list;
    return (
      el.getBoundingClientRect().top - l.getBoundingClientRect().top - l.clientTop + l.scrollTop
    );
  }

  private scrollTo(top: number): void {
    const l = this.list;
    if (Math.abs(l.scrollTop - top) >= 1) {
      l.scrollTop = top;
    }
    this.setTop = l.scrollTop;
  }

  private setFollowing(following: boolean): void {
    this.following = following;
    if (this.jump.hidden !== following) {
      this.jump.hidden = following;
    }
  }

  private onScroll(): void {
    const l = this.list;
    const atBottom = l.scrollHeight - l.scrollTop - l.clientHeight <= STICK_PX;
    // Where the view itself stopped (at a reply's top, maybe a few pixels
    // above the bottom) is not the reader coming back to the bottom.
    const moved = Math.abs(l.scrollTop - this.setTop) >= 1;
    if (atBottom && (this.following || moved)) {
      this.setFollowing(true);
    } else if (l.scrollTop < this.setTop - 1) {
      // The user moved up (the view only ever scrolls down, or stops): stop
      // following. Text that grew since the view last scrolled leaves
      // scrollTop as it was.
      this.setFollowing(false);
    }
    this.setTop = l.scrollTop;
  }
}
