// A chat scenario for front ends other than JupyterLab (marimo, Voilà): the page is
// any URL that shows one nbstream chat. Locators are Playwright's, which pierce
// open shadow roots (marimo renders an anywidget inside one), unlike the
// document.querySelectorAll helpers of chat.mjs.
//
// runChatChecks(page, { label }) checks, in order: the chat renders; a prompt sent
// with Enter streams (the text is seen growing) and finishes `done` with the whole
// answer; a long answer asked with the Send button is stopped with the Stop button
// (`stopped`, its text a prefix of the whole answer). The page's app answers
// "You said: <prompt>." then " word0 word1 ..." (400 words when the prompt starts
// with "long", 12 otherwise), as examples/marimo_chat.py does.

export const SEL = {
  root: '.nbs-chat',
  assistant: '.nbs-message[data-role="assistant"]',
  input: 'textarea.nbs-input',
  send: 'button.nbs-send',
  stop: 'button.nbs-stop',
};

export function expectedAnswer(prompt) {
  const n = prompt.startsWith('long') ? 400 : 12;
  let text = `You said: ${prompt}.`;
  for (let i = 0; i < n; i++) text += ` word${i}`;
  return text;
}

const message = (page, id) => page.locator(`.nbs-message[data-id="${id}"]`);

export async function textOf(page, id) {
  // the rendered Markdown ends with a newline the source text does not have
  return ((await message(page, id).locator('.nbs-text').textContent()) ?? '').trimEnd();
}

export async function statusOf(page, id) {
  return message(page, id).getAttribute('data-status');
}

export async function waitForChat(page, timeout = 90_000) {
  await page.locator(SEL.root).first().waitFor({ state: 'visible', timeout });
}

/** Send `prompt` (Enter, or the Send button); resolves with the new reply's id. */
export async function send(page, prompt, { via = 'enter' } = {}) {
  const before = await page.locator(SEL.assistant).count();
  const input = page.locator(SEL.input).first();
  await input.click();
  await input.fill(prompt);
  if (via === 'button') await page.locator(SEL.send).first().click();
  else await input.press('Enter');
  const reply = page.locator(SEL.assistant).nth(before);
  await reply.waitFor({ state: 'attached', timeout: 60_000 });
  return reply.getAttribute('data-id');
}

/** Poll the reply's text until its status is final; returns {status, text, lengths}. */
export async function follow(page, id, { until = ['done', 'stopped', 'error', 'timeout'], timeout = 60_000, onText } = {}) {
  const lengths = [];
  const deadline = Date.now() + timeout;
  for (;;) {
    const [status, text] = [await statusOf(page, id), await textOf(page, id)];
    if (lengths.at(-1) !== text.length) lengths.push(text.length);
    if (onText && (await onText(text, status))) return { status, text, lengths };
    if (until.includes(status)) return { status, text, lengths };
    if (Date.now() > deadline) throw new Error(`reply ${id} still ${status} after ${timeout} ms (${text.length} chars)`);
    await page.waitForTimeout(30); // polling the page, not waiting for the kernel's work
  }
}

export async function runChatChecks(page, { label = 'page' } = {}) {
  await waitForChat(page);
  const out = { rendered: true };

  const prompt = `hello from ${label}`;
  const id = await send(page, prompt);
  const first = await follow(page, id);
  out.first = { status: first.status, text: first.text, growth_steps: first.lengths.length,
    expected: expectedAnswer(prompt) };

  const long = 'long answer please';
  const id2 = await send(page, long, { via: 'button' });
  await follow(page, id2, { onText: (text, status) => status === 'running' && text.length > 40 });
  await page.locator(SEL.stop).first().click();
  const stopped = await follow(page, id2);
  out.stopped = { status: stopped.status, length: stopped.text.length,
    prefix: expectedAnswer(long).startsWith(stopped.text), full_length: expectedAnswer(long).length };
  return out;
}
