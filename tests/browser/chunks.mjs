// The heavy renderers load on demand (js/src/chunks.ts), in real JupyterLab
// (tests/test_browser_chunks.py): a plain chat loads no chunk; a reply with math,
// code, a rarer character reference and a bare URL loads the four chunks (from the
// kernel's runtime widget), and its formulas render as MathML, its code is
// highlighted, `&hellip;` shows as "…" and the URL is a link; saved with widget
// state and reopened with
// no kernel, the page renders them again from the saved chunks. A chat whose model
// called a tool loads the tools chunk and shows its cards, live and reopened. No
// request ever leaves the server (offline: nothing from a CDN).
// params: { notebook }  (cell 0: a plain chat, answered; cell 1: a chat whose reply has
//                        math, code, `&hellip;` and a bare URL, answered; cell 2: a
//                        chat whose reply called a tool, answered)
// Screenshots: <artifact>-live.png, <artifact>-reopened.png
import { openNotebook, runCell, scenario, screenshot, shutDownAll, URL_BASE } from './lab.mjs';
import { saveNotebook, waitAllFinal } from './record.mjs';

/** What chat `index` shows of math and code, and the chunks the page imported. */
function rendered(index) {
  const root = document.querySelectorAll('.nbs-chat')[index];
  const reply = root?.querySelector('.nbs-message[data-role="assistant"] .nbs-md');
  const frac = reply?.querySelector('mfrac');
  const rect = (el) => el.getBoundingClientRect();
  return {
    status: root?.querySelector('.nbs-message[data-role="assistant"]')?.dataset.status ?? null,
    maths: reply?.querySelectorAll('math').length ?? 0,
    frac_stacked: frac ? rect(frac.children[0]).bottom <= rect(frac.children[1]).top + 1 : null,
    pending: reply?.querySelectorAll('.nbs-math-pending').length ?? 0,
    sources: [...(reply?.querySelectorAll('.nbs-math-source') ?? [])].map((e) => e.textContent),
    highlighted: reply?.querySelectorAll('pre > code.hljs').length ?? 0,
    keyword: reply?.querySelector('code.hljs .hljs-keyword')?.textContent ?? null,
    // character references: decoded (`&hellip;` -> "…"), or left as written
    decoded: ['…', '→', '&'].filter((c) => (reply?.textContent ?? '').includes(c)),
    as_written: (reply?.textContent ?? '').match(/&[a-z]+;/g) ?? [],
    // bare URLs, linked by linkify-it (the linkify chunk)
    links: [...(reply?.querySelectorAll('a') ?? [])].map((a) => a.getAttribute('href')),
    // tool calls' cards (the tools chunk), and the text that stands for them until it came
    tools: [...(root?.querySelectorAll('.nbs-tool') ?? [])].map((c) => [
      c.querySelector('.nbs-tool-name')?.textContent ?? null,
      c.dataset.state ?? null,
      c.querySelector('.nbs-tool-text')?.textContent ?? null,
    ]),
    tools_pending: root?.querySelectorAll('.nbs-tool-pending').length ?? 0,
    chunk_loads: [...(window.__nbstreamChunkLoads ?? [])],
  };
}

const CARD_DONE = () =>
  document.querySelectorAll('.nbs-chat')[2]?.querySelector('.nbs-tool[data-state="done"] .nbs-tool-text');

await scenario(async ({ page, params, log }) => {
  const outside = [];
  const origin = new URL(URL_BASE).origin;
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (/^https?:/.test(url) && new URL(url).origin !== origin) {
      outside.push(url);
      return route.abort();
    }
    return route.continue();
  });
  await openNotebook(page, params.notebook);
  await runCell(page, 0);
  await waitAllFinal(page, { index: 0, timeout: 60_000 });
  await page.evaluate(() => new Promise((r) => setTimeout(r, 500)));
  const plain = await page.evaluate(rendered, 0);
  log('plain:', JSON.stringify(plain));

  await runCell(page, 1);
  await waitAllFinal(page, { index: 1, timeout: 60_000 });
  await page.waitForFunction(
    () => {
      const root = document.querySelectorAll('.nbs-chat')[1];
      return root?.querySelector('.nbs-md math') && root.querySelector('code.hljs');
    },
    null,
    { timeout: 30_000, polling: 100 },
  );
  const live = await page.evaluate(rendered, 1);
  log('live:', JSON.stringify(live));
  await page.locator('.nbs-chat').nth(1).scrollIntoViewIfNeeded();
  await screenshot(page, 'live');

  await runCell(page, 2);
  await waitAllFinal(page, { index: 2, timeout: 60_000 });
  await page.waitForFunction(CARD_DONE, null, { timeout: 30_000, polling: 100 });
  const tools = await page.evaluate(rendered, 2);
  log('tools:', JSON.stringify(tools));

  // saved with widget state, reopened with no kernel: rendered from the saved chunks
  await saveNotebook(page);
  await shutDownAll({ lenient: true });
  await openNotebook(page, params.notebook);
  await page.waitForFunction(
    () => {
      const root = document.querySelectorAll('.nbs-chat')[1];
      return root?.querySelector('.nbs-md math') && root.querySelector('code.hljs');
    },
    null,
    { timeout: 60_000, polling: 100 },
  );
  await page.waitForFunction(CARD_DONE, null, { timeout: 30_000, polling: 100 });
  const reopened = await page.evaluate(rendered, 1);
  const reopenedPlain = await page.evaluate(rendered, 0);
  const reopenedTools = await page.evaluate(rendered, 2);
  await page.locator('.nbs-chat').nth(1).scrollIntoViewIfNeeded();
  await screenshot(page, 'reopened');
  return {
    plain,
    live,
    tools,
    reopened,
    reopened_plain: reopenedPlain,
    reopened_tools: reopenedTools,
    outside,
  };
});
