/**
 * Which characters may need a fallback font (every character beyond Latin,
 * U+0020–U+02FF, spaces aside): the one pattern that lazy.ts (which texts to
 * keep for the glyph warmer) and glyphs.ts (which characters to lay out, with
 * the `g` flag added) both test with. A module of its own so that the bundle
 * and the glyphs chunk each take it without taking the other. No state.
 */
export const MAYBE_FALLBACK = /[^ -\u02ff\s]/u;
