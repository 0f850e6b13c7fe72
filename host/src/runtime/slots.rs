//! The guest instance slots, shared fairly between partners. Each call holds one slot of the pool
//! (`engine::MAX_CONCURRENT_CALLS`) and one of its partner's share, from the moment it is admitted until
//! the guest returns — a caller that hangs up frees nothing while its guest still runs. A partner past its
//! share waits in its own queue, bounded in length (past it: [`RuntimeError::QueueFull`], answered 429) and
//! in time (past the deadline: [`RuntimeError::Busy`], answered 503), so one partner's slow or flooding bot
//! holds at most its share and never the others'.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::RuntimeError;

/// How the slots are shared (see `RuntimeLimits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLimits {
    /// Calls of one partner running at once.
    pub per_partner: usize,
    /// Calls of one partner waiting for a slot at once.
    pub queue: usize,
    /// Longest a call waits for its slot.
    pub wait: Duration,
}

impl Default for SlotLimits {
    fn default() -> Self {
        SlotLimits { per_partner: 8, queue: 32, wait: Duration::from_secs(2) }
    }
}

pub(super) struct Slots {
    /// One permit per pooled instance.
    pool: Arc<Semaphore>,
    limits: SlotLimits,
    partners: Mutex<HashMap<String, Arc<Share>>>,
}

/// One partner's share: its running calls and how many wait.
struct Share {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// An admitted call's slot: released when dropped, which the runtime does once the guest has returned.
pub(super) struct Slot {
    _share: OwnedSemaphorePermit,
    _pool: OwnedSemaphorePermit,
}

/// Counts a waiting call until it is admitted or gives up.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Partners remembered before idle shares are forgotten.
const FORGET_IDLE_AT: usize = 1024;

impl Slots {
    pub(super) fn new(pool_size: usize, limits: SlotLimits) -> Slots {
        let limits = SlotLimits { per_partner: limits.per_partner.clamp(1, pool_size), ..limits };
        Slots { pool: Arc::new(Semaphore::new(pool_size)), limits, partners: Mutex::new(HashMap::new()) }
    }

    /// Waits for a slot of `partner`'s share and one of the pool, within the queue's bounds.
    pub(super) async fn admit(&self, partner: &str) -> Result<Slot, RuntimeError> {
        let share = self.share(partner);
        let waiting = share.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&share.waiting);
        if waiting >= self.limits.queue && share.running.available_permits() == 0 {
            return Err(RuntimeError::QueueFull);
        }
        let admitted = async {
            let share = share.running.clone().acquire_owned().await.expect("never closed");
            let pool = self.pool.clone().acquire_owned().await.expect("never closed");
            Slot { _share: share, _pool: pool }
        };
        tokio::time::timeout(self.limits.wait, admitted).await.map_err(|_| RuntimeError::Busy)
    }

    fn share(&self, partner: &str) -> Arc<Share> {
        let mut partners = self.partners.lock().expect("slot shares poisoned");
        if let Some(share) = partners.get(partner) {
            return share.clone();
        }
        if partners.len() >= FORGET_IDLE_AT {
            let per_partner = self.limits.per_partner;
            partners.retain(|_, s| {
                Arc::strong_count(s) > 1
                    || s.waiting.load(Ordering::SeqCst) > 0
                    || s.running.available_permits() < per_partner
            });
        }
        let share = Arc::new(Share { running: Arc::new(Semaphore::new(self.limits.per_partner)), waiting: 0.into() });
        partners.insert(partner.to_string(), share.clone());
        share
    }

    /// Pool slots free now.
    pub(super) fn free(&self) -> usize {
        self.pool.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_partner: usize, queue: usize, wait_ms: u64) -> SlotLimits {
        SlotLimits { per_partner, queue, wait: Duration::from_millis(wait_ms) }
    }

    #[tokio::test]
    async fn a_partner_past_its_share_waits_while_another_is_admitted() {
        let slots = Slots::new(4, limits(2, 8, 50));
        let _a1 = slots.admit("a").await.unwrap();
        let _a2 = slots.admit("a").await.unwrap();
        // a's share is taken: a third call of a waits until the deadline; b is admitted at once.
        assert!(matches!(slots.admit("a").await, Err(RuntimeError::Busy)));
        let _b = slots.admit("b").await.unwrap();
        assert_eq!(slots.free(), 1);
    }

    #[tokio::test]
    async fn a_full_queue_is_refused_at_once_and_a_released_slot_admits_the_next() {
        let slots = Arc::new(Slots::new(4, limits(1, 1, 5_000)));
        let held = slots.admit("a").await.unwrap();
        let next = tokio::spawn({
            let slots = slots.clone();
            async move { slots.admit("a").await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        // One waits already: the queue (1) is full.
        assert!(matches!(slots.admit("a").await, Err(RuntimeError::QueueFull)));
        drop(held);
        next.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_slot_is_held_until_dropped_not_until_the_caller_leaves() {
        let slots = Slots::new(1, limits(1, 4, 30));
        let slot = slots.admit("a").await.unwrap();
        // The caller's future is gone, the slot (moved to the guest's thread) is not.
        let guest = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(slot);
        });
        assert!(matches!(slots.admit("b").await, Err(RuntimeError::Busy)));
        guest.join().unwrap();
        slots.admit("b").await.unwrap();
    }
}
