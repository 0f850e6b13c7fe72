#!/usr/bin/env bash
# The whole-system benchmark table (run on demand, never in CI): a release `hubbub serve` on a fresh
# database per row, driven by wrk from this machine. Every row is printed with the ceiling measured in
# the same run, just before it: the same server answering its most trivial request (an unknown route, a
# JSON 404), so a row can be read against what the machine gave at that moment.
#
#   bash bench/all.sh                  # every row: SQLite and, when reachable, PostgreSQL
#   bash bench/all.sh messages flows   # only some groups: messages, flows, webhooks, streams, search,
#                                      # inbound and growth (these four not by default)
#   GROWTH_SIZES="0 1000000" bash bench/all.sh growth   # the send path on databases grown first
#   CONNECTIONS=128 DURATION=20s bash bench/all.sh
#   BOT_CONNECTIONS=2 bash bench/all.sh flows   # bot steps under lighter load (default 32)
#
# Rows:
# - POST /api/v1/messages, API-only process (HUBBUB_WORKERS=false) and the default process (delivery and
#   webhook workers beside the API). With workers, "drain" is how long after the load stopped the last
#   accepted message left the delivery queue (every message delivered: in the hub for linked users,
#   otherwise through the dev providers).
# - Bot steps over HTTP: events to one chat session of the sample chat bot (Rust), then of the Python and
#   JavaScript samples (flows/python-signup, flows/js-signup).
# - Webhook events: `cargo bench --bench webhooks` (10,000 events through the outbox to a local receiver).
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS="${CONNECTIONS:-64}"
BOT_CONNECTIONS="${BOT_CONNECTIONS:-32}"
DURATION="${DURATION:-10s}"
THREADS="${THREADS:-2}"
PG_URL="${HUBBUB_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
GROUPS_WANTED="${*:-messages flows webhooks}"
wants() { [[ " $GROUPS_WANTED " == *" $1 "* ]]; }

if wants flows; then bash flows/build.sh >/dev/null; fi
source bench/common.sh
PID=""
SCHEMAS=()
SECRET_KEY="$(head -c 32 /dev/urandom | base64)"
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
  for s in "${SCHEMAS[@]}"; do
    psql -q -h 127.0.0.1 -U postgres -d test -c "SET client_min_messages = warning; DROP SCHEMA $s CASCADE" >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
pg_schema() {
  local s="bench_$RANDOM$RANDOM"
  psql -q -h 127.0.0.1 -U postgres -d test -c "CREATE SCHEMA $s" >/dev/null
  SCHEMAS+=("$s")
  echo "$PG_URL?options=-c%20search_path%3D$s"
}


# Starts a host on database $1 (workers $2), with a partner whose key is in $KEY; $BASE is its API.
start_host() {
  local url="$1" workers="$2" port=$((20000 + RANDOM % 20000))
  export HUBBUB_DATABASE_URL="$url" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1 HUBBUB_LOG=warn \
    HUBBUB_RATE_LIMIT_PER_S=1000000 HUBBUB_RATE_LIMIT_BURST=1000000 HUBBUB_WORKERS="$workers" \
    HUBBUB_METRICS_TOKEN=$BENCH_METRICS_TOKEN HUBBUB_SECRET_KEY="$SECRET_KEY" HUBBUB_COMPONENT_CACHE_DIR="$WORK/components" HUBBUB_JWT_SECRET=$BENCH_JWT_SECRET
  KEY="$($BIN partner create --code "bench$RANDOM" --name Bench | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')"
  export HUBBUB_KEY="$KEY"
  # A database grown first (the growth rows): $SEED messages of this partner, as sends leave them.
  if [ "${SEED:-0}" != 0 ]; then
    HUBBUB_BENCH_DATABASE_URL="$url" HUBBUB_BENCH_MESSAGES="$SEED" HUBBUB_BENCH_AGE_DAYS="${SEED_AGE_DAYS:-0}" \
      cargo bench -q -p hubbub-host --bench growth \
      2>/dev/null | sed 's/^/  /'
  fi
  HUBBUB_RETENTION_EVERY_MS="${RETENTION_EVERY_MS:-300000}" "$BIN" serve &
  PID=$!
  BASE="http://127.0.0.1:$port/api/v1"
  for _ in $(seq 1 200); do
    if curl -sf "$BASE/openapi.json" >/dev/null; then
      # The partner keeps its messages $RETAIN_DAYS days (the purge row): the host's worker starts removing.
      if [ -n "${RETAIN_DAYS:-}" ]; then
        curl -sf -X PUT "$BASE/settings/retention" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
          -d "{\"messages_days\":$RETAIN_DAYS,\"webhook_deliveries_days\":$RETAIN_DAYS}" >/dev/null
        sleep 2
      fi
      return
    fi
    sleep 0.1
  done
  echo "the host did not start" >&2
  exit 1
}
stop_host() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }

