// Reload mid-stream: a long answer streams; the notebook is saved (its output
// holds the widget's view), the page is reloaded and the notebook comes back on
// the same kernel. The view re-renders from the kernel's state and continues:
// recorded with its text every frame, before and after the reload, each text
// must be a prefix of the kernel's final text (no gap, no duplicate, never
// shrinking), and the final text must equal it.
// params: { notebook, min_chars = 400 }
// Screenshots: <artifact>-after-reload.png, <artifact>.png
import { counters } from './chat.mjs';
import { kernelJson, prefixCheck, saveNotebook, startRecorder, growthOf, waitForAssistants, words } from './record.mjs';
import { openNotebook, runCell, scenario, waitForKernelIdle } from './lab.mjs';

await scenario(async ({ page, params, screenshot, log }) => {
  const openMs = await openNotebook(page, params.notebook);
  await runCell(page, 0);
  const [id] = await waitForAssistants(page, { index: 0, n: 1 });
  const rec1 = await startRecorder(page, [{ name: 'answer', root: 0, id, keepText: true }]);
  await page.waitForFunction(
    ({ id, n }) => (document.querySelector(`.nbs-message[data-id="${id}"] .nbs-text`)?.textContent.length ?? 0) >= n,
    { id, n: params.min_chars ?? 400 },
    { timeout: 30_000, polling: 'raf' },
  );
  await saveNotebook(page);
  const beforeReload = await rec1.stop();
  const lengthBefore = beforeReload.series.answer.at(-1)?.length ?? 0;

  const t0 = Date.now();
  await page.reload({ waitUntil: 'commit' });
  // recording from the new page's first frames: the re-rendered view's very first text counts
  const rec2 = await startRecorder(page, [{ name: 'answer', root: 0, id, keepText: true }]);
  await page.waitForFunction(() => Boolean(window.jupyterapp?.shell), null, { timeout: 60_000, polling: 100 });
  const restored = await page
    .waitForFunction((p) => window.jupyterapp.shell.currentWidget?.context?.path === p, params.notebook, {
      timeout: 15_000,
      polling: 100,
    })
    .then(() => true)
    .catch(() => false);
  if (!restored) {
    log('the workspace did not bring the notebook back; opening it again');
    await openNotebook(page, params.notebook);
  }
  await waitForKernelIdle(page, { timeout: 30_000 });
  await page.waitForFunction((id) => document.querySelector(`.nbs-message[data-id="${id}"]`), id, {
    timeout: 30_000,
    polling: 'raf',
  });
  const reRenderMs = Date.now() - t0;
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  await screenshot('after-reload');
  await page.waitForFunction(
    (id) => ['done', 'stopped', 'error', 'timeout'].includes(document.querySelector(`.nbs-message[data-id="${id}"]`)?.dataset.status),
    id,
    { timeout: 60_000, polling: 100 },
  );
  await page.waitForTimeout(300);
  const afterReload = await rec2.stop();
  const dom = await page.evaluate(
    (id) => {
      const m = document.querySelector(`.nbs-message[data-id="${id}"]`);
      return { status: m.dataset.status, text: m.querySelector('.nbs-text').textContent };
    },
    id,
  );
  const c = await counters(page, 0);
  const kernel = await kernelJson(
    page,
    `print(_nbs_json.dumps([m for m in chat.messages if m["id"] == ${JSON.stringify(id)}][0]))`,
  );
  const finalText = kernel.content;
  // set by the test's "dropped" variant: the kernel's ack count when it stopped hearing views
  const dropReport = await kernelJson(page, "print(_nbs_json.dumps(DROP_REPORT() if 'DROP_REPORT' in globals() else None))");
  const shown = afterReload.series.answer.filter((x) => x.length >= 0);
  const first = shown[0];
  // the first text is the widget's synced state as last published, which may
  // be behind; the view's hello brings it up to date
  const caughtUp = shown.find((x) => x.length >= lengthBefore);
  // caught up live: past what the old page showed while the reply still ran, by a
  // later state or delta (not only by the final state)
  const caughtUpLive = shown.find((x) => x.length > lengthBefore && x.status === 'running');
  return {
    message_id: id,
    open_ms: openMs,
    restored_by_workspace: restored,
    length_before_reload: lengthBefore,
    re_render_ms: reRenderMs,
    first_after_reload: { status: first?.status ?? null, length: first?.length ?? null },
    caught_up_ms: caughtUp && first ? Math.round(caughtUp.t - first.t) : null,
    caught_up_live: caughtUpLive ? { length: caughtUpLive.length, ms: first ? Math.round(caughtUpLive.t - first.t) : null } : null,
    growth_after_reload: growthOf(shown),
    prefix_before: prefixCheck(beforeReload.series.answer, finalText),
    prefix_after: prefixCheck(afterReload.series.answer, finalText),
    dom_status: dom.status,
    dom_words: words(dom.text).length,
    dom_equals_kernel: words(dom.text).join(' ') === words(finalText).join(' '),
    kernel_status: kernel.status,
    kernel_words: words(finalText).length,
    counters_after_reload: c,
    drop_report: dropReport,
    frames_after_reload: afterReload.frames,
    max_frame_gap_after_reload_ms: Math.round(afterReload.max_frame_gap_ms),
    first_samples_after_reload: shown.slice(0, 4).map((x) => [Math.round(x.t), x.length, x.status]),
  };
});
