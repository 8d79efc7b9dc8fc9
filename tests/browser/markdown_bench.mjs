// Browser benchmark of Markdown streaming (benchmarks/browser_markdown.py runs
// it; tests/test_browser_rendering.py runs a short one). Not a timed test: it
// reports figures.
//
// The notebook's cell 0 shows a ChatWidget on a ScriptedSource that types a
// long Markdown answer at a set rate; cell 1 writes that reply's timeline (the
// wall-clock time of each piece) to `timeline` (a file next to the notebook),
// which is read back through the contents API. In the page, a recorder
// counts frames, long tasks (PerformanceObserver), and each DOM update of the
// widget (one MutationObserver callback: its records, and the characters of
// text shown then, from the widget's counters). Token-to-pixel lag is, per
// piece, the time from its production in the kernel to the DOM update that
// showed it (both clocks are this machine's wall clock).
//
// Per-stage breakdown of that lag, per piece (medians): kernel (produced ->
// its delta sent: coalescing and the pump), wire (sent -> the page's
// websocket received it: comm, server, websocket), to DOM (received -> the
// DOM update that showed it: frame scheduling and rendering), to paint (that
// update -> the start of the next animation frame, after the browser painted
// it). Delta arrival times come from a WebSocket wrapper installed before the
// page loads; the kernel's flush times from the timeline file.
//
// mode "incremental" is the widget as shipped; "full" re-renders the whole
// answer each frame, "per-view" renders from a frame loop of the view's own: the
// notebook's widget says so in its `debug` trait (benchmarks/browser_markdown.py
// writes it; ViewDebug in nbstream/widgets/protocol.py); here `mode` only names the run.
// params: { notebook, timeline, mode, prompt, timeout_ms = 180000,
//           settle_count, settle_ms: a chat opened with a history of settle_count
//           messages is left to settle for settle_ms before the stream (the history
//           and its `lazy` switch are in the notebook: benchmarks/browser_long_chat.py),
//           trace: a file for a Chrome performance trace of the stream (optional) }
import { counters, sendPrompt, waitForChat, waitForStatus, FINAL_STATUSES as FINAL } from './chat.mjs';
import { openNotebook, runCell, scenario, TOKEN, URL_BASE } from './lab.mjs';


function startRecorder() {
  const root = document.querySelector('.nbs-chat');
  const c = root.__nbstream;
  const rec = { frames: [], batches: [], longtasks: [], origin: performance.timeOrigin, stopped: false };
  let frame = 0;
  const tick = (t) => {
    if (rec.stopped) return;
    frame += 1;
    rec.frames.push(t);
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  const mo = new MutationObserver((records) => {
    rec.batches.push({ t: performance.now(), frame, n: records.length, chars: c.chars });
  });
  mo.observe(root, { subtree: true, childList: true, characterData: true, attributes: true });
  const po = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) rec.longtasks.push({ t: e.startTime, d: e.duration });
  });
  po.observe({ type: 'longtask' });
  rec.counters0 = { ...c };
  window.__nbsBench = { rec, stop: () => ((rec.stopped = true), mo.disconnect(), po.disconnect()) };
}

function stopRecorder() {
  const { rec, stop } = window.__nbsBench;
  stop();
  rec.counters1 = { ...document.querySelector('.nbs-chat').__nbstream };
  return rec;
}

const quantile = (xs, q) => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};
const r1 = (x) => (x === null ? null : Math.round(x * 10) / 10);

async function readTimeline(notebookDir, name) {
  const rel = notebookDir ? `${notebookDir}/${name}` : name;
  const res = await fetch(`${URL_BASE}api/contents/${rel.split('/').map(encodeURIComponent).join('/')}?content=1&type=file&format=text`, {
    headers: { Authorization: `token ${TOKEN}` },
  });
  if (!res.ok) throw new Error(`reading ${rel}: HTTP ${res.status}`);
  return JSON.parse((await res.json()).content);
}

