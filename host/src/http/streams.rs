//! The event streams open on this host (`GET /me/events`), counted per user and in all, so neither one
//! user nor all of them together hold more than their bound: past a bound, a clear 429 or 503; and what
//! wakes them ([`Wakes`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::http::error::ApiError;
use crate::store::messages::Logged;

/// The streams open on this host, per user and in all.
pub struct Streams {
    per_user: Mutex<HashMap<String, usize>>,
    total: AtomicUsize,
    max_per_user: usize,
    max_total: usize,
}

/// A stream's place in [`Streams`], given back when the stream ends.
pub struct StreamSlot {
    streams: Arc<Streams>,
    phone: String,
}

impl Streams {
    pub fn new(max_per_user: usize, max_total: usize) -> Arc<Streams> {
        Arc::new(Streams { per_user: Mutex::default(), total: AtomicUsize::new(0), max_per_user, max_total })
    }

    /// Streams open on this host.
    pub fn open_count(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }

    /// A place for a new stream of `phone`, or the error that answers it.
    pub fn open(self: &Arc<Self>, phone: &str) -> Result<StreamSlot, ApiError> {
        let mut per_user = self.per_user.lock().expect("streams poisoned");
        let mine = per_user.get(phone).copied().unwrap_or(0);
        if mine >= self.max_per_user {
            return Err(ApiError::too_many(
                5,
                format!("{mine} event streams are open for this account already (at most {})", self.max_per_user),
            ));
        }
        if self.total.load(Ordering::SeqCst) >= self.max_total {
            return Err(ApiError::unavailable(5, "this host has as many event streams open as it serves; retry"));
        }
        self.total.fetch_add(1, Ordering::SeqCst);
        per_user.insert(phone.to_string(), mine + 1);
        Ok(StreamSlot { streams: self.clone(), phone: phone.to_string() })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut per_user = self.streams.per_user.lock().expect("streams poisoned");
        match per_user.get_mut(&self.phone) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                per_user.remove(&self.phone);
            }
        }
        self.streams.total.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Events of a key handed over and kept for its streams here, at most: a stream further behind reads the log.
const HANDED_KEPT: usize = 32;

/// The streams of each key (a user's phone, a partner's key) on this host: woken when the key has new events,
/// with the newest of them when this host read them already (SQLite's tail reads them for every stream at
/// once), so a stream that is up to date sends them without a read of its own.
#[derive(Default)]
pub struct Wakes {
    keys: Mutex<HashMap<String, Arc<Watch>>>,
}

/// One key's streams on this host: what wakes them, the events handed over to them, and how many times they
/// were asked to read the log themselves (woken with nothing handed over). A count, not only a wake: a stream
/// that was busy sending, not waiting, when it was asked still sees it.
#[derive(Default)]
pub struct Watch {
    pub wake: Notify,
    handed: Mutex<VecDeque<Logged>>,
    asked: AtomicU64,
}

/// What a stream that has sent up to a number finds handed over.
pub enum Handed {
    /// The events that come next, in order.
    Events(Vec<Logged>),
    /// Nothing newer.
    Nothing,
    /// Newer events, but not those that come next: the stream reads the log.
    Gap,
}

impl Watch {
    /// How many times the streams were asked to read the log: a stream that finds this changed reads it.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::SeqCst)
    }

    fn ask(&self) {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// The handed-over events after number `after`, when they continue from it.
    pub fn after(&self, after: i64) -> Handed {
        let handed = self.handed.lock().expect("stream wakes poisoned");
        let newer: Vec<Logged> = handed.iter().filter(|(e, _)| e.seq > after).cloned().collect();
        let continues = newer.iter().enumerate().all(|(i, (e, _))| e.seq == after + 1 + i as i64);
        match (newer.is_empty(), continues) {
            (true, _) => Handed::Nothing,
            (false, true) => Handed::Events(newer),
            (false, false) => Handed::Gap,
        }
    }
}

