//! The Server-Sent Events kit every live stream is made of: [`Follow`] keeps one stream's place in a key's
//! event log (what this host handed over, else the log), [`Tail`] turns it into the events an [`Audience`]
//! renders, with a `reset` first when asked and a `logout` when its sign-in ends, and [`sse`] sends them with
//! a comment each heartbeat.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;

use super::registry::StreamSlot;
use super::wakes::{Handed, Watch};
use crate::http::state::AppState;
use crate::messages::Message;
use crate::store::user_events::{self, UserEvent};

/// Events read from the log at once.
const BATCH: i64 = 100;

/// The last event id a reconnecting client has: the `Last-Event-ID` header, or `?last_event_id=`.
pub fn last_event_id(headers: &HeaderMap, query: Option<String>) -> Option<i64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(query)
        .and_then(|id| id.trim().parse::<i64>().ok())
}

/// `events` as Server-Sent Events, with a comment line each heartbeat.
pub fn sse<S>(state: &AppState, events: S) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<S>>
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    Sse::new(events).keep_alive(KeepAlive::new().interval(state.config.stream_heartbeat()))
}

/// What a followed log has next.
pub enum Next {
    /// Events after the last read, each with the message it is about (if any).
    Events(Vec<user_events::Logged>),
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
pub struct Follow {
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
                Handed::Gap => match user_events::events_since(&self.state.db, &self.key, self.after, BATCH).await {
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

/// Who a kind of stream is for: how it shows them an event from the log it follows, and whether they
/// may go on (asked at each heartbeat).
pub trait Audience: Send + 'static {
    /// The event as this reader sees it; `None` skips it (what it is about is gone, or not theirs).
    fn render(&mut self, event: UserEvent, message: Option<Message>) -> impl Future<Output = Option<Event>> + Send;
    /// Whether the sign-in the stream was opened with still works.
    fn still_valid(&mut self) -> impl Future<Output = bool> + Send;
}

/// An open stream: a `reset` first when asked, then the followed log's events as its reader renders them,
/// until the reader's sign-in ends (a last `logout`) or the host stops.
pub struct Tail<R> {
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
