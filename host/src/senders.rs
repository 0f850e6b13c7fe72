//! Partners' own senders: what a partner gives for its own WhatsApp number or Twilio sender, checked in one
//! place for the API (`/settings/senders`) and the CLI (`hubbub partner sender`): well formed, not one of the
//! host's own, and held by the credentials given (asked of the provider, `providers::check_ownership`).
//! They are kept by `store::senders` and used by delivery (sends) and the provider webhooks (inbound
//! routing, signatures).

use crate::clock::Millis;
use crate::config::Config;
use crate::names::Channel;
use crate::providers::OwnershipError;
use crate::store::Db;
use crate::store::senders::{self as store};
pub use crate::store::senders::{Sender, list};
use crate::validate::{Invalid, is_e164};

/// One of our senders, as a provider's signed webhook speaks for it and as what that webhook sets is kept:
/// the host's shared sender (no account, no partner) or a partner's own (its Twilio account SID or WhatsApp
/// business account id, and the partner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ours {
    /// The Twilio number or messaging service, or the WhatsApp phone number id (`dev`: the development sink).
    pub address: String,
    /// Empty for the host's own.
    pub account: String,
    pub partner_id: Option<i64>,
}

impl Ours {
    /// The host's sender `address`.
    pub fn host(address: String) -> Ours {
        Ours { address, account: String::new(), partner_id: None }
    }

    /// A partner's own sender.
    pub fn own(sender: &Sender) -> Ours {
        Ours { address: sender.address.clone(), account: sender.account.clone(), partner_id: Some(sender.partner_id) }
    }
}

/// Why a partner's own sender was not set.
#[derive(Debug)]
pub enum SenderError {
    /// A field is missing, malformed, one of the host's, or not held by the credentials.
    Invalid(Invalid),
    /// Another partner has that address.
    Taken(String),
    /// The provider could not be asked now.
    Unreachable(String),
    Database(sqlx::Error),
}

impl From<sqlx::Error> for SenderError {
    fn from(e: sqlx::Error) -> Self {
        SenderError::Database(e)
    }
}

/// Sets `partner_id`'s own sender on `channel` from `fields` (replacing the one it had), once it is shown
/// to be well formed, not the host's, and held by the credentials given (`Delivery::set_own_sender` puts it
/// to use on this host at once; `hubbub partner set-sender` calls it alone).
pub async fn register(
    db: &Db,
    config: &Config,
    http: &reqwest::Client,
    partner_id: i64,
    channel: Channel,
    fields: &Fields,
    now: Millis,
) -> Result<Sender, SenderError> {
    let sender = check(partner_id, channel, fields, now).map_err(SenderError::Invalid)?;
    refuse_hosts(config, &sender).map_err(SenderError::Invalid)?;
    crate::providers::check_ownership(config, http, &sender).await.map_err(|e| match e {
        OwnershipError::Refused { field, reason } => SenderError::Invalid(Invalid::new(field, reason)),
        OwnershipError::Unreachable(why) => SenderError::Unreachable(why),
    })?;
    if store::set(db, &sender, now).await? {
        return Ok(sender);
    }
    // Another partner holds the address: theirs only while their own credentials still hold it (a sender
    // set before senders were proved may be a squatter's). Proved no more, it goes to the one who proves it.
    let Some(holder) = store::by_address(db, channel, &sender.address).await? else {
        return Err(SenderError::Taken(sender.address));
    };
    match crate::providers::check_ownership(config, http, &holder).await {
        Ok(()) => Err(SenderError::Taken(sender.address)),
        Err(OwnershipError::Unreachable(why)) => Err(SenderError::Unreachable(why)),
        Err(OwnershipError::Refused { reason, .. }) => {
            tracing::warn!(
                partner_id = holder.partner_id,
                channel = channel.as_str(),
                address = %holder.address,
                %reason,
                "a partner's sender is not its own any more: it goes to the partner that proved it"
            );
            store::remove(db, holder.partner_id, channel).await?;
            match store::set(db, &sender, now).await? {
                true => Ok(sender),
                false => Err(SenderError::Taken(sender.address)),
            }
        }
    }
}

