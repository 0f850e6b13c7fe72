//! Support conversations, from both sides: a user opens one with a partner and writes in it
//! (`/me/conversations…`); the partner's agents list, read, answer and close them (`/conversations…`), and
//! `POST /agent/messages` answers in the latest open thread of a phone or, without one, sends a hub
//! message. States: `open` (waiting for an agent) → agent reply → `pending` (waiting for the user) → user
//! reply → `open`; closed by the partner; a user message reopens.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::messages::{SendMessage, message_json, validate_content};
use super::required_phone;
use super::{ApiJson, QueryMap, parse_id};
use crate::auth::{PartnerAuth, UserAuth};
use crate::clock::record_time;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::secrets::random_alnum;
use crate::state::AppState;
use crate::store::conversations::{self as store, Conversation};
use crate::store::messages::{self, Created};
use crate::store::{accounts, partners};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/conversations", get(my_conversations).post(open_conversation))
        .route("/me/conversations/{ref}", get(my_conversation))
        .route("/me/conversations/{ref}/messages", post(user_message))
        .route("/conversations", get(list_conversations))
        .route("/conversations/{id}", get(get_conversation).patch(update_conversation))
        .route("/conversations/{id}/messages", post(agent_reply))
        .route("/agent/messages", post(agent_message))
}

pub const STATES: &[&str] = &["open", "pending", "closed"];
/// Messages embedded in a conversation record (the latest ones, oldest first).
const EMBEDDED_MESSAGES: i64 = 200;

pub fn conversation_json(c: &Conversation) -> Value {
    json!({
        "conversation_id": c.id,
        "ref": c.reference,
        "phone": c.phone,
        "partner": c.partner_code,
        "subject": c.subject,
        "state": c.state,
        "last_message_at": record_time(c.last_message_at),
        "created_at": record_time(c.created_at),
    })
}

async fn with_messages(state: &AppState, c: &Conversation) -> ApiResult<Value> {
    let mut record = conversation_json(c);
    let rows = messages::list_conversation(&state.db, c.id, EMBEDDED_MESSAGES).await?;
    record["messages"] = rows.iter().map(message_json).collect();
    Ok(record)
}

// ---- the user's side ----

async fn my_conversations(State(state): State<AppState>, user: UserAuth, query: QueryMap) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let rows = store::list_for_phone(&state.db, &user.phone, page.before, page.fetch()).await?;
    Ok(Json(page.respond(rows, |c| c.id, conversation_json)))
}

#[derive(Deserialize)]
struct OpenConversation {
    partner: Option<String>,
    subject: Option<String>,
    #[serde(flatten)]
    message: SendMessage,
}

async fn open_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<OpenConversation>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let code = req.partner.as_deref().map(str::trim).filter(|p| !p.is_empty());
    let code = code.ok_or_else(|| ApiError::validation("partner", "partner is required"))?;
    let subject = req.subject.as_deref().map(str::trim).filter(|s| !s.is_empty());
    if subject.is_some_and(|s| s.chars().count() > 200) {
        return Err(ApiError::validation("subject", "subject is at most 200 characters"));
    }
    // Support is opened with a partner the user is linked to.
    let partner = partners::find_by_code(&state.db, code).await?.ok_or_else(|| ApiError::not_found("partner"))?;
    let account = accounts::find_account(&state.db, &user.phone).await?;
    let linked = match &account {
        Some(a) => accounts::linked_partners(&state.db, a.id).await?.iter().any(|(c, _)| c == code),
        None => false,
    };
    if !linked {
        return Err(ApiError::not_found("partner"));
    }
    let content = user_content(&state, partner.id, &req.message, &user.phone).await?;
    let first = content.into_message(partner.id, &user.phone, "in", None);
    let reference = format!("conv_{}", random_alnum(24));
    let (conversation, message) =
        store::open(&state.db, &reference, subject, first, state.now(), events::conversation_message).await?;
    let mut record = conversation_json(&conversation);
    record["messages"] = json!([message_json(&message)]);
    Ok((StatusCode::CREATED, Json(record)))
}

