//! The partner's side: listing, reading, answering and closing conversations, and `POST /agent/messages`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::{ConversationRecord, ThreadRecord, agent_thread, page_of, read, record, with_messages};
use crate::clock::record_time;
use crate::conversations::{self, Note, Reader};
use crate::desk;
use crate::http::auth::{PartnerActor, PartnerAuth};
use crate::http::error::{ApiError, ApiResult};
use crate::http::messages::{MessageRecord, SendMessage, created, idempotency_header};
use crate::http::state::AppState;
use crate::http::{ApiJson, ApiQuery, E404, E409, E422, List, PageParams, parse_value, query_text};
use crate::messages::compose;
use crate::messages::send::Sent;
use crate::names::ConversationState;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ConversationFilter {
    #[param(schema_with = state_filter_schema)]
    #[serde(default, deserialize_with = "crate::http::filter")]
    state: Option<ConversationState>,
    /// Whose: `me` (the signed-in member's; with the partner key, nobody's: an empty list), `none`
    /// (unassigned) or a member's id. Absent: everyone's.
    #[param(pattern = "^(me|none|[1-9][0-9]{0,17})?$")]
    assigned: Option<String>,
    /// Search: words that each start a word somewhere in the conversation — its subject or any message,
    /// the user's or the agents' (through the text index; any case; at most 8 words, 600 characters) — or a
    /// part of the contact's phone.
    #[param(max_length = 600)]
    q: Option<String>,
    /// `running`: only conversations with an SLA running (waiting for an agent, the partner sets SLAs);
    /// `breached`: only those whose SLA was breached (and is not met yet).
    #[param(pattern = "^(running|breached)?$")]
    sla: Option<String>,
    /// `newest` (the default: newest first, paged) or `sla_due`: those with an SLA running, the one due first
    /// first (the first page only: `next_cursor` is null; no `cursor`).
    #[param(pattern = "^(newest|sla_due)?$")]
    sort: Option<String>,
    /// Only conversations carrying this label (one of the partner's: `GET /labels`).
    #[param(pattern = "^(\\s*[A-Za-z0-9_-]{1,50}\\s*)?$")]
    label: Option<String>,
}

/// The `assigned` filter, for the caller.
fn assigned_filter(raw: Option<&str>, actor: &PartnerActor) -> ApiResult<conversations::Assigned> {
    Ok(match raw.map(str::trim).filter(|a| !a.is_empty()) {
        None => conversations::Assigned::Anyone,
        Some("none") => conversations::Assigned::Nobody,
        // The partner key is no one: nothing is assigned to it.
        Some("me") => conversations::Assigned::Member(actor.member.as_ref().map_or(0, |m| m.id)),
        Some(id) => conversations::Assigned::Member(
            id.parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| ApiError::validation("assigned", "assigned is me, none or a member's id"))?,
        ),
    })
}

/// The states a conversation list can be filtered by.
fn state_filter_schema() -> utoipa::openapi::Object {
    let names: Vec<&'static str> = ConversationState::names();
    crate::http::openapi::filter_of(&names, "Only conversations in this state")
}

/// The partner's conversations, newest first.
#[utoipa::path(
    get,
    path = "/conversations",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(ConversationFilter, PageParams),
    responses(
        (status = 200, description = "A page of conversations", body = List<ConversationRecord>),
        (status = 422, response = E422),
    )
)]
pub(super) async fn list_conversations(
    State(state): State<AppState>,
    actor: PartnerActor,
    ApiQuery(filter): ApiQuery<ConversationFilter>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<ConversationRecord>>> {
    let page = page.page()?;
    let assigned = assigned_filter(filter.assigned.as_deref(), &actor)?;
    let search = match query_text(filter.q) {
        Some(q) => Some(conversations::PartnerSearch { words: crate::validate::search_words(&q)?, phone: q }),
        None => None,
    };
    let (partner, state_filter) = (&actor.partner, filter.state);
    let label = match filter.label.as_deref().filter(|l| !l.trim().is_empty()) {
        None => None,
        // A label the partner has none of carries no conversation: an empty list.
        Some(raw) => Some(crate::labels::filter(&state.db, partner.id, raw).await?),
    };
    let sla = match filter.sla.as_deref().map(str::trim).unwrap_or("") {
        "" => None,
        "running" => Some(false),
        "breached" => Some(true),
        _ => return Err(ApiError::validation("sla", "sla is running or breached")),
    };
    let by_due = match filter.sort.as_deref().map(str::trim).unwrap_or("") {
        "" | "newest" => false,
        "sla_due" if page.before.is_some() => {
            return Err(ApiError::validation("cursor", "sort=sla_due has one page: no cursor"));
        }
        "sla_due" => true,
        _ => return Err(ApiError::validation("sort", "sort is newest or sla_due")),
    };
    let filter =
        conversations::PartnerFilter { state: state_filter, assigned, label, search: search.as_ref(), sla, by_due };
    let rows = conversations::list_for_partner(&state.db, partner.id, &filter, page.before, page.fetch()).await?;
    let mut list = page_of(&state, &page, rows, Reader::Agent).await?;
    if by_due {
        list.next_cursor = None;
    }
    Ok(Json(list))
}

/// A conversation with its messages.
#[utoipa::path(
    get,
    path = "/conversations/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The conversation", body = ThreadRecord), (status = 404, response = E404))
)]
pub(super) async fn get_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<ThreadRecord>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok(Json(with_messages(&state, &c, Reader::Agent).await?))
}

