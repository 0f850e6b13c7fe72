//! `/me`: the app's side, for an end user with a JWT. The hub inbox (fetching marks messages
//! `delivered`), read marks, the account, bots and open forms (support threads: `http::conversations`). Every call counts as
//! device activity (see `auth::UserAuth`).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::accounts::{AccountRecord, PartnerRef, user_account};
use super::messages::MessageRecord;
use super::{ApiQuery, E404, E422, List, PageParams, SearchParams, query_text};
use crate::clock::record_time;
use crate::http::auth::UserAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{MessageState, SessionState};
use crate::{accounts, bots, flows, messages};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(my_inbox))
        .routes(routes!(my_message))
        .routes(routes!(read_my_message))
        .routes(routes!(my_unread))
        .routes(routes!(my_account))
        .routes(routes!(my_bots))
        .routes(routes!(my_forms))
        .routes(routes!(sign_out_everywhere))
        .routes(routes!(erase_me))
}

/// A fresh code, for a destructive action.
#[derive(Deserialize, ToSchema)]
#[schema(as = EraseMe)]
struct EraseMe {
    /// A code from `POST /auth/otp/start` for this phone (10 minutes, once).
    #[schema(value_type = String, required = true, pattern = "^[0-9]{6}$")]
    code: Option<String>,
}

/// What an erasure removed.
#[derive(Serialize, ToSchema)]
#[schema(as = MeErased)]
struct Erased {
    /// Messages to and from the person, of every partner.
    messages: u64,
    /// Support conversations.
    conversations: u64,
}

/// Erase me.
///
/// Deletes the person's account and everything of theirs: every partner's messages to and from them and
/// conversations with them (with their attempts, history, search entries and files), their devices and keys,
/// push subscriptions, preferences, bot sessions and form links, and their links to partners with the
/// custom values. A payment keeps its amount and state for the partner's books, without the phone. Each
/// linked partner gets an `account.erased` webhook event naming the phone only by its SHA-256, and an entry
/// in its audit log. Every token of the phone stops working; a later message to the phone starts from
/// nothing. Needs a fresh code (`POST /auth/otp/start`): `401` when it is wrong or used.
#[utoipa::path(
    delete,
    path = "/me/account",
    tag = "users",
    security(("userJwt" = [])),
    request_body = EraseMe,
    responses(
        (status = 200, description = "Erased", body = Erased),
        (status = 401, response = crate::http::E401),
        (status = 422, response = crate::http::E422)
    )
)]
async fn erase_me(
    State(state): State<AppState>,
    user: UserAuth,
    crate::http::abuse::ClientIp(client): crate::http::abuse::ClientIp,
    crate::http::ApiJson(req): crate::http::ApiJson<EraseMe>,
) -> ApiResult<Json<Erased>> {
    let code = req.code.as_deref().map(str::trim).filter(|c| !c.is_empty());
    let code = code.ok_or_else(|| ApiError::validation("code", "a code from POST /auth/otp/start is required"))?;
    crate::otp::verify(&state.codes(), &user.phone, "login", code).await?;
    let erased = crate::accounts::erase_person(&state.db, &user.phone, &client.to_string(), state.now()).await?;
    crate::http::auth::revoke_user_tokens(&state, &user.phone).await?;
    tracing::info!(messages = erased.messages, "a person erased themself");
    Ok(Json(Erased { messages: erased.messages, conversations: erased.conversations }))
}

