// One question, asked as a person does, answered to the end: run all cells of a
// notebook that shows a chat, type the question into its input box, press Enter,
// wait until the reply is final. Records every status line the reply showed on
// the way (one entry per change, seen on animation frames), so a test can check
// that it said "preparing the model (first run, once)… N%" while it converted.
// params: { notebook, question, chat = 0, run_timeout_ms = 300000,
//           answer_timeout_ms = 480000, probe = null }
// probe: Python code run in a new cell after the answer; its output is returned
// (e.g. where the kernel imported nbstream from).
import path from 'node:path';
import { FINAL_STATUSES, SEL, chat, now, sendPrompt, waitForChat, waitForStatus, waitForText } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, runCode, scenario } from './lab.mjs';

/** Record the status line of every assistant message of widget `index`, per change. */
async function recordLabels(page, index) {
  const key = `__nbsLabels${Math.random().toString(36).slice(2)}`;
  await page.evaluate(
    ({ sel, index, key }) => {
      const root = document.querySelectorAll(sel.root)[index];
      const rec = { changes: [], stopped: false };
      window[key] = rec;
      const last = new Map();
      const tick = (t) => {
        if (rec.stopped) return;
        for (const m of root.querySelectorAll(`${sel.message}[data-role="assistant"]`)) {
          const el = m.querySelector('.nbs-status');
          const label = el && !el.hidden ? el.textContent : '';
          const seen = `${m.dataset.status}\u0000${label}`;
          if (last.get(m.dataset.id) !== seen) {
            last.set(m.dataset.id, seen);
            rec.changes.push({ t, id: m.dataset.id, status: m.dataset.status, label });
          }
        }
        requestAnimationFrame(tick);
      };
      requestAnimationFrame(tick);
    },
    { sel: SEL, index, key },
  );
  return async () =>
    page.evaluate((k) => {
      window[k].stopped = true;
      return window[k].changes;
    }, key);
}

await scenario(async ({ page, params, log }) => {
  const index = params.chat ?? 0;
  const openMs = await openNotebook(page, params.notebook);
  const runMs = await runAllCells(page, { timeout: params.run_timeout_ms ?? 300_000 });
  await waitForChat(page, { index });
  log(`opened in ${openMs} ms, ran all cells in ${runMs} ms`);

  const stopLabels = await recordLabels(page, index);
  const tSend = await now(page);
  const id = await sendPrompt(page, params.question, { index });
  const answerTimeout = params.answer_timeout_ms ?? 480_000;
  await waitForText(page, id, { index, timeout: answerTimeout });
  const tFirst = await now(page);
  log(`first text after ${Math.round(tFirst - tSend)} ms`);
  const finalStatus = await waitForStatus(page, id, FINAL_STATUSES, { index, timeout: answerTimeout });
  const tEnd = await now(page);
  const changes = (await stopLabels()).filter((c) => c.id === id);

  const end = await page.evaluate(
    ({ sel, index, id }) => {
      const m = document.querySelectorAll(sel.root)[index].querySelector(`${sel.message}[data-id="${CSS.escape(id)}"]`);
      return { text: m.querySelector(sel.text).textContent, label: m.querySelector('.nbs-status')?.textContent ?? '' };
    },
    { sel: SEL, index, id },
  );
  const root = chat(page, index);
  await root.scrollIntoViewIfNeeded();
  const widgetShot = path.join(ARTIFACTS, `${ARTIFACT}-widget.png`);
  await root.screenshot({ path: widgetShot, timeout: 15_000 });
  const probe = params.probe ? await runCode(page, params.probe) : null;
  return {
    message_id: id,
    question: params.question,
    open_ms: openMs,
    run_all_ms: runMs,
    first_text_ms: tFirst - tSend,
    final_ms: tEnd - tSend,
    final_status: finalStatus,
    text: end.text,
    final_label: end.label,
    labels: changes.map((c) => ({ t_ms: Math.round(c.t - tSend), status: c.status, label: c.label })),
    screenshot_widget: widgetShot,
    probe,
  };
});
