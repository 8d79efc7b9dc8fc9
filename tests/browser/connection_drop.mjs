// The page loses its connection to the server for a few seconds mid-answer, then
// JupyterLab reconnects. How it is dropped: Chromium's network emulation takes the
// page offline (DevTools protocol) and the kernel's websocket is closed, as a network
// failure closes it (JupyterLab's kernel connection then retries, and fails while
// offline); online again, JupyterLab reconnects on its own. Meanwhile the kernel goes
// on streaming; jupyter_server keeps what it sends for the disconnected page and
// replays it on reconnection.
//
// variant "mid": dropped mid-answer, back while the answer still streams.
// variant "end": dropped so that the answer ends while offline, and the widget message
//   that carries the answer's final meta (with its last delta) is thrown away when
//   the server replays it after the reconnection: lost for real, with nothing after it
//   that would show a gap. It comes back twice over: JupyterLab's widget manager asks
//   every model's whole state again once the kernel connection is back (measured:
//   the view ends right even without the next), and the view says hello on
//   reconnection and on a silence while a message is live (connection.ts), which the
//   kernel answers with the metas of the messages that ended lately (pump.py), for
//   front ends that do not ask.
//
// Recorded once per frame before, during and after: every text shown must be a
// prefix of the kernel's final text (no gap, no duplicate, never shrinking), and the
// final text and status must be the kernel's.
// params: { notebook, variant, min_chars = 300, offline_ms = 3000 }
// Screenshots: <artifact>.png
import { kernelJson, prefixCheck, startRecorder, waitForAssistants, words } from './record.mjs';
import { openNotebook, runCell, scenario } from './lab.mjs';

await scenario(async ({ page, params, screenshot, log }) => {
  const variant = params.variant ?? 'mid';
  await openNotebook(page, params.notebook);
  await runCell(page, 0);
  const [id] = await waitForAssistants(page, { index: 0, n: 1 });
  const rec = await startRecorder(page, [{ name: 'answer', root: 0, id, keepText: true }]);
  await page.waitForFunction(
    ({ id, n }) => (document.querySelector(`.nbs-message[data-id="${id}"] .nbs-text`)?.textContent.length ?? 0) >= n,
    { id, n: params.min_chars ?? 300 },
    { timeout: 60_000, polling: 'raf' },
  );

  // watch the kernel connection's status, and (variant "end") drop widget messages
  await page.evaluate(({ drop, id }) => {
    const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    window.__nbsLink = [];
    k.connectionStatusChanged.connect((_, s) => window.__nbsLink.push([s, performance.now()]));
    if (drop) {
      window.__nbsDropped = 0;
      window.__nbsDroppedFinal = false;
      const handle = k._handleMessage.bind(k);
      k._handleMessage = async (msg) => {
        const status = msg.content?.data?.state?.[id]?.status;
        if (!window.__nbsDroppedFinal && ['done', 'stopped', 'error', 'timeout'].includes(status)) {
          window.__nbsDropped++;
          window.__nbsDroppedFinal = true; // only the first one
          return;
        }
        return handle(msg);
      };
    }
  }, { drop: variant === 'end', id });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  const conditions = { latency: 0, downloadThroughput: -1, uploadThroughput: -1 };
  await cdp.send('Network.emulateNetworkConditions', { ...conditions, offline: true });
  const lengthAtDrop = await page.evaluate((id) => document.querySelector(`.nbs-message[data-id="${id}"] .nbs-text`).textContent.length, id);
  await page.evaluate(() => {
    const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    if (!k._ws) throw new Error('no websocket on the kernel connection');
    k._ws.close(); // what a failing network does to it
  });
  await page.waitForTimeout(params.offline_ms ?? 3000); // the scenario: this long offline
  const statusWhileOffline = await page.evaluate((id) => document.querySelector(`.nbs-message[data-id="${id}"]`).dataset.status, id);
  await cdp.send('Network.emulateNetworkConditions', { ...conditions, offline: false });
  await page.waitForFunction(() => window.__nbsLink.some(([s]) => s === 'connected'), null, {
    timeout: 60_000,
    polling: 100,
  });
  if (variant === 'end') {
    await page.waitForFunction(() => window.__nbsDroppedFinal, null, { timeout: 60_000, polling: 100 });
  }
  const dropped = await page.evaluate(() => window.__nbsDropped ?? 0);
  const droppedFinal = await page.evaluate(() => window.__nbsDroppedFinal ?? false);
  await page.waitForFunction(
    (id) => ['done', 'stopped', 'error', 'timeout'].includes(document.querySelector(`.nbs-message[data-id="${id}"]`)?.dataset.status),
    id,
    { timeout: 90_000, polling: 100 },
  );
  await page.waitForTimeout(500); // a last frame
  const recorded = await rec.stop();
  const dom = await page.evaluate((id) => {
    const m = document.querySelector(`.nbs-message[data-id="${id}"]`);
    return { status: m.dataset.status, text: m.querySelector('.nbs-text').textContent,
             connection: document.querySelector('.nbs-chat').dataset.connection };
  }, id);
  const kernel = await kernelJson(
    page,
    `print(_nbs_json.dumps([m for m in chat.messages if m["id"] == ${JSON.stringify(id)}][0]))`,
  );
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  await screenshot();
  const link = await page.evaluate(() => window.__nbsLink.map(([s]) => s));
  log(`link: ${link.join(' > ')}; dropped ${dropped} widget messages`);
  return {
    length_at_drop: lengthAtDrop,
    status_while_offline: statusWhileOffline,
    link,
    dropped_messages: dropped,
    dropped_final_meta: droppedFinal,
    prefix: prefixCheck(recorded.series.answer, kernel.content),
    dom_status: dom.status,
    dom_connection: dom.connection,
    dom_equals_kernel: words(dom.text).join(' ') === words(kernel.content).join(' '),
    dom_words: words(dom.text).length,
    kernel_status: kernel.status,
    kernel_words: words(kernel.content).length,
  };
});
