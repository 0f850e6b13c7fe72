//! End-to-end encrypted threads, from both sides: content-key wraps (`…/keys`) and the peer directory
//! (`…/devices`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{agent_thread, user_thread};
use crate::clock::record_time;
use crate::conversations::Conversation;
use crate::encryption;
use crate::encryption::ConversationKey;
use crate::http::auth::{PartnerAuth, UserAuth};
use crate::http::error::{ApiError, ApiResult};
use crate::http::keys::DeviceKeyRecord;
use crate::http::state::AppState;
use crate::http::{ApiJson, ApiQuery, E404, E422, query_text};

/// One version of a conversation content key, wrapped for the peer devices.
#[derive(Deserialize, ToSchema)]
pub(super) struct UploadKeys {
    #[schema(value_type = i64, required = true, minimum = 1)]
    key_version: Option<i64>,
    /// Each to a published device of the thread's user (user) or an agent device of its partner (agent); a wrap
    /// for a device that has one at this version replaces it
    #[schema(value_type = Vec<KeyWrapRecord>, required = true, min_items = 1, max_items = 256)]
    wraps: Option<Vec<Value>>,
}

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
pub(super) struct KeysRecord {
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
pub(super) async fn upload_keys(
    state: &AppState,
    c: &Conversation,
    req: UploadKeys,
    uploaded_by: &str,
) -> ApiResult<KeysRecord> {
    let wraps = req.wraps.as_deref();
    let (key_version, rows) =
        encryption::share_key(&state.db, c, req.key_version, wraps, uploaded_by, state.now()).await?;
    Ok(KeysRecord {
        conversation_id: c.id,
        reference: c.reference.clone(),
        device_uuid: None,
        key_version: Some(key_version),
        wraps: rows.iter().map(KeyWrapRecord::from).collect(),
    })
}

/// The wraps addressed to one device, every key version.
pub(super) async fn keys_for(
    state: &AppState,
    c: &Conversation,
    kind: &str,
    device_uuid: &str,
) -> ApiResult<KeysRecord> {
    let (rows, key_version) = encryption::keys_for(&state.db, c, kind, device_uuid).await?;
    Ok(KeysRecord {
        conversation_id: c.id,
        reference: c.reference.clone(),
        device_uuid: Some(device_uuid.to_string()),
        key_version,
        wraps: rows.iter().map(KeyWrapRecord::from).collect(),
    })
}

/// The devices of both sides of a conversation.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = PeerDirectory)]
pub(super) struct PeerDirectoryRecord {
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
pub(super) async fn peer_devices(state: &AppState, c: &Conversation) -> ApiResult<PeerDirectoryRecord> {
    let (users, agents, key_version) = encryption::peers(&state.db, c).await?;
    Ok(PeerDirectoryRecord {
        conversation_id: c.id,
        reference: c.reference.clone(),
        phone: c.phone.clone(),
        partner: c.partner_code.clone(),
        key_version,
        devices: users.iter().map(DeviceKeyRecord::from).collect(),
        agent_devices: agents.iter().map(DeviceKeyRecord::from).collect(),
    })
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
pub(super) async fn share_my_conversation_key(
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
pub(super) struct DeviceQuery {
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
pub(super) async fn my_conversation_keys(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiQuery(query): ApiQuery<DeviceQuery>,
) -> ApiResult<Json<KeysRecord>> {
    let c = user_thread(&state, &user, &reference).await?;
    let device = query_text(query.device_uuid)
        .or(user.device.clone())
        .ok_or_else(|| ApiError::validation("device_uuid", "device_uuid is required when the token names no device"))?;
    if !encryption::is_own_device(&state.db, &user.phone, &device).await? {
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
pub(super) async fn my_conversation_devices(
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
pub(super) async fn share_conversation_key(
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
pub(super) async fn conversation_keys(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<DeviceQuery>,
) -> ApiResult<Json<KeysRecord>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    let device =
        query_text(query.device_uuid).ok_or_else(|| ApiError::validation("device_uuid", "device_uuid is required"))?;
    if !encryption::is_agent_device(&state.db, partner.id, &device).await? {
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
pub(super) async fn conversation_devices(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<PeerDirectoryRecord>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok(Json(peer_devices(&state, &c).await?))
}
