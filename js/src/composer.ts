/**
 * Attaching files to the next message (issue #21): a button that opens the
 * file picker, pasting an image (or a file) into the input box, dropping files
 * onto the widget; a tray of thumbnails, each with a remove button, until the
 * message is sent. Owns:
 *
 *   button.nbs-attach              "Attach": opens input.nbs-attach-input (hidden)
 *   div.nbs-attach-tray            the files to send (hidden when empty)
 *     div.nbs-attach-item          img.nbs-attach-img (an image) or span.nbs-attach-icon,
 *                                  span.nbs-attach-label (name and size),
 *                                  button.nbs-attach-remove ("Remove <name>")
 *   div.nbs-attach-notice          why a file was not taken (role=alert)
 *
 * The checks here are the widget's `attachment_policy` (the types its
 * source(s) take, count and size limits) so the user hears at once; the kernel
 * checks everything again, and a refusal from it gives the draft back
 * ({@link Composer.restore}). Images larger than the policy's side are
 * downscaled here before they are sent (so a big screenshot fits in one Send),
 * with `createImageBitmap` and a canvas, when the browser has them.
 *
 * File names and contents are hostile input: a name is text only; a thumbnail
 * is drawn into a canvas from the file (or, for an SVG, an `<img>` of a
 * `data:` URL: no script runs, and opened in a tab it has an opaque origin).
 *
 * Runs on the browser's main thread only.
 */
import { base64, humanBytes, keepKeys, kindOf, RASTER_TYPES, takes } from "./attachments";
import type { AttachmentPolicy, SendAttachment } from "./protocol";

/** What one Send carries: the descriptors (in the message) and the bytes (its buffers). */
export interface Draft {
  attachments: SendAttachment[];
  buffers: ArrayBuffer[];
  /** the files as the user gave them (to give the draft back after a refusal) */
  files: File[];
}

export interface ComposerOptions {
  /** the widget's policy now (null: an older kernel, nothing can be attached) */
  policy: () => AttachmentPolicy | null;
  /** the source's name, to say what it does not take */
  label: () => string;
  /** the tray changed (the Send button may follow) */
  onChange: () => void;
  signal: AbortSignal;
}

/** The longest side of a thumbnail in the tray, in CSS pixels. */
const THUMB = 96;
/** How long a notice stays (ms). */
const NOTICE_MS = 8000;

interface Item {
  file: File;
  el: HTMLElement;
}

/** The browser's own type of a file, or one found from its name. */
export function typeOf(file: { name: string; type: string }): string {
  if (file.type !== "") {
    return file.type.toLowerCase();
  }
  const ext = /\.([a-z0-9]+)$/i.exec(file.name)?.[1]?.toLowerCase() ?? "";
  const byExt: Record<string, string> = {
    md: "text/markdown",
    csv: "text/csv",
    tsv: "text/tab-separated-values",
    txt: "text/plain",
    log: "text/plain",
    py: "text/x-python",
    json: "application/json",
    ipynb: "application/x-ipynb+json",
    yaml: "application/yaml",
    yml: "application/yaml",
    toml: "application/toml",
    svg: "image/svg+xml",
    png: "image/png",
    jpg: "image/jpeg",
    jpeg: "image/jpeg",
    gif: "image/gif",
    webp: "image/webp",
    pdf: "application/pdf",
  };
  return byExt[ext] ?? "application/octet-stream";
}

/** The `accept` attribute of the file picker for a policy: what every source takes. */
export function acceptAttribute(policy: AttachmentPolicy | null): string {
  if (policy === null) {
    return "";
  }
  const anything = policy.accepts.every((list) => list.some((p) => p === "*/*" || p === "*"));
  if (anything) {
    return "";
  }
  const types = new Set<string>();
  for (const t of [...RASTER_TYPES, "image/svg+xml"]) {
    if (takes(policy.accepts, t)) {
      types.add(t);
    }
  }
  if (takes(policy.accepts, "text/plain")) {
    for (const t of [
      "text/*",
      ".md",
      ".csv",
      ".tsv",
      ".txt",
      ".log",
      ".py",
      ".json",
      ".ipynb",
      ".yaml",
      ".yml",
      ".toml",
      ".svg",
    ]) {
      types.add(t);
    }
  }
  for (const list of policy.accepts) {
    for (const p of list) {
      if (kindOf(p) === "file" && !p.endsWith("/*") && takes(policy.accepts, p)) {
        types.add(p);
      }
    }
  }
  return [...types].join(",");
}

