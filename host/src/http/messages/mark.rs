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
use crate::names::MessageState;
use crate::store::messages::{self as store, Canceled};
use crate::validate::is_e164;

/// Moves one of the partner's messages; answers the resulting record (unchanged when already there).
pub(super) async fn mark(
    state: &AppState,
    partner_id: i64,
    raw_id: &str,
    from: &[MessageState],
    to: MessageState,
) -> ApiResult<Json<MessageRecord>> {
    let id = parse_id(raw_id, "message")?;
    let current =
        store::find_message(&state.db, partner_id, id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    if current.state == MessageState::Failed {
        return Err(ApiError::conflict("the message failed to deliver; it cannot be marked"));
    }
    let moved = crate::messages::mark(&state.db, &[id], from, to, state.now()).await?;
    let record = match moved.into_iter().next() {
        Some(m) => m,
        None => store::find_message(&state.db, partner_id, id).await?.unwrap_or(current),
    };
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
    // A phone that is given must be one (an empty string is not "no phone").
    let ids = match (&req.message_ids, req.phone.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::validation("message_ids", "give message_ids or phone, not both"));
        }
        (None, None) => {
            return Err(ApiError::validation("message_ids", "message_ids or phone is required"));
        }
        (Some(ids), None) => {
            if ids.len() > 1000 {
                return Err(ApiError::validation("message_ids", "at most 1000 message_ids at once"));
            }
            store::partner_message_ids(&state.db, partner.id, None, ids).await?
        }
        (None, Some(phone)) => {
            if !is_e164(phone) {
                return Err(ApiError::validation("phone", "phone must be E.164"));
            }
            store::partner_message_ids(&state.db, partner.id, Some(phone), &[]).await?
        }
    };
    let moved =
        crate::messages::mark(&state.db, &ids, &MessageState::BEFORE_READ, MessageState::Read, state.now()).await?;
    let updated = moved.len() as i64;
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
