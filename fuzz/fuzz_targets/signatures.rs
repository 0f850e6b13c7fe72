//! Inbound signature parsing (bot events, Standard Webhooks, provider receipts): never panics; a signature
//! computed for a body verifies, and never for another body.
#![no_main]

use hubbub_host::delivery::receipts::{signature_matches, twilio_receipt, whatsapp_receipts};
use hubbub_host::signing::{service_signature, standard_signature, verify_service_signature, verify_standard_signature};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(4, '\n');
    let (id, timestamp, signature, body) =
        (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let now = 1_795_860_000;
    let _ = verify_standard_signature(SECRET, id, timestamp, body.as_bytes(), signature, now);
    let _ = verify_service_signature(SECRET, body.as_bytes(), signature);
    let _ = signature_matches(Some(signature), &text);
    assert!(verify_service_signature(SECRET, data, &service_signature(SECRET, data)));
    assert!(!verify_service_signature(SECRET, &[data, b"x"].concat(), &service_signature(SECRET, data)));
    if !id.is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic()) {
        let good = standard_signature(SECRET, id, now, body.as_bytes());
        assert_eq!(verify_standard_signature(SECRET, id, &now.to_string(), body.as_bytes(), &good, now), Ok(now));
        let other = format!("{body}x");
        assert!(verify_standard_signature(SECRET, id, &now.to_string(), other.as_bytes(), &good, now).is_err());
    }
    if let Ok(params) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(data) {
        let _ = twilio_receipt(&params);
    }
    if let Ok(payload) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = whatsapp_receipts(&payload);
    }
});
