//! The WhatsApp customer-service window: when each phone last wrote to the business on WhatsApp.

use super::Db;
use crate::clock::Millis;

/// Records that `phone` wrote on WhatsApp at `at` (a later message moves the window; an older one, heard
/// late, does not).
pub async fn record_inbound(db: &Db, phone: &str, at: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO whatsapp_windows (phone, last_inbound_at) VALUES ($1, $2) \
         ON CONFLICT (phone) DO UPDATE SET last_inbound_at = excluded.last_inbound_at \
         WHERE excluded.last_inbound_at > whatsapp_windows.last_inbound_at",
    )
    .bind(phone)
    .bind(at)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// When `phone` last wrote on WhatsApp, if ever.
pub async fn last_inbound(db: &Db, phone: &str) -> Result<Option<Millis>, sqlx::Error> {
    sqlx::query_scalar("SELECT last_inbound_at FROM whatsapp_windows WHERE phone = $1")
        .bind(phone)
        .fetch_optional(db.reader())
        .await
}
