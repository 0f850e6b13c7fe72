//! Developer accounts and their keys (`sk_dev_…`, stored as digests): long-lived API keys from sign-up,
//! 12-hour session keys from sign-in; both listable by prefix and revocable.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::Db;
use crate::clock::Millis;

#[derive(Debug, Clone)]
pub struct Developer {
    pub id: i64,
    pub phone: String,
    pub email: Option<String>,
    pub verified: bool,
    pub webhook_url: Option<String>,
    pub created_at: Millis,
}

const COLUMNS: &str = "id, phone, email, verified_at, webhook_url, created_at";

fn from_row(r: &AnyRow) -> Result<Developer, sqlx::Error> {
    Ok(Developer {
        id: r.try_get("id")?,
        phone: r.try_get("phone")?,
        email: r.try_get("email")?,
        verified: r.try_get::<Option<i64>, _>("verified_at")?.is_some(),
        webhook_url: r.try_get("webhook_url")?,
        created_at: r.try_get("created_at")?,
    })
}

/// Records a sign-up for a phone that has none (an existing developer is left as it is).
pub async fn insert_signup(db: &Db, phone: &str, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO developers (phone, created_at) VALUES ($1, $2) ON CONFLICT (phone) DO NOTHING")
        .bind(phone)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Stores a developer's e-mail (once the code of the sign-up that gave it was verified).
pub async fn set_email(db: &Db, phone: &str, email: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE developers SET email = $1 WHERE phone = $2")
        .bind(email)
        .bind(phone)
        .execute(db.writer())
        .await?;
    Ok(())
}

pub async fn find_by_phone(db: &Db, phone: &str) -> Result<Option<Developer>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM developers WHERE phone = $1");
    let row = sqlx::query(sql).bind(phone).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find_by_id(db: &Db, id: i64) -> Result<Option<Developer>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM developers WHERE id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// Marks a developer verified; false when it already was (a concurrent verify lost).
pub async fn mark_verified(db: &Db, id: i64, now: Millis) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("UPDATE developers SET verified_at = $1 WHERE id = $2 AND verified_at IS NULL")
        .bind(now)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Stores a new key's digest.
pub async fn insert_key(
    db: &Db,
    developer_id: i64,
    key_hash: &str,
    prefix: &str,
    kind: &str,
    expires_at: Option<Millis>,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO developer_keys (developer_id, key_hash, prefix, kind, expires_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(developer_id)
    .bind(key_hash)
    .bind(prefix)
    .bind(kind)
    .bind(expires_at)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// The developer of a key digest that is neither revoked nor expired, with the stored digest.
pub async fn find_by_key_hash(
    db: &Db,
    key_hash: &str,
    now: Millis,
) -> Result<Option<(Developer, String)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT d.id, d.phone, d.email, d.verified_at, d.webhook_url, d.created_at, k.key_hash FROM developer_keys k \
         JOIN developers d ON d.id = k.developer_id \
         WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $2)",
    )
    .bind(key_hash)
    .bind(now)
    .fetch_optional(db.reader())
    .await?;
    row.map(|r| Ok((from_row(&r)?, r.try_get("key_hash")?))).transpose()
}

/// A developer key as listed: never the key itself.
#[derive(Debug, Clone)]
pub struct KeyListing {
    pub prefix: String,
    pub kind: String,
    pub expires_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
    pub created_at: Millis,
}

pub async fn list_keys(db: &Db, developer_id: i64) -> Result<Vec<KeyListing>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT prefix, kind, expires_at, revoked_at, created_at FROM developer_keys WHERE developer_id = $1 ORDER BY id DESC",
    )
    .bind(developer_id)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(KeyListing {
                prefix: r.try_get("prefix")?,
                kind: r.try_get("kind")?,
                expires_at: r.try_get("expires_at")?,
                revoked_at: r.try_get("revoked_at")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

/// Revokes one of the developer's keys by prefix; false when there is no such key.
pub async fn revoke_key(db: &Db, developer_id: i64, prefix: &str, now: Millis) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE developer_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE developer_id = $2 AND prefix = $3",
    )
    .bind(now)
    .bind(developer_id)
    .bind(prefix)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Messages the developer sent since `since` (the daily quota).
pub async fn sent_since(db: &Db, developer_id: i64, since: Millis) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE developer_id = $1 AND created_at >= $2")
        .bind(developer_id)
        .bind(since)
        .fetch_one(db.reader())
        .await
}

/// Where developers' webhook secrets are sealed (see `store::sealing`).
const SECRET_COLUMN: &str = "developers.webhook_secret";

pub async fn webhook_secret(db: &Db, id: i64) -> Result<Option<String>, sqlx::Error> {
    let sealed: Option<String> = sqlx::query_scalar("SELECT webhook_secret FROM developers WHERE id = $1")
        .bind(id)
        .fetch_one(db.reader())
        .await?;
    sealed.map(|s| db.keyring().open(SECRET_COLUMN, &s).map_err(super::sealing::to_sqlx)).transpose()
}

pub async fn set_webhook(db: &Db, id: i64, url: Option<&str>, new_secret: Option<&str>) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE developers SET webhook_url = $1, webhook_secret = COALESCE($2, webhook_secret) WHERE id = $3")
        .bind(url)
        .bind(new_secret.map(|s| db.keyring().seal(SECRET_COLUMN, s)))
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(())
}
