//! `GET /flow-sessions`: a partner's flow invitations and chat sessions, newest first — of one bot (the
//! console's Bots page), of one phone (the contact panel), or both.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::owned;
use crate::clock::record_time;
use crate::flows;
use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::http::{ApiQuery, E404, E422, List, PageParams, query_text};
use crate::names::{SessionKind, SessionState};
use crate::validate::phone_filter;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SessionFilter {
    /// Only this bot's sessions (its code; another partner's bot is 404; empty: every bot's).
    bot: Option<String>,
    /// Only this user's sessions (E.164; empty: every user's).
    #[param(pattern = "^(\\+[1-9][0-9]{6,14})?$")]
    phone: Option<String>,
}

/// A flow invitation or chat session, as the partner sees it (the guest's state and the user's answers
/// stay with the bot: a completed flow's answers went to it in `flow.completed`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BotSession)]
pub(super) struct SessionRecord {
    /// `flow_…` (a flow invitation) or the chat session's ref.
    #[serde(rename = "ref")]
    reference: String,
    /// The bot's code.
    bot: String,
    kind: SessionKind,
    /// The flow's code (none for a chat session).
    flow: Option<String>,
    /// The flow's title, as the invitation showed it.
    title: Option<String>,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: String,
    state: SessionState,
    /// When the invitation was sent or the chat opened.
    invited_at: String,
    completed_at: Option<String>,
}

/// List flow sessions, newest first.
#[utoipa::path(
    get,
    path = "/flow-sessions",
    tag = "bots",
    security(("partnerKey" = [])),
    params(SessionFilter, PageParams),
    responses(
        (status = 200, description = "A page of sessions", body = List<SessionRecord>),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
pub(super) async fn list_sessions(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(filter): ApiQuery<SessionFilter>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<SessionRecord>>> {
    let page = page.page()?;
    let phone = phone_filter(filter.phone)?;
    let bot = match query_text(filter.bot) {
        Some(code) => Some(owned(&state, &partner, &code).await?.id),
        None => None,
    };
    let rows =
        flows::sessions_of_partner(&state.db, partner.id, bot, phone.as_deref(), page.before, page.fetch()).await?;
    Ok(Json(page.list(
        rows,
        |(s, _)| s.id,
        |(s, bot)| SessionRecord {
            reference: s.reference.clone(),
            bot: bot.clone(),
            kind: s.kind,
            flow: s.flow.clone(),
            title: s.title.clone(),
            phone: s.phone.clone(),
            state: s.state,
            invited_at: record_time(s.invited_at),
            completed_at: s.completed_at.map(record_time),
        },
    )))
}
