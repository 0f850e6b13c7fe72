//! Provider receipts (`/providers/…`): Twilio status callbacks and the WhatsApp Cloud API webhook. No API
//! key: each request carries its provider's signature, checked before anything is read
//! (`delivery::receipts`). A provider that is not configured here answers 404 (`Twilio provider not found`, …).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiQuery, E403, E404, E422, query_text};
use crate::delivery::{meta_review, receipts};
use crate::http::error::{ApiError, ApiResult};
use crate::names::Channel;
use crate::secrets::constant_time_eq;
use crate::state::AppState;
use crate::store::whatsapp;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(twilio_status)).routes(routes!(whatsapp_statuses, whatsapp_subscribe))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A Twilio status callback, form-encoded. Signed: X-Twilio-Signature (HMAC-SHA1 with the auth token over
/// the URL and sorted parameters).
// Describes the form in the document; the handler reads the signed pairs as they come.
#[derive(Deserialize, ToSchema)]
pub struct TwilioStatus {
    #[serde(rename = "MessageSid")]
    pub message_sid: String,
    #[serde(rename = "MessageStatus")]
    pub message_status: String,
    #[serde(rename = "ErrorCode")]
    pub error_code: Option<String>,
}

/// Whether the receipt matched one of our messages.
#[derive(Serialize, ToSchema)]
struct TwilioApplied {
    applied: bool,
}

/// Twilio status callback (StatusCallback of every SMS): delivered/read move the message, undelivered/failed fail it.
#[utoipa::path(
    post,
    path = "/providers/twilio/status",
    tag = "providers",
    request_body(content = TwilioStatus, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Whether it matched one of our messages", body = TwilioApplied),
        (status = 403, response = E403),
        (status = 404, response = E404),
    )
)]
async fn twilio_status(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<TwilioApplied>> {
    let token = state
        .config
        .twilio_auth_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::not_found("Twilio provider"))?;
    let params: Vec<(String, String)> =
        serde_urlencoded::from_bytes(&body).map_err(|_| ApiError::bad_request("body must be form-encoded"))?;
    let mut url = crate::providers::twilio_status_url(&state.config);
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
    Ok(Json(TwilioApplied { applied }))
}

/// How many statuses matched our messages.
#[derive(Serialize, ToSchema)]
struct WhatsappApplied {
    /// Statuses that matched our messages.
    applied: i64,
    /// Messages from people (each opens their 24-hour window).
    inbound: i64,
    /// Template decisions that changed a template.
    templates: i64,
}

/// WhatsApp Cloud API webhook: message statuses (delivered, read, failed), people writing to the business
/// (which opens their 24-hour window for free-form text), and Meta's template decisions
/// (`message_template_status_update`).
#[utoipa::path(
    post,
    path = "/providers/whatsapp/webhook",
    tag = "providers",
    request_body(
        content = Object,
        description = "Signed: X-Hub-Signature-256 = sha256=<hex HMAC-SHA256 of the body with HUBBUB_WHATSAPP_APP_SECRET>. entry[].changes[].value.statuses[] and .messages[] are read, and changes with field message_template_status_update."
    ),
    responses(
        (status = 200, description = "What the notification changed", body = WhatsappApplied),
        (status = 403, response = E403),
        (status = 404, response = E404),
    )
)]
async fn whatsapp_statuses(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<WhatsappApplied>> {
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
    // A message from the person: the window for free-form text is open for 24 hours from it (never from
    // a time still to come).
    let now = state.now();
    let inbound = receipts::whatsapp_inbound(&payload);
    for (phone, at) in &inbound {
        whatsapp::record_inbound(&state.db, phone, (*at).min(now)).await?;
    }
    let mut templates = 0;
    for (id, status, reason) in meta_review::template_updates(&payload) {
        templates += meta_review::apply(&state.delivery, &id, &status, reason.as_deref()).await? as i64;
    }
    Ok(Json(WhatsappApplied { applied, inbound: inbound.len() as i64, templates }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Subscribe {
    /// `subscribe`
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    /// The configured token
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    /// Echoed back
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

/// Meta's subscription handshake: answers hub.challenge (text) when hub.verify_token is HUBBUB_WHATSAPP_VERIFY_TOKEN.
#[utoipa::path(
    get,
    path = "/providers/whatsapp/webhook",
    tag = "providers",
    params(Subscribe),
    responses(
        (status = 200, description = "The challenge", content((String = "text/plain"))),
        (status = 403, response = E403),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
async fn whatsapp_subscribe(State(state): State<AppState>, ApiQuery(query): ApiQuery<Subscribe>) -> ApiResult<String> {
    let ours = state
        .config
        .whatsapp_verify_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::not_found("WhatsApp verify token"))?;
    let token = query_text(query.verify_token).unwrap_or_default();
    if query_text(query.mode).as_deref() != Some("subscribe") || !constant_time_eq(&token, ours) {
        return Err(ApiError::forbidden("hub.verify_token does not match"));
    }
    query_text(query.challenge).ok_or_else(|| ApiError::validation("hub.challenge", "hub.challenge is required"))
}
