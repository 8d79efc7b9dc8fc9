/**
 * The math chunk: Temml, rendering TeX to MathML, loaded on the first formula
 * (see chunks.ts). Settings for untrusted input: `trust: false` (no \href,
 * \url, \class, \style, \includegraphics, …), sizes capped (`maxSize`),
 * macro expansion bounded (`maxExpand`), a fresh macro table per formula (a
 * `\gdef` in one reply cannot change another). What it returns still passes
 * the bundle's sanitizer. Imports nothing of the bundle: it is a module of its
 * own, built into `nbstream/static/math.js`.
 */
import temml from "temml";

/** Largest size a formula may ask for: [em, pt] (`\rule`, `\kern`, `\hspace`, …). */
export const MATH_MAX_SIZE: [number, number] = [20, 200];
/** Most macro expansions in one formula (`\def\a{\a\a}\a` stops here). */
export const MATH_MAX_EXPAND = 300;

/** MathML for `tex`, or null when it does not parse. */
export function renderTeX(tex: string, display: boolean): string | null {
  try {
    return temml.renderToString(tex, {
      displayMode: display,
      throwOnError: true,
      trust: false,
      strict: false,
      maxSize: MATH_MAX_SIZE,
      maxExpand: MATH_MAX_EXPAND,
      macros: {},
    });
  } catch {
    // a ParseError, or a TypeError on some truncated input (`x^`): show the source
    return null;
  }
}
