#!/usr/bin/env bash
# The analytics page's API calls for a partner with 10 M messages and 100,000 conversations over a year (run
# on demand, never in CI): a release `hubbub serve` on a fresh SQLite database (and PostgreSQL, when
# reachable) whose rollups hold what a year of such traffic leaves behind, then each call the page makes,
# one at a time, timed with curl (p50, p95, max) and the host's CPU time a call.
#
#   bash bench/analytics.sh
#   CALLS=200 bash bench/analytics.sh
#
# The rollups are seeded as the rollup worker leaves them (a row per hour, channel and template, and their
# sums by the day; per hour and agent): every hour of the year, 10 templates on each of the 3 channels plus the acceptances' row,
# 114 messages accepted per template and hour (9.99 M in all), and 11 conversations opened an hour
# (96,360) answered by 20 agents. The reports read only the rollups, never messages or conversations, so
# those tables are left empty: what a report costs is what these rows cost.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
CALLS="${CALLS:-100}"
PG_URL="${HUBBUB_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
PID=""
SCHEMA=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
  [ -n "$SCHEMA" ] && psql -q -h 127.0.0.1 -U postgres -d test -c "SET client_min_messages = warning; DROP SCHEMA $SCHEMA CASCADE" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The host's CPU time so far (user + system, in clock ticks of 10 ms), from /proc.
host_cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }

NOW_MS=$(( $(date +%s) * 1000 ))
START_MS=$(( (NOW_MS / 3600000 - 365 * 24) * 3600000 ))

# The seed, in SQL both engines take: $1 the partner's id (written in), hours from START_MS.
seed_sql() {
  local pid="$1" hours="$2"
  cat <<SQL
WITH RECURSIVE h(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM h WHERE n < $((hours - 1))),
t(tp) AS (SELECT 't0' UNION ALL SELECT 't1' UNION ALL SELECT 't2' UNION ALL SELECT 't3' UNION ALL SELECT 't4'
  UNION ALL SELECT 't5' UNION ALL SELECT 't6' UNION ALL SELECT 't7' UNION ALL SELECT 't8' UNION ALL SELECT 't9'),
c(ch, accepted, sent, delivered, rd, failed, paid, fallbacks) AS (
  SELECT '', 114, 0, 0, 0, 0, 0, 0 UNION ALL SELECT 'inapp', 0, 80, 75, 60, 0, 0, 0
  UNION ALL SELECT 'whatsapp', 0, 20, 19, 15, 0, 20, 10 UNION ALL SELECT 'sms', 0, 14, 13, 0, 1, 14, 5)
INSERT INTO message_rollups (partner_id, hour, channel, template, broadcast_id, accepted, sent, delivered, read,
  read_ms, failed, received, paid, fallbacks)
SELECT $pid, $START_MS + CAST(n AS BIGINT) * 3600000, ch, tp, 0, accepted, sent, delivered, rd, rd * 300000, failed, 0, paid, fallbacks
FROM h, t, c;
INSERT INTO message_rollups_daily (partner_id, day, channel, template, broadcast_id, accepted, sent, delivered, read,
  read_ms, failed, received, paid, fallbacks)
SELECT partner_id, hour - hour % 86400000, channel, template, broadcast_id, SUM(accepted), SUM(sent), SUM(delivered),
  SUM(read), SUM(read_ms), SUM(failed), SUM(received), SUM(paid), SUM(fallbacks)
FROM message_rollups WHERE partner_id = $pid GROUP BY 1, 2, 3, 4, 5;
WITH RECURSIVE h(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM h WHERE n < $((hours - 1))),
a(agent) AS (SELECT 0 UNION ALL SELECT agent + 1 FROM a WHERE agent < 20)
INSERT INTO conversation_rollups (partner_id, hour, agent_id, opened, resolved, resolution_ms, first_responses,
  first_response_ms, sla_breaches, ratings, rating_sum)
SELECT $pid, $START_MS + CAST(n AS BIGINT) * 3600000, agent, CASE WHEN agent = 0 THEN 11 ELSE 0 END,
  CASE WHEN agent = 0 THEN 0 ELSE 1 END, CASE WHEN agent = 0 THEN 0 ELSE 1800000 END,
  CASE WHEN agent = 0 THEN 0 ELSE 1 END, CASE WHEN agent = 0 THEN 0 ELSE 240000 END,
  CASE WHEN agent % 7 = 1 THEN 1 ELSE 0 END, CASE WHEN agent % 3 = 1 THEN 1 ELSE 0 END,
  CASE WHEN agent % 3 = 1 THEN 4 ELSE 0 END
FROM h, a;
SQL
}