export class Composer {
  readonly button: HTMLButtonElement;
  readonly input: HTMLInputElement;
  readonly tray: HTMLDivElement;
  readonly notice: HTMLDivElement;
  private items: Item[] = [];
  private pending = 0;
  private noticeTimer: number | null = null;
  private readonly doc: Document;

  constructor(
    doc: Document,
    /** where files may be dropped (the widget's root) */
    dropTarget: HTMLElement,
    /** where an image may be pasted (the input box) */
    pasteTarget: HTMLElement,
    private readonly options: ComposerOptions,
  ) {
    this.doc = doc;
    this.button = doc.createElement("button");
    this.button.type = "button";
    this.button.className = "nbs-attach";
    this.button.textContent = "Attach";
    this.button.setAttribute("aria-label", "Attach files (or paste an image, or drop files)");
    this.button.title = "Attach files: pick them, paste an image, or drop files onto the chat";
    this.input = doc.createElement("input");
    this.input.type = "file";
    this.input.multiple = true;
    this.input.className = "nbs-attach-input";
    this.input.hidden = true;
    this.input.tabIndex = -1;
    this.tray = doc.createElement("div");
    this.tray.className = "nbs-attach-tray";
    this.tray.setAttribute("role", "list");
    this.tray.setAttribute("aria-label", "Attachments of the next message");
    this.tray.hidden = true;
    this.notice = doc.createElement("div");
    this.notice.className = "nbs-attach-notice";
    this.notice.setAttribute("role", "alert");
    this.notice.hidden = true;

    const opts = { signal: options.signal };
    keepKeys(this.button, options.signal);
    this.button.addEventListener("click", () => this.pick(), opts);
    this.input.addEventListener(
      "change",
      () => {
        const files = [...(this.input.files ?? [])];
        this.input.value = ""; // the same file can be picked again
        void this.add(files);
      },
      opts,
    );
    pasteTarget.addEventListener("paste", (ev) => this.onPaste(ev as ClipboardEvent), opts);
    dropTarget.addEventListener("dragover", (ev) => this.onDragOver(ev as DragEvent), opts);
    dropTarget.addEventListener("dragleave", () => this.setDropping(dropTarget, false), opts);
    dropTarget.addEventListener(
      "drop",
      (ev) => {
        this.setDropping(dropTarget, false);
        this.onDrop(ev as DragEvent);
      },
      opts,
    );
    this.dropTarget = dropTarget;
  }

  private readonly dropTarget: HTMLElement;

  /** How many files will go with the next message. */
  get count(): number {
    return this.items.length;
  }

  /** Files still being read (the Send waits for them). */
  get busy(): boolean {
    return this.pending > 0;
  }

  /** Follows the policy: the picker's types, and whether anything can be attached. */
  update(): void {
    const policy = this.options.policy();
    const accept = acceptAttribute(policy);
    if (this.input.accept !== accept) {
      this.input.accept = accept;
    }
    const usable = policy !== null && policy.max_count > 0 && policy.accepts.length > 0;
    this.button.hidden = !usable;
  }

  /** Opens the file picker. */
  pick(): void {
    this.update();
    if (!this.button.hidden) {
      this.input.click();
    }
  }

