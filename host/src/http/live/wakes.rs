//! What wakes the event streams of this host ([`Wakes`]): each key (a user's phone, a partner's key) has its
//! streams' [`Watch`], woken when the key has new events, with the newest of them when this host read them
//! already; [`run_wakes`] learns of new events, through PostgreSQL's `LISTEN` or a tail of SQLite's log.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::store::user_events::{self, Logged};
use crate::store::{Backend, Db};

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
/// even then (`user_events::Fresh`).
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
        match user_events::events_after_row(&db, after, TAIL_BATCH, ticked, |key| wakes.watches(key)).await {
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
