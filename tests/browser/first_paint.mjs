// The first chat in a fresh page (benchmarks/browser_first_paint.py): from running
// the cell that makes it to the chat's first paint, and what the page had to
// take in for it: the script it parsed (blob: modules, from CDP
// Debugger.scriptParsed: the loader, the bundle, any chunk), and the websocket
// bytes the kernel sent until then. Not a timed test: it reports figures.
// params: { notebook, cell = 0 }   (the cell makes the chat and shows it; a fresh kernel)
import { openNotebook, runCell, scenario } from './lab.mjs';

await scenario(async ({ page, params }) => {
  const cdp = await page.context().newCDPSession(page);
  const scripts = [];
  cdp.on('Debugger.scriptParsed', (e) => {
    if (e.url.startsWith('blob:')) scripts.push({ url: e.url.slice(0, 60), length: e.length, at: Date.now() });
  });
  let wsBytes = 0;
  let counting = false;
  page.on('websocket', (ws) => {
    if (!ws.url().includes('/channels')) return;
    ws.on('framereceived', (f) => {
      if (counting) wsBytes += f.payload.length;
    });
  });
  await openNotebook(page, params.notebook);
  await cdp.send('Debugger.enable');
  // the first frame that shows the chat: recorded in the page, on its clock
  await page.evaluate(() => {
    const rec = { painted: null, root: null };
    window.__nbsFirstPaint = rec;
    const tick = (t) => {
      if (rec.root !== null) {
        rec.painted = t; // the frame after the one that attached it: it was painted
        return;
      }
      if (document.querySelector('.nbs-chat .nbs-message')) rec.root = t;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const before = scripts.length;
  counting = true;
  const t0 = await page.evaluate(() => performance.now());
  const wall0 = Date.now();
  await runCell(page, params.cell ?? 0, { via: 'keyboard' });
  await page.waitForFunction(() => window.__nbsFirstPaint.painted !== null, null, { timeout: 60_000, polling: 50 });
  const wallPaint = Date.now();
  const rec = await page.evaluate(() => window.__nbsFirstPaint);
  counting = false;
  const parsed = scripts.slice(before).filter((s) => s.at <= wallPaint);
  return {
    first_paint_ms: Math.round(rec.painted - t0),
    script_kb: Math.round(parsed.reduce((a, s) => a + s.length, 0) / 102.4) / 10,
    scripts: parsed.map((s) => s.length),
    ws_kb: Math.round(wsBytes / 102.4) / 10,
    chunk_loads: await page.evaluate(() => window.__nbstreamChunkLoads ?? []),
    wall_ms: wallPaint - wall0,
  };
});
