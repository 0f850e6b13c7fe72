//! The E2E key directory: users publish their devices' identity keys (`POST /me/devices/keys`), partners
//! publish their agent devices' (`POST /agent/devices/keys`) and read a user's directory
//! (`GET /keys/{phone}`: the user's devices and the caller's own agent devices, never another partner's).
//! Only public keys pass through here.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiJson, required_phone};
use crate::auth::{PartnerAuth, UserAuth};
use crate::e2e;
use crate::error::{ApiError, ApiResult};
use crate::secrets::random_alnum;
use crate::state::AppState;
use crate::store::accounts;
use crate::store::devices::{self, Device};
use crate::store::keys::{self, AgentDevice};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/devices/keys", post(publish_user_key))
        .route("/agent/devices/keys", post(publish_agent_key))
        .route("/keys/{phone}", get(directory))
}

/// A user device in the key directory.
pub fn device_json(d: &Device) -> Value {
    json!({
        "device_uuid": d.device_uuid,
        "identity_key_pub": d.identity_key_pub,
        "platform": d.platform,
        "has_keys": d.identity_key_pub.is_some(),
        "key_version": d.key_version,
    })
}

/// A partner agent device in the key directory.
pub fn agent_device_json(d: &AgentDevice) -> Value {
    json!({
        "device_uuid": d.device_uuid,
        "identity_key_pub": d.identity_key_pub,
        "platform": d.platform,
        "has_keys": true,
        "key_version": d.key_version,
    })
}

#[derive(Deserialize)]
struct PublishKey {
    identity_key_pub: Option<String>,
    device_uuid: Option<String>,
    platform: Option<String>,
}

/// The optional `platform` label of a device.
fn platform(raw: Option<&str>) -> ApiResult<Option<String>> {
    match raw.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) if p.len() > 32 => Err(ApiError::validation("platform", "platform is at most 32 characters")),
        p => Ok(p.map(str::to_string)),
    }
}

/// `POST /me/devices/keys`: the device is the body's `device_uuid`, else the token's, else a new one.
async fn publish_user_key(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<PublishKey>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let key = e2e::identity_key(req.identity_key_pub.as_deref())?;
    let device_uuid = match req.device_uuid.as_deref().or(user.device.as_deref()) {
        Some(uuid) => e2e::device_uuid(Some(uuid), "device_uuid")?,
        None => format!("dev_{}", random_alnum(24)),
    };
    let platform = platform(req.platform.as_deref())?;
    let device = devices::publish_key(&state.db, &user.phone, &device_uuid, platform.as_deref(), &key, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict("device_uuid belongs to another user's device"))?;
    Ok((StatusCode::CREATED, Json(device_json(&device))))
}

/// `POST /agent/devices/keys`: one of the partner's agent devices.
async fn publish_agent_key(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<PublishKey>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let device_uuid = e2e::device_uuid(req.device_uuid.as_deref(), "device_uuid")?;
    let key = e2e::identity_key(req.identity_key_pub.as_deref())?;
    let platform = platform(req.platform.as_deref())?;
    let device =
        keys::publish_agent_key(&state.db, partner.id, &device_uuid, &key, platform.as_deref(), state.now()).await?;
    Ok((StatusCode::CREATED, Json(agent_device_json(&device))))
}

/// `GET /keys/{phone}`: the device key record, for a phone whose account is linked to the caller (404
/// otherwise, so the directory never tells a partner whether an arbitrary phone uses the app). A linked
/// phone with no devices has empty lists.
async fn directory(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(phone): Path<String>,
) -> ApiResult<Json<Value>> {
    let phone = required_phone(Some(&phone))?;
    if accounts::find_linked(&state.db, partner.id, phone).await?.is_none() {
        return Err(ApiError::not_found("account"));
    }
    let user_devices = devices::list_for_phone(&state.db, phone).await?;
    let agents = keys::agent_devices(&state.db, partner.id).await?;
    Ok(Json(json!({
        "phone": phone,
        "devices": user_devices.iter().map(device_json).collect::<Vec<_>>(),
        "agent_devices": agents.iter().map(agent_device_json).collect::<Vec<_>>(),
    })))
}
