// examples/marimo_chat.py under `marimo run`, in headless Chromium: the chat renders,
// streams, finishes, Stop and the input box work; then two sessions (two browser
// contexts, so two marimo sessions: threads of one server process) ask at once
// and each shows only its own reply.
// NBS_URL is the marimo server's URL. Result: see runChatChecks, plus `sessions`.
import { expectedAnswer, follow, runChatChecks, SEL, send, waitForChat } from './frontend.mjs';
import { log, scenario, URL_BASE } from './lab.mjs';

await scenario(async ({ browser, page }) => {
  await page.goto(URL_BASE, { waitUntil: 'domcontentloaded' });
  const result = await runChatChecks(page, { label: 'A' });
  log('single session done', JSON.stringify(result.stopped));

  const other = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await other.goto(URL_BASE, { waitUntil: 'domcontentloaded' });
  await waitForChat(other);
  const fresh = await other.locator(SEL.assistant).count();
  const [a, b] = await Promise.all([send(page, 'question alpha'), send(other, 'question beta')]);
  const [ra, rb] = await Promise.all([follow(page, a), follow(other, b)]);
  const texts = async (p) => (await p.locator(`${SEL.assistant} .nbs-text`).allTextContents()).map((t) => t.trimEnd());
  result.sessions = {
    b_started_empty: fresh === 0,
    a: { status: ra.status, text: ra.text, expected: expectedAnswer('question alpha') },
    b: { status: rb.status, text: rb.text, expected: expectedAnswer('question beta') },
    a_texts: await texts(page),
    b_texts: await texts(other),
  };
  return result;
});
