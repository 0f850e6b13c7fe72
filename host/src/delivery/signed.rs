//! Who a provider's webhook speaks for: the signature of a Twilio or WhatsApp Cloud API webhook checked
//! with the secret of the account it names (a partner's own, or the host's), before anything of it is
//! believed, and the senders of ours it may then move. What costs nothing is checked first.

use serde_json::Value;

use super::Delivery;
use super::receipts::{meta_signature, signature_matches, twilio_param, twilio_signature, whatsapp_numbers};
use crate::names::Channel;
use crate::senders::Ours;
use crate::store::senders;

/// Why a provider's webhook is not believed: no secret applies (404), a signature that is missing or does
/// not match (401), or a body that is not what it says (400).
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl SignatureError {
    fn unauthorized(why: impl Into<String>) -> Self {
        SignatureError::Unauthorized(why.into())
    }
}

/// The pairs of a Twilio webhook whose `X-Twilio-Signature` (HMAC-SHA1 with the auth token over `url`, the
/// query Twilio called it with, and the sorted pairs) matches, and our sender its signature speaks for: the
/// webhook of a partner's own Twilio account (its `AccountSid`) is checked with that account's auth token and
/// speaks for that partner's sender only, any other with the host's, for the host's sender (or a partner's
/// own number in the host's account). 404 when neither
/// is configured, 401 when the signature does not match. `ours`: the pair naming our number (`To` for an
/// inbound message, `From` for a status).
pub async fn twilio_signed(
    delivery: &Delivery,
    url: String,
    ours: &str,
    query: Option<&str>,
    presented: Option<&str>,
    body: &[u8],
) -> Result<(Vec<(String, String)>, Ours), SignatureError> {
    let presented = presented
        .filter(|s| s.trim().len() == 28)
        .ok_or(SignatureError::Unauthorized("X-Twilio-Signature is missing or malformed".into()))?;
    let params: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
        .map_err(|_| SignatureError::unauthorized("X-Twilio-Signature does not match"))?;
    let account = twilio_param(&params, "AccountSid").map(str::trim).unwrap_or("");
    let number = twilio_param(&params, ours).map(str::trim).unwrap_or("");
    let host = delivery.config.twilio_auth_token.as_deref().filter(|t| !t.is_empty());
    let host_account = delivery.config.twilio_account_sid.as_deref().map(str::trim).unwrap_or("");
    // The host's own account, or a webhook naming no account: the host's token.
    let mut own = match account.is_empty() || account == host_account {
        true => Vec::new(),
        false => senders::by_twilio_account(&delivery.db, account).await?,
    };
    let sender = match own.iter().position(|s| s.address == number) {
        Some(i) => Some(own.swap_remove(i)),
        None => own.into_iter().next(),
    };
    let token = match &sender {
        Some(sender) => sender.token.as_str(),
        None => host.ok_or_else(|| SignatureError::NotFound("Twilio provider"))?,
    };
    let url = match query {
        Some(query) => format!("{url}?{query}"),
        None => url,
    };
    let expected = twilio_signature(token, &url, &params);
    if !signature_matches(Some(presented), &expected) {
        return Err(SignatureError::unauthorized("X-Twilio-Signature does not match"));
    }
    let ours = match sender {
        Some(own) => Ours::own(&own),
        // The host's account speaks for its numbers and messaging services, one of which may be a partner's
        // own (bought for it): Twilio names the service a message came through (`MessagingServiceSid`).
        None => {
            let service = twilio_param(&params, "MessagingServiceSid").map(str::trim).unwrap_or("");
            let mut own = None;
            for address in [number, service].into_iter().filter(|a| !a.is_empty() && !host_account.is_empty()) {
                own = senders::by_address(&delivery.db, Channel::Sms, address)
                    .await?
                    .filter(|own| own.account == host_account);
                if own.is_some() {
                    break;
                }
            }
            match own {
                Some(own) => Ours::own(&own),
                None => Ours::host(delivery.sms_sender(number)),
            }
        }
    };
    Ok((params, ours))
}

/// The distinct numbers one notification signed by a partner's app may name (Meta names one): they are
/// looked up before the signature can be checked.
const NUMBERS_PER_NOTIFICATION: usize = 16;

/// Checks a WhatsApp Cloud API webhook's `X-Hub-Signature-256` and answers the numbers it speaks for, with
/// the body as JSON. What costs nothing comes first: a signature that is missing or not `sha256=` and 64 hex
/// digits is 401 at once, and one made with the host's app secret speaks for the host's number (and the
/// partners' own numbers of the host's app) before the body is read; otherwise the body must be JSON naming
/// at most [`NUMBERS_PER_NOTIFICATION`] numbers, and those that are partners' own (one Meta app, one secret)
/// give the secret it is checked with. 404 when no secret applies, 401 when the signature does not match.
pub async fn whatsapp_signed(
    delivery: &Delivery,
    presented: Option<&str>,
    body: &[u8],
) -> Result<(Vec<Ours>, Value), SignatureError> {
    let mismatch = || SignatureError::unauthorized("X-Hub-Signature-256 does not match");
    let presented = presented
        .map(str::trim)
        .filter(|s| {
            s.strip_prefix("sha256=").is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .ok_or_else(|| SignatureError::unauthorized("X-Hub-Signature-256 is missing or not sha256=<64 hex digits>"))?;
    let host = delivery.config.whatsapp_app_secret.as_deref().filter(|t| !t.is_empty());
    let by_host = host.is_some_and(|secret| signature_matches(Some(presented), &meta_signature(secret, body)));
    let payload = || -> Result<Value, SignatureError> {
        serde_json::from_slice(body).map_err(|e| SignatureError::BadRequest(format!("body is not valid JSON: {e}")))
    };
    if by_host {
        let payload = payload()?;
        let mut ours = vec![Ours::host(delivery.sender(Channel::Whatsapp))];
        // A partner whose app is the host's own: its number is spoken for too.
        for number in whatsapp_numbers(&payload, NUMBERS_PER_NOTIFICATION).unwrap_or_default() {
            if let Some(own) = senders::by_address(&delivery.db, Channel::Whatsapp, &number).await?
                && own.app_secret.as_deref() == host
            {
                ours.push(Ours::own(&own));
            }
        }
        return Ok((ours, payload));
    }
    // Not the host's signature: only a partner's own app may have made it, and the body names the numbers.
    let payload = payload().map_err(|_| mismatch())?;
    let numbers = whatsapp_numbers(&payload, NUMBERS_PER_NOTIFICATION).ok_or_else(|| {
        SignatureError::unauthorized(format!(
            "a notification not signed by this host's app names at most {NUMBERS_PER_NOTIFICATION} numbers"
        ))
    })?;
    let mut own = Vec::new();
    for number in numbers {
        if let Some(sender) = senders::by_address(&delivery.db, Channel::Whatsapp, &number).await? {
            own.push(sender);
        }
    }
    let Some(first) = own.first() else {
        return Err(match host {
            Some(_) => mismatch(),
            None => SignatureError::NotFound("WhatsApp app secret"),
        });
    };
    if own.iter().any(|s| s.app_secret != first.app_secret) {
        return Err(SignatureError::unauthorized("the numbers of this notification belong to different Meta apps"));
    }
    let secret = first.app_secret.as_deref().ok_or_else(mismatch)?;
    if !signature_matches(Some(presented), &meta_signature(secret, body)) {
        return Err(mismatch());
    }
    Ok((own.iter().map(Ours::own).collect(), payload))
}
