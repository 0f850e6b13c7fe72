//! The sandboxed WebAssembly runtime that runs bots: components of the WIT world `hubbub:bot@0.1.0`
//! (`wit/v0.1.0`).
//!
//! Layout:
//! - this file: the API ([`Runtime`], its inputs and outputs) and the component cache: each component
//!   is compiled once, its precompiled artifact kept as `<cache_dir>/<hex digest>.cwasm` (so a restart
//!   loads it instead of recompiling) and its `InstancePre` kept in memory by digest;
//! - `engine`: the wasmtime engine (pooling allocator with an on-demand fallback, epoch ticker);
//! - `sandbox`: one call in a fresh `Store` with its limits, WASI denied everything, the `log` import;
//! - `convert`: API types to WIT types and back, with the checks on what a guest answers;
//! - `slots`: the pooled instance slots, shared fairly between partners;
//! - `compiler`: compilation into artifacts, in a bounded child process on a host;
//! - `bindings`: the WIT bindings.
//!
//! Every call runs on tokio's blocking pool (`spawn_blocking`): a guest is CPU-bound and short, so the
//! async workers never run guest code, and a looping guest holds one blocking thread until its time
//! budget stops it. At most `engine::MAX_CONCURRENT_CALLS` calls run at once (one pooled instance each),
//! at most a share of them per partner; a call keeps its slot until its guest returns, and a compilation
//! keeps its compiler slot until it ends, whatever their callers do meanwhile.

mod bindings;
mod compiler;
mod convert;
mod engine;
mod sandbox;
mod slots;

pub use self::compiler::{CompileLimits, Compiler};
pub use self::slots::SlotLimits;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;
use wasmtime::component::Component;

use self::bindings::BotPre;

/// The WIT version of `hubbub:bot` this host runs (`wit/v{WIT_VERSION}`).
pub const WIT_VERSION: &str = bindings::VERSION;

/// The WIT versions of `hubbub:bot` this host accepts components of.
pub const WIT_VERSIONS_SERVED: &[&str] = bindings::SERVED;
use self::sandbox::{GuestState, Sandbox};
use crate::forms::FieldDef;

/// What one guest call may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeLimits {
    /// CPU time one call may use, in milliseconds (measured on the thread running it, checked every
    /// 10 ms epoch tick); the call may also take at most ten times that in wall-clock time.
    pub cpu_ms: u64,
    /// Largest size of a linear memory of the guest, in bytes.
    pub memory_bytes: usize,
    /// Largest reply: its steps as JSON plus its state, in bytes.
    pub max_output_bytes: usize,
    /// Components kept ready in memory; past it the least recently used is dropped (and loaded again
    /// from its precompiled artifact when next needed).
    pub max_loaded_components: usize,
    /// Compilations that may run at once. Loading a precompiled artifact never waits for them.
    pub max_concurrent_compiles: usize,
    /// Where compilations run, and within what bounds.
    pub compiler: Compiler,
    /// How the instance slots are shared between partners.
    pub slots: SlotLimits,
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        RuntimeLimits {
            cpu_ms: 50,
            memory_bytes: 32 << 20,
            max_output_bytes: 256 << 10,
            max_loaded_components: 128,
            max_concurrent_compiles: 1,
            compiler: Compiler::InProcess,
            slots: SlotLimits::default(),
        }
    }
}

/// How a session starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The flow with this code.
    Flow(String),
    /// An in-app chat session.
    Chat,
}

/// Who a call is for: the guest is told the bot's code and the phone; the partner is the runtime's unit of
/// fairness (each partner's calls hold at most its share of the instance slots).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestContext {
    /// The bot's partner (its code).
    pub partner: String,
    /// The bot's code.
    pub bot: String,
    /// The end user's E.164 phone number.
    pub phone: String,
}

/// Something the user did in a session.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestEvent {
    /// Typed text.
    Text(String),
    /// A picked menu item's id.
    Select(String),
    /// A submitted screen: `values` already validated and normalised against `fields` (the screen's
    /// fields, which type the values for the guest).
    Submit { screen: String, values: serde_json::Map<String, serde_json::Value>, fields: Vec<FieldDef> },
    /// A payment outcome; `status` is `confirmed`, `declined` or `cancelled`.
    Payment { id: String, status: String, reference: Option<String> },
}

/// A guest's answer: steps as the contract's JSON, and the session state to pass back next time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuestReply {
    /// `{"type": "message"|"menu"|"flow_screen"|"payment"|"flow_completed", …}`, in order.
    pub steps: Vec<serde_json::Value>,
    /// The guest's opaque session state.
    pub state: String,
}

