//! Broadcasts (docs/api.md): 202 at once, fan-out in the background, exactly one message per
//! linked and claimed user, resumable, shared media, system broadcasts for the platform partner only.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::common::{TestApp, eventually, spawn_server};

/// Links `n` users to the partner (claimed unless `claimed` is false), directly in the database.
async fn audience(app: &TestApp, partner: &str, n: usize, start: usize, claimed: bool) -> Vec<String> {
    let p = hubbub_host::store::partners::find_by_code(&app.state.db, partner).await.unwrap().unwrap();
    let mut phones = Vec::new();
    for i in start..start + n {
        let phone = format!("+1666{:07}", i);
        hubbub_host::store::accounts::link_account(&app.state.db, p.id, &phone, None, &Default::default(), app.now())
            .await
            .unwrap();
        phones.push(phone);
    }
    if claimed {
        sqlx::query("UPDATE accounts SET state = 'claimed' WHERE phone LIKE '+1666%'")
            .execute(app.state.db.writer())
            .await
            .unwrap();
    }
    phones
}

async fn wait_completed(app: &TestApp, key: &str, id: i64) -> Value {
    let mut last = Value::Null;
    for _ in 0..1500 {
        last = app.get(key, &format!("/api/v1/broadcasts/{id}")).await.json;
        if last["state"] == "completed" {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("broadcast {id} not completed: {last}");
}

async fn per_phone(app: &TestApp, broadcast: i64) -> Vec<(String, i64)> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT phone, COUNT(*) FROM messages WHERE broadcast_id = $1 GROUP BY phone ORDER BY phone")
            .bind(broadcast)
            .fetch_all(app.state.db.reader())
            .await
            .unwrap();
    rows
}

#[tokio::test]
async fn a_broadcast_reaches_each_linked_claimed_user_exactly_once() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let phones = audience(&app, "acme", 300, 0, true).await;
    // Not in the audience: unclaimed users and another partner's users.
    audience(&app, "acme", 5, 1000, false).await;
    // The console's preview: how many a broadcast would reach now.
    let size = app.get(&key, "/api/v1/broadcasts/audience").await;
    assert_eq!(size.ok(200)["count"], 300);
    assert_eq!(size.json["audience"], "linked");
    assert_eq!(app.get(&other, "/api/v1/broadcasts/audience").await.ok(200)["count"], 0);
    let r = app
        .post(&key, "/api/v1/broadcasts", json!({"body": "Shop closes early today", "priority": "notification"}))
        .await;
    let b = r.ok(202).clone();
    assert_eq!(b["state"], "queued");
    assert_eq!(b["audience"], "linked");
    assert_eq!(b["total"], Value::Null);
    let id = b["broadcast_id"].as_i64().unwrap();
    let done = wait_completed(&app, &key, id).await;
    assert_eq!(done["total"], 300);
    assert_eq!(done["sent"], 300);
    assert_eq!(done["failed"], 0);
    assert!(done["completed_at"].is_string());
    // Its messages by state (all 300 are somewhere; a list leaves the counts out).
    let states = done["states"].as_object().unwrap();
    assert_eq!(states.values().map(|n| n.as_i64().unwrap()).sum::<i64>(), 300, "{states:?}");
    assert!(states.keys().all(|s| ["queued", "sent", "delivered", "read", "failed"].contains(&s.as_str())));
    assert!(app.get(&key, "/api/v1/broadcasts").await.ok(200)["data"][0].get("states").is_none());
    let counts = per_phone(&app, id).await;
    assert_eq!(counts.len(), 300);
    assert!(counts.iter().all(|(_, n)| *n == 1));
    assert_eq!(counts.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(), phones);
    // Each user sees it once in the hub.
    let token = app.login(&phones[7]).await;
    let hub = app.get(&token, "/api/v1/me/messages").await;
    let data = hub.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["body"], "Shop closes early today");
    // Listing and isolation.
    assert_eq!(app.get(&key, "/api/v1/broadcasts").await.ok(200)["data"][0]["broadcast_id"], id);
    app.get(&other, &format!("/api/v1/broadcasts/{id}")).await.error(404, "not_found");
    assert!(app.get(&other, "/api/v1/broadcasts").await.json["data"].as_array().unwrap().is_empty());
    app.post(&key, "/api/v1/broadcasts", json!({"body": "x", "audience": "everyone"})).await.field_error("audience");
    app.post(&key, "/api/v1/broadcasts", json!({"content_type": "text"})).await.field_error("body");
    app.post(&key, "/api/v1/broadcasts", json!({"body": "x", "phone": "+15551230000"})).await.field_error("phone");
}

