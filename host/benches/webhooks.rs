//! Webhook delivery benchmark (run on demand: `cargo bench -p hubbub-host --bench webhooks`).
//!
//! Enqueues 10,000 events through the transactional outbox while the dispatcher runs, delivers them to a
//! fast local receiver, and prints delivered events per second and the end-to-end latency (enqueue to
//! receipt, p50/p99). SQLite by default; `HUBBUB_BENCH_DATABASE_URL=postgres://…` for PostgreSQL.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use hubbub_host::clock::{Clock, SystemClock};
use hubbub_host::config::Config;
use hubbub_host::store::{outbox, partners};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

const EVENTS: usize = 10_000;
const PER_TRANSACTION: usize = 100;

fn micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = std::env::var("HUBBUB_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display()));
    let mut config = Args::try_parse_from(["bench"])?.config;
    config.database_url = url.clone();
    config.dev = true;
    config.webhook_poll_ms = 5;
    config.webhook_concurrency = 64;
    let state = hubbub_host::prepare(config, Arc::new(SystemClock::default())).await?;

    // A receiver that answers 200 at once and notes the latency of each event.
    let latencies = Arc::new(Mutex::new(Vec::<i64>::with_capacity(EVENTS)));
    let seen = latencies.clone();
    let receiver = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let seen = seen.clone();
        async move {
            let at = micros();
            let payload: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Some(t) = payload["t"].as_i64() {
                seen.lock().unwrap().push(at - t);
            }
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let code = format!("bench{}", std::process::id());
    let partner = partners::insert_partner(
        &state.db,
        &code,
        "Bench",
        false,
        &format!("h{code}"),
        "sk_bench",
        SystemClock::default().now_ms(),
    )
    .await?;
    partners::set_webhook(&state.db, partner.id, Some(&hook), Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")).await?;

    let stop = CancellationToken::new();
    let dispatcher = tokio::spawn(hubbub_host::webhooks::run_dispatcher(state.webhooks.clone(), stop.clone()));
    let started = Instant::now();
    for batch in 0..EVENTS / PER_TRANSACTION {
        let mut tx = state.db.writer().begin().await?;
        for i in 0..PER_TRANSACTION {
            let n = batch * PER_TRANSACTION + i;
            // Stamped before the commit, so the figure slightly overstates the latency.
            let payload = json!({"event": "message.status", "n": n, "t": micros()});
            let key = format!("message:{n}");
            outbox::enqueue(
                &mut tx,
                outbox::Target::Partner(partner.id),
                "message.status",
                &payload,
                &key,
                SystemClock::default().now_ms(),
            )
            .await?;
        }
        tx.commit().await?;
    }
    let enqueued = started.elapsed();
    while latencies.lock().unwrap().len() < EVENTS {
        if started.elapsed() > Duration::from_secs(300) {
            anyhow::bail!("only {} of {EVENTS} events arrived", latencies.lock().unwrap().len());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    stop.cancel();
    let _ = dispatcher.await;

    let mut l = latencies.lock().unwrap().clone();
    l.sort_unstable();
    let pct = |p: f64| l[((l.len() as f64 * p) as usize).min(l.len() - 1)] as f64 / 1000.0;
    let backend = if url.starts_with("postgres") { "PostgreSQL" } else { "SQLite" };
    println!(
        "webhooks on {backend}: {EVENTS} events enqueued in {:.2} s, all delivered in {:.2} s",
        enqueued.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!("  throughput: {:.0} events/s", EVENTS as f64 / elapsed.as_secs_f64());
    println!("  latency enqueue -> receipt: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms", pct(0.50), pct(0.99), pct(1.0));
    Ok(())
}
