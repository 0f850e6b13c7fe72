//! `/bots`: a partner's bots. Create (token and webhook secret shown once), read (partner key or the
//! bot's own token), update, credentials (prefixes only), token and secret rotation, webhook settings and
//! a signed test, the component upload of `local` bots, flow invitations, and the inbound webhook a bot
//! answers through (bot token, secret header or body signature; `allowed_ips`).

use std::net::SocketAddr;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::openapi::Binary;
use super::webhooks::TestOutcome;
use super::{ApiJson, E404, E503, parse_value};
use crate::auth::{PartnerAuth, PartnerOrBot};
use crate::bots::RuntimeMode;
use crate::clock::record_time;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::flows::Step;
use crate::runtime::{ComponentSource, FlowInfo, RuntimeError, WhenBusy};
use crate::secrets::{digest, random_alnum};
use crate::state::AppState;
use crate::store::bots::{self as store, Bot, NewBot};
use crate::store::flows;
use crate::store::messages::NewMessage;
use crate::store::partners::Partner;
use crate::template::Channel;
use crate::validate::{is_code, is_ip_list};
use crate::webhooks::{self, Endpoint, signing};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_bot))
        .routes(routes!(get_bot, update_bot))
        .routes(routes!(bot_credentials))
        .routes(routes!(rotate_bot_token))
        .routes(routes!(set_bot_webhook, bot_inbound))
        .routes(routes!(rotate_bot_secret))
        .routes(routes!(test_bot_webhook))
        .routes(routes!(upload_bot_component))
        .routes(routes!(invite_to_flow))
}

const CHANNELS: &[&str] = &["inapp", "whatsapp", "sms"];

/// A new bot token: `bot_<prefix>.<secret>`; returns it with its displayable prefix.
fn new_token() -> (String, String) {
    let prefix = format!("bot_{}", random_alnum(8));
    (format!("{prefix}.{}", random_alnum(40)), prefix)
}

/// A bot's credentials as the API shows them: prefixes only, never the token or the secret.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BotCredentials)]
struct Credentials {
    /// `bot_` and 8 characters: the start of the bot token.
    token_prefix: String,
    /// Always true: a bot always has a token.
    token_configured: bool,
    webhook_url: Option<String>,
    /// The start of the webhook secret (`whsec_…`).
    webhook_secret_prefix: String,
    /// Where the bot sends its events (`POST`).
    inbound_webhook_path: String,
}

impl From<&Bot> for Credentials {
    fn from(b: &Bot) -> Self {
        Credentials {
            token_prefix: b.token_prefix.clone(),
            token_configured: true,
            webhook_url: b.webhook_url.clone(),
            webhook_secret_prefix: signing::secret_prefix(&b.webhook_secret),
            inbound_webhook_path: format!("/api/v1/bots/{}/webhook", b.code),
        }
    }
}

/// The Wasm component of a `local` bot.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BotComponent)]
struct Component {
    /// `sha256:` and the hex SHA-256 of the bytes.
    digest: String,
    /// Bytes.
    size: i64,
    /// The flows the component offers.
    #[schema(value_type = Vec<FlowInfo>)]
    flows: Value,
    uploaded_at: Option<String>,
}

/// A bot.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Bot)]
struct BotRecord {
    #[serde(rename = "ref")]
    reference: String,
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    code: String,
    name: String,
    /// The owning partner's code.
    partner: String,
    runtime_mode: RuntimeMode,
    webhook_url: Option<String>,
    /// The channels it answers on.
    #[schema(value_type = Vec<Channel>)]
    channels: Vec<String>,
    /// Comma-separated IP addresses or CIDR blocks the inbound webhook accepts calls from (null: any).
    allowed_ips: Option<String>,
    credentials: Credentials,
    /// Null until a component is uploaded.
    component: Option<Component>,
    created_at: String,
}

async fn bot_record(state: &AppState, b: &Bot) -> ApiResult<BotRecord> {
    let component = match &b.component_digest {
        Some(digest) => {
            let (size, flows) = store::component_info(&state.db, digest).await?.unwrap_or((0, json!([])));
            Some(Component {
                digest: digest.clone(),
                size,
                flows,
                uploaded_at: b.component_uploaded_at.map(record_time),
            })
        }
        None => None,
    };
    Ok(BotRecord {
        reference: b.reference.clone(),
        code: b.code.clone(),
        name: b.name.clone(),
        partner: b.partner_code.clone(),
        runtime_mode: b.runtime_mode,
        webhook_url: b.webhook_url.clone(),
        channels: b.channels.clone(),
        allowed_ips: b.allowed_ips.clone(),
        credentials: Credentials::from(b),
        component,
        created_at: record_time(b.created_at),
    })
}

