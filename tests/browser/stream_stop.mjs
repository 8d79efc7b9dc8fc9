// (a) Streaming and Stop: send a prompt, watch the answer grow frame by frame,
// press Stop, see "stopped" and no growth afterwards.
// Then asks the kernel (a new cell) what it kept for that message.
// params: { notebook, prompt = "Hello", grow_ms = 1500, after_ms = 500, chat = 0,
//           kernel_var = "chat" (null: do not ask the kernel) }
import { FINAL_STATUSES, counters, kernelMessage, firstWithStatus, growth, now, messageState, recordMessage, SEL, chat, sendPrompt, waitForChat, waitForStatus, waitForText } from './chat.mjs';
import { openNotebook, runAllCells, scenario } from './lab.mjs';

await scenario(async ({ page, params, log }) => {
  const index = params.chat ?? 0;
  const growMs = params.grow_ms ?? 1500;
  const afterMs = params.after_ms ?? 500;

  const openMs = await openNotebook(page, params.notebook);
  const runMs = await runAllCells(page);
  await waitForChat(page, { index });
  const before = await counters(page, index);

  const tSend = await now(page);
  const id = await sendPrompt(page, params.prompt ?? 'Hello', { index });
  const rec = await recordMessage(page, id, { index });
  await waitForText(page, id, { index, timeout: params.first_text_timeout_ms ?? 30_000 });
  const tFirst = await now(page);
  await page.waitForTimeout(growMs);
  const statusBeforeStop = (await rec.read()).samples.at(-1)?.status ?? null;
  log('status before stop:', statusBeforeStop);

  const tClick = await now(page);
  await chat(page, index).locator(SEL.stop).click();
  const finalStatus = await waitForStatus(page, id, FINAL_STATUSES, { index, timeout: 10_000 });
  await page.waitForTimeout(afterMs + 100);
  const record = await rec.stop();
  const after = await counters(page, index);
  const domText = (await messageState(page, id, { index }))?.text ?? null;
  const kernel = params.kernel_var === null ? null : await kernelMessage(page, id, { variable: params.kernel_var ?? 'chat' });
  await chat(page, index).scrollIntoViewIfNeeded(); // for the final screenshot

  const stopped = firstWithStatus(record, 'stopped');
  const grew = growth(record, { to: tClick });
  const afterStop = stopped ? growth(record, { from: stopped.t }) : null;
  const lastLength = record.samples.at(-1)?.length ?? -1;
  return {
    message_id: id,
    open_ms: openMs,
    run_all_ms: runMs,
    first_text_ms: tFirst - tSend,
    status_before_stop: statusBeforeStop,
    final_status: finalStatus,
    stop_latency_ms: stopped ? stopped.t - tClick : null,
    length_at_stopped: stopped ? stopped.length : null,
    final_length: lastLength,
    sampled_after_stop_ms: stopped ? record.end - stopped.t : 0,
    growth_after_stop: afterStop ? lastLength - stopped.length : null,
    distinct_lengths: grew.distinct_lengths,
    increasing: grew.increasing,
    growth_frames: grew.growth_frames,
    lengths: grew.lengths.slice(0, 200),
    frames: record.frames,
    max_frame_gap_ms: record.max_frame_gap_ms,
    dom_text: domText,
    kernel_message: kernel,
    counters_before: before,
    counters_after: after,
  };
});
