// The shared cores (web/src/shared): the fetch core, the live event stream and the text helpers, each as the
// app, the console and the developer portal configure them.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError, apiClient } from "../src/shared/api";
import { errorText, lastMessageLine, when } from "../src/shared/format";
import { eventStream, type StreamStatus } from "../src/shared/sse";

/** An EventSource that the test drives. */
class FakeSource {
  static CLOSED = 2;
  static all: FakeSource[] = [];
  readyState = 0;
  closed = false;
  onopen: (() => void) | null = null;
  onerror: (() => void) | null = null;
  listeners = new Map<string, ((e: { data: string; lastEventId: string }) => void)[]>();
  constructor(public url: string) {
    FakeSource.all.push(this);
  }
  addEventListener(kind: string, f: (e: { data: string; lastEventId: string }) => void) {
    this.listeners.set(kind, [...(this.listeners.get(kind) ?? []), f]);
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
  emit(kind: string, data: string, id = "") {
    this.listeners.get(kind)?.forEach((f) => f({ data, lastEventId: id }));
  }
}

beforeEach(() => {
  vi.useFakeTimers();
  FakeSource.all = [];
  vi.stubGlobal("window", globalThis);
  vi.stubGlobal("EventSource", FakeSource);
});
afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe("eventStream", () => {
  it("reopens itself at a new address with the last id (the app)", async () => {
    const asked: (string | null)[] = [];
    const statuses: StreamStatus[] = [];
    const opened: boolean[] = [];
    const s = eventStream({
      kinds: ["message.created", "reset"],
      reconnect: "reopen",
      url: async (last) => (asked.push(last), `/events?n=${asked.length}`),
      opened: (fresh) => opened.push(fresh),
      status: (st) => statuses.push(st),
    });
    const got: unknown[] = [];
    s.on("message.created", (d) => got.push(d));
    s.start(() => undefined);
    s.start(() => undefined); // once until stopped
    await vi.runAllTimersAsync();
    expect(FakeSource.all.length).toBe(1);
    const first = FakeSource.all[0];
    first.onopen!();
    first.emit("message.created", '{"ref":"a"}', "7");
    expect(got).toEqual([{ ref: "a" }]);
    first.onerror!();
    expect(first.closed).toBe(true);
    expect(s.status()).toBe("reconnecting");
    await vi.advanceTimersByTimeAsync(499);
    expect(FakeSource.all.length).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(asked).toEqual([null, "7"]);
    FakeSource.all[1].onopen!();
    expect(opened).toEqual([true, false]);
    expect(statuses).toEqual(["live", "reconnecting", "live"]);
  });

  it("lets the browser retry, and reconnects in 3 s once it gave up (the console)", async () => {
    const closed = vi.fn();
    const s = eventStream({ kinds: ["conversation.updated"], reconnect: "browser", url: () => "/api/v1/conversations/events" });
    s.start(() => undefined, closed);
    expect(FakeSource.all.length).toBe(1);
    const first = FakeSource.all[0];
    first.onerror!();
    expect(s.status()).toBe("reconnecting");
    expect(closed).not.toHaveBeenCalled();
    first.readyState = FakeSource.CLOSED;
    first.onerror!();
    expect(closed).toHaveBeenCalledOnce();
    await vi.advanceTimersByTimeAsync(3000);
    expect(FakeSource.all.map((x) => x.url)).toEqual(["/api/v1/conversations/events", "/api/v1/conversations/events"]);
  });

  it("ends on `logout`, and opens nothing for an address that arrives after `stop`", async () => {
    const logout = vi.fn();
    let release: (u: string) => void = () => undefined;
    const s = eventStream({ kinds: [], reconnect: "reopen", url: () => new Promise<string>((r) => (release = r)) });
    s.start(logout);
    s.stop();
    release("/late");
    await vi.runAllTimersAsync();
    expect(FakeSource.all.length).toBe(0);
    const t = eventStream({ kinds: [], reconnect: "browser", url: () => "/x" });
    t.start(logout);
    FakeSource.all[0].onopen!();
    FakeSource.all[0].emit("logout", '{"reason":"signed_out"}');
    expect(logout).toHaveBeenCalledOnce();
    expect(FakeSource.all[0].closed).toBe(true);
    expect(t.status()).toBe("connecting");
  });
});

describe("apiClient", () => {
  /** The ApiError a call failed with. */
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => Promise.reject(new Error("it answered")),
      (e: ApiError) => e,
    );
  const answer = (status: number, body: unknown) => vi.fn(async () => new Response(body === undefined ? "" : JSON.stringify(body), { status }));

  it("sends the bearer token and the cookie, and words an error its side's way", async () => {
    const fetch = answer(429, { error: { code: "rate_limited", message: "Too many requests: try again in 3 s" } });
    vi.stubGlobal("fetch", fetch);
    const app = apiClient({ bearer: () => "tok", signedOut: () => false, words: { rate_limited: "Too many tries." } });
    const err = await failure(app.post("/x", { a: 1 }));
    expect(err).toBeInstanceOf(ApiError);
    expect([err.status, err.code, err.message, err.fields]).toEqual([429, "rate_limited", "Too many tries.", undefined]);
    const [url, init] = fetch.mock.calls[0] as unknown as [string, RequestInit];
    expect(url).toBe("/api/v1/x");
    expect(init).toMatchObject({ method: "POST", credentials: "same-origin", body: '{"a":1}' });
    expect(init.headers).toEqual({ Accept: "application/json", Authorization: "Bearer tok", "Content-Type": "application/json" });
    const cookie = apiClient({ signedOut: () => true });
    expect((await failure(cookie.get("/y"))).message).toBe("Too many requests: try again in 3 s");
  });

  it("calls the signed-out listeners on a 401 that ends the sign-in only", async () => {
    vi.stubGlobal("fetch", answer(401, { error: { code: "unauthorized", message: "no" } }));
    const c = apiClient({ signedOut: (p) => p.startsWith("/me") });
    const l = vi.fn();
    c.onSignedOut(l);
    await c.get("/auth/otp/start").catch(() => undefined);
    expect(l).not.toHaveBeenCalled();
    await c.get("/me/x").catch(() => undefined);
    expect(l).toHaveBeenCalledOnce();
  });

  it("answers a read from the offline copy when the service cannot be reached, and keeps what it read", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => Promise.reject(new TypeError("offline"))));
    const c = apiClient({ signedOut: () => false, offline: async (p) => (p === "/me/kept" ? { kept: true } : undefined) });
    expect(await c.get("/me/kept")).toEqual({ kept: true });
    expect((await failure(c.post("/me/kept"))).code).toBe("network");
    vi.stubGlobal("fetch", answer(200, { ok: 1 }));
    const answered = vi.fn();
    const reached = vi.fn();
    const d = apiClient({ bearer: () => "t", signedOut: () => false, answered, reached });
    await d.get("/me/a");
    await d.post("/me/a");
    expect(answered.mock.calls).toEqual([["/me/a", { ok: 1 }, "t"]]);
    expect(reached).toHaveBeenCalledTimes(2);
  });
});

