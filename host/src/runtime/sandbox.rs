//! One guest call in its own sandbox: a fresh `Store` (WASI with no files, environment, arguments or
//! network; stdout discarded, stderr kept in a small buffer for the log), a memory/table/instance limiter,
//! a time budget, and a capped `log` import. Failures are classified into [`RuntimeError`]s.
//!
//! Time: a call may use `cpu_ms` of CPU time (measured on the thread running it, so waiting for a CPU
//! under load does not count) and at most [`WALL_BUDGET_FACTOR`] times that in wall-clock time. The
//! epoch deadline fires when the CPU budget could be spent; its callback measures and either extends the
//! deadline or interrupts the guest. `wasi:io/poll` is replaced by a version that waits no longer than
//! the wall-clock budget, since the guest could otherwise block its thread for ever in the host (a clock
//! pollable that never fires) where no epoch check happens.

use std::future::Future;
use std::time::{Duration, Instant};

use wasmtime::component::{HasData, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, Trap, UpdateDeadline};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll as async_poll;
use wasmtime_wasi::p2::bindings::sync::io::poll as sync_poll;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{self, Bot, BotPre, Level};
use super::engine::{self, MAX_CORE_INSTANCES_PER_COMPONENT, MAX_MEMORIES_PER_COMPONENT};
use super::engine::{MAX_TABLE_ELEMENTS, MAX_TABLES_PER_COMPONENT};
use super::{RuntimeError, RuntimeLimits, truncate};

/// Wall-clock budget of a call, as a multiple of its CPU budget.
const WALL_BUDGET_FACTOR: u32 = 10;
/// Longest log line kept; the rest is cut.
const MAX_LOG_LINE: usize = 1024;
/// Log lines and bytes one call may emit; later lines are counted and dropped.
const MAX_LOG_LINES_PER_CALL: u32 = 64;
const MAX_LOG_BYTES_PER_CALL: usize = 16 * 1024;
/// Guest stderr kept per call (a panic message), shown in the log when the call fails.
const STDERR_CAPACITY: usize = 2048;

/// Runs guest calls: the engine, the linker with WASI and the `log` import, and the limits.
pub(super) struct Sandbox {
    pub(super) engine: Engine,
    pub(super) linker: Linker<GuestState>,
    limits: RuntimeLimits,
}

impl Sandbox {
    pub(super) fn new(engine: Engine, limits: RuntimeLimits) -> anyhow::Result<Self> {
        let mut linker: Linker<GuestState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        linker.allow_shadowing(true);
        sync_poll::add_to_linker::<_, BoundedPollData>(&mut linker, |state| BoundedPoll {
            table: &mut state.table,
            deadline: state.wall_deadline,
        })?;
        linker.allow_shadowing(false);
        Bot::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        Ok(Sandbox { engine, linker, limits })
    }

    pub(super) fn limits(&self) -> &RuntimeLimits {
        &self.limits
    }

    /// Instantiates `pre` in a fresh store and runs `call` on it, on the current (blocking) thread. The
    /// store, and with it any trapped instance, is dropped before returning.
    pub(super) fn run<R>(
        &self,
        pre: &BotPre<GuestState>,
        bot: &str,
        call: impl FnOnce(&Bot, &mut Store<GuestState>) -> wasmtime::Result<R>,
    ) -> Result<R, RuntimeError> {
        let budget = CallBudget::start(Duration::from_millis(self.limits.cpu_ms));
        let mut store = Store::new(&self.engine, GuestState::new(bot, &self.limits, budget.wall_deadline));
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(engine::ticks_for(budget.cpu));
        store.epoch_deadline_callback(move |_| Ok(budget.on_deadline()));
        let result = pre.instantiate(&mut store).and_then(|instance| call(&instance, &mut store));
        let state = store.data();
        state.log.report_dropped(bot);
        result.map_err(|error| state.classify(error))
    }
}

/// The time a call has: CPU time on its thread, and a wall-clock deadline.
struct CallBudget {
    cpu: Duration,
    /// The thread's CPU time when the call started (None where the platform cannot tell: then wall
    /// time counts as CPU time).
    cpu_at_start: Option<Duration>,
    started: Instant,
    wall_deadline: Instant,
}