await scenario(async ({ browser, page, params, log }) => {
  const mode = params.mode ?? 'incremental';
  await page.addInitScript(() => {
    // arrival time of each delta message (wall clock, ms), before JupyterLab handles it
    window.__nbsReceived = [];
    const Orig = window.WebSocket;
    const dec = new TextDecoder();
    window.WebSocket = class extends Orig {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (ev) => {
          const t = performance.timeOrigin + performance.now();
          const d = ev.data;
          const text = typeof d === 'string' ? d : d instanceof ArrayBuffer ? dec.decode(d) : '';
          // a delta is an update's key "m<i>.<seq>" (per-message keys, nbstream/widgets/protocol.py);
          // the bench's chat streams one reply, so a seq names one delta
          for (const m of text.matchAll(/"m\d+\.(\d+)"\s*:/g)) {
            window.__nbsReceived.push({ seq: Number(m[1]), t });
          }
        });
      }
    };
  });
  await openNotebook(page, params.notebook);
  await runCell(page, 0);
  await waitForChat(page);
  // a chat opened with a history (benchmarks/browser_long_chat.py): let it settle first
  if (params.settle_count) {
    await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat .nbs-message').length >= n, params.settle_count, { timeout: 300_000, polling: 200 });
    await page.waitForTimeout(params.settle_ms ?? 3000);
  }
  await page.evaluate(startRecorder);

  const prompt = params.prompt ?? 'Write a long answer';
  if (params.trace) {
    await browser.startTracing(page, {
      path: params.trace,
      categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8', 'blink.user_timing'],
    });
  }
  // only this reply's deltas count (a history's keys m<i>.<seq> arrived before)
  const tSend = await page.evaluate(() => {
    window.__nbsReceived = [];
    return performance.now();
  });
  const id = await sendPrompt(page, prompt, { fill: true });
  const status = await waitForStatus(page, id, FINAL, { timeout: params.timeout_ms ?? 180_000 });
  const tFinal = await page.evaluate(() => performance.now());
  await page.waitForTimeout(500);
  const rec = await page.evaluate(stopRecorder);
  if (params.trace) await browser.stopTracing();
  await runCell(page, 1);
  const dir = params.notebook.includes('/') ? params.notebook.slice(0, params.notebook.lastIndexOf('/')) : '';
  const tl = await readTimeline(dir, params.timeline);
  log(`${mode}: ${tl.offsets_ms.length} pieces, status ${status}, ${rec.batches.length} DOM updates`);

  // the stream, as the page saw it: from the first text to the final state
  // characters shown before the reply: any history, and the user's message
  const base = rec.counters0.chars + prompt.length;
  const updates = rec.batches.filter((b) => b.t >= tSend);
  const firstText = updates.find((b) => b.chars > base);
  const from = firstText ? firstText.t : tSend;
  const inStream = updates.filter((b) => b.t >= from && b.t <= tFinal + 100);
  const frames = rec.frames.filter((t) => t >= from && t <= tFinal);
  const gaps = frames.slice(1).map((t, i) => t - frames[i]);
  const longtasks = rec.longtasks.filter((e) => e.t + e.d >= from && e.t <= tFinal + 100);
  const perFrame = new Map();
  for (const b of inStream) perFrame.set(b.frame, (perFrame.get(b.frame) ?? 0) + 1);

  // token-to-pixel lag: each piece against the first DOM update that shows it
  const lags = [];
  let cum = 0;
  let j = 0;
  const shown = updates.map((b) => ({ t: rec.origin + b.t, chars: b.chars - base }));
  for (let i = 0; i < tl.offsets_ms.length; i++) {
    cum += tl.chars[i];
    while (j < shown.length && shown[j].chars < cum) j++;
    if (j >= shown.length) break;
    lags.push(shown[j].t - (tl.t0_ms + tl.offsets_ms[i]));
  }
  // per-stage breakdown (see the header): per piece, through the delta that carried it
  const received = new Map();
  for (const r of await page.evaluate(() => window.__nbsReceived)) {
    if (!received.has(r.seq)) received.set(r.seq, r.t); // first arrival (a resync repeats)
  }
  const stages = { kernel: [], wire: [], to_dom: [], to_paint: [] };
  const frameTimes = rec.frames.map((t) => rec.origin + t);
  if (tl.flushes) {
    let cumD = 0;
    let jd = 0;
    let kf = 0;
    let piece = 0;
    let cumP = 0;
    for (const [seq, , sentMs, chars] of tl.flushes) {
      cumD += chars;
      while (jd < shown.length && shown[jd].chars < cumD) jd++;
      const recv = received.get(seq);
      const sent = tl.t0_ms + sentMs;
      const dom = jd < shown.length ? shown[jd].t : null;
      while (kf < frameTimes.length && dom !== null && frameTimes[kf] <= dom) kf++;
      const paint = kf < frameTimes.length ? frameTimes[kf] : null;
      // the pieces this delta carried
      while (piece < tl.offsets_ms.length && cumP + tl.chars[piece] <= cumD) {
        cumP += tl.chars[piece];
        const produced = tl.t0_ms + tl.offsets_ms[piece];
        piece++;
        if (recv === undefined || dom === null || paint === null) continue;
        stages.kernel.push(sent - produced);
        stages.wire.push(recv - sent);
        stages.to_dom.push(dom - recv);
        stages.to_paint.push(paint - dom);
      }
    }
  }
  const stage = (xs) => ({ p50: r1(quantile(xs, 0.5)), p95: r1(quantile(xs, 0.95)) });
  const renders = rec.counters1.renders - rec.counters0.renders;
  const rafs = rec.counters1.frames - rec.counters0.frames;
  return {
    mode,
    status,
    pieces: tl.offsets_ms.length,
    chars: tl.chars.reduce((a, b) => a + b, 0),
    kernel_stats: tl.stats,
    stream_ms: r1(tFinal - from),
    long_tasks: { count: longtasks.length, max_ms: r1(longtasks.length ? Math.max(...longtasks.map((e) => e.d)) : 0), total_ms: r1(longtasks.reduce((a, e) => a + e.d, 0)) },
    frames: { count: frames.length, gap_p50_ms: r1(quantile(gaps, 0.5)), gap_p95_ms: r1(quantile(gaps, 0.95)), gap_max_ms: r1(gaps.length ? Math.max(...gaps) : null) },
    dom_updates: {
      count: inStream.length,
      records_p50: quantile(inStream.map((b) => b.n), 0.5),
      records_p95: quantile(inStream.map((b) => b.n), 0.95),
      records_max: inStream.length ? Math.max(...inStream.map((b) => b.n)) : null,
      per_frame_max: perFrame.size ? Math.max(...perFrame.values()) : 0,
      frames_with_more_than_one: [...perFrame.values()].filter((n) => n > 1).length,
    },
    renders_per_frame: r1(rafs ? renders / rafs : null),
    widget_counters: { renders, frames: rafs, deltas: rec.counters1.deltas - rec.counters0.deltas, acks: rec.counters1.acks - rec.counters0.acks, resyncs: rec.counters1.resyncs - rec.counters0.resyncs },
    lag_ms: {
      measured: lags.length,
      p50: r1(quantile(lags, 0.5)),
      p95: r1(quantile(lags, 0.95)),
      max: r1(lags.length ? Math.max(...lags) : null),
      first: r1(lags[0] ?? null),
      last: r1(lags.at(-1) ?? null),
    },
    stages_ms: {
      measured: stages.kernel.length,
      deltas_received: received.size,
      kernel: stage(stages.kernel),
      wire: stage(stages.wire),
      to_dom: stage(stages.to_dom),
      to_paint: stage(stages.to_paint),
    },
    counters: await counters(page),
  };
});
