//! The broadcast fan-out worker: takes an unfinished broadcast (with a lease, so several hosts share the
//! work and a dead host's broadcast is resumed), writes its messages batch by batch, and hands each to
//! delivery. Memory stays flat in the audience size: one batch at a time.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::{Millis, SharedClock};
use crate::config::Config;
use crate::delivery::Delivery;
use crate::store::{Db, broadcasts};

/// What the fan-out works with: the database, the clock, the settings, its own wake-up, and delivery's (to
/// start on the messages it writes).
pub struct Fanout {
    pub db: Db,
    pub clock: SharedClock,
    pub config: Arc<Config>,
    /// Woken when a broadcast is accepted.
    pub wake: Arc<Notify>,
    pub delivery: Arc<Delivery>,
}

impl Fanout {
    fn now(&self) -> Millis {
        self.clock.now_ms()
    }
}

/// Recipients written per transaction.
pub const BATCH: i64 = 1_000;

pub async fn run_worker(fanout: Fanout, stop: CancellationToken) {
    let poll = Duration::from_millis(fanout.config.delivery_poll_ms.max(10));
    loop {
        match broadcasts::claim(&fanout.db, fanout.now(), lease_ms(&fanout)).await {
            Ok(Some(b)) => {
                if let Err(e) = fan_out(&fanout, b, &stop).await {
                    tracing::warn!(error = %e, "broadcast fan-out interrupted; it resumes when its lease ends");
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "claiming a broadcast failed"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = fanout.wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

async fn fan_out(fanout: &Fanout, mut b: broadcasts::Broadcast, stop: &CancellationToken) -> Result<(), sqlx::Error> {
    if b.total.is_none() {
        broadcasts::set_total(&fanout.db, &b).await?;
    }
    while b.state != "completed" {
        if stop.is_cancelled() {
            return Ok(());
        }
        // Each batch renews the lease: a dead host's broadcast resumes elsewhere within one lease.
        b = broadcasts::fan_out_batch(&fanout.db, &b, BATCH, lease_ms(fanout), fanout.now()).await?;
        fanout.delivery.wake.notify_one();
    }
    tracing::info!(broadcast_id = b.id, sent = b.sent, "broadcast fanned out");
    Ok(())
}

fn lease_ms(fanout: &Fanout) -> i64 {
    fanout.config.lease_ms.max(100) as i64
}
