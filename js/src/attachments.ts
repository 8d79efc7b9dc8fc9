/**
 * Attachments of user messages in the view (issue #21): their wire shapes,
 * checked; what the view may attach (the `attachment_policy` trait); and the
 * DOM of a sent message's attachments. The composer (picking, pasting and
 * dropping files before they are sent) is composer.ts.
 *
 *   div.nbs-attachments            in a user message, before its text
 *     button.nbs-att-thumb         an image (or SVG): img.nbs-att-img, a preview
 *                                  from the message's `m<i>.a<k>` key; a click
 *                                  shows it larger (aria-expanded)
 *     details.nbs-att-file         a text: summary.nbs-att-name (name, size,
 *                                  note), pre.nbs-att-excerpt (its first lines)
 *     span.nbs-att-file            any other file: its name, type and size
 *
 * Everything that comes from an attachment is hostile input: names, notes and
 * excerpts reach the DOM as text only (textContent); an image is an `<img>`
 * whose `src` is a `data:` URL made here from the preview's bytes, and only for
 * PNG, JPEG, WebP, GIF and SVG. An SVG in an `<img>` runs no script and loads
 * nothing; as a `data:` URL it has an opaque origin even when opened in a tab
 * of its own (a `blob:` URL would carry the notebook's origin there).
 *
 * Runs on the browser's main thread only.
 */

import type { AttachmentKind, AttachmentMeta, AttachmentPolicy, PreviewMeta } from "./protocol.gen";

/**
 * A preview as the view holds it: its meta (where the bytes are, declared in
 * protocol.py) and the bytes, filled in by the key reader (keys.ts) from the
 * model's binary key; absent while the key is not there.
 */
export interface ShownPreview extends PreviewMeta {
  data?: Uint8Array;
}

/** An attachment as the view shows it: its meta, its preview's bytes filled in. */
export interface ShownAttachment extends AttachmentMeta {
  preview?: ShownPreview;
}

/** The types shown as images (an SVG is drawn by `<img>`, never put in the DOM). */
const IMAGE_TYPES: ReadonlySet<string> = new Set([
  "image/png",
  "image/jpeg",
  "image/webp",
  "image/gif",
  "image/svg+xml",
]);
/** The types a model takes as images. */
export const RASTER_TYPES: ReadonlySet<string> = new Set([
  "image/png",
  "image/jpeg",
  "image/webp",
  "image/gif",
]);
const TEXTUAL = new Set([
  "application/json",
  "application/xml",
  "application/yaml",
  "application/x-yaml",
  "application/toml",
  "application/javascript",
  "application/x-python",
  "application/x-sh",
  "application/sql",
  "application/x-ipynb+json",
  "image/svg+xml",
]);
/** The longest text shown of a name or a note (characters). */
const MAX_SHOWN = 200;

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function count(x: unknown): number | null {
  return typeof x === "number" && Number.isInteger(x) && x >= 0 ? x : null;
}

/** How a model is given an attachment of type `mime` (mirrors core/attachment.py). */
export function kindOf(mime: string): AttachmentKind {
  const m = mime.toLowerCase();
  if (RASTER_TYPES.has(m)) {
    return "image";
  }
  if (m.startsWith("text/") || TEXTUAL.has(m) || m.endsWith("+json") || m.endsWith("+xml")) {
    return "text";
  }
  return "file";
}

/** Whether `mime` matches `pattern` ("image/png", "image/*" or "*\/*"). */
export function mimeMatches(mime: string, pattern: string): boolean {
  const m = mime.toLowerCase();
  const p = pattern.toLowerCase();
  if (p === "*" || p === "*/*") {
    return true;
  }
  return p.endsWith("/*") ? m.startsWith(p.slice(0, -1)) : m === p;
}

/** Whether every source (one list of patterns each) takes an attachment of type `mime`. */
export function takes(accepts: readonly (readonly string[])[], mime: string): boolean {
  const kind = kindOf(mime);
  return accepts.every((patterns) =>
    patterns.some((p) => mimeMatches(mime, p) || (kind === "text" && mimeMatches("text/plain", p))),
  );
}

