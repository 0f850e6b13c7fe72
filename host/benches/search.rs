//! Conversation search benchmark (run on demand: `cargo bench -p hubbub-host --bench search`;
//! `bash bench/all.sh search`).
//!
//! Fills a fresh database (SQLite by default, or `HUBBUB_BENCH_DATABASE_URL=postgres://…`) with
//! `HUBBUB_BENCH_MESSAGES` support messages (default 1,000,000) in 50,000 conversations of two partners,
//! each message ten words drawn from a 5,000-word vocabulary with a skew (a few words are in a large share of
//! the messages, most are rare, as in real text), written straight into the tables so the engines' own
//! indexes (SQLite FTS5 triggers, PostgreSQL's `tsvector` tables and GIN, filled by a trigger) fill as they
//! would. Then a release `hubbub serve` (`HUBBUB_BENCH_BIN`, default `target/release/hubbub`) answers
//! `GET /api/v1/conversations?q=…` with the partner key, 100 times for each kind of search — a rare word, a
//! common word, two words, a word's start, a part of a phone — one at a time, and the bench prints p50, p95
//! and max per kind: what an agent waits for, over HTTP.

use std::time::Instant;

use clap::Parser;
use hubbub_host::config::Config;
use serde_json::Value;

mod common;
use common::{Host, SECRET_KEY};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

const VOCABULARY: usize = 5_000;
const CONVERSATIONS: i64 = 50_000;

