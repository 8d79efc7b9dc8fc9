// The renderer's script time in a real browser (Chromium, headless), this tree against an
// earlier one in the same run, where the sanitizer (DOMPurify) is most of it:
//  - stream: every answer of the corpus (benchmarks/corpus) streamed into a MarkdownSink
//    in tokenizer-sized pieces, `--per` pieces a render (a render per frame: 32 streams at
//    100 pieces/s each on a saturated page render a few pieces at a time), then finished;
//  - history: each answer rendered whole, as a chat's earlier message is (lazy.ts via
//    messages.ts: `MarkdownSink.replace(text, true)`), 10 times a round.
// Each way runs in a page of its own, rounds interleaved (old, new, old, new, ...). A
// round's cost is the main thread's CPU time (CDP Performance.getMetrics ThreadTime, with
// thread ticks: other processes on a busy machine change it less than the wall clock); the
// table gives the median of the rounds, per 1,000 pieces and per render, each round's ratio
// to the same round of the tree before (median and range), and how many times a render ran
// the sanitizer and on how much HTML (DOMPurify parses each input with DOMParser: the page
// counts parseFromString calls and their input). Not a timed test.
//
//     node benchmarks/sanitize_cost.mjs                       # against main
//     node benchmarks/sanitize_cost.mjs --against af91116 --rounds 7 --per 1,4,16
//     node benchmarks/sanitize_cost.mjs --check     # also: the same DOM as the tree before?
//
// `--check` first streams every answer, and hostile code blocks, character by character
// in both pages and compares the rendered HTML after every render: a renderer that skips
// the sanitizer somewhere (the code block being written, built by incremental.ts) must show
// what the tree before shows, in Chromium's HTML parser too (the tests run in jsdom).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..');
const jsDir = path.join(root, 'js');
const require = createRequire(path.join(jsDir, 'package.json'));
const esbuild = require('esbuild');
const { chromium } = createRequire(path.join(root, 'tests', 'browser', 'package.json'))('playwright-core');
const { answers, splitPieces } = await import(pathToFileURL(path.join(root, 'tests', 'browser', 'corpus.mjs')).href);

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i === -1 ? fallback : args[i + 1];
};
const against = opt('--against', 'main');
const rounds = Number(opt('--rounds', '5'));
const pers = opt('--per', '2,8').split(',').map(Number);
const check = args.includes('--check');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nbs-sanitize-cost-'));

/** The renderer of the tree at `src` (a js/src folder), bundled for a page: globalThis.NBS. */
function bundle(src, name) {
  const out = path.join(tmp, `${name}.js`);
  esbuild.buildSync({
    stdin: {
      contents: 'export { MarkdownSink } from "./incremental"; export { purifierFor } from "./sanitize";',
      resolveDir: src,
      loader: 'ts',
    },
    bundle: true,
    format: 'iife',
    globalName: 'NBS',
    nodePaths: [path.join(jsDir, 'node_modules')],
    outfile: out,
    logLevel: 'warning',
  });
  return fs.readFileSync(out, 'utf8');
}

const commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', against], { encoding: 'utf8' }).trim();
fs.mkdirSync(path.join(tmp, 'old'));
execFileSync('sh', ['-c', `git -C "${root}" archive ${commit} js/src | tar -x -C "${path.join(tmp, 'old')}"`]);
const ways = [
  [`before (${commit})`, bundle(path.join(tmp, 'old', 'js', 'src'), 'old')],
  ['this tree', bundle(path.join(jsDir, 'src'), 'new')],
];

const texts = answers().map((a) => a.text);
const streams = texts.map((t) => splitPieces(t));
const nPieces = streams.reduce((n, s) => n + s.length, 0);

