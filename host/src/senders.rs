//! Partners' own senders: what a partner gives for its own WhatsApp number or Twilio sender, checked in one
//! place for the API (`/settings/senders`) and the CLI (`hubbub partner sender`). They are kept by
//! `store::senders` and used by delivery (sends) and the provider webhooks (inbound routing, signatures).

use crate::clock::Millis;
use crate::names::Channel;
use crate::store::senders::Sender;
use crate::validate::{Invalid, is_e164};

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
}

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
            if !is_e164(&from) && !(from.starts_with("MG") && from.len() == 34) {
                return Err(Invalid::new(
                    "from",
                    "from is a number in E.164 form or a messaging service SID (MG and 32 hex digits)",
                ));
            }
            (from, sid, required(&fields.auth_token, "auth_token")?, None)
        }
        Channel::Inapp => return Err(Invalid::new("channel", "a partner's own sender is on whatsapp or sms")),
    };
    Ok(Sender { partner_id, channel, address, account, token, app_secret, updated_at: now })
}

/// The first characters of a secret and an ellipsis: how a sender's credentials are shown back.
pub fn prefix(secret: &str) -> String {
    format!("{}…", secret.chars().take(6).collect::<String>())
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