/// The `i`-th word of the vocabulary: syllables, so the words look like words and share no prefix by design.
fn word(i: usize) -> String {
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "do", "fe", "gu", "hi", "jo", "be", "ci", "ma",
        "no", "ta",
    ];
    let (a, b, c) = (i % 20, (i / 20) % 20, (i / 400) % 20);
    format!("{}{}{}{}", SYLLABLES[a], SYLLABLES[b], SYLLABLES[c], i / 8000)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let total: i64 = std::env::var("HUBBUB_BENCH_MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let host = Host::new(dir.path(), &[]);
    let (url, base) = (host.url.clone(), host.base.clone());
    let postgres = url.starts_with("postgres");
    let keys = vec![host.partner("acme")?, host.partner("globex")?];

    // The data, straight into the tables.
    let started = Instant::now();
    let mut config = Args::try_parse_from(["bench"])?.config;
    config.database_url = url.clone();
    config.secret_key = Some(SECRET_KEY.into());
    let db = hubbub_host::store::Db::open(&config, 2).await?;
    let w = db.writer();
    let (acme, globex): (i64, i64) = (
        sqlx::query_scalar("SELECT id FROM partners WHERE code = 'acme'").fetch_one(w).await?,
        sqlx::query_scalar("SELECT id FROM partners WHERE code = 'globex'").fetch_one(w).await?,
    );
    sqlx::query("CREATE TABLE bench_vocab (id BIGINT PRIMARY KEY, w TEXT NOT NULL)").execute(w).await?;
    for chunk in (0..VOCABULARY).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, '{}')", word(*i))).collect();
        sqlx::query(sqlx::AssertSqlSafe(format!("INSERT INTO bench_vocab (id, w) VALUES {}", values.join(", "))))
            .execute(w)
            .await?;
    }
    // Numbers 0..n: SQLite's recursive CTE, PostgreSQL's generate_series.
    let numbers = |from: i64, to: i64| {
        if postgres {
            format!("(SELECT generate_series({from}::bigint, {to}::bigint) AS i) n")
        } else {
            format!(
                "(WITH RECURSIVE s(i) AS (SELECT {from} UNION ALL SELECT i + 1 FROM s WHERE i < {to}) SELECT i FROM s) n"
            )
        }
    };
    // A skewed pick: the product of two uniform draws favours low ids (the common words).
    let pick = |k: i64| {
        format!(
            "(SELECT w FROM bench_vocab WHERE id = ((((n.i * 2654435761 + {k} * 40503) % 1000003) % {VOCABULARY}) * \
             (((n.i * 40503 + {k} * 2654435761) % 999983) % {VOCABULARY})) / {VOCABULARY})"
        )
    };
    let concat = |parts: Vec<String>| parts.join(" || ' ' || ");
    let subject = concat(vec![pick(101), pick(102)]);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO conversations (ref, partner_id, phone, subject, state, last_message_at, created_at) \
         SELECT 'conv_bench' || n.i, CASE WHEN n.i % 2 = 0 THEN {acme} ELSE {globex} END, \
         '+1555' || (1000000 + n.i), {subject}, 'open', n.i, n.i FROM {}",
        numbers(0, CONVERSATIONS - 1)
    )))
    .execute(w)
    .await?;
    let first: i64 = sqlx::query_scalar("SELECT MIN(id) FROM conversations").fetch_one(w).await?;
    let body = concat((0..10).map(pick).collect());
    let batch = 50_000;
    for from in (0..total).step_by(batch as usize) {
        let to = (from + batch).min(total) - 1;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages (ref, partner_id, phone, direction, content_type, body, priority, content, state, \
             channel, conversation_id, created_at, updated_at) \
             SELECT 'msg_bench' || n.i, c.partner_id, c.phone, CASE WHEN n.i % 2 = 0 THEN 'in' ELSE 'out' END, 'text', \
             {body}, 'normal', '{{}}', 'read', 'inapp', c.id, n.i, n.i \
             FROM {} JOIN conversations c ON c.id = {first} + n.i % {CONVERSATIONS}",
            numbers(from, to)
        )))
        .execute(w)
        .await?;
    }
    if postgres {
        // What autovacuum does on a running host: every message rewrote its conversation's row of words, and
        // a table just written a million times over is not what searches meet in steady state.
        sqlx::query("VACUUM ANALYZE").execute(w).await?;
    }
    let messages: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(w).await?;
    println!(
        "{} database: {messages} messages in {CONVERSATIONS} conversations of two partners, written and indexed in {:.0} s",
        if postgres { "PostgreSQL" } else { "SQLite" },
        started.elapsed().as_secs_f64()
    );
    drop(db);

    let _server = host.serve(host.port)?;
    let client = reqwest::Client::new();
    common::ready(&client, &base).await;
    // The kinds of search: a rare word (from the long tail), a common one, two words, a word's start, a phone.
    let kinds: [(&str, Box<dyn Fn(usize) -> String>); 5] = [
        ("a rare word", Box::new(|i| word(VOCABULARY - 1 - (i * 37) % 2000))),
        ("a common word", Box::new(|i| word(i % 5))),
        ("two words", Box::new(|i| format!("{} {}", word(i % 50), word(100 + (i * 13) % 900)))),
        ("a word's start", Box::new(|i| word(200 + i * 7)[..4].to_string())),
        ("a part of a phone", Box::new(|i| format!("{}", 1_000_000 + (i * 997) % CONVERSATIONS as usize))),
    ];
    for (kind, q) in &kinds {
        let mut times = Vec::new();
        let mut found = 0;
        for i in 0..100 {
            let started = Instant::now();
            let query: String = form_urlencoded::Serializer::new(String::new()).append_pair("q", &q(i)).finish();
            let r = client
                .get(format!("{base}/api/v1/conversations?limit=50&{query}"))
                .bearer_auth(&keys[0])
                .send()
                .await?;
            anyhow::ensure!(r.status() == 200, "search: {}", r.status());
            let page: Value = r.json().await?;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            found += page["data"].as_array().map_or(0, Vec::len);
        }
        times.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{kind:>18}: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms ({:.1} conversations found on average, of at most 50)",
            percentile(&times, 0.5),
            percentile(&times, 0.95),
            times.last().copied().unwrap_or(f64::NAN),
            found as f64 / 100.0
        );
    }
    Ok(())
}
