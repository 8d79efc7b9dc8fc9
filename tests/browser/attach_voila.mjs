// Attachments under Voilà (see attach_common.mjs); NBS_URL is the Voilà server's URL.
import { runAttachChecks } from './attach_common.mjs';
import { scenario, URL_BASE } from './lab.mjs';

await scenario(async ({ page }) => {
  await page.goto(URL_BASE, { waitUntil: 'domcontentloaded' });
  return runAttachChecks(page);
});
