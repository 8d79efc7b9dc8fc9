// The chat's browser page is closed mid-answer (a browser tab closed; JupyterLab, or
// Notebook 7 whose notebook is a page of its own), its kernel left running: the view
// says a page's bye from the page's `pagehide` (js/src/connection.ts), and once no view
// came back within the page's grace (nbstream/widgets/presence.py PAGE_GONE_GRACE; the
// notebook sets it short) the kernel stops the reply. Before, such a reply ran to its
// end for nobody. The kernel is then asked for the reply's status from another page: a
// JupyterLab of an empty workspace, opened before the close (one that restored the
// notebook would show the chat again: a view, a hello).
// params: { notebook, notebook7 = false, min_chars = 200 }
import { answerShows, answerUnderWay, emptyLab, lastReplyOnceEnded } from './record.mjs';
import { kernelOfNotebook, runFirstCellInNotebook7, scenario } from './lab.mjs';

await scenario(async ({ page, params, log }) => {
  const minChars = params.min_chars ?? 200;
  if (params.notebook7) {
    await runFirstCellInNotebook7(page, params.notebook, page.locator('.nbs-message[data-role="assistant"]'));
    await answerShows(page, minChars);
  } else {
    await answerUnderWay(page, params.notebook, minChars);
  }
  const kernel = await kernelOfNotebook(params.notebook);
  const asker = await page.context().newPage();
  await emptyLab(asker, `asker-${process.pid}`);
  // closed as a browser closes a tab: unload handlers run (pagehide), beforeunload's
  // question about unsaved changes is not asked
  await page.close({ runBeforeUnload: false });
  const closedAt = Date.now();
  const { reply, first, asked } = await lastReplyOnceEnded(asker, kernel);
  log(`reply ${JSON.stringify(reply)} ${Date.now() - closedAt} ms after the page closed`);
  // `first`: right after the close, the views the kernel knew of (0: the bye came)
  return { reply, first, asked, after_ms: Date.now() - closedAt };
});
