//! Support conversations between a user and a partner's agents.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::Db;
use crate::clock::Millis;

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: i64,
    pub reference: String,
    pub partner_id: i64,
    pub partner_code: String,
    pub phone: String,
    pub subject: Option<String>,
    pub state: String,
    pub last_message_at: Millis,
    pub created_at: Millis,
}

const SELECT: &str = "SELECT c.id, c.ref, c.partner_id, p.code AS partner_code, c.phone, c.subject, c.state, \
    c.last_message_at, c.created_at FROM conversations c JOIN partners p ON p.id = c.partner_id ";

fn from_row(row: &AnyRow) -> Result<Conversation, sqlx::Error> {
    Ok(Conversation {
        id: row.try_get("id")?,
        reference: row.try_get("ref")?,
        partner_id: row.try_get("partner_id")?,
        partner_code: row.try_get("partner_code")?,
        phone: row.try_get("phone")?,
        subject: row.try_get("subject")?,
        state: row.try_get("state")?,
        last_message_at: row.try_get("last_message_at")?,
        created_at: row.try_get("created_at")?,
    })
}

/// A user's support threads, newest first.
pub async fn list_for_phone(
    db: &Db,
    phone: &str,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Conversation>, sqlx::Error> {
    let sql =
        const_format::concatcp!(SELECT, "WHERE c.phone = $1 AND ($2 IS NULL OR c.id < $2) ORDER BY c.id DESC LIMIT $3");
    let rows = sqlx::query(sql).bind(phone).bind(before).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}
