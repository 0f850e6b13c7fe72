//! Applying a macro to a conversation (`crate::macros`: checked again when applied, then run as one agent's
//! actions).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ConversationRecord, agent_thread, record};
use crate::conversations::Reader;
use crate::desk;
use crate::http::auth::PartnerActor;
use crate::http::error::ApiResult;
use crate::http::messages::MessageRecord;
use crate::http::state::AppState;
use crate::http::{ApiJson, E404, E409, E422};

#[derive(Deserialize, ToSchema)]
#[schema(as = ApplyMacro)]
pub(super) struct ApplyMacro {
    /// One of the partner's macros (`GET /macros`).
    #[schema(value_type = i64, required = true, minimum = 1)]
    macro_id: Option<i64>,
}

/// What applying a macro did.
#[derive(Serialize, ToSchema)]
#[schema(as = MacroApplied)]
pub(super) struct Applied {
    /// The conversation after it.
    conversation: ConversationRecord,
    /// The reply it sent (null: it has none).
    message: Option<MessageRecord>,
}

/// Apply a macro to a conversation.
///
/// Its actions are checked again against what the partner has now (a label or a canned reply may have gone:
/// 422 on `macro_id`, and nothing is done), then run as the caller's: the reply first (refused as a reply
/// would be: 409 outside WhatsApp's window, or in an end-to-end encrypted conversation, whose replies are
/// sealed in the agent's browser), then the labels, the note, the assignee (`me` is the member applying it:
/// not the partner key) and closing.
#[utoipa::path(
    post,
    path = "/conversations/{id}/macro",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = ApplyMacro,
    responses(
        (status = 200, description = "What it did", body = Applied),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
pub(super) async fn apply_macro(
    State(state): State<AppState>,
    actor: PartnerActor,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<ApplyMacro>,
) -> ApiResult<Json<Applied>> {
    let partner = actor.partner.id;
    let c = agent_thread(&state, partner, &id).await?;
    let (c, message) = desk::apply_macro(&state.desk(), partner, actor.member.as_ref(), &c, req.macro_id).await?;
    let message = message.as_ref().map(MessageRecord::from);
    Ok(Json(Applied { conversation: record(&state, &c, Reader::Agent).await?, message }))
}
