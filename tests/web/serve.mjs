// A stand-in for the host's web serving, for hosts that serve only the API: serves web/dist with the
// host's CSP and the index.html fallback for app paths, and proxies /api/ to HUBBUB_UPSTREAM.
// Usage: HUBBUB_UPSTREAM=http://127.0.0.1:18001 PORT=18002 node tests/web/serve.mjs
import { createReadStream, existsSync, statSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../web/dist");
const upstream = new URL(process.env.HUBBUB_UPSTREAM ?? "http://127.0.0.1:18080");
const port = Number(process.env.PORT ?? 18081);
export const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob: https:; media-src 'self' blob: https:; frame-src 'self'; connect-src 'self'; worker-src 'self'; manifest-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".png": "image/png", ".webmanifest": "application/manifest+json", ".json": "application/json" };

http
  .createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname.startsWith("/api/") || url.pathname === "/healthz") {
      const p = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
      });
      p.on("error", () => (res.writeHead(502), res.end()));
      req.pipe(p);
      return;
    }
    let file = path.join(root, path.normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, ""));
    if (!file.startsWith(root) || !existsSync(file) || statSync(file).isDirectory()) {
      if (!(req.headers.accept ?? "").includes("text/html")) return res.writeHead(404).end();
      file = path.join(root, "index.html");
    }
    res.writeHead(200, { "Content-Type": TYPES[path.extname(file)] ?? "application/octet-stream", "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff" });
    createReadStream(file).pipe(res);
  })
  .listen(port, "127.0.0.1", () => console.log(`serving ${root} on http://127.0.0.1:${port}, /api -> ${upstream}`));
