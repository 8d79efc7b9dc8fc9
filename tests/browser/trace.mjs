// A Chromium performance trace of a page, and its long tasks explained
// (tests/browser/responsiveness.mjs uses it; see its header). Trace with
// startTrace(page) / endTrace(cdp) (CDP Tracing through
// page.context().newCDPSession(page)); analyseTrace(events) finds the
// renderer's main thread and explains each task over 50 ms.
//
//   node trace.mjs TRACE.json[.gz]      prints the analysis of a saved trace

import fs from 'node:fs';
import zlib from 'node:zlib';

const LONG_US = 50_000;
const r1 = (x) => (x === null || x === undefined ? null : Math.round(x * 10) / 10);


const CATEGORIES = [
  'toplevel',
  'devtools.timeline',
  'disabled-by-default-devtools.timeline',
  'disabled-by-default-devtools.timeline.frame',
  'blink.user_timing',
  'v8.execute',
];
const PROFILE_CATEGORIES = ['disabled-by-default-v8.cpu_profiler'];
// more categories for a question the usual ones do not answer, e.g.
// NBS_TRACE_CATEGORIES=blink,disabled-by-default-fonts (Tracing.getCategories lists them)
const EXTRA_CATEGORIES = (process.env.NBS_TRACE_CATEGORIES ?? '').split(',').filter(Boolean);

export async function startTrace(page, { profile }) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Tracing.start', {
    transferMode: 'ReturnAsStream',
    traceConfig: {
      recordMode: 'recordAsMuchAsPossible',
      includedCategories: [...CATEGORIES, ...(profile ? PROFILE_CATEGORIES : []), ...EXTRA_CATEGORIES],
    },
  });
  return cdp;
}

export async function endTrace(cdp) {
  const done = new Promise((resolve) => cdp.once('Tracing.tracingComplete', resolve));
  await cdp.send('Tracing.end');
  const { stream } = await done;
  const chunks = [];
  for (;;) {
    const { data, eof, base64Encoded } = await cdp.send('IO.read', { handle: stream, size: 4 << 20 });
    chunks.push(base64Encoded ? Buffer.from(data, 'base64').toString('utf8') : data);
    if (eof) break;
  }
  await cdp.send('IO.close', { handle: stream });
  await cdp.detach().catch(() => {});
  const parsed = JSON.parse(chunks.join(''));
  return Array.isArray(parsed) ? parsed : parsed.traceEvents;
}

/** Where a script URL comes from. */
function scriptClass(url) {
  // event dispatch, microtask checkpoints, timers with no script frame of their own,
  // and scripts injected by the benchmark (Playwright, page.evaluate) have no URL
  if (!url) return 'js: no URL (dispatch, microtasks, the benchmark)';
  if (url.startsWith('blob:')) return 'js: widget (nbstream, anywidget blob)';
  if (url.includes('/lab/extensions/') || url.includes('/static/extensions/')) return 'js: extensions (widget manager, anywidget)';
  if (url.includes('/static/lab/') || url.includes('/static/notebook/') || url.includes('/lab/api/') || url.includes('/static/')) return 'js: JupyterLab / Notebook';
  if (url.startsWith('chrome') || url.startsWith('extensions::') || url.startsWith('v8/') || url.startsWith('node:')) return 'js: browser';
  return 'js: other';
}

const STYLE = new Set(['UpdateLayoutTree', 'RecalculateStyles', 'ScheduleStyleRecalculation', 'ParseAuthorStyleSheet']);
const LAYOUT = new Set(['Layout', 'UpdateLayout', 'IntersectionObserverController::computeIntersections', 'ComputeIntersections']);
const PAINT = new Set(['Paint', 'PaintImage', 'PrePaint', 'Layerize', 'UpdateLayer', 'UpdateLayerTree', 'CompositeLayers', 'Commit', 'RasterTask', 'PaintSetup', 'Decode Image']);
const GC = (n) => /GC|Scavenge|MarkCompact|V8\.GC/.test(n);
const SCRIPT = new Set(['FunctionCall', 'EvaluateScript', 'v8.compile', 'v8.compileModule', 'v8.evaluateModule', 'V8.Execute', 'v8.run', 'v8.callFunction', 'RunMicrotasks', 'V8.RunMicrotasks', 'TimerFire', 'FireAnimationFrame', 'EventDispatch', 'FireIdleCallback', 'XHRReadyStateChange', 'ResizeObserver', 'HandlePostMessage']);

