//! `GET /me/events`: the signed-in user's live events, as Server-Sent Events, across all their partners.
//!
//! A browser's `EventSource` cannot send an `Authorization` header, and a JWT must never sit in a URL: the
//! app first asks `POST /me/events/ticket` (with its token) for a ticket — single use, valid for a minute,
//! stored as a digest — and opens the stream with it. Each event has the user's next number as its `id`
//! and a JSON body the app renders without another request. Reconnecting with `Last-Event-ID` (or
//! `?last_event_id=`) replays what was missed from the log (kept 24 hours); past that, one `reset` event
//! tells the app to fetch afresh. A comment every `HUBBUB_STREAM_HEARTBEAT_MS` keeps proxies from closing an
//! idle stream; when the token it was opened with is signed out or expires, a `logout` event ends it.
//! Streams are bounded per user (`HUBBUB_STREAMS_PER_USER`, 429) and per host (`HUBBUB_MAX_STREAMS`, 503);
//! several streams of one device all work (each gets every event). An open stream is the user's presence:
//! noted when it opens, at the heartbeats that keep the note fresh (`store::devices::PresenceNotes`) and
//! when it ends.

use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::sse::{Audience, Follow, Tail, last_event_id, sse};
use crate::clock::record_time;
use crate::conversations::Conversation;
use crate::conversations::Reader;
use crate::http::abuse::ClientIp;
use crate::http::auth::UserAuth;
use crate::http::conversations::ConversationRecord;
use crate::http::error::{ApiError, ApiResult};
use crate::http::messages::MessageRecord;
use crate::http::state::AppState;
use crate::http::{ApiQuery, E401, E429, E503};
use crate::messages::Message;
use crate::names::{Direction, MessageState, SessionKind, UserEventKind};
use crate::secrets::{digest, random_alnum};
use crate::store::Db;
use crate::store::user_events::{self, Ticket, UserEvent};
use crate::{bots, conversations, flows};

/// How long a ticket opens a stream.
const TICKET_TTL_MS: i64 = 60_000;

/// A ticket that opens one event stream.
#[derive(Serialize, ToSchema)]
#[schema(as = StreamTicket)]
pub struct StreamTicket {
    /// Pass it as `?ticket=` to `GET /api/v1/me/events`, within a minute, once.
    ticket: String,
    expires_at: String,
}

/// A ticket for my event stream.
///
/// Single use, valid for a minute; the stream it opens ends when the token that asked for it is signed out
/// or expires.
#[utoipa::path(
    post,
    path = "/me/events/ticket",
    tag = "users",
    security(("userJwt" = [])),
    responses((status = 201, description = "The ticket", body = StreamTicket))
)]
pub async fn stream_ticket(
    State(state): State<AppState>,
    user: UserAuth,
) -> ApiResult<(StatusCode, Json<StreamTicket>)> {
    let ticket = format!("evt_{}", random_alnum(32));
    let expires_at = state.now() + TICKET_TTL_MS;
    let issued =
        Ticket { phone: user.phone, device: user.device, token_iat: user.issued_at_s, token_exp: user.expires_at_s };
    user_events::insert_ticket(&state.db, &digest(&ticket), &issued, expires_at).await?;
    Ok((StatusCode::CREATED, Json(StreamTicket { ticket, expires_at: record_time(expires_at) })))
}

/// How the stream is opened.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// From `POST /me/events/ticket`.
    ticket: Option<String>,
    /// The last event id the app has (instead of the `Last-Event-ID` header): the stream replays what
    /// came after it.
    last_event_id: Option<String>,
}

