//! Flow invitations: a flow card in the user's hub and an entry in `/me/forms` — or, on WhatsApp or SMS,
//! the flow's first steps there (a form as a link that opens it in the app), the session then running on
//! that channel.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::owned;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::{ApiJson, E404, E409, E502};
use crate::messages::send::Sent;
use crate::names::{Channel, RuntimeMode};
use crate::secrets::{new_message_ref, random_alnum};
use crate::store::bots as store;
use crate::store::devices;
use crate::store::flows::{self, FlowInvitation};
use crate::store::messages::NewMessage;
use crate::validate::is_code;

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
    let phone = crate::validate::required_phone(req.phone.as_deref())?;
    let channel = match req.channel.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
        None => Channel::Inapp,
        Some("auto") => auto_channel(&state, &bot, phone).await?,
        Some(text) => Channel::parse(text)
            .ok_or_else(|| ApiError::validation("channel", "channel must be inapp, whatsapp, sms or auto"))?,
    };
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
    let (state_name, message_id) = if channel == Channel::Inapp {
        let card = NewMessage {
            reference: new_message_ref(),
            partner_id: partner.id,
            direction: crate::names::Direction::Out,
            conversation_id: None,
            developer_id: None,
            phone: phone.to_string(),
            content_type: "text".into(),
            body: Some(format!("{} invites you to fill in: {title}", partner.name)),
            rendered_body: None,
            template_code: None,
            lang: None,
            priority: "notification".into(),
            content: json!({ "flow": { "ref": reference, "bot": bot.code, "bot_ref": bot.reference, "partner": bot.partner_code, "flow": flow, "title": title, "state": "invited" } }),
            media: None,
            idempotency_key: None,
            request_hash: None,
            fallback_after_s: None,
            channel: None,
            account: String::new(),
            hub: None,
            invites: Some(FlowInvitation { reference: reference.clone(), bot_id: bot.id, flow: flow.clone(), title }),
            send_at: None,
            author_id: None,
            author_name: None,
        };
        let (Sent::New(card) | Sent::Replayed(card)) = crate::messages::send::accept(&state.sending(), card).await?;
        ("invited", Some(card.id))
    } else {
        on_channel(&state, &bot, &flow, phone, channel, &reference).await?;
        ("in_progress", None)
    };
    Ok((
        StatusCode::CREATED,
        Json(Invited {
            flow_session: FlowSession {
                reference,
                bot: bot.code,
                flow,
                phone: phone.to_string(),
                state: state_name.to_string(),
                channel,
                message_id,
            },
        }),
    ))
}

/// Where `channel: auto` invites `phone` (see [`Invite`]).
async fn auto_channel(state: &AppState, bot: &store::Bot, phone: &str) -> ApiResult<Channel> {
    if !devices::list_for_phone(&state.db, phone).await?.is_empty() {
        return Ok(Channel::Inapp);
    }
    let on = |channel: Channel| bot.channels.iter().any(|c| c == channel.as_str());
    if on(Channel::Whatsapp) && crate::delivery::within_window(&state.delivery, bot.partner_id, phone).await? {
        return Ok(Channel::Whatsapp);
    }
    if on(Channel::Sms) && !state.delivery.opted_out(bot.partner_id, Channel::Sms, phone).await? {
        return Ok(Channel::Sms);
    }
    Ok(Channel::Inapp)
}

/// Starts flow `flow` of `bot` with `phone` on WhatsApp or SMS and sends its first steps there.
async fn on_channel(
    state: &AppState,
    bot: &store::Bot,
    flow: &str,
    phone: &str,
    channel: Channel,
    reference: &str,
) -> ApiResult<()> {
    if !bot.channels.iter().any(|c| c == channel.as_str()) {
        return Err(ApiError::conflict(format!(
            "{} is not among the bot's channels: add it there first (PATCH /bots/{})",
            channel.as_str(),
            bot.code
        )));
    }
    let delivery = &state.delivery;
    if channel == Channel::Whatsapp && !crate::delivery::within_window(delivery, bot.partner_id, phone).await? {
        return Err(ApiError::conflict(
            "the user has not written on WhatsApp in the last 24 hours, and outside WhatsApp's 24-hour window \
             only templates reach them: invite them by SMS, or in the app",
        ));
    }
    if delivery.opted_out(bot.partner_id, channel, phone).await? {
        return Err(ApiError::conflict(format!("the user opted out of {} from this sender", channel.as_str())));
    }
    let mut tx = state.db.begin().await?;
    let session =
        flows::open_on_channel_in(&mut tx, reference, bot.id, Some(flow), phone, channel, state.now()).await?;
    tx.commit().await?;
    match state.flows().start_session(bot, &session).await {
        Ok(progress) => crate::inbound::deliver(delivery, bot.partner_id, &session, &progress.steps).await?,
        Err(e) => {
            // A flow that could not start takes none of the person's messages.
            flows::moved_on_channel(&state.db, session.id, None, None).await?;
            return Err(e.into());
        }
    }
    Ok(())
}
