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

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::keys::DeviceKeyRecord;
use super::messages::{MessageRecord, SendMessage, ref_taken, validate_content};
use super::{ApiJson, ApiQuery, E404, E409, E422, List, PageParams, parse_id, query_text, required_phone};
use crate::auth::{PartnerAuth, UserAuth};
use crate::clock::record_time;
use crate::conversations::ConversationState;
use crate::e2e;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::messages::{ContentType, Direction, Encryption};
use crate::secrets::random_alnum;
use crate::state::AppState;
use crate::store::conversations::{self as store, Conversation};
use crate::store::keys::{self, ConversationKey};
use crate::store::messages::{self, Created};
use crate::store::{accounts, devices, partners};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_my_conversations, open_conversation))
        .routes(routes!(get_my_conversation))
        .routes(routes!(write_in_my_conversation))
        .routes(routes!(share_my_conversation_key, my_conversation_keys))
        .routes(routes!(my_conversation_devices))
        .routes(routes!(list_conversations))
        .routes(routes!(get_conversation, close_conversation))
        .routes(routes!(reply_in_conversation))
        .routes(routes!(share_conversation_key, conversation_keys))
        .routes(routes!(conversation_devices))
        .routes(routes!(agent_send))
}

/// Messages embedded in a conversation record (the latest ones, oldest first).
const EMBEDDED_MESSAGES: i64 = 200;

/// A support conversation.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Conversation)]
pub struct ConversationRecord {
    pub conversation_id: i64,
    #[serde(rename = "ref")]
    pub reference: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    pub phone: String,
    /// The partner's code.
    pub partner: String,
    pub subject: Option<String>,
    pub state: ConversationState,
    pub last_message_at: String,
    pub created_at: String,
}

impl From<&Conversation> for ConversationRecord {
    fn from(c: &Conversation) -> Self {
        ConversationRecord {
            conversation_id: c.id,
            reference: c.reference.clone(),
            phone: c.phone.clone(),
            partner: c.partner_code.clone(),
            subject: c.subject.clone(),
            state: c.state,
            last_message_at: record_time(c.last_message_at),
            created_at: record_time(c.created_at),
        }
    }
}

/// A conversation with its messages.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationThread)]
pub struct ThreadRecord {
    #[serde(flatten)]
    pub conversation: ConversationRecord,
    /// The latest 200, oldest first
    pub messages: Vec<MessageRecord>,
}

async fn with_messages(state: &AppState, c: &Conversation) -> ApiResult<ThreadRecord> {
    let rows = messages::list_conversation(&state.db, c.id, EMBEDDED_MESSAGES).await?;
    Ok(ThreadRecord { conversation: c.into(), messages: rows.iter().map(MessageRecord::from).collect() })
}

// ---- the user's side ----

/// My support threads (never bot sessions), newest first.
#[utoipa::path(
    get,
    path = "/me/conversations",
    tag = "users",
    security(("userJwt" = [])),
    params(PageParams),
    responses(
        (status = 200, description = "A page of conversations", body = List<ConversationRecord>),
        (status = 422, response = E422),
    )
)]
async fn list_my_conversations(
    State(state): State<AppState>,
    user: UserAuth,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<ConversationRecord>>> {
    let page = page.page()?;
    let rows = store::list_for_phone(&state.db, &user.phone, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |c| c.id, |c| ConversationRecord::from(c))))
}

/// Open support with a partner: the first message's content fields, as for any message.
#[derive(Deserialize, ToSchema)]
struct OpenConversation {
    /// The code of a partner the user's account is linked to.
    #[schema(value_type = String, required = true)]
    partner: Option<String>,
    #[schema(max_length = 200)]
    subject: Option<String>,
    #[serde(flatten)]
    message: SendMessage,
}

