//! Configuration: one typed struct, read from flags or the environment. `hubbub serve --help` is the
//! reference for every setting.

use std::net::SocketAddr;

use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TemplateReview {
    /// Templates are decided by the automatic review as soon as they are submitted.
    Auto,
    /// Submitted templates wait in `pending` for an operator (`hubbub template review`).
    Manual,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SmsProviderKind {
    /// Record what would be sent (`GET /api/v1/dev-sink/messages`).
    DevSink,
    /// The Twilio Messages API.
    Twilio,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WhatsAppProviderKind {
    /// Record what would be sent (`GET /api/v1/dev-sink/messages`).
    DevSink,
    /// The WhatsApp Cloud API.
    Cloud,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PaymentProviderKind {
    /// The host's own checkout page (`/pay/{ref}`: Pay, Decline, Cancel); for development.
    Dev,
    /// Stripe Checkout (docs/providers.md).
    Stripe,
}

#[derive(Clone, Args)]
pub struct Config {
    /// Database URL: `sqlite://FILE?mode=rwc` (embedded, the default) or `postgres://…` (scale-out).
    #[arg(long, env = "HUBBUB_DATABASE_URL", default_value = "sqlite://hubbub.db?mode=rwc")]
    pub database_url: String,

    /// Most database connections this process opens (PostgreSQL; SQLite uses one writer and up to this
    /// many readers, at most twice the machine's cores).
    #[arg(long, env = "HUBBUB_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,

    /// Address the HTTP API listens on.
    #[arg(long, env = "HUBBUB_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Development mode: `http://localhost` webhook and media URLs are allowed, SMS and WhatsApp go to the
    /// dev sink, and templates are reviewed automatically.
    #[arg(long, env = "HUBBUB_DEV", value_parser = clap::builder::FalseyValueParser::new(), default_value = "false")]
    pub dev: bool,

    /// Run the background workers (delivery, webhooks, broadcast fan-out) in this process. Turn it off
    /// for API-only processes when other processes on the same PostgreSQL database do the work.
    #[arg(long, env = "HUBBUB_WORKERS", value_parser = clap::builder::FalseyValueParser::new(), default_value = "true")]
    pub workers: bool,

    /// Secret that signs user JWTs (HS256), as UTF-8 bytes. When unset, one is generated once and kept in
    /// the database. Or `HUBBUB_JWT_SECRET_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,

    /// Key that seals secrets at rest (the generated JWT secret, webhook secrets): 32 bytes as base64 or
    /// hex. Unset: read from `HUBBUB_SECRET_KEY_FILE`, else (SQLite) from `<database file>.key`, created
    /// with mode 0600 on first start. Required with PostgreSQL (the same on every host).
    #[arg(long, env = "HUBBUB_SECRET_KEY", hide_env_values = true)]
    pub secret_key: Option<String>,

    /// File holding the key that seals secrets at rest (see `HUBBUB_SECRET_KEY`).
    #[arg(long, env = "HUBBUB_SECRET_KEY_FILE")]
    pub secret_key_file: Option<std::path::PathBuf>,

    /// Seconds without device activity after which a user counts as offline.
    #[arg(long, env = "HUBBUB_OFFLINE_AFTER_S", default_value_t = 300)]
    pub offline_after_s: u64,

    /// Seconds a hub message waits for one of the user's devices to get it (a live stream, a fetch) before
    /// it goes on to WhatsApp, then SMS. Partners set their own (`PUT /settings/delivery`), senders per
    /// message (`fallback_after_s`, `null` for the hub only).
    #[arg(long, env = "HUBBUB_HUB_FALLBACK_AFTER_S", default_value_t = 300)]
    pub hub_fallback_after_s: u64,

    /// How submitted templates are decided (dev mode always reviews automatically).
    #[arg(long, env = "HUBBUB_TEMPLATE_REVIEW", value_enum, default_value = "auto")]
    pub template_review: TemplateReview,

    /// How many hosts serve this database together. Every rate limit below is for the whole service: each
    /// host enforces its share (the limit divided by this, rounded up), so with requests spread over the hosts
    /// by the load balancer the service allows what the settings say, not N times it.
    #[arg(long, env = "HUBBUB_HOSTS", default_value_t = 1)]
    pub hosts: u32,

    /// Sustained requests per second allowed per credential.
    #[arg(long, env = "HUBBUB_RATE_LIMIT_PER_S", default_value_t = 100)]
    pub rate_limit_per_s: u32,

    /// Burst size of the per-credential rate limit.
    #[arg(long, env = "HUBBUB_RATE_LIMIT_BURST", default_value_t = 200)]
    pub rate_limit_burst: u32,

    /// Sustained requests per second allowed per developer key (stricter than partners').
    #[arg(long, env = "HUBBUB_DEVELOPER_RATE_LIMIT_PER_S", default_value_t = 5)]
    pub developer_rate_limit_per_s: u32,

    /// Burst size of the per-developer rate limit.
    #[arg(long, env = "HUBBUB_DEVELOPER_RATE_LIMIT_BURST", default_value_t = 20)]
    pub developer_rate_limit_burst: u32,

    /// Messages a developer may send per day (UTC).
    #[arg(long, env = "HUBBUB_DEVELOPER_DAILY_QUOTA", default_value_t = 500)]
    pub developer_daily_quota: i64,

    /// Media one end user may upload in 24 hours (conversation messages), in MiB; past it an upload is
    /// refused (422 on `media_base64`).
    #[arg(long, env = "HUBBUB_USER_UPLOAD_QUOTA_MB", default_value_t = 25)]
    pub user_upload_quota_mb: i64,

    /// Requests per minute one client address may make to the routes that send or check one-time codes
    /// (`/auth/otp/start|verify`, `/dev/signup|verify|session`), on top of the per-phone limits.
    #[arg(long, env = "HUBBUB_CODE_RATE_LIMIT_PER_IP_PER_MIN", default_value_t = 30)]
    pub code_rate_limit_per_ip_per_min: u32,

    /// Requests per minute this host accepts on those routes from all clients together (bounds the SMS
    /// bill and code guessing as a whole).
    #[arg(long, env = "HUBBUB_CODE_RATE_LIMIT_GLOBAL_PER_MIN", default_value_t = 1200)]
    pub code_rate_limit_global_per_min: u32,

    /// Reverse proxies (comma-separated IPs or CIDRs) whose `X-Forwarded-For` names the client; from any
    /// other peer the header is ignored. Empty: the socket's address is the client's.
    #[arg(long, env = "HUBBUB_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,

    /// Lifetime of user JWTs, in seconds (default 30 days).
    #[arg(long, env = "HUBBUB_USER_TOKEN_TTL_S", default_value_t = 30 * 24 * 3600)]
    pub user_token_ttl_s: u64,

    /// Public base URL of this service, used in links sent by SMS and WhatsApp.
    #[arg(long, env = "HUBBUB_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
    pub public_url: String,

    /// The contact Web Push services see in the host's VAPID claims (`sub`, RFC 8292): a `mailto:` address or
    /// an `https:` URL; anything else is refused at start. Default: `HUBBUB_PUBLIC_URL` when it is `https:`,
    /// else none (the claim is left out, which some push services refuse).
    #[arg(long, env = "HUBBUB_VAPID_CONTACT")]
    pub vapid_contact: Option<String>,

    /// SMS provider. Default: the dev sink in dev mode, Twilio when an account SID is set, else none
    /// (SMS attempts fail).
    #[arg(long, env = "HUBBUB_SMS_PROVIDER", value_enum)]
    pub sms_provider: Option<SmsProviderKind>,

    /// Base URL of the Twilio API (point it at a fake server in tests).
    #[arg(long, env = "HUBBUB_TWILIO_BASE_URL", default_value = "https://api.twilio.com")]
    pub twilio_base_url: String,

    /// Base URL of Twilio's Messaging API, where a partner's messaging service (`MG…`) is looked up when it
    /// is set as its own sender (point it at a fake server in tests).
    #[arg(long, env = "HUBBUB_TWILIO_MESSAGING_BASE_URL", default_value = "https://messaging.twilio.com")]
    pub twilio_messaging_base_url: String,

    /// Twilio account SID.
    #[arg(long, env = "HUBBUB_TWILIO_ACCOUNT_SID")]
    pub twilio_account_sid: Option<String>,

    /// Twilio auth token. Or `HUBBUB_TWILIO_AUTH_TOKEN_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_TWILIO_AUTH_TOKEN", hide_env_values = true)]
    pub twilio_auth_token: Option<String>,

    /// Sender number (or messaging service) for SMS.
    #[arg(long, env = "HUBBUB_TWILIO_FROM")]
    pub twilio_from: Option<String>,

    /// WhatsApp provider. Default: the dev sink in dev mode, the Cloud API when a token is set, else
    /// none (WhatsApp attempts fail).
    #[arg(long, env = "HUBBUB_WHATSAPP_PROVIDER", value_enum)]
    pub whatsapp_provider: Option<WhatsAppProviderKind>,

    /// Base URL of the WhatsApp Cloud API, version included.
    #[arg(long, env = "HUBBUB_WHATSAPP_BASE_URL", default_value = "https://graph.facebook.com/v21.0")]
    pub whatsapp_base_url: String,

    /// WhatsApp Cloud API access token. Or `HUBBUB_WHATSAPP_TOKEN_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_WHATSAPP_TOKEN", hide_env_values = true)]
    pub whatsapp_token: Option<String>,

    /// WhatsApp business phone number id.
    #[arg(long, env = "HUBBUB_WHATSAPP_PHONE_NUMBER_ID")]
    pub whatsapp_phone_number_id: Option<String>,

    /// WhatsApp Business Account id: `whatsapp` templates are submitted to Meta's review under it
    /// (`POST /{id}/message_templates`). Without it, they are reviewed like other templates.
    #[arg(long, env = "HUBBUB_WHATSAPP_BUSINESS_ACCOUNT_ID")]
    pub whatsapp_business_account_id: Option<String>,

    /// How often templates waiting for Meta's decision are asked about, in seconds (Meta's
    /// `message_template_status_update` webhook usually tells first).
    #[arg(long, env = "HUBBUB_WHATSAPP_TEMPLATE_SYNC_S", default_value_t = 300)]
    pub whatsapp_template_sync_s: u64,

    /// Meta app secret: verifies `X-Hub-Signature-256` on WhatsApp status webhooks
    /// (`POST /api/v1/providers/whatsapp/webhook`). Without it, WhatsApp receipts are refused. Or `HUBBUB_WHATSAPP_APP_SECRET_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_WHATSAPP_APP_SECRET", hide_env_values = true)]
    pub whatsapp_app_secret: Option<String>,

    /// The token Meta sends when the webhook is subscribed (`GET …/providers/whatsapp/webhook`). Or `HUBBUB_WHATSAPP_VERIFY_TOKEN_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_WHATSAPP_VERIFY_TOKEN", hide_env_values = true)]
    pub whatsapp_verify_token: Option<String>,

    /// Payment provider of bots' payment steps. Default: the dev checkout in dev mode, else none (a payment
    /// step is a `bot_error` saying payments are not configured).
    #[arg(long, env = "HUBBUB_PAYMENT_PROVIDER", value_enum)]
    pub payment_provider: Option<PaymentProviderKind>,

    /// Largest payment a bot may ask for, in the currency's minor units.
    #[arg(long, env = "HUBBUB_PAYMENT_MAX_MINOR", default_value_t = 1_000_000)]
    pub payment_max_minor: i64,

    /// Base URL of the Stripe API (point it at a fake server in tests).
    #[arg(long, env = "HUBBUB_STRIPE_BASE_URL", default_value = "https://api.stripe.com")]
    pub stripe_base_url: String,

    /// Stripe secret key (`sk_live_…` or `sk_test_…`). Or `HUBBUB_STRIPE_SECRET_KEY_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_STRIPE_SECRET_KEY", hide_env_values = true)]
    pub stripe_secret_key: Option<String>,

    /// Signing secret of the Stripe webhook endpoint (`whsec_…`): verifies `Stripe-Signature` on
    /// `POST /api/v1/providers/stripe/webhook`. Without it, Stripe events are refused. Or
    /// `HUBBUB_STRIPE_WEBHOOK_SECRET_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_STRIPE_WEBHOOK_SECRET", hide_env_values = true)]
    pub stripe_webhook_secret: Option<String>,

    /// Timeout of one provider request, in milliseconds.
    #[arg(long, env = "HUBBUB_PROVIDER_TIMEOUT_MS", default_value_t = 10_000)]
    pub provider_timeout_ms: u64,

    /// Messages a second one WhatsApp number sends (Meta's throughput: 80, or 1,000 once Meta raises it).
    /// The budget is the number's, shared by every host on the database. A partner's own number may set its
    /// own (`mps` in `PUT /settings/senders/whatsapp`).
    #[arg(long, env = "HUBBUB_WHATSAPP_MPS", default_value_t = 80, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub whatsapp_mps: u32,

    /// Messages a second one Twilio sender sends (a long code: 1; a short code or a messaging service with
    /// several numbers: more), shared by every host on the database. A partner's own sender may set its own.
    #[arg(long, env = "HUBBUB_SMS_MPS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sms_mps: u32,

    /// People one WhatsApp business account may reach first (a template to someone whose 24-hour window is
    /// closed) in a rolling 24 hours, until Meta's `phone_number_quality_update` webhook says its tier (250,
    /// then 1,000, 10,000, 100,000, unlimited). 0: unlimited.
    #[arg(long, env = "HUBBUB_WHATSAPP_DAILY_LIMIT", default_value_t = 250)]
    pub whatsapp_daily_limit: u64,

    /// Milliseconds between two WhatsApp messages from one number to the same person (Meta's pair rate:
    /// about one every 6 seconds); 0 turns it off.
    #[arg(long, env = "HUBBUB_WHATSAPP_PAIR_INTERVAL_MS", default_value_t = 6_000)]
    pub whatsapp_pair_interval_ms: u64,

    /// Seconds added to the host's clock (development only: refused without `HUBBUB_DEV`), so that
    /// scheduled sends, retries and windows can be tested from outside the process.
    #[arg(long, env = "HUBBUB_DEV_CLOCK_OFFSET_S", default_value_t = 0, allow_hyphen_values = true)]
    pub dev_clock_offset_s: i64,

    /// The most days any partner's data is kept (`/settings/retention` may ask for fewer, not more; a
    /// partner that chose nothing keeps this many). Unset: no ceiling, a partner's data is kept until it
    /// chooses otherwise.
    #[arg(long, env = "HUBBUB_RETENTION_MAX_DAYS")]
    pub retention_max_days: Option<u32>,

    /// How often the retention worker looks for expired data, in milliseconds (one host at a time does it).
    #[arg(long, env = "HUBBUB_RETENTION_EVERY_MS", default_value_t = 300_000)]
    pub retention_every_ms: u64,

    /// How often the delivery worker looks for due work when nothing wakes it, in milliseconds.
    #[arg(long, env = "HUBBUB_DELIVERY_POLL_MS", default_value_t = 500)]
    pub delivery_poll_ms: u64,

    /// How long claimed work (a delivery, a webhook event, a broadcast batch) stays with its host, in
    /// milliseconds. A host renews the leases of what it is working on every third of this, so when it dies
    /// another host takes its work over within this time.
    #[arg(long, env = "HUBBUB_LEASE_MS", default_value_t = 5_000)]
    pub lease_ms: u64,

    /// Seconds between webhook attempts, comma-separated: N gaps mean N+1 attempts, then `dead`
    /// (±20 % jitter). The default spans about 27 hours.
    #[arg(
        long,
        env = "HUBBUB_WEBHOOK_BACKOFF_S",
        value_delimiter = ',',
        default_value = "5,30,120,600,1800,3600,7200,14400,28800,43200"
    )]
    pub webhook_backoff_s: Vec<u64>,

    /// Timeout of one webhook request, in milliseconds.
    #[arg(long, env = "HUBBUB_WEBHOOK_TIMEOUT_MS", default_value_t = 10_000)]
    pub webhook_timeout_ms: u64,

    /// Most webhook requests in flight to one endpoint (a slow endpoint never holds up others).
    #[arg(long, env = "HUBBUB_WEBHOOK_CONCURRENCY", default_value_t = 8)]
    pub webhook_concurrency: usize,

    /// How often the webhook dispatcher looks for due events, in milliseconds.
    #[arg(long, env = "HUBBUB_WEBHOOK_POLL_MS", default_value_t = 200)]
    pub webhook_poll_ms: u64,

    /// CPU time one bot call may use, in milliseconds.
    #[arg(long, env = "HUBBUB_BOT_CPU_MS", default_value_t = 50)]
    pub bot_cpu_ms: u64,

    /// Linear memory one bot instance may use, in MiB.
    #[arg(long, env = "HUBBUB_BOT_MEMORY_MB", default_value_t = 32)]
    pub bot_memory_mb: usize,

    /// Largest reply (steps and state) a bot call may return, in KiB.
    #[arg(long, env = "HUBBUB_BOT_MAX_OUTPUT_KB", default_value_t = 256)]
    pub bot_max_output_kb: usize,

    /// Bot components kept ready in memory; the least recently used past this are dropped and loaded again
    /// from their precompiled artifacts when needed (about 1 ms).
    #[arg(long, env = "HUBBUB_BOT_MAX_LOADED", default_value_t = 128)]
    pub bot_max_loaded: usize,

    /// Component compilations that may run at once; an upload that finds them all busy is answered 503
    /// with `Retry-After`. Bots whose component is already compiled load without waiting for them.
    #[arg(long, env = "HUBBUB_BOT_COMPILE_CONCURRENCY", default_value_t = 1)]
    pub bot_compile_concurrency: usize,

    /// Data memory one component compilation may use, in MiB: compilations run in a child process whose
    /// `RLIMIT_DATA` is this (the 240 KB Rust samples need under 24 MiB; the 18 MB Python sample about 400
    /// MiB; components built to be costly to compile far more).
    #[arg(long, env = "HUBBUB_BOT_COMPILE_MEMORY_MB", default_value_t = 1024)]
    pub bot_compile_memory_mb: u64,

    /// Longest one component compilation may take, in milliseconds; past it the child is killed and the
    /// upload is refused (422 `invalid_component`).
    #[arg(long, env = "HUBBUB_BOT_COMPILE_TIMEOUT_MS", default_value_t = 60_000)]
    pub bot_compile_timeout_ms: u64,

    /// The executable that compiles components (`<exe> compile-component`, in a bounded child process).
    /// Default: this one.
    #[arg(long, env = "HUBBUB_BOT_COMPILER")]
    pub bot_compiler: Option<std::path::PathBuf>,

    /// Bot calls of one partner that may run at once (of the runtime's 64 instance slots): one partner's
    /// slow bots never hold the others' slots.
    #[arg(long, env = "HUBBUB_BOT_PARTNER_SLOTS", default_value_t = 8)]
    pub bot_partner_slots: usize,

    /// Bot calls of one partner that may wait for a slot at once; past it a call is answered 429 with
    /// `Retry-After`.
    #[arg(long, env = "HUBBUB_BOT_QUEUE", default_value_t = 32)]
    pub bot_queue: usize,

    /// Longest a bot call waits for a slot, in milliseconds; past it it is answered 503 with `Retry-After`.
    #[arg(long, env = "HUBBUB_BOT_QUEUE_WAIT_MS", default_value_t = 2_000)]
    pub bot_queue_wait_ms: u64,

    /// Where precompiled bot components are kept (so a restart does not recompile). Trusted: its files
    /// are loaded as native code.
    #[arg(long, env = "HUBBUB_COMPONENT_CACHE_DIR", default_value = ".hubbub/components")]
    pub component_cache_dir: std::path::PathBuf,

    /// Largest accepted component upload, in bytes.
    #[arg(long, env = "HUBBUB_COMPONENT_LIMIT", default_value_t = 64 * 1024 * 1024)]
    pub component_limit: usize,

    /// Token a Prometheus scraper presents (`Authorization: Bearer …`) to read `GET /metrics`. Unset: the
    /// route answers 404. Or `HUBBUB_METRICS_TOKEN_FILE`: a file holding it.
    #[arg(long, env = "HUBBUB_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,

    /// Longest a request may take, in milliseconds: past it the client gets 503 `timeout` (component uploads
    /// and bot calls included).
    #[arg(long, env = "HUBBUB_REQUEST_TIMEOUT_MS", default_value_t = 60_000)]
    pub request_timeout_ms: u64,

    /// Longest a client may take to send a request's head, in milliseconds, counted from when its
    /// connection opens or its previous response was sent; past it the connection is closed.
    #[arg(long, env = "HUBBUB_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,

    /// A connection with no request in flight for this long is closed, in milliseconds (an idle keep-alive
    /// connection is closed by the shorter of this and the header read timeout).
    #[arg(long, env = "HUBBUB_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub idle_timeout_ms: u64,

    /// Connections this host keeps open at once; past it a new one is answered 503 with `Retry-After` and
    /// closed. Keep it under the process's open-file limit.
    #[arg(long, env = "HUBBUB_MAX_CONNECTIONS", default_value_t = 16_384)]
    pub max_connections: usize,

    /// Event streams (`GET /api/v1/me/events`) one user may have open on this host; past it 429.
    #[arg(long, env = "HUBBUB_STREAMS_PER_USER", default_value_t = 10)]
    pub streams_per_user: usize,

    /// Event streams this host keeps open at once; past it 503. Each is a connection too: keep
    /// `HUBBUB_MAX_CONNECTIONS` above it.
    #[arg(long, env = "HUBBUB_MAX_STREAMS", default_value_t = 10_000)]
    pub max_streams: usize,

    /// How often an idle event stream sends a comment (keeping proxies from closing it) and checks that
    /// its token still works, in milliseconds.
    #[arg(long, env = "HUBBUB_STREAM_HEARTBEAT_MS", default_value_t = 25_000)]
    pub stream_heartbeat_ms: u64,

    /// How often a SQLite host reads its event log for streams to wake, in milliseconds: what other
    /// processes sharing the file wrote (this host's own writes are read as they commit; PostgreSQL hosts
    /// are told by `LISTEN`).
    #[arg(long, env = "HUBBUB_STREAM_POLL_MS", default_value_t = 20)]
    pub stream_poll_ms: u64,

    /// How long shutdown waits for requests in flight, then for the workers, in milliseconds; what is still
    /// running then is abandoned and logged.
    #[arg(long, env = "HUBBUB_SHUTDOWN_TIMEOUT_MS", default_value_t = 30_000)]
    pub shutdown_timeout_ms: u64,

    /// Largest accepted request body, in bytes (component uploads have their own limit).
    #[arg(long, env = "HUBBUB_BODY_LIMIT", default_value_t = 10 * 1024 * 1024)]
    pub body_limit: usize,
}

impl Config {
    /// An event stream's heartbeat interval (`HUBBUB_STREAM_HEARTBEAT_MS`), at least 10 ms: the one value
    /// the streams beat at and their users' presence notes are timed by.
    pub fn stream_heartbeat(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.stream_heartbeat_ms.max(10))
    }

    /// This host's share of a service-wide rate `limit` (at least 1): the limit divided by `hosts`, rounded up.
    pub fn host_share(&self, limit: u32) -> std::num::NonZeroU32 {
        let hosts = self.hosts.max(1);
        std::num::NonZeroU32::new(limit.div_ceil(hosts).max(1)).expect("max(1) is non-zero")
    }

    /// What one end user may upload.
    pub fn upload_quota(&self) -> UploadQuota {
        UploadQuota { bytes: self.user_upload_quota_mb.max(0) << 20, window_ms: 24 * 3_600_000 }
    }

    /// The host's daily limit of people a WhatsApp business account reaches first, until Meta says its
    /// tier (`HUBBUB_WHATSAPP_DAILY_LIMIT`; `None`: unlimited).
    pub fn default_daily_limit(&self) -> Option<i64> {
        Some(self.whatsapp_daily_limit as i64).filter(|n| *n > 0)
    }

    /// Whether templates are decided at submit time.
    pub fn auto_review(&self) -> bool {
        self.dev || self.template_review == TemplateReview::Auto
    }

    /// The settings a host refuses to start with, each with why: a switch that only development may use
    /// without `HUBBUB_DEV` (the dev checkout would let anyone mark a payment paid; the dev sink would let
    /// codes and messages vanish where only a developer reads them), and an operator's secret that is short
    /// or of too little variety ([`crate::secrets::check_strength`]). An empty secret counts as unset.
    pub fn refusals(&self) -> Vec<String> {
        let mut refusals = Vec::new();
        let dev_only = [
            ("HUBBUB_PAYMENT_PROVIDER=dev", self.payment_provider == Some(PaymentProviderKind::Dev)),
            ("HUBBUB_SMS_PROVIDER=dev-sink", self.sms_provider == Some(SmsProviderKind::DevSink)),
            ("HUBBUB_WHATSAPP_PROVIDER=dev-sink", self.whatsapp_provider == Some(WhatsAppProviderKind::DevSink)),
            ("HUBBUB_DEV_CLOCK_OFFSET_S", self.dev_clock_offset_s != 0),
        ];
        for (switch, _) in dev_only.iter().filter(|(_, set)| *set && !self.dev) {
            refusals.push(format!(
                "{switch} is for development only: set HUBBUB_DEV=1 on a development host, or leave it unset (choose a real provider)"
            ));
        }
        if self.retention_max_days == Some(0) {
            refusals.push("HUBBUB_RETENTION_MAX_DAYS is at least 1 day (unset: no ceiling)".into());
        }
        if let Some(contact) = self.vapid_contact.as_deref()
            && !vapid_contact_valid(contact)
        {
            refusals.push(format!(
                "HUBBUB_VAPID_CONTACT must be a mailto: address or an https: URL (RFC 8292), not {contact:?}"
            ));
        }
        for (name, secret) in [("HUBBUB_JWT_SECRET", &self.jwt_secret), ("HUBBUB_METRICS_TOKEN", &self.metrics_token)] {
            if let Some(secret) = secret.as_deref().filter(|s| !s.is_empty())
                && let Err(why) = crate::secrets::check_strength(name, secret)
            {
                refusals.push(why);
            }
        }
        refusals
    }
}

