//! Hubbub's host: the partner messaging API, its storage, delivery, webhooks and the Wasm bot runtime.
//!
#![doc = include_str!("layers.md")]
//!
//! # Where a change goes
//!
//! | Change | Files |
//! |---|---|
//! | A new message state | `names.rs` (`MessageState`, its paths such as `HUB_PATH`), then what moves into it: `messages/mod.rs` (people's marks) or `delivery/` (the worker), and the OpenAPI document (`hubbub openapi > docs/openapi.json`) |
//! | A new event | `events.rs` (its payload type and builder), the module that raises it (it passes the builder to the store), `http/openapi.rs` (its `webhooks` entry) and `docs/webhooks.md` |
//! | A new endpoint | `http/<resource>.rs` (the handler: parse, call one domain function, answer), its domain function (`<resource>.rs` on floor 3, or the worker room it acts through: its rules and checks, answering its own error enum or `validate::KeepError`, which `http/error.rs` turns into answers), `store/<aggregate>.rs` for new SQL (both migrations folders for new tables), a row in `tests/api/auth_matrix.rs` |
//! | A new channel | `names.rs` (`Channel`), `providers.rs` (its client), `messages/routing.rs` (the order channels are tried in), `delivery/mod.rs` (trying them), `config.rs` (its settings) |
//! | A new WIT import | `wit/` (a new frozen version), `runtime/bindings.rs` (its module), `runtime/sandbox.rs` (the `Host` impl beside `GuestState`), `runtime/convert.rs` (its types) |
//! | A new live event kind | `names.rs` (`UserEventKind`), the domain change that appends it to the event log in its own transaction (`store::user_events::append_in`), how each stream renders it (`http/live/user.rs` `render`, `http/live/console.rs` `Console::rendered`), the stream's description in its handler's doc, and the page that follows it (`web/src/app/live.ts`, `web/src/console/live.ts`, both on `web/src/shared/sse.ts`) |
//! | A new console page | `web/src/console/<page>.tsx`, its route and link (`web/src/console/main.tsx`, `nav.tsx`), what each role may call for it (`members.rs` `allows`), a Chromium test in `tests/web/app.test.mjs` |
//! | A new member role | `names.rs` (`MemberRole`), `members.rs` (`allows`, `refusal`, `key_refusal`: the one place that decides, for sessions and keys alike), the CHECK of `members.role` and `partner_keys.role` (both migrations folders), the roles table of `docs/api.md`, `tests/api/members.rs` |
//! | A new rule for messages from WhatsApp or SMS | `inbound/route.rs` (`route`: the rules in their order, the module's documentation lists them), what it reads of the message (`inbound/parse.rs`), `docs/providers.md` ("Messages from users"), `tests/api/inbound.rs` |
//! | Searching something new | `store/search.rs` (the one place each engine's text index is queried: FTS5 or `tsvector`), the migrations that keep its words (triggers, both folders), the store list that takes the words (`store/messages/hub.rs`, `store/conversations.rs`), `tests/api/search.rs` |
//!
//! What a handler calls: it parses the request, calls one function of the domain or of a worker's room
//! (`messages::send`, `desk::reply`, `accounts::link`, `bots::manage::update`, `Delivery::set_own_sender`, …)
//! and answers; transactions are opened in the store or the domain, never in a handler. Of the store,
//! `http/` names only its handle (`Db`), except the composition root, the metrics recorder and the live
//! streams' tail of the event log (`tests/layers.rs` holds it to that).
//! [`prepare`] opens the database, builds the services and the state; [`serve`] runs the API on a listener
//! until a shutdown future resolves, so tests bind port 0.
#![recursion_limit = "512"]

