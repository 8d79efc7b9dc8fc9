// The README's picture: a chat in real JupyterLab caught mid-answer, with its
// reasoning folded above the answer, a heading, a list, display and inline math
// and a highlighted code block, and what the picture must show checked before
// it is taken: every one of those inside the visible part of the message list,
// the code block using the width of the output area, prose kept to its measure.
// The notebook's source waits at GATE in the middle of a sentence, so the
// picture is the same on a quiet or a loaded machine; the scenario opens the
// gate after the screenshot and waits for the end.
// params: { notebook, width (viewport width, px), marker (text shortly before the gate),
//           formulas (how many the text before the gate holds) }
// Screenshot: <artifact>-widget.png (the widget alone: what docs/chat.png is made from)
import path from 'node:path';
import { SEL, waitForChat } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, runCode, scenario } from './lab.mjs';

/** Everything the picture must show, with where it is. Runs in the page. */
function measure() {
  const root = document.querySelector('.nbs-chat');
  const list = root.querySelector('.nbs-messages');
  const reply = root.querySelector('.nbs-message[data-role="assistant"]');
  const md = reply.querySelector(':scope > .nbs-text.nbs-md');
  const box = (el) => {
    if (!el) return null;
    const b = el.getBoundingClientRect();
    return { left: b.left, right: b.right, top: b.top, bottom: b.bottom, width: b.width, height: b.height };
  };
  const shown = box(list);
  // inside the part of the list on screen (the list scrolls; the picture shows only that)
  const visible = (el) => {
    const b = box(el);
    return b !== null && b.height > 0 && b.top >= shown.top - 1 && b.bottom <= shown.bottom + 1;
  };
  const reasoning = reply.querySelector('details.nbs-reasoning');
  const code = md.querySelector('.nbs-code');
  const hl = md.querySelector('code.hljs');
  const maths = [...md.querySelectorAll('math')];
  const paragraphs = [...md.querySelectorAll(':scope > p')];
  const style = getComputedStyle(list);
  const inner = shown.width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const em = parseFloat(getComputedStyle(md).fontSize);
  return {
    status: reply.dataset.status,
    stop_enabled: !root.querySelector('button.nbs-stop')?.disabled,
    widget: box(root),
    list: shown,
    list_inner_width: inner,
    scrolled: list.scrollHeight > list.clientHeight + 1,
    reasoning: {
      present: !!reasoning,
      phase: reasoning?.dataset.phase ?? null,
      label: reasoning?.querySelector('.nbs-reasoning-label')?.textContent ?? '',
      visible: visible(reasoning?.querySelector('summary')),
    },
    question_visible: visible(root.querySelector('.nbs-message[data-role="user"] .nbs-text')),
    heading: { count: md.querySelectorAll('h1, h2, h3').length, visible: visible(md.querySelector('h2')) },
    list_items: { count: md.querySelectorAll('li').length, visible: visible(md.querySelector('ul')) },
    code: {
      highlighted: !!hl,
      spans: hl?.querySelectorAll('span[class^="hljs-"]').length ?? 0,
      visible: visible(code),
      width: box(code)?.width ?? 0,
      overflow: code ? code.querySelector('pre').scrollWidth - code.querySelector('pre').clientWidth : null,
    },
    math: {
      count: maths.length,
      display: maths.filter((m) => m.getAttribute('display') === 'block').length,
      laid_out: maths.every((m) => box(m).width > 0 && box(m).height > 0),
      visible: maths.length > 0 && maths.every(visible),
      pending: md.querySelectorAll('.nbs-math-pending').length,
    },
    prose: {
      widths: paragraphs.map((p) => box(p).width),
      measure_px: parseFloat(getComputedStyle(paragraphs[0]).maxWidth),
      measure_em: parseFloat(getComputedStyle(paragraphs[0]).maxWidth) / em,
    },
    reply_width: box(reply).width,
    text_tail: md.textContent.slice(-60),
  };
}

await scenario(async ({ page, params, log }) => {
  await page.setViewportSize({ width: params.width ?? 1080, height: 900 });
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { timeout: 90_000 });
  // at the gate: all the text before it shown, the code highlighted (idle time),
  // every formula rendered
  await page.waitForFunction(
    ({ marker, formulas }) => {
      const reply = document.querySelector('.nbs-chat .nbs-message[data-role="assistant"]');
      const md = reply?.querySelector(':scope > .nbs-text.nbs-md');
      return (
        reply?.dataset.status === 'running' &&
        md?.textContent.includes(marker) &&
        md.querySelector('code.hljs') !== null &&
        md.querySelectorAll('math').length >= formulas &&
        md.querySelectorAll('.nbs-math-pending').length === 0
      );
    },
    { marker: params.marker, formulas: params.formulas },
    { timeout: 90_000, polling: 100 },
  );
  const root = page.locator(SEL.root).first();
  await root.scrollIntoViewIfNeeded();
  // two frames: the last delta painted, the list at its bottom
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));
  const measured = await page.evaluate(measure);
  log('measured:', JSON.stringify(measured));
  const shot = path.join(ARTIFACTS, `${ARTIFACT}-widget.png`);
  await root.screenshot({ path: shot, timeout: 15_000 });

  await runCode(page, 'GATE.set()');
  await page.waitForFunction(
    (sel) => document.querySelector(`${sel.root} ${sel.message}[data-role="assistant"]`)?.dataset.status === 'done',
    SEL,
    { timeout: 60_000, polling: 100 },
  );
  return { measured, screenshot_widget: shot };
});