/// `{"bot": …}`.
#[derive(Serialize, ToSchema)]
#[schema(as = BotResponse)]
struct BotResponse {
    bot: BotRecord,
}

async fn owned(state: &AppState, partner: &Partner, code: &str) -> ApiResult<Bot> {
    store::find(&state.db, partner.id, code).await?.ok_or_else(|| ApiError::not_found("bot"))
}

/// The bot a partner key or bot token may read: a bot token only reaches its own bot.
async fn readable(state: &AppState, caller: PartnerOrBot, code: &str) -> ApiResult<Bot> {
    match caller {
        PartnerOrBot::Partner(p) => owned(state, &p, code).await,
        PartnerOrBot::Bot(b) if b.code == code => Ok(*b),
        PartnerOrBot::Bot(_) => Err(ApiError::forbidden("a bot token is scoped to its own bot")),
    }
}

async fn check_webhook_url(state: &AppState, url: Option<&str>) -> ApiResult<()> {
    if let Some(url) = url {
        webhooks::check_url(url, state.config.dev)
            .await
            .map_err(|why| ApiError::validation("webhook_url", format!("webhook_url {why}")))?;
    }
    Ok(())
}

/// A new bot.
#[derive(Deserialize, ToSchema)]
struct CreateBot {
    #[schema(value_type = String, required = true, pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    code: Option<String>,
    #[schema(value_type = String, required = true, min_length = 1, pattern = "\\S")]
    name: Option<String>,
    /// `local` when absent.
    #[schema(value_type = Option<RuntimeMode>)]
    runtime_mode: Option<String>,
    /// Required in webhook mode.
    webhook_url: Option<String>,
}

/// A new bot with its credentials, each shown this once.
#[derive(Serialize, ToSchema)]
#[schema(as = BotCreated)]
struct Created {
    bot: CreatedBot,
    /// `bot_<prefix>.<secret>`.
    bot_token: String,
    /// `whsec_…`: signs the bot's events and its inbound calls.
    webhook_secret: String,
    warning: String,
}

/// The new bot: its code and credential prefixes.
#[derive(Serialize, ToSchema)]
#[schema(as = BotCreatedRef)]
struct CreatedBot {
    code: String,
    credentials: Credentials,
}

/// Create a bot; its token and webhook secret are returned once.
#[utoipa::path(
    post,
    path = "/bots",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body = CreateBot,
    responses((status = 201, description = "The bot with its credentials", body = Created), (status = 409, response = super::E409))
)]
async fn create_bot(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateBot>,
) -> ApiResult<(StatusCode, Json<Created>)> {
    let code = req.code.as_deref().unwrap_or("").trim();
    if !is_code(code) {
        return Err(ApiError::validation("code", "code must match ^[a-z0-9][a-z0-9_-]{0,63}$"));
    }
    let name = req
        .name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::validation("name", "name is required"))?;
    let mode = match req.runtime_mode.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        None => RuntimeMode::default(),
        Some(text) => RuntimeMode::parse(text)
            .ok_or_else(|| ApiError::validation("runtime_mode", "runtime_mode must be local or webhook"))?,
    };
    let url = req.webhook_url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    if mode == RuntimeMode::Webhook && url.is_none() {
        return Err(ApiError::validation("webhook_url", "webhook_url is required in webhook runtime mode"));
    }
    check_webhook_url(&state, url).await?;
    let (token, prefix) = new_token();
    let secret = signing::new_secret();
    let reference = format!("bot_ref_{}", random_alnum(20));
    let new = NewBot {
        reference: &reference,
        code,
        name,
        runtime_mode: mode,
        webhook_url: url,
        webhook_secret: &secret,
        token_hash: &digest(&token),
        token_prefix: &prefix,
    };
    let bot = store::insert(&state.db, partner.id, &new, state.now())
        .await?
        .ok_or_else(|| ApiError::conflict(format!("a bot with code {code:?} already exists")))?;
    Ok((
        StatusCode::CREATED,
        Json(Created {
            bot: CreatedBot { code: bot.code.clone(), credentials: Credentials::from(&bot) },
            bot_token: token,
            webhook_secret: secret,
            warning: "Store the bot token and webhook secret now: they are shown only once and can only be replaced by rotation.".to_string(),
        }),
    ))
}

