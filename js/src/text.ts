/**
 * Plain-text rendering of one message: owns the DOM inside `div.nbs-text`.
 *
 * Model output is untrusted, so it enters the DOM only as Text nodes, never
 * parsed as HTML. Appending costs what was appended, not what was there:
 * - the last Text node is extended while it is short, else a new one starts,
 *   so no append copies more than {@link NODE_MAX} characters of old text;
 * - the text is cut into block segments (`div.nbs-seg`) right after a newline
 *   once a segment holds {@link SEG_MAX} characters, so the browser lays out
 *   again only the last segment. With `white-space: pre-wrap`, a block that
 *   ends in a newline shows no extra line, so the cut is invisible.
 * Cuts fall only between deltas or right after a newline, never inside a
 * character (the kernel never splits one across deltas).
 */
import type { Sink } from "./incremental";

/** Extend the last Text node while it is shorter than this. */
export const NODE_MAX = 1024;
/** Start a new segment at the first newline once a segment is this long. */
export const SEG_MAX = 2048;

export class TextSink implements Sink {
  private seg: HTMLElement | null = null;
  private segLength = 0;
  private node: Text | null = null;

  constructor(private readonly el: HTMLElement) {}

  /** Shows `text` instead of whatever was shown. */
  replace(text: string): void {
    this.el.textContent = "";
    this.seg = null;
    this.node = null;
    this.segLength = 0;
    this.append(text);
  }

  /** Plain text has nothing left open. */
  finish(): void {}

  /** Shows `text` after what is shown. */
  append(text: string): void {
    let rest = text;
    while (rest.length > 0) {
      const seg = this.seg ?? this.openSegment();
      let cut = rest.length;
      const room = SEG_MAX - this.segLength;
      if (room <= rest.length) {
        const newline = rest.indexOf("\n", Math.max(0, room - 1));
        if (newline !== -1) {
          cut = newline + 1;
        }
      }
      const piece = cut === rest.length ? rest : rest.slice(0, cut);
      rest = cut === rest.length ? "" : rest.slice(cut);
      if (this.node !== null && this.node.length < NODE_MAX) {
        this.node.appendData(piece);
      } else {
        this.node = seg.ownerDocument.createTextNode(piece);
        seg.appendChild(this.node);
      }
      this.segLength += piece.length;
      if (this.segLength >= SEG_MAX && piece.endsWith("\n")) {
        this.seg = null;
        this.node = null;
      }
    }
  }

  private openSegment(): HTMLElement {
    const seg = this.el.ownerDocument.createElement("div");
    seg.className = "nbs-seg";
    this.el.appendChild(seg);
    this.seg = seg;
    this.segLength = 0;
    this.node = null;
    return seg;
  }
}
