#!/usr/bin/env bash
# Where the host's time goes under the POST /api/v1/messages load (run on demand, never in CI): a release
# `hubbub serve` on a fresh SQLite database, wrk for 12 s, and `perf record` (call graphs, 999 Hz) of the
# host for 8 s of it; prints the busiest threads and functions.
#
#   bash bench/profile.sh           # the default process: API, delivery and webhook workers
#   WORKERS=false bash bench/profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS="${WORKERS:-true}"
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }
source bench/common.sh

port=$((20000 + RANDOM % 20000))
export HUBBUB_DATABASE_URL="sqlite://$WORK/p.db?mode=rwc" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1 \
  HUBBUB_LOG=warn HUBBUB_RATE_LIMIT_PER_S=1000000 HUBBUB_RATE_LIMIT_BURST=1000000 HUBBUB_WORKERS="$WORKERS"
HUBBUB_KEY="$($BIN partner create --code acme --name Acme | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')"
export HUBBUB_KEY
"$BIN" serve &
pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/api/v1/openapi.json" >/dev/null && break; sleep 0.1; done
wrk -t2 -c64 -d12s -s bench/post.lua "http://127.0.0.1:$port" > "$WORK/wrk.txt" &
sleep 2
perf record -q -F 999 -g -p "$pid" -o "$WORK/perf.data" -- sleep 8 >/dev/null 2>&1
wait %2 2>/dev/null || true
grep "Requests/sec" "$WORK/wrk.txt"
echo "== threads"
perf report -i "$WORK/perf.data" --no-children --sort comm --stdio -g none 2>/dev/null | grep '%' | head -5
echo "== functions (self time)"
perf report -i "$WORK/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep '%' | head -25
