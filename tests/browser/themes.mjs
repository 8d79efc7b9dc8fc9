// Screenshots of the widget in JupyterLab and in Notebook 7, in the theme the
// server's settings name (the test sets it through the settings API), with the
// figures a test needs to tell that the widget rendered and is styled: its
// size, its colors next to the theme's, highlighted code, how the answer uses
// the cell's width, and how it fits a narrow cell.
// params: { lab_notebook, nb7_notebook, label }
// Screenshots: <artifact>-<app>-<label>.png (page) and -widget.png (the widget).
import { SEL, waitForChat, FINAL_STATUSES as FINAL } from './chat.mjs';
import { ARTIFACTS, ARTIFACT, openNotebook, runAllCells, runFirstCellInNotebook7, scenario } from './lab.mjs';
import path from 'node:path';


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
    // the answer uses the cell's width: its code block spans the message list, its
    // paragraphs keep a readable measure
    layout: {
      list_width: (() => {
        const list = root.querySelector('.nbs-messages');
        const st = getComputedStyle(list);
        return list.getBoundingClientRect().width - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
      })(),
      code_width: root.querySelector('.nbs-code')?.getBoundingClientRect().width ?? 0,
      paragraph_width: md?.querySelector(':scope > p')?.getBoundingClientRect().width ?? 0,
      measure_px: parseFloat(css(md?.querySelector(':scope > p'), 'max-width')),
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
  out.nb7_attempts = await runFirstCellInNotebook7(page, params.nb7_notebook, page.locator(SEL.root).first());
  await waitRendered(page);
  await page.locator(SEL.root).first().scrollIntoViewIfNeeded();
  await page.waitForTimeout(200);
  out.notebook = { ...(await page.evaluate(measure)), screenshots: await shoot(page, `notebook7-${label}`) };
  log('notebook 7:', JSON.stringify(out.notebook.colors));
  return out;
});
