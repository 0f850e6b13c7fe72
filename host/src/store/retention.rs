//! What a partner keeps, and the statements of the retention purge (retention.rs runs them): each removes
//! one small batch of what is older than its cut, in a transaction of its own, with everything that hangs
//! on it (attempts, history, search rows, stream events), so that sends go on between batches and a purge
//! stopped half way leaves nothing half removed.

use sqlx::Row;

use super::erasure::{delete_conversations_in, delete_messages_in, delete_sessions_in, each_in};
use super::{Backend, Db};
use crate::clock::Millis;

/// Days a partner keeps each kind of its data; `None`: as long as the host does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keep {
    pub messages_days: Option<i64>,
    pub conversations_days: Option<i64>,
    pub media_days: Option<i64>,
    pub webhook_deliveries_days: Option<i64>,
    pub bot_sessions_days: Option<i64>,
}

const KEEP_COLUMNS: &str = "keep_messages_days, keep_conversations_days, keep_media_days, keep_webhook_deliveries_days, keep_bot_sessions_days";

fn keep_of(row: &sqlx::any::AnyRow) -> Result<Keep, sqlx::Error> {
    Ok(Keep {
        messages_days: row.try_get("keep_messages_days")?,
        conversations_days: row.try_get("keep_conversations_days")?,
        media_days: row.try_get("keep_media_days")?,
        webhook_deliveries_days: row.try_get("keep_webhook_deliveries_days")?,
        bot_sessions_days: row.try_get("keep_bot_sessions_days")?,
    })
}

/// What `partner_id` chose to keep.
pub async fn of(db: &Db, partner_id: i64) -> Result<Keep, sqlx::Error> {
    let sql = format!("SELECT {KEEP_COLUMNS} FROM partners WHERE id = $1");
    keep_of(&sqlx::query(sqlx::AssertSqlSafe(sql)).bind(partner_id).fetch_one(db.reader()).await?)
}

/// Sets what `partner_id` keeps.
pub async fn set(db: &Db, partner_id: i64, keep: &Keep) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE partners SET keep_messages_days = $1, keep_conversations_days = $2, keep_media_days = $3, \
         keep_webhook_deliveries_days = $4, keep_bot_sessions_days = $5 WHERE id = $6",
    )
    .bind(keep.messages_days)
    .bind(keep.conversations_days)
    .bind(keep.media_days)
    .bind(keep.webhook_deliveries_days)
    .bind(keep.bot_sessions_days)
    .bind(partner_id)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Every partner with what it keeps (`all`), or only those that chose a limit.
