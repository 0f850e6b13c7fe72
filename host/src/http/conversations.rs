//! Support conversations, from both sides: a user opens one with a partner and writes in it
//! (`/me/conversations…`); the partner's agents list, read, answer and close them (`/conversations…`), and
//! `POST /agent/messages` answers in the latest open thread of a phone or, without one, sends a hub
//! message. States: `open` (waiting for an agent) → agent reply → `pending` (waiting for the user) → user
//! reply → `open`; closed by the partner; a user message reopens.
//!
//! End-to-end encrypted threads: either side shares a content key by uploading its wraps to every peer
//! device (`…/keys`, one row per device and key version), then posts messages encrypted with it
//! (`encrypted: true, e2e_mode: "conversation", e2e_key_version, e2e_envelope`). Each side reads the wraps
//! addressed to its own devices and the peer directory (`…/devices`). The server stores ciphertext only.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::keys::{agent_device_json, device_json};
use super::messages::{Content, SendMessage, client_ref, message_json, ref_taken, validate_content};
use super::required_phone;
use super::{ApiJson, QueryMap, parse_id};
use crate::auth::{PartnerAuth, UserAuth};
use crate::clock::record_time;
use crate::conversations::ConversationState;
use crate::e2e;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::messages::{ContentType, Direction, E2eMode, Encryption, MessageContent};
use crate::secrets::random_alnum;
use crate::state::AppState;
use crate::store::conversations::{self as store, Conversation};
use crate::store::keys::{self, ConversationKey};
use crate::store::messages::{self, Created};
use crate::store::{accounts, devices, partners};
use crate::validate::is_code;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/conversations", get(my_conversations).post(open_conversation))
        .route("/me/conversations/{ref}", get(my_conversation))
        .route("/me/conversations/{ref}/messages", post(user_message))
        .route("/me/conversations/{ref}/keys", post(user_upload_keys).get(user_keys))
        .route("/me/conversations/{ref}/devices", get(user_peer_devices))
        .route("/conversations", get(list_conversations))
        .route("/conversations/{id}", get(get_conversation).patch(update_conversation))
        .route("/conversations/{id}/messages", post(agent_reply))
        .route("/conversations/{id}/keys", post(agent_upload_keys).get(agent_keys))
        .route("/conversations/{id}/devices", get(agent_peer_devices))
        .route("/agent/messages", post(agent_message))
}

/// Messages embedded in a conversation record (the latest ones, oldest first).
const EMBEDDED_MESSAGES: i64 = 200;

pub fn conversation_json(c: &Conversation) -> Value {
    json!({
        "conversation_id": c.id,
        "ref": c.reference,
        "phone": c.phone,
        "partner": c.partner_code,
        "subject": c.subject,
        "state": c.state,
        "last_message_at": record_time(c.last_message_at),
        "created_at": record_time(c.created_at),
    })
}

async fn with_messages(state: &AppState, c: &Conversation) -> ApiResult<Value> {
    let mut record = conversation_json(c);
    let rows = messages::list_conversation(&state.db, c.id, EMBEDDED_MESSAGES).await?;
    record["messages"] = rows.iter().map(message_json).collect();
    Ok(record)
}

// ---- the user's side ----

async fn my_conversations(State(state): State<AppState>, user: UserAuth, query: QueryMap) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let rows = store::list_for_phone(&state.db, &user.phone, page.before, page.fetch()).await?;
    Ok(Json(page.respond(rows, |c| c.id, conversation_json)))
}

#[derive(Deserialize)]
struct OpenConversation {
    partner: Option<String>,
    subject: Option<String>,
    #[serde(flatten)]
    message: SendMessage,
}

async fn open_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<OpenConversation>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let code = req.partner.as_deref().map(str::trim).filter(|p| !p.is_empty());
    let code = code.ok_or_else(|| ApiError::validation("partner", "partner is required"))?;
    let subject = req.subject.as_deref().map(str::trim).filter(|s| !s.is_empty());
    if subject.is_some_and(|s| s.chars().count() > 200) {
        return Err(ApiError::validation("subject", "subject is at most 200 characters"));
    }
    // Support is opened with a partner the user is linked to.
    let partner = partners::find_by_code(&state.db, code).await?.ok_or_else(|| ApiError::not_found("partner"))?;
    let account = accounts::find_account(&state.db, &user.phone).await?;
    let linked = match &account {
        Some(a) => accounts::linked_partners(&state.db, a.id).await?.iter().any(|(c, _)| c == code),
        None => false,
    };
    if !linked {
        return Err(ApiError::not_found("partner"));
    }
    if req.message.wants_e2e() {
        return Err(ApiError::validation(
            "encrypted",
            "a conversation opens with a plaintext message; share a content key (POST …/keys), then send encrypted ones",
        ));
    }
    refuse_system_from_users(&req.message)?;
    let content = validate_content(&state, partner.id, &req.message, Some(&user.phone)).await?;
    let first = content.into_message(partner.id, &user.phone, Direction::In, None);
    let reference = format!("conv_{}", random_alnum(24));
    let (conversation, message) =
        store::open(&state.db, &reference, subject, first, state.now(), events::conversation_message).await?;
    let mut record = conversation_json(&conversation);
    record["messages"] = json!([message_json(&message)]);
    Ok((StatusCode::CREATED, Json(record)))
}

