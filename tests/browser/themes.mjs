// Screenshots of the widget in JupyterLab and in Notebook 7, in the theme the
// server's settings name (the test sets it through the settings API), with the
// figures a test needs to tell that the widget rendered and is styled: its
// size, its colors next to the theme's, highlighted code, and how it fits a
// narrow cell.
// params: { lab_notebook, nb7_notebook, label }
// Screenshots: <artifact>-<app>-<label>.png (page) and -widget.png (the widget).
import { SEL, waitForChat } from './chat.mjs';
import { ARTIFACTS, ARTIFACT, TOKEN, URL_BASE, openNotebook, runAllCells, scenario } from './lab.mjs';
import path from 'node:path';

const FINAL = ['done', 'stopped', 'error', 'timeout'];

/** Wait until the first widget's replies are final and its code is highlighted. */
async function waitRendered(page) {
  await waitForChat(page, { timeout: 90_000 });
  await page.waitForFunction(
    ({ sel, final }) => {
      const root = document.querySelector(sel.root);
      const replies = [...(root?.querySelectorAll(`${sel.message}[data-role="assistant"]`) ?? [])];
      return replies.length > 0 && replies.every((m) => final.includes(m.dataset.status)) && root.querySelector('code.hljs');
    },
    { sel: SEL, final: FINAL },
    { timeout: 60_000, polling: 200 },
  );
}

/** Colors, sizes and contents of the first widget, next to the theme's own variables. */
function measure() {
  const root = document.querySelector('.nbs-chat');
  const css = (el, prop) => (el ? getComputedStyle(el).getPropertyValue(prop).trim() : null);
  // resolve a theme variable to the rgb() the browser computes for it
  const resolve = (v) => {
    const probe = document.createElement('div');
    probe.style.color = `var(${v})`;
    document.body.appendChild(probe);
    const c = getComputedStyle(probe).color;
    probe.remove();
    return c;
  };
  const box = root.getBoundingClientRect();
  const md = root.querySelector('.nbs-md');
  const code = root.querySelector('code.hljs');
  const keyword = root.querySelector('code.hljs .hljs-keyword');
  return {
    theme_name: document.body.dataset.jpThemeName ?? null,
    theme_light: document.body.dataset.jpThemeLight ?? null,
    width: box.width,
    height: box.height,
    text_length: md?.textContent.length ?? 0,
    blocks: {
      headings: md?.querySelectorAll('h1,h2,h3').length ?? 0,
      tables: md?.querySelectorAll('table').length ?? 0,
      code_blocks: md?.querySelectorAll('pre > code').length ?? 0,
      list_items: md?.querySelectorAll('li').length ?? 0,
      highlighted_spans: code?.querySelectorAll('span[class^="hljs-"]').length ?? 0,
    },
    colors: {
      chat_bg: css(root, 'background-color'),
      chat_fg: css(root, 'color'),
      theme_bg: resolve('--jp-layout-color1'),
      theme_fg: resolve('--jp-ui-font-color1'),
      reply_bg: css(root.querySelector('.nbs-message[data-role="assistant"]'), 'background-color'),
      code_bg: css(root.querySelector('.nbs-code'), 'background-color'),
      keyword: css(keyword, 'color'),
      code_fg: css(code, 'color'),
      send_bg: css(root.querySelector('button.nbs-send'), 'background-color'),
    },
    styled: {
      border_radius: css(root, 'border-radius'),
      code_font: css(root.querySelector('pre'), 'font-family'),
      send_visible: (root.querySelector('button.nbs-send')?.getBoundingClientRect().width ?? 0) > 20,
    },
  };
}

/** Squeeze the widget's output area to `px` wide: does the chat fit (no sideways overflow)? */
async function narrow(page, px) {
  return page.evaluate((px) => {
    const root = document.querySelector('.nbs-chat');
    const host = root.parentElement;
    const before = host.style.width;
    host.style.width = `${px}px`;
    root.getBoundingClientRect(); // layout
    const out = {
      width: root.getBoundingClientRect().width,
      overflow: root.scrollWidth - root.clientWidth,
      buttons_inside: [...root.querySelectorAll('.nbs-form button')].every(
        (b) => b.getBoundingClientRect().right <= root.getBoundingClientRect().right + 1,
      ),
    };
    window.__nbsRestoreWidth = () => {
      host.style.width = before;
    };
    return out;
  }, px);
}

