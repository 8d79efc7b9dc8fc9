/**
 * The sanitizer: every HTML fragment made from model output passes here
 * before it reaches the DOM (Markdown blocks, highlighted code).
 *
 * DOMPurify, one private instance per window (its hooks touch no one else),
 * with an allow-list that covers what markdown.ts emits and nothing more.
 * The policy, for hostile input in a JupyterLab page (which is not a sandbox):
 * - tags: text structure only (p, headings, lists, quotes, tables, code, em,
 *   strong, s, a, br, hr, span, div) and `button` for the placeholders and copy
 *   buttons markdown.ts emits; and the presentation MathML that math.ts
 *   (Temml) emits for formulas. No script, style, iframe, object, embed, form,
 *   input, svg, template, img, video, audio, meta, base, link; no MathML
 *   `maction`, `annotation-xml` or `semantics` (the ways MathML can carry HTML
 *   or behaviour).
 * - attributes: href (on `a` only), title, class (filtered), start, type,
 *   aria-label, and MathML's presentation attributes, whose lengths are
 *   bounded ({@link mathLengthOk}) and colours plain. No `style`, no
 *   `id`/`name` (DOM clobbering), no event handlers, and no `data-*`
 *   attribute: JupyterLab runs the command named in `data-commandlinker-command`
 *   on click (CVE-2026-42557), and DOMPurify keeps data attributes by default.
 * - classes: only `language-*`, `hljs*` and `nbs-*` survive, so model output
 *   cannot borrow JupyterLab's own classes.
 * - links: only absolute http:, https: and mailto: URLs stay live, and they
 *   open in a new tab with `rel="noopener noreferrer"`; any other href
 *   (javascript:, data:, vbscript:, relative URLs that would reach the Jupyter
 *   server) is removed and the link text stays as text.
 * - images: never loaded by themselves (an image URL can carry the
 *   conversation out): markdown.ts turns them into a placeholder, and `img` is
 *   not an allowed tag. The view loads one when the user clicks it (see
 *   {@link loadableImageUrl}).
 * Runs on the browser's main thread.
 */
import createDOMPurify, { type Config, type DOMPurify } from "dompurify";

const ALLOWED_TAGS = [
  "a",
  "blockquote",
  "br",
  "button",
  "code",
  "del",
  "div",
  "em",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "hr",
  "li",
  "ol",
  "p",
  "pre",
  "s",
  "span",
  "strong",
  "table",
  "tbody",
  "td",
  "th",
  "thead",
  "tr",
  "ul",
  // presentation MathML, as Temml writes it
  "math",
  "menclose",
  "merror",
  "mfrac",
  "mi",
  "mmultiscripts",
  "mn",
  "mo",
  "mover",
  "mpadded",
  "mphantom",
  "mprescripts",
  "mroot",
  "mrow",
  "ms",
  "mspace",
  "msqrt",
  "mstyle",
  "msub",
  "msubsup",
  "msup",
  "mtable",
  "mtd",
  "mtext",
  "mtr",
  "munder",
  "munderover",
  "none",
];

/** MathML presentation attributes kept (never href, never xlink, never actiontype). */
const MATH_ATTRS = [
  "accent",
  "accentunder",
  "columnalign",
  "columnlines",
  "columnspacing",
  "columnspan",
  "depth",
  "display",
  "displaystyle",
  "fence",
  "form",
  "framespacing",
  "height",
  "largeop",
  "linethickness",
  "lspace",
  "mathbackground",
  "mathcolor",
  "mathsize",
  "mathvariant",
  "maxsize",
  "minsize",
  "movablelimits",
  "notation",
  "rowalign",
  "rowlines",
  "rowspacing",
  "rowspan",
  "rspace",
  "scriptlevel",
  "separator",
  "stretchy",
  "symmetric",
  "voffset",
  "width",
];

/** MathML attributes that are lengths: kept only when {@link mathLengthOk}. */
const MATH_LENGTHS = new Set([
  "depth",
  "height",
  "lspace",
  "mathsize",
  "maxsize",
  "minsize",
  "rspace",
  "voffset",
  "width",
]);

/** ems per unit, to bound lengths (a percentage counts as a hundredth of an em). */
const EM_PER: Record<string, number> = {
  "": 1,
  em: 1,
  ex: 0.5,
  mu: 1 / 18,
  pt: 0.1,
  px: 1 / 16,
  "%": 0.01,
};

/** Largest length a formula may have in one attribute, in em. */
const MAX_MATH_EM = 25;

const LENGTH_RE = /^([+-]?(?:\d+\.?\d*|\.\d+))(em|ex|mu|pt|px|%)?$/;

/**
 * Whether a MathML length attribute may stay: a plain number with a unit, at
 * most {@link MAX_MATH_EM} em either way (Temml caps sizes too; this is the
 * net under it, so a formula cannot cover the page).
 */
export function mathLengthOk(value: string): boolean {
  const m = LENGTH_RE.exec(value.trim());
  if (m === null) {
    return false;
  }
  return Math.abs(Number(m[1]) * (EM_PER[m[2] ?? ""] as number)) <= MAX_MATH_EM;
}

