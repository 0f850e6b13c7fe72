//! The app's side of bots: flow invitations (`/me/flows/{ref}`, `…/start|submit|events`) and in-app chat
//! sessions (`/me/bots/{bot}/sessions…`, the bot named by its ref). The flow engine ([`crate::flows`]) does the work: this module
//! reads the requests, finds the caller's session and answers what the engine made of it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E502, parse_value};
use crate::clock::record_time;
use crate::flows::{self, EventBody, Progress, Step};
use crate::http::auth::UserAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{SessionKind, SessionState};
use crate::{bots, messages};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_flow))
        .routes(routes!(flow_steps))
        .routes(routes!(start_flow))
        .routes(routes!(submit_flow))
        .routes(routes!(flow_event))
        .routes(routes!(open_session))
        .routes(routes!(session_steps))
        .routes(routes!(session_event))
}

/// The bot a chat path names.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct BotPath {
    /// The bot's ref (`bot_ref_…`, as `GET /me/bots` lists it), or its code when only one of the user's
    /// partners has a bot with that code (else 409: two partners may use the same code).
    bot: String,
}

/// A chat session's path: its bot (as in [`BotPath`]) and its ref.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct SessionPath {
    /// The bot's ref (`bot_ref_…`), or its code when only one of the user's partners has a bot with it.
    bot: String,
    /// The session's ref (`sess_…`).
    session: String,
}

/// A chat session's new steps.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SessionSteps)]
struct SessionSteps {
    /// The session's ref (`sess_…`).
    session: String,
    #[schema(value_type = Vec<Step>)]
    steps: Vec<Value>,
}

/// A flow invitation as the app shows its card: where it stands, and its summary once completed.
#[derive(Debug, Serialize, ToSchema)]
struct FlowCard {
    /// The flow session's ref (`flow_…`).
    #[serde(rename = "ref")]
    reference: String,
    /// The bot's code.
    bot: String,
    /// The bot's ref (`bot_ref_…`): names it unambiguously (two partners may use the same code).
    bot_ref: String,
    /// The bot's partner (its code).
    partner: String,
    /// The flow's code.
    flow: String,
    title: Option<String>,
    /// `invited`, `in_progress` or `completed`.
    state: SessionState,
    /// What the user submitted, as the bot summed it up (completed flows).
    #[schema(value_type = Option<Object>)]
    summary: Option<Value>,
    /// The ref of the card in the hub inbox.
    message_ref: Option<String>,
    invited_at: String,
}

