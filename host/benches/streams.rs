//! Live-event benchmark (run on demand: `cargo bench -p hubbub-host --bench streams`; `bash bench/all.sh streams`).
//!
//! Starts a release `hubbub serve` (`HUBBUB_BENCH_BIN`, default `target/release/hubbub`) on a fresh SQLite
//! database (or `HUBBUB_BENCH_DATABASE_URL=postgres://…`), makes N claimed users with a device (default
//! 10,000; `HUBBUB_BENCH_STREAMS`), and prints:
//!
//! 1. rounds (`HUBBUB_BENCH_ROUNDS`, default 5) of sends per second (`POST /messages`, 64 in flight
//!    (`HUBBUB_BENCH_IN_FLIGHT`), 5 s a phase): with no stream open, to the N users and to 1,000 other
//!    claimed users with a device (who never open a stream); then with the N streams open (`GET
//!    /me/events`), to the 1,000 others (the streams stay idle: what holding them open costs the host) and to
//!    the N users (every send goes down one of the streams and marks its message `delivered`); then the
//!    streams close and the next round begins; after the last round, the rates without streams once more
//!    (`HUBBUB_BENCH_WARMUP=K` first runs K pairs of phases with no stream open that count in no share,
//!    to see the rate settle as the database grows before any stream has opened);
//! 2. the host's resident memory as the N idle streams open (round 1's is the figure: later rounds reuse what
//!    the first streams' memory left behind), per stream;
//! 3. each round's rate with the streams open as a share of the mean of its rates without them just before
//!    and just after (the machine's speed swings from minute to minute, and the send rate drifts as the
//!    database grows), and the median share over the rounds; the streams are then opened again;
//! 4. send `201` → the event read by the user's stream, at 1,000 sends/s (`HUBBUB_BENCH_RATE`) over 1,000 of
//!    the users for 10 s: p50, p99, max;
//! 5. one broadcast to all N users: the time until the last stream has its `message.created`;
//! 6. support conversations with the N streams and the partner's console stream (`GET /conversations/events`)
//!    open: 500 users each open a conversation (50/s), then an agent answers each (50/s): `201` → the
//!    console's event, and `201` → the user's event, p50, p99, max.
//!
//! The client runs on the same machine (2 cores here) and takes its share of them: the figures are
//! what one host gives while a load generator runs beside it.
//!
//! `HUBBUB_BENCH_TWO_HOSTS=1` (with a PostgreSQL URL) starts a second host on the same database: the streams
//! are opened on host B and every send goes through host A, so each event crosses hosts (PostgreSQL's
//! `NOTIFY`); memory is host B's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use hubbub_host::clock::{Clock, SystemClock};
use hubbub_host::config::Config;
use hubbub_host::http::auth::UserClaims;
use serde_json::{Value, json};

mod common;
use common::{Host, SECRET_KEY};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

const JWT_SECRET: &str = "bench-streams-jwt-secret-0123456789abcdef";

/// Resident memory of `pid` in KiB (Linux).
fn rss_kib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(f64::NAN)
}

/// CPU seconds (user + system) `pid` has used so far ("self" for this process), Linux.
fn cpu_s(pid: &str) -> f64 {
    stat_cpu_s(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

/// CPU seconds (user + system) `pid`'s threads have used so far: the `tokio` runtime's workers, SQLite's
/// connection threads (`sqlx`'s, one per connection) and the rest, Linux. A thread that ended between two
/// readings takes its time with it (the host's threads live as long as it does).
fn thread_cpu_s(pid: u32) -> [f64; 3] {
    let mut by = [0.0; 3];
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return [f64::NAN; 3] };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let name = stat.split_once('(').and_then(|(_, r)| r.rsplit_once(')')).map_or("", |(n, _)| n);
        let group = match name {
            n if n.starts_with("tokio-rt-worker") => 0,
            n if n.starts_with("sqlx-sqlite") => 1,
            _ => 2,
        };
        by[group] += stat_cpu_s(&stat);
    }
    by
}

