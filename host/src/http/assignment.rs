//! `/settings/assignment`: how the partner's conversations find an agent (`manual`, `round_robin`,
//! `capacity`; `crate::assignment`), the default capacity, and the team as assignment sees it (each
//! member's status, capacity and conversations not closed). Admins and owners change it; each member sets
//! their own status (`PATCH /members/me`), owners anyone's status and capacity (`PATCH /members/{id}`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::http::{ApiJson, E403, E422};
use crate::names::{AgentStatus, AssignmentMode};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_assignment, set_assignment))
}

/// How the partner's conversations find an agent, and who takes them now.
#[derive(Serialize, ToSchema)]
#[schema(as = AssignmentSettings)]
struct Assignment {
    /// `manual`: agents take or are given conversations by hand. `round_robin`: a user's message in a
    /// conversation nobody has gives it to the member online given one longest ago; `capacity`: to the
    /// member online with the fewest conversations not closed. In both, never to a member at their capacity.
    mode: AssignmentMode,
    /// The capacity of a member who has none of their own.
    #[schema(minimum = 1, maximum = 1000)]
    default_capacity: i64,
    /// Open conversations nobody has (they go to the next member who becomes free).
    queued: i64,
    /// The members, oldest first, as assignment sees them.
    agents: Vec<AgentLoad>,
}

/// A member as assignment sees them.
#[derive(Serialize, ToSchema)]
struct AgentLoad {
    member_id: i64,
    name: Option<String>,
    status: AgentStatus,
    /// Their own capacity (null: the partner's default).
    capacity: Option<i64>,
    /// Conversations assigned to them and not closed.
    open_conversations: i64,
    /// The average of the ratings people gave conversations they had when closed (null: none yet).
    csat_average: Option<f64>,
    /// How many ratings.
    csat_count: i64,
}

/// A new way of assigning.
#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentUpdate)]
struct Update {
    #[schema(value_type = AssignmentMode, required = true)]
    mode: Option<AssignmentMode>,
    /// 1 to 1000; absent keeps the one set.
    #[schema(minimum = 1, maximum = 1000)]
    default_capacity: Option<i64>,
}

async fn assignment(state: &AppState, partner_id: i64) -> ApiResult<Assignment> {
    let overview = crate::assignment::overview(&state.db, partner_id).await?;
    let agents = overview
        .agents
        .into_iter()
        .map(|(m, open, average, count)| AgentLoad {
            member_id: m.id,
            open_conversations: open,
            csat_average: average.map(|avg| (avg * 100.0).round() / 100.0),
            csat_count: count,
            name: m.name,
            status: m.status,
            capacity: m.capacity,
        })
        .collect();
    let settings = overview.settings;
    Ok(Assignment { mode: settings.mode, default_capacity: settings.default_capacity, queued: overview.queued, agents })
}

/// How conversations are assigned.
#[utoipa::path(
    get,
    path = "/settings/assignment",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The way of assigning and the team", body = Assignment), (status = 403, response = E403))
)]
async fn get_assignment(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<Assignment>> {
    Ok(Json(assignment(&state, partner.id).await?))
}

/// Change how conversations are assigned.
///
/// From `manual` to another way, the queue is given out at once to the members online.
#[utoipa::path(
    put,
    path = "/settings/assignment",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = Update,
    responses(
        (status = 200, description = "The way of assigning and the team", body = Assignment),
        (status = 403, response = E403),
        (status = 422, response = E422),
    )
)]
async fn set_assignment(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<Update>,
) -> ApiResult<Json<Assignment>> {
    crate::assignment::configure(&state.db, partner.id, req.mode, req.default_capacity, state.now()).await?;
    Ok(Json(assignment(&state, partner.id).await?))
}
