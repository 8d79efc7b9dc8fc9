// Many streams at once through one kernel (benchmarks/many_streams.py): W Compare
// widgets of P panes each stream their answers at the same time from one server, while
// a probe cell measures the kernel's responsiveness. Each answer's end on the page is
// noted (wall clock) when its message's status turns final, by a MutationObserver
// (reading every text every frame would cost the page more than it measures).
// params: { notebook, widgets, setup_cell = 0, probe_cell = 1, start_cell = 2,
//           probe_after_ms = 700, report: Python printing the kernel's figures as JSON }
// Returns: probe figures, long tasks, and per answer {root, pane, id, status,
// end_wall_ms, text} (the page's final text, to compare with the kernel's).
import { openNotebook, runCell, scenario, watchOutput } from './lab.mjs';
import { kernelJson, waitAllFinal, watchLongTasks } from './record.mjs';

await scenario(async ({ page, params }) => {
  const n = params.widgets ?? 8;
  const probeCell = params.probe_cell ?? 1;
  await openNotebook(page, params.notebook);
  await runCell(page, params.setup_cell ?? 0);
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat').length >= n, n, { timeout: 60_000 });

  let watch = await watchOutput(page, probeCell, 'probe-ok');
  await runCell(page, probeCell, { via: 'keyboard' });
  const probeIdle = await watch.wait();

  await page.evaluate(() => {
    window.__nbsEnds = {};
    const FINAL = new Set(['done', 'stopped', 'error', 'timeout']);
    new MutationObserver((records) => {
      const wall = performance.timeOrigin + performance.now();
      for (const r of records) {
        const m = r.target;
        const key = `${m.closest?.('.nbs-chat')?.dataset.nbsIndex}:${m.dataset?.id}`;
        if (m.dataset?.role === 'assistant' && FINAL.has(m.dataset.status) && !(key in window.__nbsEnds)) {
          window.__nbsEnds[key] = wall;
        }
      }
    }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ['data-status'] });
    document.querySelectorAll('.nbs-chat').forEach((root, i) => {
      root.dataset.nbsIndex = String(i);
    });
  });
  const long = await watchLongTasks(page);
  const startWall = await page.evaluate(() => performance.timeOrigin + performance.now());
  await runCell(page, params.start_cell ?? 2);
  await page.waitForTimeout(params.probe_after_ms ?? 700);
  watch = await watchOutput(page, probeCell, 'probe-ok', { timeout: 120_000 });
  await runCell(page, probeCell, { via: 'keyboard' });
  const probeBusy = await watch.wait();
  for (let i = 0; i < n; i++) await waitAllFinal(page, { index: i, timeout: 180_000 });
  await page.waitForTimeout(300);
  const longTasks = await long.read();
  const answers = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].flatMap((root, i) =>
      [...root.querySelectorAll('.nbs-message[data-role="assistant"]')].map((m) => ({
        root: i,
        pane: m.dataset.pane === undefined ? null : Number(m.dataset.pane),
        id: m.dataset.id,
        status: m.dataset.status,
        end_wall_ms: window.__nbsEnds[`${i}:${m.dataset.id}`] ?? null,
        text: m.querySelector('.nbs-text')?.textContent ?? '',
      })),
    ),
  );
  // the characters of text each widget shows (its counter), and its question's copies (a
  // Compare shows the question in every pane)
  const chars = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].map((r) => ({
      chars: r.__nbstream.chars,
      questions: r.querySelectorAll('.nbs-message[data-role="user"]').length,
    })),
  );
  const kernel = params.report ? await kernelJson(page, params.report) : null;
  return {
    kernel,
    chars,
    start_wall_ms: startWall,
    probe_idle_ms: Math.round(probeIdle.ms),
    probe_during_ms: Math.round(probeBusy.ms),
    long_tasks: longTasks.count,
    long_max_ms: Math.round(longTasks.max_ms),
    answers,
  };
});