/** The class of an event's self time, given its nearest script URL above it. */
function selfClass(ev, url) {
  const n = ev.name;
  if (STYLE.has(n)) return url ? 'style (forced by script)' : 'style';
  if (LAYOUT.has(n)) return url ? 'layout (forced by script)' : 'layout';
  if (PAINT.has(n)) return 'paint, layers, commit';
  if (GC(n)) return 'GC';
  if (n === 'ParseHTML') return 'parse HTML';
  if (SCRIPT.has(n) || url) return scriptClass(url);
  return 'other (browser)';
}

const WRAPPERS = new Set(['RunTask', 'ThreadControllerImpl::RunTask', 'Receive mojo message', 'SimpleWatcher::OnHandleReady', 'V8.StackGuard', 'V8.HandleInterrupts', 'BlinkScheduler_PerformMicrotaskCheckpoint']);

/** The events a task ran, seen through the scheduler's wrappers. */
function stepsOf(node) {
  const out = [];
  for (const c of node.children) {
    if (WRAPPERS.has(c.ev.name)) out.push(...stepsOf(c));
    else out.push(c);
  }
  return out;
}

/** A short name for what started a task: its first step that says. */
function triggerOf(node) {
  const steps = stepsOf(node);
  if (steps.some((c) => c.ev.name === 'FireAnimationFrame')) return 'animation frame';
  for (const c of steps) {
    const n = c.ev.name;
    const d = c.ev.args?.data ?? {};
    if (n === 'FireAnimationFrame') return 'animation frame';
    if (n === 'TimerFire') return 'timer';
    if (n === 'EventDispatch') return `event: ${d.type ?? '?'}`;
    if (n === 'FunctionCall') return `script: ${shortUrl(d.url)} ${d.functionName || ''}`.trim();
    if (n === 'ParseHTML') return 'parse HTML';
    if (n === 'FireIdleCallback') return 'idle callback';
    if (n === 'HandlePostMessage') return 'postMessage';
    if (n === 'XHRReadyStateChange' || n === 'XHRLoad') return 'XHR';
    if (n === 'RunMicrotasks' || n === 'v8.run') return 'microtasks';
    if (n === 'UpdateLayoutTree' || n === 'Layout' || n === 'Paint' || n === 'PrePaint' || n === 'Commit' || n === 'Layerize') return 'frame: style, layout, paint';
    if (GC(n)) return 'GC';
  }
  return node.children[0]?.ev.name ?? 'nothing traced';
}

/** The style and layout passes of a task that are the frame's own (not forced by script). */
function passesOf(node) {
  const steps = stepsOf(node);
  return {
    layouts: steps.filter((c) => c.ev.name === 'Layout').length,
    styles: steps.filter((c) => c.ev.name === 'UpdateLayoutTree').length,
    painted: steps.some((c) => c.ev.name === 'Paint' || c.ev.name === 'Commit'),
  };
}

function shortUrl(url) {
  if (!url) return '?';
  if (url.startsWith('blob:')) return 'blob (widget)';
  const u = url.split('?')[0];
  return u.slice(u.lastIndexOf('/') + 1) || u;
}

/** Build the call tree of one thread's complete events inside [ts, ts+dur]. */
function treeOf(events) {
  const roots = [];
  const stack = [];
  for (const ev of events) {
    const node = { ev, children: [], end: ev.ts + (ev.dur ?? 0) };
    while (stack.length && stack.at(-1).end <= ev.ts) stack.pop();
    if (stack.length) stack.at(-1).children.push(node);
    else roots.push(node);
    if ((ev.dur ?? 0) > 0) stack.push(node);
  }
  return roots;
}