/** `n` bytes for people: "812 B", "23.4 KB", "8.0 MB" (as the kernel writes them). */
export function humanBytes(n: number): string {
  if (n < 1024) {
    return `${n} B`;
  }
  let value = n / 1024;
  for (const unit of ["KB", "MB"]) {
    if (value < 1024) {
      return `${value.toFixed(1)} ${unit}`;
    }
    value /= 1024;
  }
  return `${value.toFixed(1)} GB`;
}

function shortText(x: unknown, limit = MAX_SHOWN): string {
  const s = typeof x === "string" ? x : "";
  return s.length > limit ? `${s.slice(0, limit - 1)}…` : s;
}

function toPreview(x: unknown): ShownPreview | null {
  if (!isRecord(x) || typeof x.key !== "string" || typeof x.mime !== "string") {
    return null;
  }
  const mime = x.mime.toLowerCase();
  if (!IMAGE_TYPES.has(mime) || !/^m\d+\.a\d+$/.test(x.key)) {
    return null;
  }
  return { key: x.key, mime, width: count(x.width) ?? 0, height: count(x.height) ?? 0 };
}

/** A meta's `attachments`, checked (malformed entries dropped); [] when absent. */
export function toAttachmentMetas(x: unknown): AttachmentMeta[] {
  if (!Array.isArray(x)) {
    return [];
  }
  const out: AttachmentMeta[] = [];
  for (const item of x.slice(0, 100)) {
    if (!isRecord(item) || typeof item.name !== "string" || typeof item.mime !== "string") {
      continue;
    }
    const kind = item.kind === "image" || item.kind === "text" ? item.kind : "file";
    const meta: AttachmentMeta = {
      name: shortText(item.name),
      mime: shortText(item.mime, 100),
      size: count(item.size) ?? 0,
      kind,
    };
    const w = count(item.width);
    const h = count(item.height);
    if (w !== null && h !== null) {
      meta.width = w;
      meta.height = h;
    }
    if (typeof item.note === "string" && item.note !== "") {
      meta.note = shortText(item.note);
    }
    if (typeof item.excerpt === "string") {
      meta.excerpt = item.excerpt.slice(0, 4000);
    }
    const preview = toPreview(item.preview);
    if (preview !== null) {
      meta.preview = preview;
    }
    out.push(meta);
  }
  return out;
}

/** The `attachment_policy` trait, checked; null when absent (an older kernel: no attaching). */
export function toPolicy(x: unknown): AttachmentPolicy | null {
  if (!isRecord(x) || !Array.isArray(x.accepts)) {
    return null;
  }
  const accepts = x.accepts
    .filter(Array.isArray)
    .map((list) => (list as unknown[]).filter((p): p is string => typeof p === "string"));
  const n = (v: unknown, fallback: number): number => count(v) ?? fallback;
  return {
    accepts,
    max_count: n(x.max_count, 0),
    max_bytes: n(x.max_bytes, 0),
    max_message_bytes: n(x.max_message_bytes, 0),
    max_chat_bytes: n(x.max_chat_bytes, 0),
    max_image_side: n(x.max_image_side, 2048),
  };
}

/** The bytes a binary state key holds (a DataView in JupyterLab; other views of bytes too). */
export function bytesOf(x: unknown): Uint8Array | null {
  if (x instanceof Uint8Array) {
    return x;
  }
  if (ArrayBuffer.isView(x)) {
    return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  }
  if (x instanceof ArrayBuffer) {
    return new Uint8Array(x);
  }
  return null;
}

/** Base64 of `bytes` (in chunks: `String.fromCharCode` takes a bounded number of arguments). */
export function base64(bytes: Uint8Array): string {
  let binary = "";
  const step = 0x8000;
  for (let i = 0; i < bytes.length; i += step) {
    binary += String.fromCharCode(...bytes.subarray(i, i + step));
  }
  return btoa(binary);
}

const urls = new WeakMap<Uint8Array, string>();

/** A `data:` URL of an image preview; null for a type that is not shown as an image. */
export function imageUrl(bytes: Uint8Array, mime: string): string | null {
  const m = mime.toLowerCase();
  if (!IMAGE_TYPES.has(m)) {
    return null;
  }
  let url = urls.get(bytes);
  if (url === undefined) {
    url = `data:${m};base64,${base64(bytes)}`;
    urls.set(bytes, url);
  }
  return url;
}

