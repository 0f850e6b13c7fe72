//! `GET /metrics`: the Prometheus text format, outside `/api/v1`. Off unless `HUBBUB_METRICS_TOKEN` is set
//! (404); then the scraper presents it as `Authorization: Bearer <token>` (401 otherwise).

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::{ApiError, ApiResult};
use crate::secrets::constant_time_eq;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(scrape))
}

async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let Some(token) = state.config.metrics_token.as_deref().filter(|t| !t.is_empty()) else {
        return Err(ApiError::not_found("metrics (set HUBBUB_METRICS_TOKEN to serve them)"));
    };
    let presented = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if !presented.is_some_and(|p| constant_time_eq(p.trim(), token)) {
        return Err(ApiError::unauthorized("metrics need Authorization: Bearer <HUBBUB_METRICS_TOKEN>"));
    }
    let text = crate::metrics::render(&state.db, state.now()).await?;
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}
