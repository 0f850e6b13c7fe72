//! `/dev`: developer accounts without a partner account. Sign-up by phone and a one-time code (an
//! `sk_dev_` API key, shown once), sign-in for 12-hour session keys, key listing and revocation, the
//! approved template catalog (the platform partner's), template-only sends with a daily quota, and
//! webhook settings.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::abuse::CodeRouteLimit;
use super::login::CodeSent;
use super::messages::MessageRecord;
use super::webhooks::{SetWebhook, TestOutcome, WebhookSettings, settings, test_event};
use super::{ApiJson, ApiQuery, E401, E404, E409, E429, E502, List, PageParams, parse_value};
use crate::clock::record_time;
use crate::developers::{self, Developer};
use crate::http::auth::DeveloperAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::messages::send::Sent;
use crate::names::{Category, Channel};
use crate::webhooks::endpoints::Target;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(dev_signup))
        .routes(routes!(dev_verify))
        .routes(routes!(dev_session))
        .routes(routes!(list_dev_keys))
        .routes(routes!(revoke_dev_key))
        .routes(routes!(dev_templates))
        .routes(routes!(dev_send))
        .routes(routes!(dev_settings))
        .routes(routes!(dev_messages))
        .routes(routes!(dev_usage))
        .routes(routes!(dev_test_webhook))
}

/// A developer account.
#[derive(Serialize, ToSchema)]
#[schema(as = Developer)]
struct DeveloperRecord {
    developer_id: i64,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    email: Option<String>,
    created_at: String,
}

impl From<&Developer> for DeveloperRecord {
    fn from(d: &Developer) -> Self {
        DeveloperRecord {
            developer_id: d.id,
            phone: d.phone.clone(),
            email: d.email.clone(),
            created_at: record_time(d.created_at),
        }
    }
}

/// A developer sign-up, or the start of a sign-in.
#[derive(Deserialize, ToSchema)]
#[schema(as = DevSignup)]
struct Signup {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    /// Stored only when the code this call sends verifies the sign-up; a sign-in never changes it. Empty is
    /// none.
    #[schema(
        max_length = 318,
        pattern = "^([!-?A-~]{1,64}@(?=[^@]{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)?$"
    )]
    email: Option<String>,
}

/// Sign up (or start a sign-in): sends a code by SMS.
///
/// The e-mail travels with the code and is stored only when that code verifies the sign-up (POST
/// /dev/verify); a sign-in never changes it. While a sign-up's code for one e-mail waits (10 minutes), a
/// sign-up for another e-mail with the same phone is refused (409), so a look-alike address cannot ride on
/// the owner's SMS. Limited per client address and host (429).
#[utoipa::path(
    post,
    path = "/dev/signup",
    tag = "developers",
    request_body = Signup,
    responses(
        (status = 202, description = "Code sent", body = CodeSent),
        (status = 409, response = E409),
        (status = 429, response = E429),
        (status = 502, response = E502),
    )
)]
async fn dev_signup(
    CodeRouteLimit(client): CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<Signup>,
) -> ApiResult<(StatusCode, Json<CodeSent>)> {
    let (phone, expires_at) =
        developers::sign_up(&state.codes(), req.phone.as_deref(), req.email.as_deref(), client).await?;
    Ok((StatusCode::ACCEPTED, Json(CodeSent { phone, expires_at: record_time(expires_at) })))
}

/// The phone and the code it received.
#[derive(Deserialize, ToSchema)]
#[schema(as = DevCodeLogin)]
struct CodeLogin {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    #[schema(value_type = String, required = true, pattern = "\\S")]
    code: Option<String>,
}

/// A verified sign-up.
#[derive(Serialize, ToSchema)]
#[schema(as = DevVerified)]
struct Verified {
    developer: DeveloperRecord,
    /// The API key (`sk_dev_…`), shown once.
    api_key: String,
    /// A 12-hour session key (`sk_dev_…`, kind `session`), shown once, as `POST /dev/session` gives: what
    /// the portal keeps for the tab, so that a reload leaves the developer signed in without keeping the
    /// API key anywhere.
    session_key: String,
    session_expires_at: String,
}

/// Verify the sign-up: the developer, an sk_dev_ API key and a 12-hour session key, each shown once.
#[utoipa::path(
    post,
    path = "/dev/verify",
    tag = "developers",
    request_body = CodeLogin,
    responses(
        (status = 200, description = "Verified", body = Verified),
        (status = 401, response = E401),
        (status = 409, response = E409),
        (status = 429, response = E429),
    )
)]
async fn dev_verify(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CodeLogin>,
) -> ApiResult<Json<Verified>> {
    let verified = developers::verify(&state.codes(), req.phone.as_deref(), req.code.as_deref()).await?;
    Ok(Json(Verified {
        developer: DeveloperRecord::from(&verified.developer),
        api_key: verified.api_key,
        session_key: verified.session_key,
        session_expires_at: record_time(verified.session_expires_at),
    }))
}