/// My live events (Server-Sent Events).
///
/// Events: `message.created` and `message.updated` (a hub message, as `GET /me/messages` lists it),
/// `conversation.message` (`{conversation, message}`), `conversation.updated` (the conversation),
/// `conversation.typing` (`{conversation_id, ref, from: "agent"}`: an agent is writing; show it for a few
/// seconds, or until their message comes), `flow.updated` (`{ref, kind, state, bot_ref}`: fetch its new steps), `reset` (the events since the app's
/// last id are no longer kept: fetch afresh) and `logout` (the token was signed out or expired). Each has
/// an `id` that increases per user; reconnect with `Last-Event-ID` to get what was missed (kept 24 hours).
/// A comment line every 25 seconds keeps the connection open. Authentication is the ticket: a missing,
/// forged, used or expired one is 401.
#[utoipa::path(
    get,
    path = "/me/events",
    tag = "users",
    params(StreamQuery, ("Last-Event-ID" = Option<String>, Header, description = "The last event id the app has.")),
    responses(
        (status = 200, description = "The stream", content_type = "text/event-stream", body = String),
        (status = 401, response = E401),
        (status = 429, response = E429),
        (status = 503, response = E503),
    )
)]
pub async fn event_stream(
    State(state): State<AppState>,
    ClientIp(client): ClientIp,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<StreamQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let refused = || ApiError::unauthorized("open the stream with a fresh ticket from POST /api/v1/me/events/ticket");
    let now = state.now();
    state.code_limits.check_ticket_misses(client, now)?;
    // A ticket not of our making, one used or lapsed, costs a read at most, never a write.
    let hash = query.ticket.as_deref().map(str::trim).filter(|t| well_formed_ticket(t)).map(digest);
    let usable = match &hash {
        Some(hash) => user_events::ticket_usable(&state.db, hash, now).await?,
        None => false,
    };
    let redeemed = match hash.filter(|_| usable) {
        Some(hash) => user_events::redeem_ticket(&state.db, &hash, now).await?,
        None => None,
    };
    let Some(ticket) = redeemed else {
        state.code_limits.ticket_missed(client, now);
        return Err(refused());
    };
    if signed_out(&state, &ticket).await? {
        return Err(ApiError::unauthorized("this token was signed out or has expired: sign in again"));
    }
    let slot = state.streams.open(&ticket.phone)?;
    let (follow, reset) =
        Follow::open(&state, ticket.phone.clone(), last_event_id(&headers, query.last_event_id)).await?;
    state.presence.touch(&ticket.phone, now).await?;
    tracing::debug!(phone_suffix = %suffix(&ticket.phone), after = follow.after, reset, "event stream opened");
    Ok(sse(&state, Tail::new(follow, reset, slot, Live { state: state.clone(), ticket })))
}

