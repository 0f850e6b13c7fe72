//! Broadcasts and their fan-out: one message per recipient, written in batches that each advance a cursor
//! over the audience in the same transaction, so a fan-out resumes where it stopped and never writes a
//! recipient twice (unique `(broadcast_id, phone)` as the last guard).

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::messages::NewMedia;
use super::{Backend, Db};
use crate::clock::Millis;
use crate::names::MessageState;

#[derive(Debug, Clone)]
pub struct Broadcast {
    pub id: i64,
    pub partner_id: i64,
    pub audience: String,
    pub content_type: String,
    pub body: Option<String>,
    pub rendered_body: Option<String>,
    pub template_code: Option<String>,
    pub lang: Option<String>,
    pub priority: String,
    pub content: Value,
    pub media_id: Option<String>,
    pub state: String,
    pub total: Option<i64>,
    pub sent: i64,
    pub failed: i64,
    pub cursor: i64,
    pub created_at: Millis,
    pub completed_at: Option<Millis>,
    /// When a scheduled broadcast's fan-out starts (`None`: at once).
    pub send_at: Option<Millis>,
}

const COLUMNS: &str = "id, partner_id, audience, content_type, body, rendered_body, template_code, lang, priority, \
    content, media_id, state, total, sent, failed, cursor, created_at, completed_at, send_at";

fn from_row(r: &AnyRow) -> Result<Broadcast, sqlx::Error> {
    let content: String = r.try_get("content")?;
    Ok(Broadcast {
        id: r.try_get("id")?,
        partner_id: r.try_get("partner_id")?,
        audience: r.try_get("audience")?,
        content_type: r.try_get("content_type")?,
        body: r.try_get("body")?,
        rendered_body: r.try_get("rendered_body")?,
        template_code: r.try_get("template_code")?,
        lang: r.try_get("lang")?,
        priority: r.try_get("priority")?,
        content: serde_json::from_str(&content).unwrap_or(Value::Null),
        media_id: r.try_get("media_id")?,
        state: r.try_get("state")?,
        total: r.try_get("total")?,
        sent: r.try_get("sent")?,
        failed: r.try_get("failed")?,
        cursor: r.try_get("cursor")?,
        created_at: r.try_get("created_at")?,
        completed_at: r.try_get("completed_at")?,
        send_at: r.try_get("send_at")?,
    })
}

/// What a new broadcast sends.
pub struct NewBroadcast {
    pub partner_id: i64,
    pub audience: &'static str,
    pub content_type: String,
    pub body: Option<String>,
    pub rendered_body: Option<String>,
    pub template_code: Option<String>,
    pub lang: Option<String>,
    pub priority: String,
    pub content: Value,
    /// Base64 media, stored once and referenced by every message.
    pub media: Option<NewMedia>,
    /// When its fan-out starts (`None`: at once); `scheduled` until then.
    pub send_at: Option<Millis>,
}

/// Stores a `queued` broadcast, or a `scheduled` one when it is sent later (and its media, once).
pub async fn insert(db: &Db, b: &NewBroadcast, now: Millis) -> Result<Broadcast, sqlx::Error> {
    let mut tx = db.begin().await?;
    if let Some(media) = &b.media {
        super::messages::insert_media_in(&mut tx, b.partner_id, media, now).await?;
    }
    let sql = const_format::concatcp!(
        "INSERT INTO broadcasts (partner_id, audience, content_type, body, rendered_body, template_code, lang, \
         priority, content, media_id, state, created_at, send_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $12, $11, $13) \
         RETURNING ",
        COLUMNS
    );
    let row = sqlx::query(sql)
        .bind(b.partner_id)
        .bind(b.audience)
        .bind(&b.content_type)
        .bind(&b.body)
        .bind(&b.rendered_body)
        .bind(&b.template_code)
        .bind(&b.lang)
        .bind(&b.priority)
        .bind(b.content.to_string())
        .bind(b.media.as_ref().map(|m| m.id.as_str()))
        .bind(now)
        .bind(if b.send_at.is_some() { "scheduled" } else { "queued" })
        .bind(b.send_at)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    from_row(&row)
}

/// Cancels the partner's scheduled broadcast `id` before its fan-out starts: the broadcast as it is now
/// (`canceled`), or `None` when it is not scheduled (any more) or not the partner's.
pub async fn cancel(db: &Db, partner_id: i64, id: i64, now: Millis) -> Result<Option<Broadcast>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "UPDATE broadcasts SET state = 'canceled', completed_at = $3 \
         WHERE partner_id = $1 AND id = $2 AND state = 'scheduled' RETURNING ",
        COLUMNS
    );
    let row = sqlx::query(sql).bind(partner_id).bind(id).bind(now).fetch_optional(db.writer()).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find(db: &Db, partner_id: i64, id: i64) -> Result<Option<Broadcast>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM broadcasts WHERE partner_id = $1 AND id = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn list(db: &Db, partner_id: i64, before: Option<i64>, limit: i64) -> Result<Vec<Broadcast>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        COLUMNS,
        " FROM broadcasts WHERE partner_id = $1 AND ($2 IS NULL OR id < $2) ORDER BY id DESC LIMIT $3"
    );
    let rows = sqlx::query(sql).bind(partner_id).bind(before).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

