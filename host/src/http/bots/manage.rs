//! Creating, reading and changing a bot: its record, credentials (shown once, then prefixes only), token and
//! secret rotation, its webhook settings and a signed test event.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::{BotRecord, BotResponse, Credentials, bot_record, owned, readable};
use crate::bots::manage::{self as bots};
use crate::events;
use crate::http::auth::{PartnerAuth, PartnerOrBot};
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::http::webhooks::TestOutcome;
use crate::http::{ApiJson, E404, List};
use crate::names::{Channel, RuntimeMode};
use crate::webhooks::{Endpoint, endpoints};

/// A new bot.
#[derive(Deserialize, ToSchema)]
pub(super) struct CreateBot {
    #[schema(value_type = String, required = true, pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    code: Option<String>,
    #[schema(value_type = String, required = true, min_length = 1, pattern = "\\S")]
    name: Option<String>,
    /// `local` when absent.
    #[schema(value_type = Option<RuntimeMode>)]
    runtime_mode: Option<String>,
    /// Required in webhook mode.
    #[schema(schema_with = crate::http::optional_public_url_schema)]
    webhook_url: Option<String>,
}

/// A new bot with its credentials, each shown this once.
#[derive(Serialize, ToSchema)]
#[schema(as = BotCreated)]
pub(super) struct Created {
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
pub(super) struct CreatedBot {
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
    responses((status = 201, description = "The bot with its credentials", body = Created), (status = 409, response = crate::http::E409))
)]
pub(super) async fn create_bot(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateBot>,
) -> ApiResult<(StatusCode, Json<Created>)> {
    let input = bots::NewBotInput {
        code: req.code.as_deref(),
        name: req.name.as_deref(),
        runtime_mode: req.runtime_mode.as_deref(),
        webhook_url: req.webhook_url.as_deref(),
    };
    let bots::Made { bot, token, webhook_secret: secret } =
        bots::create(&state.db, state.config.dev, partner.id, input, state.now()).await?;
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

/// The partner's bots, oldest first.
#[utoipa::path(
    get,
    path = "/bots",
    tag = "bots",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The bots", body = List<BotRecord>))
)]
pub(super) async fn list_bots(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<BotRecord>>> {
    let mut data = Vec::new();
    for bot in bots::list(&state.db, partner.id).await? {
        data.push(bot_record(&state, &bot).await?);
    }
    Ok(Json(List { data, next_cursor: None }))
}

/// A bot (partner key, or that bot's own token).
#[utoipa::path(
    get,
    path = "/bots/{code}",
    tag = "bots",
    security(("partnerKey" = []), ("botToken" = [])),
    responses((status = 200, description = "The bot", body = BotResponse), (status = 404, response = E404))
)]
pub(super) async fn get_bot(
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
pub(super) struct CredentialsResponse {
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
pub(super) async fn bot_credentials(
    State(state): State<AppState>,
    caller: PartnerOrBot,
    Path(code): Path<String>,
) -> ApiResult<Json<CredentialsResponse>> {
    let bot = readable(&state, caller, &code).await?;
    Ok(Json(CredentialsResponse { credentials: Credentials::from(&bot) }))
}

/// Changes to a bot: the fields given replace those stored.
#[derive(Deserialize, ToSchema)]
pub(super) struct UpdateBot {
    #[schema(min_length = 1, pattern = "\\S")]
    name: Option<String>,
    #[schema(value_type = Option<RuntimeMode>)]
    runtime_mode: Option<String>,
    /// Required in webhook mode; empty clears it.
    #[schema(schema_with = crate::http::optional_public_url_schema)]
    webhook_url: Option<Option<String>>,
    #[schema(value_type = Option<Vec<Channel>>, min_items = 1)]
    channels: Option<Vec<String>>,
    /// Comma-separated IP addresses or CIDR blocks the inbound webhook accepts calls from; empty clears it.
    #[schema(value_type = Option<String>)]
    allowed_ips: Option<Option<String>>,
    /// The channels (`whatsapp`, `sms`, each among `channels`) this bot is the partner's entry bot on: a
    /// person who writes there with no session or conversation going on starts a session with it. A
    /// channel is taken from the partner's bot that had it; `[]` clears.
    #[schema(value_type = Option<Vec<Channel>>)]
    entry: Option<Vec<String>>,
    /// The flow (one of its component's) an entry session starts; null or empty: a chat.
    #[schema(value_type = Option<String>)]
    entry_flow: Option<Option<String>>,
}

/// Update name, runtime_mode, webhook_url, channels, allowed_ips (empty clears), entry, entry_flow.
///
/// Webhook mode needs a URL: a change that would leave a bot in webhook mode without one is 409 (give
/// `webhook_url`, or `runtime_mode: local`). Adding `whatsapp` to a local bot's channels checks its menus
/// as the upload does (422 whatsapp_menu).
#[utoipa::path(
    patch,
    path = "/bots/{code}",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body = UpdateBot,
    responses(
        (status = 200, description = "The bot", body = BotResponse),
        (status = 404, response = E404),
        (status = 409, response = crate::http::E409),
    )
)]
pub(super) async fn update_bot(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
    ApiJson(req): ApiJson<UpdateBot>,
) -> ApiResult<Json<BotResponse>> {
    let bot = owned(&state, &partner, &code).await?;
    let changes = bots::BotChanges {
        name: req.name,
        runtime_mode: req.runtime_mode,
        webhook_url: req.webhook_url,
        channels: req.channels,
        allowed_ips: req.allowed_ips,
        entry: req.entry,
        entry_flow: req.entry_flow,
    };
    let bot = bots::update(&state.flows(), state.config.dev, bot, changes).await?;
    Ok(Json(BotResponse { bot: bot_record(&state, &bot).await? }))
}

