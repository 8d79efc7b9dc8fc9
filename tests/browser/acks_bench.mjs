// Many streams on one page (benchmarks/browser_acks.py): N ChatWidgets stream at
// once while the page counts every websocket frame of the kernel connection, by
// direction and msg_type, from the start cell until all replies are final; long
// tasks, frames the page missed (gaps > 50 ms between animation frames), how many
// animation-frame callbacks nbstream's code ran per frame, and a probe cell run
// from the keyboard again and again while they stream (and before, idle).
// params: { notebook, widgets = 8, mode_name (only names the run: the variant is
//           in the notebook, set by benchmarks/browser_acks.py in each widget's
//           `debug` trait, e.g. { frames: "per-view" }, { acks: "every-frame" }),
//           setup_cell = 0, probe_cell = 1, start_cell = 2, idle_probes = 8,
//           probe_gap_ms = 100, produce_ms, trace = false, profile = false, trace_file,
//           viewport_height: the window's height in px (default 900) }
// The trace (CDP Tracing, trace.mjs) explains where the main thread's time went
// while the streams ran: by class, and by rendering step (Layerize, Paint, ...).
import fs from 'node:fs';
import zlib from 'node:zlib';
import { now } from './chat.mjs';
import { openNotebook, runCell, scenario } from './lab.mjs';
import { probeOnce, selectCell, stat } from './probe.mjs';
import { countWidgetFrames, readWidgetFrames, resetWidgetFrames, startRecorder, watchLongTasks } from './record.mjs';
import { analyseTrace, endTrace, startTrace } from './trace.mjs';

const FINAL = ['done', 'stopped', 'error', 'timeout'];

/** msg_type of a kernel websocket frame (v1 binary protocol or JSON): the header's comes first. */
function msgType(payload) {
  const head = typeof payload === 'string' ? payload.slice(0, 4000) : payload.subarray(0, 4000).toString('latin1');
  const m = /"msg_type":\s*"([a-z_]+)"/.exec(head);
  return m ? m[1] : 'unknown';
}

/** Whether every widget's assistant messages are final (one cheap look). */
function allFinal(page, n) {
  return page.evaluate(
    ({ n, final }) => {
      const roots = [...document.querySelectorAll('.nbs-chat')].slice(0, n);
      return roots.length === n && roots.every((r) => {
        const ms = [...r.querySelectorAll('.nbs-message[data-role="assistant"]')];
        return ms.length > 0 && ms.every((m) => final.includes(m.dataset.status));
      });
    },
    { n, final: FINAL },
  );
}

