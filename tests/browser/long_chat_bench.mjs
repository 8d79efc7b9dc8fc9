// Benchmark (benchmarks/browser_long_chat.py): a chat opened with a long history in
// real JupyterLab. From running its cell: when the end of the chat is first shown
// (rendered, on the page clock), the long tasks until the chat settled (until it was
// shown, also by whose code ran longest in each: byCode); then the
// page's DOM nodes and JS heap (CDP Performance.getMetrics after a forced GC, against
// the page before the cell ran); then a reader scrolling back with the mouse wheel
// (100 px every 50 ms) for `wheel_s` seconds: frame gaps and long tasks. Not a timed
// test: it reports figures.
// params: { notebook, count, mode: "lazy" | "at-once" (the previous way: every message
//           rendered when shown; the notebook's widget says so in its `debug` trait,
//           benchmarks/browser_long_chat.py writes it: here `mode` only names the run),
//           wheel_s = 8, trace: a file for a Chrome trace (with a CPU profile) of the
//           opening, its long tasks explained in the result; the wheel is traced too,
//           into the same name with "-wheel" before ".json", explained under wheel_trace }
import fs from 'node:fs';
import { openNotebook, runCell, scenario } from './lab.mjs';
import { analyseTrace, endTrace, startTrace } from './trace.mjs';

function install() {
  const rec = { first: null, long: [] };
  window.__nbsLongChat = rec;
  try {
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) rec.long.push({ t: e.startTime, ms: e.duration });
    }).observe({ type: 'longtask', buffered: true });
  } catch {
    rec.unsupported = true;
  }
  rec.frames = [];
  try {
    // long animation frames, with the scripts that ran in them (each over 5 ms): whose
    // code made a long task (nbstream's modules are blob: URLs, as anywidget imports them)
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) {
        rec.frames.push({
          t: e.startTime,
          ms: e.duration,
          scripts: e.scripts.map((s) => ({
            t: s.startTime,
            ms: s.duration,
            url: s.sourceURL,
            fn: s.sourceFunctionName,
            invoker: s.invoker,
            type: s.invokerType,
          })),
        });
      }
    }).observe({ type: 'long-animation-frame', buffered: true });
  } catch {
    rec.frames = null;
  }
  const tick = () => {
    const list = document.querySelector('.nbs-chat .nbs-messages');
    const last = list?.lastElementChild;
    if (last && !last.classList.contains('nbs-deferred') && (last.querySelector('.nbs-text')?.textContent ?? '') !== '') {
      rec.first = { t: performance.now(), in_dom: list.children.length, last_id: last.dataset.id };
      return;
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}

async function metrics(cdp) {
  await cdp.send('HeapProfiler.collectGarbage');
  await cdp.send('HeapProfiler.collectGarbage');
  const m = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((x) => [x.name, x.value]));
  return { nodes: m.Nodes, heap_mb: m.JSHeapUsedSize / 1e6 };
}

const summary = (tasks) => ({
  count: tasks.length,
  max_ms: Math.round(Math.max(0, ...tasks.map((e) => e.ms))),
  total_ms: Math.round(tasks.reduce((a, e) => a + e.ms, 0)),
});

/**
 * Whose code ran in each long task: the scripts of the long animation frames
 * (LoAF, each over 5 ms) that ran within the task, by where their code came from:
 * "nbstream" (blob: URLs: the widget's modules as anywidget imports them), "page"
 * (JupyterLab, anywidget, the browser's own), "none" (no script over 5 ms: style,
 * layout, paint, GC). A task counts for whichever ran longest in it. `frames`
 * null: the browser has no LoAF (all "unknown").
 */
function byCode(tasks, frames) {
  const out = { nbstream: 0, page: 0, none: 0, unknown: 0, nbstream_ms: [], tasks: [] };
  for (const task of tasks) {
    if (frames === null) {
      out.unknown++;
      continue;
    }
    const end = task.t + task.ms;
    const ms = { nbstream: 0, page: 0 };
    const ran = [];
    for (const f of frames) {
      for (const s of f.scripts) {
        const overlap = Math.min(end, s.t + s.ms) - Math.max(task.t, s.t);
        if (overlap > 0) {
          ms[s.url.startsWith('blob:') ? 'nbstream' : 'page'] += overlap;
          ran.push(`${s.invoker} ${Math.round(s.ms)} ms${s.url.startsWith('blob:') ? ' (nbstream)' : ''}`);
        }
      }
    }
    const who = ms.nbstream === 0 && ms.page === 0 ? 'none' : ms.nbstream >= ms.page ? 'nbstream' : 'page';
    out[who]++;
    if (who === 'nbstream') out.nbstream_ms.push(Math.round(task.ms));
    out.tasks.push({ ms: Math.round(task.ms), who, scripts: ran });
  }
  return out;
}

