//! Several `hubbub serve` processes on one database under a steady load, one of them killed with SIGKILL
//! mid-run and started again: every accepted message is delivered once, every webhook event reaches the
//! receiver in order per message, the broadcast completes with one message per recipient, and the dead
//! host's claimed work moves to the others within a lease.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, eventually, spawn_server};

const USERS: usize = 40;
const MESSAGES: usize = 150;
const LEASE_MS: u64 = 2_000;

#[tokio::test]
async fn three_hosts_one_killed_lose_and_repeat_nothing() {
    let receiver = FakeServer::start(200, 0).await;
    // An API-only helper on the same database for setup and for reading the outcome; it runs no workers,
    // so all the work is the three processes'.
    let helper = TestApp::start_with(|c| c.workers = false).await;
    let key = helper.partner("acme").await;
    let hook = json!({"webhook_url": format!("{}/hook", receiver.url)});
    helper.request(reqwest::Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&hook)).await.ok(200);
    // Claimed users with a device: every message goes to the hub, so "delivered once" is exact.
    let phones: Vec<String> = (0..USERS).map(|i| format!("+1555300{i:04}")).collect();
    for phone in &phones {
        helper.post(&key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
        let claimed = |p: &str, at| hubbub_host::events::account_claimed(p, phone, at);
        let device = format!("dev-{phone}");
        let signed_in =
            hubbub_host::store::accounts::sign_in(&helper.state.db, phone, &device, None, helper.now(), claimed);
        assert!(signed_in.await.unwrap());
    }

    let lease = LEASE_MS.to_string();
    let env = [
        ("HUBBUB_DEV", "1"),
        ("HUBBUB_JWT_SECRET", crate::common::TEST_JWT_SECRET),
        ("HUBBUB_LEASE_MS", lease.as_str()),
        ("HUBBUB_HOSTS", "3"),
        ("HUBBUB_RATE_LIMIT_PER_S", "100000"),
        ("HUBBUB_RATE_LIMIT_BURST", "100000"),
        ("HUBBUB_WEBHOOK_POLL_MS", "20"),
        ("HUBBUB_DELIVERY_POLL_MS", "20"),
    ];
    let mut hosts = Vec::new();
    for _ in 0..3 {
        hosts.push(spawn_server(&helper.db.url, &env).await);
    }
    let client = reqwest::Client::new();
    let url = |port: u16, path: &str| format!("http://127.0.0.1:{port}/api/v1{path}");

    // A broadcast to every user, started first; then a steady stream of messages over the three hosts.
    let broadcast = client
        .post(url(hosts[0].1, "/broadcasts"))
        .bearer_auth(&key)
        .json(&json!({"body": "the broadcast"}))
        .send()
        .await
        .unwrap();
    assert_eq!(broadcast.status(), 202);
    let broadcast_id = broadcast.json::<Value>().await.unwrap()["broadcast_id"].as_i64().unwrap();
    let mut accepted: Vec<i64> = Vec::new();
    let mut takeover = None;
    for i in 0..MESSAGES {
        if i == MESSAGES / 3 {
            // SIGKILL mid-run, with its claimed work in flight; then time how long until everything accepted
            // before the kill is delivered (the dead host's claims move when their leases run out).
            hosts[1].0.kill().unwrap();
            hosts[1].0.wait().unwrap();
            let (before, db, killed_at) = (accepted.clone(), helper.state.db.clone(), Instant::now());
            takeover = Some(tokio::spawn(async move {
                loop {
                    let sent: Result<i64, _> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                        "SELECT COUNT(DISTINCT message_id) FROM message_states WHERE state = 'sent' AND message_id IN ({})",
                        before.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
                    )))
                    .fetch_one(db.reader())
                    .await;
                    if sent.is_ok_and(|n| n as usize == before.len()) {
                        return killed_at.elapsed();
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }));
        }
        if i == 2 * MESSAGES / 3 {
            hosts[1] = spawn_server(&helper.db.url, &env).await;
        }
        let port = hosts[i % 3].1;
        let body = json!({"phone": phones[i % USERS], "body": format!("m{i}")});
        // The killed host refuses connections (an error here); the client would retry on another host.
        if let Ok(r) = client.post(url(port, "/messages")).bearer_auth(&key).json(&body).send().await {
            assert_eq!(r.status(), 201, "message {i}");
            accepted.push(r.json::<Value>().await.unwrap()["message_id"].as_i64().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let takeover = match tokio::time::timeout(Duration::from_secs(30), takeover.unwrap()).await {
        Ok(elapsed) => elapsed.unwrap(),
        Err(_) => {
            let stuck: Vec<(i64, Option<i64>, i64)> = sqlx::query_as(
                "SELECT j.message_id, j.lease_until, j.next_attempt_at FROM delivery_jobs j ORDER BY j.message_id",
            )
            .fetch_all(helper.state.db.reader())
            .await
            .unwrap();
            panic!("work accepted before the kill was not delivered within 30 s; jobs left: {stuck:?}");
        }
    };
    assert!(
        takeover < Duration::from_millis(LEASE_MS + 3_000),
        "work accepted before the kill took {takeover:?} to be delivered (lease {LEASE_MS} ms)"
    );
    assert!(accepted.len() >= MESSAGES * 8 / 10, "{} of {MESSAGES} accepted", accepted.len());

    // Everything accepted is delivered once, and the broadcast completes.
    let db = helper.state.db.clone();
    let sent_rows = |id: i64| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM message_states WHERE message_id = $1 AND state = 'sent'")
                .bind(id)
                .fetch_one(db.reader())
                .await
                .unwrap()
        }
    };
    eventually("the broadcast completes", || async {
        helper.get(&key, &format!("/api/v1/broadcasts/{broadcast_id}")).await.json["state"] == "completed"
    })
    .await;
    let b = helper.get(&key, &format!("/api/v1/broadcasts/{broadcast_id}")).await.json;
    assert_eq!((b["total"].as_i64(), b["sent"].as_i64()), (Some(USERS as i64), Some(USERS as i64)), "{b}");
    let per_phone: Vec<i64> =
        sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE broadcast_id = $1 GROUP BY phone ORDER BY phone")
            .bind(broadcast_id)
            .fetch_all(db.reader())
            .await
            .unwrap();
    assert_eq!(per_phone, vec![1; USERS], "one broadcast message per recipient, no gap, no duplicate");
    let broadcast_messages: Vec<i64> = sqlx::query_scalar("SELECT id FROM messages WHERE broadcast_id = $1")
        .bind(broadcast_id)
        .fetch_all(db.reader())
        .await
        .unwrap();
    for &id in accepted.iter().chain(&broadcast_messages) {
        eventually("sent", || async { sent_rows(id).await >= 1 }).await;
        assert_eq!(sent_rows(id).await, 1, "message {id} was delivered twice");
        let attempts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM delivery_attempts WHERE message_id = $1")
            .bind(id)
            .fetch_one(db.reader())
            .await
            .unwrap();
        assert_eq!(attempts, 1, "message {id} was tried twice");
    }

    // Every message's `sent` event reaches the receiver (at least once), and each message's events arrive
    // in order.
    eventually("a sent event for every message", || async {
        let got = receiver.received();
        let ids: std::collections::HashSet<i64> = got
            .iter()
            .map(|r| r.json())
            .filter(|e| e["event"] == "message.status" && e["state"] == "sent")
            .filter_map(|e| e["message_id"].as_i64())
            .collect();
        accepted.iter().chain(&broadcast_messages).all(|id| ids.contains(id))
    })
    .await;
    let mut last_seq: HashMap<i64, i64> = HashMap::new();
    for event in receiver.received().iter().map(|r| r.json()).filter(|e| e["event"] == "message.status") {
        let (id, seq) = (event["message_id"].as_i64().unwrap(), event["seq"].as_i64().unwrap());
        let before = last_seq.entry(id).or_insert(0);
        assert!(seq >= *before, "message {id}: seq {seq} arrived after {before}");
        *before = seq;
    }
    for (mut child, _) in hosts {
        let _ = child.kill();
        let _ = child.wait();
    }
    println!(
        "scale-out: {} messages accepted by 3 hosts (one killed at 1/3, restarted at 2/3), {USERS}-user broadcast, \
         all delivered once; what was accepted before the kill was delivered {:.2} s after it (lease {LEASE_MS} ms); \
         {} webhook requests",
        accepted.len(),
        takeover.as_secs_f64(),
        receiver.received().len()
    );
}