pub async fn partners(db: &Db, all: bool) -> Result<Vec<(i64, Keep)>, sqlx::Error> {
    let sql = format!(
        "SELECT id, {KEEP_COLUMNS} FROM partners WHERE $1 = 1 OR keep_messages_days IS NOT NULL \
         OR keep_conversations_days IS NOT NULL OR keep_media_days IS NOT NULL \
         OR keep_webhook_deliveries_days IS NOT NULL OR keep_bot_sessions_days IS NOT NULL ORDER BY id"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(i64::from(all)).fetch_all(db.reader()).await?;
    rows.iter().map(|r| Ok((r.try_get("id")?, keep_of(r)?))).collect()
}

/// Takes (or keeps) the turn `name` for `holder` until `until`: `true` when this host holds it now, `false`
/// while another host's lease on it runs.
pub async fn take_turn(db: &Db, name: &str, holder: &str, now: Millis, until: Millis) -> Result<bool, sqlx::Error> {
    let taken = sqlx::query(
        "INSERT INTO host_turns (name, holder, lease_until) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until \
         WHERE host_turns.holder = excluded.holder OR host_turns.lease_until <= $4",
    )
    .bind(name)
    .bind(holder)
    .bind(until)
    .bind(now)
    .execute(db.writer())
    .await?
    .rows_affected();
    Ok(taken == 1)
}

/// Gives the turn `name` back, if `holder` holds it.
pub async fn end_turn(db: &Db, name: &str, holder: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM host_turns WHERE name = $1 AND holder = $2")
        .bind(name)
        .bind(holder)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// A table whose rows are written in the order of their ids, and the time each was written.
#[derive(Debug, Clone, Copy)]
pub enum Aged {
    Messages,
    Outbox,
    Sessions,
}

impl Aged {
    fn table_and_time(self) -> (&'static str, &'static str) {
        match self {
            Aged::Messages => ("messages", "created_at"),
            Aged::Outbox => ("outbox_events", "created_at"),
            Aged::Sessions => ("flow_sessions", "invited_at"),
        }
    }
}

/// The last id of `table` written before `before` (`None`: none was), found by bisecting the primary key:
/// ids grow with time, so the purge's statements read each partner's index from its oldest row up to this
/// id and no further, however many recent rows follow (without an index on the time, which every send would
/// pay for). A row written out of order beside the cut waits for the next pass; none newer is touched, as
/// every statement checks the time as well.
pub async fn last_id_before(db: &Db, table: Aged, before: Millis) -> Result<Option<i64>, sqlx::Error> {
    let (name, time) = table.table_and_time();
    let first = format!("SELECT id, {time} AS t FROM {name} WHERE id >= $1 ORDER BY id LIMIT 1");
    let bounds = format!("SELECT MIN(id) AS lo, MAX(id) AS hi FROM {name}");
    let row = sqlx::query(sqlx::AssertSqlSafe(bounds)).fetch_one(db.reader()).await?;
    let (Some(mut lo), Some(mut hi)) = (row.try_get::<Option<i64>, _>("lo")?, row.try_get::<Option<i64>, _>("hi")?)
    else {
        return Ok(None);
    };
    // The first row at or after `id`, with its time.
    let at = |id: i64| {
        let sql = first.clone();
        async move {
            let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(db.reader()).await?;
            row.map(|r| Ok::<_, sqlx::Error>((r.try_get::<i64, _>("id")?, r.try_get::<i64, _>("t")?))).transpose()
        }
    };
    let Some((first_id, first_time)) = at(lo).await? else { return Ok(None) };
    if first_time >= before {
        return Ok(None);
    }
    lo = first_id;
    // `lo` is a row written before `before`; find the last such below `hi`.
    while lo < hi {
        let mid = lo + (hi - lo + 1) / 2;
        match at(mid).await? {
            Some((id, time)) if time < before => lo = id,
            _ => hi = mid - 1,
        }
    }
    Ok(Some(lo))
}

/// One batch of a purge: at most `limit` of a partner's rows written before `before`, with ids up to `cut`
/// (see [`last_id_before`]).
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    pub partner_id: i64,
    pub before: Millis,
    pub cut: i64,
    pub limit: i64,
}

/// The rows `sql` selects for `batch`, in the caller's transaction: its parameters are the partner ($1),
/// the cut ($2), the time ($3) and the limit ($4).
async fn batch_rows(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    sql: &'static str,
    batch: Batch,
) -> Result<Vec<sqlx::any::AnyRow>, sqlx::Error> {
    sqlx::query(sql)
        .bind(batch.partner_id)
        .bind(batch.cut)
        .bind(batch.before)
        .bind(batch.limit)
        .fetch_all(&mut **tx)
        .await
}

/// The ids (column `id`) of [`batch_rows`].
async fn batch_ids(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    sql: &'static str,
    batch: Batch,
) -> Result<Vec<i64>, sqlx::Error> {
    batch_rows(tx, sql, batch).await?.iter().map(|r| r.try_get("id")).collect()
}

/// Removes up to `limit` of the partner's hub messages written before `before` (ids up to `cut`) with their
/// attempts, history and search rows; a message still waiting for a try (scheduled, or retrying) stays.
/// Returns how many went.
pub async fn purge_hub_messages(db: &Db, batch: Batch) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let ids = batch_ids(
        &mut tx,
        "SELECT m.id FROM messages m WHERE m.partner_id = $1 AND m.id <= $2 AND m.created_at < $3 \
         AND m.conversation_id IS NULL AND NOT EXISTS (SELECT 1 FROM delivery_jobs j WHERE j.message_id = m.id) \
         ORDER BY m.id LIMIT $4",
        batch,
    )
    .await?;
    delete_messages_in(&mut tx, &ids).await?;
    tx.commit().await?;
    Ok(ids.len() as u64)
}

