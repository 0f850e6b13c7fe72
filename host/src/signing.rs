//! How every outbound event is signed (`docs/webhooks.md`), in two ways a receiver may choose from:
//!
//! - `X-Service-Signature`: hex HMAC-SHA256 of the raw body, keyed with the whole secret string
//!   (`whsec_…`, as UTF-8 bytes). Bare hex for partner and developer events, `sha256=<hex>` for bot events.
//! - Standard Webhooks: `webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64>`, the
//!   HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the base64-decoded part after `whsec_`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::secrets::{constant_time_eq, hex, random_bytes};

type HmacSha256 = Hmac<Sha256>;

/// A new webhook secret: `whsec_` + standard base64 of 32 random bytes.
pub fn new_secret() -> String {
    format!("whsec_{}", STANDARD.encode(random_bytes::<32>()))
}

/// The displayable prefix of a secret.
pub fn secret_prefix(secret: &str) -> String {
    crate::secrets::display_prefix(secret, "whsec_")
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// The hex HMAC of `body` keyed with the whole secret string.
pub fn service_signature(secret: &str, body: &[u8]) -> String {
    hex(&hmac(secret.as_bytes(), &[body]))
}

/// The hex HMAC of `what` keyed with a key of the host's (a link's signature: the link works for whoever holds
/// it, and for nothing else).
pub fn link_signature(key: &[u8], what: &str) -> String {
    hex(&hmac(key, &[b"link:", what.as_bytes()]))
}

/// Whether `given` is [`link_signature`] of `what`, compared in constant time.
pub fn verify_link_signature(key: &[u8], what: &str, given: &str) -> bool {
    constant_time_eq(&link_signature(key, what), given)
}

/// The Standard Webhooks signature header value (`v1,<base64>`).
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key =
        STANDARD.decode(secret.strip_prefix("whsec_").unwrap_or(secret)).unwrap_or_else(|_| secret.as_bytes().to_vec());
    let ts = timestamp.to_string();
    let mac = hmac(&key, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
    format!("v1,{}", STANDARD.encode(mac))
}

/// How far a Standard Webhooks `webhook-timestamp` may be from now, either way (seconds).
pub const TIMESTAMP_TOLERANCE_S: i64 = 5 * 60;

/// Why a Standard Webhooks signature was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StandardSignatureError {
    #[error("webhook-id must be 1 to 256 visible ASCII characters")]
    BadId,
    #[error("webhook-timestamp must be whole seconds since the epoch")]
    BadTimestamp,
    #[error("webhook-timestamp is more than 5 minutes from now")]
    Stale,
    #[error("webhook-signature does not verify")]
    Mismatch,
}

/// Verifies inbound Standard Webhooks headers: `id` (the event id), `timestamp` (seconds, within
/// [`TIMESTAMP_TOLERANCE_S`] of `now_s`) and `signature` (space-separated `v1,<base64>` entries; one must
/// match, compared in constant time). Returns the timestamp.
pub fn verify_standard_signature(
    secret: &str,
    id: &str,
    timestamp: &str,
    body: &[u8],
    signature: &str,
    now_s: i64,
) -> Result<i64, StandardSignatureError> {
    if id.is_empty() || id.len() > 256 || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(StandardSignatureError::BadId);
    }
    let ts = timestamp.trim();
    if ts.is_empty() || ts.len() > 12 || !ts.bytes().all(|b| b.is_ascii_digit()) {
        return Err(StandardSignatureError::BadTimestamp);
    }
    let ts: i64 = ts.parse().map_err(|_| StandardSignatureError::BadTimestamp)?;
    if (ts - now_s).abs() > TIMESTAMP_TOLERANCE_S {
        return Err(StandardSignatureError::Stale);
    }
    let expected = standard_signature(secret, id, ts, body);
    let matched =
        signature.split_ascii_whitespace().fold(false, |found, entry| found | constant_time_eq(entry, &expected));
    if matched { Ok(ts) } else { Err(StandardSignatureError::Mismatch) }
}

/// Verifies an `X-Service-Signature` value (either form) in constant time; for inbound bot webhooks.
pub fn verify_service_signature(secret: &str, body: &[u8], header: &str) -> bool {
    let given = header.trim().strip_prefix("sha256=").unwrap_or(header.trim());
    constant_time_eq(&service_signature(secret, body), &given.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors published in docs/webhooks.md.
    pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    pub const BODY: &str = r#"{"event":"message.status","partner":"acme","message_ref":"msg_3fQ2x9LkVb7TnR1sWc8YpZ0d","message_id":42,"seq":2,"state":"delivered","channel":"inapp","phone":"+15551230000","at":"2026-11-22T10:00:00Z"}"#;

    #[test]
    fn published_vectors() {
        assert_eq!(
            service_signature(SECRET, BODY.as_bytes()),
            "355e40e5390ef92218437c8b704af042d230f73193e8ddedf02d39c5c7abf53f"
        );
        assert_eq!(
            standard_signature(SECRET, "dlv_X1b2C3d4E5f6G7h8I9j0K1l2", 1795860000, BODY.as_bytes()),
            "v1,4F4A4SPIN/TfvH9gEt2eqS7pGzS0tBLZjZuLMs70bHY="
        );
    }

    #[test]
    fn verification_accepts_both_forms_and_rejects_tampering() {
        let sig = service_signature(SECRET, b"{}");
        assert!(verify_service_signature(SECRET, b"{}", &sig));
        assert!(verify_service_signature(SECRET, b"{}", &format!("sha256={sig}")));
        assert!(!verify_service_signature(SECRET, b"{ }", &sig));
        assert!(!verify_service_signature("whsec_other", b"{}", &sig));
        assert!(new_secret().starts_with("whsec_") && STANDARD.decode(&new_secret()[6..]).unwrap().len() == 32);
    }

    #[test]
    fn standard_signatures_verify_within_the_tolerance_only() {
        let (id, ts) = ("evt_1", 1_795_860_000);
        let sig = standard_signature(SECRET, id, ts, b"{}");
        let now = ts + 10;
        assert_eq!(verify_standard_signature(SECRET, id, &ts.to_string(), b"{}", &sig, now), Ok(ts));
        // Several signatures (key rotation): any one may match.
        let both = format!("v1,AAAA {sig}");
        assert_eq!(verify_standard_signature(SECRET, id, &ts.to_string(), b"{}", &both, now), Ok(ts));
        use StandardSignatureError::*;
        assert_eq!(verify_standard_signature(SECRET, id, &ts.to_string(), b"{ }", &sig, now), Err(Mismatch));
        assert_eq!(verify_standard_signature(SECRET, "evt_2", &ts.to_string(), b"{}", &sig, now), Err(Mismatch));
        assert_eq!(verify_standard_signature(SECRET, id, &ts.to_string(), b"{}", &sig, ts + 301), Err(Stale));
        assert_eq!(verify_standard_signature(SECRET, id, &ts.to_string(), b"{}", &sig, ts - 301), Err(Stale));
        assert_eq!(verify_standard_signature(SECRET, id, "-5", b"{}", &sig, now), Err(BadTimestamp));
        assert_eq!(verify_standard_signature(SECRET, id, "99999999999999999999", b"{}", &sig, now), Err(BadTimestamp));
        assert_eq!(verify_standard_signature(SECRET, "", &ts.to_string(), b"{}", &sig, now), Err(BadId));
        assert_eq!(verify_standard_signature(SECRET, "a b", &ts.to_string(), b"{}", &sig, now), Err(BadId));
    }
}