/// An agent has seen the conversation: the user's messages in it become `read` (a `message.status` for
/// each; the user's app gets a `conversation.message` and shows them seen).
#[utoipa::path(
    post,
    path = "/conversations/{id}/read",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The conversation, read (unread 0)", body = ThreadRecord),
        (status = 404, response = E404),
    )
)]
pub(super) async fn read_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<ThreadRecord>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    Ok(Json(read(&state, &c, Reader::Agent).await?))
}

/// What a partner changes in a conversation: closing it, and whom it is assigned to.
#[derive(Deserialize, ToSchema)]
pub(super) struct UpdateConversation {
    #[schema(schema_with = closed_only)]
    state: Option<String>,
    /// A member of the partner's to assign it to, or null for nobody.
    #[serde(default, deserialize_with = "crate::messages::compose::present")]
    #[schema(value_type = Option<i64>, minimum = 1)]
    assignee_id: Option<Option<i64>>,
    /// With `assignee_id`: why it is handed over (a transfer), kept as an internal note that names the new
    /// assignee. 1 to 3,900 characters.
    #[schema(min_length = 1, max_length = 3900, pattern = "\\S")]
    note: Option<String>,
    /// The conversation's labels from now on (0 to 20 of the partner's, by name: `GET /labels`).
    #[schema(max_items = 20, value_type = Option<Vec<String>>)]
    labels: Option<Vec<String>>,
}

/// `closed`, the only state a partner sets.
fn closed_only() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some([ConversationState::Closed.as_str()]))
        .build()
}

/// Close a conversation (a user message reopens it), assign or transfer it, or set its labels.
///
/// `state` can only be `closed`; `assignee_id` is a member of the partner's (422 otherwise) or null, with an
/// optional `note` saying why (a transfer: an internal note names the new assignee); `labels` replace the
/// conversation's (each one of the partner's, 422 otherwise). At least one of them. Closing frees a place
/// for the assignee: when the partner assigns by itself, the queue is given out; when it asks for ratings,
/// the person is asked to rate the conversation.
#[utoipa::path(
    patch,
    path = "/conversations/{id}",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = UpdateConversation,
    responses(
        (status = 200, description = "The conversation", body = ConversationRecord),
        (status = 404, response = E404),
    )
)]
pub(super) async fn close_conversation(
    State(state): State<AppState>,
    actor: PartnerActor,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateConversation>,
) -> ApiResult<Json<ConversationRecord>> {
    // Another partner's conversation is 404 whatever the body says.
    let c = agent_thread(&state, actor.partner.id, &id).await?;
    let changes = desk::Changes {
        state: req.state.as_deref(),
        assignee: req.assignee_id,
        note: req.note.as_deref(),
        labels: req.labels.as_deref(),
    };
    let by = actor.member.as_ref().map(|m| m.id);
    let c = desk::change(&state.desk(), actor.partner.id, by, c, changes).await?;
    Ok(Json(record(&state, &c, Reader::Agent).await?))
}

