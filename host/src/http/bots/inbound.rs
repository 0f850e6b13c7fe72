//! The inbound webhook a bot answers through (bot token, secret header or body signature; `allowed_ips`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::flows::Step;
use crate::http::abuse::ClientIp;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::{E404, parse_value};

/// An event a bot sends through its inbound webhook.
#[derive(Deserialize, ToSchema)]
#[schema(as = BotInboundEvent)]
pub(super) struct Inbound {
    #[schema(schema_with = inbound_event_schema, required = true)]
    event: Option<String>,
    /// `reply`: the session and its new steps; `ping`: nothing.
    #[serde(default)]
    #[schema(value_type = Option<Reply>)]
    data: Value,
}

/// `event`: `reply` or `ping`.
fn inbound_event_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["reply", "ping"]))
        .build()
}

/// A bot's answer in a session: steps appended to what the app has not fetched yet.
#[derive(Deserialize, ToSchema)]
#[schema(as = BotReply)]
pub(super) struct Reply {
    /// The session's ref.
    session: String,
    /// At most 50; each screen's fields well-formed.
    #[schema(value_type = Vec<Step>, max_items = 50)]
    steps: Vec<Value>,
}

/// What the inbound webhook answers.
#[derive(Serialize, ToSchema)]
#[schema(as = BotInboundAck)]
pub(super) struct Ack {
    ok: bool,
    /// True when an event with this `webhook-id` was already applied (nothing changed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
}

/// Inbound events from the bot: `{event: reply|ping, data}`.
///
/// A bot answers users (`reply`) or checks the line (`ping`). The caller's address is checked against
/// `allowed_ips` before any credential is looked at (403), so an outsider cannot learn whether a leaked
/// secret is valid. Auth: the bot token, `X-Service-Bot-Secret`, `X-Service-Signature` (`sha256=<hex HMAC of
/// the body>`), or the Standard Webhooks headers (`webhook-id`, `webhook-timestamp` within 5 minutes,
/// `webhook-signature` `v1,<base64 HMAC of id.timestamp.body keyed with the base64-decoded secret after
/// whsec_>`). An event with a `webhook-id` (which then needs a fresh `webhook-timestamp`) is applied once: a
/// repeat answers `{ok: true, duplicate: true}` and changes nothing. Reply steps are appended to what the app
/// has not fetched yet.
#[utoipa::path(
    post,
    path = "/bots/{code}/webhook",
    tag = "bots",
    security(("botToken" = [])),
    params(
        ("X-Service-Bot-Secret" = Option<String>, Header, description = "The bot's webhook secret (instead of the token or a signature)."),
        ("X-Service-Signature" = Option<String>, Header, description = "`sha256=<hex HMAC-SHA256 of the body>`, keyed with the whole webhook secret."),
        ("webhook-id" = Option<String>, Header, max_length = 256, description = "Event id: a repeat is acknowledged and ignored."),
        ("webhook-timestamp" = Option<String>, Header, description = "Seconds since the epoch; required with webhook-id; within 5 minutes of now."),
        ("webhook-signature" = Option<String>, Header, description = "Standard Webhooks: space-separated v1,<base64> signatures."),
    ),
    request_body = Inbound,
    responses((status = 200, description = "Applied (or a repeat, with `duplicate`)", body = Ack), (status = 404, response = E404))
)]
pub(super) async fn bot_inbound(
    State(state): State<AppState>,
    Path(code): Path<String>,
    ClientIp(client): ClientIp,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Ack>> {
    let call = crate::bots::Inbound {
        peer: client,
        authorization: header(&headers, "authorization"),
        bot_secret: header(&headers, "x-service-bot-secret"),
        service_signature: header(&headers, "x-service-signature"),
        webhook_id: header(&headers, "webhook-id"),
        webhook_timestamp: header(&headers, "webhook-timestamp"),
        webhook_signature: header(&headers, "webhook-signature"),
        body: &body,
    };
    let now_s = state.now() / 1000;
    let bot = call.authenticate(&state.db, &code, now_s).await?;
    let event_id = call.event_id(now_s)?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("body must be a JSON object"));
    }
    let req: Inbound = parse_value(value)?;
    match req.event.as_deref() {
        Some("ping") => Ok(Json(Ack { ok: true, duplicate: false })),
        Some("reply") => {
            let reply: Reply = parse_value(req.data).map_err(|e| e.with_field("data"))?;
            let (flows, delivery) = (state.flows(), &state.delivery);
            let applied =
                crate::inbound::apply_reply(&flows, delivery, &bot, &reply.session, reply.steps, event_id.as_deref())
                    .await?;
            Ok(Json(Ack { ok: true, duplicate: !applied }))
        }
        Some(other) => Err(ApiError::validation("event", format!("unknown event {other:?}: expected reply or ping"))),
        None => Err(ApiError::validation("event", "event is required")),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
}
