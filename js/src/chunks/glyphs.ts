/**
 * The glyphs chunk: the fonts for a long history's characters, found before a
 * reader scrolls back to them (glyphs.ts; about 3 KB minified), loaded when a
 * list keeps placeholders whose text has characters beyond Latin (lazy.ts).
 * Imports nothing of the bundle at run time: a module of its own, built into
 * `nbstream/static/glyphs.js`.
 */
export { pageGlyphs } from "../glyphs";
