// XSS corpus through the real path: kernel -> comm -> view, streamed in pieces.
//
// The notebook (written by tests/test_browser_rendering.py) makes a ChatWidget
// whose source answers prompt "i" with payload i of xss_payloads.json, and
// sends every prompt. While the replies stream, a MutationObserver checks each
// node and attribute that enters the rendered Markdown (the open tail too);
// afterwards the whole DOM is checked, then every image placeholder and every
// neutered link is clicked, and the canary (window.__nbsCanary, which every
// payload tries to set) must still be unset.
// Then the attachment payloads (#21: hostile names, an SVG with script and onload,
// a data: URL as a name...) are dropped onto the chat as files and sent: the tray
// and the question show them as text and <img> of data: URLs only, every thumbnail
// is clicked, every excerpt opened, and the canary stays unset.
// params: { notebook, count, timeout_ms = 60000, attachments = [{name, mime, content}] }
import { SEL, counters, waitForChat } from './chat.mjs';
import { openNotebook, runAllCells, scenario } from './lab.mjs';

// Runs in the page before its own scripts: installs the watcher (before the widget exists).
function installWatcher() {
  const BAD_TAGS = new Set(
    'SCRIPT STYLE IFRAME FRAME OBJECT EMBED IMG SVG FORM INPUT TEXTAREA SELECT VIDEO AUDIO SOURCE META BASE LINK TEMPLATE NOSCRIPT MARQUEE DETAILS BODY X-NBS MACTION SEMANTICS ANNOTATION ANNOTATION-XML MGLYPH'.split(' '),
  );
  const BAD_ATTRS = new Set('style id name src srcset action formaction xlink:href background poster'.split(' '));
  const state = { violations: [], checked: 0, watching: true };
  window.__nbsXss = state;
  const checkOne = (el) => {
    if (!(el instanceof Element) || !el.closest('.nbs-md')) return;
    state.checked += 1;
    const cls = typeof el.className === 'string' && el.className !== '' ? `.${el.className.trim().split(/\s+/).join('.')}` : '';
    const where = `${el.tagName.toLowerCase()}${cls} in ${el.closest('.nbs-message')?.dataset.id ?? '?'}`;
    if (BAD_TAGS.has(el.tagName.toUpperCase())) state.violations.push(`tag: ${where}`);
    // MathML only as a rendered formula (model output cannot write raw MathML)
    if (el.namespaceURI === 'http://www.w3.org/1998/Math/MathML' && !el.closest('.nbs-math, .nbs-math-block')) {
      state.violations.push(`MathML outside a formula: ${where}`);
    }
    for (const name of el.getAttributeNames()) {
      const n = name.toLowerCase();
      // an empty style attribute styles nothing: the widget's own placeholder sizing
      // (lazy.ts) has been seen to leave one on a message's text element, 1 run in 3,
      // not yet explained (see the closing note of 2026-12-02)
      if (n === 'style' && el.getAttribute(name).trim() === '') continue;
      if (n.startsWith('on') || n.startsWith('data-') || BAD_ATTRS.has(n)) {
        state.violations.push(`attribute ${name}="${el.getAttribute(name)}": ${where}`);
      }
    }
    const href = el.getAttribute('href');
    if (href !== null) {
      if (!/^(?:https?:\/\/|mailto:)/i.test(href)) state.violations.push(`href ${href}: ${where}`);
      if (el.getAttribute('rel') !== 'noopener noreferrer' || el.getAttribute('target') !== '_blank') {
        state.violations.push(`link without rel/target: ${href}`);
      }
    }
  };
  const checkTree = (node) => {
    if (!(node instanceof Element)) return;
    checkOne(node);
    for (const el of node.querySelectorAll('*')) checkOne(el);
  };
  new MutationObserver((records) => {
    if (!state.watching) return;
    for (const r of records) {
      if (r.type === 'attributes') checkOne(r.target);
      else for (const n of r.addedNodes) checkTree(n);
    }
  }).observe(document, { subtree: true, childList: true, attributes: true });
  window.__nbsCheckAll = () => {
    for (const md of document.querySelectorAll('.nbs-md')) checkTree(md);
    return state.violations;
  };
}

