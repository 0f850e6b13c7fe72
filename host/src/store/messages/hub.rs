//! A user's hub: their messages (newest first, paged), what they have not read, and a conversation's
//! messages.

use sqlx::Row;

use super::rows::{Message, SELECT, from_row};
use crate::names::Direction;
use crate::store::Db;

/// A page of the hub inbox of `phone` (messages outside support conversations), newest first; a message they
/// refused (a partner blocked, its marketing off: `error` set) never reached them and is not there.
pub async fn list_hub(
    db: &Db,
    phone: &str,
    words: Option<&[String]>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Message>, sqlx::Error> {
    const LIST: &str = const_format::concatcp!(
        SELECT,
        "WHERE m.phone = $1 AND m.conversation_id IS NULL AND ($2 IS NULL OR m.id < $2) \
         AND m.state <> 'scheduled' AND m.state <> 'canceled' AND m.error IS NULL "
    );
    let Some(words) = words else {
        let sql = const_format::concatcp!(LIST, "ORDER BY m.id DESC LIMIT $3");
        let rows = sqlx::query(sql).bind(phone).bind(before).bind(limit).fetch_all(db.reader()).await?;
        return rows.iter().map(from_row).collect();
    };
    let sql =
        format!("{LIST} AND {} ORDER BY m.id DESC LIMIT $4", crate::store::search::message_has_words(db.backend(), 3));
    let matching = crate::store::search::matching(db.backend(), phone, words);
    let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(phone).bind(before).bind(matching).bind(limit);
    query.fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// What a user has not read yet: hub messages, support threads with an agent's message, bot chats with
/// steps the app has not taken (the latest chat with each bot: opening a bot starts a new one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unread {
    pub messages: i64,
    pub conversations: i64,
    pub bots: i64,
}

/// Counts what `phone` has not read yet (a failed message is not waiting to be read).
pub async fn unread_of(db: &Db, phone: &str) -> Result<Unread, sqlx::Error> {
    let row = sqlx::query(
        "SELECT \
           (SELECT COUNT(*) FROM messages WHERE phone = $1 AND conversation_id IS NULL AND direction = 'out' \
              AND state <> 'read' AND state <> 'failed' AND state <> 'scheduled' AND state <> 'canceled') AS messages, \
           (SELECT COUNT(DISTINCT conversation_id) FROM messages WHERE phone = $1 AND conversation_id IS NOT NULL \
              AND direction = 'out' AND state <> 'read' AND state <> 'failed') AS conversations, \
           (SELECT COUNT(DISTINCT s.id) FROM flow_sessions s JOIN flow_pending_steps p ON p.session_id = s.id \
              WHERE s.phone = $1 AND s.kind = 'chat' AND s.id = (SELECT MAX(l.id) FROM flow_sessions l \
                WHERE l.phone = s.phone AND l.bot_id = s.bot_id AND l.kind = 'chat')) AS bots",
    )
    .bind(phone)
    .fetch_one(db.reader())
    .await?;
    Ok(Unread {
        messages: row.try_get("messages")?,
        conversations: row.try_get("conversations")?,
        bots: row.try_get("bots")?,
    })
}

/// The messages of a conversation written from `direction` that have not been read yet, oldest first.
pub async fn unread_in_conversation(
    db: &Db,
    conversation_id: i64,
    direction: Direction,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM messages WHERE conversation_id = $1 AND direction = $2 AND state <> 'read' AND state <> 'failed' \
         ORDER BY id",
    )
    .bind(conversation_id)
    .bind(direction.as_str())
    .fetch_all(db.reader())
    .await
}

/// How many messages of each of `conversations` written from `direction` have not been read yet.
pub async fn unread_counts(
    db: &Db,
    conversations: &[i64],
    direction: Direction,
) -> Result<std::collections::HashMap<i64, i64>, sqlx::Error> {
    if conversations.is_empty() {
        return Ok(Default::default());
    }
    let sql = format!(
        "SELECT conversation_id, COUNT(*) AS n FROM messages WHERE direction = ? AND state <> 'read' \
         AND state <> 'failed' AND conversation_id IN ({}) GROUP BY conversation_id",
        crate::store::rows(conversations.len(), "?")
    );
    let mut query = crate::store::query_rows(db.backend(), &sql, conversations.len() + 1).bind(direction.as_str());
    for id in conversations {
        query = query.bind(id);
    }
    query.fetch_all(db.reader()).await?.iter().map(|r| Ok((r.try_get("conversation_id")?, r.try_get("n")?))).collect()
}

/// The latest message of each of these conversations (one missing when its messages are gone), for the
/// lists' previews: one read through the `(conversation_id, id)` index.
pub async fn latest_in_conversations(
    db: &Db,
    conversations: &[i64],
) -> Result<std::collections::HashMap<i64, Message>, sqlx::Error> {
    if conversations.is_empty() {
        return Ok(Default::default());
    }
    let sql = format!(
        "{SELECT}WHERE m.id IN (SELECT MAX(id) FROM messages WHERE conversation_id IS NOT NULL \
         AND conversation_id IN ({}) GROUP BY conversation_id)",
        crate::store::rows(conversations.len(), "?")
    );
    let mut query = crate::store::query_rows(db.backend(), &sql, conversations.len());
    for id in conversations {
        query = query.bind(id);
    }
    let mut latest = std::collections::HashMap::with_capacity(conversations.len());
    for row in query.fetch_all(db.reader()).await? {
        let m = from_row(&row)?;
        if let Some(c) = m.conversation_id {
            latest.insert(c, m);
        }
    }
    Ok(latest)
}

/// The messages of a conversation, oldest first (the last `limit`).
pub async fn list_conversation(db: &Db, conversation_id: i64, limit: i64) -> Result<Vec<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.conversation_id = $1 ORDER BY m.id DESC LIMIT $2");
    let rows = sqlx::query(sql).bind(conversation_id).bind(limit).fetch_all(db.reader()).await?;
    let mut messages: Vec<Message> = rows.iter().map(from_row).collect::<Result<_, _>>()?;
    messages.reverse();
    Ok(messages)
}
