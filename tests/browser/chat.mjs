// The nbstream chat widget's DOM contract, and helpers that read it from a page.
//
//   div.nbs-chat                        root; JS property __nbstream =
//                                       {renders, frames, deltas, acks, resyncs}
//     div.nbs-messages
//       div.nbs-message[data-id][data-role=user|assistant]
//                      [data-status=queued|loading|running|done|stopped|error|timeout]
//         div.nbs-text                  the message's text
//     textarea.nbs-input                Enter sends, Shift+Enter new line, Escape stops
//     button.nbs-send, button.nbs-stop
//
// Several widgets may be on a page: every helper takes the widget's index among
// the page's .nbs-chat elements (document order), default 0.
//
// Growth is observed by a recorder running in the page on requestAnimationFrame:
// one sample per frame in which a message's text length or status changed, with
// the page clock (performance.now()), plus the frame count and the largest gap
// between two frames. analyze() turns the samples into figures.

import { runCode, typeInto } from './lab.mjs';

export const SEL = {
  root: '.nbs-chat',
  messages: '.nbs-messages',
  message: '.nbs-message',
  text: '.nbs-text',
  input: 'textarea.nbs-input',
  send: 'button.nbs-send',
  stop: 'button.nbs-stop',
};

export const FINAL_STATUSES = ['done', 'stopped', 'error', 'timeout'];

/** Locator of the index-th chat widget on the page. */
export function chat(page, index = 0) {
  return page.locator(SEL.root).nth(index);
}

/** Wait until the index-th chat widget is rendered and visible; returns how many there are. */
export async function waitForChat(page, { index = 0, timeout = 60_000 } = {}) {
  await chat(page, index).waitFor({ state: 'visible', timeout });
  return page.locator(SEL.root).count();
}

/** A copy of the widget's own counters (root.__nbstream), or null if it has none. */
export async function counters(page, index = 0) {
  return page.evaluate(
    ({ sel, index }) => {
      const c = document.querySelectorAll(sel)[index]?.__nbstream;
      return c ? JSON.parse(JSON.stringify(c)) : null;
    },
    { sel: SEL.root, index },
  );
}

/** The ids of the widget's messages with the given role, in order. */
export async function messageIds(page, { index = 0, role = 'assistant' } = {}) {
  return page.evaluate(
    ({ sel, index, role }) => {
      const root = document.querySelectorAll(sel.root)[index];
      if (!root) return [];
      return [...root.querySelectorAll(`${sel.message}[data-role="${role}"]`)].map((m) => m.dataset.id);
    },
    { sel: SEL, index, role },
  );
}

/** {id, role, status, text, length} of one message, or null if it is not in the DOM. */
export async function messageState(page, id, { index = 0 } = {}) {
  return page.evaluate(
    ({ sel, index, id }) => {
      const root = document.querySelectorAll(sel.root)[index];
      const m = root?.querySelector(`${sel.message}[data-id="${CSS.escape(id)}"]`);
      if (!m) return null;
      const text = m.querySelector(sel.text)?.textContent ?? '';
      return { id, role: m.dataset.role, status: m.dataset.status, text, length: text.length };
    },
    { sel: SEL, index, id },
  );
}

/**
 * Type a prompt into the widget's textarea and send it (Enter, or the Send button
 * with { via: 'button' }). Resolves with the data-id of the new assistant message.
 */
export async function sendPrompt(page, text, { index = 0, via = 'enter', timeout = 30_000, fill = false } = {}) {
  const before = new Set(await messageIds(page, { index }));
  const input = chat(page, index).locator(SEL.input);
  await typeInto(page, input, text, { fill });
  if (via === 'button') await chat(page, index).locator(SEL.send).click();
  else await input.press('Enter');
  const handle = await page.waitForFunction(
    ({ sel, index, before }) => {
      const root = document.querySelectorAll(sel.root)[index];
      const ids = [...root.querySelectorAll(`${sel.message}[data-role="assistant"]`)].map((m) => m.dataset.id);
      return ids.find((id) => !before.includes(id)) ?? false;
    },
    { sel: SEL, index, before: [...before] },
    { timeout, polling: 'raf' },
  );
  return handle.jsonValue();
}

