//! End-to-end key material besides the users' own devices: partner agent devices and the wraps of
//! conversation content keys. Everything here is public keys or ciphertext; the server holds no secret key.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::Db;
use crate::clock::Millis;

/// A partner's agent device.
#[derive(Debug, Clone)]
pub struct AgentDevice {
    pub device_uuid: String,
    pub identity_key_pub: String,
    pub platform: Option<String>,
    pub key_version: i64,
}

const AGENT_COLUMNS: &str = "device_uuid, identity_key_pub, platform, key_version";

fn agent_from_row(row: &AnyRow) -> Result<AgentDevice, sqlx::Error> {
    Ok(AgentDevice {
        device_uuid: row.try_get("device_uuid")?,
        identity_key_pub: row.try_get("identity_key_pub")?,
        platform: row.try_get("platform")?,
        key_version: row.try_get("key_version")?,
    })
}

/// Publishes (or replaces) the key of one of the partner's agent devices; a different key bumps `key_version`.
pub async fn publish_agent_key(
    db: &Db,
    partner_id: i64,
    member_id: Option<i64>,
    device_uuid: &str,
    identity_key_pub: &str,
    platform: Option<&str>,
    now: Millis,
) -> Result<AgentDevice, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO agent_devices (partner_id, device_uuid, identity_key_pub, platform, key_version, created_at, \
         updated_at, member_id) VALUES ($1, $2, $3, $4, 1, $5, $5, $6) ON CONFLICT (partner_id, device_uuid) DO UPDATE SET \
         key_version = CASE WHEN agent_devices.identity_key_pub = excluded.identity_key_pub \
         THEN agent_devices.key_version ELSE agent_devices.key_version + 1 END, \
         identity_key_pub = excluded.identity_key_pub, platform = COALESCE(excluded.platform, agent_devices.platform), \
         updated_at = excluded.updated_at, member_id = excluded.member_id RETURNING ",
        AGENT_COLUMNS
    );
    let row = sqlx::query(sql)
        .bind(partner_id)
        .bind(device_uuid)
        .bind(identity_key_pub)
        .bind(platform)
        .bind(now)
        .bind(member_id)
        .fetch_one(db.writer())
        .await?;
    agent_from_row(&row)
}

/// The partner's agent devices, oldest first.
pub async fn agent_devices(db: &Db, partner_id: i64) -> Result<Vec<AgentDevice>, sqlx::Error> {
    let sql =
        const_format::concatcp!("SELECT ", AGENT_COLUMNS, " FROM agent_devices WHERE partner_id = $1 ORDER BY id");
    let rows = sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?;
    rows.iter().map(agent_from_row).collect()
}

/// One wrap of a conversation content key, to one device.
#[derive(Debug, Clone)]
pub struct ConversationKey {
    pub key_version: i64,
    /// `user` or `agent`.
    pub device_kind: String,
    pub device_uuid: String,
    pub wrap: String,
    pub wrap_nonce: String,
    pub sender_eph_pub: String,
    /// Who uploaded it: `user` or `agent`.
    pub uploaded_by: String,
    pub created_at: Millis,
}

const KEY_COLUMNS: &str =
    "key_version, device_kind, device_uuid, wrap, wrap_nonce, sender_eph_pub, uploaded_by, created_at";

fn key_from_row(row: &AnyRow) -> Result<ConversationKey, sqlx::Error> {
    Ok(ConversationKey {
        key_version: row.try_get("key_version")?,
        device_kind: row.try_get("device_kind")?,
        device_uuid: row.try_get("device_uuid")?,
        wrap: row.try_get("wrap")?,
        wrap_nonce: row.try_get("wrap_nonce")?,
        sender_eph_pub: row.try_get("sender_eph_pub")?,
        uploaded_by: row.try_get("uploaded_by")?,
        created_at: row.try_get("created_at")?,
    })
}

/// Stores the wraps of one content key version, all or none; a wrap to a device that already has one for
/// that version replaces it (the device published a new identity key).
pub async fn put_conversation_keys(
    db: &Db,
    conversation_id: i64,
    wraps: &[ConversationKey],
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    for w in wraps {
        sqlx::query(
            "INSERT INTO conversation_keys (conversation_id, key_version, device_kind, device_uuid, wrap, wrap_nonce, \
             sender_eph_pub, uploaded_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (conversation_id, key_version, device_kind, device_uuid) DO UPDATE SET wrap = excluded.wrap, \
             wrap_nonce = excluded.wrap_nonce, sender_eph_pub = excluded.sender_eph_pub, \
             uploaded_by = excluded.uploaded_by, created_at = excluded.created_at",
        )
        .bind(conversation_id)
        .bind(w.key_version)
        .bind(&w.device_kind)
        .bind(&w.device_uuid)
        .bind(&w.wrap)
        .bind(&w.wrap_nonce)
        .bind(&w.sender_eph_pub)
        .bind(&w.uploaded_by)
        .bind(w.created_at)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// The wraps addressed to one device in a conversation, by key version.
pub async fn conversation_keys_for(
    db: &Db,
    conversation_id: i64,
    device_kind: &str,
    device_uuid: &str,
) -> Result<Vec<ConversationKey>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        KEY_COLUMNS,
        " FROM conversation_keys WHERE conversation_id = $1 AND device_kind = $2 AND device_uuid = $3 \
         ORDER BY key_version"
    );
    let rows =
        sqlx::query(sql).bind(conversation_id).bind(device_kind).bind(device_uuid).fetch_all(db.reader()).await?;
    rows.iter().map(key_from_row).collect()
}

/// The newest content key version shared in a conversation, if any.
pub async fn latest_key_version(db: &Db, conversation_id: i64) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT MAX(key_version) FROM conversation_keys WHERE conversation_id = $1")
        .bind(conversation_id)
        .fetch_one(db.reader())
        .await
}

/// Whether wraps of `key_version` were shared in the conversation.
pub async fn has_key_version(db: &Db, conversation_id: i64, key_version: i64) -> Result<bool, sqlx::Error> {
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM conversation_keys WHERE conversation_id = $1 AND key_version = $2")
            .bind(conversation_id)
            .bind(key_version)
            .fetch_one(db.reader())
            .await?;
    Ok(n > 0)
}
