//! The SLA worker: every second, the SLAs due and not met (a conversation still waiting for the partner's
//! agents past its due time, counted in business hours when the SLA started) become breached, each with its
//! `conversation.sla_breached` webhook and the console told (`store::conversations::breach_due`: hosts
//! sharing the database each claim their own).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::store::Db;
use crate::store::conversations;

/// How often due SLAs are looked for.
const EVERY: Duration = Duration::from_secs(1);
/// SLAs breached in one transaction at most (more go on at once).
const BATCH: i64 = 200;

pub async fn run_worker(db: Db, clock: SharedClock, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(EVERY) => {}
        }
        loop {
            match conversations::breach_due(&db, clock.now_ms(), BATCH, crate::events::conversation_sla_breached).await
            {
                Ok(n) if n as i64 == BATCH => continue,
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(%error, "SLAs: the breaches could not be written; tried again in a second");
                    break;
                }
            }
        }
    }
}
