// A finished conversation saved with widget state, shown again with no kernel
// holding the widget: run the notebook, wait for every answer, save (the test
// has turned on the widget manager's saveState), shut the kernel down through
// the REST API, open the notebook again (a fresh kernel that knows nothing of
// the widget), and read the conversation the page shows from the saved state.
// params: { notebook }
// Screenshots: <artifact>-live.png, <artifact>.png (reopened)
import { assistantTexts, kernelJson, saveNotebook, waitAllFinal } from './record.mjs';
import { api, openNotebook, runAllCells, scenario, shutDownAll } from './lab.mjs';

await scenario(async ({ page, params, screenshot }) => {
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitAllFinal(page, { index: 0, timeout: 60_000 });
  await page.waitForTimeout(300);
  const live = await assistantTexts(page, 0);
  const liveKernel = await page.evaluate(() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id);
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  await screenshot('live');
  // runCode (kernelJson) would add a cell: save first, so the file holds the run as it was
  await saveNotebook(page);
  const saveState = await page.evaluate(async () => {
    const s = await window.jupyterapp.serviceManager.settings.fetch('@jupyter-widgets/jupyterlab-manager:plugin');
    return s.settings?.saveState ?? null;
  });

  // no kernel holds the widget any more
  await shutDownAll();
  const kernelsAfterShutdown = ((await api('GET', 'api/kernels')) ?? []).length;

  await openNotebook(page, params.notebook);
  await page.waitForSelector('.nbs-chat .nbs-message[data-role="assistant"]', { timeout: 30_000 });
  await waitAllFinal(page, { index: 0, timeout: 30_000 });
  const reopened = await assistantTexts(page, 0);
  const users = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat .nbs-message[data-role="user"] .nbs-text')].map((e) => e.textContent),
  );
  const newKernel = await page.evaluate(() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel?.id ?? null);
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  const kernelKnows = await kernelJson(page, 'print(_nbs_json.dumps("chat" in globals()))');
  return {
    save_state_setting: saveState,
    live,
    kernels_after_shutdown: kernelsAfterShutdown,
    reopened,
    user_texts: users,
    new_kernel_differs: newKernel !== liveKernel,
    new_kernel_has_chat: kernelKnows,
  };
});