impl CallBudget {
    fn start(cpu: Duration) -> Self {
        let started = Instant::now();
        CallBudget { cpu, cpu_at_start: thread_cpu_time(), started, wall_deadline: started + cpu * WALL_BUDGET_FACTOR }
    }

    /// At an epoch deadline: interrupt the guest once a budget is spent, else wait for the rest.
    fn on_deadline(&self) -> UpdateDeadline {
        let used = match (self.cpu_at_start, thread_cpu_time()) {
            (Some(start), Some(now)) => now.saturating_sub(start),
            _ => self.started.elapsed(),
        };
        if used >= self.cpu || Instant::now() >= self.wall_deadline {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Continue(engine::ticks_for(self.cpu - used))
        }
    }
}

/// CPU time consumed by the current thread.
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    (rc == 0).then(|| Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// `wasi:io/poll` bounded by the call's wall-clock deadline; waiting past it interrupts the guest.
struct BoundedPoll<'a> {
    table: &'a mut ResourceTable,
    deadline: Instant,
}

struct BoundedPollData;

impl HasData for BoundedPollData {
    type Data<'a> = BoundedPoll<'a>;
}

/// Waits for `ready` until `deadline`, on the tokio runtime of the blocking thread.
fn wait_until<T>(deadline: Instant, ready: impl Future<Output = wasmtime::Result<T>>) -> wasmtime::Result<T> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    wasmtime_wasi::runtime::in_tokio(tokio::time::timeout(remaining, ready))
        .unwrap_or_else(|_| Err(Trap::Interrupt.into()))
}

impl sync_poll::Host for BoundedPoll<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        wait_until(self.deadline, async_poll::Host::poll(self.table, pollables))
    }
}

impl sync_poll::HostPollable for BoundedPoll<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        wait_until(self.deadline, async_poll::HostPollable::ready(self.table, pollable))
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        wait_until(self.deadline, async_poll::HostPollable::block(self.table, pollable))
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(self.table, pollable)
    }
}

/// The host state of one store: WASI, the limiter and the log budget of one call.
pub(super) struct GuestState {
    bot: String,
    /// When the call's wall-clock budget ends (bounds waits in `wasi:io/poll`).
    wall_deadline: Instant,
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: GuestLimiter,
    log: LogBudget,
    stderr: MemoryOutputPipe,
}

