import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    // DOM tests opt in with a `@vitest-environment jsdom` comment.
    environment: "node",
  },
});
