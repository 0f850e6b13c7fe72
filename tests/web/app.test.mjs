// Browser tests of the web app, each as a person would do it, on Debian's Chromium (never a downloaded
// browser). Run by tests/web/run.sh, which starts the host and gives HUBBUB_WEB_BASE, HUBBUB_API_URL,
// HUBBUB_API_KEY (the platform partner acme), HUBBUB_BIN and HUBBUB_WASM_DIR.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createCipheriv, createDecipheriv, createECDH, createHmac, createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, hkdfSync, randomBytes, verify } from "node:crypto";
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../web/package.json"));
const { chromium } = require("playwright-core");
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
// The http_ece package (Martin Thomson's RFC 8188/8291 code, which the web-push package uses): an
// implementation of Web Push decryption independent of the host's.
const ece = require("http_ece");

const BASE = process.env.HUBBUB_WEB_BASE;
const API = process.env.HUBBUB_API_URL ?? BASE;
const KEY = process.env.HUBBUB_API_KEY;
const BIN = process.env.HUBBUB_BIN ?? "target/debug/hubbub";
const WASM = process.env.HUBBUB_WASM_DIR ?? "target/wasm32-wasip2/release";
const SHOTS = process.env.HUBBUB_SHOTS ?? "target/web-screenshots";
assert.ok(BASE && KEY, "HUBBUB_WEB_BASE and HUBBUB_API_KEY are required (run tests/web/run.sh)");

const PHONE = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
const PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/** A partner API call. */
async function partner(method, p, body, headers = {}) {
  const res = await fetch(API + "/api/v1" + p, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, ...(body && !(body instanceof Uint8Array) ? { "Content-Type": "application/json" } : {}), ...headers },
    body: body instanceof Uint8Array ? body : body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return json;
}

/** Sends `n` hub messages to the user, `batch` at a time, waiting out 429s (Retry-After). */
async function sendMany(n, make, batch = 25) {
  const one = async (i) => {
    for (let attempt = 0; attempt < 20; attempt++) {
      const res = await fetch(API + "/api/v1/messages", {
        method: "POST",
        headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json", "Idempotency-Key": `bulk-${PHONE}-${make(i)}` },
        body: JSON.stringify({ phone: PHONE, body: make(i) }),
      });
      if (res.status === 429 || res.status === 503) {
        const wait = Number(res.headers.get("retry-after") ?? "1");
        await res.text();
        await new Promise((r) => setTimeout(r, Math.max(0.1, Number.isFinite(wait) ? wait : 1) * 1000));
        continue;
      }
      const text = await res.text();
      assert.equal(res.status, 201, `POST /messages: ${res.status} ${text}`);
      return;
    }
    throw new Error("POST /messages: still rate limited after 20 tries");
  };
  for (let i = 0; i < n; i += batch) await Promise.all(Array.from({ length: Math.min(batch, n - i) }, (_, j) => one(i + j)));
}

// The agent side of an encrypted conversation, written from docs/e2e.md with node:crypto only (never
// web/src/shared/e2e.ts), so that the browser's WebCrypto implementation and this one check each other.
const b64u = (b) => Buffer.from(b).toString("base64url");
const unb64u = (s) => Buffer.from(s, "base64url");
const ALG = "x25519-hkdf-sha256-aes-256-gcm";

function agentDevice(uuid) {
  const { privateKey, publicKey } = generateKeyPairSync("x25519");
  return { uuid, privateKey, pub: unb64u(publicKey.export({ format: "jwk" }).x) };
}

function gcmSeal(key, nonce, plain, aad) {
  const c = createCipheriv("aes-256-gcm", key, nonce);
  c.setAAD(Buffer.from(aad, "utf8"));
  return Buffer.concat([c.update(plain), c.final(), c.getAuthTag()]);
}

function gcmOpen(key, nonce, sealed, aad) {
  const d = createDecipheriv("aes-256-gcm", key, nonce);
  d.setAAD(Buffer.from(aad, "utf8"));
  d.setAuthTag(sealed.subarray(sealed.length - 16));
  return Buffer.concat([d.update(sealed.subarray(0, sealed.length - 16)), d.final()]);
}

/** Opens a content-key wrap addressed to `dev`: shared = X25519(p, E); HKDF(salt E‖P, info prefix‖D). */
function agentUnwrap(dev, w, aad) {
  assert.equal(w.device_uuid, dev.uuid);
  const E = unb64u(w.sender_eph_pub);
  assert.equal(E.length, 32);
  const ephPublic = createPublicKey({ key: { kty: "OKP", crv: "X25519", x: b64u(E) }, format: "jwk" });
  const shared = diffieHellman({ privateKey: dev.privateKey, publicKey: ephPublic });
  assert.ok(!shared.every((b) => b === 0), "not a low-order point");
  const wrapKey = Buffer.from(hkdfSync("sha256", shared, Buffer.concat([E, dev.pub]), Buffer.from("hubbub-e2e-v1|wrap|" + dev.uuid, "utf8"), 32));
  const k = gcmOpen(wrapKey, unb64u(w.wrap_nonce), unb64u(w.wrap), aad);
  assert.equal(k.length, 32);
  return k;
}

const convAad = (conv, ref) => `hubbub.conv.${conv}|msg|${ref}|v1`;
const convKeyAad = (conv, v) => `hubbub.conv.${conv}|key|${v}|v1`;

/** Polls `check` until it holds (5 s at most). */
async function waitUntil(check, what) {
  for (let i = 0; i < 50; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(what);
}

/** What this browser keeps for offline use (offline.ts: IndexedDB `hubbub-offline`): the saved answers and
 * how many replies wait in the outbox; `null` while the app has not made the database (nothing is made here). */
async function offlineKept() {
  return page.evaluate(
    () =>
      new Promise((resolve) => {
        const open = indexedDB.open("hubbub-offline");
        open.onupgradeneeded = () => open.transaction.abort();
        open.onerror = () => resolve(null);
        open.onsuccess = () => {
          const db = open.result;
          if (!db.objectStoreNames.contains("saved")) return db.close(), resolve(null);
          const tx = db.transaction(["saved", "outbox"]);
          const saved = tx.objectStore("saved").getAll();
          const outbox = tx.objectStore("outbox").count();
          tx.oncomplete = () => (db.close(), resolve({ saved: saved.result.map((r) => r.json), outbox: outbox.result }));
          tx.onerror = () => (db.close(), resolve(null));
        };
      }),
  );
}

/** Whether this browser has kept an answer with `text` in it for offline use. */
async function keptOffline(text) {
  const kept = await offlineKept();
  return kept !== null && kept.saved.some((json) => JSON.stringify(json).includes(text));
}

async function conversationId(subject) {
  const convs = await partner("GET", "/conversations?limit=200");
  return convs.data.find((c) => c.phone === PHONE && c.subject === subject).conversation_id;
}

async function send(msg) {
  return partner("POST", "/messages", { phone: PHONE, ...msg });
}

async function localBot(code, wasm) {
  await partner("POST", "/bots", { code, name: code === "chat" ? "Acme assistant" : `Acme ${code}`, runtime_mode: "local" });
  await partner("PUT", `/bots/${code}/component`, new Uint8Array(readFileSync(path.join(WASM, `${wasm}.wasm`))), { "Content-Type": "application/wasm" });
}

/** localBot, unless an earlier test (or run against the same host) made the bot already. */
async function ensureBot(code, wasm) {
  const res = await fetch(API + `/api/v1/bots/${code}`, { headers: { Authorization: `Bearer ${KEY}` } });
  await res.text();
  if (res.ok) return;
  assert.equal(res.status, 404, `GET /bots/${code}`);
  await localBot(code, wasm);
}

let browser, context, page;
let signupRef; // the signup flow test 2 completes
const cspViolations = [];
const pageErrors = [];

async function shoot(name, pg = page) {
  for (const [w, h] of [[390, 844], [1280, 800]]) {
    await pg.setViewportSize({ width: w, height: h });
    await pg.waitForTimeout(150);
    await pg.screenshot({ path: path.join(SHOTS, `${name}-${w}x${h}.png`), fullPage: false });
  }
  await pg.setViewportSize({ width: 390, height: 844 });
}

const axeResults = {};
/** axe-core on the current page: no serious or critical violation. */
async function axe(area, pg = page) {
  await pg.evaluate(AXE); // evaluated by the driver, not a page <script>: the CSP stays strict
  const r = await pg.evaluate(async () => {
    // @ts-ignore
    const res = await window.axe.run(document, { resultTypes: ["violations"] });
    return res.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5) }));
  });
  axeResults[area] = r;
  const bad = r.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(bad, [], `${area}: axe violations ${JSON.stringify(bad, null, 1)}`);
}

/** Runs `act` on `pg` with the first GET of `url` held back: its answer is taken from the server at once and
 * handed to the page only once `meanwhile()` is done (or has failed: the caller's assertions say what went
 * wrong; a route handler must never throw). Answers once the held answer was handed over. */
async function withFirstAnswerHeld(pg, url, meanwhile, act) {
  let held = false;
  let handed = false;
  const hold = async (route) => {
    if (held || route.request().method() !== "GET") return route.continue();
    held = true;
    const stale = await route.fetch().catch(() => null);
    try {
      await meanwhile();
    } catch {
      /* the caller's assertions say what went wrong */
    } finally {
      if (stale) await route.fulfill({ response: stale }).catch(() => {});
      else await route.abort().catch(() => {});
      handed = true;
    }
  };
  await pg.route(url, hold);
  try {
    await act();
    for (let i = 0; i < 150 && !handed; i++) await pg.waitForTimeout(100);
    assert.ok(held && handed, "the first answer was held back, then handed over");
  } finally {
    await pg.unroute(url, hold);
  }
}

/** The newest one-time code sent to `phone` (other than `used`, a code already spent: the new SMS may not be there yet). */
async function codeFor(phone, used = null) {
  for (let i = 0; i < 50; i++) {
    const sink = await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(phone)}&channel=sms`);
    const text = sink.data?.[0]?.text ?? "";
    const m = text.match(/\b(\d{6})\b/);
    if (m && m[1] !== used) return m[1];
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("no OTP in the dev sink");
}

async function login(next = "/") {
  await page.goto(BASE + (next === "/" ? "/" : next));
  await page.getByLabel("Phone number").fill(PHONE);
  const before = (await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(PHONE)}&channel=sms`)).data?.[0]?.text;
  await page.getByRole("button", { name: "Send code" }).click();
  await page.getByLabel("Code").waitFor();
  let code;
  for (let i = 0; i < 50; i++) {
    const t = (await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(PHONE)}&channel=sms`)).data?.[0]?.text;
    if (t && t !== before) {
      code = t.match(/\b(\d{6})\b/)[1];
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  code ??= await codeFor(PHONE);
  await page.getByLabel("Code").fill(code);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL((u) => !u.pathname.startsWith("/login"));
}

before(async () => {
  // The partner's account fields, and their values for this user, before the user ever logs in.
  for (const field of [
    { key: "tier", label: "Tier", type: "selection", options: [{ id: "gold", label: "Gold" }] },
    { key: "news", label: "Newsletter", type: "boolean" },
  ]) {
    await partner("POST", "/settings/account-fields", field).catch((e) => {
      if (!/: 409 /.test(e.message)) throw e; // defined by an earlier run against the same host
    });
  }
  await partner("POST", "/accounts/link", { phone: PHONE, invite: false, display_name: "Ana Tester", fields: { tier: "gold", news: true } });
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
  context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  page = await context.newPage();
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) cspViolations.push(m.text());
  });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
});

after(async () => {
  await browser?.close();
});

test("1. log in with the OTP, see every content type, open a newsletter, unread markers clear", async () => {
  await page.goto(BASE + "/");
  await page.waitForURL(/\/login/);
  await shoot("login");
  await axe("login");
  await login();
  const headers = await (await fetch(BASE + "/", { headers: { Accept: "text/html" } })).headers;
  assert.match(headers.get("content-security-policy") ?? "", /script-src 'self'/, "the app is served with the CSP");

  await send({ body: "Your parcel ships tomorrow." });
  await send({ content_type: "image", media_base64: PNG_1PX, media_mimetype: "image/png", media_filename: "dot.png", body: "A photo" });
  await send({ content_type: "document", media_base64: Buffer.from("%PDF-1.4 test").toString("base64"), media_mimetype: "application/pdf", media_filename: "invoice.pdf" });
  await send({ content_type: "audio", media_url: "https://media.example.com/voice.mp3", media_mimetype: "audio/mpeg", media_filename: "voice.mp3" });
  await send({ content_type: "video", media_url: "https://media.example.com/clip.mp4", media_mimetype: "video/mp4", media_filename: "clip.mp4" });
  await send({ content_type: "link", link_url: "https://example.com/track/42", link_label: "Track your parcel", link_title: "Parcel 42", link_description: "Out for delivery" });
  await send({ content_type: "system", body: "Maintenance tonight from 01:00." });
  await send({ content_type: "html", subject: "Our spring newsletter", preview: "Flowers and news", html: "<h1 style='color:#b00'>Spring news</h1><p>Hello from Acme.</p>" });

  // No reload: the inbox polls the newest page.
  await page.getByRole("heading", { name: "Our spring newsletter" }).waitFor({ timeout: 15000 });
  const list = page.locator("ol.messages");
  await list.getByText("Your parcel ships tomorrow.").waitFor();
  // An image's alt text is its caption, never its file name.
  const img = list.locator("img[alt='A photo']");
  await img.waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll("img[alt='A photo']")].every((i) => i.complete && i.naturalWidth > 0));
  assert.ok(await list.getByRole("link", { name: /Download invoice\.pdf/ }).isVisible());
  assert.ok(await list.getByRole("button", { name: "Open invoice.pdf" }).isVisible(), "a PDF opens in place");
  assert.equal(await list.locator("audio[src='https://media.example.com/voice.mp3']").count(), 1);
  assert.equal(await list.locator("video[src='https://media.example.com/clip.mp4']").count(), 1);
  const cta = list.getByRole("link", { name: "Track your parcel" });
  assert.equal(await cta.getAttribute("href"), "https://example.com/track/42");
  assert.equal(await list.locator("article.t-system").count(), 1);
  // The newsletter's list entry shows its subject, not a preview frame.
  assert.equal(await list.locator("iframe").count(), 0);
  assert.ok((await list.locator("article.unread").count()) >= 8);
  await shoot("inbox");
  await axe("inbox");

  // Open the newsletter: the full-screen reader with a sandboxed frame.
  await list.locator("article.t-html").getByRole("link", { name: "Read newsletter" }).click();
  const frame = page.locator(".reader iframe");
  await frame.waitFor();
  assert.equal(await frame.getAttribute("sandbox"), "allow-popups allow-popups-to-escape-sandbox");
  await page.frameLocator(".reader iframe").getByRole("heading", { name: "Spring news" }).waitFor();
  await shoot("newsletter");
  await axe("newsletter");
  await page.getByRole("button", { name: "← Close" }).click();
  await page.getByRole("heading", { name: /^Inbox/ }).waitFor();
  assert.equal(await list.locator("article.t-html.unread").count(), 0, "the newsletter is read once opened");

  // Open the text message: its unread marker disappears, here and on the server.
  const text = list.locator("article.t-text", { hasText: "Your parcel ships tomorrow." });
  assert.equal(await text.evaluate((e) => e.classList.contains("unread")), true);
  await text.getByRole("link").click();
  await page.waitForURL(/\/m\/msg_/);
  await page.getByRole("link", { name: "← Inbox" }).click();
  await page.waitForFunction(() => !document.querySelector("article.t-text.unread"));
  const server = await partner("GET", `/messages?phone=${encodeURIComponent(PHONE)}&limit=50`);
  assert.equal(server.data.find((m) => m.body === "Your parcel ships tomorrow.").state, "read");

  // A deep link to one message (the SMS link shape) opens it.
  const media = server.data.find((m) => m.content_type === "image");
  await page.goto(BASE + `/m/${media.ref}`);
  await page.locator("img[alt='A photo']").waitFor();
});

test("1a. images open full size: zoom, next and previous, download, and back where the user was", async () => {
  const stamp = Date.now().toString(36);
  await send({ content_type: "image", media_base64: PNG_1PX, media_mimetype: "image/png", media_filename: "IMG_0001.png", body: `Harbour at dawn ${stamp}` });
  await send({ content_type: "image", media_base64: PNG_1PX, media_mimetype: "image/png", media_filename: "IMG_0002.png" });
  await page.goto(BASE + "/");
  const list = page.locator("ol.messages");
  const first = list.locator(`img[alt='Harbour at dawn ${stamp}']`);
  await first.waitFor();
  assert.equal(await list.locator("img[alt='IMG_0002.png'], img[alt='IMG_0001.png']").count(), 0, "never a file name as alt text");
  const opener = list.getByRole("button", { name: /^Open the image full size: Image from/ }).first();
  await opener.click();
  await page.getByRole("dialog", { name: /^Image 1 of \d+$/ }).waitFor();
  const viewer = page.getByRole("dialog");
  assert.equal(await viewer.locator("img").getAttribute("alt"), "Image from Acme Corp");
  // Zoom in: the image grows past the screen (and scrolls); zoom out again.
  const width = async () => (await viewer.locator("img").boundingBox()).width;
  const before = await width();
  await viewer.getByRole("button", { name: "Zoom in" }).click();
  await viewer.locator("[data-zoom='1.5']").waitFor();
  assert.ok((await width()) > before, "zoomed in");
  await page.keyboard.press("-");
  await viewer.locator("[data-zoom='1']").waitFor();
  // Next: the older image, with its caption; the download link is the image's own.
  await viewer.getByRole("button", { name: "Next image" }).click();
  await page.getByRole("dialog", { name: /^Image 2 of/ }).waitFor();
  assert.equal(await viewer.locator("img").getAttribute("alt"), `Harbour at dawn ${stamp}`);
  await viewer.getByText(`Harbour at dawn ${stamp}`, { exact: true }).waitFor();
  const download = viewer.getByRole("link", { name: "Download" });
  assert.equal(await download.getAttribute("download"), "IMG_0001.png");
  assert.match(await download.getAttribute("href"), /^\/api\/v1\/content\/msg_/);
  await page.keyboard.press("ArrowLeft");
  await page.getByRole("dialog", { name: /^Image 1 of/ }).waitFor();
  await shoot("viewer");
  await axe("viewer");
  // Escape closes it, and the focus is back on the image the user opened.
  await page.keyboard.press("Escape");
  await viewer.waitFor({ state: "detached" });
  assert.ok(await opener.evaluate((e) => e === document.activeElement), "focus returns to the opener");
});

test("1b. live: a new message appears in the open inbox without polling; reading it in another browser updates this one", async () => {
  await page.goto(BASE + "/");
  await page.locator("ol.messages article").first().waitFor();
  await page.waitForSelector("html[data-live=live]");
  const calls = [];
  const seen = (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith("/api/")) calls.push(`${r.method()} ${u.pathname}`);
  };
  page.on("request", seen);
  const body = `Live news ${Date.now()}`;
  const sent = await send({ body });
  const answered = Date.now();
  // The figure (issue 30: within 1 s) is printed, not asserted: a loaded CI machine must not fail on time.
  await page.getByText(body).waitFor({ timeout: 3000 });
  console.log(`1b: the message was on screen ${Date.now() - answered} ms after the send's 201`);
  assert.deepEqual(calls.filter((c) => c.startsWith("GET /api/v1/me/messages")), [], "no polling of the inbox");
  // The same user reads it in a second browser: the first one's unread marker clears by itself.
  const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
  const other = await browser.newContext();
  try {
    const p2 = await other.newPage();
    await p2.goto(BASE + "/login");
    await p2.evaluate((t) => localStorage.setItem("hubbub.token", t), token);
    await p2.goto(BASE + `/m/${sent.ref}`);
    await p2.getByText(body).waitFor();
    const card = page.locator("ol.messages article", { hasText: body });
    await page.waitForFunction((b) => {
      const a = [...document.querySelectorAll("ol.messages article")].find((x) => x.textContent.includes(b));
      return a && !a.classList.contains("unread");
    }, body, { timeout: 5000 });
    assert.ok(await card.count());
  } finally {
    await other.close();
    page.off("request", seen);
  }
});

test("1f. an inbox page asked for before a message was read on another device does not show it unread again", async () => {
  const body = `Read elsewhere ${Date.now()}`;
  const sent = await send({ body });
  await page.goto(BASE + "/");
  await page.waitForSelector("html[data-live=live]");
  const card = page.locator("ol.messages article", { hasText: body });
  const unreadCard = page.locator("ol.messages article.unread", { hasText: body });
  await unreadCard.waitFor();
  const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
  // Back to the inbox from another screen: it asks for its first page again. That answer is taken from the
  // server at once (the message unread), and handed to the page only after the message was read on
  // another device and its live event has marked it read here.
  const firstPage = (u) => u.pathname === "/api/v1/me/messages" && !u.searchParams.has("cursor") && !u.searchParams.has("q");
  await page.getByRole("link", { name: "Account" }).click();
  await page.getByRole("heading", { name: "Account", level: 1 }).waitFor();
  const readElsewhere = async () => {
    const r = await fetch(API + `/api/v1/me/messages/${sent.ref}/read`, { method: "POST", headers: { Authorization: `Bearer ${token}` } });
    assert.ok(r.ok, `read: ${r.status}`);
    await page.locator("ol.messages article:not(.unread)", { hasText: body }).waitFor({ timeout: 5000 });
  };
  await withFirstAnswerHeld(page, firstPage, readElsewhere, () => page.getByRole("link", { name: /^Inbox/ }).click());
  await page.waitForTimeout(1000); // an answer handed over is on screen well within this
  assert.equal(await card.count(), 1);
  assert.equal(await unreadCard.count(), 0, "read on the other device, it stays read here");
});

