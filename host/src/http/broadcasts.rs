//! `/broadcasts` and `/system/broadcasts`: the same content to every linked and claimed user of a partner
//! (or, for the platform partner, every claimed account). Accepted with 202; the fan-out runs in the
//! background (`crate::broadcasts`) and its progress is on the record.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::messages::SendMessage;
use super::{ApiJson, ApiQuery, E404, E422, List, PageParams, parse_id};
use crate::broadcasts::{self, Broadcast};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::ContentType;
use crate::partners::Partner;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_broadcast, list_broadcasts))
        .routes(routes!(get_broadcast))
        .routes(routes!(cancel_broadcast))
        .routes(routes!(audience_count))
        .routes(routes!(create_system_broadcast))
}

/// A broadcast and its progress.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Broadcast)]
pub struct BroadcastRecord {
    pub broadcast_id: i64,
    #[schema(schema_with = broadcast_state_schema)]
    pub state: String,
    /// `linked`, or `all` for system broadcasts.
    pub audience: String,
    #[schema(value_type = ContentType)]
    pub content_type: String,
    pub body: Option<String>,
    pub priority: String,
    /// Recipients, counted when the fan-out starts.
    pub total: Option<i64>,
    /// Messages written and handed to delivery.
    pub sent: i64,
    pub failed: i64,
    pub created_at: String,
    pub completed_at: Option<String>,
    /// When a scheduled broadcast goes out (absent: at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_at: Option<String>,
    /// One broadcast only (not in lists): how many of its messages are in each state now (`queued`,
    /// `delivered`, `read`, `failed`, …); states no message is in are left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub states: Option<std::collections::BTreeMap<String, i64>>,
}

/// The states of a broadcast, as a string enum.
fn broadcast_state_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["scheduled", "queued", "sending", "completed", "failed", "canceled"]))
        .build()
}

impl From<&Broadcast> for BroadcastRecord {
    fn from(b: &Broadcast) -> Self {
        BroadcastRecord {
            broadcast_id: b.id,
            state: b.state.clone(),
            audience: if b.audience == "all_claimed" { "all".to_string() } else { b.audience.clone() },
            content_type: b.content_type.clone(),
            body: b.body.clone(),
            priority: b.priority.clone(),
            total: b.total,
            sent: b.sent,
            failed: b.failed,
            created_at: record_time(b.created_at),
            completed_at: b.completed_at.map(record_time),
            send_at: b.send_at.map(record_time),
            states: None,
        }
    }
}

/// Content fields as for a message; no phone, no encryption.
#[derive(Deserialize, ToSchema)]
struct CreateBroadcast {
    #[schema(schema_with = audience_schema)]
    audience: Option<String>,
    #[serde(flatten)]
    message: SendMessage,
}

/// `audience`: `linked` or absent.
fn audience_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{SchemaType, Type};
    utoipa::openapi::ObjectBuilder::new()
        .description(Some(
            "`linked` (the default): every linked user who claimed the account. System broadcasts go to every claimed account whatever this says.",
        ))
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some([Value::from("linked"), Value::Null]))
        .default(Some(Value::from("linked")))
        .build()
}

async fn accept(
    state: &AppState,
    partner: &Partner,
    req: CreateBroadcast,
    audience: &'static str,
) -> ApiResult<(StatusCode, Json<BroadcastRecord>)> {
    let host = (state.config.dev, state.broadcast_wake.as_ref());
    let b = broadcasts::accept(&state.db, host, partner.id, &req.message, audience, state.now()).await?;
    let mut record = BroadcastRecord::from(&b);
    record.total = None;
    Ok((StatusCode::ACCEPTED, Json(record)))
}

/// Send the same content to every linked and claimed user; fans out in the background.
#[utoipa::path(
    post,
    path = "/broadcasts",
    tag = "broadcasts",
    security(("partnerKey" = [])),
    request_body = CreateBroadcast,
    responses((status = 202, description = "Accepted (state queued, total null)", body = BroadcastRecord))
)]
async fn create_broadcast(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateBroadcast>,
) -> ApiResult<(StatusCode, Json<BroadcastRecord>)> {
    match req.audience.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        None | Some("linked") => accept(&state, &partner, req, "linked").await,
        Some(_) => Err(ApiError::validation("audience", "audience must be linked")),
    }
}

/// Platform partner only: an announcement to every claimed account.
#[utoipa::path(
    post,
    path = "/system/broadcasts",
    tag = "broadcasts",
    security(("partnerKey" = [])),
    request_body = CreateBroadcast,
    responses((status = 202, description = "Accepted", body = BroadcastRecord))
)]
async fn create_system_broadcast(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateBroadcast>,
) -> ApiResult<(StatusCode, Json<BroadcastRecord>)> {
    if !partner.is_platform {
        return Err(ApiError::forbidden("system broadcasts are reserved for the platform partner"));
    }
    accept(&state, &partner, req, "all_claimed").await
}

/// Broadcasts, newest first.
#[utoipa::path(
    get,
    path = "/broadcasts",
    tag = "broadcasts",
    security(("partnerKey" = [])),
    params(PageParams),
    responses((status = 200, description = "A page of broadcasts", body = List<BroadcastRecord>), (status = 422, response = E422))
)]
async fn list_broadcasts(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<BroadcastRecord>>> {
    let page = page.page()?;
    let rows = broadcasts::list(&state.db, partner.id, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |b| b.id, |b| BroadcastRecord::from(b))))
}

/// A broadcast and its progress.
#[utoipa::path(
    get,
    path = "/broadcasts/{id}",
    tag = "broadcasts",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The broadcast", body = BroadcastRecord), (status = 404, response = E404))
)]
async fn get_broadcast(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<BroadcastRecord>> {
    let id = parse_id(&id, "broadcast")?;
    let b = broadcasts::find(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("broadcast"))?;
    let states = broadcasts::message_states(&state.db, b.id).await?;
    let mut record = BroadcastRecord::from(&b);
    record.states = Some(states.into_iter().map(|(s, n)| (s.as_str().to_string(), n)).collect());
    Ok(Json(record))
}

/// Who a broadcast would reach now.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BroadcastAudience)]
pub struct AudienceCount {
    /// `linked`: the linked users who claimed their account.
    pub audience: String,
    /// How many users that is now (the broadcast counts again when its fan-out starts).
    pub count: i64,
}

/// How many users a broadcast would reach, before sending one.
#[utoipa::path(
    get,
    path = "/broadcasts/audience",
    tag = "broadcasts",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The audience and its size now", body = AudienceCount))
)]
async fn audience_count(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<AudienceCount>> {
    let count = broadcasts::audience_size(&state.db, partner.id, "linked").await?;
    Ok(Json(AudienceCount { audience: "linked".into(), count }))
}

/// Cancel a scheduled broadcast (`send_at`) before it goes out: it becomes `canceled` and reaches no one.
/// 409 once it has started (or was never scheduled, or is canceled already).
#[utoipa::path(
    post,
    path = "/broadcasts/{id}/cancel",
    tag = "broadcasts",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The broadcast, canceled", body = BroadcastRecord),
        (status = 404, response = crate::http::E404),
        (status = 409, response = crate::http::E409),
    )
)]
async fn cancel_broadcast(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<BroadcastRecord>> {
    let id = parse_id(&id, "broadcast")?;
    let b = broadcasts::cancel(&state.db, partner.id, id, state.now()).await?;
    Ok(Json(BroadcastRecord::from(&b)))
}
