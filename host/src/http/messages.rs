//! `/messages`: send a hub message (every content type, templates, idempotency, E2E envelopes), read one
//! with its delivery attempts, list, and mark read / unread.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{ApiJson, QueryMap, parse_id, parse_value};
use crate::auth::PartnerAuth;
use crate::clock::record_time;
use crate::e2e;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::messages::{Direction, MessageState};
use crate::secrets::{hex, random_alnum};
use crate::state::AppState;
use crate::store::messages::{self as store, Created, Message, MessageFilter, NewMedia, NewMessage};
use crate::store::{devices, is_unique_violation, templates};
use crate::template::{self, RenderError};
use crate::validate::{check_public_url, is_code, is_e164};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/messages", post(send_message).get(list_messages))
        .route("/messages/read", post(mark_many_read))
        .route("/messages/{id}", get(get_message))
        .route("/messages/{id}/read", post(mark_read))
        .route("/messages/{id}/unread", post(mark_unread))
}

pub const CONTENT_TYPES: &[&str] = &["text", "image", "document", "audio", "video", "link", "html", "system"];
/// Largest message text, in bytes: a `body` sent as it is, or a template rendered with its variables.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
const MEDIA_TYPES: &[&str] = &["image", "document", "audio", "video"];

/// The send-message fields of INTERFACE.md (aliases `url` and `cta` accepted).
#[derive(Debug, Default, Deserialize)]
pub struct SendMessage {
    pub(crate) phone: Option<String>,
    pub(crate) body: Option<String>,
    pub(crate) content_type: Option<String>,
    pub(crate) template_code: Option<String>,
    pub(crate) vars: Option<Map<String, Value>>,
    pub(crate) lang: Option<String>,
    pub(crate) priority: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) media_url: Option<String>,
    pub(crate) media_base64: Option<String>,
    pub(crate) media_filename: Option<String>,
    pub(crate) media_mimetype: Option<String>,
    #[serde(alias = "url")]
    pub(crate) link_url: Option<String>,
    #[serde(alias = "cta")]
    pub(crate) link_label: Option<String>,
    pub(crate) link_title: Option<String>,
    pub(crate) link_description: Option<String>,
    pub(crate) link_image_url: Option<String>,
    pub(crate) html: Option<String>,
    pub(crate) subject: Option<String>,
    pub(crate) preview: Option<String>,
    pub(crate) encryption: Option<String>,
    pub(crate) e2e_envelope: Option<Value>,
    /// Conversation messages: `encrypted: true` with `e2e_mode: "conversation"` and `e2e_key_version`.
    pub(crate) encrypted: Option<bool>,
    pub(crate) e2e_mode: Option<String>,
    pub(crate) e2e_key_version: Option<i64>,
    /// A ref chosen by the sender of an E2E message (to bind `aad` to it).
    #[serde(rename = "ref")]
    pub(crate) client_ref: Option<String>,
}

