/**
 * What the status line of a reply says: pure functions of a message and, while
 * it streams, of a rate measured in this view.
 *
 * Figures are never invented. A finished reply shows the kernel's own stats
 * (time to first token, pieces, pieces per second: a piece is what the
 * source emitted at once, a token for a local model, a word for a scripted
 * source; `tokens` / `tokens_per_s` are shown instead where a source reports
 * them). While it streams, the view only sees deltas, so it shows what it
 * can measure honestly: characters received per second, marked "≈".
 * While the model loads, it shows what the source last reported (the meta's
 * `progress`, see `nbstream/core/loading.py`): "preparing the model (first run,
 * once)… 42%".
 */
import type { Entry } from "./buffer";
import type { LoadingMeta } from "./protocol";

function finite(x: unknown): number | null {
  return typeof x === "number" && Number.isFinite(x) ? x : null;
}

function count(x: number): string {
  return Math.round(x).toLocaleString("en-US");
}

function rate(x: number): string {
  return x >= 100 ? count(x) : x.toFixed(1);
}

function duration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

function plural(n: number, word: string): string {
  return `${count(n)} ${Math.round(n) === 1 ? word : `${word}s`}`;
}

/** "TTFT 120 ms · 42 tokens · 19.9 tokens/s" from the kernel's stats (parts it has). */
export function statsSummary(stats: Record<string, unknown>): string {
  const parts: string[] = [];
  const ttft = finite(stats.ttft_ms);
  if (ttft !== null) {
    parts.push(`TTFT ${duration(ttft)}`);
  }
  const tokens = finite(stats.tokens);
  const unit = tokens !== null ? "token" : "piece";
  const n = tokens ?? finite(stats.pieces);
  if (n !== null) {
    parts.push(plural(n, unit));
  }
  const perS = tokens !== null ? finite(stats.tokens_per_s) : finite(stats.pieces_per_s);
  if (perS !== null) {
    parts.push(`${rate(perS)} ${unit}s/s`);
  }
  return parts.join(" · ");
}

/**
 * Why a finished reply ended, where that is news: "cut at 256 tokens" (the
 * token limit), "the stream ended without an end marker" (finish reason null:
 * a server's stream stopped with neither a finish reason nor `[DONE]`), the
 * source's own reason when unusual ("abort", "tool_calls"); "" otherwise.
 */
export function finishNote(e: Readonly<Entry>): string {
  const reason = e.finish_reason;
  if (reason === undefined || e.status !== "done") {
    return "";
  }
  if (reason === null) {
    return "the stream ended without an end marker";
  }
  if (reason === "max_tool_rounds") {
    return "stopped after the most tool rounds allowed (max_tool_rounds)";
  }
  if (reason === "length") {
    const usage = e.stats.usage as Record<string, unknown> | undefined;
    const n = finite(e.stats.tokens) ?? finite(usage?.completion_tokens);
    return n === null ? "cut at the token limit" : `cut at ${plural(n, "token")}`;
  }
  return reason === "stop" ? "" : `ended: ${reason}`;
}

/**
 * What a loading reply waits for: "preparing the model (first run, once)… 42%"
 * from the source's report (the percentage only where it said how far, floored:
 * 100% only once done), "loading model…" where it said nothing.
 */
export function loadingLabel(progress: Readonly<LoadingMeta> | undefined): string {
  if (progress === undefined) {
    return "loading model…";
  }
  const text = progress.text.replace(/(…|\.\.\.)$/, "");
  const f = progress.fraction;
  return f === null ? `${text}…` : `${text}… ${Math.floor(f * 100 + 1e-9)}%`;
}

const TOOL_STATE_LABELS: Record<string, string> = {
  streaming: "writing the call…",
  ready: "ready",
  awaiting_approval: "waiting for your approval",
  running: "running…",
  done: "done",
  error: "error",
  denied: "denied",
  cancelled: "cancelled",
};

/**
 * The label of a tool call's state ("waiting for your approval"...): its card's
 * (toolcard.ts, through the tools chunk's kit) and, until that chunk is there,
 * the plain line that stands for it (toolhost.ts).
 */