await scenario(async ({ page, params, log }) => {
  const count = params.count;
  const dialogs = [];
  page.on('dialog', (d) => {
    dialogs.push(`${d.type()}: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  let phase = 'stream';
  const canaryRequests = [];
  page.on('request', (r) => {
    if (r.url().includes('nbs-canary')) canaryRequests.push({ url: r.url(), phase });
  });
  const popups = [];
  page.context().on('page', (p) => popups.push(p.url()));

  await page.addInitScript(installWatcher);
  await openNotebook(page, params.notebook);
  const themeBefore = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  await runAllCells(page);
  await waitForChat(page);
  const handle = await page.waitForFunction(
    ({ sel, n }) => {
      const ms = [...document.querySelectorAll(`${sel.root} ${sel.message}[data-role="assistant"]`)];
      const final = ['done', 'stopped', 'error', 'timeout'];
      return ms.length === n && ms.every((m) => final.includes(m.dataset.status)) ? ms.map((m) => m.dataset.status) : false;
    },
    { sel: SEL, n: count },
    { timeout: params.timeout_ms ?? 60_000, polling: 200 },
  );
  const statuses = await handle.jsonValue();
  await page.waitForTimeout(300); // a last frame, and idle-time highlighting

  const afterStream = await page.evaluate(() => {
    const violations = window.__nbsCheckAll();
    window.__nbsXss.watching = false;
    const texts = [...document.querySelectorAll('.nbs-message[data-role="assistant"] .nbs-md')].map(
      (m) => m.textContent.length,
    );
    return {
      violations,
      checked: window.__nbsXss.checked,
      empty_replies: texts.filter((n) => n === 0).length,
      canary: window.__nbsCanary === undefined ? null : String(window.__nbsCanary),
      canary_in_window: '__nbsCanary' in window,
      placeholders: document.querySelectorAll('.nbs-md button.nbs-img').length,
      neutered_links: document.querySelectorAll('.nbs-md a:not([href])').length,
      live_links: document.querySelectorAll('.nbs-md a[href]').length,
    };
  });
  log('after stream:', JSON.stringify(afterStream));

  // The user clicks everything that looks clickable (but live links: they open tabs).
  phase = 'clicked';
  const clicked = await page.evaluate(async () => {
    const n = { placeholders: 0, links: 0 };
    for (const b of [...document.querySelectorAll('.nbs-md button.nbs-img')]) {
      b.click();
      n.placeholders += 1;
    }
    for (const a of [...document.querySelectorAll('.nbs-md a:not([href])')]) {
      a.click();
      n.links += 1;
    }
    for (const el of [...document.querySelectorAll('.nbs-md *')]) {
      el.dispatchEvent(new MouseEvent('mouseover', { bubbles: true }));
    }
    await new Promise((r) => setTimeout(r, 500));
    const imgs = [...document.querySelectorAll('.nbs-md img')];
    return {
      ...n,
      images: imgs.length,
      bad_images: imgs
        .filter((i) => !i.classList.contains('nbs-img-loaded') || !/^(?:https?:|data:image\/(?:png|jpeg|gif|webp)[;,])/i.test(i.getAttribute('src') ?? ''))
        .map((i) => i.outerHTML),
      no_referrer: imgs.every((i) => i.referrerPolicy === 'no-referrer'),
      canary: window.__nbsCanary === undefined ? null : String(window.__nbsCanary),
      canary_in_window: '__nbsCanary' in window,
    };
  });
  // Attachments: dropped as files onto the chat, sent with the question "0"
  phase = 'attachments';
  const files = params.attachments ?? [];
  let attached = null;
  if (files.length > 0) {
    const userBefore = await page.evaluate(() => document.querySelectorAll('.nbs-message[data-role="user"]').length);
    await page.evaluate((files) => {
      const dt = new DataTransfer();
      for (const f of files) dt.items.add(new File([f.content], f.name, { type: f.mime }));
      const root = document.querySelector('.nbs-chat');
      root.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
      root.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, files);
    await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat .nbs-attach-item').length === n, files.length, { timeout: 20_000 });
    const checkAttachments = () => {
      const ALLOWED = new Set('DIV BUTTON IMG DETAILS SUMMARY PRE SPAN'.split(' '));
      const out = [];
      for (const el of document.querySelectorAll('.nbs-attachments *, .nbs-attach-tray *')) {
        if (!ALLOWED.has(el.tagName)) out.push(`tag ${el.tagName}`);
        for (const name of el.getAttributeNames()) {
          const n = name.toLowerCase();
          if (n.startsWith('on') || n.startsWith('data-') || n === 'style' || n === 'href') out.push(`attribute ${name} on ${el.tagName}`);
        }
        if (el.tagName === 'IMG' && !/^data:image\/(?:png|jpeg|gif|webp|svg\+xml);base64,/.test(el.getAttribute('src') ?? '')) {
          out.push(`img src ${String(el.getAttribute('src')).slice(0, 40)}`);
        }
      }
      return out;
    };
    const trayViolations = await page.evaluate(checkAttachments);
    const input = page.locator('.nbs-chat textarea.nbs-input').first();
    await input.click();
    await input.pressSequentially('0', { delay: 5 });
    await input.press('Enter');
    await page.waitForFunction(
      (n) => {
        const users = document.querySelectorAll('.nbs-message[data-role="user"]');
        const last = users[users.length - 1];
        const replies = [...document.querySelectorAll('.nbs-message[data-role="assistant"]')];
        return users.length > n && last.querySelector('.nbs-attachments') && ['done', 'error'].includes(replies[replies.length - 1]?.dataset.status);
      },
      userBefore,
      { timeout: 60_000, polling: 200 },
    );
    attached = await page.evaluate(async () => {
      const users = document.querySelectorAll('.nbs-message[data-role="user"]');
      const box = users[users.length - 1].querySelector('.nbs-attachments');
      let clicked = 0;
      for (const b of box.querySelectorAll('button.nbs-att-thumb')) {
        b.click();
        clicked += 1;
      }
      for (const s of box.querySelectorAll('details > summary')) {
        s.click();
        clicked += 1;
      }
      await new Promise((r) => setTimeout(r, 500));
      return {
        names: [...box.querySelectorAll('.nbs-att-name')].map((e) => e.textContent),
        alts: [...box.querySelectorAll('img')].map((i) => i.alt),
        images: [...box.querySelectorAll('img')].map((i) => ({ loaded: i.complete && i.naturalWidth > 0, src: i.getAttribute('src').slice(0, 26) })),
        excerpts: [...box.querySelectorAll('pre')].map((p) => p.textContent),
        clicked,
        commandlinkers: document.querySelectorAll('.nbs-chat [data-commandlinker-command]').length,
        canary: window.__nbsCanary === undefined ? null : String(window.__nbsCanary),
        canary_in_window: '__nbsCanary' in window,
      };
    });
    attached.violations = [...trayViolations, ...(await page.evaluate(checkAttachments))];
  }
  const themeAfter = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  return {
    attached,
    canary_requests_attachments: canaryRequests.filter((r) => r.phase === 'attachments').map((r) => r.url),
    count,
    statuses,
    after_stream: afterStream,
    after_clicks: clicked,
    canary_requests_before_click: canaryRequests.filter((r) => r.phase === 'stream').map((r) => r.url),
    canary_requests_after_click: canaryRequests.filter((r) => r.phase === 'clicked').map((r) => r.url),
    dialogs,
    popups,
    theme_before: themeBefore,
    theme_after: themeAfter,
    counters: await counters(page),
  };
});
