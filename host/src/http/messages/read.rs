//! Reading the partner's messages: one with its delivery attempts, and the list.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{AttemptRecord, MessageRecord, StateChangeRecord};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::{ApiQuery, List, PageParams, parse_id};
use crate::messages::{self, MessageFilter};
use crate::names::MessageState;
use crate::validate::phone_filter;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct GetMessageQuery {
    /// A comma-separated list: `attempts` adds the delivery attempts, `events` the changes of state.
    include: Option<String>,
}

/// Get a message.
#[utoipa::path(
    get,
    path = "/messages/{id}",
    tag = "messages",
    security(("partnerKey" = [])),
    params(GetMessageQuery),
    responses(
        (status = 200, description = "The message; with `include=attempts` also `attempts`, with `include=events` also `events`", body = MessageRecord),
        (status = 404, response = crate::http::E404),
    )
)]
pub(super) async fn get_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<GetMessageQuery>,
) -> ApiResult<Json<MessageRecord>> {
    let id = parse_id(&id, "message")?;
    let m = messages::find_message(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    let mut record = MessageRecord::from(&m);
    let include = query.include.unwrap_or_default();
    let wants = |part: &str| include.split(',').any(|p| p.trim() == part);
    if wants("events") {
        let changes = messages::list_state_changes(&state.db, m.id).await?;
        record.events = Some(
            changes
                .into_iter()
                .map(|c| StateChangeRecord { state: c.state, channel: c.channel, at: record_time(c.at) })
                .collect(),
        );
    }
    if wants("attempts") {
        let attempts = messages::list_attempts(&state.db, m.id).await?;
        record.attempts = Some(attempts.into_iter().map(AttemptRecord::from).collect());
    }
    Ok(Json(record))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListMessagesQuery {
    /// Only this user's messages (E.164; empty: every user's).
    #[param(pattern = "^(\\+[1-9][0-9]{6,14})?$")]
    phone: Option<String>,
    /// Only messages in this state.
    state: Option<MessageState>,
    /// Search in body and phone.
    q: Option<String>,
}

/// List messages, newest first.
#[utoipa::path(
    get,
    path = "/messages",
    tag = "messages",
    security(("partnerKey" = [])),
    params(ListMessagesQuery, PageParams),
    responses((status = 200, description = "A page of messages", body = List<MessageRecord>))
)]
pub(super) async fn list_messages(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(query): ApiQuery<ListMessagesQuery>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<MessageRecord>>> {
    let page = page.page()?;
    let filter = MessageFilter {
        phone: phone_filter(query.phone)?,
        state: query.state,
        q: query.q.map(|q| q.trim().to_string()).filter(|q| !q.is_empty()),
        before: page.before,
        limit: page.fetch(),
    };
    let rows = messages::list_messages(&state.db, partner.id, &filter).await?;
    Ok(Json(page.list(rows, |m| m.id, |m| MessageRecord::from(m))))
}