impl SendMessage {
    /// Whether the request asks for end-to-end encryption in any of its forms.
    pub fn wants_e2e(&self) -> bool {
        non_empty(&self.encryption).is_some()
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

fn request_hash(body: &Value) -> String {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove("idempotency_key");
    }
    hex(&Sha256::digest(canonical(&body).to_string().as_bytes()))
}

/// Validates a send request into a message to store. `raw` is the request body as sent.
/// Validated message content: everything but the recipient and idempotency. Shared by single sends,
/// agent sends, conversation replies and broadcasts.
pub struct Content {
    pub content_type: String,
    pub body: Option<String>,
    pub rendered_body: Option<String>,
    pub template_code: Option<String>,
    pub lang: Option<String>,
    pub priority: String,
    /// Type-specific fields (`media`, `link`, `html`, …, `e2e_envelope`).
    pub content: Value,
    pub media: Option<NewMedia>,
    /// The ref the sender chose (E2E sends only); otherwise the server makes one.
    pub reference: Option<String>,
}

impl Content {
    /// The message to store for one recipient.
    pub fn into_message(
        self,
        partner_id: i64,
        phone: &str,
        direction: Direction,
        conversation_id: Option<i64>,
    ) -> NewMessage {
        NewMessage {
            reference: self.reference.unwrap_or_else(|| format!("msg_{}", random_alnum(24))),
            partner_id,
            direction,
            conversation_id,
            developer_id: None,
            phone: phone.to_string(),
            content_type: self.content_type,
            body: self.body,
            rendered_body: self.rendered_body,
            template_code: self.template_code,
            lang: self.lang,
            priority: self.priority,
            content: self.content,
            media: self.media,
            idempotency_key: None,
            request_hash: None,
        }
    }
}

/// Validates a send request into a message to store. `raw` is the request body as sent.
async fn build_message(
    state: &AppState,
    partner_id: i64,
    req: SendMessage,
    raw: &Value,
    header_key: Option<String>,
) -> ApiResult<NewMessage> {
    let phone = super::required_phone(req.phone.as_deref())?;
    let idempotency_key = non_empty(&req.idempotency_key).map(str::to_string).or(header_key);
    if idempotency_key.as_ref().is_some_and(|k| k.len() > 255) {
        return Err(ApiError::validation("idempotency_key", "idempotency_key is at most 255 characters"));
    }
    let content = validate_content(state, partner_id, &req, Some(phone)).await?;
    let mut message = content.into_message(partner_id, phone, Direction::Out, None);
    message.request_hash = idempotency_key.as_ref().map(|_| request_hash(raw));
    message.idempotency_key = idempotency_key;
    Ok(message)
}

/// Validates the content fields of a send request. `phone` is the recipient, needed to check the keys of
/// an end-to-end encrypted send; without one (broadcasts) encryption is refused.
pub async fn validate_content(
    state: &AppState,
    partner_id: i64,
    req: &SendMessage,
    phone: Option<&str>,
) -> ApiResult<Content> {
    let content_type = non_empty(&req.content_type).unwrap_or("text");
    if !CONTENT_TYPES.contains(&content_type) {
        return Err(ApiError::validation(
            "content_type",
            format!("content_type must be one of {}", CONTENT_TYPES.join(", ")),
        ));
    }
    let priority = non_empty(&req.priority).unwrap_or("notification");
    if !is_code(priority) {
        return Err(ApiError::validation(
            "priority",
            "priority must be a short lower-case word, e.g. otp, notification, chat",
        ));
    }
    let dev = state.config.dev;
    let mut content = Map::new();

    // End-to-end encrypted sends carry an envelope and never a plaintext body (CONTRACT section 11).
    let encrypted = match non_empty(&req.encryption) {
        None => false,
        Some("e2e") => true,
        Some(_) => {
            return Err(ApiError::validation("encryption", "encryption must be e2e when given"));
        }
    };
    if req.encrypted == Some(true) || req.e2e_mode.is_some() || req.e2e_key_version.is_some() {
        return Err(ApiError::validation(
            "e2e_mode",
            "e2e_mode conversation is for conversation messages; hub messages use encryption e2e",
        ));
    }
    if !encrypted && req.e2e_envelope.is_some() {
        return Err(ApiError::validation("encryption", "an e2e_envelope needs encryption e2e"));
    }
    if encrypted {
        let phone =
            phone.ok_or_else(|| ApiError::validation("encryption", "end-to-end encryption needs one recipient"))?;
        let envelope = e2e::check_envelope(req.e2e_envelope.as_ref(), true)?;
        if req.body.is_some() {
            return Err(ApiError::validation("body", "a plaintext body is never accepted with an e2e envelope"));
        }
        let published = devices::published_device_uuids(&state.db, phone).await?;
        if published.is_empty() {
            return Err(ApiError::unprocessable("e2e_no_devices", "the user has not published a device key"));
        }
        let wraps = envelope["key_wraps"].as_array().expect("checked above");
        for wrap in wraps {
            let uuid = wrap.get("device_uuid").and_then(Value::as_str).unwrap_or("");
            if !published.iter().any(|d| d == uuid) {
                return Err(ApiError::validation(
                    "e2e_envelope.key_wraps",
                    "every key wrap must name a published device of the user",
                ));
            }
        }
        content.insert("encryption".into(), json!("e2e"));
        content.insert("e2e_envelope".into(), Value::Object(envelope.clone()));
    }
    let reference = client_ref(req, encrypted)?;

    // Templates render into `rendered_body`, which is also the body.
    let mut body = if encrypted { None } else { non_empty(&req.body).map(|_| req.body.clone().unwrap_or_default()) };
    let mut rendered_body = None;
    let mut lang = None;
    let template_code = non_empty(&req.template_code).map(str::to_string);
    if let Some(code) = &template_code {
        let wanted_lang = non_empty(&req.lang).unwrap_or("en");
        let template = templates::find_for_send(&state.db, partner_id, code, wanted_lang).await?.ok_or_else(|| {
            ApiError::validation("template_code", format!("no template {code:?} in language {wanted_lang:?}"))
        })?;
        if template.status == crate::template::TemplateStatus::Rejected {
            return Err(ApiError::unprocessable("template_not_approved", "the template was rejected at review")
                .with_field("template_code"));
        }
        let vars = req.vars.clone().unwrap_or_default();
        let text = template::render(&template.body, &vars, MAX_BODY_BYTES).map_err(|e| match e {
            RenderError::Missing(name) => {
                ApiError::validation(format!("vars.{name}"), format!("variable {name} is missing"))
            }
            RenderError::Malformed(p) => {
                ApiError::unprocessable("template_not_approved", p.to_string()).with_field("template_code")
            }
            too_long @ RenderError::TooLong { .. } => ApiError::validation("vars", too_long.to_string()),
        })?;
        if encrypted {
            return Err(ApiError::validation("template_code", "templates cannot be used with e2e encryption"));
        }
        rendered_body = Some(text.clone());
        body = Some(text);
        lang = Some(template.lang);
    }

    if body.as_ref().is_some_and(|b| b.len() > MAX_BODY_BYTES) {
        return Err(ApiError::validation("body", format!("body is at most {MAX_BODY_BYTES} bytes")));
    }
    let mut media = None;
    match content_type {
        "text" | "system" if !encrypted && body.is_none() => {
            return Err(ApiError::validation("body", format!("body is required for {content_type} messages")));
        }
        t if MEDIA_TYPES.contains(&t) && !encrypted => {
            let (url, stored) = match (non_empty(&req.media_url), non_empty(&req.media_base64)) {
                (Some(_), Some(_)) => {
                    return Err(ApiError::validation("media_url", "give media_url or media_base64, not both"));
                }
                (None, None) => {
                    return Err(ApiError::validation(
                        "media_url",
                        format!("media_url or media_base64 is required for {t}"),
                    ));
                }
                (Some(url), None) => {
                    check_public_url(url, dev)
                        .map_err(|why| ApiError::validation("media_url", format!("media_url {why}")))?;
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
                    };
                    (format!("/api/v1/media/{id}"), Some(new))
                }
            };
            let size = stored.as_ref().map(|m| m.data.len());
            content.insert(
                "media".into(),
                json!({
                    "url": url,
                    "filename": non_empty(&req.media_filename),
                    "mimetype": non_empty(&req.media_mimetype),
                    "size": size,
                }),
            );
            media = stored;
        }
        "link" if !encrypted => {
            let url = non_empty(&req.link_url)
                .ok_or_else(|| ApiError::validation("link_url", "link_url (or url) is required for link messages"))?;
            check_public_url(url, dev).map_err(|why| ApiError::validation("link_url", format!("link_url {why}")))?;
            if let Some(image) = non_empty(&req.link_image_url) {
                check_public_url(image, dev)
                    .map_err(|why| ApiError::validation("link_image_url", format!("link_image_url {why}")))?;
            }
            content.insert(
                "link".into(),
                json!({
                    "url": url,
                    "label": non_empty(&req.link_label),
                    "title": non_empty(&req.link_title),
                    "description": non_empty(&req.link_description),
                    "image_url": non_empty(&req.link_image_url),
                }),
            );
        }
        "html" if !encrypted => {
            let html = non_empty(&req.html)
                .ok_or_else(|| ApiError::validation("html", "html is required for html messages"))?;
            content.insert("html".into(), json!(html));
            if let Some(subject) = non_empty(&req.subject) {
                content.insert("subject".into(), json!(subject));
            }
            if let Some(preview) = non_empty(&req.preview) {
                content.insert("preview".into(), json!(preview));
            }
        }
        _ => {}
    }

