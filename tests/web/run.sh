#!/usr/bin/env bash
# The web app's tests: Vitest (web/src/shared/e2e.ts against docs/e2e.md), then the browser tests (Playwright on
# Debian's Chromium, never a downloaded browser) against a real host with a temporary SQLite database.
# Env: HUBBUB_BIN (default target/debug/hubbub), HUBBUB_WEB_PORT (default: a free port in 18000-18999).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi

cd web
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
npm test
[ -f dist/index.html ] && [ -f dist/console/index.html ] && [ -f dist/dashboard/index.html ] && [ -z "$(find src index.html console dashboard public vite.config.ts vite.pages.config.ts -newer dist/index.html -print -quit)" ] || npm run build
cd "$ROOT"

BIN=${HUBBUB_BIN:-target/debug/hubbub}
[ -x "$BIN" ] || { echo "no host binary at $BIN (set HUBBUB_BIN)" >&2; exit 1; }
TMP=$(mktemp -d)
free_port() {
  for p in $(shuf -i 18000-18999 -n 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  return 1
}
PORT=${HUBBUB_WEB_PORT:-$(free_port)}
export HUBBUB_DATABASE_URL="sqlite://$TMP/h.db?mode=rwc" HUBBUB_DEV=1 HUBBUB_LISTEN="127.0.0.1:$PORT" \
  HUBBUB_PUBLIC_URL="http://127.0.0.1:$PORT" HUBBUB_COMPONENT_CACHE_DIR="$TMP/components" \
  HUBBUB_TWILIO_AUTH_TOKEN="web-test-twilio-token"
# A refused webhook is tried again only when a test says so (3h, 3v send deliveries again by hand): the
# first automatic retry, a minute later, never lands in the middle of a test.
export HUBBUB_WEBHOOK_BACKOFF_S="60,600,3600"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
"$BIN" serve >"$TMP/host.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  kill -0 "${PIDS[0]}" 2>/dev/null || { cat "$TMP/host.log" >&2; exit 1; }
  sleep 0.2
done
KEY=$("$BIN" partner create --code acme --name "Acme Corp" --platform | sed -n 's/.*"api_key" *: *"\([^"]*\)".*/\1/p')
[ -n "$KEY" ] || { echo "partner create printed no api_key" >&2; exit 1; }

BASE="http://127.0.0.1:$PORT"
mkdir -p target/web-screenshots
HUBBUB_WEB_BASE="$BASE" HUBBUB_API_URL="http://127.0.0.1:$PORT" HUBBUB_API_KEY="$KEY" HUBBUB_BIN="$BIN" \
  HUBBUB_WASM_DIR="${HUBBUB_WASM_DIR:-target/wasm32-wasip2/release}" HUBBUB_SHOTS=target/web-screenshots \
  node --test --test-concurrency=1 ${WEB_TEST_PATTERN:+--test-name-pattern="$WEB_TEST_PATTERN"} tests/web/app.test.mjs || { echo "--- host log (tail)" >&2; tail -n 50 "$TMP/host.log" >&2; exit 1; }
