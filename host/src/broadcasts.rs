//! The broadcast fan-out worker: takes an unfinished broadcast (with a lease, so several hosts share the
//! work and a dead host's broadcast is resumed), writes its messages batch by batch, and hands each to
//! delivery. Memory stays flat in the audience size: one batch at a time.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::state::AppState;
use crate::store::broadcasts;

/// Recipients written per transaction.
pub const BATCH: i64 = 1_000;

pub async fn run_worker(state: AppState, stop: CancellationToken) {
    let poll = Duration::from_millis(state.config.delivery_poll_ms.max(10));
    loop {
        match broadcasts::claim(&state.db, state.now(), lease_ms(&state)).await {
            Ok(Some(b)) => {
                if let Err(e) = fan_out(&state, b, &stop).await {
                    tracing::warn!(error = %e, "broadcast fan-out interrupted; it resumes when its lease ends");
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "claiming a broadcast failed"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = state.broadcast_wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

async fn fan_out(state: &AppState, mut b: broadcasts::Broadcast, stop: &CancellationToken) -> Result<(), sqlx::Error> {
    if b.total.is_none() {
        broadcasts::set_total(&state.db, &b).await?;
    }
    while b.state != "completed" {
        if stop.is_cancelled() {
            return Ok(());
        }
        // Each batch renews the lease: a dead host's broadcast resumes elsewhere within one lease.
        b = broadcasts::fan_out_batch(&state.db, &b, BATCH, lease_ms(state), state.now()).await?;
        state.delivery.wake.notify_one();
    }
    tracing::info!(broadcast_id = b.id, sent = b.sent, "broadcast fanned out");
    Ok(())
}

fn lease_ms(state: &AppState) -> i64 {
    state.config.lease_ms.max(100) as i64
}
