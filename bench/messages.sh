#!/usr/bin/env bash
# Load benchmark of POST /api/v1/messages (run on demand, not in CI): starts a release `hubbub serve` on a
# fresh database, creates a partner, and drives it with wrk from this machine. Prints wrk's throughput
# and latency distribution (p50/p99) for SQLite and, when reachable, PostgreSQL: once with the background
# workers in the same process (delivery of every accepted message competes for the database), once as an
# API-only process (HUBBUB_WORKERS=false).
#
#   bash bench/messages.sh            # 64 connections, 20 s per backend
#   CONNECTIONS=128 DURATION=30s bash bench/messages.sh
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS="${CONNECTIONS:-64}"
DURATION="${DURATION:-20s}"
THREADS="${THREADS:-2}"
PG_URL="${HUBBUB_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release -p hubbub-host --bin hubbub
BIN=target/release/hubbub
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

cat > "$WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("HUBBUB_KEY")
counter = 0
request = function()
  counter = counter + 1
  local phone = string.format("+1555%07d", counter % 100000)
  return wrk.format(nil, "/api/v1/messages", nil, '{"phone":"' .. phone .. '","body":"Your order has shipped"}')
end
LUA

run() {
  local name="$1" url="$2" workers="${3:-true}"
  local port=$((20000 + RANDOM % 20000))
  export HUBBUB_DATABASE_URL="$url" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1 HUBBUB_LOG=warn \
    HUBBUB_RATE_LIMIT_PER_S=1000000 HUBBUB_RATE_LIMIT_BURST=1000000 HUBBUB_WORKERS="$workers"
  HUBBUB_KEY="$($BIN partner create --code "bench$RANDOM" --name Bench | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')"
  export HUBBUB_KEY
  "$BIN" serve &
  local pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/api/v1/openapi.json" >/dev/null && break; sleep 0.1; done
  echo
  echo "== $name (workers: $workers): POST /api/v1/messages, $CONNECTIONS connections, $DURATION"
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$WORK/post.lua" "http://127.0.0.1:$port"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

# The whole system in one process (API + delivery + webhooks), then the API role alone.
run "SQLite" "sqlite://$WORK/bench.db?mode=rwc" true
run "SQLite" "sqlite://$WORK/bench-api.db?mode=rwc" false
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  schema="bench_$RANDOM"
  psql -q -h 127.0.0.1 -U postgres -d test -c "CREATE SCHEMA $schema" >/dev/null
  run "PostgreSQL" "$PG_URL?options=-c%20search_path%3D$schema" true
  run "PostgreSQL" "$PG_URL?options=-c%20search_path%3D$schema" false
  psql -q -h 127.0.0.1 -U postgres -d test -c "SET client_min_messages = warning; DROP SCHEMA $schema CASCADE" >/dev/null
fi