/// Sign out everywhere.
///
/// Every token of mine issued so far (the one calling too, and any issued in the same second) is refused
/// from now on, on every host: at once here, within 2 seconds on the others. Sign in again for a new one.
#[utoipa::path(
    delete,
    path = "/me/tokens",
    tag = "users",
    security(("userJwt" = [])),
    responses((status = 204, description = "Signed out everywhere"))
)]
async fn sign_out_everywhere(State(state): State<AppState>, user: UserAuth) -> ApiResult<axum::http::StatusCode> {
    crate::http::auth::revoke_user_tokens(&state, &user.phone).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// The device reading: sealed messages show it only its own key wrap.
#[derive(Deserialize)]
struct DeviceQuery {
    device_uuid: Option<String>,
}

/// The hub inbox, newest first (or what matches `q`); returned messages become delivered.
///
/// A sealed (end-to-end encrypted) message shows only the key wrap of the reading device: the token's, or
/// `device_uuid` when the token names none.
#[utoipa::path(
    get,
    path = "/me/messages",
    tag = "users",
    security(("userJwt" = [])),
    params(
        SearchParams,
        PageParams,
        ("device_uuid" = Option<String>, Query, description = "The reading device, when the token names none"),
    ),
    responses(
        (status = 200, description = "A page of messages", body = List<MessageRecord>),
        (status = 422, response = E422),
    )
)]
async fn my_inbox(
    State(state): State<AppState>,
    user: UserAuth,
    ApiQuery(page): ApiQuery<PageParams>,
    ApiQuery(query): ApiQuery<DeviceQuery>,
    ApiQuery(search): ApiQuery<SearchParams>,
) -> ApiResult<Json<List<MessageRecord>>> {
    let page = page.page()?;
    let words = search.words()?;
    if words.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Json(List::empty()));
    }
    let mut rows = messages::list_hub(&state.db, &user.phone, words.as_deref(), page.before, page.fetch()).await?;
    // The app now has these messages: they are delivered, in the hub.
    let shown = rows.len().min(page.limit as usize);
    crate::messages::fetched_by_app(&state.db, &mut rows[..shown], state.now()).await?;
    // Each device sees its own key wrap of a sealed message (`?device_uuid=` when the token names none).
    let device = query_text(query.device_uuid).or(user.device);
    Ok(Json(page.list(rows, |m| m.id, |m| MessageRecord::for_device(m, device.as_deref()))))
}

/// What I have not read yet, per area of the app (its navigation badges, tab title and icon badge).
#[derive(Serialize, ToSchema)]
#[schema(as = Unread)]
struct UnreadRecord {
    /// Hub messages not read yet (`/me/messages`).
    #[schema(minimum = 0)]
    messages: i64,
    /// Support threads with an agent's message not read yet (`/me/conversations`).
    #[schema(minimum = 0)]
    conversations: i64,
    /// Bot chats with steps the app has not taken yet.
    #[schema(minimum = 0)]
    bots: i64,
    /// The sum of the three.
    #[schema(minimum = 0)]
    total: i64,
}

/// What I have not read yet: the app asks again when a live event says something changed.
#[utoipa::path(
    get,
    path = "/me/unread",
    tag = "users",
    security(("userJwt" = [])),
    responses((status = 200, description = "The counts", body = UnreadRecord))
)]
async fn my_unread(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<UnreadRecord>> {
    let u = messages::unread_of(&state.db, &user.phone).await?;
    let total = u.messages + u.conversations + u.bots;
    Ok(Json(UnreadRecord { messages: u.messages, conversations: u.conversations, bots: u.bots, total }))
}

/// One of my messages, by ref (the app opens a message from a link); fetching it marks it delivered.
#[utoipa::path(
    get,
    path = "/me/messages/{ref}",
    tag = "users",
    security(("userJwt" = [])),
    params(("device_uuid" = Option<String>, Query, description = "The reading device, when the token names none")),
    responses((status = 200, description = "The message", body = MessageRecord), (status = 404, response = E404))
)]
async fn my_message(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiQuery(query): ApiQuery<DeviceQuery>,
) -> ApiResult<Json<MessageRecord>> {
    Ok(Json(move_my_message(&state, &user, &reference, query, MessageState::Delivered).await?))
}

