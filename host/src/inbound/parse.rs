//! What a provider's webhook brings, as the messages it carries: Twilio's form and the WhatsApp Cloud
//! API's notification, each message to one of our senders; and SMS's opt-out keywords.

use serde_json::{Value, json};

use crate::clock::Millis;
use crate::delivery::receipts;
use crate::names::Channel;
use crate::senders::Ours;
use crate::store::inbound::NewInbound;

/// Twilio's standard opt-out keywords (a message that is only one of them, in any case).
pub(super) const STOP_WORDS: [&str; 7] = ["stop", "stopall", "unsubscribe", "cancel", "end", "quit", "optout"];

/// Twilio's standard opt-in keywords.
pub(super) const START_WORDS: [&str; 3] = ["start", "yes", "unstop"];

/// What an opt-out keyword asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyword {
    Stop,
    Start,
}

/// The opt-out keyword a text is, if it is only one word (any case; punctuation or an emoji around it
/// allowed: "Stop!", "STOP 🛑").
pub fn keyword(text: &str) -> Option<Keyword> {
    let word = text.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    if STOP_WORDS.contains(&word.as_str()) {
        Some(Keyword::Stop)
    } else if START_WORDS.contains(&word.as_str()) {
        Some(Keyword::Start)
    } else {
        None
    }
}

/// The message of a Twilio inbound webhook (its form's pairs) to our sender `ours` (the one the webhook's
/// signature speaks for), or what is missing.
pub fn from_twilio(ours: &Ours, params: &[(String, String)], now: Millis) -> Result<NewInbound, String> {
    let get = |k: &str| receipts::twilio_param(params, k).map(str::trim).filter(|v| !v.is_empty());
    let sid = get("MessageSid").or(get("SmsSid")).ok_or("MessageSid is required")?;
    let phone = get("From").ok_or("From is required")?;
    if !crate::validate::is_e164(phone) {
        return Err(format!("From must be a phone number in E.164 form, not {phone}"));
    }
    get("To").ok_or("To is required")?;
    let media: Vec<Value> = (0..get("NumMedia").and_then(|n| n.parse::<usize>().ok()).unwrap_or(0).min(10))
        .filter_map(|i| {
            let url = get(&format!("MediaUrl{i}"))?;
            Some(json!({"url": url, "mimetype": get(&format!("MediaContentType{i}"))}))
        })
        .collect();
    let body = get("Body").map(str::to_string);
    Ok(NewInbound {
        channel: Channel::Sms,
        provider_ref: sid.to_string(),
        phone: phone.to_string(),
        user_id: None,
        sender: ours.address.clone(),
        account: ours.account.clone(),
        content: json!({"type": if media.is_empty() { "text" } else { "media" }, "body": body, "media": media}),
        body,
        context_ref: None,
        received_at: now,
    })
}

/// The messages of a WhatsApp Cloud API webhook (`entry[].changes[].value.messages[]`) to one of `ours`
/// (see `receipts::whatsapp_values`), each with the phone number id it was sent to
/// (`value.metadata.phone_number_id`). The text routed is the message's
/// text, the title of the reply button or list row tapped, a template's quick-reply text, or a location or
/// contact card written out; other kinds (media, stickers, …) have none and are kept as they came.
///
/// Who wrote is `from` (the phone) and the business-scoped user id (BSUID: the message's `from_user_id`, or
/// `user_id` of the sender's entry in `contacts`); a person with a username may come with the BSUID only:
/// the phone is left empty then, for [`receive`] to find.
pub fn from_whatsapp(ours: &[Ours], payload: &Value, now: Millis) -> Vec<NewInbound> {
    let mut out = Vec::new();
    for (value, our) in receipts::whatsapp_values(ours, payload) {
        let contacts = value["contacts"].as_array().cloned().unwrap_or_default();
        for m in value["messages"].as_array().into_iter().flatten() {
            let Some(id) = m["id"].as_str() else { continue };
            let phone = m["from"].as_str().and_then(receipts::whatsapp_phone);
            let contact = contacts.iter().find(|c| c["wa_id"].as_str().is_some_and(|w| Some(w) == m["from"].as_str()));
            let contact = contact.or(contacts.first().filter(|_| contacts.len() == 1));
            let user_id = m["from_user_id"]
                .as_str()
                .or(contact.and_then(|c| c["user_id"].as_str()))
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string);
            if phone.is_none() && user_id.is_none() {
                continue;
            }
            let phone = phone.unwrap_or_default();
            let at = m["timestamp"].as_str().and_then(|s| s.parse::<i64>().ok()).map(|s| s.saturating_mul(1000));
            out.push(NewInbound {
                channel: Channel::Whatsapp,
                provider_ref: id.to_string(),
                phone,
                user_id,
                sender: our.address.clone(),
                account: our.account.clone(),
                body: whatsapp_text(m),
                content: m.clone(),
                context_ref: m["context"]["id"].as_str().map(str::to_string),
                received_at: at.unwrap_or(now).min(now),
            });
        }
    }
    out
}

