// Mode "stream" end to end: a cell that shows one live answer (nbstream.stream()
// or the %%stream magic) is run; the answer is recorded frame by frame from
// before the cell runs until it is done. Reports the growth, the layout (no
// input box, the prompt, Stop while live, copy button, a long answer shown
// from its beginning under a maximum height), and what the kernel holds.
// params: { notebook, variable: the handle's name in the kernel ("view", "_stream") }
// Screenshots: <artifact>-streaming.png (mid-stream), <artifact>.png (the end).
import { startRecorder, growthOf, kernelJson, waitAllFinal, waitForAssistants } from './record.mjs';
import { openNotebook, runAllCells, scenario } from './lab.mjs';

await scenario(async ({ page, params, screenshot }) => {
  const openMs = await openNotebook(page, params.notebook);
  const rec = await startRecorder(page, [{ name: 'answer', root: 0, nth: 0 }]);
  const runMs = await runAllCells(page);
  await waitForAssistants(page, { index: 0, n: 1 });

  // mid-stream: the layout of a live answer
  await page.waitForFunction(
    () => {
      const m = document.querySelector('.nbs-chat .nbs-message[data-role="assistant"]');
      return m?.dataset.status === 'running' && (m.querySelector('.nbs-text')?.textContent.length ?? 0) > 0;
    },
    null,
    { timeout: 30_000, polling: 'raf' },
  );
  const live = await page.evaluate(() => {
    const root = document.querySelector('.nbs-chat');
    const stop = root.querySelector('button.nbs-stop');
    return {
      mode: root.dataset.mode,
      stop_visible: Boolean(stop && !stop.hidden && stop.getBoundingClientRect().width > 0),
      inputs: root.querySelectorAll('textarea, .nbs-input, .nbs-form, button.nbs-send').length,
    };
  });
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  const streamingShot = await screenshot('streaming');

  await waitAllFinal(page, { index: 0, timeout: 60_000 });
  await page.waitForTimeout(200);
  const record = await rec.stop();
  const end = await page.evaluate(() => {
    const root = document.querySelector('.nbs-chat');
    const list = root.querySelector('.nbs-messages');
    const answer = root.querySelector('.nbs-message[data-role="assistant"]');
    const stop = root.querySelector('button.nbs-stop');
    const copy = answer.querySelector('button.nbs-copy-msg');
    return {
      roots: document.querySelectorAll('.nbs-chat').length,
      prompts: [...root.querySelectorAll('.nbs-message[data-role="user"]')].map((m) => m.querySelector('.nbs-text').textContent),
      answer_text: answer.querySelector('.nbs-text').textContent,
      answer_status: answer.dataset.status,
      status_line: answer.querySelector('.nbs-status')?.textContent ?? null,
      stop_visible: Boolean(stop && !stop.hidden),
      copy_visible: Boolean(copy && !copy.hidden),
      max_height: getComputedStyle(list).maxHeight,
      scroll: {
        top: list.scrollTop,
        client: list.clientHeight,
        height: list.scrollHeight,
        // where the answer starts in the list's content, and whether "Jump to latest" shows
        answer: answer.getBoundingClientRect().top - list.getBoundingClientRect().top - list.clientTop + list.scrollTop,
        jump: !root.querySelector('.nbs-jump').hidden,
      },
      counters: JSON.parse(JSON.stringify(root.__nbstream)),
    };
  });
  const kernel = await kernelJson(
    page,
    `print(_nbs_json.dumps({"text": ${params.variable}.text, "status": ${params.variable}.status}))`,
  );
  const series = record.series.answer;
  return {
    open_ms: openMs,
    run_all_ms: runMs,
    live,
    end,
    growth: growthOf(series),
    distinct_lengths: new Set(series.map((s) => s.length).filter((n) => n > 0)).size,
    frames: record.frames,
    max_frame_gap_ms: Math.round(record.max_frame_gap_ms),
    kernel,
    streaming_screenshot: streamingShot,
  };
});
