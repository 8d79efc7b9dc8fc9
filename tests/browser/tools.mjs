// Tool calls (#20) in the real page: a card per call between the reply's first words
// and its answer. The first widget's scripted model streams a call with long
// arguments (the card grows inside a bounded box), waits for approval (Allow reached
// with the keyboard), shows the result, then a second call is denied with a click;
// the answer comes after. The second widget's model calls tools with hostile names,
// arguments, ids and results (tests/browser/xss_payloads.json): nothing may run.
// Then Notebook 7 shows a finished tool reply the same way.
// params: { notebook, nb7_notebook, label }
// Screenshots: <artifact>-<label>-{streaming,approval,done,nb7}.png
import path from 'node:path';
import { SEL, chat, messageIds, waitForChat, waitForStatus } from './chat.mjs';
import { ARTIFACT, ARTIFACTS, openNotebook, runAllCells, runFirstCellInNotebook7, scenario } from './lab.mjs';

const card = (page, index, n) => chat(page, index).locator(`.nbs-tool[data-call="${n}"]`);

function cardState({ index, n }) {
  const root = document.querySelectorAll('.nbs-chat')[index];
  const c = root?.querySelector(`.nbs-tool[data-call="${n}"]`);
  if (!c) return null;
  const msg = c.closest('.nbs-message');
  const kids = [...msg.children].map((k) => k.className);
  return {
    state: c.dataset.state ?? null,
    name: c.querySelector('.nbs-tool-name')?.textContent ?? '',
    label: c.querySelector('.nbs-tool-state')?.textContent ?? '',
    args: c.querySelector('.nbs-tool-args')?.textContent ?? '',
    args_box: c.querySelector('.nbs-tool-args')?.getBoundingClientRect().height ?? 0,
    height: c.getBoundingClientRect().height,
    buttons: [...c.querySelectorAll('.nbs-tool-approval button')].map((b) => b.textContent),
    result: c.querySelector('.nbs-tool-result .nbs-tool-text')?.textContent ?? null,
    error: c.querySelector('.nbs-tool-error')?.hidden === false ? c.querySelector('.nbs-tool-error').textContent : null,
    time: c.querySelector('.nbs-tool-time')?.textContent ?? '',
    between: kids.indexOf('nbs-tool-parts') > kids.indexOf('nbs-text nbs-md'),
    answer: msg.querySelector('.nbs-tool-parts .nbs-round .nbs-text')?.textContent.trim() ?? '',
    colors: {
      card_bg: getComputedStyle(c).backgroundColor,
      card_fg: getComputedStyle(c).color,
      chat_bg: getComputedStyle(root).backgroundColor,
    },
  };
}

/** Everything in the card subtrees of widget `index` that could run: tags, attributes, URLs. */
function hostileCheck({ index, clicked }) {
  const root = document.querySelectorAll('.nbs-chat')[index];
  const bad = [];
  const BAD_TAGS = new Set('SCRIPT STYLE IFRAME FRAME OBJECT EMBED SVG FORM INPUT TEXTAREA VIDEO AUDIO SOURCE META BASE LINK TEMPLATE'.split(' '));
  let checked = 0;
  for (const el of root.querySelectorAll('.nbs-tool-parts *')) {
    checked += 1;
    const tag = el.tagName.toUpperCase();
    if (BAD_TAGS.has(tag)) bad.push(`tag ${tag}`);
    const src = el.getAttribute('src') ?? '';
    const inline = el.classList.contains('nbs-tool-image') && /^data:image\/(png|jpeg);base64,[A-Za-z0-9+/=]+$/.test(src);
    // an image placeholder the user clicked loads (http/https only, no referrer)
    const asked = clicked && el.classList.contains('nbs-img-loaded') && /^https?:/.test(src) && el.referrerPolicy === 'no-referrer';
    if (tag === 'IMG' && !inline && !asked) {
      bad.push(`img ${src}`);
    }
    for (const name of el.getAttributeNames()) {
      const n = name.toLowerCase();
      const ours = (n === 'data-call' || n === 'data-state' || n === 'data-decision') && el.closest('.nbs-tool') !== null && !el.closest('.nbs-tool-html, .nbs-tool-markdown');
      if (n.startsWith('on') || (n.startsWith('data-') && !ours) || n === 'style' || n === 'srcset') {
        bad.push(`attribute ${name} on ${tag}`);
      }
      const href = el.getAttribute('href');
      if (href !== null && !/^(?:https?:\/\/|mailto:)/i.test(href)) bad.push(`href ${href}`);
    }
  }
  return {
    bad,
    checked,
    cards: root.querySelectorAll('.nbs-tool').length,
    names: [...root.querySelectorAll('.nbs-tool-name')].map((e) => e.textContent),
    canary: window.__nbsCanary === undefined ? null : String(window.__nbsCanary),
  };
}