/** Self time of a tree by class, µs; `url`: the nearest script URL above. */
function selfTimes(node, url, out, fns, names = null) {
  const d = node.ev.args?.data ?? {};
  const here = d.url || (node.ev.name === 'EvaluateScript' ? d.url : null) || url;
  let childSum = 0;
  for (const c of node.children) {
    childSum += c.ev.dur ?? 0;
    selfTimes(c, here, out, fns, names);
  }
  const self = Math.max(0, (node.ev.dur ?? 0) - childSum);
  const cls = selfClass(node.ev, here);
  out[cls] = (out[cls] ?? 0) + self;
  if (names !== null) names[node.ev.name] = (names[node.ev.name] ?? 0) + self;
  if (node.ev.name === 'FunctionCall') {
    const k = `${shortUrl(d.url)}:${d.functionName || '(anonymous)'}`;
    fns[k] = (fns[k] ?? 0) + (node.ev.dur ?? 0);
  }
}

/** Samples of the V8 CPU profile in the trace: [{ts, url, fn}] on the given pid/tid. */
export function profileSamples(events, pid, tid) {
  const nodes = new Map();
  const samples = [];
  const profiles = new Map(); // id -> { t }
  for (const e of events) {
    if (e.pid !== pid) continue;
    if (e.name === 'Profile' && e.tid === tid) profiles.set(e.id, { t: e.args?.data?.startTime ?? e.ts });
  }
  for (const e of events) {
    if (e.pid !== pid || e.name !== 'ProfileChunk' || !profiles.has(e.id)) continue;
    const p = profiles.get(e.id);
    const cp = e.args?.data?.cpuProfile ?? {};
    for (const n of cp.nodes ?? []) nodes.set(`${e.id}:${n.id}`, { parent: n.parent, ...n.callFrame });
    const ids = cp.samples ?? [];
    const deltas = e.args?.data?.timeDeltas ?? [];
    for (let i = 0; i < ids.length; i++) {
      p.t += deltas[i] ?? 0;
      samples.push({ ts: p.t, node: `${e.id}:${ids[i]}`, profile: e.id });
    }
  }
  // a sample's place: its leaf frame; and whether any frame on its stack is the widget's
  return samples.map((s) => {
    let n = nodes.get(s.node);
    const leaf = n;
    let widget = false;
    let url = '';
    let guard = 0;
    while (n && guard++ < 500) {
      if (n.url?.startsWith('blob:')) widget = true;
      if (!url && n.url) url = n.url;
      n = n.parent === undefined ? null : nodes.get(`${s.profile}:${n.parent}`);
    }
    return { ts: s.ts, fn: leaf?.functionName || leaf?.url ? `${shortUrl(leaf?.url || url)}:${leaf?.functionName || '(anonymous)'}` : '(program)', leafName: leaf?.functionName ?? '', url: leaf?.url || url, widget };
  });
}

