/**
 * HTML character references by name for markdown-it, which imports
 * `decodeHTMLStrict` from the `entities` package to decode `&name;` in text,
 * link destinations, titles and code info strings (numeric references it
 * decodes itself). That package's table of every name is 23 KB of the bundle
 * for what models seldom write, so the build resolves markdown-it's
 * `entities` to this module (build.mjs; vitest.config.ts for the tests) and
 * the table is a chunk (chunks/entities.ts), loaded on the first name not
 * among the few decoded here. Until it is there, such a name shows as written
 * (`&hellip;`), and the list renders the message again once it arrived
 * ({@link noteMiss}, as for math). Runs on the browser's main thread (called
 * by the Markdown parser).
 */
import { chunk, noteMiss } from "./chunks";

/** The names decoded without the chunk: those models write most. */
const COMMON = new Map([
  ["&amp;", "&"],
  ["&lt;", "<"],
  ["&gt;", ">"],
  ["&quot;", '"'],
  ["&apos;", "'"],
  ["&nbsp;", "\u00a0"],
]);

/**
 * `str` (`&name;`) decoded, or `str` itself where the name is none of HTML's
 * (or while the entities chunk is not loaded: it is asked for then).
 */
export function decodeHTMLStrict(str: string): string {
  const common = COMMON.get(str);
  if (common !== undefined) {
    return common;
  }
  const table = chunk("entities");
  if (table === null) {
    noteMiss("entities");
    return str;
  }
  return table.decodeHTMLStrict(str);
}