await scenario(async ({ page, params, log }) => {
  const n = params.widgets ?? 8;
  const probeCell = params.probe_cell ?? 1;
  const needle = 'probe-ok';
  const gap = params.probe_gap_ms ?? 100;
  await page.addInitScript(countWidgetFrames);
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
  if (params.viewport_height) {
    // a tall window: every widget in sight (the default shows about two of eight)
    await page.setViewportSize({ width: 1280, height: params.viewport_height });
  }
  await openNotebook(page, params.notebook);
  await runCell(page, params.setup_cell ?? 0);
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat').length >= n, n, { timeout: 60_000 });

  // the first probe also warms the kernel's execute path up; it is not counted
  await selectCell(page, probeCell);
  await probeOnce(page, probeCell, needle);
  const idle = [];
  for (let i = 0; i < (params.idle_probes ?? 8); i++) {
    idle.push(await probeOnce(page, probeCell, needle));
    await page.waitForTimeout(gap);
  }

  const targets = Array.from({ length: n }, (_, i) => ({ name: `w${i}`, root: i, counters: true }));
  const cdp = params.trace ? await startTrace(page, { profile: params.profile ?? false }) : null;
  await page.evaluate(() => performance.mark('nbs-trace-start'));
  const rec = await startRecorder(page, targets);
  const long = await watchLongTasks(page);
  await resetWidgetFrames(page);
  const frames0 = await readWidgetFrames(page);
  const tStart = await now(page);
  await page.evaluate(() => performance.mark('nbs-stream-start'));
  counts.on = true;
  await runCell(page, params.start_cell ?? 2);
  await selectCell(page, probeCell); // running the start cell made it the active one
  const during = [];
  while (!(await allFinal(page, n))) {
    const p = await probeOnce(page, probeCell, needle, 60_000);
    if (!(await allFinal(page, n))) during.push(p);
    await page.waitForTimeout(gap);
    if ((await now(page)) - tStart > (params.timeout_ms ?? 180_000)) throw new Error('the streams did not end');
  }
  const tFinal = await now(page);
  await page.evaluate(() => performance.mark('nbs-stream-end'));
  await page.waitForTimeout(500); // the trailing acks and their statuses
  counts.on = false;
  const record = await rec.stop();
  const longTasks = await long.read();
  const frames1 = await readWidgetFrames(page);
  let traced = null;
  if (cdp) {
    const events = await endTrace(cdp);
    if (params.trace_file) fs.writeFileSync(params.trace_file, zlib.gzipSync(JSON.stringify(events)));
    traced = analyseTrace(events);
    log(`trace: ${events.length} events, ${traced.long_tasks} long tasks`);
  }
  const lastChange = Math.max(...Object.values(record.series).map((ser) => ser.at(-1)?.t ?? -Infinity));
  const perWidget = await page.evaluate((n) =>
    [...document.querySelectorAll('.nbs-chat')].slice(0, n).map((r) => JSON.parse(JSON.stringify(r.__nbstream))),
    n,
  );
  const statuses = await page.evaluate((n) =>
    [...document.querySelectorAll('.nbs-chat')].slice(0, n).map((r) => r.querySelector('.nbs-message[data-role="assistant"]')?.dataset.status ?? null),
    n,
  );
  // the page's one frame loop (js/src/scheduler.ts), when the views use it
  const pageLoop = await page.evaluate(() => {
    const l = window.__nbstreamFrames1;
    return l ? JSON.parse(JSON.stringify(l.stats)) : null;
  });
  const received = Object.values(counts.received).reduce((a, b) => a + b, 0);
  const ms = (xs) => xs.map((p) => p.ms);
  const idleStat = stat(ms(idle));
  const duringStat = stat(ms(during));
  const wfFrames = frames1.frames - frames0.frames;
  return {
    widgets: n,
    mode: params.mode_name ?? null,
    t_start: Math.round(tStart),
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
    // characters of message text each view shows at the end (the benchmark checks them)
    chars: perWidget.map((c) => c.chars),
    long_tasks: longTasks.count,
    long_max_ms: Math.round(longTasks.max_ms),
    long_list: longTasks.list.map((e) => [Math.round(e.t - tStart), Math.round(e.ms)]),
    frames: record.frames,
    frame_gaps_over_50ms: record.frame_gaps_over_50ms,
    max_frame_gap_ms: Math.round(record.max_frame_gap_ms),
    // animation-frame callbacks nbstream's code ran while streaming, per frame that ran any
    widget_raf_callbacks: frames1.callbacks - frames0.callbacks,
    widget_raf_frames: wfFrames,
    widget_raf_per_frame: wfFrames ? Math.round(((frames1.callbacks - frames0.callbacks) / wfFrames) * 100) / 100 : null,
    widget_raf_max_per_frame: frames1.max_per_frame,
    probe_idle_ms: idleStat,
    probe_stream_ms: duringStat,
    probes: { idle: ms(idle).map(Math.round), stream: ms(during).map(Math.round) },
    // the last change on the page after the producers' scheduled end (start cell + produce_ms)
    end_lag_ms: params.produce_ms ? Math.round(lastChange - tStart - params.produce_ms) : null,
    statuses,
    page_loop: pageLoop,
    trace: traced,
  };
});