/// A bot (partner key, or that bot's own token).
#[utoipa::path(
    get,
    path = "/bots/{code}",
    tag = "bots",
    security(("partnerKey" = []), ("botToken" = [])),
    responses((status = 200, description = "The bot", body = BotResponse), (status = 404, response = E404))
)]
async fn get_bot(
    State(state): State<AppState>,
    caller: PartnerOrBot,
    Path(code): Path<String>,
) -> ApiResult<Json<BotResponse>> {
    let bot = readable(&state, caller, &code).await?;
    Ok(Json(BotResponse { bot: bot_record(&state, &bot).await? }))
}

/// `{"credentials": …}`.
#[derive(Serialize, ToSchema)]
#[schema(as = BotCredentialsResponse)]
struct CredentialsResponse {
    credentials: Credentials,
}

/// Credential prefixes (never the token or secret).
#[utoipa::path(
    get,
    path = "/bots/{code}/credentials",
    tag = "bots",
    security(("partnerKey" = []), ("botToken" = [])),
    responses((status = 200, description = "Credentials", body = CredentialsResponse), (status = 404, response = E404))
)]
async fn bot_credentials(
    State(state): State<AppState>,
    caller: PartnerOrBot,
    Path(code): Path<String>,
) -> ApiResult<Json<CredentialsResponse>> {
    let bot = readable(&state, caller, &code).await?;
    Ok(Json(CredentialsResponse { credentials: Credentials::from(&bot) }))
}

/// Changes to a bot: the fields given replace those stored.
#[derive(Deserialize, ToSchema)]
struct UpdateBot {
    #[schema(min_length = 1, pattern = "\\S")]
    name: Option<String>,
    #[schema(value_type = Option<RuntimeMode>)]
    runtime_mode: Option<String>,
    /// Required in webhook mode; empty clears it.
    #[schema(value_type = Option<String>)]
    webhook_url: Option<Option<String>>,
    #[schema(value_type = Option<Vec<Channel>>, min_items = 1)]
    channels: Option<Vec<String>>,
    /// Comma-separated IP addresses or CIDR blocks the inbound webhook accepts calls from; empty clears it.
    #[schema(value_type = Option<String>)]
    allowed_ips: Option<Option<String>>,
}

/// Applies `allowed_ips` (empty clears it).
fn set_allowed_ips(bot: &mut Bot, value: Option<&str>) -> ApiResult<()> {
    let list = value.map(str::trim).filter(|l| !l.is_empty());
    if list.is_some_and(|l| !is_ip_list(l)) {
        return Err(ApiError::validation(
            "allowed_ips",
            "allowed_ips must be comma-separated IP addresses or CIDR blocks",
        ));
    }
    bot.allowed_ips = list.map(str::to_string);
    Ok(())
}

/// Update name, runtime_mode, webhook_url, channels, allowed_ips (empty clears).
#[utoipa::path(
    patch,
    path = "/bots/{code}",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body = UpdateBot,
    responses((status = 200, description = "The bot", body = BotResponse), (status = 404, response = E404))
)]
async fn update_bot(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
    ApiJson(req): ApiJson<UpdateBot>,
) -> ApiResult<Json<BotResponse>> {
    let mut bot = owned(&state, &partner, &code).await?;
    if let Some(name) = req.name {
        let name = name.trim();
        if name.is_empty() {
            return Err(ApiError::validation("name", "name cannot be empty"));
        }
        bot.name = name.to_string();
    }
    if let Some(mode) = req.runtime_mode {
        bot.runtime_mode = RuntimeMode::parse(&mode)
            .ok_or_else(|| ApiError::validation("runtime_mode", "runtime_mode must be local or webhook"))?;
    }
    if let Some(url) = req.webhook_url {
        let url = url.as_deref().map(str::trim).filter(|u| !u.is_empty());
        check_webhook_url(&state, url).await?;
        bot.webhook_url = url.map(str::to_string);
    }
    if bot.runtime_mode == RuntimeMode::Webhook && bot.webhook_url.is_none() {
        return Err(ApiError::validation("webhook_url", "webhook_url is required in webhook runtime mode"));
    }
    if let Some(channels) = req.channels {
        if channels.is_empty() || channels.iter().any(|c| !CHANNELS.contains(&c.as_str())) {
            return Err(ApiError::validation("channels", "channels must be a non-empty list of inapp, whatsapp, sms"));
        }
        bot.channels = channels;
    }
    if let Some(ips) = req.allowed_ips {
        set_allowed_ips(&mut bot, ips.as_deref())?;
    }
    store::update(&state.db, &bot, state.now()).await?;
    Ok(Json(BotResponse { bot: bot_record(&state, &bot).await? }))
}

