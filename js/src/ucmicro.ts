/**
 * The Unicode classes markdown-it takes from the `uc.micro` package, as the
 * regular expressions' own Unicode property escapes: the build resolves
 * markdown-it's `uc.micro` to this module (build.mjs; vitest.config.ts for the
 * tests), 4.8 KB less script to parse at first render (the package spells
 * each class out as ranges of code units).
 *
 * markdown-it reads `P` and `S`: a character in either general category is a
 * Unicode punctuation character in CommonMark's sense (emphasis delimiters,
 * smart quotes), which is what `\p{P}` and `\p{S}` say; the others are
 * exported as markdown-it exports the package to plugins. They match exactly
 * what the package's tables do for every code point on the browsers and Node
 * this runs on (js/tests/ucmicro.test.ts compares them); a browser with a
 * newer Unicode knows the characters assigned since. The linkify chunk keeps
 * the package (linkify-it's link grammar is built from its sources).
 */

/** Any code point, or a lone surrogate (the package's expression). */
export const Any =
  /[\0-\uD7FF\uE000-\uFFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?:[^\uD800-\uDBFF]|^)[\uDC00-\uDFFF]/;
/** Control characters. */
export const Cc = /\p{Cc}/u;
/** Format characters. */
export const Cf = /\p{Cf}/u;
/** Punctuation. */
export const P = /\p{P}/u;
/** Symbols. */
export const S = /\p{S}/u;
/** Separators (spaces, line and paragraph separators). */
export const Z = /\p{Z}/u;
