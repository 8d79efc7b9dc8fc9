/**
 * The highlighting chunk: highlight.js core with a handful of languages
 * registered explicitly (not the 190-language bundle), loaded on the first
 * closed code block (see chunks.ts, highlight.ts). No auto-detection: a block
 * of an unknown or unnamed language stays plain. highlight.js escapes the
 * code it wraps; its output still passes the bundle's sanitizer. Imports
 * nothing of the bundle: a module of its own, built into
 * `nbstream/static/highlight.js`.
 */
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import diff from "highlight.js/lib/languages/diff";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const LANGUAGES = {
  bash,
  c,
  cpp,
  diff,
  javascript,
  json,
  markdown,
  python,
  rust,
  shell,
  sql,
  typescript,
  xml,
  yaml,
};

for (const [name, language] of Object.entries(LANGUAGES)) {
  hljs.registerLanguage(name, language);
}

/** The registered language names (aliases such as `py`, `js`, `html` work too). */
export function languages(): string[] {
  return hljs.listLanguages();
}

/** Highlighted HTML of `code` in `language`, or null for a language it does not know. */
export function highlight(code: string, language: string): string | null {
  if (hljs.getLanguage(language) === undefined) {
    return null;
  }
  return hljs.highlight(code, { language, ignoreIllegals: true }).value;
}