test("1g. a message written after the inbox's first page was read and before the stream opened still shows", async () => {
  // A fresh load asks for the inbox's first page and opens the stream at once; a stream opened without a
  // last event id starts after what the log holds then. Here the page's answer is read from the server first,
  // then a message is sent, then the stream opens (its ticket held back until the send), and the page's
  // answer, which lacks the message, is handed over last: the app must fetch the page again.
  const body = `Between the page and the stream ${Date.now()}`;
  const firstPage = (u) => u.pathname === "/api/v1/me/messages" && !u.searchParams.has("cursor") && !u.searchParams.has("q");
  const ticket = (u) => u.pathname === "/api/v1/me/events/ticket";
  let sent;
  const sending = new Promise((r) => (sent = r));
  const holdTicket = async (route) => {
    await sending;
    await route.continue();
  };
  await page.route(ticket, holdTicket);
  try {
    const meanwhile = async () => {
      await send({ body });
      sent();
      await page.waitForSelector("html[data-live=live]", { timeout: 10000 });
    };
    await withFirstAnswerHeld(page, firstPage, meanwhile, () => page.goto(BASE + "/"));
  } finally {
    sent();
    await page.unroute(ticket, holdTicket);
  }
  await page.locator("ol.messages article", { hasText: body }).waitFor({ timeout: 5000 });
});

test("1c. the host is killed and restarted: the app reconnects and shows what arrived meanwhile, once", async () => {
  // A host of this test's own on the same database (and secrets), so it can be killed without the others.
  const port = 19000 + Math.floor(Math.random() * 900);
  const base = `http://127.0.0.1:${port}`;
  const start = () => spawn(BIN, ["serve"], { env: { ...process.env, HUBBUB_LISTEN: `127.0.0.1:${port}`, HUBBUB_PUBLIC_URL: base }, stdio: "ignore" });
  const healthy = async () => {
    for (let i = 0; i < 100; i++) {
      const ok = await fetch(base + "/healthz").then((r) => r.ok, () => false);
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail("the host did not start");
  };
  let host = start();
  const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
  try {
    await healthy();
    const p2 = await ctx.newPage();
    await p2.goto(base + "/login");
    await p2.evaluate((t) => localStorage.setItem("hubbub.token", t), token);
    await p2.goto(base + "/");
    await p2.locator("ol.messages article").first().waitFor();
    await p2.waitForSelector("html[data-live=live]");
    // Killed: the app says it is reconnecting (or offline), quietly.
    const dead = new Promise((r) => host.once("exit", r));
    host.kill("SIGKILL");
    await dead;
    await p2.waitForSelector("html[data-live=reconnecting]");
    // Meanwhile a message arrives through the other host; then this one comes back.
    const stamp = Date.now().toString(36);
    await send({ body: `While you were away ${stamp}` });
    host = start();
    await healthy();
    await p2.waitForSelector("html[data-live=live]", { timeout: 20000 });
    await p2.getByText(`While you were away ${stamp}`).waitFor({ timeout: 5000 });
    // And what comes next arrives live; each message is shown once.
    await send({ body: `Back again ${stamp}` });
    await p2.getByText(`Back again ${stamp}`).waitFor({ timeout: 3000 });
    await p2.waitForTimeout(300);
    assert.equal(await p2.getByText(`While you were away ${stamp}`).count(), 1, "shown once");
    assert.equal(await p2.getByText(`Back again ${stamp}`).count(), 1, "shown once");
  } finally {
    host.kill("SIGKILL");
    await ctx.close();
  }
});

/** A one-page PDF saying `text`, with a correct cross-reference table. */
function onePagePdf(text) {
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
    null,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ];
  const stream = `BT /F1 18 Tf 24 72 Td (${text}) Tj ET`;
  objects[3] = `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`;
  let pdf = "%PDF-1.4\n";
  const offsets = objects.map((body, i) => {
    const at = pdf.length;
    pdf += `${i + 1} 0 obj\n${body}\nendobj\n`;
    return at;
  });
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n` + offsets.map((o) => `${String(o).padStart(10, "0")} 00000 n \n`).join("");
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(pdf, "latin1");
}

test("1d. documents open in place: a PDF in the browser's viewer, a CSV as text, other files download", async () => {
  const stamp = Date.now().toString(36);
  const pdf = onePagePdf(`Invoice ${stamp}`);
  const csv = `item,price\n<b>tea</b>,3.50\ncake ${stamp},4.00\n`;
  await send({ content_type: "document", media_base64: Buffer.from("PK\x03\x04 not really a document").toString("base64"), media_mimetype: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", media_filename: `letter-${stamp}.docx` });
  await send({ content_type: "document", media_base64: Buffer.from(csv).toString("base64"), media_mimetype: "text/csv", media_filename: `prices-${stamp}.csv`, body: "This month's prices" });
  await send({ content_type: "document", media_base64: pdf.toString("base64"), media_mimetype: "application/pdf", media_filename: `invoice-${stamp}.pdf` });
  await page.goto(BASE + "/");
  const list = page.locator("ol.messages");
  const openPdf = list.getByRole("button", { name: `Open invoice-${stamp}.pdf` });
  await openPdf.waitFor();
  // A file the browser cannot show is a download only.
  assert.equal(await list.getByRole("button", { name: `Open letter-${stamp}.docx` }).count(), 0);
  assert.ok(await list.getByRole("link", { name: new RegExp(`^Download letter-${stamp}\\.docx`) }).isVisible());

  // The PDF opens over the app, from a blob typed application/pdf holding exactly the bytes sent.
  await openPdf.click();
  const viewer = page.getByRole("dialog", { name: `Document: invoice-${stamp}.pdf` });
  await viewer.waitFor();
  const frame = viewer.locator(`iframe[title='invoice-${stamp}.pdf']`);
  await frame.waitFor();
  const src = await frame.getAttribute("src");
  assert.match(src, /^blob:/);
  // The app's own CSP keeps even this page from fetching the blob: the frame tells what it holds.
  assert.equal(Number(await frame.getAttribute("data-bytes")), pdf.length, "every byte sent is shown");
  const pdfFrame = page.frames().find((f) => f.url() === src);
  assert.ok(pdfFrame, "the PDF is a frame of its own");
  assert.equal(await pdfFrame.evaluate(() => document.contentType), "application/pdf", "the browser shows it as a PDF");
  assert.equal(await viewer.getByRole("button", { name: "Zoom in" }).count(), 0, "zoom is the PDF viewer's own");
  assert.match(await viewer.getByRole("link", { name: /^Download/ }).getAttribute("download"), new RegExp(`invoice-${stamp}\\.pdf`));
  await page.waitForTimeout(500); // the PDF viewer draws the page
  await shoot("viewer-pdf");
  await page.keyboard.press("Escape");
  await viewer.waitFor({ state: "detached" });
  assert.ok(await openPdf.evaluate((e) => e === document.activeElement), "focus returns to the opener");

  // The CSV opens as text: markup in it is shown, never run or rendered; its caption under it.
  await list.getByRole("button", { name: `Open prices-${stamp}.csv` }).click();
  const text = page.getByRole("dialog", { name: `Document: prices-${stamp}.csv` });
  const pre = text.locator("pre");
  await pre.waitFor();
  assert.equal(await pre.textContent(), csv);
  assert.equal(await pre.locator("b").count(), 0);
  await text.getByText("This month's prices", { exact: true }).waitFor();
  await axe("viewer-text");
  await text.getByRole("button", { name: "✕ Close" }).click();
  await text.waitFor({ state: "detached" });
});

test("2. the signup flow: field errors keep the values, then the summary; the card is read only", async () => {
  await localBot("signup", "signup");
  const invite = await partner("POST", "/bots/signup/flows/signup/invite", { phone: PHONE });
  const ref = invite.flow_session.ref;
  signupRef = ref;
  await page.goto(BASE + "/forms");
  await page.getByRole("link", { name: /sign ?up/i }).first().click();
  await page.getByLabel(/^Name/).waitFor();
  await shoot("form");
  await axe("form");
  // Invalid: an e-mail without a domain, a short phone, no plan, no name.
  await page.getByLabel(/^E-mail/).fill("ana@");
  await page.getByLabel(/^Phone/).fill("555");
  await page.getByLabel("Send me the newsletter").check();
  await page.getByRole("button", { name: "Submit" }).click();
  await page.locator(".field-error").first().waitFor();
  for (const label of [/^Name/, /^E-mail/, /^Phone/, /^Plan/]) {
    const input = page.getByLabel(label);
    assert.equal(await input.getAttribute("aria-invalid"), "true", `${label} is marked invalid`);
    const describedBy = await input.getAttribute("aria-describedby");
    assert.ok(describedBy && (await page.locator(`#${describedBy}`).innerText()).length > 0, `${label} has its message`);
  }
  assert.equal(await page.getByLabel(/^E-mail/).inputValue(), "ana@", "typed values are kept");
  assert.equal(await page.getByLabel(/^Phone/).inputValue(), "555");
  assert.equal(await page.getByLabel("Send me the newsletter").isChecked(), true);
  await shoot("form-errors");
  await axe("form-errors");
  // Valid.
  await page.getByLabel(/^Name/).fill("Ana");
  await page.getByLabel(/^E-mail/).fill("ana@example.com");
  await page.getByLabel(/^Phone/).fill("+15551112222");
  await page.getByLabel(/^Birthday/).fill("1990-02-28");
  await page.getByLabel(/^Plan/).selectOption("pro");
  await page.getByRole("button", { name: "Submit" }).click();
  await page.getByRole("heading", { name: "Completed" }).waitFor();
  const summary = page.locator(".completed .summary");
  assert.match(await summary.innerText(), /ana@example\.com/);
  assert.match(await summary.innerText(), /Pro/);
  await shoot("form-completed");
  // The card in the inbox is read only, and so is the form's link.
  await page.goto(BASE + "/");
  const card = page.locator("article.flow");
  await card.getByText("Completed · read only").waitFor({ timeout: 10000 });
  assert.equal(await card.getByRole("button").count(), 0);
  assert.equal(await card.locator("input, select, textarea").count(), 0);
  await page.goto(BASE + `/forms/${ref}`);
  await page.getByText("This form is completed and read only.").first().waitFor();
  assert.equal(await page.locator("main input, main select, main textarea").count(), 0);
});

test("2b. the shop flow: a button menu, a list menu, a form and a payment step", async () => {
  await localBot("shop", "shop");
  const ref = (await partner("POST", "/bots/shop/flows/order/invite", { phone: PHONE })).flow_session.ref;
  await page.goto(BASE + `/forms/${ref}`);
  await page.getByRole("button", { name: "Coffee" }).click();
  await page.getByRole("button", { name: "Milk" }).click();
  await page.getByText("Milk it is.").waitFor();
  await page.getByRole("button", { name: "Large" }).last().click();
  await page.getByLabel(/^Address/).fill("Main St 1");
  await page.getByRole("button", { name: "Submit" }).click();
  // The server refuses the missing date; the address stays.
  await page.getByLabel(/^Delivery date/).and(page.locator("[aria-invalid=true]")).waitFor();
  assert.equal(await page.getByLabel(/^Address/).inputValue(), "Main St 1");
  await page.getByLabel(/^Delivery date/).fill("2026-12-01");
  await page.getByRole("button", { name: "Submit" }).click();
  await page.locator(".payment .amount").waitFor();
  await shoot("payment");
  await axe("payment");
  // The app never says a payment went through: it sends the user to the checkout (here the host's dev
  // checkout page), and the bot hears the outcome from there; back in the app, its answer appears.
  assert.equal(await page.getByRole("button", { name: /^Pay / }).count(), 0);
  await page.getByRole("link", { name: /^Pay / }).last().click();
  await page.waitForURL(/\/pay\/pay_/);
  await page.getByText("large coffee with milk").waitFor();
  await page.getByRole("button", { name: "Cancel" }).click();
  await page.getByText("The payment was cancelled.").waitFor();
  await page.getByRole("link", { name: "Back to the app" }).click();
  await page.waitForURL(new RegExp(`/forms/${ref}$`));
  await page.getByText("The payment was cancelled. You can try again.").waitFor();
  await page.getByRole("link", { name: /^Pay / }).last().click();
  await page.waitForURL(/\/pay\/pay_/);
  await page.getByRole("button", { name: /^Pay / }).click();
  await page.getByText("Paid. Thank you!").waitFor();
  await page.getByRole("link", { name: "Back to the app" }).click();
  await page.waitForURL(new RegExp(`/forms/${ref}$`));
  await page.getByText(/Paid, thank you!/).waitFor();
  await page.getByRole("heading", { name: "Completed" }).waitFor();
  const payments = await partner("GET", "/payments?bot=shop");
  assert.deepEqual(payments.data.map((p) => p.state), ["succeeded", "canceled"]);
});

test("2c. a bot that fails keeps every answer; submitting again completes the form", async () => {
  await ensureBot("signup", "signup");
  const ref = (await partner("POST", "/bots/signup/flows/signup/invite", { phone: PHONE })).flow_session.ref;
  await page.goto(BASE + `/forms/${ref}`);
  await page.getByLabel(/^Name/).waitFor();
  const typed = { name: "Bea Retry", email: "bea@example.com", phone: "+15553334444", birthday: "1985-07-14" };
  await page.getByLabel(/^Name/).fill(typed.name);
  await page.getByLabel(/^E-mail/).fill(typed.email);
  await page.getByLabel(/^Phone/).fill(typed.phone);
  await page.getByLabel(/^Birthday/).fill(typed.birthday);
  await page.getByLabel(/^Plan/).selectOption("basic");
  await page.getByLabel("Send me the newsletter").check();
  // The bot fails this once (the host answers bot_error with 502).
  const submitUrl = `**/api/v1/me/flows/${encodeURIComponent(ref)}/submit`;
  let sent = null;
  await page.route(
    submitUrl,
    async (route) => {
      sent = route.request().postDataJSON();
      await route.fulfill({ status: 502, contentType: "application/json", body: JSON.stringify({ error: { code: "bot_error", message: "the bot failed" } }) });
    },
    { times: 1 },
  );
  await page.getByRole("button", { name: "Submit" }).click();
  const alert = page.getByRole("alert").filter({ hasText: /bot failed/i });
  await alert.waitFor();
  assert.equal(sent?.screen, "details");
  assert.equal(sent?.values?.email, typed.email, "the answers were sent");
  // Every typed value is still in its field, and nothing is marked invalid.
  assert.equal(await page.getByLabel(/^Name/).inputValue(), typed.name);
  assert.equal(await page.getByLabel(/^E-mail/).inputValue(), typed.email);
  assert.equal(await page.getByLabel(/^Phone/).inputValue(), typed.phone);
  assert.equal(await page.getByLabel(/^Birthday/).inputValue(), typed.birthday);
  assert.equal(await page.getByLabel(/^Plan/).inputValue(), "basic");
  assert.equal(await page.getByLabel("Send me the newsletter").isChecked(), true);
  assert.equal(await page.locator("main [aria-invalid=true]").count(), 0, "no field is marked invalid");
  assert.equal(await page.locator("main .field-error").count(), 0, "no field message");
  assert.equal(await page.getByRole("button", { name: "Submit" }).isEnabled(), true, "the form can be sent again");
  assert.equal(await page.getByRole("heading", { name: "Completed" }).count(), 0);
  await shoot("form-bot-error");
  await axe("form-bot-error");
  // The bot works again: the same answers, one more press, and the summary.
  await page.unroute(submitUrl);
  await page.getByRole("button", { name: "Submit" }).click();
  await page.getByRole("heading", { name: "Completed" }).waitFor();
  const summary = await page.locator(".completed .summary").innerText();
  for (const v of [typed.name, typed.email, typed.phone, typed.birthday, "Basic"]) assert.ok(summary.includes(v), `the summary shows ${v}: ${summary}`);
  assert.equal(await page.getByRole("alert").filter({ hasText: /bot failed/i }).count(), 0, "the alert is gone");
  const state = await partner("GET", `/messages?phone=${encodeURIComponent(PHONE)}&limit=50`);
  assert.equal(state.data.find((m) => m.flow?.ref === ref)?.flow?.state, "completed");
});

test("2d. keyboard only: log in, move through the navigation, open a form and send it, focus always visible", async () => {
  await ensureBot("signup", "signup");
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const ref = (await partner("POST", "/bots/signup/flows/signup/invite", { phone })).flow_session.ref;
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const kp = await ctx.newPage();
  const errors = [];
  kp.on("pageerror", (e) => errors.push(String(e)));
  let clicks = 0;
  await kp.exposeFunction("__countClick", () => clicks++);
  await kp.addInitScript(() => document.addEventListener("mousedown", () => window.__countClick(), true));
  const key = (k) => kp.keyboard.press(k);
  /** The focused element: it matches :focus-visible and shows an outline or a box shadow. */
  const focused = async (what) => {
    const f = await kp.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body) return null;
      const s = getComputedStyle(el);
      return {
        // A date field's calendar button is focused inside the input's closed shadow tree: the input is
        // then only :focus-within, and its own outline is what shows.
        visible: el.matches(":focus-visible") || (el instanceof HTMLInputElement && !el.matches(":focus") && el.matches(":focus-within")),
        outline: s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0,
        shadow: s.boxShadow !== "none" && s.boxShadow !== "",
        tag: el.tagName.toLowerCase(),
        id: el.id,
        href: el.getAttribute("href"),
        text: (el.textContent ?? "").trim().slice(0, 60),
        label: el.labels?.[0]?.textContent?.trim() ?? el.getAttribute("aria-label") ?? "",
      };
    });
    assert.ok(f, `${what}: something has the focus`);
    assert.ok(f.visible, `${what}: the focused ${f.tag} matches :focus-visible ${JSON.stringify(f)}`);
    assert.ok(f.outline || f.shadow, `${what}: the focused ${f.tag} shows an outline or shadow ${JSON.stringify(f)}`);
    return f;
  };
  /** Tab (at most `max` times, Shift+Tab when `back`) until `want(focused)` holds, every stop visibly focused. */
  const tabTo = async (what, want, max = 25, back = false) => {
    for (let i = 0; i < max; i++) {
      await key(back ? "Shift+Tab" : "Tab");
      const f = await focused(`${what} (tab ${i + 1})`);
      if (want(f)) return f;
    }
    throw new Error(`${what}: not reached in ${max} tabs`);
  };
  /** After a navigation the focus moves to the new page's main heading (`tabindex="-1"`, visibly focused). */
  const onHeading = async (what, id) => {
    await kp.waitForFunction((id) => document.activeElement?.id === id, id, { timeout: 5000 }).catch(() => {});
    const f = await kp.evaluate(() => ({ tag: document.activeElement?.tagName.toLowerCase(), id: document.activeElement?.id, tabindex: document.activeElement?.getAttribute("tabindex") }));
    assert.deepEqual(f, { tag: "h1", id, tabindex: "-1" }, `${what}: document.activeElement is the page's heading`);
    return focused(what);
  };
  try {
    await kp.goto(BASE + "/");
    await kp.waitForURL(/\/login/);
    await kp.getByLabel("Phone number").waitFor();
    // The phone field: focused already, or the first Tab stop.
    const start = await kp.evaluate(() => document.activeElement?.id);
    if (start !== "phone") await tabTo("phone field", (f) => f.id === "phone");
    else await focused("phone field");
    await kp.keyboard.type(phone);
    await key("Enter");
    await kp.getByLabel("Code").waitFor();
    await kp.waitForFunction(() => document.activeElement?.id === "code");
    await focused("code field");
    await kp.keyboard.type(await codeFor(phone));
    await key("Enter");
    await kp.waitForURL((u) => !u.pathname.startsWith("/login"));
    await kp.getByRole("heading", { name: /^Inbox/ }).waitFor();
    // Logged in: the focus is on the inbox's heading, the main navigation (and the header's Preferences link)
    // just before it: Shift+Tab to Forms, Enter.
    await onHeading("the inbox's heading", "inbox-h");
    const nav = kp.getByRole("navigation", { name: "Main" });
    await nav.waitFor();
    await tabTo("Forms in the navigation", (f) => f.tag === "a" && f.href === "/forms" && f.text === "Forms", 5, true);
    await key("Enter");
    await kp.waitForURL(/\/forms$/);
    await kp.getByRole("heading", { name: "Forms", level: 1 }).waitFor();
    await onHeading("the Forms page's heading", "forms-h");
    assert.equal(await nav.getByRole("link", { name: "Forms" }).getAttribute("aria-current"), "page");
    // The form's card: the next Tab stop after the heading, Enter.
    await kp.getByRole("link", { name: /sign ?up/i }).waitFor();
    await tabTo("the form's card", (f) => f.tag === "a" && f.href === `/forms/${encodeURIComponent(ref)}`, 1);
    await key("Enter");
    await kp.waitForURL((u) => u.pathname === `/forms/${ref}` || u.pathname === `/forms/${encodeURIComponent(ref)}`);
    await kp.getByLabel(/^Name/).waitFor();
    await onHeading("the form's heading", "flow-h");
    // One field, then Enter: the server's messages, the focus on the first invalid field.
    await tabTo("the Name field", (f) => f.tag === "input" && /^Name/.test(f.label), 1);
    await kp.keyboard.type("Kay Board");
    await key("Enter");
    await kp.locator(".field-error").first().waitFor();
    await kp.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    const invalid = await focused("the first invalid field");
    assert.match(invalid.label, /^E-mail/);
    assert.equal(await kp.getByLabel(/^Name/).inputValue(), "Kay Board");
    // The rest by keyboard: type, Tab, a typed-ahead option, Space for the checkbox, Enter on Submit.
    await kp.keyboard.type("kay@example.com");
    await tabTo("the Phone field", (f) => f.tag === "input" && /^Phone/.test(f.label));
    await kp.keyboard.type("+15550001111");
    await tabTo("the Plan field", (f) => f.tag === "select" && /^Plan/.test(f.label));
    await kp.keyboard.type("Pro");
    assert.equal(await kp.getByLabel(/^Plan/).inputValue(), "pro");
    await tabTo("the newsletter box", (f) => f.tag === "input" && /newsletter/.test(f.label));
    await key("Space");
    assert.equal(await kp.getByLabel("Send me the newsletter").isChecked(), true);
    await tabTo("the Submit button", (f) => f.tag === "button" && f.text === "Submit");
    await key("Enter");
    await kp.getByRole("heading", { name: "Completed" }).waitFor();
    const summary = await kp.locator(".completed .summary").innerText();
    assert.match(summary, /kay@example\.com/);
    assert.match(summary, /Pro/);
    assert.match(summary, /Kay Board/);
    assert.equal(clicks, 0, "no mouse click");
    assert.deepEqual(errors, []);
  } finally {
    await ctx.close();
  }
});

