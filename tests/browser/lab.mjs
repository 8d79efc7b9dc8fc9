// Drive a real JupyterLab page in Debian's headless Chromium (playwright-core, no
// browser download). Shared by every scenario in this folder.
//
// A scenario is a Node script run by the `run_scenario` fixture of tests/conftest.py:
//
//   import { scenario, openNotebook, runAllCells } from './lab.mjs';
//   await scenario(async ({ page, params }) => {
//     await openNotebook(page, params.notebook);
//     await runAllCells(page);
//     return { figure: 42 };          // merged into the JSON printed on stdout
//   });
//
// Environment (set by the fixture): NBS_URL (server base URL, ends with "/"),
// NBS_TOKEN, NBS_PARAMS (JSON object), NBS_ARTIFACTS (screenshot folder),
// NBS_ARTIFACT (file-name prefix, the pytest test's name), NBS_TIMEOUT_MS,
// NBS_CHROMIUM (browser executable, default /usr/bin/chromium).
//
// Protocol: the last stdout line is one JSON object, {"ok": true, ...result,
// "screenshot", "console", "elapsed_ms"} on success; on failure {"ok": false,
// "error", "stack", "screenshot", "console"} and exit status 1. Everything else a
// scenario wants to say goes to stderr (log()). SIGTERM (the fixture's timeout)
// takes a failure screenshot, reports and exits.
//
// JupyterLab is driven through its own application object, `window.jupyterapp`
// (the server runs with --LabApp.expose_app_in_browser=True): `commands.execute`
// runs the same commands as the menus and resolves when the cells have run, and
// the session context gives the kernel status. Cells can also be run the way a
// person does (click, Shift+Enter): runCell(page, i, { via: 'keyboard' }).

import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const URL_BASE = process.env.NBS_URL ?? 'http://127.0.0.1:8888/';
export const TOKEN = process.env.NBS_TOKEN ?? '';
export const PARAMS = JSON.parse(process.env.NBS_PARAMS ?? '{}');
export const ARTIFACTS = process.env.NBS_ARTIFACTS ?? path.resolve('test-artifacts');
export const ARTIFACT = process.env.NBS_ARTIFACT ?? path.basename(process.argv[1] ?? 'scenario', '.mjs');
export const TIMEOUT_MS = Number(process.env.NBS_TIMEOUT_MS ?? 110_000);
export const CHROMIUM = process.env.NBS_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage', // containers often have a 64 MB /dev/shm
];

/** Write a line to stderr (stdout is reserved for the JSON result). */
export function log(...args) {
  process.stderr.write(`[${ARTIFACT}] ${args.map(String).join(' ')}\n`);
}

/** Launch Chromium with a fresh profile; signals are left to scenario(). */
export async function launchBrowser(options = {}) {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
    timeout: 60_000,
    ...options,
  });
}

