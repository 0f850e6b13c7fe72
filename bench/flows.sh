#!/usr/bin/env bash
# Load benchmark of bot steps through the HTTP API (run on demand, not in CI): a release `hubbub serve`
# with the sample chat bot uploaded; wrk sends text events to one in-app chat session, each of which runs
# the guest (fresh instance, call, checks) and stores its state. Prints throughput and p50/p99.
# The runtime alone is measured by `cargo bench -p hubbub-host --bench runtime`.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS="${CONNECTIONS:-32}"
DURATION="${DURATION:-15s}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
bash flows/build.sh >/dev/null
cargo build --release -p hubbub-host --bin hubbub
BIN=target/release/hubbub
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

port=$((20000 + RANDOM % 20000))
export HUBBUB_DATABASE_URL="sqlite://$WORK/bench.db?mode=rwc" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1 \
  HUBBUB_LOG=warn HUBBUB_RATE_LIMIT_PER_S=1000000 HUBBUB_RATE_LIMIT_BURST=1000000 \
  HUBBUB_COMPONENT_CACHE_DIR="$WORK/components" HUBBUB_JWT_SECRET=bench-secret
KEY="$($BIN partner create --code acme --name Acme | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')"
"$BIN" serve &
base="http://127.0.0.1:$port/api/v1"
for _ in $(seq 1 100); do curl -sf "$base/openapi.json" >/dev/null && break; sleep 0.1; done
curl -sf -X POST "$base/bots" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"code":"chat","name":"Chat"}' >/dev/null
curl -sf -X PUT "$base/bots/chat/component" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/wasm' \
  --data-binary @target/wasm32-wasip2/release/chat.wasm >/dev/null
curl -sf -X POST "$base/accounts/link" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"phone":"+15551230000"}' >/dev/null
TOKEN="$($BIN user token +15551230000)"
SESSION="$(curl -sf -X POST "$base/me/bots/chat/sessions" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{}' \
  | sed -n 's/.*"session":"\([^"]*\)".*/\1/p')"

cat > "$WORK/event.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
wrk.body = '{"type":"text","text":"hello"}'
LUA
echo "== bot steps over HTTP: POST /me/bots/chat/sessions/{session}/events, $CONNECTIONS connections, $DURATION"
wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -s "$WORK/event.lua" "$base/me/bots/chat/sessions/$SESSION/events"
