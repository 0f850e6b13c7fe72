//! A partner's canned replies: answers its agents send often, each under a shortcut unique to the partner.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, is_unique_violation};
use crate::clock::Millis;

#[derive(Debug, Clone)]
pub struct CannedReply {
    pub id: i64,
    pub shortcut: String,
    pub body: String,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// What a write did.
pub enum Written {
    Done(CannedReply),
    NotFound,
    /// Another of the partner's replies has this shortcut.
    Taken,
}

fn from_row(row: &AnyRow) -> Result<CannedReply, sqlx::Error> {
    Ok(CannedReply {
        id: row.try_get("id")?,
        shortcut: row.try_get("shortcut")?,
        body: row.try_get("body")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

const COLUMNS: &str = "id, shortcut, body, created_at, updated_at";

/// The partner's replies, by shortcut.
pub async fn list(db: &Db, partner_id: i64) -> Result<Vec<CannedReply>, sqlx::Error> {
    let sql =
        const_format::concatcp!("SELECT ", COLUMNS, " FROM canned_replies WHERE partner_id = $1 ORDER BY shortcut");
    sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// One of the partner's replies.
pub async fn find(db: &Db, partner_id: i64, id: i64) -> Result<Option<CannedReply>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM canned_replies WHERE partner_id = $1 AND id = $2");
    sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?.as_ref().map(from_row).transpose()
}

/// Adds a reply.
pub async fn create(db: &Db, partner_id: i64, shortcut: &str, body: &str, now: Millis) -> Result<Written, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO canned_replies (partner_id, shortcut, body, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
         RETURNING ",
        COLUMNS
    );
    match sqlx::query(sql).bind(partner_id).bind(shortcut).bind(body).bind(now).fetch_one(db.writer()).await {
        Ok(row) => Ok(Written::Done(from_row(&row)?)),
        Err(e) if is_unique_violation(&e) => Ok(Written::Taken),
        Err(e) => Err(e),
    }
}

/// Replaces a reply's shortcut and body.
pub async fn update(
    db: &Db,
    partner_id: i64,
    id: i64,
    shortcut: &str,
    body: &str,
    now: Millis,
) -> Result<Written, sqlx::Error> {
    let sql = const_format::concatcp!(
        "UPDATE canned_replies SET shortcut = $1, body = $2, updated_at = $3 WHERE partner_id = $4 AND id = $5 \
         RETURNING ",
        COLUMNS
    );
    let query = sqlx::query(sql).bind(shortcut).bind(body).bind(now).bind(partner_id).bind(id);
    match query.fetch_optional(db.writer()).await {
        Ok(Some(row)) => Ok(Written::Done(from_row(&row)?)),
        Ok(None) => Ok(Written::NotFound),
        Err(e) if is_unique_violation(&e) => Ok(Written::Taken),
        Err(e) => Err(e),
    }
}

/// Deletes a reply; whether it was the partner's.
pub async fn delete(db: &Db, partner_id: i64, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM canned_replies WHERE partner_id = $1 AND id = $2")
        .bind(partner_id)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}