# wrk's figures from its --latency output: "req/s p50 p99 requests".
figures() {
  awk '/Requests\/sec/ {rps=$2} $1=="50%" {p50=$2} $1=="99%" {p99=$2} /requests in/ {n=$1}
    END {printf "%.0f %s %s %d\n", rps, p50, p99, n}'
}
# The host's CPU time so far (user + system, in clock ticks of 10 ms), from /proc.
host_cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
ceiling() { wrk -t"$THREADS" -c"$CONNECTIONS" -d3s --latency "$BASE/nope" | figures | cut -d' ' -f1; }
backlog() { curl -sf -H "Authorization: Bearer $BENCH_METRICS_TOKEN" "${BASE%/api/v1}/metrics" | awk '$1=="hubbub_delivery_backlog" {print $2}'; }

ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 | $5 | $6 |"); echo "  $1: $2 req/s, p50 $3, p99 $4, drain $5 (ceiling $6/s)"; }

messages() {
  local name="$1" url="$2" workers="$3"
  start_host "$url" "$workers"
  local top; top="$(ceiling)"
  local cpu0; cpu0="$(host_cpu)"
  read -r rps p50 p99 requests < <(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s bench/post.lua "${BASE%/api/v1}" | figures)
  local cpu; cpu="$(awk -v t=$(( $(host_cpu) - cpu0 )) -v n="$requests" 'BEGIN {printf "%.0f us", t * 10000 / n}')"
  local drain="—"
  if [ "$workers" = true ]; then
    local stopped; stopped=$(date +%s%N)
    for _ in $(seq 1 1200); do [ "$(backlog)" = "0" ] && break; sleep 0.05; done
    drain="$(awk -v ms=$(( ($(date +%s%N) - stopped) / 1000000 )) 'BEGIN {printf "%.1f s", ms / 1000}')"
    [ "$(backlog)" = "0" ] || drain="> 60 s"
  fi
  local label="POST /api/v1/messages, $name, API only"
  [ "$workers" = true ] && label="POST /api/v1/messages, $name, with delivery + webhook workers"
  row "$label" "$rps ($cpu host CPU a request)" "$p50" "$p99" "$drain" "$top"
  stop_host
}

