//! Links that open one form screen of a session running on WhatsApp or SMS in the app, without a login
//! (migration 0027): kept as the SHA-256 of their token, used once, lapsing after a while.

use sqlx::Row;

use super::Db;
use crate::clock::Millis;

/// A form link, by its token's digest.
#[derive(Debug, Clone)]
pub struct FormLink {
    pub session_id: i64,
    /// The id of the screen it opens.
    pub screen: String,
    pub expires_at: Millis,
    pub used_at: Option<Millis>,
}

pub async fn create(
    db: &Db,
    token_hash: &str,
    session_id: i64,
    screen: &str,
    now: Millis,
    expires_at: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO form_links (token_hash, session_id, screen, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(token_hash)
    .bind(session_id)
    .bind(screen)
    .bind(now)
    .bind(expires_at)
    .execute(db.writer())
    .await?;
    Ok(())
}

pub async fn find(db: &Db, token_hash: &str) -> Result<Option<FormLink>, sqlx::Error> {
    let row = sqlx::query("SELECT session_id, screen, expires_at, used_at FROM form_links WHERE token_hash = $1")
        .bind(token_hash)
        .fetch_optional(db.reader())
        .await?;
    row.map(|r| {
        Ok(FormLink {
            session_id: r.try_get("session_id")?,
            screen: r.try_get("screen")?,
            expires_at: r.try_get("expires_at")?,
            used_at: r.try_get("used_at")?,
        })
    })
    .transpose()
}

/// Takes the link for one submission, and with it every other unused link of its session (a person sent
/// the link again gets a new one): `false` when it was used (or is being used) or has lapsed.
pub async fn claim(db: &Db, token_hash: &str, now: Millis) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE form_links SET used_at = $2 WHERE used_at IS NULL AND session_id = \
         (SELECT session_id FROM form_links WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2)",
    )
    .bind(token_hash)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() >= 1)
}

/// Gives a claimed link back (the bot could not take the submission: the person may send it again).
pub async fn release(db: &Db, token_hash: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE form_links SET used_at = NULL WHERE token_hash = $1")
        .bind(token_hash)
        .execute(db.writer())
        .await?;
    Ok(())
}