    Ok(Content {
        content_type: content_type.to_string(),
        body,
        rendered_body,
        template_code,
        lang,
        priority: priority.to_string(),
        content: Value::Object(content),
        media,
        reference,
    })
}

/// The sender's own `ref`, accepted on end-to-end encrypted messages only (it is what their `aad` binds).
/// Without `ref`, an envelope whose `aad` names a well-formed ref (`…|msg|<ref>|v1`) gets that ref, so a
/// client that follows the aad rule alone still gets a message it can open.
pub fn client_ref(req: &SendMessage, encrypted: bool) -> ApiResult<Option<String>> {
    match req.client_ref.as_deref() {
        None if encrypted => Ok(req.e2e_envelope.as_ref().and_then(|e| e["aad"].as_str()).and_then(e2e::ref_in_aad)),
        None => Ok(None),
        Some(_) if !encrypted => {
            Err(ApiError::validation("ref", "a ref can only be chosen for e2e encrypted messages"))
        }
        Some(r) => e2e::client_ref(r).map(Some),
    }
}

/// Standard base64 (URL-safe and `data:` URIs accepted), non-empty.
fn decode_media(b64: &str) -> ApiResult<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    let payload = match b64.strip_prefix("data:") {
        Some(rest) => rest.split_once(',').map(|(_, data)| data).unwrap_or(""),
        None => b64,
    };
    let compact: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
    let data = STANDARD
        .decode(&compact)
        .or_else(|_| URL_SAFE.decode(&compact))
        .map_err(|_| ApiError::validation("media_base64", "media_base64 is not valid base64"))?;
    if data.is_empty() {
        return Err(ApiError::validation("media_base64", "media_base64 is empty"));
    }
    Ok(data)
}

