//! The user's side: my support threads (never bot sessions), opening one with a linked partner, writing in it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{ConversationRecord, ThreadRecord, page_of, read, user_thread, with_messages};
use crate::conversations::{self, Reader};
use crate::http::auth::UserAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::messages::send::Sent;

use crate::http::messages::{MessageRecord, SendMessage, created, idempotency_header};
use crate::http::state::AppState;
use crate::http::{ApiJson, ApiQuery, E404, E409, E422, List, PageParams, SearchParams, parse_value};
use crate::messages::compose;

/// My support threads (never bot sessions), newest first; with `q`, those whose subject or messages match.
#[utoipa::path(
    get,
    path = "/me/conversations",
    tag = "users",
    security(("userJwt" = [])),
    params(SearchParams, PageParams),
    responses(
        (status = 200, description = "A page of conversations", body = List<ConversationRecord>),
        (status = 422, response = E422),
    )
)]
pub(super) async fn list_my_conversations(
    State(state): State<AppState>,
    user: UserAuth,
    ApiQuery(page): ApiQuery<PageParams>,
    ApiQuery(search): ApiQuery<SearchParams>,
) -> ApiResult<Json<List<ConversationRecord>>> {
    let page = page.page()?;
    let words = search.words()?;
    if words.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Json(List::empty()));
    }
    let rows =
        conversations::list_for_phone(&state.db, &user.phone, words.as_deref(), page.before, page.fetch()).await?;
    Ok(Json(page_of(&state, &page, rows, Reader::User).await?))
}

/// Open support with a partner: the first message's content fields, as for any message.
#[derive(Deserialize, ToSchema)]
pub(super) struct OpenConversation {
    /// The code of a partner the user's account is linked to.
    #[schema(value_type = String, required = true, pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    partner: Option<String>,
    #[schema(max_length = 200)]
    subject: Option<String>,
    #[serde(flatten)]
    message: SendMessage,
}

/// Open support with a linked partner, with the first message (send-message content fields).
#[utoipa::path(
    post,
    path = "/me/conversations",
    tag = "conversations",
    security(("userJwt" = [])),
    request_body = OpenConversation,
    responses(
        (status = 201, description = "The conversation (open) with its first message", body = ThreadRecord),
        (status = 404, response = E404),
    )
)]
pub(super) async fn open_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    ApiJson(req): ApiJson<OpenConversation>,
) -> ApiResult<(StatusCode, Json<ThreadRecord>)> {
    let (partner, subject, quota) = (req.partner.as_deref(), req.subject.as_deref(), state.config.upload_quota());
    let (conversation, message) =
        conversations::open_by_user(&state.sending(), &user.phone, partner, subject, &req.message, quota).await?;
    let record = ThreadRecord {
        conversation: ConversationRecord::new(&conversation, 0, Some(&message)),
        messages: vec![MessageRecord::from(&message)],
    };
    Ok((StatusCode::CREATED, Json(record)))
}

/// One of my conversations with its messages.
#[utoipa::path(
    get,
    path = "/me/conversations/{ref}",
    tag = "conversations",
    security(("userJwt" = [])),
    responses((status = 200, description = "The conversation", body = ThreadRecord), (status = 404, response = E404))
)]
pub(super) async fn get_my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<ThreadRecord>> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok(Json(with_messages(&state, &c, Reader::User).await?))
}

/// I have seen my conversation: the agents' messages in it become `read` (the partner gets a
/// `message.status` for each, my other devices a `conversation.message`).
#[utoipa::path(
    post,
    path = "/me/conversations/{ref}/read",
    tag = "conversations",
    security(("userJwt" = [])),
    responses(
        (status = 200, description = "The conversation, read (unread 0)", body = ThreadRecord),
        (status = 404, response = E404),
    )
)]
pub(super) async fn read_my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<ThreadRecord>> {
    let c = user_thread(&state, &user, &reference).await?;
    Ok(Json(read(&state, &c, Reader::User).await?))
}

/// My rating of a conversation.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewRating)]
pub(super) struct NewRating {
    /// 1 (poor) to 5 (great).
    #[schema(value_type = i64, required = true, minimum = 1, maximum = 5)]
    score: Option<i64>,
    /// At most 1,000 characters.
    #[schema(max_length = 1000)]
    comment: Option<String>,
}

/// Rate my conversation.
///
/// Once it was closed and the partner asked (its latest message carries `rating`): within 7 days, once. It
/// stays closed. Not asked, rated already, or asked more than 7 days ago is `422` on `score`.
#[utoipa::path(
    post,
    path = "/me/conversations/{ref}/rating",
    tag = "conversations",
    security(("userJwt" = [])),
    request_body = NewRating,
    responses(
        (status = 200, description = "The conversation, rated", body = ConversationRecord),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
pub(super) async fn rate_my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<NewRating>,
) -> ApiResult<Json<ConversationRecord>> {
    let c = user_thread(&state, &user, &reference).await?;
    let score = req.score.ok_or_else(|| ApiError::validation("score", "score is 1 (poor) to 5 (great)"))?;
    crate::conversations::rate(&state.db, &c, score, req.comment.as_deref(), state.now()).await??;
    let c = user_thread(&state, &user, &reference).await?;
    Ok(Json(super::record(&state, &c, Reader::User).await?))
}

/// I am writing in my conversation.
///
/// The partner's agents see "typing…" (`conversation.typing` on `GET /conversations/events`) for a few
/// seconds. Send it at most every 2 seconds while writing; more often changes nothing.
#[utoipa::path(
    post,
    path = "/me/conversations/{ref}/typing",
    tag = "conversations",
    security(("userJwt" = [])),
    responses((status = 204, description = "The agents are told"), (status = 404, response = E404))
)]
pub(super) async fn typing_in_my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<StatusCode> {
    let c = user_thread(&state, &user, &reference).await?;
    crate::conversations::typing(&state.db, &c, Reader::User, &state.typing, state.now()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Write in my conversation (reopens it: open).
///
/// An `idempotency_key` (or the `Idempotency-Key` header) makes a retry safe, as for partner sends: within
/// 24 h the same key in the same conversation answers the original message (`Idempotent-Replayed: true`)
/// and writes nothing; with a different message it is `409 idempotency_conflict`. The app sends what the
/// user wrote offline this way, so it is written once however often it is retried.
#[utoipa::path(
    post,
    path = "/me/conversations/{ref}/messages",
    tag = "conversations",
    security(("userJwt" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Deduplicates retries for 24 h (or `idempotency_key` in the body)")),
    request_body = SendMessage,
    responses(
        (status = 201, description = "The message (direction in); also when a retry is replayed, then with header `Idempotent-Replayed: true`", body = MessageRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
    )
)]
pub(super) async fn write_in_my_conversation(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    headers: HeaderMap,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Response> {
    let req: SendMessage = parse_value(raw.clone())?;
    let c = user_thread(&state, &user, &reference).await?;
    let idempotency = compose::idempotency(&req, &raw, idempotency_header(&headers)?)?;
    let quota = state.config.upload_quota();
    // A user message puts the thread back in the agents' queue, reopening a closed one.
    match conversations::write_by_user(&state.sending(), &c, &user.phone, &req, idempotency, quota).await? {
        Sent::New(m) => Ok(created(&m, false)),
        Sent::Replayed(m) => Ok(created(&m, true)),
    }
}