/// Takes back the host's own senders from any partner that holds one (set before partners' own senders were
/// checked): at start, before anything is sent or received. Answers the partners they were taken from.
pub async fn release_hosts(db: &Db, config: &Config) -> Result<Vec<i64>, sqlx::Error> {
    let mut released = Vec::new();
    for (channel, address) in
        [(Channel::Sms, config.twilio_from.as_deref()), (Channel::Whatsapp, config.whatsapp_phone_number_id.as_deref())]
    {
        let Some(address) = address.map(str::trim).filter(|a| !a.is_empty()) else { continue };
        for partner_id in store::remove_address(db, channel, address).await? {
            tracing::error!(
                partner_id,
                channel = channel.as_str(),
                address,
                "a partner held the host's own sender as its own: removed (docs/security.md, Hardening III)"
            );
            released.push(partner_id);
        }
    }
    Ok(released)
}

/// Refuses the host's own senders as a partner's: its WhatsApp number, its Twilio number or messaging
/// service. Taking one would route people's replies to the shared number to that partner, let it sign
/// webhooks about the shared number, and so opt people out of every partner's messages. (A partner's number
/// may be in the host's own Twilio account or WhatsApp business account: the operator bought it for the
/// partner, and the provider is asked with the credentials given, which only the operator holds.)
fn refuse_hosts(config: &Config, sender: &Sender) -> Result<(), Invalid> {
    let (hosts, field) = match sender.channel {
        Channel::Whatsapp => (config.whatsapp_phone_number_id.as_deref(), "phone_number_id"),
        _ => (config.twilio_from.as_deref(), "from"),
    };
    if hosts.map(str::trim).is_some_and(|h| !h.is_empty() && h.eq_ignore_ascii_case(&sender.address)) {
        return Err(Invalid::new(field, format!("{} is this host's shared sender", sender.address)));
    }
    Ok(())
}

/// What a partner gives for its own sender. WhatsApp: `phone_number_id`, `business_account_id`, `token`,
/// `app_secret`; SMS: `account_sid`, `auth_token`, `from`.
#[derive(Debug, Default, Clone)]
pub struct Fields {
    pub phone_number_id: Option<String>,
    pub business_account_id: Option<String>,
    pub token: Option<String>,
    pub app_secret: Option<String>,
    pub account_sid: Option<String>,
    pub auth_token: Option<String>,
    pub from: Option<String>,
    /// Its messages a second, 1 to [`MAX_MPS`] (`None`: the host's default for the channel).
    pub mps: Option<i64>,
}

/// The most messages a second a sender may be given (Meta's highest tier is 1,000; a Twilio messaging
/// service with many numbers may send more, never this many).
pub const MAX_MPS: i64 = 10_000;

fn required(value: &Option<String>, field: &str) -> Result<String, Invalid> {
    let value = value.as_deref().map(str::trim).filter(|v| !v.is_empty());
    value.map(str::to_string).ok_or_else(|| Invalid::new(field, format!("{field} is required")))
}

fn digits(value: &str) -> bool {
    !value.is_empty() && value.len() <= 32 && value.bytes().all(|b| b.is_ascii_digit())
}

/// The sender `fields` describe for `partner_id` on `channel` (`whatsapp` or `sms`), or the first field
/// that is wrong.
pub fn check(partner_id: i64, channel: Channel, fields: &Fields, now: Millis) -> Result<Sender, Invalid> {
    let (address, account, token, app_secret) = match channel {
        Channel::Whatsapp => {
            let id = required(&fields.phone_number_id, "phone_number_id")?;
            let account = required(&fields.business_account_id, "business_account_id")?;
            if !digits(&id) {
                return Err(Invalid::new("phone_number_id", "phone_number_id is the number's id: digits"));
            }
            if !digits(&account) {
                return Err(Invalid::new("business_account_id", "business_account_id is digits"));
            }
            (id, account, required(&fields.token, "token")?, Some(required(&fields.app_secret, "app_secret")?))
        }
        Channel::Sms => {
            let sid = required(&fields.account_sid, "account_sid")?;
            if !(sid.starts_with("AC") && sid.len() == 34 && sid.chars().all(|c| c.is_ascii_alphanumeric())) {
                return Err(Invalid::new("account_sid", "account_sid is AC and 32 hex digits"));
            }
            let from = required(&fields.from, "from")?;
            let service = from
                .strip_prefix("MG")
                .is_some_and(|sid| sid.len() == 32 && sid.bytes().all(|b| b.is_ascii_alphanumeric()));
            if !is_e164(&from) && !service {
                return Err(Invalid::new(
                    "from",
                    "from is a number in E.164 form or a messaging service SID (MG and 32 hex digits)",
                ));
            }
            (from, sid, required(&fields.auth_token, "auth_token")?, None)
        }
        Channel::Inapp => return Err(Invalid::new("channel", "a partner's own sender is on whatsapp or sms")),
    };
    let mps = match fields.mps {
        None => None,
        Some(mps) if (1..=MAX_MPS).contains(&mps) => Some(mps as u32),
        Some(_) => return Err(Invalid::new("mps", format!("mps is messages a second: 1 to {MAX_MPS}"))),
    };
    Ok(Sender { partner_id, channel, address, account, token, app_secret, mps, updated_at: now })
}