export function toolStateLabel(state: string): string {
  return TOOL_STATE_LABELS[state] ?? state;
}

/** The human label for a message's status ("" where none is shown). */
export function statusLabel(e: Readonly<Entry>, charsPerS: number | null = null): string {
  const status: string = e.status;
  if (e.role === "user" && status === "done") {
    return "";
  }
  switch (status) {
    case "queued":
      return "queued";
    case "loading":
      return loadingLabel(e.progress);
    case "running": {
      // the tool loop (#20): what the reply waits for, when it waits for its tools
      const tools = e.tools ?? [];
      if (tools.some((t) => t?.state === "awaiting_approval")) {
        return "waiting for your approval";
      }
      if (tools.some((t) => t?.state === "running" || t?.state === "ready")) {
        return "running tools…";
      }
      if (e.text.length === 0) {
        return e.reasoning === "" ? "waiting for first token…" : "thinking…";
      }
      return charsPerS === null ? "streaming" : `streaming · ≈ ${rate(charsPerS)} chars/s`;
    }
    case "done":
    case "stopped": {
      if (e.role !== "assistant") {
        return status === "done" ? "" : status;
      }
      const head = [status, finishNote(e)].filter((x) => x !== "").join(" · ");
      const summary = statsSummary(e.stats);
      return summary === "" ? head : `${head} · ${summary}`;
    }
    case "error":
      return e.error ? `error: ${e.error}` : "error";
    case "timeout":
      return e.error ? `timeout: ${e.error}` : "timeout";
    default:
      return status;
  }
}

/** How a generation option's value reads: numbers as they are, text quoted. */
function optionValue(x: unknown): string {
  if (typeof x === "number" || typeof x === "boolean") {
    return String(x);
  }
  try {
    return JSON.stringify(x) ?? String(x);
  } catch {
    return String(x);
  }
}

/**
 * The generation options in force, as the kernel recorded them for this reply:
 * "temperature 0.2 · max_new_tokens 200 · stop ["\n\n"]"; "" when none are known.
 */
export function optionsSummary(options: Readonly<Record<string, unknown>> | undefined): string {
  if (options === undefined) {
    return "";
  }
  return Object.entries(options)
    .map(([k, v]) => `${k} ${optionValue(v)}`)
    .join(" · ");
}

/** What the status line says on hover: the options in force, and what the figures mean. */
export function statusTitle(e: Readonly<Entry>): string {
  if (e.role !== "assistant") {
    return "";
  }
  const lines: string[] = [];
  const options = optionsSummary(e.options);
  if (options !== "") {
    lines.push(`Generation options: ${options}`);
  }
  if (e.status === "done" || e.status === "stopped") {
    lines.push(
      "TTFT: time to first token. A piece is what the source emitted at once (a token for a local model).",
    );
  }
  return lines.join("\n");
}

/** Whether the status line shows the "working" indicator. */
export function isWaiting(e: Readonly<Entry>): boolean {
  return (
    e.status === "queued" ||
    e.status === "loading" ||
    (e.status === "running" && e.text === "" && e.reasoning === "")
  );
}

/**
 * Characters per second received by one message, over the last
 * {@link LiveRate.WINDOW_MS} (or since its first delta, if sooner).
 */
export class LiveRate {
  static readonly WINDOW_MS = 2000;
  /** (time, cumulative characters) per frame that received text */
  private readonly samples: [number, number][] = [];
  private total = 0;

  add(t: number, chars: number): void {
    this.total += chars;
    this.samples.push([t, this.total]);
    while (
      this.samples.length > 2 &&
      t - (this.samples[1] as [number, number])[0] > LiveRate.WINDOW_MS
    ) {
      this.samples.shift();
    }
  }

  /** chars/s, or null until two samples span at least 250 ms */
  perSecond(): number | null {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (first === undefined || last === undefined || last[0] - first[0] < 250) {
      return null;
    }
    return ((last[1] - first[1]) * 1000) / (last[0] - first[0]);
  }
}