/// A new bot token.
#[derive(Serialize, ToSchema)]
#[schema(as = BotToken)]
struct TokenRotated {
    /// `bot_<prefix>.<secret>`, shown once.
    bot_token: String,
}

/// A new bot token, shown once; the old one stops working.
#[utoipa::path(
    post,
    path = "/bots/{code}/token/rotate",
    tag = "bots",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The new token", body = TokenRotated), (status = 404, response = E404))
)]
async fn rotate_bot_token(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
) -> ApiResult<Json<TokenRotated>> {
    let bot = owned(&state, &partner, &code).await?;
    let (token, prefix) = new_token();
    store::set_token(&state.db, bot.id, &digest(&token), &prefix, state.now()).await?;
    Ok(Json(TokenRotated { bot_token: token }))
}

/// A new webhook secret.
#[derive(Serialize, ToSchema)]
#[schema(as = BotWebhookSecret)]
struct SecretRotated {
    /// `whsec_…`, shown once.
    webhook_secret: String,
}

/// A new webhook secret, shown once.
#[utoipa::path(
    post,
    path = "/bots/{code}/webhook/secret/rotate",
    tag = "bots",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The new secret", body = SecretRotated), (status = 404, response = E404))
)]
async fn rotate_bot_secret(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
) -> ApiResult<Json<SecretRotated>> {
    let bot = owned(&state, &partner, &code).await?;
    let secret = signing::new_secret();
    store::set_webhook_secret(&state.db, bot.id, &secret, state.now()).await?;
    Ok(Json(SecretRotated { webhook_secret: secret }))
}

/// The bot's webhook.
#[derive(Deserialize, ToSchema)]
#[schema(as = SetBotWebhook)]
struct SetWebhook {
    /// HTTPS, resolving to public addresses only (localhost in dev mode).
    #[schema(value_type = String, required = true, pattern = "\\S")]
    webhook_url: Option<String>,
    /// A new webhook secret, shown once in the answer.
    rotate_secret: Option<bool>,
    /// Comma-separated IP addresses or CIDR blocks the inbound webhook accepts calls from; empty clears it.
    allowed_ips: Option<String>,
}

/// The bot, and its new webhook secret when one was asked for.
#[derive(Serialize, ToSchema)]
#[schema(as = BotWebhookSet)]
struct WebhookSet {
    /// Only with `rotate_secret`: the new secret, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    webhook_secret: Option<String>,
    bot: BotRecord,
}

/// Set the bot's webhook URL (and optionally rotate its secret, set allowed_ips).
#[utoipa::path(
    put,
    path = "/bots/{code}/webhook",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body = SetWebhook,
    responses((status = 200, description = "The bot; webhook_secret only when rotated", body = WebhookSet), (status = 404, response = E404))
)]
async fn set_bot_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
    ApiJson(req): ApiJson<SetWebhook>,
) -> ApiResult<Json<WebhookSet>> {
    let mut bot = owned(&state, &partner, &code).await?;
    let url = req.webhook_url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    let url = url.ok_or_else(|| ApiError::validation("webhook_url", "webhook_url is required"))?;
    check_webhook_url(&state, Some(url)).await?;
    bot.webhook_url = Some(url.to_string());
    if let Some(ips) = req.allowed_ips.as_deref() {
        set_allowed_ips(&mut bot, Some(ips))?;
    }
    store::update(&state.db, &bot, state.now()).await?;
    let mut webhook_secret = None;
    if req.rotate_secret.unwrap_or(false) {
        let secret = signing::new_secret();
        store::set_webhook_secret(&state.db, bot.id, &secret, state.now()).await?;
        bot.webhook_secret = secret.clone();
        webhook_secret = Some(secret);
    }
    Ok(Json(WebhookSet { webhook_secret, bot: bot_record(&state, &bot).await? }))
}

