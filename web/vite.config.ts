import { defineConfig } from "vite";

// Preact through the automatic JSX runtime: no preset plugin needed.
export default defineConfig({
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", assetsInlineLimit: 0, modulePreload: { polyfill: false } },
  server: { proxy: { "/api": process.env.HUBBUB_URL ?? "http://127.0.0.1:18080" } },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
