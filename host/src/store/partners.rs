//! Partner organisations and their API keys (stored as SHA-256 digests only): a partner holds several keys
//! (`partner_keys`), each named, with its prefix, when it was created, last used and revoked, so a key can be
//! replaced without downtime.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, decode_name, is_unique_violation};
use crate::clock::Millis;
use crate::names::MemberRole;

#[derive(Debug, Clone)]
pub struct Partner {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub is_platform: bool,
    /// The configured event destination (`PUT /settings/webhook`), if any.
    pub webhook_url: Option<String>,
}

fn from_row(row: &AnyRow) -> Result<Partner, sqlx::Error> {
    Ok(Partner {
        id: row.try_get("id")?,
        code: row.try_get("code")?,
        name: row.try_get("name")?,
        is_platform: row.try_get::<i64, _>("is_platform")? != 0,
        webhook_url: row.try_get("webhook_url")?,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum CreatePartnerError {
    #[error("a partner with code {0:?} already exists")]
    Duplicate(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Inserts a partner with the digest of its first API key (named `default`).
pub async fn insert_partner(
    db: &Db,
    code: &str,
    name: &str,
    is_platform: bool,
    key_hash: &str,
    key_prefix: &str,
    now: Millis,
) -> Result<Partner, CreatePartnerError> {
    let mut tx = db.begin().await?;
    let result = sqlx::query(
        "INSERT INTO partners (code, name, is_platform, key_hash, key_prefix, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         RETURNING id, code, name, is_platform, webhook_url",
    )
    .bind(code)
    .bind(name)
    .bind(is_platform as i64)
    .bind(key_hash)
    .bind(key_prefix)
    .bind(now)
    .fetch_one(&mut *tx)
    .await;
    let partner = match result {
        Ok(row) => from_row(&row)?,
        Err(e) if is_unique_violation(&e) => return Err(CreatePartnerError::Duplicate(code.to_string())),
        Err(e) => return Err(e.into()),
    };
    insert_key_in(&mut tx, partner.id, "default", key_hash, key_prefix, KeyMaker::OPERATOR, now).await?;
    tx.commit().await?;
    Ok(partner)
}

/// Replaces all of a partner's API keys with one (`rotated`): every other key stops working at once. False
/// when no such partner.
pub async fn replace_key(
    db: &Db,
    code: &str,
    key_hash: &str,
    key_prefix: &str,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let id: Option<i64> =
        sqlx::query_scalar("UPDATE partners SET key_hash = $1, key_prefix = $2 WHERE code = $3 RETURNING id")
            .bind(key_hash)
            .bind(key_prefix)
            .bind(code)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(id) = id else { return Ok(false) };
    sqlx::query("UPDATE partner_keys SET revoked_at = $1 WHERE partner_id = $2 AND revoked_at IS NULL")
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    insert_key_in(&mut tx, id, "rotated", key_hash, key_prefix, KeyMaker::OPERATOR, now).await?;
    tx.commit().await?;
    Ok(true)
}

/// A working API key as a request presents it: which key, the role it acts with, and the member who made
/// it (none: the command line, or a key of the time before roles — an owner's).
#[derive(Debug, Clone)]
pub struct KeyAuth {
    pub id: i64,
    pub role: MemberRole,
    pub created_by: Option<i64>,
}

/// The partner whose (unrevoked) key has this digest, with the key and the stored digest for a
/// constant-time re-check.
pub async fn find_by_key_hash(db: &Db, key_hash: &str) -> Result<Option<(Partner, KeyAuth, String)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT p.id, p.code, p.name, p.is_platform, p.webhook_url, k.id AS key_id, k.key_hash, k.role, k.created_by \
         FROM partner_keys k JOIN partners p ON p.id = k.partner_id \
         WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
    )
    .bind(key_hash)
    .fetch_optional(db.reader())
    .await?;
    row.map(|r| {
        let key =
            KeyAuth { id: r.try_get("key_id")?, role: decode_name(&r, "role")?, created_by: r.try_get("created_by")? };
        Ok((from_row(&r)?, key, r.try_get("key_hash")?))
    })
    .transpose()
}

/// One of a partner's API keys, as it is listed (never the key itself).
#[derive(Debug, Clone)]
pub struct PartnerKey {
    pub id: i64,
    pub name: String,
    pub prefix: String,
    /// What it may do: the role of the member who made it.
    pub role: MemberRole,
    /// The member who made it (none: the command line, or made before roles; or the member was removed,
    /// and the key revoked with them).
    pub created_by: Option<i64>,
    pub created_at: Millis,
    pub last_used_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
}

const KEY_COLUMNS: &str = "id, name, key_prefix, role, created_by, created_at, last_used_at, revoked_at";

fn key_from_row(row: &AnyRow) -> Result<PartnerKey, sqlx::Error> {
    Ok(PartnerKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        prefix: row.try_get("key_prefix")?,
        role: decode_name(row, "role")?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
        last_used_at: row.try_get("last_used_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

/// Who makes a key: the role it gets and the member behind it (none: the command line, an owner's).
#[derive(Debug, Clone, Copy)]
pub struct KeyMaker {
    pub role: MemberRole,
    pub member_id: Option<i64>,
}

impl KeyMaker {
    /// The command line, or the partner's own first key: an owner's.
    pub const OPERATOR: KeyMaker = KeyMaker { role: MemberRole::Owner, member_id: None };
}

async fn insert_key_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    partner_id: i64,
    name: &str,
    key_hash: &str,
    key_prefix: &str,
    maker: KeyMaker,
    now: Millis,
) -> Result<PartnerKey, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO partner_keys (partner_id, name, key_hash, key_prefix, role, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ",
        KEY_COLUMNS
    );
    let row = sqlx::query(sql)
        .bind(partner_id)
        .bind(name)
        .bind(key_hash)
        .bind(key_prefix)
        .bind(maker.role.as_str())
        .bind(maker.member_id)
        .bind(now)
        .fetch_one(&mut **tx)
        .await?;
    key_from_row(&row)
}

/// A new key of the partner's, with the role of who made it.
pub async fn create_key(
    db: &Db,
    partner_id: i64,
    name: &str,
    key_hash: &str,
    key_prefix: &str,
    maker: KeyMaker,
    now: Millis,
) -> Result<PartnerKey, sqlx::Error> {
    let mut tx = db.begin().await?;
    let key = insert_key_in(&mut tx, partner_id, name, key_hash, key_prefix, maker, now).await?;
    tx.commit().await?;
    Ok(key)
}

/// The partner's keys, newest first, revoked ones too.
pub async fn list_keys(db: &Db, partner_id: i64) -> Result<Vec<PartnerKey>, sqlx::Error> {
    let sql =
        const_format::concatcp!("SELECT ", KEY_COLUMNS, " FROM partner_keys WHERE partner_id = $1 ORDER BY id DESC");
    let rows = sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?;
    rows.iter().map(key_from_row).collect()
}

/// What revoking a key came to.
pub enum Revoked {
    /// Revoked now, or already.
    Done(PartnerKey),
    /// No such key of this partner's.
    NotFound,
    /// It is the partner's last working key: revoking it would lock the partner out.
    LastKey,
    /// It acts with a role above the revoker's (an admin may not revoke an owner's key).
    Outranked,
}

/// Revokes one of the partner's keys for one acting as `by` (a role), unless it is the last one that works or
/// acts with a role above `by`'s.
pub async fn revoke_key(
    db: &Db,
    partner_id: i64,
    key_id: i64,
    by: MemberRole,
    now: Millis,
) -> Result<Revoked, sqlx::Error> {
    let mut tx = db.begin().await?;
    let sql = const_format::concatcp!("SELECT ", KEY_COLUMNS, " FROM partner_keys WHERE id = $1 AND partner_id = $2");
    let Some(row) = sqlx::query(sql).bind(key_id).bind(partner_id).fetch_optional(&mut *tx).await? else {
        return Ok(Revoked::NotFound);
    };
    let mut key = key_from_row(&row)?;
    if key.revoked_at.is_some() {
        return Ok(Revoked::Done(key));
    }
    if key.role.rank() > by.rank() {
        return Ok(Revoked::Outranked);
    }
    let others: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM partner_keys WHERE partner_id = $1 AND id <> $2 AND revoked_at IS NULL",
    )
    .bind(partner_id)
    .bind(key_id)
    .fetch_one(&mut *tx)
    .await?;
    if others == 0 {
        return Ok(Revoked::LastKey);
    }
    sqlx::query("UPDATE partner_keys SET revoked_at = $1 WHERE id = $2")
        .bind(now)
        .bind(key_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    key.revoked_at = Some(now);
    Ok(Revoked::Done(key))
}

/// How often a key's `last_used_at` is written at most.
pub const KEY_USE_INTERVAL_MS: Millis = 60_000;

/// When this host last wrote each key's use, so a busy key costs the writer one statement a minute, not
/// one per request.
pub struct KeyUses {
    written: super::writer::WrittenWithin<i64>,
}

impl Default for KeyUses {
    fn default() -> Self {
        KeyUses { written: super::writer::WrittenWithin::new(KEY_USE_INTERVAL_MS) }
    }
}

impl KeyUses {
    /// Whether `key_id`'s use now is to be written (this host has not within [`KEY_USE_INTERVAL_MS`]); when
    /// it is, it counts as written from now on.
    pub fn due(&self, key_id: i64, now: Millis) -> bool {
        if self.written.recent(&key_id, now) {
            return false;
        }
        self.written.mark(key_id, now);
        true
    }

    /// Writes that `key_id` was used at `now` (after [`KeyUses::due`] said so).
    pub async fn write(db: &Db, key_id: i64, now: Millis) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE partner_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)",
        )
        .bind(now)
        .bind(key_id)
        .execute(db.writer())
        .await?;
        Ok(())
    }
}

pub async fn find_by_code(db: &Db, code: &str) -> Result<Option<Partner>, sqlx::Error> {
    let row = sqlx::query("SELECT id, code, name, is_platform, webhook_url FROM partners WHERE code = $1")
        .bind(code)
        .fetch_optional(db.reader())
        .await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find_by_id(db: &Db, id: i64) -> Result<Option<Partner>, sqlx::Error> {
    let row = sqlx::query("SELECT id, code, name, is_platform, webhook_url FROM partners WHERE id = $1")
        .bind(id)
        .fetch_optional(db.reader())
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// The partner's webhook secret (needed in the clear to sign).
pub async fn webhook_secret(db: &Db, partner_id: i64) -> Result<Option<String>, sqlx::Error> {
    let sealed: Option<String> = sqlx::query_scalar("SELECT webhook_secret FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await?;
    sealed.map(|s| db.keyring().open(SECRET_COLUMN, &s).map_err(super::sealing::to_sqlx)).transpose()
}

/// Where partners' webhook secrets are sealed (see `store::sealing`).
const SECRET_COLUMN: &str = "partners.webhook_secret";

/// Sets (or clears) the webhook URL; replaces the secret when `new_secret` is given.
pub async fn set_webhook(
    db: &Db,
    partner_id: i64,
    url: Option<&str>,
    new_secret: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE partners SET webhook_url = $1, webhook_secret = COALESCE($2, webhook_secret) WHERE id = $3")
        .bind(url)
        .bind(new_secret.map(|s| db.keyring().seal(SECRET_COLUMN, s)))
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// The platform partner (the first one created with `--platform`).
pub async fn find_platform(db: &Db) -> Result<Option<Partner>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT id, code, name, is_platform, webhook_url FROM partners WHERE is_platform = 1 ORDER BY id LIMIT 1",
    )
    .fetch_optional(db.reader())
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// The partner's fallback window after the hub, in seconds (`None`: the host's default; `Some(-1)`: the hub
/// only).
pub async fn hub_fallback(db: &Db, partner_id: i64) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT hub_fallback_after_s FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await
}

/// Seconds the partner's messages wait out a provider's outage before the chain moves on (`None`: the
/// host's default).
pub async fn provider_retry(db: &Db, partner_id: i64) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT provider_retry_s FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await
}

/// What the partner's WhatsApp messages do when its business account reached Meta's daily limit: `wait` for
/// room, or go by `sms`.
pub async fn over_limit(db: &Db, partner_id: i64) -> Result<String, sqlx::Error> {
    sqlx::query_scalar("SELECT over_limit FROM partners WHERE id = $1").bind(partner_id).fetch_one(db.reader()).await
}

/// Whether the partner asked for a `message.attempt` event of every WhatsApp and SMS try.
pub async fn attempt_events(db: &Db, partner_id: i64) -> Result<bool, sqlx::Error> {
    let on: i64 = sqlx::query_scalar("SELECT attempt_events FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await?;
    Ok(on != 0)
}

/// What a partner sets of its messages' delivery (`/settings/delivery`), kept in one statement: the hub's
/// wait (`None`: the host's; `-1`: the hub only), answers outside WhatsApp's window, the outage waited out
/// (`None`: the default), `message.attempt` events, what a full daily limit does, and the default quiet
/// window with its time zone.
pub struct DeliverySettings<'a> {
    pub hub_fallback_after_s: Option<i64>,
    pub whatsapp_window_fallback: bool,
    pub provider_retry_s: Option<i64>,
    pub attempt_events: bool,
    pub over_limit: &'a str,
    pub quiet: Option<(crate::preferences::Window, String)>,
}

/// Keeps partner `partner_id`'s delivery settings, all of them at once.
pub async fn set_delivery_settings(db: &Db, partner_id: i64, s: &DeliverySettings<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE partners SET hub_fallback_after_s = $1, whatsapp_window_fallback = $2, provider_retry_s = $3, \
         attempt_events = $4, over_limit = $5, quiet_start = $6, quiet_end = $7, quiet_time_zone = $8 WHERE id = $9",
    )
    .bind(s.hub_fallback_after_s)
    .bind(i64::from(s.whatsapp_window_fallback))
    .bind(s.provider_retry_s)
    .bind(i64::from(s.attempt_events))
    .bind(s.over_limit)
    .bind(s.quiet.as_ref().map(|(w, _)| w.start))
    .bind(s.quiet.as_ref().map(|(w, _)| w.end))
    .bind(s.quiet.as_ref().map(|(_, tz)| tz.clone()))
    .bind(partner_id)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Whether an agent's free-form answer to a WhatsApp user outside WhatsApp's 24-hour window goes on by the
/// other channels (the hub, then SMS) instead of being refused.
pub async fn whatsapp_window_fallback(db: &Db, partner_id: i64) -> Result<bool, sqlx::Error> {
    let on: i64 = sqlx::query_scalar("SELECT whatsapp_window_fallback FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await?;
    Ok(on != 0)
}
