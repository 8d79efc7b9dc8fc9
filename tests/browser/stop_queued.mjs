// One meaning of Stop, in a real JupyterLab: with one reply running and one queued
// behind it (one model answers one question at a time), the Stop button stops the
// running reply AND cancels the queued one, which therefore never starts. Then the
// same with Escape. Finally the kernel is asked what it holds for each message.
// params: { notebook, kernel_var = "chat" }
import { FINAL_STATUSES, SEL, chat, kernelMessage, messageState, sendPrompt, waitForChat, waitForStatus, waitForText } from './chat.mjs';
import { openNotebook, runAllCells, runCode, scenario } from './lab.mjs';

/** Send two prompts: the first answer streams, the second waits its turn. */
async function runningAndQueued(page, tag) {
  const running = await sendPrompt(page, `${tag}: first question`);
  await waitForText(page, running);
  const queued = await sendPrompt(page, `${tag}: second question`);
  // the second reply shows "queued" while the first still streams
  await waitForStatus(page, queued, ['queued']);
  const runningStatus = (await messageState(page, running))?.status ?? null;
  return { running, queued, runningStatus };
}

/** Wait until both replies are final in the page; their statuses and texts. */
async function ends(page, ids) {
  const out = {};
  for (const id of ids) {
    const status = await waitForStatus(page, id, FINAL_STATUSES, { timeout: 15_000 });
    out[id] = { status, text: (await messageState(page, id))?.text ?? null };
  }
  return out;
}

await scenario(async ({ page, params }) => {
  const variable = params.kernel_var ?? 'chat';
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page);

  // 1. the Stop button
  const a = await runningAndQueued(page, 'button');
  await chat(page).locator(SEL.stop).click();
  const byButton = await ends(page, [a.running, a.queued]);

  // 2. Escape in the widget
  const b = await runningAndQueued(page, 'escape');
  await chat(page).locator(SEL.messages).first().press('Escape');
  const byEscape = await ends(page, [b.running, b.queued]);

  // what the kernel holds: every reply's status, and what the source was asked
  const kernel = {};
  for (const id of [a.running, a.queued, b.running, b.queued]) {
    kernel[id] = await kernelMessage(page, id, { variable });
  }
  const asked = await runCode(page, 'import json as _j\nprint(_j.dumps(ASKED))');
  return {
    button: { ...a, ends: byButton },
    escape: { ...b, ends: byEscape },
    kernel,
    asked: JSON.parse(asked.trim().split('\n').at(-1)),
  };
});
