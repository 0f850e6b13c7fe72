//! Web Push for a closed app: when a message reaches a user's hub (a hub message, or an agent's message in
//! a support conversation), each of their subscribed devices gets a push — a title and a short text for a
//! plain message, only "New message from {partner}" for an encrypted one, never a body or ciphertext — with
//! a `tag` that collapses a partner's (or a conversation's) pushes into one notification, the app page to
//! open, and a single-purpose link the service worker calls when the push arrives, which makes the message
//! `delivered` (a device has it).
//!
//! Pushes go out after the delivery is written, beside the worker (at most [`IN_FLIGHT`] at once), through
//! the same outbound guard as webhooks. They are best effort: a push service that fails is logged and
//! counted (`hubbub_push_total`), one that answers 404 or 410 loses the subscription, and a message no
//! device gets goes on by its fallback after the hub.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use sha2::Sha256;
use tokio::sync::Semaphore;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::store::messages::Message;
use crate::store::{Db, conversations, push};
use crate::webpush::{self, Pushed, Vapid};

/// Pushes in flight at once on a host; more wait.
pub const IN_FLIGHT: usize = 256;
/// How long a push service keeps a push for a device that is offline.
const TTL_S: u32 = 24 * 3600;
/// The longest text a push carries.
const TEXT_CHARS: usize = 140;

/// The push sender: the host's VAPID key, the key of the acknowledgement links, the guarded client.
pub struct Push {
    db: Db,
    clock: SharedClock,
    vapid: Vapid,
    ack_key: Vec<u8>,
    http: reqwest::Client,
    in_flight: Arc<Semaphore>,
}

/// What the service worker receives (JSON, encrypted for the device).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Notice {
    /// The partner's name.
    pub title: String,
    pub body: String,
    /// Collapses notifications: `hub:{partner code}` or `conversation:{ref}`.
    pub tag: String,
    /// The app page that shows the message.
    pub url: String,
    /// `POST` here when the push arrives: the message becomes `delivered`.
    pub ack: String,
}

impl Push {
    /// `vapid` is the host's key pair; `secret` the host's signing secret, from which the acknowledgement
    /// links' key is derived.
    pub fn new(db: Db, clock: SharedClock, config: &Config, vapid: Vapid, secret: &[u8]) -> Push {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key");
        mac.update(b"hubbub.push.ack.v1");
        Push {
            db,
            clock,
            vapid,
            ack_key: mac.finalize().into_bytes().to_vec(),
            http: crate::providers::outbound_client(config, config.webhook_timeout_ms, "Hubbub-Push/1"),
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
        }
    }

    /// The public key the browser subscribes with (`applicationServerKey`).
    pub fn public_key(&self) -> String {
        self.vapid.public_key()
    }

    /// Tells every subscribed device of the message's user, beside the caller.
    pub fn notify(self: &Arc<Self>, message: Message) {
        let push = self.clone();
        tokio::spawn(async move {
            let Ok(_permit) = push.in_flight.clone().acquire_owned().await else { return };
            if let Err(error) = push.send_all(&message).await {
                tracing::warn!(%error, message_id = message.id, "web push: reading the subscriptions failed");
            }
        });
    }

    async fn send_all(&self, message: &Message) -> Result<(), sqlx::Error> {
        let subscriptions = push::list_for_phone(&self.db, &message.phone).await?;
        if subscriptions.is_empty() {
            return Ok(());
        }
        // Silent for a person who muted the partner (outside the conversations they opened), or in their
        // quiet hours (codes and chat aside): the message is in their hub all the same.
        let honoured = crate::store::preferences::honoured(&self.db, &message.phone, message.partner_id).await?;
        let marketing = crate::preferences::is_marketing(&message.content);
        let muted = honoured.muted && message.conversation_id.is_none();
        if muted
            || honoured.refusal(marketing).is_some()
            || honoured.quiet_until(self.clock.now_ms(), &message.priority, marketing).is_some()
        {
            metrics::counter!("hubbub_push_total", "outcome" => "silenced").increment(1);
            return Ok(());
        }
        let partner_name = message.partner_name.as_str();
        let conversation = match message.conversation_id {
            Some(id) => conversations::find_by_id(&self.db, id).await?.map(|c| c.reference),
            None => None,
        };
        for subscription in subscriptions {
            let notice =
                notice(message, partner_name, conversation.as_deref(), self.ack_link(message.id, subscription.id));
            let payload = serde_json::to_vec(&notice).expect("a notice serializes");
            let body = match webpush::parse_keys(&subscription.p256dh, &subscription.auth)
                .and_then(|(point, auth)| webpush::encrypt(&point, &auth, &payload))
            {
                Ok(body) => body,
                Err(error) => {
                    tracing::warn!(?error, subscription = subscription.id, "web push: cannot encrypt for this device");
                    continue;
                }
            };
            let topic = topic_of(&notice.tag);
            let now_s = self.clock.now_ms() / 1000;
            let pushed =
                webpush::send(&self.http, &self.vapid, &subscription.endpoint, body, TTL_S, &topic, now_s).await;
            let outcome = match &pushed {
                Pushed::Accepted => "accepted",
                Pushed::Gone => "gone",
                Pushed::Failed(_) => "failed",
            };
            metrics::counter!("hubbub_push_total", "outcome" => outcome).increment(1);
            match pushed {
                Pushed::Accepted => {}
                Pushed::Gone => push::forget(&self.db, subscription.id).await?,
                Pushed::Failed(why) => {
                    tracing::warn!(why, subscription = subscription.id, message_id = message.id, "web push failed")
                }
            }
        }
        Ok(())
    }

