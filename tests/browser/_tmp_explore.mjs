import { SEL, waitForChat } from './chat.mjs';
import { openNotebook, runAllCells, scenario } from './lab.mjs';
await scenario(async ({ page, params, log }) => {
  await openNotebook(page, params.notebook);
  const t0 = Date.now();
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-message').length >= n, params.count, { timeout: 60_000 });
  log('all attached after', Date.now() - t0);
  // JupyterLab search
  await page.evaluate(() => window.jupyterapp.commands.execute('documentsearch:start', { searchText: 'Answer 3.' }));
  await page.waitForTimeout(1500);
  const html = await page.evaluate(() => document.querySelector('.jp-DocumentSearch-overlay')?.outerHTML ?? null);
  return { html: html?.slice(0, 4000) };
});
