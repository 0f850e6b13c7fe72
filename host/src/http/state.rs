//! The shared state every handler and worker receives: the database, the configuration, the clock and the
//! per-credential rate limiter. No globals.

use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use tokio::sync::Notify;

use crate::broadcasts::Fanout;
use crate::clock::{Millis, SharedClock};
use crate::config::Config;
use crate::delivery::Delivery;
use crate::runtime::Runtime;
use crate::store::Db;
use crate::store::deliveries::MessageWriter;
use crate::store::writer::GroupCommit;
use crate::webhooks::Webhooks;

/// The state, cloned for every request (each extractor takes its copy) and every task: one shared
/// reference, so a clone costs one reference count, not one per service it holds. Its fields are those of
/// [`Services`], reached through it.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;
    fn deref(&self) -> &Services {
        &self.0
    }
}

/// What the state holds. Fields that tests, benchmarks or the binary reach are public; the rest are the
/// crate's own.
pub struct Services {
    /// Where everything durable lives.
    pub db: Db,
    /// Settings read at start.
    pub config: Arc<Config>,
    /// The only source of "now".
    pub(crate) clock: SharedClock,
    /// Token buckets keyed by credential (`partner:7`, …).
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    /// The stricter buckets of developer keys.
    developer_limiter: Arc<DefaultKeyedRateLimiter<String>>,
    /// Key that signs and verifies user JWTs (HS256).
    pub jwt_secret: Arc<Vec<u8>>,
    /// The group-commit writer of new messages.
    pub(crate) messages: MessageWriter,
    /// Channel providers and the delivery worker's wake-up.
    pub(crate) delivery: Arc<Delivery>,
    /// Signed outbound webhooks (the dispatcher's context; handlers send test pings through it).
    pub webhooks: Webhooks,
    /// The sandboxed Wasm runtime of `local` bots.
    pub runtime: Runtime,
    /// Woken when a broadcast is accepted.
    pub(crate) broadcast_wake: Arc<Notify>,
    /// Per-address and host-wide limits of the one-time code routes.
    pub(crate) code_limits: Arc<crate::http::code_limits::CodeLimits>,
    /// Which background workers run (for `/readyz`).
    pub workers: Arc<crate::health::WorkerHealth>,
    /// Payments of bots' payment steps, through the configured provider.
    pub payments: Arc<crate::payments::Payments>,
    /// The group commit of bot steps' progress.
    pub(crate) progress: GroupCommit<crate::store::flows::Step, ()>,
    /// The group commit of messages handed to devices down their event streams (they become delivered).
    pub(crate) delivered: GroupCommit<crate::messages::HandedOver, bool>,
    /// When this host last wrote each end user's activity.
    pub(crate) presence: Arc<crate::store::devices::PresenceNotes>,
    /// What this host last read of each end user's "sign out everywhere".
    pub(crate) revocations: Arc<crate::store::tokens::RevocationNotes>,
    /// The group commit of the audit log's entries.
    pub(crate) audit: GroupCommit<crate::store::members::AuditWrite, ()>,
    /// When this host last wrote each partner key's `last_used_at`.
    pub(crate) key_uses: Arc<crate::store::partners::KeyUses>,
    /// The event streams open on this host, and how they are woken.
    pub streams: Arc<crate::http::live::registry::Streams>,
    pub(crate) wakes: Arc<crate::http::live::wakes::Wakes>,
    /// Cancelled when the host stops serving: long-lived responses (event streams) end.
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
    /// The WebAuthn relying party of members' passkeys.
    pub(crate) passkeys: Arc<crate::passkeys::RelyingParty>,
    /// When this host last told each side of each conversation that the other writes (`conversations::typing`).
    pub(crate) typing: Arc<crate::store::writer::WrittenWithin<(i64, bool)>>,
}

/// What the state is made of that is built before it (see [`crate::prepare`]): the database, settings and
/// clock, the JWT key, and the services that run beside the API — the message writer, delivery, webhooks
/// and the bot runtime.
pub struct Parts {
    pub db: Db,
    pub config: Arc<Config>,
    pub clock: SharedClock,
    pub jwt_secret: Vec<u8>,
    pub messages: MessageWriter,
    pub delivery: Arc<Delivery>,
    pub webhooks: Webhooks,
    pub runtime: Runtime,
}

