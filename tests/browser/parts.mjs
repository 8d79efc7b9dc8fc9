// A reasoning reply in the real page: the reasoning block is open with a live
// "Thinking… n s" while the model thinks, folds to "Thought for n s" when the
// answer starts, opens again on click, and the answer below it is the answer
// alone. Then a reply cut at the token limit: its status says so, and Continue
// asks the model to go on (a new turn in the same widget).
// params: { notebook }
import { SEL, chat, messageIds, waitForChat, waitForStatus } from './chat.mjs';
import { openNotebook, runAllCells, scenario } from './lab.mjs';

const block = (page, index, id) =>
  page.evaluate(({ sel, index, id }) => {
    const root = document.querySelectorAll(sel.root)[index];
    const m = root?.querySelector(`${sel.message}[data-id="${CSS.escape(id)}"]`);
    const d = m?.querySelector('details.nbs-reasoning');
    if (!d) return null;
    return {
      open: d.open,
      phase: d.dataset.phase ?? null,
      label: d.querySelector('.nbs-reasoning-label')?.textContent ?? '',
      announced: d.querySelector('[aria-live=polite]')?.textContent ?? '',
      reasoning: d.querySelector('.nbs-reasoning-text')?.textContent.trim() ?? '',
      answer: m.querySelector(':scope > .nbs-text')?.textContent.trim() ?? '',
      above: d.nextElementSibling === m.querySelector(':scope > .nbs-text'),
      copy: !!d.querySelector('button.nbs-copy-reasoning'),
      status: m.querySelector('.nbs-status')?.textContent ?? '',
    };
  }, { sel: SEL, index, id });

await scenario(async ({ page, params, log }) => {
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { index: 0 });
  await waitForChat(page, { index: 1 });
  const [id] = await messageIds(page, { index: 0 });

  // thinking: the block appears open, counting seconds
  await page.waitForFunction(({ sel, id }) => {
    const d = document.querySelector(`${sel.root} ${sel.message}[data-id="${CSS.escape(id)}"] details.nbs-reasoning`);
    return d && /Thinking… [1-9]\d* s/.test(d.textContent);
  }, { sel: SEL, id }, { timeout: 30_000, polling: 'raf' });
  const thinking = await block(page, 0, id);
  log('thinking:', thinking);

  // the answer starts: the block folds
  await page.waitForFunction(({ sel, id }) => {
    const m = document.querySelector(`${sel.root} ${sel.message}[data-id="${CSS.escape(id)}"]`);
    return (m?.querySelector(':scope > .nbs-text')?.textContent.trim().length ?? 0) > 0;
  }, { sel: SEL, id }, { timeout: 30_000, polling: 'raf' });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  const answering = await block(page, 0, id);
  log('answering:', answering);

  // a click on the summary opens it again, and it stays open to the end
  await chat(page, 0).locator('details.nbs-reasoning > summary').click();
  const clicked = await block(page, 0, id);
  await waitForStatus(page, id, ['done'], { index: 0, timeout: 30_000 });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  const done = await block(page, 0, id);
  log('done:', done);

  // the reply cut at the token limit, and Continue
  const [cutId] = await messageIds(page, { index: 1 });
  await waitForStatus(page, cutId, ['done'], { index: 1, timeout: 30_000 });
  const cutStatus = await chat(page, 1).locator(`${SEL.message}[data-id="${cutId}"] .nbs-status`).textContent();
  const finish = await chat(page, 1).locator(`${SEL.message}[data-id="${cutId}"]`).getAttribute('data-finish');
  const cont = chat(page, 1).locator(`${SEL.message}[data-id="${cutId}"] button.nbs-continue`);
  await cont.scrollIntoViewIfNeeded();
  // the click event itself (no hit test: the first widget's layout may still move)
  await cont.dispatchEvent('click');
  const disabledAfterClick = await cont.isDisabled();
  log('continue clicked; disabled:', disabledAfterClick);
  await page.waitForFunction(({ sel, cutId }) => {
    const root = document.querySelectorAll(sel.root)[1];
    const ids = [...root.querySelectorAll(`${sel.message}[data-role="assistant"]`)].map((m) => m.dataset.id);
    return ids.length === 2 && ids[0] === cutId;
  }, { sel: SEL, cutId }, { timeout: 30_000, polling: 'raf' });
  const users = await chat(page, 1).locator(`${SEL.message}[data-role="user"] ${SEL.text}`).allTextContents();
  await chat(page, 0).scrollIntoViewIfNeeded();
  return {
    thinking, answering, clicked, done, cut_status: cutStatus, cut_finish: finish,
    continue_disabled_after_click: disabledAfterClick, users,
  };
});
