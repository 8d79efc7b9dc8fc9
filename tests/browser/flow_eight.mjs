// 8 widgets streaming at once: 8 ChatWidgets on one page, each answering from a
// ScriptedSource at 2,000 pieces/s (the notebook's TEXTS: pieces of each reply),
// started together by one cell. Counts the
// delta messages the page receives (the widgets' own __nbstream.deltas
// counters), long tasks, frame gaps, and how long a probe cell takes to print
// while they stream (and before, idle). Returns every final text.
// params: { notebook, widgets = 8, setup_cell = 0, probe_cell = 1, start_cell = 2,
//         }
// Screenshot: <artifact>.png
import { now } from './chat.mjs';
import { assistantTexts, kernelJson, startRecorder, waitAllFinal, watchLongTasks } from './record.mjs';
import { openNotebook, runCell, scenario, watchOutput } from './lab.mjs';

const sumDeltas = (page) =>
  page.evaluate(() => [...document.querySelectorAll('.nbs-chat')].reduce((n, r) => n + (r.__nbstream?.deltas ?? 0), 0));

await scenario(async ({ page, params }) => {
  const n = params.widgets ?? 8;
  const probeCell = params.probe_cell ?? 1;
  const openMs = await openNotebook(page, params.notebook);
  await runCell(page, params.setup_cell ?? 0);
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat').length >= n, n, { timeout: 30_000 });

  let watch = await watchOutput(page, probeCell, 'probe-ok');
  await runCell(page, probeCell, { via: 'keyboard' });
  const probeIdle = await watch.wait();

  const targets = Array.from({ length: n }, (_, i) => ({ name: `w${i}`, root: i, counters: true }));
  const rec = await startRecorder(page, targets);
  const long = await watchLongTasks(page);
  const deltas0 = await sumDeltas(page);
  const tStart = await now(page);
  await runCell(page, params.start_cell ?? 2);
  // the probe goes once every stream shows text (not after a fixed time, which a
  // loaded machine could spend before the streams even start)
  await page.waitForFunction(
    (n) => {
      const roots = [...document.querySelectorAll('.nbs-chat')];
      return roots.length >= n && roots.every((r) => (r.querySelector('.nbs-message[data-role="assistant"] .nbs-text')?.textContent.length ?? 0) > 0);
    },
    n,
    { timeout: 60_000, polling: 'raf' },
  );
  const statusesAtProbe = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].map((r) => r.querySelector('.nbs-message[data-role="assistant"]')?.dataset.status ?? null),
  );
  watch = await watchOutput(page, probeCell, 'probe-ok', { timeout: 60_000 });
  const tProbe = await now(page);
  await runCell(page, probeCell, { via: 'keyboard' });
  const probeBusy = await watch.wait();
  for (let i = 0; i < n; i++) await waitAllFinal(page, { index: i, timeout: 60_000 });
  await page.waitForTimeout(300);
  const record = await rec.stop();
  const longTasks = await long.read();
  const deltas1 = await sumDeltas(page);

  // the streaming window: first to last delta the page received
  const all = Object.values(record.series).flat().filter((s) => s.deltas >= 0);
  const firstDelta = Math.min(...Object.values(record.series).map((ser) => ser.find((s, i) => i > 0 && s.deltas > ser[0].deltas)?.t ?? Infinity));
  const lastDelta = Math.max(...Object.values(record.series).map((ser) => ser.at(-1)?.t ?? -Infinity));
  const windowMs = lastDelta - firstDelta;
  // messages per second, per one-second bucket of the window
  const buckets = new Map();
  for (const ser of Object.values(record.series)) {
    for (let i = 1; i < ser.length; i++) {
      const d = ser[i].deltas - ser[i - 1].deltas;
      if (d > 0) {
        const b = Math.floor((ser[i].t - firstDelta) / 1000);
        buckets.set(b, (buckets.get(b) ?? 0) + d);
      }
    }
  }
  const perWidget = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].map((r) => JSON.parse(JSON.stringify(r.__nbstream))),
  );
  const texts = [];
  for (let i = 0; i < n; i++) texts.push((await assistantTexts(page, i))[0] ?? null);
  // when the kernel's pump flushed each reply (its own clock, seconds): the budget
  // is checked there, not on the page's arrival times, which a busy machine bunches
  const flushTimes = await kernelJson(
    page,
    'print(_nbs_json.dumps([[f.sent_at for f in c.last._stream.timeline()[2]] for c in chats]))',
  );
  // the kernel's replies are the texts sent (TEXTS: each reply's pieces)
  const kernelTextsEqual = await kernelJson(page, "print(_nbs_json.dumps([c.last.text == ''.join(t) for c, t in zip(chats, TEXTS)]))");
  return {
    open_ms: openMs,
    widgets: n,
    deltas_received: deltas1 - deltas0,
    stream_window_ms: Math.round(windowMs),
    messages_per_s: Math.round(((deltas1 - deltas0) * 1000) / Math.max(1, windowMs)),
    max_messages_in_1s: Math.max(0, ...buckets.values()),
    per_widget_deltas: perWidget.map((c) => c.deltas),
    per_widget_renders: perWidget.map((c) => c.renders),
    per_widget_resyncs: perWidget.map((c) => c.resyncs),
    // characters of message text each view shows (the prompt's and the reply's)
    per_widget_chars: perWidget.map((c) => c.chars),
    // the page's time in nbstream's own frame work (render + DOM), all widgets
    render_ms_total: Math.round(perWidget.reduce((n, c) => n + c.render_ms, 0)),
    max_render_ms: Math.max(...perWidget.map((c) => c.max_render_ms)),
    mean_render_ms:
      Math.round((perWidget.reduce((n, c) => n + c.render_ms, 0) / Math.max(1, perWidget.reduce((n, c) => n + c.renders, 0))) * 100) / 100,
    long_tasks: {
      count: longTasks.count,
      total_ms: Math.round(longTasks.total_ms),
      max_ms: Math.round(longTasks.max_ms),
      unsupported: Boolean(longTasks.unsupported),
      // when, in ms from the start cell, and how long
      at: longTasks.list.map((e) => [Math.round(e.t - tStart), Math.round(e.ms)]),
    },
    first_delta_after_ms: Math.round(firstDelta - tStart),
    last_delta_after_ms: Math.round(lastDelta - tStart),
    frames: record.frames,
    max_frame_gap_ms: Math.round(record.max_frame_gap_ms),
    probe_idle_ms: Math.round(probeIdle.ms),
    probe_during_ms: Math.round(probeBusy.ms),
    probe_started_after_ms: Math.round(tProbe - tStart),
    probe_seen_before_last_delta: probeBusy.seen_at < lastDelta,
    statuses_at_probe: statusesAtProbe,
    samples: all.length,
    texts: texts.map((t) => t && { status: t.status, text: t.text }),
    kernel_flush_times: flushTimes,
    kernel_texts_equal: kernelTextsEqual,
  };
});
