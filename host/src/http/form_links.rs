//! `/form-links/{token}`: the form screen of a bot session on WhatsApp or SMS, opened in the app from the
//! link the bot's step went out as (`inbound::deliver`). The token is the capability, for that one form:
//! no login, used once, lapsing after an hour. Its values are validated against the screen's fields before
//! the bot sees them, as in the app, and what the bot answers goes out on the session's channel.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E422, E502};
use crate::clock::record_time;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::inbound::form_links;
use crate::names::{Channel, SessionState};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_form_link, submit_form_link))
}

/// A form a link opens.
#[derive(Serialize, ToSchema)]
#[schema(as = FormLinkForm)]
struct LinkedForm {
    /// The screen: `{id, title, kind, fields}`.
    #[schema(value_type = Object)]
    screen: Value,
    /// The bot's name.
    bot: String,
    /// The partner's name.
    partner: String,
    /// Where the conversation goes on: `whatsapp` or `sms`.
    channel: Channel,
    expires_at: String,
}

/// The form a link opens (no login: the link is the capability).
///
/// 404 for a token that is not a link; 409 for one used already, lapsed, or whose conversation is over.
#[utoipa::path(
    get,
    path = "/form-links/{token}",
    tag = "flows",
    params(("token" = String, Path, description = "The token of the link (`/f/{token}`)")),
    responses(
        (status = 200, description = "The form", body = LinkedForm),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
async fn get_form_link(State(state): State<AppState>, Path(token): Path<String>) -> ApiResult<Json<LinkedForm>> {
    let flows = state.flows();
    let (link, session, bot) = form_links::usable(&flows, &token).await?;
    let screen = session.screen.clone().unwrap_or_default();
    let partner = form_links::partner_name(&flows, &bot).await?;
    Ok(Json(LinkedForm {
        screen,
        bot: bot.name,
        partner,
        channel: session.channel.unwrap_or(Channel::Whatsapp),
        expires_at: record_time(link.expires_at),
    }))
}

/// A form's values.
#[derive(Deserialize, ToSchema)]
#[schema(as = FormLinkSubmit)]
struct Submit {
    /// The values, validated against the screen's fields.
    #[schema(value_type = Object, required = true)]
    values: Option<Map<String, Value>>,
}

/// What became of a submitted form.
#[derive(Serialize, ToSchema)]
#[schema(as = FormLinkSubmitted)]
struct Submitted {
    /// `in_progress`, or `completed` when the flow ended with it.
    state: SessionState,
    /// Where the bot's answer went: `whatsapp` or `sms`.
    channel: Channel,
}

/// Submit the form a link opens: validated against its fields (422 with `fields`, the link still
/// usable); then the link is used up, the bot takes the values, and its answer goes out on the session's
/// channel.
#[utoipa::path(
    post,
    path = "/form-links/{token}",
    tag = "flows",
    params(("token" = String, Path, description = "The token of the link (`/f/{token}`)")),
    request_body = Submit,
    responses(
        (status = 200, description = "Sent; the conversation goes on on the channel", body = Submitted),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 422, response = E422),
        (status = 502, response = E502),
    )
)]
async fn submit_form_link(
    State(state): State<AppState>,
    Path(token): Path<String>,
    ApiJson(req): ApiJson<Submit>,
) -> ApiResult<Json<Submitted>> {
    let values = req.values.unwrap_or_default();
    let (progress, channel) = form_links::submit(&state.flows(), &state.delivery, &token, values).await?;
    Ok(Json(Submitted { state: progress.state, channel }))
}
