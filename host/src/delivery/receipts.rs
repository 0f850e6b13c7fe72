//! Provider delivery receipts: Twilio status callbacks and WhatsApp Cloud API status webhooks tell us
//! what became of an SMS or WhatsApp message we handed over. Each request is authenticated by the
//! provider's own signature; a receipt finds its attempt by the provider's message id and moves the message
//! (`delivered`, `read`) or fails it. Receipts about the opaque E2E alerts change nothing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;

use super::Delivery;
use crate::events;
use crate::names::{AttemptKind, Channel, MessageState};
use crate::secrets::constant_time_eq;
use crate::senders::Ours;
pub use crate::store::opt_outs::MARKETING;
use crate::store::{deliveries, messages};

/// What a provider reports about a message it accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receipt {
    Delivered,
    Read,
    Failed(String),
}

/// Twilio's `X-Twilio-Signature`: base64 HMAC-SHA1, keyed with the auth token, of the full URL Twilio
/// called followed by each POST parameter's name and value, sorted by name.
pub fn twilio_signature(auth_token: &str, url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut mac = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(auth_token.as_bytes()).expect("any key length");
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Meta's `X-Hub-Signature-256`: `sha256=` and the hex HMAC-SHA256 of the raw body, keyed with the app
/// secret (the same construction as our own bot events' `X-Service-Signature`).
pub fn meta_signature(app_secret: &str, body: &[u8]) -> String {
    format!("sha256={}", crate::signing::service_signature(app_secret, body))
}

/// Whether a presented signature is the expected one (constant time).
pub fn signature_matches(presented: Option<&str>, expected: &str) -> bool {
    presented.is_some_and(|p| constant_time_eq(p.trim(), expected))
}

/// The value of the pair `name` of a Twilio webhook's form, as sent.
pub fn twilio_param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// A Twilio status callback's receipt, if its `MessageStatus` is one that changes anything.
pub fn twilio_receipt(params: &[(String, String)]) -> Option<Receipt> {
    let get = |k: &str| twilio_param(params, k);
    match get("MessageStatus")? {
        "delivered" => Some(Receipt::Delivered),
        "read" => Some(Receipt::Read),
        status @ ("undelivered" | "failed") => {
            let code = get("ErrorCode").map(|c| format!(" (error {c})")).unwrap_or_default();
            Some(Receipt::Failed(format!("twilio: {status}{code}")))
        }
        _ => None,
    }
}

/// The `(message id, receipt, our number it is about)` of a WhatsApp Cloud API webhook
/// (`entry[].changes[].value.statuses[]`), about one of `ours` (see [`whatsapp_values`]).
pub fn whatsapp_receipts(ours: &[Ours], payload: &Value) -> Vec<(String, Receipt, Ours)> {
    let mut out = Vec::new();
    for (value, our) in whatsapp_values(ours, payload) {
        for status in value["statuses"].as_array().into_iter().flatten() {
            let Some(id) = status["id"].as_str() else { continue };
            let receipt = match status["status"].as_str() {
                Some("delivered") => Receipt::Delivered,
                Some("read") => Receipt::Read,
                Some("failed") => {
                    let error = &status["errors"][0];
                    let detail = error["title"].as_str().or(error["message"].as_str()).unwrap_or("failed");
                    let code = error["code"].as_i64().map(|c| format!(" (error {c})")).unwrap_or_default();
                    Receipt::Failed(format!("whatsapp: {detail}{code}"))
                }
                _ => continue,
            };
            out.push((id.to_string(), receipt, our.clone()));
        }
    }
    out
}

/// Twilio's error for a phone that opted out of the sender with Twilio (it replied STOP to it).
const TWILIO_OPTED_OUT: &str = "21610";

/// Who opted out with Twilio, by a status callback: the E.164 phone, when it carries Twilio's
/// [`TWILIO_OPTED_OUT`] error (of the sender the callback is about).
pub fn twilio_opt_out(params: &[(String, String)]) -> Option<String> {
    let get = |k: &str| twilio_param(params, k).map(str::trim);
    if get("ErrorCode") != Some(TWILIO_OPTED_OUT) {
        return None;
    }
    get("To").filter(|p| crate::validate::is_e164(p)).map(str::to_string)
}

/// WhatsApp's errors that mean the person does not want marketing messages from the business: 131050.
const BLOCKED: [i64; 1] = [131050];

/// Each `entry[].changes[].value` of a WhatsApp Cloud API webhook about one of `ours` (the numbers the
/// webhook's signature speaks for: the host's, or a partner's own), with that number
/// (`metadata.phone_number_id`; else the first of `ours`). A value about another number of the same Meta
/// app (a staging number, say) is none of this host's business, and left out; the development sink's
/// `dev` takes any.
pub fn whatsapp_values<'a>(ours: &[Ours], payload: &'a Value) -> Vec<(&'a Value, Ours)> {
    let any = ours.iter().find(|o| o.address == "dev");
    let values = whatsapp_changes(payload).map(|c| &c["value"]);
    values
        .filter_map(|value| match value["metadata"]["phone_number_id"].as_str() {
            Some(id) => match ours.iter().find(|o| o.address == id) {
                Some(our) => Some((value, our.clone())),
                None => any.map(|dev| (value, Ours { address: id.to_string(), ..dev.clone() })),
            },
            None => Some((value, ours.first()?.clone())),
        })
        .collect()
}