pub mod accounts;
pub mod analytics;
pub mod assignment;
pub mod bots;
pub mod broadcasts;
pub mod business_hours;
pub mod canned_replies;
pub mod channel_steps;
pub mod clock;
pub mod config;
pub mod conversations;
pub mod delivery;
pub mod desk;
pub mod developers;
pub mod encryption;
pub mod events;
pub mod exports;
pub mod flows;
pub mod forms;
pub mod health;
pub mod http;
pub mod inbound;
pub mod invitations;
pub mod labels;
pub mod macros;
pub mod members;
pub mod messages;
pub mod names;
pub mod otp;
pub mod partners;
pub mod passkeys;
pub mod payments;
pub mod preferences;
pub mod providers;
pub mod retention;
pub mod rollups;
pub mod runtime;
pub mod secrets;
pub mod senders;
pub mod service_levels;
pub mod signing;
pub mod slas;
pub mod store;
pub mod template;
pub mod validate;
pub mod webhooks;
pub mod webpush;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::delivery::Delivery;
use crate::http::state::AppState;
use crate::store::deliveries::MessageWriter;
use crate::store::{Db, settings};
use crate::webhooks::Webhooks;

/// Connects to the database (running migrations), builds the services that run beside the API (the
/// message writer, delivery, webhooks, the bot runtime) and the shared state from them. Must run inside a
/// Tokio runtime (the message writer starts).
pub async fn prepare(config: Config, clock: SharedClock) -> anyhow::Result<AppState> {
    let refusals = config.refusals();
    if !refusals.is_empty() {
        anyhow::bail!("refusing to start: {}", refusals.join("; "));
    }
    let db = Db::open(&config, config.db_max_connections).await?;
    senders::release_hosts(&db, &config).await?;
    let jwt_secret = match configured_jwt_secret(&config) {
        Some(secret) => secret.as_bytes().to_vec(),
        None => settings::get_or_insert_secret(&db, "jwt_secret", || {
            base64::engine::general_purpose::STANDARD.encode(secrets::random_bytes::<32>())
        })
        .await?
        .into_bytes(),
    };
    // The host's Web Push key pair: made once, kept sealed with the other secrets, the same on every host.
    let vapid = settings::get_or_insert_secret(&db, "vapid_private_key", webpush::Vapid::generate).await?;
    let vapid = webpush::Vapid::from_stored(&vapid, config.vapid_subject().as_deref()).map_err(anyhow::Error::msg)?;
    let push = Arc::new(delivery::push::Push::new(db.clone(), clock.clone(), &config, vapid, &jwt_secret));
    let config = Arc::new(config);
    let limits = runtime::RuntimeLimits {
        cpu_ms: config.bot_cpu_ms.max(1),
        memory_bytes: config.bot_memory_mb.max(1) << 20,
        max_output_bytes: config.bot_max_output_kb.max(1) << 10,
        max_loaded_components: config.bot_max_loaded.max(1),
        max_concurrent_compiles: config.bot_compile_concurrency.max(1),
        compiler: runtime::Compiler::Process(runtime::CompileLimits {
            exe: match &config.bot_compiler {
                Some(exe) => exe.clone(),
                None => std::env::current_exe()?,
            },
            memory_bytes: config.bot_compile_memory_mb.max(1) << 20,
            timeout: Duration::from_millis(config.bot_compile_timeout_ms.max(1)),
        }),
        slots: runtime::SlotLimits {
            per_partner: config.bot_partner_slots.max(1),
            queue: config.bot_queue,
            wait: Duration::from_millis(config.bot_queue_wait_ms),
        },
    };
    let runtime = runtime::Runtime::new(limits, config.component_cache_dir.clone())?;
    // The metrics recorder, before anything records (once per process).
    http::metrics::handle();
    Ok(AppState::new(http::state::Parts {
        messages: MessageWriter::spawn(db.clone()),
        delivery: Delivery::new(db.clone(), clock.clone(), config.clone(), push),
        webhooks: Webhooks::new(db.clone(), clock.clone(), config.clone()),
        runtime,
        jwt_secret,
        db,
        config,
        clock,
    }))
}