# Bot steps over HTTP: events to one session of a sample bot's chat, $BOT_CONNECTIONS connections.
# bot_steps CODE COMPONENT EVENT_JSON LABEL
bot_steps() {
  local code="$1" component="$2" event="$3" label="$4"
  start_host "sqlite://$WORK/flows-$code.db?mode=rwc" true
  local top; top="$(ceiling)"
  local auth=(-H "Authorization: Bearer $KEY" -H 'Content-Type: application/json')
  curl -sf -X POST "$BASE/bots" "${auth[@]}" -d "{\"code\":\"$code\",\"name\":\"$code\"}" >/dev/null
  curl -sf -X PUT "$BASE/bots/$code/component" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/wasm' \
    --data-binary @"target/wasm32-wasip2/release/$component.wasm" >/dev/null
  curl -sf -X POST "$BASE/accounts/link" "${auth[@]}" -d '{"phone":"+15551230000"}' >/dev/null
  local token session
  token="$($BIN user token +15551230000)"
  session="$(curl -sf -X POST "$BASE/me/bots/$code/sessions" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -d '{}' | sed -n 's/.*"session":"\([^"]*\)".*/\1/p')"
  cat > "$WORK/event.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
wrk.body = '$event'
LUA
  read -r rps p50 p99 _ < <(wrk -t"$THREADS" -c"$BOT_CONNECTIONS" -d"$DURATION" --latency -s "$WORK/event.lua" \
    "$BASE/me/bots/$code/sessions/$session/events" | figures)
  row "Bot steps over HTTP ($label, $BOT_CONNECTIONS connections), SQLite" "$rps" "$p50" "$p99" "—" "$top"
  stop_host
}

flows() {
  bot_steps chat chat '{"type":"text","text":"hello"}' "chat bot"
  bot_steps python-signup python-signup '{"type":"select","id":"plans"}' "Python chat"
  bot_steps js-signup js-signup '{"type":"select","id":"plans"}' "JavaScript chat"
}

webhooks() {
  local name="$1" url="$2"
  start_host "$url" false
  local top; top="$(ceiling)"
  stop_host
  local out
  out="$(HUBBUB_BENCH_DATABASE_URL="$url" cargo bench -q -p hubbub-host --bench webhooks 2>/dev/null)"
  local rate p50 p99
  rate="$(sed -n 's/.*throughput: \([0-9]*\) events.*/\1/p' <<<"$out")"
  p50="$(sed -n 's/.*p50 \([0-9.]* ms\).*/\1/p' <<<"$out")"
  p99="$(sed -n 's/.*p99 \([0-9.]* ms\).*/\1/p' <<<"$out")"
  row "Webhook events (10,000 through the outbox), $name; latency is enqueue → receipt" "$rate" "$p50" "$p99" "—" "$top"
}

if wants messages; then
  messages SQLite "sqlite://$WORK/api.db?mode=rwc" false
  messages SQLite "sqlite://$WORK/all.db?mode=rwc" true
  if pg_up; then
    messages PostgreSQL "$(pg_schema)" false
    messages PostgreSQL "$(pg_schema)" true
  fi
fi
if wants flows; then flows; fi
if wants webhooks; then
  webhooks SQLite "sqlite://$WORK/hooks.db?mode=rwc"
  if pg_up; then webhooks PostgreSQL "$(pg_schema)"; fi
fi

# The send path as the database grows (only when asked: `bash bench/all.sh growth`): the messages row with
# workers on a database first filled with each of $GROWTH_SIZES messages (default none, 1,000,000 and
# 10,000,000; `cargo bench --bench growth` writes them), on SQLite and, when reachable, PostgreSQL.
growth() {
  local name="$1" size url
  for size in ${GROWTH_SIZES:-0 1000000 10000000}; do
    if [ "$name" = SQLite ]; then url="sqlite://$WORK/grown-$size.db?mode=rwc"; else url="$(pg_schema)"; fi
    SEED="$size" messages "$name, $(echo "$size" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta') messages stored" "$url" "${GROWTH_WORKERS:-true}"
    rm -f "$WORK/grown-$size.db"*
  done
  # Sends while the retention worker removes a million messages two days old (kept one day).
  if [ "${GROWTH_PURGE:-1}" = 1 ]; then
    if [ "$name" = SQLite ]; then url="sqlite://$WORK/purged.db?mode=rwc"; else url="$(pg_schema)"; fi
    SEED=1000000 SEED_AGE_DAYS=2 RETAIN_DAYS=1 RETENTION_EVERY_MS=1000 \
      messages "$name, 1,000,000 messages two days old being purged (kept one day)" "$url" "${GROWTH_WORKERS:-true}"
    rm -f "$WORK/purged.db"*
  fi
}
if [[ " $GROUPS_WANTED " == *" growth "* ]]; then
  engines="${GROWTH_ENGINES:-SQLite PostgreSQL}"
  if [[ " $engines " == *" SQLite "* ]]; then growth SQLite; fi
  if [[ " $engines " == *" PostgreSQL "* ]] && pg_up; then growth PostgreSQL; fi
fi

# Live events (only when asked: `bash bench/all.sh streams`): 10,000 open streams on one host, their
# memory, sends with them open, send → event latency, a broadcast to every connected user.
if [[ " $GROUPS_WANTED " == *" streams "* ]]; then
  echo "== event streams (cargo bench --bench streams)"
  HUBBUB_BENCH_BIN="$(realpath "$BIN")" cargo bench -q -p hubbub-host --bench streams 2>/dev/null
fi

# Conversation search (only when asked: `bash bench/all.sh search`): 1,000,000 messages, an agent's searches
# through each engine's text index, p50/p95 per kind of search.
if [[ " $GROUPS_WANTED " == *" search "* ]]; then
  echo "== conversation search, SQLite (cargo bench --bench search)"
  HUBBUB_BENCH_BIN="$(realpath "$BIN")" cargo bench -q -p hubbub-host --bench search 2>/dev/null
  if pg_up; then
    echo "== conversation search, PostgreSQL"
    HUBBUB_BENCH_DATABASE_URL="$(pg_schema)" HUBBUB_BENCH_BIN="$(realpath "$BIN")" \
      cargo bench -q -p hubbub-host --bench search 2>/dev/null
  fi
fi

# Inbound WhatsApp → the bot's reply (only when asked: `bash bench/all.sh inbound`): 500 signed webhooks a
# second to the chat sample as the entry bot, the time to its reply at a fake Graph API, p50/p99.
if [[ " $GROUPS_WANTED " == *" inbound "* ]]; then
  bash flows/build.sh >/dev/null
  echo "== inbound WhatsApp to a bot's reply, SQLite (cargo bench --bench inbound)"
  HUBBUB_BENCH_BIN="$(realpath "$BIN")" cargo bench -q -p hubbub-host --bench inbound 2>/dev/null
  if pg_up; then
    echo "== inbound WhatsApp to a bot's reply, PostgreSQL"
    HUBBUB_BENCH_DATABASE_URL="$(pg_schema)" HUBBUB_BENCH_BIN="$(realpath "$BIN")" \
      cargo bench -q -p hubbub-host --bench inbound 2>/dev/null
  fi
fi

echo
echo "$(date -u +%F), $(nproc) cores, load generator on the same machine, $CONNECTIONS connections, $DURATION per row:"
echo
echo "| What | Per second | p50 | p99 | Backlog delivered after the load | Ceiling (JSON 404) |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
