// The HTML export of a notebook saved with widget state, opened in Chromium
// with no server and no kernel. nbconvert's page loads require.js and
// @jupyter-widgets/html-manager from CDNs, and the html-manager loads the
// `anywidget` front-end module from another CDN; the tests run offline, so
// every request is answered here (page.route) from the pinned npm
// packages in tests/browser/node_modules:
//   https://cdnjs.cloudflare.com/ajax/libs/require.js/<v>/require.min.js -> requirejs/require.js
//   https://unpkg.com/@jupyter-widgets/html-manager@<range>/dist/<file>  -> @jupyter-widgets/html-manager/dist/<file>
//   https://cdn.jsdelivr.net/npm/anywidget@<range>/dist/<file>           -> anywidget/dist/<file>
// The page itself is served from a made-up origin (http://nbstream-export.test/).
// Any other request (MathJax; require.js first tries ./anywidget.js next to the
// page) is refused with a 404, as offline, and reported.
// params: { html: path of the exported file, expect_math: wait until formulas are
//           rendered and code highlighted (they come from the saved chunks),
//           expect_tools: wait until a tool call's card shows (the saved tools chunk) }
// Screenshot: <artifact>.png
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { assistantTexts, waitAllFinal } from './record.mjs';
import { scenario } from './lab.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, 'node_modules');
const ORIGIN = 'http://nbstream-export.test/';

const LOCAL = [
  [/^https:\/\/cdnjs\.cloudflare\.com\/ajax\/libs\/require\.js\/[^/]+\/require(\.min)?\.js$/, () => path.join(modules, 'requirejs', 'require.js')],
  [/\/@jupyter-widgets\/html-manager@[^/]*\/dist\/([\w.-]+)$/, (m) => path.join(modules, '@jupyter-widgets', 'html-manager', 'dist', m[1])],
  [/\/anywidget@[^/]*\/dist\/([\w.-]+)$/, (m) => path.join(modules, 'anywidget', 'dist', m[1])],
];

const TYPES = { '.js': 'application/javascript', '.css': 'text/css', '.woff2': 'font/woff2', '.woff': 'font/woff', '.ttf': 'font/ttf', '.svg': 'image/svg+xml', '.eot': 'application/vnd.ms-fontobject' };

await scenario(async ({ page, params }) => {
  const served = [];
  const refused = [];
  const missing = [];
  await page.route('**/*', async (route) => {
    const url = route.request().url();
    if (url === `${ORIGIN}export.html`) {
      return route.fulfill({ status: 200, contentType: 'text/html', body: fs.readFileSync(params.html) });
    }
    for (const [re, file] of LOCAL) {
      const m = re.exec(decodeURI(url));
      if (m) {
        const p = file(m);
        if (!fs.existsSync(p)) {
          missing.push(url);
          return route.fulfill({ status: 404, body: '' });
        }
        served.push(url);
        return route.fulfill({ status: 200, contentType: TYPES[path.extname(p)] ?? 'application/octet-stream', body: fs.readFileSync(p) });
      }
    }
    if (/^https?:/.test(url)) {
      // as if offline (an empty 200 would make require.js take an empty module)
      refused.push(url);
      return route.fulfill({ status: 404, body: '' });
    }
    return route.continue();
  });
  await page.goto(`${ORIGIN}export.html`);
  await page.waitForSelector('.nbs-chat .nbs-message[data-role="assistant"]', { timeout: 30_000 });
  await waitAllFinal(page, { index: 0, timeout: 20_000 });
  if (params.expect_math) {
    await page.waitForFunction(
      () => document.querySelector('.nbs-chat .nbs-md math') && document.querySelector('.nbs-chat code.hljs'),
      null,
      { timeout: 30_000, polling: 100 },
    );
  }
  if (params.expect_tools) {
    await page.waitForFunction(() => document.querySelector('.nbs-chat .nbs-tool .nbs-tool-name'), null, {
      timeout: 30_000,
      polling: 100,
    });
  }
  await page.waitForTimeout(300);
  const texts = await assistantTexts(page, 0);
  const details = await page.evaluate(() => ({
    roots: document.querySelectorAll('.nbs-chat').length,
    user_texts: [...document.querySelectorAll('.nbs-chat .nbs-message[data-role="user"] .nbs-text')].map((e) => e.textContent),
    headings: document.querySelectorAll('.nbs-chat .nbs-md h2').length,
    styled_radius: getComputedStyle(document.querySelector('.nbs-chat')).borderRadius,
    widget_errors: document.querySelectorAll('.jupyter-widgets-error-widget, .jupyter-widgets.widget-error').length,
    // math and highlighting, from the chunks the saved runtime widget holds (js/src/chunks.ts)
    maths: document.querySelectorAll('.nbs-chat .nbs-md math').length,
    highlighted: document.querySelectorAll('.nbs-chat pre > code.hljs').length,
    links: [...document.querySelectorAll('.nbs-chat .nbs-md a')].map((e) => e.getAttribute('href')),
    // tool calls' cards, from the saved tools chunk
    tool_names: [...document.querySelectorAll('.nbs-chat .nbs-tool-name')].map((e) => e.textContent),
    tools_pending: document.querySelectorAll('.nbs-chat .nbs-tool-pending').length,
    chunk_loads: [...(window.__nbstreamChunkLoads ?? [])],
  }));
  await page.locator('.nbs-chat').first().scrollIntoViewIfNeeded();
  return { texts, ...details, served, refused, missing };
});
