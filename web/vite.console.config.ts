import { defineConfig } from "vite";

// The partner console (/console/): built on its own after the app, into the same dist/, so that neither
// page loads the other's code and the app's first screen is the one bundle it was.
export default defineConfig({
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  publicDir: false,
  build: {
    outDir: "dist",
    emptyOutDir: false,
    target: "es2022",
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    rollupOptions: { input: { console: "console/index.html" } },
  },
});