/// A flow a component offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FlowInfo {
    /// A resource code, unique within the component.
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    pub code: String,
    /// Shown to users.
    pub title: String,
}

/// A component ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedComponent {
    /// `sha256:` and the hex SHA-256 of the bytes.
    pub digest: String,
    /// Size of the bytes (0 when it was loaded from its precompiled artifact without them).
    pub size: usize,
    /// What its `flows()` answered.
    pub flows: Vec<FlowInfo>,
    /// True when nothing was compiled: the component was in memory, or its precompiled artifact was
    /// in the cache directory.
    pub from_cache: bool,
}

/// Why a component could not be loaded or a call gave no reply. Messages are short and never carry
/// more than a bounded excerpt of what the guest produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    #[error("not a hubbub:bot@{WIT_VERSION} component: {0}")]
    InvalidComponent(String),
    #[error("the component is not loaded")]
    NotLoaded,
    #[error("the bot answered an error: {0}")]
    Guest(String),
    #[error("the bot trapped: {0}")]
    Trap(String),
    #[error("the bot ran out of time")]
    Timeout,
    #[error("the bot ran out of memory")]
    OutOfMemory,
    #[error("the bot's reply is too large")]
    OutputTooLarge,
    #[error("the bot answered malformed steps: {0}")]
    Malformed(String),
    #[error("every compiler slot is busy; try again shortly")]
    CompilerBusy,
    /// The partner's bots are running their share of calls and as many wait as may (answered 429).
    #[error("too many calls of this partner's bots are waiting; slow down")]
    QueueFull,
    /// No slot freed up for the call within the queue's deadline (answered 503).
    #[error("the bot runtime is busy; try again shortly")]
    Busy,
}

impl RuntimeError {
    /// A short name of the failure, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            RuntimeError::InvalidComponent(_) => "invalid_component",
            RuntimeError::NotLoaded => "not_loaded",
            RuntimeError::Guest(_) => "guest_error",
            RuntimeError::Trap(_) => "trap",
            RuntimeError::Timeout => "timeout",
            RuntimeError::OutOfMemory => "out_of_memory",
            RuntimeError::OutputTooLarge => "output_too_large",
            RuntimeError::Malformed(_) => "malformed",
            RuntimeError::CompilerBusy => "compiler_busy",
            RuntimeError::QueueFull => "queue_full",
            RuntimeError::Busy => "busy",
        }
    }
}

/// Where the bytes of a component to compile are.
pub enum ComponentSource<'a> {
    Bytes(&'a [u8]),
    /// A file (an upload streamed to disk), with the hex SHA-256 of its bytes.
    File {
        path: &'a Path,
        sha256_hex: String,
    },
}

/// What a load does when it must compile and every compiler slot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenBusy {
    /// Wait for a slot (a bot that must run).
    Wait,
    /// Give up with [`RuntimeError::CompilerBusy`] (an upload, which the partner can retry).
    Refuse,
}

/// The bot runtime. Cheap to clone; clones share the engine and the loaded components.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

struct Shared {
    /// Engine, linker and limits; runs one call at a time per blocking thread.
    sandbox: Sandbox,
    /// Where precompiled artifacts are kept (trusted: they are loaded as native code).
    cache_dir: PathBuf,
    /// Components ready to instantiate, by digest (`sha256:<hex>`), each with when it was last used.
    components: RwLock<HashMap<String, Loaded>>,
    /// A counter that orders uses (for least-recently-used eviction).
    uses: AtomicU64,
    /// The pooled instance slots, shared between partners.
    slots: slots::Slots,
    /// One permit per compilation that may run at once (compiling is slow and memory-hungry). Loading a
    /// precompiled artifact takes none, so bots keep loading while an upload compiles.
    compilers: Arc<Semaphore>,
    /// Whether the pooling allocator could be set up.
    pooling: bool,
    /// Where compilations run.
    compiler: Compiler,
}

struct Loaded {
    ready: Arc<ReadyComponent>,
    last_used: AtomicU64,
}

struct ReadyComponent {
    pre: BotPre<GuestState>,
    size: usize,
    flows: Vec<FlowInfo>,
}

