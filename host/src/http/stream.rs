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
//!
//! Hosts learn of new events through [`Wakes`]: PostgreSQL's `LISTEN` (every append notifies; the woken
//! streams read the log), or on SQLite a tail of the log, read as soon as this process has written and at a
//! poll, that hands each stream its events ([`run_wakes`]).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::abuse::ClientIp;
use super::conversations::ConversationRecord;
use super::messages::MessageRecord;
use super::streams::{Handed, StreamSlot, Wakes, Watch};
use super::{ApiQuery, E401, E429, E503};
use crate::auth::UserAuth;
use crate::clock::record_time;
use crate::conversations::Reader;
use crate::http::error::{ApiError, ApiResult};
use crate::names::{Direction, MessageState, SessionKind, UserEventKind};
use crate::secrets::{digest, random_alnum};
use crate::state::AppState;
use crate::store::conversations::Conversation;
use crate::store::messages::Message;
use crate::store::user_events::{self, Ticket, UserEvent};
use crate::store::{Backend, Db, conversations, flows, messages};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_ticket)).routes(routes!(event_stream))
}

/// How long a ticket opens a stream.
const TICKET_TTL_MS: i64 = 60_000;

/// Events read from the log at once.
const BATCH: i64 = 100;

/// A ticket that opens one event stream.
#[derive(Serialize, ToSchema)]
#[schema(as = StreamTicket)]
struct StreamTicket {
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
async fn stream_ticket(State(state): State<AppState>, user: UserAuth) -> ApiResult<(StatusCode, Json<StreamTicket>)> {
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
struct StreamQuery {
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
/// `flow.updated` (`{ref, kind, state, bot_ref}`: fetch its new steps), `reset` (the events since the app's
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
async fn event_stream(
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

/// The last event id a reconnecting client has: the `Last-Event-ID` header, or `?last_event_id=`.
pub(super) fn last_event_id(headers: &HeaderMap, query: Option<String>) -> Option<i64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(query)
        .and_then(|id| id.trim().parse::<i64>().ok())
}

/// `events` as Server-Sent Events, with a comment line each heartbeat.
pub(super) fn sse<S>(state: &AppState, events: S) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<S>>
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    Sse::new(events).keep_alive(KeepAlive::new().interval(state.config.stream_heartbeat()))
}

/// What a followed log has next.
pub(super) enum Next {
    /// Events after the last read, each with the message it is about (if any).
    Events(Vec<messages::Logged>),
    /// A heartbeat went by with nothing new: the stream checks it may go on.
    Beat,
    /// The host stops.
    Stop,
}

/// One stream's place in one key's event log (a user's phone, or a partner's key): takes what comes after
/// `after` — as this host handed it over, or read from the log when it was not (the first time, after a
/// gap, when woken with nothing handed over) —, waking when the key is told it has new events and at its
/// heartbeat. The heartbeat keeps its time however many events come: a stream busy with events is still
/// asked at each beat whether its sign-in works.
pub(super) struct Follow {
    state: AppState,
    key: String,
    /// The newest event number read.
    pub after: i64,
    watch: Arc<Watch>,
    /// The next events are read from the log.
    read_log: bool,
    /// How many times the key's streams had been asked to read the log when this one last looked.
    asked: u64,
    heartbeat: Duration,
    /// The next heartbeat: one timer for the stream's life, moved at each beat (not a new one each time the
    /// stream waits, which is after every event it sends).
    beat: Pin<Box<tokio::time::Sleep>>,
}

impl Follow {
    /// Follows `key` from `last` (the client's last event id; none: from now). Also answers whether the
    /// client must be told to fetch afresh (`reset`): its id is past the newest or older than the log keeps.
    pub async fn open(state: &AppState, key: String, last: Option<i64>) -> Result<(Follow, bool), sqlx::Error> {
        let (newest, oldest) = user_events::bounds(&state.db, &key).await?;
        let (after, reset) = match last {
            None => (newest, false),
            Some(id) if id > newest || id < 0 => (newest, true),
            Some(id) => (id, id < newest && oldest.is_none_or(|o| id + 1 < o)),
        };
        let watch = state.wakes.watch(&key);
        // Each stream's beat is its own, between 3/4 and all of the interval, and its first comes anywhere
        // within one: streams opened together (a host restarted, a broadcast's readers) do their checks
        // spread over the whole interval from the start, as many each second as later on, not all in the
        // same instant, nor as one wave a little under an interval after they opened.
        let heartbeat = state.config.stream_heartbeat().mul_f64(rand::random_range(0.75..=1.0));
        let asked = watch.asked();
        let beat = Box::pin(tokio::time::sleep(heartbeat.mul_f64(rand::random_range(0.0..=1.0))));
        Ok((Follow { state: state.clone(), key, after, watch, read_log: true, asked, heartbeat, beat }, reset))
    }

    /// The next events (`after` then moves past them), or the heartbeat when it is due (before any events),
    /// or the host's stop.
    pub async fn next(&mut self) -> Next {
        let watch = self.watch.clone();
        loop {
            let now = tokio::time::Instant::now();
            if now >= self.beat.deadline() {
                self.beat.as_mut().reset(now + self.heartbeat);
                return Next::Beat;
            }
            let woken = watch.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // Asked to read the log (PostgreSQL's notification, the listener reconnected) since the last look,
            // even while this stream was busy sending and not waiting for the wake: read it.
            let asked = watch.asked();
            if asked != self.asked {
                self.asked = asked;
                self.read_log = true;
            }
            let handed = if self.read_log { Handed::Gap } else { watch.after(self.after) };
            let events = match handed {
                Handed::Events(events) => events,
                Handed::Nothing => Vec::new(),
                Handed::Gap => match messages::events_since(&self.state.db, &self.key, self.after, BATCH).await {
                    Ok(events) => {
                        // A whole batch: there may be more in the log than was handed over.
                        self.read_log = events.len() as i64 == BATCH;
                        events
                    }
                    Err(error) => {
                        tracing::warn!(%error, "an event stream could not read the log");
                        Vec::new()
                    }
                },
            };
            if let Some((last, _)) = events.last() {
                self.after = last.seq;
                return Next::Events(events);
            }
            let stop = self.state.shutdown.clone();
            tokio::select! {
                _ = &mut woken => {}
                _ = self.beat.as_mut() => {}
                _ = stop.cancelled() => return Next::Stop,
            }
        }
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        // The watch is ours to drop first, so the registry can tell the key has no stream left.
        self.watch = Arc::default();
        self.state.wakes.unwatch(&self.key);
    }
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

/// Who a kind of stream is for: how it shows them an event from the log it follows, and whether they
/// may go on (asked at each heartbeat).
pub(super) trait Audience: Send + 'static {
    /// The event as this reader sees it; `None` skips it (what it is about is gone, or not theirs).
    fn render(&mut self, event: UserEvent, message: Option<Message>) -> impl Future<Output = Option<Event>> + Send;
    /// Whether the sign-in the stream was opened with still works.
    fn still_valid(&mut self) -> impl Future<Output = bool> + Send;
}

/// An open stream: a `reset` first when asked, then the followed log's events as its reader renders them,
/// until the reader's sign-in ends (a last `logout`) or the host stops.
pub(super) struct Tail<R> {
    follow: Follow,
    reader: R,
    /// Events read and not sent yet.
    pending: VecDeque<Event>,
    /// A `reset` to send first.
    reset: bool,
    /// Ended (a `logout` was sent, or the host stops).
    over: bool,
    _slot: StreamSlot,
}

impl<R: Audience> Tail<R> {
    /// The stream of events.
    pub fn new(
        follow: Follow,
        reset: bool,
        slot: StreamSlot,
        reader: R,
    ) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
        let tail = Tail { follow, reader, pending: VecDeque::new(), reset, over: false, _slot: slot };
        futures_util::stream::unfold(tail, |mut tail| async move {
            let event = tail.next().await?;
            Some((Ok(event), tail))
        })
    }

    /// The next event to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Event> {
        if self.over {
            return None;
        }
        if std::mem::take(&mut self.reset) {
            return Some(Event::default().event("reset").data("{}"));
        }
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            match self.follow.next().await {
                Next::Events(events) => {
                    for (event, message) in events {
                        if let Some(rendered) = self.reader.render(event, message).await {
                            self.pending.push_back(rendered);
                        }
                    }
                }
                Next::Beat => {
                    if !self.reader.still_valid().await {
                        self.over = true;
                        return Some(Event::default().event("logout").data(r#"{"reason":"signed_out"}"#));
                    }
                }
                Next::Stop => return None,
            }
        }
    }
}

/// A user's stream.
struct Live {
    state: AppState,
    ticket: Ticket,
}

impl Audience for Live {
    async fn render(&mut self, event: UserEvent, message: Option<Message>) -> Option<Event> {
        let (rendered, carried) = render(&self.state.db, &event, message, self.ticket.device.as_deref()).await?;
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
            let bot = crate::store::bots::find_by_id(db, s.bot_id).await.ok()??;
            let kind = if s.kind == SessionKind::Flow { "flow" } else { "chat" };
            json!({ "ref": s.reference, "kind": kind, "state": s.state, "bot_ref": bot.reference }).to_string()
        }
        UserEventKind::AccountUpdated => "{}".to_string(),
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
    let unread = messages::unread_counts(db, &[c.id], Reader::User.reads()).await.ok()?;
    Some(ConversationRecord::new(c, unread.get(&c.id).copied().unwrap_or(0)))
}

/// The shortest time between two reads of SQLite's log woken by this process's writes.
const TAIL_GAP: Duration = Duration::from_millis(2);

/// Log rows SQLite's tail reads at once.
const TAIL_BATCH: i64 = 1000;

/// Wakes this host's streams when their users have new events, until `stop`: PostgreSQL's notifications
/// (every append notifies at commit; each stream reads the log), or on SQLite a tail of the log read when
/// this process has written (at most every [`TAIL_GAP`]) and every `poll` (what other processes sharing the
/// file wrote), which hands each stream its events with their messages: one read for all of them, the log
/// rows this process's group commits appended taken from memory (the log itself read at the poll), and the
/// messages read only for the keys with a stream here — those this process has just put into the hub not
/// even then (`messages::Fresh`).
pub async fn run_wakes(db: Db, wakes: Arc<Wakes>, database_url: String, poll: Duration, stop: CancellationToken) {
    if db.backend() == Backend::Postgres {
        listen(&database_url, &wakes, &stop).await;
        return;
    }
    let mut after = user_events::newest_id(&db).await.unwrap_or(0);
    let mut tick = tokio::time::interval(poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read_at = tokio::time::Instant::now();
    // The last read was a whole batch: read on at once.
    let mut more = false;
    loop {
        let mut ticked = false;
        if !more {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => ticked = true,
                // This process wrote: its events (if any) are committed, read them now. Writes come in
                // bursts; one read every TAIL_GAP covers all of a burst's.
                _ = db.written().notified() => {
                    if wakes.watched() > 0 {
                        tokio::time::sleep_until(read_at + TAIL_GAP).await;
                    }
                }
            }
        }
        more = false;
        if wakes.watched() == 0 {
            // No stream here: the log is not read for each write, only where it ends is kept at each poll.
            if ticked {
                after = user_events::newest_id(&db).await.unwrap_or(after);
            }
            continue;
        }
        read_at = tokio::time::Instant::now();
        // At the poll, the log itself (what other processes wrote); woken by this process's writes, what
        // its group commits appended is taken from memory.
        match messages::events_after_row(&db, after, TAIL_BATCH, ticked, |key| wakes.watches(key)).await {
            Ok(tail) => {
                (after, more) = (tail.newest.max(after), tail.whole);
                for (key, events) in tail.by_key {
                    wakes.hand_over(&key, events);
                }
            }
            Err(error) => tracing::warn!(%error, "the event log could not be read"),
        }
    }
}

/// PostgreSQL: `LISTEN` on the events channel, reconnecting after a failure (and then waking every stream
/// on this host, which reads what it may have missed).
async fn listen(database_url: &str, wakes: &Wakes, stop: &CancellationToken) {
    loop {
        let connected = async {
            let mut listener = sqlx::postgres::PgListener::connect(database_url).await?;
            listener.listen(user_events::CHANNEL).await?;
            wakes.wake_all();
            loop {
                let notification = listener.recv().await?;
                wakes.wake(notification.payload());
            }
            #[allow(unreachable_code)]
            Ok::<(), sqlx::Error>(())
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            result = connected => {
                if let Err(error) = result {
                    tracing::warn!(%error, "the event listener lost its connection; reconnecting");
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
