// Many views, one frame loop (tests/test_browser_frames.py): several ChatWidgets,
// a Compare and a stream() output stream the corpus at once in real JupyterLab.
// Counts, per animation frame, the requestAnimationFrame callbacks nbstream's
// code ran (record.mjs countWidgetFrames: from the stack, independent of the
// widget's own counters), reads the page loop's own counters, and returns every
// answer's text as it ended streamed, and as a fresh view of the same widget
// shows it (rendered from the whole text at once).
// Which loop the views use is the notebook's business (each widget's `debug`
// trait, set by tests/test_browser_frames.py).
// params: { notebook, before = roots after cell 0, streams = assistant messages the start cell makes final,
//           setup_cell = 0, start_cell = 1, again_cell = 2, check_code }
import { openNotebook, runCell, scenario } from './lab.mjs';
import { countWidgetFrames, kernelJson, readWidgetFrames, resetWidgetFrames } from './record.mjs';

const FINAL = ['done', 'stopped', 'error', 'timeout'];

/** Every assistant message's Markdown text, per widget root, from root `from` on. */
function answers(page, from, to) {
  return page.evaluate(
    ({ from, to }) =>
      [...document.querySelectorAll('.nbs-chat')].slice(from, to).map((r) =>
        [...r.querySelectorAll('.nbs-message[data-role="assistant"]')].map((m) => ({
          status: m.dataset.status,
          text: m.querySelector('.nbs-text')?.textContent ?? '',
          // the blocks rendered (tag names), code highlighting aside
          blocks: [...(m.querySelector('.nbs-text')?.children ?? [])].map((b) => b.tagName.toLowerCase()),
        })),
      ),
    { from, to },
  );
}

await scenario(async ({ page, params }) => {
  await page.addInitScript(countWidgetFrames);
  await openNotebook(page, params.notebook);
  await runCell(page, params.setup_cell ?? 0);
  const before = params.before;
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat').length >= n, before, { timeout: 60_000 });
  await resetWidgetFrames(page);
  const f0 = await readWidgetFrames(page);
  await runCell(page, params.start_cell ?? 1);
  // every assistant message on the page final (the new stream() output included)
  await page.waitForFunction(
    ({ n, final }) => {
      const ms = [...document.querySelectorAll('.nbs-chat .nbs-message[data-role="assistant"]')];
      return ms.length >= n && ms.every((m) => final.includes(m.dataset.status));
    },
    { n: params.streams, final: FINAL },
    { timeout: 120_000, polling: 200 },
  );
  const f1 = await readWidgetFrames(page);
  const loop = await page.evaluate(() => {
    const l = window.__nbstreamFrames1;
    return l ? JSON.parse(JSON.stringify(l.stats)) : null;
  });
  const roots = await page.evaluate(() => document.querySelectorAll('.nbs-chat').length);
  const streamed = await answers(page, 0, roots);
  // the same widgets shown again: new views render the whole text at once
  await runCell(page, params.again_cell ?? 2);
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat').length >= n, 2 * roots, { timeout: 60_000 });
  await page.waitForFunction(
    (from) => [...document.querySelectorAll('.nbs-chat')].slice(from).every((r) => r.querySelector('.nbs-message[data-role="assistant"] .nbs-text')?.textContent),
    roots,
    { timeout: 30_000, polling: 200 },
  );
  const fresh = await answers(page, roots, 2 * roots);
  const kernel = await kernelJson(page, params.check_code);
  return {
    roots,
    widget_frames: {
      calls: f1.calls - f0.calls,
      callbacks: f1.callbacks - f0.callbacks,
      frames: f1.frames - f0.frames,
      max_per_frame: f1.max_per_frame,
      frames_with_more: f1.frames_with_more,
    },
    loop,
    streamed,
    fresh,
    kernel,
  };
});
