// (b) The kernel stays free: while a long answer streams, run another cell
// (print("probe-ok")) from the keyboard and see its output appear while the
// answer is still running. The same probe is first timed with nothing streaming.
// params: { notebook, chat_cell = 0, probe_cell = 1, needle = "probe-ok",
//           prompt = "Go", warmup_ms = 1000, chat = 0 }
import { chat, counters, growth, recordMessage, SEL, sampleAt, sendPrompt, waitForChat, waitForText } from './chat.mjs';
import { openNotebook, runCell, scenario, watchOutput } from './lab.mjs';

await scenario(async ({ page, params }) => {
  const index = params.chat ?? 0;
  const chatCell = params.chat_cell ?? 0;
  const probeCell = params.probe_cell ?? 1;
  const needle = params.needle ?? 'probe-ok';

  const openMs = await openNotebook(page, params.notebook);
  await runCell(page, chatCell);
  await waitForChat(page, { index });

  // baseline: the probe with nothing streaming
  let watch = await watchOutput(page, probeCell, needle);
  await runCell(page, probeCell, { via: 'keyboard' });
  const idle = await watch.wait();

  const id = await sendPrompt(page, params.prompt ?? 'Go', { index });
  const rec = await recordMessage(page, id, { index });
  // streaming has begun once text shows; its status is checked by the test
  await waitForText(page, id, { index, timeout: 30_000 });
  await page.waitForTimeout(params.warmup_ms ?? 1000);

  watch = await watchOutput(page, probeCell, needle);
  await runCell(page, probeCell, { via: 'keyboard' });
  const during = await watch.wait();
  await page.waitForTimeout(300);
  const record = await rec.read();
  const atProbe = sampleAt(record, during.seen_at);

  // leave nothing running behind
  await chat(page, index).locator(SEL.stop).click().catch(() => {});
  const final = await rec.stop();
  return {
    message_id: id,
    open_ms: openMs,
    probe_idle_ms: idle.ms,
    probe_during_stream_ms: during.ms,
    status_when_probe_seen: atProbe?.status ?? null,
    length_when_probe_seen: atProbe?.length ?? null,
    growth_after_probe: (sampleAt(record, during.seen_at + 300)?.length ?? 0) - (atProbe?.length ?? 0),
    distinct_lengths: growth(final).distinct_lengths,
    frames: final.frames,
    max_frame_gap_ms: final.max_frame_gap_ms,
    counters: await counters(page, index),
  };
});