/// A message in a conversation: plaintext content as any message, or an encrypted one
/// (`encrypted: true, e2e_mode: "conversation", e2e_key_version, e2e_envelope`, optionally the sender's `ref`)
/// under a content key already shared in the thread.
/// `system` messages speak for the service or the partner: a user cannot write one.
fn refuse_system_from_users(req: &SendMessage) -> ApiResult<()> {
    if req.content_type == Some(ContentType::System) {
        return Err(ApiError::validation("content_type", "users cannot send system messages"));
    }
    Ok(())
}

async fn conversation_content(state: &AppState, c: &Conversation, req: &SendMessage) -> ApiResult<Content> {
    if !req.wants_e2e() {
        return validate_content(state, c.partner_id, req, Some(&c.phone)).await;
    }
    if req.encrypted != Some(true) {
        return Err(ApiError::validation("encrypted", "encrypted must be true for an encrypted conversation message"));
    }
    if req.e2e_mode != Some(E2eMode::Conversation) {
        return Err(ApiError::validation("e2e_mode", "e2e_mode must be conversation"));
    }
    let version = req
        .e2e_key_version
        .filter(|v| *v >= 1)
        .ok_or_else(|| ApiError::validation("e2e_key_version", "e2e_key_version must be a positive integer"))?;
    let envelope = e2e::check_envelope(req.e2e_envelope.as_ref(), false)?;
    if envelope.get("key_version").is_some_and(|v| v.as_i64() != Some(version)) {
        return Err(ApiError::validation(
            "e2e_envelope.key_version",
            "e2e_envelope.key_version must be e2e_key_version",
        ));
    }
    if req.body.is_some() {
        return Err(ApiError::validation("body", "a plaintext body is never accepted with an e2e envelope"));
    }
    if req.content_type.is_some_and(|t| t != ContentType::Text) || req.template_code.is_some() {
        return Err(ApiError::validation("content_type", "encrypted conversation messages are text (in the envelope)"));
    }
    if !keys::has_key_version(&state.db, c.id, version).await? {
        return Err(ApiError::validation(
            "e2e_key_version",
            format!("no content key of version {version} was shared in this conversation (POST …/keys first)"),
        ));
    }
    let priority = req.priority.as_deref().map(str::trim).filter(|p| !p.is_empty()).unwrap_or("notification");
    if !is_code(priority) {
        return Err(ApiError::validation("priority", "priority must be a short lower-case word, e.g. chat"));
    }
    Ok(Content {
        content_type: ContentType::Text,
        body: None,
        rendered_body: None,
        template_code: None,
        lang: None,
        priority: priority.into(),
        content: MessageContent {
            encryption: Some(Encryption::E2e),
            e2e_mode: Some(E2eMode::Conversation),
            e2e_key_version: Some(version),
            e2e_envelope: Some(serde_json::to_value(envelope).expect("an envelope serialises")),
            ..MessageContent::default()
        },
        media: None,
        reference: client_ref(req, true)?,
    })
}

async fn my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<Value>> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok(Json(with_messages(&state, &c).await?))
}

async fn user_message(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let c = user_thread(&state, &user, &reference).await?;
    refuse_system_from_users(&req)?;
    let content = conversation_content(&state, &c, &req).await?;
    let message = content.into_message(c.partner_id, &user.phone, Direction::In, Some(c.id));
    // A user message puts the thread back in the agents' queue, reopening a closed one.
    let (_, m) =
        store::append(&state.db, c.id, message, ConversationState::Open, state.now(), events::conversation_message)
            .await
            .map_err(ref_taken)?;
    Ok((StatusCode::CREATED, Json(message_json(&m))))
}

// ---- the partner's side ----

async fn list_conversations(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let wanted = match query.text("state") {
        None => None,
        Some(text) => Some(
            ConversationState::parse(&text)
                .ok_or_else(|| ApiError::validation("state", "state must be open, pending or closed"))?,
        ),
    };
    let rows =
        store::list_for_partner(&state.db, partner.id, wanted, query.text("q").as_deref(), page.before, page.fetch())
            .await?;
    Ok(Json(page.respond(rows, |c| c.id, conversation_json)))
}

async fn get_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok(Json(with_messages(&state, &c).await?))
}