/// Meta's `phone_number_quality_update` changes of a notification the host's own app signed: each names its
/// business account (`entry[].id`) and the tier it may now reach first a day (`current_limit`), and the
/// `event` that moved it (`FLAGGED`, `UNFLAGGED`, `UPGRADE`, `DOWNGRADE`), kept as its quality. The host's own
/// business account is kept as the host's senders are (`''`). Answers how many limits it set.
pub async fn apply_quality_updates(delivery: &Delivery, payload: &Value) -> Result<i64, sqlx::Error> {
    let host_account = delivery.config.whatsapp_business_account_id.as_deref().unwrap_or("").trim();
    let mut set = 0;
    for entry in payload["entry"].as_array().into_iter().flatten() {
        let account = entry["id"].as_str().unwrap_or("");
        let account = if account == host_account || account.is_empty() { "" } else { account };
        for change in entry["changes"].as_array().into_iter().flatten() {
            if change["field"] != "phone_number_quality_update" {
                continue;
            }
            let value = &change["value"];
            let Some(limit) = value["current_limit"].as_str().and_then(crate::store::limits::tier) else { continue };
            let quality = value["event"].as_str();
            crate::store::limits::set(&delivery.db, account, limit, quality, delivery.now()).await?;
            tracing::info!(account, ?limit, ?quality, "WhatsApp messaging limit updated by Meta");
            set += 1;
        }
    }
    Ok(set)
}

fn whatsapp_changes(payload: &Value) -> impl Iterator<Item = &Value> {
    payload["entry"].as_array().into_iter().flatten().flat_map(|e| e["changes"].as_array().into_iter().flatten())
}

/// The phone number ids a WhatsApp Cloud API webhook is about (`value.metadata.phone_number_id`), at most
/// `limit` of them: `None` when it names more (Meta names one; the numbers are looked up to choose the secret
/// a signature is checked with, so an unsigned body must not make that cost what it likes).
pub fn whatsapp_numbers(payload: &Value, limit: usize) -> Option<Vec<String>> {
    let mut ids: Vec<String> = Vec::new();
    for change in whatsapp_changes(payload) {
        let Some(id) = change["value"]["metadata"]["phone_number_id"].as_str() else { continue };
        if !ids.iter().any(|seen| seen == id) {
            if ids.len() == limit {
                return None;
            }
            ids.push(id.to_string());
        }
    }
    Some(ids)
}

/// A WhatsApp id (digits, as the Cloud API writes phones) as an E.164 phone, if it is one.
pub fn whatsapp_phone(id: &str) -> Option<String> {
    let phone = format!("+{}", id.trim_start_matches('+'));
    crate::validate::is_e164(&phone).then_some(phone)
}

/// Who stopped marketing messages from us in a WhatsApp Cloud API webhook: `(E.164 phone, our number)` of
/// each failed status with a [`BLOCKED`] error.
pub fn whatsapp_blocks(ours: &[Ours], payload: &Value) -> Vec<(String, Ours)> {
    let mut out = Vec::new();
    for (value, our) in whatsapp_values(ours, payload) {
        for status in value["statuses"].as_array().into_iter().flatten() {
            let mut errors = status["errors"].as_array().into_iter().flatten();
            let blocked = errors.any(|e| e["code"].as_i64().is_some_and(|code| BLOCKED.contains(&code)));
            if status["status"].as_str() != Some("failed") || !blocked {
                continue;
            }
            if let Some(phone) = status["recipient_id"].as_str().and_then(whatsapp_phone) {
                out.push((phone, our.clone()));
            }
        }
    }
    out
}

/// Records that `phone` opted out of our sender `ours` on `channel`: sends from it skip that channel for them.
pub async fn opt_out(
    delivery: &Delivery,
    phone: &str,
    channel: Channel,
    ours: &Ours,
    reason: &str,
) -> Result<(), sqlx::Error> {
    let mut tx = delivery.db.begin().await?;
    let now = delivery.now();
    crate::store::opt_outs::set_in(&mut tx, phone, channel, &ours.account, &ours.address, reason, now).await?;
    tx.commit().await
}

