//! `/dev`: developer accounts without a partner account. Sign-up by phone and a one-time code (an
//! `sk_dev_` API key, shown once), sign-in for 12-hour session keys, key listing and revocation, the
//! approved template catalog (the platform partner's), template-only sends with a daily quota, and
//! webhook settings.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::abuse::CodeRouteLimit;
use super::messages::message_json;
use super::webhooks::{SetWebhook, apply_settings};
use super::{ApiJson, parse_value};
use crate::auth::DeveloperAuth;
use crate::clock::{Millis, record_time};
use crate::error::{ApiError, ApiResult};
use crate::otp;
use crate::secrets::{digest, display_prefix, random_alnum};
use crate::state::AppState;
use crate::store::developers::{self as store, Developer};
use crate::store::messages::{Created, NewMessage};
use crate::store::outbox::Target;
use crate::store::{is_unique_violation, partners, templates};
use crate::template::{self, RenderError};
use crate::validate::is_email;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/dev/signup", post(signup))
        .route("/dev/verify", post(verify))
        .route("/dev/session", post(session))
        .route("/dev/keys", get(list_keys))
        .route("/dev/keys/{prefix}", delete(revoke_key))
        .route("/dev/templates", get(catalog))
        .route("/dev/messages", post(send))
        .route("/dev/settings", put(settings))
}

const SESSION_TTL_MS: Millis = 12 * 3600 * 1000;
const DAY_MS: Millis = 24 * 3600 * 1000;

fn developer_json(d: &Developer) -> Value {
    json!({ "developer_id": d.id, "phone": d.phone, "email": d.email, "created_at": record_time(d.created_at) })
}

fn phone_field(phone: Option<&str>) -> ApiResult<String> {
    super::required_phone(phone).map(str::to_string)
}

#[derive(Deserialize)]
struct Signup {
    phone: Option<String>,
    email: Option<String>,
}

/// Sends a code by SMS; the same call starts a sign-in for a verified developer.
async fn signup(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<Signup>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let phone = phone_field(req.phone.as_deref())?;
    let email = req.email.as_deref().map(str::trim).filter(|e| !e.is_empty());
    if email.is_some_and(|e| !is_email(e)) {
        return Err(ApiError::validation("email", "not a valid e-mail address"));
    }
    // The e-mail travels with the code: it is stored only when that code is verified.
    store::insert_signup(&state.db, &phone, state.now()).await?;
    let expires_at = otp::start(&state.codes(), &phone, "developer", email, |code| {
        format!("Your Hubbub developer code is {code}. It expires in 10 minutes.")
    })
    .await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "phone": phone, "expires_at": record_time(expires_at) }))))
}

#[derive(Deserialize)]
struct CodeLogin {
    phone: Option<String>,
    code: Option<String>,
}

/// Checks the code and returns the developer it belongs to, with the e-mail given by the sign-up that
/// issued the code (nothing of it is stored before the code is verified).
async fn check_code(state: &AppState, req: &CodeLogin) -> ApiResult<(Developer, Option<String>)> {
    let phone = phone_field(req.phone.as_deref())?;
    let code = req
        .code
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::validation("code", "code is required"))?;
    let email = otp::verify(&state.codes(), &phone, "developer", code).await?;
    let developer = store::find_by_phone(&state.db, &phone)
        .await?
        .ok_or_else(|| ApiError::unauthorized("no sign-up for this phone"))?;
    Ok((developer, email))
}

