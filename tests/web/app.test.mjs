// Browser tests of the web app, each as a person would do it, on Debian's Chromium (never a downloaded
// browser). Run by tests/web/run.sh, which starts the host and gives HUBBUB_WEB_BASE, HUBBUB_API_URL,
// HUBBUB_API_KEY (the platform partner acme), HUBBUB_BIN and HUBBUB_WASM_DIR.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../web/package.json"));
const { chromium } = require("playwright-core");
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

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

let browser, context, page;
const cspViolations = [];
const pageErrors = [];

async function shoot(name) {
  for (const [w, h] of [[390, 844], [1280, 800]]) {
    await page.setViewportSize({ width: w, height: h });
    await page.waitForTimeout(150);
    await page.screenshot({ path: path.join(SHOTS, `${name}-${w}x${h}.png`), fullPage: false });
  }
  await page.setViewportSize({ width: 390, height: 844 });
}

const axeResults = {};
/** axe-core on the current page: no serious or critical violation. */
async function axe(area) {
  await page.evaluate(AXE); // evaluated by the driver, not a page <script>: the CSP stays strict
  const r = await page.evaluate(async () => {
    // @ts-ignore
    const res = await window.axe.run(document, { resultTypes: ["violations"] });
    return res.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5) }));
  });
  axeResults[area] = r;
  const bad = r.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(bad, [], `${area}: axe violations ${JSON.stringify(bad, null, 1)}`);
}

async function codeFor(phone) {
  for (let i = 0; i < 50; i++) {
    const sink = await partner("GET", `/dev-sink/messages?phone=${encodeURIComponent(phone)}&channel=sms`);
    const text = sink.data?.[0]?.text ?? "";
    const m = text.match(/\b(\d{6})\b/);
    if (m) return m[1];
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
  await partner("POST", "/accounts/link", { phone: PHONE, invite: false, display_name: "Ana Tester" });
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
  const img = list.locator("img[alt='dot.png']");
  await img.waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll("img[alt='dot.png']")].every((i) => i.complete && i.naturalWidth > 0));
  assert.ok(await list.getByRole("link", { name: /Download invoice\.pdf/ }).isVisible());
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
  await page.locator("img[alt='dot.png']").waitFor();
});

test("2. the signup flow: field errors keep the values, then the summary; the card is read only", async () => {
  await localBot("signup", "signup");
  const invite = await partner("POST", "/bots/signup/flows/signup/invite", { phone: PHONE });
  const ref = invite.flow_session.ref;
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
  await page.getByRole("button", { name: "Cancel" }).click();
  await page.getByText("The payment was cancelled").waitFor();
  await page.getByRole("button", { name: /^Pay / }).last().click();
  await page.getByText(/Paid, thank you!/).waitFor();
  await page.getByRole("heading", { name: "Completed" }).waitFor();
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
  await partner("POST", `/conversations/${id}/messages`, { body: "It ships tomorrow, sorry for the wait." });
  await page.locator(".bubble.agent", { hasText: "It ships tomorrow" }).waitFor({ timeout: 15000 });
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

test("6. account, logout, and an invalid or expired token returns to the login screen with a message", async () => {
  await page.goto(BASE + "/account");
  await page.getByText(PHONE).waitFor();
  await page.getByText("Acme Corp").waitFor();
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
