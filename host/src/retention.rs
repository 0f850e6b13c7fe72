//! Retention (`/settings/retention`, docs/data.md): what a partner keeps, and the worker that removes what is
//! older. One host at a time purges (the `retention` turn in `host_turns`); it goes a partner and a kind at a
//! time, a small batch per transaction with a pause between, so that sends go on beside it; what waits for
//! a try (a scheduled message, a webhook event not yet delivered, a broadcast still to go) is never removed.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::store::Db;
pub use crate::store::retention::Keep;
use crate::store::retention::{self as stored, Aged, Batch};
use crate::validate::Invalid;

/// The longest a partner may ask to keep anything when the host sets no ceiling: a hundred years.
pub const LONGEST_DAYS: i64 = 36_500;

const DAY_MS: i64 = 86_400_000;

/// Rows one purge transaction removes at most.
const BATCH: i64 = 200;

/// The pause between two batches, leaving the database to the sends.
const PAUSE: Duration = Duration::from_millis(20);

/// How long a host holds the turn without renewing it (it renews at every batch).
const TURN_MS: i64 = 60_000;

/// The days each kind is kept: the partner's choice under the host's ceiling (`None`: forever).
pub fn effective(keep: &Keep, ceiling: Option<u32>) -> Keep {
    let under = |days: Option<i64>| match (days, ceiling.map(i64::from)) {
        (Some(d), Some(c)) => Some(d.min(c)),
        (d, c) => d.or(c),
    };
    Keep {
        messages_days: under(keep.messages_days),
        conversations_days: under(keep.conversations_days),
        media_days: under(keep.media_days),
        webhook_deliveries_days: under(keep.webhook_deliveries_days),
        bot_sessions_days: under(keep.bot_sessions_days),
    }
}

/// Why a partner's choice was not taken.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error("{}", .0.message)]
    Invalid(Invalid),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// What is wrong with a partner's choice: each is 1 day or more, and no more than the host's ceiling (or
/// [`LONGEST_DAYS`]).
pub fn check(keep: &Keep, ceiling: Option<u32>) -> Result<(), Invalid> {
    let most = ceiling.map_or(LONGEST_DAYS, i64::from);
    for (field, days) in [
        ("messages_days", keep.messages_days),
        ("conversations_days", keep.conversations_days),
        ("media_days", keep.media_days),
        ("webhook_deliveries_days", keep.webhook_deliveries_days),
        ("bot_sessions_days", keep.bot_sessions_days),
    ] {
        match days {
            Some(d) if d < 1 => {
                return Err(Invalid::new(field, format!("{field} is at least 1 day (null: keep them)")));
            }
            Some(d) if d > most => {
                let why = if ceiling.is_some() { "this host keeps nothing longer" } else { "the longest" };
                return Err(Invalid::new(field, format!("{field} is at most {most} days ({why})")));
            }
            _ => {}
        }
    }
    Ok(())
}

/// What `partner_id` chose to keep.
pub async fn chosen(db: &Db, partner_id: i64) -> Result<Keep, sqlx::Error> {
    stored::of(db, partner_id).await
}

/// Sets what `partner_id` keeps, once [`check`]ed against the host's ceiling.
pub async fn choose(db: &Db, partner_id: i64, keep: &Keep, ceiling: Option<u32>) -> Result<(), RetentionError> {
    check(keep, ceiling).map_err(RetentionError::Invalid)?;
    Ok(stored::set(db, partner_id, keep).await?)
}

/// What one purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub messages: u64,
    pub conversation_messages: u64,
    pub media: u64,
    pub webhook_deliveries: u64,
    pub bot_sessions: u64,
}

impl Purged {
    pub fn total(&self) -> u64 {
        self.messages + self.conversation_messages + self.media + self.webhook_deliveries + self.bot_sessions
    }
}

/// The retention worker of one host: every `HUBBUB_RETENTION_EVERY_MS` it takes the turn (when no other
/// host holds it) and purges.
pub async fn run_worker(db: Db, clock: SharedClock, config: std::sync::Arc<Config>, stop: CancellationToken) {
    let holder = crate::secrets::random_alnum(16);
    let every = Duration::from_millis(config.retention_every_ms.max(1));
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
        match purge(&db, &clock, config.retention_max_days, &holder, &stop).await {
            Ok(Some(purged)) if purged.total() > 0 => tracing::info!(?purged, "retention: expired data removed"),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "retention: the purge failed; it goes on at its next turn"),
        }
    }
    let _ = stored::end_turn(&db, "retention", &holder).await;
}

