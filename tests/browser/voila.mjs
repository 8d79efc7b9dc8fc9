// A notebook under Voilà (written by tests/test_browser_marimo_voila.py), in headless
// Chromium: the chat renders, streams, finishes, Stop and the input box work.
// NBS_URL is the Voilà server's URL (the notebook renders at its root).
import { runChatChecks } from './frontend.mjs';
import { scenario, URL_BASE } from './lab.mjs';

await scenario(async ({ page }) => {
  await page.goto(URL_BASE, { waitUntil: 'domcontentloaded' });
  return runChatChecks(page, { label: 'voila' });
});
