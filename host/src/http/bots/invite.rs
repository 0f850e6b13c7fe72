//! Flow invitations: a flow card in the user's hub and an entry in `/me/forms`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::owned;
use crate::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{ApiJson, E404};
use crate::names::RuntimeMode;
use crate::secrets::random_alnum;
use crate::state::AppState;
use crate::store::bots as store;
use crate::store::flows;
use crate::store::messages::NewMessage;
use crate::validate::is_code;

/// Who to invite.
#[derive(Deserialize, ToSchema)]
#[schema(as = FlowInvite)]
pub(super) struct Invite {
    #[schema(value_type = String, required = true, pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
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
pub(super) async fn invite_to_flow(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path((code, flow)): Path<(String, String)>,
    ApiJson(req): ApiJson<Invite>,
) -> ApiResult<(StatusCode, Json<Invited>)> {
    let bot = owned(&state, &partner, &code).await?;
    let phone = crate::validate::required_phone(req.phone.as_deref())?;
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