#[derive(Deserialize)]
struct UpdateConversation {
    state: Option<String>,
}

async fn update_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateConversation>,
) -> ApiResult<Json<Value>> {
    // Another partner's conversation is 404 whatever the body says.
    let c = agent_thread(&state, partner.id, &id).await?;
    if req.state.as_deref() != Some(ConversationState::Closed.as_str()) {
        return Err(ApiError::validation("state", "state can only be set to closed (a user message reopens)"));
    }
    let c = store::set_state(&state.db, partner.id, c.id, ConversationState::Closed)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok(Json(conversation_json(&c)))
}

/// An agent's reply in a conversation: the thread now waits for the user.
async fn reply(state: &AppState, partner_id: i64, c: &Conversation, req: &SendMessage) -> ApiResult<Value> {
    let content = conversation_content(state, c, req).await?;
    let message = content.into_message(partner_id, &c.phone, Direction::Out, Some(c.id));
    let (_, m) =
        store::append(&state.db, c.id, message, ConversationState::Pending, state.now(), events::conversation_message)
            .await
            .map_err(ref_taken)?;
    state.delivery.wake.notify_one();
    Ok(message_json(&m))
}

async fn agent_reply(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok((StatusCode::CREATED, Json(reply(&state, partner.id, &c, &req).await?)))
}

/// `POST /agent/messages`: into the latest open or pending thread of the phone; otherwise a hub message
/// (never a new conversation: only users open them). A sealed E2E message (`encryption: "e2e"` with key
/// wraps) is always a hub message, its `aad` names the hub; an encrypted conversation message needs a thread.
async fn agent_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let phone = required_phone(req.phone.as_deref())?.to_string();
    let sealed = req.encryption == Some(Encryption::E2e) && req.encrypted != Some(true) && req.e2e_mode.is_none();
    if !sealed && let Some(c) = store::latest_active(&state.db, partner.id, &phone).await? {
        return Ok((StatusCode::CREATED, Json(reply(&state, partner.id, &c, &req).await?)));
    }
    if req.encrypted == Some(true) || req.e2e_mode.is_some() {
        return Err(ApiError::validation(
            "e2e_mode",
            "no open conversation with this phone for a conversation message",
        ));
    }
    let content = validate_content(&state, partner.id, &req, Some(&phone)).await?;
    let message = content.into_message(partner.id, &phone, Direction::Out, None);
    match state.messages.create(message, state.now()).await.map_err(ref_taken)? {
        Created::New(m) | Created::Replayed(m) => {
            state.delivery.wake.notify_one();
            Ok((StatusCode::CREATED, Json(message_json(&m))))
        }
        Created::KeyReused => Err(ApiError::idempotency_conflict()),
    }
}

// ---- end-to-end encryption: content-key wraps and the peer directory, from both sides ----

#[derive(Deserialize)]
struct UploadKeys {
    key_version: Option<i64>,
    wraps: Option<Vec<Value>>,
}

/// Wraps in one upload, at most.
const MAX_WRAPS: usize = 256;

/// Stores the wraps of one content key version; each names a device of the thread's user (`user`) or an
/// agent device of its partner (`agent`).
async fn upload_keys(state: &AppState, c: &Conversation, req: UploadKeys, uploaded_by: &str) -> ApiResult<Value> {
    let key_version = req
        .key_version
        .filter(|v| *v >= 1)
        .ok_or_else(|| ApiError::validation("key_version", "key_version must be a positive integer"))?;
    let wraps = req.wraps.filter(|w| !w.is_empty() && w.len() <= MAX_WRAPS).ok_or_else(|| {
        ApiError::validation("wraps", format!("wraps must be an array of 1 to {MAX_WRAPS} key wraps"))
    })?;
    let user_devices = devices::published_device_uuids(&state.db, &c.phone).await?;
    let agent_devices: Vec<String> =
        keys::agent_devices(&state.db, c.partner_id).await?.into_iter().map(|d| d.device_uuid).collect();
    let now = state.now();
    let mut rows: Vec<ConversationKey> = Vec::with_capacity(wraps.len());
    for w in &wraps {
        let obj = e2e::check_wrap(w, "wraps", true)?;
        let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (kind, uuid) = (text("device_kind"), text("device_uuid"));
        let known = if kind == "user" { &user_devices } else { &agent_devices };
        if !known.contains(&uuid) {
            return Err(ApiError::validation(
                "wraps.device_uuid",
                format!("{uuid:?} is not a published {kind} device of this conversation"),
            ));
        }
        if rows.iter().any(|r| r.device_kind == kind && r.device_uuid == uuid) {
            return Err(ApiError::validation("wraps.device_uuid", format!("two wraps for device {uuid:?}")));
        }
        rows.push(ConversationKey {
            key_version,
            device_kind: kind,
            device_uuid: uuid,
            wrap: text("wrap"),
            wrap_nonce: text("wrap_nonce"),
            sender_eph_pub: text("sender_eph_pub"),
            uploaded_by: uploaded_by.to_string(),
            created_at: now,
        });
    }
    keys::put_conversation_keys(&state.db, c.id, &rows).await?;
    Ok(json!({
        "conversation_id": c.id,
        "ref": c.reference,
        "key_version": key_version,
        "wraps": rows.iter().map(key_json).collect::<Vec<_>>(),
    }))
}

