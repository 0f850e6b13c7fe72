//! `/messages`: send a hub message (every content type, templates, idempotency, E2E envelopes), read one
//! with its delivery attempts, list, and mark read / unread.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiQuery, List, PageParams, parse_id, parse_value};
use crate::auth::PartnerAuth;
use crate::clock::record_time;
use crate::e2e;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::messages::{ContentType, Direction, E2eMode, Encryption, Link, Media, MessageContent, MessageState};
use crate::secrets::{hex, random_alnum};
use crate::state::AppState;
use crate::store::messages::{self as store, Created, Message, MessageFilter, NewMedia, NewMessage};
use crate::store::{devices, is_unique_violation, templates};
use crate::template::{self, RenderError};
use crate::validate::{check_public_url, is_code, is_e164};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send_message, list_messages))
        .routes(routes!(mark_many_read))
        .routes(routes!(get_message))
        .routes(routes!(mark_read))
        .routes(routes!(mark_unread))
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
    #[schema(schema_with = crate::e2e::envelope_schema_ref)]
    pub(crate) e2e_envelope: Option<Value>,
    /// Conversation messages: true for an encrypted one (with e2e_mode, e2e_key_version, e2e_envelope).
    pub(crate) encrypted: Option<bool>,
    /// Conversation messages only.
    pub(crate) e2e_mode: Option<E2eMode>,
    /// Conversation messages: the content key version; its wraps must have been uploaded (…/keys).
    #[schema(minimum = 1)]
    pub(crate) e2e_key_version: Option<i64>,
    /// E2E messages only: the sender's own ref, which its aad binds. Unique across the service: reuse is 409.
    #[serde(rename = "ref")]
    #[schema(pattern = "^msg_[A-Za-z0-9_-]{20,64}$")]
    pub(crate) client_ref: Option<String>,
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
    let content_type = req.content_type.unwrap_or(ContentType::Text);
    let priority = non_empty(&req.priority).unwrap_or("notification");
    if !is_code(priority) {
        return Err(ApiError::validation(
            "priority",
            "priority must be a short lower-case word, e.g. otp, notification, chat",
        ));
    }
    let dev = state.config.dev;
    let mut content = MessageContent::default();

    // End-to-end encrypted sends carry an envelope and never a plaintext body (CONTRACT section 11).
    let encrypted = req.encryption == Some(Encryption::E2e);
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
        ContentType::Text | ContentType::System if !encrypted && body.is_none() => {
            return Err(ApiError::validation("body", format!("body is required for {content_type} messages")));
        }
        t if t.is_media() && !encrypted => {
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
                .ok_or_else(|| ApiError::validation("link_url", "link_url (or url) is required for link messages"))?;
            check_public_url(url, dev).map_err(|why| ApiError::validation("link_url", format!("link_url {why}")))?;
            if let Some(image) = non_empty(&req.link_image_url) {
                check_public_url(image, dev)
                    .map_err(|why| ApiError::validation("link_image_url", format!("link_image_url {why}")))?;
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
            let html = non_empty(&req.html)
                .ok_or_else(|| ApiError::validation("html", "html is required for html messages"))?;
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
        Some(r) => Ok(Some(e2e::client_ref(r)?)),
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

/// A message as the API answers it: the common fields, the template fields of a template send, and the
/// content fields of its type.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Message)]
pub struct MessageRecord {
    pub message_id: i64,
    #[serde(rename = "ref")]
    pub reference: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    pub phone: String,
    /// The sending partner's code.
    pub partner: String,
    pub direction: Direction,
    #[schema(value_type = ContentType)]
    pub content_type: String,
    pub body: Option<String>,
    pub state: MessageState,
    pub priority: String,
    /// The channel that carried it: hub, whatsapp or sms (null until sent).
    pub channel: Option<String>,
    /// The support conversation it belongs to (null for hub messages).
    pub conversation_id: Option<i64>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rendered_body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    #[serde(flatten)]
    pub content: MessageContent,
    /// With `include=attempts`: every delivery attempt, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Vec<AttemptRecord>>,
}

/// One delivery attempt of a message.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptRecord {
    /// `delivery`, or `alert`: the opaque WhatsApp/SMS alert about an encrypted message for an offline user.
    pub kind: String,
    pub channel: String,
    pub state: String,
    pub error: Option<String>,
    /// The provider's message id (Twilio MessageSid, WhatsApp message id); receipts are matched by it.
    pub provider_ref: Option<String>,
    pub at: String,
}

impl From<&Message> for MessageRecord {
    fn from(m: &Message) -> Self {
        let template = m.template_code.is_some();
        MessageRecord {
            message_id: m.id,
            reference: m.reference.clone(),
            phone: m.phone.clone(),
            partner: m.partner_code.clone(),
            direction: m.direction,
            content_type: m.content_type.clone(),
            body: m.body.clone(),
            state: m.state,
            priority: m.priority.clone(),
            channel: m.channel.clone(),
            conversation_id: m.conversation_id,
            created_at: record_time(m.created_at),
            template_code: m.template_code.clone(),
            rendered_body: m.rendered_body.clone().filter(|_| template),
            lang: m.lang.clone().filter(|_| template),
            content: serde_json::from_value(m.content.clone()).unwrap_or_default(),
            attempts: None,
        }
    }
}

/// The record as a JSON value (for resources whose own records embed messages).
pub fn message_json(m: &Message) -> Value {
    serde_json::to_value(MessageRecord::from(m)).expect("a record serialises")
}

/// Send a hub message.
#[utoipa::path(
    post,
    path = "/messages",
    tag = "messages",
    security(("partnerKey" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries for 24 h (or `idempotency_key` in the body)")),
    request_body = SendMessage,
    responses(
        (status = 201, description = "The message (also when an idempotent retry is replayed; then header `Idempotent-Replayed: true`)", body = MessageRecord),
        (status = 409, response = super::E409),
    )
)]
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
            Ok((StatusCode::CREATED, Json(MessageRecord::from(&m))).into_response())
        }
        Created::Replayed(m) => {
            let mut response = (StatusCode::CREATED, Json(MessageRecord::from(&m))).into_response();
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

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct GetMessageQuery {
    /// `attempts` adds the delivery attempts.
    include: Option<String>,
}

/// Get a message.
#[utoipa::path(
    get,
    path = "/messages/{id}",
    tag = "messages",
    security(("partnerKey" = [])),
    params(GetMessageQuery),
    responses(
        (status = 200, description = "The message; with `include=attempts` also `attempts`", body = MessageRecord),
        (status = 404, response = super::E404),
    )
)]
async fn get_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<GetMessageQuery>,
) -> ApiResult<Json<MessageRecord>> {
    let id = parse_id(&id, "message")?;
    let m = store::find_message(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    let mut record = MessageRecord::from(&m);
    let include = query.include.unwrap_or_default();
    if include.split(',').any(|part| part.trim() == "attempts") {
        let attempts = store::list_attempts(&state.db, m.id).await?;
        record.attempts = Some(
            attempts
                .into_iter()
                .map(|a| AttemptRecord {
                    kind: a.kind,
                    channel: a.channel,
                    state: a.state,
                    error: a.error,
                    provider_ref: a.provider_ref,
                    at: record_time(a.at),
                })
                .collect(),
        );
    }
    Ok(Json(record))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListMessagesQuery {
    /// Only this user's messages (E.164).
    #[param(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    /// Only messages in this state.
    state: Option<MessageState>,
    /// Search in body and phone.
    q: Option<String>,
}

/// List messages, newest first.
#[utoipa::path(
    get,
    path = "/messages",
    tag = "messages",
    security(("partnerKey" = [])),
    params(ListMessagesQuery, PageParams),
    responses((status = 200, description = "A page of messages", body = List<MessageRecord>))
)]
async fn list_messages(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(query): ApiQuery<ListMessagesQuery>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<MessageRecord>>> {
    let page = page.page()?;
    let phone = query.phone.filter(|p| !p.is_empty());
    if phone.as_deref().is_some_and(|p| !is_e164(p)) {
        return Err(ApiError::validation("phone", "phone must be E.164"));
    }
    let filter = MessageFilter {
        phone,
        state: query.state,
        q: query.q.map(|q| q.trim().to_string()).filter(|q| !q.is_empty()),
        before: page.before,
        limit: page.fetch(),
    };
    let rows = store::list_messages(&state.db, partner.id, &filter).await?;
    Ok(Json(page.list(rows, |m| m.id, |m| MessageRecord::from(m))))
}

/// Moves one of the partner's messages; answers the resulting record (unchanged when already there).
async fn mark(
    state: &AppState,
    partner_id: i64,
    raw_id: &str,
    from: &[MessageState],
    to: MessageState,
) -> ApiResult<Json<MessageRecord>> {
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
    Ok(Json(MessageRecord::from(&record)))
}

/// Mark a message read.
#[utoipa::path(
    post,
    path = "/messages/{id}/read",
    tag = "messages",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The message", body = MessageRecord),
        (status = 404, response = super::E404),
        (status = 409, response = super::E409),
    )
)]
async fn mark_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageRecord>> {
    mark(&state, partner.id, &id, &MessageState::BEFORE_READ, MessageState::Read).await
}

/// Mark a read message unread (back to delivered).
#[utoipa::path(
    post,
    path = "/messages/{id}/unread",
    tag = "messages",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The message", body = MessageRecord),
        (status = 404, response = super::E404),
        (status = 409, response = super::E409),
    )
)]
async fn mark_unread(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageRecord>> {
    mark(&state, partner.id, &id, &[MessageState::Read], MessageState::Delivered).await
}

/// Either `message_ids` or `phone`. Ids of other partners' messages are ignored.
#[derive(Deserialize, ToSchema)]
struct BulkRead {
    #[schema(max_items = 1000)]
    message_ids: Option<Vec<i64>>,
    /// Every message to this user (E.164).
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
}

/// How many messages changed state.
#[derive(Serialize, ToSchema)]
struct Updated {
    updated: i64,
}

/// Mark messages read in bulk.
#[utoipa::path(
    post,
    path = "/messages/read",
    tag = "messages",
    security(("partnerKey" = [])),
    request_body = BulkRead,
    responses((status = 200, description = "How many messages changed state", body = Updated))
)]
async fn mark_many_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<BulkRead>,
) -> ApiResult<Json<Updated>> {
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
    Ok(Json(Updated { updated }))
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