    /// The acknowledgement link of a push: the message and subscription ids and a MAC over both.
    fn ack_link(&self, message_id: i64, subscription_id: i64) -> String {
        let mut token = Vec::with_capacity(32);
        token.extend_from_slice(&message_id.to_be_bytes());
        token.extend_from_slice(&subscription_id.to_be_bytes());
        let tag = self.mac(&token).finalize().into_bytes();
        token.extend_from_slice(&tag[..16]);
        format!("/api/v1/push/ack/{}", URL_SAFE_NO_PAD.encode(token))
    }

    fn mac(&self, ids: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.ack_key).expect("HMAC takes any key");
        mac.update(ids);
        mac
    }

    /// The message an acknowledgement token names, if the host made it (compared in constant time).
    pub fn acknowledged(&self, token: &str) -> Option<i64> {
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        if bytes.len() != 32 {
            return None;
        }
        self.mac(&bytes[..16]).verify_truncated_left(&bytes[16..]).ok()?;
        Some(i64::from_be_bytes(bytes[..8].try_into().ok()?))
    }
}

/// What a push says of a message: who it is from (an agent's reply: "Ana from Acme"), and its text.
pub fn notice(m: &Message, partner_name: &str, conversation_ref: Option<&str>, ack: String) -> Notice {
    let (tag, url) = match conversation_ref {
        Some(reference) => (format!("conversation:{reference}"), format!("/conversations/{reference}")),
        None => (format!("hub:{}", m.partner_code), format!("/m/{}", m.reference)),
    };
    Notice { title: super::sender(m, partner_name), body: text_of(m, partner_name), tag, url, ack }
}

