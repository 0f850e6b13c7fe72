//! `/bots`: a partner's bots. Create (token and webhook secret shown once), read (partner key or the
//! bot's own token), update, credentials (prefixes only), token and secret rotation, webhook settings and
//! a signed test, the component upload of `local` bots, flow invitations, and the inbound webhook a bot
//! answers through (bot token, secret header or body signature; `allowed_ips`), and the sessions of the
//! partner's bots (`/flow-sessions`).

mod component;
mod inbound;
mod invite;
mod manage;
mod sessions;

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::bots::manage::{self as bots, Bot};
use crate::clock::record_time;
use crate::http::auth::PartnerOrBot;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{Channel, RuntimeMode};
use crate::partners::Partner;
use crate::runtime::FlowInfo;
use crate::signing;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(manage::create_bot, manage::list_bots))
        .routes(routes!(manage::get_bot, manage::update_bot))
        .routes(routes!(manage::bot_credentials))
        .routes(routes!(manage::rotate_bot_token))
        .routes(routes!(manage::set_bot_webhook, inbound::bot_inbound))
        .routes(routes!(manage::rotate_bot_secret))
        .routes(routes!(manage::test_bot_webhook))
        .routes(routes!(component::upload_bot_component))
        .routes(routes!(invite::invite_to_flow))
        .routes(routes!(sessions::list_sessions))
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
    /// The channels it is the partner's entry bot on: a person who writes there with no session or
    /// conversation going on starts a session with it.
    #[schema(value_type = Vec<Channel>)]
    entry: Vec<String>,
    /// The flow such a session starts (null: a chat).
    entry_flow: Option<String>,
    credentials: Credentials,
    /// Null until a component is uploaded.
    component: Option<Component>,
    created_at: String,
}

async fn bot_record(state: &AppState, b: &Bot) -> ApiResult<BotRecord> {
    let component = match &b.component_digest {
        Some(digest) => {
            let (size, flows) = bots::component_info(&state.db, digest).await?.unwrap_or((0, json!([])));
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
        entry: b.entry_channels.clone(),
        entry_flow: b.entry_flow.clone(),
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
    bots::find(&state.db, partner.id, code).await?.ok_or_else(|| ApiError::not_found("bot"))
}

/// The bot a partner key or bot token may read: a bot token only reaches its own bot.
async fn readable(state: &AppState, caller: PartnerOrBot, code: &str) -> ApiResult<Bot> {
    match caller {
        PartnerOrBot::Partner(p) => owned(state, &p, code).await,
        PartnerOrBot::Bot(b) if b.code == code => Ok(*b),
        PartnerOrBot::Bot(_) => Err(ApiError::forbidden("a bot token is scoped to its own bot")),
    }
}
