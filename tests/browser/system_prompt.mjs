// A system prompt you can see, in real JupyterLab: the line at the top of the
// chat shows the kernel's system prompt collapsed to its first line; the user
// expands it, edits it (Ctrl+Enter saves, and neither runs the cell nor leaves
// the widget), asks, and the kernel's source answers with the system prompt it
// was given; the reply's status line carries the generation options on hover
// (its title); `chat.system_prompt = ...` from Python updates the line.
// params: { notebook, label, python_prompt, edited, nb7_notebook? }
// Screenshots: <artifact>-<label>-widget.png (the line collapsed),
// <artifact>-notebook7-<label>-widget.png (expanded, after an edit and a question there)
import path from 'node:path';
import { SEL, sendPrompt, waitForChat, waitForStatus } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, runCode, runFirstCellInNotebook7, scenario } from './lab.mjs';

const BAR = '.nbs-system';

/** What the system prompt line and the page show now. */
function readBar(sel) {
  const root = document.querySelector(sel.root);
  const bar = root.querySelector('.nbs-system');
  return {
    chats: document.querySelectorAll(sel.root).length,
    shown: bar !== null && !bar.hidden,
    preview: bar?.querySelector('.nbs-system-preview')?.textContent ?? null,
    expanded: bar?.querySelector('.nbs-system-toggle')?.getAttribute('aria-expanded') ?? null,
    full: bar?.querySelector('.nbs-system-text')?.textContent ?? null,
    editing: bar !== null && !bar.querySelector('.nbs-system-editor').hidden,
    add_shown: !(root.querySelector('.nbs-system-add')?.hidden ?? true),
    prompts: [...document.querySelectorAll('.jp-InputPrompt')].map((p) => p.textContent.trim()),
  };
}

/** The reply `id`: its text and its status line's hover title. */
function readReply({ sel, id }) {
  const m = document.querySelector(`${sel.root} ${sel.message}[data-id="${CSS.escape(id)}"]`);
  const status = m.querySelector('.nbs-status');
  return { text: m.querySelector(sel.text)?.textContent ?? '', title: status.title, label: status.textContent };
}

/** Expand the line, open the editor, write `text`, save with Ctrl+Enter. */
async function editPrompt(page, text, log) {
  const bar = page.locator(BAR).first();
  await bar.locator('.nbs-system-toggle').click();
  await bar.locator('.nbs-system-edit').click();
  const input = bar.locator('textarea.nbs-system-input');
  await input.fill(text);
  await input.press('Control+Enter');
  await page.waitForFunction(() => document.querySelector('.nbs-system-editor')?.hidden === true, null, {
    timeout: 10_000,
  });
  log('edited the system prompt');
}

/** Ask, wait for the answer; returns the reply as readReply does. */
async function ask(page, prompt) {
  const id = await sendPrompt(page, prompt, { fill: true });
  await waitForStatus(page, id, ['done', 'error', 'timeout', 'stopped'], { timeout: 60_000 });
  return { id, ...(await page.evaluate(readReply, { sel: SEL, id })) };
}

await scenario(async ({ page, params, log }) => {
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  await page.locator(BAR).first().waitFor({ state: 'visible', timeout: 30_000 });
  const before = await page.evaluate(readBar, SEL);

  await editPrompt(page, params.edited, log);
  const after_edit = await page.evaluate(readBar, SEL);
  const reply = await ask(page, 'Who are you?');
  const kernel = (await runCode(page, 'print(repr(chat.system_prompt)); print(chat.last.options)')).trim();

  // Python sets it: the line follows
  await runCode(page, `chat.system_prompt = ${JSON.stringify(params.python_prompt)}`);
  await page.waitForFunction(
    (want) => document.querySelector('.nbs-system-preview')?.textContent === want,
    params.python_prompt,
    { timeout: 30_000 },
  );
  const after_python = await page.evaluate(readBar, SEL);

  const root = page.locator(SEL.root).first();
  await root.locator('.nbs-system-toggle').click(); // collapsed again, as it starts
  const collapsed = await page.evaluate(readBar, SEL);
  await root.scrollIntoViewIfNeeded();
  await root.locator('.nbs-message[data-role="assistant"] .nbs-status').last().hover();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-${params.label}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  const theme = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  const out = { before, after_edit, reply, kernel, after_python, collapsed, screenshot_widget: shot, theme };
  if (params.nb7_notebook) out.notebook7 = await inNotebook7(page, params, log);
  return out;
});

/** The same chat in Notebook 7 (its first cell run as a person does; see lab.mjs). */
async function inNotebook7(page, params, log) {
  const attempts = await runFirstCellInNotebook7(page, params.nb7_notebook, page.locator(SEL.root).first());
  log(`notebook 7: the widget showed after ${attempts} run(s) of the cell`);
  await page.locator(BAR).first().waitFor({ state: 'visible', timeout: 30_000 });
  const before = await page.evaluate(readBar, SEL);
  await editPrompt(page, params.edited, log);
  const reply = await ask(page, 'And in Notebook 7?');
  const after = await page.evaluate(readBar, SEL);
  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-notebook7-${params.label}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });
  return { before, reply, after, screenshot_widget: shot };
}