/// The text a WhatsApp message carries, by its type.
pub(super) fn whatsapp_text(m: &Value) -> Option<String> {
    let text = match m["type"].as_str()? {
        "text" => m["text"]["body"].as_str()?.to_string(),
        "interactive" => {
            let i = &m["interactive"];
            i["button_reply"]["title"].as_str().or(i["list_reply"]["title"].as_str())?.to_string()
        }
        "button" => m["button"]["text"].as_str()?.to_string(),
        "location" => {
            let l = &m["location"];
            let (lat, long) = (l["latitude"].as_f64()?, l["longitude"].as_f64()?);
            let place = [l["name"].as_str(), l["address"].as_str()].into_iter().flatten().collect::<Vec<_>>();
            format!("Location: {} https://maps.google.com/?q={lat},{long}", place.join(", ")).replace(":  ", ": ")
        }
        "contacts" => {
            let cards = m["contacts"].as_array()?.iter().map(|c| {
                let name = c["name"]["formatted_name"].as_str().unwrap_or("");
                let phones: Vec<&str> =
                    c["phones"].as_array().into_iter().flatten().filter_map(|p| p["phone"].as_str()).collect();
                format!("{name} {}", phones.join(", ")).trim().to_string()
            });
            format!("Contact: {}", cards.collect::<Vec<_>>().join("; "))
        }
        _ => return None,
    };
    Some(text).filter(|t| !t.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_keyword_alone_opts_out_or_in() {
        assert_eq!(keyword("STOP"), Some(Keyword::Stop));
        assert_eq!(keyword(" stop. "), Some(Keyword::Stop));
        assert_eq!(keyword("STOP 🛑"), Some(Keyword::Stop));
        assert_eq!(keyword("Stop!!"), Some(Keyword::Stop));
        assert_eq!(keyword("stop it"), None);
        assert_eq!(keyword("Unsubscribe"), Some(Keyword::Stop));
        assert_eq!(keyword("start"), Some(Keyword::Start));
        assert_eq!(keyword("please stop"), None);
        assert_eq!(keyword("stopped"), None);
        assert_eq!(keyword(""), None);
    }

    #[test]
    fn whatsapp_messages_carry_their_text_or_what_was_tapped() {
        let text = |m: Value| whatsapp_text(&m);
        assert_eq!(text(json!({"type": "text", "text": {"body": "hi"}})).as_deref(), Some("hi"));
        let button = json!({"type": "interactive", "interactive": {"type": "button_reply",
            "button_reply": {"id": "shoes", "title": "Shoes"}}});
        assert_eq!(text(button).as_deref(), Some("Shoes"));
        let row = json!({"type": "interactive", "interactive": {"type": "list_reply",
            "list_reply": {"id": "r2", "title": "Red", "description": "A red one"}}});
        assert_eq!(text(row).as_deref(), Some("Red"));
        assert_eq!(text(json!({"type": "button", "button": {"payload": "p", "text": "Yes"}})).as_deref(), Some("Yes"));
        let location = json!({"type": "location", "location": {"latitude": 52.5, "longitude": 13.4, "name": "Office"}});
        assert_eq!(text(location).as_deref(), Some("Location: Office https://maps.google.com/?q=52.5,13.4"));
        let contacts = json!({"type": "contacts", "contacts": [
            {"name": {"formatted_name": "Ana Tester"}, "phones": [{"phone": "+1 555 0100"}, {"phone": "+1 555 0101"}]},
            {"name": {"formatted_name": "Bo"}}]});
        assert_eq!(text(contacts).as_deref(), Some("Contact: Ana Tester +1 555 0100, +1 555 0101; Bo"));
        assert_eq!(text(json!({"type": "image", "image": {"id": "m1"}})), None);
    }
}
