//! Partner organisations and their API keys (stored as SHA-256 digests only).

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, is_unique_violation};
use crate::clock::Millis;

#[derive(Debug, Clone)]
pub struct Partner {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub is_platform: bool,
    /// The configured event destination (`PUT /settings/webhook`), if any.
    pub webhook_url: Option<String>,
}

fn from_row(row: &AnyRow) -> Result<Partner, sqlx::Error> {
    Ok(Partner {
        id: row.try_get("id")?,
        code: row.try_get("code")?,
        name: row.try_get("name")?,
        is_platform: row.try_get::<i64, _>("is_platform")? != 0,
        webhook_url: row.try_get("webhook_url")?,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum CreatePartnerError {
    #[error("a partner with code {0:?} already exists")]
    Duplicate(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Inserts a partner with the digest of its first API key.
pub async fn insert_partner(
    db: &Db,
    code: &str,
    name: &str,
    is_platform: bool,
    key_hash: &str,
    key_prefix: &str,
    now: Millis,
) -> Result<Partner, CreatePartnerError> {
    let result = sqlx::query(
        "INSERT INTO partners (code, name, is_platform, key_hash, key_prefix, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         RETURNING id, code, name, is_platform, webhook_url",
    )
    .bind(code)
    .bind(name)
    .bind(is_platform as i64)
    .bind(key_hash)
    .bind(key_prefix)
    .bind(now)
    .fetch_one(db.writer())
    .await;
    match result {
        Ok(row) => Ok(from_row(&row)?),
        Err(e) if is_unique_violation(&e) => Err(CreatePartnerError::Duplicate(code.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// Replaces a partner's API key; the old one stops working at once. False when no such partner.
pub async fn replace_key(db: &Db, code: &str, key_hash: &str, key_prefix: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("UPDATE partners SET key_hash = $1, key_prefix = $2 WHERE code = $3")
        .bind(key_hash)
        .bind(key_prefix)
        .bind(code)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The partner whose key has this digest, with the stored digest for a constant-time re-check.
pub async fn find_by_key_hash(db: &Db, key_hash: &str) -> Result<Option<(Partner, String)>, sqlx::Error> {
    let row =
        sqlx::query("SELECT id, code, name, is_platform, webhook_url, key_hash FROM partners WHERE key_hash = $1")
            .bind(key_hash)
            .fetch_optional(db.reader())
            .await?;
    row.map(|r| Ok((from_row(&r)?, r.try_get("key_hash")?))).transpose()
}

pub async fn find_by_code(db: &Db, code: &str) -> Result<Option<Partner>, sqlx::Error> {
    let row = sqlx::query("SELECT id, code, name, is_platform, webhook_url FROM partners WHERE code = $1")
        .bind(code)
        .fetch_optional(db.reader())
        .await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find_by_id(db: &Db, id: i64) -> Result<Option<Partner>, sqlx::Error> {
    let row = sqlx::query("SELECT id, code, name, is_platform, webhook_url FROM partners WHERE id = $1")
        .bind(id)
        .fetch_optional(db.reader())
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// The partner's webhook secret (needed in the clear to sign).
pub async fn webhook_secret(db: &Db, partner_id: i64) -> Result<Option<String>, sqlx::Error> {
    let sealed: Option<String> = sqlx::query_scalar("SELECT webhook_secret FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await?;
    sealed.map(|s| db.keyring().open(SECRET_COLUMN, &s).map_err(super::sealing::to_sqlx)).transpose()
}

/// Where partners' webhook secrets are sealed (see `store::sealing`).
const SECRET_COLUMN: &str = "partners.webhook_secret";

/// Sets (or clears) the webhook URL; replaces the secret when `new_secret` is given.
pub async fn set_webhook(
    db: &Db,
    partner_id: i64,
    url: Option<&str>,
    new_secret: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE partners SET webhook_url = $1, webhook_secret = COALESCE($2, webhook_secret) WHERE id = $3")
        .bind(url)
        .bind(new_secret.map(|s| db.keyring().seal(SECRET_COLUMN, s)))
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// The platform partner (the first one created with `--platform`).
pub async fn find_platform(db: &Db) -> Result<Option<Partner>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT id, code, name, is_platform, webhook_url FROM partners WHERE is_platform = 1 ORDER BY id LIMIT 1",
    )
    .fetch_optional(db.reader())
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// The partner's fallback window after the hub, in seconds (`None`: the host's default; `Some(-1)`: the hub
/// only).
pub async fn hub_fallback(db: &Db, partner_id: i64) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT hub_fallback_after_s FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await
}

/// Sets the partner's fallback window after the hub (see [`hub_fallback`]).
pub async fn set_hub_fallback(db: &Db, partner_id: i64, seconds: Option<i64>) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE partners SET hub_fallback_after_s = $1 WHERE id = $2")
        .bind(seconds)
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(())
}
