// The page's side of a soak (benchmarks/soak.py): a chat answers batch after batch of
// questions from a thread in the kernel and is cleared after each; the kernel puts
// "soak <k>/<n>" in the widget's title at each batch's end and pauses. Then the page
// forces a garbage collection and reads Chromium's metrics (JS heap used, DOM nodes,
// event listeners). At the end, the kernel's own figures per batch are read back.
// params: { notebook, batches, timeout_ms }
// Returns { page: [{batch, js_heap_mb, nodes, chat_nodes, listeners, chat_listeners}], kernel: [...] }
import { kernelJson } from './record.mjs';
import { openNotebook, runCell, scenario } from './lab.mjs';

await scenario(async ({ page, params, log }) => {
  await openNotebook(page, params.notebook);
  await runCell(page, 0);
  await page.waitForSelector('.nbs-chat', { timeout: 60_000 });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const rows = [];
  for (let b = 1; b <= params.batches; b++) {
    const title = await page.waitForFunction(
      (b) => {
        const t = document.querySelector('.nbs-chat .nbs-title')?.textContent ?? '';
        return t === 'soak failed' || t.startsWith(`soak ${b}/`) ? t : false;
      },
      b,
      { timeout: params.timeout_ms ?? 600_000, polling: 100 },
    );
    if ((await title.jsonValue()) === 'soak failed') break;
    await cdp.send('HeapProfiler.collectGarbage');
    const { metrics } = await cdp.send('Performance.getMetrics');
    const m = Object.fromEntries(metrics.map((x) => [x.name, x.value]));
    const chatNodes = await page.evaluate(() => document.querySelector('.nbs-chat').querySelectorAll('*').length);
    // the widget's own listeners: its element and everything under it (the page's count
    // also holds JupyterLab's, which adds some now and then: a notification, a tooltip)
    const { result } = await cdp.send('Runtime.evaluate', { expression: "document.querySelector('.nbs-chat')" });
    const { listeners: own } = await cdp.send('DOMDebugger.getEventListeners', {
      objectId: result.objectId,
      depth: -1,
      pierce: true,
    });
    await cdp.send('Runtime.releaseObject', { objectId: result.objectId });
    rows.push({
      batch: b,
      js_heap_mb: m.JSHeapUsedSize / 2 ** 20,
      nodes: m.Nodes,
      chat_nodes: chatNodes,
      listeners: m.JSEventListeners,
      chat_listeners: own.length,
    });
    log(`batch ${b}: heap ${(m.JSHeapUsedSize / 2 ** 20).toFixed(1)} MB, ${m.Nodes} nodes`);
  }
  const kernel = await kernelJson(page, 'print(_nbs_json.dumps({"rows": SOAK, "errors": SOAK_ERRORS}))');
  if (kernel.errors.length > 0) throw new Error(`the soak failed in the kernel: ${kernel.errors.join('; ')}`);
  return { page: rows, kernel: kernel.rows };
});
