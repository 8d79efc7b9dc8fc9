/**
 * What markdown-it asks of the `punycode.js` package, from the browser's own
 * URL parser: the build resolves markdown-it's `punycode.js` to this module
 * (build.mjs; vitest.config.ts for the tests), 2.3 KB less script to parse at
 * first render.
 *
 * markdown-it calls two functions, on a link's host name only:
 * - `toASCII`, for a link's `href` (`normalizeLink`): an internationalized
 *   name becomes its ASCII form (`bücher.example` → `xn--bcher-kva.example`),
 *   as the URL standard's host parser does it (the same table the browser
 *   uses to follow the link). A name it rejects throws, which markdown-it
 *   catches (the name is then left as written, percent-encoded).
 * - `toUnicode`, for the text of a link found in bare text
 *   (`normalizeLinkText`): the name is shown as written, its ASCII form left
 *   as it is. The package would show `xn--` names in Unicode; leaving them in
 *   ASCII is what browsers do for names that mix scripts, and never shows a
 *   look-alike of another site's name in model output.
 * Runs wherever markdown-it runs (the browser's main thread).
 */

/** The ASCII form of the host name `name` (throws where it is not a valid one). */
export function toASCII(name: string): string {
  if (/^[\x21-\x7e]*$/.test(name)) {
    return name; // ASCII already: as the package, unchanged (case included)
  }
  if (/[/?#@:\\\s]/.test(name)) {
    throw new RangeError("not a host name"); // would parse as more than a host
  }
  return new URL(`http://${name}/`).hostname;
}

/** The host name `name` as shown in a link's text: as written. */
export function toUnicode(name: string): string {
  return name;
}

export default { toASCII, toUnicode };