/** Wait until the server says the notebook's kernel is idle (through the REST API). */
async function waitKernelIdle(notebookPath, log, timeout = 60_000) {
  const t0 = Date.now();
  while (Date.now() - t0 < timeout) {
    const res = await fetch(`${URL_BASE}api/sessions`, { headers: { Authorization: `token ${TOKEN}` } });
    const sessions = res.ok ? await res.json() : [];
    const s = sessions.find((x) => x.path === notebookPath);
    if (s?.kernel?.execution_state === 'idle') return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 250));
  }
  log('kernel not idle after', timeout, 'ms; trying anyway');
  return null;
}

/**
 * Run the first cell as a person does (select it, Shift+Enter): Notebook 7
 * exposes no application object. A cell run before the page's kernel
 * connection is up is dropped, so try again until the widget shows.
 */
async function runFirstCell(page, log) {
  const cell = page.locator('.jp-Notebook .jp-Cell').first();
  for (let attempt = 1; attempt <= 4; attempt++) {
    await cell.locator('.jp-InputPrompt').first().click();
    await page.keyboard.press('Shift+Enter');
    try {
      await page.locator(SEL.root).first().waitFor({ state: 'visible', timeout: 15_000 });
      return attempt;
    } catch {
      log(`attempt ${attempt}: no widget yet`);
    }
  }
  throw new Error('the widget never appeared in Notebook 7');
}

async function shoot(page, name) {
  const file = path.join(ARTIFACTS, `${ARTIFACT}-${name}.png`);
  await page.screenshot({ path: file, timeout: 15_000 });
  const widget = path.join(ARTIFACTS, `${ARTIFACT}-${name}-widget.png`);
  await page.locator(SEL.root).first().screenshot({ path: widget, timeout: 15_000 });
  return { page: file, widget };
}

await scenario(async ({ page, params, log }) => {
  const label = params.label ?? 'theme';
  const out = {};

  // JupyterLab
  await openNotebook(page, params.lab_notebook);
  await runAllCells(page);
  await waitRendered(page);
  await page.locator(SEL.root).first().scrollIntoViewIfNeeded();
  await page.waitForTimeout(200);
  out.lab = { ...(await page.evaluate(measure)), screenshots: await shoot(page, `lab-${label}`) };
  out.lab.narrow = await narrow(page, 320);
  await page.locator(SEL.root).first().screenshot({
    path: path.join(ARTIFACTS, `${ARTIFACT}-lab-${label}-narrow.png`),
  });
  await page.evaluate(() => window.__nbsRestoreWidth?.());
  log('lab:', JSON.stringify(out.lab.colors));

  // Notebook 7 (no application object exposed there: run the cell with the keyboard)
  const encoded = params.nb7_notebook.split('/').map(encodeURIComponent).join('/');
  await page.goto(`${URL_BASE}notebooks/${encoded}?token=${TOKEN}`, { timeout: 60_000 });
  const firstCell = page.locator('.jp-Notebook .jp-Cell').first();
  await firstCell.waitFor({ state: 'visible', timeout: 60_000 });
  const dialog = page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-accept');
  if (await dialog.count()) await dialog.first().click();
  await waitKernelIdle(params.nb7_notebook, log);
  out.nb7_attempts = await runFirstCell(page, log);
  await waitRendered(page);
  await page.locator(SEL.root).first().scrollIntoViewIfNeeded();
  await page.waitForTimeout(200);
  out.notebook = { ...(await page.evaluate(measure)), screenshots: await shoot(page, `notebook7-${label}`) };
  log('notebook 7:', JSON.stringify(out.notebook.colors));
  return out;
});
