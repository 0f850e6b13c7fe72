//! Applying a macro to a conversation (`crate::macros`: checked again when applied, then run as one agent's
//! actions).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::agent::reply_message;
use super::{ConversationRecord, agent_thread, record};
use crate::conversations::Reader;
use crate::http::auth::PartnerActor;
use crate::http::error::{ApiError, ApiResult};
use crate::http::messages::{MessageRecord, SendMessage};
use crate::http::state::AppState;
use crate::http::{ApiJson, E404, E409, E422};
use crate::macros::Assignee;
use crate::store::conversations as store;
use crate::store::labels::{self, Change};
use crate::store::{keys, macros};

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
    let id = req
        .macro_id
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::validation("macro_id", "macro_id is a macro's id"))?;
    let saved = macros::find(&state.db, partner, id)
        .await?
        .ok_or_else(|| ApiError::validation("macro_id", "no such macro of this partner"))?;
    let actions: Vec<crate::macros::Action> = serde_json::from_value(saved.actions).map_err(ApiError::internal)?;
    let plan = crate::macros::plan(&state.db, partner, &actions).await?.map_err(|e| {
        ApiError::validation(
            "macro_id",
            format!("this macro no longer applies ({}: {}): change it", e.field, e.message),
        )
    })?;
    let assignee = match plan.assign {
        None => None,
        Some(Assignee::Nobody) => Some(None),
        Some(Assignee::Member(id)) => Some(Some(id)),
        Some(Assignee::Applier) => match &actor.member {
            Some(m) => Some(Some(m.id)),
            None => {
                return Err(ApiError::validation(
                    "macro_id",
                    "this macro assigns to the member applying it (me), and the partner key is no member",
                ));
            }
        },
    };
    let mut message = None;
    if let Some(body) = plan.reply {
        if keys::latest_key_version(&state.db, c.id).await?.is_some() {
            return Err(ApiError::conflict(
                "this conversation is end-to-end encrypted: its replies are sealed in an agent's browser, and a \
                 macro's reply would go in plaintext",
            ));
        }
        let send = SendMessage { body: Some(body), ..SendMessage::default() };
        let (m, _) = reply_message(&state, partner, actor.member.as_ref(), &c, &send, None).await?;
        message = Some(MessageRecord::from(&m));
    }
    let now = state.now();
    if !plan.labels.is_empty() {
        labels::put_on(&state.db, &c, &plan.labels, Change::Add, now).await?;
    }
    if let Some(note) = &plan.note {
        store::add_note(&state.db, &c, actor.member.as_ref().map(|m| m.id), note, now).await?;
    }
    if let Some(assignee) = assignee {
        store::assign(&state.db, partner, c.id, assignee, now)
            .await?
            .ok_or_else(|| ApiError::validation("macro_id", "the member this macro assigns to is gone: change it"))?;
    }
    if plan.close {
        crate::conversations::close(&state.sending(), partner, c.id).await?;
    }
    let c =
        store::find_for_partner(&state.db, partner, c.id).await?.ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok(Json(Applied { conversation: record(&state, &c, Reader::Agent).await?, message }))
}
