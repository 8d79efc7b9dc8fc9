// Renderer work per frame as an answer grows: 1k, 10k and 100k tokens of
// model-shaped Markdown (the corpus, benchmarks/corpus), incremental (MarkdownSink, as shipped) against the naive full
// re-render (FullSink), in one run. Node + jsdom (no browser, no layout or
// paint: the parse, sanitize and DOM-building work the view does per frame).
// For each size the answer is appended up to that size, then FRAMES frames
// each append one frame's worth of tokens (2,000 tokens/s at 60 frames/s: 33)
// and are timed in CPU time of this process (process.cpuUsage: other processes
// on a busy machine hardly change it, unlike the wall clock); the table gives
// the median ms per frame. Not a timed test.
//
//     node benchmarks/render_growth.mjs            # from the repository root
//     node benchmarks/render_growth.mjs 1000,10000,100000 --frames 30
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const jsDir = path.join(here, '..', 'js');
const require = createRequire(path.join(jsDir, 'package.json'));
const esbuild = require('esbuild');
const { JSDOM } = require('jsdom');

const args = process.argv.slice(2);
const sizes = (args.find((a) => /^\d/.test(a)) ?? '1000,10000,100000').split(',').map(Number);
const frames = Number(args[args.indexOf('--frames') + 1] || 20) || 20;
const PER_FRAME = 33;

// the view's renderers, bundled for node
const out = path.join(os.tmpdir(), `nbs-growth-${process.pid}.mjs`);
await esbuild.build({
  stdin: {
    contents: 'export { MarkdownSink, FullSink } from "./src/incremental";',
    resolveDir: jsDir,
    loader: 'ts',
  },
  bundle: true,
  format: 'esm',
  platform: 'node',
  outfile: out,
  logLevel: 'warning',
});
const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
for (const k of ['Node', 'Element', 'HTMLElement', 'DocumentFragment', 'NodeFilter', 'DOMParser']) {
  globalThis[k] = dom.window[k];
}
const { MarkdownSink, FullSink } = await import(pathToFileURL(out).href);
const { corpusPieces } = await import(pathToFileURL(path.join(here, '..', 'tests', 'browser', 'corpus.mjs')).href);

/** n + the frames' pieces of the corpus (benchmarks/corpus): model-shaped Markdown, as the browser benchmarks stream it. */
function tokens(n) {
  return corpusPieces(n + PER_FRAME * frames);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function measure(Sink, toks, size, nFrames) {
  const el = document.createElement('div');
  document.body.appendChild(el);
  const sink = new Sink(el);
  // grow to `size` in large steps (untimed); the incremental sink freezes blocks as it goes
  if (Sink === FullSink) {
    sink.replace(toks.slice(0, size).join('')); // the same state, without quadratic set-up
  } else {
    const step = 500;
    for (let i = 0; i < size; i += step) sink.append(toks.slice(i, Math.min(size, i + step)).join(''));
  }
  const times = [];
  for (let f = 0; f < nFrames; f++) {
    const chunk = toks.slice(size + f * PER_FRAME, size + (f + 1) * PER_FRAME).join('');
    const c0 = process.cpuUsage();
    sink.append(chunk);
    const c = process.cpuUsage(c0);
    times.push((c.user + c.system) / 1000);
  }
  el.remove();
  return median(times);
}

const all = tokens(Math.max(...sizes));
// warm-up (JIT), not reported
measure(MarkdownSink, all, 3000, frames);
measure(FullSink, all, 1000, frames);
const rows = [];
for (const size of sizes) {
  const inc = measure(MarkdownSink, all, size, frames);
  const full = measure(FullSink, all, size, size >= 100000 ? Math.min(3, frames) : frames);
  rows.push({ size, inc, full });
  console.error(`${size} tokens: incremental ${inc.toFixed(2)} ms, full ${full.toFixed(1)} ms per frame`);
}
const [load] = os.loadavg();
console.log(`\nRenderer CPU time per frame (median of ${frames} frames of ${PER_FRAME} tokens; full re-render at 100k: 3), node + jsdom; 1-min load average ${load.toFixed(1)} on ${os.cpus().length} CPUs\n`);
console.log('| tokens so far | incremental ms/frame | full re-render ms/frame |');
console.log('|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.size.toLocaleString('en')} | ${r.inc.toFixed(2)} | ${r.full.toFixed(1)} |`);
const flat = rows.at(-1).inc / rows[0].inc;
console.log(`\nincremental ${sizes.at(-1).toLocaleString('en')} / ${sizes[0].toLocaleString('en')}: ${flat.toFixed(2)}x (target: within ±20%)`);
