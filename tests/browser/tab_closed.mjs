// The chat's notebook tab is closed mid-answer (the kernel keeps running, as JupyterLab
// leaves it): the view says bye while its notebook's session closes, before JupyterLab
// disposes the page's kernel connection (js/src/connection.ts), and once no view came
// back within the widget's grace period the kernel stops the reply. Then the kernel is
// asked for the reply's status through a new connection to it (the tab is gone).
// params: { notebook, min_chars = 200 }
import { answerUnderWay, lastReplyOnceEnded } from './record.mjs';
import { scenario } from './lab.mjs';

await scenario(async ({ page, params, log }) => {
  await answerUnderWay(page, params.notebook, params.min_chars ?? 200);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const kernel = await page.evaluate(async () => {
    const panel = window.jupyterapp.shell.currentWidget;
    const k = panel.sessionContext.session.kernel;
    const model = { id: k.id, name: k.name };
    // closed as a person closes the tab (the close request, JupyterLab's own path),
    // without the dialog about unsaved changes
    panel.context.model.dirty = false;
    panel.close();
    return model;
  });
  await page.waitForFunction(() => document.querySelectorAll('.nbs-chat').length === 0, null, { timeout: 30_000 });
  const closedAt = Date.now();
  // the tab is gone: ask the same kernel through a connection of our own
  const { reply } = await lastReplyOnceEnded(page, kernel, 40);
  log(`reply ${JSON.stringify(reply)} ${Date.now() - closedAt} ms after the tab closed`);
  return { reply, after_ms: Date.now() - closedAt, page_errors: errors };
});
