//! End-user devices: created at login or when a key is published; the key directory and E2E sends read
//! their published identity keys.

use super::Db;
use crate::clock::Millis;

/// The device uuids of `phone` that have published an identity key.
pub async fn published_device_uuids(db: &Db, phone: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT device_uuid FROM devices WHERE phone = $1 AND identity_key_pub IS NOT NULL ORDER BY id")
        .bind(phone)
        .fetch_all(db.reader())
        .await
}

/// Whether `phone` has at least one device (reached in-app when its account is claimed).
pub async fn has_device(db: &Db, phone: &str) -> Result<bool, sqlx::Error> {
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM devices WHERE phone = $1").bind(phone).fetch_one(db.reader()).await?;
    Ok(n > 0)
}

/// Records a device of `phone` (login or key publication). `Ok(false)` when the uuid belongs to another
/// phone's device.
pub async fn ensure_device_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    device_uuid: &str,
    phone: &str,
    platform: Option<&str>,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    sqlx::query(
        "INSERT INTO devices (device_uuid, phone, platform, key_version, last_seen_at, created_at) \
         VALUES ($1, $2, $3, 0, $4, $4) ON CONFLICT (device_uuid) DO NOTHING",
    )
    .bind(device_uuid)
    .bind(phone)
    .bind(platform)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let owner: String = sqlx::query_scalar("SELECT phone FROM devices WHERE device_uuid = $1")
        .bind(device_uuid)
        .fetch_one(&mut **tx)
        .await?;
    Ok(owner == phone)
}

/// Notes activity of `phone` (any `/me` call). Writes at most every 15 s per phone.
pub async fn touch_presence(db: &Db, phone: &str, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO presence (phone, last_seen_at) VALUES ($1, $2) ON CONFLICT (phone) DO UPDATE \
         SET last_seen_at = excluded.last_seen_at WHERE presence.last_seen_at < excluded.last_seen_at - 15000",
    )
    .bind(phone)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// When `phone` was last active, if ever.
pub async fn last_seen(db: &Db, phone: &str) -> Result<Option<Millis>, sqlx::Error> {
    sqlx::query_scalar("SELECT last_seen_at FROM presence WHERE phone = $1")
        .bind(phone)
        .fetch_optional(db.reader())
        .await
}
