//! Scheduled sends: `send_at` on `POST /messages` keeps a message `scheduled` until then, sends it once (across
//! a restart and across hosts), and lets its sender cancel it until it goes.

use serde_json::json;

use crate::common::{TestApp, eventually};

const PHONE: &str = "+15557600001";

/// `send_at` `seconds` after the app's clock, as RFC 3339.
fn in_seconds(app: &TestApp, seconds: i64) -> String {
    hubbub_host::clock::iso_time(app.now() + seconds * 1000)
}

#[tokio::test]
async fn a_scheduled_message_waits_until_its_time_and_goes_once_across_a_restart() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let send_at = in_seconds(&app, 3_600);
    let r = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "See you at nine", "send_at": send_at}));
    let m = r.await.ok(201).clone();
    let id = m["message_id"].as_i64().unwrap();
    assert_eq!(m["state"], "scheduled");
    assert_eq!(
        hubbub_host::clock::parse_record_time(m["send_at"].as_str().unwrap()).unwrap() / 1000,
        (app.now() + 3_600_000) / 1000
    );
    // Listed as scheduled; nothing tried, nothing in the sink, nothing in the person's hub.
    let listed = app.get(&key, "/api/v1/messages?state=scheduled").await.ok(200).clone();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(app.sink(PHONE, "whatsapp").await.is_empty() && app.sink(PHONE, "sms").await.is_empty());
    assert_eq!(app.message(&key, id).await["attempts"].as_array().unwrap().len(), 0);
    let token = app.login(PHONE).await;
    assert_eq!(app.get(&token, "/api/v1/me/messages").await.ok(200)["data"].as_array().unwrap().len(), 0);

    // A minute before its time the host restarts; at its time the new host sends it, once.
    app.clock.advance_ms(3_540_000);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(app.message(&key, id).await["state"], "scheduled");
    let (db, clock) = (app.db.clone(), app.clock.clone());
    app.stop().await;
    let app = TestApp::start_on_clock(db, clock, |_| {}).await;
    app.clock.advance_ms(61_000);
    eventually("sent at its time", || async { app.message(&key, id).await["state"] == "sent" }).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(app.sink(PHONE, "whatsapp").await.len() + app.sink(PHONE, "sms").await.len(), 1, "sent once");
    let events = app.get(&key, &format!("/api/v1/messages/{id}?include=events")).await.ok(200).clone();
    let states: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["scheduled", "sent"]);
    app.stop().await;
}

#[tokio::test]
async fn two_hosts_send_a_scheduled_message_once() {
    let one = TestApp::start().await;
    let two = TestApp::start_on_clock(one.db.clone(), one.clock.clone(), |_| {}).await;
    let key = one.partner("acme").await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let body =
            json!({"phone": format!("+155576100{i:02}"), "body": "Doors open", "send_at": in_seconds(&one, 600)});
        ids.push(one.post(&key, "/api/v1/messages", body).await.ok(201)["message_id"].as_i64().unwrap());
    }
    one.clock.advance_ms(601_000);
    for id in &ids {
        eventually("sent", || async { one.message(&key, *id).await["state"] == "sent" }).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for i in 0..20 {
        let phone = format!("+155576100{i:02}");
        assert_eq!(one.sink(&phone, "whatsapp").await.len() + one.sink(&phone, "sms").await.len(), 1, "{phone} once");
    }
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn a_scheduled_message_is_canceled_before_it_goes_and_not_after() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let body = json!({"phone": PHONE, "body": "Flash sale", "send_at": in_seconds(&app, 120)});
    let id = app.post(&key, "/api/v1/messages", body).await.ok(201)["message_id"].as_i64().unwrap();
    // Another partner's message is not found.
    app.post(&other, &format!("/api/v1/messages/{id}/cancel"), json!({})).await.error(404, "not_found");
    let canceled = app.post(&key, &format!("/api/v1/messages/{id}/cancel"), json!({})).await.ok(200).clone();
    assert_eq!(canceled["state"], "canceled");
    app.clock.advance_ms(180_000);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(app.message(&key, id).await["state"], "canceled");
    assert!(app.sink(PHONE, "whatsapp").await.is_empty() && app.sink(PHONE, "sms").await.is_empty(), "never sent");
    // Twice: it is canceled already.
    app.post(&key, &format!("/api/v1/messages/{id}/cancel"), json!({})).await.error(409, "conflict");
    // A message that went is not canceled.
    let body = json!({"phone": PHONE, "body": "Soon", "send_at": in_seconds(&app, 5)});
    let gone = app.post(&key, "/api/v1/messages", body).await.ok(201)["message_id"].as_i64().unwrap();
    app.clock.advance_ms(6_000);
    eventually("it went", || async { app.message(&key, gone).await["state"] == "sent" }).await;
    app.post(&key, &format!("/api/v1/messages/{gone}/cancel"), json!({})).await.error(409, "conflict");
    // Nor one sent at once.
    let now = app.send_text(&key, PHONE, "Now").await.ok(201)["message_id"].as_i64().unwrap();
    app.post(&key, &format!("/api/v1/messages/{now}/cancel"), json!({})).await.error(409, "conflict");
    app.post(&key, "/api/v1/messages/999999/cancel", json!({})).await.error(404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn send_at_is_a_future_rfc_3339_time_at_most_35_days_ahead() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let past = in_seconds(&app, -60);
    let too_far = in_seconds(&app, 35 * 86_400 + 60);
    for bad in [json!(past), json!(too_far), json!("tomorrow at nine"), json!("2026-12-24 09:00:00"), json!(1767000000)]
    {
        let r = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "x", "send_at": bad})).await;
        assert_eq!(r.status, 422, "send_at {bad}: {}", r.json);
        r.field_error("send_at");
    }
    // 35 days is fine, in any offset.
    let ok = hubbub_host::clock::iso_time(app.now() + 35 * 86_400_000 - 60_000);
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "x", "send_at": ok})).await.ok(201);
    app.stop().await;
}
