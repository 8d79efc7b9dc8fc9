// Builds the front end into ../nbstream/static/: widget.js (one ES module,
// everything a view needs to show a chat) and widget.css, which the kernel
// sends once in its shared runtime model (nbstream/widgets/runtime.py);
// loader.js, the small `_esm` of every widget that imports them from there
// (src/loader.ts); the chunks math.js (Temml), highlight.js (highlight.js),
// entities.js (HTML's named character references), linkify.js
// (linkify-it: bare URLs and e-mail addresses), glyphs.js (src/glyphs.ts:
// the fonts for a long history's characters) and tools.js (src/toolcard.ts:
// the cards of tool calls), which the runtime model
// carries only once a message needs them (src/chunks.ts); and standalone.js,
// widget.js with every chunk, for where widgets carry the whole front end
// (marimo). markdown-it's import of the `entities` package resolves to
// src/entities.ts, which decodes the common names and takes the rest from the
// entities chunk; its import of `linkify-it` to src/linkify.ts, which takes
// linkify-it from the linkify chunk; its import of `punycode.js` to
// src/punycode.ts (the browser's URL parser) and of `uc.micro` to
// src/ucmicro.ts (Unicode property escapes). Fails when a module would import anything at
// run time: nothing may come from a CDN or the network, and when a chunk would
// bundle a module of src/ that widget.js has too (a second copy: the tools
// chunk takes what it runs of the bundle in its options, src/toolhost.ts).
// `node build.mjs --sizes` also prints each output's bytes by dependency
// (from esbuild's metafile), and the script a page parses at first render
// (loader.js and widget.js) against its budget, FIRST_RENDER_BUDGET
// (tests/test_runtime_bundle.py fails above it).
import { rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = join(here, "..", "nbstream", "static");

/** Bytes of script a page may parse at first render (loader.js + widget.js). */
const FIRST_RENDER_BUDGET = 200 * 1024;

/**
 * markdown-it's `import ... from "entities"` (exactly that path: the entities
 * chunk imports "entities/decode") is src/entities.ts; its `import ... from
 * "linkify-it"` is src/linkify.ts (only markdown-it's: the linkify chunk
 * imports the package itself).
 */
const fromChunks = {
  name: "from-chunks",
  setup(build) {
    build.onResolve({ filter: /^entities$/ }, () => ({ path: join(here, "src", "entities.ts") }));
    build.onResolve({ filter: /^punycode\.js$/ }, () => ({
      path: join(here, "src", "punycode.ts"),
    }));
    build.onResolve({ filter: /^uc\.micro$/ }, (args) =>
      /[\\/]node_modules[\\/]markdown-it[\\/]/.test(args.importer)
        ? { path: join(here, "src", "ucmicro.ts") }
        : undefined,
    );
    build.onResolve({ filter: /^linkify-it$/ }, (args) =>
      /[\\/]node_modules[\\/]markdown-it[\\/]/.test(args.importer)
        ? { path: join(here, "src", "linkify.ts") }
        : undefined,
    );
  },
};

const common = {
  bundle: true,
  minify: true,
  target: "es2020",
  legalComments: "none",
  logLevel: "info",
  metafile: true,
  plugins: [fromChunks],
};

const js = await esbuild.build({
  ...common,
  entryPoints: [join(here, "src", "index.ts")],
  outfile: join(outdir, "widget.js"),
  format: "esm",
  platform: "browser",
});
const loader = await esbuild.build({
  ...common,
  entryPoints: [join(here, "src", "loader.ts")],
  outfile: join(outdir, "loader.js"),
  format: "esm",
  platform: "browser",
});
/** One more self-contained ES module from src/<entry>.ts into static/<name>. */
const module = (entry, name) =>
  esbuild.build({
    ...common,
    entryPoints: [join(here, "src", `${entry}.ts`)],
    outfile: join(outdir, name),
    format: "esm",
    platform: "browser",
  });
const math = await module("chunks/math", "math.js");
const highlight = await module("chunks/highlight", "highlight.js");
const entities = await module("chunks/entities", "entities.js");
const linkify = await module("chunks/linkify", "linkify.js");
const glyphs = await module("chunks/glyphs", "glyphs.js");
const tools = await module("chunks/tools", "tools.js");
const standalone = await module("standalone", "standalone.js");
await esbuild.build({
  ...common,
  entryPoints: [join(here, "src", "widget.css")],
  outfile: join(outdir, "widget.css"),
});
await rm(join(outdir, "widget.js.map"), { force: true });

const outputs = [
  ["widget.js", js],
  ["loader.js", loader],
  ["math.js", math],
  ["highlight.js", highlight],
  ["entities.js", entities],
  ["linkify.js", linkify],
  ["glyphs.js", glyphs],
  ["tools.js", tools],
  ["standalone.js", standalone],
];
for (const [name, result] of outputs) {
  const external = Object.values(result.metafile.outputs).flatMap((o) =>
    o.imports.filter((i) => i.external).map((i) => i.path),
  );
  if (external.length > 0) {
    console.error(`${name} must be self-contained; it imports: ${external.join(", ")}`);
    process.exit(1);
  }
}

/** Modules of src/ that a chunk may share with widget.js: a leaf of a few bytes. */
const SHARED = new Set(["src/fallback.ts"]);
/** The modules of src/ whose code is in a build's output (a type-only import adds none). */
const ownModules = (result) =>
  Object.values(result.metafile.outputs).flatMap((o) =>
    Object.entries(o.inputs)
      .filter(([path, { bytesInOutput }]) => path.startsWith("src/") && bytesInOutput > 0)
      .map(([path]) => path),
  );
const inBundle = new Set(ownModules(js));
const chunkOutputs = outputs.filter(
  ([name]) => !["widget.js", "loader.js", "standalone.js"].includes(name),
);
for (const [name, result] of chunkOutputs) {
  const twice = ownModules(result).filter((path) => inBundle.has(path) && !SHARED.has(path));
  if (twice.length > 0) {
    console.error(`${name} bundles a second copy of: ${twice.join(", ")}`);
    process.exit(1);
  }
}

/** Minified bytes of widget.js by npm package (or "src" for our own code). */
export function sizesByDependency(metafile) {
  const sizes = new Map();
  for (const output of Object.values(metafile.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
      const key = m ? m[1] : "src";
      sizes.set(key, (sizes.get(key) ?? 0) + bytesInOutput);
    }
  }
  return [...sizes].sort((a, b) => b[1] - a[1]);
}

if (process.argv.includes("--sizes")) {
  for (const [name, result] of outputs) {
    console.log(`${name}:`);
    for (const [dep, bytes] of sizesByDependency(result.metafile)) {
      console.log(`  ${dep.padEnd(20)} ${(bytes / 1024).toFixed(1).padStart(7)} KB`);
    }
  }
  const first = [js, loader].reduce(
    (n, r) => n + Object.values(r.metafile.outputs).reduce((m, o) => m + o.bytes, 0),
    0,
  );
  console.log(
    `parsed at first render (loader.js + widget.js): ${(first / 1024).toFixed(1)} KB ` +
      `of ${FIRST_RENDER_BUDGET / 1024} KB`,
  );
}
