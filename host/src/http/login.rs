//! `/auth/otp`: end-user login by a one-time SMS code. A successful login claims the user's account
//! (each linked partner receives `account.claimed`), records the device and returns a user JWT.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::abuse::CodeRouteLimit;
use super::accounts::{AccountRecord, user_account};
use super::{ApiJson, E401, E409, E429, E502};
use crate::accounts;
use crate::clock::record_time;
use crate::http::auth::issue_user_token;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::otp;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(start)).routes(routes!(verify))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = OtpStart)]
struct Start {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
}

/// A code was sent.
#[derive(Serialize, ToSchema)]
pub(super) struct CodeSent {
    pub(super) phone: String,
    pub(super) expires_at: String,
}

fn phone_of(phone: Option<&str>) -> ApiResult<String> {
    Ok(crate::validate::required_phone(phone)?.to_string())
}

/// Send a 6-digit login code by SMS.
///
/// At most 5 per phone per client address per 15 minutes, and 20 per phone from all addresses; the code
/// routes together are also limited per client address and for the whole host: 429 with Retry-After beyond.
#[utoipa::path(
    post,
    path = "/auth/otp/start",
    tag = "users",
    request_body = Start,
    responses((status = 202, description = "Code sent", body = CodeSent), (status = 429, response = E429), (status = 502, response = E502))
)]
async fn start(
    CodeRouteLimit(client): CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<Start>,
) -> ApiResult<(StatusCode, Json<CodeSent>)> {
    let phone = phone_of(req.phone.as_deref())?;
    let expires_at = otp::start(&state.codes(), &phone, "login", None, client, |code| {
        format!("Your Hubbub code is {code}. It expires in 10 minutes. Never share it.")
    })
    .await?;
    Ok((StatusCode::ACCEPTED, Json(CodeSent { phone, expires_at: record_time(expires_at) })))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = OtpVerify)]
struct Verify {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    #[schema(value_type = String, required = true, pattern = "\\S")]
    code: Option<String>,
    /// This device's id (1-128 of A-Z a-z 0-9 . _ : -); a new one when absent.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    device_uuid: Option<String>,
    /// A label such as `ios` or `web`: at most 32 characters.
    #[schema(max_length = 32)]
    platform: Option<String>,
}

/// A user session.
#[derive(Serialize, ToSchema)]
struct LoggedIn {
    /// The user JWT (`Authorization: Bearer …`).
    token: String,
    expires_at: String,
    device_uuid: String,
    account: AccountRecord,
}

/// Verify the code: claims the account, records the device, returns a user JWT.
///
/// Limited per client address and host (429).
#[utoipa::path(
    post,
    path = "/auth/otp/verify",
    tag = "users",
    request_body = Verify,
    responses(
        (status = 200, description = "Logged in", body = LoggedIn),
        (status = 401, response = E401),
        (status = 409, response = E409),
        (status = 429, response = E429),
    )
)]
async fn verify(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<Verify>,
) -> ApiResult<Json<LoggedIn>> {
    let phone = phone_of(req.phone.as_deref())?;
    let (code, device, platform) = (req.code.as_deref(), req.device_uuid.as_deref(), req.platform.as_deref());
    let (account, device_uuid) = accounts::sign_in(&state.codes(), &phone, code, device, platform).await?;
    let (token, expires_at) = issue_user_token(&state, &phone, Some(&device_uuid)).map_err(ApiError::internal)?;
    Ok(Json(LoggedIn {
        token,
        expires_at: record_time(expires_at),
        device_uuid,
        account: user_account(&state, &account).await?,
    }))
}