/// A sign-in.
#[derive(Serialize, ToSchema)]
#[schema(as = DevSession)]
struct SignedIn {
    developer: DeveloperRecord,
    /// The session key (`sk_dev_…`), shown once; it works for 12 hours.
    api_key: String,
    expires_at: String,
}

/// Sign in with a new code: a 12-hour session key (sk_dev_…), shown once.
#[utoipa::path(
    post,
    path = "/dev/session",
    tag = "developers",
    request_body = CodeLogin,
    responses(
        (status = 200, description = "Signed in", body = SignedIn),
        (status = 401, response = E401),
        (status = 429, response = E429),
    )
)]
async fn dev_session(
    _: CodeRouteLimit,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CodeLogin>,
) -> ApiResult<Json<SignedIn>> {
    let (developer, key, expires_at) =
        developers::sign_in(&state.codes(), req.phone.as_deref(), req.code.as_deref()).await?;
    Ok(Json(SignedIn {
        developer: DeveloperRecord::from(&developer),
        api_key: key,
        expires_at: record_time(expires_at),
    }))
}

/// One of a developer's keys, by its prefix (never the key).
#[derive(Serialize, ToSchema)]
#[schema(as = DevKey)]
struct KeyRecord {
    /// `sk_dev_` and 8 characters.
    prefix: String,
    #[schema(schema_with = key_kind_schema)]
    kind: String,
    /// Neither revoked nor expired.
    active: bool,
    created_at: String,
    expires_at: Option<String>,
    revoked_at: Option<String>,
}

/// The kinds of developer key, as a string enum.
fn key_kind_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .description(Some("`api` (from the sign-up, no expiry) or `session` (12 hours)."))
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["api", "session"]))
        .build()
}

/// My keys, by prefix (never the keys).
#[utoipa::path(
    get,
    path = "/dev/keys",
    tag = "developers",
    security(("developerKey" = [])),
    responses((status = 200, description = "Every key, newest first, in one page", body = List<KeyRecord>))
)]
async fn list_dev_keys(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
) -> ApiResult<Json<List<KeyRecord>>> {
    let now = state.now();
    let keys = developers::keys(&state.db, developer.id).await?;
    let data = keys
        .iter()
        .map(|k| KeyRecord {
            prefix: k.prefix.clone(),
            kind: k.kind.clone(),
            active: k.revoked_at.is_none() && k.expires_at.is_none_or(|e| e > now),
            created_at: record_time(k.created_at),
            expires_at: k.expires_at.map(record_time),
            revoked_at: k.revoked_at.map(record_time),
        })
        .collect();
    Ok(Json(List { data, next_cursor: None }))
}

/// Revoke one of my keys.
#[utoipa::path(
    delete,
    path = "/dev/keys/{prefix}",
    tag = "developers",
    security(("developerKey" = [])),
    responses((status = 204, description = "Revoked"), (status = 404, response = E404))
)]
async fn revoke_dev_key(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
    Path(prefix): Path<String>,
) -> ApiResult<StatusCode> {
    if developers::revoke_key(&state.db, developer.id, &prefix, state.now()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("key"))
    }
}

/// An approved template developers may send.
#[derive(Serialize, ToSchema)]
#[schema(as = CatalogTemplate)]
struct CatalogEntry {
    code: String,
    lang: String,
    #[schema(value_type = Channel)]
    channel: String,
    #[schema(value_type = Category)]
    category: String,
    /// The text, with `{{name}}` variables.
    body: String,
    /// The `{{name}}` variables of the body, in order of first use.
    variables: Vec<String>,
}

/// The approved template catalog (the platform's approved templates).
#[utoipa::path(
    get,
    path = "/dev/templates",
    tag = "developers",
    security(("developerKey" = [])),
    responses((status = 200, description = "Every approved template, in one page", body = List<CatalogEntry>))
)]
async fn dev_templates(
    State(state): State<AppState>,
    DeveloperAuth(_): DeveloperAuth,
) -> ApiResult<Json<List<CatalogEntry>>> {
    let rows = developers::catalog(&state.db).await?;
    let data = rows
        .iter()
        .map(|t| CatalogEntry {
            code: t.code.clone(),
            lang: t.lang.clone(),
            channel: t.channel.clone(),
            category: t.category.clone(),
            body: t.body.clone(),
            variables: t.variables.clone(),
        })
        .collect();
    Ok(Json(List { data, next_cursor: None }))
}