impl AppState {
    /// The state from its parts, with the API's own rate limits.
    pub fn new(parts: Parts) -> Self {
        let Parts { db, config, clock, jwt_secret, messages, delivery, webhooks, runtime } = parts;
        let per_s = config.host_share(config.rate_limit_per_s);
        let burst = config.host_share(config.rate_limit_burst);
        let limiter = RateLimiter::keyed(Quota::per_second(per_s).allow_burst(burst));
        let dev_per_s = config.host_share(config.developer_rate_limit_per_s);
        let dev_burst = config.host_share(config.developer_rate_limit_burst);
        let developer_limiter = RateLimiter::keyed(Quota::per_second(dev_per_s).allow_burst(dev_burst));
        let code_limits = Arc::new(crate::http::code_limits::CodeLimits::new(&config));
        let payments = Arc::new(crate::payments::Payments::new(&config, db.clone(), clock.clone()));
        let streams = crate::http::live::registry::Streams::new(config.streams_per_user.max(1), config.max_streams);
        AppState(Arc::new(Services {
            passkeys: Arc::new(crate::passkeys::RelyingParty::new(&config.public_url)),
            typing: Arc::new(crate::store::writer::WrittenWithin::new(crate::conversations::TYPING_EVERY_MS)),
            progress: crate::store::flows::progress_writer(db.clone()),
            audit: crate::store::members::audit_writer(db.clone()),
            delivered: crate::messages::delivered_writer(db.clone()),
            presence: Arc::new(crate::store::devices::PresenceNotes::new(
                db.clone(),
                (config.offline_after_s as i64).saturating_mul(1000),
                config.stream_heartbeat().as_millis() as i64,
            )),
            payments,
            db,
            config,
            clock,
            limiter: Arc::new(limiter),
            developer_limiter: Arc::new(developer_limiter),
            jwt_secret: Arc::new(jwt_secret),
            messages,
            delivery,
            webhooks,
            code_limits,
            workers: Arc::new(crate::health::WorkerHealth::default()),
            broadcast_wake: Arc::new(Notify::new()),
            revocations: Arc::default(),
            key_uses: Arc::default(),
            streams,
            wakes: Arc::default(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            runtime,
        }))
    }

    /// One-time codes, sent by this host's SMS provider and keyed with its secret.
    pub fn codes(&self) -> crate::otp::Codes<'_> {
        crate::otp::Codes { db: &self.db, key: &self.jwt_secret, sms: self.delivery.sms.as_ref(), clock: &self.clock }
    }

    /// The flow engine over this host's database, clock and bot runtime.
    pub fn flows(&self) -> crate::flows::Flows<'_> {
        crate::flows::Flows {
            db: &self.db,
            clock: &self.clock,
            runtime: &self.runtime,
            payments: &self.payments,
            progress: &self.progress,
        }
    }

    /// What routing messages from WhatsApp and SMS works with (`inbound`).
    pub fn routing(&self) -> crate::inbound::Routing {
        crate::inbound::Routing {
            delivery: self.delivery.clone(),
            runtime: self.runtime.clone(),
            payments: self.payments.clone(),
            progress: self.progress.clone(),
        }
    }

    /// What sending a message needs of this host, now.
    pub fn sending(&self) -> crate::messages::send::Sending<'_> {
        crate::messages::send::Sending {
            db: &self.db,
            dev: self.config.dev,
            writer: &self.messages,
            wake: &self.delivery.wake,
            now: self.now(),
            hub_fallback_after_s: self.config.hub_fallback_after_s,
            arrivals: self.delivery.as_ref(),
        }
    }

    /// The agent desk over this host's sends, delivery and typing notes.
    pub fn desk(&self) -> crate::desk::Desk<'_> {
        crate::desk::Desk { sending: self.sending(), delivery: &self.delivery, typing: &self.typing }
    }

    /// The broadcast worker's context.
    pub fn fanout(&self) -> Fanout {
        Fanout {
            db: self.db.clone(),
            clock: self.clock.clone(),
            config: self.config.clone(),
            wake: self.broadcast_wake.clone(),
            delivery: self.delivery.clone(),
        }
    }

    pub fn now(&self) -> Millis {
        self.clock.now_ms()
    }

    /// Takes one token from `key`'s bucket (developers' buckets are stricter), or says how long until
    /// one is available.
    pub fn take_rate_token(&self, key: &str, developer: bool) -> Result<(), Duration> {
        let limiter = if developer { &self.developer_limiter } else { &self.limiter };
        limiter.check_key(&key.to_string()).map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// What a host forgets every minute: idle rate-limit buckets (so the limiters' memory stays bounded),
    /// inbound bot event ids past their retention ([`crate::bots::INBOUND_EVENT_RETENTION_MS`]), and users'
    /// events and stream tickets past theirs ([`crate::store::user_events::RETENTION_MS`]).
    pub async fn housekeep(&self) {
        self.limiter.retain_recent();
        self.developer_limiter.retain_recent();
        self.code_limits.forget_idle(self.now());
        match crate::bots::forget_old_inbound_events(&self.db, self.now()).await {
            Ok(0) => {}
            Ok(forgotten) => tracing::debug!(forgotten, "inbound event ids past their retention forgotten"),
            Err(error) => tracing::warn!(%error, "could not forget old inbound event ids"),
        }
        if let Err(error) = crate::exports::forget_expired(&self.db, self.now()).await {
            tracing::warn!(%error, "could not forget expired exports");
        }
        let before = self.now() - crate::store::user_events::RETENTION_MS;
        if let Err(error) = crate::store::user_events::forget_before(&self.db, before).await {
            tracing::warn!(%error, "could not forget old user events");
        }
    }
}
