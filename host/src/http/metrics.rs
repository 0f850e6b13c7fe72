//! `GET /metrics`: the Prometheus text format, outside `/api/v1`. Off unless `HUBBUB_METRICS_TOKEN` is set
//! (404); then the scraper presents it as `Authorization: Bearer <token>` (401 otherwise).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{E401, E404};
use crate::http::error::{ApiError, ApiResult};
use crate::secrets::constant_time_eq;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(scrape))
}

/// Prometheus metrics in the text format (outside /api/v1).
///
/// Requests by route and status with latency histograms, messages accepted and delivered by channel, delivery
/// and webhook backlogs, webhook attempts by outcome, bot calls by bot and outcome, rate-limit refusals,
/// broadcasts in progress, the bot runtime's resident pool memory. Off (404) unless HUBBUB_METRICS_TOKEN is
/// set; then that token as a bearer credential.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    responses(
        (status = 200, description = "The metrics", content((String = "text/plain"))),
        (status = 401, response = E401),
        (status = 404, response = E404),
    )
)]
async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let Some(token) = state.config.metrics_token.as_deref().filter(|t| !t.is_empty()) else {
        return Err(ApiError::not_found("metrics (set HUBBUB_METRICS_TOKEN to serve them)"));
    };
    let presented = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if !presented.is_some_and(|p| constant_time_eq(p.trim(), token)) {
        return Err(ApiError::unauthorized("metrics need Authorization: Bearer <HUBBUB_METRICS_TOKEN>"));
    }
    let text = crate::metrics::render(&state.db, &state.runtime, state.now()).await?;
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}
