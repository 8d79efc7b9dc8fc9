/**
 * The linkify chunk: linkify-it, which finds bare URLs and e-mail addresses
 * in text for markdown-it's `linkify` option (about 12 KB minified), loaded on
 * the first text that may hold one (see linkify.ts, chunks.ts). Imports
 * nothing of the bundle: a module of its own, built into
 * `nbstream/static/linkify.js`. (The bare `linkify-it` that markdown-it imports
 * is the bundle's linkify.ts; this import is the package itself: build.mjs and
 * vitest.config.ts swap only markdown-it's.)
 */
export { LinkifyIt } from "linkify-it";