/// Send a signed bot.webhook.test event now.
#[utoipa::path(
    post,
    path = "/bots/{code}/webhook/test",
    tag = "bots",
    security(("partnerKey" = [])),
    responses((status = 200, description = "What happened", body = TestOutcome), (status = 404, response = E404))
)]
async fn test_bot_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
) -> ApiResult<Json<TestOutcome>> {
    let bot = owned(&state, &partner, &code).await?;
    let Some(url) = bot.webhook_url.clone() else {
        return Ok(Json(TestOutcome { ok: false, status: None, error: Some("no webhook_url configured".into()) }));
    };
    let endpoint = Endpoint { url, secret: bot.webhook_secret.clone(), bot_code: Some(bot.code.clone()) };
    let body = events::bot_event(&bot, "bot.webhook.test", json!({}));
    let delivery_id = format!("dlv_test_{}", random_alnum(20));
    let outcome =
        webhooks::send_signed(&state.webhooks, &endpoint, &delivery_id, "bot.webhook.test", &body.to_string()).await;
    Ok(Json(TestOutcome { ok: outcome.ok(), status: outcome.status, error: outcome.error }))
}

/// `{"component": …}`.
#[derive(Serialize, ToSchema)]
#[schema(as = BotComponentUploaded)]
struct Uploaded {
    component: Component,
}

/// Upload the bot's Wasm component.
///
/// Raw bytes, Content-Type application/wasm (or application/octet-stream), up to HUBBUB_COMPONENT_LIMIT (64
/// MiB by default; streamed to disk); 422 invalid_component when it is not a hubbub:bot component.
/// Compilations run a few at a time (HUBBUB_BOT_COMPILE_CONCURRENCY): when all are busy the upload is
/// refused at once with 503 and Retry-After.
#[utoipa::path(
    put,
    path = "/bots/{code}/component",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body(content((Binary = "application/wasm"), (Binary = "application/octet-stream"))),
    responses(
        (status = 200, description = "The component", body = Uploaded),
        (status = 404, response = E404),
        (status = 503, response = E503),
    )
)]
async fn upload_bot_component(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Uploaded>> {
    let bot = owned(&state, &partner, &code).await?;
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !content_type.starts_with("application/wasm") && !content_type.starts_with("application/octet-stream") {
        return Err(ApiError::bad_request("Content-Type must be application/wasm"));
    }
    let upload = receive_upload(&state, &headers, body).await?;
    let source = ComponentSource::File { path: upload.file.path(), sha256_hex: upload.sha256_hex.clone() };
    let loaded = state.runtime.load_from(source, WhenBusy::Refuse).await.map_err(|e| match e {
        RuntimeError::CompilerBusy => {
            ApiError::unavailable(UPLOAD_RETRY_AFTER_S, "every component compiler is busy; upload again shortly")
        }
        RuntimeError::InvalidComponent(why) => {
            ApiError::unprocessable("invalid_component", format!("not a hubbub:bot component: {why}"))
        }
        other => ApiError::unprocessable(
            "invalid_component",
            format!("the component failed when asked for its flows: {other}"),
        ),
    })?;
    let flows = serde_json::to_value(&loaded.flows).map_err(ApiError::internal)?;
    let bytes = tokio::fs::read(upload.file.path()).await.map_err(ApiError::internal)?;
    let now = state.now();
    store::set_component(&state.db, bot.id, &loaded.digest, &bytes, &flows, now).await?;
    tracing::info!(bot = %bot.code, digest = %loaded.digest, size = loaded.size, "component uploaded");
    Ok(Json(Uploaded {
        component: Component {
            digest: loaded.digest,
            size: loaded.size as i64,
            flows,
            uploaded_at: Some(record_time(now)),
        },
    }))
}

/// Seconds an upload refused for busy compilers is told to wait.
const UPLOAD_RETRY_AFTER_S: u64 = 5;

/// A component upload, on disk (removed when dropped) with the SHA-256 of its bytes.
struct Upload {
    file: tempfile::NamedTempFile,
    sha256_hex: String,
}

/// Streams a request body to a temporary file beside the component cache, hashing it on the way, so an
/// upload never sits in memory whole; over `HUBBUB_COMPONENT_LIMIT` bytes is 413.
async fn receive_upload(state: &AppState, headers: &HeaderMap, body: Body) -> ApiResult<Upload> {
    use sha2::{Digest, Sha256};
    use tokio::io::AsyncWriteExt;
    let limit = state.config.component_limit;
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large());
    }
    let file = tempfile::Builder::new()
        .prefix("upload-")
        .suffix(".wasm")
        .tempfile_in(&state.config.component_cache_dir)
        .map_err(ApiError::internal)?;
    let mut out = tokio::fs::File::from_std(file.as_file().try_clone().map_err(ApiError::internal)?);
    let mut hasher = Sha256::new();
    let mut size = 0usize;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("could not read the body: {e}")))?;
        size += chunk.len();
        if size > limit {
            return Err(ApiError::payload_too_large());
        }
        hasher.update(&chunk);
        out.write_all(&chunk).await.map_err(ApiError::internal)?;
    }
    out.flush().await.map_err(ApiError::internal)?;
    Ok(Upload { file, sha256_hex: crate::secrets::hex(&hasher.finalize()) })
}

