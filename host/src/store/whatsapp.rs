//! The WhatsApp customer-service window: when each phone last wrote to each of our numbers on WhatsApp; and the
//! business-scoped user ids (BSUID) WhatsApp's webhooks carry, with the phone each was seen with by the
//! number (of the account) that received them (migration 0031): a partner's signed webhook pairs only for its
//! own number.

use sqlx::{Any, Transaction};

use super::Db;
use crate::clock::Millis;

/// Records that `phone` wrote on WhatsApp to our number `sender` (of `account`) at `at` (a later message moves
/// the window; an older one, heard late, does not).
pub async fn record_inbound_in(
    tx: &mut Transaction<'_, Any>,
    account: &str,
    sender: &str,
    phone: &str,
    at: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO whatsapp_windows (account, sender, phone, last_inbound_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (account, sender, phone) DO UPDATE SET last_inbound_at = excluded.last_inbound_at \
         WHERE excluded.last_inbound_at > whatsapp_windows.last_inbound_at",
    )
    .bind(account)
    .bind(sender)
    .bind(phone)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// When `phone` last wrote on WhatsApp to our number `sender` (of `account`), if ever (a window kept from
/// before windows were a number's counts for any).
pub async fn last_inbound(db: &Db, account: &str, sender: &str, phone: &str) -> Result<Option<Millis>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT MAX(last_inbound_at) FROM whatsapp_windows WHERE phone = $3 \
         AND ((account = $1 AND sender = $2) OR (account = '' AND sender = ''))",
    )
    .bind(account)
    .bind(sender)
    .bind(phone)
    .fetch_one(db.reader())
    .await
}

/// The provider's id of the latest message `phone` sent to our WhatsApp number `sender`, if any.
pub async fn latest_inbound_ref(db: &Db, sender: &str, phone: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT provider_ref FROM inbound_messages WHERE phone = $1 AND channel = 'whatsapp' AND sender = $2 \
         ORDER BY id DESC LIMIT 1",
    )
    .bind(phone)
    .bind(sender)
    .fetch_optional(db.reader())
    .await
}

/// Keeps that WhatsApp's business-scoped user id `user_id`, writing to our number `sender` (of `account`), is
/// `phone` (the latest pairing wins).
pub async fn remember_user_in(
    tx: &mut Transaction<'_, Any>,
    account: &str,
    sender: &str,
    user_id: &str,
    phone: &str,
    at: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO whatsapp_users (account, sender, user_id, phone, seen_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (account, sender, user_id) DO UPDATE SET phone = excluded.phone, seen_at = excluded.seen_at",
    )
    .bind(account)
    .bind(sender)
    .bind(user_id)
    .bind(phone)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The phone a business-scoped user id was seen with by our number `sender` (of `account`), if ever.
pub async fn phone_of_user(db: &Db, account: &str, sender: &str, user_id: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT phone FROM whatsapp_users WHERE account = $1 AND sender = $2 AND user_id = $3")
        .bind(account)
        .bind(sender)
        .bind(user_id)
        .fetch_optional(db.reader())
        .await
}
