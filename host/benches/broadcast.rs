//! Broadcast fan-out benchmark (run on demand: `cargo bench -p hubbub-host --bench broadcast`).
//!
//! Links N claimed users (default 100,000; `HUBBUB_BENCH_RECIPIENTS`) to a partner, accepts one broadcast
//! and times its fan-out until every recipient has a message and a delivery job. Prints the time,
//! messages per second, and the process's peak memory before and after the fan-out (flat memory means
//! the audience is streamed in batches). SQLite by default; `HUBBUB_BENCH_DATABASE_URL=postgres://…`.

use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use hubbub_host::clock::{Clock, SystemClock};
use hubbub_host::config::Config;
use hubbub_host::store::{broadcasts, partners};
use serde_json::json;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

/// Peak resident memory of this process so far, in MiB (Linux).
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: i64 = std::env::var("HUBBUB_BENCH_RECIPIENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let url = std::env::var("HUBBUB_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display()));
    let mut config = Args::try_parse_from(["bench"])?.config;
    config.database_url = url.clone();
    config.dev = true;
    let state = hubbub_host::prepare(config, Arc::new(SystemClock::default())).await?;
    let now = SystemClock::default().now_ms();
    let code = format!("bench{}", std::process::id());
    let partner =
        partners::insert_partner(&state.db, &code, "Bench", false, &format!("h{code}"), "sk_bench", now).await?;

    let setup = Instant::now();
    sqlx::query(
        "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < $1) \
         INSERT INTO accounts (phone, state, claimed_at, created_at) SELECT '+1777' || (1000000 + n), 'claimed', $2, $2 FROM s",
    )
    .bind(n)
    .bind(now)
    .execute(state.db.writer())
    .await?;
    sqlx::query(
        "INSERT INTO account_links (account_id, partner_id, fields, linked_at) SELECT id, $1, '{}', $2 FROM accounts",
    )
    .bind(partner.id)
    .bind(now)
    .execute(state.db.writer())
    .await?;
    let before = peak_mib();
    println!("setup: {n} linked, claimed users in {:.1} s; peak memory {before:.0} MiB", setup.elapsed().as_secs_f64());

    let new = broadcasts::NewBroadcast {
        partner_id: partner.id,
        audience: "linked",
        content_type: "text".into(),
        body: Some("Our shop opens an hour early tomorrow".into()),
        rendered_body: None,
        template_code: None,
        lang: None,
        priority: "notification".into(),
        content: json!({}),
        media: None,
        send_at: None,
    };
    let started = Instant::now();
    let mut b = broadcasts::insert(&state.db, &new, SystemClock::default().now_ms()).await?;
    broadcasts::set_total(&state.db, &b).await?;
    while b.state != "completed" {
        b = broadcasts::fan_out_batch(
            &state.db,
            &b,
            hubbub_host::broadcasts::BATCH,
            60_000,
            SystemClock::default().now_ms(),
        )
        .await?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = peak_mib();
    let backend = if url.starts_with("postgres") { "PostgreSQL" } else { "SQLite" };
    println!(
        "broadcast on {backend}: {} recipients fanned out in {elapsed:.2} s ({:.0} messages/s)",
        b.sent,
        b.sent as f64 / elapsed
    );
    println!("  peak memory: {before:.0} MiB before the fan-out, {after:.0} MiB after (+{:.0} MiB)", after - before);
    anyhow::ensure!(b.sent == n, "sent {} of {n}", b.sent);
    Ok(())
}