  /**
   * Checks `files` against the policy and adds the ones it takes (images
   * downscaled to its side); says why for the others. Resolves when done.
   */
  async add(files: readonly File[]): Promise<void> {
    const policy = this.options.policy();
    if (files.length === 0) {
      return;
    }
    if (policy === null || policy.accepts.length === 0) {
      this.say("This widget takes no attachments.");
      return;
    }
    const refusals: string[] = [];
    for (const original of files) {
      if (this.items.length + this.pending >= policy.max_count) {
        refusals.push(`at most ${policy.max_count} attachments per message`);
        break;
      }
      const type = typeOf(original);
      const name = original.name || "pasted";
      if (!takes(policy.accepts, type)) {
        refusals.push(`${this.options.label()} takes no ${describeType(type)} (${name})`);
        continue;
      }
      this.pending++;
      try {
        const file = RASTER_TYPES.has(type)
          ? await downscale(this.doc, original, type, policy.max_image_side)
          : original;
        if (file.size > policy.max_bytes) {
          refusals.push(
            `${name} is ${humanBytes(file.size)}; the limit is ${humanBytes(policy.max_bytes)}`,
          );
          continue;
        }
        const total = this.items.reduce((n, i) => n + i.file.size, 0) + file.size;
        if (total > policy.max_message_bytes) {
          refusals.push(
            `the attachments would come to ${humanBytes(total)}; a message takes at most ${humanBytes(policy.max_message_bytes)}`,
          );
          continue;
        }
        const item = { file, el: await this.itemElement(file, type) };
        this.items.push(item);
        this.tray.appendChild(item.el);
      } catch {
        refusals.push(`${name} could not be read`);
      } finally {
        this.pending--;
      }
    }
    this.tray.hidden = this.items.length === 0;
    if (refusals.length > 0) {
      this.say(`Not attached: ${refusals.join("; ")}.`);
    }
    this.options.onChange();
  }

  /**
   * The files for the next Send (null: none), and an empty tray. The files stay
   * with the caller, to {@link restore} them if the kernel refuses.
   */
  async take(): Promise<Draft | null> {
    if (this.items.length === 0) {
      return null;
    }
    const files = this.items.map((i) => i.file);
    this.clear();
    const buffers = await Promise.all(files.map((f) => f.arrayBuffer()));
    return {
      attachments: files.map((f, i) => ({ name: f.name, size: buffers[i]?.byteLength ?? 0 })),
      buffers,
      files,
    };
  }

  /** Gives back the files of a refused Send, and says why. */
  restore(files: readonly File[], reason: string): void {
    this.clear();
    void this.add(files).then(() => this.say(`Not sent: ${reason}`));
  }

  /** Empties the tray. */
  clear(): void {
    this.items = [];
    this.tray.replaceChildren();
    this.tray.hidden = true;
    this.options.onChange();
  }

  /** Shows `text` in the notice for a while. */
  say(text: string): void {
    this.notice.textContent = text;
    this.notice.hidden = false;
    const win = this.doc.defaultView;
    if (win !== null) {
      if (this.noticeTimer !== null) {
        win.clearTimeout(this.noticeTimer);
      }
      this.noticeTimer = win.setTimeout(() => {
        this.noticeTimer = null;
        this.notice.hidden = true;
      }, NOTICE_MS);
    }
  }

  dispose(): void {
    const win = this.doc.defaultView;
    if (win !== null && this.noticeTimer !== null) {
      win.clearTimeout(this.noticeTimer);
    }
    this.items = [];
  }

  private onPaste(ev: ClipboardEvent): void {
    const files = [...(ev.clipboardData?.files ?? [])];
    if (files.length === 0) {
      return; // text: the input box takes it
    }
    ev.preventDefault();
    const named = files.map((f) =>
      f.name && f.name !== "image.png"
        ? f
        : new File([f], `pasted${extension(typeOf(f))}`, { type: f.type }),
    );
    void this.add(named);
  }

  private onDragOver(ev: DragEvent): void {
    if (!ev.dataTransfer?.types.includes("Files")) {
      return;
    }
    ev.preventDefault(); // allows the drop
    ev.stopPropagation(); // JupyterLab's own drop zones stay out of it
    ev.dataTransfer.dropEffect = "copy";
    this.setDropping(this.dropTarget, true);
  }

  private onDrop(ev: DragEvent): void {
    const files = [...(ev.dataTransfer?.files ?? [])];
    if (files.length === 0) {
      return;
    }
    ev.preventDefault();
    ev.stopPropagation();
    void this.add(files);
  }

  private setDropping(target: HTMLElement, on: boolean): void {
    target.classList.toggle("nbs-dropping", on);
  }

