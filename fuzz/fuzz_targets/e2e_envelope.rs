//! The E2E envelope and key wrap checks, and the small parsers beside them: never panic on any JSON.
#![no_main]

use hubbub_host::encryption::{base64url, check_envelope, check_wrap, client_ref, device_uuid, envelope_for_device, identity_key, ref_in_aad};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = (base64url(&text), identity_key(Some(&text)), device_uuid(Some(&text), "f"), client_ref(&text), ref_in_aad(&text));
    if let Some(bytes) = base64url(&text) {
        assert!(bytes.len() <= text.len());
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(data) else { return };
    for wraps_required in [true, false] {
        if let Ok(envelope) = check_envelope(Some(&value), wraps_required) {
            assert!(envelope.contains_key("ciphertext") && envelope.contains_key("nonce"));
        }
    }
    for with_kind in [true, false] {
        let _ = check_wrap(&value, "wraps", with_kind);
    }
    let mut record = serde_json::json!({ "e2e_envelope": value.clone() });
    envelope_for_device(&mut record, Some("d1"));
    envelope_for_device(&mut value, None);
});
