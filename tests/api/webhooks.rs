//! Durable, signed webhooks (docs/webhooks.md): a real receiver checks every signature in constant
//! time and sees each event kind, retries, `dead`, ordering, isolation between partners, restarts and
//! several dispatchers.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::common::{FakeServer, Recorded, TestApp, eventually, spawn_server};

const PHONE: &str = "+15551230000";

/// What a partner's receiver does: recompute both signatures and compare in constant time.
fn verify(r: &Recorded, secret: &str, bot: bool) {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&r.body);
    let expected = hex(&mac.finalize().into_bytes());
    let header = r.headers["x-service-signature"].to_str().unwrap();
    let given = if bot { header.strip_prefix("sha256=").expect("bot events use sha256=") } else { header };
    assert!(bool::from(expected.as_bytes().ct_eq(given.as_bytes())), "X-Service-Signature does not verify");
    let id = r.headers["webhook-id"].to_str().unwrap();
    let ts = r.headers["webhook-timestamp"].to_str().unwrap();
    let key = base64::engine::general_purpose::STANDARD.decode(&secret["whsec_".len()..]).unwrap();
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&r.body);
    let expected = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()));
    let given = r.headers["webhook-signature"].to_str().unwrap();
    assert!(bool::from(expected.as_bytes().ct_eq(given.as_bytes())), "webhook-signature does not verify");
    assert_eq!(r.headers["x-service-delivery"], r.headers["webhook-id"]);
    assert_eq!(r.headers["content-type"], "application/json");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Configures the partner's webhook to `url`; returns the secret.
async fn configure(app: &TestApp, key: &str, url: &str) -> String {
    let r = app.request(Method::PUT, "/api/v1/settings/webhook", Some(key), Some(&json!({"webhook_url": url}))).await;
    r.ok(200)["webhook_secret"].as_str().expect("secret shown when created").to_string()
}

fn events_of<'a>(recv: &'a [Recorded], event: &str) -> Vec<&'a Recorded> {
    recv.iter().filter(|r| r.headers["x-service-event"] == event).collect()
}

#[tokio::test]
async fn settings_show_the_secret_once_and_rotate_it() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let r = app
        .request(
            Method::PUT,
            "/api/v1/settings/webhook",
            Some(&key),
            Some(&json!({"webhook_url": "http://127.0.0.1:9/hook"})),
        )
        .await;
    let first = r.ok(200)["webhook_secret"].as_str().unwrap().to_string();
    assert!(first.starts_with("whsec_"));
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(&first[6..]).unwrap().len(), 32);
    assert!(first.starts_with(r.json["webhook_secret_prefix"].as_str().unwrap()));
    let again = app
        .request(
            Method::PUT,
            "/api/v1/settings/webhook",
            Some(&key),
            Some(&json!({"webhook_url": "http://localhost:9/other"})),
        )
        .await;
    assert!(again.ok(200).get("webhook_secret").is_none(), "not shown again");
    assert_eq!(again.json["webhook_secret_prefix"], r.json["webhook_secret_prefix"]);
    assert_eq!(again.json["webhook_url"], "http://localhost:9/other");
    let rotated = app
        .request(
            Method::PUT,
            "/api/v1/settings/webhook",
            Some(&key),
            Some(&json!({"webhook_url": "http://localhost:9/other", "rotate_secret": true})),
        )
        .await;
    let second = rotated.ok(200)["webhook_secret"].as_str().unwrap();
    assert_ne!(second, first);
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&json!({"webhook_url": "ftp://x"})))
        .await
        .field_error("webhook_url");
}

#[tokio::test]
async fn outside_dev_mode_only_public_https_urls_are_accepted() {
    let app = TestApp::start_with(|c| c.dev = false).await;
    let key = app.partner("acme").await;
    for url in [
        "http://example.com/hook",
        "https://127.0.0.1/hook",
        "https://10.0.0.8/hook",
        "https://localhost/hook",
        "https://[::1]/hook",
        "https://169.254.169.254/latest",
        "https://nonexistent.invalid/hook",
    ] {
        let r =
            app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&json!({"webhook_url": url}))).await;
        r.field_error("webhook_url");
    }
}