async function shoot(page, index, name) {
  const file = path.join(ARTIFACTS, `${ARTIFACT}-${name}.png`);
  await chat(page, index).screenshot({ path: file, timeout: 15_000 });
  return file;
}

await scenario(async ({ page, params, log }) => {
  const label = params.label ?? 'light';
  const dialogs = [];
  page.on('dialog', (d) => {
    if (d.type() === 'beforeunload') {
      d.accept().catch(() => {}); // leaving the Lab page for Notebook 7
      return;
    }
    dialogs.push(`${d.type()}: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  await openNotebook(page, params.notebook);
  await runAllCells(page);
  await waitForChat(page, { index: 0 });
  await waitForChat(page, { index: 1 });
  const [id] = await messageIds(page, { index: 0 });
  const theme = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);

  // the arguments stream in: sample the card while they grow
  await card(page, 0, 0).waitFor({ state: 'visible', timeout: 60_000 });
  await chat(page, 0).scrollIntoViewIfNeeded();
  const samples = [];
  for (let i = 0; i < 200; i++) {
    const s = await page.evaluate(cardState, { index: 0, n: 0 });
    samples.push({ state: s.state, args: s.args.length, height: s.height, box: s.args_box });
    if (s.state !== 'streaming') break;
    if (i === 8) await shoot(page, 0, `${label}-streaming`);
    await page.waitForTimeout(25);
  }
  log('samples:', samples.length, JSON.stringify(samples.at(0)), JSON.stringify(samples.at(-1)));

  // the approval card: Allow, reached by the keyboard
  await card(page, 0, 0).locator('.nbs-tool-approval').waitFor({ state: 'visible', timeout: 30_000 });
  const approval = await page.evaluate(cardState, { index: 0, n: 0 });
  const approvalShot = await shoot(page, 0, `${label}-approval`);
  const allow = card(page, 0, 0).locator('button.nbs-tool-allow');
  await allow.focus();
  const focused = await page.evaluate(() => document.activeElement?.classList.contains('nbs-tool-allow') ?? false);
  await page.keyboard.press('Enter');
  await page.waitForFunction(
    () => document.querySelector('.nbs-chat .nbs-tool[data-call="0"]')?.dataset.state === 'done',
    null, { timeout: 30_000, polling: 100 },
  );
  const allowed = await page.evaluate(cardState, { index: 0, n: 0 });

  // the second call: Deny, with a click
  await card(page, 0, 1).locator('.nbs-tool-approval').waitFor({ state: 'visible', timeout: 30_000 });
  await card(page, 0, 1).locator('button.nbs-tool-deny').click();
  await waitForStatus(page, id, ['done'], { index: 0, timeout: 60_000 });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const denied = await page.evaluate(cardState, { index: 0, n: 1 });
  const done = await page.evaluate(cardState, { index: 0, n: 0 });
  const doneShot = await shoot(page, 0, `${label}-done`);

  // hostile text in every field of the second widget's calls
  const [xid] = await messageIds(page, { index: 1 });
  await waitForStatus(page, xid, ['done'], { index: 1, timeout: 60_000 });
  await chat(page, 1).scrollIntoViewIfNeeded();
  await page.evaluate(() => {
    for (const d of document.querySelectorAll('.nbs-chat')[1].querySelectorAll('details')) {
      d.open = true; // every result, and what the model was told
    }
  });
  const beforeClicks = await page.evaluate(hostileCheck, { index: 1, clicked: false });
  for (const b of await chat(page, 1).locator('button.nbs-img').all()) {
    await b.click(); // and ask for every image placeholder in them
  }
  await page.waitForTimeout(300);
  const hostile = await page.evaluate(hostileCheck, { index: 1, clicked: true });
  const themeAfter = await page.evaluate(() => document.body.dataset.jpThemeName ?? null);
  await shoot(page, 1, `${label}-hostile`);

  // Notebook 7: a finished tool reply (approved in the kernel) shows its cards
  let nb7 = null;
  if (params.nb7_notebook) {
    const attempts = await runFirstCellInNotebook7(page, params.nb7_notebook, page.locator('.nbs-chat .nbs-tool').first());
    await page.waitForFunction(
      () => [...document.querySelectorAll('.nbs-chat .nbs-tool')].some((c) => c.dataset.state === 'done'),
      null, { timeout: 60_000, polling: 200 },
    );
    await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
    nb7 = { attempts, card: await page.evaluate(cardState, { index: 0, n: 0 }), screenshot: await shoot(page, 0, `${label}-nb7`) };
  }
  return {
    theme, theme_after: themeAfter, samples, approval, focused, allowed, denied, done, hostile,
    hostile_before_clicks: beforeClicks,
    dialogs, nb7, screenshots: { approval: approvalShot, done: doneShot },
  };
});
