// Attachments in front ends other than JupyterLab (#21): a picture (drawn in the page)
// dropped onto the first chat, a question sent with it; the question must show the
// picture's thumbnail from the kernel's preview, and the source say what it got.
// Locators and element-bound evaluation only: marimo renders an anywidget inside a
// shadow root, which document.querySelector does not enter.
// Used by attach_nb7.mjs, attach_voila.mjs and attach_marimo.mjs.

/** Poll `fn(root)` in the page (bound to the chat's root element) until truthy. */
async function until(root, fn, arg, { timeout = 60_000, what = 'a condition' } = {}) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await root.evaluate(fn, arg);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The whole check, on a page where the chat is (or will be) shown. */
export async function runAttachChecks(page, { timeout = 90_000 } = {}) {
  const root = page.locator('.nbs-chat').first();
  await root.waitFor({ state: 'visible', timeout });
  await root.locator('button.nbs-attach').waitFor({ state: 'visible', timeout: 30_000 });
  // drop a 120 x 80 PNG drawn in the page onto the chat
  const dropped = await root.evaluate(async (el) => {
    const canvas = document.createElement('canvas');
    canvas.width = 120;
    canvas.height = 80;
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = '#1565c0';
    ctx.fillRect(0, 0, 120, 80);
    ctx.fillStyle = '#ffb74d';
    ctx.fillRect(30, 20, 60, 40);
    const blob = await new Promise((r) => canvas.toBlob(r, 'image/png'));
    const dt = new DataTransfer();
    dt.items.add(new File([blob], 'picture.png', { type: 'image/png' }));
    const over = new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true });
    el.dispatchEvent(over);
    const drop = new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true });
    el.dispatchEvent(drop);
    return { accepted: over.defaultPrevented && drop.defaultPrevented };
  });
  const tray = await until(
    root,
    (el) => {
      const item = el.querySelector('.nbs-attach-item');
      const img = item?.querySelector('img');
      return item && img && img.complete && img.naturalWidth > 0
        ? { label: item.querySelector('.nbs-attach-label').textContent, thumb: true }
        : false;
    },
    null,
    { timeout: 20_000, what: 'the picture in the tray' },
  );
  const input = root.locator('textarea.nbs-input');
  await input.click();
  await input.pressSequentially('what is in it?', { delay: 5 });
  await input.press('Enter');
  const shown = await until(
    root,
    (el) => {
      const user = el.querySelector('.nbs-message[data-role="user"]');
      const img = user?.querySelector('img.nbs-att-img');
      const replies = [...el.querySelectorAll('.nbs-message[data-role="assistant"]')];
      const last = replies[replies.length - 1];
      if (!(img && img.complete && img.naturalWidth > 0 && last && ['done', 'error'].includes(last.dataset.status))) return false;
      return {
        question: user.querySelector('.nbs-text').textContent,
        thumbnail: { alt: img.alt, src: img.getAttribute('src').slice(0, 22), width: img.naturalWidth, height: img.naturalHeight },
        reply: last.querySelector('.nbs-text').textContent.trim(),
        reply_status: last.dataset.status,
        tray_empty: el.querySelectorAll('.nbs-attach-item').length === 0,
      };
    },
    null,
    { timeout, what: 'the question with its thumbnail, and the reply' },
  );
  return { dropped, tray, ...shown };
}
