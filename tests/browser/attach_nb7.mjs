// Attachments in Notebook 7 (see attach_common.mjs): the notebook's first cell shows the chat.
// params: { notebook }
import { runAttachChecks } from './attach_common.mjs';
import { runFirstCellInNotebook7, scenario } from './lab.mjs';

await scenario(async ({ page, params }) => {
  await runFirstCellInNotebook7(page, params.notebook, page.locator('.nbs-chat').first());
  return runAttachChecks(page);
});