impl GuestState {
    fn new(bot: &str, limits: &RuntimeLimits, wall_deadline: Instant) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let wasi = WasiCtx::builder()
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let memory_budget = limits.memory_bytes;
        let limits = StoreLimitsBuilder::new()
            .memory_size(limits.memory_bytes)
            .memories(MAX_MEMORIES_PER_COMPONENT as usize)
            .tables(MAX_TABLES_PER_COMPONENT as usize)
            .table_elements(MAX_TABLE_ELEMENTS)
            .instances(MAX_CORE_INSTANCES_PER_COMPONENT as usize)
            .trap_on_grow_failure(true)
            .build();
        GuestState {
            bot: bot.to_string(),
            wall_deadline,
            wasi,
            table: ResourceTable::new(),
            limiter: GuestLimiter::new(limits, memory_budget),
            log: LogBudget::default(),
            stderr,
        }
    }

    /// Which budget a failed call broke. Details go to the log; the error keeps a short message.
    fn classify(&self, error: wasmtime::Error) -> RuntimeError {
        let stderr = self.stderr.contents();
        tracing::debug!(
            bot = %self.bot,
            error = ?error,
            stderr = %String::from_utf8_lossy(&stderr),
            "guest call failed"
        );
        if self.limiter.exceeded_memory {
            return RuntimeError::OutOfMemory;
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => RuntimeError::Timeout,
            Some(trap) => RuntimeError::Trap(truncate(&trap.to_string(), 200)),
            None => RuntimeError::Trap(truncate(&format!("{error}"), 200)),
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// [`StoreLimits`] that also caps the memory of the whole instance (every linear memory of every core
/// instance together, not each on its own), and remembers whether the guest ran out of memory, so the
/// failure is told apart from other traps.
struct GuestLimiter {
    limits: StoreLimits,
    /// Bytes all linear memories of the store may use together.
    memory_budget: usize,
    /// Bytes they use now.
    memory_in_use: usize,
    exceeded_memory: bool,
}

impl GuestLimiter {
    fn new(limits: StoreLimits, memory_budget: usize) -> GuestLimiter {
        GuestLimiter { limits, memory_budget, memory_in_use: 0, exceeded_memory: false }
    }
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.memory_in_use.saturating_sub(current).saturating_add(desired);
        if total > self.memory_budget {
            self.exceeded_memory = true;
            return Ok(false);
        }
        let allowed = self.limits.memory_growing(current, desired, maximum);
        if matches!(allowed, Ok(true)) {
            self.memory_in_use = total;
        } else {
            self.exceeded_memory = true;
        }
        allowed
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.exceeded_memory = true;
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

/// What one call has logged so far.
#[derive(Default)]
struct LogBudget {
    lines: u32,
    bytes: usize,
    dropped: u32,
}

impl LogBudget {
    /// Takes `len` bytes from the budget; false when the line must be dropped.
    fn admit(&mut self, len: usize) -> bool {
        if self.lines >= MAX_LOG_LINES_PER_CALL || self.bytes + len > MAX_LOG_BYTES_PER_CALL {
            self.dropped += 1;
            return false;
        }
        self.lines += 1;
        self.bytes += len;
        true
    }

    fn report_dropped(&self, bot: &str) {
        if self.dropped > 0 {
            tracing::warn!(target: "hubbub::guest", bot, dropped = self.dropped, "guest log limit reached");
        }
    }
}

// The interfaces that only hold types still need (empty) `Host` impls to be linked.
impl bindings::hubbub::bot::types::Host for GuestState {}
impl bindings::hubbub::bot::menus::Host for GuestState {}
impl bindings::hubbub::bot::forms::Host for GuestState {}
impl bindings::hubbub::bot::payments::Host for GuestState {}
impl bindings::hubbub::bot::replies::Host for GuestState {}

impl bindings::hubbub::bot::log::Host for GuestState {
    fn log(&mut self, level: Level, message: String) {
        let line = truncate(&message, MAX_LOG_LINE);
        if !self.log.admit(line.len()) {
            return;
        }
        // Debug formatting quotes and escapes the line, so a guest cannot forge log lines.
        let bot = self.bot.as_str();
        match level {
            Level::Debug => tracing::debug!(target: "hubbub::guest", bot, line = ?line, "guest log"),
            Level::Info => tracing::info!(target: "hubbub::guest", bot, line = ?line, "guest log"),
            Level::Warn => tracing::warn!(target: "hubbub::guest", bot, line = ?line, "guest log"),
            Level::Error => tracing::error!(target: "hubbub::guest", bot, line = ?line, "guest log"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_budget_caps_lines_and_bytes() {
        let mut budget = LogBudget::default();
        for _ in 0..MAX_LOG_LINES_PER_CALL {
            assert!(budget.admit(10));
        }
        assert!(!budget.admit(1));
        assert_eq!(budget.dropped, 1);

        let mut budget = LogBudget::default();
        assert!(budget.admit(MAX_LOG_BYTES_PER_CALL - 1));
        assert!(!budget.admit(2));
        assert!(budget.admit(1));
    }
}

#[cfg(test)]
mod limiter_tests {
    use super::*;

    #[test]
    fn the_memory_budget_is_for_all_memories_together() {
        let limits = StoreLimitsBuilder::new().memory_size(32 << 20).memories(4).build();
        let mut limiter = GuestLimiter::new(limits, 32 << 20);
        // Two memories of 20 MiB each: each fits the per-memory limit, not the budget together.
        assert!(limiter.memory_growing(0, 20 << 20, None).unwrap());
        assert!(!limiter.memory_growing(0, 20 << 20, None).unwrap());
        assert!(limiter.exceeded_memory);
        // Growing the first memory within the budget still works.
        assert!(limiter.memory_growing(20 << 20, 30 << 20, None).unwrap());
        assert!(!limiter.memory_growing(30 << 20, 33 << 20, None).unwrap());
    }
}