/// The message record of INTERFACE.md and CONTRACT section 3.
pub fn message_json(m: &Message) -> Value {
    let mut record = json!({
        "message_id": m.id,
        "ref": m.reference,
        "phone": m.phone,
        "partner": m.partner_code,
        "direction": m.direction,
        "content_type": m.content_type,
        "body": m.body,
        "state": m.state,
        "priority": m.priority,
        "channel": m.channel,
        "conversation_id": m.conversation_id,
        "created_at": record_time(m.created_at),
    });
    let obj = record.as_object_mut().expect("built as an object");
    if m.template_code.is_some() {
        obj.insert("template_code".into(), json!(m.template_code));
        obj.insert("rendered_body".into(), json!(m.rendered_body));
        obj.insert("lang".into(), json!(m.lang));
    }
    if let Some(content) = m.content.as_object() {
        for (k, v) in content {
            obj.insert(k.clone(), v.clone());
        }
    }
    record
}

async fn send_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    headers: HeaderMap,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Response> {
    let header_key = headers
        .get("idempotency-key")
        .map(|v| v.to_str().map(|s| s.trim().to_string()))
        .transpose()
        .map_err(|_| ApiError::validation("idempotency_key", "Idempotency-Key header must be text"))?
        .filter(|k| !k.is_empty());
    let req: SendMessage = parse_value(raw.clone())?;
    let new = build_message(&state, partner.id, req, &raw, header_key).await?;
    let retry_key = new.idempotency_key.clone().zip(new.request_hash.clone());
    let created = match state.messages.create(new, state.now()).await {
        // Two identical retries racing (several hosts): the loser's chosen ref collides with the winner's
        // message, which is the one to replay.
        Err(e) if is_unique_violation(&e) && retry_key.is_some() => {
            let (key, hash) = retry_key.expect("checked");
            store::find_replay(&state.db, partner.id, &key, &hash).await?.ok_or_else(|| ref_taken(e))?
        }
        other => other.map_err(ref_taken)?,
    };
    match created {
        Created::New(m) => {
            tracing::info!(message_id = m.id, "message accepted");
            metrics::counter!("hubbub_messages_accepted_total").increment(1);
            state.delivery.wake.notify_one();
            Ok((StatusCode::CREATED, Json(message_json(&m))).into_response())
        }
        Created::Replayed(m) => {
            let mut response = (StatusCode::CREATED, Json(message_json(&m))).into_response();
            response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
            Ok(response)
        }
        Created::KeyReused => Err(ApiError::idempotency_conflict()),
    }
}

/// Creating a message can only break a unique constraint through its ref (idempotency keys are handled
/// in the insert): a sender-chosen ref that is already taken (refs are unique across the service) is a 409.
pub fn ref_taken(e: sqlx::Error) -> ApiError {
    if is_unique_violation(&e) { ApiError::conflict("ref is already used by another message") } else { e.into() }
}

