#!/usr/bin/env bash
# Query plans of the hot statements on PostgreSQL with a million messages already stored (run on demand,
# never in CI): the host's migrations make a fresh schema, which is filled with 1,000,000 delivered
# messages (their state rows and succeeded webhook events) of which the newest 50,000 are still queued
# with their delivery jobs and pending events, 100,000 accounts (half claimed) and 50,000 devices; after ANALYZE, each statement is run under EXPLAIN ANALYZE
# (writes inside a transaction that is rolled back) and its plan printed.
#
#   bash bench/plans.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS="${ROWS:-1000000}"
PG_URL="${HUBBUB_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
source bench/common.sh
schema="plans_$RANDOM$RANDOM"
psql() { command psql -q -X -h 127.0.0.1 -U postgres -d test -v ON_ERROR_STOP=1 "$@"; }
psql -c "CREATE SCHEMA $schema"
trap 'psql -c "SET client_min_messages = warning; DROP SCHEMA $schema CASCADE" >/dev/null; rm -rf "$WORK"' EXIT

# The schema, by the host's own migrations, and one partner.
HUBBUB_DATABASE_URL="$PG_URL?options=-c%20search_path%3D$schema" HUBBUB_LOG=warn \
  HUBBUB_SECRET_KEY="$(head -c 32 /dev/urandom | base64)" "$BIN" partner create --code acme --name Acme >/dev/null

echo "filling $schema: $ROWS messages …"
psql <<SQL
SET search_path = $schema;
INSERT INTO messages (ref, partner_id, phone, direction, content_type, body, priority, content, state, channel, seq,
                      created_at, updated_at)
SELECT 'msg_' || g, 1, '+1555' || lpad((g % 100000)::text, 7, '0'), 'out', 'text', 'Your order has shipped',
       'notification', '{}', CASE WHEN g > $ROWS - 50000 THEN 'queued' ELSE 'delivered' END, 'whatsapp', 0, g, g
FROM generate_series(1, $ROWS) g;
INSERT INTO message_states (message_id, seq, state, channel, at) SELECT id, 0, 'queued', NULL, id FROM messages;
INSERT INTO delivery_jobs (message_id, next_attempt_at) SELECT id, id FROM messages WHERE state = 'queued';
INSERT INTO outbox_events (delivery_id, target, target_id, event, payload, ordering_key, state, attempts,
                           next_attempt_at, created_at, updated_at, after_id)
SELECT 'dlv_' || id, 'partner', 1, 'message.status', '{}', 'partner:1:message:' || id,
       CASE WHEN state = 'queued' THEN 'pending' ELSE 'succeeded' END, 0, id, id, id, 0
FROM messages;
INSERT INTO accounts (phone, state, created_at)
SELECT '+1555' || lpad(g::text, 7, '0'), CASE WHEN g % 2 = 0 THEN 'claimed' ELSE 'unclaimed' END, g
FROM generate_series(1, 100000) g;
INSERT INTO devices (device_uuid, phone, created_at)
SELECT 'dev-' || g, '+1555' || lpad((g * 2)::text, 7, '0'), g FROM generate_series(1, 50000) g;
INSERT INTO presence (phone, last_seen_at) SELECT phone, created_at FROM devices;
ANALYZE;
SQL

explain() {
  echo
  echo "== $1"
  psql -At <<SQL | sed 's/^/   /'
SET search_path = $schema;
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF) $2;
ROLLBACK;
SQL
}

now=$((ROWS + 10))
explain "delivery: claim 128 due jobs (store::deliveries::claim_due)" \
  "UPDATE delivery_jobs SET lease_until = $now + 5000 WHERE message_id IN (SELECT message_id FROM delivery_jobs
   WHERE next_attempt_at <= $now AND (lease_until IS NULL OR lease_until <= $now)
   ORDER BY next_attempt_at LIMIT 128 FOR UPDATE SKIP LOCKED) RETURNING message_id, resume"
explain "delivery: one message and its recipient (store::messages::find_to_deliver)" \
  "SELECT m.id, m.state, m.phone, p.name,
     (SELECT COUNT(*) FROM accounts a WHERE a.phone = m.phone AND a.state = 'claimed') AS claimed,
     (SELECT COUNT(*) FROM devices d WHERE d.phone = m.phone) AS devices,
     (SELECT s.last_seen_at FROM presence s WHERE s.phone = m.phone) AS last_seen
   FROM messages m JOIN partners p ON p.id = m.partner_id WHERE m.id = $ROWS"
explain "delivery: the state change (store::messages::transition_read_in)" \
  "UPDATE messages SET state = 'sent', channel = COALESCE('whatsapp', channel), seq = seq + 1, updated_at = $now
   WHERE id = $ROWS AND state IN ('queued') RETURNING seq, channel"
explain "delivery: its message.status event (store::outbox::enqueue)" \
  "INSERT INTO outbox_events (delivery_id, target, target_id, event, payload, ordering_key, state, last_error,
     next_attempt_at, created_at, updated_at, after_id)
   VALUES ('dlv_x', 'partner', 1, 'message.status', '{}', 'partner:1:message:$ROWS',
     CASE WHEN EXISTS (SELECT 1 FROM partners t WHERE t.id = 1 AND t.webhook_url IS NOT NULL) THEN 'pending' ELSE 'dead' END,
     NULL, $now, $now, $now,
     COALESCE((SELECT MAX(p.id) FROM outbox_events p WHERE p.ordering_key = 'partner:1:message:$ROWS'), 0))"
explain "webhooks: claim 64 due events (store::outbox::claim_due)" \
  "UPDATE outbox_events SET lease_until = $now + 5000 WHERE id IN (SELECT e.id FROM outbox_events e
   WHERE e.state = 'pending' AND e.next_attempt_at <= $now AND (e.lease_until IS NULL OR e.lease_until <= $now)
   AND (e.after_id = 0 OR COALESCE((SELECT p.state FROM outbox_events p WHERE p.id = e.after_id), '') <> 'pending')
   ORDER BY e.id LIMIT 64 FOR UPDATE SKIP LOCKED) RETURNING id"
explain "partner API: newest 50 of the partner's messages (store::messages::list_messages)" \
  "SELECT m.id FROM messages m JOIN partners p ON p.id = m.partner_id WHERE m.partner_id = 1
   ORDER BY m.id DESC LIMIT 50"
explain "app: a user's hub inbox, newest 50 (store::messages::list_hub)" \
  "SELECT m.id FROM messages m JOIN partners p ON p.id = m.partner_id WHERE m.phone = '+15550000042'
   AND m.conversation_id IS NULL ORDER BY m.id DESC LIMIT 50"
explain "metrics: the delivery backlog (store::deliveries::backlog)" \
  "SELECT COUNT(*) AS n, MIN(next_attempt_at) AS oldest FROM delivery_jobs"
explain "metrics: the webhook backlog (store::outbox::backlog)" \
  "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox_events WHERE state = 'pending'"