/// One of the user's messages (another's is 404) moved forward to `to` in the hub, each step with its
/// event (one already there or past it is left as it is), as the reading device sees it.
async fn move_my_message(
    state: &AppState,
    user: &UserAuth,
    reference: &str,
    query: DeviceQuery,
    to: MessageState,
) -> ApiResult<MessageRecord> {
    let m = messages::find_by_ref(&state.db, reference)
        .await?
        .filter(|m| m.phone == user.phone)
        .ok_or_else(|| ApiError::not_found("message"))?;
    let moved = crate::messages::advance_in_hub(&state.db, m.id, to, state.now()).await?;
    let device = query_text(query.device_uuid).or(user.device.clone());
    Ok(MessageRecord::for_device(&moved.unwrap_or(m), device.as_deref()))
}

/// Mark one of my messages read.
#[utoipa::path(
    post,
    path = "/me/messages/{ref}/read",
    tag = "users",
    security(("userJwt" = [])),
    params(("device_uuid" = Option<String>, Query, description = "The reading device, when the token names none")),
    responses((status = 200, description = "The message", body = MessageRecord), (status = 404, response = E404))
)]
async fn read_my_message(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiQuery(query): ApiQuery<DeviceQuery>,
) -> ApiResult<Json<MessageRecord>> {
    Ok(Json(move_my_message(&state, &user, &reference, query, MessageState::Read).await?))
}

/// My account with every linked partner.
#[utoipa::path(
    get,
    path = "/me/account",
    tag = "users",
    security(("userJwt" = [])),
    responses((status = 200, description = "The account", body = AccountRecord), (status = 404, response = E404))
)]
async fn my_account(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<AccountRecord>> {
    let account = accounts::find(&state.db, &user.phone).await?.ok_or_else(|| ApiError::not_found("account"))?;
    Ok(Json(user_account(&state, &account).await?))
}

/// A bot the user can chat with.
#[derive(Debug, Serialize, ToSchema)]
struct MyBot {
    /// Names this bot in `/me/bots/{bot}/…` (two partners may give their bots the same code).
    #[serde(rename = "ref")]
    reference: String,
    code: String,
    name: String,
    /// The bot's partner.
    partner: PartnerRef,
}

/// Bots of the partners I am linked to.
#[utoipa::path(
    get,
    path = "/me/bots",
    tag = "users",
    security(("userJwt" = [])),
    responses((status = 200, description = "Every bot, in one page", body = List<MyBot>))
)]
async fn my_bots(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<List<MyBot>>> {
    let rows = bots::list_for_user(&state.db, &user.phone).await?;
    let data = rows
        .into_iter()
        .map(|b| MyBot {
            reference: b.reference,
            code: b.code,
            name: b.name,
            partner: PartnerRef { code: b.partner_code, name: b.partner_name, fields: None },
        })
        .collect();
    Ok(Json(List { data, next_cursor: None }))
}

/// A flow the user was invited to and has not completed.
#[derive(Debug, Serialize, ToSchema)]
struct OpenForm {
    /// The flow session's ref (`/me/flows/{ref}/…`).
    #[serde(rename = "ref")]
    reference: String,
    /// The bot's code.
    bot: String,
    /// The bot's ref (`bot_ref_…`): names it unambiguously.
    bot_ref: String,
    /// The bot's partner (its code).
    partner: String,
    /// The flow's code.
    flow: String,
    title: Option<String>,
    /// `invited` or `in_progress`.
    state: SessionState,
    invited_at: String,
}

/// My open flow invitations.
#[utoipa::path(
    get,
    path = "/me/forms",
    tag = "users",
    security(("userJwt" = [])),
    responses((status = 200, description = "Every open form, newest first, in one page", body = List<OpenForm>))
)]
async fn my_forms(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<List<OpenForm>>> {
    let rows = flows::open_forms(&state.db, &user.phone).await?;
    let data = rows
        .into_iter()
        .map(|f| OpenForm {
            reference: f.reference,
            bot: f.bot,
            bot_ref: f.bot_ref,
            partner: f.partner,
            flow: f.flow,
            title: f.title,
            state: f.state,
            invited_at: record_time(f.invited_at),
        })
        .collect();
    Ok(Json(List { data, next_cursor: None }))
}