/// Open support with a linked partner, with the first message (send-message content fields).
#[utoipa::path(
    post,
    path = "/me/conversations",
    tag = "conversations",
    security(("userJwt" = [])),
    request_body = OpenConversation,
    responses(
        (status = 201, description = "The conversation (open) with its first message", body = ThreadRecord),
        (status = 404, response = E404),
    )
)]
async fn open_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<OpenConversation>,
) -> ApiResult<(StatusCode, Json<ThreadRecord>)> {
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
    let record = ThreadRecord { conversation: (&conversation).into(), messages: vec![MessageRecord::from(&message)] };
    Ok((StatusCode::CREATED, Json(record)))
}

/// `system` messages speak for the service or the partner: a user cannot write one.
fn refuse_system_from_users(req: &SendMessage) -> ApiResult<()> {
    if req.content_type == Some(ContentType::System) {
        return Err(ApiError::validation("content_type", "users cannot send system messages"));
    }
    Ok(())
}

/// One of my conversations with its messages.
#[utoipa::path(
    get,
    path = "/me/conversations/{ref}",
    tag = "conversations",
    security(("userJwt" = [])),
    responses((status = 200, description = "The conversation", body = ThreadRecord), (status = 404, response = E404))
)]
async fn get_my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<ThreadRecord>> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok(Json(with_messages(&state, &c).await?))
}

/// Write in my conversation (reopens it: open).
#[utoipa::path(
    post,
    path = "/me/conversations/{ref}/messages",
    tag = "conversations",
    security(("userJwt" = [])),
    request_body = SendMessage,
    responses(
        (status = 201, description = "The message (direction in)", body = MessageRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn write_in_my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<MessageRecord>)> {
    let c = user_thread(&state, &user, &reference).await?;
    refuse_system_from_users(&req)?;
    let content = crate::conversations::content(&state.db, state.config.dev, &c, &req).await?;
    let message = content.into_message(c.partner_id, &user.phone, Direction::In, Some(c.id));
    // A user message puts the thread back in the agents' queue, reopening a closed one.
    let (_, m) =
        store::append(&state.db, c.id, message, ConversationState::Open, state.now(), events::conversation_message)
            .await
            .map_err(ref_taken)?;
    Ok((StatusCode::CREATED, Json(MessageRecord::from(&m))))
}

// ---- the partner's side ----

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ConversationFilter {
    #[param(schema_with = state_filter_schema)]
    state: Option<String>,
    /// Search in subject, contact and message bodies.
    q: Option<String>,
}

/// The states a conversation list can be filtered by.
fn state_filter_schema() -> utoipa::openapi::Object {
    let names: Vec<&'static str> = ConversationState::names();
    super::openapi::filter_of(&names, "Only conversations in this state")
}

/// The partner's conversations, newest first.
#[utoipa::path(
    get,
    path = "/conversations",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(ConversationFilter, PageParams),
    responses(
        (status = 200, description = "A page of conversations", body = List<ConversationRecord>),
        (status = 422, response = E422),
    )
)]
async fn list_conversations(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(filter): ApiQuery<ConversationFilter>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<ConversationRecord>>> {
    let page = page.page()?;
    let wanted = match query_text(filter.state) {
        None => None,
        Some(text) => Some(
            ConversationState::parse(&text)
                .ok_or_else(|| ApiError::validation("state", "state must be open, pending or closed"))?,
        ),
    };
    let q = query_text(filter.q);
    let rows = store::list_for_partner(&state.db, partner.id, wanted, q.as_deref(), page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |c| c.id, |c| ConversationRecord::from(c))))
}

/// A conversation with its messages.
#[utoipa::path(
    get,
    path = "/conversations/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The conversation", body = ThreadRecord), (status = 404, response = E404))
)]
async fn get_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<ThreadRecord>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok(Json(with_messages(&state, &c).await?))
}

/// The one change a partner makes to a conversation: closing it.
#[derive(Deserialize, ToSchema)]
struct UpdateConversation {
    #[schema(schema_with = closed_only, required = true)]
    state: Option<String>,
}

