//! The E2E key directory: users publish their devices' identity keys (`POST /me/devices/keys`), partners
//! publish their agent devices' (`POST /agent/devices/keys`) and read a user's directory
//! (`GET /keys/{phone}`: the user's devices and the caller's own agent devices, never another partner's).
//! Only public keys pass through here.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E422};
use crate::encryption;
use crate::encryption::{AgentDevice, Device};
use crate::http::auth::{PartnerActor, PartnerAuth, UserAuth};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::validate::required_phone;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(publish_user_key))
        .routes(routes!(publish_agent_key))
        .routes(routes!(key_directory))
}

/// A device in the key directory: one of a user's devices, or one of a partner's agent devices.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DeviceKey)]
pub struct DeviceKeyRecord {
    pub device_uuid: String,
    /// base64url X25519 public key
    pub identity_key_pub: Option<String>,
    pub platform: Option<String>,
    pub has_keys: bool,
    /// Grows each time the device publishes a different key
    pub key_version: i64,
}

impl From<&Device> for DeviceKeyRecord {
    fn from(d: &Device) -> Self {
        DeviceKeyRecord {
            device_uuid: d.device_uuid.clone(),
            identity_key_pub: d.identity_key_pub.clone(),
            platform: d.platform.clone(),
            has_keys: d.identity_key_pub.is_some(),
            key_version: d.key_version,
        }
    }
}

impl From<&AgentDevice> for DeviceKeyRecord {
    fn from(d: &AgentDevice) -> Self {
        DeviceKeyRecord {
            device_uuid: d.device_uuid.clone(),
            identity_key_pub: Some(d.identity_key_pub.clone()),
            platform: d.platform.clone(),
            has_keys: true,
            key_version: d.key_version,
        }
    }
}

/// A device's identity key to publish.
#[derive(Deserialize, ToSchema)]
struct PublishKey {
    /// base64url (padding optional) of a 32-byte X25519 public key
    #[schema(value_type = String, required = true, pattern = "^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]=?$")]
    identity_key_pub: Option<String>,
    /// 1-128 of A-Z a-z 0-9 . _ : -. Defaults to the token's device, else a new one.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    device_uuid: Option<String>,
    /// A label such as `ios` or `web`: at most 32 characters.
    #[schema(max_length = 32)]
    platform: Option<String>,
}

/// An agent device's identity key to publish: as [`PublishKey`], with the device named.
#[derive(Deserialize, ToSchema)]
struct PublishAgentKey {
    /// base64url (padding optional) of a 32-byte X25519 public key
    #[schema(value_type = String, required = true, pattern = "^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]=?$")]
    identity_key_pub: Option<String>,
    /// 1-128 of A-Z a-z 0-9 . _ : -: the agent's browser or app names itself.
    #[schema(value_type = String, required = true, pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    device_uuid: Option<String>,
    /// A label such as `ios` or `web`: at most 32 characters.
    #[schema(max_length = 32)]
    platform: Option<String>,
}

/// Publish my device's identity key (a different key replaces it and bumps key_version).
///
/// The device is the body's `device_uuid`, else the token's, else a new one.
#[utoipa::path(
    post,
    path = "/me/devices/keys",
    tag = "e2e",
    security(("userJwt" = [])),
    request_body = PublishKey,
    responses((status = 201, description = "The device", body = DeviceKeyRecord), (status = 409, response = E409))
)]
async fn publish_user_key(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<PublishKey>,
) -> ApiResult<(StatusCode, Json<DeviceKeyRecord>)> {
    let (key, platform) = (req.identity_key_pub.as_deref(), req.platform.as_deref());
    let device = req.device_uuid.as_deref().or(user.device.as_deref());
    let device = encryption::publish_user_key(&state.db, &user.phone, key, device, platform, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict("device_uuid belongs to another user's device"))?;
    Ok((StatusCode::CREATED, Json(DeviceKeyRecord::from(&device))))
}

/// Publish an agent device's identity key.
#[utoipa::path(
    post,
    path = "/agent/devices/keys",
    tag = "e2e",
    security(("partnerKey" = [])),
    request_body = PublishAgentKey,
    responses((status = 201, description = "The agent device", body = DeviceKeyRecord))
)]
async fn publish_agent_key(
    State(state): State<AppState>,
    PartnerActor { partner, member, .. }: PartnerActor,
    ApiJson(req): ApiJson<PublishAgentKey>,
) -> ApiResult<(StatusCode, Json<DeviceKeyRecord>)> {
    let (key, device, platform) =
        (req.identity_key_pub.as_deref(), req.device_uuid.as_deref(), req.platform.as_deref());
    let by = (partner.id, member.map(|m| m.id));
    let device = encryption::publish_agent_key(&state.db, by, key, device, platform, state.now()).await?;
    Ok((StatusCode::CREATED, Json(DeviceKeyRecord::from(&device))))
}

/// A user's device keys, as a partner linked to them sees them.
#[derive(Debug, Serialize, ToSchema)]
struct KeyDirectory {
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    devices: Vec<DeviceKeyRecord>,
    /// The caller's own agent devices only
    agent_devices: Vec<DeviceKeyRecord>,
}

/// The device key record of a user whose account is linked to you: their devices and your agent devices.
///
/// 404 for a phone not linked to you, so the directory never tells whether a phone uses the app. A linked
/// phone with no devices has empty lists.
#[utoipa::path(
    get,
    path = "/keys/{phone}",
    tag = "e2e",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The key directory", body = KeyDirectory),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
async fn key_directory(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(phone): Path<String>,
) -> ApiResult<Json<KeyDirectory>> {
    let phone = required_phone(Some(&phone))?;
    let (user_devices, agents) =
        encryption::directory(&state.db, partner.id, phone).await?.ok_or_else(|| ApiError::not_found("account"))?;
    Ok(Json(KeyDirectory {
        phone: phone.to_string(),
        devices: user_devices.iter().map(DeviceKeyRecord::from).collect(),
        agent_devices: agents.iter().map(DeviceKeyRecord::from).collect(),
    }))
}