/// The CPU seconds (user + system) of a `/proc/…/stat` line.
fn stat_cpu_s(stat: &str) -> f64 {
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// When each marked body was read by a stream: body → instant.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// Splits a stream's bytes into its events (each ends with a blank line), keeping a partial one for the next
/// chunk. Bytes, not text: the readers run on the host's two cores, so each costs them as little as it can.
#[derive(Default)]
struct Events {
    buffer: Vec<u8>,
}

impl Events {
    /// Adds `chunk`, and calls `each` with every event it completes.
    fn feed(&mut self, chunk: &[u8], mut each: impl FnMut(&[u8])) {
        self.buffer.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(end) = self.buffer[start..].windows(2).position(|w| w == b"\n\n") {
            each(&self.buffer[start..start + end]);
            start += end + 2;
        }
        self.buffer.drain(..start);
    }
}

/// Reads one stream (a user's, or the partner's console's): every marked body ([`marked_body`]) is recorded
/// once (the first stream to read it, for the latency), and the broadcast's counted.
async fn read_stream(mut response: reqwest::Response, seen: Seen, broadcast: Arc<tokio::sync::Semaphore>) {
    let mut events = Events::default();
    while let Ok(Some(chunk)) = response.chunk().await {
        events.feed(&chunk, |event| match marked_body(event).as_deref() {
            Some("bench:broadcast") => broadcast.add_permits(1),
            Some(body) => {
                seen.lock().unwrap().entry(body.to_string()).or_insert_with(Instant::now);
            }
            None => {}
        });
    }
}

/// What the readers take of a hub message: its body (the rest of the record is skipped unread).
#[derive(serde::Deserialize)]
struct Hub<'a> {
    #[serde(borrow)]
    body: Option<std::borrow::Cow<'a, str>>,
}

/// What the readers take of a `conversation.message` event: its message.
#[derive(serde::Deserialize)]
struct InConversation<'a> {
    #[serde(borrow)]
    message: Hub<'a>,
}

/// The body of a `message.created` (a hub message) or `conversation.message` (its `message`) event, when
/// it is marked (starts with `bench:`).
fn marked_body(event: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let (mut kind, mut data) = (None, None);
    for line in event.split(|b| *b == b'\n') {
        if let Some(k) = line.strip_prefix(b"event:") {
            kind = Some(k.trim_ascii());
        } else if let Some(d) = line.strip_prefix(b"data:") {
            data = Some(d);
        }
    }
    let body = match kind? {
        b"message.created" => serde_json::from_slice::<Hub>(data?).ok()?.body?,
        b"conversation.message" => serde_json::from_slice::<InConversation>(data?).ok()?.message.body?,
        _ => return None,
    };
    body.starts_with("bench:").then_some(body)
}

/// Latencies (ms, sorted) from each answered request to its event being read.
fn latencies(answered: &Mutex<HashMap<String, Instant>>, seen: &Mutex<HashMap<String, Instant>>) -> Vec<f64> {
    let (answered, seen) = (answered.lock().unwrap(), seen.lock().unwrap());
    let mut all: Vec<f64> = answered
        .iter()
        .filter_map(|(body, at)| seen.get(body).map(|read| read.saturating_duration_since(*at).as_secs_f64() * 1000.0))
        .collect();
    all.sort_by(|a, b| a.total_cmp(b));
    all
}