test("2e. a navigation just after the app re-rendered still moves the focus to the new page's heading", async () => {
  await ensureBot("signup", "signup");
  await partner("POST", "/bots/signup/flows/signup/invite", { phone: PHONE });
  await page.goto(BASE + "/forms");
  if (new URL(page.url()).pathname.startsWith("/login")) await login("/forms");
  await page.getByRole("heading", { name: "Forms", level: 1 }).waitFor();
  await page.locator("#main a[href^='/forms/']").first().waitFor();
  // The header's offline note re-renders the app (its effects wait for the paint); the link is followed
  // before they run, so they run with the next address while this page is still on screen.
  const moved = await page.evaluate(async () => {
    const link = document.querySelector("#main a[href^='/forms/']");
    window.dispatchEvent(new Event("offline"));
    await Promise.resolve(); // the re-render runs (a microtask); its effects wait for the next frame
    link.focus();
    link.click();
    return link.getAttribute("href");
  });
  await page.evaluate(() => window.dispatchEvent(new Event("online")));
  await page.waitForURL((u) => u.pathname === moved);
  await page.waitForFunction(() => document.activeElement?.tagName === "H1", null, { timeout: 5000 }).catch(() => {});
  const f = await page.evaluate(() => ({ tag: document.activeElement?.tagName.toLowerCase(), inMain: !!document.getElementById("main")?.contains(document.activeElement) }));
  assert.deepEqual(f, { tag: "h1", inMain: true }, `the new page's heading has the focus after going to ${moved}`);
});