describe("format", () => {
  it("writes a record time in full, or short as the app does", () => {
    const t = "2020-03-04 05:06:07";
    expect(when(t)).toBe(new Date("2020-03-04T05:06:07Z").toLocaleString());
    expect(when(t, "short")).toBe(new Date("2020-03-04T05:06:07Z").toLocaleDateString([], { day: "numeric", month: "short", year: "numeric" }));
    expect(when(null)).toBe("");
    expect(when("soon", "short")).toBe("soon");
  });

  it("says an API error's message; any other failure's own with `own`, else a plain sentence", () => {
    const api = new ApiError(400, "validation", "Phone is not a phone number.");
    expect(errorText(api)).toBe("Phone is not a phone number.");
    expect(errorText(new Error("The passkey was not used."))).toBe("Something went wrong. Try again.");
    expect(errorText(new Error("The passkey was not used."), { own: true })).toBe("The passkey was not used.");
    expect(errorText("odd", { own: true })).toBe("odd");
  });

  it("writes a conversation's latest message as who wrote it and its start, or what it is", () => {
    const last = { direction: "out" as const, content_type: "text", preview: "It left today.", encrypted: false, sender_name: "Ana" };
    expect(lastMessageLine(last, "You", "Acme")).toBe("Ana: It left today.");
    expect(lastMessageLine({ ...last, sender_name: null }, "You", "Acme")).toBe("Acme: It left today.");
    expect(lastMessageLine({ ...last, direction: "in" }, "You", "Acme")).toBe("You: It left today.");
    expect(lastMessageLine({ ...last, preview: null, encrypted: true }, "You", "Acme")).toBe("Ana: 🔒 Encrypted message");
    expect(lastMessageLine({ ...last, preview: null, content_type: "image" }, "You", "Acme")).toBe("Ana: 📷 Photo");
  });
});
