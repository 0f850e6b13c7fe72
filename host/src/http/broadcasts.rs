//! `/broadcasts` and `/system/broadcasts`: the same content to every linked and claimed user of a partner
//! (or, for the platform partner, every claimed account). Accepted with 202; the fan-out runs in the
//! background (`crate::broadcasts`) and its progress is on the record.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::messages::{SendMessage, validate_content};
use super::{ApiJson, QueryMap, parse_id};
use crate::auth::PartnerAuth;
use crate::clock::record_time;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::broadcasts::{self as store, Broadcast, NewBroadcast};
use crate::store::partners::Partner;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/broadcasts", post(create).get(list))
        .route("/broadcasts/{id}", get(get_one))
        .route("/system/broadcasts", post(create_system))
}

pub fn broadcast_json(b: &Broadcast) -> Value {
    json!({
        "broadcast_id": b.id,
        "state": b.state,
        "audience": if b.audience == "all_claimed" { "all" } else { b.audience.as_str() },
        "content_type": b.content_type,
        "body": b.body,
        "priority": b.priority,
        "total": b.total,
        "sent": b.sent,
        "failed": b.failed,
        "created_at": record_time(b.created_at),
        "completed_at": b.completed_at.map(record_time),
    })
}

#[derive(Deserialize)]
struct CreateBroadcast {
    audience: Option<String>,
    #[serde(flatten)]
    message: SendMessage,
}

async fn accept(
    state: &AppState,
    partner: &Partner,
    req: CreateBroadcast,
    audience: &'static str,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if req.message.phone.is_some() {
        return Err(ApiError::validation("phone", "a broadcast goes to its audience; phone is not accepted"));
    }
    let content = validate_content(state, partner.id, &req.message, None).await?;
    let new = NewBroadcast {
        partner_id: partner.id,
        audience,
        content_type: content.content_type.to_string(),
        body: content.body,
        rendered_body: content.rendered_body,
        template_code: content.template_code,
        lang: content.lang,
        priority: content.priority,
        content: serde_json::to_value(content.content).expect("content serialises"),
        media: content.media,
    };
    let b = store::insert(&state.db, &new, state.now()).await?;
    state.broadcast_wake.notify_one();
    let mut body = broadcast_json(&b);
    body["total"] = Value::Null;
    Ok((StatusCode::ACCEPTED, Json(body)))
}

async fn create(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateBroadcast>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    match req.audience.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        None | Some("linked") => accept(&state, &partner, req, "linked").await,
        Some(_) => Err(ApiError::validation("audience", "audience must be linked")),
    }
}

/// Global announcements: the platform partner only, to every claimed account.
async fn create_system(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<CreateBroadcast>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if !partner.is_platform {
        return Err(ApiError::forbidden("system broadcasts are reserved for the platform partner"));
    }
    accept(&state, &partner, req, "all_claimed").await
}

async fn list(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let rows = store::list(&state.db, partner.id, page.before, page.fetch()).await?;
    Ok(Json(page.respond(rows, |b| b.id, broadcast_json)))
}

async fn get_one(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, "broadcast")?;
    let b = store::find(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("broadcast"))?;
    Ok(Json(broadcast_json(&b)))
}