test("2f. the app's preferences: quiet hours, SMS refused and a partner blocked, saved and kept; the blocked partner's send fails", async () => {
  const stamp = Date.now().toString(36);
  // A partner writes to the person: it is listed on the page.
  await send({ body: `Before the preferences ${stamp}` });
  await page.goto(BASE + "/");
  if (new URL(page.url()).pathname.startsWith("/login")) await login("/");
  await page.getByRole("heading", { name: /^Inbox/ }).waitFor();
  // The page's own token and API, to read and restore what the page saves.
  const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
  const prefs = async (method, body) => {
    const res = await fetch(API + "/api/v1/me/preferences", {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    assert.equal(res.status, 200, `${method} /me/preferences: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  const before = await prefs("GET");
  const saveOnPage = async () => {
    const answered = page.waitForResponse((r) => new URL(r.url()).pathname === "/api/v1/me/preferences" && r.request().method() === "PUT");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    const res = await answered;
    assert.equal(res.status(), 200, `PUT /me/preferences: ${res.status()} ${await res.text()}`);
    await page.getByRole("status").filter({ hasText: "Your preferences are saved." }).waitFor();
  };
  try {
    assert.ok(before.partners.acme, `the partner that wrote is in GET /me/preferences: ${JSON.stringify(before)}`);
    assert.equal(before.time_zone, null, "no time zone is stored yet");
    // The header's link opens the page.
    await page.getByRole("link", { name: "Preferences", exact: true }).click();
    await page.waitForURL((u) => u.pathname === "/preferences");
    await page.getByRole("heading", { name: "Preferences", level: 1 }).waitFor();
    assert.equal(await page.getByRole("link", { name: "Preferences", exact: true }).getAttribute("aria-current"), "page");
    const acme = page.getByRole("group", { name: /\(acme\)/ });
    await acme.waitFor();
    assert.equal(await acme.getByRole("checkbox", { name: "Blocked", exact: true }).isChecked(), false);
    // With none stored, the time zone proposed is this browser's own.
    const browserZone = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
    const zone = page.getByLabel("Time zone", { exact: true });
    assert.equal(await zone.inputValue(), browserZone, "the browser's time zone is proposed");
    // Quiet hours 22:00-07:00, no SMS, the partner blocked.
    await page.getByRole("switch", { name: "Quiet hours" }).check();
    await page.getByLabel("Starts at", { exact: true }).fill("22:00");
    await page.getByLabel("Ends at", { exact: true }).fill("07:00");
    await page.getByRole("checkbox", { name: "SMS", exact: true }).uncheck();
    await acme.getByRole("checkbox", { name: "Blocked", exact: true }).check();
    await saveOnPage();
    await shoot("app-preferences");
    await axe("app-preferences");

    // Stored as the page showed it.
    const stored = await prefs("GET");
    assert.equal(stored.time_zone, browserZone);
    assert.deepEqual(stored.quiet_hours, { start: "22:00", end: "07:00" });
    assert.deepEqual(stored.channels, { whatsapp: before.channels.whatsapp, sms: false });
    const { name, ...acmeStored } = stored.partners.acme;
    assert.deepEqual(acmeStored, { muted: before.partners.acme.muted, blocked: true, marketing: before.partners.acme.marketing });
    assert.equal(name, before.partners.acme.name, "the partner's name is kept");
    // And shown again after a reload.
    await page.reload();
    await acme.waitFor();
    assert.equal(await zone.inputValue(), browserZone);
    assert.equal(await page.getByRole("switch", { name: "Quiet hours" }).isChecked(), true);
    assert.equal(await page.getByLabel("Starts at", { exact: true }).inputValue(), "22:00");
    assert.equal(await page.getByLabel("Ends at", { exact: true }).inputValue(), "07:00");
    assert.equal(await page.getByRole("checkbox", { name: "SMS", exact: true }).isChecked(), false);
    assert.equal(await acme.getByRole("checkbox", { name: "Blocked", exact: true }).isChecked(), true);

    // The blocked partner's message fails at once, saying why.
    const refused = await send({ body: `While blocked ${stamp}` });
    assert.equal(refused.state, "failed", JSON.stringify(refused));
    assert.equal(refused.error, "blocked_by_user");

    // Unblocked again on the page: the partner's messages come again.
    await acme.getByRole("checkbox", { name: "Blocked", exact: true }).uncheck();
    await saveOnPage();
    assert.equal((await prefs("GET")).partners.acme.blocked, false);
    const again = await send({ body: `Unblocked ${stamp}` });
    assert.notEqual(again.state, "failed", JSON.stringify(again));
    assert.notEqual(again.error, "blocked_by_user");
  } finally {
    // The phone is shared with the other tests: its preferences as they were (the names are read only).
    const partners = Object.fromEntries(Object.entries(before.partners).map(([code, { muted, blocked, marketing }]) => [code, { muted, blocked, marketing }]));
    await prefs("PUT", { time_zone: before.time_zone, quiet_hours: before.quiet_hours, channels: before.channels, partners });
  }
});

test("3. support: open a conversation, get the agent's reply without reloading, reply", async () => {
  await page.goto(BASE + "/conversations");
  await page.getByRole("link", { name: "New conversation" }).click();
  await page.getByLabel("Partner").selectOption("acme");
  await page.getByLabel("Subject").fill("Late parcel");
  await page.getByLabel("Message").fill("Where is my parcel?");
  await page.getByRole("button", { name: "Start conversation" }).click();
  await page.waitForURL(/\/conversations\/conv_/);
  await page.getByText("Where is my parcel?").waitFor();
  const id = await conversationId("Late parcel");
  await page.waitForSelector("html[data-live=live]");
  const polls = [];
  const seen = (r) => new URL(r.url()).pathname.startsWith("/api/v1/me/conversations/") && r.method() === "GET" && polls.push(r.url());
  page.on("request", seen);
  await partner("POST", `/conversations/${id}/messages`, { body: "It ships tomorrow, sorry for the wait." });
  await page.locator(".bubble.agent", { hasText: "It ships tomorrow" }).waitFor({ timeout: 5000 });
  page.off("request", seen);
  assert.deepEqual(polls, [], "the reply arrives live, not by polling the thread");
  await page.getByLabel("Your reply").fill("Thanks!");
  await page.getByRole("button", { name: "Send", exact: true }).click();
  await page.locator(".bubble.me", { hasText: "Thanks!" }).waitFor();
  const thread = await partner("GET", `/conversations/${id}`);
  assert.deepEqual(thread.messages.map((m) => m.body), ["Where is my parcel?", "It ships tomorrow, sorry for the wait.", "Thanks!"]);
  await shoot("conversation");
  await axe("conversation");
  await page.goto(BASE + "/conversations");
  await page.getByRole("link", { name: "Late parcel" }).waitFor();
  await shoot("conversations");
  await axe("conversations");
});

test("3q. an agent's reply that comes while the thread is still loading is shown all the same", async () => {
  const stamp = Date.now().toString(36);
  await page.goto(BASE + "/conversations/new");
  await page.getByLabel("Partner").selectOption("acme");
  await page.getByLabel("Subject").fill(`Refund ${stamp}`);
  await page.getByLabel("Message").fill("Where is my refund?");
  await page.getByRole("button", { name: "Start conversation" }).click();
  await page.waitForURL(/\/conversations\/conv_/);
  const ref = new URL(page.url()).pathname.split("/").pop();
  const id = await conversationId(`Refund ${stamp}`);
  await page.goto(BASE + "/conversations");
  await page.waitForSelector("html[data-live=live]");
  await page.getByRole("link", { name: `Refund ${stamp}` }).waitFor();
  await page.waitForTimeout(500); // the counts asked as the stream opened have come
  // The thread's first answer is taken from the server before the agent replies, and handed to the page
  // only after the reply's live event has come.
  const reply = async () => {
    // The reply's live event asks for the unread counts again (whether or not the thread takes it).
    const told = page.waitForRequest((r) => new URL(r.url()).pathname === "/api/v1/me/unread", { timeout: 5000 });
    await partner("POST", `/conversations/${id}/messages`, { body: `Refund sent ${stamp}` });
    await told;
  };
  const thread = (u) => u.pathname === `/api/v1/me/conversations/${ref}`;
  await withFirstAnswerHeld(page, thread, reply, async () => {
    await page.getByRole("link", { name: `Refund ${stamp}` }).click();
    await page.locator(".bubble.agent", { hasText: `Refund sent ${stamp}` }).waitFor({ timeout: 5000 });
  });
  await page.getByText("Where is my refund?").waitFor();
});

/** Signs `phone` in to the console from an invitation link. */
/** Signs `phone` in to the console at `url`; with an invitation link, as a new member named `name`. */
async function consoleSignIn(pg, phone, url, name = "Sam Tester") {
  await pg.goto(url);
  await pg.getByLabel("Phone number").fill(phone);
  await pg.getByRole("button", { name: "Send code" }).click();
  await pg.getByLabel("Code").fill(await codeFor(phone));
  if (url.includes("#inv_")) await pg.getByLabel("Your name").fill(name);
  await pg.getByRole("button", { name: "Sign in" }).click();
  await pg.getByRole("heading", { name: "Conversations", level: 1 }).waitFor();
  assert.equal(new URL(pg.url()).hash, "", "the invitation leaves the address bar");
}

/** A new browser with a member of `role` signed in to the console from a fresh invitation. */
async function memberConsole(role) {
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const { link } = await partner("POST", "/members/invitations", { role });
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const pg = await ctx.newPage();
  pg.on("pageerror", (e) => pageErrors.push(String(e)));
  await consoleSignIn(pg, phone, link);
  return { ctx, pg, phone };
}

/** The person signed in on the main page, calling the API as their app does: `(method, path, body?)`
 * answers the JSON, and fails the test on a refusal. */
async function person() {
  const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
  return async (method, path, body) => {
    const r = await fetch(API + "/api/v1" + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: body === undefined ? (method === "POST" ? "{}" : undefined) : JSON.stringify(body),
    });
    assert.ok(r.ok, `${method} ${path}: ${r.status}`);
    return r.json();
  };
}

test("3f. the partner console: an owner joins by invitation and invites an agent, who answers the user live, assigns, notes and closes", async () => {
  const stamp = Date.now().toString(36);
  const OWNER = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const AGENT = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const { link } = await partner("POST", "/members/invitations", { role: "owner" });
  assert.match(link, /\/console\/#inv_/);
  const owners = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const agents = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    // The owner opens the invitation link, signs in, and invites an agent from the Members page.
    const owner = await owners.newPage();
    owner.on("pageerror", (e) => pageErrors.push(String(e)));
    await consoleSignIn(owner, OWNER, link);
    const cookies = await owners.cookies();
    const session = cookies.find((c) => c.name === "hubbub_member");
    assert.ok(session?.httpOnly && session.sameSite === "Strict", "an HttpOnly, SameSite=Strict session cookie");
    assert.equal(await owner.evaluate(() => document.cookie.includes("hubbub_member")), false, "script cannot read it");
    await owner.getByRole("link", { name: "Members" }).click();
    await owner.getByRole("heading", { name: "Members", level: 1 }).waitFor();
    await owner.getByLabel("Role", { exact: true }).selectOption("agent");
    await owner.getByRole("button", { name: "Create invitation" }).click();
    const agentLink = await owner.getByLabel("Invitation link").inputValue();
    assert.match(agentLink, /\/console\/#inv_/);
    await axe("console-members", owner);
    // A canned reply for the agents.
    await owner.getByRole("link", { name: "Desk" }).click();
    await owner.getByRole("heading", { name: "Canned replies", level: 2 }).waitFor();
    await owner.getByLabel("Shortcut").fill(`refund-${stamp}`);
    await owner.getByLabel("Text").fill("Refunded the second charge.");
    await owner.getByRole("button", { name: "Add canned reply" }).click();
    await owner.getByRole("cell", { name: `/refund-${stamp}`, exact: true }).waitFor();
    await axe("console-canned", owner);

    // The user opens a conversation in the app.
    await page.goto(BASE + "/conversations");
    await page.getByRole("link", { name: "New conversation" }).click();
    await page.getByLabel("Partner").selectOption("acme");
    await page.getByLabel("Subject").fill(`Refund ${stamp}`);
    await page.getByLabel("Message").fill("I was charged twice.");
    await page.getByRole("button", { name: "Start conversation" }).click();
    await page.waitForURL(/\/conversations\/conv_/);
    await page.waitForSelector("html[data-live=live]");

    // The agent signs in with their link and finds it among the open, unassigned conversations.
    const agent = await agents.newPage();
    agent.on("pageerror", (e) => pageErrors.push(String(e)));
    await consoleSignIn(agent, AGENT, agentLink);
    assert.equal(await agent.getByRole("link", { name: "Members" }).count(), 0, "an agent has no Members page");
    await agent.getByLabel("Assigned").selectOption("none");
    const row = agent.getByRole("link", { name: new RegExp(`Refund ${stamp}`) });
    await row.waitFor();
    assert.match(await row.textContent(), /1 unread/);
    await row.click();
    await agent.getByRole("heading", { name: new RegExp(`Refund ${stamp}`), level: 2 }).waitFor();
    await agent.getByText("I was charged twice.", { exact: true }).waitFor();
    // The contact panel: the account as this partner knows it, with its custom fields.
    const contact = agent.getByRole("region", { name: "Contact" });
    await contact.getByText("Ana Tester").waitFor();
    await contact.getByText("tier").waitFor();
    assert.ok((await contact.locator("li").count()) > 0, "the hub messages sent to the user are listed");
    assert.equal(await contact.getByText("I was charged twice.").count(), 0, "not the conversation's own messages");
    // The console is told of changes on its event stream: while nothing happens, it asks the server nothing
    // (it used to poll every 3 and 4 seconds).
    const asked = [];
    agent.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith("/api/v1/conversations") && !u.pathname.endsWith("/events")) asked.push(`${r.method()} ${u.pathname}`);
    });
    await agent.waitForTimeout(1000); // the thread's own read receipts settle
    asked.length = 0;
    await agent.waitForTimeout(4500);
    assert.deepEqual(asked, [], "no polling while nothing changes");

    // Reply: the user sees it in the open thread without reloading.
    // The reply: the canned one, picked in the reply box.
    await agent.getByLabel("Insert a canned reply").selectOption({ label: `/refund-${stamp}` });
    assert.equal(await agent.getByLabel(/^Reply to/).inputValue(), "Refunded the second charge.");
    await agent.getByRole("button", { name: "Send reply" }).click();
    await page.locator(".bubble.agent", { hasText: "Refunded the second charge." }).waitFor({ timeout: 5000 });
    // The person sees who answered, by first name (the agent joined as "Sam Tester"), and the partner by its
    // name, never its code; the agent's own thread shows their whole name on the reply.
    assert.equal(await page.locator(".bubble.agent", { hasText: "Refunded the second charge." }).locator(".sender").textContent(), "Sam: ");
    await page.getByText("With Acme Corp ·").waitFor();
    await agent.locator(".from-agent .meta", { hasText: "Sam Tester" }).waitFor();
    // The user answers; the agent's open thread shows it without a reload.
    await page.getByLabel("Your reply").fill("Thank you!");
    await page.getByRole("button", { name: "Send", exact: true }).click();
    await agent.locator(".from-user", { hasText: "Thank you!" }).waitFor({ timeout: 10000 });
    // The list shows each conversation's latest message.
    await agent.getByRole("link", { name: new RegExp(`Refund ${stamp}`) }).getByText("Contact: Thank you!").waitFor({ timeout: 10000 });
    assert.ok(asked.includes(`GET /api/v1/conversations/${new URL(agent.url()).pathname.split("/").pop()}`), `the thread was fetched when told: ${asked}`);
    // A new conversation comes into the agent's list as the user opens it.
    const userToken = await page.evaluate(() => localStorage.getItem("hubbub.token"));
    const second = await fetch(API + "/api/v1/me/conversations", {
      method: "POST",
      headers: { Authorization: `Bearer ${userToken}`, "Content-Type": "application/json" },
      body: JSON.stringify({ partner: "acme", subject: `Address ${stamp}`, body: "New address" }),
    });
    assert.equal(second.status, 201);
    await agent.getByRole("link", { name: new RegExp(`Address ${stamp}`) }).waitFor({ timeout: 10000 });

    // Assign to me, a note the user never sees, then close.
    await agent.getByLabel("Assigned to").selectOption({ label: "Me (Sam Tester)" });
    await agent.getByRole("status").filter({ hasText: "Assigned to" }).waitFor();
    await agent.getByLabel("Add a note").fill(`Chargeback risk ${stamp}`);
    await agent.getByRole("button", { name: "Add note" }).click();
    await agent.locator(".notes li", { hasText: `Chargeback risk ${stamp}` }).filter({ hasText: "Sam Tester" }).waitFor();
    await shoot("console-thread", agent);
    await axe("console-thread", agent);
    await agent.getByRole("button", { name: "Close conversation" }).click();
    await agent.locator(".status-pill", { hasText: "closed" }).waitFor();
    const ids = (await partner("GET", `/conversations?q=${encodeURIComponent("Refund " + stamp)}`)).data;
    assert.equal(ids.length, 1);
    const record = await partner("GET", `/conversations/${ids[0].conversation_id}`);
    assert.equal(record.state, "closed");
    const members = (await partner("GET", "/members")).data;
    assert.equal(record.assignee_id, members.find((m) => m.phone === AGENT).id);
    // The note is nowhere the user can reach.
    const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
    const mine = await (await fetch(API + `/api/v1/me/conversations/${ids[0].ref}`, { headers: { Authorization: `Bearer ${token}` } })).text();
    assert.ok(!mine.includes("Chargeback") && !mine.includes("assignee"), "no note or assignee for the user");
    assert.ok(!mine.includes("Sam Tester") && !mine.includes(AGENT) && !mine.includes('"author"'), "the agent's first name only");
    // The person's list: the partner's name and the latest message.
    await page.goto(BASE + "/conversations");
    const card = page.locator(".card", { hasText: `Refund ${stamp}` });
    await card.getByText("You: Thank you!").waitFor();
    await card.getByText(/^Acme Corp ·/).waitFor();

    // The owner's audit log shows the agent's changes; a cross-site POST with the cookie changes nothing.
    await owner.getByRole("link", { name: "Audit log" }).click();
    await owner.getByRole("cell", { name: AGENT }).first().waitFor();
    assert.ok(await owner.getByText("POST /api/v1/conversations/{id}/notes").count() >= 1);
    await axe("console-audit", owner);
    // The owner's cookie on a request from another site (no same-origin proof): refused, nothing made.
    const forged = await owners.request.post(BASE + "/api/v1/members/invitations", {
      headers: { "Sec-Fetch-Site": "cross-site", Origin: "https://evil.example" },
      data: { role: "owner" },
    });
    assert.equal(forged.status(), 403);
    assert.match((await forged.json()).error.message, /CSRF/);
    const proper = await owners.request.post(BASE + "/api/v1/members/invitations", { headers: { "Sec-Fetch-Site": "same-origin" }, data: { role: "agent" } });
    assert.equal(proper.status(), 201, "the same cookie from the console's own origin works");
    // The refused attempt is in the log too, with its answer.
    await owner.reload();
    const refused = owner.getByRole("row").filter({ hasText: "POST /api/v1/members/invitations" }).filter({ hasText: "403" });
    await refused.first().waitFor();
  } finally {
    await owners.close();
    await agents.close();
  }
});

test("3s. the console's open thread shows the answer it asked for last, not an older one that comes after it", async () => {
  const stamp = Date.now().toString(36);
  const user = await person();
  const conv = await user("POST", "/me/conversations", { partner: "acme", subject: `Order ${stamp}`, body: `First ${stamp}` });
  const { ctx, pg } = await memberConsole("agent");
  try {
    await pg.getByLabel("Assigned").selectOption("none");
    await pg.getByRole("link", { name: new RegExp(`Order ${stamp}`) }).click();
    await pg.locator(".from-user", { hasText: `First ${stamp}` }).waitFor();
    await pg.waitForTimeout(1000); // the thread's read receipt and the list settle
    // The user writes twice. The thread asks again at each message's live event; the first ask's answer
    // (with the second message only) is taken from the server at once and handed to the page only after
    // the answer to the second ask (with the third message) is on screen.
    const writeAgain = async () => {
      await user("POST", `/me/conversations/${conv.ref}/messages`, { body: `Third ${stamp}` });
      await pg.locator(".from-user", { hasText: `Third ${stamp}` }).waitFor({ timeout: 5000 });
      // Whether the third message leaves the page, if only until a later answer brings it back.
      await pg.evaluate((text) => {
        window.__lost = false;
        new MutationObserver(() => {
          if (![...document.querySelectorAll(".from-user")].some((b) => b.textContent.includes(text))) window.__lost = true;
        }).observe(document.body, { childList: true, subtree: true, characterData: true });
      }, `Third ${stamp}`);
    };
    const thread = (u) => u.pathname === `/api/v1/conversations/${conv.conversation_id}`;
    await withFirstAnswerHeld(pg, thread, writeAgain, () => user("POST", `/me/conversations/${conv.ref}/messages`, { body: `Second ${stamp}` }));
    await pg.waitForTimeout(1000); // an answer handed over is on screen well within this
    assert.equal(await pg.evaluate(() => window.__lost), false, "the older answer never replaced the newer, even for a moment");
    assert.equal(await pg.locator(".from-user", { hasText: `Third ${stamp}` }).count(), 1);
    assert.equal(await pg.locator(".from-user", { hasText: `Second ${stamp}` }).count(), 1);
  } finally {
    await ctx.close();
  }
});

test("3t. the console for an owner at 1280 px: the navigation on one line; a conversation opened with Enter takes the focus; a wrong code or a used invitation never says a session ended", async () => {
  const stamp = Date.now().toString(36);
  await (await person())("POST", "/me/conversations", { partner: "acme", subject: `Keys ${stamp}`, body: `Hello ${stamp}` });
  const { ctx, pg } = await memberConsole("owner");
  try {
    // Every page an owner has, on one line.
    const tops = await pg.locator("header.console-top nav a").evaluateAll((links) => links.map((a) => a.getBoundingClientRect().top));
    assert.ok(tops.length >= 14, `an owner's pages: ${tops.length}`);
    assert.equal(new Set(tops).size, 1, `the navigation's links on one line, at tops ${[...new Set(tops)]}`);
    await shoot("console-owner", pg);
    await pg.setViewportSize({ width: 1280, height: 800 });
    // Opened from the keyboard, the thread takes the focus once it is on screen (a screen reader reads it).
    const row = pg.getByRole("link", { name: new RegExp(`Keys ${stamp}`) });
    await row.focus();
    await pg.keyboard.press("Enter");
    await pg.locator(".from-user", { hasText: `Hello ${stamp}` }).waitFor();
    await pg.waitForFunction(() => document.activeElement?.id === "thread-h", null, { timeout: 5000 });
    // A session that did end (signed out everywhere from another tab) is said so.
    const other = await ctx.newPage();
    await other.goto(BASE + "/console/");
    await other.getByRole("button", { name: "Sign out everywhere" }).click();
    await other.getByLabel("Phone number").waitFor();
    await pg.getByRole("link", { name: "Messages" }).click(); // its next call is refused
    await pg.getByText("Your session has ended. Please sign in again.").waitFor({ timeout: 10000 });
  } finally {
    await ctx.close();
  }
  // Someone who never signed in: the sign-in page, a wrong code, then an invitation already used.
  const strangers = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const pg = await strangers.newPage();
    pg.on("pageerror", (e) => pageErrors.push(String(e)));
    const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
    const { link } = await partner("POST", "/members/invitations", { role: "agent" });
    await consoleSignIn(pg, phone, link);
    await pg.getByRole("button", { name: "Sign out", exact: true }).click();
    await pg.getByLabel("Phone number").waitFor();
    // Signing out is not a session that ended: no such words either.
    assert.equal(await pg.getByText("Your session has ended").count(), 0, "signed out by choice");
    const stranger = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const fresh = await stranger.newPage();
      fresh.on("pageerror", (e) => pageErrors.push(String(e)));
      await fresh.goto(BASE + "/console/");
      await fresh.getByLabel("Phone number").fill(phone);
      await fresh.getByRole("button", { name: "Send code" }).click();
      const code = await codeFor(phone);
      await fresh.getByLabel("Code").fill(code === "000000" ? "111111" : "000000");
      await fresh.getByRole("button", { name: "Sign in" }).click();
      await fresh.getByRole("alert").filter({ hasText: /code/i }).waitFor();
      assert.equal(await fresh.getByText("Your session has ended").count(), 0, "a wrong code is not a session that ended");
      // The invitation this member already used, opened again by someone else.
      await fresh.goto(link);
      await fresh.reload();
      const other = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
      await fresh.getByLabel("Phone number").fill(other);
      await fresh.getByRole("button", { name: "Send code" }).click();
      await fresh.getByLabel("Code").fill(await codeFor(other));
      await fresh.getByLabel("Your name").fill("Someone Else");
      await fresh.getByRole("button", { name: "Sign in" }).click();
      await fresh.getByRole("alert").waitFor();
      assert.equal(await fresh.getByText("Your session has ended").count(), 0, "a used invitation is not a session that ended");
      assert.equal(await fresh.getByRole("heading", { name: "Conversations", level: 1 }).count(), 0, "not signed in");
    } finally {
      await stranger.close();
    }
  } finally {
    await strangers.close();
  }
});

test("3u. the console's search stays applied when a live update's list answers after it", async () => {
  const stamp = Date.now().toString(36);
  const user = await person();
  await user("POST", "/me/conversations", { partner: "acme", subject: `Alpha${stamp}`, body: `about alpha` });
  const beta = await user("POST", "/me/conversations", { partner: "acme", subject: `Beta${stamp}`, body: `about beta` });
  const { ctx, pg } = await memberConsole("agent");
  try {
    await pg.getByRole("link", { name: new RegExp(`Beta${stamp}`) }).waitFor();
    await pg.getByLabel("Search").fill(`Alpha${stamp}`);
    // The person writes in Beta: the list asks again, unfiltered (the search is not submitted yet). That
    // answer is held back while the agent presses Enter and the search's own answer is on screen, then
    // handed over.
    const unfiltered = (u) => u.pathname === "/api/v1/conversations" && !u.searchParams.has("q");
    await withFirstAnswerHeld(
      pg,
      unfiltered,
      async () => {
        await pg.getByLabel("Search").press("Enter");
        await pg.waitForFunction((s) => {
          const rows = [...document.querySelectorAll(".conversation-list .rows a")].map((a) => a.textContent);
          return rows.length === 1 && rows[0].includes(`Alpha${s}`);
        }, stamp, { timeout: 5000 });
      },
      () => user("POST", `/me/conversations/${beta.ref}/messages`, { body: `more beta ${stamp}` }),
    );
    await pg.waitForTimeout(1000); // a stale answer handed over would be on screen well within this
    assert.equal(await pg.getByLabel("Search").inputValue(), `Alpha${stamp}`);
    assert.equal(await pg.getByRole("link", { name: new RegExp(`Beta${stamp}`) }).count(), 0, "the search still applies");
    assert.equal(await pg.getByRole("link", { name: new RegExp(`Alpha${stamp}`) }).count(), 1);
  } finally {
    await ctx.close();
  }
});

test("3w. the desk: labels and a macro kept by an admin; two agents online take conversations in turn; one goes offline and hers come to the other, who labels, filters, applies the macro and transfers with a note", async () => {
  const stamp = Date.now().toString(36);
  const label = `billing-${stamp}`;
  const user = await person();
  const admin = await memberConsole("admin");
  const signedIn = async (name) => {
    const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
    const { link } = await partner("POST", "/members/invitations", { role: "agent" });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const pg = await ctx.newPage();
    pg.on("pageerror", (e) => pageErrors.push(String(e)));
    await consoleSignIn(pg, phone, link, name);
    const id = (await partner("GET", "/members")).data.find((m) => m.phone === phone).id;
    return { ctx, pg, id };
  };
  const ana = await signedIn(`Ana ${stamp}`);
  const bea = await signedIn(`Bea ${stamp}`);
  const assignee = async (c) => (await partner("GET", `/conversations/${c.conversation_id}`)).assignee_id;
  try {
    // The admin keeps a label and a macro on the Desk page.
    const a = admin.pg;
    await a.getByRole("link", { name: "Desk" }).click();
    await a.getByRole("heading", { name: "Desk", level: 1 }).waitFor();
    await a.getByLabel("Name", { exact: true }).first().fill(label);
    await a.getByRole("button", { name: "Add label" }).click();
    await a.locator(".labels li", { hasText: label }).waitFor();
    await a.getByLabel("Name", { exact: true }).nth(1).fill(`Refund ${stamp}`);
    await a.getByLabel("Reply with").fill(`Refunded ${stamp}.`);
    await a.getByRole("group", { name: "Add labels" }).getByLabel(label).check();
    await a.getByLabel("Close the conversation").check();
    await a.getByRole("button", { name: "Add macro" }).click();
    await a.getByRole("cell", { name: `Refund ${stamp}`, exact: true }).waitFor();
    assert.match(await a.getByRole("row", { name: new RegExp(`Refund ${stamp}`) }).textContent(), new RegExp(`label ${label} · close`));
    // A label of 1,000 characters is refused, and says why.
    await a.getByLabel("Name", { exact: true }).first().evaluate((el) => el.removeAttribute("maxlength"));
    await a.getByLabel("Name", { exact: true }).first().fill("x".repeat(1000));
    await a.getByRole("button", { name: "Add label" }).click();
    await a.getByRole("alert").filter({ hasText: "a label is 1 to 50" }).waitFor();
    await axe("console-desk", a);

    // Both agents go online in the header; the admin turns on round robin.
    for (const { pg } of [ana, bea]) {
      await pg.getByLabel("Your status").selectOption("online");
      await pg.waitForFunction(() => document.querySelector("#my-status")?.className === "presence-online");
    }
    await a.getByRole("radio", { name: /Round robin/ }).check();
    await a.getByRole("button", { name: "Save assignment" }).click();
    await a.getByRole("status").filter({ hasText: "Assignment saved." }).waitFor();
    // Two new conversations: one each, in turn.
    const first = await user("POST", "/me/conversations", { partner: "acme", subject: `Charge ${stamp}`, body: "Charged twice" });
    const second = await user("POST", "/me/conversations", { partner: "acme", subject: `Parcel ${stamp}`, body: "Where is it?" });
    const given = [await assignee(first), await assignee(second)];
    assert.deepEqual([...given].sort(), [ana.id, bea.id].sort(), `one each: ${given}`);
    const beas = given[0] === bea.id ? first : second;
    const anas = given[0] === bea.id ? second : first;
    await ana.pg.getByLabel("Assigned").selectOption("me");
    await ana.pg.getByRole("link", { name: new RegExp(anas.subject) }).waitFor();
    // Bea goes offline: hers comes to Ana, live, in Ana's list of her own.
    await bea.pg.getByLabel("Your status").selectOption("offline");
    await ana.pg.getByRole("link", { name: new RegExp(beas.subject) }).waitFor({ timeout: 10000 });
    assert.equal(await assignee(beas), ana.id);

    // Ana labels the charge, finds it by the label, and applies the macro: the person sees the reply.
    await ana.pg.getByRole("link", { name: new RegExp(`Charge ${stamp}`) }).click();
    await ana.pg.getByRole("heading", { name: new RegExp(`Charge ${stamp}`), level: 2 }).waitFor();
    await ana.pg.getByRole("group", { name: "Labels" }).getByLabel(label).check();
    await ana.pg.getByRole("status").filter({ hasText: `Label ${label} added.` }).waitFor();
    await ana.pg.getByLabel("Label", { exact: true }).selectOption(label);
    await ana.pg.waitForFunction((s) => {
      const rows = [...document.querySelectorAll(".conversation-list .rows a")].map((x) => x.textContent);
      return rows.length === 1 && rows[0].includes(`Charge ${s}`);
    }, stamp, { timeout: 5000 });
    await ana.pg.getByLabel("Apply a macro").selectOption({ label: `Refund ${stamp}` });
    await ana.pg.getByRole("button", { name: "Apply", exact: true }).click();
    await ana.pg.locator(".status-pill", { hasText: "closed" }).waitFor();
    await ana.pg.locator(".from-agent", { hasText: `Refunded ${stamp}.` }).waitFor();
    const charge = await partner("GET", `/conversations/${first.conversation_id}`);
    assert.deepEqual([charge.state, charge.labels], ["closed", [label]]);
    await page.goto(BASE + `/conversations/${first.ref}`);
    await page.locator(".bubble.agent", { hasText: `Refunded ${stamp}.` }).waitFor();
    assert.equal(await page.locator(".bubble.agent", { hasText: `Refunded ${stamp}.` }).locator(".sender").textContent(), "Ana: ");

    // The parcel goes to Bea with a note saying why.
    await ana.pg.getByLabel("Label", { exact: true }).selectOption("");
    await ana.pg.getByLabel("State").selectOption("");
    await ana.pg.getByRole("link", { name: new RegExp(`Parcel ${stamp}`) }).click();
    await ana.pg.getByRole("heading", { name: new RegExp(`Parcel ${stamp}`), level: 2 }).waitFor();
    await ana.pg.getByLabel("Transfer to").selectOption({ label: `Bea ${stamp} (offline)` });
    await ana.pg.getByLabel("Why").fill("She handles parcels");
    await ana.pg.getByRole("button", { name: "Transfer" }).click();
    await ana.pg.locator(".notes li", { hasText: `Transferred to Bea ${stamp}: She handles parcels` }).waitFor();
    assert.equal(await assignee(second), bea.id);
    await axe("console-desk-thread", ana.pg);
  } finally {
    // Other tests use acme's console by hand.
    await partner("PUT", "/settings/assignment", { mode: "manual" });
    for (const m of [ana, bea]) await partner("PATCH", `/members/${m.id}`, { status: "offline" }).catch(() => undefined);
    await admin.ctx.close();
    await ana.ctx.close();
    await bea.ctx.close();
  }
});

test("3x. typing both ways: the person sees the agent typing in the app, and the agent sees the person typing in the console", async () => {
  const stamp = Date.now().toString(36);
  const user = await person();
  const conv = await user("POST", "/me/conversations", { partner: "acme", subject: `Typing ${stamp}`, body: "Hello?" });
  const { ctx, pg } = await memberConsole("agent");
  try {
    await page.goto(BASE + `/conversations/${conv.ref}`);
    await page.waitForSelector("html[data-live=live]");
    await pg.goto(BASE + `/console/c/${conv.conversation_id}`);
    await pg.getByRole("heading", { name: new RegExp(`Typing ${stamp}`), level: 2 }).waitFor();
    // The agent writes: the person's thread says so, and stops saying it when the reply comes.
    await pg.getByLabel(/^Reply to/).pressSequentially("Let me check", { delay: 20 });
    await page.getByText("Acme Corp is typing…").waitFor({ timeout: 5000 });
    await pg.getByRole("button", { name: "Send reply" }).click();
    await page.locator(".bubble.agent", { hasText: "Let me check" }).waitFor();
    await page.getByText("Acme Corp is typing…").waitFor({ state: "detached", timeout: 5000 });
    // The person writes: the agent's open thread says so.
    await page.getByLabel("Your reply").pressSequentially("Thanks", { delay: 20 });
    await pg.getByText(`${PHONE} is typing…`).waitFor({ timeout: 5000 });
  } finally {
    await ctx.close();
  }
});

test("3y. business hours and an SLA kept on the Desk page: a person writing on a holiday gets the automatic reply, and the console shows the breach live", async () => {
  const stamp = Date.now().toString(36);
  const today = new Date().toISOString().slice(0, 10);
  const admin = await memberConsole("admin");
  const agent = await memberConsole("agent");
  try {
    const a = admin.pg;
    await a.getByRole("link", { name: "Desk" }).click();
    await a.getByRole("heading", { name: "Business hours", level: 2 }).waitFor();
    await a.getByLabel(/Keep business hours/).check();
    await a.getByLabel("Time zone").fill("UTC");
    await a.getByLabel("Saturday").fill("09:00-17:00");
    await a.getByLabel("Sunday").fill("09:00-17:00");
    // Overlapping hours are refused, and say where.
    await a.getByLabel("Monday").fill("09:00-13:00, 12:00-17:00");
    await a.getByRole("button", { name: "Save business hours" }).click();
    await a.getByRole("alert").filter({ hasText: "overlaps" }).waitFor();
    await a.getByLabel("Monday").fill("09:00-12:00, 13:00-17:00");
    await a.getByLabel(/^Holidays/).fill(today);
    await a.getByLabel(/^Automatic reply/).fill(`We are closed today ${stamp}.`);
    await a.getByRole("button", { name: "Save business hours" }).click();
    await a.getByRole("status").filter({ hasText: "Business hours saved." }).waitFor();
    await a.getByText("Your team is out now").waitFor();
    // A first reply within 3 seconds (0.05 minutes), for the test.
    await a.getByLabel(/^First answer within/).fill("0.05");
    await a.getByRole("button", { name: "Save SLAs" }).click();
    await a.getByRole("status").filter({ hasText: "SLAs saved." }).waitFor();
    await axe("console-desk-hours", a);

    // The person writes: the automatic reply says when the team is back.
    const user = await person();
    const conv = await user("POST", "/me/conversations", { partner: "acme", subject: `Holiday ${stamp}`, body: "Are you there?" });
    await page.goto(BASE + `/conversations/${conv.ref}`);
    const reply = page.locator(".bubble.agent", { hasText: `We are closed today ${stamp}.` });
    await reply.waitFor();
    assert.match(await reply.textContent(), /We're back \w+day \d{4}-\d{2}-\d{2} at 09:00 \(UTC\)/);
    // On a holiday the SLA waits for the next opening: the agent sees a reply due hours from now.
    const g = agent.pg;
    await g.getByRole("link", { name: new RegExp(`Holiday ${stamp}`) }).getByText(/Reply due in [\d.]+ h/).waitFor();
    // Business hours off (always in): a new conversation's SLA breaches within seconds, live, and the
    // filter finds it.
    await a.getByLabel(/Keep business hours/).uncheck();
    await a.getByRole("button", { name: "Save business hours" }).click();
    await a.getByText("Your team is out now").waitFor({ state: "detached" });
    await user("POST", "/me/conversations", { partner: "acme", subject: `Late ${stamp}`, body: "Hello?" });
    await g.getByLabel("SLA").selectOption("running");
    const row = g.getByRole("link", { name: new RegExp(`Late ${stamp}`) });
    await row.waitFor();
    await g.getByLabel("SLA").selectOption("breached");
    await row.getByText("SLA breached").waitFor({ timeout: 10000 });
    await row.click();
    await g.locator(".thread .sla.breached").waitFor();
    const hooks = (await partner("GET", "/webhooks/deliveries?event=conversation.sla_breached")).data;
    assert.ok(hooks.length >= 1, "a conversation.sla_breached webhook is kept for the partner");
  } finally {
    // Other tests use acme's console as it was.
    await partner("PUT", "/settings/business-hours", { enabled: false });
    await partner("PUT", "/settings/slas", { first_response_s: null, next_response_s: null });
    await admin.ctx.close();
    await agent.ctx.close();
  }
});

test("3z. ratings: an admin turns them on; an agent closes a conversation and the person rates it in the app; the agent sees it", async () => {
  const stamp = Date.now().toString(36);
  const admin = await memberConsole("admin");
  const agent = await memberConsole("agent");
  try {
    const a = admin.pg;
    await a.getByRole("link", { name: "Desk" }).click();
    await a.getByLabel("Ask people to rate closed conversations").check();
    await a.getByLabel(/^Question/).fill(`How was it ${stamp}? Rate us 1 to 5.`);
    await a.getByRole("button", { name: "Save ratings" }).click();
    await a.getByRole("status").filter({ hasText: "Ratings saved." }).waitFor();

    const user = await person();
    const conv = await user("POST", "/me/conversations", { partner: "acme", subject: `Rate ${stamp}`, body: "Help please" });
    const g = agent.pg;
    await g.goto(BASE + `/console/c/${conv.conversation_id}`);
    await g.getByRole("heading", { name: new RegExp(`Rate ${stamp}`), level: 2 }).waitFor();
    await g.getByLabel(/^Reply to/).fill("All sorted.");
    await g.getByRole("button", { name: "Send reply" }).click();
    await g.locator(".from-agent", { hasText: "All sorted." }).waitFor();
    await g.getByRole("button", { name: "Close conversation" }).click();
    await g.getByText("Rating asked").waitFor();

    // The person sees the question with its scale, picks 4 and says why; the answer replaces the buttons.
    await page.goto(BASE + `/conversations/${conv.ref}`);
    await page.locator(".bubble.agent", { hasText: `How was it ${stamp}?` }).waitFor();
    const form = page.locator("form.rating");
    await form.getByRole("button", { name: "4 out of 5" }).click();
    await form.getByLabel("Comment (optional)").fill("Quick and kind");
    await axe("app-rating");
    await form.getByRole("button", { name: "Send rating" }).click();
    await page.getByText("You rated this conversation 4 out of 5. Thank you!").waitFor();
    // The agent's open thread shows it, live.
    await g.getByText("Rated 4/5: “Quick and kind”").waitFor({ timeout: 10000 });
  } finally {
    await partner("PUT", "/settings/csat", { enabled: false });
    await admin.ctx.close();
    await agent.ctx.close();
  }
});

test("3α. analytics: an admin sees the conversations' figures drawn with Chart.js, by day and agent; a range backwards says why", async () => {
  const admin = await memberConsole("admin");
  const csp = [];
  admin.pg.on("console", (m) => /Content Security Policy|Refused to/i.test(m.text()) && csp.push(m.text()));
  try {
    const a = admin.pg;
    await a.getByRole("link", { name: "Analytics" }).click();
    await a.getByRole("heading", { name: "Analytics", level: 1 }).waitFor();
    // Earlier tests opened, answered, closed and rated conversations today: the totals count them.
    const opened = Number(await a.locator(".totals div", { hasText: "Opened" }).locator("dd").textContent());
    assert.ok(opened >= 3, `opened today: ${opened}`);
    // The charts are drawn (pixels on the canvas), and the agents who answered are listed.
    await a.waitForFunction(() => {
      const c = document.querySelector(".chart canvas");
      if (!c || !c.width) return false;
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) return true;
      return false;
    });
    await a.getByRole("table", { name: "Each agent's figures over the range" }).waitFor();
    await axe("console-analytics", a);
    // A range that ends before it starts: refused, saying why.
    await a.getByLabel("From", { exact: true }).fill("2026-12-31");
    await a.getByLabel("To", { exact: true }).fill("2026-01-01");
    await a.getByRole("button", { name: "Show" }).click();
    await a.getByRole("alert").filter({ hasText: "from is a day on or before to" }).waitFor();
    assert.deepEqual(csp, [], "Chart.js draws within the content security policy");
  } finally {
    await admin.ctx.close();
  }
});

test("3β. analytics: an admin sees the messages' funnel by channel drawn with Chart.js, sets prices and sees the fallbacks' cost, and narrows to a channel", async () => {
  const admin = await memberConsole("admin");
  try {
    const a = admin.pg;
    await a.getByRole("link", { name: "Analytics" }).click();
    await a.getByRole("heading", { name: "Messages", level: 2 }).waitFor();
    // Earlier tests sent messages into the hub today: accepted and sent in the app count them.
    const figures = a.getByRole("definition").locator("xpath=..").filter({ hasText: "Accepted" });
    const accepted = Number(await figures.locator("dd").textContent());
    assert.ok(accepted >= 1, `accepted today: ${accepted}`);
    const byChannel = a.getByRole("table", { name: "By channel: the funnel, fallbacks and cost" });
    const app = byChannel.getByRole("row").filter({ has: a.getByRole("cell", { name: "App", exact: true }) });
    const sentInApp = Number(await app.getByRole("cell").nth(1).textContent());
    assert.ok(sentInApp >= 1, `sent in the app: ${sentInApp}`);
    // The funnel is drawn (pixels on its canvas).
    await a.waitForFunction(() => {
      const c = document.querySelector("canvas[aria-label^='Messages sent, delivered']");
      if (!c || !c.width) return false;
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) return true;
      return false;
    });
    // Prices: a bad currency is refused, saying why; then saved, and the cost is in euros.
    await a.getByText("Prices", { exact: true }).click();
    await a.getByLabel("Currency").fill("E1");
    await a.getByLabel("WhatsApp message").fill("0.05");
    await a.getByLabel("SMS").fill("0.075");
    await a.getByRole("button", { name: "Save prices" }).click();
    await a.getByRole("alert").filter({ hasText: "ISO 4217" }).waitFor();
    await a.getByLabel("Currency").fill("EUR");
    await a.getByRole("button", { name: "Save prices" }).click();
    await a.getByRole("status").filter({ hasText: "Prices saved." }).waitFor();
    const cost = a.getByRole("definition").locator("xpath=..").filter({ hasText: "Cost" }).locator("dd");
    await a.waitForFunction((el) => el.textContent.includes("€"), await cost.elementHandle());
    await axe("console-analytics-messages", a);
    // Narrowed to WhatsApp: the figures are of messages sent there, with no acceptances.
    await a.getByLabel("Messages on").selectOption("whatsapp");
    await a.getByRole("button", { name: "Show" }).click();
    await a.getByText("Sent on WhatsApp").waitFor();
    assert.equal(await byChannel.getByRole("cell", { name: "App", exact: true }).count(), 0);
  } finally {
    await admin.ctx.close();
  }
});