impl Runtime {
    /// Sets up the engine (and its epoch ticker thread) and the artifact directory.
    pub fn new(limits: RuntimeLimits, cache_dir: PathBuf) -> anyhow::Result<Runtime> {
        std::fs::create_dir_all(&cache_dir)?;
        let (engine, pooling) = engine::build()?;
        engine::spawn_epoch_ticker(engine.weak())?;
        let limits_compiles = limits.max_concurrent_compiles.max(1);
        let (compiler, slot_limits) = (limits.compiler.clone(), limits.slots);
        let sandbox = Sandbox::new(engine, limits)?;
        Ok(Runtime {
            shared: Arc::new(Shared {
                sandbox,
                cache_dir,
                components: RwLock::new(HashMap::new()),
                uses: AtomicU64::new(0),
                slots: slots::Slots::new(engine::MAX_CONCURRENT_CALLS as usize, slot_limits),
                compilers: Arc::new(Semaphore::new(limits_compiles)),
                pooling,
                compiler,
            }),
        })
    }

    /// Whether instances come from the pooling allocator (false: it could not be set up, on-demand
    /// allocation is used).
    pub fn uses_pooling_allocator(&self) -> bool {
        self.shared.pooling
    }

    /// Bytes of guest memory and tables that idle pooled slots keep resident (dirtied pages reset in
    /// place for the next call, `engine::KEEP_RESIDENT_MEMORY` at most per memory); 0 without pooling.
    pub fn pool_resident_bytes(&self) -> usize {
        self.shared
            .sandbox
            .engine
            .pooling_allocator_metrics()
            .map_or(0, |pool| pool.unused_memory_bytes_resident() + pool.unused_table_bytes_resident())
    }

    /// Validates and compiles a component (on a blocking thread), keeps its precompiled artifact in the
    /// cache directory (reused instead of compiling when present), and asks it for its flows. Waits for a
    /// compiler slot when it must compile.
    pub async fn load(&self, wasm: &[u8]) -> Result<LoadedComponent, RuntimeError> {
        self.load_from(ComponentSource::Bytes(wasm), WhenBusy::Wait).await
    }

    /// [`load`](Runtime::load) from bytes or a file, choosing what happens when every compiler slot is busy.
    pub async fn load_from(
        &self,
        source: ComponentSource<'_>,
        when_busy: WhenBusy,
    ) -> Result<LoadedComponent, RuntimeError> {
        let hex = match &source {
            ComponentSource::Bytes(wasm) => crate::secrets::hex(&Sha256::digest(wasm)),
            ComponentSource::File { sha256_hex, .. } => sha256_hex.clone(),
        };
        let digest = format!("sha256:{hex}");
        let known_size = match &source {
            ComponentSource::Bytes(wasm) => Some(wasm.len()),
            ComponentSource::File { path, .. } => std::fs::metadata(path).ok().map(|m| m.len() as usize),
        };
        if let Some(loaded) = self.precompiled(&digest, known_size).await? {
            return Ok(loaded);
        }
        let _slot: OwnedSemaphorePermit = match when_busy {
            WhenBusy::Wait => self.shared.compilers.clone().acquire_owned().await.expect("never closed"),
            WhenBusy::Refuse => {
                self.shared.compilers.clone().try_acquire_owned().map_err(|_| RuntimeError::CompilerBusy)?
            }
        };
        // Another load may have compiled it while this one waited.
        if let Some(loaded) = self.precompiled(&digest, known_size).await? {
            return Ok(loaded);
        }
        let span = tracing::info_span!("guest_compile", digest = %short(&digest));
        let shared = self.shared.clone();
        let owned = match source {
            ComponentSource::Bytes(wasm) => OwnedSource::Bytes(wasm.to_vec()),
            ComponentSource::File { path, .. } => OwnedSource::File(path.to_path_buf()),
        };
        // A task of its own holds the compiler slot until the compilation ends, even when the caller hangs up
        // (the compilation cannot be cancelled, so its slot must not be freed before it is over).
        let compilation = async move {
            let slot = _slot;
            let compiled = shared.compile(&hex, owned).await;
            drop(slot);
            compiled
        };
        let (pre, size) = tokio::spawn(compilation.instrument(span.clone()))
            .await
            .map_err(|_| RuntimeError::InvalidComponent("compilation failed".into()))??;
        self.finish_load(digest, pre, size, false, span).await
    }

    /// Loads a component from its precompiled artifact in the cache directory, if it has one (or finds it
    /// in memory); takes no compiler slot. `None`: it must be compiled from its bytes.
    pub async fn load_precompiled(&self, digest: &str) -> Result<Option<LoadedComponent>, RuntimeError> {
        self.precompiled(digest, None).await
    }