async fn get_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, "message")?;
    let m = store::find_message(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    let mut record = message_json(&m);
    let include = query.text("include").unwrap_or_default();
    if include.split(',').any(|part| part.trim() == "attempts") {
        let attempts = store::list_attempts(&state.db, m.id).await?;
        record["attempts"] = attempts
            .iter()
            .map(|a| {
                json!({
                    "kind": a.kind,
                    "channel": a.channel,
                    "state": a.state,
                    "error": a.error,
                    "provider_ref": a.provider_ref,
                    "at": record_time(a.at),
                })
            })
            .collect();
    }
    Ok(Json(record))
}

async fn list_messages(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let phone = query.text("phone");
    if phone.as_deref().is_some_and(|p| !is_e164(p)) {
        return Err(ApiError::validation("phone", "phone must be E.164"));
    }
    let msg_state = query.text("state");
    if msg_state.as_deref().is_some_and(|s| MessageState::parse(s).is_none()) {
        let states = MessageState::names().join(", ");
        return Err(ApiError::validation("state", format!("state must be one of {states}")));
    }
    let filter =
        MessageFilter { phone, state: msg_state, q: query.text("q"), before: page.before, limit: page.fetch() };
    let rows = store::list_messages(&state.db, partner.id, &filter).await?;
    Ok(Json(page.respond(rows, |m| m.id, message_json)))
}

/// Moves one of the partner's messages; answers the resulting record (unchanged when already there).
async fn mark(
    state: &AppState,
    partner_id: i64,
    raw_id: &str,
    from: &[MessageState],
    to: MessageState,
) -> ApiResult<Json<Value>> {
    let id = parse_id(raw_id, "message")?;
    let current =
        store::find_message(&state.db, partner_id, id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    if current.state == MessageState::Failed {
        return Err(ApiError::conflict("the message failed to deliver; it cannot be marked"));
    }
    let mut tx = state.db.writer().begin().await?;
    let moved = store::transition_in(&mut tx, id, from, to, None, state.now(), events::message_status).await?;
    tx.commit().await?;
    let record = match moved {
        Some(m) => m,
        None => store::find_message(&state.db, partner_id, id).await?.unwrap_or(current),
    };
    Ok(Json(message_json(&record)))
}

async fn mark_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    mark(&state, partner.id, &id, &MessageState::BEFORE_READ, MessageState::Read).await
}

async fn mark_unread(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    mark(&state, partner.id, &id, &[MessageState::Read], MessageState::Delivered).await
}

#[derive(Deserialize)]
struct BulkRead {
    message_ids: Option<Vec<i64>>,
    phone: Option<String>,
}

async fn mark_many_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<BulkRead>,
) -> ApiResult<Json<Value>> {
    // A phone that is given must be one (an empty string is not "no phone").
    let ids = match (&req.message_ids, req.phone.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::validation("message_ids", "give message_ids or phone, not both"));
        }
        (None, None) => {
            return Err(ApiError::validation("message_ids", "message_ids or phone is required"));
        }
        (Some(ids), None) => {
            if ids.len() > 1000 {
                return Err(ApiError::validation("message_ids", "at most 1000 message_ids at once"));
            }
            store::partner_message_ids(&state.db, partner.id, None, ids).await?
        }
        (None, Some(phone)) => {
            if !is_e164(phone) {
                return Err(ApiError::validation("phone", "phone must be E.164"));
            }
            store::partner_message_ids(&state.db, partner.id, Some(phone), &[]).await?
        }
    };
    let now = state.now();
    let mut updated = 0;
    let mut tx = state.db.writer().begin().await?;
    for id in ids {
        let moved = store::transition_in(
            &mut tx,
            id,
            &MessageState::BEFORE_READ,
            MessageState::Read,
            None,
            now,
            events::message_status,
        )
        .await?;
        updated += moved.is_some() as i64;
    }
    tx.commit().await?;
    Ok(Json(json!({ "updated": updated })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_hash_ignores_key_order_and_the_key_itself() {
        let a = json!({"phone": "+15551230000", "body": "hi", "idempotency_key": "k1", "vars": {"a": 1, "b": 2}});
        let b = json!({"vars": {"b": 2, "a": 1}, "body": "hi", "phone": "+15551230000"});
        assert_eq!(request_hash(&a), request_hash(&b));
        let c = json!({"phone": "+15551230000", "body": "hello"});
        assert_ne!(request_hash(&a), request_hash(&c));
    }
}
