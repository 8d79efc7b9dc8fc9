// Recording several nbstream messages (or whole widgets) at once, once per
// animation frame, plus the helpers the toolkit and flow scenarios share.
//
// A target names one message: the widget's index among the page's .nbs-chat
// roots (every mode has that root), and either the message's data-id or its
// position among the widget's assistant messages (nth). It is looked up again
// every frame, so a target may appear later (a widget that renders after the
// recorder started) or be replaced (a page reload needs a new recorder).
// Each series holds one sample per frame in which the target's text length,
// status or id changed: {t, length, status, id} (and text, with keepText).
// A target with { counters: true } samples the widget's own counters instead
// (root.__nbstream: chars shown, deltas received), which costs nothing per
// frame even for long texts: {t, chars, deltas}.
//
// With { kernel: true } the recorder also samples the notebook's kernel status
// (busy / idle) from JupyterLab's session context.

import { openNotebook, runCell, runCode, TOKEN, URL_BASE } from './lab.mjs';

/** Start recording; returns { read(), stop() }, both resolving to the record. */
export async function startRecorder(page, targets, { kernel = false } = {}) {
  const key = `__nbsRecAll${Math.random().toString(36).slice(2)}`;
  await page.evaluate(
    ({ targets, key, kernel }) => {
      const rec = {
        series: Object.fromEntries(targets.map((t) => [t.name, []])),
        kernel: [],
        frames: 0,
        max_frame_gap_ms: 0,
        // frames that came more than 50 ms after the one before (the page missed frames)
        frame_gaps_over_50ms: 0,
        start: performance.now(),
        end: null,
        stopped: false,
      };
      window[key] = rec;
      const last = {};
      let prev = null;
      let kernelLast = null;
      const find = (t) => {
        const root = document.querySelectorAll('.nbs-chat')[t.root ?? 0];
        if (!root) return null;
        if (t.counters) return root;
        if (t.id) return root.querySelector(`.nbs-message[data-id="${CSS.escape(t.id)}"]`);
        return root.querySelectorAll('.nbs-message[data-role="assistant"]')[t.nth ?? 0] ?? null;
      };
      const tick = (now) => {
        if (rec.stopped) return;
        rec.frames += 1;
        if (prev !== null) {
          rec.max_frame_gap_ms = Math.max(rec.max_frame_gap_ms, now - prev);
          if (now - prev > 50) rec.frame_gaps_over_50ms += 1;
        }
        prev = now;
        rec.end = now;
        for (const t of targets) {
          const el = find(t);
          let sample;
          if (t.counters) {
            const c = el?.__nbstream;
            sample = { t: now, chars: c ? c.chars : -1, deltas: c ? c.deltas : -1 };
            const l = last[t.name];
            if (l && l.chars === sample.chars && l.deltas === sample.deltas) continue;
          } else {
            const text = el?.querySelector('.nbs-text')?.textContent ?? null;
            sample = { t: now, length: text === null ? -1 : text.length, status: el?.dataset.status ?? null, id: el?.dataset.id ?? null };
            const l = last[t.name];
            if (l && l.length === sample.length && l.status === sample.status && l.id === sample.id) continue;
            if (t.keepText) sample.text = text;
          }
          last[t.name] = sample;
          rec.series[t.name].push(sample);
        }
        if (kernel) {
          const s = window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel?.status ?? null;
          if (s !== kernelLast) {
            kernelLast = s;
            rec.kernel.push({ t: now, status: s });
          }
        }
        requestAnimationFrame(tick);
      };
      requestAnimationFrame(tick);
    },
    { targets, key, kernel },
  );
  const read = () => page.evaluate((k) => JSON.parse(JSON.stringify(window[k])), key);
  return {
    read,
    async stop() {
      await page.evaluate((k) => {
        window[k].stopped = true;
      }, key);
      return read();
    },
  };
}

/**
 * Figures of one series between page times [from, to): frames that showed
 * growth, the characters grown, whether it only grew, and the longest time
 * between two growths (from the first growth on).
 */
export function growthOf(series, { from = -Infinity, to = Infinity, field = 'length' } = {}) {
  const s = series.filter((x) => x.t >= from && x.t < to && x[field] >= 0);
  let frames = 0;
  let increasing = true;
  let maxGap = 0;
  let lastGrowth = null;
  for (let i = 1; i < s.length; i++) {
    const d = s[i][field] - s[i - 1][field];
    if (d < 0) increasing = false;
    if (d > 0) {
      frames += 1;
      if (lastGrowth !== null) maxGap = Math.max(maxGap, s[i].t - lastGrowth);
      lastGrowth = s[i].t;
    }
  }
  const first = s[0]?.[field] ?? null;
  const lastValue = s.at(-1)?.[field] ?? null;
  return {
    growth_frames: frames,
    grown: first === null ? 0 : lastValue - first,
    increasing,
    max_gap_between_growths_ms: Math.round(maxGap),
    samples: s.length,
  };
}