/// A user's message: text (or other content) they write; the body is required unless encrypted.
async fn user_content(
    state: &AppState,
    partner_id: i64,
    req: &SendMessage,
    phone: &str,
) -> ApiResult<super::messages::Content> {
    validate_content(state, partner_id, req, Some(phone)).await
}

async fn my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<Value>> {
    let c = store::find_for_user(&state.db, &user.phone, &reference)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok(Json(with_messages(&state, &c).await?))
}

async fn user_message(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let c = store::find_for_user(&state.db, &user.phone, &reference)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    let content = user_content(&state, c.partner_id, &req, &user.phone).await?;
    let message = content.into_message(c.partner_id, &user.phone, "in", Some(c.id));
    // A user message puts the thread back in the agents' queue, reopening a closed one.
    let (_, m) = store::append(&state.db, c.id, message, "open", state.now(), events::conversation_message).await?;
    Ok((StatusCode::CREATED, Json(message_json(&m))))
}

// ---- the partner's side ----

async fn list_conversations(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let wanted = query.text("state");
    if wanted.as_deref().is_some_and(|s| !STATES.contains(&s)) {
        return Err(ApiError::validation("state", "state must be open, pending or closed"));
    }
    let rows = store::list_for_partner(
        &state.db,
        partner.id,
        wanted.as_deref(),
        query.text("q").as_deref(),
        page.before,
        page.fetch(),
    )
    .await?;
    Ok(Json(page.respond(rows, |c| c.id, conversation_json)))
}

async fn get_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, "conversation")?;
    let c =
        store::find_for_partner(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok(Json(with_messages(&state, &c).await?))
}

#[derive(Deserialize)]
struct UpdateConversation {
    state: Option<String>,
}

async fn update_conversation(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateConversation>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, "conversation")?;
    if req.state.as_deref() != Some("closed") {
        return Err(ApiError::validation("state", "state can only be set to closed (a user message reopens)"));
    }
    let c = store::set_state(&state.db, partner.id, id, "closed")
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok(Json(conversation_json(&c)))
}

/// An agent's reply in a conversation: the thread now waits for the user.
async fn reply(state: &AppState, partner_id: i64, c: &Conversation, req: &SendMessage) -> ApiResult<Value> {
    let content = validate_content(state, partner_id, req, Some(&c.phone)).await?;
    let message = content.into_message(partner_id, &c.phone, "out", Some(c.id));
    let (_, m) = store::append(&state.db, c.id, message, "pending", state.now(), events::conversation_message).await?;
    state.delivery.wake.notify_one();
    Ok(message_json(&m))
}

async fn agent_reply(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let id = parse_id(&id, "conversation")?;
    let c =
        store::find_for_partner(&state.db, partner.id, id).await?.ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok((StatusCode::CREATED, Json(reply(&state, partner.id, &c, &req).await?)))
}

/// `POST /agent/messages`: into the latest open or pending thread of the phone; otherwise a hub message
/// (never a new conversation: only users open them).
async fn agent_message(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let phone = required_phone(req.phone.as_deref())?.to_string();
    if let Some(c) = store::latest_active(&state.db, partner.id, &phone).await? {
        return Ok((StatusCode::CREATED, Json(reply(&state, partner.id, &c, &req).await?)));
    }
    let content = validate_content(&state, partner.id, &req, Some(&phone)).await?;
    let message = content.into_message(partner.id, &phone, "out", None);
    match state.messages.create(message, state.now()).await? {
        Created::New(m) | Created::Replayed(m) => {
            state.delivery.wake.notify_one();
            Ok((StatusCode::CREATED, Json(message_json(&m))))
        }
        Created::KeyReused => Err(ApiError::idempotency_conflict()),
    }
}