/// The first characters of a secret and an ellipsis: how a sender's credentials are shown back.
pub fn prefix(secret: &str) -> String {
    format!("{}…", secret.chars().take(6).collect::<String>())
}

/// The messaging limit of a WhatsApp business account: people a day it may reach first (the host's default
/// when Meta has said none; `None`: no limit), Meta's last word on its quality, and how many it reached in
/// the last 24 hours.
pub struct Limits {
    pub daily_limit: Option<i64>,
    pub limit_known: bool,
    pub quality: Option<String>,
    pub reached_today: i64,
}

/// The [`Limits`] of WhatsApp business account `account` (`default`: the host's daily limit).
pub async fn limits(
    db: &Db,
    account: &str,
    default: Option<i64>,
    now: crate::clock::Millis,
) -> Result<Limits, sqlx::Error> {
    let kept = crate::store::limits::of(db, account).await?;
    Ok(Limits {
        daily_limit: kept.as_ref().map_or(default, |k| k.daily_limit),
        limit_known: kept.is_some(),
        quality: kept.and_then(|k| k.quality),
        reached_today: crate::store::limits::reached_today(db, account, now).await?,
    })
}

/// The most people a day a partner may say its WhatsApp account reaches first.
pub const MAX_DAILY_LIMIT: i64 = 100_000_000;

/// Checks a daily limit a partner gives for its WhatsApp account: 1 to [`MAX_DAILY_LIMIT`].
pub fn check_daily_limit(limit: Option<i64>) -> Result<(), crate::validate::Invalid> {
    if limit.is_some_and(|n| !(1..=MAX_DAILY_LIMIT).contains(&n)) {
        return Err(crate::validate::Invalid::new("daily_limit", "daily_limit is people a day: 1 to 100000000"));
    }
    Ok(())
}

/// Keeps the daily limit a partner gives for its WhatsApp account `account` (until Meta says another).
pub async fn set_daily_limit(db: &Db, account: &str, limit: i64, now: crate::clock::Millis) -> Result<(), sqlx::Error> {
    crate::store::limits::set(db, account, Some(limit), None, now).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_needs_its_own_fields_well_formed() {
        let wa = Fields {
            phone_number_id: Some("111".into()),
            business_account_id: Some("900".into()),
            token: Some("t".into()),
            app_secret: Some("s".into()),
            ..Fields::default()
        };
        let sender = check(7, Channel::Whatsapp, &wa, 1).unwrap();
        assert_eq!((sender.address.as_str(), sender.app_secret.as_deref()), ("111", Some("s")));
        let no_secret = Fields { app_secret: None, ..wa.clone() };
        assert_eq!(check(7, Channel::Whatsapp, &no_secret, 1).unwrap_err().field, "app_secret");
        let letters = Fields { phone_number_id: Some("+1555".into()), ..wa };
        assert_eq!(check(7, Channel::Whatsapp, &letters, 1).unwrap_err().field, "phone_number_id");
        let sms = Fields {
            account_sid: Some("AC0123456789abcdef0123456789abcdef".into()),
            auth_token: Some("t".into()),
            from: Some("+15550002222".into()),
            ..Fields::default()
        };
        assert_eq!(check(7, Channel::Sms, &sms, 1).unwrap().account, "AC0123456789abcdef0123456789abcdef");
        let bad_from = Fields { from: Some("2222".into()), ..sms };
        assert_eq!(check(7, Channel::Sms, &bad_from, 1).unwrap_err().field, "from");
        assert_eq!(prefix("acme-wa-token"), "acme-w…");
    }
}
