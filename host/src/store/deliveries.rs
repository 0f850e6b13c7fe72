//! The delivery queue: one job per accepted message, claimed by workers with a lease (so a crashed
//! process's work is picked up again) and row locks that several processes skip past on PostgreSQL.

use sqlx::{Any, Transaction};

use super::{Backend, Db};
use crate::clock::Millis;

/// Queues a message for delivery, in the transaction that creates it.
pub async fn enqueue_in(tx: &mut Transaction<'_, Any>, message_id: i64, at: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO delivery_jobs (message_id, next_attempt_at) VALUES ($1, $2) ON CONFLICT (message_id) DO NOTHING",
    )
    .bind(message_id)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Claims up to `limit` due jobs for `lease_ms`; returns their message ids. A job whose lease ran out
/// (its worker died) is due again.
pub async fn claim_due(db: &Db, now: Millis, lease_ms: i64, limit: i64) -> Result<Vec<i64>, sqlx::Error> {
    let sql = match db.backend() {
        Backend::Postgres => {
            "UPDATE delivery_jobs SET lease_until = $1 WHERE message_id IN (SELECT message_id FROM delivery_jobs \
             WHERE next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until <= $2) \
             ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING message_id"
        }
        Backend::Sqlite => {
            "UPDATE delivery_jobs SET lease_until = $1 WHERE message_id IN (SELECT message_id FROM delivery_jobs \
             WHERE next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until <= $2) \
             ORDER BY next_attempt_at LIMIT $3) RETURNING message_id"
        }
    };
    sqlx::query_scalar(sql).bind(now + lease_ms).bind(now).bind(limit).fetch_all(db.writer()).await
}

/// Removes a finished job.
pub async fn finish_in(tx: &mut Transaction<'_, Any>, message_id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM delivery_jobs WHERE message_id = $1").bind(message_id).execute(&mut **tx).await?;
    Ok(())
}

/// Records one channel try of a message; `kind` is `delivery` or `alert` (the opaque alert about an
/// encrypted message).
pub async fn record_attempt_in(
    tx: &mut Transaction<'_, Any>,
    message_id: i64,
    kind: &str,
    channel: &str,
    state: &str,
    error: Option<&str>,
    at: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO delivery_attempts (message_id, kind, channel, state, error, at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(message_id)
    .bind(kind)
    .bind(channel)
    .bind(state)
    .bind(error)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Jobs not yet finished (tests and operators).
pub async fn pending_count(db: &Db) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) FROM delivery_jobs").fetch_one(db.reader()).await
}
