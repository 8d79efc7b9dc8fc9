// Edit and branches in real JupyterLab: Regenerate keeps the old answer (‹ 2 / 2 ›
// switches back to it), Edit asks a question anew as a new branch, and switching
// shows each branch as it was. Optionally, in Notebook 7, a chat whose branches Python
// made (send, then regenerate): the switch shows on the last answer, and "previous"
// brings back the earlier answer (the kernel answers the switch with `current`).
// params: { notebook, nb7_notebook?, nb7_texts? ([question, earlier answer, later answer]) }
// Screenshots: <artifact>-widget.png (the edited branch, the switch on the question),
// <artifact>-notebook7-widget.png (Notebook 7, the earlier answer switched back to)
import path from 'node:path';
import { SEL, waitForChat } from './chat.mjs';
import {
  ARTIFACT,
  ARTIFACTS,
  openNotebook,
  runAllCells,
  runFirstCellInNotebook7,
  scenario,
  typeInto,
} from './lab.mjs';

function shown(sel) {
  const root = document.querySelector(sel.root);
  return [...root.querySelectorAll(sel.message)].map((m) => ({
    id: m.dataset.id,
    role: m.dataset.role,
    status: m.dataset.status,
    text: (m.querySelector(sel.text)?.textContent ?? '').trim(),
    pos: m.querySelector('.nbs-branch-pos')?.textContent ?? null,
  }));
}

/** Wait until the messages shown are `texts` (in order) and the last one is final. */
async function waitShown(page, texts) {
  await page.waitForFunction(
    ({ sel, texts }) => {
      const ms = [...document.querySelectorAll(`${sel.root} ${sel.message}`)];
      const last = ms[ms.length - 1];
      return (
        ms.length === texts.length &&
        ms.every((m, i) => (m.querySelector(sel.text)?.textContent ?? '').trim() === texts[i]) &&
        ['done', 'stopped', 'error', 'timeout'].includes(last?.dataset.status)
      );
    },
    { sel: SEL, texts },
    { timeout: 60_000, polling: 100 },
  );
  return page.evaluate(shown, SEL);
}

const click = (page, selector) => page.locator(selector).first().click();

await scenario(async ({ page, params, log }) => {
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  const steps = {};
  steps.asked = await waitShown(page, ['first question', 'answer 1 to first question']);

  await click(page, `${SEL.root} button.nbs-regenerate`);
  steps.regenerated = await waitShown(page, ['first question', 'answer 2 to first question']);

  await click(page, `${SEL.root} .nbs-message[data-role="assistant"] button.nbs-branch-prev`);
  steps.back = await waitShown(page, ['first question', 'answer 1 to first question']);

  await click(page, `${SEL.root} .nbs-message[data-role="user"] button.nbs-edit`);
  const input = page.locator(SEL.input).first();
  steps.input_on_edit = await input.inputValue();
  await typeInto(page, input, 'edited question', { fill: true });
  await page.keyboard.press('Enter');
  steps.edited = await waitShown(page, ['edited question', 'answer 3 to edited question']);

  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });

  await click(page, `${SEL.root} .nbs-message[data-role="user"] button.nbs-branch-prev`);
  steps.original = await waitShown(page, ['first question', 'answer 1 to first question']);
  log('steps:', JSON.stringify(steps));
  const theme = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  const out = { steps, screenshot_widget: shot, theme };
  if (params.nb7_notebook) out.notebook7 = await inNotebook7(page, params, log);
  return out;
});

/** Branches made by Python, in Notebook 7: the switch, "previous", one screenshot. */
async function inNotebook7(page, params, log) {
  const [question, earlier, later] = params.nb7_texts;
  const attempts = await runFirstCellInNotebook7(page, params.nb7_notebook, page.locator(SEL.root).first());
  log(`notebook 7: the widget showed after ${attempts} run(s) of the cell`);
  const steps = {};
  steps.shown = await waitShown(page, [question, later]);
  await click(page, `${SEL.root} .nbs-message[data-role="assistant"] button.nbs-branch-prev`);
  steps.back = await waitShown(page, [question, earlier]);
  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-notebook7-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  log('notebook 7 steps:', JSON.stringify(steps));
  return { steps, screenshot_widget: shot };
}
