//! Inbound WhatsApp → bot reply benchmark (run on demand: `cargo bench -p hubbub-host --bench inbound`;
//! `bash bench/all.sh inbound`).
//!
//! A release `hubbub serve` (`HUBBUB_BENCH_BIN`, default `target/release/hubbub`; SQLite by default, or
//! `HUBBUB_BENCH_DATABASE_URL=postgres://…`) with the WhatsApp Cloud API pointed at a fake Graph API in this
//! process, and the sample chat bot as the partner's entry bot on WhatsApp. `HUBBUB_BENCH_PHONES` people
//! (default 2,500), each linked to the partner, write to it at `HUBBUB_BENCH_RATE` messages a second
//! (default 500), as signed Cloud API webhooks over HTTP: first "Hi" (a session starts: the bot's greeting and
//! menu), then a tap on the menu's "Opening hours" button (the next step of that session). For each message
//! the bench takes the time from sending the webhook to the fake Graph API receiving the bot's first reply
//! message for that person, and prints p50, p99 and max per round: what a person on WhatsApp waits for,
//! less WhatsApp's own delivery.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::Host;

const APP_SECRET: &str = "bench-app-secret";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
}

/// What the fake Graph API received: for each person (digits), when each message arrived.
type Arrivals = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let phones: usize = std::env::var("HUBBUB_BENCH_PHONES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_500);
    let rate: f64 = std::env::var("HUBBUB_BENCH_RATE").ok().and_then(|v| v.parse().ok()).unwrap_or(500.0);

    // The fake Graph API: answers each message at once with a message id, noting when it came and for whom.
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    let graph = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let seen = seen.clone();
        async move {
            let at = Instant::now();
            let message: Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Some(to) = message["to"].as_str() {
                seen.lock().unwrap().entry(to.to_string()).or_default().push(at);
            }
            axum::Json(json!({"messaging_product": "whatsapp", "messages": [{"id": "wamid.out"}]}))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let graph_url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, graph).await });

    let dir = tempfile::tempdir()?;
    let host = Host::new(
        dir.path(),
        &[
            ("HUBBUB_WHATSAPP_PROVIDER", "cloud".into()),
            ("HUBBUB_WHATSAPP_BASE_URL", graph_url),
            ("HUBBUB_WHATSAPP_TOKEN", "bench-token".into()),
            ("HUBBUB_WHATSAPP_PHONE_NUMBER_ID", "12345".into()),
            ("HUBBUB_WHATSAPP_APP_SECRET", APP_SECRET.into()),
        ],
    );
    let key = host.partner("acme")?;
    let _server = host.serve(host.port)?;
    let client = reqwest::Client::new();
    let base = host.base.clone();
    common::ready(&client, &base).await;
    let api =
        |method: reqwest::Method, path: &str| client.request(method, format!("{base}/api/v1{path}")).bearer_auth(&key);

    // The chat sample as the entry bot on WhatsApp.
    let wasm = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/wasm32-wasip2/release/chat.wasm"))
        .map_err(|e| anyhow::anyhow!("chat.wasm: {e} (run bash flows/build.sh)"))?;
    let bot = json!({"code": "chat", "name": "Assistant", "runtime_mode": "local"});
    anyhow::ensure!(api(reqwest::Method::POST, "/bots").json(&bot).send().await?.status().is_success());
    let upload = api(reqwest::Method::PUT, "/bots/chat/component").header("content-type", "application/wasm");
    anyhow::ensure!(upload.body(wasm).send().await?.status().is_success(), "upload");
    let entry = json!({"channels": ["whatsapp"], "entry": ["whatsapp"]});
    anyhow::ensure!(api(reqwest::Method::PATCH, "/bots/chat").json(&entry).send().await?.status().is_success());

    // The people, linked to the partner.
    let people: Vec<String> = (0..phones).map(|i| format!("1555{:07}", 1_000_000 + i)).collect();
    let started = Instant::now();
    for chunk in people.chunks(64) {
        let mut links = tokio::task::JoinSet::new();
        for digits in chunk {
            let link = api(reqwest::Method::POST, "/accounts/link").json(&json!({"phone": format!("+{digits}")}));
            links.spawn(async move { link.send().await.map(|r| r.status().is_success()) });
        }
        while let Some(linked) = links.join_next().await {
            anyhow::ensure!(linked??, "link");
        }
    }
    println!("setup: {phones} people linked in {:.1} s", started.elapsed().as_secs_f64());
    println!("rate {rate}/s, {phones} messages per round; the time to the bot's first reply at the fake Graph API:");

    for (round, kind) in [("first message (a session starts)", "hi"), ("a reply button (the next step)", "tap")] {
        let expected: HashMap<&str, usize> =
            people.iter().map(|p| (p.as_str(), arrivals.lock().unwrap().get(p).map_or(0, Vec::len))).collect();
        let mut sent_at = HashMap::with_capacity(phones);
        let mut tasks = Vec::with_capacity(phones);
        let round_start = Instant::now();
        for (i, digits) in people.iter().enumerate() {
            let due = round_start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
            let message = match kind {
                "hi" => json!({"type": "text", "text": {"body": "Hi"}}),
                _ => json!({"type": "interactive", "interactive": {"type": "button_reply",
                    "button_reply": {"id": "hours", "title": "Opening hours"}}}),
            };
            let mut message = message;
            message["from"] = json!(digits);
            message["id"] = json!(format!("wamid.{kind}.{digits}"));
            message["timestamp"] = json!(chrono::Utc::now().timestamp().to_string());
            let body =
                json!({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [{"field": "messages",
                "value": {"messaging_product": "whatsapp", "metadata": {"display_phone_number": "15550009999",
                "phone_number_id": "12345"}, "contacts": [{"profile": {"name": "Bench"}, "wa_id": digits}],
                "messages": [message]}}]}]})
                .to_string();
            let signature = hubbub_host::delivery::receipts::meta_signature(APP_SECRET, body.as_bytes());
            sent_at.insert(digits.clone(), Instant::now());
            let request = client
                .post(format!("{base}/api/v1/providers/whatsapp/webhook"))
                .header("content-type", "application/json")
                .header("x-hub-signature-256", signature)
                .body(body);
            tasks.push(tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) }));
        }
        let sending = round_start.elapsed().as_secs_f64();
        for t in tasks {
            let status = t.await??;
            anyhow::ensure!(status == 200, "webhook answered {status}");
        }
        // Every person's reply, or 60 s.
        let deadline = Instant::now() + Duration::from_secs(60);
        let latencies = loop {
            let got = arrivals.lock().unwrap();
            let answered: Vec<f64> = people
                .iter()
                .filter_map(|p| {
                    let first = got.get(p)?.get(expected[p.as_str()])?;
                    Some(first.duration_since(sent_at[p]).as_secs_f64() * 1000.0)
                })
                .collect();
            if answered.len() == phones || Instant::now() > deadline {
                break answered;
            }
            drop(got);
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let mut sorted = latencies.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "{round}: {} of {phones} answered (sent at {:.0}/s), p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            sorted.len(),
            phones as f64 / sending,
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.99),
            sorted.last().copied().unwrap_or(f64::NAN)
        );
    }
    Ok(())
}
