//! End-user devices: created at login or when a key is published; the key directory and E2E sends read
//! their published identity keys.

use super::Db;

/// The device uuids of `phone` that have published an identity key.
pub async fn published_device_uuids(db: &Db, phone: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT device_uuid FROM devices WHERE phone = $1 AND identity_key_pub IS NOT NULL ORDER BY id",
    )
    .bind(phone)
    .fetch_all(db.reader())
    .await
}
