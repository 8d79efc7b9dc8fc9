/**
 * The Markdown parser of the view: one markdown-it instance and its rules.
 * Pure text in, HTML text out; no DOM. Everything it returns still goes
 * through the sanitizer (sanitize.ts) before it reaches the DOM.
 *
 * Choices, each for untrusted model output:
 * - `html: false`: raw HTML in the Markdown is escaped (shown as text), never
 *   parsed; a model that writes `<img onerror>` in prose shows that text.
 * - CommonMark plus GFM tables and strikethrough (markdown-it's default
 *   preset), `linkify` for bare URLs; no typographer (quotes stay as written).
 * - Images never load by themselves: the image rule emits a placeholder
 *   button that shows the alt text and the URL (see images in view.ts).
 * - Code blocks are wrapped with a bar (language label, copy button) whose
 *   labels are CSS-generated, so that the text of a message stays its text.
 * - Tables are wrapped in a horizontally scrolling box, and their column
 *   alignment becomes a class: no `style` attribute is ever emitted.
 * - Math (`$…$`, `$$…$$`, `\(…\)`, `\[…\]`) becomes MathML (math.ts); with
 *   `env.mathOpen` (a text still growing) an unclosed formula at the end shows
 *   its source, dimmed, instead.
 *
 * The renderer output of consecutive top-level block slices concatenates to
 * the output of the whole, which incremental.ts relies on.
 */
import MarkdownItCallable, {
  type Env,
  type MarkdownIt,
  type RendererRule,
  type Token,
} from "markdown-it";
import { mathPlugin } from "./math";

/** Reference definitions (`[label]: url "title"`), as markdown-it keeps them in its env. */
export type References = Record<string, { href: string; title: string }>;

/** The env of one parse: markdown-it adds the reference definitions it finds. */
export type MarkdownEnv = Env;

export type { Token };

/** A language name that may become a `language-*` class. */
export const LANG_RE = /^[A-Za-z0-9_+#.-]{1,40}$/;

const ALIGN = new Map([
  ["text-align:left", "nbs-align-left"],
  ["text-align:center", "nbs-align-center"],
  ["text-align:right", "nbs-align-right"],
]);

/**
 * The language of a code block's token as its `language-*` class and label
 * show it: the info string's first word when {@link LANG_RE} allows it, else "".
 */
export function codeLanguage(token: Token): string {
  if (token.type !== "fence" || !token.info) {
    return "";
  }
  const lang = markdown().utils.unescapeAll(token.info).trim().split(/\s+/)[0] ?? "";
  return LANG_RE.test(lang) ? lang : "";
}

function createParser(): MarkdownIt {
  const md = new MarkdownItCallable("default", {
    html: false,
    linkify: true,
    typographer: false,
    breaks: false,
  });
  const { escapeHtml } = md.utils;
  const rules = md.renderer.rules;

  const codeBlock = (content: string, lang: string): string => {
    const cls = lang !== "" ? ` class="language-${escapeHtml(lang)}"` : "";
    const label = lang !== "" ? ` title="${escapeHtml(lang)}"` : "";
    return (
      `<div class="nbs-code"><div class="nbs-code-bar"><span class="nbs-code-lang"${label}></span>` +
      `<button type="button" class="nbs-copy-code" aria-label="Copy code"></button></div>` +
      `<pre><code${cls}>${escapeHtml(content)}</code></pre></div>\n`
    );
  };

  rules.fence = (tokens, idx) => {
    const token = tokens[idx] as Token;
    return codeBlock(token.content, codeLanguage(token));
  };
  rules.code_block = (tokens, idx) => codeBlock((tokens[idx] as Token).content, "");

  rules.image = (tokens, idx, options, env, self) => {
    const token = tokens[idx] as Token;
    const src = String(token.attrGet("src") ?? "");
    const alt = self.renderInlineAsText(token.children ?? [], options, env);
    return (
      `<button type="button" class="nbs-img" title="Load this image from its site">` +
      `<span class="nbs-img-alt">${escapeHtml(alt || "image")}</span> ` +
      `<span class="nbs-img-url">${escapeHtml(src)}</span></button>`
    );
  };

  rules.table_open = () => '<div class="nbs-table"><table>\n';
  rules.table_close = () => "</table></div>\n";
  const cell: RendererRule = (tokens, idx, options, _env, self) => {
    const token = tokens[idx] as Token;
    const style = token.attrGet("style");
    if (typeof style === "string") {
      token.attrs = (token.attrs ?? []).filter((attr) => attr[0] !== "style");
      const cls = ALIGN.get(style.replace(/\s+/g, ""));
      if (cls !== undefined) {
        token.attrSet("class", cls);
      }
    }
    return self.renderToken(tokens, idx, options);
  };
  rules.th_open = cell;
  rules.td_open = cell;
  md.use(mathPlugin);
  return md;
}

let parser: MarkdownIt | null = null;

/** The shared markdown-it instance (built on first use). */
export function markdown(): MarkdownIt {
  parser ??= createParser();
  return parser;
}

/** Block tokens of `text`; adds the reference definitions it finds to `env`. */
export function parse(text: string, env: MarkdownEnv): Token[] {
  return markdown().parse(text, env);
}

/** HTML of block tokens (a whole parse, or a slice of whole top-level blocks). */
export function renderTokens(tokens: Token[], env: MarkdownEnv): string {
  const md = markdown();
  return md.renderer.render(tokens, md.options, env);
}

/** HTML of a whole Markdown text (not yet sanitized). */
export function renderHtml(text: string): string {
  const env: MarkdownEnv = {};
  return renderTokens(parse(text, env), env);
}
