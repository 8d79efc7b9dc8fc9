// Attachments in the view (#21), in real JupyterLab: pick files with the Attach button
// (by keyboard, through the browser's file chooser), paste an image into the input box,
// drop a file onto the chat; the tray shows thumbnails with remove buttons; Send carries
// them to the kernel, and the question shows them as thumbnails and chips. Refusals:
// the view's own (a type the source does not take, a size over the limit) and the
// kernel's (the view is not trusted), which gives the draft back. Screenshots of the
// tray and of the sent question, with the figures that say what they show.
//
// The notebook (tests/test_browser_attachments.py) holds three chats: 0 takes anything
// and answers with what it received; 1 takes text only, 40 KB at most; 2 told the view
// it takes anything, then its source was swapped for a text-only one (a stale policy:
// only the kernel's check stops the image).
// params: { notebook, label, png_b64, small_png_b64, csv }
import { chat, messageIds, SEL, waitForChat, waitForStatus } from './chat.mjs';
import { ARTIFACTS, ARTIFACT, openNotebook, runAllCells, scenario } from './lab.mjs';
import path from 'node:path';

/** The tray of chat `index`: item labels, thumbnails (loaded?), colors. */
function trayOf(index) {
  const root = document.querySelectorAll('.nbs-chat')[index];
  const tray = root.querySelector('.nbs-attach-tray');
  const items = [...tray.querySelectorAll('.nbs-attach-item')];
  const css = (el, p) => (el ? getComputedStyle(el).getPropertyValue(p).trim() : null);
  return {
    hidden: tray.hidden,
    labels: items.map((i) => i.querySelector('.nbs-attach-label')?.textContent ?? ''),
    thumbs: items.map((i) => {
      const img = i.querySelector('img.nbs-attach-img');
      return img ? { loaded: img.complete && img.naturalWidth > 0, src: img.getAttribute('src').slice(0, 22), w: img.getBoundingClientRect().width } : null;
    }),
    removes: items.map((i) => i.querySelector('button.nbs-attach-remove')?.getAttribute('aria-label')),
    notice: root.querySelector('.nbs-attach-notice')?.hidden ? '' : root.querySelector('.nbs-attach-notice')?.textContent,
    input: root.querySelector('textarea.nbs-input').value,
    colors: {
      item_bg: css(items[0], 'background-color'),
      label_fg: css(items[0]?.querySelector('.nbs-attach-label'), 'color'),
      notice_fg: css(root.querySelector('.nbs-attach-notice'), 'color'),
      chat_bg: css(root, 'background-color'),
      attach_fg: css(root.querySelector('button.nbs-attach'), 'color'),
      attach_bg: css(root.querySelector('button.nbs-attach'), 'background-color'),
    },
  };
}

/** What a sent question shows of its attachments. */
function questionOf({ index, id }) {
  const root = document.querySelectorAll('.nbs-chat')[index];
  const m = root.querySelector(`.nbs-message[data-id="${id}"]`);
  const box = m?.querySelector('.nbs-attachments');
  const css = (el, p) => (el ? getComputedStyle(el).getPropertyValue(p).trim() : null);
  return {
    text: m?.querySelector('.nbs-text')?.textContent ?? '',
    before_text: box?.nextElementSibling?.classList.contains('nbs-text') ?? false,
    thumbs: [...(box?.querySelectorAll('button.nbs-att-thumb img.nbs-att-img') ?? [])].map((img) => ({
      alt: img.alt,
      loaded: img.complete && img.naturalWidth > 0,
      src: img.getAttribute('src').slice(0, 22),
      width: img.getBoundingClientRect().width,
    })),
    chips: [...(box?.querySelectorAll('.nbs-att-name') ?? [])].map((c) => c.textContent),
    tags: [...new Set([...(box?.querySelectorAll('*') ?? [])].map((e) => e.tagName))].sort(),
    chip_fg: css(box?.querySelector('.nbs-att-file'), 'color'),
    chip_bg: css(box?.querySelector('.nbs-att-file'), 'background-color'),
  };
}

/** Dispatch a paste of `files` ({name, type, b64}) into chat `index`'s input box. */
function paste({ index, files }) {
  const dt = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
    dt.items.add(new File([bytes], f.name, { type: f.type }));
  }
  const input = document.querySelectorAll('.nbs-chat')[index].querySelector('textarea.nbs-input');
  const ev = new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true });
  input.dispatchEvent(ev);
  return ev.defaultPrevented;
}