    async fn precompiled(
        &self,
        digest: &str,
        known_size: Option<usize>,
    ) -> Result<Option<LoadedComponent>, RuntimeError> {
        if let Some(ready) = self.ready(digest) {
            return Ok(Some(ready.describe(digest.to_string(), true)));
        }
        let Some(hex) =
            digest.strip_prefix("sha256:").filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        else {
            return Ok(None);
        };
        let span = tracing::info_span!("guest_load", digest = %short(digest));
        let shared = self.shared.clone();
        let (hex, task_span) = (hex.to_string(), span.clone());
        let found = tokio::task::spawn_blocking(move || task_span.in_scope(|| shared.load_artifact(&hex)))
            .await
            .map_err(|_| RuntimeError::InvalidComponent("loading the artifact failed".into()))??;
        match found {
            Some((pre, size)) => {
                self.finish_load(digest.to_string(), pre, known_size.unwrap_or(size), true, span).await.map(Some)
            }
            None => Ok(None),
        }
    }

    /// Asks a prepared component for its flows and keeps it ready.
    async fn finish_load(
        &self,
        digest: String,
        pre: BotPre<GuestState>,
        size: usize,
        from_cache: bool,
        span: tracing::Span,
    ) -> Result<LoadedComponent, RuntimeError> {
        let flows = self
            .call(LOADS, span, {
                let pre = pre.clone();
                let label = short(&digest).to_string();
                move |sandbox| {
                    let flows = sandbox.run(&pre, &label, |bot, store| bot.hubbub_bot_handler().call_flows(store));
                    flows.map_err(|e| RuntimeError::InvalidComponent(format!("flows() failed: {e}")))
                }
            })
            .await?;
        let flows = convert::flows(flows).map_err(RuntimeError::InvalidComponent)?;
        let ready = Arc::new(ReadyComponent { pre, size, flows });
        self.keep(&digest, ready.clone());
        Ok(ready.describe(digest, from_cache))
    }

    /// Takes a compiler slot and holds it until the permit is dropped, as a long compilation would (for
    /// tests and operators' drills: uploads are then refused while precompiled bots keep loading).
    #[doc(hidden)]
    pub fn occupy_compiler(&self) -> Option<OwnedSemaphorePermit> {
        self.shared.compilers.clone().try_acquire_owned().ok()
    }

    /// Compiler slots free now (for tests: whether an upload is compiling).
    #[doc(hidden)]
    pub fn free_compilers(&self) -> usize {
        self.shared.compilers.available_permits()
    }

    /// Whether the component with this digest is ready in memory. If not, pass its bytes to
    /// [`load`](Runtime::load) again (after a restart that uses the artifact, not the compiler).
    pub fn is_loaded(&self, digest: &str) -> bool {
        self.ready(digest).is_some()
    }

    /// Starts a flow or a chat session.
    pub async fn start(
        &self,
        digest: &str,
        bot: &str,
        entry: Entry,
        ctx: GuestContext,
    ) -> Result<GuestReply, RuntimeError> {
        let ready = self.ready(digest).ok_or(RuntimeError::NotLoaded)?;
        let span = match &entry {
            Entry::Flow(code) => tracing::info_span!("guest_call", bot, flow = %code, event = "start"),
            Entry::Chat => tracing::info_span!("guest_call", bot, event = "start_chat"),
        };
        let partner = ctx.partner.clone();
        let (entry, ctx) = (convert::entry(entry), convert::context(ctx));
        let bot = bot.to_string();
        self.call(&partner, span, move |sandbox| {
            let reply = sandbox.run(&ready.pre, &bot, |instance, store| {
                instance.hubbub_bot_handler().call_start(store, &entry, &ctx)
            })?;
            finish(reply, sandbox.limits().max_output_bytes)
        })
        .await
    }

    /// Passes a user event of a session to the guest, with the state of its previous reply.
    pub async fn handle(
        &self,
        digest: &str,
        bot: &str,
        state: String,
        event: GuestEvent,
        ctx: GuestContext,
    ) -> Result<GuestReply, RuntimeError> {
        let ready = self.ready(digest).ok_or(RuntimeError::NotLoaded)?;
        let kind = match &event {
            GuestEvent::Text(_) => "text",
            GuestEvent::Select(_) => "select",
            GuestEvent::Submit { .. } => "submit",
            GuestEvent::Payment { .. } => "payment",
        };
        let span = tracing::info_span!("guest_call", bot, event = kind);
        let partner = ctx.partner.clone();
        let (event, ctx) = (convert::event(event)?, convert::context(ctx));
        let bot = bot.to_string();
        self.call(&partner, span, move |sandbox| {
            let reply = sandbox.run(&ready.pre, &bot, |instance, store| {
                instance.hubbub_bot_handler().call_handle(store, &state, &event, &ctx)
            })?;
            finish(reply, sandbox.limits().max_output_bytes)
        })
        .await
    }

