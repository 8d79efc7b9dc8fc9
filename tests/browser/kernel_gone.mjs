// The kernel goes away mid-answer: restarted, shut down, or (reopen) the notebook is
// saved with widget state mid-stream and opened again on a fresh kernel that never
// knew the widget. The view must stop saying "streaming" (at once where the front
// end says so), keep the text it showed, say plainly that it is not connected and
// what to do, offer nothing that asks the kernel, and show no error dialog.
// params: { notebook, how: "restart" | "shutdown" | "reopen", min_chars = 200, notebook7 }
// Screenshots: <artifact>-gone.png
import { saveNotebook, waitForAssistants } from './record.mjs';
import { api, kernelOfNotebook, openNotebook, runCell, runFirstCellInNotebook7, scenario, shutDownAll } from './lab.mjs';

/** What the page shows of the first chat and its first answer. */
async function shown(page) {
  return page.evaluate(() => {
    const root = document.querySelector('.nbs-chat');
    const m = root?.querySelector('.nbs-message[data-role="assistant"]');
    const offline = root?.querySelector('.nbs-offline');
    return {
      connection: root?.dataset.connection ?? null,
      status: m?.dataset.status ?? null,
      label: m?.querySelector('.nbs-status')?.textContent ?? null,
      cut_off: m?.classList.contains('nbs-disconnected') ?? false,
      busy: m?.getAttribute('aria-busy') === 'true',
      waiting: Boolean(m?.querySelector('.nbs-waiting')),
      chars: m?.querySelector('.nbs-text')?.textContent.length ?? 0,
      offline: offline && !offline.hidden ? offline.textContent : null,
      input_disabled: root?.querySelector('textarea.nbs-input')?.disabled ?? null,
      send_disabled: root?.querySelector('.nbs-send')?.disabled ?? null,
      stop_disabled: root?.querySelector('.nbs-stop')?.disabled ?? null,
      copy_all_disabled: root?.querySelector('.nbs-copy-all')?.disabled ?? null,
      dialogs: document.querySelectorAll('.jp-Dialog').length,
    };
  });
}

await scenario(async ({ page, params, screenshot, log }) => {
  const how = params.how;
  const minChars = params.min_chars ?? 200;
  if (params.notebook7) {
    await runFirstCellInNotebook7(page, params.notebook, page.locator('.nbs-chat').first());
  } else {
    await openNotebook(page, params.notebook);
    await runCell(page, 0);
  }
  await waitForAssistants(page, { index: 0, n: 1 });
  await page.waitForFunction(
    (n) => (document.querySelector('.nbs-message[data-role="assistant"] .nbs-text')?.textContent.length ?? 0) >= n,
    minChars,
    { timeout: 60_000, polling: 100 },
  );
  const live = await shown(page);
  let before = live.chars;
  const t0 = Date.now();
  // through the server's REST API, as another tab or `jupyter` would (any front end)
  const { id: kernelId } = await kernelOfNotebook(params.notebook);
  if (how === 'restart') {
    await api('POST', `api/kernels/${kernelId}/restart`);
  } else if (how === 'shutdown') {
    await api('DELETE', `api/kernels/${kernelId}`);
  } else if (how === 'reopen') {
    before = (await shown(page)).chars; // (the saved state holds at least this)
    await saveNotebook(page); // mid-stream, with widget state (the test turned saveState on)
    await shutDownAll();
    await openNotebook(page, params.notebook);
    await page.waitForSelector('.nbs-chat .nbs-message[data-role="assistant"]', { timeout: 30_000 });
  } else {
    throw new Error(`unknown how: ${how}`);
  }
  await page.waitForFunction(() => document.querySelector('.nbs-chat')?.dataset.connection === 'lost', null, {
    timeout: 30_000,
    polling: 50,
  });
  const lostAfterMs = Date.now() - t0;
  if (how === 'restart') {
    // a restart through the REST API reaches the page only as the new kernel's
    // 'starting'; a kernel slow to start (a loaded machine) lets the view notice the
    // silence first and say no kernel answers, until the new one says it started
    await page.waitForFunction(
      () => document.querySelector('.nbs-chat .nbs-offline')?.textContent?.startsWith('The kernel restarted'),
      null,
      { timeout: 60_000, polling: 50 },
    );
  }
  const restartSaidAfterMs = Date.now() - t0;
  const gone = await shown(page);
  // nothing changes afterwards: no late text, no status change
  await page.waitForTimeout(1500); // (an absence can only be watched for a while)
  const later = await shown(page);
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  await screenshot('gone');
  log(`lost ${lostAfterMs} ms after ${how} (said ${restartSaidAfterMs} ms after)`);
  return { live, chars_before: before, lost_after_ms: lostAfterMs, said_after_ms: restartSaidAfterMs, gone, later };
});
