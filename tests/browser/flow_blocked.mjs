// The kernel's main thread blocked for 3 s mid-stream: a long answer streams,
// then a cell runs `time.sleep(3)`. The answer's text length is sampled every
// frame, with the kernel's status (busy / idle): the text must keep growing
// while the kernel is busy. The busy cell prints how many acks the kernel read
// during its sleep (on a comm subshell: some; with comms on the main thread:
// none, and the pump falls back to its plain bounded rate).
// params: { notebook, chat_cell = 0, busy_cell = 1, warmup_ms = 600 }
// Screenshot: <artifact>.png
import { chat, counters, now, SEL } from './chat.mjs';
import { growthOf, startRecorder, valueAt, waitForAssistants } from './record.mjs';
import { cellOutputText, openNotebook, runCell, scenario, watchOutput } from './lab.mjs';

await scenario(async ({ page, params }) => {
  const busyCell = params.busy_cell ?? 1;
  const openMs = await openNotebook(page, params.notebook);
  await runCell(page, params.chat_cell ?? 0);
  const [id] = await waitForAssistants(page, { index: 0, n: 1 });
  const rec = await startRecorder(
    page,
    [
      { name: 'answer', root: 0, id },
      { name: 'counters', root: 0, counters: true },
    ],
    { kernel: true },
  );
  await page.waitForFunction(
    (id) => (document.querySelector(`.nbs-message[data-id="${id}"] .nbs-text`)?.textContent.length ?? 0) > 0,
    id,
    { timeout: 30_000, polling: 'raf' },
  );
  await page.waitForTimeout(params.warmup_ms ?? 600);

  const watch = await watchOutput(page, busyCell, 'slept', { timeout: 20_000 });
  const tPress = await now(page);
  await runCell(page, busyCell, { via: 'keyboard' });
  const seen = await watch.wait();
  await page.waitForTimeout(300);
  const record = await rec.read();
  const sleptLine = (await cellOutputText(page, busyCell)).trim();

  await chat(page, 0).locator(SEL.stop).click().catch(() => {});
  await page.waitForTimeout(200);
  const final = await rec.stop();

  // the busy period: from the key press to the cell's output (the 3 s sleep and
  // the round trip around it). The kernel's status as the page sees it also
  // flips busy/idle for each comm message, so it is reported, not used.
  const from = tPress;
  const to = seen.seen_at;
  let longestBusy = 0;
  for (let i = 0; i < record.kernel.length; i++) {
    const k = record.kernel[i];
    if (k.status === 'busy' && k.t >= tPress - 50) {
      const end = record.kernel[i + 1]?.t ?? record.end;
      longestBusy = Math.max(longestBusy, end - k.t);
    }
  }
  const answer = record.series.answer;
  const before = growthOf(answer, { from: from - 1000, to: from });
  const during = growthOf(answer, { from, to });
  const deltasDuring =
    (valueAt(record.series.counters, to, 'deltas') ?? 0) - (valueAt(record.series.counters, from, 'deltas') ?? 0);
  const acks = Number(/slept (\d+)/.exec(sleptLine)?.[1] ?? NaN);
  return {
    message_id: id,
    open_ms: openMs,
    busy_ms: Math.round(to - from),
    longest_kernel_busy_ms: Math.round(longestBusy),
    slept_output_ms: Math.round(seen.ms),
    status_at_busy_end: valueAt(answer, to, 'status'),
    before_busy_1s: before,
    during_busy: during,
    deltas_during_busy: deltasDuring,
    deltas_per_s_during_busy: Math.round((deltasDuring * 1000) / Math.max(1, to - from)),
    kernel_acks_read_while_sleeping: acks,
    busy_cell_output: sleptLine,
    kernel_status_changes: record.kernel.filter((k) => k.t >= tPress && k.t <= to).length,
    frames: final.frames,
    max_frame_gap_ms: Math.round(final.max_frame_gap_ms),
    counters: await counters(page, 0),
  };
});
