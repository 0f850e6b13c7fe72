//! Web Push, the app's side: the host's public key, a device subscribing (the browser's `PushSubscription`)
//! and unsubscribing, and the acknowledgement a service worker sends when a push arrives (the message is
//! then `delivered`). One subscription per device; the endpoint must be HTTPS at a public address (the
//! webhook rule; `http://localhost` in dev mode). What a push carries: `delivery::push`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiQuery, E404, E422};
use crate::clock::record_time;
use crate::delivery::push;
use crate::http::auth::UserAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::MessageState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(push_settings))
        .routes(routes!(subscribe, unsubscribe))
        .routes(routes!(acknowledge))
}

/// Web Push for this device.
#[derive(Serialize, ToSchema)]
#[schema(as = PushSettings)]
struct PushSettingsRecord {
    /// The host's VAPID public key: the browser's `applicationServerKey` (base64url of a P-256 point).
    vapid_public_key: String,
    /// Whether this device has a subscription.
    subscribed: bool,
}

/// The device reading, when its token names none.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct DeviceParam {
    /// The device, when the token names none (a token that names one uses its own).
    #[param(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    device_uuid: Option<String>,
}

/// The device a request reads or unsubscribes: its token's, else the one it names (a token that names no
/// device, `hubbub user token`, acts for its phone: it may read or remove the subscription of one of the
/// phone's devices); `None` when there is neither.
fn device_of(user: &UserAuth, named: Option<&str>) -> Result<Option<String>, ApiError> {
    match (&user.device, named.map(str::trim).filter(|d| !d.is_empty())) {
        (Some(device), _) => Ok(Some(device.clone())),
        (None, Some(named)) => Ok(Some(crate::encryption::device_uuid(Some(named), "device_uuid")?)),
        (None, None) => Ok(None),
    }
}

/// The device a subscription is for: the token's. A token that names no device has none to subscribe, and
/// may not name one: otherwise one token could hold a subscription for any number of made-up devices, each
/// pushed on every message.
fn subscribing_device(user: &UserAuth) -> Result<String, ApiError> {
    user.device.clone().ok_or_else(|| {
        ApiError::validation(
            "device_uuid",
            "this token names no device, so it may not subscribe one: sign in on the device (POST /auth/otp/verify)",
        )
    })
}

/// The host's public key, and whether this device is subscribed.
#[utoipa::path(
    get,
    path = "/me/push",
    tag = "users",
    security(("userJwt" = [])),
    params(DeviceParam),
    responses((status = 200, description = "Web Push for this device", body = PushSettingsRecord), (status = 422, response = E422))
)]
async fn push_settings(
    State(state): State<AppState>,
    user: UserAuth,
    ApiQuery(query): ApiQuery<DeviceParam>,
) -> ApiResult<Json<PushSettingsRecord>> {
    let subscribed = match device_of(&user, query.device_uuid.as_deref())? {
        Some(device) => push::is_subscribed(&state.db, &user.phone, &device).await?,
        None => false,
    };
    Ok(Json(PushSettingsRecord { vapid_public_key: state.delivery.push.public_key(), subscribed }))
}

/// The browser's `PushSubscription` (its `toJSON()`).
#[derive(Deserialize, ToSchema)]
struct Subscribe {
    /// The push service's URL for this device: HTTPS at a public address.
    #[schema(schema_with = crate::http::public_url_schema, required = true)]
    endpoint: Option<String>,
    /// When the push service ends it (milliseconds since the epoch), if it says; not used.
    #[serde(default, rename = "expirationTime")]
    #[allow(dead_code)]
    expiration_time: Option<f64>,
    #[schema(required = true)]
    keys: Option<SubscriptionKeys>,
    /// Ignored: the device is the token's (a token that names none cannot subscribe, 422).
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    #[allow(dead_code)]
    device_uuid: Option<String>,
}

#[derive(Deserialize, ToSchema)]
struct SubscriptionKeys {
    /// The device's P-256 public key (base64url, 65 bytes).
    #[schema(required = true)]
    p256dh: Option<String>,
    /// The device's authentication secret (base64url, 16 bytes).
    #[schema(required = true)]
    auth: Option<String>,
}

/// A device's subscription.
#[derive(Serialize, ToSchema)]
#[schema(as = PushSubscription)]
struct SubscriptionRecord {
    device_uuid: String,
    endpoint: String,
    created_at: String,
}

/// Subscribe this device to Web Push (replacing its earlier subscription).
///
/// The device is the token's: a token that names none (`hubbub user token`) cannot subscribe, nor name a
/// device to (422). A person keeps at most 10 subscriptions: an 11th replaces their oldest.
#[utoipa::path(
    post,
    path = "/me/push/subscriptions",
    tag = "users",
    security(("userJwt" = [])),
    request_body = Subscribe,
    responses(
        (status = 201, description = "Subscribed", body = SubscriptionRecord),
        (status = 422, response = E422),
    )
)]
async fn subscribe(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<Subscribe>,
) -> ApiResult<(StatusCode, Json<SubscriptionRecord>)> {
    let device = subscribing_device(&user)?;
    let keys = req.keys.as_ref();
    let new = push::NewSubscription {
        endpoint: req.endpoint.as_deref(),
        p256dh: keys.and_then(|k| k.p256dh.as_deref()),
        auth: keys.and_then(|k| k.auth.as_deref()),
        keys: keys.is_some(),
    };
    let s = push::subscribe(&state.db, state.config.dev, (&user.phone, &device), new, state.now()).await?;
    let record =
        SubscriptionRecord { device_uuid: s.device_uuid, endpoint: s.endpoint, created_at: record_time(s.created_at) };
    Ok((StatusCode::CREATED, Json(record)))
}

/// Unsubscribe this device (nothing to do when it is not subscribed).
#[utoipa::path(
    delete,
    path = "/me/push/subscriptions",
    tag = "users",
    security(("userJwt" = [])),
    params(DeviceParam),
    responses((status = 204, description = "Not subscribed (any more)"), (status = 422, response = E422))
)]
async fn unsubscribe(
    State(state): State<AppState>,
    user: UserAuth,
    ApiQuery(query): ApiQuery<DeviceParam>,
) -> ApiResult<StatusCode> {
    if let Some(device) = device_of(&user, query.device_uuid.as_deref())? {
        push::unsubscribe(&state.db, &user.phone, &device).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// A push arrived: the service worker calls the `ack` link the push carried; the message becomes
/// `delivered` (a device has it). The link is the credential: one the host did not make is 404.
#[utoipa::path(
    post,
    path = "/push/ack/{token}",
    tag = "users",
    responses((status = 204, description = "Acknowledged"), (status = 404, response = E404))
)]
async fn acknowledge(State(state): State<AppState>, Path(token): Path<String>) -> ApiResult<StatusCode> {
    let message_id = state.delivery.push.acknowledged(&token).ok_or_else(|| ApiError::not_found("push"))?;
    crate::messages::advance_in_hub(&state.db, message_id, MessageState::Delivered, state.now()).await?;
    Ok(StatusCode::NO_CONTENT)
}
