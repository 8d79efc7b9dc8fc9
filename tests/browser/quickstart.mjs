// (c) The quickstart on the embedded model: run all cells of
// notebooks/quickstart.ipynb, ask a question, see a real answer stream in,
// press Stop mid-answer, see "stopped".
// params: { notebook = "notebooks/quickstart.ipynb", question, chat = 0,
//           run_timeout_ms = 300000, first_text_timeout_ms = 180000,
//           kernel_var = "chat", min_lengths = 4, grow_ms = 1500, grow_timeout_ms = 20000, after_ms = 500 }
// It stops the answer once it grew through min_lengths distinct lengths and for
// at least grow_ms (or the answer ended: then the test sees a final status).
import { FINAL_STATUSES, counters, kernelMessage, firstWithStatus, growth, now, recordMessage, SEL, chat, sendPrompt, waitForChat, waitForStatus, waitForText } from './chat.mjs';
import { openNotebook, runAllCells, scenario } from './lab.mjs';

await scenario(async ({ page, params, log, screenshot }) => {
  const index = params.chat ?? 0;
  const question = params.question ?? 'Tell me a long story about a lighthouse keeper and a storm.';
  const minLengths = params.min_lengths ?? 4;

  const openMs = await openNotebook(page, params.notebook ?? 'notebooks/quickstart.ipynb');
  const runMs = await runAllCells(page, { timeout: params.run_timeout_ms ?? 300_000 });
  const widgets = await waitForChat(page, { index });
  log(`ran all cells in ${runMs} ms; ${widgets} chat widget(s) on the page`);

  const tSend = await now(page);
  const id = await sendPrompt(page, question, { index });
  const rec = await recordMessage(page, id, { index });
  await waitForText(page, id, { index, timeout: params.first_text_timeout_ms ?? 180_000 });
  const tFirst = await now(page);
  // let the answer grow through a few distinct lengths, then stop it mid-answer
  const deadline = Date.now() + (params.grow_timeout_ms ?? 20_000);
  const growUntil = Date.now() + (params.grow_ms ?? 1500);
  let record = await rec.read();
  while ((growth(record).distinct_lengths < minLengths || Date.now() < growUntil) && Date.now() < deadline) {
    if (FINAL_STATUSES.includes(record.samples.at(-1)?.status)) break;
    await page.waitForTimeout(100);
    record = await rec.read();
  }
  const statusBeforeStop = record.samples.at(-1)?.status ?? null;
  await screenshot('streaming');

  const tClick = await now(page);
  await chat(page, index).locator(SEL.stop).click();
  const finalStatus = await waitForStatus(page, id, FINAL_STATUSES, { index, timeout: 15_000 });
  await page.waitForTimeout((params.after_ms ?? 500) + 100);
  record = await rec.stop();

  const stopped = firstWithStatus(record, 'stopped');
  const grew = growth(record, { to: tClick });
  const lastLength = record.samples.at(-1)?.length ?? -1;
  const text = (await page.evaluate(
    ({ sel, index, id }) => document.querySelectorAll(sel.root)[index]
      .querySelector(`${sel.message}[data-id="${CSS.escape(id)}"] ${sel.text}`)?.textContent ?? '',
    { sel: SEL, index, id },
  ));
  const kernel = params.kernel_var === null ? null : await kernelMessage(page, id, { variable: params.kernel_var ?? 'chat' });
  await chat(page, index).scrollIntoViewIfNeeded(); // for the final screenshot
  return {
    message_id: id,
    widgets,
    kernel_message: kernel,
    open_ms: openMs,
    run_all_ms: runMs,
    first_text_ms: tFirst - tSend,
    status_before_stop: statusBeforeStop,
    final_status: finalStatus,
    stop_latency_ms: stopped ? stopped.t - tClick : null,
    length_at_stopped: stopped ? stopped.length : null,
    final_length: lastLength,
    sampled_after_stop_ms: stopped ? record.end - stopped.t : 0,
    growth_after_stop: stopped ? lastLength - stopped.length : null,
    distinct_lengths: grew.distinct_lengths,
    increasing: grew.increasing,
    growth_frames: grew.growth_frames,
    chars_per_s: grew.lengths.length > 1 ? (1000 * (grew.lengths.at(-1) - grew.lengths[0])) / (tClick - tFirst) : 0,
    frames: record.frames,
    max_frame_gap_ms: record.max_frame_gap_ms,
    text: text.slice(0, 2000),
    counters: await counters(page, index),
  };
});
