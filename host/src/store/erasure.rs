//! Erasing a person, in one transaction each: what a partner holds about them (`DELETE /accounts/{phone}`:
//! its messages to and from them with their attempts, history, search rows, stream events and media, its
//! conversations with them with their notes and keys, and its link to their account, which holds the custom
//! fields; other partners' data stays, and so does what the person chose about the partner), or the person
//! themself (`DELETE /me/account`: all of that for every partner, and their account, devices and keys, push
//! subscriptions, sessions' traces, preferences, bot sessions and form links; payments keep their amount and
//! state for the partner's books, without the phone).

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
    let erased = erase_in(&mut tx, Some(partner_id), phone).await?;
    if erased.messages == 0 && erased.conversations == 0 && !erased.unlinked {
        return Ok(None);
    }
    tx.commit().await?;
    Ok(Some(erased))
}

/// The partners a person's erasure tells (`account.erased`): those linked to their account.
pub async fn linked_partners(db: &Db, phone: &str) -> Result<Vec<(i64, String)>, sqlx::Error> {
    use sqlx::Row;
    let rows = sqlx::query(
        "SELECT p.id, p.code FROM account_links l JOIN accounts a ON a.id = l.account_id \
         JOIN partners p ON p.id = l.partner_id WHERE a.phone = $1 ORDER BY p.id",
    )
    .bind(phone)
    .fetch_all(db.reader())
    .await?;
    rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("code")?))).collect()
}

/// Erases the person of `phone` themself: every partner's messages and conversations with them and links to
/// them, their account and all that hangs on their phone; each `(partner id, event)` of `told` is written to
/// the partner's webhook outbox, and each entry of `audit` to its partner's audit log, in the same
/// transaction (`account.erased`, which names no phone).
pub async fn person_erases(
    db: &Db,
    phone: &str,
    told: &[(i64, String)],
    audit: &[super::members::AuditWrite],
    now: crate::clock::Millis,
) -> Result<Erased, sqlx::Error> {
    let mut tx = db.begin().await?;
    for entry in audit {
        super::members::audit_in(&mut tx, entry).await?;
    }
    let mut events = super::outbox::EventRows::default();
    for (partner_id, payload) in told {
        events.push(&super::outbox::NewEvent {
            target: super::outbox::Target::Partner(*partner_id),
            event: "account.erased",
            payload,
            ordering_key: format!("account-erased:{partner_id}"),
            at: now,
        });
    }
    events.insert_in(&mut tx).await?;
    let erased = erase_in(&mut tx, None, phone).await?;
    // The bot sessions: one with a payment stays, anonymised, for the payment's sake; the others go.
    sqlx::query("UPDATE payments SET phone = '' WHERE phone = $1").bind(phone).execute(&mut *tx).await?;
    let sessions: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM flow_sessions WHERE phone = $1 AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.session_id = flow_sessions.id)",
    )
    .bind(phone)
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM inbound_messages WHERE phone = $1").bind(phone).execute(&mut *tx).await?;
    delete_sessions_in(&mut tx, &sessions).await?;
    sqlx::query("DELETE FROM flow_pending_steps WHERE session_id IN (SELECT id FROM flow_sessions WHERE phone = $1)")
        .bind(phone)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE flow_sessions SET phone = '', guest_state = NULL, screen = NULL, summary = NULL, title = NULL, \
         pending_steps = NULL, waiting = NULL WHERE phone = $1",
    )
    .bind(phone)
    .execute(&mut *tx)
    .await?;
    for table in [
        "push_subscriptions",
        "devices",
        "presence",
        "stream_tickets",
        "user_events",
        "user_event_seqs",
        "preferences",
        "partner_preferences",
        "e2e_alerts",
        "whatsapp_users",
        "whatsapp_windows",
        "otp_codes",
        "dev_sink",
        "person_exports",
        "accounts",
    ] {
        let sql = format!("DELETE FROM {table} WHERE phone = $1");
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(phone).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(erased)
}