/** The value of `field` in force at page time t (the last sample at or before it). */
export function valueAt(series, t, field = 'length') {
  let found = null;
  for (const s of series) {
    if (s.t <= t) found = s[field];
    else break;
  }
  return found;
}

/** Words of a text (the comparisons ignore how Markdown laid out the whitespace). */
export function words(text) {
  return (text ?? '').split(/\s+/).filter(Boolean);
}

/**
 * Whether every kept text of a series is a prefix of `final` (word by word; the
 * last word of a sample may still be growing): no gap, no duplicate, never
 * shrinking. Returns { ok, checked, first_bad }.
 */
export function prefixCheck(series, final) {
  const fw = words(final);
  let checked = 0;
  for (const s of series) {
    if (typeof s.text !== 'string') continue;
    checked += 1;
    const w = words(s.text);
    const ok =
      w.length <= fw.length &&
      w.every((x, i) => (i < w.length - 1 ? x === fw[i] : fw[i].startsWith(x)));
    if (!ok) return { ok: false, checked, first_bad: { t: s.t, words: w.length, tail: w.slice(-5) } };
  }
  return { ok: true, checked, first_bad: null };
}

/** Save the current notebook (File > Save); resolves when it is saved. */
export async function saveNotebook(page) {
  await page.evaluate(async () => {
    const w = window.jupyterapp.shell.currentWidget;
    await window.jupyterapp.commands.execute('docmanager:save');
    if (w.context.model.dirty) throw new Error('the notebook is still dirty after saving');
  });
}

/** Run Python that prints one JSON value on its last line; returns the value. */
export async function kernelJson(page, code) {
  const out = await runCode(page, `import json as _nbs_json\n${code}`);
  try {
    return JSON.parse(out.trim().split('\n').at(-1));
  } catch {
    throw new Error(`the kernel did not print JSON: ${out.slice(0, 2000)}`);
  }
}

/** Start counting long tasks (> 50 ms) on the page; read() gives {count, total_ms, max_ms}. */
export async function watchLongTasks(page) {
  const key = `__nbsLong${Math.random().toString(36).slice(2)}`;
  await page.evaluate((k) => {
    const acc = { count: 0, total_ms: 0, max_ms: 0, list: [] };
    window[k] = acc;
    try {
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
          acc.count += 1;
          acc.total_ms += e.duration;
          acc.max_ms = Math.max(acc.max_ms, e.duration);
          if (acc.list.length < 50) acc.list.push({ t: e.startTime, ms: e.duration });
        }
      }).observe({ type: 'longtask', buffered: false });
    } catch {
      acc.unsupported = true;
    }
  }, key);
  return {
    read: () => page.evaluate((k) => JSON.parse(JSON.stringify(window[k])), key),
  };
}

/** Wait until the widget root `index` has `n` assistant messages; returns their ids. */
export async function waitForAssistants(page, { index = 0, n = 1, timeout = 30_000 } = {}) {
  const handle = await page.waitForFunction(
    ({ index, n }) => {
      const root = document.querySelectorAll('.nbs-chat')[index];
      const ids = [...(root?.querySelectorAll('.nbs-message[data-role="assistant"]') ?? [])].map((m) => m.dataset.id);
      return ids.length >= n ? ids : false;
    },
    { index, n },
    { timeout, polling: 'raf' },
  );
  return handle.jsonValue();
}

/** Wait until every assistant message of widget `index` has a final status. */
export async function waitAllFinal(page, { index = 0, timeout = 60_000 } = {}) {
  await page.waitForFunction(
    (index) => {
      const root = document.querySelectorAll('.nbs-chat')[index];
      const ms = [...(root?.querySelectorAll('.nbs-message[data-role="assistant"]') ?? [])];
      return ms.length > 0 && ms.every((m) => ['done', 'stopped', 'error', 'timeout'].includes(m.dataset.status));
    },
    index,
    { timeout, polling: 100 },
  );
}

/** Text and status of every assistant message of widget `index`, in document order. */
export async function assistantTexts(page, index = 0) {
  return page.evaluate((index) => {
    const root = document.querySelectorAll('.nbs-chat')[index];
    return [...(root?.querySelectorAll('.nbs-message[data-role="assistant"]') ?? [])].map((m) => ({
      id: m.dataset.id,
      pane: m.dataset.pane ?? null,
      status: m.dataset.status,
      text: m.querySelector('.nbs-text')?.textContent ?? '',
      // the reasoning block (null: none) and whether it is open
      reasoning: m.querySelector('.nbs-reasoning-text')?.textContent ?? null,
      reasoning_open: m.querySelector('details.nbs-reasoning')?.open ?? null,
    }));
  }, index);
}