/** Dispatch a drag over and a drop of `files` onto chat `index`. */
function drop({ index, files }) {
  const dt = new DataTransfer();
  for (const f of files) {
    const bytes = f.b64 !== undefined ? Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0)) : new TextEncoder().encode(f.text);
    dt.items.add(new File([bytes], f.name, { type: f.type }));
  }
  const root = document.querySelectorAll('.nbs-chat')[index];
  const over = new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true });
  root.dispatchEvent(over);
  const dropping = root.classList.contains('nbs-dropping');
  const ev = new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true });
  root.dispatchEvent(ev);
  return { over_accepted: over.defaultPrevented, dropping, dropped: ev.defaultPrevented };
}

async function waitTray(page, index, n) {
  await page.waitForFunction(
    ({ index, n }) => document.querySelectorAll('.nbs-chat')[index].querySelectorAll('.nbs-attach-item').length === n,
    { index, n },
    { timeout: 20_000, polling: 100 },
  );
}

async function waitNotice(page, index) {
  const h = await page.waitForFunction(
    (index) => {
      const n = document.querySelectorAll('.nbs-chat')[index].querySelector('.nbs-attach-notice');
      return n && !n.hidden && n.textContent ? n.textContent : false;
    },
    index,
    { timeout: 30_000, polling: 100 },
  );
  return h.jsonValue();
}

async function shootWidget(page, index, name) {
  const file = path.join(ARTIFACTS, `${ARTIFACT}-${name}.png`);
  await chat(page, index).screenshot({ path: file, timeout: 15_000 });
  return file;
}

