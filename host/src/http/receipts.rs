//! Provider webhooks (`/providers/…`): Twilio status callbacks and inbound messages, and the WhatsApp Cloud
//! API webhook (statuses, people's messages, template decisions). No API key: each request carries its
//! provider's signature, checked before anything is acted on (`delivery::receipts`) with the secret of the
//! number it concerns — a partner's own (`store::senders`), else the host's; a signature that does not
//! match is `401`. A provider that is not configured here answers 404 (`Twilio provider not found`, …).
//! People's messages are kept and answered at once, and routed after (`crate::inbound`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Uri, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiQuery, E401, E404, E422, query_text};
use crate::delivery::signed;
use crate::delivery::{meta_review, receipts};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::inbound;
use crate::names::Channel;
use crate::secrets::constant_time_eq;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(twilio_status))
        .routes(routes!(twilio_inbound))
        .routes(routes!(whatsapp_statuses, whatsapp_subscribe))
        .layer(DefaultBodyLimit::max(PROVIDER_BODY_LIMIT))
}

/// A provider webhook's body: past [`PROVIDER_BODY_LIMIT`], `413` in the contract's shape.
fn provider_body(body: Result<Bytes, BytesRejection>) -> ApiResult<Bytes> {
    body.map_err(|rejection| match rejection.status() {
        axum::http::StatusCode::PAYLOAD_TOO_LARGE => ApiError::payload_too_large(),
        _ => ApiError::bad_request(rejection.body_text()),
    })
}

/// The largest body a provider's webhook may have (1 MiB): Twilio's forms are a few KiB, and Meta's
/// notifications, batched, well under it. Anything larger is refused (413) before it is read whole.
pub const PROVIDER_BODY_LIMIT: usize = 1 << 20;

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

