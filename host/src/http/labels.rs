//! A partner's labels: names its agents put on conversations (`PATCH /conversations/{id}` `labels`, or a
//! macro) and filter the list by (`GET /conversations?label=`). Every member reads them; admins and owners
//! (or the partner key) keep them.

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
use crate::labels::{self, Label};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_labels, create_label)).routes(routes!(delete_label))
}

/// A label.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Label)]
struct LabelRecord {
    id: i64,
    name: String,
    /// How the console shows it: `#rrggbb`.
    color: String,
    /// How many of the partner's conversations carry it.
    conversations: i64,
    created_at: String,
}

impl From<&Label> for LabelRecord {
    fn from(l: &Label) -> Self {
        LabelRecord {
            id: l.id,
            name: l.name.clone(),
            color: l.color.clone(),
            conversations: l.conversations,
            created_at: record_time(l.created_at),
        }
    }
}

/// A label to keep.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewLabel)]
struct NewLabel {
    /// 1 to 50 of `a-z`, `0-9`, `-` and `_` (upper case is kept lower case), unique among the partner's.
    #[schema(value_type = String, required = true, pattern = "^\\s*[A-Za-z0-9_-]{1,50}\\s*$")]
    name: Option<String>,
    /// `#rrggbb`; a grey when absent.
    #[schema(pattern = "^#[0-9a-fA-F]{6}$")]
    color: Option<String>,
}

/// My labels.
///
/// All of them, by name, each with how many conversations carry it.
#[utoipa::path(
    get,
    path = "/labels",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The labels", body = List<LabelRecord>))
)]
async fn list_labels(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<List<LabelRecord>>> {
    let kept = labels::list(&state.db, partner.id).await?;
    Ok(Json(List { data: kept.iter().map(LabelRecord::from).collect(), next_cursor: None }))
}

/// Keep a label.
#[utoipa::path(
    post,
    path = "/labels",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = NewLabel,
    responses(
        (status = 201, description = "The label", body = LabelRecord),
        (status = 409, response = E409),
        (status = 422, response = E422),
    )
)]
async fn create_label(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<NewLabel>,
) -> ApiResult<(StatusCode, Json<LabelRecord>)> {
    let made = labels::create(&state.db, partner.id, req.name.as_deref(), req.color.as_deref(), state.now()).await?;
    Ok((StatusCode::CREATED, Json(LabelRecord::from(&made))))
}

/// Delete a label.
///
/// The conversations that carry it lose it; macros that add it are refused when applied until it is kept
/// again (or they are changed).
#[utoipa::path(
    delete,
    path = "/labels/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(("id" = i64, Path, description = "The label's id")),
    responses((status = 204, description = "Deleted"), (status = 404, response = E404))
)]
async fn delete_label(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = parse_id(&id, "label")?;
    labels::delete(&state.db, partner.id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