/// `closed`, the only state a partner sets.
fn closed_only() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some([ConversationState::Closed.as_str()]))
        .build()
}

/// Close a conversation (a user message reopens it).
#[utoipa::path(
    patch,
    path = "/conversations/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = UpdateConversation,
    responses(
        (status = 200, description = "The conversation", body = ConversationRecord),
        (status = 404, response = E404),
    )
)]
async fn close_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateConversation>,
) -> ApiResult<Json<ConversationRecord>> {
    // Another partner's conversation is 404 whatever the body says.
    let c = agent_thread(&state, partner.id, &id).await?;
    if req.state.as_deref() != Some(ConversationState::Closed.as_str()) {
        return Err(ApiError::validation("state", "state can only be set to closed (a user message reopens)"));
    }
    let c = store::set_state(&state.db, partner.id, c.id, ConversationState::Closed)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok(Json(ConversationRecord::from(&c)))
}

/// An agent's reply in a conversation: the thread now waits for the user.
async fn reply(state: &AppState, partner_id: i64, c: &Conversation, req: &SendMessage) -> ApiResult<MessageRecord> {
    let content = crate::conversations::content(&state.db, state.config.dev, c, req).await?;
    let message = content.into_message(partner_id, &c.phone, Direction::Out, Some(c.id));
    let (_, m) =
        store::append(&state.db, c.id, message, ConversationState::Pending, state.now(), events::conversation_message)
            .await
            .map_err(ref_taken)?;
    state.delivery.wake.notify_one();
    Ok(MessageRecord::from(&m))
}

/// An agent's reply (the conversation becomes pending); delivered like any outgoing message.
#[utoipa::path(
    post,
    path = "/conversations/{id}/messages",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = SendMessage,
    responses(
        (status = 201, description = "The message (direction out)", body = MessageRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn reply_in_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<MessageRecord>)> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok((StatusCode::CREATED, Json(reply(&state, partner.id, &c, &req).await?)))
}

/// Agent send: into the latest open or pending conversation of the phone, else a hub message (conversation_id null).
///
/// Never a new conversation: only users open them. A sealed E2E message (`encryption: "e2e"` with key wraps)
/// is always a hub message, its `aad` names the hub; an encrypted conversation message needs a thread.
#[utoipa::path(
    post,
    path = "/agent/messages",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = SendMessage,
    responses((status = 201, description = "The message", body = MessageRecord), (status = 409, response = E409))
)]
async fn agent_send(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<MessageRecord>)> {
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
            Ok((StatusCode::CREATED, Json(MessageRecord::from(&m))))
        }
        Created::KeyReused => Err(ApiError::idempotency_conflict()),
    }
}

// ---- end-to-end encryption: content-key wraps and the peer directory, from both sides ----

/// One version of a conversation content key, wrapped for the peer devices.
#[derive(Deserialize, ToSchema)]
struct UploadKeys {
    #[schema(value_type = i64, required = true, minimum = 1)]
    key_version: Option<i64>,
    /// Each to a published device of the thread's user (user) or an agent device of its partner (agent); a wrap
    /// for a device that has one at this version replaces it
    #[schema(value_type = Vec<KeyWrapRecord>, required = true, min_items = 1, max_items = 256)]
    wraps: Option<Vec<Value>>,
}

/// Wraps in one upload, at most.
const MAX_WRAPS: usize = 256;

/// A content key wrapped for one device (the last three fields are the server's).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationKeyWrap)]
pub struct KeyWrapRecord {
    #[schema(read_only)]
    key_version: i64,
    #[schema(schema_with = device_kind_schema)]
    device_kind: String,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    device_uuid: String,
    /// base64url
    wrap: String,
    /// base64url
    wrap_nonce: String,
    /// base64url
    sender_eph_pub: String,
    #[schema(schema_with = uploaded_by_schema)]
    uploaded_by: String,
    #[schema(read_only)]
    created_at: String,
}