const browser = await chromium.launch({
  executablePath: process.env.NBS_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const pages = [];
for (const [name, code] of ways) {
  const page = await browser.newPage();
  await page.setContent('<!doctype html><html><body><div id="out"></div></body></html>');
  await page.addScriptTag({ content: code });
  await page.evaluate(() => {
    const parse = DOMParser.prototype.parseFromString;
    globalThis.parses = 0;
    globalThis.parsed = 0;
    DOMParser.prototype.parseFromString = function (...a) {
      globalThis.parses++;
      globalThis.parsed += String(a[0]).length;
      return parse.apply(this, a);
    };
  });
  // the sanitizer's calls timed by the kind of their first block (the block being written is
  // the last one and is sanitized alone, so a call's first block is its kind in most calls)
  await page.evaluate(() => {
    const purify = NBS.purifierFor(document);
    const sanitize = purify.sanitize.bind(purify);
    globalThis.kinds = {};
    const kindOf = (html) => {
      const m = /^<(\w+)(?: class="(nbs-[a-z]+))?/.exec(html);
      if (m === null) return 'other';
      if (m[2] === 'nbs-code') return 'fence';
      if (m[2] === 'nbs-table') return 'table';
      if (m[1] === 'ul' || m[1] === 'ol') return 'list';
      if (m[1] === 'p') return 'paragraph';
      if (/^h[1-6]$/.test(m[1])) return 'heading';
      if (m[1] === 'blockquote') return 'quote';
      return m[1];
    };
    purify.sanitize = (html, ...rest) => {
      const t0 = performance.now();
      const out = sanitize(html, ...rest);
      const k = (globalThis.kinds[kindOf(String(html))] ??= { calls: 0, ms: 0, chars: 0 });
      k.calls++;
      k.ms += performance.now() - t0;
      k.chars += String(html).length;
      return out;
    };
  });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable', { timeDomain: 'threadTicks' });
  pages.push({ name, page, cdp });
}

/** Code blocks whose text or info string is hostile (the tests' set, and a lone surrogate). */
const HOSTILE = [
  '```<img src=x onerror="alert(1)">\nx\n```\n\nafter',
  '```py"onclick="alert(1)\nx = 1\n',
  '```html\n</code></pre><script>alert(1)</script>\n<p>after</p>\n',
  '```\n<div data-commandlinker-command="terminal:create-new">click</div>\n',
  '```c\nchar s[] = "a\0b";\r\nline\rmore\t\ttabs\n',
  '```\n&amp; &lt;b&gt; &#0; <!-- x --> <![CDATA[ y ]]>\n',
  '```\nlone \ud800 surrogate \udc00 and a pair 😀\n',
  '````md\n```\ninner\n```\n````\nafter\n',
  '- item\n\n  ```py\n  x = "<script>"\n  ```\n',
  '    indented <b>code</b>\n',
];

/** Every render's HTML (hashed) of `texts` streamed character by character, then finished. */
async function renders(way, texts) {
  return way.page.evaluate((texts) => {
    const hash = (s) => {
      let h = 0x811c9dc5;
      for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
      return (h >>> 0).toString(16) + ':' + s.length;
    };
    const out = [];
    for (const text of texts) {
      const el = document.createElement('div');
      document.getElementById('out').appendChild(el);
      const sink = new NBS.MarkdownSink(el);
      for (const ch of text) {
        sink.append(ch);
        out.push(hash(el.innerHTML));
      }
      sink.finish();
      out.push(hash(el.innerHTML));
      el.remove();
    }
    return out;
  }, texts);
}

async function threadMs(cdp) {
  const { metrics } = await cdp.send('Performance.getMetrics');
  return metrics.find((m) => m.name === 'ThreadTime').value * 1000;
}

/** One round of `scenario` in `way`'s page: CPU ms, renders, sanitizer calls and their HTML's length. */
async function round(way, scenario, per) {
  const t0 = await threadMs(way.cdp);
  const r = await way.page.evaluate(
    ([scenario, per, streams, texts]) => {
      const out = document.getElementById('out');
      let renders = 0;
      const parses0 = globalThis.parses;
      const parsed0 = globalThis.parsed;
      globalThis.kinds = {};
      const render = (fn) => {
        fn();
        renders++;
      };
      for (let k = 0; k < streams.length; k++) {
        const el = document.createElement('div');
        out.appendChild(el);
        const sink = new NBS.MarkdownSink(el);
        if (scenario === 'history') {
          for (let pass = 0; pass < 10; pass++) render(() => sink.replace(texts[k], true));
        } else {
          const pieces = streams[k];
          for (let i = 0; i < pieces.length; i += per) {
            const delta = pieces.slice(i, i + per).join('');
            render(() => sink.append(delta));
          }
          render(() => sink.finish());
        }
        el.remove();
      }
      return {
        renders,
        parses: globalThis.parses - parses0,
        parsed: globalThis.parsed - parsed0,
        kinds: globalThis.kinds,
      };
    },
    [scenario, per, streams, texts],
  );
  return { ...r, cpu: (await threadMs(way.cdp)) - t0 };
}

if (check) {
  const [a, b] = await Promise.all(pages.map((way) => renders(way, [...texts, ...HOSTILE])));
  const differ = a.filter((h, i) => h !== b[i]).length;
  console.log(`check: ${a.length.toLocaleString('en')} renders, ${differ} with HTML that differs from the tree before`);
  if (differ > 0 || a.length !== b.length) process.exitCode = 1;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const load0 = fs.readFileSync('/proc/loadavg', 'utf8').trim();
const scenarios = [...pers.map((p) => ['stream', p]), ['history', 0]];
const results = new Map();
// warm-up round (JIT), not reported
for (const way of pages) for (const [s, p] of scenarios) await round(way, s, p);
for (let r = 0; r < rounds; r++) {
  for (const [s, p] of scenarios) {
    for (const way of pages) {
      const key = `${s}:${p}:${way.name}`;
      if (!results.has(key)) results.set(key, []);
      results.get(key).push(await round(way, s, p));
    }
  }
  process.stderr.write(`round ${r + 1}/${rounds}\n`);
}
await browser.close();
fs.rmSync(tmp, { recursive: true, force: true });
const load1 = fs.readFileSync('/proc/loadavg', 'utf8').trim();
const kindsOf = (rs) => {
  // the median round's split (by its CPU time)
  const mid = [...rs].sort((a, b) => a.cpu - b.cpu)[rs.length >> 1];
  return mid;
};

console.log(
  `\nRenderer main-thread CPU time, Chromium ${browser.version()} headless, ${texts.length} corpus answers ` +
    `(${nPieces.toLocaleString('en')} pieces), median of ${rounds} interleaved rounds; ` +
    `/proc/loadavg ${load0} at start, ${load1} at end, ${os.cpus().length} CPUs\n`,
);
console.log('| case | way | renders | sanitizer calls / render | HTML sanitized / render, chars | CPU ms / 1,000 pieces | CPU µs / render | vs before: median of the rounds’ ratios (range) |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|');
for (const [s, p] of scenarios) {
  const baseRounds = results.get(`${s}:${p}:${pages[0].name}`);
  for (const way of pages) {
    const rs = results.get(`${s}:${p}:${way.name}`);
    const cpu = median(rs.map((x) => x.cpu));
    const { renders, parses, parsed } = rs[0];
    // each round against the same round of the way before (they ran one after the other)
    const ratios = rs.map((x, i) => x.cpu / baseRounds[i].cpu);
    const label = s === 'history' ? 'history: a whole answer a render' : `stream: ${p} piece${p > 1 ? 's' : ''} a render`;
    console.log(
      `| ${label} | ${way.name} | ${renders.toLocaleString('en')} | ${(parses / renders).toFixed(2)} | ${(parsed / renders).toFixed(0)} | ` +
        `${s === 'history' ? '–' : ((cpu * 1000) / nPieces).toFixed(1)} | ${((cpu * 1000) / renders).toFixed(0)} | ` +
        `${median(ratios).toFixed(2)}x (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}) |`,
    );
  }
}

console.log('\nThe sanitizer\'s time by the kind of a call\'s first block (wall ms in DOMPurify.sanitize, the median round):\n');
console.log('| case | way | kind | calls | HTML chars / call | ms in the sanitizer | µs / call | share of the round\'s CPU |');
console.log('|---|---|---|---:|---:|---:|---:|---:|');
for (const [s, p] of scenarios) {
  for (const way of pages) {
    const mid = kindsOf(results.get(`${s}:${p}:${way.name}`));
    const label = s === 'history' ? 'history' : `stream ${p}`;
    const entries = Object.entries(mid.kinds).sort((a, b) => b[1].ms - a[1].ms);
    for (const [kind, k] of entries) {
      console.log(
        `| ${label} | ${way.name} | ${kind} | ${k.calls} | ${(k.chars / k.calls).toFixed(0)} | ${k.ms.toFixed(1)} | ` +
          `${((k.ms * 1000) / k.calls).toFixed(0)} | ${((100 * k.ms) / mid.cpu).toFixed(0)} % |`,
      );
    }
  }
}