await scenario(async ({ page, params, log }) => {
  await page.addInitScript(install);
  await openNotebook(page, params.notebook);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const before = await metrics(cdp);
  const tracing = params.trace ? await startTrace(page, { profile: true }) : null;
  const t0 = await page.evaluate(() => performance.now());
  await runCell(page, 0, { via: 'keyboard' });
  await page.waitForFunction(() => window.__nbsLongChat.first !== null, null, { timeout: 300_000, polling: 100 });
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat .nbs-message').length >= n, params.count, { timeout: 300_000, polling: 200 });
  // settled: no long task for a second
  await page.waitForFunction(
    () => {
      const l = window.__nbsLongChat.long;
      const end = l.length ? l.at(-1).t + l.at(-1).ms : 0;
      return performance.now() - end > 1000;
    },
    null,
    { timeout: 300_000, polling: 250 },
  );
  const rec = await page.evaluate(() => window.__nbsLongChat);
  let explained = null;
  if (tracing !== null) {
    const events = await endTrace(tracing);
    fs.writeFileSync(params.trace, JSON.stringify({ traceEvents: events }));
    explained = analyseTrace(events, { maxTasks: 10 });
  }
  const shownMs = rec.first.t - t0;
  const tasks = rec.long.filter((e) => e.t + e.ms >= t0);
  const beforeShown = tasks.filter((e) => e.t <= rec.first.t);
  const after = await metrics(cdp);
  const widget = await page.evaluate(() => ({
    nodes: document.querySelector('.nbs-chat').querySelectorAll('*').length,
    deferred: document.querySelectorAll('.nbs-chat .nbs-deferred').length,
  }));
  log(`${params.mode} ×${params.count}: end shown after ${Math.round(shownMs)} ms, ${tasks.length} long tasks`);

  // a reader scrolling back with the wheel
  const list = page.locator('.nbs-chat .nbs-messages').first();
  await list.scrollIntoViewIfNeeded();
  const box = await list.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.evaluate(() => {
    const r = { gaps: [], stop: false, t0: performance.now() };
    window.__nbsWheel = r;
    let prev = performance.now();
    const tick = (t) => {
      if (r.stop) return;
      r.gaps.push(t - prev);
      prev = t;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const wheelTracing = params.trace ? await startTrace(page, { profile: true }) : null;
  const wheelUntil = Date.now() + (params.wheel_s ?? 8) * 1000;
  let wheels = 0;
  while (Date.now() < wheelUntil) {
    await page.mouse.wheel(0, -100);
    wheels++;
    await page.waitForTimeout(50);
  }
  const wheel = await page.evaluate(() => {
    const r = window.__nbsWheel;
    r.stop = true;
    const g = r.gaps.slice(1).sort((a, b) => a - b);
    const l = window.__nbsLongChat.long.filter((e) => e.t >= r.t0);
    const list = document.querySelector('.nbs-chat .nbs-messages');
    return {
      frames: g.length,
      gap_p95_ms: Math.round(g[Math.floor(g.length * 0.95)] ?? 0),
      gaps_over_50ms: g.filter((x) => x > 50).length,
      max_gap_ms: Math.round(g.at(-1) ?? 0),
      long_tasks: l.length,
      long_max_ms: Math.round(Math.max(0, ...l.map((e) => e.ms))),
      scrolled_px: Math.round(list.scrollHeight - list.clientHeight - list.scrollTop),
      deferred_left: document.querySelectorAll('.nbs-chat .nbs-deferred').length,
    };
  });
  let wheelExplained = null;
  if (wheelTracing !== null) {
    const events = await endTrace(wheelTracing);
    fs.writeFileSync(params.trace.replace(/\.json$/, '') + '-wheel.json', JSON.stringify({ traceEvents: events }));
    wheelExplained = analyseTrace(events, { maxTasks: 10 });
  }
  return {
    mode: params.mode,
    count: params.count,
    end_shown_ms: Math.round(shownMs),
    in_dom_when_shown: rec.first.in_dom,
    long_tasks_until_shown: summary(beforeShown),
    long_tasks_until_shown_by_code: byCode(beforeShown, rec.frames),
    // nbstream's scripts over 5 ms until the end was shown (ms from running the cell)
    nbstream_scripts_until_shown: (rec.frames ?? []).flatMap((f) =>
      f.scripts
        .filter((s) => s.url.startsWith('blob:') && s.t >= t0 && s.t <= rec.first.t)
        .map((s) => `${Math.round(s.t - t0)}: ${s.invoker.replace(/^blob:.*/, 'module')} ${Math.round(s.ms)} ms`),
    ),
    long_tasks_until_settled: summary(tasks),
    nodes_added: after.nodes - before.nodes,
    heap_added_mb: Math.round((after.heap_mb - before.heap_mb) * 10) / 10,
    widget_nodes: widget.nodes,
    placeholders: widget.deferred,
    wheel: { ...wheel, wheel_events: wheels },
    ...(explained ? { trace: explained } : {}),
    ...(wheelExplained ? { wheel_trace: wheelExplained } : {}),
  };
});
