// XSS corpus through the real path: kernel -> comm -> view, streamed in pieces.
//
// The notebook (written by tests/test_browser_rendering.py) makes a ChatWidget
// whose source answers prompt "i" with payload i of xss_payloads.json, and
// sends every prompt. While the replies stream, a MutationObserver checks each
// node and attribute that enters the rendered Markdown (the open tail too);
// afterwards the whole DOM is checked, then every image placeholder and every
// neutered link is clicked, and the canary (window.__nbsCanary, which every
// payload tries to set) must still be unset.
// params: { notebook, count, timeout_ms = 60000 }
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
    const where = `${el.tagName.toLowerCase()} in ${el.closest('.nbs-message')?.dataset.id ?? '?'}`;
    if (BAD_TAGS.has(el.tagName.toUpperCase())) state.violations.push(`tag: ${where}`);
    // MathML only as a rendered formula (model output cannot write raw MathML)
    if (el.namespaceURI === 'http://www.w3.org/1998/Math/MathML' && !el.closest('.nbs-math, .nbs-math-block')) {
      state.violations.push(`MathML outside a formula: ${where}`);
    }
    for (const name of el.getAttributeNames()) {
      const n = name.toLowerCase();
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
  const themeAfter = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  return {
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
