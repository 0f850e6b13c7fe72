//! The fallback after the hub (docs/api.md, "Sending"): a hub message that no device of the user gets
//! within its window goes on to WhatsApp, then SMS, as further attempts of the same message; a device that
//! gets it in time (a fetch, a live stream) ends the chain, and nothing goes out twice when the two race.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, attempts, eventually};

const PHONE: &str = "+15551230000";

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(c, s)| (c.to_string(), s.to_string())).collect()
}

/// Sends `body` (with `extra` fields) to the user and waits for it to reach the hub; answers its id.
async fn send_to_hub(app: &TestApp, key: &str, body: &str, extra: Value) -> i64 {
    let mut send = json!({"phone": PHONE, "body": body});
    send.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let id = app.post(key, "/api/v1/messages", send).await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(key, id).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("inapp")), "{m}");
    id
}

/// The user signed in on a device (claimed, with a device: reached in the hub), without the app open.
async fn user_with_a_device(app: &TestApp, key: &str) {
    app.post(key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let claimed = |partner: &str, at| hubbub_host::events::account_claimed(partner, PHONE, at);
    assert!(
        hubbub_host::store::accounts::sign_in(&app.state.db, PHONE, "phone-1", None, app.now(), claimed).await.unwrap()
    );
}

#[tokio::test]
async fn a_hub_message_no_device_got_goes_on_to_whatsapp_then_sms() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    // A provider that is down hands over to the next channel at once (no retry budget; tests/api/pacing.rs
    // has the partner's budget).
    let now = json!({"provider_retry_s": 0});
    app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&now)).await.ok(200);
    user_with_a_device(&app, &key).await;
    // The user wrote on WhatsApp lately, so free-form text may go there (Meta's 24-hour window).
    app.whatsapp_wrote(PHONE).await;
    let id = send_to_hub(&app, &key, "Your table is ready", json!({"fallback_after_s": 60})).await;
    // Within the window it waits in the hub.
    app.clock.advance_ms(59_000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(wa.received().is_empty());
    // Past it, WhatsApp: a further attempt of the same message.
    app.clock.advance_ms(2_000);
    eventually("the fallback goes out on WhatsApp", || async { wa.received().len() == 1 }).await;
    eventually("its attempt is recorded", || async {
        attempts(&app.message(&key, id).await) == pairs(&[("inapp", "sent"), ("whatsapp", "sent")])
    })
    .await;
    let m = app.message(&key, id).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("whatsapp")));
    assert!(String::from_utf8_lossy(&wa.received()[0].body).contains("Your table is ready"));

    // WhatsApp refusing: SMS.
    wa.set(500, 0);
    let id = send_to_hub(&app, &key, "Second call", json!({"fallback_after_s": 60})).await;
    app.clock.advance_ms(61_000);
    eventually("the fallback goes on to SMS", || async {
        attempts(&app.message(&key, id).await) == pairs(&[("inapp", "sent"), ("whatsapp", "failed"), ("sms", "sent")])
    })
    .await;
    assert_eq!(sms.received().len(), 1);
    // The message's events: each once, in order.
    let partner_id: i64 = sqlx::query_scalar("SELECT id FROM partners WHERE code = 'acme'")
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    let target = hubbub_host::store::outbox::Target::Partner(partner_id);
    let events = hubbub_host::store::outbox::list_for_target(&app.state.db, target, Some("message.status")).await;
    let mut seqs: Vec<i64> = events
        .unwrap()
        .into_iter()
        .filter(|(_, _, p)| p["message_id"] == id)
        .map(|(_, _, p)| p["seq"].as_i64().unwrap())
        .collect();
    seqs.reverse();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order, each once: {seqs:?}");
}

