//! Media sent as base64: stored once, served by id to whom it was sent, and what a user uploaded lately
//! (their quota).

use sqlx::{Any, Row, Transaction};

use crate::clock::Millis;
use crate::store::Db;

/// Decoded base64 media to store once and reference from the message.
#[derive(Debug)]
pub struct NewMedia {
    pub id: String,
    pub filename: Option<String>,
    pub mimetype: Option<String>,
    pub sha256: String,
    pub data: Vec<u8>,
    /// The end user who uploaded it (their phone); `None` for a partner's.
    pub uploaded_by: Option<String>,
}

/// Stored media, for `GET /media/{id}`.
pub struct StoredMedia {
    pub partner_id: i64,
    pub mimetype: Option<String>,
    pub filename: Option<String>,
    pub data: Vec<u8>,
    /// The end user who uploaded it; `None` for a partner's.
    pub uploaded_by: Option<String>,
}

pub async fn find_media(db: &Db, id: &str) -> Result<Option<StoredMedia>, sqlx::Error> {
    let row = sqlx::query("SELECT partner_id, mimetype, filename, data, uploaded_by FROM media WHERE id = $1")
        .bind(id)
        .fetch_optional(db.reader())
        .await?;
    row.map(|r| {
        Ok(StoredMedia {
            partner_id: r.try_get("partner_id")?,
            mimetype: r.try_get("mimetype")?,
            filename: r.try_get("filename")?,
            data: r.try_get("data")?,
            uploaded_by: r.try_get("uploaded_by")?,
        })
    })
    .transpose()
}

/// Whether `phone` received a message carrying the media `media_id`.
pub async fn media_sent_to(db: &Db, media_id: &str, phone: &str) -> Result<bool, sqlx::Error> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE media_id = $1 AND phone = $2")
        .bind(media_id)
        .bind(phone)
        .fetch_one(db.reader())
        .await?;
    Ok(n > 0)
}

/// Stores decoded base64 media once (messages and broadcasts reference it by id).
pub async fn insert_media_in(
    tx: &mut Transaction<'_, Any>,
    partner_id: i64,
    media: &NewMedia,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO media (id, partner_id, filename, mimetype, size, sha256, data, created_at, uploaded_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&media.id)
    .bind(partner_id)
    .bind(&media.filename)
    .bind(&media.mimetype)
    .bind(media.data.len() as i64)
    .bind(&media.sha256)
    .bind(&media.data)
    .bind(now)
    .bind(&media.uploaded_by)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Bytes of media the end user `phone` uploaded since `since`.
pub async fn uploaded_since(db: &Db, phone: &str, since: Millis) -> Result<i64, sqlx::Error> {
    let bytes: Option<i64> =
        sqlx::query_scalar("SELECT CAST(SUM(size) AS BIGINT) FROM media WHERE uploaded_by = $1 AND created_at >= $2")
            .bind(phone)
            .bind(since)
            .fetch_one(db.reader())
            .await?;
    Ok(bytes.unwrap_or(0))
}
