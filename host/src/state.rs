//! The shared state every handler and worker receives: the database, the configuration, the clock and the
//! per-credential rate limiter. No globals.

use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::clock::{Millis, SharedClock};
use crate::config::Config;
use crate::delivery::{Delivery, providers};
use crate::store::Db;
use crate::store::writer::MessageWriter;

#[derive(Clone)]
pub struct AppState {
    /// Where everything durable lives.
    pub db: Db,
    /// Settings read at start.
    pub config: Arc<Config>,
    /// The only source of "now".
    pub clock: SharedClock,
    /// Token buckets keyed by credential (`partner:7`, …).
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    /// The stricter buckets of developer keys.
    developer_limiter: Arc<DefaultKeyedRateLimiter<String>>,
    /// Key that signs and verifies user JWTs (HS256).
    pub jwt_secret: Arc<Vec<u8>>,
    /// The group-commit writer of new messages.
    pub messages: MessageWriter,
    /// Channel providers and the delivery worker's wake-up.
    pub delivery: Arc<Delivery>,
    /// The sandboxed Wasm runtime of `local` bots.
    pub runtime: crate::runtime::Runtime,
    /// Woken when a broadcast is accepted.
    pub broadcast_wake: Arc<tokio::sync::Notify>,
    /// The outbound HTTP client of channel providers.
    pub http: reqwest::Client,
    /// The outbound HTTP client of webhooks (no redirects; public addresses only outside dev mode).
    pub webhook_http: reqwest::Client,
    /// Per-address and host-wide limits of the one-time code routes.
    pub code_limits: Arc<crate::http::abuse::CodeLimits>,
    /// Which background workers run (for `/readyz`).
    pub workers: Arc<crate::health::WorkerHealth>,
}

impl AppState {
    /// Builds the state; must run inside a Tokio runtime (it starts the message writer).
    pub fn new(db: Db, config: Config, clock: SharedClock, jwt_secret: Vec<u8>) -> anyhow::Result<Self> {
        let per_s = config.host_share(config.rate_limit_per_s);
        let burst = config.host_share(config.rate_limit_burst);
        let limiter = RateLimiter::keyed(Quota::per_second(per_s).allow_burst(burst));
        let dev_per_s = config.host_share(config.developer_rate_limit_per_s);
        let dev_burst = config.host_share(config.developer_rate_limit_burst);
        let developer_limiter = RateLimiter::keyed(Quota::per_second(dev_per_s).allow_burst(dev_burst));
        crate::metrics::handle();
        let messages = MessageWriter::spawn(db.clone());
        let code_limits = Arc::new(crate::http::abuse::CodeLimits::new(&config));
        let webhook_http = crate::webhooks::http_client(&config);
        let limits = crate::runtime::RuntimeLimits {
            cpu_ms: config.bot_cpu_ms.max(1),
            memory_bytes: config.bot_memory_mb.max(1) << 20,
            max_output_bytes: config.bot_max_output_kb.max(1) << 10,
            max_loaded_components: config.bot_max_loaded.max(1),
            max_concurrent_compiles: config.bot_compile_concurrency.max(1),
        };
        let runtime = crate::runtime::Runtime::new(limits, config.component_cache_dir.clone())?;
        let http = providers::http_client(&config);
        let delivery = Arc::new(Delivery {
            sms: providers::sms(&config, &db, &clock, &http),
            whatsapp: providers::whatsapp(&config, &db, &clock, &http),
            wake: tokio::sync::Notify::new(),
        });
        Ok(AppState {
            db,
            config: Arc::new(config),
            clock,
            limiter: Arc::new(limiter),
            developer_limiter: Arc::new(developer_limiter),
            jwt_secret: Arc::new(jwt_secret),
            messages,
            delivery,
            webhook_http,
            code_limits,
            workers: Arc::new(crate::health::WorkerHealth::default()),
            broadcast_wake: Arc::new(tokio::sync::Notify::new()),
            http,
            runtime,
        })
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

    /// Drops idle buckets so the limiter's memory stays bounded.
    pub fn forget_idle_rate_buckets(&self) {
        self.limiter.retain_recent();
        self.developer_limiter.retain_recent();
        self.code_limits.forget_idle();
    }
}