/** Wait until the message's status is one of `statuses`; returns the status. */
export async function waitForStatus(page, id, statuses, { index = 0, timeout = 30_000 } = {}) {
  const wanted = Array.isArray(statuses) ? statuses : [statuses];
  const handle = await page.waitForFunction(
    ({ sel, index, id, wanted }) => {
      const root = document.querySelectorAll(sel.root)[index];
      const s = root?.querySelector(`${sel.message}[data-id="${CSS.escape(id)}"]`)?.dataset.status;
      return wanted.includes(s) ? s : false;
    },
    { sel: SEL, index, id, wanted },
    { timeout, polling: 'raf' },
  );
  return handle.jsonValue();
}

/** Wait until the message's text has at least minLength characters; returns the length. */
export async function waitForText(page, id, { index = 0, minLength = 1, timeout = 30_000 } = {}) {
  const handle = await page.waitForFunction(
    ({ sel, index, id, minLength }) => {
      const root = document.querySelectorAll(sel.root)[index];
      const m = root?.querySelector(`${sel.message}[data-id="${CSS.escape(id)}"]`);
      const n = m?.querySelector(sel.text)?.textContent.length ?? 0;
      return n >= minLength ? n : false;
    },
    { sel: SEL, index, id, minLength },
    { timeout, polling: 'raf' },
  );
  return handle.jsonValue();
}

/** Page clock (performance.now()), to line up events with recorder samples. */
export async function now(page) {
  return page.evaluate(() => performance.now());
}

/**
 * Start recording a message on every animation frame. Returns a recorder with
 * read() (samples so far), stop() (stop, then the final record).
 * A record is { samples: [{t, length, status}], frames, max_frame_gap_ms, start, end }.
 */
export async function recordMessage(page, id, { index = 0 } = {}) {
  const key = `__nbsRec${Math.random().toString(36).slice(2)}`;
  await page.evaluate(
    ({ sel, index, id, key }) => {
      const root = document.querySelectorAll(sel.root)[index];
      const rec = { samples: [], frames: 0, max_frame_gap_ms: 0, start: performance.now(), end: null, stopped: false };
      window[key] = rec;
      let last = null;
      let prev = null;
      const tick = (t) => {
        if (rec.stopped) return;
        rec.frames += 1;
        if (prev !== null) rec.max_frame_gap_ms = Math.max(rec.max_frame_gap_ms, t - prev);
        prev = t;
        rec.end = t;
        const m = root?.querySelector(`${sel.message}[data-id="${CSS.escape(id)}"]`);
        const length = m?.querySelector(sel.text)?.textContent.length ?? -1;
        const status = m?.dataset.status ?? null;
        if (!last || last.length !== length || last.status !== status) {
          last = { t, length, status };
          rec.samples.push(last);
        }
        requestAnimationFrame(tick);
      };
      requestAnimationFrame(tick);
    },
    { sel: SEL, index, id, key },
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

/** The sample in force at page time t (the last one at or before it). */
export function sampleAt(record, t) {
  let found = null;
  for (const s of record.samples) {
    if (s.t <= t) found = s;
    else break;
  }
  return found;
}

/**
 * Figures from a record between page times [from, to): the distinct text lengths
 * seen, whether they only grew, how many frames showed growth.
 */
export function growth(record, { from = -Infinity, to = Infinity } = {}) {
  const lengths = record.samples.filter((s) => s.t >= from && s.t < to && s.length >= 0).map((s) => s.length);
  const distinct = [...new Set(lengths)];
  let increasing = true;
  for (let i = 1; i < lengths.length; i++) if (lengths[i] < lengths[i - 1]) increasing = false;
  let growthFrames = 0;
  for (let i = 1; i < lengths.length; i++) if (lengths[i] > lengths[i - 1]) growthFrames += 1;
  return { lengths: distinct, distinct_lengths: distinct.length, increasing, growth_frames: growthFrames };
}

/** First sample whose status is `status`, or null. */
export function firstWithStatus(record, status) {
  return record.samples.find((s) => s.status === status) ?? null;
}

/**
 * What the kernel holds for a message: runs `print(json.dumps(...))` over
 * `<variable>.messages` in a new cell (see runCode). Returns the message dict
 * ({role, content, id, status, ...}) or { error } if it cannot be read.
 */
export async function kernelMessage(page, id, { variable = 'chat' } = {}) {
  const code = [
    'import json as _nbs_json',
    `print(_nbs_json.dumps([m for m in ${variable}.messages if m.get("id") == ${JSON.stringify(id)}]))`,
  ].join('\n');
  const out = await runCode(page, code);
  try {
    const found = JSON.parse(out.trim().split('\n').at(-1));
    return found[0] ?? { error: `no message ${id} in ${variable}.messages` };
  } catch {
    return { error: out.slice(0, 2000) };
  }
}