test("3v. the console's webhook log is live and its rows stay with their deliveries; sending again a delivery held behind a failing one says so and sends that one first", async () => {
  const ADMIN = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  let answer = 500;
  const hits = [];
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      hits.push({ id: req.headers["x-service-delivery"], body: JSON.parse(body || "{}"), status: answer });
      res.statusCode = answer;
      res.end();
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  const { link } = await partner("POST", "/members/invitations", { role: "admin" });
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const asUser = await person();
  try {
    const admin = await ctx.newPage();
    admin.on("pageerror", (e) => pageErrors.push(String(e)));
    await consoleSignIn(admin, ADMIN, link);
    await admin.getByRole("link", { name: "Webhooks" }).click();
    await admin.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
    await admin.getByLabel("Endpoint URL").fill(`http://127.0.0.1:${receiver.address().port}/hook`);
    await admin.getByRole("button", { name: "Save endpoint" }).click();
    await admin.getByText(/^Events now go to/).waitFor();
    await admin.getByLabel("Event").fill("message.status");
    await admin.waitForTimeout(500); // the filter's own fetch
    // No polling: with nothing happening, the page asks for nothing.
    const asks = [];
    admin.on("request", (q) => q.url().includes("/api/v1/webhooks/deliveries") && asks.push(q.url()));
    await admin.waitForTimeout(6500);
    assert.equal(asks.length, 0, `the log asked nothing while nothing moved: ${asks}`);
    // A message to the person: its first status is refused by the receiver, and the log shows it live
    // (nothing reloaded, no filter changed).
    const m = await partner("POST", "/messages", { phone: PHONE, body: `hooked ${Date.now()}` });
    const mine = (h) => h.body.message_id === m.message_id;
    for (let i = 0; i < 100 && !hits.some(mine); i++) await admin.waitForTimeout(100);
    const sent = hits.find(mine)?.id;
    assert.ok(sent, "the first status reached the receiver");
    await admin.getByRole("row").filter({ has: admin.getByRole("button", { name: `Send ${sent} again` }) }).filter({ hasText: "HTTP 500" }).waitFor({ timeout: 10000 });
    assert.ok(asks.length > 0, "the log was fetched again because a delivery was tried");
    // Fetched by the person's app and read: two more statuses, which wait for the first (in order).
    await asUser("GET", "/me/messages?limit=5");
    await asUser("POST", `/me/messages/${m.ref}/read`);
    let chain = [];
    for (let i = 0; i < 100 && chain.length < 3; i++) {
      chain = [];
      for (const d of (await partner("GET", "/webhooks/deliveries?event=message.status&limit=20")).data) {
        const detail = await partner("GET", `/webhooks/deliveries/${d.delivery_id}`);
        if (detail.payload.message_id === m.message_id) chain.unshift(detail);
      }
      if (chain.length < 3) await admin.waitForTimeout(100);
    }
    assert.deepEqual(chain.map((d) => d.payload.state), ["sent", "delivered", "read"]);
    const [, delivered, read] = chain.map((d) => d.delivery_id);
    assert.equal(chain[0].delivery_id, sent);
    // The admin looks at what is pending: the two later statuses say what they wait for.
    await admin.getByLabel("State").selectOption("pending");
    await admin.getByRole("row").filter({ hasText: `waits for ${sent}` }).waitFor({ timeout: 10000 });
    await admin.getByRole("row").filter({ hasText: `waits for ${delivered}` }).waitFor({ timeout: 10000 });
    // A focused "Send again" stays with its delivery as new ones come in above it.
    const button = admin.getByRole("button", { name: `Send ${read} again` });
    await button.focus();
    const before = await admin.getByRole("row").count();
    await partner("POST", "/messages", { phone: PHONE, body: `another ${Date.now()}` });
    await admin.waitForFunction((n) => document.querySelectorAll("tr").length > n, before, { timeout: 10000 });
    assert.equal(await admin.evaluate(() => document.activeElement?.textContent), `Send ${read} again`, "the focus stayed with its delivery");
    // Sent again, it says what it waits for, and the earlier one goes now (the receiver still refuses it).
    const triedSent = hits.filter((h) => h.id === sent).length;
    await admin.keyboard.press("Enter");
    await admin.getByText(`${read} waits for ${delivered}`).waitFor();
    for (let i = 0; i < 100 && hits.filter((h) => h.id === sent).length === triedSent; i++) await admin.waitForTimeout(100);
    assert.equal(hits.filter((h) => h.id === sent).length, triedSent + 1, "the earlier status was sent again at once, once");
    assert.equal(hits.filter((h) => h.id === delivered || h.id === read).length, 0, "nothing overtakes it");
    // The receiver is fixed: sent again, the three go in order, and the log shows them delivered, live.
    answer = 200;
    await admin.getByRole("button", { name: `Send ${read} again` }).click();
    for (let i = 0; i < 100 && !hits.some((h) => h.id === read); i++) await admin.waitForTimeout(100);
    const order = hits.filter((h) => [sent, delivered, read].includes(h.id) && h.status === 200).map((h) => h.id);
    assert.deepEqual(order, [sent, delivered, read]);
    await admin.getByLabel("State").selectOption("succeeded");
    await admin.getByRole("row").filter({ has: admin.getByRole("button", { name: `Send ${read} again` }) }).filter({ hasText: "succeeded" }).waitFor({ timeout: 10000 });
    await shoot("console-webhooks-live", admin);
    await axe("console-webhooks-live", admin);
  } finally {
    await partner("PUT", "/settings/webhook", { webhook_url: null }).catch(() => undefined);
    await ctx.close();
    receiver.close();
  }
});