/// A template send: an approved template of the catalog, its variables, and the recipient. Free-form
/// content (`body`, `html`, media, links, encryption, `content_type`) and `partner` are refused (422).
#[derive(Deserialize, ToSchema)]
#[schema(as = DevMessage)]
struct DevSend {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    /// A code of the catalog (`GET /dev/templates`).
    #[schema(value_type = String, required = true, pattern = "\\S")]
    template_code: Option<String>,
    /// Values of the template's variables: each at most 200 characters, without newlines, tabs or runs of
    /// more than four spaces (as WhatsApp's template parameters); 422 on `vars.NAME` otherwise.
    #[schema(value_type = Option<Object>)]
    vars: Option<Map<String, Value>>,
    /// The template's language; `en` when absent.
    lang: Option<String>,
    /// Deduplicates retries for 24 h.
    #[schema(max_length = 255)]
    idempotency_key: Option<String>,
}

/// Send an approved template; no body, no partner; daily quota (429).
#[utoipa::path(
    post,
    path = "/dev/messages",
    tag = "developers",
    security(("developerKey" = [])),
    request_body = DevSend,
    responses((status = 201, description = "The message (also when an idempotent retry is replayed)", body = MessageRecord), (status = 409, response = E409))
)]
async fn dev_send(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<(StatusCode, Json<MessageRecord>)> {
    if let Some(field) = developers::REFUSED.iter().find(|f| raw.get(**f).is_some()) {
        return Err(ApiError::validation(
            *field,
            format!("{field} is not accepted: developers send approved templates only"),
        ));
    }
    let req: DevSend = parse_value(raw)?;
    let send = developers::DevSend {
        phone: req.phone.as_deref(),
        template_code: req.template_code.as_deref(),
        vars: req.vars,
        lang: req.lang.as_deref(),
        idempotency_key: req.idempotency_key.as_deref(),
    };
    let quota = state.config.developer_daily_quota;
    let (Sent::New(m) | Sent::Replayed(m)) = developers::send(&state.sending(), developer.id, quota, send).await?;
    Ok((StatusCode::CREATED, Json(MessageRecord::from(&m))))
}

/// My webhook (message.status of my messages), as PUT /settings/webhook.
#[utoipa::path(
    put,
    path = "/dev/settings",
    tag = "developers",
    security(("developerKey" = [])),
    request_body = SetWebhook,
    responses((status = 200, description = "The settings; webhook_secret only when created or rotated", body = WebhookSettings))
)]
async fn dev_settings(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
    ApiJson(req): ApiJson<SetWebhook>,
) -> ApiResult<Json<WebhookSettings>> {
    Ok(Json(settings(&state, Target::Developer(developer.id), req).await?))
}

/// My messages (template sends), newest first, with their states.
#[utoipa::path(
    get,
    path = "/dev/messages",
    tag = "developers",
    security(("developerKey" = [])),
    params(PageParams),
    responses((status = 200, description = "A page of my messages", body = List<MessageRecord>))
)]
async fn dev_messages(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<MessageRecord>>> {
    let page = page.page()?;
    let rows = developers::messages(&state.db, developer.id, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |m| m.id, |m| MessageRecord::from(m))))
}

/// My sends today against the daily quota.
#[derive(Serialize, ToSchema)]
#[schema(as = DevUsage)]
struct Usage {
    /// Messages sent since 00:00 UTC.
    sent_today: i64,
    daily_quota: i64,
    /// When the count starts again (the next 00:00 UTC).
    resets_at: String,
}

/// My usage against the daily quota.
#[utoipa::path(
    get,
    path = "/dev/usage",
    tag = "developers",
    security(("developerKey" = [])),
    responses((status = 200, description = "Sent today, and the quota", body = Usage))
)]
async fn dev_usage(State(state): State<AppState>, DeveloperAuth(developer): DeveloperAuth) -> ApiResult<Json<Usage>> {
    let (sent_today, resets_at) = developers::usage(&state.db, developer.id, state.now()).await?;
    Ok(Json(Usage { sent_today, daily_quota: state.config.developer_daily_quota, resets_at: record_time(resets_at) }))
}

/// Send one signed sample message.status event to my webhook now.
#[utoipa::path(
    post,
    path = "/dev/webhooks/test",
    tag = "developers",
    security(("developerKey" = [])),
    responses((status = 200, description = "What my endpoint answered", body = TestOutcome))
)]
async fn dev_test_webhook(
    State(state): State<AppState>,
    DeveloperAuth(developer): DeveloperAuth,
) -> ApiResult<Json<TestOutcome>> {
    let platform = developers::platform_code(&state.db).await?;
    Ok(Json(test_event(&state, Target::Developer(developer.id), &platform).await?))
}