/// Applies one receipt about our sender `ours`; answers whether it matched a message attempt of ours (of
/// the partner whose own sender it is, for a partner's: its signature speaks for nothing else). Delivered and read move the
/// message on; a failure marks the attempt and continues the chain: after WhatsApp, the message (or the
/// E2E alert) is queued again for SMS; after SMS, the last channel, the message fails. Receipts about an
/// alert that got through change nothing, and so does a failure receipt for an attempt already failed
/// (providers retry callbacks, and a captured one may be replayed).
pub async fn apply(
    delivery: &Delivery,
    channel: Channel,
    provider_ref: &str,
    receipt: Receipt,
    ours: &Ours,
) -> Result<bool, sqlx::Error> {
    let partner = ours.partner_id;
    let Some(target) = deliveries::find_by_provider_ref(&delivery.db, channel.as_str(), provider_ref, partner).await?
    else {
        return Ok(false);
    };
    let alert = target.kind == AttemptKind::Alert;
    let now = delivery.now();
    let mut tx = delivery.db.begin().await?;
    let mut resumed = false;
    // The state change the receipt makes, if any.
    let change: Option<(&[MessageState], MessageState)> = match (&receipt, alert) {
        (Receipt::Failed(reason), _) => {
            if !deliveries::fail_attempt_in(&mut tx, target.attempt_id, reason).await? {
                // A repeated (or replayed) failure: the chain already went on once.
                None
            } else if channel != Channel::Sms {
                let next = if alert { "alert_sms" } else { "sms" };
                deliveries::enqueue_resume_in(&mut tx, target.message_id, next, now).await?;
                resumed = true;
                None
            } else if alert {
                None
            } else {
                Some((&[MessageState::Sent], MessageState::Failed))
            }
        }
        (_, true) => None,
        (Receipt::Delivered, false) => Some((&MessageState::UNDELIVERED, MessageState::Delivered)),
        (Receipt::Read, false) => Some((&MessageState::BEFORE_READ, MessageState::Read)),
    };
    let mut moved = None;
    if let Some((from, to)) = change {
        let channel = Some(channel);
        moved =
            messages::transition_in(&mut tx, target.message_id, from, to, channel, now, events::message_status).await?;
    }
    tx.commit().await?;
    if resumed {
        delivery.wake.notify_one();
    }
    tracing::info!(
        message_id = target.message_id,
        channel = channel.as_str(),
        ?receipt,
        alert,
        moved = moved.is_some(),
        resumed,
        "provider receipt"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn signatures_match_an_independent_computation() {
        // Expected values computed with Python's hmac/hashlib.
        let p = params(&[
            ("To", "+15551230000"),
            ("MessageStatus", "delivered"),
            ("MessageSid", "SM123"),
            ("AccountSid", "AC1"),
        ]);
        let url = "https://hubbub.example.com/api/v1/providers/twilio/status";
        assert_eq!(twilio_signature("tw-token", url, &p), "qr12AqxzVC1bJmC4f7irdS8VIgo=");
        assert_eq!(
            meta_signature("app-secret", br#"{"entry":[]}"#),
            "sha256=fe6aaed5aff30b5679e782271914a2287bdd7de6bedb495c95c24ad91e5e3fdb"
        );
        assert!(signature_matches(Some(" qr12AqxzVC1bJmC4f7irdS8VIgo="), "qr12AqxzVC1bJmC4f7irdS8VIgo="));
        assert!(!signature_matches(Some("qr12AqxzVC1bJmC4f7irdS8VIgX="), "qr12AqxzVC1bJmC4f7irdS8VIgo="));
        assert!(!signature_matches(None, "x"));
    }

    #[test]
    fn statuses_map_to_receipts() {
        assert_eq!(twilio_receipt(&params(&[("MessageStatus", "delivered")])), Some(Receipt::Delivered));
        assert_eq!(twilio_receipt(&params(&[("MessageStatus", "sent")])), None);
        assert_eq!(
            twilio_receipt(&params(&[("MessageStatus", "undelivered"), ("ErrorCode", "30003")])),
            Some(Receipt::Failed("twilio: undelivered (error 30003)".into()))
        );
        let wa = json!({"entry": [{"changes": [{"value": {"metadata": {"phone_number_id": "111"}, "statuses": [
            {"id": "wamid.1", "status": "delivered"},
            {"id": "wamid.2", "status": "sent"},
            {"id": "wamid.3", "status": "read"},
            {"id": "wamid.4", "status": "failed", "errors": [{"code": 131026, "title": "Message undeliverable"}]}
        ]}}]}]});
        let host = Ours::host("111".into());
        let ids = |ours: &[Ours]| -> Vec<(String, Receipt)> {
            whatsapp_receipts(ours, &wa).into_iter().map(|(id, receipt, _)| (id, receipt)).collect()
        };
        assert_eq!(
            ids(&[host.clone()]),
            vec![
                ("wamid.1".into(), Receipt::Delivered),
                ("wamid.3".into(), Receipt::Read),
                ("wamid.4".into(), Receipt::Failed("whatsapp: Message undeliverable (error 131026)".into())),
            ]
        );
        // Statuses about a number the signature does not speak for are left out.
        assert!(ids(&[Ours::host("222".into())]).is_empty());
        assert_eq!(whatsapp_numbers(&wa, 1), Some(vec!["111".to_string()]));
        let two = json!({"entry": [{"changes": [
            {"value": {"metadata": {"phone_number_id": "1"}}}, {"value": {"metadata": {"phone_number_id": "2"}}},
            {"value": {"metadata": {"phone_number_id": "1"}}}]}]});
        assert_eq!(whatsapp_numbers(&two, 2), Some(vec!["1".to_string(), "2".to_string()]));
        assert_eq!(whatsapp_numbers(&two, 1), None);
    }
}
