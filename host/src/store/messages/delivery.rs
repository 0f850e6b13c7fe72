//! What the delivery worker reads of the messages it claimed, and the claim of a hub message's fallback.

use sqlx::Row;

use super::rows::{COLUMNS, FROM, Message, from_row};
use crate::clock::Millis;
use crate::names::Channel;
use crate::store::Db;
use crate::store::preferences::{HONOURED_COLUMNS, HONOURED_JOINS, honoured_of_row};

/// A message to deliver, with what routing needs to know of its sender and recipient.
#[derive(Debug)]
pub struct ToDeliver {
    pub message: Message,
    pub partner_name: String,
    /// The recipient has claimed their account (signed in once).
    pub claimed: bool,
    pub has_device: bool,
    /// When the recipient's app was last seen.
    pub last_seen: Option<Millis>,
    /// The fallback window after the hub, in seconds, as the message or its partner set it (`None`: the
    /// host's default; `Some(-1)`: the hub only).
    pub fallback_after_s: Option<i64>,
    /// The channel the user last wrote from, in the conversation the message is in (`None`: the app, or no
    /// conversation).
    pub conversation_channel: Option<Channel>,
    /// The recipient opted out of one of our senders on some channel (which one, each try looks up).
    pub opted_out: bool,
    /// Seconds the partner's messages wait out a provider's outage (`None`: the host's default).
    pub provider_retry_s: Option<i64>,
    /// The partner asked for a `message.attempt` event of every WhatsApp and SMS try.
    pub attempt_events: bool,
    /// What the recipient chose that this partner's messages meet.
    pub honoured: crate::preferences::Honoured,
}

/// Messages to deliver and what routing needs (see [`ToDeliver`]), in one read, by id (a message that is
/// gone is missing from the answer).
pub async fn find_to_deliver(db: &Db, ids: &[i64]) -> Result<std::collections::HashMap<i64, ToDeliver>, sqlx::Error> {
    let backend = db.backend();
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let sql = format!(
        "{COLUMNS}, p.name AS partner_name, COALESCE(m.fallback_after_s, p.hub_fallback_after_s) AS fallback_after_s, \
         p.provider_retry_s, p.attempt_events, \
         (SELECT COUNT(*) FROM accounts a WHERE a.phone = m.phone AND a.state = 'claimed') AS claimed, \
         (SELECT COUNT(*) FROM devices d WHERE d.phone = m.phone) AS devices, \
         (SELECT s.last_seen_at FROM presence s WHERE s.phone = m.phone) AS last_seen, \
         (SELECT c.channel FROM conversations c WHERE c.id = m.conversation_id) AS conversation_channel, \
         (SELECT COUNT(*) FROM opt_outs o WHERE o.phone = m.phone) AS opt_outs, {HONOURED_COLUMNS}\
         {FROM}{HONOURED_JOINS}WHERE m.id IN ({})",
        crate::store::rows(ids.len(), "?")
    );
    let mut query = crate::store::query_rows(backend, &sql, ids.len());
    for id in ids {
        query = query.bind(id);
    }
    let mut found = std::collections::HashMap::with_capacity(ids.len());
    for row in query.fetch_all(db.reader()).await? {
        let message = from_row(&row)?;
        let to_deliver = ToDeliver {
            partner_name: row.try_get("partner_name")?,
            claimed: row.try_get::<i64, _>("claimed")? > 0,
            has_device: row.try_get::<i64, _>("devices")? > 0,
            last_seen: row.try_get("last_seen")?,
            fallback_after_s: row.try_get("fallback_after_s")?,
            conversation_channel: crate::store::decode_optional_name(&row, "conversation_channel")?,
            opted_out: row.try_get::<i64, _>("opt_outs")? > 0,
            provider_retry_s: row.try_get("provider_retry_s")?,
            attempt_events: row.try_get::<i64, _>("attempt_events")? != 0,
            honoured: honoured_of_row(&row)?,
            message,
        };
        found.insert(to_deliver.message.id, to_deliver);
    }
    Ok(found)
}

/// Claims the fallback after the hub of a message that is still only in the hub (`sent` in-app, no device
/// got it): true for the one caller that claimed it. A device that gets the message first ends the chain.
pub async fn claim_hub_fallback(db: &Db, id: i64, now: Millis) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE messages SET hub_fallback_at = $1 WHERE id = $2 AND state = 'sent' AND channel = 'inapp' \
         AND hub_fallback_at IS NULL",
    )
    .bind(now)
    .bind(id)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() == 1)
}
