#!/usr/bin/env bash
# Counts the SQL statements the host runs per message, from acceptance to delivery (run on demand, never
# in CI): a release `hubbub serve` (API and workers in one process) on a fresh SQLite database logs every
# statement sqlx runs (`sqlx::query=debug`); N messages go in from 16 concurrent senders to phones without
# the app (so each goes out through the dev WhatsApp provider), and once the delivery queue is empty the
# log is counted by the statement's verb and table.
#
#   bash bench/statements.sh           # 400 messages
#   N=1000 HUBBUB_BENCH_BIN=/tmp/hubbub-old bash bench/statements.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N="${N:-400}"
source bench/common.sh

port=$((20000 + RANDOM % 20000))
export HUBBUB_DATABASE_URL="sqlite://$WORK/count.db?mode=rwc" HUBBUB_LISTEN="127.0.0.1:$port" HUBBUB_DEV=1 \
  HUBBUB_RATE_LIMIT_PER_S=1000000 HUBBUB_RATE_LIMIT_BURST=1000000 HUBBUB_METRICS_TOKEN=$BENCH_METRICS_TOKEN
KEY="$(HUBBUB_LOG=warn $BIN partner create --code acme --name Acme | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')"
HUBBUB_LOG="warn,sqlx::query=debug" NO_COLOR=1 "$BIN" serve > "$WORK/log" 2>&1 &
base="http://127.0.0.1:$port"
for _ in $(seq 1 100); do curl -sf "$base/api/v1/openapi.json" >/dev/null && break; sleep 0.1; done
sleep 1
before=$(wc -l < "$WORK/log")

seq 1 "$N" | xargs -P 16 -I{} curl -sf -o /dev/null -X POST "$base/api/v1/messages" \
  -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"phone":"+1555000{}","body":"Your order has shipped"}'
for _ in $(seq 1 600); do
  left=$(curl -sf -H "Authorization: Bearer $BENCH_METRICS_TOKEN" "$base/metrics" | awk '$1=="hubbub_delivery_backlog" {print $2}')
  [ "$left" = "0" ] && break
  sleep 0.1
done
sleep 1

# One log line per statement; its `summary` is the statement's first words.
tail -n +"$((before + 1))" "$WORK/log" | grep 'sqlx::query' | grep -v 'FROM _sqlx_migrations' \
  | sed -n 's/.*summary="\([^"]*\)".*/\1/p' \
  | awk '{ verb = toupper($1); what = verb;
           for (i = 2; i <= NF; i++) if (toupper($i) == "INTO" || toupper($i) == "FROM" || verb == "UPDATE") {
             what = verb " " (verb == "UPDATE" ? $2 : $(i + 1)); break }
           count[what]++; total++ }
         END { for (w in count) printf "%8.2f  %s\n", count[w] / n, w; printf "%8.2f  all statements per message\n", total / n }' n="$N" \
  | sort -k2
echo "($N messages, accepted and delivered; metrics scrapes included)"