impl Wakes {
    /// The key's [`Watch`], for a stream that starts.
    pub fn watch(&self, key: &str) -> Arc<Watch> {
        self.keys().entry(key.to_string()).or_default().clone()
    }

    /// A stream of the key ended (with its `Watch` dropped first): forget the key when no stream is left.
    pub fn unwatch(&self, key: &str) {
        let mut keys = self.keys();
        if keys.get(key).is_some_and(|w| Arc::strong_count(w) == 1) {
            keys.remove(key);
        }
    }

    /// The key has new events: wake its streams on this host, if any (they read the log).
    pub fn wake(&self, key: &str) {
        if let Some(watch) = self.keys().get(key) {
            watch.ask();
        }
    }

    /// This host read the key's new `events` (in order): its streams here, if any, send them without reading
    /// the log.
    pub fn hand_over(&self, key: &str, events: Vec<Logged>) {
        let Some(watch) = self.keys().get(key).cloned() else { return };
        {
            let mut handed = watch.handed.lock().expect("stream wakes poisoned");
            handed.extend(events);
            let over = handed.len().saturating_sub(HANDED_KEPT);
            handed.drain(..over);
        }
        watch.wake.notify_waiters();
    }

    /// Wakes every stream on this host (after the notifications may have missed some).
    pub fn wake_all(&self) {
        self.keys().values().for_each(|w| w.ask());
    }

    /// Whether `key` has a stream on this host.
    pub fn watches(&self, key: &str) -> bool {
        self.keys().contains_key(key)
    }

    /// Keys with a stream on this host.
    pub fn watched(&self) -> usize {
        self.keys().len()
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Watch>>> {
        self.keys.lock().expect("stream wakes poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::UserEventKind;
    use crate::store::user_events::UserEvent;

    fn events(seqs: std::ops::RangeInclusive<i64>) -> Vec<Logged> {
        seqs.map(|seq| (UserEvent { seq, kind: UserEventKind::AccountUpdated, subject_id: 0, created_at: 0 }, None))
            .collect()
    }

    fn seqs(handed: Handed) -> Option<Vec<i64>> {
        match handed {
            Handed::Events(events) => Some(events.iter().map(|(e, _)| e.seq).collect()),
            Handed::Nothing => Some(Vec::new()),
            Handed::Gap => None,
        }
    }

    #[test]
    fn a_stream_takes_handed_over_events_only_when_they_continue_where_it_is() {
        let wakes = Wakes::default();
        // Nobody watches: nothing is kept.
        wakes.hand_over("+1", events(1..=3));
        let watch = wakes.watch("+1");
        assert_eq!(seqs(watch.after(0)), Some(vec![]));
        wakes.hand_over("+1", events(4..=6));
        assert_eq!(seqs(watch.after(3)), Some(vec![4, 5, 6]), "what comes next");
        assert_eq!(seqs(watch.after(5)), Some(vec![6]), "what it has is skipped");
        assert_eq!(seqs(watch.after(6)), Some(vec![]), "nothing newer");
        assert_eq!(seqs(watch.after(1)), None, "2 and 3 were not handed over: read the log");
        // Only the newest are kept: a stream further behind reads the log.
        wakes.hand_over("+1", events(7..=(7 + HANDED_KEPT as i64)));
        assert_eq!(seqs(watch.after(6)), None, "7 is no longer kept");
        assert_eq!(seqs(watch.after(7)).map(|s| s.len()), Some(HANDED_KEPT));
        // Asked to read the log while no stream waited (each was busy sending): the ask is kept, and a stream
        // that comes back sees it.
        let asked = watch.asked();
        wakes.wake("+1");
        assert_eq!(watch.asked(), asked + 1, "the ask is kept for a stream that was not waiting");
        wakes.wake_all();
        assert_eq!(watch.asked(), asked + 2);
        // The last stream gone, the key is forgotten.
        drop(watch);
        wakes.unwatch("+1");
        assert_eq!(wakes.watched(), 0);
    }
}