/// Waits (at most 30 s) until every answered body was seen.
async fn until_seen(answered: &Mutex<HashMap<String, Instant>>, seen: &Mutex<HashMap<String, Instant>>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let missing = {
            let (answered, seen) = (answered.lock().unwrap(), seen.lock().unwrap());
            answered.keys().any(|b| !seen.contains_key(b))
        };
        if !missing {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Opens a stream for each of `phones` (a ticket with the user's token, then `GET /me/events`), 100 at a time,
/// each read by a task of its own ([`read_stream`]); answers those tasks (aborting one closes its stream).
async fn open_streams(
    client: &reqwest::Client,
    stream_client: &reqwest::Client,
    base: &str,
    phones: &[String],
    token: &dyn Fn(&str) -> String,
    seen: &Seen,
    broadcast: &Arc<tokio::sync::Semaphore>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let mut readers = Vec::with_capacity(phones.len());
    for chunk in phones.chunks(100) {
        let mut opens = tokio::task::JoinSet::new();
        for phone in chunk {
            let (client, stream_client, base, token) =
                (client.clone(), stream_client.clone(), base.to_string(), token(phone));
            opens.spawn(async move {
                let t = client.post(format!("{base}/api/v1/me/events/ticket")).bearer_auth(&token).send().await?;
                let ticket = t.json::<Value>().await?["ticket"].as_str().unwrap_or_default().to_string();
                let r = stream_client.get(format!("{base}/api/v1/me/events?ticket={ticket}")).send().await?;
                anyhow::ensure!(r.status() == 200, "stream: {}", r.status());
                Ok::<_, anyhow::Error>(r)
            });
        }
        while let Some(r) = opens.join_next().await {
            readers.push(tokio::spawn(read_stream(r??, seen.clone(), broadcast.clone())));
        }
    }
    Ok(readers)
}

/// Sends in flight at once in the send-rate phases (`HUBBUB_BENCH_IN_FLIGHT`, default 64).
fn in_flight() -> usize {
    std::env::var("HUBBUB_BENCH_IN_FLIGHT").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(64)
}

/// The send-rate phases ([`send_rate`], 5 s each): each printed with the time its delivery took to drain,
/// the CPU the host and this load generator spent on it, and the host's CPU a send by its threads (the
/// runtime's workers, SQLite's connection threads, the rest).
struct Phases<'a> {
    client: &'a reqwest::Client,
    base: &'a str,
    key: &'a str,
    db: &'a hubbub_host::store::Db,
    pid: u32,
}

impl Phases<'_> {
    /// One phase of sends to `users` (`to` names them); answers its rate.
    async fn run(&self, to: &str, users: &[String]) -> anyhow::Result<f64> {
        let cpu = || (cpu_s(&self.pid.to_string()), cpu_s("self"), thread_cpu_s(self.pid));
        let (host, us, threads) = cpu();
        let rate = send_rate(self.client, self.base, self.key, users, 5).await;
        let (host2, us2, threads2) = cpu();
        let drained = drain(self.db).await?;
        // The host's CPU a send, by its threads: where a phase's cost goes, whatever the machine's speed did
        // to its rate.
        let per_send = |s: f64| s * 1e6 / (rate * 5.0);
        let [runtime, sqlite, other] = [0, 1, 2].map(|i| per_send(threads2[i] - threads[i]));
        println!(
            "  to {to}: {rate:.0}/s (host {:.1} CPU-s, load generator {:.1} CPU-s; delivered {drained:.1} s after; \
             host {:.0} µs a send: runtime {runtime:.0}, SQLite {sqlite:.0}, other {other:.0})",
            host2 - host,
            us2 - us,
            per_send(host2 - host),
        );
        Ok(rate)
    }
}

/// Sends text messages for `seconds` with [`in_flight`] concurrent requests; answers sends per second.
async fn send_rate(client: &reqwest::Client, base: &str, key: &str, phones: &[String], seconds: u64) -> f64 {
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    let in_flight = in_flight();
    for worker in 0..in_flight {
        let (client, base, key, done) = (client.clone(), base.to_string(), key.to_string(), done.clone());
        let phones = phones.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut i = worker;
            while Instant::now() < until {
                let phone = &phones[i % phones.len()];
                let r = client
                    .post(format!("{base}/api/v1/messages"))
                    .bearer_auth(&key)
                    .json(&json!({"phone": phone, "body": "load"}))
                    .send()
                    .await;
                if r.is_ok_and(|r| r.status() == 201) {
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                i += in_flight;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    done.load(std::sync::atomic::Ordering::Relaxed) as f64 / seconds as f64
}

/// The host under test: stopped however the bench ends (an error included).

/// Waits until the delivery queue is empty (what a run accepted is delivered before the next one starts).
async fn drain(db: &hubbub_host::store::Db) -> anyhow::Result<f64> {
    let started = Instant::now();
    for _ in 0..1200 {
        let queued: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE state = 'queued'").fetch_one(db.reader()).await?;
        if queued == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(started.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("HUBBUB_BENCH_STREAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = tempfile::tempdir()?;
    let host = Host::new(
        dir.path(),
        &[("HUBBUB_JWT_SECRET", JWT_SECRET.into()), ("HUBBUB_MAX_STREAMS", (n + 1000).to_string())],
    );
    let (url, base, port) = (host.url.clone(), host.base.clone(), host.port);
    let key = host.partner("bench")?;
    let server = host.serve(port)?;
    let two_hosts = std::env::var("HUBBUB_BENCH_TWO_HOSTS").is_ok_and(|v| v == "1");
    // Host B: the streams' host (host A itself when there is one host).
    let stream_base = if two_hosts { format!("http://127.0.0.1:{}", port + 1) } else { base.clone() };
    let second = if two_hosts { Some(host.serve(port + 1)?) } else { None };
    let pid = second.as_ref().map_or(server.0.id(), |s| s.0.id());
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    for h in [&base, &stream_base] {
        common::ready(&client, h).await;
    }
    if two_hosts {
        println!("two hosts on one database: streams on host B ({stream_base}), sends through host A ({base})");
    }

    // N users linked to the partner, claimed, each with a device: their messages go to the hub.
    let started = Instant::now();
    let mut config = Args::try_parse_from(["bench"])?.config;
    config.database_url = url.clone();
    config.secret_key = Some(SECRET_KEY.into());
    let db = hubbub_host::store::Db::open(&config, 4).await?;
    let phones: Vec<String> = (0..n).map(|i| format!("+1555{:07}", 1_000_000 + i)).collect();
    // Users like them who never open a stream: sends to them leave the streams idle.
    let quiet: Vec<String> = (0..1000).map(|i| format!("+1556{:07}", 1_000_000 + i)).collect();
    for chunk in phones.chunks(200).chain(quiet.chunks(200)) {
        let mut links = tokio::task::JoinSet::new();
        for phone in chunk {
            let link = client
                .post(format!("{base}/api/v1/accounts/link"))
                .bearer_auth(&key)
                .json(&json!({"phone": phone, "invite": false}))
                .send();
            links.spawn(link);
        }
        while let Some(r) = links.join_next().await {
            anyhow::ensure!(r??.status().is_success(), "linking failed");
        }
    }
    let now = SystemClock::default().now_ms();
    for phone in phones.iter().chain(&quiet) {
        let claimed = |p: &str, at| hubbub_host::events::account_claimed(p, phone, at);
        hubbub_host::store::accounts::sign_in(&db, phone, &format!("dev-{phone}"), Some("web"), now, claimed).await?;
    }
    println!(
        "setup: {n} claimed users with a device (and {} who open no stream) in {:.1} s",
        quiet.len(),
        started.elapsed().as_secs_f64()
    );

    // Rounds of the send-rate phases: with no stream open, then with the N streams open, then closed again.
    // The machine's speed swings from minute to minute (a phase run twice a minute apart has given 60 % to
    // 100 % of itself), so each phase with streams is set against the phases without them just before and
    // just after it, round by round, and the median of the rounds is the figure.
    let rounds: usize = std::env::var("HUBBUB_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let seen: Seen = Arc::default();
    let broadcast = Arc::new(tokio::sync::Semaphore::new(0));
    let exp = (now / 1000) + 3600;
    let key_enc = jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes());
    let stream_client = reqwest::Client::builder().pool_max_idle_per_host(0).build()?;
    let token = |phone: &str| {
        let claims = UserClaims { sub: phone.to_string(), dev: Some(format!("dev-{phone}")), iat: now / 1000, exp };
        jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key_enc).unwrap()
    };
    let phases = Phases { client: &client, base: &base, key: &key, db: &db, pid };
    let (others, every) = (format!("the {} others", quiet.len()), format!("the {n} users"));
    let (mut without, mut quiet_without, mut with, mut quiet_with) = (vec![], vec![], vec![], vec![]);
    println!("sends per second, {} in flight, 5 s a phase, {rounds} rounds:", in_flight());
    // Phases without streams first that count in no share (none by default: the figure's method is unchanged).
    let warmup: usize = std::env::var("HUBBUB_BENCH_WARMUP").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for w in 1..=warmup {
        println!("warm-up {w}: no stream open");
        phases.run(&every, &phones).await?;
        phases.run(&others, &quiet).await?;
    }
    for round in 1..=rounds {
        println!("round {round}: no stream open");
        without.push(phases.run(&every, &phones).await?);
        quiet_without.push(phases.run(&others, &quiet).await?);
        let (before, started) = (rss_kib(pid), Instant::now());
        let readers = open_streams(&client, &stream_client, &stream_base, &phones, &token, &seen, &broadcast).await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = rss_kib(pid);
        println!(
            "round {round}: {n} idle streams opened in {:.1} s: host resident memory {:.0} MiB → {:.0} MiB, {:.1} KiB per stream",
            started.elapsed().as_secs_f64(),
            before / 1024.0,
            after / 1024.0,
            (after - before) / n as f64
        );
        quiet_with.push(phases.run(&format!("{others} (the streams idle)"), &quiet).await?);
        with.push(phases.run(&format!("{every} (each send down a stream)"), &phones).await?);
        readers.iter().for_each(tokio::task::JoinHandle::abort);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    println!("the streams closed");
    without.push(phases.run(&every, &phones).await?);
    quiet_without.push(phases.run(&others, &quiet).await?);
    // Each round's share: the rate with the streams open against the mean of the rates without, just before
    // the streams opened and just after they closed.
    let shares = |open: &[f64], closed: &[f64]| -> Vec<f64> {
        open.iter().enumerate().map(|(r, rate)| 200.0 * rate / (closed[r] + closed[r + 1])).collect()
    };
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        // Of an even count, the mean of the two in the middle (not the upper one).
        (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0
    };
    let listed = |v: &[f64]| v.iter().map(|s| format!("{s:.0} %")).collect::<Vec<_>>().join(", ");
    let (idle, down) = (shares(&quiet_with, &quiet_without), shares(&with, &without));
    println!(
        "with {n} streams open, the rate against the mean of the rates without just before and just after, by round: \
         idle streams {}, median {:.0} %; every send down a stream {}, median {:.0} %",
        listed(&idle),
        median(&idle),
        listed(&down),
        median(&down)
    );
    let started = Instant::now();
    let opening = open_streams(&client, &stream_client, &stream_base, &phones, &token, &seen, &broadcast);
    let _readers = opening.await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!("{n} streams opened again in {:.1} s", started.elapsed().as_secs_f64());

    // Latency: 1,000 sends/s (or HUBBUB_BENCH_RATE) over 1,000 users, each body marked; 201 → read by the stream.
    let users = &phones[..n.min(1000)];
    let answered: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let rate: u64 = std::env::var("HUBBUB_BENCH_RATE").ok().and_then(|v| v.parse().ok()).unwrap_or(1000).max(1);
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / rate as u32);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    let total = (rate * 10) as usize;
    let started = Instant::now();
    for i in 0..total {
        ticker.tick().await;
        let (client, base, key, answered) = (client.clone(), base.clone(), key.clone(), answered.clone());
        let phone = users[i % users.len()].clone();
        tasks.push(tokio::spawn(async move {
            let body = format!("bench:{i}");
            let r = client
                .post(format!("{base}/api/v1/messages"))
                .bearer_auth(&key)
                .json(&json!({"phone": phone, "body": body}))
                .send()
                .await;
            if r.is_ok_and(|r| r.status() == 201) {
                answered.lock().unwrap().insert(body, Instant::now());
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let offered = total as f64 / started.elapsed().as_secs_f64();
    until_seen(&answered, &seen).await;
    let sent = latencies(&answered, &seen);
    println!(
        "send 201 → event read, {total} sends at {offered:.0}/s over {} users: {} of {} read; p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        users.len(),
        sent.len(),
        answered.lock().unwrap().len(),
        percentile(&sent, 0.5),
        percentile(&sent, 0.99),
        sent.last().copied().unwrap_or(f64::NAN)
    );

    // A broadcast to every user, each with a stream open: until the last stream has it.
    let started = Instant::now();
    let r = client
        .post(format!("{base}/api/v1/broadcasts"))
        .bearer_auth(&key)
        .json(&json!({"body": "bench:broadcast"}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "broadcast: {}", r.status());
    let all = tokio::time::timeout(Duration::from_secs(300), broadcast.acquire_many(n as u32)).await;
    match all {
        Ok(_) => println!(
            "broadcast to {n} connected users: the last had its event after {:.2} s",
            started.elapsed().as_secs_f64()
        ),
        Err(_) => {
            println!("broadcast to {n} connected users: {} of {n} had it after 300 s", broadcast.available_permits())
        }
    }
    // Support conversations, with every stream open and the console's stream (the partner key) too: users
    // write new conversations, then an agent answers each, 50 a second, 500 of each.
    let console_seen: Seen = Arc::default();
    let console =
        stream_client.get(format!("{stream_base}/api/v1/conversations/events")).bearer_auth(&key).send().await?;
    anyhow::ensure!(console.status() == 200, "console stream: {}", console.status());
    tokio::spawn(read_stream(console, console_seen.clone(), Arc::new(tokio::sync::Semaphore::new(0))));
    let writers = &phones[..n.min(500)];
    let asked: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let opened: Arc<Mutex<Vec<(usize, i64)>>> = Arc::default();
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    let mut tasks = Vec::new();
    for (i, phone) in writers.iter().enumerate() {
        ticker.tick().await;
        let claims = UserClaims { sub: phone.clone(), dev: Some(format!("dev-{phone}")), iat: now / 1000, exp };
        let token = jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key_enc).unwrap();
        let (client, base, asked, opened) = (client.clone(), base.clone(), asked.clone(), opened.clone());
        tasks.push(tokio::spawn(async move {
            let body = format!("bench:ask:{i}");
            let r = client
                .post(format!("{base}/api/v1/me/conversations"))
                .bearer_auth(&token)
                .json(&json!({"partner": "bench", "body": body}))
                .send()
                .await;
            if let Ok(r) = r
                && r.status() == 201
            {
                asked.lock().unwrap().insert(body, Instant::now());
                if let Ok(c) = r.json::<Value>().await {
                    opened.lock().unwrap().push((i, c["conversation_id"].as_i64().unwrap_or_default()));
                }
            }
        }));
    }
    for t in tasks.drain(..) {
        let _ = t.await;
    }
    until_seen(&asked, &console_seen).await;
    let to_console = latencies(&asked, &console_seen);
    let replied: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let conversations = opened.lock().unwrap().clone();
    for (i, id) in conversations {
        ticker.tick().await;
        let (client, base, key, replied) = (client.clone(), base.clone(), key.clone(), replied.clone());
        tasks.push(tokio::spawn(async move {
            let body = format!("bench:reply:{i}");
            let r = client
                .post(format!("{base}/api/v1/conversations/{id}/messages"))
                .bearer_auth(&key)
                .json(&json!({"body": body}))
                .send()
                .await;
            if r.is_ok_and(|r| r.status() == 201) {
                replied.lock().unwrap().insert(body, Instant::now());
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    until_seen(&replied, &seen).await;
    let to_user = latencies(&replied, &seen);
    for (what, all, of) in [
        ("a user's new conversation 201 → the console's stream", &to_console, asked.lock().unwrap().len()),
        ("an agent's reply 201 → the user's stream", &to_user, replied.lock().unwrap().len()),
    ] {
        println!(
            "{what}, 50/s with {n} streams open: {} of {of} read; p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            all.len(),
            percentile(all, 0.5),
            percentile(all, 0.99),
            all.last().copied().unwrap_or(f64::NAN)
        );
    }
    drop(second);
    drop(server);
    Ok(())
}