/// The operator's JWT secret: `None` when unset or empty (one is then generated).
fn configured_jwt_secret(config: &Config) -> Option<&str> {
    config.jwt_secret.as_deref().filter(|s| !s.is_empty())
}

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting, lets in-flight requests
/// finish and stops the background workers — each for at most `HUBBUB_SHUTDOWN_TIMEOUT_MS`, after which
/// what is still running is abandoned and logged (a claimed delivery or webhook is taken over by another
/// host when its lease ends).
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts a request in flight until it is answered or dropped.
    struct InFlight(Arc<AtomicUsize>);
    impl Drop for InFlight {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    let stop = CancellationToken::new();
    let workers = spawn_workers(&state, &stop);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let counter = in_flight.clone();
    let app = http::app(state.clone()).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            counter.fetch_add(1, Ordering::SeqCst);
            let guard = InFlight(counter.clone());
            async move {
                let response = next.run(request).await;
                drop(guard);
                response
            }
        },
    ));
    let grace = Duration::from_millis(state.config.shutdown_timeout_ms);
    let signalled = CancellationToken::new();
    let on_signal = signalled.clone();
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "listening; the web app is at http://{addr}/");
    let limits = http::listener::ConnectionLimits {
        header_read_timeout: Duration::from_millis(state.config.header_read_timeout_ms.max(1)),
        idle_timeout: Duration::from_millis(state.config.idle_timeout_ms.max(1)),
        max_connections: state.config.max_connections.max(1),
    };
    let streams_end = state.shutdown.clone();
    let server = http::listener::serve(listener, app, limits, async move {
        shutdown.await;
        on_signal.cancel();
        streams_end.cancel();
    });
    tokio::select! {
        served = server => served?,
        _ = async { signalled.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(
                abandoned_requests = in_flight.load(Ordering::SeqCst),
                grace_ms = grace.as_millis() as u64,
                "shutdown: requests still in flight after the grace period were abandoned"
            );
        }
    }
    stop.cancel();
    for (name, worker) in workers {
        if tokio::time::timeout(grace, worker).await.is_err() {
            tracing::warn!(worker = name, "shutdown: the worker did not stop within the grace period; abandoned");
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// The background work of a running host.
fn spawn_workers(state: &AppState, stop: &CancellationToken) -> Vec<(&'static str, tokio::task::JoinHandle<()>)> {
    let housekeeping = {
        let state = state.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => state.housekeep().await,
                }
            }
        })
    };
    let wakes = tokio::spawn(http::live::wakes::run_wakes(
        state.db.clone(),
        state.wakes.clone(),
        state.config.database_url.clone(),
        Duration::from_millis(state.config.stream_poll_ms.max(1)),
        stop.clone(),
    ));
    if !state.config.workers {
        return vec![("housekeeping", housekeeping), ("stream-wakes", wakes)];
    }
    let supervised = |name: &'static str, work: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>| {
        let running = state.workers.start(name);
        tokio::spawn(async move {
            let _running = running;
            work.await;
        })
    };
    let delivery = supervised("delivery", Box::pin(delivery::run_worker(state.delivery.clone(), stop.clone())));
    let webhooks = supervised("webhooks", Box::pin(webhooks::run_dispatcher(state.webhooks.clone(), stop.clone())));
    let broadcasts = supervised("broadcasts", Box::pin(broadcasts::run_worker(state.fanout(), stop.clone())));
    let inbound = supervised("inbound", Box::pin(inbound::run_worker(state.routing(), stop.clone())));
    let meta = Box::pin(delivery::meta_review::run_sync(state.delivery.clone(), stop.clone()));
    let templates = supervised("whatsapp-templates", meta);
    let retention =
        Box::pin(retention::run_worker(state.db.clone(), state.clock.clone(), state.config.clone(), stop.clone()));
    let retention = supervised("retention", retention);
    let slas = supervised("slas", Box::pin(slas::run_worker(state.db.clone(), state.clock.clone(), stop.clone())));
    let rollups = supervised("rollups", Box::pin(rollups::run_worker(state.db.clone(), stop.clone())));
    vec![
        ("housekeeping", housekeeping),
        ("stream-wakes", wakes),
        ("delivery", delivery),
        ("webhooks", webhooks),
        ("broadcasts", broadcasts),
        ("inbound", inbound),
        ("whatsapp-templates", templates),
        ("retention", retention),
        ("slas", slas),
        ("rollups", rollups),
    ]
}
