//! Flow invitations: a flow card in the user's hub and an entry in `/me/forms` — or, on WhatsApp or SMS,
//! the flow's first steps there (a form as a link that opens it in the app), the session then running on
//! that channel.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::owned;
use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::http::{ApiJson, E404, E409, E502};
use crate::invitations::{self, Inviting};
use crate::names::Channel;

/// Who to invite.
#[derive(Deserialize, ToSchema)]
#[schema(as = FlowInvite)]
pub(super) struct Invite {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
    /// Where the flow runs: `inapp` (the default, also when empty: a flow card in the hub, which falls back to WhatsApp and
    /// SMS as a link to the app), or `whatsapp` / `sms` for a user without the app: its first steps go out
    /// there (a form screen as a link that opens it in the app without a login) and the session goes on
    /// there. The channel must be among the bot's, and on WhatsApp the user must have written in the last
    /// 24 hours (409 otherwise: invite by SMS, or in the app). `auto`: in the app when the user has it (a
    /// device), else WhatsApp when the bot is on it and the user's window is open, else SMS when the bot is
    /// on it and the user has not opted out, else in the app.
    #[schema(value_type = Option<String>, pattern = "^(inapp|whatsapp|sms|auto)?$")]
    channel: Option<String>,
}

/// `{"flow_session": …}`.
#[derive(Serialize, ToSchema)]
#[schema(as = FlowInvited)]
pub(super) struct Invited {
    flow_session: FlowSession,
}

/// An invitation to a flow.
#[derive(Serialize, ToSchema)]
pub(super) struct FlowSession {
    /// The session's ref (`flow_…`): the app starts it with `POST /me/flows/{ref}/start`.
    #[serde(rename = "ref")]
    reference: String,
    /// The bot's code.
    bot: String,
    /// The flow's code.
    flow: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    /// `invited` (in the app), `in_progress` (on WhatsApp or SMS: its first steps were sent).
    state: String,
    /// Where it runs.
    channel: Channel,
    /// The flow card in the user's hub (none on WhatsApp or SMS).
    #[serde(skip_serializing_if = "Option::is_none")]
    message_id: Option<i64>,
}

/// Invite a user to a flow: a flow card in the hub and an entry in /me/forms; or (`channel`) the flow on
/// WhatsApp or SMS.
#[utoipa::path(
    post,
    path = "/bots/{code}/flows/{flow}/invite",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body = Invite,
    responses(
        (status = 201, description = "The invitation", body = Invited),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
pub(super) async fn invite_to_flow(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path((code, flow)): Path<(String, String)>,
    ApiJson(req): ApiJson<Invite>,
) -> ApiResult<(StatusCode, Json<Invited>)> {
    let bot = owned(&state, &partner, &code).await?;
    let host = Inviting { flows: state.flows(), delivery: &state.delivery, sending: state.sending() };
    let made =
        invitations::invite(&host, &partner.name, &bot, &flow, req.phone.as_deref(), req.channel.as_deref()).await?;
    Ok((
        StatusCode::CREATED,
        Json(Invited {
            flow_session: FlowSession {
                reference: made.reference,
                bot: bot.code,
                flow,
                phone: made.phone,
                state: made.state.to_string(),
                channel: made.channel,
                message_id: made.message_id,
            },
        }),
    ))
}
