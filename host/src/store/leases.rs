//! Leases on claimed work. A worker claims rows (delivery jobs, outbox events) by setting their
//! `lease_until`; while it works on them a heartbeat renews the lease, so the lease can be short: when a host
//! dies its renewals stop, and another host takes the work over once the lease runs out (seconds, not the
//! longest the work could take).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Db;
use crate::clock::SharedClock;

/// A table whose rows are claimed with a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leased {
    DeliveryJobs,
    OutboxEvents,
}

impl Leased {
    fn table_and_key(self) -> (&'static str, &'static str) {
        match self {
            Leased::DeliveryJobs => ("delivery_jobs", "message_id"),
            Leased::OutboxEvents => ("outbox_events", "id"),
        }
    }
}

/// Extends the leases of `ids` to `until`; rows already released (finished, or given back) are left alone.
pub async fn renew(db: &Db, table: Leased, ids: &[i64], until: i64) -> Result<u64, sqlx::Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let (name, key) = table.table_and_key();
    // The ids are integers this host claimed, written into the statement as numbers.
    let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let sql = format!("UPDATE {name} SET lease_until = $1 WHERE {key} IN ({list}) AND lease_until IS NOT NULL");
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(until).execute(db.writer()).await?.rows_affected())
}

/// The rows of one table a worker holds right now, kept leased by [`Held::keep_alive`].
pub struct Held {
    table: Leased,
    ids: Mutex<HashSet<i64>>,
}

impl Held {
    pub fn new(table: Leased) -> Arc<Held> {
        Arc::new(Held { table, ids: Mutex::new(HashSet::new()) })
    }

    pub fn hold(&self, ids: impl IntoIterator<Item = i64>) {
        self.ids.lock().expect("not poisoned").extend(ids);
    }

    pub fn release(&self, id: i64) {
        self.ids.lock().expect("not poisoned").remove(&id);
    }

    fn snapshot(&self) -> Vec<i64> {
        self.ids.lock().expect("not poisoned").iter().copied().collect()
    }

    /// Renews the held rows' leases every third of `lease_ms` until `stop`.
    pub fn keep_alive(self: &Arc<Self>, db: Db, clock: SharedClock, lease_ms: i64, stop: CancellationToken) {
        let held = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis((lease_ms / 3).max(10) as u64));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {
                        let ids = held.snapshot();
                        if let Err(e) = renew(&db, held.table, &ids, clock.now_ms() + lease_ms).await {
                            tracing::warn!(error = %e, table = ?held.table, "renewing leases failed; they may run out");
                        }
                    }
                }
            }
        });
    }
}
