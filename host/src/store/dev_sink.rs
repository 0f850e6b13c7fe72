//! The dev sink: what the SMS and WhatsApp providers would have sent, in dev mode.

use sqlx::Row;

use super::Db;
use super::writer::GroupCommit;
use crate::clock::Millis;

#[derive(Debug, Clone)]
pub struct SinkRecord {
    pub id: i64,
    pub channel: String,
    pub phone: String,
    pub text: String,
    pub at: Millis,
}

/// What the dev sink takes: a text that would have gone to `phone` on `channel`.
#[derive(Debug)]
pub struct Sent {
    pub channel: &'static str,
    pub phone: String,
    pub text: String,
    pub at: Millis,
}

/// Records one text in the caller's transaction; answers its id.
pub async fn record_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, s: &Sent) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("INSERT INTO dev_sink (channel, phone, text, at) VALUES ($1, $2, $3, $4) RETURNING id")
        .bind(s.channel)
        .bind(&s.phone)
        .bind(&s.text)
        .bind(s.at)
        .fetch_one(&mut **tx)
        .await
}

/// The sink's group commit (see `store::writer`): the texts of a delivery batch share a transaction.
pub fn writer(db: Db) -> GroupCommit<Sent, i64> {
    GroupCommit::spawn(db, 256, |tx, s| Box::pin(record_in(tx, s)))
}

/// Newest first, optionally for one phone and channel, below `before`.
pub async fn list(
    db: &Db,
    phone: Option<&str>,
    channel: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<SinkRecord>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, channel, phone, text, at FROM dev_sink WHERE ($1 IS NULL OR phone = $1) \
         AND ($2 IS NULL OR channel = $2) AND ($3 IS NULL OR id < $3) ORDER BY id DESC LIMIT $4",
    )
    .bind(phone)
    .bind(channel)
    .bind(before)
    .bind(limit)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(SinkRecord {
                id: r.try_get("id")?,
                channel: r.try_get("channel")?,
                phone: r.try_get("phone")?,
                text: r.try_get("text")?,
                at: r.try_get("at")?,
            })
        })
        .collect()
}
