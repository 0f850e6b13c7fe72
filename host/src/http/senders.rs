//! `/settings/senders`: a partner's own WhatsApp number and Twilio sender (`store::senders`). Sends to its
//! users go from them instead of the host's shared ones, messages to them are the partner's, and their
//! webhooks are checked with their own secrets. The credentials are sealed at rest and shown back only as
//! prefixes.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E422, E502, List};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::Channel;
use crate::senders::Sender;
use crate::senders::{Fields, prefix};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_senders))
        .routes(routes!(set_whatsapp_sender, remove_whatsapp_sender))
        .routes(routes!(set_sms_sender, remove_sms_sender))
}

/// A partner's own sender, as the API shows it: never its token or secret, only their first characters.
#[derive(Serialize, ToSchema)]
#[schema(as = PartnerSender)]
pub struct SenderRecord {
    /// `whatsapp` or `sms`.
    channel: Channel,
    /// WhatsApp: the phone number id; SMS: the Twilio number (E.164) or messaging service (`MG…`).
    address: String,
    /// WhatsApp: the business account id; SMS: the Twilio account SID.
    account: String,
    /// The first characters of the access token (WhatsApp) or auth token (SMS).
    token_prefix: String,
    /// The first characters of the Meta app's secret (WhatsApp).
    app_secret_prefix: Option<String>,
    /// Its messages a second; `null`: the host's default for the channel (`HUBBUB_WHATSAPP_MPS`, 80 unless
    /// the operator changed it; `HUBBUB_SMS_MPS`, 1).
    mps: Option<u32>,
    /// Until when its provider is not tried, after failing five times in a row on the host that answers
    /// (absent: it is tried as usual).
    #[serde(skip_serializing_if = "Option::is_none")]
    circuit_open_until: Option<String>,
    /// WhatsApp: Meta's messaging limit of its business account, people it may reach first (a template to
    /// someone whose window is closed) in a rolling 24 hours, as set here or by Meta's
    /// `phone_number_quality_update`; `null` with `limit_known: false`: the host's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<SenderLimits>,
    updated_at: String,
}

/// A WhatsApp sender's messaging limit and how much of it today used.
#[derive(Serialize, ToSchema)]
pub struct SenderLimits {
    /// People a day (`null`: unlimited).
    daily_limit: Option<i64>,
    /// Whether the limit was set (here, or by Meta's webhook); else the host's default applies.
    limit_known: bool,
    /// What Meta's last quality update said (`FLAGGED`, `UNFLAGGED`, `UPGRADE`, `DOWNGRADE`).
    quality: Option<String>,
    /// People reached first in the last 24 hours.
    reached_today: i64,
}

impl From<&Sender> for SenderRecord {
    fn from(s: &Sender) -> Self {
        SenderRecord {
            channel: s.channel,
            address: s.address.clone(),
            account: s.account.clone(),
            token_prefix: prefix(&s.token),
            app_secret_prefix: s.app_secret.as_deref().map(prefix),
            mps: s.mps,
            circuit_open_until: None,
            limits: None,
            updated_at: record_time(s.updated_at),
        }
    }
}

