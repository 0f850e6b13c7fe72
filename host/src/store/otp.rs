//! One-time codes (login, developer sign-up): stored as keyed digests, with expiry, a try budget and a
//! per-phone send limit.

use sqlx::Row;

use super::Db;
use crate::clock::Millis;
use crate::secrets::constant_time_eq;

/// Wrong tries that void a code.
pub const MAX_TRIES: i64 = 5;

/// How many codes were issued for `phone` and `purpose` since `since`: in all, and to the client address
/// `client` (the send limits).
pub async fn count_since(
    db: &Db,
    phone: &str,
    purpose: &str,
    client: &str,
    since: Millis,
) -> Result<(i64, i64), sqlx::Error> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS all_codes, CAST(COALESCE(SUM(CASE WHEN client_addr = $4 THEN 1 ELSE 0 END), 0) AS BIGINT) \
         AS from_client FROM otp_codes WHERE phone = $1 AND purpose = $2 AND created_at >= $3",
    )
    .bind(phone)
    .bind(purpose)
    .bind(since)
    .bind(client)
    .fetch_one(db.reader())
    .await?;
    Ok((row.try_get("all_codes")?, row.try_get("from_client")?))
}

/// A code to issue: its digest, what it was issued with, and who asked for it.
pub struct NewCode<'a> {
    pub code_hash: &'a str,
    /// What the code proves besides the phone (a developer sign-up's e-mail).
    pub payload: Option<&'a str>,
    pub client_addr: &'a str,
    pub expires_at: Millis,
}

/// Issues a new code (its digest). It voids the phone's earlier active codes for the same purpose that
/// carry the same payload; one with another payload stays valid, so the code of one sign-up cannot be
/// voided — nor its payload replaced — by someone else's request for the same phone.
pub async fn insert_code(
    db: &Db,
    phone: &str,
    purpose: &str,
    code: &NewCode<'_>,
    now: Millis,
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "UPDATE otp_codes SET state = 'void' WHERE phone = $1 AND purpose = $2 AND state = 'active' \
         AND COALESCE(payload, '') = COALESCE($3, '')",
    )
    .bind(phone)
    .bind(purpose)
    .bind(code.payload)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO otp_codes (phone, purpose, code_hash, payload, tries, state, expires_at, created_at, client_addr) \
         VALUES ($1, $2, $3, $4, 0, 'active', $5, $6, $7)",
    )
    .bind(phone)
    .bind(purpose)
    .bind(code.code_hash)
    .bind(code.payload)
    .bind(code.expires_at)
    .bind(now)
    .bind(code.client_addr)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// When the latest active code of `phone` for `purpose` issued with a payload other than `payload` lapses,
/// if there is one.
pub async fn other_pending(
    db: &Db,
    phone: &str,
    purpose: &str,
    payload: &str,
    now: Millis,
) -> Result<Option<Millis>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT MAX(expires_at) FROM otp_codes WHERE phone = $1 AND purpose = $2 AND state = 'active' \
         AND expires_at > $3 AND payload IS NOT NULL AND payload <> $4",
    )
    .bind(phone)
    .bind(purpose)
    .bind(now)
    .bind(payload)
    .fetch_one(db.reader())
    .await
}

/// A code that matched: what was issued with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedCode {
    /// What the code was issued for (a developer sign-up's e-mail), applied only now that it is verified.
    pub payload: Option<String>,
}

/// Checks a code against the phone's active codes for `purpose`. `Some` once per issued code: a match
/// consumes it (and voids the phone's other active codes for the purpose), with the payload it was issued
/// with; a miss counts a try on each active code, and the last allowed miss voids them. Expired or void
/// codes never match.
pub async fn consume_code(
    db: &Db,
    phone: &str,
    purpose: &str,
    code_hash: &str,
    now: Millis,
) -> Result<Option<UsedCode>, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE otp_codes SET state = 'expired' WHERE phone = $1 AND purpose = $2 AND state = 'active' AND expires_at <= $3")
        .bind(phone)
        .bind(purpose)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query(
        "SELECT id, code_hash, payload FROM otp_codes WHERE phone = $1 AND purpose = $2 AND state = 'active' \
         ORDER BY id DESC",
    )
    .bind(phone)
    .bind(purpose)
    .fetch_all(&mut *tx)
    .await?;
    // Every active code is compared, in constant time each, whichever matches.
    let mut matched = None;
    for row in &rows {
        let stored: String = row.try_get("code_hash")?;
        if constant_time_eq(&stored, code_hash) && matched.is_none() {
            matched = Some((row.try_get::<i64, _>("id")?, row.try_get::<Option<String>, _>("payload")?));
        }
    }
    let used = match matched {
        Some((id, payload)) => {
            let done = sqlx::query("UPDATE otp_codes SET state = 'used' WHERE id = $1 AND state = 'active'")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE otp_codes SET state = 'void' WHERE phone = $1 AND purpose = $2 AND state = 'active'")
                .bind(phone)
                .bind(purpose)
                .execute(&mut *tx)
                .await?;
            (done.rows_affected() == 1).then_some(UsedCode { payload })
        }
        None => {
            sqlx::query(
                "UPDATE otp_codes SET tries = tries + 1, state = CASE WHEN tries + 1 >= $1 THEN 'void' ELSE state END \
                 WHERE phone = $2 AND purpose = $3 AND state = 'active'",
            )
            .bind(MAX_TRIES)
            .bind(phone)
            .bind(purpose)
            .execute(&mut *tx)
            .await?;
            None
        }
    };
    tx.commit().await?;
    Ok(used)
}