    fn ready(&self, digest: &str) -> Option<Arc<ReadyComponent>> {
        let components = self.shared.components.read().expect("component map poisoned");
        let loaded = components.get(digest)?;
        loaded.last_used.store(self.shared.uses.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        Some(loaded.ready.clone())
    }

    /// Keeps a component ready, dropping the least recently used ones past the limit. A call already
    /// running holds its own reference, so dropping never breaks it.
    fn keep(&self, digest: &str, ready: Arc<ReadyComponent>) {
        let max = self.shared.sandbox.limits().max_loaded_components.max(1);
        let mut components = self.shared.components.write().expect("component map poisoned");
        let last_used = AtomicU64::new(self.shared.uses.fetch_add(1, Ordering::Relaxed));
        components.insert(digest.to_string(), Loaded { ready, last_used });
        while components.len() > max {
            let oldest = components
                .iter()
                .min_by_key(|(_, l)| l.last_used.load(Ordering::Relaxed))
                .map(|(d, _)| d.clone())
                .expect("not empty");
            components.remove(&oldest);
            tracing::info!(digest = %short(&oldest), "component dropped from memory (least recently used)");
        }
    }

    /// How many components are ready in memory.
    pub fn loaded_count(&self) -> usize {
        self.shared.components.read().expect("component map poisoned").len()
    }

    /// Pooled instance slots free now (for tests: whether a guest still runs).
    #[doc(hidden)]
    pub fn free_call_slots(&self) -> usize {
        self.shared.slots.free()
    }

    /// Runs `work` on the blocking pool once `partner` is admitted to a slot; the slot goes with the work
    /// and is freed when the guest returns, not when this future is dropped. Logs a failure in `span`.
    async fn call<T: Send + 'static>(
        &self,
        partner: &str,
        span: tracing::Span,
        work: impl FnOnce(&Sandbox) -> Result<T, RuntimeError> + Send + 'static,
    ) -> Result<T, RuntimeError> {
        let slot = match self.shared.slots.admit(partner).await {
            Ok(slot) => slot,
            Err(busy) => {
                span.in_scope(|| tracing::info!(error = %busy, partner, "guest call not admitted"));
                return Err(busy);
            }
        };
        let shared = self.shared.clone();
        let task_span = span.clone();
        let result = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            task_span.in_scope(|| work(&shared.sandbox))
        })
        .await
        .unwrap_or_else(|_| Err(RuntimeError::Trap("the host failed running the call".into())));
        if let Err(error) = &result {
            span.in_scope(|| tracing::warn!(%error, "guest call failed"));
        }
        result
    }
}

/// Compiles the component in `input` into its artifact `output` with the runtime's engine settings: the
/// work of `hubbub compile-component`, the child process a host compiles in.
pub fn compile_file(input: &Path, output: &Path) -> anyhow::Result<()> {
    compiler::compile_artifact(&wasmtime::Engine::new(&engine::base_config())?, input, output)
}

/// The share that calls made while loading a component (asking it for its flows) count against.
const LOADS: &str = "(loads)";

/// The bytes to compile, moved to the blocking thread.
enum OwnedSource {
    Bytes(Vec<u8>),
    File(PathBuf),
}

impl Shared {
    fn artifact_path(&self, hex: &str) -> PathBuf {
        self.cache_dir.join(format!("{hex}.cwasm"))
    }

    /// The component's `InstancePre` from its precompiled artifact, if there is a usable one (the size of
    /// the original bytes is not kept with it: 0). Blocking.
    fn load_artifact(&self, hex: &str) -> Result<Option<(BotPre<GuestState>, usize)>, RuntimeError> {
        let artifact = self.artifact_path(hex);
        if !artifact.is_file() {
            return Ok(None);
        }
        // SAFETY: artifacts are written only by `store_artifact` below into the runtime's own cache
        // directory, which is trusted; wasmtime still checks that it fits this engine.
        match unsafe { Component::deserialize_file(&self.sandbox.engine, &artifact) } {
            Ok(component) => Ok(Some((self.instantiate_pre(&component)?, 0))),
            Err(error) => {
                tracing::warn!(%error, path = %artifact.display(), "unusable artifact, it will be recompiled");
                Ok(None)
            }
        }
    }

