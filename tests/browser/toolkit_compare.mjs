// Mode "compare" end to end: two scripted sources answer one prompt at once,
// each in its own pane. Records both answers (their text, every frame) and
// checks that no text of one pane ever shows in the other; stops pane 1 with
// its own Stop button while both stream, then lets pane 0 finish. Also squeezes
// the output to a narrow width: the panes must stack.
// params: { notebook, markers: [pane 0's word prefix, pane 1's word prefix],
//           stop_after_ms = 1200 }
// Screenshots: <artifact>-streaming.png, -narrow.png, <artifact>.png (the end).
import { growthOf, kernelJson, startRecorder, valueAt, waitForAssistants } from './record.mjs';
import { now, FINAL_STATUSES as FINAL } from './chat.mjs';
import { openNotebook, runAllCells, scenario } from './lab.mjs';


await scenario(async ({ page, params, screenshot }) => {
  const [mark0, mark1] = params.markers;
  const openMs = await openNotebook(page, params.notebook);
  const rec = await startRecorder(page, [
    { name: 'pane0', root: 0, nth: 0, keepText: true },
    { name: 'pane1', root: 0, nth: 1, keepText: true },
  ]);
  // a watcher that checks every mutation: no pane ever shows the other's words
  await page.evaluate(({ mark0, mark1 }) => {
    window.__nbsCrossTalk = { checked: 0, violations: [] };
    const check = () => {
      const root = document.querySelector('.nbs-chat[data-mode="compare"]');
      if (!root) return;
      const acc = window.__nbsCrossTalk;
      acc.checked += 1;
      for (const [i, foreign] of [[0, mark1], [1, mark0]]) {
        const pane = root.querySelector(`.nbs-pane[data-pane="${i}"]`);
        const answers = [...(pane?.querySelectorAll('.nbs-message[data-role="assistant"]') ?? [])];
        if (answers.some((m) => (m.textContent ?? '').includes(foreign)) && acc.violations.length < 10) {
          acc.violations.push({ pane: i, foreign });
        }
      }
    };
    new MutationObserver(check).observe(document.body, { childList: true, subtree: true, characterData: true });
  }, { mark0, mark1 });

  const runMs = await runAllCells(page);
  const [id0, id1] = await waitForAssistants(page, { index: 0, n: 2 });
  const layout = await page.evaluate(() => {
    const root = document.querySelector('.nbs-chat');
    const panes = [...root.querySelectorAll('.nbs-panes > .nbs-pane')];
    const boxes = panes.map((p) => p.getBoundingClientRect());
    return {
      mode: root.dataset.mode,
      labels: panes.map((p) => p.querySelector('.nbs-pane-label')?.textContent),
      grid: getComputedStyle(root.querySelector('.nbs-panes')).display,
      side_by_side: boxes.length === 2 && Math.abs(boxes[0].top - boxes[1].top) < 2 && boxes[1].left >= boxes[0].right,
      inputs: root.querySelectorAll('textarea.nbs-input').length,
      pane_stops: root.querySelectorAll('button.nbs-pane-stop').length,
      prompts_per_pane: panes.map((p) => p.querySelectorAll('.nbs-message[data-role="user"]').length),
    };
  });
  // both stream at once for a while
  await page.waitForFunction(
    ({ id0, id1 }) =>
      [id0, id1].every((id) => {
        const m = document.querySelector(`.nbs-message[data-id="${id}"]`);
        return m?.dataset.status === 'running' && m.querySelector('.nbs-text').textContent.length > 0;
      }),
    { id0, id1 },
    { timeout: 30_000, polling: 'raf' },
  );
  const tBoth = await now(page);
  await page.waitForTimeout(params.stop_after_ms ?? 1200);
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  const streamingShot = await screenshot('streaming');
  const paneStatus = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-pane-status')].map((s) => s.textContent),
  );

  // stop pane 1 only
  const tClick = await now(page);
  await page.locator('.nbs-pane[data-pane="1"] button.nbs-pane-stop').click();
  await page.waitForFunction(
    (id) => document.querySelector(`.nbs-message[data-id="${id}"]`)?.dataset.status === 'stopped',
    id1,
    { timeout: 10_000, polling: 'raf' },
  );
  const tStopped = await now(page);
  const pane0AtStop = await page.evaluate(
    (id) => document.querySelector(`.nbs-message[data-id="${id}"]`)?.dataset.status,
    id0,
  );
  await page.waitForFunction(
    ({ id, final }) => final.includes(document.querySelector(`.nbs-message[data-id="${id}"]`)?.dataset.status),
    { id: id0, final: FINAL },
    { timeout: 60_000, polling: 100 },
  );
  await page.waitForTimeout(300);
  const record = await rec.stop();
  const end = await page.evaluate(() => {
    const root = document.querySelector('.nbs-chat');
    return [0, 1].map((i) => {
      const pane = root.querySelector(`.nbs-pane[data-pane="${i}"]`);
      const m = pane.querySelector('.nbs-message[data-role="assistant"]');
      return {
        id: m.dataset.id,
        status: m.dataset.status,
        text: m.querySelector('.nbs-text').textContent,
        pane_status: pane.dataset.status,
        stop_disabled: pane.querySelector('button.nbs-pane-stop').disabled,
      };
    });
  });
  const crossTalk = await page.evaluate(() => window.__nbsCrossTalk);
  const kernel = await kernelJson(
    page,
    'print(_nbs_json.dumps([{"pane": r.pane, "status": r.status, "text": r.text} for r in cmp.last_round]))',
  );

  // narrow cell: the panes stack
  const narrow = await page.evaluate(() => {
    const root = document.querySelector('.nbs-chat');
    const host = root.parentElement;
    const old = host.style.width;
    host.style.width = '420px';
    const boxes = [...root.querySelectorAll('.nbs-pane')].map((p) => p.getBoundingClientRect());
    const stacked = boxes.length === 2 && boxes[1].top >= boxes[0].bottom - 1;
    const overflow = root.scrollWidth - root.clientWidth;
    return { stacked, overflow, restore: old };
  });
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  const narrowShot = await screenshot('narrow');
  await page.evaluate((old) => {
    document.querySelector('.nbs-chat').parentElement.style.width = old;
  }, narrow.restore);

  const s0 = record.series.pane0;
  const s1 = record.series.pane1;
  const window0 = { from: tBoth, to: tClick };
  const stopSample = s1.find((s) => s.status === 'stopped');
  return {
    open_ms: openMs,
    run_all_ms: runMs,
    layout,
    pane_status_while_streaming: paneStatus,
    both_streaming: { pane0: growthOf(s0, window0), pane1: growthOf(s1, window0), window_ms: Math.round(tClick - tBoth) },
    pane_stop_latency_ms: stopSample ? Math.round(stopSample.t - tClick) : null,
    pane0_status_when_pane1_stopped: pane0AtStop,
    pane1_growth_after_stop: stopSample ? (s1.at(-1).length - stopSample.length) : null,
    pane0_growth_after_pane1_stop: growthOf(s0, { from: tStopped }),
    pane0_length_at_pane1_stop: valueAt(s0, tStopped),
    end,
    cross_talk: crossTalk,
    recorded_texts: {
      pane0_foreign: s0.filter((s) => (s.text ?? '').includes(mark1)).length,
      pane1_foreign: s1.filter((s) => (s.text ?? '').includes(mark0)).length,
      samples: [s0.length, s1.length],
    },
    kernel,
    narrow: { stacked: narrow.stacked, overflow: narrow.overflow },
    frames: record.frames,
    screenshots: { streaming: streamingShot, narrow: narrowShot },
  };
});