/// Issues a new key (`sk_dev_…`) and stores its digest; the key is returned once.
async fn issue_key(state: &AppState, developer_id: i64, kind: &str, expires_at: Option<Millis>) -> ApiResult<String> {
    for _ in 0..3 {
        let key = format!("sk_dev_{}", random_alnum(40));
        match store::insert_key(
            &state.db,
            developer_id,
            &digest(&key),
            &display_prefix(&key, "sk_dev_"),
            kind,
            expires_at,
            state.now(),
        )
        .await
        {
            Ok(()) => return Ok(key),
            Err(e) if is_unique_violation(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::internal("could not issue a unique developer key"))
}

async fn verify(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CodeLogin>,
) -> ApiResult<Json<Value>> {
    let (mut developer, email) = check_code(&state, &req).await?;
    if developer.verified || !store::mark_verified(&state.db, developer.id, state.now()).await? {
        return Err(ApiError::conflict("already verified: sign in with POST /api/v1/dev/session"));
    }
    // The e-mail is the one the verified sign-up gave; a sign-in (or anyone's later sign-up for the
    // same phone) never changes it.
    if let Some(email) = email {
        store::set_email(&state.db, &developer.phone, &email).await?;
        developer.email = Some(email);
    }
    let key = issue_key(&state, developer.id, "api", None).await?;
    Ok(Json(json!({ "developer": developer_json(&developer), "api_key": key })))
}

async fn session(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CodeLogin>,
) -> ApiResult<Json<Value>> {
    let (developer, _) = check_code(&state, &req).await?;
    if !developer.verified {
        return Err(ApiError::unauthorized("verify the sign-up first (POST /api/v1/dev/verify)"));
    }
    let expires_at = state.now() + SESSION_TTL_MS;
    let key = issue_key(&state, developer.id, "session", Some(expires_at)).await?;
    Ok(Json(json!({ "developer": developer_json(&developer), "api_key": key, "expires_at": record_time(expires_at) })))
}

async fn list_keys(State(state): State<AppState>, DeveloperAuth(developer): DeveloperAuth) -> ApiResult<Json<Value>> {
    let now = state.now();
    let keys = store::list_keys(&state.db, developer.id).await?;
    let data: Vec<Value> = keys
        .iter()
        .map(|k| {
            let active = k.revoked_at.is_none() && k.expires_at.is_none_or(|e| e > now);
            json!({
                "prefix": k.prefix,
                "kind": k.kind,
                "active": active,
                "created_at": record_time(k.created_at),
                "expires_at": k.expires_at.map(record_time),
                "revoked_at": k.revoked_at.map(record_time),
            })
        })
        .collect();
    Ok(Json(json!({ "data": data, "next_cursor": null })))
}

async fn revoke_key(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
    Path(prefix): Path<String>,
) -> ApiResult<StatusCode> {
    if store::revoke_key(&state.db, developer.id, &prefix, state.now()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("key"))
    }
}

async fn catalog(State(state): State<AppState>, DeveloperAuth(_): DeveloperAuth) -> ApiResult<Json<Value>> {
    let Some(platform) = partners::find_platform(&state.db).await? else {
        return Ok(Json(json!({ "data": [], "next_cursor": null })));
    };
    let rows = templates::list_approved(&state.db, platform.id).await?;
    let data: Vec<Value> = rows
        .iter()
        .map(|t| json!({"code": t.code, "lang": t.lang, "channel": t.channel, "category": t.category, "body": t.body, "variables": t.variables}))
        .collect();
    Ok(Json(json!({ "data": data, "next_cursor": null })))
}

#[derive(Deserialize)]
struct DevSend {
    phone: Option<String>,
    template_code: Option<String>,
    vars: Option<Map<String, Value>>,
    lang: Option<String>,
    idempotency_key: Option<String>,
}

/// Fields a developer send may not carry: no free-form content, no partner.
const REFUSED: &[&str] = &[
    "body",
    "partner",
    "html",
    "media_url",
    "media_base64",
    "link_url",
    "url",
    "encryption",
    "e2e_envelope",
    "content_type",
];

async fn send(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if let Some(field) = REFUSED.iter().find(|f| raw.get(**f).is_some()) {
        return Err(ApiError::validation(
            *field,
            format!("{field} is not accepted: developers send approved templates only"),
        ));
    }
    let req: DevSend = parse_value(raw)?;
    let phone = phone_field(req.phone.as_deref())?;
    let code = req.template_code.as_deref().map(str::trim).filter(|c| !c.is_empty());
    let code = code.ok_or_else(|| ApiError::validation("template_code", "template_code is required"))?;
    let lang = req.lang.as_deref().map(str::trim).filter(|l| !l.is_empty()).unwrap_or("en");
    let key = req.idempotency_key.as_deref().map(str::trim).filter(|k| !k.is_empty());
    if key.is_some_and(|k| k.len() > 255) {
        return Err(ApiError::validation("idempotency_key", "idempotency_key is at most 255 characters"));
    }
    let not_approved = || {
        ApiError::unprocessable("template_not_approved", format!("{code:?} ({lang}) is not an approved template"))
            .with_field("template_code")
    };
    let platform = partners::find_platform(&state.db).await?.ok_or_else(not_approved)?;
    let template = templates::list_approved(&state.db, platform.id)
        .await?
        .into_iter()
        .filter(|t| t.code == code && t.lang == lang)
        .min_by_key(|t| (t.channel != "inapp", t.id))
        .ok_or_else(not_approved)?;
    let vars = req.vars.clone().unwrap_or_default();
    let text = template::render(&template.body, &vars, super::messages::MAX_BODY_BYTES).map_err(|e| match e {
        RenderError::Missing(name) => {
            ApiError::validation(format!("vars.{name}"), format!("variable {name} is missing"))
        }
        RenderError::Malformed(_) => not_approved(),
        too_long @ RenderError::TooLong { .. } => ApiError::validation("vars", too_long.to_string()),
    })?;
    // The daily quota (UTC days).
    let now = state.now();
    let day_start = now - now.rem_euclid(DAY_MS);
    if store::sent_since(&state.db, developer.id, day_start).await? >= state.config.developer_daily_quota {
        return Err(ApiError::rate_limited(((day_start + DAY_MS - now) / 1000) as u64));
    }
    let message = NewMessage {
        reference: format!("msg_{}", random_alnum(24)),
        partner_id: platform.id,
        direction: crate::messages::Direction::Out,
        conversation_id: None,
        developer_id: Some(developer.id),
        phone,
        content_type: "text".into(),
        body: Some(text.clone()),
        rendered_body: Some(text),
        template_code: Some(template.code),
        lang: Some(template.lang),
        priority: "notification".into(),
        content: json!({}),
        media: None,
        // Developers share the platform's message space: their keys are namespaced.
        idempotency_key: key.map(|k| format!("dev:{}:{k}", developer.id)),
        request_hash: key
            .map(|_| digest(&format!("{code}|{lang}|{}|{:?}", req.phone.as_deref().unwrap_or(""), req.vars))),
    };
    match state.messages.create(message, now).await? {
        Created::New(m) => {
            state.delivery.wake.notify_one();
            Ok((StatusCode::CREATED, Json(message_json(&m))))
        }
        Created::Replayed(m) => Ok((StatusCode::CREATED, Json(message_json(&m)))),
        Created::KeyReused => Err(ApiError::idempotency_conflict()),
    }
}

async fn settings(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
    ApiJson(req): ApiJson<SetWebhook>,
) -> ApiResult<Json<Value>> {
    Ok(Json(apply_settings(&state, Target::Developer(developer.id), req).await?))
}
