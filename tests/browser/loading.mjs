// A loading reply's status line follows what its source reports.
//
// The notebook's source reports "preparing the model (first run, once)" at 42%
// in prepare() and waits on GATE1 (a threading.Event in the kernel); then
// reports "loading model" and waits on GATE2; then answers. The scenario reads
// the status line at each stage, takes a screenshot of the widget while it says
// 42%, and opens each gate from a new cell.
// params: { notebook, preparing, answer, timeout_ms }
import path from 'node:path';
import { SEL, sendPrompt, waitForChat, waitForStatus } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, runCode, scenario } from './lab.mjs';

/** Wait until message `id`'s status line reads `label`; returns what it read and the status. */
async function waitForLabel(page, id, label, timeout) {
  const handle = await page.waitForFunction(
    ({ sel, id, label }) => {
      const m = document.querySelector(`${sel.root} ${sel.message}[data-id="${CSS.escape(id)}"]`);
      const status = m?.querySelector('.nbs-status');
      return status && status.textContent === label && !status.hidden
        ? { label: status.textContent, status: m.dataset.status, waiting: status.classList.contains('nbs-waiting') }
        : false;
    },
    { sel: SEL, id, label },
    { timeout, polling: 'raf' },
  );
  return handle.jsonValue();
}

await scenario(async ({ page, params, log }) => {
  const timeout = params.timeout_ms ?? 60_000;
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  const id = await sendPrompt(page, 'Hi');
  const preparing = await waitForLabel(page, id, `${params.preparing}… 42%`, timeout);
  log('while preparing:', preparing);
  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-preparing-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  await runCode(page, 'GATE1.set()');
  const loading = await waitForLabel(page, id, 'loading model…', timeout);
  log('while loading:', loading);
  await runCode(page, 'GATE2.set()');
  await waitForStatus(page, id, 'done', { timeout });
  const end = await page.evaluate(
    ({ sel, id }) => {
      const m = document.querySelector(`${sel.root} ${sel.message}[data-id="${CSS.escape(id)}"]`);
      return { text: m.querySelector(sel.text).textContent.trim(), label: m.querySelector('.nbs-status').textContent };
    },
    { sel: SEL, id },
  );
  return { id, preparing, loading, end, screenshot_widget: shot };
});