/// `user` or `agent`: the two kinds of device in a conversation.
fn device_kind_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["user", "agent"]))
        .build()
}

/// Which side uploaded a wrap (the server's).
fn uploaded_by_schema() -> utoipa::openapi::Object {
    let mut schema = device_kind_schema();
    schema.read_only = Some(true);
    schema
}

impl From<&ConversationKey> for KeyWrapRecord {
    fn from(k: &ConversationKey) -> Self {
        KeyWrapRecord {
            key_version: k.key_version,
            device_kind: k.device_kind.clone(),
            device_uuid: k.device_uuid.clone(),
            wrap: k.wrap.clone(),
            wrap_nonce: k.wrap_nonce.clone(),
            sender_eph_pub: k.sender_eph_pub.clone(),
            uploaded_by: k.uploaded_by.clone(),
            created_at: record_time(k.created_at),
        }
    }
}

/// Content-key wraps of a conversation: those just uploaded, or those addressed to one device.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationKeys)]
struct KeysRecord {
    conversation_id: i64,
    #[serde(rename = "ref")]
    reference: String,
    /// The device the wraps are addressed to (when reading them).
    #[serde(skip_serializing_if = "Option::is_none")]
    device_uuid: Option<String>,
    /// The version uploaded; when reading, the newest version shared in the thread (null before any).
    key_version: Option<i64>,
    wraps: Vec<KeyWrapRecord>,
}

/// Stores the wraps of one content key version; each names a device of the thread's user (`user`) or an
/// agent device of its partner (`agent`).
async fn upload_keys(state: &AppState, c: &Conversation, req: UploadKeys, uploaded_by: &str) -> ApiResult<KeysRecord> {
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
    Ok(KeysRecord {
        conversation_id: c.id,
        reference: c.reference.clone(),
        device_uuid: None,
        key_version: Some(key_version),
        wraps: rows.iter().map(KeyWrapRecord::from).collect(),
    })
}

/// The wraps addressed to one device, every key version.
async fn keys_for(state: &AppState, c: &Conversation, kind: &str, device_uuid: &str) -> ApiResult<KeysRecord> {
    let rows = keys::conversation_keys_for(&state.db, c.id, kind, device_uuid).await?;
    Ok(KeysRecord {
        conversation_id: c.id,
        reference: c.reference.clone(),
        device_uuid: Some(device_uuid.to_string()),
        key_version: keys::latest_key_version(&state.db, c.id).await?,
        wraps: rows.iter().map(KeyWrapRecord::from).collect(),
    })
}

/// The devices of both sides of a conversation.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = PeerDirectory)]
struct PeerDirectoryRecord {
    conversation_id: i64,
    #[serde(rename = "ref")]
    reference: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    partner: String,
    /// The newest content key version shared in the thread (null before any).
    key_version: Option<i64>,
    /// The user's devices.
    devices: Vec<DeviceKeyRecord>,
    /// The partner's agent devices.
    agent_devices: Vec<DeviceKeyRecord>,
}

/// The peer directory of a thread: the user's devices and the partner's agent devices.
async fn peer_devices(state: &AppState, c: &Conversation) -> ApiResult<PeerDirectoryRecord> {
    let users = devices::list_for_phone(&state.db, &c.phone).await?;
    let agents = keys::agent_devices(&state.db, c.partner_id).await?;
    Ok(PeerDirectoryRecord {
        conversation_id: c.id,
        reference: c.reference.clone(),
        phone: c.phone.clone(),
        partner: c.partner_code.clone(),
        key_version: keys::latest_key_version(&state.db, c.id).await?,
        devices: users.iter().map(DeviceKeyRecord::from).collect(),
        agent_devices: agents.iter().map(DeviceKeyRecord::from).collect(),
    })
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

/// Share a conversation content key: its wraps to the peer devices.
#[utoipa::path(
    post,
    path = "/me/conversations/{ref}/keys",
    tag = "e2e",
    security(("userJwt" = [])),
    request_body = UploadKeys,
    responses((status = 201, description = "The stored wraps", body = KeysRecord), (status = 404, response = E404))
)]
async fn share_my_conversation_key(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<UploadKeys>,
) -> ApiResult<(StatusCode, Json<KeysRecord>)> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok((StatusCode::CREATED, Json(upload_keys(&state, &c, req, "user").await?)))
}

