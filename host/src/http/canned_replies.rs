//! A partner's canned replies: the answers its agents send often, each under a shortcut (`refund`,
//! `opening-hours`) the agent picks in the console's reply box. Every member reads them; admins and owners
//! (or the partner key) write them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E422, List, parse_id};
use crate::canned_replies::{self, CannedReply};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_canned_replies, create_canned_reply))
        .routes(routes!(replace_canned_reply, delete_canned_reply))
}

/// A canned reply.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CannedReply)]
struct CannedReplyRecord {
    id: i64,
    shortcut: String,
    body: String,
    created_at: String,
    updated_at: String,
}

impl From<&CannedReply> for CannedReplyRecord {
    fn from(r: &CannedReply) -> Self {
        CannedReplyRecord {
            id: r.id,
            shortcut: r.shortcut.clone(),
            body: r.body.clone(),
            created_at: record_time(r.created_at),
            updated_at: record_time(r.updated_at),
        }
    }
}

/// A canned reply to keep.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewCannedReply)]
struct NewReply {
    /// Its name in the reply box: 1 to 32 of `a-z`, `0-9`, `-` and `_`, unique among the partner's.
    #[schema(value_type = String, required = true, pattern = "^[a-z0-9_-]{1,32}$")]
    shortcut: Option<String>,
    /// The text the agent sends: 1 to 4096 characters, not only spaces.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 4096, pattern = "\\S")]
    body: Option<String>,
}

/// My canned replies.
///
/// All of them, by shortcut.
#[utoipa::path(
    get,
    path = "/canned-replies",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The replies", body = List<CannedReplyRecord>))
)]
async fn list_canned_replies(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<CannedReplyRecord>>> {
    let replies = canned_replies::list(&state.db, partner.id).await?;
    Ok(Json(List { data: replies.iter().map(CannedReplyRecord::from).collect(), next_cursor: None }))
}

/// Keep a canned reply.
#[utoipa::path(
    post,
    path = "/canned-replies",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = NewReply,
    responses(
        (status = 201, description = "The reply", body = CannedReplyRecord),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
async fn create_canned_reply(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<NewReply>,
) -> ApiResult<(StatusCode, Json<CannedReplyRecord>)> {
    let made = canned_replies::create(&state.db, partner.id, req.shortcut.as_deref(), req.body.as_deref(), state.now())
        .await?;
    Ok((StatusCode::CREATED, Json(CannedReplyRecord::from(&made))))
}

/// Replace a canned reply.
///
/// Its shortcut and body both, as given.
#[utoipa::path(
    put,
    path = "/canned-replies/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(("id" = i64, Path, description = "The reply's id")),
    request_body = NewReply,
    responses(
        (status = 200, description = "The reply", body = CannedReplyRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
async fn replace_canned_reply(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<NewReply>,
) -> ApiResult<Json<CannedReplyRecord>> {
    let id = parse_id(&id, "canned reply")?;
    let (shortcut, body) = (req.shortcut.as_deref(), req.body.as_deref());
    let replaced = canned_replies::replace(&state.db, partner.id, id, shortcut, body, state.now()).await?;
    Ok(Json(CannedReplyRecord::from(&replaced)))
}

/// Delete a canned reply.
#[utoipa::path(
    delete,
    path = "/canned-replies/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(("id" = i64, Path, description = "The reply's id")),
    responses((status = 204, description = "Deleted"), (status = 404, response = E404))
)]
async fn delete_canned_reply(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = parse_id(&id, "canned reply")?;
    canned_replies::delete(&state.db, partner.id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
