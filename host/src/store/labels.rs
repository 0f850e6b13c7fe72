//! A partner's labels and the conversations that carry them. A label removed leaves its conversations; a
//! conversation removed (retention, erasure) takes its rows with it (`erasure::delete_conversations_in`).

use std::collections::HashMap;

use sqlx::Row;
use sqlx::any::AnyRow;

use super::conversations::{Conversation, agents_told};
use super::{Db, is_unique_violation, user_events};
use crate::clock::Millis;
use crate::names::UserEventKind;

#[derive(Debug, Clone)]
pub struct Label {
    pub id: i64,
    pub name: String,
    pub color: String,
    pub created_at: Millis,
    /// How many of the partner's conversations carry it.
    pub conversations: i64,
}

fn from_row(row: &AnyRow) -> Result<Label, sqlx::Error> {
    Ok(Label {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        color: row.try_get("color")?,
        created_at: row.try_get("created_at")?,
        conversations: row.try_get("conversations")?,
    })
}

const SELECT: &str = "SELECT l.id, l.name, l.color, l.created_at, \
    (SELECT COUNT(*) FROM conversation_labels x WHERE x.label_id = l.id) AS conversations FROM labels l ";

/// The partner's labels, by name.
pub async fn list(db: &Db, partner_id: i64) -> Result<Vec<Label>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE l.partner_id = $1 ORDER BY l.name");
    sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// Adds a label; `None` when the partner has one of that name.
pub async fn create(
    db: &Db,
    partner_id: i64,
    name: &str,
    color: &str,
    now: Millis,
) -> Result<Option<Label>, sqlx::Error> {
    let insert = sqlx::query_scalar::<_, i64>(
        "INSERT INTO labels (partner_id, name, color, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(partner_id)
    .bind(name)
    .bind(color)
    .bind(now)
    .fetch_one(db.writer())
    .await;
    let id = match insert {
        Ok(id) => id,
        Err(e) if is_unique_violation(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let sql = const_format::concatcp!(SELECT, "WHERE l.id = $1");
    Ok(Some(from_row(&sqlx::query(sql).bind(id).fetch_one(db.writer()).await?)?))
}

/// Removes one of the partner's labels from every conversation, then the label; `false` when it is not
/// theirs.
pub async fn delete(db: &Db, partner_id: i64, id: i64) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let theirs: Option<i64> = sqlx::query_scalar("SELECT id FROM labels WHERE partner_id = $1 AND id = $2")
        .bind(partner_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    if theirs.is_none() {
        return Ok(false);
    }
    sqlx::query("DELETE FROM conversation_labels WHERE label_id = $1").bind(id).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM labels WHERE id = $1").bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// The ids of the partner's labels named `names`, by name (a name it has none of is missing).
pub async fn by_names(db: &Db, partner_id: i64, names: &[String]) -> Result<HashMap<String, i64>, sqlx::Error> {
    let mut found = HashMap::new();
    for name in names {
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM labels WHERE partner_id = $1 AND name = $2")
            .bind(partner_id)
            .bind(name)
            .fetch_optional(db.reader())
            .await?;
        if let Some(id) = id {
            found.insert(name.clone(), id);
        }
    }
    Ok(found)
}

/// How a write changes a conversation's labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// They become exactly those given.
    Replace,
    /// Those given are added to the ones it has.
    Add,
}

/// Changes conversation `c`'s labels to or by `label_ids` (the partner's, checked by the caller); its
/// partner's agents are told.
pub async fn put_on(
    db: &Db,
    c: &Conversation,
    label_ids: &[i64],
    change: Change,
    now: Millis,
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    if change == Change::Replace {
        sqlx::query("DELETE FROM conversation_labels WHERE conversation_id = $1").bind(c.id).execute(&mut *tx).await?;
    }
    for id in label_ids {
        sqlx::query(
            "INSERT INTO conversation_labels (label_id, conversation_id) VALUES ($1, $2) \
             ON CONFLICT (label_id, conversation_id) DO NOTHING",
        )
        .bind(id)
        .bind(c.id)
        .execute(&mut *tx)
        .await?;
    }
    user_events::append_in(&mut tx, &[agents_told(c, UserEventKind::ConversationUpdated, c.id)], now).await?;
    tx.commit().await?;
    Ok(())
}

/// The labels' names of each of `conversation_ids`, by name (those with none are missing).
pub async fn of_conversations(db: &Db, conversation_ids: &[i64]) -> Result<HashMap<i64, Vec<String>>, sqlx::Error> {
    let mut found: HashMap<i64, Vec<String>> = HashMap::new();
    if conversation_ids.is_empty() {
        return Ok(found);
    }
    let sql = format!(
        "SELECT x.conversation_id, l.name FROM conversation_labels x JOIN labels l ON l.id = x.label_id \
         WHERE x.conversation_id IN ({}) ORDER BY l.name",
        super::rows(conversation_ids.len(), "?")
    );
    let mut query = super::query_rows(db.backend(), &sql, conversation_ids.len());
    for id in conversation_ids {
        query = query.bind(id);
    }
    for row in query.fetch_all(db.reader()).await? {
        found.entry(row.try_get("conversation_id")?).or_default().push(row.try_get("name")?);
    }
    Ok(found)
}