await scenario(async ({ page, params, log }) => {
  const label = params.label ?? 'light';
  // listen from the start: Playwright intercepts file choosers only once a listener is
  // set, and one set just before the key press missed the chooser Enter opened
  const choosers = [];
  page.on('filechooser', (c) => choosers.push(c));
  const dialogs = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { index: 2 });
  const out = { label, theme: await page.evaluate(() => document.body.dataset.jpThemeName ?? null) };
  await chat(page, 0).scrollIntoViewIfNeeded();

  // 1. pick: the Attach button, by keyboard, opens the browser's file chooser
  await chat(page, 0).locator('button.nbs-attach').focus();
  await page.keyboard.press('Enter');
  for (let t = 0; choosers.length === 0 && t < 200; t++) await page.waitForTimeout(100);
  const chooser = choosers[0];
  if (chooser === undefined) throw new Error('Enter on the Attach button opened no file chooser');
  out.chooser_multiple = chooser.isMultiple();
  await chooser.setFiles([
    { name: 'photo.png', mimeType: 'image/png', buffer: Buffer.from(params.png_b64, 'base64') },
    { name: 'data.csv', mimeType: 'text/csv', buffer: Buffer.from(params.csv) },
  ]);
  await waitTray(page, 0, 2);
  // 2. paste an image into the input box
  out.paste_taken = await page.evaluate(paste, { index: 0, files: [{ name: 'image.png', type: 'image/png', b64: params.small_png_b64 }] });
  await waitTray(page, 0, 3);
  // 3. drop a file onto the chat
  out.drop = await page.evaluate(drop, { index: 0, files: [{ name: 'notes.md', type: 'text/markdown', text: '# Notes\n\nhello' }] });
  await waitTray(page, 0, 4);
  // 4. remove one by keyboard: its remove button, Enter
  await chat(page, 0).locator('button.nbs-attach-remove[aria-label="Remove notes.md"]').focus();
  await page.keyboard.press('Enter');
  await waitTray(page, 0, 3);
  out.focus_after_remove = await page.evaluate(() => document.activeElement?.className ?? '');
  await page.waitForTimeout(200);
  out.tray = await page.evaluate(trayOf, 0);
  out.tray_shot = await shootWidget(page, 0, `tray-${label}`);

  // 5. send: the question shows its attachments; the source received them
  const before = new Set(await messageIds(page, { index: 0 }));
  const input = chat(page, 0).locator(SEL.input);
  await input.click();
  await input.pressSequentially('What is in these?', { delay: 5 });
  await input.press('Enter');
  const replyId = await (
    await page.waitForFunction(
      (before) => {
        const root = document.querySelectorAll('.nbs-chat')[0];
        const ids = [...root.querySelectorAll('.nbs-message[data-role="assistant"]')].map((m) => m.dataset.id);
        return ids.find((id) => !before.includes(id)) ?? false;
      },
      [...before],
      { timeout: 30_000, polling: 100 },
    )
  ).jsonValue();
  await waitForStatus(page, replyId, ['done', 'error'], { index: 0, timeout: 60_000 });
  const questionId = `m${Number(replyId.slice(1)) - 1}`;
  // the question rendered (a finished message may wait a frame as a placeholder, lazy.ts:
  // under load the echoed reply can end first) and its pictures loaded
  await page.waitForFunction(
    (id) => {
      const m = document.querySelector(`.nbs-chat .nbs-message[data-id="${id}"]`);
      return (
        m !== null &&
        !m.classList.contains('nbs-deferred') &&
        [...m.querySelectorAll('img.nbs-att-img')].every((i) => i.complete)
      );
    },
    questionId,
    { timeout: 20_000 },
  );
  out.question = await page.evaluate(questionOf, { index: 0, id: questionId });
  out.reply = await page.evaluate(
    (id) => document.querySelectorAll('.nbs-chat')[0].querySelector(`.nbs-message[data-id="${id}"] .nbs-text`)?.textContent,
    replyId,
  );
  out.tray_after_send = await page.evaluate(trayOf, 0);
  // a thumbnail shows larger on a click, and smaller again
  const thumb = chat(page, 0).locator(`.nbs-message[data-id="${questionId}"] button.nbs-att-thumb`).first();
  await thumb.click();
  out.expanded = await page.evaluate(
    (id) => {
      const b = document.querySelector(`.nbs-chat .nbs-message[data-id="${id}"] button.nbs-att-thumb`);
      return { expanded: b.getAttribute('aria-expanded'), width: b.querySelector('img').getBoundingClientRect().width };
    },
    questionId,
  );
  await chat(page, 0).locator(`.nbs-message[data-id="${questionId}"]`).scrollIntoViewIfNeeded();
  out.question_shot = await shootWidget(page, 0, `question-${label}`);
  await thumb.click();

  // 6. the view refuses what the source does not take, and what is too large
  await chat(page, 1).scrollIntoViewIfNeeded();
  await page.evaluate(drop, { index: 1, files: [{ name: 'photo.png', type: 'image/png', b64: params.small_png_b64 }] });
  out.refused_type = await waitNotice(page, 1);
  await page.evaluate(drop, { index: 1, files: [{ name: 'big.csv', type: 'text/csv', text: 'x,'.repeat(30_000) }] });
  await page.waitForFunction(() => /big\.csv/.test(document.querySelectorAll('.nbs-chat')[1].querySelector('.nbs-attach-notice').textContent), null, { timeout: 20_000 });
  out.refused_size = await page.evaluate(() => document.querySelectorAll('.nbs-chat')[1].querySelector('.nbs-attach-notice').textContent);
  out.tray_refused = await page.evaluate(trayOf, 1);
  out.picker_accept = await page.evaluate(() => document.querySelectorAll('.nbs-chat')[1].querySelector('input.nbs-attach-input').accept);
  out.notice_shot = await shootWidget(page, 1, `notice-${label}`);

  // 7. the kernel refuses what the view let through (a stale policy): the draft comes back
  await chat(page, 2).scrollIntoViewIfNeeded();
  await page.evaluate(drop, { index: 2, files: [{ name: 'photo.png', type: 'image/png', b64: params.small_png_b64 }] });
  await waitTray(page, 2, 1);
  const input2 = chat(page, 2).locator(SEL.input);
  await input2.click();
  await input2.pressSequentially('See this?', { delay: 5 });
  await input2.press('Enter');
  await page.waitForFunction(
    () => {
      const root = document.querySelectorAll('.nbs-chat')[2];
      return root.querySelector('textarea.nbs-input').value === 'See this?' && root.querySelectorAll('.nbs-attach-item').length === 1 && /^Not sent/.test(root.querySelector('.nbs-attach-notice').textContent);
    },
    null,
    { timeout: 30_000, polling: 100 },
  );
  out.kernel_refusal = await page.evaluate(trayOf, 2);
  out.kernel_refusal.messages = await page.evaluate(() => document.querySelectorAll('.nbs-chat')[2].querySelectorAll('.nbs-message').length);
  out.dialogs = dialogs;
  return out;
});
