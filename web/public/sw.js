// Hubbub service worker: caches the app shell (index.html and the built assets) so the app opens
// offline or on a bad connection. API responses are never cached.
const CACHE = "hubbub-shell-v1";
const SHELL = ["/", "/manifest.webmanifest", "/icon.svg", "/icon-192.png", "/icon-512.png"];

self.addEventListener("install", (event) => {
  // One missing file must not stop the worker from installing.
  event.waitUntil(
    caches
      .open(CACHE)
      .then(async (c) => {
        await Promise.allSettled(SHELL.map((u) => fetch(u, { headers: { Accept: "text/html,*/*" } }).then((r) => r.ok && c.put(u, r))));
        // The built (hashed) assets index.html loads.
        const index = await c.match("/");
        const html = index ? await index.clone().text() : "";
        const assets = [...new Set(html.match(/\/assets\/[^"']+/g) ?? [])];
        await Promise.allSettled(assets.map((u) => fetch(u).then((r) => r.ok && c.put(u, r))));
      })
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const req = event.request;
  const url = new URL(req.url);
  // The API, the host's own pages (the dev checkout `/pay/…`), the partner console and the developer portal
  // are never the app: not cached, not served from here.
  const elsewhere = ["/api/", "/pay/", "/console", "/dashboard"].some((p) => url.pathname.startsWith(p));
  if (req.method !== "GET" || url.origin !== self.location.origin || elsewhere) return;
  if (req.mode === "navigate") {
    // App pages: the network first (fresh deploys), the cached shell when offline.
    event.respondWith(
      fetch(req)
        .then((res) => {
          if (res.ok) caches.open(CACHE).then((c) => c.put("/", res.clone()));
          return res;
        })
        .catch(() => caches.match("/").then((r) => r || Response.error())),
    );
    return;
  }
  if (url.pathname.startsWith("/assets/")) {
    // Hashed, immutable build assets: the cache first.
    event.respondWith(
      caches.match(req).then(
        (hit) =>
          hit ||
          fetch(req).then((res) => {
            if (res.ok) {
              const copy = res.clone();
              caches.open(CACHE).then((c) => c.put(req, copy));
            }
            return res;
          }),
      ),
    );
    return;
  }
  event.respondWith(caches.match(req).then((hit) => hit || fetch(req)));
});

// Web Push: a push carries {title, body, tag, url, ack} (encrypted for this device; an encrypted message's
// push says only who it is from). The worker tells the host it arrived (the message becomes delivered) and
// shows a notification unless the app is on screen; one tag per partner or conversation keeps one
// notification each. A tap opens the message in the app.
const APP_PATH = /^\/(?!\/)/;
self.addEventListener("push", (event) => {
  let n = {};
  try {
    n = event.data ? event.data.json() : {};
  } catch {
    n = {};
  }
  event.waitUntil(
    (async () => {
      if (typeof n.ack === "string" && n.ack.startsWith("/api/v1/push/ack/")) await fetch(n.ack, { method: "POST" }).catch(() => {});
      const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      if (windows.some((w) => w.visibilityState === "visible" && w.focused)) return;
      await self.registration.showNotification(n.title || "Hubbub", {
        body: n.body || "New message",
        tag: n.tag || undefined,
        renotify: Boolean(n.tag),
        icon: "/icon-192.png",
        badge: "/icon-192.png",
        data: { url: typeof n.url === "string" && APP_PATH.test(n.url) ? n.url : "/" },
      });
    })(),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const path = event.notification.data?.url || "/";
  event.waitUntil(
    (async () => {
      const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      const open = windows.find((w) => new URL(w.url).origin === self.location.origin);
      if (open) {
        open.postMessage({ type: "open", url: path });
        return open.focus();
      }
      return self.clients.openWindow(path);
    })(),
  );
});
