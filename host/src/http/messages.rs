//! `/messages`: send a hub message (every content type, templates, idempotency, E2E envelopes), read one
//! with its delivery attempts, list, and mark read / unread.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiQuery, List, PageParams, parse_id, parse_value};
use crate::auth::PartnerAuth;
use crate::clock::record_time;
use crate::error::{ApiError, ApiResult};
use crate::events;
pub use crate::messages::compose::{self, Content, MAX_BODY_BYTES, SendMessage, client_ref};
use crate::messages::{AttemptKind, AttemptState, Channel, ContentType, Direction, MessageContent, MessageState};
use crate::state::AppState;
use crate::store::is_unique_violation;
use crate::store::messages::{self as store, Created, Message, MessageFilter, NewMessage};
use crate::validate::is_e164;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send_message, list_messages))
        .routes(routes!(mark_many_read))
        .routes(routes!(get_message))
        .routes(routes!(mark_read))
        .routes(routes!(mark_unread))
}

/// Validates a send request into a message to store. `raw` is the request body as sent.
async fn build_message(
    state: &AppState,
    partner_id: i64,
    req: SendMessage,
    raw: &Value,
    header_key: Option<String>,
) -> ApiResult<NewMessage> {
    let phone = super::required_phone(req.phone.as_deref())?;
    let idempotency = compose::idempotency(&req, raw, header_key)?;
    let content = validate_content(state, partner_id, &req, Some(phone)).await?;
    let mut message = content.into_message(partner_id, phone, Direction::Out, None);
    if let Some((key, hash)) = idempotency {
        message.idempotency_key = Some(key);
        message.request_hash = Some(hash);
    }
    Ok(message)
}

/// The content of a send request, checked (see [`compose::content`]).
pub async fn validate_content(
    state: &AppState,
    partner_id: i64,
    req: &SendMessage,
    phone: Option<&str>,
) -> ApiResult<Content> {
    Ok(compose::content(&state.db, state.config.dev, partner_id, req, phone).await?)
}

/// A message as the API answers it: the common fields, the template fields of a template send, and the
/// content fields of its type.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Message)]
pub struct MessageRecord {
    pub message_id: i64,
    #[serde(rename = "ref")]
    pub reference: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    pub phone: String,
    /// The sending partner's code.
    pub partner: String,
    pub direction: Direction,
    #[schema(value_type = ContentType)]
    pub content_type: String,
    pub body: Option<String>,
    pub state: MessageState,
    pub priority: String,
    /// The channel that carried it (null until sent).
    #[schema(value_type = Option<Channel>)]
    pub channel: Option<String>,
    /// The support conversation it belongs to (null for hub messages).
    pub conversation_id: Option<i64>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rendered_body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    #[serde(flatten)]
    pub content: MessageContent,
    /// With `include=attempts`: every delivery attempt, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Vec<AttemptRecord>>,
}

/// One delivery attempt of a message.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptRecord {
    pub kind: AttemptKind,
    pub channel: Channel,
    pub state: AttemptState,
    pub error: Option<String>,
    /// The provider's message id (Twilio MessageSid, WhatsApp message id); receipts are matched by it.
    pub provider_ref: Option<String>,
    pub at: String,
}

impl From<&Message> for MessageRecord {
    fn from(m: &Message) -> Self {
        let template = m.template_code.is_some();
        MessageRecord {
            message_id: m.id,
            reference: m.reference.clone(),
            phone: m.phone.clone(),
            partner: m.partner_code.clone(),
            direction: m.direction,
            content_type: m.content_type.clone(),
            body: m.body.clone(),
            state: m.state,
            priority: m.priority.clone(),
            channel: m.channel.clone(),
            conversation_id: m.conversation_id,
            created_at: record_time(m.created_at),
            template_code: m.template_code.clone(),
            rendered_body: m.rendered_body.clone().filter(|_| template),
            lang: m.lang.clone().filter(|_| template),
            content: serde_json::from_value(m.content.clone()).unwrap_or_default(),
            attempts: None,
        }
    }
}

