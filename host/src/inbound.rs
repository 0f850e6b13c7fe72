//! Messages users send from WhatsApp or SMS. A provider's webhook hands each one over (its text, or what
//! the person tapped) and is answered at once; the message is kept once by its provider's id
//! (`store::inbound`), and a worker routes it after (`docs/providers.md`, "Messages from users"):
//!
//! 1. SMS's opt-out keywords (`STOP`, `UNSUBSCRIBE`, …, and `START`, …) set or clear the phone's opt-out of
//!    the number it was sent to, and go no further;
//! 2. an open or pending support conversation of the phone (the one that moved last, with any partner) gets
//!    it as the user's message, marked with its channel, and the agents' answers go back on that channel;
//! 3. otherwise a new support conversation is opened with the partner it is for: the partner of our
//!    WhatsApp message it replies to (`context.id`), else the platform partner, else the partner the phone
//!    was linked to last — when the phone is linked to a partner at all;
//! 4. a phone linked to no partner gets one polite reply a day on that channel, never more.
//!
//! Bots' sessions on WhatsApp and SMS, media and partners' own numbers are not routed yet: media and other
//! kinds of message are kept (`unsupported`) and reach no one.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::clock::Millis;
use crate::delivery::{self, Delivery, receipts};
use crate::events;
use crate::messages::compose::{self, SendMessage};
use crate::names::{Channel, ConversationState, Direction, InboundState};
use crate::secrets::random_alnum;
use crate::store::inbound::{self, Inbound, NewInbound};
use crate::store::messages::NewMessage;
use crate::store::{accounts, conversations, deliveries, messages, opt_outs, partners, whatsapp};

/// Twilio's standard opt-out keywords (a message that is only one of them, in any case).
const STOP_WORDS: [&str; 7] = ["stop", "stopall", "unsubscribe", "cancel", "end", "quit", "optout"];
/// Twilio's standard opt-in keywords.
const START_WORDS: [&str; 3] = ["start", "yes", "unstop"];

/// The reply to a person whose message no partner can be given (one a day at most).
pub const UNROUTED_REPLY: &str = "Hubbub: we could not tell which organisation this message is for, so no one \
    will read it. Please write to them from their app or website.";

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

/// The message of a Twilio inbound webhook (its form's pairs), or what is missing.
pub fn from_twilio(delivery: &Delivery, params: &[(String, String)], now: Millis) -> Result<NewInbound, String> {
    let get = |k: &str| receipts::twilio_param(params, k).map(str::trim).filter(|v| !v.is_empty());
    let sid = get("MessageSid").or(get("SmsSid")).ok_or("MessageSid is required")?;
    let phone = get("From").ok_or("From is required")?;
    if !crate::validate::is_e164(phone) {
        return Err(format!("From must be a phone number in E.164 form, not {phone}"));
    }
    let to = get("To").ok_or("To is required")?;
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
        sender: delivery.sms_sender(to),
        content: json!({"type": if media.is_empty() { "text" } else { "media" }, "body": body, "media": media}),
        body,
        context_ref: None,
        received_at: now,
    })
}