/// Takes one unfinished broadcast for `lease_ms` (one whose earlier worker died is taken again).
pub async fn claim(db: &Db, now: Millis, lease_ms: i64) -> Result<Option<Broadcast>, sqlx::Error> {
    let sql = match db.backend() {
        Backend::Postgres => const_format::concatcp!(
            "UPDATE broadcasts SET lease_until = $1, state = 'sending' WHERE id = (SELECT id FROM broadcasts \
             WHERE (state IN ('queued', 'sending') OR (state = 'scheduled' AND send_at <= $2)) \
             AND (lease_until IS NULL OR lease_until <= $2) ORDER BY id LIMIT 1 \
             FOR UPDATE SKIP LOCKED) RETURNING ",
            COLUMNS
        ),
        Backend::Sqlite => const_format::concatcp!(
            "UPDATE broadcasts SET lease_until = $1, state = 'sending' WHERE id = (SELECT id FROM broadcasts \
             WHERE (state IN ('queued', 'sending') OR (state = 'scheduled' AND send_at <= $2)) \
             AND (lease_until IS NULL OR lease_until <= $2) ORDER BY id LIMIT 1) \
             RETURNING ",
            COLUMNS
        ),
    };
    let row = sqlx::query(sql).bind(now + lease_ms).bind(now).fetch_optional(db.writer()).await?;
    row.as_ref().map(from_row).transpose()
}

/// How many accounts an audience has now: every claimed account (`all_claimed`), or the claimed accounts
/// linked to the partner.
pub async fn audience_size(db: &Db, partner_id: i64, audience: &str) -> Result<i64, sqlx::Error> {
    match audience {
        "all_claimed" => {
            sqlx::query_scalar("SELECT COUNT(*) FROM accounts WHERE state = 'claimed'").fetch_one(db.reader()).await
        }
        _ => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM account_links l JOIN accounts a ON a.id = l.account_id \
                 WHERE l.partner_id = $1 AND a.state = 'claimed'",
            )
            .bind(partner_id)
            .fetch_one(db.reader())
            .await
        }
    }
}

/// Counts the audience (once, when the fan-out starts).
pub async fn set_total(db: &Db, b: &Broadcast) -> Result<i64, sqlx::Error> {
    let total = audience_size(db, b.partner_id, &b.audience).await?;
    sqlx::query("UPDATE broadcasts SET total = $1 WHERE id = $2 AND total IS NULL")
        .bind(total)
        .bind(b.id)
        .execute(db.writer())
        .await?;
    Ok(total)
}

/// How many of a broadcast's messages are in each state now.
pub async fn message_states(db: &Db, broadcast_id: i64) -> Result<Vec<(MessageState, i64)>, sqlx::Error> {
    let rows =
        sqlx::query("SELECT state, COUNT(*) AS n FROM messages WHERE broadcast_id = $1 GROUP BY state ORDER BY state")
            .bind(broadcast_id)
            .fetch_all(db.reader())
            .await?;
    rows.iter().map(|r| Ok((super::decode_name(r, "state")?, r.try_get("n")?))).collect()
}

/// The last account id of the next page of the audience (at most `limit` accounts after the cursor),
/// and how many accounts the page has.
async fn next_page(db: &Db, b: &Broadcast, limit: i64) -> Result<(i64, i64), sqlx::Error> {
    let row = match b.audience.as_str() {
        "all_claimed" => {
            sqlx::query(
                "SELECT COUNT(*) AS n, MAX(id) AS last FROM (SELECT id FROM accounts WHERE state = 'claimed' AND id > $1 \
                 ORDER BY id LIMIT $2) page",
            )
            .bind(b.cursor)
            .bind(limit)
            .fetch_one(db.reader())
            .await?
        }
        _ => {
            sqlx::query(
                "SELECT COUNT(*) AS n, MAX(id) AS last FROM (SELECT a.id FROM account_links l JOIN accounts a ON a.id = l.account_id \
                 WHERE l.partner_id = $1 AND a.state = 'claimed' AND a.id > $2 ORDER BY a.id LIMIT $3) page",
            )
            .bind(b.partner_id)
            .bind(b.cursor)
            .bind(limit)
            .fetch_one(db.reader())
            .await?
        }
    };
    Ok((row.try_get("n")?, row.try_get::<Option<i64>, _>("last")?.unwrap_or(b.cursor)))
}