/// The device whose wraps to read.
#[derive(Deserialize)]
struct DeviceQuery {
    device_uuid: Option<String>,
}

/// The content-key wraps addressed to my device.
///
/// The token's device unless one of the user's other devices is named.
#[utoipa::path(
    get,
    path = "/me/conversations/{ref}/keys",
    tag = "e2e",
    security(("userJwt" = [])),
    params(("device_uuid" = Option<String>, Query, description = "One of my devices; defaults to the token's device")),
    responses(
        (status = 200, description = "Wraps, every key version", body = KeysRecord),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
async fn my_conversation_keys(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiQuery(query): ApiQuery<DeviceQuery>,
) -> ApiResult<Json<KeysRecord>> {
    let c = user_thread(&state, &user, &reference).await?;
    let device = query_text(query.device_uuid)
        .or(user.device.clone())
        .ok_or_else(|| ApiError::validation("device_uuid", "device_uuid is required when the token names no device"))?;
    let own = devices::list_for_phone(&state.db, &user.phone).await?;
    if !own.iter().any(|d| d.device_uuid == device) {
        return Err(ApiError::validation("device_uuid", "device_uuid is not one of your devices"));
    }
    Ok(Json(keys_for(&state, &c, "user", &device).await?))
}

/// The peer device directory of my conversation.
#[utoipa::path(
    get,
    path = "/me/conversations/{ref}/devices",
    tag = "e2e",
    security(("userJwt" = [])),
    responses(
        (status = 200, description = "User and agent devices", body = PeerDirectoryRecord),
        (status = 404, response = E404),
    )
)]
async fn my_conversation_devices(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<PeerDirectoryRecord>> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok(Json(peer_devices(&state, &c).await?))
}

/// Share a conversation content key (agent side).
#[utoipa::path(
    post,
    path = "/conversations/{id}/keys",
    tag = "e2e",
    security(("partnerKey" = [])),
    request_body = UploadKeys,
    responses((status = 201, description = "The stored wraps", body = KeysRecord), (status = 404, response = E404))
)]
async fn share_conversation_key(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UploadKeys>,
) -> ApiResult<(StatusCode, Json<KeysRecord>)> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok((StatusCode::CREATED, Json(upload_keys(&state, &c, req, "agent").await?)))
}

/// The content-key wraps addressed to one of my agent devices.
#[utoipa::path(
    get,
    path = "/conversations/{id}/keys",
    tag = "e2e",
    security(("partnerKey" = [])),
    params(("device_uuid" = String, Query, description = "Required: one of the partner's agent devices")),
    responses(
        (status = 200, description = "Wraps, every key version", body = KeysRecord),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
async fn conversation_keys(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<DeviceQuery>,
) -> ApiResult<Json<KeysRecord>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    let device =
        query_text(query.device_uuid).ok_or_else(|| ApiError::validation("device_uuid", "device_uuid is required"))?;
    let agents = keys::agent_devices(&state.db, partner.id).await?;
    if !agents.iter().any(|d| d.device_uuid == device) {
        return Err(ApiError::validation("device_uuid", "device_uuid is not one of your agent devices"));
    }
    Ok(Json(keys_for(&state, &c, "agent", &device).await?))
}

/// The peer device directory of a conversation.
#[utoipa::path(
    get,
    path = "/conversations/{id}/devices",
    tag = "e2e",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "User and agent devices", body = PeerDirectoryRecord),
        (status = 404, response = E404),
    )
)]
async fn conversation_devices(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<PeerDirectoryRecord>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok(Json(peer_devices(&state, &c).await?))
}
