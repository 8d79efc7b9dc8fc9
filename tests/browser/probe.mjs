// A probe cell run the way a person runs it, timed from the key press to its
// output in the DOM (benchmarks/browser_responsiveness.py and browser_acks.py).
// The round trip includes the page's input queue, the kernel's execute round
// trip and the page rendering the output: everything that makes a busy page
// feel slow.

import { cell } from './lab.mjs';

/** Select the probe cell as a person does: a click on its prompt (command mode). */
export async function selectCell(page, index) {
  await cell(page, index).locator('.jp-InputPrompt').first().click();
}

/**
 * Run the selected probe cell once from the keyboard (Ctrl+Enter: run it and
 * stay on it, so the next probe needs no click); resolves with { ms, at }
 * (page clock): from the key press to its output in the DOM. The page is
 * waited on through a promise that a MutationObserver resolves: no polling
 * that would load the page being measured.
 */
export async function probeOnce(page, index, needle, timeout = 30_000) {
  await page.evaluate(
    ({ index, needle, timeout }) => {
      const node = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[index];
      const start = performance.now();
      window.__nbsProbe = new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          obs.disconnect();
          reject(new Error(`no "${needle}" in cell ${index} after ${timeout} ms`));
        }, timeout);
        const obs = new MutationObserver((records) => {
          for (const r of records) {
            for (const n of r.addedNodes) {
              if ((n.textContent ?? '').includes(needle)) {
                clearTimeout(timer);
                obs.disconnect();
                resolve({ ms: performance.now() - start, at: start });
                return;
              }
            }
          }
        });
        obs.observe(node, { childList: true, subtree: true });
      });
      performance.mark('nbs-probe');
    },
    { index, needle, timeout },
  );
  await page.keyboard.press('Control+Enter');
  return page.evaluate(() => window.__nbsProbe);
}

/** The q-quantile of xs (nearest rank), null for none. */
export function quantile(xs, q) {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

const r1 = (x) => (x === null || x === undefined ? null : Math.round(x * 10) / 10);

/** { n, p50, p95, max } of a list of ms. */
export function stat(xs) {
  return { n: xs.length, p50: r1(quantile(xs, 0.5)), p95: r1(quantile(xs, 0.95)), max: r1(xs.length ? Math.max(...xs) : null) };
}
