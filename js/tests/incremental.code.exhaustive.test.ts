// @vitest-environment jsdom
// Exhaustive: the code block being written, built without the sanitizer and grown in
// place (incremental.ts `codeBlockNodes`), shows the DOM a one-shot sanitized render
// shows, at every prefix of the benchmark corpus's answers (benchmarks/corpus) that hold
// a code block. Half a minute on a loaded machine: `make test-fast` leaves it out.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { everyPrefix } from "./incremental_helpers";

const CORPUS_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "benchmarks",
  "corpus",
);
/** The benchmark corpus's answers that hold a code block: [name, text]. */
const ANSWERS = fs
  .readdirSync(CORPUS_DIR)
  .filter((f) => f.endsWith(".md"))
  .sort()
  .map((f) => [f, fs.readFileSync(path.join(CORPUS_DIR, f), "utf8")] as const)
  .filter(([, text]) => /^ {0,3}(?:```|~~~)/m.test(text));

describe("the code block being written: the sanitized DOM at every prefix", () => {
  it.each(ANSWERS)(
    "benchmarks/corpus/%s: every prefix",
    (_name, text) => {
      const sink = everyPrefix(text);
      // a fence in a list item (13-config-review's) is the list's: sanitized with it
      expect(sink.grownCode > 0).toBe(/^(?:```|~~~)/m.test(text));
    },
    120_000,
  );
});
