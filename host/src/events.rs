//! Payloads of the events partners receive, built in one place so every producer sends the same shape.

use serde_json::{Value, json};

use crate::clock::{Millis, iso_time};
use crate::store::conversations::Conversation;
use crate::store::messages::Message;
use crate::store::templates::Template;

/// `message.status`: a delivery state change of a message. `seq` only grows per message.
pub fn message_status(m: &Message, at: Millis) -> Value {
    json!({
        "event": "message.status",
        "partner": m.partner_code,
        "message_ref": m.reference,
        "message_id": m.id,
        "seq": m.seq,
        "state": m.state,
        "channel": m.channel.as_deref().unwrap_or("inapp"),
        "phone": m.phone,
        "at": iso_time(at),
    })
}

/// `template.status`: a review decision.
pub fn template_status(partner_code: &str, t: &Template, at: Millis) -> Value {
    json!({
        "event": "template.status",
        "partner": partner_code,
        "template_id": t.id,
        "code": t.code,
        "lang": t.lang,
        "channel": t.channel,
        "status": t.status,
        "reason": t.rejection_reason,
        "at": iso_time(at),
    })
}

/// `account.claimed`: the user verified the phone of an account linked to the partner.
pub fn account_claimed(partner_code: &str, phone: &str, at: Millis) -> Value {
    json!({ "event": "account.claimed", "partner": partner_code, "phone": phone, "at": iso_time(at) })
}

/// `conversation.message`: a new message in a support conversation (no body when encrypted).
pub fn conversation_message(c: &Conversation, m: &Message, at: Millis) -> Value {
    let mut payload = json!({
        "event": "conversation.message",
        "partner": c.partner_code,
        "conversation_id": c.id,
        "ref": c.reference,
        "message_ref": m.reference,
        "direction": m.direction,
        "phone": c.phone,
        "at": iso_time(at),
    });
    if m.content.get("encryption").is_none() {
        payload["body"] = json!(m.body);
    } else {
        payload["encrypted"] = json!(true);
    }
    payload
}

/// A bot event (`bot.webhook.test`, and the user events of `webhook`-mode bots):
/// `{event, bot: {ref, code, partner_code}, payload}`.
pub fn bot_event(bot: &crate::store::bots::Bot, event: &str, payload: Value) -> Value {
    json!({
        "event": event,
        "bot": { "ref": bot.reference, "code": bot.code, "partner_code": bot.partner_code },
        "payload": payload,
    })
}