#[tokio::test]
async fn every_partner_event_kind_arrives_signed_with_its_payload() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let secret = configure(&app, &key, &format!("{}/hooks", recv.url)).await;
    // template.status
    let t = app
        .post(
            &key,
            "/api/v1/templates",
            json!({"code": "hi", "channel": "inapp", "category": "utility", "body": "Hi {{name}}"}),
        )
        .await;
    let tid = t.ok(201)["template_id"].as_i64().unwrap();
    app.post(&key, &format!("/api/v1/templates/{tid}/submit"), json!({})).await.ok(200);
    // account.claimed
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    app.login(PHONE).await;
    // message.status (sent, in the hub)
    let m = app.send_text(&key, PHONE, "hello").await.ok(201).clone();
    eventually("three event kinds", || async {
        let got = recv.received();
        ["template.status", "account.claimed", "message.status"].iter().all(|e| !events_of(&got, e).is_empty())
    })
    .await;
    let got = recv.received();
    for r in &got {
        verify(r, &secret, false);
        assert_eq!(r.path, "/hooks");
        assert!(r.headers.get("x-service-bot").is_none());
    }
    let t = events_of(&got, "template.status")[0].json();
    assert_eq!(
        t,
        json!({"event": "template.status", "partner": "acme", "template_id": tid, "code": "hi", "lang": "en", "channel": "inapp", "status": "approved", "reason": null, "at": t["at"]})
    );
    let a = events_of(&got, "account.claimed")[0].json();
    assert_eq!(a, json!({"event": "account.claimed", "partner": "acme", "phone": PHONE, "at": a["at"]}));
    let s = events_of(&got, "message.status")[0].json();
    assert_eq!(s["event"], "message.status");
    assert_eq!(s["partner"], "acme");
    assert_eq!(s["message_ref"], m["ref"]);
    assert_eq!(s["message_id"], m["message_id"]);
    assert_eq!(s["state"], "sent");
    assert_eq!(s["channel"], "inapp");
    assert_eq!(s["phone"], PHONE);
    assert_eq!(s["seq"], 1);
    assert!(chrono::DateTime::parse_from_rfc3339(s["at"].as_str().unwrap()).is_ok());
    // Standard Webhooks timestamps are current (receivers reject replays older than 5 minutes).
    let ts: i64 = got[0].headers["webhook-timestamp"].to_str().unwrap().parse().unwrap();
    assert!((ts - app.now() / 1000).abs() < 300);
}

