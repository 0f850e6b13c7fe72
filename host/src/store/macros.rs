//! A partner's macros: several actions on a conversation under one name, kept as the JSON list of those
//! actions (what they may be is `crate::macros`'s).

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, is_unique_violation};
use crate::clock::Millis;

#[derive(Debug, Clone)]
pub struct Macro {
    pub id: i64,
    pub name: String,
    pub actions: Value,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// What a write did.
pub enum Written {
    Done(Macro),
    NotFound,
    /// Another of the partner's macros has this name.
    Taken,
}

fn from_row(row: &AnyRow) -> Result<Macro, sqlx::Error> {
    let actions: String = row.try_get("actions")?;
    Ok(Macro {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        actions: serde_json::from_str(&actions).map_err(|e| sqlx::Error::Decode(e.into()))?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

const COLUMNS: &str = "id, name, actions, created_at, updated_at";

/// The partner's macros, by name.
pub async fn list(db: &Db, partner_id: i64) -> Result<Vec<Macro>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM macros WHERE partner_id = $1 ORDER BY name");
    sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// One of the partner's macros.
pub async fn find(db: &Db, partner_id: i64, id: i64) -> Result<Option<Macro>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM macros WHERE partner_id = $1 AND id = $2");
    sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?.as_ref().map(from_row).transpose()
}

fn written(result: Result<Option<AnyRow>, sqlx::Error>) -> Result<Written, sqlx::Error> {
    match result {
        Ok(Some(row)) => Ok(Written::Done(from_row(&row)?)),
        Ok(None) => Ok(Written::NotFound),
        Err(e) if is_unique_violation(&e) => Ok(Written::Taken),
        Err(e) => Err(e),
    }
}

/// Adds a macro.
pub async fn create(
    db: &Db,
    partner_id: i64,
    name: &str,
    actions: &Value,
    now: Millis,
) -> Result<Written, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO macros (partner_id, name, actions, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
         RETURNING ",
        COLUMNS
    );
    let query = sqlx::query(sql).bind(partner_id).bind(name).bind(actions.to_string()).bind(now);
    written(query.fetch_optional(db.writer()).await)
}

/// Replaces a macro's name and actions.
pub async fn update(
    db: &Db,
    partner_id: i64,
    id: i64,
    name: &str,
    actions: &Value,
    now: Millis,
) -> Result<Written, sqlx::Error> {
    let sql = const_format::concatcp!(
        "UPDATE macros SET name = $1, actions = $2, updated_at = $3 WHERE partner_id = $4 AND id = $5 RETURNING ",
        COLUMNS
    );
    let query = sqlx::query(sql).bind(name).bind(actions.to_string()).bind(now).bind(partner_id).bind(id);
    written(query.fetch_optional(db.writer()).await)
}

/// Removes one of the partner's macros; `false` when it is not theirs.
pub async fn delete(db: &Db, partner_id: i64, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM macros WHERE partner_id = $1 AND id = $2")
        .bind(partner_id)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}
