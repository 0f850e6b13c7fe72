// Measures the web app's first screen:
//  1. the JavaScript shipped for it: gzipped bytes of the JS index.html loads (and its static imports);
//     target < 150 KB;
//  2. the time from pressing "Log in" to the inbox's first screen rendered, with 1,000 messages in the
//     inbox; target < 1 s.
// Usage (from web/, after `npm run build`): node bench/first-screen.mjs
//   Env: HUBBUB_BIN (default ../target/debug/hubbub) to start a host on a temporary database; or
//   HUBBUB_WEB_BASE + HUBBUB_API_KEY (a platform partner's key) to measure against a running one.
//   Without a host binary, only (1) is measured.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(web, "dist");
const N = Number(process.env.BENCH_MESSAGES ?? 1000);

// 1. JS for the first screen (of the app, or of the partner console: the console's JS, target < 200 KB).
function jsForFirstScreen(page) {
  const html = readFileSync(path.join(dist, page), "utf8");
  const seen = new Set();
  const queue = [...html.matchAll(/<script[^>]+src="([^"]+\.js)"|<link[^>]+rel="modulepreload"[^>]+href="([^"]+\.js)"/g)].map((m) => m[1] ?? m[2]);
  let raw = 0, gz = 0;
  while (queue.length) {
    const url = queue.shift();
    if (seen.has(url)) continue;
    seen.add(url);
    const code = readFileSync(path.join(dist, url.replace(/^\//, "")));
    raw += code.length;
    gz += gzipSync(code, { level: 9 }).length;
    // Static imports of other chunks (dynamic import() chunks are not part of the first screen).
    for (const m of code.toString().matchAll(/(?:^|[;\n}])\s*import\s*(?:[^"'()]*?from\s*)?["'](\.{1,2}\/[^"']+\.js)["']/g)) {
      queue.push(path.posix.join(path.posix.dirname(url), m[1]));
    }
  }
  return { files: [...seen], raw, gz };
}

const js = jsForFirstScreen("index.html");
console.log(`first-screen JS: ${js.files.length} file(s), ${js.raw} bytes, ${js.gz} bytes gzipped (${(js.gz / 1024).toFixed(1)} KB; target < 150 KB) ${js.gz < 150 * 1024 ? "OK" : "OVER"}`);
for (const page of ["console", "dashboard"]) {
  const js = jsForFirstScreen(`${page}/index.html`);
  console.log(`${page} first-screen JS: ${js.files.length} file(s), ${js.raw} bytes, ${js.gz} bytes gzipped (${(js.gz / 1024).toFixed(1)} KB; target < 200 KB) ${js.gz < 200 * 1024 ? "OK" : "OVER"}`);
}

// 2. Login to first screen with N messages.
const freePort = () =>
  new Promise((resolve) => {
    const tryOne = () => {
      const p = 18000 + Math.floor(Math.random() * 1000);
      const s = net.createServer().once("error", tryOne).once("listening", () => s.close(() => resolve(p))).listen(p, "127.0.0.1");
    };
    tryOne();
  });

let base = process.env.HUBBUB_WEB_BASE;
let key = process.env.HUBBUB_API_KEY;
let api = process.env.HUBBUB_API_URL ?? base;
const cleanups = [];
const bin = path.resolve(web, process.env.HUBBUB_BIN ?? "../target/debug/hubbub");
if (!base) {
  if (!existsSync(bin)) {
    console.log(`login to first screen: not measured (no host binary at ${bin})`);
    process.exit(0);
  }
  const tmp = mkdtempSync(path.join(os.tmpdir(), "hubbub-bench-"));
  const port = await freePort();
  const env = {
    ...process.env,
    HUBBUB_DATABASE_URL: `sqlite://${tmp}/h.db?mode=rwc`,
    HUBBUB_DEV: "1",
    HUBBUB_LISTEN: `127.0.0.1:${port}`,
    HUBBUB_PUBLIC_URL: `http://127.0.0.1:${port}`,
    HUBBUB_COMPONENT_CACHE_DIR: `${tmp}/components`,
  };
  const host = spawn(bin, ["serve"], { env, stdio: "ignore" });
  cleanups.push(() => host.kill(), () => rmSync(tmp, { recursive: true, force: true }));
  api = base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (await fetch(base + "/healthz").then((r) => r.ok, () => false)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  key = JSON.parse(execFileSync(bin, ["partner", "create", "--code", "acme", "--name", "Acme Corp", "--platform"], { env }).toString()).api_key;
}

try {
  const call = async (method, p, body) => {
    for (;;) {
      const r = await fetch(api + "/api/v1" + p, { method, headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" }, body: body && JSON.stringify(body) });
      if (r.status === 429) {
        await new Promise((res) => setTimeout(res, 1000 * Number(r.headers.get("retry-after") ?? 1)));
        continue;
      }
      if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
      return r.json();
    }
  };
  const phone = "+1666" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  await call("POST", "/accounts/link", { phone, invite: false });
  const t0 = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < N) {
        const i = next++;
        await call("POST", "/messages", { phone, body: `Message ${i + 1} of ${N}: your order update.` });
      }
    }),
  );
  console.log(`sent ${N} messages in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const require = createRequire(path.join(web, "package.json"));
  const { chromium } = require("playwright-core");
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
  cleanups.unshift(() => browser.close());
  const runs = [];
  for (let run = 0; run < 3; run++) {
    const page = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
    await page.goto(base + "/login");
    await page.getByLabel("Phone number").fill(phone);
    await page.getByRole("button", { name: "Send code" }).click();
    await page.getByLabel("Code").waitFor();
    const sink = await call("GET", `/dev-sink/messages?phone=${encodeURIComponent(phone)}&channel=sms`);
    await page.getByLabel("Code").fill(sink.data[0].text.match(/\b(\d{6})\b/)[1]);
    // Timed inside the page: from the click to the first message painted.
    const ms = await page.evaluate(
      () =>
        new Promise((resolve) => {
          const start = performance.now();
          const done = () => requestAnimationFrame(() => resolve(performance.now() - start));
          new MutationObserver((_, obs) => {
            if (document.querySelector("ol.messages article")) {
              obs.disconnect();
              done();
            }
          }).observe(document.body, { childList: true, subtree: true });
          [...document.querySelectorAll("button")].find((b) => b.textContent?.trim() === "Log in")?.click();
        }),
    );
    const shown = await page.locator("ol.messages article").count();
    runs.push(ms);
    console.log(`run ${run + 1}: login to first screen ${ms.toFixed(0)} ms (${shown} messages rendered of ${N})`);
    await page.context().close();
  }
  const best = Math.min(...runs), median = runs.sort((a, b) => a - b)[1];
  console.log(`login to first screen with ${N} messages: median ${median.toFixed(0)} ms, best ${best.toFixed(0)} ms (target < 1000 ms) ${median < 1000 ? "OK" : "OVER"}`);
} finally {
  for (const c of cleanups) await c();
}
