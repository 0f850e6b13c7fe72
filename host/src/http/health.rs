//! `GET /healthz` (the process answers) and `GET /readyz` (it can do its work: both database pools answer,
//! every migration is applied, the background workers run). Outside `/api/v1`, without credentials or rate
//! limits, for load balancers and orchestrators.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz))
}

/// A string schema with exactly one value.
fn only(value: &'static str) -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::Type::String).enum_values(Some([value])).build()
}

fn ok() -> utoipa::openapi::Object {
    only("ok")
}

fn ready() -> utoipa::openapi::Object {
    only("ready")
}

fn not_ready() -> utoipa::openapi::Object {
    only("not_ready")
}

fn unavailable() -> utoipa::openapi::Object {
    only("unavailable")
}

/// The process answers.
#[derive(Serialize, ToSchema)]
struct Alive {
    #[schema(schema_with = ok)]
    status: &'static str,
}

/// Liveness: the process answers (outside /api/v1; no credentials, no rate limit).
#[utoipa::path(get, path = "/healthz", tag = "meta", responses((status = 200, description = "Alive", body = Alive)))]
async fn healthz() -> Json<Alive> {
    Json(Alive { status: "ok" })
}

/// Each readiness check: `ok`, or what is wrong.
#[derive(Serialize, ToSchema)]
#[schema(as = ReadinessChecks)]
struct Checks {
    database: String,
    migrations: String,
    /// `ok`, `off (API-only host)`, or the workers that stopped.
    workers: String,
}

/// The host can do its work.
#[derive(Serialize, ToSchema)]
struct Ready {
    #[schema(schema_with = ready)]
    status: &'static str,
    checks: Checks,
}

/// The host cannot do its work: the error says which checks failed.
#[derive(Serialize, ToSchema)]
struct NotReady {
    error: NotReadyError,
    #[schema(schema_with = not_ready)]
    status: &'static str,
    checks: Checks,
}

/// The error of a failed readiness check.
#[derive(Serialize, ToSchema)]
struct NotReadyError {
    #[schema(schema_with = unavailable)]
    code: &'static str,
    message: String,
}

/// Readiness: both database pools answer, every migration is applied, the background workers run (outside /api/v1; no credentials, no rate limit).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "meta",
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, description = "Not ready: the error says which check failed; `checks` has each", body = NotReady),
    )
)]
async fn readyz(State(state): State<AppState>) -> Result<Json<Ready>, (StatusCode, Json<NotReady>)> {
    let database = match state.db.ping().await {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("unavailable: {e}"),
    };
    let migrations = match state.db.pending_migrations().await {
        Ok(0) => "ok".to_string(),
        Ok(n) => format!("{n} not applied"),
        Err(e) => format!("unknown: {e}"),
    };
    let stopped = state.workers.stopped();
    let workers = match (state.config.workers, stopped.is_empty()) {
        (false, _) => "off (API-only host)".to_string(),
        (true, true) => "ok".to_string(),
        (true, false) => format!("stopped: {}", stopped.join(", ")),
    };
    let ready = database == "ok" && migrations == "ok" && (stopped.is_empty());
    let checks = Checks { database, migrations, workers };
    if ready {
        return Ok(Json(Ready { status: "ready", checks }));
    }
    let failing: Vec<&str> =
        [("database", &checks.database), ("migrations", &checks.migrations), ("workers", &checks.workers)]
            .into_iter()
            .filter(|(_, v)| *v != "ok" && !v.starts_with("off"))
            .map(|(k, _)| k)
            .collect();
    let error = NotReadyError { code: "unavailable", message: format!("not ready: {}", failing.join(", ")) };
    Err((StatusCode::SERVICE_UNAVAILABLE, Json(NotReady { error, status: "not_ready", checks })))
}
