//! Routing: which channels a message tries, in order, for what is known of its recipient, and the fallback
//! after the hub. The delivery worker routes every queued message by it; a send routes by it at once when
//! the answer is the hub alone (`send`), so the message is in the hub as it is written.

use serde_json::Value;

use crate::clock::Millis;
use crate::names::{Channel, MessageState};
use crate::store::messages::Message;

/// What routing knows about the recipient.
#[derive(Debug, Clone, Copy)]
pub struct Recipient {
    pub claimed: bool,
    pub has_device: bool,
    pub online: bool,
    /// Where the user last wrote from, when the message answers them in a conversation (`None`: the app).
    pub writes_from: Option<Channel>,
}

/// The channels to try, in order (`docs/api.md`, "Sending"): an answer to a user who wrote from WhatsApp
/// or SMS goes back there.
pub fn plan(priority: &str, r: Recipient) -> Vec<Channel> {
    let in_app = reached_in_app(r.claimed, r.has_device);
    if let Some(channel) = r.writes_from.filter(|c| *c != Channel::Inapp && priority != "otp") {
        // Where they wrote from first; then as any message would go on, the app last (if they have it).
        let mut channels =
            if channel == Channel::Whatsapp { vec![Channel::Whatsapp, Channel::Sms] } else { vec![channel] };
        if in_app {
            channels.push(Channel::Inapp);
        }
        channels
    } else if priority == "otp" {
        if in_app && r.online { vec![Channel::Inapp] } else { vec![Channel::Sms] }
    } else if in_app {
        vec![Channel::Inapp]
    } else {
        vec![Channel::Whatsapp, Channel::Sms]
    }
}

/// Whether a recipient is reached in the app's hub: a claimed account with a device.
pub fn reached_in_app(claimed: bool, has_device: bool) -> bool {
    claimed && has_device
}

/// Whether the message is end-to-end encrypted (its content is an envelope the server cannot read).
pub fn is_encrypted(m: &Message) -> bool {
    encrypted(&m.content)
}

/// Whether a message's content is an end-to-end encrypted envelope.
pub fn encrypted(content: &Value) -> bool {
    content.get("encryption").and_then(Value::as_str) == Some("e2e")
}

/// The job that continues a hub message on WhatsApp then SMS when no device got it in time.
pub const AFTER_HUB: &str = "after_hub";

/// The job that follows a message (its `priority` and `content`) put in the hub at `now`: [`AFTER_HUB`]
/// when its window ends, where the window is `fallback_after_s` as the message or its partner set it
/// (`None`: the host's `default_s`; negative: the hub only). An encrypted message has its alert instead and
/// a code its own rule: neither has one.
pub fn after_hub(
    priority: &str,
    content: &Value,
    fallback_after_s: Option<i64>,
    default_s: u64,
    now: Millis,
) -> Option<(&'static str, Millis)> {
    let seconds = match fallback_after_s {
        Some(seconds) if seconds < 0 => return None,
        Some(seconds) => seconds,
        None => default_s as i64,
    };
    (!encrypted(content) && priority != "otp").then_some((AFTER_HUB, now + seconds * 1000))
}

/// Counts a routed message by the channel it ended on and its state (`sent` or `failed`).
pub fn count(channel: Option<Channel>, state: MessageState) {
    metrics::counter!("hubbub_messages_total", "channel" => channel.map(Channel::as_str).unwrap_or("none"), "state" => state.as_str())
        .increment(1);
}
