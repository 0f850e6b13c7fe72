//! Bot runtime figures: `cargo bench -p hubbub-host --bench runtime` (needs `bash flows/build.sh`).
//!
//! Prints the Cranelift compile time of `signup.wasm`, a `load` from the precompiled artifact (as after
//! a restart), and a warm step: fresh store, instantiate from the `InstancePre`, `start`, reply
//! conversion, through the async API (blocking-pool hop included).

use std::path::Path;
use std::time::{Duration, Instant};

use hubbub_host::runtime::{Entry, GuestContext, Runtime, RuntimeLimits};

const STEPS: usize = 10_000;

fn main() -> anyhow::Result<()> {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let path = target.join("wasm32-wasip2/release/signup.wasm");
    let wasm = std::fs::read(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e} (run `bash flows/build.sh` first)", path.display()))?;
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    tokio.block_on(run(&wasm))
}

async fn run(wasm: &[u8]) -> anyhow::Result<()> {
    println!("signup.wasm: {} bytes", wasm.len());

    // Cranelift alone, with the runtime's engine settings.
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true).epoch_interruption(true);
    let engine = wasmtime::Engine::new(&config)?;
    let compile = median(3, || {
        let started = Instant::now();
        wasmtime::component::Component::from_binary(&engine, wasm).expect("compiles");
        started.elapsed()
    });
    println!("cranelift compile:              {}", ms(compile));

    // `load` that compiles (plus instantiate_pre, flows(), artifact write), then loads of the artifact
    // by fresh runtimes on the same cache directory.
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    let runtime = Runtime::new(RuntimeLimits::default(), dir.path().into())?;
    let loaded = runtime.load(wasm).await?;
    println!("load, compiling:                {}", ms(started.elapsed()));
    assert!(!loaded.from_cache);
    println!("pooling allocator:              {}", runtime.uses_pooling_allocator());
    let mut restarts = Vec::new();
    for _ in 0..5 {
        let restarted = Runtime::new(RuntimeLimits::default(), dir.path().into())?;
        let started = Instant::now();
        let again = restarted.load(wasm).await?;
        restarts.push(started.elapsed());
        assert!(again.from_cache);
    }
    restarts.sort();
    println!("load from artifact (median/5):  {}", ms(restarts[2]));

    let ctx = GuestContext { partner: "acme".into(), bot: "bench".into(), phone: "+31612345678".into() };
    let step = || runtime.start(&loaded.digest, "bench", Entry::Flow("signup".into()), ctx.clone());
    for _ in 0..200 {
        step().await?;
    }
    let mut times = Vec::with_capacity(STEPS);
    for _ in 0..STEPS {
        let started = Instant::now();
        step().await?;
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "warm step over {STEPS}:            p50 {}  p99 {}  max {}",
        us(times[STEPS / 2]),
        us(times[STEPS * 99 / 100]),
        us(times[STEPS - 1])
    );

    // Throughput with 4 concurrent callers.
    let started = Instant::now();
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let runtime = runtime.clone();
            let (digest, ctx) = (loaded.digest.clone(), ctx.clone());
            tokio::spawn(async move {
                for _ in 0..STEPS / 4 {
                    let entry = Entry::Flow("signup".into());
                    runtime.start(&digest, "bench", entry, ctx.clone()).await.expect("step");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await?;
    }
    let rate = STEPS as f64 / started.elapsed().as_secs_f64();
    println!("4 concurrent callers:           {rate:.0} steps/s");
    Ok(())
}

fn median(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..runs).map(|_| f()).collect();
    times.sort();
    times[runs / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
