//! Erasing what a partner holds about one person (`DELETE /accounts/{phone}`): its messages to and from them
//! with their attempts, history, search rows, stream events and media, its conversations with them with their
//! notes and keys, and its link to their account (the custom fields are on the link). Other partners' data
//! stays; so does what the person chose about the partner (theirs, not the partner's). One transaction.

use sqlx::{Any, Transaction};

use super::{Backend, Db};

/// What an erasure removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Erased {
    pub messages: u64,
    pub conversations: u64,
    /// Whether the partner was linked to the person's account (and is no more).
    pub unlinked: bool,
}

/// Ids a statement takes at a time.
const CHUNK: usize = 500;

/// Erases what `partner_id` holds about `phone`; `None` when it holds nothing (no link, no message, no
/// conversation): a phone the partner never knew is `404` to it.
pub async fn partner_erases(db: &Db, partner_id: i64, phone: &str) -> Result<Option<Erased>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let messages: Vec<i64> = sqlx::query_scalar("SELECT id FROM messages WHERE partner_id = $1 AND phone = $2")
        .bind(partner_id)
        .bind(phone)
        .fetch_all(&mut *tx)
        .await?;
    let conversations: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM conversations WHERE partner_id = $1 AND phone = $2")
            .bind(partner_id)
            .bind(phone)
            .fetch_all(&mut *tx)
            .await?;
    let unlinked = sqlx::query(
        "DELETE FROM account_links WHERE partner_id = $1 AND account_id IN (SELECT id FROM accounts WHERE phone = $2)",
    )
    .bind(partner_id)
    .bind(phone)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        > 0;
    if messages.is_empty() && conversations.is_empty() && !unlinked {
        return Ok(None);
    }
    let backend = super::backend_of(&tx);
    let media: Vec<String> = {
        let mut found = Vec::new();
        for chunk in messages.chunks(CHUNK) {
            let sql = format!(
                "SELECT DISTINCT media_id FROM messages WHERE media_id IS NOT NULL AND id IN ({})",
                super::rows(chunk.len(), "?")
            );
            let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(super::placeholders(backend, &sql)));
            for id in chunk {
                query = query.bind(id);
            }
            found.extend(query.fetch_all(&mut *tx).await?);
        }
        found
    };
    for chunk in messages.chunks(CHUNK) {
        let search = match backend {
            Backend::Sqlite => "DELETE FROM messages_search WHERE rowid IN",
            Backend::Postgres => "DELETE FROM message_words WHERE message_id IN",
        };
        for statement in [
            "DELETE FROM delivery_jobs WHERE message_id IN",
            "DELETE FROM delivery_attempts WHERE message_id IN",
            "DELETE FROM message_states WHERE message_id IN",
            "DELETE FROM inbound_messages WHERE message_id IN",
            "UPDATE flow_sessions SET message_id = NULL WHERE message_id IN",
            "DELETE FROM user_events WHERE kind IN ('message.created', 'message.updated', 'conversation.message') \
             AND subject_id IN",
            search,
            "DELETE FROM messages WHERE id IN",
        ] {
            each_in(&mut tx, statement, chunk).await?;
        }
    }
    for chunk in conversations.chunks(CHUNK) {
        let search = match backend {
            Backend::Sqlite => "DELETE FROM conversation_words WHERE rowid IN",
            Backend::Postgres => "DELETE FROM conversation_words WHERE conversation_id IN",
        };
        for statement in [
            "DELETE FROM conversation_notes WHERE conversation_id IN",
            "DELETE FROM conversation_keys WHERE conversation_id IN",
            "DELETE FROM user_events WHERE kind = 'conversation.updated' AND subject_id IN",
            search,
            "DELETE FROM conversations WHERE id IN",
        ] {
            each_in(&mut tx, statement, chunk).await?;
        }
    }
    sqlx::query("DELETE FROM e2e_alerts WHERE partner_id = $1 AND phone = $2")
        .bind(partner_id)
        .bind(phone)
        .execute(&mut *tx)
        .await?;
    // The files of the erased messages that nothing else shows.
    for id in &media {
        sqlx::query(
            "DELETE FROM media WHERE id = $1 AND partner_id = $2 \
             AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.media_id = $1) \
             AND NOT EXISTS (SELECT 1 FROM broadcasts b WHERE b.media_id = $1)",
        )
        .bind(id)
        .bind(partner_id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Some(Erased { messages: messages.len() as u64, conversations: conversations.len() as u64, unlinked }))
}

/// Runs `statement` (ending in `IN`) over `ids`.
async fn each_in(tx: &mut Transaction<'static, Any>, statement: &str, ids: &[i64]) -> Result<(), sqlx::Error> {
    let sql = format!("{statement} ({})", super::rows(ids.len(), "?"));
    let mut query = super::query_rows(super::backend_of(tx), &sql, ids.len());
    for id in ids {
        query = query.bind(id);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}
