//! Messages users send from WhatsApp or SMS, as the providers' webhooks bring them: each kept once by its
//! provider's id, then routed by `crate::inbound` (migration 0026).

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, decode_name};
use crate::clock::Millis;
use crate::names::{Channel, InboundState};

/// A message as a provider's webhook brought it.
#[derive(Debug, Clone)]
pub struct NewInbound {
    pub channel: Channel,
    /// The provider's id of the message (`MessageSid`, `wamid.…`).
    pub provider_ref: String,
    /// Who wrote (E.164; empty when WhatsApp gave only a business-scoped user id never seen with a phone).
    pub phone: String,
    /// WhatsApp's business-scoped user id of who wrote (BSUID), when the webhook carried one.
    pub user_id: Option<String>,
    /// Which of our senders received it (our number, messaging service or WhatsApp phone number id).
    pub sender: String,
    /// The account of that sender whose signature vouched for it: empty for the host's own, else a partner's
    /// own sender's (`store::senders`).
    pub account: String,
    /// Its text, if it has one (a reply button's title, a list row's title).
    pub body: Option<String>,
    /// The message as the provider described it (media, location, the choice made …).
    pub content: Value,
    /// The provider's id of our message it answers (WhatsApp's `context.id`).
    pub context_ref: Option<String>,
    pub received_at: Millis,
}

/// A kept inbound message.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub id: i64,
    pub channel: Channel,
    pub provider_ref: String,
    pub phone: String,
    pub sender: String,
    /// As [`NewInbound::account`].
    pub account: String,
    pub body: Option<String>,
    pub content: Value,
    pub context_ref: Option<String>,
    pub state: InboundState,
    pub message_id: Option<i64>,
    pub received_at: Millis,
}

const COLUMNS: &str = "SELECT id, channel, provider_ref, phone, sender, account, body, content, context_ref, state, \
    message_id, received_at FROM inbound_messages ";

fn from_row(row: &AnyRow) -> Result<Inbound, sqlx::Error> {
    let content: String = row.try_get("content")?;
    Ok(Inbound {
        id: row.try_get("id")?,
        channel: decode_name(row, "channel")?,
        provider_ref: row.try_get("provider_ref")?,
        phone: row.try_get("phone")?,
        sender: row.try_get("sender")?,
        account: row.try_get("account")?,
        body: row.try_get("body")?,
        content: serde_json::from_str(&content).unwrap_or(Value::Null),
        context_ref: row.try_get("context_ref")?,
        state: decode_name(row, "state")?,
        message_id: row.try_get("message_id")?,
        received_at: row.try_get("received_at")?,
    })
}

/// Keeps a message; `false` when the provider's id was seen already (a retried or replayed webhook).
pub async fn record_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, m: &NewInbound) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO inbound_messages (channel, provider_ref, phone, sender, body, content, context_ref, state, \
         received_at, user_id, account) VALUES ($1, $2, $3, $4, $5, $6, $7, 'received', $8, $9, $10) \
         ON CONFLICT (channel, provider_ref) DO NOTHING",
    )
    .bind(m.channel.as_str())
    .bind(&m.provider_ref)
    .bind(&m.phone)
    .bind(&m.sender)
    .bind(&m.body)
    .bind(m.content.to_string())
    .bind(&m.context_ref)
    .bind(m.received_at)
    .bind(&m.user_id)
    .bind(&m.account)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The oldest messages not routed yet.
pub async fn waiting(db: &Db, limit: i64) -> Result<Vec<Inbound>, sqlx::Error> {
    waiting_after(db, 0, limit).await
}

/// The oldest messages not routed yet after id `after`.
pub async fn waiting_after(db: &Db, after: i64, limit: i64) -> Result<Vec<Inbound>, sqlx::Error> {
    let sql = const_format::concatcp!(COLUMNS, "WHERE state = 'received' AND id > $1 ORDER BY id LIMIT $2");
    sqlx::query(sql).bind(after).bind(limit).fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// A kept message by its provider's id.
pub async fn find(db: &Db, channel: Channel, provider_ref: &str) -> Result<Option<Inbound>, sqlx::Error> {
    let sql = const_format::concatcp!(COLUMNS, "WHERE channel = $1 AND provider_ref = $2");
    let row = sqlx::query(sql).bind(channel.as_str()).bind(provider_ref).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// How many times routing a message may fail before it is set aside as `failed`.
pub const MAX_ATTEMPTS: i64 = 10;

/// Records that routing message `id` failed: after [`MAX_ATTEMPTS`] it is `failed`, and waits no more.
pub async fn failed(db: &Db, id: i64, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE inbound_messages SET attempts = attempts + 1, \
         state = CASE WHEN attempts + 1 >= $1 THEN 'failed' ELSE state END, \
         routed_at = CASE WHEN attempts + 1 >= $1 THEN $2 ELSE routed_at END WHERE id = $3 AND state = 'received'",
    )
    .bind(MAX_ATTEMPTS)
    .bind(now)
    .bind(id)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Marks a waiting message as routed to `state` (and the message it became), in the transaction that does
/// it: `false` when it was not waiting any more (another host took it), and the caller rolls back.
pub async fn settle_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: i64,
    state: InboundState,
    message_id: Option<i64>,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE inbound_messages SET state = $1, message_id = $2, routed_at = $3 WHERE id = $4 AND state = 'received'",
    )
    .bind(state.as_str())
    .bind(message_id)
    .bind(now)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether `phone` was sent the polite reply on `channel` since `since` (it gets one a day at most).
pub async fn replied_since(db: &Db, phone: &str, channel: Channel, since: Millis) -> Result<bool, sqlx::Error> {
    let found: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM inbound_messages WHERE phone = $1 AND channel = $2 AND replied = 1 AND received_at >= $3 \
         LIMIT 1",
    )
    .bind(phone)
    .bind(channel.as_str())
    .bind(since)
    .fetch_optional(db.reader())
    .await?;
    Ok(found.is_some())
}

/// Records that the polite reply to message `id` was sent.
pub async fn mark_replied(db: &Db, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE inbound_messages SET replied = 1 WHERE id = $1").bind(id).execute(db.writer()).await?;
    Ok(())
}

/// Takes a waiting message for a step of bot session `session_id` (`routed`), before the bot is called, so
/// that no other host calls the bot with it too: `false` when it was not waiting any more.
pub async fn settle_to_session_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: i64,
    session_id: i64,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE inbound_messages SET state = 'routed', session_id = $1, routed_at = $2 WHERE id = $3 AND state = 'received'",
    )
    .bind(session_id)
    .bind(now)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Puts back a message taken by [`settle_to_session_in`] whose bot could not be called now (busy), counting the
/// attempt: it is routed again on a later pass (and set aside after [`MAX_ATTEMPTS`]).
pub async fn unsettle(db: &Db, id: i64, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE inbound_messages SET session_id = NULL, routed_at = NULL, state = 'received' WHERE id = $1 AND state = 'routed'",
    )
    .bind(id)
    .execute(db.writer())
    .await?;
    failed(db, id, now).await
}