/// Who to invite.
#[derive(Deserialize, ToSchema)]
#[schema(as = FlowInvite)]
struct Invite {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
}

/// `{"flow_session": …}`.
#[derive(Serialize, ToSchema)]
#[schema(as = FlowInvited)]
struct Invited {
    flow_session: FlowSession,
}

/// An invitation to a flow.
#[derive(Serialize, ToSchema)]
struct FlowSession {
    /// The session's ref (`flow_…`): the app starts it with `POST /me/flows/{ref}/start`.
    #[serde(rename = "ref")]
    reference: String,
    /// The bot's code.
    bot: String,
    /// The flow's code.
    flow: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    /// `invited`.
    state: String,
    /// The flow card in the user's hub.
    message_id: i64,
}

/// Invite a user to a flow: a flow card in the hub and an entry in /me/forms.
#[utoipa::path(
    post,
    path = "/bots/{code}/flows/{flow}/invite",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body = Invite,
    responses((status = 201, description = "The invitation", body = Invited), (status = 404, response = E404))
)]
async fn invite_to_flow(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path((code, flow)): Path<(String, String)>,
    ApiJson(req): ApiJson<Invite>,
) -> ApiResult<(StatusCode, Json<Invited>)> {
    let bot = owned(&state, &partner, &code).await?;
    let phone = super::required_phone(req.phone.as_deref())?;
    // A local bot's flows are the ones its component offers.
    let title = if bot.runtime_mode == RuntimeMode::Local {
        let digest = bot.component_digest.as_deref().ok_or_else(|| ApiError::not_found("flow"))?;
        let (_, flows) = store::component_info(&state.db, digest).await?.ok_or_else(|| ApiError::not_found("flow"))?;
        let offered = flows.as_array().and_then(|f| f.iter().find(|f| f["code"] == flow.as_str()).cloned());
        offered.and_then(|f| f["title"].as_str().map(str::to_string)).ok_or_else(|| ApiError::not_found("flow"))?
    } else if is_code(&flow) {
        flow.clone()
    } else {
        return Err(ApiError::not_found("flow"));
    };
    let reference = format!("flow_{}", random_alnum(24));
    let card = NewMessage {
        reference: format!("msg_{}", random_alnum(24)),
        partner_id: partner.id,
        direction: crate::messages::Direction::Out,
        conversation_id: None,
        developer_id: None,
        phone: phone.to_string(),
        content_type: "text".into(),
        body: Some(format!("{} invites you to fill in: {title}", partner.name)),
        rendered_body: None,
        template_code: None,
        lang: None,
        priority: "notification".into(),
        content: json!({ "flow": { "ref": reference, "bot": bot.code, "flow": flow, "title": title, "state": "invited" } }),
        media: None,
        idempotency_key: None,
        request_hash: None,
    };
    let (session, message_id) = flows::invite(&state.db, &reference, bot.id, &flow, &title, &card, state.now()).await?;
    state.delivery.wake.notify_one();
    Ok((
        StatusCode::CREATED,
        Json(Invited {
            flow_session: FlowSession {
                reference: session.reference,
                bot: bot.code,
                flow,
                phone: phone.to_string(),
                state: "invited".to_string(),
                message_id,
            },
        }),
    ))
}

/// An event a bot sends through its inbound webhook.
#[derive(Deserialize, ToSchema)]
#[schema(as = BotInboundEvent)]
struct Inbound {
    #[schema(schema_with = inbound_event_schema, required = true)]
    event: Option<String>,
    /// `reply`: the session and its new steps; `ping`: nothing.
    #[serde(default)]
    #[schema(value_type = Option<Reply>)]
    data: Value,
}

