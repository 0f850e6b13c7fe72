//! Broadcasts: one content to a partner's whole audience. A broadcast is accepted here (its content checked
//! as a message's, no phone), then the fan-out worker takes it (with a lease, so several hosts share the
//! work and a dead host's broadcast is resumed), writes its messages batch by batch, and hands each to
//! delivery. Memory stays flat in the audience size: one batch at a time. A scheduled one may be canceled
//! until it starts.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::{Millis, SharedClock};
use crate::config::Config;
use crate::delivery::Delivery;
use crate::messages::compose::{self, ComposeError, SendMessage};
use crate::store::broadcasts::NewBroadcast;
pub use crate::store::broadcasts::{Broadcast, audience_size, find, list, message_states};
use crate::store::{Db, broadcasts};
use crate::validate::Invalid;

/// Why a broadcast was not accepted or canceled.
#[derive(Debug, thiserror::Error)]
pub enum BroadcastError {
    #[error(transparent)]
    Compose(#[from] ComposeError),
    #[error("broadcast not found")]
    NotFound,
    /// Only a scheduled broadcast that has not started can be canceled; this one is in this state.
    #[error("the broadcast is {0}, not scheduled: only a scheduled broadcast that has not started can be canceled")]
    NotScheduled(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<Invalid> for BroadcastError {
    fn from(e: Invalid) -> Self {
        BroadcastError::Compose(ComposeError::Invalid(e))
    }
}

/// Accepts a broadcast of partner `partner_id` to `audience` (`linked`, or for the platform `all_claimed`):
/// its content checked as a message's (`dev`: the host's development mode), no phone, at once or at its
/// `send_at`. The fan-out is woken (`wake`).
pub async fn accept(
    db: &Db,
    (dev, wake): (bool, &Notify),
    partner_id: i64,
    message: &SendMessage,
    audience: &'static str,
    now: Millis,
) -> Result<Broadcast, BroadcastError> {
    if message.phone.is_some() {
        return Err(Invalid::new("phone", "a broadcast goes to its audience; phone is not accepted").into());
    }
    let send_at = compose::send_at(message.send_at.as_deref(), now)?;
    let content = compose::content(db, dev, partner_id, message, None).await?;
    let new = NewBroadcast {
        partner_id,
        audience,
        content_type: content.content_type.to_string(),
        body: content.body,
        rendered_body: content.rendered_body,
        template_code: content.template_code,
        lang: content.lang,
        priority: content.priority,
        content: serde_json::to_value(content.content).map_err(|e| sqlx::Error::Encode(e.into()))?,
        media: content.media,
        send_at,
    };
    let b = broadcasts::insert(db, &new, now).await?;
    wake.notify_one();
    Ok(b)
}

/// Cancels the partner's scheduled broadcast `id` before it goes out: it becomes `canceled` and reaches
/// no one.
pub async fn cancel(db: &Db, partner_id: i64, id: i64, now: Millis) -> Result<Broadcast, BroadcastError> {
    if let Some(b) = broadcasts::cancel(db, partner_id, id, now).await? {
        return Ok(b);
    }
    match broadcasts::find(db, partner_id, id).await? {
        Some(b) => Err(BroadcastError::NotScheduled(b.state)),
        None => Err(BroadcastError::NotFound),
    }
}

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
