// Two views of one widget: the chat is shown by its cell, starts a long answer,
// and a second cell shows it again (`display(chat)`) mid-stream. Both views are
// recorded every frame: both grow, and both end with the kernel's text.
// params: { notebook, second_after_ms = 500 }
// Screenshot: <artifact>.png
import { counters, now } from './chat.mjs';
import { growthOf, kernelJson, startRecorder, waitForAssistants, words } from './record.mjs';
import { openNotebook, runCell, scenario } from './lab.mjs';

await scenario(async ({ page, params }) => {
  const openMs = await openNotebook(page, params.notebook);
  await runCell(page, 0);
  const [id] = await waitForAssistants(page, { index: 0, n: 1 });
  const rec = await startRecorder(page, [
    { name: 'view0', root: 0, id },
    { name: 'view1', root: 1, id },
  ]);
  await page.waitForFunction(
    (id) => (document.querySelector(`.nbs-message[data-id="${id}"] .nbs-text`)?.textContent.length ?? 0) > 0,
    id,
    { timeout: 30_000, polling: 'raf' },
  );
  await page.waitForTimeout(params.second_after_ms ?? 500);
  await runCell(page, 1);
  await waitForAssistants(page, { index: 1, n: 1 });
  const tBoth = await now(page);
  const statusAtSecond = await page.evaluate(
    (id) => document.querySelectorAll('.nbs-chat')[1].querySelector(`.nbs-message[data-id="${id}"]`).dataset.status,
    id,
  );
  await page.waitForFunction(
    (id) =>
      [...document.querySelectorAll('.nbs-chat')].every((r) =>
        ['done', 'stopped', 'error', 'timeout'].includes(r.querySelector(`.nbs-message[data-id="${id}"]`)?.dataset.status),
      ),
    id,
    { timeout: 60_000, polling: 100 },
  );
  await page.waitForTimeout(300);
  const record = await rec.stop();
  const doneAt = Math.min(
    ...['view0', 'view1'].map((k) => record.series[k].find((s) => s.status === 'done')?.t ?? Infinity),
  );
  const texts = await page.evaluate(
    (id) => [...document.querySelectorAll('.nbs-chat')].map((r) => r.querySelector(`.nbs-message[data-id="${id}"] .nbs-text`).textContent),
    id,
  );
  const kernel = await kernelJson(
    page,
    `print(_nbs_json.dumps([m for m in chat.messages if m["id"] == ${JSON.stringify(id)}][0]))`,
  );
  const kw = words(kernel.content).join(' ');
  return {
    message_id: id,
    open_ms: openMs,
    views: texts.length,
    second_view_status_at_render: statusAtSecond,
    growth_both_shown: {
      view0: growthOf(record.series.view0, { from: tBoth, to: doneAt }),
      view1: growthOf(record.series.view1, { from: tBoth, to: doneAt }),
      window_ms: Math.round(doneAt - tBoth),
    },
    words: texts.map((t) => words(t).length),
    views_equal: words(texts[0]).join(' ') === words(texts[1]).join(' '),
    equal_kernel: texts.map((t) => words(t).join(' ') === kw),
    kernel_status: kernel.status,
    counters: [await counters(page, 0), await counters(page, 1)],
    frames: record.frames,
  };
});