/**
 * An init script (page.addInitScript(countWidgetFrames)) that counts, per animation
 * frame, the requestAnimationFrame callbacks nbstream's own code asked for: a call
 * whose stack holds a blob: URL (anywidget imports the widget's module from one)
 * or the runtime widget's module. Read with readWidgetFrames(page). Independent of
 * the widget's own counters, so it tells one shared frame loop from a loop per view.
 */
export function countWidgetFrames() {
  const raf = window.requestAnimationFrame.bind(window);
  const acc = { calls: 0, frames: 0, callbacks: 0, max_per_frame: 0, frames_with_more: 0, last: null, n: 0 };
  window.__nbsWidgetFrames = acc;
  window.requestAnimationFrame = function (cb) {
    const stack = new Error().stack ?? '';
    if (!/blob:|nbstream/.test(stack)) return raf(cb);
    acc.calls += 1;
    return raf((t) => {
      if (acc.last !== t) {
        acc.last = t;
        acc.frames += 1;
        acc.n = 0;
      }
      acc.n += 1;
      acc.callbacks += 1;
      if (acc.n === 2) acc.frames_with_more += 1;
      acc.max_per_frame = Math.max(acc.max_per_frame, acc.n);
      return cb(t);
    });
  };
}

/** Starts countWidgetFrames' per-frame figures (max, frames with more than one) afresh. */
export async function resetWidgetFrames(page) {
  await page.evaluate(() => {
    const acc = window.__nbsWidgetFrames;
    if (acc) {
      acc.max_per_frame = 0;
      acc.frames_with_more = 0;
    }
  });
}

/** What countWidgetFrames counted so far: { calls, frames, callbacks, max_per_frame, frames_with_more }. */
export async function readWidgetFrames(page) {
  return page.evaluate(() => {
    const { last, n, ...rest } = window.__nbsWidgetFrames ?? {};
    return rest;
  });
}

/**
 * Opens `notebook`, runs its first cell (a chat that answers at once) and waits until
 * the first assistant message shows at least `minChars` characters: an answer under way.
 * Returns its id.
 */
export async function answerUnderWay(page, notebook, minChars = 200) {
  await openNotebook(page, notebook);
  await runCell(page, 0);
  const [id] = await waitForAssistants(page, { index: 0, n: 1 });
  await answerShows(page, minChars);
  return id;
}

/** Waits until the page's first assistant message shows at least `minChars` characters. */
export async function answerShows(page, minChars) {
  await page.waitForFunction(
    (n) => (document.querySelector('.nbs-message[data-role="assistant"] .nbs-text')?.textContent.length ?? 0) >= n,
    minChars,
    { timeout: 60_000, polling: 100 },
  );
}

/**
 * Runs `code` in the kernel `model` ({ id, name }) through a connection of its own
 * from `page` (a JupyterLab page: its service manager), and resolves with what it
 * printed (an error as "Name: value"). For a kernel whose notebook is no longer open.
 */
export async function askKernel(page, model, code) {
  return page.evaluate(
    async ({ model, code }) => {
      const k = window.jupyterapp.serviceManager.kernels.connectTo({ model });
      try {
        let out = '';
        const future = k.requestExecute({ code, store_history: false });
        future.onIOPub = (msg) => {
          if (msg.header.msg_type === 'stream') out += msg.content.text;
          if (msg.header.msg_type === 'error') out += `${msg.content.ename}: ${msg.content.evalue}`;
        };
        await future.done;
        return out;
      } finally {
        k.dispose();
      }
    },
    { model, code },
  );
}

/**
 * Asks the kernel `model` (through `page`, see askKernel) for the status and length of
 * `chat.last` every half second until it is no longer running (at most `tries` times);
 * resolves with the last answer ({ status, chars, views }: `views`, the views the
 * widget knows of) and how many were asked.
 */
export async function lastReplyOnceEnded(page, model, tries = 60) {
  const code =
    'import json\nprint(json.dumps({"status": chat.last.status, "chars": len(chat.last.text), "views": len(chat._views._views)}))';
  const answers = [];
  for (let i = 0; i < tries; i++) {
    const out = await askKernel(page, model, code);
    answers.push(JSON.parse(out.trim().split('\n').at(-1)));
    if (answers.at(-1).status !== 'running') break;
    await page.waitForTimeout(500); // (the grace period runs in the kernel)
  }
  return { reply: answers.at(-1), first: answers[0], asked: answers.length };
}

/** A JupyterLab page of an empty workspace of its own (no notebook opened). */
export async function emptyLab(page, name) {
  await page.goto(`${URL_BASE}lab/workspaces/${name}?reset&token=${TOKEN}`);
  await page.waitForFunction(() => Boolean(window.jupyterapp?.serviceManager?.kernels), null, { timeout: 90_000 });
}