/// The partner's own senders (none: every channel goes from the host's).
#[utoipa::path(
    get,
    path = "/settings/senders",
    tag = "messages",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The senders", body = List<SenderRecord>))
)]
async fn list_senders(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<SenderRecord>>> {
    let now = state.clock.now_ms();
    let circuits = state.delivery.circuits.states(now);
    let mut data = Vec::new();
    for s in crate::senders::list(&state.db, partner.id).await? {
        let key = crate::delivery::pacing::key_of(s.channel, &s.account, &s.address);
        let open = circuits.iter().find(|c| c.sender == key).and_then(|c| c.open_until);
        let limits = match s.channel {
            Channel::Whatsapp => Some(limits_of(&state, &s.account).await?),
            _ => None,
        };
        data.push(SenderRecord { circuit_open_until: open.map(record_time), limits, ..SenderRecord::from(&s) });
    }
    Ok(Json(List { data, next_cursor: None }))
}

/// The messaging limit of the WhatsApp business account `account`, and how much of it today used.
async fn limits_of(state: &AppState, account: &str) -> ApiResult<SenderLimits> {
    let (default, now) = (state.config.default_daily_limit(), state.clock.now_ms());
    let l = crate::senders::limits(&state.db, account, default, now).await?;
    Ok(SenderLimits {
        daily_limit: l.daily_limit,
        limit_known: l.limit_known,
        quality: l.quality,
        reached_today: l.reached_today,
    })
}

/// A partner's own WhatsApp number.
#[derive(Deserialize, ToSchema)]
#[schema(as = PartnerWhatsappSender)]
struct SetWhatsapp {
    /// The business phone number's id (digits, not the number).
    #[schema(value_type = String, required = true, pattern = "^[0-9]{1,32}$")]
    phone_number_id: Option<String>,
    /// The WhatsApp Business Account id.
    #[schema(value_type = String, required = true, pattern = "^[0-9]{1,32}$")]
    business_account_id: Option<String>,
    /// A system user's access token with whatsapp_business_messaging.
    #[schema(value_type = String, required = true, pattern = "\\S")]
    token: Option<String>,
    /// The Meta app's secret, which signs the webhooks about this number.
    #[schema(value_type = String, required = true, pattern = "\\S")]
    app_secret: Option<String>,
    /// Messages a second the number sends (Meta's throughput: 80, or 1,000 once Meta raised it), shared by
    /// every host; absent: the host's default.
    #[schema(minimum = 1, maximum = 10000)]
    mps: Option<i64>,
    /// Meta's messaging limit of the business account (people reached first a rolling 24 hours: 250, 1,000,
    /// 10,000, 100,000), when known before Meta's `phone_number_quality_update` says it; absent: unchanged.
    #[schema(minimum = 1, maximum = 100000000)]
    daily_limit: Option<i64>,
}

/// A partner's own Twilio sender.
#[derive(Deserialize, ToSchema)]
#[schema(as = PartnerSmsSender)]
struct SetSms {
    /// The Twilio account SID.
    #[schema(value_type = String, required = true, pattern = "^AC[0-9a-zA-Z]{32}$")]
    account_sid: Option<String>,
    /// The account's auth token, which also signs its webhooks.
    #[schema(value_type = String, required = true, pattern = "\\S")]
    auth_token: Option<String>,
    /// The Twilio number (E.164) or messaging service SID the partner's SMS go from.
    #[schema(value_type = String, required = true, pattern = "^(\\+[1-9][0-9]{6,14}|MG[0-9a-zA-Z]{32})$")]
    from: Option<String>,
    /// Messages a second the sender sends (a long code: 1; a short code: 100; a messaging service: its
    /// numbers together), shared by every host; absent: the host's default.
    #[schema(minimum = 1, maximum = 10000)]
    mps: Option<i64>,
}

/// Set the partner's own WhatsApp number (replacing the one it had).
///
/// Its users' WhatsApp messages go from it, messages people send to it are this partner's, and the
/// webhooks about it are checked with its app secret: subscribe the host's webhook URL for it
/// (docs/providers.md). The number must be in the business account, as Meta shows it to the token
/// (`GET /{business_account_id}/phone_numbers`), and may not be the host's shared number or business
/// account (422); 409 when another partner has that number; 502 when Meta cannot be asked now.
#[utoipa::path(
    put,
    path = "/settings/senders/whatsapp",
    tag = "messages",
    security(("partnerKey" = [])),
    request_body = SetWhatsapp,
    responses(
        (status = 200, description = "The sender", body = SenderRecord),
        (status = 409, response = E409),
        (status = 422, response = E422),
        (status = 502, response = E502),
    )
)]
async fn set_whatsapp_sender(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<SetWhatsapp>,
) -> ApiResult<Json<SenderRecord>> {
    let fields = Fields {
        phone_number_id: req.phone_number_id,
        business_account_id: req.business_account_id,
        token: req.token,
        app_secret: req.app_secret,
        mps: req.mps,
        ..Fields::default()
    };
    crate::senders::check_daily_limit(req.daily_limit)?;
    let Json(mut record) = set(&state, partner.id, Channel::Whatsapp, &fields).await?;
    if let Some(limit) = req.daily_limit {
        crate::senders::set_daily_limit(&state.db, &record.account, limit, state.clock.now_ms()).await?;
    }
    record.limits = Some(limits_of(&state, &record.account).await?);
    Ok(Json(record))
}

/// Set the partner's own Twilio sender (replacing the one it had).
///
/// Its users' SMS go from it with its account, messages people send to it are this partner's, and its
/// account's webhooks are checked with its auth token: point the number's incoming messages at the host's
/// URL (docs/providers.md). The number must be one of the account's (or the messaging service the account's),
/// as Twilio shows it to the credentials, and may not be the host's shared sender or account (422); 409 when
/// another partner has that sender; 502 when Twilio cannot be asked now.
#[utoipa::path(
    put,
    path = "/settings/senders/sms",
    tag = "messages",
    security(("partnerKey" = [])),
    request_body = SetSms,
    responses(
        (status = 200, description = "The sender", body = SenderRecord),
        (status = 409, response = E409),
        (status = 422, response = E422),
        (status = 502, response = E502),
    )
)]
async fn set_sms_sender(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<SetSms>,
) -> ApiResult<Json<SenderRecord>> {
    let fields = Fields {
        account_sid: req.account_sid,
        auth_token: req.auth_token,
        from: req.from,
        mps: req.mps,
        ..Fields::default()
    };
    set(&state, partner.id, Channel::Sms, &fields).await
}

/// Checks and keeps a partner's own sender (`Delivery::set_own_sender`).
async fn set(state: &AppState, partner_id: i64, channel: Channel, fields: &Fields) -> ApiResult<Json<SenderRecord>> {
    let sender = state.delivery.set_own_sender(partner_id, channel, fields).await?;
    Ok(Json(SenderRecord::from(&sender)))
}

/// Remove the partner's own WhatsApp number: its users' WhatsApp messages go from the host's again.
#[utoipa::path(
    delete,
    path = "/settings/senders/whatsapp",
    tag = "messages",
    security(("partnerKey" = [])),
    responses((status = 204, description = "Removed"), (status = 404, response = E404))
)]
async fn remove_whatsapp_sender(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<StatusCode> {
    remove(&state, partner.id, Channel::Whatsapp).await
}

/// Remove the partner's own Twilio sender: its users' SMS go from the host's again.
#[utoipa::path(
    delete,
    path = "/settings/senders/sms",
    tag = "messages",
    security(("partnerKey" = [])),
    responses((status = 204, description = "Removed"), (status = 404, response = E404))
)]
async fn remove_sms_sender(State(state): State<AppState>, PartnerAuth(partner): PartnerAuth) -> ApiResult<StatusCode> {
    remove(&state, partner.id, Channel::Sms).await
}

async fn remove(state: &AppState, partner_id: i64, channel: Channel) -> ApiResult<StatusCode> {
    if !state.delivery.remove_own_sender(partner_id, channel).await? {
        return Err(ApiError::not_found("sender"));
    }
    Ok(StatusCode::NO_CONTENT)
}