#[tokio::test]
async fn media_broadcasts_store_the_media_once() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let phones = audience(&app, "acme", 50, 0, true).await;
    let r = app.post(&key, "/api/v1/broadcasts", json!({"content_type": "image", "media_base64": "aGVsbG8gd29ybGQ=", "media_mimetype": "image/png", "body": "New menu"})).await;
    let id = r.ok(202)["broadcast_id"].as_i64().unwrap();
    wait_completed(&app, &key, id).await;
    let media: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM media").fetch_one(app.state.db.reader()).await.unwrap();
    assert_eq!(media, 1, "one stored copy for 50 messages");
    let distinct: i64 = sqlx::query_scalar("SELECT COUNT(DISTINCT media_id) FROM messages WHERE broadcast_id = $1")
        .bind(id)
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    assert_eq!(distinct, 1);
    // A recipient can fetch it.
    let token = app.login(&phones[3]).await;
    let hub = app.get(&token, "/api/v1/me/messages").await;
    let url = hub.ok(200)["data"][0]["media"]["url"].as_str().unwrap().to_string();
    let got = app.client.get(format!("{}{url}", app.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(got.bytes().await.unwrap().as_ref(), b"hello world");
}

#[tokio::test]
async fn system_broadcasts_are_for_the_platform_partner_to_every_claimed_account() {
    let app = TestApp::start().await;
    let platform = app.partner_with("hubbub", true).await;
    let acme = app.partner("acme").await;
    audience(&app, "acme", 20, 0, true).await;
    app.post(&acme, "/api/v1/system/broadcasts", json!({"body": "Maintenance tonight"})).await.error(403, "forbidden");
    let r = app
        .post(&platform, "/api/v1/system/broadcasts", json!({"body": "Maintenance tonight", "content_type": "system"}))
        .await;
    let id = r.ok(202)["broadcast_id"].as_i64().unwrap();
    let done = wait_completed(&app, &platform, id).await;
    assert_eq!(done["sent"], 20, "every claimed account, linked to the platform or not");
    assert_eq!(per_phone(&app, id).await.len(), 20);
}

/// A host killed mid fan-out: a new host resumes it, with no duplicate and no gap.
#[tokio::test]
async fn a_killed_fan_out_resumes_without_duplicates_or_gaps() {
    let db = Arc::new(crate::common::TestDb::new().await);
    let setup = TestApp::start_on(db.clone(), |_| {}).await;
    let key = setup.partner("acme").await;
    audience(&setup, "acme", 5_000, 0, true).await;
    setup.stop().await;
    let (mut child, port) = spawn_server(&db.url, &[("HUBBUB_DEV", "1")]).await;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/broadcasts");
    let mut id = None;
    for _ in 0..100 {
        if let Ok(r) = client.post(&url).bearer_auth(&key).json(&json!({"body": "Big news"})).send().await {
            assert_eq!(r.status(), 202);
            id = r.json::<Value>().await.unwrap()["broadcast_id"].as_i64();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let id = id.expect("server answered");
    // Kill it once the fan-out has started but (most likely) not finished.
    let app = TestApp::start_on(db, |_| {}).await;
    eventually("fan-out started", || async {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE broadcast_id = $1")
            .bind(id)
            .fetch_one(app.state.db.reader())
            .await
            .unwrap();
        n > 0
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    // The new host takes it over when the dead host's lease ends.
    app.clock.advance_ms(61_000);
    let done = wait_completed(&app, &key, id).await;
    assert_eq!(done["sent"], 5_000);
    let counts = per_phone(&app, id).await;
    assert_eq!(counts.len(), 5_000, "no gap");
    assert!(counts.iter().all(|(_, n)| *n == 1), "no duplicate");
}

#[tokio::test]
async fn a_scheduled_broadcast_goes_out_at_its_time_and_is_canceled_only_before() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let phones = audience(&app, "acme", 10, 0, true).await;
    let at = |seconds: i64| hubbub_host::clock::iso_time(app.now() + seconds * 1000);
    let b = app.post(&key, "/api/v1/broadcasts", json!({"body": "Doors open at nine", "send_at": at(600)})).await;
    let b = b.ok(202).clone();
    let id = b["broadcast_id"].as_i64().unwrap();
    assert_eq!(b["state"], "scheduled");
    assert!(b["send_at"].is_string());
    // Before its time nobody has a message.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(per_phone(&app, id).await.is_empty());
    app.clock.advance_ms(601_000);
    eventually("fanned out at its time", || async {
        app.get(&key, &format!("/api/v1/broadcasts/{id}")).await.ok(200)["state"] == "completed"
    })
    .await;
    assert_eq!(per_phone(&app, id).await.len(), phones.len());
    app.post(&key, &format!("/api/v1/broadcasts/{id}/cancel"), json!({})).await.error(409, "conflict");

    // Canceled before its time: it never goes.
    let later = app.post(&key, "/api/v1/broadcasts", json!({"body": "Sale tomorrow", "send_at": at(3_600)})).await;
    let later = later.ok(202)["broadcast_id"].as_i64().unwrap();
    let other = app.partner("globex").await;
    app.post(&other, &format!("/api/v1/broadcasts/{later}/cancel"), json!({})).await.error(404, "not_found");
    let canceled = app.post(&key, &format!("/api/v1/broadcasts/{later}/cancel"), json!({})).await.ok(200).clone();
    assert_eq!(canceled["state"], "canceled");
    app.clock.advance_ms(3_700_000);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(per_phone(&app, later).await.is_empty());
    assert_eq!(app.get(&key, &format!("/api/v1/broadcasts/{later}")).await.ok(200)["state"], "canceled");
    // send_at is checked as for a message.
    let r = app.post(&key, "/api/v1/broadcasts", json!({"body": "x", "send_at": at(-5)})).await;
    r.field_error("send_at");
    let r = app.post(&key, "/api/v1/broadcasts", json!({"body": "x", "send_at": at(36 * 86_400)})).await;
    r.field_error("send_at");
    app.stop().await;
}
