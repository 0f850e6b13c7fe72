//! Composing a message: what a send request may carry and the checks it passes before it is stored —
//! content types, templates rendered with their variables, media (by URL or base64), links, newsletters,
//! end-to-end encrypted envelopes, and idempotency. Shared by single sends, agent sends, conversation
//! replies and broadcasts.

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::{Link, Media, MessageContent};
use crate::clock::Millis;
use crate::encryption;
use crate::names::{ContentType, Direction, E2eMode, Encryption};
use crate::secrets::{hex, new_message_ref, random_alnum};
use crate::store::messages::{NewMedia, NewMessage};
use crate::store::{Db, devices, templates};
use crate::template::{self, RenderError};
use crate::validate::Invalid;
use crate::validate::{check_public_url, is_code};

/// Why a send request was refused.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// An end-to-end encrypted send to a user without a published device key.
    #[error("the user has not published a device key")]
    NoDevices,
    /// The template cannot be sent (rejected at review, or its body is malformed).
    #[error("{0}")]
    TemplateNotApproved(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ComposeError {
    ComposeError::Invalid(Invalid::new(field, message))
}

/// Largest message text, in bytes: a `body` sent as it is, or a template rendered with its variables.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What to send (aliases `url` and `cta` accepted). Also the content of conversation replies, agent sends
/// and broadcasts (which name their recipients otherwise).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SendMessage {
    /// The recipient, E.164 (sends to one user).
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    pub(crate) phone: Option<String>,
    /// Required for text and system; at most 64 KiB (a template rendered with `vars` has the same limit: 422
    /// on `vars`).
    #[schema(max_length = 65536)]
    pub(crate) body: Option<String>,
    /// `text` when absent.
    pub(crate) content_type: Option<ContentType>,
    /// An approved (or pending) template of the partner's, rendered with `vars` into the body.
    pub(crate) template_code: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub(crate) vars: Option<Map<String, Value>>,
    /// The template's language; `en` when absent.
    pub(crate) lang: Option<String>,
    /// `notification` when absent: otp, notification, chat, … (a short lower-case word).
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    pub(crate) priority: Option<String>,
    /// Or header `Idempotency-Key`. Deduplicates for 24 h.
    #[schema(max_length = 255)]
    pub(crate) idempotency_key: Option<String>,
    /// Media messages: a public https URL, or
    pub(crate) media_url: Option<String>,
    /// the bytes in base64 (stored and served at `/api/v1/media/{id}`).
    pub(crate) media_base64: Option<String>,
    pub(crate) media_filename: Option<String>,
    pub(crate) media_mimetype: Option<String>,
    /// Link messages (alias `url`).
    #[serde(alias = "url")]
    pub(crate) link_url: Option<String>,
    /// Alias `cta`.
    #[serde(alias = "cta")]
    pub(crate) link_label: Option<String>,
    pub(crate) link_title: Option<String>,
    pub(crate) link_description: Option<String>,
    pub(crate) link_image_url: Option<String>,
    /// HTML messages (newsletters): shown sandboxed.
    pub(crate) html: Option<String>,
    pub(crate) subject: Option<String>,
    pub(crate) preview: Option<String>,
    /// `e2e` for an end-to-end encrypted hub message (with `e2e_envelope` and no body).
    pub(crate) encryption: Option<Encryption>,
    #[schema(schema_with = crate::encryption::envelope_schema_ref)]
    pub(crate) e2e_envelope: Option<Value>,
    /// Conversation messages: true for an encrypted one (with e2e_mode, e2e_key_version, e2e_envelope).
    pub(crate) encrypted: Option<bool>,
    /// Conversation messages only.
    pub(crate) e2e_mode: Option<E2eMode>,
    /// Conversation messages: the content key version; its wraps must have been uploaded (…/keys).
    #[schema(minimum = 1)]
    pub(crate) e2e_key_version: Option<i64>,
    /// Seconds a hub message waits for one of the user's devices to get it before it goes on to WhatsApp,
    /// then SMS (0 to 604800); `null` keeps it in the hub only; absent: the partner's setting (`GET
    /// /settings/delivery`). Codes (`priority: otp`) and encrypted messages keep their own rules.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, nullable, minimum = 0, maximum = 604800)]
    pub(crate) fallback_after_s: Option<Option<i64>>,
    /// When to send it (RFC 3339, in the future, at most 35 days ahead): the message is `scheduled` until
    /// then (`GET /messages?state=scheduled` lists them) and may be canceled until it goes (`POST
    /// /messages/{id}/cancel`). Absent: at once. Not in conversations.
    #[schema(format = DateTime)]
    pub(crate) send_at: Option<String>,
    /// What the message is, as WhatsApp's template categories say it: `marketing` messages reach only
    /// people who did not turn this partner's marketing off, and wait out their quiet hours whatever their
    /// priority. A template send takes its template's category (this must then agree or be absent).
    pub(crate) category: Option<crate::names::Category>,
    /// E2E messages only: the sender's own ref, which its aad binds. Unique across the service: reuse is 409.
    #[serde(rename = "ref")]
    #[schema(pattern = "^msg_[A-Za-z0-9_-]{20,64}$")]
    pub(crate) client_ref: Option<String>,
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or a value (`Some(Some(v))`).
pub fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// The furthest ahead a message may be scheduled: 35 days.
pub const MAX_SCHEDULE_MS: Millis = 35 * 24 * 3600 * 1000;

/// When a message asked to be sent (`send_at`), as milliseconds: `None` for at once; RFC 3339, after `now`
/// and at most [`MAX_SCHEDULE_MS`] ahead, else the field is invalid.
pub fn send_at(requested: Option<&str>, now: Millis) -> Result<Option<Millis>, Invalid> {
    let Some(text) = requested else { return Ok(None) };
    let invalid = |why: &str| Invalid::new("send_at", format!("send_at {why}"));
    let at = chrono::DateTime::parse_from_rfc3339(text.trim())
        .map_err(|_| invalid("is a time in RFC 3339 form, e.g. 2026-12-24T09:00:00+01:00"))?
        .timestamp_millis();
    if at <= now {
        return Err(invalid("is in the past"));
    }
    if at - now > MAX_SCHEDULE_MS {
        return Err(invalid("is at most 35 days ahead"));
    }
    Ok(Some(at))
}

/// The longest fallback window a message may ask for: a week.
const MAX_FALLBACK_AFTER_S: i64 = 7 * 24 * 3600;

/// A fallback window as stored: `None` = the partner's, `Some(-1)` = the hub only, else seconds.
pub fn fallback_window(requested: Option<Option<i64>>) -> Result<Option<i64>, Invalid> {
    match requested {
        None => Ok(None),
        Some(None) => Ok(Some(-1)),
        Some(Some(seconds)) if (0..=MAX_FALLBACK_AFTER_S).contains(&seconds) => Ok(Some(seconds)),
        Some(Some(_)) => Err(Invalid::new(
            "fallback_after_s",
            format!("fallback_after_s is 0 to {MAX_FALLBACK_AFTER_S} seconds, or null for the hub only"),
        )),
    }
}

impl SendMessage {
    /// Whether the request asks for end-to-end encryption in any of its forms.
    pub fn wants_e2e(&self) -> bool {
        self.encryption.is_some()
            || self.encrypted == Some(true)
            || self.e2e_envelope.is_some()
            || self.e2e_mode.is_some()
    }
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// The JSON value with object keys sorted at every level, so equal payloads hash equally.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The hash a retry is recognised by: the request without its idempotency key, keys sorted.
fn request_hash(body: &Value) -> String {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove("idempotency_key");
    }
    hex(&Sha256::digest(canonical(&body).to_string().as_bytes()))
}

/// The idempotency key of a send (the body's `idempotency_key`, else the `Idempotency-Key` header) with the
/// hash of the request `raw` it guards.
pub fn idempotency(
    req: &SendMessage,
    raw: &Value,
    header_key: Option<String>,
) -> Result<Option<(String, String)>, Invalid> {
    let key = non_empty(&req.idempotency_key).map(str::to_string).or(header_key);
    if key.as_ref().is_some_and(|k| k.len() > 255) {
        return Err(Invalid::new("idempotency_key", "idempotency_key is at most 255 characters"));
    }
    Ok(key.map(|k| (k, request_hash(raw))))
}

/// Validated message content: everything but the recipient and idempotency. Shared by single sends,
/// agent sends, conversation replies and broadcasts.
pub struct Content {
    pub content_type: ContentType,
    pub body: Option<String>,
    pub rendered_body: Option<String>,
    pub template_code: Option<String>,
    pub lang: Option<String>,
    pub priority: String,
    /// Type-specific fields (`media`, `link`, `html`, …, `e2e_envelope`).
    pub content: MessageContent,
    pub media: Option<NewMedia>,
    /// The ref the sender chose (E2E sends only); otherwise the server makes one.
    pub reference: Option<String>,
    /// The fallback window after the hub, as stored (see [`fallback_window`]).
    pub fallback_after_s: Option<i64>,
}

impl Content {
    /// A text the service writes on a partner's behalf (an automatic reply, a rating question): chat, no
    /// template, with `content`'s type-specific fields.
    pub fn service_text(body: String, content: MessageContent) -> Content {
        Content {
            content_type: ContentType::Text,
            body: Some(body),
            rendered_body: None,
            template_code: None,
            lang: None,
            priority: "chat".into(),
            content,
            media: None,
            reference: None,
            fallback_after_s: None,
        }
    }

    /// The message to store for one recipient.
    pub fn into_message(
        self,
        partner_id: i64,
        phone: &str,
        direction: Direction,
        conversation_id: Option<i64>,
    ) -> NewMessage {
        NewMessage {
            reference: self.reference.unwrap_or_else(new_message_ref),
            partner_id,
            direction,
            conversation_id,
            developer_id: None,
            phone: phone.to_string(),
            content_type: self.content_type.to_string(),
            body: self.body,
            rendered_body: self.rendered_body,
            template_code: self.template_code,
            lang: self.lang,
            priority: self.priority,
            content: serde_json::to_value(self.content).expect("content serialises"),
            media: self.media,
            idempotency_key: None,
            request_hash: None,
            fallback_after_s: self.fallback_after_s,
            channel: None,
            account: String::new(),
            hub: None,
            invites: None,
            send_at: None,
            author_id: None,
            author_name: None,
        }
    }
}

/// Validates the content fields of a send request. `phone` is the recipient, needed to check the keys of
/// an end-to-end encrypted send; without one (broadcasts) encryption is refused.
pub async fn content(
    db: &Db,
    dev: bool,
    partner_id: i64,
    req: &SendMessage,
    phone: Option<&str>,
) -> Result<Content, ComposeError> {
    let content_type = req.content_type.unwrap_or(ContentType::Text);
    let priority = non_empty(&req.priority).unwrap_or("notification");
    if !is_code(priority) {
        return Err(invalid("priority", "priority must be a short lower-case word, e.g. otp, notification, chat"));
    }
    let mut content = MessageContent::default();

    // End-to-end encrypted sends carry an envelope and never a plaintext body (`docs/e2e.md`).
    let encrypted = req.encryption == Some(Encryption::E2e);
    if req.encrypted == Some(true) || req.e2e_mode.is_some() || req.e2e_key_version.is_some() {
        return Err(invalid(
            "e2e_mode",
            "e2e_mode conversation is for conversation messages; hub messages use encryption e2e",
        ));
    }
    if !encrypted && req.e2e_envelope.is_some() {
        return Err(invalid("encryption", "an e2e_envelope needs encryption e2e"));
    }
    if encrypted {
        let phone = phone.ok_or_else(|| invalid("encryption", "end-to-end encryption needs one recipient"))?;
        let envelope = encryption::check_envelope(req.e2e_envelope.as_ref(), true)?;
        if req.body.is_some() {
            return Err(invalid("body", "a plaintext body is never accepted with an e2e envelope"));
        }
        let published = devices::published_device_uuids(db, phone).await?;
        if published.is_empty() {
            return Err(ComposeError::NoDevices);
        }
        let wraps = envelope["key_wraps"].as_array().expect("checked above");
        for wrap in wraps {
            let uuid = wrap.get("device_uuid").and_then(Value::as_str).unwrap_or("");
            if !published.iter().any(|d| d == uuid) {
                return Err(invalid(
                    "e2e_envelope.key_wraps",
                    "every key wrap must name a published device of the user",
                ));
            }
        }
        content.encryption = Some(Encryption::E2e);
        content.e2e_envelope = Some(Value::Object(envelope.clone()));
    }
    let reference = client_ref(req, encrypted)?;

    // Templates render into `rendered_body`, which is also the body.
    let mut body = if encrypted { None } else { non_empty(&req.body).map(|_| req.body.clone().unwrap_or_default()) };
    let mut rendered_body = None;
    let mut lang = None;
    let template_code = non_empty(&req.template_code).map(str::to_string);
    if let Some(code) = &template_code {
        let wanted_lang = non_empty(&req.lang).unwrap_or("en");
        let template = templates::find_for_send(db, partner_id, code, wanted_lang)
            .await?
            .ok_or_else(|| invalid("template_code", format!("no template {code:?} in language {wanted_lang:?}")))?;
        if template.status == crate::names::TemplateStatus::Rejected {
            return Err(ComposeError::TemplateNotApproved("the template was rejected at review".into()));
        }
        let vars = req.vars.clone().unwrap_or_default();
        let text = template::render(&template.body, &vars, MAX_BODY_BYTES).map_err(|e| match e {
            RenderError::Missing(name) => invalid(format!("vars.{name}"), format!("variable {name} is missing")),
            RenderError::Malformed(p) => ComposeError::TemplateNotApproved(p.to_string()),
            too_long @ RenderError::TooLong { .. } => invalid("vars", too_long.to_string()),
        })?;
        if encrypted {
            return Err(invalid("template_code", "templates cannot be used with e2e encryption"));
        }
        rendered_body = Some(text.clone());
        body = Some(text);
        lang = Some(template.lang);
        content.vars = Some(vars);
        if req.category.is_some_and(|c| c.as_str() != template.category) {
            return Err(invalid("category", format!("the template's category is {}", template.category)));
        }
        content.category = Some(template.category.clone());
    }
    if content.category.is_none() {
        content.category = req.category.map(|c| c.as_str().to_string());
    }

    if body.as_ref().is_some_and(|b| b.len() > MAX_BODY_BYTES) {
        return Err(invalid("body", format!("body is at most {MAX_BODY_BYTES} bytes")));
    }
    let mut media = None;
    match content_type {
        ContentType::Text | ContentType::System if !encrypted && body.is_none() => {
            return Err(invalid("body", format!("body is required for {content_type} messages")));
        }
        t if t.is_media() && !encrypted => {
            let (url, stored) = match (non_empty(&req.media_url), non_empty(&req.media_base64)) {
                (Some(_), Some(_)) => {
                    return Err(invalid("media_url", "give media_url or media_base64, not both"));
                }
                (None, None) => {
                    return Err(invalid("media_url", format!("media_url or media_base64 is required for {t}")));
                }
                (Some(url), None) => {
                    check_public_url(url, dev).map_err(|why| invalid("media_url", format!("media_url {why}")))?;
                    (url.to_string(), None)
                }
                (None, Some(b64)) => {
                    let data = decode_media(b64)?;
                    let id = format!("med_{}", random_alnum(24));
                    let new = NewMedia {
                        id: id.clone(),
                        filename: non_empty(&req.media_filename).map(str::to_string),
                        mimetype: non_empty(&req.media_mimetype).map(str::to_string),
                        sha256: hex(&Sha256::digest(&data)),
                        data,
                        uploaded_by: None,
                    };
                    (format!("/api/v1/media/{id}"), Some(new))
                }
            };
            content.media = Some(Media {
                url,
                filename: non_empty(&req.media_filename).map(str::to_string),
                mimetype: non_empty(&req.media_mimetype).map(str::to_string),
                size: stored.as_ref().map(|m| m.data.len() as i64),
            });
            media = stored;
        }
        ContentType::Link if !encrypted => {
            let url = non_empty(&req.link_url)
                .ok_or_else(|| invalid("link_url", "link_url (or url) is required for link messages"))?;
            check_public_url(url, dev).map_err(|why| invalid("link_url", format!("link_url {why}")))?;
            if let Some(image) = non_empty(&req.link_image_url) {
                check_public_url(image, dev)
                    .map_err(|why| invalid("link_image_url", format!("link_image_url {why}")))?;
            }
            let text = |v: &Option<String>| non_empty(v).map(str::to_string);
            content.link = Some(Link {
                url: url.to_string(),
                label: text(&req.link_label),
                title: text(&req.link_title),
                description: text(&req.link_description),
                image_url: text(&req.link_image_url),
            });
        }
        ContentType::Html if !encrypted => {
            let html = non_empty(&req.html).ok_or_else(|| invalid("html", "html is required for html messages"))?;
            content.html = Some(html.to_string());
            content.subject = non_empty(&req.subject).map(str::to_string);
            content.preview = non_empty(&req.preview).map(str::to_string);
        }
        _ => {}
    }

    Ok(Content {
        content_type,
        body,
        rendered_body,
        template_code,
        lang,
        priority: priority.to_string(),
        content,
        media,
        reference,
        fallback_after_s: fallback_window(req.fallback_after_s)?,
    })
}

/// The sender's own `ref`, accepted on end-to-end encrypted messages only (it is what their `aad` binds).
/// Without `ref`, an envelope whose `aad` names a well-formed ref (`…|msg|<ref>|v1`) gets that ref, so a
/// client that follows the aad rule alone still gets a message it can open.
pub fn client_ref(req: &SendMessage, encrypted: bool) -> Result<Option<String>, ComposeError> {
    match req.client_ref.as_deref() {
        None if encrypted => {
            Ok(req.e2e_envelope.as_ref().and_then(|e| e["aad"].as_str()).and_then(encryption::ref_in_aad))
        }
        None => Ok(None),
        Some(_) if !encrypted => Err(invalid("ref", "a ref can only be chosen for e2e encrypted messages")),
        Some(r) => Ok(Some(encryption::client_ref(r)?)),
    }
}

/// Standard base64 (URL-safe and `data:` URIs accepted), non-empty.
fn decode_media(b64: &str) -> Result<Vec<u8>, ComposeError> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    let payload = match b64.strip_prefix("data:") {
        Some(rest) => rest.split_once(',').map(|(_, data)| data).unwrap_or(""),
        None => b64,
    };
    let compact: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
    let data = STANDARD
        .decode(&compact)
        .or_else(|_| URL_SAFE.decode(&compact))
        .map_err(|_| invalid("media_base64", "media_base64 is not valid base64"))?;
    if data.is_empty() {
        return Err(invalid("media_base64", "media_base64 is empty"));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_hash_ignores_key_order_and_the_key_itself() {
        let a = json!({"phone": "+15551230000", "body": "hi", "idempotency_key": "k1", "vars": {"a": 1, "b": 2}});
        let b = json!({"vars": {"b": 2, "a": 1}, "body": "hi", "phone": "+15551230000"});
        assert_eq!(request_hash(&a), request_hash(&b));
        let c = json!({"phone": "+15551230000", "body": "hello"});
        assert_ne!(request_hash(&a), request_hash(&c));
    }
}