/** Long tasks of the renderer's main thread, explained (see the header). */
export function analyseTrace(events, { maxTasks = 40 } = {}) {
  // B/E pairs into complete events, per thread
  const open = new Map();
  const complete = [];
  for (const e of events) {
    if (e.ph === 'X') complete.push(e);
    else if (e.ph === 'B') {
      const k = `${e.pid}:${e.tid}`;
      if (!open.has(k)) open.set(k, []);
      open.get(k).push(e);
    } else if (e.ph === 'E') {
      const b = open.get(`${e.pid}:${e.tid}`)?.pop();
      if (b) complete.push({ ...b, ph: 'X', dur: e.ts - b.ts, args: { ...b.args, ...e.args } });
    }
  }
  // the page's main thread: the CrRendererMain with the most tasks
  const names = new Map();
  for (const e of events) if (e.ph === 'M' && e.name === 'thread_name') names.set(`${e.pid}:${e.tid}`, e.args?.name);
  const isTask = (e) => e.name === 'RunTask' || e.name === 'ThreadControllerImpl::RunTask';
  const perThread = new Map();
  for (const e of complete) {
    const k = `${e.pid}:${e.tid}`;
    if (names.get(k) !== 'CrRendererMain') continue;
    if (!perThread.has(k)) perThread.set(k, []);
    perThread.get(k).push(e);
  }
  let main = null;
  let most = -1;
  for (const [k, evs] of perThread) {
    const n = evs.filter(isTask).length;
    if (n > most) {
      most = n;
      main = k;
    }
  }
  if (main === null) return { error: 'no renderer main thread in the trace', events: events.length };
  const [pid, tid] = main.split(':').map(Number);
  const evs = perThread.get(main).sort((a, b) => a.ts - b.ts || (b.dur ?? 0) - (a.dur ?? 0));
  const marks = events.filter((e) => e.cat?.includes('blink.user_timing') && e.name?.startsWith('nbs-') && e.pid === pid);
  const markAt = (name) => marks.find((m) => m.name === name)?.ts ?? null;
  const traceFrom = markAt('nbs-trace-start') ?? -Infinity;
  const streamFrom = markAt('nbs-stream-start');
  const streamTo = markAt('nbs-stream-end');
  // top-level tasks (a task nested in another task is part of it)
  const tasks = [];
  let lastEnd = -Infinity;
  for (const e of evs) {
    if (!isTask(e) || e.ts < lastEnd || e.ts < traceFrom) continue;
    tasks.push(e);
    lastEnd = e.ts + (e.dur ?? 0);
  }
  const samples = profileSamples(events, pid, tid);
  const long = tasks.filter((t) => (t.dur ?? 0) > LONG_US);
  const explained = [];
  const totals = {};
  const triggers = {};
  const fnsAll = {};
  const sampleFns = {};
  let j = 0;
  for (const t of long) {
    const end = t.ts + t.dur;
    while (j < evs.length && evs[j].ts < t.ts) j++;
    const inside = [];
    for (let k = j; k < evs.length && evs[k].ts < end; k++) if (evs[k] !== t) inside.push(evs[k]);
    const node = { ev: t, children: treeOf(inside), end };
    const self = {};
    const fns = {};
    selfTimes(node, null, self, fns);
    const trigger = triggerOf(node);
    triggers[trigger] = (triggers[trigger] ?? 0) + 1;
    for (const [c, us] of Object.entries(self)) totals[c] = (totals[c] ?? 0) + us;
    for (const [f, us] of Object.entries(fns)) fnsAll[f] = (fnsAll[f] ?? 0) + us;
    // profiler samples inside the task: leaf function, and how many ran under widget code
    const inTask = samples.filter((s) => s.ts >= t.ts && s.ts < end);
    const leafs = {};
    for (const s of inTask) {
      leafs[s.fn] = (leafs[s.fn] ?? 0) + 1;
      sampleFns[s.fn] = (sampleFns[s.fn] ?? 0) + 1;
    }
    const phase = streamFrom !== null && t.ts >= streamFrom && (streamTo === null || t.ts <= streamTo) ? 'stream' : 'idle';
    explained.push({
      at_ms: r1((t.ts - (streamFrom ?? t.ts)) / 1000),
      phase,
      ms: r1(t.dur / 1000),
      trigger,
      self_ms: Object.fromEntries(Object.entries(self).filter(([, us]) => us >= 500).sort((a, b) => b[1] - a[1]).map(([c, us]) => [c, r1(us / 1000)])),
      top_calls: Object.entries(fns).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([f, us]) => `${f} ${r1(us / 1000)} ms`),
      samples: inTask.length,
      samples_in_widget_code: inTask.filter((s) => s.widget).length,
      top_samples: Object.entries(leafs).sort((a, b) => b[1] - a[1]).slice(0, 4).map(([f, n]) => `${f} ×${n}`),
    });
  }
  // the whole stream: main-thread busy time by class (not only long tasks)
  const busy = {};
  const busyNames = {};
  let busyUs = 0;
  const frames = { painted: 0, laid_out_twice: 0, layout_passes: 0 };
  // tasks that handle a kernel websocket message (JupyterLab's _onWSMessage runs in them)
  const ws = { tasks: 0, us: 0 };
  if (streamFrom !== null) {
    const to = streamTo ?? Infinity;
    let k = 0;
    for (const t of tasks) {
      if (t.ts < streamFrom || t.ts > to) continue;
      busyUs += t.dur ?? 0;
      const end = t.ts + (t.dur ?? 0);
      while (k < evs.length && evs[k].ts < t.ts) k++;
      for (let m = k; m < evs.length && evs[m].ts < end; m++) {
        if (evs[m].name === 'FunctionCall' && evs[m].args?.data?.functionName === '_onWSMessage') {
          ws.tasks++;
          ws.us += t.dur ?? 0;
          break;
        }
      }
      if ((t.dur ?? 0) < 1000) continue; // tiny tasks: counted in busy, not split
      const inside = [];
      for (let m = k; m < evs.length && evs[m].ts < end; m++) if (evs[m] !== t) inside.push(evs[m]);
      const node = { ev: t, children: treeOf(inside), end };
      selfTimes(node, null, busy, {}, busyNames);
      const p = passesOf(node);
      if (p.painted) {
        frames.painted++;
        frames.layout_passes += p.layouts;
        if (p.layouts > 1 || p.styles > 1) frames.laid_out_twice++;
      }
    }
  }
  const streamMs = streamFrom !== null && streamTo !== null ? (streamTo - streamFrom) / 1000 : null;
  const stream = explained.filter((e) => e.phase === 'stream');
  return {
    events: events.length,
    tasks: tasks.length,
    long_tasks: explained.length,
    long_tasks_in_stream: stream.length,
    longest_ms: r1(Math.max(0, ...explained.map((e) => e.ms))),
    triggers,
    self_ms_in_long_tasks: Object.fromEntries(Object.entries(totals).sort((a, b) => b[1] - a[1]).map(([c, us]) => [c, r1(us / 1000)])),
    top_calls_in_long_tasks: Object.entries(fnsAll).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([f, us]) => `${f} ${r1(us / 1000)} ms`),
    top_samples_in_long_tasks: Object.entries(sampleFns).sort((a, b) => b[1] - a[1]).slice(0, 10).map(([f, n]) => `${f} ×${n}`),
    profile_samples: samples.length,
    stream_ms: r1(streamMs),
    frames_in_stream: frames,
    websocket_tasks_in_stream: { tasks: ws.tasks, ms: r1(ws.us / 1000) },
    main_thread_busy_in_stream: streamMs ? r1((busyUs / 1000 / streamMs) * 100) : null, // percent
    busy_ms_in_stream_by_class: Object.fromEntries(Object.entries(busy).filter(([, us]) => us >= 1000).sort((a, b) => b[1] - a[1]).map(([c, us]) => [c, r1(us / 1000)])),
    // the same time by trace event (self time): which rendering step (Layerize, Paint,
    // Layout, UpdateLayoutTree, ...) or script entry point; the 16 largest
    busy_ms_in_stream_by_event: Object.fromEntries(Object.entries(busyNames).filter(([, us]) => us >= 1000).sort((a, b) => b[1] - a[1]).slice(0, 16).map(([c, us]) => [c, r1(us / 1000)])),
    tasks_explained: explained.slice(0, maxTasks),
  };
}


/** Read a saved trace (JSON, maybe gzipped): its events. */
export function readTrace(file) {
  let raw = fs.readFileSync(file);
  if (file.endsWith('.gz')) raw = zlib.gunzipSync(raw);
  const parsed = JSON.parse(raw.toString('utf8'));
  return Array.isArray(parsed) ? parsed : parsed.traceEvents;
}

if (process.argv[1]?.endsWith('trace.mjs') && process.argv[2]) {
  console.log(JSON.stringify(analyseTrace(readTrace(process.argv[2])), null, 1));
}
