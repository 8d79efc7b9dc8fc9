/**
 * The Markdown of a conversation, as the view's "Copy all" button copies it.
 * Pure: no DOM. Mirrors `conversation_markdown` in `nbstream/conversation/transcript.py`
 * (what `ChatWidget.to_markdown()` returns); a fixture both test suites read
 * (tests/data/conversation_markdown.json) keeps them equal.
 *
 * Each message is a `## You` or `## Assistant` heading, a blank line and its
 * text (newlines at either end left out); a reply that did not end normally
 * adds a note; messages are separated by a blank line; the whole ends with a
 * newline.
 */

/** What the Markdown needs of a message. */
export interface TranscriptEntry {
  readonly role: string;
  readonly text: string;
  readonly status: string;
}

/** What a reply that did not end normally says after its text. */
export const STATUS_NOTES: Readonly<Record<string, string>> = {
  stopped: "*(stopped)*",
  error: "*(error)*",
  timeout: "*(timed out)*",
};

/** The Markdown of `entries` (in order); "" for none. */
export function conversationMarkdown(entries: Iterable<TranscriptEntry>): string {
  const blocks: string[] = [];
  for (const e of entries) {
    const parts = [e.role === "user" ? "## You" : "## Assistant"];
    const body = e.text.replace(/^\n+|\n+$/g, "");
    if (body !== "") {
      parts.push(body);
    }
    const note = e.role === "user" ? undefined : STATUS_NOTES[e.status];
    if (note !== undefined) {
      parts.push(note);
    }
    blocks.push(parts.join("\n\n"));
  }
  return blocks.length === 0 ? "" : `${blocks.join("\n\n")}\n`;
}
