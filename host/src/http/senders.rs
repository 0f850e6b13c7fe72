//! `/settings/senders`: a partner's own WhatsApp number and Twilio sender (`store::senders`). Sends to its
//! users go from them instead of the host's shared ones, messages to them are the partner's, and their
//! webhooks are checked with their own secrets. The credentials are sealed at rest and shown back only as
//! prefixes.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E422, List};
use crate::auth::PartnerAuth;
use crate::clock::record_time;
use crate::http::error::{ApiError, ApiResult};
use crate::names::Channel;
use crate::senders::{Fields, prefix};
use crate::state::AppState;
use crate::store::senders::{self, Sender};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_senders)).routes(routes!(set_sender, remove_sender))
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
    updated_at: String,
}

impl From<&Sender> for SenderRecord {
    fn from(s: &Sender) -> Self {
        SenderRecord {
            channel: s.channel,
            address: s.address.clone(),
            account: s.account.clone(),
            token_prefix: prefix(&s.token),
            app_secret_prefix: s.app_secret.as_deref().map(prefix),
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
    let data = senders::list(&state.db, partner.id).await?.iter().map(SenderRecord::from).collect();
    Ok(Json(List { data, next_cursor: None }))
}

/// A partner's own sender. WhatsApp: `phone_number_id`, `business_account_id`, `token`, `app_secret`; SMS:
/// `account_sid`, `auth_token`, `from`.
#[derive(Deserialize, ToSchema)]
#[schema(as = PartnerSenderUpdate)]
struct SetSender {
    /// WhatsApp: the business phone number's id (digits).
    phone_number_id: Option<String>,
    /// WhatsApp: the WhatsApp Business Account id (digits).
    business_account_id: Option<String>,
    /// WhatsApp: a system user's access token with whatsapp_business_messaging.
    token: Option<String>,
    /// WhatsApp: the Meta app's secret, which signs the webhooks about this number.
    app_secret: Option<String>,
    /// SMS: the Twilio account SID (`AC…`).
    account_sid: Option<String>,
    /// SMS: the account's auth token, which also signs its webhooks.
    auth_token: Option<String>,
    /// SMS: the Twilio number (E.164) or messaging service SID (`MG…`) the partner's SMS go from.
    from: Option<String>,
}

/// The channel of a path (`whatsapp` or `sms`).
fn channel_of(text: &str) -> ApiResult<Channel> {
    match Channel::parse(text) {
        Some(channel @ (Channel::Whatsapp | Channel::Sms)) => Ok(channel),
        _ => Err(ApiError::not_found("sender channel")),
    }
}

/// Set the partner's own sender on a channel (replacing the one it had).
///
/// Its users' messages on that channel go from it, messages people send to it are this partner's, and its
/// webhooks are checked with its secret: register the host's webhook URLs for it (docs/providers.md). 409
/// when another partner has that number.
#[utoipa::path(
    put,
    path = "/settings/senders/{channel}",
    tag = "messages",
    security(("partnerKey" = [])),
    params(("channel" = Channel, Path, description = "`whatsapp` or `sms`")),
    request_body = SetSender,
    responses(
        (status = 200, description = "The sender", body = SenderRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
async fn set_sender(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(channel): Path<String>,
    ApiJson(req): ApiJson<SetSender>,
) -> ApiResult<Json<SenderRecord>> {
    let channel = channel_of(&channel)?;
    let fields = Fields {
        phone_number_id: req.phone_number_id,
        business_account_id: req.business_account_id,
        token: req.token,
        app_secret: req.app_secret,
        account_sid: req.account_sid,
        auth_token: req.auth_token,
        from: req.from,
    };
    let sender = crate::senders::check(partner.id, channel, &fields, state.now())?;
    if !senders::set(&state.db, &sender, state.now()).await? {
        return Err(ApiError::conflict(format!(
            "another partner has {} as its {} sender",
            sender.address,
            channel.as_str()
        )));
    }
    state.delivery.forget_senders(partner.id);
    Ok(Json(SenderRecord::from(&sender)))
}

/// Remove the partner's own sender on a channel: its users go back to the host's.
#[utoipa::path(
    delete,
    path = "/settings/senders/{channel}",
    tag = "messages",
    security(("partnerKey" = [])),
    params(("channel" = Channel, Path, description = "`whatsapp` or `sms`")),
    responses((status = 204, description = "Removed"), (status = 404, response = E404))
)]
async fn remove_sender(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(channel): Path<String>,
) -> ApiResult<StatusCode> {
    let channel = channel_of(&channel)?;
    if !senders::remove(&state.db, partner.id, channel).await? {
        return Err(ApiError::not_found("sender"));
    }
    state.delivery.forget_senders(partner.id);
    Ok(StatusCode::NO_CONTENT)
}