#[tokio::test]
async fn statuses_of_a_message_arrive_in_order_with_growing_seq() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    configure(&app, &key, &recv.url).await;
    sent_delivered_read(&app, &key, &token).await;
    eventually("three statuses", || async { events_of(&recv.received(), "message.status").len() == 3 }).await;
    let got = recv.received();
    let seen: Vec<(String, i64)> = events_of(&got, "message.status")
        .iter()
        .map(|r| {
            let p = r.json();
            (p["state"].as_str().unwrap().to_string(), p["seq"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(seen, vec![("sent".into(), 1), ("delivered".into(), 2), ("read".into(), 3)]);
}

/// A hub message sent, fetched by its user's app (`delivered`) and read there: the message as sent.
async fn sent_delivered_read(app: &TestApp, key: &str, token: &str) -> Value {
    let m = app.send_text(key, PHONE, "hello").await.ok(201).clone();
    app.delivered(key, m["message_id"].as_i64().unwrap()).await;
    app.get(token, "/api/v1/me/messages").await.ok(200);
    app.post(token, &format!("/api/v1/me/messages/{}/read", m["ref"].as_str().unwrap()), json!({})).await.ok(200);
    m
}

async fn first_delivery(app: &TestApp, key: &str) -> Value {
    app.get(key, "/api/v1/webhooks/deliveries").await.json["data"][0].clone()
}

#[tokio::test]
async fn failures_are_retried_with_the_same_delivery_id_then_dead() {
    let recv = FakeServer::start(500, 0).await;
    let app = TestApp::start_with(|c| {
        c.webhook_poll_ms = 20;
        c.webhook_backoff_s = vec![10, 60];
        c.webhook_timeout_ms = 300;
    })
    .await;
    let key = app.partner("acme").await;
    configure(&app, &key, &recv.url).await;
    let t = app
        .post(&key, "/api/v1/templates", json!({"code": "a", "channel": "sms", "category": "utility", "body": "x"}))
        .await;
    app.post(&key, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
    eventually("first attempt", || async { recv.received().len() == 1 }).await;
    eventually("recorded as failed", || async { first_delivery(&app, &key).await["attempts"] == 1 }).await;
    let d = first_delivery(&app, &key).await;
    assert_eq!(d["state"], "pending");
    assert_eq!(d["last_status"], 500);
    assert!(d["next_attempt_at"].is_string());
    let failed = app.get(&key, "/api/v1/webhooks/deliveries?state=failed").await;
    assert_eq!(failed.ok(200)["data"].as_array().unwrap().len(), 1);
    // Not before its time (10 s ± 20 %).
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(recv.received().len(), 1);
    // Second attempt: a timeout.
    recv.set(200, 1_000);
    app.clock.advance_ms(12_001);
    eventually("second attempt", || async { first_delivery(&app, &key).await["attempts"] == 2 }).await;
    assert!(first_delivery(&app, &key).await["last_error"].as_str().unwrap().contains("timed out"));
    // Third and last attempt fails: dead.
    recv.set(503, 0);
    app.clock.advance_ms(72_001);
    eventually("dead", || async { first_delivery(&app, &key).await["state"] == "dead" }).await;
    let got = recv.received();
    assert_eq!(got.len(), 3, "1 + 2 gaps = 3 attempts");
    let ids: Vec<&str> = got.iter().map(|r| r.headers["x-service-delivery"].to_str().unwrap()).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "same delivery id on every retry");
    assert_eq!(first_delivery(&app, &key).await["delivery_id"], ids[0]);
    // A manual retry sends the same delivery again.
    recv.set(200, 0);
    let r = app.post(&key, &format!("/api/v1/webhooks/deliveries/{}/retry", ids[0]), json!({})).await;
    assert_eq!(r.ok(200)["state"], "pending");
    eventually("retried", || async { first_delivery(&app, &key).await["state"] == "succeeded" }).await;
    assert_eq!(recv.received().last().unwrap().headers["x-service-delivery"], ids[0]);
    let other = app.partner("globex").await;
    app.post(&other, &format!("/api/v1/webhooks/deliveries/{}/retry", ids[0]), json!({})).await.error(404, "not_found");
    app.get(&key, "/api/v1/webhooks/deliveries?state=bogus").await.field_error("state");
}

/// Events about one message go in order: a status behind a failing one says what it waits for, and sending
/// it again sends the earlier ones first (before, the retry said "pending" and nothing went until the
/// earlier one's backoff ran out).
#[tokio::test]
async fn a_delivery_held_behind_a_failing_one_says_so_and_sending_it_again_sends_the_earlier_first() {
    let recv = FakeServer::start(500, 0).await;
    let app = TestApp::start_with(|c| {
        c.webhook_poll_ms = 20;
        c.webhook_backoff_s = vec![600, 600];
    })
    .await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    configure(&app, &key, &recv.url).await;
    sent_delivered_read(&app, &key, &token).await;
    eventually("the first status tried and failed", || async {
        let failed = app.get(&key, "/api/v1/webhooks/deliveries?state=failed&event=message.status").await;
        failed.json["data"].as_array().is_some_and(|d| d.len() == 1)
    })
    .await;
    let list = app.get(&key, "/api/v1/webhooks/deliveries?event=message.status").await.ok(200)["data"].clone();
    let [read, delivered, sent] = [&list[0], &list[1], &list[2]];
    let id = |d: &Value| d["delivery_id"].as_str().unwrap().to_string();
    assert_eq!(list.as_array().unwrap().len(), 3, "{list}");
    assert_eq!((sent["attempts"].as_i64(), &sent["waiting_for"]), (Some(1), &Value::Null), "{list}");
    assert_eq!(delivered["waiting_for"], id(sent), "{list}");
    assert_eq!(read["waiting_for"], id(delivered), "{list}");
    let statuses = || events_of(&recv.received(), "message.status").len();
    assert_eq!(statuses(), 1, "the later statuses wait");
    // The receiver is fixed; the last status is sent again: the record says what it waits for, and the
    // earlier two go first, in order, without waiting out their backoff (the clock does not move).
    recv.set(200, 0);
    let r = app.post(&key, &format!("/api/v1/webhooks/deliveries/{}/retry", id(read)), json!({})).await;
    assert_eq!((&r.ok(200)["state"], &r.json["waiting_for"]), (&json!("pending"), &json!(id(delivered))));
    eventually("all three delivered", || async { statuses() == 4 }).await;
    let got = recv.received();
    let order: Vec<String> = events_of(&got, "message.status")
        .iter()
        .map(|r| r.headers["x-service-delivery"].to_str().unwrap().to_string())
        .collect();
    assert_eq!(order, [id(sent), id(sent), id(delivered), id(read)]);
    eventually("none waits any more", || async {
        let list = app.get(&key, "/api/v1/webhooks/deliveries?event=message.status").await.json["data"].clone();
        list.as_array().unwrap().iter().all(|d| d["state"] == "succeeded" && d["waiting_for"].is_null())
    })
    .await;
}

#[tokio::test]
async fn a_slow_partner_endpoint_never_delays_another_partner() {
    let slow = FakeServer::start(200, 8_000).await;
    let fast = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| {
        c.webhook_poll_ms = 20;
        c.webhook_timeout_ms = 20_000;
        c.webhook_concurrency = 2;
    })
    .await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    configure(&app, &acme, &slow.url).await;
    configure(&app, &globex, &fast.url).await;
    for i in 0..20 {
        let t = app
            .post(
                &acme,
                "/api/v1/templates",
                json!({"code": format!("t{i}"), "channel": "sms", "category": "utility", "body": "x"}),
            )
            .await;
        app.post(&acme, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
    }
    eventually("slow endpoint busy", || async { slow.received().len() == 2 }).await;
    let t = app
        .post(&globex, "/api/v1/templates", json!({"code": "g", "channel": "sms", "category": "utility", "body": "x"}))
        .await;
    app.post(&globex, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
    eventually("the other partner's event", || async { fast.received().len() == 1 }).await;
    // The slow endpoint never has more than its limit in flight, and none of its requests finished yet.
    assert_eq!(slow.received().len(), 2);
    let acme_done = app.get(&acme, "/api/v1/webhooks/deliveries?state=succeeded").await;
    assert_eq!(acme_done.ok(200)["data"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn webhook_test_sends_one_signed_sample() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let r = app.post(&key, "/api/v1/webhooks/test", json!({})).await;
    assert_eq!(r.ok(200)["ok"], false);
    let secret = configure(&app, &key, &recv.url).await;
    let r = app.post(&key, "/api/v1/webhooks/test", json!({})).await;
    assert_eq!(r.ok(200).clone(), json!({"ok": true, "status": 200, "error": null}));
    let got = recv.received();
    assert_eq!(got.len(), 1);
    verify(&got[0], &secret, false);
    assert_eq!(got[0].headers["x-service-event"], "message.status");
    assert_eq!(got[0].json()["partner"], "acme");
    recv.set(500, 0);
    let r = app.post(&key, "/api/v1/webhooks/test", json!({})).await;
    assert_eq!(r.ok(200)["ok"], false);
    assert_eq!(r.json["status"], 500);
}

#[tokio::test]
async fn events_without_a_configured_url_are_dead_and_can_be_retried_later() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let t = app
        .post(&key, "/api/v1/templates", json!({"code": "a", "channel": "sms", "category": "utility", "body": "x"}))
        .await;
    app.post(&key, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
    eventually("dead for lack of a URL", || async {
        app.get(&key, "/api/v1/webhooks/deliveries?state=dead").await.json["data"]
            .as_array()
            .is_some_and(|d| d.len() == 1)
    })
    .await;
    let d = app.get(&key, "/api/v1/webhooks/deliveries").await.json["data"][0].clone();
    assert_eq!(d["last_error"], "no webhook_url configured");
    configure(&app, &key, &recv.url).await;
    app.post(&key, &format!("/api/v1/webhooks/deliveries/{}/retry", d["delivery_id"].as_str().unwrap()), json!({}))
        .await
        .ok(200);
    eventually("delivered after retry", || async { recv.received().len() == 1 }).await;
}

#[tokio::test]
async fn two_dispatchers_on_one_database_deliver_each_event_once() {
    let recv = FakeServer::start(200, 5).await;
    let a = TestApp::start_with(|c| c.webhook_poll_ms = 10).await;
    // Two hosts whose clocks agree (leases are compared across hosts).
    let b = TestApp::start_on_clock(a.db.clone(), a.clock.clone(), |c| c.webhook_poll_ms = 10).await;
    let key = a.partner("acme").await;
    configure(&a, &key, &recv.url).await;
    for i in 0..30 {
        let host = if i % 2 == 0 { &a } else { &b };
        let t = host
            .post(
                &key,
                "/api/v1/templates",
                json!({"code": format!("t{i}"), "channel": "sms", "category": "utility", "body": "x"}),
            )
            .await;
        host.post(&key, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
    }
    eventually("30 events", || async { recv.received().len() >= 30 }).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut count: HashMap<String, usize> = HashMap::new();
    for r in recv.received() {
        *count.entry(r.headers["x-service-delivery"].to_str().unwrap().to_string()).or_default() += 1;
    }
    assert_eq!(count.len(), 30);
    assert!(count.values().all(|n| *n == 1), "{count:?}");
    b.stop().await;
}

/// A host killed while an event waits for its retry: a new host sends it, same delivery id.
#[tokio::test]
async fn a_killed_host_loses_no_event() {
    let recv = FakeServer::start(500, 0).await;
    let db = Arc::new(crate::common::TestDb::new().await);
    let create = crate::cli::hubbub(&db.url, &["partner", "create", "--code", "acme", "--name", "Acme"]);
    let key = serde_json::from_slice::<Value>(&create.stdout).unwrap()["api_key"].as_str().unwrap().to_string();
    let (mut child, port) = spawn_server(
        &db.url,
        &[("HUBBUB_DEV", "1"), ("HUBBUB_WEBHOOK_BACKOFF_S", "2"), ("HUBBUB_WEBHOOK_POLL_MS", "20")],
    )
    .await;
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let put = client
        .put(format!("{base}/settings/webhook"))
        .bearer_auth(&key)
        .json(&json!({"webhook_url": recv.url}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let t: Value = client
        .post(format!("{base}/templates"))
        .bearer_auth(&key)
        .json(&json!({"code": "a", "channel": "sms", "category": "utility", "body": "x"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    client.post(format!("{base}/templates/{}/submit", t["template_id"])).bearer_auth(&key).send().await.unwrap();
    eventually("first (failed) attempt", || async { !recv.received().is_empty() }).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let first_id = recv.received()[0].headers["x-service-delivery"].clone();
    recv.set(200, 0);
    let app = TestApp::start_on(db, |c| c.webhook_poll_ms = 20).await;
    app.clock.advance_ms(60_000);
    eventually("delivered by the new host", || async {
        recv.received().iter().any(|r| r.headers["x-service-delivery"] == first_id && r.body.len() > 2)
            && recv.received().len() >= 2
    })
    .await;
    eventually("recorded as succeeded", || async {
        app.get(&key, "/api/v1/webhooks/deliveries").await.json["data"][0]["state"] == "succeeded"
    })
    .await;
}

#[tokio::test]
async fn a_delivery_shows_what_it_sends_and_every_failed_one_since_a_time_is_sent_again() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let before = hubbub_host::clock::record_time(app.now() - 1000);
    // Two events while no URL is set: both dead.
    for code in ["a", "b"] {
        let t = json!({"code": code, "channel": "sms", "category": "utility", "body": "x"});
        let t = app.post(&key, "/api/v1/templates", t).await;
        app.post(&key, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
    }
    let dead = || async { app.get(&key, "/api/v1/webhooks/deliveries?state=dead").await.json["data"].clone() };
    eventually("dead for lack of a URL", || async { dead().await.as_array().is_some_and(|d| d.len() >= 2) }).await;
    // One delivery: its record and the event it carries.
    let id = dead().await[0]["delivery_id"].as_str().unwrap().to_string();
    let detail = app.get(&key, &format!("/api/v1/webhooks/deliveries/{id}")).await.ok(200).clone();
    assert_eq!(detail["delivery_id"], id.as_str());
    assert_eq!(detail["state"], "dead");
    assert_eq!(detail["payload"]["event"], detail["event"]);
    assert_eq!(detail["payload"]["partner"], "acme");
    let other = app.partner("globex").await;
    app.get(&other, &format!("/api/v1/webhooks/deliveries/{id}")).await.error(404, "not_found");
    // Everything failed since a time, sent again, each with its own delivery id.
    configure(&app, &key, &recv.url).await;
    app.post(&key, "/api/v1/webhooks/deliveries/retry", json!({"since": "yesterday"})).await.field_error("since");
    let later = hubbub_host::clock::record_time(app.now() + 60_000);
    assert_eq!(
        app.post(&key, "/api/v1/webhooks/deliveries/retry", json!({"since": later})).await.ok(200)["retried"],
        0
    );
    let n =
        app.post(&key, "/api/v1/webhooks/deliveries/retry", json!({"since": before})).await.ok(200)["retried"].clone();
    let n = n.as_u64().unwrap();
    assert!(n >= 2, "{n}");
    eventually("all sent", || async { recv.received().len() as u64 == n }).await;
    let mut ids: Vec<String> =
        recv.received().iter().map(|r| r.headers["x-service-delivery"].to_str().unwrap().to_string()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len() as u64, n, "each delivery once, with its own id");
    assert!(ids.contains(&id));
    eventually("none dead", || async { dead().await.as_array().is_some_and(|d| d.is_empty()) }).await;
}

/// A message's statuses while no URL is set are stored `dead` without looking up their predecessors (none of
/// them may go out); retried together once a URL is set, each names the one before it again, so they still
/// arrive in order: `sent`, `delivered`, `read`.
#[tokio::test]
async fn statuses_stored_dead_then_retried_together_arrive_in_order() {
    use sqlx::Row;
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    let before = hubbub_host::clock::record_time(app.now() - 1000);
    let m = sent_delivered_read(&app, &key, &token).await;
    let statuses = || async {
        let rows = sqlx::query(
            "SELECT id, state, after_id FROM outbox_events WHERE event = 'message.status' AND ordering_key LIKE $1 \
             ORDER BY id",
        )
        .bind(format!("%:message:{}", m["message_id"]))
        .fetch_all(app.state.db.reader())
        .await
        .unwrap();
        let row = |r: &sqlx::any::AnyRow| -> (i64, String, i64) {
            (r.try_get("id").unwrap(), r.try_get("state").unwrap(), r.try_get("after_id").unwrap())
        };
        rows.iter().map(row).collect::<Vec<_>>()
    };
    let born = statuses().await;
    assert_eq!(born.len(), 3, "{born:?}");
    assert!(born.iter().all(|(_, state, after)| state == "dead" && *after == 0), "{born:?}");
    configure(&app, &key, &recv.url).await;
    let n = app.post(&key, "/api/v1/webhooks/deliveries/retry", json!({"since": before})).await.ok(200)["retried"]
        .as_u64()
        .unwrap();
    assert_eq!(n, 3);
    // Retried, each names its predecessor (what the dispatcher waits for), and they go out in that order.
    let ids: Vec<i64> = born.iter().map(|(id, _, _)| *id).collect();
    let chain: Vec<i64> = statuses().await.iter().map(|(_, _, after)| *after).collect();
    assert_eq!(chain, [0, ids[0], ids[1]], "a chain again");
    eventually("three statuses", || async { events_of(&recv.received(), "message.status").len() == 3 }).await;
    let states: Vec<String> = events_of(&recv.received(), "message.status")
        .iter()
        .map(|r| r.json()["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states, ["sent", "delivered", "read"]);
}

/// The delivery ids a list answers, in its order.
async fn delivery_ids(app: &TestApp, key: &str, path: String) -> Vec<Value> {
    let r = app.get(key, &path).await;
    r.ok(200)["data"].as_array().unwrap().iter().map(|d| d["delivery_id"].clone()).collect()
}

#[tokio::test]
async fn the_delivery_log_filters_by_time_and_a_page_of_failed_ones_is_whole() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    // Three events an hour apart; with no endpoint each is recorded `dead` (the log still shows it).
    for code in ["a", "b", "c"] {
        let body = json!({"code": code, "channel": "sms", "category": "utility", "body": "x"});
        let t = app.post(&key, "/api/v1/templates", body).await;
        app.post(&key, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
        app.clock.advance_ms(3_600_000);
    }
    let all = app.get(&key, "/api/v1/webhooks/deliveries").await.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(all.len(), 3, "{all:?}");
    let at = |i: usize| all[i]["created_at"].as_str().unwrap().replace(' ', "%20");
    let ids = |path: String| delivery_ids(&app, &key, path);
    let id = |i: usize| all[i]["delivery_id"].clone();
    // Newest first: all[0] is the last event. `since` is inclusive, `until` exclusive.
    assert_eq!(ids(format!("/api/v1/webhooks/deliveries?since={}", at(1))).await, [id(0), id(1)]);
    assert_eq!(ids(format!("/api/v1/webhooks/deliveries?until={}", at(1))).await, [id(2)]);
    assert_eq!(ids(format!("/api/v1/webhooks/deliveries?since={}&until={}", at(2), at(0))).await, [id(1), id(2)]);
    assert_eq!(ids("/api/v1/webhooks/deliveries?since=&until=".into()).await.len(), 3);
    app.get(&key, "/api/v1/webhooks/deliveries?since=yesterday").await.field_error("since");
    app.get(&key, "/api/v1/webhooks/deliveries?until=2026-13-01%2000:00:00").await.field_error("until");

    // `failed` (retrying after a failed attempt) is chosen in the query, so a page holds what it says: the
    // two newest are waiting for their first attempt, the oldest has failed once.
    sqlx::query(
        "UPDATE outbox_events SET state = 'pending', last_error = NULL, next_attempt_at = $1, \
         attempts = CASE WHEN delivery_id = $2 THEN 1 ELSE 0 END",
    )
    .bind(app.now() + 86_400_000)
    .bind(all[2]["delivery_id"].as_str().unwrap())
    .execute(app.state.db.writer())
    .await
    .unwrap();
    assert_eq!(ids("/api/v1/webhooks/deliveries?state=failed&limit=1".into()).await, [id(2)]);
    assert_eq!(ids("/api/v1/webhooks/deliveries?state=pending".into()).await.len(), 3);
}

/// One batch of events (`outbox::enqueue_many`, one statement): stored in the order given; `pending` when
/// the target has an endpoint, else `dead` with the reason (a partner without a URL, a developer and a bot
/// that do not exist); and each names the last event stored under its ordering key of its target, so a
/// second batch chains onto the first.
#[tokio::test]
async fn a_batch_of_events_is_stored_in_order_each_after_the_last_of_its_key() {
    use hubbub_host::store::outbox::{self, NewEvent, Target};
    use sqlx::Row;
    // No dispatcher (it would claim and send the pending events while the test reads their states).
    let app = TestApp::start_with(|c| c.workers = false).await;
    let recv = FakeServer::start(200, 0).await;
    let (acme, _beta) = (app.partner("acme").await, app.partner("beta").await);
    configure(&app, &acme, &recv.url).await;
    let db = &app.state.db;
    let mut partner = HashMap::new();
    for code in ["acme", "beta"] {
        let id: i64 = sqlx::query_scalar("SELECT id FROM partners WHERE code = $1")
            .bind(code)
            .fetch_one(db.reader())
            .await
            .unwrap();
        partner.insert(code, Target::Partner(id));
    }
    let payload = json!({"n": 1}).to_string();
    // At an instant long past: due at once, were a dispatcher to look.
    let event = |target, key: &str| NewEvent {
        target,
        event: "message.status",
        payload: &payload,
        ordering_key: key.to_string(),
        at: 1_000,
    };
    let batches = [
        vec![
            event(partner["acme"], "message:1"),
            event(partner["beta"], "message:1"),
            event(Target::Developer(999_999), "message:1"),
            event(Target::Bot(999_999), "message:1"),
            event(partner["acme"], "message:2"),
        ],
        vec![event(partner["acme"], "message:3"), event(partner["acme"], "message:1")],
    ];
    let mut delivery_ids = Vec::new();
    for batch in &batches {
        let mut tx = db.begin().await.unwrap();
        delivery_ids.extend(outbox::enqueue_many(&mut tx, batch).await.unwrap());
        tx.commit().await.unwrap();
    }
    let mut rows = Vec::new();
    for delivery_id in &delivery_ids {
        let r = sqlx::query("SELECT id, state, last_error, after_id FROM outbox_events WHERE delivery_id = $1")
            .bind(delivery_id)
            .fetch_one(db.reader())
            .await
            .unwrap();
        let id: i64 = r.try_get("id").unwrap();
        let state: String = r.try_get("state").unwrap();
        let error: Option<String> = r.try_get("last_error").unwrap();
        let after: i64 = r.try_get("after_id").unwrap();
        rows.push((id, state, error, after));
    }
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "stored in the order given: {ids:?}");
    let states: Vec<(&str, Option<&str>)> = rows.iter().map(|r| (r.1.as_str(), r.2.as_deref())).collect();
    let dead = ("dead", Some("no webhook_url configured"));
    let pending = ("pending", None);
    assert_eq!(states, [pending, dead, dead, dead, pending, pending, pending]);
    let after: Vec<i64> = rows.iter().map(|r| r.3).collect();
    assert_eq!(after, [0, 0, 0, 0, 0, 0, ids[0]], "a chain per key and target: only acme's message:1 has one");
}