/// The set-based insert of one page of a broadcast's messages. The only part that differs between
/// backends is how a random ref is made in SQL (both from the OS-seeded generator of the database).
fn page_insert_sql(backend: Backend, audience: &str) -> &'static str {
    macro_rules! insert {
        ($reference:literal, $source:literal) => {
            concat!(
                "INSERT INTO messages (ref, partner_id, phone, content_type, body, rendered_body, template_code, lang, \
                 priority, content, state, seq, media_id, direction, broadcast_id, created_at, updated_at) \
                 SELECT ",
                $reference,
                ", $1, a.phone, $2, $3, $4, $5, $6, $7, $8, 'queued', 0, $9, 'out', $10, $11, $11 ",
                $source,
                " ORDER BY a.id ON CONFLICT (broadcast_id, phone) WHERE broadcast_id IS NOT NULL DO NOTHING RETURNING id"
            )
        };
    }
    // Every variant takes the same 14 parameters; the all-accounts audience has no partner filter, so it
    // only compares $14 with itself.
    match (backend, audience) {
        (Backend::Sqlite, "all_claimed") => insert!(
            "'msg_' || lower(hex(randomblob(12)))",
            "FROM accounts a WHERE a.state = 'claimed' AND a.id > $12 AND a.id <= $13 AND $14 = $14"
        ),
        (Backend::Sqlite, _) => insert!(
            "'msg_' || lower(hex(randomblob(12)))",
            "FROM account_links l JOIN accounts a ON a.id = l.account_id \
             WHERE l.partner_id = $14 AND a.state = 'claimed' AND a.id > $12 AND a.id <= $13"
        ),
        (Backend::Postgres, "all_claimed") => insert!(
            "'msg_' || replace(gen_random_uuid()::text, '-', '')",
            "FROM accounts a WHERE a.state = 'claimed' AND a.id > $12 AND a.id <= $13 AND $14 = $14"
        ),
        (Backend::Postgres, _) => insert!(
            "'msg_' || replace(gen_random_uuid()::text, '-', '')",
            "FROM account_links l JOIN accounts a ON a.id = l.account_id \
             WHERE l.partner_id = $14 AND a.state = 'claimed' AND a.id > $12 AND a.id <= $13"
        ),
    }
}

/// Writes the next batch of a broadcast's messages (with their delivery jobs) and advances its cursor, in
/// one transaction. Returns the broadcast as it now is; `state` is `completed` after the last batch.
pub async fn fan_out_batch(
    db: &Db,
    b: &Broadcast,
    batch: i64,
    lease_ms: i64,
    now: Millis,
) -> Result<Broadcast, sqlx::Error> {
    let (count, last) = next_page(db, b, batch).await?;
    let mut tx = db.begin().await?;
    let ids: Vec<i64> = sqlx::query_scalar(page_insert_sql(db.backend(), &b.audience))
        .bind(b.partner_id)
        .bind(&b.content_type)
        .bind(&b.body)
        .bind(&b.rendered_body)
        .bind(&b.template_code)
        .bind(&b.lang)
        .bind(&b.priority)
        .bind(b.content.to_string())
        .bind(&b.media_id)
        .bind(b.id)
        .bind(now)
        .bind(b.cursor)
        .bind(last)
        .bind(b.partner_id)
        .fetch_all(&mut *tx)
        .await?;
    let written = ids.len() as i64;
    if let (Some(first), Some(last_id)) = (ids.iter().min(), ids.iter().max()) {
        sqlx::query(
            "INSERT INTO message_states (message_id, seq, state, channel, at) SELECT id, 0, 'queued', NULL, $1 FROM messages \
             WHERE broadcast_id = $2 AND id >= $3 AND id <= $4 ON CONFLICT (message_id, seq) DO NOTHING",
        )
        .bind(now)
        .bind(b.id)
        .bind(first)
        .bind(last_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO delivery_jobs (message_id, next_attempt_at) SELECT id, $1 FROM messages \
             WHERE broadcast_id = $2 AND id >= $3 AND id <= $4 ON CONFLICT (message_id) DO NOTHING",
        )
        .bind(now)
        .bind(b.id)
        .bind(first)
        .bind(last_id)
        .execute(&mut *tx)
        .await?;
    }
    let mut counted = super::rollups::messages::Deltas::default();
    counted.broadcast(b.partner_id, b.id, b.template_code.as_deref(), now, written);
    if written > 0 {
        counted.write_in(&mut tx).await?;
    }
    let sql = const_format::concatcp!(
        "UPDATE broadcasts SET cursor = $1, sent = sent + $2, lease_until = $3, \
         state = CASE WHEN $4 = 1 THEN 'completed' ELSE 'sending' END, \
         completed_at = CASE WHEN $4 = 1 THEN $5 ELSE NULL END WHERE id = $6 RETURNING ",
        COLUMNS
    );
    let done = count < batch;
    let row = sqlx::query(sql)
        .bind(last)
        .bind(written)
        .bind(now + lease_ms)
        .bind(done as i64)
        .bind(now)
        .bind(b.id)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    from_row(&row)
}

/// Broadcasts not finished yet (for metrics): queued or sending.
pub async fn in_progress(db: &Db) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) FROM broadcasts WHERE state IN ('queued', 'sending')")
        .fetch_one(db.reader())
        .await
}
