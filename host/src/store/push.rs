//! Web Push subscriptions: one per device of a user, replaced when the device subscribes again; an endpoint
//! belongs to one device (subscribing it for another user moves it).

use sqlx::Row;

use super::Db;
use crate::clock::Millis;

/// A device's subscription.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub id: i64,
    pub phone: String,
    pub device_uuid: String,
    pub endpoint: String,
    pub p256dh: String,
    pub auth: String,
    pub created_at: Millis,
}

const SELECT: &str = "SELECT id, phone, device_uuid, endpoint, p256dh, auth, created_at FROM push_subscriptions ";

fn from_row(row: &sqlx::any::AnyRow) -> Result<Subscription, sqlx::Error> {
    Ok(Subscription {
        id: row.try_get("id")?,
        phone: row.try_get("phone")?,
        device_uuid: row.try_get("device_uuid")?,
        endpoint: row.try_get("endpoint")?,
        p256dh: row.try_get("p256dh")?,
        auth: row.try_get("auth")?,
        created_at: row.try_get("created_at")?,
    })
}

/// The subscriptions one person keeps at most: a new one past it replaces their oldest.
pub const PER_PHONE: i64 = 10;

/// Subscribes the device (replacing its earlier subscription, and taking the endpoint from any other); past
/// [`PER_PHONE`] subscriptions of the phone, the oldest go.
pub async fn subscribe(
    db: &Db,
    phone: &str,
    device_uuid: &str,
    endpoint: &str,
    p256dh: &str,
    auth: &str,
    now: Millis,
) -> Result<Subscription, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("DELETE FROM push_subscriptions WHERE (phone = $1 AND device_uuid = $2) OR endpoint = $3")
        .bind(phone)
        .bind(device_uuid)
        .bind(endpoint)
        .execute(&mut *tx)
        .await?;
    let sql = const_format::concatcp!(
        "INSERT INTO push_subscriptions (phone, device_uuid, endpoint, p256dh, auth, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING ",
        "id, phone, device_uuid, endpoint, p256dh, auth, created_at"
    );
    let row = sqlx::query(sql)
        .bind(phone)
        .bind(device_uuid)
        .bind(endpoint)
        .bind(p256dh)
        .bind(auth)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query(
        "DELETE FROM push_subscriptions WHERE phone = $1 AND id NOT IN \
         (SELECT id FROM push_subscriptions WHERE phone = $1 ORDER BY id DESC LIMIT $2)",
    )
    .bind(phone)
    .bind(PER_PHONE)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    from_row(&row)
}

/// The device's subscription, if it has one.
pub async fn find(db: &Db, phone: &str, device_uuid: &str) -> Result<Option<Subscription>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE phone = $1 AND device_uuid = $2");
    sqlx::query(sql).bind(phone).bind(device_uuid).fetch_optional(db.reader()).await?.as_ref().map(from_row).transpose()
}

/// Every subscription of a user's devices.
pub async fn list_for_phone(db: &Db, phone: &str) -> Result<Vec<Subscription>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE phone = $1 ORDER BY id");
    sqlx::query(sql).bind(phone).fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// Ends the device's subscription; answers whether it had one.
pub async fn unsubscribe(db: &Db, phone: &str, device_uuid: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM push_subscriptions WHERE phone = $1 AND device_uuid = $2")
        .bind(phone)
        .bind(device_uuid)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Deletes a subscription the push service no longer knows (404, 410), unless it was replaced meanwhile.
pub async fn forget(db: &Db, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM push_subscriptions WHERE id = $1").bind(id).execute(db.writer()).await?;
    Ok(())
}
