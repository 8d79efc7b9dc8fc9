// Builds the front end into ../nbstream/static/: widget.js (one ES module,
// everything bundled) and widget.css. Fails when the bundle would import
// anything at run time: nothing may come from a CDN or the network.
import { rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = join(here, "..", "nbstream", "static");

const common = {
  bundle: true,
  minify: true,
  target: "es2020",
  legalComments: "none",
  logLevel: "info",
  metafile: true,
};

const js = await esbuild.build({
  ...common,
  entryPoints: [join(here, "src", "index.ts")],
  outfile: join(outdir, "widget.js"),
  format: "esm",
  platform: "browser",
});
await esbuild.build({
  ...common,
  entryPoints: [join(here, "src", "widget.css")],
  outfile: join(outdir, "widget.css"),
});
await rm(join(outdir, "widget.js.map"), { force: true });

const external = Object.values(js.metafile.outputs).flatMap((o) =>
  o.imports.filter((i) => i.external).map((i) => i.path),
);
if (external.length > 0) {
  console.error(`widget.js must be self-contained; it imports: ${external.join(", ")}`);
  process.exit(1);
}
