//! A partner's macros: several actions on a conversation under one name (a reply, labels, an assignee, a
//! note, closing), applied by an agent at once (`POST /conversations/{id}/macro`). What an action may be is
//! `crate::macros`'s. Every member reads them; admins and owners (or the partner key) keep them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E422, List, parse_id};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::macros::{self, Action, Macro};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_macros, create_macro)).routes(routes!(replace_macro, delete_macro))
}

/// A macro.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Macro)]
struct MacroRecord {
    id: i64,
    name: String,
    /// What it does, in the order saved (applied, they run reply, labels, note, assignee, close).
    actions: Vec<Action>,
    created_at: String,
    updated_at: String,
}

impl From<&Macro> for MacroRecord {
    fn from(m: &Macro) -> Self {
        MacroRecord {
            id: m.id,
            name: m.name.clone(),
            // Kept as checked when saved: a row that no longer reads is shown with no actions.
            actions: serde_json::from_value(m.actions.clone()).unwrap_or_default(),
            created_at: record_time(m.created_at),
            updated_at: record_time(m.updated_at),
        }
    }
}

/// A macro to keep.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewMacro)]
struct NewMacro {
    /// 1 to 80 characters, not only spaces, unique among the partner's.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 80, pattern = "\\S")]
    name: Option<String>,
    /// 1 to 10 actions, each kind at most once; labels, canned replies and members it names must be the
    /// partner's.
    #[schema(value_type = Vec<Action>, required = true, min_items = 1, max_items = 10)]
    actions: Option<Vec<Action>>,
}

/// My macros.
///
/// All of them, by name.
#[utoipa::path(
    get,
    path = "/macros",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The macros", body = List<MacroRecord>))
)]
async fn list_macros(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<MacroRecord>>> {
    let kept = macros::list(&state.db, partner.id).await?;
    Ok(Json(List { data: kept.iter().map(MacroRecord::from).collect(), next_cursor: None }))
}

/// Keep a macro.
#[utoipa::path(
    post,
    path = "/macros",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = NewMacro,
    responses(
        (status = 201, description = "The macro", body = MacroRecord),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
async fn create_macro(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<NewMacro>,
) -> ApiResult<(StatusCode, Json<MacroRecord>)> {
    let actions = req.actions.as_deref().unwrap_or(&[]);
    let made = macros::create(&state.db, partner.id, req.name.as_deref(), actions, state.now()).await?;
    Ok((StatusCode::CREATED, Json(MacroRecord::from(&made))))
}

/// Replace a macro.
///
/// Its name and actions both, as given.
#[utoipa::path(
    put,
    path = "/macros/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(("id" = i64, Path, description = "The macro's id")),
    request_body = NewMacro,
    responses(
        (status = 200, description = "The macro", body = MacroRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
async fn replace_macro(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<NewMacro>,
) -> ApiResult<Json<MacroRecord>> {
    let id = parse_id(&id, "macro")?;
    let actions = req.actions.as_deref().unwrap_or(&[]);
    let replaced = macros::replace(&state.db, partner.id, id, req.name.as_deref(), actions, state.now()).await?;
    Ok(Json(MacroRecord::from(&replaced)))
}

/// Delete a macro.
#[utoipa::path(
    delete,
    path = "/macros/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(("id" = i64, Path, description = "The macro's id")),
    responses((status = 204, description = "Deleted"), (status = 404, response = E404))
)]
async fn delete_macro(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = parse_id(&id, "macro")?;
    macros::delete(&state.db, partner.id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
