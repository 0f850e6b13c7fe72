//! `/auth/otp`: end-user login by a one-time SMS code. A successful login claims the user's account
//! (each linked partner receives `account.claimed`), records the device and returns a user JWT.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiJson;
use super::abuse::CodeRouteLimit;
use super::accounts::user_account_json;
use crate::auth::issue_user_token;
use crate::clock::record_time;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::{accounts, devices};
use crate::{events, otp};

pub fn router() -> Router<AppState> {
    Router::new().route("/auth/otp/start", post(start)).route("/auth/otp/verify", post(verify))
}

#[derive(Deserialize)]
struct Start {
    phone: Option<String>,
}

fn phone_of(phone: Option<&str>) -> ApiResult<String> {
    super::required_phone(phone).map(str::to_string)
}

async fn start(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<Start>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let phone = phone_of(req.phone.as_deref())?;
    let expires_at = otp::start(&state, &phone, "login", None, |code| {
        format!("Your Hubbub code is {code}. It expires in 10 minutes. Never share it.")
    })
    .await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "phone": phone, "expires_at": record_time(expires_at) }))))
}

#[derive(Deserialize)]
struct Verify {
    phone: Option<String>,
    code: Option<String>,
    device_uuid: Option<String>,
    platform: Option<String>,
}

async fn verify(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<Verify>,
) -> ApiResult<Json<Value>> {
    let phone = phone_of(req.phone.as_deref())?;
    let code = req
        .code
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::validation("code", "code is required"))?;
    let device_uuid = match req.device_uuid.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) => crate::e2e::device_uuid(Some(d), "device_uuid")?,
        None => uuid::Uuid::new_v4().to_string(),
    };
    let platform = req.platform.as_deref().map(str::trim).filter(|p| !p.is_empty());
    otp::verify(&state, &phone, "login", code).await?;

    let now = state.now();
    let mut tx = state.db.writer().begin().await?;
    accounts::claim_in(&mut tx, &phone, now, |partner, at| events::account_claimed(partner, &phone, at)).await?;
    if !devices::ensure_device_in(&mut tx, &device_uuid, &phone, platform, now).await? {
        return Err(ApiError::conflict("device_uuid belongs to another account's device"));
    }
    tx.commit().await?;

    let (token, expires_at) = issue_user_token(&state, &phone, Some(&device_uuid)).map_err(ApiError::internal)?;
    let account = accounts::find_account(&state.db, &phone)
        .await?
        .ok_or_else(|| ApiError::internal("claimed account missing"))?;
    Ok(Json(json!({
        "token": token,
        "expires_at": record_time(expires_at),
        "device_uuid": device_uuid,
        "account": user_account_json(&state, &account).await?,
    })))
}
