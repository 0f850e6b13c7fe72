//! Partners' own senders (migration 0027): a partner's WhatsApp number or Twilio sender, used instead of the
//! host's shared one for its users, with the credentials sealed at rest (see `store::sealing`).

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, decode_name, is_unique_violation};
use crate::clock::Millis;
use crate::names::Channel;

/// Where the senders' tokens and app secrets are sealed.
const TOKEN_COLUMN: &str = "partner_senders.token";
const APP_SECRET_COLUMN: &str = "partner_senders.app_secret";

/// A partner's own sender on a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub partner_id: i64,
    pub channel: Channel,
    /// WhatsApp: the phone number id; SMS: the Twilio number (E.164) or messaging service (`MG…`).
    pub address: String,
    /// WhatsApp: the business account id; SMS: the Twilio account SID.
    pub account: String,
    /// WhatsApp: the access token; SMS: the auth token (which also signs Twilio's webhooks).
    pub token: String,
    /// WhatsApp: the Meta app's secret (which signs its webhooks).
    pub app_secret: Option<String>,
    /// Its messages a second (`None`: the host's default for its channel).
    pub mps: Option<u32>,
    pub updated_at: Millis,
}

const COLUMNS: &str =
    "SELECT partner_id, channel, address, account, token, app_secret, mps, updated_at FROM partner_senders ";

fn from_row(db: &Db, r: &AnyRow) -> Result<Sender, sqlx::Error> {
    let keyring = db.keyring();
    let app_secret: Option<String> = r.try_get("app_secret")?;
    Ok(Sender {
        partner_id: r.try_get("partner_id")?,
        channel: decode_name(r, "channel")?,
        address: r.try_get("address")?,
        account: r.try_get("account")?,
        token: keyring.open(TOKEN_COLUMN, &r.try_get::<String, _>("token")?).map_err(super::sealing::to_sqlx)?,
        app_secret: app_secret
            .map(|s| keyring.open(APP_SECRET_COLUMN, &s).map_err(super::sealing::to_sqlx))
            .transpose()?,
        mps: r.try_get::<Option<i64>, _>("mps")?.map(|n| n.clamp(1, u32::MAX as i64) as u32),
        updated_at: r.try_get("updated_at")?,
    })
}

/// Sets the partner's sender on its channel (replacing the one it had): `false` when another partner
/// already has that address.
pub async fn set(db: &Db, s: &Sender, now: Millis) -> Result<bool, sqlx::Error> {
    let keyring = db.keyring();
    let result = sqlx::query(
        "INSERT INTO partner_senders \
         (partner_id, channel, address, account, token, app_secret, mps, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $8, $7, $7) ON CONFLICT (partner_id, channel) DO UPDATE SET \
         address = excluded.address, account = excluded.account, token = excluded.token, \
         app_secret = excluded.app_secret, mps = excluded.mps, updated_at = excluded.updated_at",
    )
    .bind(s.partner_id)
    .bind(s.channel.as_str())
    .bind(&s.address)
    .bind(&s.account)
    .bind(keyring.seal(TOKEN_COLUMN, &s.token))
    .bind(s.app_secret.as_deref().map(|secret| keyring.seal(APP_SECRET_COLUMN, secret)))
    .bind(now)
    .bind(s.mps.map(i64::from))
    .execute(db.writer())
    .await;
    match result {
        Ok(_) => Ok(true),
        Err(e) if is_unique_violation(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The partner's sender on `channel`, if it has its own.
pub async fn of_partner(db: &Db, partner_id: i64, channel: Channel) -> Result<Option<Sender>, sqlx::Error> {
    let sql = const_format::concatcp!(COLUMNS, "WHERE partner_id = $1 AND channel = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(channel.as_str()).fetch_optional(db.reader()).await?;
    row.as_ref().map(|r| from_row(db, r)).transpose()
}

/// The partner's senders, WhatsApp first.
pub async fn list(db: &Db, partner_id: i64) -> Result<Vec<Sender>, sqlx::Error> {
    let sql = const_format::concatcp!(COLUMNS, "WHERE partner_id = $1 ORDER BY channel DESC");
    let rows = sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?;
    rows.iter().map(|r| from_row(db, r)).collect()
}

/// The sender with this address on `channel` (the number a message was sent to).
pub async fn by_address(db: &Db, channel: Channel, address: &str) -> Result<Option<Sender>, sqlx::Error> {
    let sql = const_format::concatcp!(COLUMNS, "WHERE channel = $1 AND address = $2");
    let row = sqlx::query(sql).bind(channel.as_str()).bind(address).fetch_optional(db.reader()).await?;
    row.as_ref().map(|r| from_row(db, r)).transpose()
}

/// The SMS senders of a Twilio account (its webhooks carry the `AccountSid`).
pub async fn by_twilio_account(db: &Db, account_sid: &str) -> Result<Vec<Sender>, sqlx::Error> {
    let sql = const_format::concatcp!(COLUMNS, "WHERE channel = 'sms' AND account = $1");
    let rows = sqlx::query(sql).bind(account_sid).fetch_all(db.reader()).await?;
    rows.iter().map(|r| from_row(db, r)).collect()
}

/// Removes the partner's sender on `channel` (its users go back to the host's): whether it had one.
pub async fn remove(db: &Db, partner_id: i64, channel: Channel) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM partner_senders WHERE partner_id = $1 AND channel = $2")
        .bind(partner_id)
        .bind(channel.as_str())
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Removes the senders with `address` on `channel`, whichever partner has them: the partners that had one.
pub async fn remove_address(db: &Db, channel: Channel, address: &str) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("DELETE FROM partner_senders WHERE channel = $1 AND address = $2 RETURNING partner_id")
        .bind(channel.as_str())
        .bind(address)
        .fetch_all(db.writer())
        .await
}
