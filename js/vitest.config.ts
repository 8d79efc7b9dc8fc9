import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    // both chunks loaded, as on a page once they arrived (chunks.test.ts unloads them)
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
