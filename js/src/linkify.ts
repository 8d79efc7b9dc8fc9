/**
 * Bare URLs and e-mail addresses for markdown-it (its `linkify` option), with
 * linkify-it loaded on first use. markdown-it builds its linkifier with
 * `new LinkifyIt()` from the `linkify-it` package, 12 KB of the bundle (its
 * Unicode tables and link grammar) for what only some messages hold; the build
 * resolves markdown-it's `linkify-it` to this module (build.mjs; vitest.config.ts
 * for the tests) and linkify-it itself is a chunk (chunks/linkify.ts).
 *
 * {@link LinkifyIt} answers markdown-it's three calls. Text that cannot hold a
 * link ({@link MAYBE_LINK} finds none of linkify-it's schemes, `//` or an
 * `@` after a character an address name ends with: everything linkify-it
 * looks for with markdown-it's options) needs no chunk. Text that may hold one
 * goes to linkify-it once it is loaded; until then it stays text (the chunk
 * is asked for) and the renderer notes a miss ({@link noteMiss}), so the list
 * renders the message again once the chunk arrived, as for math and `&name;`.
 * The kernel sends the chunk by itself with the text that may need it
 * (`needed_chunks` in nbstream/widgets/runtime.py, the same pattern), so a
 * view seldom has to ask. Runs on the browser's main thread (called by the
 * Markdown parser).
 */
import type { Match } from "linkify-it";
import { chunk, hasChunk, type LinkifyChunk, type LinkifyEngine, noteMiss } from "./chunks";

/**
 * What linkify-it (markdown-it's defaults: schemes `http:`, `https:`, `ftp:`,
 * `mailto:` and `//`, fuzzy e-mail, no fuzzy links) can find a link in: text
 * with none of these has none. Mirrored by `_LINK` in nbstream/widgets/runtime.py.
 */
export const MAYBE_LINK = /(?:https?|ftp|mailto):|\/\/|[-!#$%&'*+/=?^_`{|}~a-zA-Z0-9]@/i;

/** The engine made from the chunk loaded (one per page: its regexps are built once). */
let made: { mod: LinkifyChunk; engine: LinkifyEngine } | null = null;

/** linkify-it if its chunk is loaded, else null (having asked for it, when `ask`). */
function linkifier(ask: boolean): LinkifyEngine | null {
  if (!ask && !hasChunk("linkify")) {
    return null;
  }
  const mod = chunk("linkify");
  if (mod === null) {
    return null;
  }
  if (made?.mod !== mod) {
    made = { mod, engine: new mod.LinkifyIt() };
  }
  return made.engine;
}

/** markdown-it's linkifier (`md.linkify`): linkify-it from its chunk, or nothing yet. */
export class LinkifyIt {
  /**
   * Whether `text` may hold a link: linkify-it's answer once it is loaded;
   * before, whether {@link MAYBE_LINK} matches (markdown-it then calls
   * {@link match}, which notes the miss).
   */
  test(text: string): boolean {
    if (!MAYBE_LINK.test(text)) {
      return false;
    }
    return linkifier(false)?.test(text) ?? true;
  }

  /** The links in `text` (markdown-it calls it after {@link test}); none until the chunk is there. */
  match(text: string): Match[] | null {
    const e = linkifier(true);
    if (e === null) {
      noteMiss("linkify");
      return [];
    }
    return e.match(text);
  }

  /** A link starting `text` (markdown-it's inline rule, after `scheme://`); none until the chunk is there. */
  matchAtStart(text: string): Match | null {
    const e = linkifier(true);
    if (e === null) {
      noteMiss("linkify");
      return null;
    }
    return e.matchAtStart(text);
  }
}
