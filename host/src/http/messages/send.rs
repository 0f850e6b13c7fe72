//! `POST /messages`: send a hub message (every content type, templates, idempotency, E2E envelopes).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{MessageRecord, build_message, ref_taken};
use crate::auth::PartnerAuth;
use crate::error::{ApiError, ApiResult};
use crate::http::{ApiJson, parse_value};
pub use crate::messages::compose::SendMessage;
use crate::state::AppState;
use crate::store::is_unique_violation;
use crate::store::messages::{self as store, Created};

/// Send a hub message.
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
    let header_key = headers
        .get("idempotency-key")
        .map(|v| v.to_str().map(|s| s.trim().to_string()))
        .transpose()
        .map_err(|_| ApiError::validation("idempotency_key", "Idempotency-Key header must be text"))?
        .filter(|k| !k.is_empty());
    let req: SendMessage = parse_value(raw.clone())?;
    let new = build_message(&state, partner.id, req, &raw, header_key).await?;
    let retry_key = new.idempotency_key.clone().zip(new.request_hash.clone());
    let created = match state.messages.create(new, state.now()).await {
        // Two identical retries racing (several hosts): the loser's chosen ref collides with the winner's
        // message, which is the one to replay.
        Err(e) if is_unique_violation(&e) && retry_key.is_some() => {
            let (key, hash) = retry_key.expect("checked");
            store::find_replay(&state.db, partner.id, &key, &hash).await?.ok_or_else(|| ref_taken(e))?
        }
        other => other.map_err(ref_taken)?,
    };
    match created {
        Created::New(m) => {
            tracing::info!(message_id = m.id, "message accepted");
            metrics::counter!("hubbub_messages_accepted_total").increment(1);
            state.delivery.wake.notify_one();
            Ok((StatusCode::CREATED, Json(MessageRecord::from(&m))).into_response())
        }
        Created::Replayed(m) => {
            let mut response = (StatusCode::CREATED, Json(MessageRecord::from(&m))).into_response();
            response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
            Ok(response)
        }
        Created::KeyReused => Err(ApiError::idempotency_conflict()),
    }
}
