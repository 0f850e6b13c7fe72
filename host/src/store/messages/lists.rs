//! What a partner (or a developer) lists of its messages: by filter and page, and each message's delivery
//! attempts and changes of state.

use sqlx::Row;

use super::rows::{Message, SELECT, from_row};
use crate::clock::Millis;
use crate::names::{AttemptKind, AttemptState, Channel, MessageState};
use crate::store::{Db, decode_name, like_pattern};

/// Filters of the partner's message list.
#[derive(Debug, Default)]
pub struct MessageFilter {
    pub phone: Option<String>,
    pub state: Option<MessageState>,
    pub q: Option<String>,
    pub before: Option<i64>,
    pub limit: i64,
}

/// A page of the partner's messages, newest first.
pub async fn list_messages(db: &Db, partner_id: i64, f: &MessageFilter) -> Result<Vec<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE m.partner_id = $1 AND ($2 IS NULL OR m.phone = $2) AND ($3 IS NULL OR m.state = $3) \
         AND ($4 IS NULL OR LOWER(COALESCE(m.body, '')) LIKE $4 ESCAPE '\\' \
              OR LOWER(COALESCE(m.rendered_body, '')) LIKE $4 ESCAPE '\\' OR m.phone LIKE $4 ESCAPE '\\') \
         AND ($5 IS NULL OR m.id < $5) ORDER BY m.id DESC LIMIT $6"
    );
    let rows = sqlx::query(sql)
        .bind(partner_id)
        .bind(&f.phone)
        .bind(f.state.map(MessageState::as_str))
        .bind(f.q.as_deref().map(like_pattern))
        .bind(f.before)
        .bind(f.limit)
        .fetch_all(db.reader())
        .await?;
    rows.iter().map(from_row).collect()
}

/// A page of the partner's messages for an export, oldest first: those after the id `after` (the last of
/// the previous page), created at `since` or later.
pub async fn export_page(
    db: &Db,
    partner_id: i64,
    since: Option<Millis>,
    after: i64,
    limit: i64,
) -> Result<Vec<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE m.partner_id = $1 AND m.id > $2 AND ($3 IS NULL OR m.created_at >= $3) ORDER BY m.id LIMIT $4"
    );
    let rows = sqlx::query(sql).bind(partner_id).bind(after).bind(since).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

/// A page of a developer's messages (template sends through `/dev`), newest first.
pub async fn list_for_developer(
    db: &Db,
    developer_id: i64,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE m.developer_id = $1 AND ($2 IS NULL OR m.id < $2) ORDER BY m.id DESC LIMIT $3"
    );
    let rows = sqlx::query(sql).bind(developer_id).bind(before).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

/// One channel try of a message.
#[derive(Debug, Clone)]
pub struct DeliveryAttempt {
    pub kind: AttemptKind,
    pub channel: Channel,
    /// The provider's id of what it accepted (SMS and WhatsApp).
    pub provider_ref: Option<String>,
    pub state: AttemptState,
    pub error: Option<String>,
    pub at: Millis,
    /// When a `waiting` attempt is tried again.
    pub retry_at: Option<Millis>,
}

pub async fn list_attempts(db: &Db, message_id: i64) -> Result<Vec<DeliveryAttempt>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT kind, channel, state, error, provider_ref, at, retry_at FROM delivery_attempts WHERE message_id = $1 \
         ORDER BY id",
    )
    .bind(message_id)
    .fetch_all(db.reader())
    .await?;
    rows.iter().map(attempt_of_row).collect()
}

/// The attempts of many messages, by message, each's oldest first (in one read).
pub async fn attempts_of(
    db: &Db,
    ids: &[i64],
) -> Result<std::collections::HashMap<i64, Vec<DeliveryAttempt>>, sqlx::Error> {
    let mut found: std::collections::HashMap<i64, Vec<DeliveryAttempt>> = Default::default();
    if ids.is_empty() {
        return Ok(found);
    }
    let sql = format!(
        "SELECT message_id, kind, channel, state, error, provider_ref, at, retry_at FROM delivery_attempts \
         WHERE message_id IN ({}) ORDER BY id",
        crate::store::rows(ids.len(), "?")
    );
    let mut query = crate::store::query_rows(db.backend(), &sql, ids.len());
    for id in ids {
        query = query.bind(id);
    }
    for row in query.fetch_all(db.reader()).await? {
        found.entry(row.try_get("message_id")?).or_default().push(attempt_of_row(&row)?);
    }
    Ok(found)
}

fn attempt_of_row(r: &sqlx::any::AnyRow) -> Result<DeliveryAttempt, sqlx::Error> {
    Ok(DeliveryAttempt {
        kind: decode_name(r, "kind")?,
        channel: decode_name(r, "channel")?,
        provider_ref: r.try_get("provider_ref")?,
        state: decode_name(r, "state")?,
        error: r.try_get("error")?,
        at: r.try_get("at")?,
        retry_at: r.try_get("retry_at")?,
    })
}

/// One change of a message's state, from its history.
#[derive(Debug, Clone)]
pub struct StateChange {
    pub state: MessageState,
    pub channel: Option<Channel>,
    pub at: Millis,
}

/// Every state a message has been in, oldest first (from its creation).
pub async fn list_state_changes(db: &Db, message_id: i64) -> Result<Vec<StateChange>, sqlx::Error> {
    let rows = sqlx::query("SELECT state, channel, at FROM message_states WHERE message_id = $1 ORDER BY seq")
        .bind(message_id)
        .fetch_all(db.reader())
        .await?;
    rows.iter()
        .map(|r| {
            Ok(StateChange {
                state: decode_name(r, "state")?,
                channel: crate::store::decode_optional_name(r, "channel")?,
                at: r.try_get("at")?,
            })
        })
        .collect()
}

/// The ids of the partner's messages among `ids` (others' ids are dropped), or all of a phone's.
pub async fn partner_message_ids(
    db: &Db,
    partner_id: i64,
    phone: Option<&str>,
    ids: &[i64],
) -> Result<Vec<i64>, sqlx::Error> {
    if let Some(phone) = phone {
        return sqlx::query_scalar("SELECT id FROM messages WHERE partner_id = $1 AND phone = $2 ORDER BY id")
            .bind(partner_id)
            .bind(phone)
            .fetch_all(db.reader())
            .await;
    }
    let mut owned = Vec::new();
    for id in ids {
        let found: Option<i64> = sqlx::query_scalar("SELECT id FROM messages WHERE partner_id = $1 AND id = $2")
            .bind(partner_id)
            .bind(id)
            .fetch_optional(db.reader())
            .await?;
        owned.extend(found);
    }
    Ok(owned)
}
