/**
 * The tools chunk: the cards of a reply's tool calls and the later rounds of
 * the agent loop (toolcard.ts; about 6 KB minified), loaded when a reply gets
 * its first tool part: the kernel sends it then (runtime.py), and a view that
 * meets one first asks (messages.ts). It imports only types of the bundle at
 * run time: what it runs of the bundle's comes in its options' `kit`
 * (toolhost.ts), so nothing is bundled twice (build.mjs checks). Built into
 * `nbstream/static/tools.js`.
 */
export { ToolParts } from "../toolcard";
