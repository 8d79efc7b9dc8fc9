// The reader's place survives the moment a long paragraph closes.
//
// The notebook's source streams one long paragraph, then waits on GATE (a
// threading.Event in the kernel). The list follows until the reply's top
// reaches its top and stops there (the reader reads from the beginning); the
// scenario then opens the gate from a new cell, and the paragraph's last words
// and the next block arrive together: the renderer closes the paragraph (a new
// node that is no longer the last block) while the reader looks at it.
// A scroll listener records every scrollTop the list takes from then on.
// In Notebook 7 (params.nb7_notebook, a long scripted answer): the list stops at
// the reply's top there too.
// params: { notebook, paragraph_chars, label, nb7_notebook?, timeout_ms }
// Screenshots: <artifact>-<label>-widget.png, <artifact>-notebook7-widget.png
import path from 'node:path';
import { SEL, sendPrompt, waitForChat } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, runCode, runFirstCellInNotebook7, scenario } from './lab.mjs';

/** In the page: where the list is and where the reply being written starts. */
function listGeometry() {
  const root = document.querySelector('.nbs-chat');
  const list = root.querySelector('.nbs-messages');
  const reply = [...list.querySelectorAll('.nbs-message[data-role="assistant"]')].pop();
  return {
    top: list.scrollTop,
    height: list.scrollHeight,
    client: list.clientHeight,
    jump: !root.querySelector('.nbs-jump').hidden,
    reply: reply ? reply.getBoundingClientRect().top - list.getBoundingClientRect().top - list.clientTop + list.scrollTop : null,
  };
}

/** Notebook 7: a long scripted reply, asked from the input box, stops at its top. */
async function inNotebook7(page, notebook, log) {
  const attempts = await runFirstCellInNotebook7(page, notebook, page.locator(SEL.root).first());
  log(`notebook 7: the widget showed after ${attempts} run(s) of the cell`);
  await sendPrompt(page, 'go');
  await page.waitForFunction(() => !document.querySelector('.nbs-chat .nbs-jump').hidden, null, {
    timeout: 60_000,
    polling: 'raf',
  });
  const geometry = await page.evaluate(listGeometry);
  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-notebook7-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  return { ...geometry, screenshot_widget: shot };
}

await scenario(async ({ page, params, log }) => {
  const timeout = params.timeout_ms ?? 60_000;
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  const id = await sendPrompt(page, 'go');
  // the whole paragraph is shown, and the list stopped at the reply's top
  await page.waitForFunction(
    ({ sel, chars }) => {
      const root = document.querySelector(sel.root);
      const md = [...root.querySelectorAll(`${sel.message}[data-role="assistant"] .nbs-md`)].pop();
      return md && md.textContent.length >= chars && !root.querySelector('.nbs-jump').hidden;
    },
    { sel: SEL, chars: params.paragraph_chars },
    { timeout, polling: 'raf' },
  );
  // What the reader sees is where the reply's top is in the list's viewport.
  // scrollTop alone may change without moving it: a message above the view
  // that was still a placeholder (lazy.ts) renders at its real height, and
  // the list scrolls by the difference in the same frame (LazyHost.shift).
  const before = await page.evaluate(() => {
    const list = document.querySelector('.nbs-chat .nbs-messages');
    const seen = () => {
      const reply = [...list.querySelectorAll('.nbs-message[data-role="assistant"]')].pop();
      return Math.round(reply.getBoundingClientRect().top - list.getBoundingClientRect().top);
    };
    window.__nbsSeen = seen;
    window.__nbsTops = [];
    list.addEventListener('scroll', () => window.__nbsTops.push({ top: list.scrollTop, seen: seen() }), {
      passive: true,
    });
    return {
      top: list.scrollTop,
      seen: seen(),
      height: list.scrollHeight,
      client: list.clientHeight,
      deferred: list.querySelectorAll('.nbs-deferred').length,
    };
  });
  log('before the paragraph closes:', before);
  await runCode(page, 'GATE.set()');
  await page.waitForFunction(
    (sel) => document.querySelector(`${sel.root} ${sel.message}[data-role="assistant"]`)?.dataset.status === 'done',
    SEL,
    { timeout, polling: 100 },
  );
  // two more frames: anything the last render changed has been laid out
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const after = await page.evaluate(() => {
    const root = document.querySelector('.nbs-chat');
    const list = root.querySelector('.nbs-messages');
    const md = [...root.querySelectorAll('.nbs-message[data-role="assistant"] .nbs-md')].pop();
    return {
      top: list.scrollTop,
      seen: window.__nbsSeen(),
      height: list.scrollHeight,
      deferred: list.querySelectorAll('.nbs-deferred').length,
      blocks: md.children.length,
      jump: !root.querySelector('.nbs-jump').hidden,
      tops: window.__nbsTops,
    };
  });
  const root = page.locator(SEL.root).first();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-${params.label ?? 'light'}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  const theme = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  const out = { id, before, after, theme, screenshot_widget: shot };
  if (params.nb7_notebook) out.notebook7 = await inNotebook7(page, params.nb7_notebook, log);
  return out;
});