/// The record as a JSON value (for resources whose own records embed messages).
pub fn message_json(m: &Message) -> Value {
    serde_json::to_value(MessageRecord::from(m)).expect("a record serialises")
}

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
        (status = 409, response = super::E409),
    )
)]
async fn send_message(
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

/// Creating a message can only break a unique constraint through its ref (idempotency keys are handled
/// in the insert): a sender-chosen ref that is already taken (refs are unique across the service) is a 409.
pub fn ref_taken(e: sqlx::Error) -> ApiError {
    if is_unique_violation(&e) { ApiError::conflict("ref is already used by another message") } else { e.into() }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct GetMessageQuery {
    /// `attempts` adds the delivery attempts.
    include: Option<String>,
}

/// Get a message.
#[utoipa::path(
    get,
    path = "/messages/{id}",
    tag = "messages",
    security(("partnerKey" = [])),
    params(GetMessageQuery),
    responses(
        (status = 200, description = "The message; with `include=attempts` also `attempts`", body = MessageRecord),
        (status = 404, response = super::E404),
    )
)]
async fn get_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<GetMessageQuery>,
) -> ApiResult<Json<MessageRecord>> {
    let id = parse_id(&id, "message")?;
    let m = store::find_message(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    let mut record = MessageRecord::from(&m);
    let include = query.include.unwrap_or_default();
    if include.split(',').any(|part| part.trim() == "attempts") {
        let attempts = store::list_attempts(&state.db, m.id).await?;
        record.attempts = Some(
            attempts
                .into_iter()
                .map(|a| AttemptRecord {
                    kind: a.kind,
                    channel: a.channel,
                    state: a.state,
                    error: a.error,
                    provider_ref: a.provider_ref,
                    at: record_time(a.at),
                })
                .collect(),
        );
    }
    Ok(Json(record))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListMessagesQuery {
    /// Only this user's messages (E.164; empty: every user's).
    #[param(pattern = "^(\\+[1-9][0-9]{6,14})?$")]
    phone: Option<String>,
    /// Only messages in this state.
    state: Option<MessageState>,
    /// Search in body and phone.
    q: Option<String>,
}

/// List messages, newest first.
#[utoipa::path(
    get,
    path = "/messages",
    tag = "messages",
    security(("partnerKey" = [])),
    params(ListMessagesQuery, PageParams),
    responses((status = 200, description = "A page of messages", body = List<MessageRecord>))
)]
async fn list_messages(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(query): ApiQuery<ListMessagesQuery>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<MessageRecord>>> {
    let page = page.page()?;
    let phone = query.phone.filter(|p| !p.is_empty());
    if phone.as_deref().is_some_and(|p| !is_e164(p)) {
        return Err(ApiError::validation("phone", "phone must be E.164"));
    }
    let filter = MessageFilter {
        phone,
        state: query.state,
        q: query.q.map(|q| q.trim().to_string()).filter(|q| !q.is_empty()),
        before: page.before,
        limit: page.fetch(),
    };
    let rows = store::list_messages(&state.db, partner.id, &filter).await?;
    Ok(Json(page.list(rows, |m| m.id, |m| MessageRecord::from(m))))
}

/// Moves one of the partner's messages; answers the resulting record (unchanged when already there).
async fn mark(
    state: &AppState,
    partner_id: i64,
    raw_id: &str,
    from: &[MessageState],
    to: MessageState,
) -> ApiResult<Json<MessageRecord>> {
    let id = parse_id(raw_id, "message")?;
    let current =
        store::find_message(&state.db, partner_id, id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    if current.state == MessageState::Failed {
        return Err(ApiError::conflict("the message failed to deliver; it cannot be marked"));
    }
    let mut tx = state.db.writer().begin().await?;
    let moved = store::transition_in(&mut tx, id, from, to, None, state.now(), events::message_status).await?;
    tx.commit().await?;
    let record = match moved {
        Some(m) => m,
        None => store::find_message(&state.db, partner_id, id).await?.unwrap_or(current),
    };
    Ok(Json(MessageRecord::from(&record)))
}

/// Mark a message read.
#[utoipa::path(
    post,
    path = "/messages/{id}/read",
    tag = "messages",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The message", body = MessageRecord),
        (status = 404, response = super::E404),
        (status = 409, response = super::E409),
    )
)]
async fn mark_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageRecord>> {
    mark(&state, partner.id, &id, &MessageState::BEFORE_READ, MessageState::Read).await
}

/// Mark a read message unread (back to delivered).
#[utoipa::path(
    post,
    path = "/messages/{id}/unread",
    tag = "messages",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The message", body = MessageRecord),
        (status = 404, response = super::E404),
        (status = 409, response = super::E409),
    )
)]
async fn mark_unread(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageRecord>> {
    mark(&state, partner.id, &id, &[MessageState::Read], MessageState::Delivered).await
}

/// Either `message_ids` or `phone`. Ids of other partners' messages are ignored.
#[derive(Deserialize, ToSchema)]
struct BulkRead {
    #[schema(max_items = 1000)]
    message_ids: Option<Vec<i64>>,
    /// Every message to this user (E.164).
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    phone: Option<String>,
}

/// How many messages changed state.
#[derive(Serialize, ToSchema)]
struct Updated {
    updated: i64,
}

/// Mark messages read in bulk.
#[utoipa::path(
    post,
    path = "/messages/read",
    tag = "messages",
    security(("partnerKey" = [])),
    request_body = BulkRead,
    responses((status = 200, description = "How many messages changed state", body = Updated))
)]
async fn mark_many_read(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<BulkRead>,
) -> ApiResult<Json<Updated>> {
    // A phone that is given must be one (an empty string is not "no phone").
    let ids = match (&req.message_ids, req.phone.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::validation("message_ids", "give message_ids or phone, not both"));
        }
        (None, None) => {
            return Err(ApiError::validation("message_ids", "message_ids or phone is required"));
        }
        (Some(ids), None) => {
            if ids.len() > 1000 {
                return Err(ApiError::validation("message_ids", "at most 1000 message_ids at once"));
            }
            store::partner_message_ids(&state.db, partner.id, None, ids).await?
        }
        (None, Some(phone)) => {
            if !is_e164(phone) {
                return Err(ApiError::validation("phone", "phone must be E.164"));
            }
            store::partner_message_ids(&state.db, partner.id, Some(phone), &[]).await?
        }
    };
    let now = state.now();
    let mut updated = 0;
    let mut tx = state.db.writer().begin().await?;
    for id in ids {
        let moved = store::transition_in(
            &mut tx,
            id,
            &MessageState::BEFORE_READ,
            MessageState::Read,
            None,
            now,
            events::message_status,
        )
        .await?;
        updated += moved.is_some() as i64;
    }
    tx.commit().await?;
    Ok(Json(Updated { updated }))
}
