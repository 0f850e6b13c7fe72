//! Prometheus metrics: `GET /metrics` (the text format, outside `/api/v1`; off unless `HUBBUB_METRICS_TOKEN`
//! is set, 404; then the scraper presents it as `Authorization: Bearer <token>`, 401 otherwise), and the
//! recorder behind it. The code records through the `metrics` facade; this module installs the exporter's
//! recorder (once per process: a metrics registry is process-wide by nature, so every host in a test
//! process shares it) and renders the text format for `GET /metrics`, after refreshing the gauges that are
//! read at scrape time (backlogs and broadcasts in progress from the database; the bot runtime's pool).
//!
//! What is recorded, and where:
//! - `hubbub_http_requests_total{route, method, status}`, `hubbub_http_request_duration_seconds{route, method}`:
//!   [`track_request`], a route layer of the API;
//! - `hubbub_messages_accepted_total`: outbound messages accepted one by one (sends, developers' templates,
//!   flow cards, agents' replies; a broadcast's messages are its fan-out's, not counted here);
//!   `hubbub_messages_total{channel, state}` (`sent` or `failed`, by the delivery worker);
//! - `hubbub_delivery_backlog`, `hubbub_delivery_backlog_oldest_seconds`, `hubbub_webhook_backlog`,
//!   `hubbub_webhook_backlog_oldest_seconds`, `hubbub_broadcasts_in_progress`: gauges refreshed at scrape;
//! - `hubbub_bot_pool_resident_bytes`: guest memory the runtime's idle pooled slots keep resident for the
//!   next calls (up to 8 MiB per linear memory a guest dirtied), refreshed at scrape;
//! - `hubbub_webhook_attempts_total{outcome}` (`succeeded`, `pending` = will retry, `dead`);
//! - `hubbub_bot_calls_total{bot, outcome}` (`ok`, `timeout`, `out_of_memory`, `trap`, …),
//!   `hubbub_bot_call_duration_seconds{bot}`;
//! - `hubbub_rate_limited_total{limit}` (`credential`, `developer`, `code_route`).

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{E401, E404};
use crate::clock::Millis;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::runtime::Runtime;
use crate::secrets::constant_time_eq;
use crate::store::{Db, broadcasts, deliveries, outbox};

static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();

/// Latency buckets, in seconds: from a cached read to a slow bot or provider.
const BUCKETS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The process's recorder, installed on first use.
pub fn handle() -> &'static PrometheusHandle {
    RECORDER.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder was installed first; /metrics will stay empty");
        }
        handle
    })
}

/// Counts and times every routed request by its route template (never its concrete path: ids and refs
/// stay out of the metrics).
pub async fn track_request(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let method = request.method().as_str().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!("hubbub_http_request_duration_seconds", "route" => route.clone(), "method" => method.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!("hubbub_http_requests_total", "route" => route, "method" => method, "status" => status)
        .increment(1);
    response
}

/// The text exposition, with the gauges read now.
pub async fn render(db: &Db, runtime: &Runtime, now: Millis) -> Result<String, sqlx::Error> {
    let age = |oldest: Option<Millis>| oldest.map(|t| ((now - t).max(0)) as f64 / 1000.0).unwrap_or(0.0);
    let (jobs, oldest_job) = deliveries::backlog(db, now).await?;
    metrics::gauge!("hubbub_delivery_backlog").set(jobs as f64);
    metrics::gauge!("hubbub_delivery_backlog_oldest_seconds").set(age(oldest_job));
    let (events, oldest_event) = outbox::backlog(db).await?;
    metrics::gauge!("hubbub_webhook_backlog").set(events as f64);
    metrics::gauge!("hubbub_webhook_backlog_oldest_seconds").set(age(oldest_event));
    metrics::gauge!("hubbub_broadcasts_in_progress").set(broadcasts::in_progress(db).await? as f64);
    metrics::gauge!("hubbub_bot_pool_resident_bytes").set(runtime.pool_resident_bytes() as f64);
    Ok(handle().render())
}

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
    let text = render(&state.db, &state.runtime, state.now()).await?;
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}
