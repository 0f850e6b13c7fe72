//! `GET /healthz` (the process answers) and `GET /readyz` (it can do its work: both database pools answer,
//! every migration is applied, the background workers run). Outside `/api/v1`, without credentials or rate
//! limits, for load balancers and orchestrators.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
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
    let checks = json!({ "database": database, "migrations": migrations, "workers": workers });
    if ready {
        (StatusCode::OK, Json(json!({ "status": "ready", "checks": checks })))
    } else {
        let failing: Vec<&str> = ["database", "migrations", "workers"]
            .into_iter()
            .filter(|k| checks[*k] != "ok" && !checks[*k].as_str().is_some_and(|v| v.starts_with("off")))
            .collect();
        let error = json!({ "code": "unavailable", "message": format!("not ready: {}", failing.join(", ")) });
        (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": error, "status": "not_ready", "checks": checks })))
    }
}
