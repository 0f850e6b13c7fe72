//! Partners' bots: credentials (token digest, webhook secret), settings, the uploaded component, and
//! the component bytes themselves (kept in the database so every host can load them).

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, decode_name, is_unique_violation};
use crate::clock::Millis;
use crate::names::RuntimeMode;

#[derive(Debug, Clone)]
pub struct Bot {
    pub id: i64,
    pub reference: String,
    pub partner_id: i64,
    pub partner_code: String,
    pub code: String,
    pub name: String,
    pub runtime_mode: RuntimeMode,
    pub webhook_url: Option<String>,
    /// Needed in the clear to sign the bot's events and to check inbound ones.
    pub webhook_secret: String,
    pub channels: Vec<String>,
    pub allowed_ips: Option<String>,
    pub token_prefix: String,
    pub component_digest: Option<String>,
    pub component_uploaded_at: Option<Millis>,
    pub created_at: Millis,
    /// The channels (`whatsapp`, `sms`) it is its partner's entry bot on: a person who writes there with
    /// nothing going on starts a session with it.
    pub entry_channels: Vec<String>,
    /// The flow such a session starts (none: a chat).
    pub entry_flow: Option<String>,
}

const SELECT: &str = "SELECT b.id, b.ref, b.partner_id, p.code AS partner_code, b.code, b.name, b.runtime_mode, \
    b.webhook_url, b.webhook_secret, b.channels, b.allowed_ips, b.token_prefix, b.component_digest, \
    b.component_uploaded_at, b.created_at, b.token_hash, b.entry_channels, b.entry_flow FROM bots b JOIN partners p ON p.id = b.partner_id ";

/// Where bots' webhook secrets are sealed (see `store::sealing`).
const SECRET_COLUMN: &str = "bots.webhook_secret";

fn from_row(db: &Db, r: &AnyRow) -> Result<Bot, sqlx::Error> {
    let channels: String = r.try_get("channels")?;
    Ok(Bot {
        id: r.try_get("id")?,
        reference: r.try_get("ref")?,
        partner_id: r.try_get("partner_id")?,
        partner_code: r.try_get("partner_code")?,
        code: r.try_get("code")?,
        name: r.try_get("name")?,
        runtime_mode: decode_name(r, "runtime_mode")?,
        webhook_url: r.try_get("webhook_url")?,
        webhook_secret: db
            .keyring()
            .open(SECRET_COLUMN, &r.try_get::<String, _>("webhook_secret")?)
            .map_err(super::sealing::to_sqlx)?,
        channels: serde_json::from_str(&channels).unwrap_or_default(),
        allowed_ips: r.try_get("allowed_ips")?,
        token_prefix: r.try_get("token_prefix")?,
        component_digest: r.try_get("component_digest")?,
        component_uploaded_at: r.try_get("component_uploaded_at")?,
        created_at: r.try_get("created_at")?,
        entry_channels: serde_json::from_str(&r.try_get::<String, _>("entry_channels")?).unwrap_or_default(),
        entry_flow: r.try_get("entry_flow")?,
    })
}

/// A new bot's fields.
pub struct NewBot<'a> {
    pub reference: &'a str,
    pub code: &'a str,
    pub name: &'a str,
    pub runtime_mode: RuntimeMode,
    pub webhook_url: Option<&'a str>,
    pub webhook_secret: &'a str,
    pub token_hash: &'a str,
    pub token_prefix: &'a str,
}

/// Inserts a bot; `None` when the partner already has this code.
pub async fn insert(db: &Db, partner_id: i64, b: &NewBot<'_>, now: Millis) -> Result<Option<Bot>, sqlx::Error> {
    let result = sqlx::query(
        "INSERT INTO bots (ref, partner_id, code, name, runtime_mode, webhook_url, webhook_secret, channels, \
         token_hash, token_prefix, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, '[\"inapp\"]', $8, $9, $10, $10)",
    )
    .bind(b.reference)
    .bind(partner_id)
    .bind(b.code)
    .bind(b.name)
    .bind(b.runtime_mode.as_str())
    .bind(b.webhook_url)
    .bind(db.keyring().seal(SECRET_COLUMN, b.webhook_secret))
    .bind(b.token_hash)
    .bind(b.token_prefix)
    .bind(now)
    .execute(db.writer())
    .await;
    match result {
        Ok(_) => find(db, partner_id, b.code).await,
        Err(e) if is_unique_violation(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One of a partner's bots by code.
pub async fn find(db: &Db, partner_id: i64, code: &str) -> Result<Option<Bot>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE b.partner_id = $1 AND b.code = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(code).fetch_optional(db.reader()).await?;
    row.as_ref().map(|r| from_row(db, r)).transpose()
}

/// The partner's bots, oldest first.
pub async fn list(db: &Db, partner_id: i64) -> Result<Vec<Bot>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE b.partner_id = $1 ORDER BY b.id");
    let rows = sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?;
    rows.iter().map(|r| from_row(db, r)).collect()
}

pub async fn find_by_id(db: &Db, id: i64) -> Result<Option<Bot>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE b.id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(|r| from_row(db, r)).transpose()
}

