import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const linkify = fileURLToPath(new URL("src/linkify.ts", import.meta.url));
const ucmicro = fileURLToPath(new URL("src/ucmicro.ts", import.meta.url));

export default defineConfig({
  plugins: [
    {
      // as in build.mjs: markdown-it's `linkify-it` is src/linkify.ts (linkify-it itself
      // is the linkify chunk, which imports the package)
      name: "linkify-from-chunk",
      enforce: "pre",
      resolveId(source, importer) {
        if (!/[\\/]node_modules[\\/]markdown-it[\\/]/.test(importer ?? "")) {
          return null;
        }
        // and its `uc.micro` is src/ucmicro.ts (the package stays linkify-it's)
        return source === "linkify-it" ? linkify : source === "uc.micro" ? ucmicro : null;
      },
    },
  ],
  resolve: {
    // as in build.mjs: markdown-it's `entities` is src/entities.ts (the table of names is
    // the entities chunk); markdown-it is inlined so that its import goes through this
    alias: [
      // and its `punycode.js` is src/punycode.ts (the URL parser's host names)
      {
        find: /^punycode\.js$/,
        replacement: fileURLToPath(new URL("src/punycode.ts", import.meta.url)),
      },
      {
        find: /^entities$/,
        replacement: fileURLToPath(new URL("src/entities.ts", import.meta.url)),
      },
    ],
  },
  test: {
    include: ["tests/**/*.test.ts"],
    server: { deps: { inline: ["markdown-it"] } },
    // every chunk loaded, as on a page once they arrived (chunks.test.ts unloads them)
    setupFiles: ["tests/setup.ts"],
    // DOM tests opt in with a `@vitest-environment jsdom` comment.
    environment: "node",
    // A hang guard, not a speed limit: the property tests (fast-check, jsdom) are
    // CPU-bound and take a few seconds each on an idle 2-core machine, several times
    // that on a loaded one, so vitest's default of 5 s failed them under load.
    // Speed is measured in benchmarks/, never asserted here.
    testTimeout: 120_000,
  },
});