/// A new bot token.
#[derive(Serialize, ToSchema)]
#[schema(as = BotToken)]
pub(super) struct TokenRotated {
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
pub(super) async fn rotate_bot_token(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
) -> ApiResult<Json<TokenRotated>> {
    let bot = owned(&state, &partner, &code).await?;
    let token = bots::rotate_token(&state.db, &bot, state.now()).await?;
    Ok(Json(TokenRotated { bot_token: token }))
}

/// A new webhook secret.
#[derive(Serialize, ToSchema)]
#[schema(as = BotWebhookSecret)]
pub(super) struct SecretRotated {
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
pub(super) async fn rotate_bot_secret(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
) -> ApiResult<Json<SecretRotated>> {
    let mut bot = owned(&state, &partner, &code).await?;
    let secret = bots::rotate_secret(&state.db, &mut bot, state.now()).await?;
    Ok(Json(SecretRotated { webhook_secret: secret }))
}

/// The bot's webhook.
#[derive(Deserialize, ToSchema)]
#[schema(as = SetBotWebhook)]
pub(super) struct SetWebhook {
    /// HTTPS, resolving to public addresses only (localhost in dev mode).
    #[schema(schema_with = crate::http::public_url_schema, required = true)]
    webhook_url: Option<String>,
    /// A new webhook secret, shown once in the answer.
    rotate_secret: Option<bool>,
    /// Comma-separated IP addresses or CIDR blocks the inbound webhook accepts calls from; empty clears it.
    allowed_ips: Option<String>,
}

/// The bot, and its new webhook secret when one was asked for.
#[derive(Serialize, ToSchema)]
#[schema(as = BotWebhookSet)]
pub(super) struct WebhookSet {
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
pub(super) async fn set_bot_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
    ApiJson(req): ApiJson<SetWebhook>,
) -> ApiResult<Json<WebhookSet>> {
    let bot = owned(&state, &partner, &code).await?;
    let (url, ips, rotate) =
        (req.webhook_url.as_deref(), req.allowed_ips.as_deref(), req.rotate_secret.unwrap_or(false));
    let (bot, webhook_secret) =
        bots::set_webhook(&state.db, state.config.dev, bot, url, ips, rotate, state.now()).await?;
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
pub(super) async fn test_bot_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
) -> ApiResult<Json<TestOutcome>> {
    let bot = owned(&state, &partner, &code).await?;
    let Some(url) = bot.webhook_url.clone() else {
        return Ok(Json(TestOutcome { ok: false, status: None, error: Some(endpoints::NO_URL.into()) }));
    };
    let endpoint = Endpoint { url, secret: bot.webhook_secret.clone(), bot_code: Some(bot.code.clone()) };
    let body = events::bot_event(&bot, "bot.webhook.test", json!({}));
    Ok(Json(TestOutcome::from(endpoints::send_test(&state.webhooks, &endpoint, &body).await)))
}
