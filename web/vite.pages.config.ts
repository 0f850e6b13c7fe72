import { defineConfig } from "vite";

// The pages beside the app, each built on its own after it into the same dist/, so that no page loads
// another's code and the app's first screen stays its one bundle: `vite build --config vite.pages.config.ts
// --mode console` (the partner console, /console/) or `--mode dashboard` (the developer portal, /dashboard/).
export default defineConfig(({ mode }) => {
  if (mode !== "console" && mode !== "dashboard") throw new Error(`--mode console or --mode dashboard, not ${mode}`);
  return {
    oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
    publicDir: false,
    build: {
      outDir: "dist",
      emptyOutDir: false,
      target: "es2022",
      assetsInlineLimit: 0,
      modulePreload: { polyfill: false },
      rollupOptions: { input: { [mode]: `${mode}/index.html` } },
    },
  };
});
