//! The worker that routes kept messages as they come: a task per phone with messages (each phone's in
//! order), a bounded number at once, what failed tried again at the next poll.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::Routing;
use super::route::route;
use crate::store::inbound::{self, Inbound};

/// Routes the kept messages until `stop`, as they come: read when a webhook kept one (or every
/// `delivery_poll_ms`, from the oldest: what failed and waits to be tried again, what a host that stopped left
/// behind) and handed to their phone's routing at once ([`Pipeline`]) — no message waits for a slower
/// phone's. On `stop`, the messages being routed are finished and no other is started.
pub async fn run_worker(routing: Routing, stop: CancellationToken) {
    let delivery = routing.delivery.clone();
    let poll = Duration::from_millis(delivery.config.delivery_poll_ms.max(10));
    let mut pipeline = Pipeline::new(routing, stop.clone());
    // Where the next read starts: past the newest read, back to the oldest at each poll.
    let mut cursor = 0;
    let mut rescan = tokio::time::interval(poll);
    rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        pipeline.reap();
        let full = pipeline.taken() >= MAX_TAKEN;
        if !full {
            match pipeline.read(&mut cursor).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "reading inbound messages failed; will retry"),
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = delivery.inbound_wake.notified() => {}
            // Room to read more once a phone is done.
            Some(done) = pipeline.tasks.join_next(), if full => {
                ended(done);
            }
            _ = rescan.tick() => {
                cursor = 0;
            }
        }
    }
    pipeline.finish().await;
}

/// Routes every message waiting now, and answers how many were routed once all are done (what
/// [`run_worker`] does as they come, for one read of the whole log).
pub async fn route_waiting(routing: &Routing) -> Result<usize, sqlx::Error> {
    let mut pipeline = Pipeline::new(routing.clone(), CancellationToken::new());
    let mut cursor = 0;
    while pipeline.read(&mut cursor).await? {}
    Ok(pipeline.finish().await)
}

/// Messages read at once.
pub(super) const BATCH: usize = 64;

/// Phones whose messages are routed at once (each phone's in order, one after another); the others wait
/// their turn in the order they were read.
pub(super) const PHONES_AT_ONCE: usize = 16;

/// Messages read and not routed yet, at most: past it, the worker reads more as phones finish.
pub(super) const MAX_TAKEN: usize = 1024;

/// The messages read and not routed yet, by phone. A phone here has a task routing its messages, in order.
#[derive(Default)]
pub(super) struct Queues {
    phones: HashMap<String, VecDeque<Inbound>>,
    /// The ids in a queue (being routed, or waiting behind it): a read from the oldest skips them.
    taken: HashSet<i64>,
}

/// Routes messages as they are handed over: a task per phone with messages, at most [`PHONES_AT_ONCE`]
/// routing at once; a message for a phone whose task runs joins its queue. A message that cannot be routed
/// now (its database write failed) is counted ([`inbound::failed`]) and left waiting with those of its phone
/// behind it, for a later read from the oldest; it holds up no other phone, and after
/// [`inbound::MAX_ATTEMPTS`] it is set aside (`failed`), so that one that can never be routed cannot hold up
/// those behind it for good.
pub(super) struct Pipeline {
    routing: Routing,
    queues: Arc<Mutex<Queues>>,
    slots: Arc<tokio::sync::Semaphore>,
    /// Each phone's task, answering how many of its messages it routed.
    tasks: tokio::task::JoinSet<usize>,
    stop: CancellationToken,
}

impl Pipeline {
    fn new(routing: Routing, stop: CancellationToken) -> Pipeline {
        Pipeline {
            routing,
            queues: Arc::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(PHONES_AT_ONCE)),
            tasks: tokio::task::JoinSet::new(),
            stop,
        }
    }

    /// Messages read and not routed yet.
    fn taken(&self) -> usize {
        lock(&self.queues).taken.len()
    }

    /// Reads the next waiting messages after `cursor` (which moves past them) and hands each over; answers
    /// whether there may be more (a whole batch was read).
    async fn read(&mut self, cursor: &mut i64) -> Result<bool, sqlx::Error> {
        let batch = inbound::waiting_after(&self.routing.delivery.db, *cursor, BATCH as i64).await?;
        let more = batch.len() == BATCH;
        for m in batch {
            *cursor = (*cursor).max(m.id);
            self.take(m);
        }
        Ok(more)
    }

    /// Hands `m` to its phone's task (starting one when the phone has none); nothing when it is taken already.
    fn take(&mut self, m: Inbound) {
        let mut queues = lock(&self.queues);
        if !queues.taken.insert(m.id) {
            return;
        }
        if let Some(queue) = queues.phones.get_mut(&m.phone) {
            queue.push_back(m);
            return;
        }
        let phone = m.phone.clone();
        queues.phones.insert(phone.clone(), VecDeque::from([m]));
        drop(queues);
        let (routing, queues, slots, stop) =
            (self.routing.clone(), self.queues.clone(), self.slots.clone(), self.stop.clone());
        self.tasks.spawn(route_phone(routing, queues, slots, stop, phone));
    }

    /// Forgets the phones' tasks that are done.
    fn reap(&mut self) {
        while let Some(done) = self.tasks.try_join_next() {
            ended(done);
        }
    }

    /// Waits for every phone's task; answers how many messages they routed.
    async fn finish(mut self) -> usize {
        let mut routed = 0;
        while let Some(done) = self.tasks.join_next().await {
            routed += ended(done);
        }
        routed
    }
}

/// How many messages a phone's task routed (none when it panicked, which is logged).
pub(super) fn ended(done: Result<usize, tokio::task::JoinError>) -> usize {
    done.unwrap_or_else(|e| {
        tracing::error!(error = %e, "an inbound routing task ended");
        0
    })
}

pub(super) fn lock(queues: &Mutex<Queues>) -> std::sync::MutexGuard<'_, Queues> {
    queues.lock().expect("inbound queues poisoned")
}

/// One phone's task: once it has a slot, routes the phone's messages in order until its queue is empty (or
/// one fails, or the host stops); answers how many it routed.
pub(super) async fn route_phone(
    routing: Routing,
    queues: Arc<Mutex<Queues>>,
    slots: Arc<tokio::sync::Semaphore>,
    stop: CancellationToken,
    phone: String,
) -> usize {
    let slot = tokio::select! {
        slot = slots.acquire_owned() => slot.ok(),
        _ = stop.cancelled() => None,
    };
    // Done, failed or stopped: what is left of the phone's queue waits for a later read, in its order.
    let release = |queues: &mut Queues| {
        for m in queues.phones.remove(&phone).unwrap_or_default() {
            queues.taken.remove(&m.id);
        }
    };
    let mut routed = 0;
    loop {
        let next = {
            let mut queues = lock(&queues);
            match queues.phones.get(&phone).and_then(VecDeque::front) {
                Some(m) if slot.is_some() && !stop.is_cancelled() => m.clone(),
                _ => {
                    release(&mut queues);
                    return routed;
                }
            }
        };
        if let Err(e) = route(&routing, &next).await {
            tracing::warn!(inbound = next.id, error = %e, "routing an inbound message failed; will retry");
            let db = &routing.delivery.db;
            if let Err(e) = inbound::failed(db, next.id, routing.delivery.now()).await {
                tracing::warn!(inbound = next.id, error = %e, "an inbound message's failure could not be counted");
            }
            release(&mut lock(&queues));
            return routed;
        }
        routed += 1;
        let mut queues = lock(&queues);
        queues.taken.remove(&next.id);
        queues.phones.get_mut(&phone).map(VecDeque::pop_front);
    }
}