test("3g. the developer portal: sign up, the API key once, send a test from the catalog, see it, test the webhook", async () => {
  const stamp = Date.now().toString(36);
  const DEV = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const code = `dash_${stamp}`;
  const t = await partner("POST", "/templates", { code, channel: "inapp", category: "utility", body: "Hello {{name}}, from the dashboard" });
  await partner("POST", `/templates/${t.template_id}/submit`, {});
  const hits = [];
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      hits.push({ headers: req.headers, body });
      res.end("ok");
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const dev = await ctx.newPage();
    dev.on("pageerror", (e) => pageErrors.push(String(e)));
    await dev.goto(BASE + "/dashboard/");
    await dev.getByRole("heading", { name: "Hubbub for developers", level: 1 }).waitFor();
    await axe("dashboard-sign-in", dev);
    await dev.getByRole("button", { name: "Sign up" }).click();
    await dev.getByLabel("Phone number").fill(DEV);
    await dev.getByLabel("E-mail (optional)").fill("dev@example.com");
    await dev.getByRole("button", { name: "Send code" }).click();
    const signUpCode = await codeFor(DEV);
    await dev.getByLabel("Code").fill(signUpCode);
    await dev.getByRole("button", { name: "Verify and get my API key" }).click();
    await dev.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
    const apiKey = await dev.getByRole("textbox", { name: "API key" }).inputValue();
    assert.match(apiKey, /^sk_dev_/);
    assert.equal(await dev.evaluate((k) => JSON.stringify({ ...localStorage, ...sessionStorage }).includes(k), apiKey), false, "the API key is kept nowhere");
    // A first request with the new key, ready to paste: it works as written.
    await dev.getByRole("form", { name: `Template ${code}` }).waitFor(); // the catalog it takes a template from
    const example = await dev.getByLabel("An example request with your API key").textContent();
    assert.ok(example.includes(`Bearer ${apiKey}`), example);
    const url = example.match(/^curl (\S+)/)[1];
    const body = JSON.parse(example.match(/-d '(.*)'$/s)[1]);
    assert.equal(body.phone, DEV);
    const tried = await fetch(url.replace(BASE, API), { method: "POST", headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" }, body: JSON.stringify(body) });
    assert.ok(tried.ok, `the example request: ${tried.status} ${await tried.text()}`);
    // A reload right after signing up stays signed in (the tab keeps the sign-up's session key, never the
    // API key, which is not shown again).
    await dev.reload();
    await dev.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
    assert.equal(await dev.getByRole("textbox", { name: "API key" }).count(), 0, "the API key is shown once");

    // Send a test of the approved template to my phone; it shows in my messages and reaches the phone.
    const form = dev.getByRole("form", { name: `Template ${code}` });
    await form.getByLabel("name").fill("Ana");
    await form.getByRole("button", { name: "Send a test to my phone" }).click();
    await form.getByRole("status").filter({ hasText: `Sent to ${DEV}` }).waitFor();
    await dev.getByRole("cell", { name: "Hello Ana, from the dashboard" }).waitFor();
    await dev.getByText(/2 of \d+/).waitFor(); // the example request and the test
    let sunk;
    for (let i = 0; i < 100 && !sunk; i++) {
      sunk = (await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(DEV)}`)).data.find((m) => m.text.includes("Hello Ana"));
      if (!sunk) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(sunk, "the test reached the developer's phone (dev sink)");

    // The webhook: saved with its secret shown once, and a test event to a receiver this test runs.
    const { port } = receiver.address();
    await dev.getByLabel("Endpoint URL").fill(`http://127.0.0.1:${port}/hook`);
    await dev.getByRole("button", { name: "Save webhook" }).click();
    const secret = await dev.getByLabel("Webhook signing secret").inputValue();
    assert.ok(secret.length >= 16);
    await dev.getByRole("button", { name: "Send a test event" }).click();
    await dev.getByText("Test event delivered (HTTP 200).").waitFor();
    assert.equal(hits.length, 1);
    assert.equal(JSON.parse(hits[0].body).test, true);
    await shoot("dashboard", dev);
    await axe("dashboard", dev);

    // Signing in again gives a 12-hour session key for this tab; a reload keeps it; sign out revokes it.
    await dev.getByRole("button", { name: "Sign out" }).click();
    await dev.getByRole("button", { name: "Sign in" }).first().click();
    await dev.getByLabel("Phone number").fill(DEV);
    await dev.getByRole("button", { name: "Send code" }).click();
    await dev.getByLabel("Code").fill(await codeFor(DEV, signUpCode));
    await dev.getByRole("button", { name: "Sign in" }).last().click();
    await dev.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
    assert.equal(await dev.getByRole("textbox", { name: "API key" }).count(), 0, "the API key is never shown again");
    await dev.reload();
    await dev.getByRole("heading", { name: "Dashboard", level: 1 }).waitFor();
    const session = await dev.evaluate(() => sessionStorage.getItem("hubbub.dev.session"));
    assert.match(session, /^sk_dev_/);
    await dev.getByRole("cell", { name: "session" }).first().waitFor();
    await dev.getByRole("button", { name: "Sign out" }).click();
    await dev.getByRole("button", { name: "Send code" }).waitFor();
    const after = await fetch(API + "/api/v1/dev/usage", { headers: { Authorization: `Bearer ${session}` } });
    assert.equal(after.status, 401, "the session key is revoked on sign out");
  } finally {
    await ctx.close();
    receiver.close();
  }
});

test("3h. the console's webhooks: a failed delivery, its request body, and sending it again to a receiver the test runs", async () => {
  const ADMIN = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  let answer = 500;
  const hits = [];
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      hits.push({ id: req.headers["x-service-delivery"], body });
      res.statusCode = answer;
      res.end();
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  const { link } = await partner("POST", "/members/invitations", { role: "admin" });
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const admin = await ctx.newPage();
    admin.on("pageerror", (e) => pageErrors.push(String(e)));
    await consoleSignIn(admin, ADMIN, link);
    assert.equal(await admin.getByRole("link", { name: "Members" }).count(), 0, "an admin does not manage members");
    await admin.getByRole("link", { name: "Webhooks" }).click();
    await admin.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
    await admin.getByLabel("Endpoint URL").fill(`http://127.0.0.1:${receiver.address().port}/hook`);
    await admin.getByRole("button", { name: "Save endpoint" }).click();
    await admin.getByText(/^Events now go to/).waitFor();
    // An event the receiver refuses.
    const stamp = Date.now().toString(36);
    const t = await partner("POST", "/templates", { code: `hook_${stamp}`, channel: "inapp", category: "utility", body: "x" });
    await partner("POST", `/templates/${t.template_id}/submit`, {});
    await admin.getByLabel("State").selectOption("failed");
    for (let i = 0; i < 100 && !hits.length; i++) await admin.waitForTimeout(100);
    const id = hits[0]?.id;
    assert.ok(id, "the receiver was called");
    const row = admin.getByRole("row").filter({ has: admin.getByRole("button", { name: `Send ${id} again` }) });
    await row.filter({ hasText: "HTTP 500" }).waitFor({ timeout: 10000 });
    // Its request body, as it was signed and sent.
    await row.getByRole("button", { name: /^Details of/ }).click();
    const detail = admin.getByRole("region", { name: /^Delivery / });
    await detail.waitFor();
    assert.equal(JSON.parse(await detail.locator("pre").textContent()).event, JSON.parse(hits[0].body).event);
    // The receiver is fixed; the delivery is sent again, with the same id, and succeeds.
    answer = 200;
    await admin.getByRole("button", { name: `Send ${id} again` }).click();
    await admin.getByText(`${id} sent again.`).waitFor();
    // Its own row, saying succeeded (the filter also lists earlier tests' deliveries that succeeded, and until
    // the page has drawn the new filter its row from the failed list is still there).
    await admin.getByLabel("State").selectOption("succeeded");
    await admin.getByRole("row").filter({ has: admin.getByRole("button", { name: `Send ${id} again` }) }).filter({ hasText: "succeeded" }).waitFor({ timeout: 10000 });
    assert.ok(hits.filter((h) => h.id === id).length >= 2, "the same delivery, sent again");
    await admin.getByText(/% of the last \d+ deliveries succeeded/).waitFor();
    await shoot("console-webhooks", admin);
    await axe("console-webhooks", admin);
    // An agent has no such page, and the API refuses the agent (403).
    const agentLink = (await partner("POST", "/members/invitations", { role: "agent" })).link;
    const agents = await browser.newContext();
    try {
      const agent = await agents.newPage();
      await consoleSignIn(agent, "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6)), agentLink);
      assert.equal(await agent.getByRole("link", { name: "Webhooks" }).count(), 0);
      const refused = await agent.evaluate(async () => (await fetch("/api/v1/webhooks/deliveries")).status);
      assert.equal(refused, 403);
    } finally {
      await agents.close();
    }
  } finally {
    await partner("PUT", "/settings/webhook", { webhook_url: null }).catch(() => undefined);
    await ctx.close();
    receiver.close();
  }
});

test("3i. the console's bots: create one (secrets once), rotate its token, upload a broken component and read why, then a good one", async () => {
  const code = `b${Date.now().toString(36)}`;
  const { ctx, pg: admin } = await memberConsole("admin");
  try {
    await admin.getByRole("link", { name: "Bots" }).click();
    await admin.getByRole("heading", { name: "Bots", level: 1 }).waitFor();
    await admin.getByLabel(/^Code/).fill(code);
    await admin.getByLabel("Name", { exact: true }).fill("Order helper");
    await admin.getByRole("button", { name: "Create bot" }).click();
    const first = await admin.getByRole("textbox", { name: "Bot token", exact: true }).inputValue();
    assert.match(first, /^bot_/);
    assert.match(await admin.getByRole("textbox", { name: "Webhook secret" }).inputValue(), /^whsec_/);
    const card = admin.getByRole("article", { name: new RegExp(`Order helper`) });
    await card.waitFor();
    // Rotate: a new token once; the old one stops working.
    await card.getByRole("button", { name: `Rotate the token of ${code}` }).click();
    const second = await card.getByRole("textbox", { name: "New bot token" }).inputValue();
    assert.match(second, /^bot_/);
    assert.notEqual(second, first);
    const asBot = (t) => fetch(API + `/api/v1/bots/${code}`, { headers: { Authorization: `Bearer ${t}` } }).then((r) => r.status);
    assert.equal(await asBot(first), 401);
    assert.equal(await asBot(second), 200);
    // A broken component: refused, and the page says why.
    await card.getByLabel(/^Component/).setInputFiles({ name: "broken.wasm", mimeType: "application/wasm", buffer: Buffer.from("not a component") });
    await card.getByRole("button", { name: "Upload component" }).click();
    const why = card.getByRole("alert");
    await why.waitFor();
    assert.match(await why.textContent(), /The component was not taken:.*\S/s);
    await shoot("console-bots-error", admin);
    // A good one: its flows are listed.
    await card.getByLabel(/^Component/).setInputFiles(path.join(WASM, "signup.wasm"));
    await card.getByRole("button", { name: "Upload component" }).click();
    await card.getByRole("status").filter({ hasText: "is the bot's component now" }).waitFor({ timeout: 60000 });
    await card.getByText(/\(signup\)/).waitFor();
    await axe("console-bots", admin);
    // API keys: a new one shown once and working; revoked, it stops.
    await admin.getByRole("link", { name: "API keys" }).click();
    await admin.getByLabel("What the new key is for").fill(`deploy ${code}`);
    await admin.getByRole("button", { name: "Create key" }).click();
    const apiKey = await admin.getByRole("textbox", { name: "API key" }).inputValue();
    assert.match(apiKey, /^sk_/);
    const asKey = (p = "/api-keys") => fetch(API + "/api/v1" + p, { headers: { Authorization: `Bearer ${apiKey}` } }).then((r) => r.status);
    assert.equal(await asKey(), 200);
    // It acts as its maker, an admin: the table says so, and the audit log (owners only) is refused to it.
    await admin.getByRole("row").filter({ hasText: `deploy ${code}` }).getByRole("cell", { name: "admin", exact: true }).waitFor();
    assert.equal(await asKey("/audit-log"), 403);
    await admin.getByRole("button", { name: `Revoke deploy ${code}` }).click();
    await admin.getByRole("button", { name: `Revoke deploy ${code}` }).waitFor({ state: "detached" });
    assert.equal(await asKey(), 401);
    await axe("console-keys", admin);
  } finally {
    await ctx.close();
  }
});

test("3j. the console's messages and templates: filter the log, read a message's attempts and states, cancel a scheduled one; save a template and submit it", async () => {
  const stamp = Date.now().toString(36);
  const sent = await send({ phone: PHONE, body: `Your parcel ${stamp} left the depot` });
  const { ctx, pg: admin } = await memberConsole("admin");
  try {
    // The log, by phone and words: the message, then its attempts.
    await admin.getByRole("link", { name: "Messages" }).click();
    await admin.getByRole("heading", { name: "Messages", level: 1 }).waitFor();
    await admin.getByLabel("Phone").fill(PHONE);
    await admin.getByLabel("Words").fill(stamp);
    await admin.getByRole("button", { name: "Filter" }).click();
    const row = admin.getByRole("row", { name: new RegExp(`parcel ${stamp}`) });
    // The unfiltered log shows the message too: wait for the filtered answer, one row.
    await waitUntil(async () => (await admin.locator("tbody tr").count()) === 1, "only the message with these words");
    await row.waitFor();
    // Once it has been tried, the attempt is there with its channel and state.
    let attempt;
    await waitUntil(async () => {
      attempt = (await partner("GET", `/messages/${sent.message_id}?include=attempts`)).attempts?.[0];
      return !!attempt;
    }, "a delivery attempt");
    await row.getByRole("button", { name: `History of message ${sent.message_id}` }).click();
    const detail = admin.getByRole("article", { name: `Message ${sent.message_id} to ${PHONE}` });
    await detail.waitFor();
    const tried = detail.getByRole("row").filter({ hasText: attempt.channel }).first();
    await tried.getByRole("cell", { name: attempt.kind, exact: true }).waitFor();
    // Every state it has been in: what the API's history says, in that order (from queued).
    const events = (await partner("GET", `/messages/${sent.message_id}?include=events`)).events;
    assert.ok(events.length >= 2 && events[0].state === "queued", "queued, then tried");
    const states = detail.getByRole("table", { name: `States of message ${sent.message_id}` });
    const cells = await states.locator("tbody tr td:nth-child(2)").allTextContents();
    assert.deepEqual(cells.slice(0, events.length), events.map((e) => e.state));
    await axe("console-messages", admin);
    // A message scheduled for tomorrow: listed as such, then canceled from the log before it goes.
    const later = await send({ phone: PHONE, body: `Reminder ${stamp}`, send_at: new Date(Date.now() + 86_400_000).toISOString() });
    assert.equal(later.state, "scheduled");
    await admin.getByLabel("State", { exact: true }).selectOption("scheduled");
    await admin.getByLabel("Words").fill(`Reminder ${stamp}`);
    await admin.getByRole("button", { name: "Filter" }).click();
    const scheduled = admin.getByRole("row", { name: new RegExp(`Reminder ${stamp}`) });
    await scheduled.getByText(/^scheduled for /).waitFor();
    await scheduled.getByRole("button", { name: `Cancel message ${later.message_id}` }).click();
    await admin.getByRole("status").filter({ hasText: `Message ${later.message_id} is canceled` }).waitFor();
    assert.equal((await partner("GET", `/messages/${later.message_id}`)).state, "canceled");
    // The scheduled list is fetched again: the canceled message has left it.
    await scheduled.waitFor({ state: "detached" });
    // A template: saved as a draft, then submitted for review.
    await admin.getByRole("link", { name: "Templates" }).click();
    await admin.getByRole("heading", { name: "Templates", level: 1 }).waitFor();
    await admin.getByLabel("Code").fill(`shipped_${stamp}`);
    await admin.getByLabel("Text").fill("Hi {{name}}, your order has shipped.");
    await admin.getByRole("button", { name: "Save draft" }).click();
    const template = admin.getByRole("row", { name: new RegExp(`shipped_${stamp}`) });
    await template.getByText("draft", { exact: true }).waitFor();
    await template.getByRole("button", { name: `Submit shipped_${stamp}` }).click();
    await admin.getByRole("status").filter({ hasText: `shipped_${stamp} submitted for review.` }).waitFor();
    const listed = (await partner("GET", "/templates?limit=100")).data.find((t) => t.code === `shipped_${stamp}`);
    assert.notEqual(listed.status, "draft", "submitted");
    await template.getByText(listed.status, { exact: true }).waitFor();
    await axe("console-templates", admin);
  } finally {
    await ctx.close();
  }
});

test("3k. the console's broadcasts, accounts and bots: a preview with its audience then progress, one scheduled then canceled; custom fields and a link; invite to a flow, its session beside the conversation", async () => {
  const OTHER = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const stamp = Date.now().toString(36);
  const key = `tier_${stamp}`;
  await ensureBot("signup", "signup");
  const { ctx, pg: admin } = await memberConsole("admin");
  try {

    // Accounts: a required selection field; a link without it is refused on that field, with it linked.
    await admin.getByRole("link", { name: "Accounts" }).click();
    await admin.getByRole("heading", { name: "Accounts", level: 1 }).waitFor();
    await admin.getByLabel(/^Key/).fill(key);
    await admin.getByLabel("Label", { exact: true }).fill("Tier");
    await admin.getByLabel("Type", { exact: true }).selectOption("selection");
    await admin.getByLabel("Choices, one per line").fill("Gold\nSilver");
    await admin.getByLabel("Required when linking").check();
    await admin.getByRole("button", { name: "Add field" }).click();
    const field = admin.getByRole("row", { name: new RegExp(key) });
    await field.getByRole("cell", { name: "Gold, Silver" }).waitFor();
    const linkForm = admin.getByRole("form", { name: "Link a user" });
    await linkForm.getByLabel("Phone", { exact: true }).fill(OTHER);
    await linkForm.getByLabel("Send an SMS inviting them").uncheck();
    await linkForm.getByRole("button", { name: "Link" }).click();
    await linkForm.locator("p.error").first().waitFor();
    assert.equal(await linkForm.getByLabel("Tier (required)").getAttribute("aria-invalid"), "true");
    await linkForm.getByLabel("Tier (required)").selectOption("gold");
    await linkForm.getByRole("button", { name: "Link" }).click();
    await linkForm.getByRole("status").filter({ hasText: `${OTHER} is linked` }).waitFor();
    assert.equal((await partner("GET", `/accounts/${encodeURIComponent(OTHER)}`)).fields[key], "gold");
    await admin.getByLabel("Find a linked user by phone").fill(OTHER);
    await admin.getByRole("button", { name: "Find" }).click();
    await admin.getByRole("definition").filter({ hasText: "gold" }).waitFor();
    await axe("console-accounts", admin);
    // The field becomes optional, then goes (the shared partner's later links need no tier).
    await field.getByRole("button", { name: `Make optional ${key}` }).click();
    await field.getByRole("cell", { name: "no", exact: true }).waitFor();
    admin.once("dialog", (d) => d.accept());
    await field.getByRole("button", { name: `Delete ${key}` }).click();
    await field.waitFor({ state: "detached" });

    // Broadcasts: the preview and the audience count the API gives, a confirmation, then the progress.
    const audience = (await partner("GET", "/broadcasts/audience")).count;
    assert.ok(audience >= 1, "the test user is linked and claimed");
    await admin.getByRole("link", { name: "Broadcasts" }).click();
    await admin.getByRole("heading", { name: "Broadcasts", level: 1 }).waitFor();
    await admin.getByLabel("Text").fill(`Opening hours change ${stamp}`);
    await admin.getByRole("figure", { name: /Preview/ }).getByText(`Opening hours change ${stamp}`).waitFor();
    const reach = `${audience} ${audience === 1 ? "user" : "users"}`;
    await admin.getByText(`${reach} now`).waitFor();
    await admin.getByRole("button", { name: "Review and send" }).click();
    await admin.getByRole("button", { name: `Send to ${reach}` }).click();
    const progress = admin.getByRole("article", { name: /^Broadcast \d+$/ });
    await progress.getByText(/^completed/).waitFor({ timeout: 20000 });
    const id = Number((await progress.getByRole("heading", { level: 2 }).textContent()).replace(/\D/g, ""));
    assert.equal((await partner("GET", `/broadcasts/${id}`)).total, audience);
    // Its messages by state (they move on as they are delivered; all of them are counted somewhere).
    const byState = await progress.getByRole("list", { name: "Messages by state" }).getByRole("listitem").allTextContents();
    assert.equal(byState.reduce((sum, line) => sum + Number(line.split(": ")[1]), 0), audience, byState.join(", "));
    await admin.getByRole("row", { name: new RegExp(`Opening hours change ${stamp}`) }).waitFor();
    await axe("console-broadcasts", admin);
    // One for tomorrow: scheduled, listed with its time, canceled before it goes.
    await admin.getByLabel("Text").fill(`Closed tomorrow ${stamp}`);
    const dayAhead = new Date(Date.now() + 86_400_000);
    const local = new Date(dayAhead.getTime() - dayAhead.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await admin.getByLabel("Send at (empty: now)").fill(local);
    await admin.getByRole("button", { name: "Review and send" }).click();
    await admin.getByText(/It can be canceled until then/).waitFor();
    await admin.getByRole("button", { name: `Send to ${reach}` }).click();
    const later = admin.getByRole("row", { name: new RegExp(`Closed tomorrow ${stamp}`) });
    await later.getByText(/^scheduled for /).waitFor();
    const laterId = (await partner("GET", "/broadcasts?limit=50")).data.find((b) => b.body === `Closed tomorrow ${stamp}`).broadcast_id;
    assert.equal((await partner("GET", `/broadcasts/${laterId}`)).state, "scheduled");
    await later.getByRole("button", { name: `Cancel broadcast ${laterId}` }).click();
    await later.getByRole("cell", { name: "canceled", exact: true }).waitFor();
    assert.equal((await partner("GET", `/broadcasts/${laterId}`)).state, "canceled");

    // Bots: the allowed IPs saved; the user invited to the signup flow; the session listed.
    await admin.getByRole("link", { name: "Bots" }).click();
    const card = admin.getByRole("article", { name: /\(signup · local\)/ });
    await card.getByLabel(/^Allowed IPs/).fill("203.0.113.0/24");
    await card.getByRole("button", { name: "Save settings of signup" }).click();
    await card.getByRole("status").filter({ hasText: "The settings of signup are saved." }).waitFor();
    assert.equal((await partner("GET", "/bots/signup")).bot.allowed_ips, "203.0.113.0/24");
    await card.getByLabel(/^Allowed IPs/).fill("");
    await card.getByRole("button", { name: "Save settings of signup" }).click();
    await waitUntil(async () => (await partner("GET", "/bots/signup")).bot.allowed_ips == null, "allowed IPs cleared");
    // Its channels and the entry on SMS, starting its flow: saved as the API has them, then undone.
    const channels = card.getByRole("group", { name: "Channels it answers on" });
    const entry = card.getByRole("group", { name: /^Entry bot/ });
    assert.ok(await entry.getByLabel("SMS").isDisabled(), "an entry needs the channel first");
    await channels.getByLabel("SMS").check();
    await entry.getByLabel("SMS").check();
    await card.getByLabel("What an entry session starts").selectOption("signup");
    await card.getByRole("button", { name: "Save settings of signup" }).click();
    await waitUntil(async () => {
      const { bot } = await partner("GET", "/bots/signup");
      return bot.channels.includes("sms") && bot.entry.join() === "sms" && bot.entry_flow === "signup";
    }, "the entry on SMS saved");
    await entry.getByLabel("SMS").uncheck();
    await channels.getByLabel("SMS").uncheck();
    await card.getByRole("button", { name: "Save settings of signup" }).click();
    await waitUntil(async () => (await partner("GET", "/bots/signup")).bot.entry.length === 0, "the entry undone");
    await card.getByLabel("Phone to invite").fill(PHONE);
    await card.getByRole("button", { name: "Invite to the flow" }).click();
    const invited = card.getByRole("status").filter({ hasText: `${PHONE} is invited to signup` });
    await invited.waitFor();
    const ref = (await invited.textContent()).match(/\((flow_\w+)\)/)[1];
    const sessions = await partner("GET", "/flow-sessions?bot=signup&limit=1");
    assert.equal(sessions.data[0].ref, ref);
    await card.getByRole("table").getByRole("row").filter({ hasText: PHONE }).filter({ hasText: "invited" }).first().waitFor();
    await axe("console-bots-sessions", admin);

    // The delivery log by time: nothing was created after tomorrow.
    await admin.getByRole("link", { name: "Webhooks" }).click();
    await admin.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
    const tomorrow = new Date(Date.now() + 86400000 - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16);
    await admin.getByLabel("Created from").fill(tomorrow);
    await waitUntil(async () => (await admin.locator("tbody tr").count()) === 0, "no delivery after tomorrow");

    // The contact panel beside the user's conversation shows the flow session.
    const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
    const opened = await fetch(API + "/api/v1/me/conversations", {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ partner: "acme", subject: `Form help ${stamp}`, body: "Where is my form?" }),
    });
    assert.equal(opened.status, 201, await opened.text());
    const conversation = await conversationId(`Form help ${stamp}`);
    await admin.goto(`${BASE}/console/c/${conversation}`);
    const contact = admin.getByRole("region", { name: "Contact" });
    await contact.getByText(/signup · Sign up · invited/).first().waitFor();
  } finally {
    await ctx.close();
  }
});

test("3a. unread counts on the navigation, in the tab title and on the app badge; read receipts both ways", async () => {
  const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
  const mine = async () => (await fetch(API + "/api/v1/me/unread", { headers: { Authorization: `Bearer ${token}` } })).json();
  const other = await browser.newContext();
  try {
    const p2 = await other.newPage();
    // The Badging API exists only for an installed app: record what the app asks of it.
    await p2.addInitScript(() => {
      window.__badges = [];
      navigator.setAppBadge = (n) => (window.__badges.push(n), Promise.resolve());
      navigator.clearAppBadge = () => (window.__badges.push(0), Promise.resolve());
    });
    await p2.goto(BASE + "/login");
    await p2.evaluate((t) => localStorage.setItem("hubbub.token", t), token);
    await p2.goto(BASE + "/account");
    await p2.waitForSelector("html[data-live=live]");
    const before = await mine();
    const count = (area) => p2.evaluate((a) => Number(document.querySelector(`nav [data-unread=${a}]`)?.textContent.replace(/\D/g, "") || 0), area);
    const until = (f, what) => p2.waitForFunction(f[0], f[1], { timeout: 5000 }).catch(() => assert.fail(what));

    // A hub message: the Inbox count, the title and the badge go up, live.
    await send({ body: `Unread test ${Date.now()}` });
    const total1 = before.total + 1;
    await until([(n) => document.title.startsWith(`(${n}) `), total1], `the title counts ${total1}`);
    assert.equal(await count("messages"), before.messages + 1);
    assert.equal(await p2.evaluate(() => window.__badges.at(-1)), total1);
    const inbox = p2.getByRole("navigation", { name: "Main" }).getByRole("link", { name: /^Inbox/ });
    assert.match(await inbox.textContent(), /\d/);

    // An agent's reply in the support thread: the Support count, seen from the Account screen.
    const id = await conversationId("Late parcel");
    const reply = await partner("POST", `/conversations/${id}/messages`, { body: "Is there anything else?" });
    await until([(n) => document.title.startsWith(`(${n}) `), total1 + 1], "the title counts the agent's reply");
    assert.equal(await count("conversations"), before.conversations + 1);
    await p2.getByRole("navigation", { name: "Main" }).getByRole("link", { name: /^Support/ }).click();
    const row = p2.locator(".cards li", { hasText: "Late parcel" });
    await row.getByText("1 unread").waitFor();

    // Opening the thread reads it: the partner sees the reply `read`, the counts drop.
    await row.getByRole("link", { name: "Late parcel" }).click();
    await p2.locator(".bubble.agent", { hasText: "Is there anything else?" }).waitFor();
    await until([() => !document.querySelector("nav [data-unread=conversations]"), null], "the Support count clears");
    let state;
    for (let i = 0; i < 50 && state !== "read"; i++) {
      state = (await partner("GET", `/messages/${reply.message_id}`)).state;
      if (state !== "read") await p2.waitForTimeout(100);
    }
    assert.equal(state, "read", "the partner sees the agent's reply read");
    assert.equal(await p2.evaluate(() => window.__badges.at(-1)), total1);

    // The agent reads the user's last message: "Seen" shows under it, live.
    const receipt = p2.locator(".bubble.me .receipt");
    assert.equal(await receipt.textContent(), "Delivered");
    const read = await partner("POST", `/conversations/${id}/read`);
    assert.equal(read.unread, 0);
    await p2.locator(".bubble.me .receipt", { hasText: "Seen" }).waitFor({ timeout: 5000 });
    await shoot("conversation-seen", p2);
  } finally {
    await other.close();
  }
});

test("3b. an encrypted conversation: the browser makes K_1, wraps it, and sends ciphertext", async () => {
  await page.goto(BASE + "/conversations");
  await page.getByRole("link", { name: "Late parcel" }).click();
  await page.getByRole("button", { name: "Encrypt this conversation end to end" }).click();
  await page.getByText("🔒 end-to-end encrypted").waitFor();
  await page.getByLabel("Your reply").fill("My address is secret street 1");
  await page.getByRole("button", { name: "Send encrypted" }).click();
  await page.locator(".bubble.me", { hasText: "secret street" }).waitFor();
  const id = await conversationId("Late parcel");
  const thread = await partner("GET", `/conversations/${id}`);
  const last = thread.messages.at(-1);
  assert.equal(last.encryption, "e2e");
  assert.equal(last.body ?? null, null, "the server never sees the text");
  assert.equal(last.e2e_key_version, 1);
  assert.ok(!JSON.stringify(last).includes("secret street"));
  // After a reload (keys from IndexedDB, the wrap from …/keys), the message still opens.
  await page.reload();
  await page.locator(".bubble.me", { hasText: "secret street" }).waitFor({ timeout: 10000 });
});

test("3c. an encrypted conversation with an agent device: node:crypto reads the browser's message and answers", async () => {
  // The agent console publishes its device key first, so the browser's K_1 is wrapped for it too.
  const agent = agentDevice(`agent-web-test-${Date.now()}`);
  const published = await partner("POST", "/agent/devices/keys", { device_uuid: agent.uuid, identity_key_pub: b64u(agent.pub) });
  assert.equal(published.device_uuid, agent.uuid);
  // The user opens a new thread and turns on encryption: the browser makes K_1 and wraps it to every peer.
  await page.goto(BASE + "/conversations/new");
  await page.getByLabel("Partner").selectOption("acme");
  await page.getByLabel("Subject").fill("Locker access");
  await page.getByLabel("Message").fill("I need the code for my locker.");
  await page.getByRole("button", { name: "Start conversation" }).click();
  await page.waitForURL(/\/conversations\/conv_/);
  const convRef = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
  await page.getByRole("button", { name: "Encrypt this conversation end to end" }).click();
  await page.getByText("🔒 end-to-end encrypted").waitFor();
  await page.getByLabel("Your reply").fill("My customer number is 88-1234");
  await page.getByRole("button", { name: "Send encrypted" }).click();
  await page.locator(".bubble.me", { hasText: "88-1234" }).waitFor();

  // The agent side, in this Node process: its wrap of K_1, then the user's message.
  const id = await conversationId("Locker access");
  const keys = await partner("GET", `/conversations/${id}/keys?device_uuid=${encodeURIComponent(agent.uuid)}`);
  assert.equal(keys.key_version, 1);
  const wrap = keys.wraps.find((w) => w.key_version === 1 && w.device_uuid === agent.uuid);
  assert.ok(wrap, `the browser wrapped K_1 for the agent device: ${JSON.stringify(keys)}`);
  assert.equal(wrap.device_kind, "agent");
  assert.equal(wrap.uploaded_by, "user");
  const k1 = agentUnwrap(agent, wrap, convKeyAad(convRef, 1));
  const thread = await partner("GET", `/conversations/${id}`);
  assert.equal(thread.ref, convRef);
  const mine = thread.messages.at(-1);
  assert.equal(mine.encryption, "e2e");
  assert.equal(mine.e2e_key_version, 1);
  const env = mine.e2e_envelope;
  assert.equal(env.v, 1);
  assert.equal(env.alg, ALG);
  assert.equal(env.aad, convAad(convRef, mine.ref), "the envelope is bound to this thread and message");
  const text = gcmOpen(k1, unb64u(env.nonce), unb64u(env.ciphertext), convAad(convRef, mine.ref)).toString("utf8");
  assert.equal(text, "My customer number is 88-1234");

  // The agent's encrypted reply with K_1, its own ref bound in the aad.
  const ref = "msg_" + b64u(randomBytes(18));
  const aad = convAad(convRef, ref);
  const nonce = randomBytes(12);
  const reply = await partner("POST", `/conversations/${id}/messages`, {
    encrypted: true,
    e2e_mode: "conversation",
    e2e_key_version: 1,
    ref,
    e2e_envelope: { v: 1, alg: ALG, mode: "conversation", key_version: 1, nonce: b64u(nonce), aad, ciphertext: b64u(gcmSeal(k1, nonce, Buffer.from("Your locker code is 2468 🔑", "utf8"), aad)) },
  });
  assert.equal(reply.ref, ref);
  assert.equal(reply.body ?? null, null);
  // The browser shows it decrypted, without a reload (the thread polls), and again after one.
  await page.locator(".bubble.agent", { hasText: "Your locker code is 2468 🔑" }).waitFor({ timeout: 15000 });
  await page.reload();
  await page.locator(".bubble.agent", { hasText: "Your locker code is 2468 🔑" }).waitFor({ timeout: 10000 });
  assert.equal(await page.getByText("can't be read on this device").count(), 0);
  await shoot("conversation-agent-e2e");
  await axe("conversation-e2e");
});

test("3l. an agent reads and answers an encrypted conversation in the console: the key stays in the browser", async () => {
  const stamp = Date.now().toString(36);
  const AGENT = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const LATER = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const SECRET = `My PIN hint is blue-falcon-${stamp}`;
  const ANSWER = `Your new PIN letter is on its way (${stamp}) 🔐`;
  const { link } = await partner("POST", "/members/invitations", { role: "agent" });
  const agents = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const laters = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    // The agent signs in: the console makes its agent device in this browser and publishes the public key.
    const agent = await agents.newPage();
    agent.on("pageerror", (e) => pageErrors.push(String(e)));
    const published = agent.waitForResponse((r) => new URL(r.url()).pathname === "/api/v1/agent/devices/keys" && r.request().method() === "POST");
    await consoleSignIn(agent, AGENT, link);
    const res = await published;
    assert.equal(res.status(), 201);
    const device = await res.json();
    assert.match(device.device_uuid, /^agent-web-/);
    assert.equal(device.has_keys, true);
    const sent = JSON.parse(res.request().postData());
    assert.deepEqual(Object.keys(sent).sort(), ["device_uuid", "identity_key_pub", "platform"], "only the public key is sent");
    const directory = await partner("GET", `/keys/${encodeURIComponent(PHONE)}`);
    assert.equal(directory.agent_devices.find((d) => d.device_uuid === device.device_uuid)?.identity_key_pub, device.identity_key_pub);
    // The private key is a non-extractable CryptoKey in the console's own IndexedDB database.
    const stored = await agent.evaluate(
      () =>
        new Promise((resolve, reject) => {
          const open = indexedDB.open("hubbub-console");
          open.onerror = () => reject(open.error);
          open.onsuccess = () => {
            const all = open.result.transaction("agent-devices").objectStore("agent-devices").getAll();
            all.onsuccess = () => resolve(all.result.map((x) => ({ uuid: x.uuid, type: x.privateKey.type, extractable: x.privateKey.extractable })));
            all.onerror = () => reject(all.error);
          };
        }),
    );
    assert.deepEqual(stored, [{ uuid: device.device_uuid, type: "private", extractable: false }]);

    // The user opens a thread in the app and turns encryption on: the app wraps K_1 for every agent device,
    // the console's among them, then sends ciphertext.
    await page.goto(BASE + "/conversations/new");
    await page.getByLabel("Partner").selectOption("acme");
    await page.getByLabel("Subject").fill(`PIN reset ${stamp}`);
    await page.getByLabel("Message").fill("I need to reset my PIN.");
    await page.getByRole("button", { name: "Start conversation" }).click();
    await page.waitForURL(/\/conversations\/conv_/);
    const convRef = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
    await page.getByRole("button", { name: "Encrypt this conversation end to end" }).click();
    await page.getByText("🔒 end-to-end encrypted").waitFor();
    await page.getByLabel("Your reply").fill(SECRET);
    await page.getByRole("button", { name: "Send encrypted" }).click();
    await page.locator(".bubble.me", { hasText: SECRET }).waitFor();
    const id = await conversationId(`PIN reset ${stamp}`);
    const wraps = await partner("GET", `/conversations/${id}/keys?device_uuid=${encodeURIComponent(device.device_uuid)}`);
    const k1 = wraps.wraps.find((w) => w.key_version === 1);
    assert.ok(k1, `the app wrapped K_1 for the console's device: ${JSON.stringify(wraps)}`);
    assert.equal(k1.device_kind, "agent");
    assert.equal(k1.uploaded_by, "user");

    // The agent opens it: the user's text, decrypted in the console; the thread says it is encrypted.
    const posted = [];
    agent.on("request", (r) => r.postData() && posted.push(`${r.method()} ${r.url()} ${r.postData()}`));
    await agent.getByLabel("Assigned").selectOption("none");
    await agent.getByRole("link", { name: new RegExp(`PIN reset ${stamp}`) }).click();
    await agent.getByRole("heading", { name: new RegExp(`PIN reset ${stamp}`), level: 2 }).waitFor();
    await agent.locator("[data-e2e=on]", { hasText: "End-to-end encrypted" }).waitFor();
    await agent.locator(".from-user", { hasText: "I need to reset my PIN." }).waitFor();
    await agent.locator(".from-user", { hasText: SECRET }).waitFor({ timeout: 10000 });
    assert.equal(await agent.getByText("cannot be read on this device").count(), 0);

    // The reply is sealed in the browser with K_1: only the envelope goes out.
    await agent.getByLabel(/^Encrypted reply to/).fill(ANSWER);
    await agent.getByRole("button", { name: "Send encrypted reply" }).click();
    await agent.locator(".from-agent", { hasText: ANSWER }).waitFor({ timeout: 10000 });
    assert.deepEqual(posted.filter((p) => p.includes(ANSWER) || p.includes("blue-falcon")), [], "no plaintext leaves the console");
    const thread = await partner("GET", `/conversations/${id}`);
    const last = thread.messages.at(-1);
    assert.equal(last.direction, "out");
    assert.equal(last.encryption, "e2e");
    assert.equal(last.body ?? null, null, "the server never sees the text");
    assert.equal(last.e2e_key_version, 1);
    assert.equal(last.e2e_envelope.mode, "conversation");
    assert.equal(last.e2e_envelope.aad, convAad(convRef, last.ref), "bound to this thread and the ref the console chose");
    const everything = JSON.stringify(thread) + JSON.stringify(await partner("GET", `/messages?phone=${encodeURIComponent(PHONE)}&limit=50`));
    assert.ok(!everything.includes("blue-falcon"), "the user's text is not stored");
    assert.ok(!everything.includes("PIN letter"), "the agent's text is not stored");
    // The user's app opens the reply, live, and again after a reload.
    await page.locator(".bubble.agent", { hasText: ANSWER }).waitFor({ timeout: 15000 });
    await page.reload();
    await page.locator(".bubble.agent", { hasText: ANSWER }).waitFor({ timeout: 10000 });
    assert.equal(await page.getByText("can't be read on this device").count(), 0);
    await shoot("console-thread-e2e", agent);
    await axe("console-thread-e2e", agent);

    // An agent whose browser was published after K_1 was made gets no wrap of it: the console says so and
    // shows a placeholder, never the text. Their reply makes K_2, wrapped to the user's and every agent's
    // devices, which the user opens; what the user writes next (under K_2) both consoles read.
    const invitation = await partner("POST", "/members/invitations", { role: "agent" });
    const later = await laters.newPage();
    later.on("pageerror", (e) => pageErrors.push(String(e)));
    await consoleSignIn(later, LATER, invitation.link);
    await later.goto(`${BASE}/console/c/${id}`);
    await later.locator("[data-e2e=on]").waitFor();
    await later.locator(".from-user .unreadable").first().waitFor({ timeout: 10000 });
    assert.equal(await later.getByText(SECRET).count(), 0);
    await later.getByRole("note").filter({ hasText: "its current key was not shared with this browser" }).waitFor();
    await later.getByLabel(/^Encrypted reply to/).fill(`Second agent here ${stamp}`);
    await later.getByRole("button", { name: "Send encrypted reply" }).click();
    await later.locator(".from-agent", { hasText: `Second agent here ${stamp}` }).waitFor({ timeout: 10000 });
    const k2 = await partner("GET", `/conversations/${id}/keys?device_uuid=${encodeURIComponent(device.device_uuid)}`);
    assert.equal(k2.key_version, 2);
    assert.equal(k2.wraps.find((w) => w.key_version === 2)?.uploaded_by, "agent", "the second console shared K_2 with the first");
    await page.locator(".bubble.agent", { hasText: `Second agent here ${stamp}` }).waitFor({ timeout: 15000 });
    await page.getByLabel("Your reply").fill(`Thanks both ${stamp}`);
    await page.getByRole("button", { name: "Send encrypted" }).click();
    await page.locator(".bubble.me", { hasText: `Thanks both ${stamp}` }).waitFor();
    assert.equal((await partner("GET", `/conversations/${id}`)).messages.at(-1).e2e_key_version, 2);
    await later.locator(".from-user", { hasText: `Thanks both ${stamp}` }).waitFor({ timeout: 10000 });
    await agent.locator(".from-user", { hasText: `Thanks both ${stamp}` }).waitFor({ timeout: 10000 });
    await axe("console-thread-e2e-nokey", later);
  } finally {
    await agents.close();
    await laters.close();
  }
});

