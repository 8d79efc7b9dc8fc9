// Browser benchmark of a responsive page (benchmarks/browser_responsiveness.py
// runs it; tests/test_browser_responsiveness.py runs a tiny one). Not a timed
// test: it reports figures.
//
// In JupyterLab (frontend "lab") or Notebook 7 ("notebook7"), the notebook's
// cell 0 shows a ChatWidget on a ScriptedSource typing a long Markdown answer;
// cell 1 is a probe (print("probe-ok")). The probe is run the way a person
// runs it (click its prompt once, then Ctrl+Enter) `idle_probes` times with nothing
// streaming, then again and again while the answer streams. A probe's round
// trip is from the moment the key is pressed (page clock, just before the
// press is dispatched) to the moment its output node is added to the DOM: it
// includes the page's input queue, the kernel's execute round trip and the
// page rendering the output, i.e. everything that makes a busy page feel slow.
//
// Long tasks (> 50 ms) are recorded twice: by a PerformanceObserver
// ('longtask') in the page, and, with `trace`, by a Chromium performance trace
// over the same span (CDP Tracing.start / Tracing.end through
// page.context().newCDPSession(page)). Each long task of the trace (a RunTask
// of the renderer's main thread over 50 ms) is explained: what started it
// (animation frame, timer, event such as a websocket message, ...), and where
// its time went, as self time by class: script by where it was entered
// (the widget: blob: URLs, as anywidget imports it; a JupyterLab / Notebook
// bundle; an extension such as the widget manager), style, layout (and how
// much of it script forced by reading layout), paint, GC, HTML parsing. With
// the sampling profiler in the trace (`profile`), script time is also split by
// the function that ran (the leaf frame's URL and name), which tells the
// widget's own code apart from JupyterLab's even when JupyterLab called it.
//
// params: { notebook, frontend = "lab", chat_cell = 0, probe_cell = 1,
//           needle = "probe-ok", idle_probes = 8, probe_gap_ms = 100,
//           prompt = "Write a long answer",
//           css: an extra style sheet for the page (experiments),
// (a variant's debug switches are in the notebook's cell: the widget's `debug` trait)
//           trace = true, profile = true, timeout_ms = 240000,
//           trace_file: save the raw trace here (gzipped JSON; `node trace.mjs FILE` explains it) }
import { chat, counters, SEL, sendPrompt, waitForChat, FINAL_STATUSES as FINAL } from './chat.mjs';
import fs from 'node:fs';
import zlib from 'node:zlib';
import { openNotebook, runCell, runFirstCellInNotebook7, scenario } from './lab.mjs';
import { probeOnce, quantile, selectCell, stat } from './probe.mjs';
import { analyseTrace, endTrace, startTrace } from './trace.mjs';


const r1 = (x) => (x === null || x === undefined ? null : Math.round(x * 10) / 10);

/** Resolves with the message's status once it is final; a MutationObserver, no polling. */
function finalStatus(page, id, timeout) {
  return page.evaluate(
    ({ sel, id, final, timeout }) =>
      new Promise((resolve, reject) => {
        const m = document.querySelector(`${sel.root} ${sel.message}[data-id="${CSS.escape(id)}"]`);
        const check = () => (final.includes(m.dataset.status) ? m.dataset.status : null);
        if (check()) return resolve(check());
        const timer = setTimeout(() => reject(new Error(`reply ${id} not final after ${timeout} ms`)), timeout);
        const obs = new MutationObserver(() => {
          const s = check();
          if (s) {
            clearTimeout(timer);
            obs.disconnect();
            resolve(s);
          }
        });
        obs.observe(m, { attributes: true, attributeFilter: ['data-status'] });
      }),
    { sel: SEL, id, final: FINAL, timeout },
  );
}

function startLongTasks() {
  const rec = { longtasks: [], frames: [], stopped: false };
  const po = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) rec.longtasks.push({ t: e.startTime, d: e.duration });
  });
  po.observe({ type: 'longtask' });
  const tick = (t) => {
    if (rec.stopped) return;
    rec.frames.push(t);
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  window.__nbsResp = { rec, stop: () => ((rec.stopped = true), po.disconnect()) };
}

// ---- the scenario --------------------------------------------------------

