//! Provider receipts (`/providers/…`): Twilio status callbacks and the WhatsApp Cloud API webhook. No API
//! key: each request carries its provider's signature, checked before anything is read
//! (`delivery::receipts`). A provider that is not configured here answers 404 (`Twilio provider not found`, …).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::QueryMap;
use crate::delivery::Channel;
use crate::delivery::receipts;
use crate::error::{ApiError, ApiResult};
use crate::secrets::constant_time_eq;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/providers/twilio/status", post(twilio_status))
        .route("/providers/whatsapp/webhook", post(whatsapp_statuses).get(whatsapp_subscribe))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `POST /providers/twilio/status`: one message's status, form-encoded, signed with the auth token.
async fn twilio_status(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let token = state
        .config
        .twilio_auth_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::not_found("Twilio provider"))?;
    let params: Vec<(String, String)> =
        serde_urlencoded::from_bytes(&body).map_err(|_| ApiError::bad_request("body must be form-encoded"))?;
    let mut url = receipts::twilio_status_url(&state.config);
    if let Some(query) = uri.query() {
        url = format!("{url}?{query}");
    }
    let expected = receipts::twilio_signature(token, &url, &params);
    if !receipts::signature_matches(header(&headers, "x-twilio-signature"), &expected) {
        return Err(ApiError::forbidden("X-Twilio-Signature does not match"));
    }
    let sid = params.iter().find(|(k, _)| k == "MessageSid").map(|(_, v)| v.clone());
    let sid =
        sid.filter(|s| !s.is_empty()).ok_or_else(|| ApiError::validation("MessageSid", "MessageSid is required"))?;
    let applied = match receipts::twilio_receipt(&params) {
        Some(receipt) => receipts::apply(&state.delivery, Channel::Sms, &sid, receipt).await?,
        None => false,
    };
    Ok(Json(json!({ "applied": applied })))
}

/// `POST /providers/whatsapp/webhook`: message statuses from the WhatsApp Cloud API, signed with the app
/// secret. Other notifications (incoming messages) are acknowledged and ignored.
async fn whatsapp_statuses(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> ApiResult<Json<Value>> {
    let secret = state
        .config
        .whatsapp_app_secret
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::not_found("WhatsApp app secret"))?;
    let expected = receipts::meta_signature(secret, &body);
    if !receipts::signature_matches(header(&headers, "x-hub-signature-256"), &expected) {
        return Err(ApiError::forbidden("X-Hub-Signature-256 does not match"));
    }
    let payload: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("body is not valid JSON: {e}")))?;
    let mut applied = 0;
    for (id, receipt) in receipts::whatsapp_receipts(&payload) {
        applied += receipts::apply(&state.delivery, Channel::Whatsapp, &id, receipt).await? as i64;
    }
    Ok(Json(json!({ "applied": applied })))
}

/// `GET /providers/whatsapp/webhook?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`: Meta's
/// subscription handshake; answers the challenge when the token is ours.
async fn whatsapp_subscribe(State(state): State<AppState>, query: QueryMap) -> ApiResult<String> {
    let ours = state
        .config
        .whatsapp_verify_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::not_found("WhatsApp verify token"))?;
    let token = query.text("hub.verify_token").unwrap_or_default();
    if query.text("hub.mode").as_deref() != Some("subscribe") || !constant_time_eq(&token, ours) {
        return Err(ApiError::forbidden("hub.verify_token does not match"));
    }
    query.text("hub.challenge").ok_or_else(|| ApiError::validation("hub.challenge", "hub.challenge is required"))
}