/// Erases `phone`'s messages, conversations and account links of `partner_id` (every partner's: `None`), in
/// the caller's transaction.
async fn erase_in(
    tx: &mut Transaction<'static, Any>,
    partner_id: Option<i64>,
    phone: &str,
) -> Result<Erased, sqlx::Error> {
    // On PostgreSQL the rows are locked first: a delivery (or a reply) writing about one of these messages
    // meanwhile waits for the erasure, then finds it gone, instead of adding a row that names it between the
    // erasure's deletes (which would fail the erasure on its foreign key). SQLite has one writer at a time.
    let lock = match super::backend_of(tx) {
        Backend::Postgres => " FOR UPDATE",
        Backend::Sqlite => "",
    };
    let sql = format!("SELECT id FROM messages WHERE phone = $1 AND ($2 IS NULL OR partner_id = $2) ORDER BY id{lock}");
    let messages: Vec<i64> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(phone).bind(partner_id).fetch_all(&mut **tx).await?;
    let sql =
        format!("SELECT id FROM conversations WHERE phone = $1 AND ($2 IS NULL OR partner_id = $2) ORDER BY id{lock}");
    let conversations: Vec<i64> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(phone).bind(partner_id).fetch_all(&mut **tx).await?;
    let unlinked = sqlx::query(
        "DELETE FROM account_links WHERE ($1 IS NULL OR partner_id = $1) \
         AND account_id IN (SELECT id FROM accounts WHERE phone = $2)",
    )
    .bind(partner_id)
    .bind(phone)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        > 0;
    let media = delete_messages_in(tx, &messages).await?;
    delete_conversations_in(tx, &conversations).await?;
    sqlx::query("DELETE FROM e2e_alerts WHERE ($1 IS NULL OR partner_id = $1) AND phone = $2")
        .bind(partner_id)
        .bind(phone)
        .execute(&mut **tx)
        .await?;
    // The files of the erased messages that nothing else shows.
    for id in &media {
        sqlx::query(
            "DELETE FROM media WHERE id = $1 \
             AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.media_id = $1) \
             AND NOT EXISTS (SELECT 1 FROM broadcasts b WHERE b.media_id = $1)",
        )
        .bind(id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(Erased { messages: messages.len() as u64, conversations: conversations.len() as u64, unlinked })
}

/// Deletes the messages of `ids` with their jobs, attempts, history, search rows and stream events, in the
/// caller's transaction (a bot session that showed one forgets it); returns the media they showed.
pub(super) async fn delete_messages_in(
    tx: &mut Transaction<'static, Any>,
    ids: &[i64],
) -> Result<Vec<String>, sqlx::Error> {
    let backend = super::backend_of(tx);
    let mut media = Vec::new();
    for chunk in ids.chunks(CHUNK) {
        let sql = format!(
            "SELECT DISTINCT media_id FROM messages WHERE media_id IS NOT NULL AND id IN ({})",
            super::rows(chunk.len(), "?")
        );
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(super::placeholders(backend, &sql)));
        for id in chunk {
            query = query.bind(id);
        }
        media.extend(query.fetch_all(&mut **tx).await?);
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
            each_in(tx, statement, chunk).await?;
        }
    }
    Ok(media)
}

/// Deletes the conversations of `ids` with their messages (see [`delete_messages_in`]), notes, keys, search
/// rows and stream events, in the caller's transaction.
pub(super) async fn delete_conversations_in(
    tx: &mut Transaction<'static, Any>,
    ids: &[i64],
) -> Result<(), sqlx::Error> {
    let backend = super::backend_of(tx);
    for chunk in ids.chunks(CHUNK) {
        let sql = format!("SELECT id FROM messages WHERE conversation_id IN ({})", super::rows(chunk.len(), "?"));
        let mut query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(super::placeholders(backend, &sql)));
        for id in chunk {
            query = query.bind(id);
        }
        let messages = query.fetch_all(&mut **tx).await?;
        delete_messages_in(tx, &messages).await?;
        let search = match backend {
            Backend::Sqlite => "DELETE FROM conversation_words WHERE rowid IN",
            Backend::Postgres => "DELETE FROM conversation_words WHERE conversation_id IN",
        };
        for statement in [
            "DELETE FROM conversation_notes WHERE conversation_id IN",
            "DELETE FROM conversation_labels WHERE conversation_id IN",
            "DELETE FROM conversation_keys WHERE conversation_id IN",
            "DELETE FROM user_events WHERE kind = 'conversation.updated' AND subject_id IN",
            search,
            "DELETE FROM conversations WHERE id IN",
        ] {
            each_in(tx, statement, chunk).await?;
        }
    }
    Ok(())
}

/// Deletes the bot sessions of `ids` with their pending steps, form links and stream events, in the caller's
/// transaction (an inbound message that was one of their steps stays, naming none).
pub(super) async fn delete_sessions_in(tx: &mut Transaction<'static, Any>, ids: &[i64]) -> Result<(), sqlx::Error> {
    for chunk in ids.chunks(CHUNK) {
        for statement in [
            "DELETE FROM flow_pending_steps WHERE session_id IN",
            "DELETE FROM form_links WHERE session_id IN",
            "DELETE FROM user_events WHERE kind = 'flow.updated' AND subject_id IN",
            "UPDATE inbound_messages SET session_id = NULL WHERE session_id IN",
            "DELETE FROM flow_sessions WHERE id IN",
        ] {
            each_in(tx, statement, chunk).await?;
        }
    }
    Ok(())
}

/// Runs `statement` (ending in `IN`) over `ids`.
pub(super) async fn each_in(
    tx: &mut Transaction<'static, Any>,
    statement: &str,
    ids: &[i64],
) -> Result<(), sqlx::Error> {
    let sql = format!("{statement} ({})", super::rows(ids.len(), "?"));
    let mut query = super::query_rows(super::backend_of(tx), &sql, ids.len());
    for id in ids {
        query = query.bind(id);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}