impl Config {
    /// The contact of the host's VAPID claims (`sub`): `HUBBUB_VAPID_CONTACT`, else the public URL when it is
    /// `https:`, else none.
    pub fn vapid_subject(&self) -> Option<String> {
        let contact = self.vapid_contact.as_deref().map(str::trim).filter(|c| !c.is_empty());
        match contact {
            Some(contact) => Some(contact.to_string()),
            None => {
                let public = self.public_url.trim_end_matches('/');
                vapid_contact_valid(public).then(|| public.to_string())
            }
        }
    }
}

/// Whether `contact` may be a VAPID `sub`: `mailto:` and an e-mail address, or an `https:` URL with a host.
fn vapid_contact_valid(contact: &str) -> bool {
    let contact = contact.trim();
    if let Some(address) = contact.strip_prefix("mailto:") {
        return crate::validate::is_email(address);
    }
    url::Url::parse(contact).is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some_and(|h| !h.is_empty()))
}

/// How much end users may upload: bytes per user within a rolling window.
#[derive(Debug, Clone, Copy)]
pub struct UploadQuota {
    pub bytes: i64,
    pub window_ms: crate::clock::Millis,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("db_max_connections", &self.db_max_connections)
            .field("listen", &self.listen)
            .field("dev", &self.dev)
            .field("workers", &self.workers)
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| "[redacted]"))
            .field("secret_key", &self.secret_key.as_ref().map(|_| "[redacted]"))
            .field("secret_key_file", &self.secret_key_file)
            .field("offline_after_s", &self.offline_after_s)
            .field("template_review", &self.template_review)
            .field("hosts", &self.hosts)
            .field("rate_limit_per_s", &self.rate_limit_per_s)
            .field("rate_limit_burst", &self.rate_limit_burst)
            .field("developer_rate_limit_per_s", &self.developer_rate_limit_per_s)
            .field("developer_rate_limit_burst", &self.developer_rate_limit_burst)
            .field("developer_daily_quota", &self.developer_daily_quota)
            .field("code_rate_limit_per_ip_per_min", &self.code_rate_limit_per_ip_per_min)
            .field("code_rate_limit_global_per_min", &self.code_rate_limit_global_per_min)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("user_token_ttl_s", &self.user_token_ttl_s)
            .field("public_url", &self.public_url)
            .field("vapid_contact", &self.vapid_contact)
            .field("sms_provider", &self.sms_provider)
            .field("twilio_base_url", &self.twilio_base_url)
            .field("twilio_messaging_base_url", &self.twilio_messaging_base_url)
            .field("twilio_account_sid", &self.twilio_account_sid)
            .field("twilio_auth_token", &self.twilio_auth_token.as_ref().map(|_| "[redacted]"))
            .field("twilio_from", &self.twilio_from)
            .field("whatsapp_provider", &self.whatsapp_provider)
            .field("whatsapp_base_url", &self.whatsapp_base_url)
            .field("whatsapp_token", &self.whatsapp_token.as_ref().map(|_| "[redacted]"))
            .field("whatsapp_phone_number_id", &self.whatsapp_phone_number_id)
            .field("whatsapp_business_account_id", &self.whatsapp_business_account_id)
            .field("whatsapp_template_sync_s", &self.whatsapp_template_sync_s)
            .field("whatsapp_app_secret", &self.whatsapp_app_secret.as_ref().map(|_| "[redacted]"))
            .field("whatsapp_verify_token", &self.whatsapp_verify_token.as_ref().map(|_| "[redacted]"))
            .field("payment_provider", &self.payment_provider)
            .field("payment_max_minor", &self.payment_max_minor)
            .field("stripe_base_url", &self.stripe_base_url)
            .field("stripe_secret_key", &self.stripe_secret_key.as_ref().map(|_| "[redacted]"))
            .field("stripe_webhook_secret", &self.stripe_webhook_secret.as_ref().map(|_| "[redacted]"))
            .field("provider_timeout_ms", &self.provider_timeout_ms)
            .field("whatsapp_mps", &self.whatsapp_mps)
            .field("sms_mps", &self.sms_mps)
            .field("whatsapp_pair_interval_ms", &self.whatsapp_pair_interval_ms)
            .field("whatsapp_daily_limit", &self.whatsapp_daily_limit)
            .field("dev_clock_offset_s", &self.dev_clock_offset_s)
            .field("retention_max_days", &self.retention_max_days)
            .field("retention_every_ms", &self.retention_every_ms)
            .field("delivery_poll_ms", &self.delivery_poll_ms)
            .field("lease_ms", &self.lease_ms)
            .field("webhook_backoff_s", &self.webhook_backoff_s)
            .field("webhook_timeout_ms", &self.webhook_timeout_ms)
            .field("webhook_concurrency", &self.webhook_concurrency)
            .field("webhook_poll_ms", &self.webhook_poll_ms)
            .field("bot_cpu_ms", &self.bot_cpu_ms)
            .field("bot_memory_mb", &self.bot_memory_mb)
            .field("bot_max_output_kb", &self.bot_max_output_kb)
            .field("bot_max_loaded", &self.bot_max_loaded)
            .field("bot_compile_concurrency", &self.bot_compile_concurrency)
            .field("user_upload_quota_mb", &self.user_upload_quota_mb)
            .field("hub_fallback_after_s", &self.hub_fallback_after_s)
            .field("header_read_timeout_ms", &self.header_read_timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("max_connections", &self.max_connections)
            .field("streams_per_user", &self.streams_per_user)
            .field("max_streams", &self.max_streams)
            .field("stream_heartbeat_ms", &self.stream_heartbeat_ms)
            .field("stream_poll_ms", &self.stream_poll_ms)
            .field("bot_compile_memory_mb", &self.bot_compile_memory_mb)
            .field("bot_compile_timeout_ms", &self.bot_compile_timeout_ms)
            .field("bot_compiler", &self.bot_compiler)
            .field("bot_partner_slots", &self.bot_partner_slots)
            .field("bot_queue", &self.bot_queue)
            .field("bot_queue_wait_ms", &self.bot_queue_wait_ms)
            .field("component_cache_dir", &self.component_cache_dir)
            .field("component_limit", &self.component_limit)
            .field("metrics_token", &self.metrics_token.as_ref().map(|_| "[redacted]"))
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("shutdown_timeout_ms", &self.shutdown_timeout_ms)
            .field("body_limit", &self.body_limit)
            .finish()
    }
}

