#!/usr/bin/env bash
# Fair guest slots, measured (on demand, never in CI): a release host, partner A flooding its bot with slow
# calls while partner B's users chat with B's bot (bench/fairness.py says what is timed).
#
#   bash bench/fairness.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash flows/build.sh >/dev/null
source bench/common.sh
port=$((20000 + RANDOM % 20000))
export HUBBUB_DATABASE_URL="sqlite://$WORK/fair.db?mode=rwc" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1 \
  HUBBUB_LOG=error HUBBUB_RATE_LIMIT_PER_S=1000000 HUBBUB_RATE_LIMIT_BURST=1000000 \
  HUBBUB_SECRET_KEY="$(head -c 32 /dev/urandom | base64)" HUBBUB_COMPONENT_CACHE_DIR="$WORK/components" \
  HUBBUB_JWT_SECRET="$BENCH_JWT_SECRET"
key() { $BIN partner create --code "$1" --name "$1" | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p'; }
KEY_A="$(key flooder)"
KEY_B="$(key quiet)"
TOKEN="$($BIN user token +15551230000)"
"$BIN" serve &
for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/api/v1/openapi.json" >/dev/null && break; sleep 0.1; done
python3 bench/fairness.py "http://127.0.0.1:$port/api/v1" "$KEY_A" "$KEY_B" "$TOKEN" target/wasm32-wasip2/release