/// Whether `ticket` is of the shape [`stream_ticket`] makes (`evt_` and 32 letters or digits).
fn well_formed_ticket(ticket: &str) -> bool {
    ticket.strip_prefix("evt_").is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The last digits of a phone, for logs.
fn suffix(phone: &str) -> &str {
    &phone[phone.len().saturating_sub(4)..]
}

/// Whether the token a ticket was asked with no longer works.
async fn signed_out(state: &AppState, ticket: &Ticket) -> Result<bool, sqlx::Error> {
    Ok(ticket.token_exp * 1000 <= state.now()
        || state.revocations.is_revoked(&state.db, &ticket.phone, ticket.token_iat, state.now()).await?)
}

/// A user's stream.
struct Live {
    state: AppState,
    ticket: Ticket,
}

impl Audience for Live {
    async fn render(&mut self, event: UserEvent, message: Option<Message>) -> Option<Event> {
        let (db, device, now) = (&self.state.db, self.ticket.device.as_deref(), self.state.now());
        let (rendered, carried) = render(db, &event, message, device, now).await?;
        if let Some(message) = carried {
            self.delivered(message);
        }
        Some(rendered)
    }

    /// The user's presence is noted as the stream goes on.
    async fn still_valid(&mut self) -> bool {
        let now = self.state.now();
        if let Err(error) = self.state.presence.beat(&self.ticket.phone, now).await {
            tracing::warn!(%error, "an event stream could not note the user's presence");
        }
        !signed_out(&self.state, &self.ticket).await.unwrap_or(false)
    }
}

impl Live {
    /// A hub message goes down this stream: a device has it, so it is `delivered` (which ends the wait for
    /// the fallback after the hub).
    /// Handed to the group commit, without holding up the stream: the event goes out now.
    fn delivered(&self, message: Message) {
        if let Some(handed) = crate::messages::handed_over(message, self.state.now()) {
            self.state.delivered.hand(handed);
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let phone = self.ticket.phone.clone();
        // The user was here until now: the offline timer (HUBBUB_OFFLINE_AFTER_S) starts as the stream ends.
        let state = self.state.clone();
        tokio::spawn(async move {
            if let Err(error) = state.presence.left(&phone, state.now()).await {
                tracing::warn!(%error, "a closing event stream could not note the user's presence");
            }
        });
    }
}

/// An event as the stream sends it (with `message`, the message it is about, read with it), and the message
/// it hands to the device when that one was not delivered yet (a hub message, an agent's message in a
/// conversation); `None` when what it is about is gone. Each body is serialized once, straight to its text.
async fn render(
    db: &Db,
    event: &UserEvent,
    message: Option<Message>,
    device: Option<&str>,
    now: crate::clock::Millis,
) -> Option<(Event, Option<Message>)> {
    let mut carried = None;
    let body = match event.kind {
        UserEventKind::MessageCreated | UserEventKind::MessageUpdated => {
            let m = message?;
            let body = serde_json::to_string(&MessageRecord::for_device(&m, device)).ok()?;
            // Replayed, a message the device had already got is not handed over again.
            if event.kind == UserEventKind::MessageCreated && MessageState::UNDELIVERED.contains(&m.state) {
                carried = Some(m);
            }
            body
        }
        UserEventKind::ConversationMessage => {
            let m = message?;
            let c = conversations::find_by_id(db, m.conversation_id?).await.ok()??;
            let conversation = as_user_sees(db, &c).await?;
            let body = ConversationMessage { conversation, message: MessageRecord::for_device(&m, device) };
            let body = serde_json::to_string(&body).ok()?;
            if m.direction == Direction::Out && MessageState::UNDELIVERED.contains(&m.state) {
                carried = Some(m);
            }
            body
        }
        UserEventKind::ConversationUpdated => {
            let c = conversations::find_by_id(db, event.subject_id).await.ok()??;
            serde_json::to_string(&as_user_sees(db, &c).await?).ok()?
        }
        UserEventKind::FlowUpdated => {
            let s = flows::find_by_id(db, event.subject_id).await.ok()??;
            let bot = bots::find_by_id(db, s.bot_id).await.ok()??;
            let kind = if s.kind == SessionKind::Flow { "flow" } else { "chat" };
            json!({ "ref": s.reference, "kind": kind, "state": s.state, "bot_ref": bot.reference }).to_string()
        }
        UserEventKind::AccountUpdated => "{}".to_string(),
        // An agent writes: shown a few seconds, never when replayed stale.
        UserEventKind::ConversationTyping => {
            if now - event.created_at > crate::conversations::TYPING_SHOWN_MS {
                return None;
            }
            let c = conversations::find_by_id(db, event.subject_id).await.ok()??;
            json!({ "conversation_id": c.id, "ref": c.reference, "from": "agent" }).to_string()
        }
        // A partner's own log only: never on a person's stream.
        UserEventKind::WebhookDeliveries => return None,
    };
    Some((Event::default().id(event.seq.to_string()).event(event.kind.as_str()).data(body), carried))
}

/// A `conversation.message` event's body: the conversation as its user sees it, and the message.
#[derive(Serialize)]
struct ConversationMessage {
    conversation: ConversationRecord,
    message: MessageRecord,
}

/// A conversation as its user sees it (the agents' messages not read yet).
async fn as_user_sees(db: &Db, c: &Conversation) -> Option<ConversationRecord> {
    let seen = conversations::seen(db, &[c.id], Reader::User).await.ok()?;
    Some(ConversationRecord::new(c, seen.unread.get(&c.id).copied().unwrap_or(0), seen.last.get(&c.id)))
}
