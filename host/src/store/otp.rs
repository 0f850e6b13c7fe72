//! One-time codes (login, developer sign-up): stored as keyed digests, with expiry, a try budget and a
//! per-phone send limit.

use sqlx::Row;

use super::Db;
use crate::clock::Millis;
use crate::secrets::constant_time_eq;

/// Wrong tries that void a code.
pub const MAX_TRIES: i64 = 5;

/// How many codes were issued for `phone` and `purpose` since `since` (the send limit).
pub async fn count_since(db: &Db, phone: &str, purpose: &str, since: Millis) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) FROM otp_codes WHERE phone = $1 AND purpose = $2 AND created_at >= $3")
        .bind(phone)
        .bind(purpose)
        .bind(since)
        .fetch_one(db.reader())
        .await
}

/// Issues a new code (its digest), voiding the phone's earlier active codes for the same purpose.
pub async fn insert_code(
    db: &Db,
    phone: &str,
    purpose: &str,
    code_hash: &str,
    payload: Option<&str>,
    expires_at: Millis,
    now: Millis,
) -> Result<(), sqlx::Error> {
    let mut tx = db.writer().begin().await?;
    sqlx::query("UPDATE otp_codes SET state = 'void' WHERE phone = $1 AND purpose = $2 AND state = 'active'")
        .bind(phone)
        .bind(purpose)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO otp_codes (phone, purpose, code_hash, payload, tries, state, expires_at, created_at) \
         VALUES ($1, $2, $3, $4, 0, 'active', $5, $6)",
    )
    .bind(phone)
    .bind(purpose)
    .bind(code_hash)
    .bind(payload)
    .bind(expires_at)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// A code that matched: what was issued with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedCode {
    /// What the code was issued for (a developer sign-up's e-mail), applied only now that it is verified.
    pub payload: Option<String>,
}

/// Checks a code. `Some` once per issued code: a match consumes it; a miss counts a try, and the last
/// allowed miss voids it. Expired or void codes never match.
pub async fn consume_code(
    db: &Db,
    phone: &str,
    purpose: &str,
    code_hash: &str,
    now: Millis,
) -> Result<Option<UsedCode>, sqlx::Error> {
    let mut tx = db.writer().begin().await?;
    let row = sqlx::query(
        "SELECT id, code_hash, payload, tries, expires_at FROM otp_codes \
         WHERE phone = $1 AND purpose = $2 AND state = 'active' ORDER BY id DESC LIMIT 1",
    )
    .bind(phone)
    .bind(purpose)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let id: i64 = row.try_get("id")?;
    let stored: String = row.try_get("code_hash")?;
    let expires_at: i64 = row.try_get("expires_at")?;
    if expires_at <= now {
        sqlx::query("UPDATE otp_codes SET state = 'expired' WHERE id = $1").bind(id).execute(&mut *tx).await?;
        tx.commit().await?;
        return Ok(None);
    }
    let matched = constant_time_eq(&stored, code_hash);
    let done = if matched {
        sqlx::query("UPDATE otp_codes SET state = 'used' WHERE id = $1 AND state = 'active'")
            .bind(id)
            .execute(&mut *tx)
            .await?
    } else {
        sqlx::query(
            "UPDATE otp_codes SET tries = tries + 1, \
             state = CASE WHEN tries + 1 >= $1 THEN 'void' ELSE state END WHERE id = $2 AND state = 'active'",
        )
        .bind(MAX_TRIES)
        .bind(id)
        .execute(&mut *tx)
        .await?
    };
    tx.commit().await?;
    let payload: Option<String> = row.try_get("payload")?;
    Ok((matched && done.rows_affected() == 1).then_some(UsedCode { payload }))
}