/// `event`: `reply` or `ping`.
fn inbound_event_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["reply", "ping"]))
        .build()
}

/// A bot's answer in a session: steps appended to what the app has not fetched yet.
#[derive(Deserialize, ToSchema)]
#[schema(as = BotReply)]
struct Reply {
    /// The session's ref.
    session: String,
    /// At most 50; each screen's fields well-formed.
    #[schema(value_type = Vec<Step>, max_items = 50)]
    steps: Vec<Value>,
}

/// What the inbound webhook answers.
#[derive(Serialize, ToSchema)]
#[schema(as = BotInboundAck)]
struct Ack {
    ok: bool,
    /// True when an event with this `webhook-id` was already applied (nothing changed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
}

/// Inbound events from the bot: `{event: reply|ping, data}`.
///
/// A bot answers users (`reply`) or checks the line (`ping`). The caller's address is checked against
/// `allowed_ips` before any credential is looked at (403), so an outsider cannot learn whether a leaked
/// secret is valid. Auth: the bot token, `X-Service-Bot-Secret`, `X-Service-Signature` (`sha256=<hex HMAC of
/// the body>`), or the Standard Webhooks headers (`webhook-id`, `webhook-timestamp` within 5 minutes,
/// `webhook-signature` `v1,<base64 HMAC of id.timestamp.body keyed with the base64-decoded secret after
/// whsec_>`). An event with a `webhook-id` (which then needs a fresh `webhook-timestamp`) is applied once: a
/// repeat answers `{ok: true, duplicate: true}` and changes nothing. Reply steps are appended to what the app
/// has not fetched yet.
#[utoipa::path(
    post,
    path = "/bots/{code}/webhook",
    tag = "bots",
    security(("botToken" = [])),
    params(
        ("X-Service-Bot-Secret" = Option<String>, Header, description = "The bot's webhook secret (instead of the token or a signature)."),
        ("X-Service-Signature" = Option<String>, Header, description = "`sha256=<hex HMAC-SHA256 of the body>`, keyed with the whole webhook secret."),
        ("webhook-id" = Option<String>, Header, max_length = 256, description = "Event id: a repeat is acknowledged and ignored."),
        ("webhook-timestamp" = Option<String>, Header, description = "Seconds since the epoch; required with webhook-id; within 5 minutes of now."),
        ("webhook-signature" = Option<String>, Header, description = "Standard Webhooks: space-separated v1,<base64> signatures."),
    ),
    request_body = Inbound,
    responses((status = 200, description = "Applied (or a repeat, with `duplicate`)", body = Ack), (status = 404, response = E404))
)]
async fn bot_inbound(
    State(state): State<AppState>,
    Path(code): Path<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Ack>> {
    let call = crate::bots::Inbound {
        peer: peer.ip(),
        authorization: header(&headers, "authorization"),
        bot_secret: header(&headers, "x-service-bot-secret"),
        service_signature: header(&headers, "x-service-signature"),
        webhook_id: header(&headers, "webhook-id"),
        webhook_timestamp: header(&headers, "webhook-timestamp"),
        webhook_signature: header(&headers, "webhook-signature"),
        body: &body,
    };
    let now_s = state.now() / 1000;
    let bot = call.authenticate(&state.db, &code, now_s).await?;
    let event_id = call.event_id(now_s)?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("body must be a JSON object"));
    }
    let req: Inbound = parse_value(value)?;
    match req.event.as_deref() {
        Some("ping") => Ok(Json(Ack { ok: true, duplicate: false })),
        Some("reply") => {
            let reply: Reply = parse_value(req.data).map_err(|e| e.with_field("data"))?;
            let session = flows::find_for_bot(&state.db, bot.id, &reply.session)
                .await?
                .ok_or_else(|| ApiError::not_found("session"))?;
            let steps =
                crate::flows::check_steps(reply.steps).map_err(|why| ApiError::validation("data.steps", why))?;
            let event = event_id.as_deref().map(|id| (bot.id, id));
            let applied = flows::push_pending(&state.db, session.id, &steps, event, state.now()).await?;
            Ok(Json(Ack { ok: true, duplicate: !applied }))
        }
        Some(other) => Err(ApiError::validation("event", format!("unknown event {other:?}: expected reply or ping"))),
        None => Err(ApiError::validation("event", "event is required")),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
}
