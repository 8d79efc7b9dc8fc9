// Ack cost benchmark (benchmarks/browser_acks.py): N ChatWidgets stream at once
// while the page counts every websocket frame of the kernel connection, by
// direction and msg_type, from the start cell until all replies are final.
// params: { notebook, widgets = 8, acks = "sparse" | "every-frame",
//           setup_cell = 0, probe_cell = 1, start_cell = 2, probe_after_ms = 700, produce_ms }
// With "every-frame" the notebook's widgets say so in their `debug` trait
// (benchmarks/browser_acks.py writes it): their views then ack every frame that
// rendered deltas (the previous way); here `acks` only names the run.
import { now } from './chat.mjs';
import { openNotebook, runCell, scenario, watchOutput } from './lab.mjs';
import { startRecorder, waitAllFinal, watchLongTasks } from './record.mjs';

/** msg_type of a kernel websocket frame (v1 binary protocol or JSON): the header's comes first. */
function msgType(payload) {
  const head = typeof payload === 'string' ? payload.slice(0, 4000) : payload.subarray(0, 4000).toString('latin1');
  const m = /"msg_type":\s*"([a-z_]+)"/.exec(head);
  return m ? m[1] : 'unknown';
}

await scenario(async ({ page, params }) => {
  const n = params.widgets ?? 8;
  const probeCell = params.probe_cell ?? 1;
  const counts = { on: false, received: {}, sent: {}, received_bytes: 0 };
  page.on('websocket', (ws) => {
    if (!ws.url().includes('/channels')) return;
    ws.on('framereceived', (f) => {
      if (!counts.on) return;
      const t = msgType(f.payload);
      counts.received[t] = (counts.received[t] ?? 0) + 1;
      counts.received_bytes += f.payload.length;
    });
    ws.on('framesent', (f) => {
      if (!counts.on) return;
      const t = msgType(f.payload);
      counts.sent[t] = (counts.sent[t] ?? 0) + 1;
    });
  });
  await openNotebook(page, params.notebook);
  await runCell(page, params.setup_cell ?? 0);
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat').length >= n, n, { timeout: 30_000 });

  let watch = await watchOutput(page, probeCell, 'probe-ok');
  await runCell(page, probeCell, { via: 'keyboard' });
  const probeIdle = await watch.wait();

  const targets = Array.from({ length: n }, (_, i) => ({ name: `w${i}`, root: i, counters: true }));
  const rec = await startRecorder(page, targets);
  const long = await watchLongTasks(page);
  const tStart = await now(page);
  counts.on = true;
  await runCell(page, params.start_cell ?? 2);
  await page.waitForTimeout(params.probe_after_ms ?? 700);
  watch = await watchOutput(page, probeCell, 'probe-ok', { timeout: 60_000 });
  await runCell(page, probeCell, { via: 'keyboard' });
  const probeBusy = await watch.wait();
  for (let i = 0; i < n; i++) await waitAllFinal(page, { index: i, timeout: 90_000 });
  const tFinal = await now(page);
  await page.waitForTimeout(500); // the trailing acks and their statuses
  counts.on = false;
  const record = await rec.stop();
  const longTasks = await long.read();
  // frame gaps over 50 ms while streaming: from the per-frame samples of all widgets
  const ts = [...new Set(Object.values(record.series).flat().map((s) => s.t))].sort((a, b) => a - b);
  let gaps50 = 0;
  for (let i = 1; i < ts.length; i++) if (ts[i] - ts[i - 1] > 50) gaps50++;
  const lastDelta = Math.max(...Object.values(record.series).map((ser) => ser.at(-1)?.t ?? -Infinity));
  const perWidget = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].map((r) => JSON.parse(JSON.stringify(r.__nbstream))),
  );
  const statuses = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].map((r) => r.querySelector('.nbs-message[data-role="assistant"]')?.dataset.status ?? null),
  );
  const received = Object.values(counts.received).reduce((a, b) => a + b, 0);
  return {
    widgets: n,
    acks_mode: params.acks ?? 'sparse',
    stream_ms: Math.round(tFinal - tStart),
    received_total: received,
    received_status: counts.received.status ?? 0,
    received_comm: counts.received.comm_msg ?? 0,
    received_bytes: counts.received_bytes,
    received_by_type: counts.received,
    sent_by_type: counts.sent,
    acks_sent: perWidget.reduce((a, c) => a + c.acks, 0),
    deltas_received: perWidget.reduce((a, c) => a + c.deltas, 0),
    renders: perWidget.reduce((a, c) => a + c.renders, 0),
    long_tasks: longTasks.count,
    long_max_ms: Math.round(longTasks.max_ms),
    frame_gaps_over_50ms: gaps50,
    max_frame_gap_ms: Math.round(record.max_frame_gap_ms),
    probe_idle_ms: Math.round(probeIdle.ms),
    probe_during_ms: Math.round(probeBusy.ms),
    // the last change on the page after the producers' scheduled end (start cell + produce_ms)
    end_lag_ms: params.produce_ms ? Math.round(lastDelta - tStart - params.produce_ms) : null,
    statuses,
  };
});