/// Twilio status callback (StatusCallback of every SMS): delivered/read move the message, undelivered/failed fail it;
/// error 21610 (the phone opted out with Twilio) opts the phone out of SMS from that sender here too.
#[utoipa::path(
    post,
    path = "/providers/twilio/status",
    tag = "providers",
    request_body(content = TwilioStatus, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Whether it matched one of our messages", body = TwilioApplied),
        (status = 401, response = E401),
        (status = 404, response = E404),
    )
)]
async fn twilio_status(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<TwilioApplied>> {
    let body = provider_body(body)?;
    let url = crate::providers::twilio_status_url(&state.config);
    let (params, ours) =
        signed::twilio_signed(&state.delivery, url, "From", uri.query(), header(&headers, "x-twilio-signature"), &body)
            .await?;
    let sid = receipts::twilio_param(&params, "MessageSid").filter(|s| !s.is_empty());
    let sid = sid.ok_or_else(|| ApiError::validation("MessageSid", "MessageSid is required"))?;
    let applied = match receipts::twilio_receipt(&params) {
        Some(receipt) => receipts::apply(&state.delivery, Channel::Sms, sid, receipt, &ours).await?,
        None => false,
    };
    // Twilio refused to send to a phone that opted out with it (error 21610): we know it now too.
    if let Some(phone) = receipts::twilio_opt_out(&params) {
        receipts::opt_out(&state.delivery, &phone, Channel::Sms, &ours, "twilio 21610").await?;
    }
    Ok(Json(TwilioApplied { applied }))
}

/// A Twilio inbound message webhook, form-encoded (the number's "A message comes in" webhook). Signed like
/// the status callback.
// Describes the form in the document; the handler reads the signed pairs as they come.
#[derive(Deserialize, ToSchema)]
pub struct TwilioInbound {
    #[serde(rename = "MessageSid")]
    pub message_sid: String,
    /// Who wrote (E.164).
    #[serde(rename = "From")]
    pub from: String,
    /// Our number (or a number of our messaging service) that received it.
    #[serde(rename = "To")]
    pub to: String,
    #[serde(rename = "Body")]
    pub body: Option<String>,
    /// How many media the message carries (`MediaUrl0`…, `MediaContentType0`…: kept, not routed yet).
    #[serde(rename = "NumMedia")]
    pub num_media: Option<String>,
}

/// An SMS from a user (Twilio's inbound webhook): kept once by its `MessageSid` (a retried or replayed
/// webhook changes nothing) and routed after — a STOP or START keyword sets or clears the phone's opt-out,
/// other text goes to the user's support conversation (`docs/providers.md`, "Messages from users"). The
/// answer is empty TwiML: Twilio sends nothing back on its own account.
#[utoipa::path(
    post,
    path = "/providers/twilio/inbound",
    tag = "providers",
    request_body(content = TwilioInbound, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Kept (empty TwiML)", content((String = "text/xml"))),
        (status = 401, response = E401),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
async fn twilio_inbound(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<impl IntoResponse> {
    let body = provider_body(body)?;
    let url = crate::providers::twilio_inbound_url(&state.config);
    let (params, ours) =
        signed::twilio_signed(&state.delivery, url, "To", uri.query(), header(&headers, "x-twilio-signature"), &body)
            .await?;
    let message = inbound::from_twilio(&ours, &params, state.now()).map_err(|message| {
        let field = message.split_whitespace().next().unwrap_or("body").to_string();
        ApiError::validation(field, message)
    })?;
    inbound::receive(&state.delivery, &[message]).await?;
    Ok(([(header::CONTENT_TYPE, "text/xml")], "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response></Response>"))
}

/// How many statuses matched our messages.
#[derive(Serialize, ToSchema)]
struct WhatsappApplied {
    /// Statuses that matched our messages.
    applied: i64,
    /// Messages from people not seen before (each opens their 24-hour window, and is routed after).
    inbound: i64,
    /// Template decisions that changed a template.
    templates: i64,
    /// Messaging limits set by Meta's `phone_number_quality_update`.
    limits: i64,
}

/// WhatsApp Cloud API webhook: message statuses (delivered, read, failed; a failure because the person
/// stopped marketing messages, error 131050, keeps marketing templates from them), people writing to the business (each
/// message kept once by its id, opening their 24-hour window for free-form text, and routed after like an
/// SMS), and Meta's template decisions (`message_template_status_update`).
#[utoipa::path(
    post,
    path = "/providers/whatsapp/webhook",
    tag = "providers",
    request_body(
        content = Object,
        description = "Signed: X-Hub-Signature-256 = sha256=<hex HMAC-SHA256 of the body with HUBBUB_WHATSAPP_APP_SECRET>. entry[].changes[].value.statuses[] and .messages[] are read, and changes with field message_template_status_update and phone_number_quality_update (the host's app only)."
    ),
    responses(
        (status = 200, description = "What the notification changed", body = WhatsappApplied),
        (status = 401, response = E401),
        (status = 404, response = E404),
    )
)]
async fn whatsapp_statuses(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WhatsappApplied>> {
    let body = provider_body(body)?;
    let (ours, payload) =
        signed::whatsapp_signed(&state.delivery, header(&headers, "x-hub-signature-256"), &body).await?;
    let mut applied = 0;
    for (id, receipt, our) in receipts::whatsapp_receipts(&ours, &payload) {
        applied += receipts::apply(&state.delivery, Channel::Whatsapp, &id, receipt, &our).await? as i64;
    }
    for (phone, our) in receipts::whatsapp_blocks(&ours, &payload) {
        receipts::opt_out(&state.delivery, &phone, Channel::Whatsapp, &our, receipts::MARKETING).await?;
    }
    let inbound =
        inbound::receive(&state.delivery, &inbound::from_whatsapp(&ours, &payload, state.now())).await? as i64;
    // Templates are submitted under the host's business account: only its own signature decides them. Its
    // signature speaks for messaging limits too.
    let mut templates = 0;
    let mut limits = 0;
    if ours.iter().any(|our| our.partner_id.is_none()) {
        for (id, status, reason) in meta_review::template_updates(&payload) {
            templates += meta_review::apply(&state.delivery, &id, &status, reason.as_deref()).await? as i64;
        }
        limits = receipts::apply_quality_updates(&state.delivery, &payload).await?;
    }
    Ok(Json(WhatsappApplied { applied, inbound, templates, limits }))
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
        (status = 401, response = E401),
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
        return Err(ApiError::unauthorized("hub.verify_token does not match"));
    }
    query_text(query.challenge).ok_or_else(|| ApiError::validation("hub.challenge", "hub.challenge is required"))
}