/// Hides a password in a database URL.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!("{}{}:[redacted]{}", &url[..scheme + 3], &userinfo[..colon], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_passwords() {
        assert_eq!(super::redact_url("postgres://u:pw@h/db"), "postgres://u:[redacted]@h/db");
        assert_eq!(super::redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(super::redact_url("sqlite://x.db"), "sqlite://x.db");
    }

    #[test]
    fn a_stream_heartbeat_is_at_least_ten_milliseconds() {
        use clap::Parser;
        #[derive(Parser)]
        struct Args {
            #[command(flatten)]
            config: super::Config,
        }
        let beat = |ms: &str| Args::parse_from(["hubbub", "--stream-heartbeat-ms", ms]).config.stream_heartbeat();
        assert_eq!(beat("0"), std::time::Duration::from_millis(10));
        assert_eq!(beat("25000"), std::time::Duration::from_secs(25));
    }

    #[test]
    fn the_vapid_contact_is_a_mailto_or_https_url_or_the_host_refuses_to_start() {
        use clap::Parser;
        #[derive(Parser)]
        struct Args {
            #[command(flatten)]
            config: super::Config,
        }
        let config = |args: &[&str]| Args::parse_from([&["hubbub"], args].concat()).config;
        let refused = |contact: &str| {
            config(&["--vapid-contact", contact]).refusals().iter().any(|r| r.contains("HUBBUB_VAPID_CONTACT"))
        };
        assert!(!refused("mailto:ops@hubbub.example"));
        assert!(!refused("https://hubbub.example/contact"));
        for bad in ["http://127.0.0.1:8080", "mailto:not-an-address", "ops@hubbub.example", "https://", "ftp://x"] {
            assert!(refused(bad), "{bad} is refused");
        }
        let contact = config(&["--vapid-contact", "mailto:ops@hubbub.example"]).vapid_subject();
        assert_eq!(contact.as_deref(), Some("mailto:ops@hubbub.example"));
        // Without a contact: the public URL when it is https, else none (never an http: URL).
        assert_eq!(
            config(&["--public-url", "https://hub.example/"]).vapid_subject().as_deref(),
            Some("https://hub.example")
        );
        assert_eq!(config(&["--public-url", "http://127.0.0.1:8080"]).vapid_subject(), None);
    }
}

