//! Creating, reading and changing a bot: its record, credentials (shown once, then prefixes only), token and
//! secret rotation, its webhook settings and a signed test event.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::{
    BotRecord, BotResponse, CHANNELS, Credentials, bot_record, check_webhook_url, check_whatsapp_menus, new_token,
    owned, readable,
};
use crate::events;
use crate::http::auth::{PartnerAuth, PartnerOrBot};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::webhooks::TestOutcome;
use crate::http::{ApiJson, E404, List};
use crate::names::{Channel, RuntimeMode};
use crate::secrets::{digest, random_alnum};
use crate::signing;
use crate::store::bots::{self as store, Bot, NewBot};
use crate::validate::{is_code, is_ip_list};
use crate::webhooks::{self, Endpoint};

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
    for bot in store::list(&state.db, partner.id).await? {
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

/// The codes of the flows a component offers (as stored: `[{code, title}]`).
fn flow_codes(flows: &serde_json::Value) -> Vec<String> {
    flows.as_array().into_iter().flatten().filter_map(|f| f["code"].as_str().map(str::to_string)).collect()
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
    let mut bot = owned(&state, &partner, &code).await?;
    let was_on_whatsapp = bot.channels.iter().any(|c| c == Channel::Whatsapp.as_str());
    if let Some(name) = req.name {
        let name = name.trim();
        if name.is_empty() {
            return Err(ApiError::validation("name", "name cannot be empty"));
        }
        bot.name = name.to_string();
    }
    if let Some(mode) = &req.runtime_mode {
        bot.runtime_mode = RuntimeMode::parse(mode)
            .ok_or_else(|| ApiError::validation("runtime_mode", "runtime_mode must be local or webhook"))?;
    }
    // Webhook mode asked for while clearing the URL: the request contradicts itself (422). Otherwise a bot
    // left in webhook mode without a URL is a clash with what is stored (409).
    let contradicts = req.runtime_mode.as_deref().map(str::trim) == Some(RuntimeMode::Webhook.as_str())
        && req.webhook_url.as_ref().is_some_and(|u| u.as_deref().is_none_or(|u| u.trim().is_empty()));
    if let Some(url) = req.webhook_url {
        let url = url.as_deref().map(str::trim).filter(|u| !u.is_empty());
        check_webhook_url(&state, url).await?;
        bot.webhook_url = url.map(str::to_string);
    }
    if bot.runtime_mode == RuntimeMode::Webhook && bot.webhook_url.is_none() {
        return Err(match contradicts {
            true => ApiError::validation("webhook_url", "webhook_url is required in webhook runtime mode"),
            false => ApiError::conflict("a bot in webhook mode needs its webhook_url: give one, or runtime_mode local"),
        });
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
    if let Some(entry) = req.entry {
        let channels = [Channel::Whatsapp.as_str(), Channel::Sms.as_str()];
        if let Some(bad) = entry.iter().find(|c| !channels.contains(&c.as_str())) {
            return Err(ApiError::validation("entry", format!("entry lists whatsapp or sms, not {bad:?}")));
        }
        bot.entry_channels = channels.iter().filter(|c| entry.iter().any(|e| e == *c)).map(|c| c.to_string()).collect();
    }
    if let Some(missing) = bot.entry_channels.iter().find(|c| !bot.channels.contains(c)) {
        return Err(ApiError::validation(
            "entry",
            format!("{missing} is not among the bot's channels: add it there too"),
        ));
    }
    let component_flows = match &bot.component_digest {
        Some(digest) => store::component_info(&state.db, digest).await?.map(|(_, flows)| flow_codes(&flows)),
        None => None,
    };
    if let Some(flow) = req.entry_flow {
        let flow = flow.as_deref().map(str::trim).filter(|f| !f.is_empty());
        if let (Some(flow), Some(codes)) = (flow, &component_flows)
            && !codes.iter().any(|c| c == flow)
        {
            return Err(ApiError::validation(
                "entry_flow",
                format!("the bot's component has no flow {flow:?} (it has: {})", codes.join(", ")),
            ));
        }
        bot.entry_flow = flow.map(str::to_string);
    }
    if let (Some(digest), Some(codes)) = (bot.component_digest.clone(), &component_flows)
        && !was_on_whatsapp
    {
        check_whatsapp_menus(&state, &bot, &digest, codes).await?;
    }
    store::update(&state.db, &bot, state.now()).await?;
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
    let (token, prefix) = new_token();
    store::set_token(&state.db, bot.id, &digest(&token), &prefix, state.now()).await?;
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
    let bot = owned(&state, &partner, &code).await?;
    let secret = signing::new_secret();
    store::set_webhook_secret(&state.db, bot.id, &secret, state.now()).await?;
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
pub(super) async fn test_bot_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
) -> ApiResult<Json<TestOutcome>> {
    let bot = owned(&state, &partner, &code).await?;
    let Some(url) = bot.webhook_url.clone() else {
        return Ok(Json(TestOutcome { ok: false, status: None, error: Some(crate::store::outbox::NO_URL.into()) }));
    };
    let endpoint = Endpoint { url, secret: bot.webhook_secret.clone(), bot_code: Some(bot.code.clone()) };
    let body = events::bot_event(&bot, "bot.webhook.test", json!({}));
    let delivery_id = format!("dlv_test_{}", random_alnum(20));
    let outcome =
        webhooks::send_signed(&state.webhooks, &endpoint, &delivery_id, "bot.webhook.test", &body.to_string()).await;
    Ok(Json(TestOutcome { ok: outcome.ok(), status: outcome.status, error: outcome.error }))
}
