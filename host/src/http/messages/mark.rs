//! Moving messages by hand: read, unread, and read in bulk.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::MessageRecord;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::{ApiJson, parse_id};
use crate::messages::Canceled;
use crate::names::MessageState;

/// Moves one of the partner's messages; answers the resulting record (unchanged when already there).
pub(super) async fn mark(
    state: &AppState,
    partner_id: i64,
    raw_id: &str,
    from: &[MessageState],
    to: MessageState,
) -> ApiResult<Json<MessageRecord>> {
    let id = parse_id(raw_id, "message")?;
    let record = crate::messages::mark_one(&state.db, partner_id, id, from, to, state.now()).await?;
    Ok(Json(MessageRecord::from(&record)))
}

/// Mark a message read.
#[utoipa::path(
    post,
    path = "/messages/{id}/read",
    tag = "messages",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The message", body = MessageRecord),
        (status = 404, response = crate::http::E404),
        (status = 409, response = crate::http::E409),
    )
)]
pub(super) async fn mark_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageRecord>> {
    mark(&state, partner.id, &id, &MessageState::BEFORE_READ, MessageState::Read).await
}

/// Mark a read message unread (back to delivered).
#[utoipa::path(
    post,
    path = "/messages/{id}/unread",
    tag = "messages",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The message", body = MessageRecord),
        (status = 404, response = crate::http::E404),
        (status = 409, response = crate::http::E409),
    )
)]
pub(super) async fn mark_unread(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageRecord>> {
    mark(&state, partner.id, &id, &[MessageState::Read], MessageState::Delivered).await
}

/// Either `message_ids` or `phone`. Ids of other partners' messages are ignored.
#[derive(Deserialize, ToSchema)]
pub(super) struct BulkRead {
    #[schema(max_items = 1000)]
    message_ids: Option<Vec<i64>>,
    /// Every message to this user (E.164).
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
}

/// How many messages changed state.
#[derive(Serialize, ToSchema)]
pub(super) struct Updated {
    updated: i64,
}

/// Mark messages read in bulk.
#[utoipa::path(
    post,
    path = "/messages/read",
    tag = "messages",
    security(("partnerKey" = [])),
    request_body = BulkRead,
    responses((status = 200, description = "How many messages changed state", body = Updated))
)]
pub(super) async fn mark_many_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<BulkRead>,
) -> ApiResult<Json<Updated>> {
    let moved = crate::messages::mark_read(
        &state.db,
        partner.id,
        req.message_ids.as_deref(),
        req.phone.as_deref(),
        state.now(),
    )
    .await?;
    let updated = moved as i64;
    Ok(Json(Updated { updated }))
}

/// Cancel a scheduled message before it goes (`send_at`).
///
/// It becomes `canceled` (with a `message.status` event) and is never sent. 409 when it is not scheduled:
/// sent, being sent at this moment, or canceled already.
#[utoipa::path(
    post,
    path = "/messages/{id}/cancel",
    tag = "messages",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The message, canceled", body = MessageRecord),
        (status = 404, response = crate::http::E404),
        (status = 409, response = crate::http::E409),
    )
)]
pub(super) async fn cancel_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageRecord>> {
    let id = parse_id(&id, "message")?;
    let now = state.clock.now_ms();
    match crate::messages::send::cancel(&state.db, partner.id, id, now).await? {
        Canceled::Canceled(m) => Ok(Json(MessageRecord::from(&m))),
        Canceled::TooLate(m) if m.state == MessageState::Scheduled => {
            Err(ApiError::conflict("the message is being sent now: it can no longer be canceled"))
        }
        Canceled::TooLate(m) => Err(ApiError::conflict(format!(
            "the message is {}, not scheduled: only a scheduled message that has not gone can be canceled",
            m.state.as_str()
        ))),
        Canceled::NotFound => Err(ApiError::not_found("message")),
    }
}
