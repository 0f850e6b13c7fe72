//! `/settings/webhook`, `/webhooks/test`, `/webhooks/deliveries`: where a partner's events go, a signed
//! test ping, and the delivery log with manual retry.

use axum::extract::{Path, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiJson, QueryMap};
use crate::auth::PartnerAuth;
use crate::clock::{iso_time, record_time};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::outbox::{self, Delivery, Target};
use crate::store::{developers, partners};
use crate::webhooks::{self, Endpoint, signing};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/settings/webhook", put(set_webhook))
        .route("/webhooks/test", post(test_webhook))
        .route("/webhooks/deliveries", get(list_deliveries))
        .route("/webhooks/deliveries/{id}/retry", post(retry_delivery))
}

#[derive(Deserialize)]
pub struct SetWebhook {
    webhook_url: Option<String>,
    rotate_secret: Option<bool>,
}

/// Applies webhook settings for a partner or a developer: checks the URL, creates the secret on first
/// use or rotation, and answers the settings with the secret only when it is new.
pub async fn apply_settings(state: &AppState, target: Target, req: SetWebhook) -> ApiResult<Value> {
    let url = req.webhook_url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    if let Some(url) = url {
        webhooks::check_url(url, state.config.dev)
            .await
            .map_err(|why| ApiError::validation("webhook_url", format!("webhook_url {why}")))?;
    }
    let current = match target {
        Target::Developer(id) => developers::webhook_secret(&state.db, id).await?,
        _ => partners::webhook_secret(&state.db, target.id()).await?,
    };
    let new_secret = (current.is_none() || req.rotate_secret.unwrap_or(false)).then(signing::new_secret);
    match target {
        Target::Developer(id) => developers::set_webhook(&state.db, id, url, new_secret.as_deref()).await?,
        _ => partners::set_webhook(&state.db, target.id(), url, new_secret.as_deref()).await?,
    }
    let secret = new_secret.clone().or(current).unwrap_or_default();
    let mut body = json!({ "webhook_url": url, "webhook_secret_prefix": signing::secret_prefix(&secret) });
    if let Some(shown_once) = new_secret {
        body["webhook_secret"] = json!(shown_once);
    }
    Ok(body)
}

async fn set_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<SetWebhook>,
) -> ApiResult<Json<Value>> {
    Ok(Json(apply_settings(&state, Target::Partner(partner.id), req).await?))
}

/// Sends one signed sample `message.status` event to the configured URL and reports what happened.
async fn test_webhook(State(state): State<AppState>, PartnerAuth(partner): PartnerAuth) -> ApiResult<Json<Value>> {
    let Some(endpoint) = webhooks::endpoint(&state.webhooks, Target::Partner(partner.id)).await? else {
        return Ok(Json(json!({ "ok": false, "status": null, "error": "no webhook_url configured" })));
    };
    let sample = json!({
        "event": "message.status",
        "partner": partner.code,
        "message_ref": "msg_test00000000000000000000",
        "message_id": 0,
        "seq": 0,
        "state": crate::messages::MessageState::Delivered,
        "channel": "inapp",
        "phone": "+15550000000",
        "at": iso_time(state.now()),
        "test": true,
    });
    let delivery_id = format!("dlv_test_{}", crate::secrets::random_alnum(20));
    let outcome = send(&state, &endpoint, &delivery_id, &sample).await;
    Ok(Json(json!({ "ok": outcome.ok(), "status": outcome.status, "error": outcome.error })))
}

async fn send(state: &AppState, endpoint: &Endpoint, delivery_id: &str, body: &Value) -> webhooks::SendOutcome {
    webhooks::send_signed(
        &state.webhooks,
        endpoint,
        delivery_id,
        body["event"].as_str().unwrap_or(""),
        &body.to_string(),
    )
    .await
}

pub fn delivery_json(d: &Delivery) -> Value {
    json!({
        "delivery_id": d.delivery_id,
        "event": d.event,
        "state": d.state,
        "attempts": d.attempts,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "next_attempt_at": if d.state == "pending" { Some(record_time(d.next_attempt_at)) } else { None },
        "created_at": record_time(d.created_at),
    })
}

const DELIVERY_STATES: &[&str] = &["pending", "succeeded", "failed", "dead"];

async fn list_deliveries(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let wanted = query.text("state");
    if wanted.as_deref().is_some_and(|s| !DELIVERY_STATES.contains(&s)) {
        return Err(ApiError::validation("state", format!("state must be one of {}", DELIVERY_STATES.join(", "))));
    }
    // `failed` lists deliveries whose last attempt failed and that are still being retried.
    let (state_filter, only_failed) = match wanted.as_deref() {
        Some("failed") => (Some("pending"), true),
        other => (other, false),
    };
    let mut rows = outbox::list_deliveries(
        &state.db,
        Target::Partner(partner.id),
        state_filter,
        query.text("event").as_deref(),
        page.before,
        page.fetch(),
    )
    .await?;
    if only_failed {
        rows.retain(|d| d.attempts > 0);
    }
    Ok(Json(page.respond(rows, |d| d.id, delivery_json)))
}

async fn retry_delivery(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let delivery = outbox::retry_now(&state.db, Target::Partner(partner.id), &id, state.now())
        .await?
        .ok_or_else(|| ApiError::not_found("delivery"))?;
    Ok(Json(delivery_json(&delivery)))
}