/// The messages of a WhatsApp Cloud API webhook (`entry[].changes[].value.messages[]`), each with the
/// phone number id it was sent to (`value.metadata.phone_number_id`). The text routed is the message's
/// text, the title of the reply button or list row tapped, a template's quick-reply text, or a location or
/// contact card written out; other kinds (media, stickers, …) have none and are kept as they came.
pub fn from_whatsapp(delivery: &Delivery, payload: &Value, now: Millis) -> Vec<NewInbound> {
    let mut out = Vec::new();
    for (value, sender) in receipts::whatsapp_values(delivery, payload) {
        for m in value["messages"].as_array().into_iter().flatten() {
            let (Some(id), Some(phone)) = (m["id"].as_str(), m["from"].as_str().and_then(receipts::whatsapp_phone))
            else {
                continue;
            };
            let at = m["timestamp"].as_str().and_then(|s| s.parse::<i64>().ok()).map(|s| s.saturating_mul(1000));
            out.push(NewInbound {
                channel: Channel::Whatsapp,
                provider_ref: id.to_string(),
                phone,
                sender: sender.clone(),
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
fn whatsapp_text(m: &Value) -> Option<String> {
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

/// Keeps what a webhook brought: `true` for each message not seen before. A person writing on WhatsApp
/// opens their 24-hour window at once (the answer may be quick).
pub async fn receive(delivery: &Delivery, received: &[NewInbound]) -> Result<usize, sqlx::Error> {
    let mut new = 0;
    for m in received {
        if m.channel == Channel::Whatsapp {
            whatsapp::record_inbound(&delivery.db, &m.phone, m.received_at).await?;
        }
        new += usize::from(inbound::record(&delivery.db, m).await?);
    }
    if new > 0 {
        delivery.inbound_wake.notify_one();
    }
    Ok(new)
}

/// Routes the kept messages until `stop`, woken by each webhook, and every `delivery_poll_ms` for what a
/// host that stopped left behind.
pub async fn run_worker(delivery: Arc<Delivery>, stop: CancellationToken) {
    let poll = Duration::from_millis(delivery.config.delivery_poll_ms.max(10));
    loop {
        let routed = match route_waiting(&delivery).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "routing inbound messages failed; will retry");
                0
            }
        };
        if routed == BATCH {
            continue;
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = delivery.inbound_wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

/// Messages routed in one pass.
const BATCH: usize = 64;

/// Routes the oldest waiting messages, in order; answers how many it routed. One that cannot be routed now
/// (its database write failed) stays waiting for the next pass, and holds up none after it; after
/// [`inbound::MAX_ATTEMPTS`] it is set aside (`failed`), so that a message that can never be routed cannot
/// hold up those behind it.
pub async fn route_waiting(delivery: &Delivery) -> Result<usize, sqlx::Error> {
    let waiting = inbound::waiting(&delivery.db, BATCH as i64).await?;
    let mut routed = 0;
    for m in &waiting {
        match route(delivery, m).await {
            Ok(()) => routed += 1,
            Err(e) => {
                tracing::warn!(inbound = m.id, error = %e, "routing an inbound message failed; will retry");
                inbound::failed(&delivery.db, m.id, delivery.now()).await?;
            }
        }
    }
    Ok(routed)
}

/// Routes one message (see the module's documentation): what it becomes is read first, then written in one
/// transaction with the message's own change of state, so a message another host took meanwhile changes
/// nothing here.
pub async fn route(delivery: &Delivery, m: &Inbound) -> Result<(), sqlx::Error> {
    let (db, now) = (&delivery.db, delivery.now());
    let body = m.body.as_deref().map(str::trim).filter(|b| !b.is_empty());
    let keyword = body.filter(|_| m.channel == Channel::Sms).and_then(keyword);
    let outcome = match (keyword, body) {
        // A keyword is also a word to an agent the user is talking to ("Cancel", "Yes"): it goes on in the
        // conversation there is, and opens none.
        (Some(keyword), Some(body)) => match for_partner(delivery, m, body, false).await? {
            Outcome::Append(c, message) => Outcome::Keyword(keyword, Some((c, message))),
            _ => Outcome::Keyword(keyword, None),
        },
        (_, None) => Outcome::Unsupported,
        (None, Some(body)) => for_partner(delivery, m, body, true).await?,
    };
    let mut tx = db.begin().await?;
    let (state, message_id) = match outcome {
        Outcome::Keyword(keyword, also) => {
            let state = match keyword {
                Keyword::Stop => {
                    opt_outs::set_in(&mut tx, &m.phone, m.channel, &m.sender, "stop", now).await?;
                    InboundState::OptedOut
                }
                Keyword::Start => {
                    opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.sender).await?;
                    InboundState::OptedIn
                }
            };
            let message_id = match also {
                Some((c, message)) => Some(append(&mut tx, c, message, now).await?),
                None => None,
            };
            (state, message_id)
        }
        Outcome::Unsupported => (InboundState::Unsupported, None),
        Outcome::NoPartner => (InboundState::Unrouted, None),
        Outcome::Append(c, message) => (InboundState::Routed, Some(append(&mut tx, c, message, now).await?)),
        Outcome::Open(message) => {
            let reference = format!("conv_{}", random_alnum(24));
            let (_, message) =
                conversations::open_in(&mut tx, &reference, None, message, now, events::conversation_message).await?;
            (InboundState::Routed, Some(message.id))
        }
    };
    // Writing again on WhatsApp undoes a block: they want to hear from us.
    if m.channel == Channel::Whatsapp {
        opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.sender).await?;
    }
    if !inbound::settle_in(&mut tx, m.id, state, message_id, now).await? {
        return Ok(());
    }
    tx.commit().await?;
    if state == InboundState::Unrouted
        && !inbound::replied_since(db, &m.phone, m.channel, now - DAY_MS).await?
        && delivery::send_on(delivery, m.channel, &m.phone, None, UNROUTED_REPLY, true).await?.is_sent()
    {
        inbound::mark_replied(db, m.id).await?;
    }
    Ok(())
}

/// The user's message in conversation `c`, in the transaction: its id.
async fn append(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    c: i64,
    message: NewMessage,
    now: Millis,
) -> Result<i64, sqlx::Error> {
    match conversations::append_in(tx, c, message, ConversationState::Open, now, events::conversation_message).await? {
        messages::Created::New(message) => Ok(message.id),
        _ => Err(sqlx::Error::Protocol("an inbound message carries no idempotency key".into())),
    }
}

/// What an inbound message becomes.
enum Outcome {
    /// An opt-out keyword, also the user's message in their conversation, if they have one.
    Keyword(Keyword, Option<(i64, NewMessage)>),
    /// Nothing to route (no text).
    Unsupported,
    /// No partner to give it to.
    NoPartner,
    /// The user's message in their conversation `0`.
    Append(i64, NewMessage),
    /// The first message of a new conversation.
    Open(NewMessage),
}

/// Where a text goes: the conversation it belongs in, or (`open_new`) a new one with the partner it is for.
async fn for_partner(delivery: &Delivery, m: &Inbound, body: &str, open_new: bool) -> Result<Outcome, sqlx::Error> {
    let db = &delivery.db;
    let context_partner = context_partner(delivery, m).await?;
    let ongoing = match context_partner {
        Some(partner_id) => conversations::latest_active(db, partner_id, &m.phone).await?,
        None => conversations::latest_active_of_phone(db, &m.phone).await?,
    };
    let partner_id = match (&ongoing, context_partner) {
        (Some(c), _) => c.partner_id,
        (None, _) if !open_new => return Ok(Outcome::NoPartner),
        (None, Some(partner_id)) => partner_id,
        (None, None) => match new_conversation_partner(delivery, &m.phone).await? {
            Some(partner_id) => partner_id,
            None => return Ok(Outcome::NoPartner),
        },
    };
    // The same checks as a message the user writes in the app.
    let request = SendMessage { body: Some(body.to_string()), ..Default::default() };
    let content = match compose::content(db, false, partner_id, &request, Some(&m.phone)).await {
        Ok(content) => content,
        Err(compose::ComposeError::Database(e)) => return Err(e),
        Err(refused) => {
            tracing::warn!(inbound = m.id, reason = %refused, "an inbound message could not become a message");
            return Ok(Outcome::Unsupported);
        }
    };
    let mut message = content.into_message(partner_id, &m.phone, Direction::In, None);
    message.channel = Some(m.channel);
    Ok(match ongoing {
        Some(c) => Outcome::Append(c.id, message),
        None => Outcome::Open(message),
    })
}

const DAY_MS: Millis = 24 * 60 * 60 * 1000;

/// The partner of our WhatsApp message that `m` replies to, if it is one of ours.
async fn context_partner(delivery: &Delivery, m: &Inbound) -> Result<Option<i64>, sqlx::Error> {
    let Some(context) = m.context_ref.as_deref() else { return Ok(None) };
    let Some(target) = deliveries::find_by_provider_ref(&delivery.db, m.channel.as_str(), context).await? else {
        return Ok(None);
    };
    let message = messages::find_any(&delivery.db, target.message_id).await?;
    Ok(message.filter(|message| message.phone == m.phone).map(|message| message.partner_id))
}

/// Which partner a new conversation of `phone` is with: the platform partner, else the partner it was
/// linked to last — `None` when the phone is linked to no partner.
async fn new_conversation_partner(delivery: &Delivery, phone: &str) -> Result<Option<i64>, sqlx::Error> {
    let Some(account) = accounts::find_account(&delivery.db, phone).await? else { return Ok(None) };
    let linked = accounts::linked_partners(&delivery.db, account.id).await?;
    let Some(last) = linked.last() else { return Ok(None) };
    Ok(Some(match partners::find_platform(&delivery.db).await? {
        Some(platform) => platform.id,
        None => last.id,
    }))
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
        assert_eq!(text(json!({"type": "image", "image": {"id": "m1"}})), None);
    }
}