    /// Compiles a component into its artifact (in a bounded child process on a host) and prepares it from
    /// the artifact. An artifact that does not prepare (a component with imports this host does not
    /// offer) is removed again.
    async fn compile(
        self: Arc<Self>,
        hex: &str,
        source: OwnedSource,
    ) -> Result<(BotPre<GuestState>, usize), RuntimeError> {
        let artifact = self.artifact_path(hex);
        // Bytes (from the database) are written out first: both compilers read a file.
        let (_written, input) = match source {
            OwnedSource::File(path) => (None, path),
            OwnedSource::Bytes(wasm) => {
                let file = tempfile::Builder::new()
                    .prefix("compile-")
                    .suffix(".wasm")
                    .tempfile_in(&self.cache_dir)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, &wasm).map(|_| f))
                    .map_err(|e| RuntimeError::InvalidComponent(format!("could not stage the component: {e}")))?;
                let path = file.path().to_path_buf();
                (Some(file), path)
            }
        };
        let size = std::fs::metadata(&input).map(|m| m.len() as usize).unwrap_or(0);
        match &self.compiler {
            Compiler::Process(limits) => compiler::compile_in_child(limits, &input, &artifact).await?,
            Compiler::InProcess => {
                let (shared, input, output) = (self.clone(), input.clone(), artifact.clone());
                tokio::task::spawn_blocking(move || {
                    compiler::compile_artifact(&shared.sandbox.engine, &input, &output)
                        .map_err(|e| RuntimeError::InvalidComponent(truncate(&format!("{e:#}"), 300)))
                })
                .await
                .map_err(|_| RuntimeError::InvalidComponent("compilation failed".into()))??
            }
        }
        let shared = self.clone();
        let hex_owned = hex.to_string();
        let loaded = tokio::task::spawn_blocking(move || shared.load_artifact(&hex_owned))
            .await
            .map_err(|_| RuntimeError::InvalidComponent("loading the artifact failed".into()))?;
        match loaded {
            Ok(Some((pre, _))) => Ok((pre, size)),
            Ok(None) => Err(RuntimeError::InvalidComponent("the compiled artifact could not be loaded".into())),
            Err(error) => {
                let _ = std::fs::remove_file(&artifact);
                Err(error)
            }
        }
    }

    fn instantiate_pre(&self, component: &Component) -> Result<BotPre<GuestState>, RuntimeError> {
        let pre = self
            .sandbox
            .linker
            .instantiate_pre(component)
            .map_err(|e| RuntimeError::InvalidComponent(truncate(&format!("unsupported imports: {e:#}"), 300)))?;
        BotPre::new(pre).map_err(|e| {
            RuntimeError::InvalidComponent(truncate(&format!("no hubbub:bot/handler@{WIT_VERSION} export: {e:#}"), 300))
        })
    }
}

impl ReadyComponent {
    fn describe(&self, digest: String, from_cache: bool) -> LoadedComponent {
        LoadedComponent { digest, size: self.size, flows: self.flows.clone(), from_cache }
    }
}

/// A guest's `result<reply, string>` as the API's.
fn finish(reply: Result<bindings::Reply, String>, max_output_bytes: usize) -> Result<GuestReply, RuntimeError> {
    match reply {
        Ok(reply) => convert::reply(reply, max_output_bytes),
        Err(message) => Err(RuntimeError::Guest(truncate(&message, 500))),
    }
}

/// `digest` shortened for logs: `sha256:` and 12 hex digits.
fn short(digest: &str) -> &str {
    &digest[..digest.len().min(19)]
}

/// At most `max` bytes of `s`, cut at a character boundary, with `…` when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_is_shareable() {
        fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
        assert_send_sync::<Runtime>();
    }

    #[test]
    fn truncate_cuts_at_char_boundaries() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcd", 3), "abc…");
        assert_eq!(truncate("aé", 2), "a…");
    }

    #[test]
    fn limits_default_to_the_contract() {
        let limits = RuntimeLimits::default();
        assert_eq!((limits.cpu_ms, limits.memory_bytes, limits.max_output_bytes), (50, 32 * 1024 * 1024, 256 * 1024));
    }
}