test("3m. passkeys: a member adds one in the console and signs in with it (a virtual authenticator); removed, it signs in no more", async () => {
  // WebAuthn needs a domain: a host of this test's own, on the same database, whose public URL is
  // http://localhost (browsers refuse passkeys for an IP address such as 127.0.0.1).
  const port = 19000 + Math.floor(Math.random() * 900);
  const local = `http://localhost:${port}`;
  const host = spawn(BIN, ["serve"], { env: { ...process.env, HUBBUB_LISTEN: `127.0.0.1:${port}`, HUBBUB_PUBLIC_URL: local }, stdio: "ignore" });
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    for (let i = 0; i < 100 && !(await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)); i++) await new Promise((r) => setTimeout(r, 100));
    const pg = await ctx.newPage();
    pg.on("pageerror", (e) => pageErrors.push(String(e)));
    // The authenticator of this browser: a platform one that verifies its user (as a fingerprint would).
    const cdp = await ctx.newCDPSession(pg);
    await cdp.send("WebAuthn.enable");
    const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    const { link } = await partner("POST", "/members/invitations", { role: "agent" });
    await consoleSignIn(pg, phone, link.replace(new URL(link).origin, local));

    // Add a passkey from the Passkeys page.
    await pg.getByRole("link", { name: "Passkeys" }).click();
    await pg.getByRole("heading", { name: "Passkeys", level: 1 }).waitFor();
    await pg.getByText("No passkey yet.").waitFor();
    await pg.getByLabel("Name (optional)").fill("Test laptop");
    await pg.getByRole("button", { name: "Add a passkey" }).click();
    await pg.getByRole("status").filter({ hasText: "Passkey “Test laptop” added" }).waitFor();
    await pg.getByRole("cell", { name: "Test laptop", exact: true }).waitFor();
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    assert.equal(credentials.length, 1, "the authenticator holds the new passkey");
    await axe("console-passkeys", pg);

    // Sign out; sign in with the passkey: no code is sent.
    await pg.getByRole("button", { name: "Sign out", exact: true }).click();
    await pg.getByLabel("Phone number").fill(phone);
    const codes = (await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(phone)}&channel=sms`)).data.length;
    await pg.getByRole("button", { name: "Sign in with a passkey" }).click();
    await pg.getByRole("heading", { name: "Conversations", level: 1 }).waitFor();
    assert.equal((await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(phone)}&channel=sms`)).data.length, codes, "no code was sent");
    const used = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    assert.ok(used.credentials[0].signCount >= 1, "the authenticator signed");
    await pg.getByRole("link", { name: "Passkeys" }).click();
    const row = pg.getByRole("row").filter({ hasText: "Test laptop" });
    await row.waitFor();
    assert.doesNotMatch(await row.innerText(), /never/, "the sign-in is recorded as its last use");

    // Removed, it signs in no more: the page says to use a code.
    await pg.getByRole("button", { name: "Remove Test laptop" }).click();
    await pg.getByText("No passkey yet.").waitFor();
    await pg.getByRole("button", { name: "Sign out", exact: true }).click();
    await pg.getByLabel("Phone number").fill(phone);
    await pg.getByRole("button", { name: "Sign in with a passkey" }).click();
    await pg.getByRole("alert").filter({ hasText: "No passkey is registered for this phone" }).waitFor();
    await axe("console-signin-passkey-refused", pg);
  } finally {
    host.kill("SIGKILL");
    await ctx.close();
  }
});

test("3n. a user answers by SMS: the conversation comes into the console live, marked SMS, and the agent's reply goes back by SMS", async () => {
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const stamp = Date.now().toString(36);
  await partner("POST", "/accounts/link", { phone });
  const { ctx, pg } = await memberConsole("agent");
  try {
    // Twilio's inbound webhook, signed as Twilio signs it (HMAC-SHA1 of the URL and the sorted pairs).
    const url = BASE + "/api/v1/providers/twilio/inbound";
    const sms = async (sid, body, token = process.env.HUBBUB_TWILIO_AUTH_TOKEN) => {
      const pairs = [["MessageSid", sid], ["From", phone], ["To", "+15550001111"], ["Body", body], ["NumMedia", "0"]];
      const signed = [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).reduce((acc, [k, v]) => acc + k + v, url);
      const signature = createHmac("sha1", token).update(signed).digest("base64");
      return fetch(url, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": signature }, body: new URLSearchParams(pairs).toString() });
    };
    assert.equal((await sms(`SM${stamp}x`, "forged", "not-the-token")).status, 401);
    const taken = await sms(`SM${stamp}1`, `Parcel ${stamp} never came`);
    assert.equal(taken.status, 200);
    assert.match(await taken.text(), /<Response><\/Response>/);
    // The console's list shows it without a reload, marked SMS.
    const row = pg.getByRole("link", { name: new RegExp(phone.replace("+", "\\+")) }).filter({ hasText: "SMS" });
    await row.first().waitFor({ timeout: 10000 });
    await row.first().click();
    await pg.getByText(`Parcel ${stamp} never came`, { exact: true }).waitFor();
    await pg.locator(".status-pill", { hasText: "Replies go by SMS" }).waitFor();
    await pg.locator(".from-user .meta", { hasText: "by SMS" }).waitFor();
    await axe("console-sms-thread", pg);
    // The reply goes out by SMS (the development sink keeps it).
    await pg.getByLabel(/^Reply to/).fill(`Resent ${stamp}`);
    await pg.getByRole("button", { name: "Send reply" }).click();
    await waitUntil(async () => {
      const sink = await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(phone)}&channel=sms`);
      return sink.data.some((m) => m.text.includes(`Resent ${stamp}`));
    }, "the reply in the SMS sink");
    // The user's next SMS comes into the open thread live.
    await sms(`SM${stamp}2`, `Got it ${stamp}`);
    await pg.locator(".from-user", { hasText: `Got it ${stamp}` }).waitFor({ timeout: 10000 });
  } finally {
    await ctx.close();
  }
});

test("3o. a bot on SMS: numbered menus, and its form opened from the link without a login", async () => {
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  const stamp = Date.now().toString(36);
  await partner("POST", "/accounts/link", { phone });
  await ensureBot("shop", "shop");
  await partner("PATCH", "/bots/shop", { channels: ["inapp", "sms"], entry: ["sms"], entry_flow: "order" });
  const url = BASE + "/api/v1/providers/twilio/inbound";
  const sms = async (sid, body) => {
    const pairs = [["MessageSid", sid], ["From", phone], ["To", "+15550001111"], ["Body", body], ["NumMedia", "0"]];
    const signed = [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).reduce((acc, [k, v]) => acc + k + v, url);
    const signature = createHmac("sha1", process.env.HUBBUB_TWILIO_AUTH_TOKEN).update(signed).digest("base64");
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": signature }, body: new URLSearchParams(pairs).toString() });
    assert.equal(r.status, 200);
  };
  // What the SMS sink holds for the phone, newest last, once it holds `text`.
  const texts = async (text) => {
    let found = [];
    await waitUntil(async () => {
      const sink = await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(phone)}&channel=sms`);
      found = sink.data.map((m) => m.text);
      return found.some((t) => t.includes(text));
    }, `an SMS with ${text}`);
    return found;
  };
  await sms(`SM${stamp}1`, "hello");
  await texts("Reply 1 or 2.");
  await sms(`SM${stamp}2`, "1");
  await texts("Reply 1, 2, 3 or 4.");
  await sms(`SM${stamp}3`, "2");
  const sent = await texts("Open the form: ");
  const link = sent.find((t) => t.includes("Open the form: ")).split("Open the form: ")[1].trim();
  assert.match(link, /\/f\/[A-Za-z0-9]+$/);
  // A browser that never logged in opens the form from the link.
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const pg = await ctx.newPage();
  try {
    await pg.goto(link.replace(/^https?:\/\/[^/]+/, BASE));
    await pg.getByRole("heading", { name: "Delivery" }).waitFor();
    await pg.getByText(/answers you on SMS/).waitFor();
    await axe("form-link", pg);
    await pg.getByLabel(/^Address/).fill(`Pier ${stamp}`);
    await pg.getByRole("button", { name: "Submit" }).click();
    // The server checks the fields: the missing date is marked, the address kept.
    await pg.getByLabel(/^Delivery date/).and(pg.locator("[aria-invalid=true]")).waitFor();
    await pg.getByLabel(/^Delivery date/).fill("2026-12-01");
    await pg.getByRole("button", { name: "Submit" }).click();
    await pg.getByRole("heading", { name: "Sent" }).waitFor();
    await pg.getByText(/answers you on SMS/).waitFor();
    // The bot's next step (the checkout link) goes out by SMS; the link is used up.
    await texts("large coffee: 4.00 EUR. Pay: ");
    await pg.reload();
    await pg.getByRole("heading", { name: "This form cannot be opened" }).waitFor();
    await pg.getByText(/sent already/).waitFor();
  } finally {
    await ctx.close();
    await partner("PATCH", "/bots/shop", { entry: [] });
  }
});

test("3p. an admin sets the partner's own WhatsApp number and its pace in the console: secrets shown back only as prefixes", async () => {
  const { ctx, pg } = await memberConsole("admin");
  const id = String(Math.floor(1e9 + Math.random() * 8e9));
  try {
    await pg.getByRole("link", { name: "Numbers" }).click();
    await pg.getByRole("heading", { name: "Numbers", level: 1 }).waitFor();
    // The server checks what it is given: letters are not a phone number id.
    await pg.getByLabel("Phone number id (not the number)").fill("+1 555 0100");
    await pg.getByLabel("WhatsApp Business Account id").fill("900");
    await pg.getByLabel("Access token").fill("EAAG-console-token");
    await pg.getByLabel("Meta app secret").fill("console-app-secret");
    await pg.getByRole("button", { name: "Save the WhatsApp number" }).click();
    await pg.getByRole("alert").filter({ hasText: /phone_number_id/ }).waitFor();
    await pg.getByLabel("Phone number id (not the number)").fill(id);
    // Meta raised this number's throughput: 250 messages a second instead of the service's default.
    await pg.locator("#whatsapp-mps").fill("250");
    await pg.getByRole("button", { name: "Save the WhatsApp number" }).click();
    await pg.getByRole("status").filter({ hasText: "Your WhatsApp number is saved" }).waitFor();
    const row = pg.getByRole("row").filter({ hasText: id });
    await row.getByText("EAAG-c…").waitFor();
    await row.getByRole("cell", { name: "250", exact: true }).waitFor();
    // Meta's daily limit of new people for its business account: the service's default until Meta says.
    await row.getByRole("cell", { name: "0 of 250", exact: true }).waitFor();
    await row.getByRole("cell", { name: "Up", exact: true }).waitFor();
    assert.equal(await pg.getByText("EAAG-console-token").count(), 0, "the token is never shown back");
    const { data } = await partner("GET", "/settings/senders");
    assert.deepEqual(data.map((s) => [s.channel, s.address, s.mps]), [["whatsapp", id, 250]]);
    await axe("console-numbers", pg);
    await row.getByRole("button", { name: "Remove the WhatsApp sender" }).click();
    await pg.getByRole("status").filter({ hasText: "goes from the shared number again" }).waitFor();
    assert.equal((await partner("GET", "/settings/senders")).data.length, 0);
  } finally {
    await ctx.close();
  }
});

test("3r. an admin chooses how long the partner's data is kept, on the console's Data page", async () => {
  const { ctx, pg } = await memberConsole("admin");
  try {
    await pg.getByRole("link", { name: "Data" }).click();
    await pg.getByRole("heading", { name: "Data", level: 1 }).waitFor();
    // The server checks what it is given: at least a day.
    await pg.getByLabel("Hub messages (days)").fill("0");
    await pg.getByRole("button", { name: "Save retention" }).click();
    await pg.getByRole("alert").filter({ hasText: /messages_days/ }).waitFor();
    await pg.getByLabel("Hub messages (days)").fill("30");
    await pg.getByLabel("Media (days)").fill("7");
    await pg.getByRole("button", { name: "Save retention" }).click();
    await pg.getByRole("status").filter({ hasText: "Retention saved" }).waitFor();
    const saved = await partner("GET", "/settings/retention");
    assert.deepEqual(
      [saved.messages_days, saved.conversations_days, saved.media_days, saved.webhook_deliveries_days, saved.bot_sessions_days],
      [30, null, 7, null, null],
    );
    // Shown as saved when the page opens again; the export is a link the browser downloads.
    await pg.reload();
    await pg.getByRole("heading", { name: "Data", level: 1 }).waitFor();
    await pg.waitForFunction(() => document.querySelector("#keep-messages_days")?.value === "30");
    assert.equal(await pg.getByLabel("Conversation messages (days)").inputValue(), "");
    assert.equal(await pg.getByRole("link", { name: "Download messages" }).getAttribute("href"), "/api/v1/exports/messages");
    await axe("console-data", pg);
    // Cleared again: kept as long as the host keeps it.
    await pg.getByLabel("Hub messages (days)").fill("");
    await pg.getByLabel("Media (days)").fill("");
    await pg.getByRole("button", { name: "Save retention" }).click();
    await pg.getByRole("status").filter({ hasText: "Retention saved" }).waitFor();
    assert.equal((await partner("GET", "/settings/retention")).messages_days, null);
  } finally {
    await ctx.close();
  }
});

test("3d. search: messages and conversations, by words, from the server's text index", async () => {
  const stamp = Date.now().toString(36);
  await send({ body: `Quarterly statement ${stamp} is ready` });
  await send({ body: `Something else entirely ${stamp}` });
  await page.goto(BASE + "/");
  await page.locator("ol.messages article").first().waitFor();
  const asked = [];
  const seen = (r) => {
    const u = new URL(r.url());
    if (u.pathname === "/api/v1/me/messages" && u.searchParams.get("q")) asked.push(u.searchParams.get("q"));
  };
  page.on("request", seen);
  try {
    const box = page.getByRole("searchbox", { name: "Search messages" });
    await box.fill(`quarter ${stamp}`);
    const results = page.getByRole("list", { name: "Search results" });
    await results.locator("article", { hasText: "Quarterly statement" }).waitFor();
    assert.equal(await results.locator("article").count(), 1, "only what has every word");
    assert.ok(asked.includes(`quarter ${stamp}`), "the server searched, not the page");
    await box.fill(`nothing${stamp}`);
    await page.getByText(`No messages match “nothing${stamp}”.`).waitFor();
    await shoot("inbox-search");
    await box.press("Escape");
    await page.getByRole("heading", { name: /^Inbox/ }).waitFor();
    assert.equal(await page.getByRole("list", { name: "Search results" }).count(), 0);
  } finally {
    page.off("request", seen);
  }
  // Conversations: by subject or by what either side wrote.
  await page.goto(BASE + "/conversations");
  const box = page.getByRole("searchbox", { name: "Search conversations" });
  await box.fill("ships tomorrow");
  const results = page.getByRole("list", { name: "Search results" });
  await results.getByRole("link", { name: "Late parcel" }).waitFor();
  await box.fill("parcel");
  await results.getByRole("link", { name: "Late parcel" }).waitFor();
  await axe("search");
});