/// An agent is writing in the conversation.
///
/// The person sees "typing…" in the app (`conversation.typing` on their stream) for a few seconds; when they
/// last wrote from WhatsApp, Meta's typing indicator shows on WhatsApp too. Send it at most every 2 seconds
/// while writing; more often changes nothing.
#[utoipa::path(
    post,
    path = "/conversations/{id}/typing",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 204, description = "The person is told"), (status = 404, response = E404))
)]
pub(super) async fn typing_in_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<axum::http::StatusCode> {
    let c = agent_thread(&state, partner.id, &id).await?;
    desk::typing(&state.desk(), &c).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// A message made (or replayed) as the API answers it.
fn replied(sent: Sent) -> Response {
    match sent {
        Sent::New(m) => created(&m, false),
        Sent::Replayed(m) => created(&m, true),
    }
}

/// The request's content and its idempotency key (body or header) with the digest of what it asks.
fn with_key(headers: &HeaderMap, raw: Value) -> ApiResult<(SendMessage, Option<(String, String)>)> {
    let req: SendMessage = parse_value(raw.clone())?;
    let idempotency = compose::idempotency(&req, &raw, idempotency_header(headers)?)?;
    Ok((req, idempotency))
}

/// An agent's reply (the conversation becomes pending); delivered like any outgoing message.
///
/// An `idempotency_key` (or the `Idempotency-Key` header) makes a retry safe: within 24 h the same key in
/// the same conversation answers the original reply (`Idempotent-Replayed: true`) and writes nothing; with a
/// different message it is `409 idempotency_conflict`.
#[utoipa::path(
    post,
    path = "/conversations/{id}/messages",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries for 24 h (or `idempotency_key` in the body)")),
    request_body = SendMessage,
    responses(
        (status = 201, description = "The message (direction out); also when a retry is replayed, then with header `Idempotent-Replayed: true`", body = MessageRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
pub(super) async fn reply_in_conversation(
    State(state): State<AppState>,
    actor: PartnerActor,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Response> {
    let (req, idempotency) = with_key(&headers, raw)?;
    let c = agent_thread(&state, actor.partner.id, &id).await?;
    let sent = desk::reply(&state.desk(), actor.partner.id, actor.member.as_ref(), &c, &req, idempotency).await?;
    Ok(replied(sent))
}

/// Agent send: into the latest open or pending conversation of the phone, else a hub message (conversation_id null).
///
/// Never a new conversation: only users open them. A sealed E2E message (`encryption: "e2e"` with key wraps)
/// is always a hub message, its `aad` names the hub; an encrypted conversation message needs a thread. An
/// `idempotency_key` (or the `Idempotency-Key` header) makes a retry safe in either case.
#[utoipa::path(
    post,
    path = "/agent/messages",
    tag = "conversations",
    security(("partnerKey" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries for 24 h (or `idempotency_key` in the body)")),
    request_body = SendMessage,
    responses(
        (status = 201, description = "The message; also when a retry is replayed, then with header `Idempotent-Replayed: true`", body = MessageRecord),
        (status = 409, response = E409),
    )
)]
pub(super) async fn agent_send(
    State(state): State<AppState>,
    actor: PartnerActor,
    headers: HeaderMap,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Response> {
    let (req, idempotency) = with_key(&headers, raw.clone())?;
    let header = idempotency_header(&headers)?;
    let (partner, author) = (actor.partner.id, actor.member.as_ref());
    let sent = desk::send_to_phone(&state.desk(), partner, author, &req, &raw, idempotency, header).await?;
    Ok(replied(sent))
}

/// An internal note on a conversation: agents only, never shown to the user.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationNote)]
pub(super) struct NoteRecord {
    id: i64,
    body: String,
    /// The member who wrote it (null: the partner key, or a member since removed), their phone and display
    /// name.
    member_id: Option<i64>,
    phone: Option<String>,
    name: Option<String>,
    created_at: String,
}

impl From<&Note> for NoteRecord {
    fn from(n: &Note) -> Self {
        NoteRecord {
            id: n.id,
            body: n.body.clone(),
            member_id: n.member_id,
            phone: n.phone.clone(),
            name: n.name.clone(),
            created_at: record_time(n.created_at),
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewConversationNote)]
pub(super) struct NewNote {
    /// 1 to 4,000 characters.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 4000, pattern = "\\S")]
    body: Option<String>,
}

/// The conversation's internal notes, oldest first.
///
/// Notes are for the partner's agents: they are never in `/me`, in the user's events or in webhooks.
#[utoipa::path(
    get,
    path = "/conversations/{id}/notes",
    tag = "conversations",
    security(("partnerKey" = []), ("memberSession" = [])),
    responses((status = 200, description = "The notes", body = List<NoteRecord>), (status = 404, response = E404))
)]
pub(super) async fn list_notes(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<List<NoteRecord>>> {
    let c = agent_thread(&state, partner.id, &id).await?;
    let notes = conversations::notes(&state.db, c.id).await?;
    Ok(Json(List { data: notes.iter().map(NoteRecord::from).collect(), next_cursor: None }))
}

/// Add an internal note.
#[utoipa::path(
    post,
    path = "/conversations/{id}/notes",
    tag = "conversations",
    security(("partnerKey" = []), ("memberSession" = [])),
    request_body = NewNote,
    responses((status = 201, description = "The note", body = NoteRecord), (status = 404, response = E404), (status = 422, response = E422))
)]
pub(super) async fn add_note(
    State(state): State<AppState>,
    actor: PartnerActor,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<NewNote>,
) -> ApiResult<(axum::http::StatusCode, Json<NoteRecord>)> {
    let c = agent_thread(&state, actor.partner.id, &id).await?;
    let by = actor.member.as_ref().map(|m| m.id);
    let note = desk::add_note(&state.desk(), &c, by, req.body.as_deref()).await?;
    Ok((axum::http::StatusCode::CREATED, Json(NoteRecord::from(&note))))
}
