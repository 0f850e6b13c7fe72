//! The user's side: my support threads (never bot sessions), opening one with a linked partner, writing in it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{ConversationRecord, ThreadRecord, page_of, read, user_thread, with_messages};
use crate::conversations::Reader;
use crate::http::auth::UserAuth;
use crate::http::error::{ApiError, ApiResult};

use crate::http::messages::{MessageRecord, SendMessage, created, idempotency_header, ref_taken, validate_content};
use crate::http::state::AppState;
use crate::http::{ApiJson, ApiQuery, E404, E409, E422, List, PageParams, SearchParams, parse_value};
use crate::messages::compose;
use crate::names::Direction;
use crate::secrets::random_alnum;
use crate::store::conversations as store;
use crate::store::messages::Created;
use crate::store::{accounts, partners};

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
    let rows = store::list_for_phone(&state.db, &user.phone, words.as_deref(), page.before, page.fetch()).await?;
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
        Some(a) => accounts::linked_partners(&state.db, a.id).await?.iter().any(|p| p.code == code),
        None => false,
    };
    if !linked {
        return Err(ApiError::not_found("partner"));
    }
    if req.message.wants_e2e() {
        return Err(ApiError::validation(
            "encrypted",
            "a conversation opens with a plaintext message; share a content key (POST …/keys), then send encrypted ones",
        ));
    }
    let content = validate_content(&state, partner.id, &req.message, Some(&user.phone)).await?;
    let content =
        crate::conversations::from_user(&state.db, content, &user.phone, state.config.upload_quota(), state.now())
            .await?;
    let first = content.into_message(partner.id, &user.phone, Direction::In, None);
    let reference = format!("conv_{}", random_alnum(24));
    let (conversation, message) = crate::conversations::open(&state.sending(), &reference, subject, first).await?;
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
    let content = crate::conversations::content(&state.db, state.config.dev, &c, &req).await?;
    let content =
        crate::conversations::from_user(&state.db, content, &user.phone, state.config.upload_quota(), state.now())
            .await?;
    let mut message = content.into_message(c.partner_id, &user.phone, Direction::In, Some(c.id));
    if let Some((key, hash)) = idempotency {
        // Scoped to this user's thread: keys of other writers or threads never meet.
        message.idempotency_key = Some(format!("me:{}:{}:{key}", user.phone, c.id));
        message.request_hash = Some(hash);
    }
    // A user message puts the thread back in the agents' queue, reopening a closed one.
    match crate::conversations::write(&state.sending(), c.id, message).await.map_err(ref_taken)? {
        Created::New(m) => Ok(created(&m, false)),
        Created::Replayed(m) => Ok(created(&m, true)),
        Created::KeyReused => Err(ApiError::idempotency_conflict()),
    }
}
