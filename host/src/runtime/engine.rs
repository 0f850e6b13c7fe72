//! The wasmtime `Engine`: configuration, the pooling allocator (with a fallback to on-demand allocation
//! when the pool's address space cannot be reserved) and the epoch ticker that interrupts guests.

use std::time::Duration;

use wasmtime::{Config, Engine, EngineWeak, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances; a call's deadline is counted in these ticks.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Guest calls running at once (each holds one pooled component instance). Further calls wait for a
/// slot without blocking the async runtime.
pub(super) const MAX_CONCURRENT_CALLS: u32 = 64;

/// Core instances, tables and linear memories one component may hold. Rust components use a handful
/// of core instances; interpreters built with `componentize-py` use more than ten.
pub(super) const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 32;
pub(super) const MAX_TABLES_PER_COMPONENT: u32 = 32;
pub(super) const MAX_MEMORIES_PER_COMPONENT: u32 = 4;

/// Elements of one table (the pool reserves room for this many per table slot).
pub(super) const MAX_TABLE_ELEMENTS: usize = 20_000;

/// Bytes of each pooled linear memory (and table) whose pages a slot keeps between uses, reset to their
/// initial contents in place rather than released. Interpreter guests (componentize-py, ComponentizeJS)
/// start from a snapshot of several MiB and touch much of it on every call: released pages fault in again
/// on the next instantiation. Only pages a guest dirtied stay resident (found with Linux's PAGEMAP_SCAN;
/// without it wasmtime would `memset` the whole range on every call, so then nothing is kept).
const KEEP_RESIDENT_MEMORY: usize = 8 << 20;
const KEEP_RESIDENT_TABLE: usize = 1 << 20;

/// Builds the engine, preferring the pooling allocator (keeping dirtied pages resident where PAGEMAP_SCAN
/// is available). Returns whether pooling is in use.
pub(super) fn build() -> anyhow::Result<(Engine, bool)> {
    for keep_resident in [true, false] {
        let mut config = base_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling_config(keep_resident)));
        match Engine::new(&config) {
            Ok(engine) => return Ok((engine, true)),
            Err(error) if keep_resident => {
                tracing::info!(error = %error, "pooled pages are released between uses (no PAGEMAP_SCAN)")
            }
            Err(error) => tracing::warn!(error = %error, "pooling allocator unavailable, using on-demand allocation"),
        }
    }
    Ok((Engine::new(&base_config())?, false))
}

/// Settings shared by both allocation strategies. A precompiled artifact only loads into an engine
/// with compatible settings, which wasmtime checks on deserialisation.
pub(super) fn base_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config
}

fn pooling_config(keep_resident: bool) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(MAX_CONCURRENT_CALLS)
        .total_core_instances(MAX_CONCURRENT_CALLS * 16)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .total_memories(MAX_CONCURRENT_CALLS * 2)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .total_tables(MAX_CONCURRENT_CALLS * 16)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .table_elements(MAX_TABLE_ELEMENTS);
    if keep_resident {
        pool.pagemap_scan(wasmtime::Enabled::Yes)
            .linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
            .table_keep_resident(KEEP_RESIDENT_TABLE);
    }
    // Linear memories keep wasmtime's default 4 GiB slot (bounds checks elided); the per-store limiter
    // enforces the real memory budget.
    pool
}

/// Starts the thread that advances the epoch every [`EPOCH_TICK`]. It ends by itself once the engine
/// is dropped.
pub(super) fn spawn_epoch_ticker(engine: EngineWeak) -> anyhow::Result<()> {
    std::thread::Builder::new().name("hubbub-epoch".into()).spawn(move || {
        loop {
            std::thread::sleep(EPOCH_TICK);
            match engine.upgrade() {
                Some(engine) => engine.increment_epoch(),
                None => break,
            }
        }
    })?;
    Ok(())
}

/// Epoch ticks covering `budget` (at least one).
pub(super) fn ticks_for(budget: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos();
    (budget.as_nanos().div_ceil(tick) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_budget() {
        assert_eq!(ticks_for(Duration::from_millis(50)), 5);
        assert_eq!(ticks_for(Duration::from_millis(55)), 6);
        assert_eq!(ticks_for(Duration::from_micros(1)), 1);
        assert_eq!(ticks_for(Duration::ZERO), 1);
    }
}
