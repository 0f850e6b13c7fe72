//! The delivery worker: claim loops that take due messages by the batch, deliver each on its own task and
//! write what they did by group commit.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{CLAIM_BATCH, Delivery, continue_after_receipt, deliver};
use crate::clock::Millis;
use crate::events;
use crate::store::deliveries::{self, Finished};
use crate::store::devices;
use crate::store::leases::{Held, Leased};
use crate::store::messages;
use crate::store::writer::GroupCommit;

/// Claims and delivers due messages until `stop`. Each claimed message is routed and sent on its own
/// task; what it did (attempts, state change and `message.status` event, the job's end) is written by one
/// group commit, so the messages finishing together share a transaction (see `store::writer`). On
/// PostgreSQL several claim loops run at once (`Db::write_lanes`; `SKIP LOCKED` keeps them apart), so a
/// slow batch does not hold up the next.
pub async fn run_worker(delivery: Arc<Delivery>, stop: CancellationToken) {
    let lease_ms = delivery.config.lease_ms.max(100) as i64;
    let held = Held::new(Leased::DeliveryJobs);
    held.keep_alive(delivery.db.clone(), delivery.clock.clone(), lease_ms, stop.clone());
    let finisher = deliveries::finisher(delivery.db.clone());
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..delivery.db.write_lanes() {
        loops.spawn(claim_loop(delivery.clone(), held.clone(), finisher.clone(), lease_ms, stop.clone()));
    }
    while loops.join_next().await.is_some() {}
}

async fn claim_loop(
    delivery: Arc<Delivery>,
    held: Arc<Held>,
    finisher: GroupCommit<Finished, ()>,
    lease_ms: i64,
    stop: CancellationToken,
) {
    let poll = Duration::from_millis(delivery.config.delivery_poll_ms.max(10));
    loop {
        let claimed = match deliveries::claim_due(&delivery.db, delivery.now(), lease_ms, CLAIM_BATCH).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "claiming deliveries failed");
                Vec::new()
            }
        };
        let full = claimed.len() as i64 == CLAIM_BATCH;
        held.hold(claimed.iter().map(|job| job.message_id));
        // The claimed messages and their recipients, in one read.
        let ids: Vec<i64> = claimed.iter().map(|job| job.message_id).collect();
        let mut found = match messages::find_to_deliver(&delivery.db, &ids).await {
            Ok(found) => found,
            Err(e) => {
                // Their leases run out and another pass takes them.
                tracing::warn!(error = %e, "reading claimed deliveries failed; will retry");
                ids.iter().for_each(|id| held.release(*id));
                Default::default()
            }
        };
        let mut running = tokio::task::JoinSet::new();
        for job in claimed {
            let (delivery, held, finisher) = (delivery.clone(), held.clone(), finisher.clone());
            let Some(found) = found.remove(&job.message_id) else {
                held.release(job.message_id);
                continue;
            };
            let told = found.attempt_events;
            running.spawn(async move {
                let id = job.message_id;
                let done = match job.resume.as_deref() {
                    None => deliver(&delivery, &job, found).await,
                    Some(resume) => continue_after_receipt(&delivery, &job, found, resume).await,
                };
                let mut back_at = None;
                let result = match done {
                    Ok(mut done) => {
                        // The partner's `message.attempt` events, written with the tries.
                        if told {
                            done.finished.attempt_event = Some(events::message_attempt);
                        }
                        back_at = done.finished.put_back.map(|back| back.at);
                        let alert = done.release_alert;
                        let written = finisher.write(done.finished).await;
                        // Now in the hub: the user's devices hear of it, beside this worker.
                        if let (Ok(()), Some(message)) = (&written, done.notify) {
                            delivery.push.notify(message);
                        }
                        if let (Ok(()), Some((partner_id, phone))) = (&written, alert) {
                            devices::release_alert(&delivery.db, partner_id, &phone, id).await.map(drop)
                        } else {
                            written
                        }
                    }
                    Err(e) => Err(e),
                };
                // Finished (its job is gone) or failed (its lease runs out and another pass retries it).
                held.release(id);
                if let Err(e) = result {
                    tracing::warn!(message_id = id, error = %e, "delivery failed; will retry");
                }
                back_at
            });
        }
        // The earliest a job put back to wait (its turn at a paced sender) is due again.
        let mut next_due: Option<Millis> = None;
        while let Some(joined) = running.join_next().await {
            if let Ok(Some(at)) = joined {
                next_due = Some(next_due.map_or(at, |due| due.min(at)));
            }
        }
        forget_old_budgets(&delivery).await;
        if full {
            continue;
        }
        // A paced sender's next turns come sooner than the next poll: no slot is left unused waiting for it.
        let until_due =
            next_due.map_or(poll, |at| Duration::from_millis((at - delivery.now()).max(0) as u64).min(poll));
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = delivery.wake.notified() => {}
            _ = tokio::time::sleep(until_due) => {}
        }
    }
}

/// Forgets, now and then, the pacing budgets nobody used for an hour (pair rates of people written to long
/// ago), so their table holds only what is in use.
async fn forget_old_budgets(delivery: &Delivery) {
    static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    const EVERY_MS: Millis = 60_000;
    let now = delivery.now();
    let last = LAST.load(std::sync::atomic::Ordering::Relaxed);
    if now - last < EVERY_MS
        || LAST
            .compare_exchange(last, now, std::sync::atomic::Ordering::Relaxed, std::sync::atomic::Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    if let Err(e) = crate::store::pacing::forget_before(&delivery.db, (now - 3_600_000) * 1000).await {
        tracing::warn!(error = %e, "forgetting old pacing budgets failed");
    }
}