/** A colour value: a hex colour or a colour name, nothing that could be a URL or CSS. */
const COLOR_RE = /^(?:#[0-9a-fA-F]{3,8}|[a-zA-Z]{1,20})$/;

const FORBID_TAGS = [
  "applet",
  "audio",
  "base",
  "canvas",
  "dialog",
  "embed",
  "form",
  "frame",
  "frameset",
  "iframe",
  "image",
  "img",
  "input",
  "link",
  "maction",
  "annotation",
  "annotation-xml",
  "semantics",
  "meta",
  "noscript",
  "object",
  "picture",
  "portal",
  "script",
  "select",
  "source",
  "style",
  "svg",
  "template",
  "textarea",
  "video",
];

const CONFIG: Config = {
  // `body` is where DOMPurify parses the input (a fresh document's body): never part of the
  // result (the result is its children, and the HTML parser makes no second body), but a root
  // tag it does not allow makes every call copy the whole input, as the content of a
  // disallowed element kept for its text, before walking the original.
  ALLOWED_TAGS: [...ALLOWED_TAGS, "body"],
  ALLOWED_ATTR: ["href", "title", "class", "start", "type", "aria-label", ...MATH_ATTRS],
  FORBID_TAGS,
  FORBID_ATTR: [
    "style",
    "id",
    "name",
    "src",
    "srcset",
    "action",
    "formaction",
    "target",
    "xlink:href",
    "actiontype",
  ],
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  ALLOW_UNKNOWN_PROTOCOLS: false,
  ALLOW_SELF_CLOSE_IN_ATTR: false,
  KEEP_CONTENT: true,
  RETURN_DOM_FRAGMENT: true,
};

/** The classes that may survive: ours, highlight.js's, and a code block's language. */
const CLASS_RE = /^(?:nbs-[a-z-]+|hljs(?:-[a-z_-]+)?|language-[A-Za-z0-9_+#.-]{1,40})$/;

const LINK_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

/** Whether `href` may stay a live link: an absolute http(s) or mailto URL. */
export function safeLinkUrl(href: string): boolean {
  try {
    return LINK_PROTOCOLS.has(new URL(href).protocol);
  } catch {
    return false; // relative, or not a URL
  }
}

const DATA_IMAGE_RE = /^data:image\/(?:png|jpeg|gif|webp)[;,]/i;

/**
 * The URL an image placeholder may load when the user clicks it, or null:
 * absolute http(s), or a raster `data:image/(png|jpeg|gif|webp)` (never SVG,
 * which can carry script). Loading happens only on that click.
 */
export function loadableImageUrl(src: string): string | null {
  const s = src.trim();
  if (DATA_IMAGE_RE.test(s)) {
    return s;
  }
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

function isElement(node: Node): node is Element {
  return node.nodeType === 1;
}

function createPurifier(win: Window): DOMPurify {
  const purify = createDOMPurify(win as unknown as Parameters<typeof createDOMPurify>[0]);
  purify.setConfig(CONFIG);
  purify.addHook("uponSanitizeAttribute", (_node, data) => {
    if (MATH_LENGTHS.has(data.attrName)) {
      data.keepAttr = mathLengthOk(data.attrValue);
    } else if (data.attrName === "mathcolor" || data.attrName === "mathbackground") {
      data.keepAttr = COLOR_RE.test(data.attrValue.trim());
    } else if (data.attrName === "class") {
      const kept = data.attrValue.split(/\s+/).filter((c) => CLASS_RE.test(c));
      if (kept.length > 0) {
        data.attrValue = kept.join(" ");
      } else {
        data.keepAttr = false;
      }
    }
  });
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (!isElement(node)) {
      return;
    }
    // Defence in depth: whatever the configuration says, no handler and no data attribute.
    for (const name of node.getAttributeNames()) {
      if (/^(?:on|data-)/i.test(name)) {
        node.removeAttribute(name);
      }
    }
    const tag = node.tagName;
    if (tag !== "A" && node.hasAttribute("href")) {
      node.removeAttribute("href"); // a link is an `a`, never a MathML element
    }
    if (tag === "A") {
      const href = node.getAttribute("href");
      if (href !== null && safeLinkUrl(href)) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      } else {
        node.removeAttribute("href");
      }
    } else if (tag === "BUTTON") {
      node.setAttribute("type", "button");
    }
  });
  return purify;
}

const purifiers = new WeakMap<Window, DOMPurify>();

/** The sanitizer of `doc`'s window (one per window), for {@link sanitize} and tests. */
export function purifierFor(doc: Document): DOMPurify {
  const win = doc.defaultView;
  if (win === null) {
    throw new Error("nbstream: cannot sanitize HTML for a document without a window");
  }
  let purify = purifiers.get(win);
  if (purify === undefined) {
    purify = createPurifier(win);
    purifiers.set(win, purify);
  }
  return purify;
}

/** `html` sanitized (see the module comment), as nodes ready to insert into `doc`. */
export function sanitize(doc: Document, html: string): DocumentFragment {
  if (html === "") {
    return doc.createDocumentFragment();
  }
  const fragment = purifierFor(doc).sanitize(html) as unknown as DocumentFragment | null;
  if (fragment === null) {
    // HTML that parses as a frameset document (`<div><frameset>`) has no body: nothing to show
    return doc.createDocumentFragment();
  }
  // The fragment belongs to DOMPurify's inert document; adopting moves it, no copy.
  return fragment.ownerDocument === doc ? fragment : doc.adoptNode(fragment);
}
