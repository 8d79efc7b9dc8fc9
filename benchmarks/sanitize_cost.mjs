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
const vectorsFile = opt('--vectors', null);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nbs-sanitize-cost-'));

/** The renderer of the tree at `src` (a js/src folder), bundled for a page: globalThis.NBS. */
function bundle(src, name) {
  const out = path.join(tmp, `${name}.js`);
  esbuild.buildSync({
    stdin: {
      // everything sanitize.ts exports (its names differ between trees)
      contents: 'export { MarkdownSink } from "./incremental"; export * from "./sanitize";',
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
  // what the sanitizer parses: a new document for each string (DOMPurify's parseFromString),
  // or HTML parsed into an inert document's element (innerHTML outside this page's document)
  await page.evaluate(() => {
    const parse = DOMParser.prototype.parseFromString;
    globalThis.parses = 0;
    globalThis.parsed = 0;
    globalThis.documents = 0;
    globalThis.lastHtml = '';
    DOMParser.prototype.parseFromString = function (...a) {
      globalThis.documents++;
      if (a[0] !== '') {
        // an empty one is an inert document made for later calls, not a call
        globalThis.parses++;
        globalThis.parsed += String(a[0]).length;
      }
      return parse.apply(this, a);
    };
    const inner = Object.getOwnPropertyDescriptor(Element.prototype, 'innerHTML');
    Object.defineProperty(Element.prototype, 'innerHTML', {
      ...inner,
      set(v) {
        if (this.ownerDocument !== document) {
          globalThis.parses++;
          globalThis.parsed += String(v).length;
          globalThis.lastHtml = String(v);
        }
        inner.set.call(this, v);
      },
    });
  });
  // the sanitizer's calls timed by the kind of their first block (the block being written is
  // the last one and is sanitized alone, so a call's first block is its kind in most calls)
  await page.evaluate(() => {
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
    // a tree with one sanitizer per window, or one per path (the in-place one is given the
    // parsed tree: its HTML is the last one parsed into the inert document, not counted in
    // its time, as the HTML parse of a string is not)
    const purifiers = new Set([NBS.purifierFor(document), NBS.purifierFor(document, 'parsed')]);
    for (const purify of purifiers) {
      const sanitize = purify.sanitize.bind(purify);
      purify.sanitize = (dirty, ...rest) => {
        const t0 = performance.now();
        const out = sanitize(dirty, ...rest);
        const ms = performance.now() - t0;
        const html = typeof dirty === 'string' ? dirty : globalThis.lastHtml;
        const k = (globalThis.kinds[kindOf(html)] ??= { calls: 0, ms: 0, chars: 0 });
        k.calls++;
        k.ms += ms;
        k.chars += html.length;
        return out;
      };
    }
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

/**
 * HTML whose parse as an element's content (innerHTML) differs from its parse as a document
 * (DOMParser), or may: top-level table parts, document tags, a frameset, head elements first,
 * a doctype (the document's mode), leading whitespace, foreign content, noscript.
 */
const PARSE_EDGES = [
  '<tr><td>a</td></tr>',
  '<td>x</td><th>y',
  '<caption>c</caption><col span=2><colgroup></colgroup><tbody><tr><td>z',
  '<div><frameset><frame src="javascript:alert(1)"></frameset>',
  '<frameset onload=alert(1)><frame src="javascript:alert(1)">',
  '<p>a</p><frameset onload=alert(1)>',
  '<html onload=alert(1) data-commandlinker-command="help:about"><p>x',
  '<body onload=alert(1)><p>x</p>',
  '<head><title>t</title></head><p>x',
  '<title>t</title> <p>x',
  '<style>*{}</style>\n<p>x',
  '<meta charset=utf-8><base href="javascript:alert(1)//"><link rel=stylesheet href=x><p>x',
  '<!doctype html><p>a<table><tr><td>b</table>',
  '<!-- c --><!doctype html><p>a<table><tr><td>b</table>',
  '<p>a<table><tr><td>b</table>',
  '<select><option>a<p>b</select><p>c',
  '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
  '<p><noscript><p title="</noscript><img src=x onerror=alert(1)>"></p>',
  '\r\n <p>x',
  '\f<p>x',
  '\ufeff<p>x',
  '  <p>x</p>\n',
  '\n\n<h1>x</h1>',
  '<template><td>x</td><script>alert(1)</script></template>',
  '<math><mi><table><tr><td>x<mglyph><style><img src=x onerror=alert(1)>',
  '<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;img src=1 onerror=alert(1)&gt;">',
  '<svg><foreignObject><p>x</p></foreignObject></svg>',
  '<form><form id=x><input name=attributes>',
  '<a href="https://x.example"><a href="https://y.example">two</a>',
  '</body><p>after</p>',
  '</html><!--c--><p>x',
  '<p>x</p></body>  <p>y',
  '<plaintext><p>x',
  '<xmp><p>x</xmp>',
  '<image src=x onerror=alert(1)>',
  '<table><td>x</td></table><p>a<table>',
  '<ul><li>a<li>b</ul><dl><dt>x<dd>y</dl>',
  '<p id="attributes">x</p><form name=body><input id=removeChild></form>',
  '<div data-commandlinker-command="terminal:create-new" onclick=alert(1)>x</div>',
  '<a href="javascript:alert(1)">x</a><a href=" jAvAsCrIpT:alert(1)">y</a>',
  '<math><maction actiontype=statusline><mi>x</mi></maction><semantics><annotation-xml encoding="text/html"><img src=x onerror=alert(1)></annotation-xml></semantics></math>',
  '<svg><script>alert(1)</script><style>@import "x"</style></svg>',
  '<h3>heading</h3>\n',
];

/**
 * Each input sanitized by `sanitize` in both pages, serialized: the lists of results (the same
 * order), and in this tree's page, where it has the paths, how many took the in-place one, how
 * many gave another result than the string path, and whether its inert body was ever left
 * non-empty.
 */
async function sanitizeAll(way, inputs) {
  return way.page.evaluate((inputs) => {
    globalThis.alerts = 0;
    for (const name of ['alert', 'confirm', 'prompt', 'print']) window[name] = () => globalThis.alerts++;
    const html = (frag) => {
      const div = document.createElement('div');
      div.append(frag);
      return div.innerHTML;
    };
    const out = [];
    let inPlace = 0;
    let leftInBody = 0;
    const pathsDiffer = [];
    for (const input of inputs) {
      out.push(html(NBS.sanitize(document, input)));
      if (NBS.sanitizeParsed !== undefined) {
        if (NBS.parsesInPlace(input)) inPlace++;
        if (NBS.inertBodyFor(document).childNodes.length !== 0) leftInBody++;
        const parsed = html(NBS.sanitizeParsed(document, input));
        if (parsed !== out[out.length - 1]) pathsDiffer.push([input, parsed, out[out.length - 1]]);
      }
    }
    return { out, inPlace, leftInBody, pathsDiffer };
  }, inputs);
}

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
      const documents0 = globalThis.documents;
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
        documents: globalThis.documents - documents0,
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

  // raw HTML straight into the sanitizer: DOMPurify's vectors, our XSS payloads, parse edges
  const vectors = [];
  if (vectorsFile !== null) {
    const mod = await import(pathToFileURL(path.resolve(vectorsFile)).href);
    for (const v of mod.default) if (typeof v.payload === 'string') vectors.push(v.payload);
  }
  const payloads = JSON.parse(fs.readFileSync(path.join(root, 'tests', 'browser', 'xss_payloads.json'), 'utf8'));
  const inputs = [...vectors, ...payloads.map((p) => p.text), ...PARSE_EDGES];
  const [sa, sb] = await Promise.all(pages.map((way) => sanitizeAll(way, inputs)));
  await new Promise((r) => setTimeout(r, 500)); // an image's error event would come by now
  const alerts = await Promise.all(pages.map((way) => way.page.evaluate(() => globalThis.alerts)));
  const vdiff = inputs.map((input, i) => [input, sa.out[i], sb.out[i]]).filter(([, x, y]) => x !== y);
  console.log(
    `check: ${inputs.length} HTML inputs straight into sanitize() (${vectors.length} DOMPurify vectors, ` +
      `${payloads.length} XSS payloads, ${PARSE_EDGES.length} parse edges): ${vdiff.length} with a result that differs ` +
      `from the tree before; this tree: ${sb.inPlace} took the in-place path, ${sb.pathsDiffer.length} ` +
      `differ between its two paths, inert body left non-empty ${sb.leftInBody} times; ` +
      `script ran (alert & co.) ${alerts.join(' / ')} times (before / this tree)`,
  );
  for (const [input, x, y] of [...vdiff, ...sb.pathsDiffer].slice(0, 20)) {
    console.log(`  input ${JSON.stringify(input).slice(0, 300)}\n    one: ${JSON.stringify(x).slice(0, 300)}\n    two: ${JSON.stringify(y).slice(0, 300)}`);
  }
  if (vdiff.length > 0 || sb.pathsDiffer.length > 0 || sb.leftInBody > 0 || alerts.some((n) => n > 0)) process.exitCode = 1;
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
console.log('| case | way | renders | sanitizer calls / render | documents made / render | HTML sanitized / render, chars | CPU ms / 1,000 pieces | CPU µs / render | vs before: median of the rounds’ ratios (range) |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|');
for (const [s, p] of scenarios) {
  const baseRounds = results.get(`${s}:${p}:${pages[0].name}`);
  for (const way of pages) {
    const rs = results.get(`${s}:${p}:${way.name}`);
    const cpu = median(rs.map((x) => x.cpu));
    const { renders, parses, parsed, documents } = rs[0];
    // each round against the same round of the way before (they ran one after the other)
    const ratios = rs.map((x, i) => x.cpu / baseRounds[i].cpu);
    const label = s === 'history' ? 'history: a whole answer a render' : `stream: ${p} piece${p > 1 ? 's' : ''} a render`;
    console.log(
      `| ${label} | ${way.name} | ${renders.toLocaleString('en')} | ${(parses / renders).toFixed(2)} | ${(documents / renders).toFixed(2)} | ${(parsed / renders).toFixed(0)} | ` +
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
