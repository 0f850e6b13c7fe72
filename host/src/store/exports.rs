//! A person's exports of their data (`/me/export`): the rows of the `person_exports` table, and the reads
//! that gather every record about a phone, table by table, as JSON objects (column name → value), with the
//! files of their messages.

use serde_json::{Map, Value};
use sqlx::{Column, Row, ValueRef};

use super::Db;
use crate::clock::Millis;

/// An export, as its owner sees it.
#[derive(Debug, Clone)]
pub struct PersonExport {
    pub id: String,
    pub state: String,
    pub size: Option<i64>,
    pub error: Option<String>,
    pub created_at: Millis,
    pub ready_at: Option<Millis>,
    pub expires_at: Option<Millis>,
}

const COLUMNS: &str = "id, state, size, error, created_at, ready_at, expires_at";

fn export_of(r: &sqlx::any::AnyRow) -> Result<PersonExport, sqlx::Error> {
    Ok(PersonExport {
        id: r.try_get("id")?,
        state: r.try_get("state")?,
        size: r.try_get("size")?,
        error: r.try_get("error")?,
        created_at: r.try_get("created_at")?,
        ready_at: r.try_get("ready_at")?,
        expires_at: r.try_get("expires_at")?,
    })
}

/// Starts an export of `phone`'s data, `preparing`.
pub async fn create(db: &Db, id: &str, phone: &str, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO person_exports (id, phone, state, created_at) VALUES ($1, $2, 'preparing', $3)")
        .bind(id)
        .bind(phone)
        .bind(now)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// `phone`'s export `id`; `None` when it is not theirs, or no more.
pub async fn find(db: &Db, phone: &str, id: &str) -> Result<Option<PersonExport>, sqlx::Error> {
    let sql = format!("SELECT {COLUMNS} FROM person_exports WHERE id = $1 AND phone = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).bind(phone).fetch_optional(db.reader()).await?;
    row.as_ref().map(export_of).transpose()
}

/// `phone`'s export still being prepared since `since` or later, if any.
pub async fn preparing(db: &Db, phone: &str, since: Millis) -> Result<Option<PersonExport>, sqlx::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM person_exports WHERE phone = $1 AND state = 'preparing' AND created_at >= $2 \
         ORDER BY created_at DESC LIMIT 1"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(phone).bind(since).fetch_optional(db.writer()).await?;
    row.as_ref().map(export_of).transpose()
}

/// The export is ready: its archive, good until `expires_at`.
pub async fn ready(db: &Db, id: &str, archive: &[u8], now: Millis, expires_at: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE person_exports SET state = 'ready', archive = $1, size = $2, ready_at = $3, expires_at = $4 \
         WHERE id = $5 AND state = 'preparing'",
    )
    .bind(archive)
    .bind(archive.len() as i64)
    .bind(now)
    .bind(expires_at)
    .bind(id)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// The export could not be prepared (`error` says why, for its owner).
pub async fn failed(db: &Db, id: &str, error: &str, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE person_exports SET state = 'failed', error = $1, ready_at = $2, expires_at = $3 \
         WHERE id = $4 AND state = 'preparing'",
    )
    .bind(error)
    .bind(now)
    .bind(now + 86_400_000)
    .bind(id)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// The archive of export `id`, while it is good.
pub async fn archive(db: &Db, id: &str, now: Millis) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar("SELECT archive FROM person_exports WHERE id = $1 AND state = 'ready' AND expires_at > $2")
        .bind(id)
        .bind(now)
        .fetch_optional(db.reader())
        .await
}

/// Forgets exports past their time, and those left `preparing` before `stale` (their host stopped).
pub async fn forget_expired(db: &Db, now: Millis, stale: Millis) -> Result<u64, sqlx::Error> {
    let gone =
        sqlx::query("DELETE FROM person_exports WHERE expires_at <= $1 OR (state = 'preparing' AND created_at < $2)")
            .bind(now)
            .bind(stale)
            .execute(db.writer())
            .await?;
    Ok(gone.rows_affected())
}

/// Columns left out of an export: credentials and the service's own bookkeeping, which say nothing about
/// the person.
const LEFT_OUT: &[&str] = &["token_hash", "p256dh", "auth", "request_hash", "lease_until"];

