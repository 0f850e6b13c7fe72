//! One-time codes by SMS, shared by user login and developer sign-up: 6 digits, kept only as an HMAC
//! keyed with the service secret, 10-minute expiry, 5 tries, at most 5 sends per phone per 15 minutes.

use hmac::{Hmac, KeyInit, Mac};
use rand::Rng;
use sha2::Sha256;

use crate::clock::Millis;
use crate::error::{ApiError, ApiResult};
use crate::secrets::hex;
use crate::state::AppState;
use crate::store::otp;

pub const CODE_TTL_MS: i64 = 10 * 60 * 1000;
pub const SEND_WINDOW_MS: i64 = 15 * 60 * 1000;
pub const SENDS_PER_WINDOW: i64 = 5;

fn code_digest(state: &AppState, phone: &str, purpose: &str, code: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&state.jwt_secret).expect("HMAC takes any key length");
    mac.update(format!("{purpose}|{phone}|{code}").as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// Issues a code for `phone` and sends it by SMS with `text(code)`; `payload` is kept with the code and
/// handed back by [`verify`] (nothing it carries takes effect before). Returns when the code expires.
pub async fn start(
    state: &AppState,
    phone: &str,
    purpose: &str,
    payload: Option<&str>,
    text: impl Fn(&str) -> String,
) -> ApiResult<Millis> {
    let now = state.now();
    if otp::count_since(&state.db, phone, purpose, now - SEND_WINDOW_MS).await? >= SENDS_PER_WINDOW {
        return Err(ApiError::rate_limited((SEND_WINDOW_MS / 1000) as u64));
    }
    let code = format!("{:06}", rand::rng().random_range(0..1_000_000u32));
    let expires_at = now + CODE_TTL_MS;
    otp::insert_code(&state.db, phone, purpose, &code_digest(state, phone, purpose, &code), payload, expires_at, now)
        .await?;
    state
        .delivery
        .sms
        .send(phone, &text(&code))
        .await
        .map_err(|reason| ApiError::bad_gateway("delivery_failed", format!("the code could not be sent: {reason}")))?;
    Ok(expires_at)
}

/// Checks a code and returns the payload it was issued with; a wrong, expired, used or voided code is 401.
pub async fn verify(state: &AppState, phone: &str, purpose: &str, code: &str) -> ApiResult<Option<String>> {
    let code = code.trim();
    let well_formed = code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit());
    let digest = code_digest(state, phone, purpose, code);
    // A malformed code still counts as a try.
    match otp::consume_code(&state.db, phone, purpose, &digest, state.now()).await? {
        Some(used) if well_formed => Ok(used.payload),
        _ => Err(ApiError::unauthorized("the code is wrong, expired or used up")),
    }
}