#[tokio::test]
async fn a_device_that_gets_it_in_time_ends_the_chain() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    // Fetched by the app within the window: delivered, and no fallback.
    let id = send_to_hub(&app, &key, "Fetched in time", json!({"fallback_after_s": 60})).await;
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    app.clock.advance_ms(120_000);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let m = app.message(&key, id).await;
    assert_eq!(m["state"], "delivered");
    assert_eq!(attempts(&m), pairs(&[("inapp", "sent")]));
    assert!(app.sink(PHONE, "whatsapp").await.is_empty());
    // Sent down an open event stream: delivered as well.
    let ticket =
        app.post(&token, "/api/v1/me/events/ticket", json!({})).await.ok(201)["ticket"].as_str().unwrap().to_string();
    let mut stream = app.client.get(format!("{}/api/v1/me/events?ticket={ticket}", app.base)).send().await.unwrap();
    let send = json!({"phone": PHONE, "body": "Streamed in time", "fallback_after_s": 60});
    let id = app.post(&key, "/api/v1/messages", send).await.ok(201)["message_id"].as_i64().unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.chunk()).await;
    eventually("sent down the stream, it is delivered", || async {
        app.message(&key, id).await["state"] == "delivered"
    })
    .await;
    app.clock.advance_ms(120_000);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(app.sink(PHONE, "whatsapp").await.is_empty());
}

#[tokio::test]
async fn the_window_is_per_message_then_per_partner_then_the_hosts() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    user_with_a_device(&app, &key).await;
    let settings = app.get(&key, "/api/v1/settings/delivery").await.ok(200).clone();
    let defaults = json!({"hub_fallback_after_s": 300, "default": true, "whatsapp_window_fallback": false, "provider_retry_s": 60, "attempt_events": false, "over_limit": "wait", "quiet_hours": null});
    assert_eq!(settings, defaults);
    // `null`: the hub only, whatever the partner set.
    let hub_only = send_to_hub(&app, &key, "Hub only", json!({"fallback_after_s": null})).await;
    // The partner's window.
    let put = |body: Value| {
        let (app, key) = (&app, &key);
        async move { app.request(Method::PUT, "/api/v1/settings/delivery", Some(key), Some(&body)).await }
    };
    assert_eq!(
        put(json!({"hub_fallback_after_s": 10})).await.ok(200).clone(),
        json!({"hub_fallback_after_s": 10, "default": false, "whatsapp_window_fallback": false, "provider_retry_s": 60, "attempt_events": false, "over_limit": "wait", "quiet_hours": null})
    );
    let partners = send_to_hub(&app, &key, "Partner window", json!({})).await;
    app.clock.advance_ms(11_000);
    eventually("the partner's window applies", || async { app.sink(PHONE, "whatsapp").await.len() == 1 }).await;
    app.clock.advance_ms(7 * 24 * 3600 * 1000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.sink(PHONE, "whatsapp").await.len(), 1, "the hub-only message never left the hub");
    assert_eq!(attempts(&app.message(&key, hub_only).await), pairs(&[("inapp", "sent")]));
    assert_eq!(attempts(&app.message(&key, partners).await), pairs(&[("inapp", "sent"), ("whatsapp", "sent")]));
    // The partner chooses the hub only, then the default again.
    assert_eq!(put(json!({"hub_fallback_after_s": null})).await.ok(200)["hub_fallback_after_s"], Value::Null);
    assert_eq!(put(json!({})).await.ok(200)["default"], true);
    // Bad windows.
    put(json!({"hub_fallback_after_s": -5})).await.field_error("hub_fallback_after_s");
    put(json!({"hub_fallback_after_s": "soon"})).await.field_error("hub_fallback_after_s");
    let bad = json!({"phone": PHONE, "body": "x", "fallback_after_s": 604_801});
    app.post(&key, "/api/v1/messages", bad).await.field_error("fallback_after_s");
}

#[tokio::test]
async fn nothing_goes_out_twice_when_a_device_and_the_timer_race() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(send_to_hub(&app, &key, &format!("Race {i}"), json!({"fallback_after_s": 30})).await);
    }
    // The window passes while the app fetches its inbox, again and again.
    app.clock.advance_ms(31_000);
    for _ in 0..10 {
        app.get(&token, "/api/v1/me/messages?limit=50").await.ok(200);
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let texts = app.sink(PHONE, "whatsapp").await;
    for (i, id) in ids.iter().enumerate() {
        let sent = texts.iter().filter(|t| t.ends_with(&format!("Race {i}"))).count();
        let m = app.message(&key, *id).await;
        let went = attempts(&m).iter().filter(|(c, _)| c == "whatsapp").count();
        assert!(sent <= 1 && went == sent, "message {i}: {sent} texts, {went} attempts");
        // A message the device had before the fallback claimed it never went out.
        if sent == 0 {
            assert_ne!(m["state"], "sent", "{m}");
        }
    }
}
