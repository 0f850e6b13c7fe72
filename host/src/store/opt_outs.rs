//! Who asked not to hear from one of our senders on a channel (SMS's STOP keywords, WhatsApp's block), kept
//! per phone, channel and sender, and the sender's account whose signed webhook told us (migrations 0026,
//! 0031: empty for the host's own, else a partner's own sender's), so a partner's webhook reaches only its
//! own senders' opt-outs. Delivery skips the channel for them.

use super::Db;
use crate::clock::Millis;
use crate::names::Channel;

/// Records that `phone` opted out of `sender` (of `account`) on `channel` (again: the latest reason and time).
pub async fn set_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    phone: &str,
    channel: Channel,
    account: &str,
    sender: &str,
    reason: &str,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO opt_outs (phone, channel, account, sender, reason, at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (phone, channel, account, sender) DO UPDATE SET reason = excluded.reason, at = excluded.at",
    )
    .bind(phone)
    .bind(channel.as_str())
    .bind(account)
    .bind(sender)
    .bind(reason)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Clears `phone`'s opt-out of `sender` (of `account`) on `channel`, if any.
pub async fn clear_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    phone: &str,
    channel: Channel,
    account: &str,
    sender: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM opt_outs WHERE phone = $1 AND channel = $2 AND account = $3 AND sender = $4")
        .bind(phone)
        .bind(channel.as_str())
        .bind(account)
        .bind(sender)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The reason of a WhatsApp opt-out that keeps out marketing templates only (error 131050: the person
/// stopped marketing messages from the business).
pub const MARKETING: &str = "marketing";

/// Why `phone` opted out of `sender` (of `account`) on `channel`, if it did (`stop`, [`MARKETING`], …).
pub async fn reason(
    db: &Db,
    phone: &str,
    channel: Channel,
    account: &str,
    sender: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT reason FROM opt_outs WHERE phone = $1 AND channel = $2 AND account = $3 AND sender = $4")
        .bind(phone)
        .bind(channel.as_str())
        .bind(account)
        .bind(sender)
        .fetch_optional(db.reader())
        .await
}