/** Save a screenshot as test-artifacts/<artifact>[-label].png; returns its path. */
export async function screenshot(page, label = '') {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${ARTIFACT}${label ? `-${label}` : ''}.png`);
  await page.screenshot({ path: file, timeout: 10_000 });
  return file;
}

let workspaceCounter = 0;

/**
 * Open a notebook (path relative to the server root) in a fresh workspace, wait
 * until its kernel is idle. Returns the milliseconds it took.
 */
export async function openNotebook(page, notebookPath, { timeout = 90_000, collapseLeft = true } = {}) {
  const t0 = Date.now();
  const ws = `nbs-${process.pid}-${++workspaceCounter}`;
  const encoded = notebookPath.split('/').map(encodeURIComponent).join('/');
  // ?reset: start from an empty layout, so no earlier tab (and kernel) comes back
  await page.goto(`${URL_BASE}lab/workspaces/${ws}/tree/${encoded}?reset&token=${TOKEN}`, {
    timeout,
  });
  await page.waitForFunction(
    (p) => {
      const w = window.jupyterapp?.shell?.currentWidget;
      return Boolean(w?.context?.path === p && w.content?.widgets);
    },
    notebookPath,
    { timeout, polling: 100 },
  );
  if (collapseLeft) await page.evaluate(() => window.jupyterapp.shell.collapseLeft());
  await waitForKernelIdle(page, { timeout: Math.max(1_000, timeout - (Date.now() - t0)) });
  return Date.now() - t0;
}

/**
 * If JupyterLab or Notebook 7 asks which kernel to use, take its default choice.
 * The dialog may show at any moment while a notebook loads (seen on a loaded
 * machine: the kernel specs arrived after the notebook), so the waits below
 * call this on every poll. Returns whether it clicked.
 */
export async function acceptKernelDialog(page) {
  const dialog = page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-accept');
  if ((await dialog.count()) === 0) return false;
  await dialog.first().click({ timeout: 5_000 }).catch(() => {}); // gone meanwhile: fine
  return true;
}

/** Polls `check` (async, truthy when done) every 250 ms, taking any kernel dialog on the way. */
async function pollWithKernelDialog(page, check, { timeout, what }) {
  const t0 = Date.now();
  for (;;) {
    await acceptKernelDialog(page);
    const value = await check();
    if (value) return value;
    if (Date.now() - t0 > timeout) throw new Error(`timed out after ${timeout} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Wait until the current notebook's kernel reports "idle". */
export async function waitForKernelIdle(page, { timeout = 60_000 } = {}) {
  await pollWithKernelDialog(
    page,
    () =>
      page.evaluate(() => {
        const ctx = window.jupyterapp?.shell?.currentWidget?.sessionContext;
        return ctx?.session?.kernel?.status === 'idle';
      }),
    { timeout, what: 'the notebook kernel to be idle' },
  );
}

/**
 * A request to the server's REST API (`path` relative to its base URL), resolving with
 * the JSON body (null for 204). By default a failure other than 404 throws; `lenient`
 * resolves null for any failure instead (for clean-ups).
 */
export async function api(method, path, { lenient = false } = {}) {
  const res = await fetch(`${URL_BASE}${path}`, { method, headers: { Authorization: `token ${TOKEN}` } });
  if (lenient && !res.ok) return null;
  if (!res.ok && res.status !== 404) throw new Error(`${method} ${path}: ${res.status}`);
  return res.status === 204 ? null : res.json().catch(() => null);
}

/** Shuts down every session and kernel of the server (`lenient`: see api). */
export async function shutDownAll({ lenient = false } = {}) {
  for (const s of (await api('GET', 'api/sessions', { lenient })) ?? []) await api('DELETE', `api/sessions/${s.id}`, { lenient });
  for (const k of (await api('GET', 'api/kernels', { lenient })) ?? []) await api('DELETE', `api/kernels/${k.id}`, { lenient });
}

/** The kernel ({ id, name }) of the server's session of `notebookPath`; throws if none. */
export async function kernelOfNotebook(notebookPath) {
  const kernel = ((await api('GET', 'api/sessions')) ?? []).find((s) => s.path === notebookPath)?.kernel;
  if (!kernel) throw new Error(`no kernel for ${notebookPath}`);
  return { id: kernel.id, name: kernel.name };
}

/** Wait until the server says the kernel of `notebookPath`'s session is idle (any front end). */
export async function waitForSessionIdle(page, notebookPath, { timeout = 60_000 } = {}) {
  await pollWithKernelDialog(
    page,
    async () => {
      const res = await fetch(`${URL_BASE}api/sessions`, { headers: { Authorization: `token ${TOKEN}` } });
      const sessions = res.ok ? await res.json() : [];
      return sessions.find((x) => x.path === notebookPath)?.kernel?.execution_state === 'idle';
    },
    { timeout, what: `the kernel of ${notebookPath} to be idle` },
  );
}

/**
 * Open `notebookPath` in Notebook 7 and run its first cell as a person does
 * (select it, Shift+Enter: Notebook 7 exposes no application object). A cell
 * run before the page's kernel connection is up is dropped, so it tries again
 * until `ready` (a locator) is visible; any kernel dialog is accepted on the
 * way. Returns the attempts it took.
 */
export async function runFirstCellInNotebook7(page, notebookPath, ready, { attempts = 6, timeout = 60_000 } = {}) {
  const encoded = notebookPath.split('/').map(encodeURIComponent).join('/');
  await page.goto(`${URL_BASE}notebooks/${encoded}?token=${TOKEN}`, { timeout });
  const cell = page.locator('.jp-Notebook .jp-Cell').first();
  await cell.waitFor({ state: 'visible', timeout });
  await waitForSessionIdle(page, notebookPath, { timeout });
  for (let attempt = 1; attempt <= attempts; attempt++) {
    await acceptKernelDialog(page);
    await cell.locator('.jp-InputPrompt').first().click({ timeout: 15_000 });
    await page.keyboard.press('Shift+Enter');
    try {
      await ready.waitFor({ state: 'visible', timeout: 10_000 });
      return attempt;
    } catch {
      log(`notebook 7, attempt ${attempt}: not ready yet`);
    }
  }
  throw new Error(`Notebook 7: nothing showed after running the first cell ${attempts} times`);
}

/** Run every cell (Run > Run All Cells); resolves when all have finished. */
export async function runAllCells(page, { timeout = 120_000 } = {}) {
  const t0 = Date.now();
  await withTimeout(
    page.evaluate(() => window.jupyterapp.commands.execute('notebook:run-all-cells')),
    timeout,
    'running all cells',
  );
  return Date.now() - t0;
}

/** The number of cells of the current notebook. */
export async function cellCount(page) {
  return page.evaluate(() => window.jupyterapp.shell.currentWidget.content.widgets.length);
}

/** A locator for the index-th cell of the current notebook. */
export function cell(page, index) {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').nth(index);
}

/**
 * Run one cell. via 'command': select it and execute notebook:run-cell (resolves
 * when it has finished); via 'keyboard': click its prompt and press Shift+Enter,
 * as a person would (resolves at once; wait on its output with waitForOutput).
 */
export async function runCell(page, index, { via = 'command', timeout = 60_000 } = {}) {
  if (via === 'keyboard') {
    const c = cell(page, index);
    await c.scrollIntoViewIfNeeded();
    await c.locator('.jp-InputPrompt').first().click();
    await page.keyboard.press('Shift+Enter');
    return;
  }
  await withTimeout(
    page.evaluate(async (i) => {
      const app = window.jupyterapp;
      app.shell.currentWidget.content.activeCellIndex = i;
      await app.commands.execute('notebook:run-cell');
    }, index),
    timeout,
    `running cell ${index}`,
  );
}

/**
 * Append a code cell at the end of the current notebook, run it, return its output
 * text. For asking the kernel what it holds (the notebook is not saved).
 */
export async function runCode(page, code, { timeout = 60_000 } = {}) {
  return withTimeout(
    page.evaluate(async (source) => {
      const app = window.jupyterapp;
      const nb = app.shell.currentWidget.content;
      nb.activeCellIndex = nb.widgets.length - 1;
      await app.commands.execute('notebook:insert-cell-below');
      if (nb.activeCell.model.type !== 'code') await app.commands.execute('notebook:change-cell-to-code');
      nb.activeCell.model.sharedModel.setSource(source);
      await app.commands.execute('notebook:run-cell');
      const outputs = nb.activeCell.model.outputs.toJSON();
      return outputs
        .map((o) => (o.output_type === 'stream' ? [].concat(o.text).join('') : o.data?.['text/plain'] ? [].concat(o.data['text/plain']).join('') : o.output_type === 'error' ? `${o.ename}: ${o.evalue}` : ''))
        .join('');
    }, code),
    timeout,
    'running code in a new cell',
  );
}

/** The visible text of the index-th cell's output area. */
export async function cellOutputText(page, index) {
  return page.evaluate((i) => {
    const c = window.jupyterapp.shell.currentWidget.content.widgets[i];
    return c?.node.querySelector('.jp-OutputArea')?.innerText ?? '';
  }, index);
}

/**
 * Start watching the index-th cell for a *new* output node containing `needle`.
 * Returns an object whose wait() resolves with { ms, seen_at, seen_wall, text }: the
 * milliseconds from the moment watchOutput() was called until that output was added
 * to the DOM, that moment on the page clock (performance.now()) and on the wall clock
 * (ms since the epoch, as Python's time.time() * 1000), and the added node's text.
 */
export async function watchOutput(page, index, needle, { timeout = 30_000 } = {}) {
  const key = `__nbsWatch${Math.random().toString(36).slice(2)}`;
  await page.evaluate(
    ({ i, needle, key }) => {
      const node = window.jupyterapp.shell.currentWidget.content.widgets[i].node;
      const start = performance.now();
      const state = { start, seenAt: null };
      window[key] = state;
      const obs = new MutationObserver((records) => {
        for (const r of records) {
          for (const n of r.addedNodes) {
            if ((n.textContent ?? '').includes(needle)) {
              state.seenAt = performance.now();
              state.text = n.textContent;
              obs.disconnect();
              return;
            }
          }
        }
      });
      obs.observe(node, { childList: true, subtree: true });
    },
    { i: index, needle, key },
  );
  return {
    async wait() {
      await page.waitForFunction((k) => window[k].seenAt !== null, key, { timeout, polling: 'raf' });
      return page.evaluate(
        (k) => ({
          ms: window[k].seenAt - window[k].start,
          seen_at: window[k].seenAt,
          seen_wall: performance.timeOrigin + window[k].seenAt,
          text: window[k].text,
        }),
        key,
      );
    },
  };
}

/** Type into a field like a person (key by key), or fill it at once ({ fill: true }). */
export async function typeInto(page, selectorOrLocator, text, { fill = false, delay = 5 } = {}) {
  const field = typeof selectorOrLocator === 'string' ? page.locator(selectorOrLocator).first() : selectorOrLocator;
  await field.click();
  if (fill) await field.fill(text);
  else await field.pressSequentially(text, { delay });
  return field;
}

/** Reject with a clear message if `promise` takes longer than `ms`. */
export async function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Run a scenario: launch the browser, open a page, call fn({ browser, page,
 * params, log, screenshot }), print the JSON result (see the header), close
 * everything, set the exit status. Takes a screenshot at the end either way.
 */
export async function scenario(fn) {
  const t0 = Date.now();
  const consoleLines = [];
  let browser = null;
  let page = null;
  let finished = false;

  const report = async (result, ok) => {
    if (finished) return;
    finished = true;
    let shot = null;
    if (page) {
      try {
        shot = await screenshot(page, ok ? '' : 'failure');
      } catch (err) {
        log('screenshot failed:', err.message);
      }
    }
    const out = { ok, ...result, screenshot: shot, console: consoleLines.slice(-50), elapsed_ms: Date.now() - t0 };
    process.stdout.write(`\n${JSON.stringify(out)}\n`);
    if (browser) await withTimeout(browser.close(), 10_000, 'closing the browser').catch(() => {});
    process.exitCode = ok ? 0 : 1;
  };
  const fail = async (err) => {
    log('FAILED:', err?.stack ?? err);
    await report({ error: String(err?.message ?? err), stack: String(err?.stack ?? '') }, false);
    process.exit(1);
  };

  process.on('SIGTERM', () => fail(new Error('terminated (the test runner timed out)')));
  process.on('SIGINT', () => fail(new Error('interrupted')));
  const watchdog = setTimeout(() => fail(new Error(`scenario timed out after ${TIMEOUT_MS} ms`)), TIMEOUT_MS);

  try {
    browser = await launchBrowser();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(30_000);
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') consoleLines.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
    page.on('request', (r) => {
      const u = r.url();
      if (!u.startsWith(URL_BASE) && !u.startsWith('data:') && !u.startsWith('blob:')) {
        consoleLines.push(`external request: ${u}`);
      }
    });
    const result = await fn({ browser, page, params: PARAMS, log, screenshot: (label) => screenshot(page, label) });
    clearTimeout(watchdog);
    await report(result ?? {}, true);
  } catch (err) {
    clearTimeout(watchdog);
    await fail(err);
  }
}