/// Removes up to `limit` of the partner's conversation messages written before `before` (ids up to `cut`):
/// a conversation whose last message is that old goes whole (its notes, keys and search row too); one still
/// going keeps its newer messages, and its search row is written again from them.
pub async fn purge_conversation_messages(db: &Db, batch: Batch) -> Result<u64, sqlx::Error> {
    let before = batch.before;
    let mut tx = db.begin().await?;
    let rows = batch_rows(
        &mut tx,
        "SELECT m.id, m.conversation_id, c.last_message_at FROM messages m JOIN conversations c \
         ON c.id = m.conversation_id WHERE m.partner_id = $1 AND m.id <= $2 AND m.created_at < $3 \
         AND m.conversation_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM delivery_jobs j WHERE j.message_id = m.id) \
         ORDER BY m.id LIMIT $4",
        batch,
    )
    .await?;
    let mut ids = Vec::with_capacity(rows.len());
    let (mut ended, mut going) = (Vec::new(), Vec::new());
    for row in &rows {
        ids.push(row.try_get::<i64, _>("id")?);
        let conversation: i64 = row.try_get("conversation_id")?;
        let last: i64 = row.try_get("last_message_at")?;
        let list = if last < before { &mut ended } else { &mut going };
        if !list.contains(&conversation) {
            list.push(conversation);
        }
    }
    delete_messages_in(&mut tx, &ids).await?;
    delete_conversations_in(&mut tx, &ended).await?;
    let backend = super::backend_of(&tx);
    for conversation in going {
        rewrite_words(&mut tx, backend, conversation).await?;
    }
    tx.commit().await?;
    Ok(ids.len() as u64)
}

