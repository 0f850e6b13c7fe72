//! `POST /messages`: send a hub message (every content type, templates, idempotency, E2E envelopes).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::MessageRecord;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::{ApiJson, parse_value};
use crate::messages::{self, compose::SendMessage, send::Sent};

/// Send a hub message.
///
/// A message for a user reached in the hub (a claimed account with a device; not a code, not encrypted) is
/// in the hub as this answers: `state` `sent`, `channel` `inapp`. Any other is `queued`, and the delivery
/// worker routes it just after.
#[utoipa::path(
    post,
    path = "/messages",
    tag = "messages",
    security(("partnerKey" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries for 24 h (or `idempotency_key` in the body)")),
    request_body = SendMessage,
    responses(
        (status = 201, description = "The message (also when an idempotent retry is replayed; then header `Idempotent-Replayed: true`)", body = MessageRecord),
        (status = 409, response = crate::http::E409),
    )
)]
pub(super) async fn send_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    headers: HeaderMap,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Response> {
    let req: SendMessage = parse_value(raw.clone())?;
    let sent = messages::send::send(&state.sending(), partner.id, &req, &raw, idempotency_header(&headers)?).await?;
    Ok(match &sent {
        Sent::New(m) => created(m, false),
        Sent::Replayed(m) => created(m, true),
    })
}

/// The `Idempotency-Key` header, when one is given.
pub(crate) fn idempotency_header(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let key = headers
        .get("idempotency-key")
        .map(|v| v.to_str().map(|s| s.trim().to_string()))
        .transpose()
        .map_err(|_| ApiError::validation("idempotency_key", "Idempotency-Key header must be text"))?;
    Ok(key.filter(|k| !k.is_empty()))
}

/// `201` with the message; a replayed retry says so in `Idempotent-Replayed: true`.
pub(crate) fn created(m: &crate::messages::Message, replayed: bool) -> Response {
    let mut response = (StatusCode::CREATED, Json(MessageRecord::from(m))).into_response();
    if replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}