/// A kind of data a partner keeps for a time of its choosing.
#[derive(Debug, Clone, Copy)]
enum Kind {
    WebhookDeliveries,
    Messages,
    ConversationMessages,
    BotSessions,
    Media,
}

impl Kind {
    const ALL: [Kind; 5] =
        [Kind::WebhookDeliveries, Kind::Messages, Kind::ConversationMessages, Kind::BotSessions, Kind::Media];

    fn days(self, keep: &Keep) -> Option<i64> {
        match self {
            Kind::WebhookDeliveries => keep.webhook_deliveries_days,
            Kind::Messages => keep.messages_days,
            Kind::ConversationMessages => keep.conversations_days,
            Kind::BotSessions => keep.bot_sessions_days,
            Kind::Media => keep.media_days,
        }
    }

    /// The table whose ids bound the kind's reads (media are read by age through an index of their own).
    fn aged(self) -> Option<Aged> {
        match self {
            Kind::WebhookDeliveries => Some(Aged::Outbox),
            Kind::Messages | Kind::ConversationMessages => Some(Aged::Messages),
            Kind::BotSessions => Some(Aged::Sessions),
            Kind::Media => None,
        }
    }

    /// Its name in the metric `hubbub_retention_removed_total`.
    fn name(self) -> &'static str {
        match self {
            Kind::WebhookDeliveries => "webhook_deliveries",
            Kind::Messages => "messages",
            Kind::ConversationMessages => "conversation_messages",
            Kind::BotSessions => "bot_sessions",
            Kind::Media => "media",
        }
    }

    fn count(self, purged: &mut Purged) -> &mut u64 {
        match self {
            Kind::WebhookDeliveries => &mut purged.webhook_deliveries,
            Kind::Messages => &mut purged.messages,
            Kind::ConversationMessages => &mut purged.conversation_messages,
            Kind::BotSessions => &mut purged.bot_sessions,
            Kind::Media => &mut purged.media,
        }
    }

    /// Removes one batch of the partner's rows of this kind.
    async fn purge_batch(self, db: &Db, batch: Batch) -> Result<u64, sqlx::Error> {
        match self {
            Kind::WebhookDeliveries => stored::purge_webhook_deliveries(db, batch).await,
            Kind::Messages => stored::purge_hub_messages(db, batch).await,
            Kind::ConversationMessages => stored::purge_conversation_messages(db, batch).await,
            Kind::BotSessions => stored::purge_bot_sessions(db, batch).await,
            Kind::Media => stored::purge_media(db, batch).await,
        }
    }
}

/// Removes every partner's expired data, if this host (`holder`) gets the turn (`None`: another host has
/// it). Stops between two batches when `stop` is cancelled.
pub async fn purge(
    db: &Db,
    clock: &SharedClock,
    ceiling: Option<u32>,
    holder: &str,
    stop: &CancellationToken,
) -> Result<Option<Purged>, sqlx::Error> {
    let turn = || async {
        let now = clock.now_ms();
        stored::take_turn(db, "retention", holder, now, now + TURN_MS).await
    };
    if !turn().await? {
        return Ok(None);
    }
    let mut purged = Purged::default();
    let now = clock.now_ms();
    for (partner, chosen) in stored::partners(db, ceiling.is_some()).await? {
        let keep = effective(&chosen, ceiling);
        for kind in Kind::ALL {
            let Some(days) = kind.days(&keep) else { continue };
            let before = now - days * DAY_MS;
            let cut = match kind.aged() {
                Some(table) => match stored::last_id_before(db, table, before).await? {
                    Some(cut) => cut,
                    None => continue,
                },
                None => 0,
            };
            loop {
                if stop.is_cancelled() || !turn().await? {
                    return Ok(Some(purged));
                }
                let batch = Batch { partner_id: partner, before, cut, limit: BATCH };
                let removed = kind.purge_batch(db, batch).await?;
                *kind.count(&mut purged) += removed;
                if removed > 0 {
                    metrics::counter!("hubbub_retention_removed_total", "kind" => kind.name()).increment(removed);
                }
                if removed < BATCH as u64 {
                    break;
                }
                tokio::time::sleep(PAUSE).await;
            }
        }
    }
    Ok(Some(purged))
}
