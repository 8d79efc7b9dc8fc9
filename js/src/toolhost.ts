/**
 * The bundle's side of the tools chunk (chunks/tools.ts, toolcard.ts): what
 * the chunk runs of the bundle ({@link TOOL_KIT}: the bundle's own reasoning
 * block, Markdown sinks and sanitizer, handed over rather than bundled twice),
 * and what a reply's tool parts show until the chunk is there
 * ({@link paintPendingTools}).
 *
 * The kernel sends the chunk with a reply's first tool part and a view imports
 * it as soon as its runtime holds it (chunks.ts), so the cards usually render
 * at once; a view that meets a tool part first (a page whose runtime lacks the
 * chunk) asks for it, shows each call's name and state and the later rounds'
 * answers as plain text meanwhile, and renders the message again when it
 * arrives (messages.ts). Runs on the browser's main thread only.
 */
import type { Entry } from "./buffer";
import { FullSink, MarkdownSink, renderOnce } from "./incremental";
import { FINAL_STATUSES, FINAL_TOOL_STATES } from "./protocol";
import { ReasoningBlock } from "./reasoning";
import { sanitize } from "./sanitize";
import { toolStateLabel } from "./status";
import type { ToolKit } from "./toolcard";

/** What the tools chunk runs of the bundle. */
export const TOOL_KIT: ToolKit = {
  ReasoningBlock,
  FullSink,
  MarkdownSink,
  renderOnce,
  sanitize,
  toolStateLabel,
  FINAL_STATUSES,
  FINAL_TOOL_STATES,
};

/**
 * Fills `el` (a `div.nbs-tool-parts.nbs-tool-pending`) with what the tool parts
 * of `e` say, as text (names, arguments' and answers' text are hostile input:
 * only ever textContent here): a line per call, its name and state
 * (`div.nbs-tool-line`), and the answer text of later rounds (`div.nbs-tool-said`).
 */
export function paintPendingTools(el: HTMLElement, e: Readonly<Entry>): void {
  const doc = el.ownerDocument;
  const tools = e.tools ?? [];
  const lines: HTMLElement[] = [];
  const seen = new Set<number>();
  let said: HTMLElement | null = null;
  for (const run of e.toolTail ?? []) {
    if (run.type === "tool" && !seen.has(run.n)) {
      seen.add(run.n);
      const meta = tools[run.n];
      const line = doc.createElement("div");
      line.className = "nbs-tool-line";
      line.textContent = meta == null ? "tool call" : `${meta.name}: ${toolStateLabel(meta.state)}`;
      lines.push(line);
      said = null;
    } else if (run.type === "answer" && run.text !== "") {
      if (said === null) {
        said = doc.createElement("div");
        said.className = "nbs-tool-said";
        lines.push(said);
      }
      said.append(run.text);
    }
  }
  el.replaceChildren(...lines);
}
