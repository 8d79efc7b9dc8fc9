// A chat that starts from a history (ChatWidget(source, messages=[...])), in real
// JupyterLab: every loaded message shows, with its status, and none is ever seen
// live (queued / running); the reasoning block of a loaded reply is there; "Copy
// all" copies the conversation as Markdown (the clipboard is captured in the
// page); a question asked in the view then follows the loaded messages.
// params: { notebook, count (messages loaded), question, nb7_notebook? (the same notebook,
// opened in Notebook 7 too: the messages and Copy all there) }
// Screenshots: <artifact>-widget.png, <artifact>-notebook7-widget.png
import path from 'node:path';
import { SEL, waitForChat } from './chat.mjs';
import {
  ARTIFACT,
  ARTIFACTS,
  openNotebook,
  runAllCells,
  runFirstCellInNotebook7,
  scenario,
  typeInto,
} from './lab.mjs';

// Runs in the page before its own scripts: every status any message ever showed.
function installWatcher() {
  const seen = {};
  window.__nbsStatuses = seen;
  const note = (el) => {
    if (el instanceof HTMLElement && el.classList.contains('nbs-message') && el.dataset.status) {
      (seen[el.dataset.id] ??= []).includes(el.dataset.status) || seen[el.dataset.id].push(el.dataset.status);
    }
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'attributes') note(r.target);
      for (const n of r.addedNodes) {
        if (n instanceof Element) [n, ...n.querySelectorAll('.nbs-message')].forEach(note);
      }
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-status'] });
}

function shown(sel) {
  const root = document.querySelector(sel.root);
  return [...root.querySelectorAll(sel.message)].map((m) => ({
    id: m.dataset.id,
    role: m.dataset.role,
    status: m.dataset.status,
    text: m.querySelector(sel.text)?.textContent ?? '',
    reasoning: m.querySelector('details.nbs-reasoning') !== null,
    label: m.querySelector('.nbs-status')?.textContent ?? '',
  }));
}

async function copyAll(page) {
  return page.evaluate(async () => {
    const seen = [];
    Object.defineProperty(navigator, 'clipboard', {
      configurable: true,
      value: { writeText: async (t) => seen.push(t) },
    });
    document.querySelector('.nbs-chat button.nbs-copy-all').click();
    for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    return seen[0] ?? null;
  });
}

await scenario(async ({ page, params, log }) => {
  await page.addInitScript(installWatcher);
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  await page.waitForFunction(
    ({ sel, count }) => document.querySelectorAll(`${sel.root} ${sel.message}[data-status]`).length >= count,
    { sel: SEL, count: params.count },
    { timeout: 60_000, polling: 100 },
  );
  const loaded = await page.evaluate(shown, SEL);
  const statuses = await page.evaluate(() => JSON.parse(JSON.stringify(window.__nbsStatuses)));
  log('loaded:', JSON.stringify(loaded.map((m) => [m.id, m.role, m.status])));
  const copied = await copyAll(page);

  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });

  // a question asked in the view comes after the loaded messages
  await typeInto(page, root.locator(SEL.input), params.question, { fill: true });
  await page.keyboard.press('Enter');
  await page.waitForFunction(
    ({ sel, count }) => {
      const all = document.querySelectorAll(`${sel.root} ${sel.message}`);
      return all.length === count + 2 && all[all.length - 1].dataset.status === 'done';
    },
    { sel: SEL, count: params.count },
    { timeout: 60_000, polling: 100 },
  );
  const after = await page.evaluate(shown, SEL);
  const copiedAfter = await copyAll(page);
  const theme = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  const out = { loaded, statuses, copied, after, copied_after: copiedAfter, screenshot_widget: shot, theme };
  if (params.nb7_notebook) out.notebook7 = await inNotebook7(page, params, log);
  return out;
});

/** The same notebook in Notebook 7: the messages, Copy all, one screenshot. */
async function inNotebook7(page, params, log) {
  const attempts = await runFirstCellInNotebook7(page, params.nb7_notebook, page.locator(SEL.root).first());
  log(`notebook 7: the widget showed after ${attempts} run(s) of the cell`);
  await page.waitForFunction(
    ({ sel, count }) => document.querySelectorAll(`${sel.root} ${sel.message}[data-status]`).length >= count,
    { sel: SEL, count: params.count },
    { timeout: 60_000, polling: 100 },
  );
  const loaded = await page.evaluate(shown, SEL);
  const copied = await copyAll(page);
  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-notebook7-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  return { loaded, copied, screenshot_widget: shot };
}