/// The short text of a push: what the message says, or what it is; for an encrypted message only who sent it.
fn text_of(m: &Message, partner_name: &str) -> String {
    if super::is_encrypted(m) {
        return format!("New message from {partner_name}");
    }
    let field = |path: &[&str]| {
        let mut value = &m.content;
        for key in path {
            value = value.get(key)?;
        }
        value.as_str().map(str::trim).filter(|s| !s.is_empty())
    };
    let said = m.rendered_body.as_deref().or(m.body.as_deref()).map(str::trim).filter(|s| !s.is_empty());
    let text = match m.content_type.as_str() {
        "html" => field(&["subject"]).or(field(&["preview"])).map(str::to_string),
        "link" => said.or(field(&["link", "title"])).or(field(&["link", "label"])).map(str::to_string),
        "image" => Some(said.map_or("📷 Photo".to_string(), |s| format!("📷 {s}"))),
        "video" => Some(said.map_or("🎬 Video".to_string(), |s| format!("🎬 {s}"))),
        "audio" => Some("🎵 Audio".to_string()),
        "document" => Some(format!("📄 {}", field(&["media", "filename"]).or(said).unwrap_or("Document"))),
        _ if m.content.get("flow").is_some() => {
            Some(format!("📝 {}", field(&["flow", "title"]).unwrap_or("A form to fill in")))
        }
        _ => said.map(str::to_string),
    };
    let text = text.unwrap_or_else(|| format!("New message from {partner_name}"));
    if text.chars().count() <= TEXT_CHARS {
        return text;
    }
    let cut: String = text.chars().take(TEXT_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// The `Topic` header for a tag: at most 32 URL-safe characters (RFC 8030 §5.4), so pushes of one thread
/// still waiting at the push service collapse into the latest.
fn topic_of(tag: &str) -> String {
    use sha2::Digest;
    URL_SAFE_NO_PAD.encode(&Sha256::digest(tag.as_bytes())[..24])
}

pub use crate::store::push::Subscription;

/// Whether the device `device_uuid` of the person of `phone` is subscribed.
pub async fn is_subscribed(db: &crate::store::Db, phone: &str, device_uuid: &str) -> Result<bool, sqlx::Error> {
    Ok(crate::store::push::find(db, phone, device_uuid).await?.is_some())
}

/// A browser's subscription as given: its endpoint and keys.
pub struct NewSubscription<'a> {
    pub endpoint: Option<&'a str>,
    pub p256dh: Option<&'a str>,
    pub auth: Option<&'a str>,
    /// Whether `keys` was given at all.
    pub keys: bool,
}

/// Subscribes the device `device_uuid` of the person of `phone`: an endpoint the host may call (HTTPS to a
/// public host; `dev`: the host's development mode) and the browser's P-256 key and secret. A device
/// subscribed again is replaced; a person keeps the ten newest.
pub async fn subscribe(
    db: &crate::store::Db,
    dev: bool,
    (phone, device_uuid): (&str, &str),
    req: NewSubscription<'_>,
    now: crate::clock::Millis,
) -> Result<Subscription, crate::validate::KeepError> {
    use crate::validate::Invalid;
    let endpoint = req.endpoint.map(str::trim).unwrap_or_default();
    if endpoint.is_empty() {
        return Err(Invalid::new("endpoint", "endpoint is required").into());
    }
    if endpoint.len() > crate::validate::MAX_URL {
        let why = format!("endpoint is at most {} characters", crate::validate::MAX_URL);
        return Err(Invalid::new("endpoint", why).into());
    }
    crate::validate::check_url("endpoint", endpoint, dev).await?;
    if !req.keys {
        return Err(Invalid::new("keys", "keys (p256dh, auth) are required").into());
    }
    let p256dh = req.p256dh.ok_or_else(|| Invalid::new("keys.p256dh", "keys.p256dh is required"))?;
    let auth = req.auth.ok_or_else(|| Invalid::new("keys.auth", "keys.auth is required"))?;
    if p256dh.len() > 128 || auth.len() > 64 {
        return Err(Invalid::new("keys", "keys are a P-256 public key and a 16-byte secret").into());
    }
    if crate::webpush::parse_keys(p256dh, "AAAAAAAAAAAAAAAAAAAAAA").is_err() {
        return Err(Invalid::new("keys.p256dh", "keys.p256dh must be a P-256 public key (base64url, 65 bytes)").into());
    }
    if crate::webpush::parse_keys(p256dh, auth).is_err() {
        return Err(Invalid::new("keys.auth", "keys.auth must be 16 bytes (base64url)").into());
    }
    Ok(crate::store::push::subscribe(db, phone, device_uuid, endpoint, p256dh, auth, now).await?)
}

/// Unsubscribes the device `device_uuid` of the person of `phone` (nothing to do when it is not).
pub async fn unsubscribe(db: &crate::store::Db, phone: &str, device_uuid: &str) -> Result<(), sqlx::Error> {
    crate::store::push::unsubscribe(db, phone, device_uuid).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{Direction, MessageState};
    use serde_json::json;

    fn message(content_type: &str, body: Option<&str>, content: serde_json::Value) -> Message {
        Message {
            id: 7,
            reference: "msg_abc".into(),
            partner_id: 1,
            partner_code: "acme".into(),
            partner_name: "Acme".into(),
            phone: "+15551230000".into(),
            direction: Direction::Out,
            content_type: content_type.into(),
            body: body.map(str::to_string),
            rendered_body: None,
            template_code: None,
            lang: None,
            priority: "normal".into(),
            content,
            state: MessageState::Sent,
            channel: None,
            seq: 1,
            conversation_id: None,
            developer_id: None,
            created_at: 0,
            send_at: None,
            error: None,
            author_id: None,
            author_name: None,
            broadcast_id: None,
        }
    }

    #[test]
    fn a_notice_says_what_came_and_never_what_is_encrypted() {
        let plain = notice(&message("text", Some("Your parcel ships today"), json!({})), "Acme", None, "/ack".into());
        assert_eq!(
            plain,
            Notice {
                title: "Acme".into(),
                body: "Your parcel ships today".into(),
                tag: "hub:acme".into(),
                url: "/m/msg_abc".into(),
                ack: "/ack".into()
            }
        );
        let sealed = message("text", None, json!({"encryption": "e2e", "e2e_envelope": {"ciphertext": "c2VjcmV0"}}));
        let sealed = notice(&sealed, "Acme", None, "/ack".into());
        assert_eq!(sealed.body, "New message from Acme");
        assert!(!serde_json::to_string(&sealed).unwrap().contains("c2VjcmV0"));
        let reply = notice(&message("text", Some("On it"), json!({})), "Acme", Some("conv_x"), "/ack".into());
        assert_eq!((reply.tag.as_str(), reply.url.as_str()), ("conversation:conv_x", "/conversations/conv_x"));
        assert_eq!(reply.title, "Acme", "a reply sent with the partner's key is the partner's");
        let mut by_ana = message("text", Some("On it"), json!({}));
        by_ana.author_name = Some("Ana Lima".into());
        assert_eq!(notice(&by_ana, "Acme", Some("conv_x"), String::new()).title, "Ana from Acme");
        let news = message("html", None, json!({"html": "<p>x</p>", "subject": "Winter sale"}));
        assert_eq!(notice(&news, "Acme", None, String::new()).body, "Winter sale");
        let long = message("text", Some(&"word ".repeat(100)), json!({}));
        let body = notice(&long, "Acme", None, String::new()).body;
        assert!(body.ends_with('…') && body.chars().count() <= TEXT_CHARS, "{body}");
        assert_eq!(topic_of("conversation:conv_x").len(), 32);
    }
}