await scenario(async ({ page, params, log }) => {
  const frontend = params.frontend ?? 'lab';
  const chatCell = params.chat_cell ?? 0;
  const probeCell = params.probe_cell ?? 1;
  const needle = params.needle ?? 'probe-ok';
  const gap = params.probe_gap_ms ?? 100;
  const trace = params.trace ?? true;
  await page.addInitScript(
    ({ css }) => {
      if (css) {
        // an experiment's extra style sheet (benchmarks/browser_responsiveness.py --variants)
        document.addEventListener('DOMContentLoaded', () => {
          const style = document.createElement('style');
          style.textContent = css;
          document.head.appendChild(style);
        });
      }
    },
    { css: params.css ?? '' },
  );

  let openMs;
  if (frontend === 'lab') {
    openMs = await openNotebook(page, params.notebook);
    await runCell(page, chatCell);
  } else if (frontend === 'notebook7') {
    // Notebook 7 exposes no application object: the widget cell (the first) runs from the keyboard
    const t0 = Date.now();
    await runFirstCellInNotebook7(page, params.notebook, page.locator(SEL.root).first());
    openMs = Date.now() - t0;
  } else {
    throw new Error(`unknown frontend ${frontend}`);
  }
  await waitForChat(page);
  // the first probe also warms the kernel's execute path up; it is not counted
  await selectCell(page, probeCell);
  await probeOnce(page, probeCell, needle);
  await page.evaluate(startLongTasks);
  const cdp = trace ? await startTrace(page, { profile: params.profile ?? true }) : null;
  await page.evaluate(() => performance.mark('nbs-trace-start'));

  const idle = [];
  for (let i = 0; i < (params.idle_probes ?? 12); i++) {
    idle.push(await probeOnce(page, probeCell, needle));
    await page.waitForTimeout(gap); // the probe's pacing: one person running a cell now and then
  }

  const c0 = await counters(page);
  await page.evaluate(() => performance.mark('nbs-stream-start'));
  const tSend = await page.evaluate(() => performance.now());
  const id = await sendPrompt(page, params.prompt ?? 'Write a long answer', { fill: true });
  let finished = null;
  const done = finalStatus(page, id, params.timeout_ms ?? 240_000).then((s) => {
    finished = s;
    return s;
  });
  await selectCell(page, probeCell); // sending left the focus in the chat's input box
  const during = [];
  while (finished === null) {
    const p = await probeOnce(page, probeCell, needle);
    if (finished === null) during.push(p);
    await page.waitForTimeout(gap); // the probe's pacing, as above
  }
  const status = await done;
  const tFinal = await page.evaluate(() => {
    performance.mark('nbs-stream-end');
    return performance.now();
  });
  const c1 = await counters(page);
  await page.waitForTimeout(300);
  const rec = await page.evaluate(() => {
    window.__nbsResp.stop();
    return window.__nbsResp.rec;
  });
  let traced = null;
  if (cdp) {
    const t0 = Date.now();
    const events = await endTrace(cdp);
    if (params.trace_file) fs.writeFileSync(params.trace_file, zlib.gzipSync(JSON.stringify(events)));
    traced = analyseTrace(events);
    traced.read_ms = Date.now() - t0;
    log(`trace: ${events.length} events, ${traced.long_tasks} long tasks`);
  }
  const chars = await chat(page).locator(`${SEL.message}[data-id="${id}"] ${SEL.text}`).evaluate((el) => el.textContent.length);

  const inStream = (t) => t >= tSend && t <= tFinal;
  const lt = rec.longtasks;
  const ltStream = lt.filter((e) => inStream(e.t));
  const frames = rec.frames.filter(inStream);
  const gaps = frames.slice(1).map((t, i) => t - frames[i]);
  const ms = (xs) => xs.map((p) => p.ms);
  const idleStat = stat(ms(idle));
  const duringStat = stat(ms(during));
  return {
    frontend,
    status,
    open_ms: openMs,
    chars,
    stream_ms: r1(tFinal - tSend),
    probe_idle_ms: idleStat,
    probe_stream_ms: duringStat,
    probe_ratio: {
      p50: idleStat.p50 ? r1(duringStat.p50 / idleStat.p50) : null,
      p95: idleStat.p95 ? r1(duringStat.p95 / idleStat.p95) : null,
    },
    probes: { idle: ms(idle).map(r1), stream: ms(during).map(r1) },
    long_tasks: {
      count: ltStream.length,
      idle_count: lt.length - ltStream.length,
      max_ms: r1(ltStream.length ? Math.max(...ltStream.map((e) => e.d)) : 0),
      total_ms: r1(ltStream.reduce((a, e) => a + e.d, 0)),
    },
    frames: { count: frames.length, gap_p95_ms: r1(quantile(gaps, 0.95)), gaps_over_50: gaps.filter((g) => g > 50).length, gap_max_ms: r1(gaps.length ? Math.max(...gaps) : null) },
    widget: {
      renders: c1.renders - c0.renders,
      frames: c1.frames - c0.frames,
      deltas: c1.deltas - c0.deltas,
      acks: c1.acks - c0.acks,
      render_ms: r1(c1.render_ms - c0.render_ms),
      max_render_ms: r1(c1.max_render_ms),
    },
    trace: traced,
  };
});