  private async itemElement(file: File, type: string): Promise<HTMLElement> {
    const doc = this.doc;
    const el = doc.createElement("div");
    el.className = "nbs-attach-item";
    el.setAttribute("role", "listitem");
    const label = `${file.name} (${humanBytes(file.size)})`;
    el.title = label;
    const thumb = await thumbnail(doc, file, type);
    if (thumb !== null) {
      const img = doc.createElement("img");
      img.className = "nbs-attach-img";
      img.alt = file.name;
      img.src = thumb;
      el.appendChild(img);
    } else {
      const icon = doc.createElement("span");
      icon.className = "nbs-attach-icon";
      icon.textContent = kindOf(type) === "text" ? "TXT" : "FILE";
      icon.setAttribute("aria-hidden", "true");
      el.appendChild(icon);
    }
    const text = doc.createElement("span");
    text.className = "nbs-attach-label";
    text.textContent = label;
    const remove = doc.createElement("button");
    remove.type = "button";
    remove.className = "nbs-attach-remove";
    remove.textContent = "×";
    remove.setAttribute("aria-label", `Remove ${file.name}`);
    remove.title = `Remove ${file.name}`;
    keepKeys(remove);
    remove.addEventListener("click", () => this.remove(el));
    el.append(text, remove);
    return el;
  }

  private remove(el: HTMLElement): void {
    const at = this.items.findIndex((i) => i.el === el);
    if (at < 0) {
      return;
    }
    const next = this.items[at + 1]?.el ?? this.items[at - 1]?.el ?? null;
    this.items.splice(at, 1);
    el.remove();
    this.tray.hidden = this.items.length === 0;
    // keep the keyboard in the tray: the next remove button, else the Attach button
    (next?.querySelector<HTMLButtonElement>(".nbs-attach-remove") ?? this.button).focus();
    this.options.onChange();
  }
}

function describeType(mime: string): string {
  const kind = kindOf(mime);
  if (kind === "image") {
    return "images";
  }
  if (mime === "image/svg+xml" || kind === "text") {
    return "text files";
  }
  return `${mime} files`;
}

function extension(mime: string): string {
  const ext: Record<string, string> = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
  };
  return ext[mime] ?? "";
}

/**
 * `file` at most `side` pixels on its longer side (re-encoded in its own type;
 * a GIF as PNG), or `file` itself when it is small enough or the browser cannot
 * draw it here (the kernel downscales it then).
 */
export async function downscale(
  doc: Document,
  file: File,
  type: string,
  side: number,
): Promise<File> {
  const win = doc.defaultView as (Window & typeof globalThis) | null;
  if (win === null || typeof win.createImageBitmap !== "function") {
    return file;
  }
  const bitmap = await win.createImageBitmap(file);
  try {
    const longest = Math.max(bitmap.width, bitmap.height);
    if (longest <= side) {
      return file;
    }
    const scale = side / longest;
    const canvas = doc.createElement("canvas");
    canvas.width = Math.max(1, Math.round(bitmap.width * scale));
    canvas.height = Math.max(1, Math.round(bitmap.height * scale));
    const ctx = canvas.getContext("2d");
    if (ctx === null) {
      return file;
    }
    ctx.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    const out = type === "image/jpeg" || type === "image/webp" ? type : "image/png";
    const blob = await new Promise<Blob | null>((resolve) => canvas.toBlob(resolve, out, 0.9));
    if (blob === null) {
      return file;
    }
    const name = out === type ? file.name : file.name.replace(/\.[^.]*$/, "") + extension(out);
    return new File([blob], name, { type: out });
  } finally {
    bitmap.close();
  }
}

/** A small `data:` URL picture of `file` (an image), or null (not an image, or not drawable). */
export async function thumbnail(doc: Document, file: File, type: string): Promise<string | null> {
  if (type === "image/svg+xml") {
    if (file.size > 256 * 1024) {
      return null;
    }
    const bytes = new Uint8Array(await file.arrayBuffer());
    return `data:image/svg+xml;base64,${base64(bytes)}`;
  }
  if (!RASTER_TYPES.has(type)) {
    return null;
  }
  const win = doc.defaultView as (Window & typeof globalThis) | null;
  if (win === null || typeof win.createImageBitmap !== "function") {
    return null;
  }
  const bitmap = await win.createImageBitmap(file);
  try {
    const scale = Math.min(1, THUMB / Math.max(bitmap.width, bitmap.height));
    const canvas = doc.createElement("canvas");
    canvas.width = Math.max(1, Math.round(bitmap.width * scale));
    canvas.height = Math.max(1, Math.round(bitmap.height * scale));
    const ctx = canvas.getContext("2d");
    if (ctx === null) {
      return null;
    }
    ctx.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    return canvas.toDataURL("image/png");
  } finally {
    bitmap.close();
  }
}