# Times $CALLS calls of each path (one at a time, as a person opening the page); prints a table row each.
measure() {
  local engine="$1"
  local today from30 from365
  today=$(date -u +%F)
  from30=$(date -u -d "29 days ago" +%F)
  from365=$(date -u -d "364 days ago" +%F)
  for path in "analytics/messages?from=$from30&to=$today" "analytics/conversations?from=$from30&to=$today" \
    "analytics/messages?from=$from365&to=$today" "analytics/conversations?from=$from365&to=$today"; do
    curl -sf "$BASE/$path" -H "Authorization: Bearer $KEY" >/dev/null # warm
    local cpu0; cpu0="$(host_cpu)"
    for _ in $(seq 1 "$CALLS"); do
      curl -s -o /dev/null -w '%{time_total}\n' "$BASE/$path" -H "Authorization: Bearer $KEY"
    done | sort -n >"$WORK/times"
    local cpu=$(( $(host_cpu) - cpu0 )) days=30
    [[ $path == *"$from365"* ]] && days=365
    awk -v n="$CALLS" -v engine="$engine" -v path="${path%%\?*}" -v days="$days" -v cpu="$cpu" '
      { t[NR] = $1 * 1000 }
      END { printf "| %s | GET /api/v1/%s, %d days | %.1f ms | %.1f ms | %.1f ms | %.1f ms |\n", engine, path, days,
        t[int(n * 0.5)], t[int(n * 0.95)], t[n], cpu * 10 / n }' "$WORK/times"
  done
}

run() {
  local engine="$1" url="$2" port=$((20000 + RANDOM % 20000))
  export HUBBUB_DATABASE_URL="$url" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1 HUBBUB_LOG=warn \
    HUBBUB_SECRET_KEY="$(head -c 32 /dev/urandom | base64)" HUBBUB_COMPONENT_CACHE_DIR="$WORK/components" \
    HUBBUB_JWT_SECRET=$BENCH_JWT_SECRET HUBBUB_RATE_LIMIT_PER_S=1000000 HUBBUB_RATE_LIMIT_BURST=1000000
  KEY="$($BIN partner create --code "bench$RANDOM" --name Bench | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')"
  local seeded=$SECONDS
  if [ "$engine" = SQLite ]; then
    local file="${url#sqlite://}"
    file="${file%%\?*}"
    local pid; pid=$(sqlite3 "$file" "SELECT MAX(id) FROM partners")
    seed_sql "$pid" $((365 * 24)) | sqlite3 "$file"
  else
    local pid; pid=$(psql -qtA "$url" -c "SELECT MAX(id) FROM partners")
    seed_sql "$pid" $((365 * 24)) | psql -q "$url" >/dev/null
    psql -q "$url" -c "ANALYZE" >/dev/null
  fi
  echo "  seeded $engine in $((SECONDS - seeded)) s" >&2
  "$BIN" serve &
  PID=$!
  BASE="http://127.0.0.1:$port/api/v1"
  for _ in $(seq 1 200); do curl -sf "$BASE/openapi.json" >/dev/null && break; sleep 0.1; done
  local totals; totals=$(curl -sf "$BASE/analytics/messages?from=$(date -u -d '364 days ago' +%F)&to=$(date -u +%F)" -H "Authorization: Bearer $KEY" | python3 -c 'import json,sys; t=json.load(sys.stdin)["totals"]; print(t["accepted"], "messages accepted over the year")')
  echo "  $engine: $totals" >&2
  measure "$engine"
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
}

echo "| Engine | Call | p50 | p95 | max | host CPU a call |"
echo "|---|---|---|---|---|---|"
run SQLite "sqlite://$WORK/analytics.db?mode=rwc"
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  SCHEMA="bench_$RANDOM$RANDOM"
  psql -q -h 127.0.0.1 -U postgres -d test -c "CREATE SCHEMA $SCHEMA" >/dev/null
  run PostgreSQL "$PG_URL?options=-c%20search_path%3D$SCHEMA"
fi
