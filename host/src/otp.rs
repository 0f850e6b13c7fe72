//! One-time codes by SMS, shared by user login and developer sign-up: 6 digits, kept only as an HMAC
//! keyed with the service secret, 10-minute expiry, 5 tries. Sends are limited per phone and client
//! address (5 per 15 minutes) under a higher ceiling per phone (20 per 15 minutes), so a stranger at one
//! address cannot spend the phone's sends and lock its owner out.

use hmac::{Hmac, KeyInit, Mac};
use rand::Rng;
use sha2::Sha256;

use crate::clock::{Millis, SharedClock};
use crate::providers::Provider;
use crate::secrets::hex;
use crate::store::{Db, otp};

pub const CODE_TTL_MS: i64 = 10 * 60 * 1000;
pub const SEND_WINDOW_MS: i64 = 15 * 60 * 1000;
/// Codes one client address may have sent to one phone per window.
pub const SENDS_PER_WINDOW: i64 = 5;
/// Codes one phone may be sent per window, from all addresses together.
pub const SENDS_PER_PHONE_CEILING: i64 = 20;

/// Why a code was not issued or not accepted.
#[derive(Debug, thiserror::Error)]
pub enum OtpError {
    #[error("too many codes sent to this phone; retry in {retry_after_s} s")]
    TooManySends { retry_after_s: u64 },
    #[error("the code could not be sent: {0}")]
    NotSent(String),
    #[error("the code is wrong, expired or used up")]
    Rejected,
    /// A code issued with another payload (a developer sign-up for another e-mail) waits for this phone
    /// until `until`: a second one is not sent beside it.
    #[error("a code for this phone with another e-mail is waiting")]
    OtherPending { until: Millis },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// What codes are issued and checked with: where they are kept, the key their digests are made with, the
/// SMS provider, the clock.
pub struct Codes<'a> {
    pub db: &'a Db,
    pub key: &'a [u8],
    pub sms: &'a dyn Provider,
    pub clock: &'a SharedClock,
}

fn code_digest(codes: &Codes<'_>, phone: &str, purpose: &str, code: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(codes.key).expect("HMAC takes any key length");
    mac.update(format!("{purpose}|{phone}|{code}").as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// Issues a code for `phone`, asked for from `client`, and sends it by SMS with `text(code)`; `payload` is
/// kept with the code and handed back by [`verify`] (nothing it carries takes effect before). Returns when
/// the code expires.
pub async fn start(
    codes: &Codes<'_>,
    phone: &str,
    purpose: &str,
    payload: Option<&str>,
    client: std::net::IpAddr,
    text: impl Fn(&str) -> String,
) -> Result<Millis, OtpError> {
    let now = codes.clock.now_ms();
    let client = client.to_string();
    let (all, from_client) = otp::count_since(codes.db, phone, purpose, &client, now - SEND_WINDOW_MS).await?;
    if from_client >= SENDS_PER_WINDOW || all >= SENDS_PER_PHONE_CEILING {
        return Err(OtpError::TooManySends { retry_after_s: (SEND_WINDOW_MS / 1000) as u64 });
    }
    // One pending sign-up per phone: two codes for two e-mails in one SMS inbox would let a stranger's
    // look-alike address ride on the owner's sign-up (they would enter whichever code came last).
    if let Some(payload) = payload
        && let Some(until) = otp::other_pending(codes.db, phone, purpose, payload, now).await?
    {
        return Err(OtpError::OtherPending { until });
    }
    let code = format!("{:06}", rand::rng().random_range(0..1_000_000u32));
    let expires_at = now + CODE_TTL_MS;
    let digest = code_digest(codes, phone, purpose, &code);
    let new = otp::NewCode { code_hash: &digest, payload, client_addr: &client, expires_at };
    otp::insert_code(codes.db, phone, purpose, &new, now).await?;
    codes.sms.send(phone, &text(&code)).await.map_err(|reason| OtpError::NotSent(reason.to_string()))?;
    Ok(expires_at)
}

/// Checks a code and returns the payload it was issued with; a wrong, expired, used or voided code is
/// [`OtpError::Rejected`].
pub async fn verify(codes: &Codes<'_>, phone: &str, purpose: &str, code: &str) -> Result<Option<String>, OtpError> {
    let code = code.trim();
    let well_formed = code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit());
    let digest = code_digest(codes, phone, purpose, code);
    // A malformed code still counts as a try.
    match otp::consume_code(codes.db, phone, purpose, &digest, codes.clock.now_ms()).await? {
        Some(used) if well_formed => Ok(used.payload),
        _ => Err(OtpError::Rejected),
    }
}