fn key_json(k: &ConversationKey) -> Value {
    json!({
        "key_version": k.key_version,
        "device_kind": k.device_kind,
        "device_uuid": k.device_uuid,
        "wrap": k.wrap,
        "wrap_nonce": k.wrap_nonce,
        "sender_eph_pub": k.sender_eph_pub,
        "uploaded_by": k.uploaded_by,
        "created_at": record_time(k.created_at),
    })
}

/// The wraps addressed to one device, every key version.
async fn keys_for(state: &AppState, c: &Conversation, kind: &str, device_uuid: &str) -> ApiResult<Value> {
    let rows = keys::conversation_keys_for(&state.db, c.id, kind, device_uuid).await?;
    Ok(json!({
        "conversation_id": c.id,
        "ref": c.reference,
        "device_uuid": device_uuid,
        "key_version": keys::latest_key_version(&state.db, c.id).await?,
        "wraps": rows.iter().map(key_json).collect::<Vec<_>>(),
    }))
}

/// The peer directory of a thread: the user's devices and the partner's agent devices.
async fn peer_devices(state: &AppState, c: &Conversation) -> ApiResult<Value> {
    let users = devices::list_for_phone(&state.db, &c.phone).await?;
    let agents = keys::agent_devices(&state.db, c.partner_id).await?;
    Ok(json!({
        "conversation_id": c.id,
        "ref": c.reference,
        "phone": c.phone,
        "partner": c.partner_code,
        "key_version": keys::latest_key_version(&state.db, c.id).await?,
        "devices": users.iter().map(device_json).collect::<Vec<_>>(),
        "agent_devices": agents.iter().map(agent_device_json).collect::<Vec<_>>(),
    }))
}

/// One of the user's conversations, by ref (another user's is 404).
async fn user_thread(state: &AppState, user: &UserAuth, reference: &str) -> ApiResult<Conversation> {
    store::find_for_user(&state.db, &user.phone, reference).await?.ok_or_else(|| ApiError::not_found("conversation"))
}

/// One of the partner's conversations, by id (another partner's is 404).
async fn agent_thread(state: &AppState, partner_id: i64, id: &str) -> ApiResult<Conversation> {
    let id = parse_id(id, "conversation")?;
    store::find_for_partner(&state.db, partner_id, id).await?.ok_or_else(|| ApiError::not_found("conversation"))
}

async fn user_upload_keys(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<UploadKeys>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok((StatusCode::CREATED, Json(upload_keys(&state, &c, req, "user").await?)))
}

/// `GET /me/conversations/{ref}/keys[?device_uuid=]`: the wraps for the caller's device (the token's
/// device unless one of the user's other devices is named).
async fn user_keys(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let c = user_thread(&state, &user, &reference).await?;
    let device = query
        .text("device_uuid")
        .or(user.device.clone())
        .ok_or_else(|| ApiError::validation("device_uuid", "device_uuid is required when the token names no device"))?;
    let own = devices::list_for_phone(&state.db, &user.phone).await?;
    if !own.iter().any(|d| d.device_uuid == device) {
        return Err(ApiError::validation("device_uuid", "device_uuid is not one of your devices"));
    }
    Ok(Json(keys_for(&state, &c, "user", &device).await?))
}

async fn user_peer_devices(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<Value>> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok(Json(peer_devices(&state, &c).await?))
}

async fn agent_upload_keys(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UploadKeys>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok((StatusCode::CREATED, Json(upload_keys(&state, &c, req, "agent").await?)))
}

/// `GET /conversations/{id}/keys?device_uuid=`: the wraps for one of the partner's agent devices.
async fn agent_keys(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    let device =
        query.text("device_uuid").ok_or_else(|| ApiError::validation("device_uuid", "device_uuid is required"))?;
    let agents = keys::agent_devices(&state.db, partner.id).await?;
    if !agents.iter().any(|d| d.device_uuid == device) {
        return Err(ApiError::validation("device_uuid", "device_uuid is not one of your agent devices"));
    }
    Ok(Json(keys_for(&state, &c, "agent", &device).await?))
}

async fn agent_peer_devices(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok(Json(peer_devices(&state, &c).await?))
}