/// Settings that are secrets: each may also come from a file named by `HUBBUB_<NAME>_FILE` (Docker and
/// Kubernetes secrets), read when the variable itself is unset.
pub const SECRET_SETTINGS: &[&str] = &[
    "jwt_secret",
    "secret_key",
    "twilio_auth_token",
    "whatsapp_token",
    "whatsapp_app_secret",
    "whatsapp_verify_token",
    "stripe_secret_key",
    "stripe_webhook_secret",
    "metrics_token",
];

/// Why settings could not be layered.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error("{path}: unknown setting {key:?} (settings are `hubbub serve --help`'s long names, with _ for -)")]
    UnknownKey { path: String, key: String },
    #[error("{path}: setting {key:?} must be a string, number, boolean or array of those")]
    BadValue { path: String, key: String },
    #[error("both {var} and {var}_FILE are set: give one")]
    Both { var: String },
}

/// Layers the settings that clap's flags and environment variables do not cover, by making them the
/// defaults of `command` (and of every subcommand that has them), so that flags and the environment still
/// win: first `config_file` (TOML: `listen = "0.0.0.0:8080"`, `webhook_backoff_s = [5, 30]`), then over it
/// each `HUBBUB_<SECRET>_FILE`. `env` is the process environment.
pub fn layer_defaults(
    mut command: clap::Command,
    config_file: Option<&std::path::Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<clap::Command, LayerError> {
    let mut defaults: Vec<(String, String)> = Vec::new();
    if let Some(path) = config_file {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| LayerError::Read { path: shown.clone(), source })?;
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| LayerError::Toml { path: shown.clone(), message: e.to_string() })?;
        let known = setting_names(&command);
        for (key, value) in table {
            if !known.contains(&key) {
                return Err(LayerError::UnknownKey { path: shown, key });
            }
            let text =
                toml_text(&value).ok_or_else(|| LayerError::BadValue { path: shown.clone(), key: key.clone() })?;
            defaults.push((key, text));
        }
    }
    for name in SECRET_SETTINGS {
        let var = format!("HUBBUB_{}", name.to_ascii_uppercase());
        let Some(file) = env(&format!("{var}_FILE")).filter(|f| !f.is_empty()) else { continue };
        if env(&var).is_some_and(|v| !v.is_empty()) {
            return Err(LayerError::Both { var });
        }
        // `HUBBUB_SECRET_KEY_FILE` is a setting of its own (the sealing key is read where it is used).
        if *name == "secret_key" {
            continue;
        }
        let secret =
            std::fs::read_to_string(&file).map_err(|source| LayerError::Read { path: file.clone(), source })?;
        defaults.push((name.to_string(), secret.trim_end_matches(['\n', '\r']).to_string()));
    }
    for (key, value) in defaults {
        command = with_default(command, &key, &value);
    }
    Ok(command)
}

/// The ids of every argument of the command and its subcommands.
fn setting_names(command: &clap::Command) -> std::collections::BTreeSet<String> {
    let mut names: std::collections::BTreeSet<String> =
        command.get_arguments().map(|a| a.get_id().as_str().to_string()).collect();
    for sub in command.get_subcommands() {
        names.extend(setting_names(sub));
    }
    names
}

/// `key`'s default set to `value` wherever the argument exists.
fn with_default(command: clap::Command, key: &str, value: &str) -> clap::Command {
    let has = command.get_arguments().any(|a| a.get_id().as_str() == key);
    let mut command = if has { command.mut_arg(key, |a| a.default_value(value.to_string())) } else { command };
    let subs: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for sub in subs {
        command = command.mut_subcommand(sub, |s| with_default(s, key, value));
    }
    command
}

/// A TOML value as the text clap parses (arrays joined with commas).
fn toml_text(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Array(items) => items.iter().map(toml_text).collect::<Option<Vec<_>>>().map(|v| v.join(",")),
        _ => None,
    }
}