/// The bot whose token has this digest, with the stored digest for a constant-time re-check.
pub async fn find_by_token_hash(db: &Db, token_hash: &str) -> Result<Option<(Bot, String)>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE b.token_hash = $1");
    let row = sqlx::query(sql).bind(token_hash).fetch_optional(db.reader()).await?;
    row.map(|r| Ok((from_row(db, &r)?, r.try_get("token_hash")?))).transpose()
}

/// The bots of partners `phone` is linked to that `bot` names: by its ref (`bot_ref_…`, one at most), or by
/// its code, which two partners may share (then two are returned: the caller must not pick one).
pub async fn find_for_user(db: &Db, phone: &str, bot: &str) -> Result<Vec<Bot>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "JOIN account_links l ON l.partner_id = b.partner_id JOIN accounts a ON a.id = l.account_id \
         WHERE a.phone = $1 AND (b.ref = $2 OR b.code = $2) ORDER BY b.id LIMIT 2"
    );
    let rows = sqlx::query(sql).bind(phone).bind(bot).fetch_all(db.reader()).await?;
    rows.iter().map(|r| from_row(db, r)).collect()
}

/// Saves the settable fields of a bot. A channel it becomes the entry bot of is taken from the partner's
/// other bots in the same transaction (a partner has one entry bot per channel).
pub async fn update(db: &Db, bot: &Bot, now: Millis) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    let json = |list: &[String]| serde_json::to_string(list).expect("strings serialise");
    if !bot.entry_channels.is_empty() {
        let others = sqlx::query(
            "SELECT id, entry_channels FROM bots WHERE partner_id = $1 AND id <> $2 AND entry_channels <> '[]'",
        )
        .bind(bot.partner_id)
        .bind(bot.id)
        .fetch_all(&mut *tx)
        .await?;
        for other in others {
            let theirs: Vec<String> =
                serde_json::from_str(&other.try_get::<String, _>("entry_channels")?).unwrap_or_default();
            let kept: Vec<String> = theirs.iter().filter(|c| !bot.entry_channels.contains(c)).cloned().collect();
            if kept.len() != theirs.len() {
                sqlx::query("UPDATE bots SET entry_channels = $1, updated_at = $2 WHERE id = $3")
                    .bind(json(&kept))
                    .bind(now)
                    .bind(other.try_get::<i64, _>("id")?)
                    .execute(&mut *tx)
                    .await?;
            }
        }
    }
    sqlx::query(
        "UPDATE bots SET name = $1, runtime_mode = $2, webhook_url = $3, channels = $4, allowed_ips = $5, \
         updated_at = $6, entry_channels = $7, entry_flow = $8 WHERE id = $9",
    )
    .bind(&bot.name)
    .bind(bot.runtime_mode.as_str())
    .bind(&bot.webhook_url)
    .bind(json(&bot.channels))
    .bind(&bot.allowed_ips)
    .bind(now)
    .bind(json(&bot.entry_channels))
    .bind(&bot.entry_flow)
    .bind(bot.id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// The partner's entry bot on `channel` (`whatsapp`, `sms`), if it has one.
pub async fn entry_bot(db: &Db, partner_id: i64, channel: &str) -> Result<Option<Bot>, sqlx::Error> {
    let sql =
        const_format::concatcp!(SELECT, "WHERE b.partner_id = $1 AND b.entry_channels LIKE $2 ORDER BY b.id LIMIT 1");
    let row = sqlx::query(sql).bind(partner_id).bind(format!("%\"{channel}\"%")).fetch_optional(db.reader()).await?;
    row.as_ref().map(|r| from_row(db, r)).transpose()
}

pub async fn set_token(
    db: &Db,
    bot_id: i64,
    token_hash: &str,
    token_prefix: &str,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE bots SET token_hash = $1, token_prefix = $2, updated_at = $3 WHERE id = $4")
        .bind(token_hash)
        .bind(token_prefix)
        .bind(now)
        .bind(bot_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

pub async fn set_webhook_secret(db: &Db, bot_id: i64, secret: &str, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE bots SET webhook_secret = $1, updated_at = $2 WHERE id = $3")
        .bind(db.keyring().seal(SECRET_COLUMN, secret))
        .bind(now)
        .bind(bot_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Stores a component's bytes (once per digest) and makes it the bot's.
pub async fn set_component(
    db: &Db,
    bot_id: i64,
    digest: &str,
    bytes: &[u8],
    flows: &Value,
    now: Millis,
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "INSERT INTO components (digest, bytes, size, flows, uploaded_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (digest) DO NOTHING",
    )
    .bind(digest)
    .bind(bytes)
    .bind(bytes.len() as i64)
    .bind(flows.to_string())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE bots SET component_digest = $1, component_uploaded_at = $2, updated_at = $2 WHERE id = $3")
        .bind(digest)
        .bind(now)
        .bind(bot_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// A stored component: its bytes, size and flows.
pub async fn component(db: &Db, digest: &str) -> Result<Option<(Vec<u8>, i64, Value)>, sqlx::Error> {
    let row = sqlx::query("SELECT bytes, size, flows FROM components WHERE digest = $1")
        .bind(digest)
        .fetch_optional(db.reader())
        .await?;
    row.map(|r| {
        let flows: String = r.try_get("flows")?;
        Ok((r.try_get("bytes")?, r.try_get("size")?, serde_json::from_str(&flows).unwrap_or(Value::Null)))
    })
    .transpose()
}

/// A stored component's size and flows, without its bytes.
pub async fn component_info(db: &Db, digest: &str) -> Result<Option<(i64, Value)>, sqlx::Error> {
    let row = sqlx::query("SELECT size, flows FROM components WHERE digest = $1")
        .bind(digest)
        .fetch_optional(db.reader())
        .await?;
    row.map(|r| {
        let flows: String = r.try_get("flows")?;
        Ok((r.try_get("size")?, serde_json::from_str(&flows).unwrap_or(Value::Null)))
    })
    .transpose()
}

/// A bot as the app lists it.
#[derive(Debug, Clone)]
pub struct BotListing {
    pub reference: String,
    pub code: String,
    pub name: String,
    pub partner_code: String,
    pub partner_name: String,
}

/// The bots of the partners `phone` is linked to.
pub async fn list_for_user(db: &Db, phone: &str) -> Result<Vec<BotListing>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT b.ref, b.code, b.name, p.code AS partner_code, p.name AS partner_name FROM bots b \
         JOIN partners p ON p.id = b.partner_id JOIN account_links l ON l.partner_id = b.partner_id \
         JOIN accounts a ON a.id = l.account_id WHERE a.phone = $1 ORDER BY p.code, b.code",
    )
    .bind(phone)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(BotListing {
                reference: r.try_get("ref")?,
                code: r.try_get("code")?,
                name: r.try_get("name")?,
                partner_code: r.try_get("partner_code")?,
                partner_name: r.try_get("partner_name")?,
            })
        })
        .collect()
}

/// A bot's webhook URL, secret and code, when it has a URL.
pub async fn webhook_endpoint(db: &Db, bot_id: i64) -> Result<Option<(String, String, String)>, sqlx::Error> {
    Ok(find_by_id(db, bot_id).await?.and_then(|b| b.webhook_url.map(|url| (url, b.webhook_secret, b.code))))
}

/// Every partner's bot with this code (the inbound webhook tells them apart by secret).
pub async fn find_all_by_code(db: &Db, code: &str) -> Result<Vec<Bot>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE b.code = $1 ORDER BY b.id");
    let rows = sqlx::query(sql).bind(code).fetch_all(db.reader()).await?;
    rows.iter().map(|r| from_row(db, r)).collect()
}