/**
 * Lets Enter and Space press `button` in JupyterLab: its notebook takes Enter
 * (enter edit mode) from any focused element in command mode, keeping the
 * button from being pressed; the key stays with the button.
 */
export function keepKeys(button: HTMLElement, signal?: AbortSignal): void {
  button.addEventListener(
    "keydown",
    (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.stopPropagation();
      }
    },
    signal === undefined ? {} : { signal },
  );
}

/** The one-line description of an attachment: its name, then its type, size and pixels. */
export function describe(a: AttachmentMeta): string {
  const parts = [a.mime];
  if (a.width !== undefined && a.height !== undefined) {
    parts.push(`${a.width}×${a.height} px`);
  }
  parts.push(humanBytes(a.size));
  if (a.note) {
    parts.push(a.note);
  }
  return `${a.name} (${parts.join(", ")})`;
}

/**
 * The attachments of sent messages. Each message's attachments are rendered
 * once (a user message never changes), into a `div.nbs-attachments` put before
 * its text; {@link MessageAttachments.paint} is called with every paint of a
 * message and does nothing once they are shown.
 */
export class MessageAttachments {
  private readonly shown = new WeakMap<HTMLElement, readonly ShownAttachment[]>();

  constructor(private readonly doc: Document) {}

  /** Shows `attachments` in the message element `el`, before `text`, once. */
  paint(
    el: HTMLElement,
    text: HTMLElement,
    attachments: readonly ShownAttachment[] | undefined,
  ): void {
    if (attachments === undefined || attachments.length === 0) {
      return;
    }
    if (this.shown.get(el) === attachments) {
      return;
    }
    this.shown.set(el, attachments);
    el.querySelector(":scope > .nbs-attachments")?.remove();
    text.before(this.render(attachments));
  }

  /** The DOM of a list of attachments (see the module comment). */
  render(attachments: readonly ShownAttachment[]): HTMLElement {
    const box = this.doc.createElement("div");
    box.className = "nbs-attachments";
    box.setAttribute("role", "group");
    box.setAttribute(
      "aria-label",
      attachments.length === 1 ? "1 attachment" : `${attachments.length} attachments`,
    );
    for (const a of attachments) {
      box.appendChild(this.item(a));
    }
    return box;
  }

  private item(a: ShownAttachment): HTMLElement {
    const label = describe(a);
    const preview = a.preview;
    const url = preview?.data !== undefined ? imageUrl(preview.data, preview.mime) : null;
    if (url !== null && preview !== undefined) {
      const b = this.doc.createElement("button");
      b.type = "button";
      b.className = "nbs-att-thumb";
      b.title = label;
      b.setAttribute("aria-label", `${label}: show larger`);
      b.setAttribute("aria-expanded", "false");
      const img = this.doc.createElement("img");
      img.className = "nbs-att-img";
      img.alt = a.name;
      img.decoding = "async";
      img.referrerPolicy = "no-referrer";
      if (preview.width > 0 && preview.height > 0) {
        img.width = preview.width;
        img.height = preview.height;
      }
      img.src = url;
      b.appendChild(img);
      keepKeys(b);
      b.addEventListener("click", () => {
        const open = b.getAttribute("aria-expanded") !== "true";
        b.setAttribute("aria-expanded", String(open));
        b.setAttribute("aria-label", `${label}: ${open ? "show smaller" : "show larger"}`);
      });
      return b;
    }
    if (a.excerpt !== undefined && a.excerpt !== "") {
      const details = this.doc.createElement("details");
      details.className = "nbs-att-file";
      const summary = this.doc.createElement("summary");
      summary.className = "nbs-att-name";
      summary.textContent = label;
      const pre = this.doc.createElement("pre");
      pre.className = "nbs-att-excerpt";
      pre.textContent = a.excerpt;
      details.append(summary, pre);
      return details;
    }
    const chip = this.doc.createElement("span");
    chip.className = "nbs-att-file nbs-att-name";
    chip.textContent = label;
    chip.title = label;
    return chip;
  }
}