/// Writes a conversation's search row again from its subject and the messages it has now (as the trigger
/// that keeps it does when a message is written).
async fn rewrite_words(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    backend: Backend,
    conversation: i64,
) -> Result<(), sqlx::Error> {
    match backend {
        Backend::Sqlite => {
            sqlx::query("DELETE FROM conversation_words WHERE rowid = $1")
                .bind(conversation)
                .execute(&mut **tx)
                .await?;
            sqlx::query(
                "INSERT INTO conversation_words (rowid, partner, phone, words) \
                 SELECT c.id, c.partner_id, c.phone, concat_ws(' ', c.subject, (SELECT group_concat(concat_ws(' ', \
                 COALESCE(m.rendered_body, m.body), json_extract(m.content, '$.subject'), \
                 json_extract(m.content, '$.preview'), json_extract(m.content, '$.link.title'), \
                 json_extract(m.content, '$.link.label'), json_extract(m.content, '$.link.description'), \
                 json_extract(m.content, '$.media.filename'), json_extract(m.content, '$.flow.title')), ' ') \
                 FROM messages m WHERE m.conversation_id = c.id)) FROM conversations c WHERE c.id = $1",
            )
            .bind(conversation)
            .execute(&mut **tx)
            .await?;
        }
        Backend::Postgres => {
            sqlx::query(
                "UPDATE conversation_words SET words = strip(to_tsvector('simple'::regconfig, \
                 COALESCE(c.subject, ''))) || COALESCE((SELECT array_to_tsvector(array_agg(DISTINCT u.lexeme)) \
                 FROM messages m JOIN message_words mw ON mw.message_id = m.id, unnest(mw.words) u \
                 WHERE m.conversation_id = c.id), ''::tsvector) FROM conversations c \
                 WHERE c.id = $1 AND conversation_words.conversation_id = c.id",
            )
            .bind(conversation)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}

/// Removes up to `limit` of the partner's media uploaded before `before`, but for those a message waiting
/// for a try or a broadcast still to go will show. A message that showed one keeps its text; the file
/// answers `404`.
pub async fn purge_media(db: &Db, batch: Batch) -> Result<u64, sqlx::Error> {
    let Batch { partner_id, before, limit, .. } = batch;
    let mut tx = db.begin().await?;
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT f.id FROM media f WHERE f.partner_id = $1 AND f.created_at < $2 \
         AND NOT EXISTS (SELECT 1 FROM delivery_jobs j JOIN messages m ON m.id = j.message_id WHERE m.media_id = f.id) \
         AND NOT EXISTS (SELECT 1 FROM broadcasts b WHERE b.media_id = f.id AND b.state IN ('scheduled', 'queued', 'sending')) \
         ORDER BY f.created_at LIMIT $3",
    )
    .bind(partner_id)
    .bind(before)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    for id in &ids {
        sqlx::query("DELETE FROM media WHERE id = $1").bind(id).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(ids.len() as u64)
}

/// Removes up to `limit` of the partner's webhook deliveries written before `before` (ids up to `cut`):
/// delivered or given up, never one still to be delivered.
pub async fn purge_webhook_deliveries(db: &Db, batch: Batch) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let ids = batch_ids(
        &mut tx,
        "SELECT id FROM outbox_events WHERE target = 'partner' AND target_id = $1 AND id <= $2 \
         AND created_at < $3 AND state <> 'pending' ORDER BY id LIMIT $4",
        batch,
    )
    .await?;
    for chunk in ids.chunks(500) {
        each_in(&mut tx, "DELETE FROM outbox_events WHERE id IN", chunk).await?;
    }
    tx.commit().await?;
    Ok(ids.len() as u64)
}

/// Removes up to `limit` of the partner's bots' sessions last active before `before` (invited up to `cut`),
/// with their steps and form links; a session with a payment stays for the partner's books, without what
/// the bot kept or showed.
pub async fn purge_bot_sessions(db: &Db, batch: Batch) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let rows = batch_rows(
        &mut tx,
        "SELECT s.id, EXISTS (SELECT 1 FROM payments p WHERE p.session_id = s.id) AS paid FROM flow_sessions s \
         JOIN bots b ON b.id = s.bot_id WHERE b.partner_id = $1 AND s.id <= $2 \
         AND COALESCE(s.completed_at, s.active_at, s.invited_at) < $3 AND (s.guest_state IS NOT NULL \
         OR s.screen IS NOT NULL OR s.summary IS NOT NULL OR s.pending_steps IS NOT NULL \
         OR NOT EXISTS (SELECT 1 FROM payments p WHERE p.session_id = s.id)) ORDER BY s.id LIMIT $4",
        batch,
    )
    .await?;
    let (mut gone, mut paid) = (Vec::new(), Vec::new());
    for row in &rows {
        let id: i64 = row.try_get("id")?;
        // `EXISTS` is an integer on SQLite and a boolean on PostgreSQL.
        let has_payment = row.try_get::<bool, _>("paid").or_else(|_| row.try_get::<i64, _>("paid").map(|n| n != 0))?;
        if has_payment { paid.push(id) } else { gone.push(id) }
    }
    delete_sessions_in(&mut tx, &gone).await?;
    for chunk in paid.chunks(500) {
        each_in(&mut tx, "DELETE FROM flow_pending_steps WHERE session_id IN", chunk).await?;
        each_in(
            &mut tx,
            "UPDATE flow_sessions SET guest_state = NULL, screen = NULL, summary = NULL, pending_steps = NULL, \
             waiting = NULL WHERE id IN",
            chunk,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(rows.len() as u64)
}