test("3e. offline: the inbox and a thread are shown from this device, and a reply written offline is sent once", async () => {
  const stamp = Date.now().toString(36);
  await send({ body: `Boarding pass ${stamp}` });
  // A thread, read online first: both are kept in this browser.
  await page.goto(BASE + "/conversations/new");
  await page.getByLabel("Partner").selectOption("acme");
  await page.getByLabel("Subject").fill(`Seat change ${stamp}`);
  await page.getByLabel("Message").fill("Can I change my seat?");
  await page.getByRole("button", { name: "Start conversation" }).click();
  await page.waitForURL(/\/conversations\/conv_/);
  const threadUrl = page.url();
  const id = await conversationId(`Seat change ${stamp}`);
  await partner("POST", `/conversations/${id}/messages`, { body: "Yes, pick one in the app." });
  await page.locator(".bubble.agent", { hasText: "pick one in the app" }).waitFor();
  // Kept as shown: the live reply is in the saved thread before the page goes (a save still in flight
  // when the page is left is lost with it).
  await waitUntil(() => keptOffline("pick one in the app"), "the thread with the agent's reply is kept in this browser");
  await page.goto(BASE + "/");
  await page.getByText(`Boarding pass ${stamp}`).waitFor();
  await waitUntil(() => keptOffline(`Boarding pass ${stamp}`), "the inbox is kept in this browser");
  await page.evaluate(() => navigator.serviceWorker.ready);

  // Offline, the app opens from the service worker and shows what it saved, marked as such.
  await context.setOffline(true);
  try {
    await page.reload();
    await page.locator(".offline-note").waitFor();
    assert.match(await page.locator(".offline-note").textContent(), /^Offline: showing what this device saved · saved \d/);
    await page.getByText(`Boarding pass ${stamp}`).waitFor();
    await page.goto(threadUrl).catch(() => {}); // a navigation: the shell again, from the worker
    await page.locator(".bubble.agent", { hasText: "pick one in the app" }).waitFor();
    await page.locator(".offline-note").waitFor();
    // A reply written offline waits in the outbox.
    await page.getByLabel("Your reply").fill("Window seat, please");
    await page.getByRole("button", { name: "Send", exact: true }).click();
    await page.locator(".bubble.queued", { hasText: "Window seat, please" }).getByText("Waiting to send").waitFor();
    await shoot("offline-thread");
    await axe("offline-thread");
    const waiting = await partner("GET", `/conversations/${id}`);
    assert.equal(waiting.messages.filter((m) => m.body === "Window seat, please").length, 0, "not sent while offline");
  } finally {
    await context.setOffline(false);
  }
  // Back online: sent once, shown as the user's message, and the note is gone.
  await page.locator(".bubble.me:not(.queued)", { hasText: "Window seat, please" }).waitFor({ timeout: 10000 });
  await page.locator(".bubble.queued").waitFor({ state: "detached" });
  await page.locator(".offline-note").waitFor({ state: "detached" });
  // A second try of the same outbox entry (another tab, a lost answer) writes nothing new.
  const thread = await partner("GET", `/conversations/${id}`);
  assert.deepEqual(thread.messages.map((m) => m.body), ["Can I change my seat?", "Yes, pick one in the app.", "Window seat, please"]);
  await page.reload();
  await page.locator(".bubble.me", { hasText: "Window seat, please" }).waitFor();
  assert.equal(await page.locator(".bubble.me", { hasText: "Window seat, please" }).count(), 1, "shown once");
});

test("4. an E2E hub message sealed by the reference CLI opens in the browser", async () => {
  await page.goto(BASE + "/account");
  await page.getByText("Encryption key").waitFor();
  const out = execFileSync(BIN, ["e2e", "seal", "--phone", PHONE, "--partner", "acme", "--text", "Your locker code is 4711", "--send"], {
    env: { ...process.env, HUBBUB_API_URL: API, HUBBUB_API_KEY: KEY },
  }).toString();
  assert.match(out, /msg_/);
  await page.goto(BASE + "/");
  await page.getByText("Your locker code is 4711").waitFor({ timeout: 15000 });
  // A message sealed only for another of the user's devices: a clear "can't be read here" state.
  const run = (...args) => execFileSync(BIN, args, { env: { ...process.env, HUBBUB_API_URL: API, HUBBUB_API_KEY: KEY } }).toString().trim();
  const other = JSON.parse(run("e2e", "keygen"));
  const token = run("user", "token", PHONE).split("\n").pop();
  const published = await fetch(API + "/api/v1/me/devices/keys", {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ identity_key_pub: other.public_key, device_uuid: "dev-other-phone", platform: "ios" }),
  });
  assert.equal(published.status, 201, await published.text());
  const body = JSON.parse(run("e2e", "seal", "--phone", PHONE, "--partner", "acme", "--text", "For the other phone only"));
  body.e2e_envelope.key_wraps = body.e2e_envelope.key_wraps.filter((w) => w.device_uuid === "dev-other-phone");
  await partner("POST", "/messages", body);
  await page.getByText("This encrypted message can't be read on this device").waitFor({ timeout: 15000 });
  assert.equal(await page.getByText("For the other phone only").count(), 0);
  await shoot("inbox-e2e");
});

test("5. chat with the sample bot: menus, text and a screen", async () => {
  await localBot("chat", "chat");
  await page.goto(BASE + "/bots");
  await page.getByRole("link", { name: "Acme assistant" }).click();
  await page.getByText("Hi! I'm the Hubbub assistant.").waitFor();
  await page.getByRole("button", { name: "Opening hours" }).last().click();
  await page.getByText("We're open Monday to Friday").waitFor();
  await page.getByLabel(/^Message to/).fill("hello bot");
  await page.getByRole("button", { name: "Send" }).click();
  await page.getByText("You said: hello bot").waitFor();
  await page.getByRole("button", { name: "Help" }).last().click();
  await page.getByRole("radio", { name: "Payments" }).check();
  await page.getByRole("button", { name: "Submit" }).click();
  await page.getByText("Payments: we accept cards").waitFor();
  await shoot("bot");
  await axe("bot");
  await page.goto(BASE + "/bots");
  await page.getByRole("link", { name: "Acme assistant" }).waitFor();
  await axe("bots");
  await page.goto(BASE + "/forms");
  await page.getByRole("heading", { name: "Forms" }).waitFor();
  await shoot("forms");
  await axe("forms");
});

test("5a. a webhook bot's reply appears in the open chat without polling", async () => {
  // The partner's bot runs on the partner's server: here, a receiver that acknowledges every event.
  const events = [];
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      events.push(JSON.parse(body || "{}"));
      res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${receiver.address().port}/bot`;
    const stamp = Date.now().toString(36);
    const code = `remote${stamp}`;
    const bot = await partner("POST", "/bots", { code, name: `Remote helper ${stamp}`, runtime_mode: "webhook", webhook_url: url });
    await page.goto(BASE + "/bots");
    await page.getByRole("link", { name: `Remote helper ${stamp}` }).click();
    await page.getByLabel(/^Message to/).fill("Is my order ready?");
    await page.getByRole("button", { name: "Send" }).click();
    let session;
    for (let i = 0; i < 50 && !session; i++) {
      session = events.find((e) => e.event === "session.event" && e.payload?.event?.text === "Is my order ready?")?.payload?.session;
      if (!session) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(session, "the bot heard the user");
    await page.waitForSelector("html[data-live=live]");
    const polls = [];
    const seen = (r) => r.method() === "GET" && new URL(r.url()).pathname.includes("/sessions/") && polls.push(r.url());
    page.on("request", seen);
    await page.waitForTimeout(1500);
    assert.deepEqual(polls, [], "the chat does not poll for steps");
    // The bot answers later, through its inbound webhook: the step shows in the open chat.
    const res = await fetch(API + `/api/v1/bots/${code}/webhook`, {
      method: "POST",
      headers: { Authorization: `Bearer ${bot.bot_token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ event: "reply", data: { session, steps: [{ type: "message", text: `Ready for pickup ${stamp}` }] } }),
    });
    assert.equal(res.status, 200, await res.text());
    await page.getByText(`Ready for pickup ${stamp}`).waitFor({ timeout: 3000 });
    page.off("request", seen);
    assert.equal(polls.length, 1, "one fetch of the new steps, after the event");
  } finally {
    receiver.close();
  }
});

test("5b. older messages load as the user scrolls (cursor paging), newest first", async () => {
  await Promise.all(Array.from({ length: 60 }, (_, i) => send({ body: `Bulk update ${i + 1}` })));
  await page.goto(BASE + "/");
  await page.locator("ol.messages article").first().waitFor();
  await page.waitForFunction(() => document.querySelectorAll("ol.messages article").length >= 50);
  assert.equal(await page.locator("ol.messages article").count(), 50, "one page first");
  const oldest = page.getByText("Your parcel ships tomorrow.");
  assert.equal(await oldest.count(), 0);
  for (let i = 0; i < 20 && (await oldest.count()) === 0; i++) {
    await page.mouse.wheel(0, 4000);
    await page.waitForTimeout(200);
  }
  await oldest.waitFor();
  const ids = await page.locator("ol.messages article h2").allInnerTexts();
  assert.ok(ids.length > 50);
});

test("5c. an old completed form (210 newer messages) opens straight to its read-only summary", async () => {
  assert.ok(signupRef, "test 2 completed the signup flow");
  await sendMany(210, (i) => `Later news ${i + 1}`);
  const newest = await partner("GET", `/messages?phone=${encodeURIComponent(PHONE)}&limit=200`);
  assert.ok(!newest.data.some((m) => m.flow?.ref === signupRef), "the flow card is older than the newest 200 messages");
  // A fresh page load (as from the SMS link): nothing cached, only the link's ref.
  await page.goto(BASE + `/forms/${signupRef}`);
  await page.getByRole("heading", { name: "Completed" }).waitFor({ timeout: 10000 });
  await page.getByText("This form is completed and read only.").first().waitFor();
  const summary = page.locator(".completed .summary");
  assert.match(await summary.innerText(), /ana@example\.com/);
  assert.equal(await page.locator("main input, main select, main textarea, main button").count(), 0);
  assert.equal(await page.getByRole("alert").count(), 0);
  await axe("form-completed");
  // Another user's (or an unknown) flow: a clear message, no form.
  await page.goto(BASE + "/forms/flow_doesnotexist000000000000");
  await page.getByRole("alert").filter({ hasText: /not found/i }).waitFor();
});

test("5d. Web Push: the Account screen subscribes this device; pushes are VAPID-signed and encrypted; the service worker acknowledges and notifies", async () => {
  // A push service of our own (Chromium's is out of reach here): it records each push and answers `status`.
  const pushes = [];
  let status = 201;
  const service = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      pushes.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(status).end();
    });
  });
  await new Promise((r) => service.listen(0, "127.0.0.1", r));
  const endpoint = `http://127.0.0.1:${service.address().port}/push/${Date.now()}`;
  const token = await page.evaluate(() => localStorage.getItem("hubbub.token"));
  const mine = async () => (await fetch(API + "/api/v1/me/push", { headers: { Authorization: `Bearer ${token}` } })).json();
  const waitFor = async (what, check) => {
    for (let i = 0; i < 100; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(what);
  };
  try {
    await context.grantPermissions(["notifications"], { origin: BASE });
    // The browser's PushManager answers a subscription at our push service with this device's key pair
    // (made here, as a browser makes its own); the test keeps the private key to read the pushes.
    const receiver = createECDH("prime256v1");
    receiver.generateKeys();
    const device = { endpoint, p256dh: b64u(receiver.getPublicKey()), auth: b64u(randomBytes(16)) };
    await page.addInitScript((d) => {
      const json = { endpoint: d.endpoint, expirationTime: null, keys: { p256dh: d.p256dh, auth: d.auth } };
      const sub = (options) => ({ endpoint: d.endpoint, options, toJSON: () => json, unsubscribe: async () => (localStorage.removeItem("test.push"), true) });
      PushManager.prototype.subscribe = async (options) => (localStorage.setItem("test.push", "1"), sub(options));
      PushManager.prototype.getSubscription = async () => (localStorage.getItem("test.push") ? sub({}) : null);
    }, device);
    await page.goto(BASE + "/account");
    await page.locator("[data-push=off]").waitFor();
    await page.getByRole("button", { name: "Turn on notifications" }).click();
    await page.locator("[data-push=on]").waitFor();
    assert.equal((await mine()).subscribed, true);

    // The app is closed (no page, no stream) when the message comes.
    await page.goto("about:blank");
    const sent = await send({ body: "Your parcel is out for delivery" });
    await waitFor("the push service gets a push", () => pushes.length > 0);
    const push = pushes[0];
    assert.equal(push.headers["content-encoding"], "aes128gcm");
    assert.equal(push.headers.ttl, "86400");
    // VAPID (RFC 8292): an ES256 JWT for the push service's origin, signed by the key the host publishes.
    const [, jwt, k] = push.headers.authorization.match(/^vapid t=([^,]+), k=(.+)$/);
    assert.equal(k, (await mine()).vapid_public_key);
    const [h, c, sig] = jwt.split(".");
    const point = Buffer.from(k, "base64url");
    const vapidKey = createPublicKey({ key: { kty: "EC", crv: "P-256", x: b64u(point.subarray(1, 33)), y: b64u(point.subarray(33)) }, format: "jwk" });
    assert.ok(verify("sha256", Buffer.from(`${h}.${c}`), { key: vapidKey, dsaEncoding: "ieee-p1363" }, Buffer.from(sig, "base64url")), "the VAPID signature verifies");
    assert.equal(JSON.parse(Buffer.from(h, "base64url")).alg, "ES256");
    const claims = JSON.parse(Buffer.from(c, "base64url"));
    assert.equal(claims.aud, new URL(endpoint).origin);
    const now = Date.now() / 1000;
    assert.ok(claims.exp > now && claims.exp <= now + 24 * 3600, `exp within a day: ${claims.exp}`);
    // The payload (RFC 8291 aes128gcm), read with http_ece and the device's private key.
    const notice = JSON.parse(ece.decrypt(push.body, { version: "aes128gcm", privateKey: receiver, authSecret: device.auth }).toString());
    assert.equal(notice.body, "Your parcel is out for delivery");
    assert.equal(notice.tag, "hub:acme");
    assert.equal(notice.url, `/m/${sent.ref}`);
    assert.match(notice.ack, /^\/api\/v1\/push\/ack\//);
    assert.equal((await partner("GET", `/messages/${sent.message_id}`)).state, "sent");

    // The push reaches the service worker (delivered by the DevTools protocol, as a push service would):
    // with the app closed, it acknowledges (the message is delivered) and shows a notification.
    const cdp = await context.newCDPSession(page);
    const registration = new Promise((resolve) =>
      cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations }) => {
        const r = registrations.find((x) => x.scopeURL.startsWith(BASE) && !x.isDeleted);
        if (r) resolve(r.registrationId);
      }),
    );
    await cdp.send("ServiceWorker.enable");
    const registrationId = await registration;
    await cdp.send("ServiceWorker.deliverPushMessage", { origin: new URL(BASE).origin, registrationId, data: JSON.stringify(notice) });
    await waitFor("the service worker acknowledges the push", async () => (await partner("GET", `/messages/${sent.message_id}`)).state === "delivered");
    await page.goto(BASE + "/account");
    const shown = await page.evaluate(async () => (await (await navigator.serviceWorker.ready).getNotifications()).map((n) => ({ title: n.title, body: n.body, tag: n.tag })));
    assert.deepEqual(shown, [{ title: notice.title, body: "Your parcel is out for delivery", tag: "hub:acme" }]);
    await cdp.detach();

    // Turning notifications off unsubscribes here and on the host; a subscription the push service says
    // is gone (410) is deleted.
    await page.locator("[data-push=on]").waitFor();
    await page.getByRole("button", { name: "Turn off notifications" }).click();
    await page.locator("[data-push=off]").waitFor();
    assert.equal((await mine()).subscribed, false);
    await page.getByRole("button", { name: "Turn on notifications" }).click();
    await page.locator("[data-push=on]").waitFor();
    status = 410;
    await send({ body: "Anyone there?" });
    await waitFor("the gone subscription is deleted", async () => (await mine()).subscribed === false);
    await shoot("account-notifications");
  } finally {
    service.close();
  }
});

test("6. account, logout, and an invalid or expired token returns to the login screen with a message", async () => {
  await page.goto(BASE + "/account");
  await page.getByText(PHONE).waitFor();
  await page.getByText("Acme Corp").waitFor();
  // The partner's field values, labelled per partner: the option's label, Yes for true.
  const acme = page.getByRole("group", { name: /Acme Corp/ });
  await acme.waitFor();
  const value = (label) => acme.locator("dt", { hasText: new RegExp(`^${label}$`) }).locator("xpath=following-sibling::dd[1]");
  assert.equal(await value("Tier").innerText(), "Gold");
  assert.equal(await value("Newsletter").innerText(), "Yes");
  await shoot("account");
  await axe("account");
  // A bad token (as after a revocation or expiry): the next /me call is 401.
  await page.evaluate(() => localStorage.setItem("hubbub.token", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.bad"));
  await page.goto(BASE + "/conversations");
  await page.waitForURL(/\/login\?next=%2Fconversations/);
  await page.getByRole("alert").filter({ hasText: /expired|signed out/ }).waitFor();
  await shoot("login-expired");
  // Logging in again goes to `next`.
  await login("/login?next=%2Fbots");
  await page.waitForURL(/\/bots$/);
  // Logout.
  await page.goto(BASE + "/account");
  await page.getByRole("button", { name: "Log out" }).click();
  await page.waitForURL(/\/login/);
  assert.equal(await page.evaluate(() => localStorage.getItem("hubbub.token")), null);
  // What was kept for offline use (3e) is gone with the session.
  await waitUntil(async () => {
    const kept = await offlineKept();
    return kept !== null && kept.saved.length + kept.outbox === 0;
  }, "signing out empties the saved messages");
});

test("6b. sign out everywhere ends the session in every browser", async () => {
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  await partner("POST", "/accounts/link", { phone, invite: false });
  /** A browser of its own, signed in as `phone` (the token as the login screen keeps it). */
  const signedIn = async () => {
    await fetch(API + "/api/v1/auth/otp/start", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ phone }) });
    const code = await codeFor(phone);
    const res = await fetch(API + "/api/v1/auth/otp/verify", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ phone, code }) });
    const { token } = await res.json();
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const p = await ctx.newPage();
    await p.goto(BASE + "/login");
    await p.evaluate((t) => localStorage.setItem("hubbub.token", t), token);
    await p.goto(BASE + "/account");
    await p.getByText(phone).waitFor();
    return { ctx, p, token };
  };
  const laptop = await signedIn();
  const other = await signedIn();
  try {
    laptop.p.once("dialog", (d) => d.accept());
    await laptop.p.getByRole("button", { name: "Sign out everywhere" }).click();
    await laptop.p.waitForURL(/\/login/);
    // The other browser, left open on its Account screen, is told at once (its live stream ends with a
    // logout event): back to the login screen, saying why. Its token is refused from now on.
    await other.p.waitForURL(/\/login\?next=%2Faccount/);
    await other.p.getByRole("alert").filter({ hasText: /signed out/ }).waitFor();
    const refused = await fetch(API + "/api/v1/me/account", { headers: { Authorization: `Bearer ${other.token}` } });
    assert.equal(refused.status, 401);
  } finally {
    await laptop.ctx.close();
    await other.ctx.close();
  }
});

test("6c. a person erases their account from the Account screen with a fresh code: every partner's side goes", async () => {
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  await partner("POST", "/accounts/link", { phone, invite: false });
  const sent = await partner("POST", "/messages", { phone, body: "Your parcel is on its way" });
  await fetch(API + "/api/v1/auth/otp/start", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ phone }) });
  const first = await codeFor(phone);
  const res = await fetch(API + "/api/v1/auth/otp/verify", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ phone, code: first }) });
  const { token } = await res.json();
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const p = await ctx.newPage();
  try {
    await p.goto(BASE + "/login");
    await p.evaluate((t) => localStorage.setItem("hubbub.token", t), token);
    await p.goto(BASE + "/account");
    const erase = p.getByRole("group", { name: "Erase my account" });
    await erase.waitFor();
    await erase.getByRole("button", { name: "Send me a code to erase my account" }).click();
    const code = await codeFor(phone, first);
    await erase.getByLabel("The code we sent by SMS").fill(code);
    await axe("app-erase-account", p);
    p.once("dialog", (d) => d.accept());
    await erase.getByRole("button", { name: "Erase everything" }).click();
    await p.waitForURL(/\/login/);
    // Gone: the partner's message and its view of the account; the token is refused.
    const message = await fetch(API + `/api/v1/messages/${sent.message_id}`, { headers: { Authorization: `Bearer ${KEY}` } });
    assert.equal(message.status, 404);
    const account = await fetch(API + `/api/v1/accounts/${encodeURIComponent(phone)}`, { headers: { Authorization: `Bearer ${KEY}` } });
    assert.equal(account.status, 404);
    const me = await fetch(API + "/api/v1/me/account", { headers: { Authorization: `Bearer ${token}` } });
    assert.equal(me.status, 401);
  } finally {
    await ctx.close();
  }
});

test("6d. a person exports their data from the Account screen: a zip downloaded from the link it gives", async () => {
  const phone = "+1555" + String(Math.floor(1e6 + Math.random() * 8.9e6));
  await partner("POST", "/accounts/link", { phone, invite: false });
  await partner("POST", "/messages", { phone, body: "Your export parcel" });
  await fetch(API + "/api/v1/auth/otp/start", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ phone }) });
  const code = await codeFor(phone);
  const res = await fetch(API + "/api/v1/auth/otp/verify", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ phone, code }) });
  const { token } = await res.json();
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, acceptDownloads: true });
  const p = await ctx.newPage();
  try {
    await p.goto(BASE + "/login");
    await p.evaluate((t) => localStorage.setItem("hubbub.token", t), token);
    await p.goto(BASE + "/account");
    const box = p.getByRole("group", { name: "Export my data" });
    await box.waitFor();
    await box.getByRole("button", { name: "Export my data" }).click();
    const link = box.getByRole("link", { name: "Download my data" });
    await link.waitFor();
    await axe("app-export", p);
    const [download] = await Promise.all([p.waitForEvent("download"), link.click()]);
    const path = await download.path();
    const bytes = (await import("node:fs")).readFileSync(path);
    // A zip (its local file header) holding the person's message.
    assert.equal(bytes.subarray(0, 4).toString("hex"), "504b0304");
    assert.ok(bytes.length > 200, `a zip of ${bytes.length} bytes`);
    assert.match(download.suggestedFilename(), /\.zip$/);
  } finally {
    await ctx.close();
  }
});

test("7. no CSP violation, no page error, PWA manifest and service worker", async () => {
  const manifest = await (await fetch(BASE + "/manifest.webmanifest")).json();
  assert.ok(manifest.icons.some((i) => i.sizes === "512x512"));
  const sw = await fetch(BASE + "/sw.js");
  assert.equal(sw.status, 200);
  const registered = await page.evaluate(async () => !!(await navigator.serviceWorker.getRegistration("/")));
  assert.ok(registered, "the service worker is registered");
  // The app shell opens offline from the worker's cache (API calls are never cached).
  await page.evaluate(async () => {
    await navigator.serviceWorker.ready;
  });
  await page.waitForFunction(() => !!navigator.serviceWorker.controller);
  await context.setOffline(true);
  try {
    await page.reload();
    await page.getByRole("heading", { name: "Log in to Hubbub" }).waitFor({ timeout: 10000 });
  } finally {
    await context.setOffline(false);
  }
  assert.deepEqual(cspViolations, []);
  assert.deepEqual(pageErrors, []);
  console.log("axe (all impacts):", JSON.stringify(Object.fromEntries(Object.entries(axeResults).map(([k, v]) => [k, v.map((x) => `${x.id}:${x.impact}`)]))));
});
