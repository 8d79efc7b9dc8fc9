// Scrolling that respects the reader, in real JupyterLab, while one long reply
// streams (params.words words; its first part is one long paragraph):
// - the notebook's own scroll position never changes because of the stream;
// - while the long paragraph grows, the list's scroll height grows with it, and
//   at every frame the list is at its bottom or offers "Jump to latest";
// - the list follows until the top of the reply reaches the top of its
//   viewport, then stays there (the reply is read from its beginning);
// - after "Jump to latest" it follows; when the reader scrolls up (mouse wheel),
//   their place is kept while the text keeps coming; the jump follows again.
// A recorder in the page takes one sample per animation frame.
// params: { notebook, timeout_ms }
// Screenshots: <artifact>-pinned-widget.png
import path from 'node:path';
import { SEL, sendPrompt, waitForChat } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, scenario } from './lab.mjs';

/** In the page: find the notebook's scroller, put the widget near its top, start recording. */
function startRecorder() {
  const root = document.querySelector('.nbs-chat');
  let scroller = root.parentElement;
  while (scroller && !(/(auto|scroll)/.test(getComputedStyle(scroller).overflowY) && scroller.scrollHeight > scroller.clientHeight)) {
    scroller = scroller.parentElement;
  }
  if (!scroller) throw new Error('no scrolling ancestor of the widget');
  scroller.scrollTop += root.getBoundingClientRect().top - scroller.getBoundingClientRect().top - 40;
  const list = root.querySelector('.nbs-messages');
  const jump = root.querySelector('.nbs-jump');
  const state = { samples: [], running: true, scroller: scroller.className };
  window.__nbsScroll = state;
  const tick = () => {
    if (!state.running) return;
    const reply = [...list.querySelectorAll('.nbs-message[data-role="assistant"]')].pop();
    const md = reply?.querySelector('.nbs-md');
    state.samples.push({
      t: performance.now(),
      nb: scroller.scrollTop,
      top: list.scrollTop,
      height: list.scrollHeight,
      client: list.clientHeight,
      jump: !jump.hidden,
      reply: reply ? reply.getBoundingClientRect().top - list.getBoundingClientRect().top - list.clientTop + list.scrollTop : null,
      len: md?.textContent.length ?? 0,
      blocks: md?.children.length ?? 0,
      status: reply?.dataset.status ?? null,
    });
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  return state.scroller;
}

const listTop = (page) => page.evaluate(() => document.querySelector('.nbs-chat .nbs-messages').scrollTop);

await scenario(async ({ page, params, log }) => {
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  await page.waitForTimeout(300); // let the notebook settle its layout before the baseline (the scenario's own pause)
  const scroller = await page.evaluate(startRecorder);
  log('notebook scroller:', scroller);
  const timeout = params.timeout_ms ?? 60_000;

  const id = await sendPrompt(page, 'go');
  // 1. the long paragraph: the list follows, then stops at the reply's top
  await page.waitForFunction(() => !document.querySelector('.nbs-chat .nbs-jump').hidden, null, { timeout, polling: 'raf' });
  const pinnedAt = await page.evaluate(() => window.__nbsScroll.samples.length);
  const root = page.locator(SEL.root).first();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-pinned-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });

  // 2. Jump to latest: follows the bottom
  await page.locator('.nbs-chat .nbs-jump').click();
  await page.waitForFunction(
    () => {
      const l = document.querySelector('.nbs-chat .nbs-messages');
      return l.scrollHeight - l.scrollTop - l.clientHeight <= 24 && document.querySelector('.nbs-chat .nbs-jump').hidden;
    },
    null,
    { timeout, polling: 'raf' },
  );
  // 3. the reader scrolls up with the wheel, and reads while the text keeps coming
  const box = await page.locator('.nbs-chat .nbs-messages').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -300);
  await page.waitForFunction(() => !document.querySelector('.nbs-chat .nbs-jump').hidden, null, { timeout, polling: 'raf' });
  await page.waitForFunction(
    () => {
      const s = window.__nbsScroll.samples;
      const a = s[s.length - 1];
      const b = s[s.length - 2];
      return a && b && a.top === b.top; // the wheel's smooth scroll has ended
    },
    null,
    { timeout, polling: 'raf' },
  );
  const readAt = await listTop(page);
  const lenAtRead = await page.evaluate(() => window.__nbsScroll.samples.at(-1).len);
  await page.waitForFunction(
    (n) => (window.__nbsScroll.samples.at(-1)?.len ?? 0) >= n + 5000 || window.__nbsScroll.samples.at(-1)?.status === 'done',
    lenAtRead,
    { timeout, polling: 'raf' },
  );
  const keptAt = await listTop(page);
  const lenAfterRead = await page.evaluate(() => window.__nbsScroll.samples.at(-1).len);
  const jumpWhileReading = await page.evaluate(() => !document.querySelector('.nbs-chat .nbs-jump').hidden);

  // 4. jump again, and follow to the end
  await page.locator('.nbs-chat .nbs-jump').click();
  await page.waitForFunction(
    (sel) => document.querySelector(`${sel.root} ${sel.message}[data-role="assistant"]`)?.dataset.status === 'done',
    SEL,
    { timeout, polling: 100 },
  );
  await page.waitForTimeout(200); // a few frames after the last delta (the scenario's own pause)
  const end = await page.evaluate(() => {
    const l = document.querySelector('.nbs-chat .nbs-messages');
    window.__nbsScroll.running = false;
    return { at_bottom: l.scrollHeight - l.scrollTop - l.clientHeight <= 24, jump: !document.querySelector('.nbs-chat .nbs-jump').hidden };
  });
  const samples = await page.evaluate(() => window.__nbsScroll.samples);
  log('samples:', samples.length, 'pinned at sample', pinnedAt);
  return {
    id,
    samples,
    pinned_at: pinnedAt,
    read: { at: readAt, kept: keptAt, len_before: lenAtRead, len_after: lenAfterRead, jump: jumpWhileReading },
    end,
    screenshot_widget: shot,
  };
});
