/**
 * The entities chunk: HTML's table of named character references (`&hellip;`,
 * `&rarr;`, `&alpha;`: 2,125 names, about 23 KB minified), from the
 * `entities` package that markdown-it uses, loaded on the first rarer name a
 * message holds (see entities.ts, chunks.ts). Imports nothing of the bundle:
 * a module of its own, built into `nbstream/static/entities.js`. (It imports
 * `entities/decode`: the bare `entities` that markdown-it imports is the
 * bundle's entities.ts.)
 */
export { decodeHTMLStrict } from "entities/decode";