/// One of my flow invitations (completed ones too: their card is read-only).
#[utoipa::path(
    get,
    path = "/me/flows/{ref}",
    tag = "flows",
    security(("userJwt" = [])),
    responses((status = 200, description = "The flow's card", body = FlowCard), (status = 404, response = E404))
)]
async fn get_flow(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<FlowCard>> {
    let session = crate::flows::find_for_user(&state.db, &user.phone, &reference)
        .await?
        .filter(|s| s.kind == SessionKind::Flow)
        .ok_or_else(|| ApiError::not_found("flow"))?;
    let bot = bots::find_by_id(&state.db, session.bot_id).await?.ok_or_else(|| ApiError::not_found("flow"))?;
    let message_ref = match session.message_id {
        Some(id) => messages::find_any(&state.db, id).await?.map(|m| m.reference),
        None => None,
    };
    Ok(Json(FlowCard {
        reference: session.reference,
        bot: bot.code,
        bot_ref: bot.reference,
        partner: bot.partner_code,
        flow: session.flow.unwrap_or_default(),
        title: session.title,
        state: session.state,
        summary: session.summary,
        message_ref,
        invited_at: record_time(session.invited_at),
    }))
}

/// Where a flow stands, with the steps its bot answered since the app last asked (each shown once): the
/// bot's answer to a payment's outcome arrives here after the user comes back from the checkout.
#[utoipa::path(
    get,
    path = "/me/flows/{ref}/steps",
    tag = "flows",
    security(("userJwt" = [])),
    responses((status = 200, description = "The steps not fetched yet", body = Progress), (status = 404, response = E404))
)]
async fn flow_steps(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<Progress>> {
    let session = crate::flows::find_for_user(&state.db, &user.phone, &reference)
        .await?
        .filter(|s| s.kind == SessionKind::Flow)
        .ok_or_else(|| ApiError::not_found("flow"))?;
    let steps = state.flows().pending_steps(&session).await?;
    let session = crate::flows::find_for_user(&state.db, &user.phone, &reference).await?.unwrap_or(session);
    Ok(Json(Progress { reference: session.reference, state: session.state, summary: session.summary, steps }))
}

/// Start an invited flow.
#[utoipa::path(
    post,
    path = "/me/flows/{ref}/start",
    tag = "flows",
    security(("userJwt" = [])),
    responses(
        (status = 200, description = "The first steps", body = Progress),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn start_flow(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<Progress>> {
    let sessions = state.flows();
    let session = sessions.open_flow(&user.phone, &reference).await?;
    Ok(Json(sessions.start_flow(&session).await?))
}

/// A screen's values.
#[derive(Deserialize, ToSchema)]
#[schema(as = FlowSubmit)]
struct Submit {
    /// The id of the screen waiting for a submission.
    #[schema(value_type = String, required = true)]
    screen: Option<String>,
    /// The values, validated against the screen's fields.
    #[schema(value_type = Object, required = true)]
    values: Option<Map<String, Value>>,
}

/// Submit a screen: values are validated against its fields (422 with fields, the bot is not called).
#[utoipa::path(
    post,
    path = "/me/flows/{ref}/submit",
    tag = "flows",
    security(("userJwt" = [])),
    request_body = Submit,
    responses(
        (status = 200, description = "The next steps, or completed with the summary", body = Progress),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn submit_flow(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<Submit>,
) -> ApiResult<Json<Progress>> {
    let sessions = state.flows();
    let session = sessions.open_flow(&user.phone, &reference).await?;
    let event = flows::submission(&session, req.screen.as_deref(), req.values.unwrap_or_default())?;
    Ok(Json(sessions.handle(&session, event).await?))
}

/// Another event in a flow (menu choice, text, payment result).
#[utoipa::path(
    post,
    path = "/me/flows/{ref}/events",
    tag = "flows",
    security(("userJwt" = [])),
    request_body = EventBody,
    responses(
        (status = 200, description = "The next steps", body = Progress),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn flow_event(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Json<Progress>> {
    let sessions = state.flows();
    let session = sessions.open_flow(&user.phone, &reference).await?;
    let event = flows::guest_event(&session, parse_value::<EventBody>(raw)?)?;
    Ok(Json(sessions.handle(&session, event).await?))
}

/// Open an in-app chat session with a bot of a linked partner.
#[utoipa::path(
    post,
    path = "/me/bots/{bot}/sessions",
    tag = "flows",
    security(("userJwt" = [])),
    params(BotPath),
    responses(
        (status = 201, description = "The session and the bot's first steps", body = SessionSteps),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn open_session(
    State(state): State<AppState>,
    user: UserAuth,
    Path(BotPath { bot }): Path<BotPath>,
) -> ApiResult<(StatusCode, Json<SessionSteps>)> {
    let sessions = state.flows();
    let bot = sessions.user_bot(&user.phone, &bot).await?;
    let (session, steps) = sessions.open_chat(&bot, &user.phone).await?;
    Ok((StatusCode::CREATED, Json(SessionSteps { session: session.reference, steps })))
}

/// A user event in a chat session.
#[utoipa::path(
    post,
    path = "/me/bots/{bot}/sessions/{session}/events",
    tag = "flows",
    security(("userJwt" = [])),
    params(SessionPath),
    request_body = EventBody,
    responses(
        (status = 200, description = "The bot's next steps", body = SessionSteps),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn session_event(
    State(state): State<AppState>,
    user: UserAuth,
    Path(SessionPath { bot, session: reference }): Path<SessionPath>,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Json<SessionSteps>> {
    let sessions = state.flows();
    let (bot, session) = sessions.chat(&user.phone, &bot, &reference).await?;
    let event = flows::guest_event(&session, parse_value::<EventBody>(raw)?)?;
    let progress = sessions.handle_with(&bot, &session, event).await?;
    Ok(Json(SessionSteps { session: session.reference, steps: progress.steps }))
}

/// Steps a webhook-mode bot answered since the last call (each shown once).
#[utoipa::path(
    get,
    path = "/me/bots/{bot}/sessions/{session}",
    tag = "flows",
    security(("userJwt" = [])),
    params(SessionPath),
    responses((status = 200, description = "The steps not fetched yet", body = SessionSteps), (status = 404, response = E404))
)]
async fn session_steps(
    State(state): State<AppState>,
    user: UserAuth,
    Path(SessionPath { bot, session: reference }): Path<SessionPath>,
) -> ApiResult<Json<SessionSteps>> {
    let sessions = state.flows();
    let (_, session) = sessions.chat(&user.phone, &bot, &reference).await?;
    let steps = sessions.pending_steps(&session).await?;
    Ok(Json(SessionSteps { session: session.reference, steps }))
}
