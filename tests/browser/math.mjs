// Math in a streamed reply, in real JupyterLab: formulas appear only when
// complete (while a formula waits for its closer its source shows, dimmed, in
// place; a valid formula never shows as an error on the way), Chromium lays the
// MathML out (a fraction has its numerator above its denominator, a display
// formula is a block), prices stay text, a formula that does not parse shows
// its source, and Copy gives the Markdown with the TeX source.
// params: { notebook, label, broken, nb7_notebook? }   (broken: the one formula source expected
// to fail; nb7_notebook: the same notebook again, opened in Notebook 7 too)
// Screenshots: <artifact>-<label>-widget.png, <artifact>-notebook7-<label>-widget.png
import path from 'node:path';
import { SEL, waitForChat } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, runFirstCellInNotebook7, scenario } from './lab.mjs';

// Runs in the page before its own scripts: watches every change to rendered Markdown.
function installWatcher() {
  const state = { pending: 0, sources: [], outside: 0, mutations: 0 };
  window.__nbsMath = state;
  new MutationObserver((records) => {
    for (const r of records) {
      for (const n of r.addedNodes) {
        if (!(n instanceof Element) || !n.closest('.nbs-md')) continue;
        state.mutations += 1;
        const all = [n, ...n.querySelectorAll('*')];
        for (const el of all) {
          if (el.classList?.contains('nbs-math-pending')) state.pending += 1;
          if (el.classList?.contains('nbs-math-source')) state.sources.push(el.textContent);
          if (el.namespaceURI === 'http://www.w3.org/1998/Math/MathML' && !el.closest('.nbs-math, .nbs-math-block')) {
            state.outside += 1;
          }
        }
      }
    }
  }).observe(document, { subtree: true, childList: true });
}

function measure() {
  const root = document.querySelector('.nbs-chat');
  const reply = root.querySelector('.nbs-message[data-role="assistant"] .nbs-md');
  const rect = (el) => {
    const b = el.getBoundingClientRect();
    return { top: b.top, bottom: b.bottom, width: b.width, height: b.height };
  };
  const maths = [...reply.querySelectorAll('math')];
  const inline = maths.filter((m) => m.getAttribute('display') !== 'block');
  const display = maths.filter((m) => m.getAttribute('display') === 'block');
  const frac = reply.querySelector('mfrac');
  return {
    formulas: maths.length,
    inline: inline.length,
    display: display.length,
    all_laid_out: maths.every((m) => rect(m).width > 0 && rect(m).height > 0),
    display_is_block: display.every((m) => getComputedStyle(m).display.startsWith('block')),
    tallest_inline: Math.max(...inline.map((m) => rect(m).height)),
    tallest_display: Math.max(...display.map((m) => rect(m).height)),
    frac_stacked: frac ? rect(frac.children[0]).bottom <= rect(frac.children[1]).top + 1 : null,
    pending_left: reply.querySelectorAll('.nbs-math-pending').length,
    sources: [...reply.querySelectorAll('.nbs-math-source')].map((e) => e.textContent),
    text: reply.textContent,
    reply_width: rect(reply).width,
    overflow: reply.scrollWidth - reply.clientWidth,
  };
}

await scenario(async ({ page, params, log }) => {
  await page.addInitScript(installWatcher);
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  await page.waitForFunction(
    (sel) => document.querySelector(`${sel.root} ${sel.message}[data-role="assistant"]`)?.dataset.status === 'done',
    SEL,
    { timeout: 60_000, polling: 100 },
  );
  const watched = await page.evaluate(() => JSON.parse(JSON.stringify(window.__nbsMath)));
  const m = await page.evaluate(measure);
  log('math:', JSON.stringify({ ...m, text: undefined }));

  // Copy: the reply's Markdown, TeX included (the clipboard is captured in the page)
  const copied = await page.evaluate(async () => {
    const seen = [];
    Object.defineProperty(navigator, 'clipboard', {
      configurable: true,
      value: { writeText: async (t) => seen.push(t) },
    });
    document.querySelector('.nbs-message[data-role="assistant"] button.nbs-copy-msg').click();
    for (let i = 0; i < 50 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    return seen[0] ?? null;
  });

  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-${params.label}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  const theme = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  const out = { watched, measured: m, copied, screenshot_widget: shot, theme };
  if (params.nb7_notebook) out.notebook7 = await inNotebook7(page, params.nb7_notebook, params.label, log);
  return out;
});

/** The same notebook in Notebook 7 (one screenshot there). */
async function inNotebook7(page, notebook, label, log) {
  const attempts = await runFirstCellInNotebook7(page, notebook, page.locator(SEL.root).first());
  log(`notebook 7: the widget showed after ${attempts} run(s) of the cell`);
  await page.waitForFunction(
    (sel) => document.querySelector(`${sel.root} ${sel.message}[data-role="assistant"]`)?.dataset.status === 'done',
    SEL,
    { timeout: 60_000, polling: 100 },
  );
  const m = await page.evaluate(measure);
  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-notebook7-${label}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  return { measured: m, screenshot_widget: shot };
}