/// Every record about `phone`, table by table (the name each has in the archive, and its rows), oldest
/// first. End-to-end encrypted content is as the server holds it: ciphertext.
pub async fn records_of(db: &Db, phone: &str) -> Result<Vec<(&'static str, Vec<Map<String, Value>>)>, sqlx::Error> {
    const TABLES: &[(&str, &str)] = &[
        ("account", "SELECT a.* FROM accounts a WHERE a.phone = $1"),
        (
            "partner_links",
            "SELECT p.code AS partner, l.fields, l.linked_at FROM account_links l JOIN accounts a ON a.id = l.account_id \
             JOIN partners p ON p.id = l.partner_id WHERE a.phone = $1 ORDER BY l.linked_at",
        ),
        (
            "messages",
            "SELECT p.code AS partner, m.* FROM messages m JOIN partners p ON p.id = m.partner_id WHERE m.phone = $1 \
             ORDER BY m.id",
        ),
        (
            "message_states",
            "SELECT s.* FROM message_states s JOIN messages m ON m.id = s.message_id WHERE m.phone = $1 ORDER BY s.id",
        ),
        (
            "delivery_attempts",
            "SELECT d.* FROM delivery_attempts d JOIN messages m ON m.id = d.message_id WHERE m.phone = $1 \
             ORDER BY d.id",
        ),
        (
            "conversations",
            "SELECT p.code AS partner, c.* FROM conversations c JOIN partners p ON p.id = c.partner_id \
             WHERE c.phone = $1 ORDER BY c.id",
        ),
        (
            "bot_sessions",
            "SELECT b.code AS bot, s.* FROM flow_sessions s JOIN bots b ON b.id = s.bot_id WHERE s.phone = $1 \
             ORDER BY s.id",
        ),
        ("payments", "SELECT * FROM payments WHERE phone = $1 ORDER BY id"),
        ("inbound_messages", "SELECT * FROM inbound_messages WHERE phone = $1 ORDER BY id"),
        ("preferences", "SELECT * FROM preferences WHERE phone = $1"),
        (
            "partner_preferences",
            "SELECT p.code AS partner, pp.* FROM partner_preferences pp JOIN partners p ON p.id = pp.partner_id \
             WHERE pp.phone = $1 ORDER BY p.code",
        ),
        ("devices", "SELECT * FROM devices WHERE phone = $1 ORDER BY id"),
        ("push_subscriptions", "SELECT * FROM push_subscriptions WHERE phone = $1 ORDER BY id"),
        ("opt_outs", "SELECT * FROM opt_outs WHERE phone = $1 ORDER BY at"),
    ];
    let mut out = Vec::with_capacity(TABLES.len());
    for (name, sql) in TABLES {
        let rows = sqlx::query(*sql).bind(phone).fetch_all(db.reader()).await?;
        out.push((*name, rows.iter().map(object_of).collect::<Result<Vec<_>, _>>()?));
    }
    Ok(out)
}

/// The files of `phone`'s messages: id, name and bytes.
pub async fn files_of(db: &Db, phone: &str) -> Result<Vec<(String, Option<String>, Vec<u8>)>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT f.id, f.filename, f.data FROM media f WHERE f.id IN \
         (SELECT m.media_id FROM messages m WHERE m.phone = $1 AND m.media_id IS NOT NULL) ORDER BY f.created_at",
    )
    .bind(phone)
    .fetch_all(db.reader())
    .await?;
    rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("filename")?, r.try_get("data")?))).collect()
}

/// A row as a JSON object: integers, reals and text as themselves, bytes as base64, nulls as null; the
/// columns of [`LEFT_OUT`] left out.
fn object_of(row: &sqlx::any::AnyRow) -> Result<Map<String, Value>, sqlx::Error> {
    use base64::Engine;
    let mut object = Map::new();
    for (i, column) in row.columns().iter().enumerate() {
        let name = column.name();
        if LEFT_OUT.contains(&name) || object.contains_key(name) {
            continue;
        }
        let value = if row.try_get_raw(i)?.is_null() {
            Value::Null
        } else if let Ok(n) = row.try_get::<i64, _>(i) {
            Value::from(n)
        } else if let Ok(text) = row.try_get::<String, _>(i) {
            Value::String(text)
        } else if let Ok(x) = row.try_get::<f64, _>(i) {
            Value::from(x)
        } else if let Ok(b) = row.try_get::<bool, _>(i) {
            Value::Bool(b)
        } else {
            let bytes: Vec<u8> = row.try_get(i)?;
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        };
        object.insert(name.to_string(), value);
    }
    Ok(object)
}
