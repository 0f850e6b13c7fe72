//! A WhatsApp broadcast through a paced number (run on demand: `cargo bench -p hubbub-host --bench paced`).
//!
//! A release host on a fresh database (SQLite by default; `HUBBUB_BENCH_DATABASE_URL=postgres://…`), its
//! WhatsApp provider a fake Cloud API that takes at most 80 messages in any sliding second (past it: error
//! `130429`, as Meta answers), its SMS a fake Twilio that counts what reaches it. N claimed people without the
//! app (default 10,000; `HUBBUB_BENCH_RECIPIENTS`), each with an open WhatsApp window, get one broadcast.
//! Prints how long until the last message was sent on WhatsApp against the floor of N / 80 s, the busiest
//! second at the fake, the throttles it answered, the SMS sent (the goal: none), and the host's CPU time a
//! message.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use hubbub_host::clock::{Clock, SystemClock};
use hubbub_host::config::{Config, SmsProviderKind, WhatsAppProviderKind};
use hubbub_host::store::partners;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

const RATE: usize = 80;

/// The fake providers: what the Cloud API took (arrival times), what it refused, and the SMS that reached Twilio.
#[derive(Default)]
struct Fakes {
    taken: Mutex<Vec<Instant>>,
    window: Mutex<VecDeque<Instant>>,
    throttled: AtomicUsize,
    sms: AtomicUsize,
}

async fn start_fakes(fakes: Arc<Fakes>) -> String {
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let fakes = fakes.clone();
        async move {
            use axum::response::IntoResponse;
            if req.uri().path().contains("/Messages.json") {
                let n = fakes.sms.fetch_add(1, Ordering::SeqCst);
                return axum::Json(json!({"sid": format!("SM{n}")})).into_response();
            }
            let now = Instant::now();
            let over = {
                let mut window = fakes.window.lock().unwrap();
                while window.front().is_some_and(|at| now.duration_since(*at) >= Duration::from_secs(1)) {
                    window.pop_front();
                }
                let over = window.len() >= RATE;
                if !over {
                    window.push_back(now);
                }
                over
            };
            if over {
                fakes.throttled.fetch_add(1, Ordering::SeqCst);
                let error = json!({"error": {"code": 130429, "message": "Rate limit hit"}});
                return (axum::http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
            }
            let n = {
                let mut taken = fakes.taken.lock().unwrap();
                taken.push(now);
                taken.len()
            };
            axum::Json(json!({"messages": [{"id": format!("wamid.{n}")}]})).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// CPU time this process has used, in seconds (Linux: user + system, from /proc).
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: i64 = std::env::var("HUBBUB_BENCH_RECIPIENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = tempfile::tempdir()?;
    let url = std::env::var("HUBBUB_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display()));
    let fakes = Arc::new(Fakes::default());
    let fake_url = start_fakes(fakes.clone()).await;
    let mut config = Args::try_parse_from(["bench"])?.config;
    config.database_url = url.clone();
    config.dev = true;
    config.rate_limit_per_s = 1_000_000;
    config.rate_limit_burst = 1_000_000;
    config.component_cache_dir = dir.path().join("components");
    config.whatsapp_provider = Some(WhatsAppProviderKind::Cloud);
    config.whatsapp_base_url = fake_url.clone();
    config.whatsapp_token = Some("bench-token".into());
    config.whatsapp_phone_number_id = Some("12345".into());
    config.sms_provider = Some(SmsProviderKind::Twilio);
    config.twilio_base_url = fake_url;
    config.twilio_account_sid = Some("AC1".into());
    config.twilio_auth_token = Some("bench-token".into());
    config.twilio_from = Some("+15550001111".into());
    let state = hubbub_host::prepare(config, Arc::new(SystemClock::default())).await?;
    let now = SystemClock::default().now_ms();
    let key = hubbub_host::secrets::new_partner_key();
    let partner = partners::insert_partner(
        &state.db,
        "bench",
        "Bench",
        false,
        &hubbub_host::secrets::digest(&key),
        &hubbub_host::secrets::display_prefix(&key, "sk_"),
        now,
    )
    .await?;

    // N claimed people without the app, linked to the partner, each of whom wrote to the number just now.
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
    sqlx::query(
        "INSERT INTO whatsapp_windows (account, sender, phone, last_inbound_at) SELECT '', '12345', phone, $1 FROM accounts",
    )
    .bind(now)
    .execute(state.db.writer())
    .await?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_state = state.clone();
    let server = tokio::spawn(async move {
        hubbub_host::serve(server_state, listener, async {
            let _ = stopped.await;
        })
        .await
    });

    let cpu_before = cpu_s();
    let started = Instant::now();
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/broadcasts"))
        .bearer_auth(&key)
        .json(&json!({"body": "Our shop opens an hour early tomorrow", "priority": "notification"}))
        .send()
        .await?;
    anyhow::ensure!(r.status() == 202 || r.status() == 201, "broadcast refused: {}", r.status());
    let _: Value = r.json().await?;
    let deadline = started + Duration::from_secs((n as u64 / RATE as u64) * 3 + 60);
    loop {
        let sent: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE state = 'sent' AND channel = 'whatsapp'")
                .fetch_one(state.db.reader())
                .await?;
        if sent >= n {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "only {sent} of {n} sent on WhatsApp");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed().as_secs_f64();
    let cpu = cpu_s() - cpu_before;
    let _ = stop.send(());
    let _ = server.await;

    let taken = fakes.taken.lock().unwrap().clone();
    let mut busiest = 0;
    let mut start = 0;
    for end in 0..taken.len() {
        while taken[end].duration_since(taken[start]) >= Duration::from_secs(1) {
            start += 1;
        }
        busiest = busiest.max(end - start + 1);
    }
    let floor = n as f64 / RATE as f64;
    let backend = if url.starts_with("postgres") { "PostgreSQL" } else { "SQLite" };
    println!(
        "paced broadcast on {backend}: {n} WhatsApp messages at {RATE}/s in {took:.1} s (floor {floor:.1} s, {:+.1} %)",
        (took / floor - 1.0) * 100.0
    );
    println!(
        "  busiest second at the provider: {busiest}; throttled: {}; SMS: {}; host CPU {:.0} us a message",
        fakes.throttled.load(Ordering::SeqCst),
        fakes.sms.load(Ordering::SeqCst),
        cpu / n as f64 * 1e6
    );
    Ok(())
}
