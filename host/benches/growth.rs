//! Fills a database with `HUBBUB_BENCH_MESSAGES` messages of its first partner, as sends leave them, for
//! the send path's figures as the database grows (`bash bench/all.sh growth`, which measures the sends on
//! it after; run on demand, never in CI).
//!
//! Each message is what a delivered send to one of 100,000 phones leaves (the phones `bench/post.lua` sends
//! to): the message, its two states (queued, sent), its attempt and its `message.status` webhook event,
//! written straight into the tables a batch at a time so that the engines' own indexes (SQLite's FTS5
//! trigger, PostgreSQL's `tsvector` table and GIN) fill as they would; the development sink's rows are not
//! written (a host with real providers has none). On PostgreSQL the tables are then analysed, as
//! autovacuum does on a running host.
//!
//! `HUBBUB_BENCH_DATABASE_URL` names the database (migrated, with its partner: `hubbub partner create`
//! first); `HUBBUB_SECRET_KEY` is its key; `HUBBUB_BENCH_AGE_DAYS` puts the messages that many days in the
//! past (for a retention purge to remove while sends go on).

use std::time::Instant;

use clap::Parser;
use hubbub_host::config::Config;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

/// Messages written a statement at a time.
const BATCH: i64 = 50_000;
/// The phones the messages go to, as `bench/post.lua`'s.
const PHONES: i64 = 100_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let total: i64 = std::env::var("HUBBUB_BENCH_MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let mut config = Args::try_parse_from(["bench"])?.config;
    config.database_url = std::env::var("HUBBUB_BENCH_DATABASE_URL")?;
    let postgres = config.database_url.starts_with("postgres");
    let db = hubbub_host::store::Db::open(&config, 2).await?;
    let w = db.writer();
    let partner: i64 = sqlx::query_scalar("SELECT MIN(id) FROM partners").fetch_one(w).await?;
    let code: String = sqlx::query_scalar("SELECT code FROM partners WHERE id = $1").bind(partner).fetch_one(w).await?;
    let started = Instant::now();
    // Numbers from..=to: SQLite's recursive CTE, PostgreSQL's generate_series.
    let numbers = |from: i64, to: i64| {
        if postgres {
            format!("(SELECT generate_series({from}::bigint, {to}::bigint) AS i) n")
        } else {
            format!(
                "(WITH RECURSIVE s(i) AS (SELECT {from} UNION ALL SELECT i + 1 FROM s WHERE i < {to}) SELECT i FROM s) n"
            )
        }
    };
    // Two milliseconds apart, the last `HUBBUB_BENCH_AGE_DAYS` days ago (default: just now).
    let age_days: i64 = std::env::var("HUBBUB_BENCH_AGE_DAYS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let now = chrono::Utc::now().timestamp_millis() - age_days * 86_400_000;
    let t0 = now - total.max(1) * 2;
    let phone = format!("'+1555' || substr(CAST(10000000 + n.i % {PHONES} AS TEXT), 2)");
    for from in (0..total).step_by(BATCH as usize) {
        let to = (from + BATCH).min(total) - 1;
        let mut tx = db.begin().await?;
        let first: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM messages").fetch_one(&mut *tx).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages (ref, partner_id, phone, direction, content_type, body, priority, content, \
             state, channel, seq, created_at, updated_at) \
             SELECT 'msg_seed' || n.i, {partner}, {phone}, 'out', 'text', \
             'Your order has shipped', 'notification', '{{}}', 'sent', 'whatsapp', 1, {t0} + n.i * 2, {t0} + n.i * 2 \
             FROM {}",
            numbers(from, to)
        )))
        .execute(&mut *tx)
        .await?;
        // The batch's messages: the ids after those written before it (nothing else writes meanwhile).
        let ids = format!("(SELECT id, created_at FROM messages WHERE id >= {first}) m");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO message_states (message_id, seq, state, channel, at) \
             SELECT m.id, 0, 'queued', NULL, m.created_at FROM {ids}"
        )))
        .execute(&mut *tx)
        .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO message_states (message_id, seq, state, channel, at) \
             SELECT m.id, 1, 'sent', 'whatsapp', m.created_at + 1 FROM {ids}"
        )))
        .execute(&mut *tx)
        .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO delivery_attempts (message_id, channel, state, at, kind, provider_ref) \
             SELECT m.id, 'whatsapp', 'sent', m.created_at + 1, 'delivery', 'wamid.seed' || m.id FROM {ids}"
        )))
        .execute(&mut *tx)
        .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO outbox_events (delivery_id, target, target_id, event, payload, ordering_key, state, \
             attempts, last_error, next_attempt_at, created_at, updated_at, after_id) \
             SELECT 'dlv_seed' || m.id, 'partner', {partner}, 'message.status', \
             '{{\"event\":\"message.status\",\"partner\":\"{code}\",\"message_id\":' || m.id || ',\"seq\":1,\"state\":\"sent\"}}', \
             'partner:{partner}:message:' || m.id, 'dead', 0, 'no webhook_url configured', m.created_at + 1, \
             m.created_at + 1, m.created_at + 1, 0 FROM {ids}"
        )))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    if postgres {
        sqlx::query("VACUUM ANALYZE").execute(w).await?;
    }
    let messages: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(w).await?;
    println!(
        "{} database: {messages} messages to {PHONES} phones written, with their states, attempts, events and \
         search rows, in {:.0} s",
        if postgres { "PostgreSQL" } else { "SQLite" },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
