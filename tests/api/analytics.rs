//! A partner's messages' figures (docs/api.md, "Analytics"): the delivery funnel by channel, template and
//! broadcast, the fallbacks and what the paid tries cost at the partner's prices, and the time to read, all
//! from rollups kept as each change happens (deltas in the change's transaction, folded by a worker).

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, TestDb, eventually, fake_providers};

const APP_USER: &str = "+15551230000";
const NO_APP: &str = "+15551230001";

fn at(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// The figures' counts that tell the funnel, in order: accepted, sent, delivered, read, failed, paid,
/// fallbacks.
fn funnel(f: &Value) -> [i64; 7] {
    ["accepted", "sent", "delivered", "read", "failed", "paid", "fallbacks"].map(|k| f[k].as_i64().unwrap())
}

#[tokio::test]
async fn message_analytics_count_the_funnel_fallbacks_cost_and_time_to_read_by_channel_template_and_broadcast() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    // Monday 2026-12-07, 08:00 UTC.
    let clock = Arc::new(hubbub_host::clock::ManualClock::new(at("2026-12-07T08:00:00Z")));
    let (w, s) = (wa.clone(), sms.clone());
    let app = TestApp::start_on_clock(Arc::new(TestDb::new().await), clock, move |c| fake_providers(c, &w, &s)).await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let prices = json!({"currency": "EUR", "whatsapp": 0.05, "sms": 0.075});
    app.request(Method::PUT, "/api/v1/settings/prices", Some(&key), Some(&prices)).await.ok(200);
    assert_eq!(app.get(&key, "/api/v1/settings/prices").await.ok(200), &prices);
    let none = json!({"provider_retry_s": 0});
    app.request(Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&none)).await.ok(200);
    let template =
        json!({"code": "order_ready", "channel": "inapp", "category": "utility", "body": "Order {{n}} is ready"});
    let template_id = app.post(&key, "/api/v1/templates", template).await.ok(201)["template_id"].as_i64().unwrap();
    app.post(&key, &format!("/api/v1/templates/{template_id}/submit"), json!({})).await.ok(200);

    // The app user (signed in on a device): a hub message from the template, marked read 90 seconds later.
    app.post(&key, "/api/v1/accounts/link", json!({"phone": APP_USER})).await.ok(200);
    let claimed = |partner: &str, at| hubbub_host::events::account_claimed(partner, APP_USER, at);
    let signed_in = hubbub_host::store::accounts::sign_in(&app.state.db, APP_USER, "phone-1", None, app.now(), claimed);
    assert!(signed_in.await.unwrap());
    let send = json!({"phone": APP_USER, "template_code": "order_ready", "vars": {"n": "7"}, "fallback_after_s": 3600});
    let read_one = app.post(&key, "/api/v1/messages", send).await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(app.delivered(&key, read_one).await["channel"], "inapp");
    app.clock.advance_ms(90_000);
    app.post(&key, "/api/v1/messages/read", json!({"message_ids": [read_one]})).await.ok(200);
    // A hub message no device gets in time: the fallback to WhatsApp (the person wrote there lately).
    app.whatsapp_wrote(APP_USER).await;
    let waits = json!({"phone": APP_USER, "body": "Your table is ready", "fallback_after_s": 60});
    let fell_back = app.post(&key, "/api/v1/messages", waits).await.ok(201)["message_id"].as_i64().unwrap();
    app.delivered(&key, fell_back).await;
    app.clock.advance_ms(61_000);
    eventually("the fallback goes out on WhatsApp", || async { wa.received().len() == 1 }).await;
    // Someone without the app who never wrote on WhatsApp: SMS at once (paid, not a fallback).
    let by_sms = app.send_text(&key, NO_APP, "Your code is on its way").await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(app.delivered(&key, by_sms).await["channel"], "sms");
    // Then the SMS provider refuses: the next one fails on every channel.
    sms.set(400, 0);
    let failing = app.send_text(&key, NO_APP, "Lost").await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(app.delivered(&key, failing).await["state"], "failed");
    // A broadcast to the partner's app users: one, into the hub.
    let broadcast = json!({"body": "Sale today"});
    let broadcast_id = app.post(&key, "/api/v1/broadcasts", broadcast).await.ok(202)["broadcast_id"].as_i64().unwrap();
    eventually("the broadcast's message is in the hub", || async {
        let b = app.get(&key, &format!("/api/v1/broadcasts/{broadcast_id}")).await.json;
        b["state"] == "completed" && b["states"]["sent"] == 1
    })
    .await;

    let report = app.get(&key, "/api/v1/analytics/messages?from=2026-12-07&to=2026-12-07").await.ok(200).clone();
    assert_eq!((report["from"].as_str(), report["currency"].as_str()), (Some("2026-12-07"), Some("EUR")));
    let totals = &report["totals"];
    // Accepted 5; sent: 3 into the hub (the template's, the fallen back one, the broadcast's), WhatsApp 1
    // (the fallback), SMS 1 ("Lost" fails); read 1 (marked read by the partner straight from sent: no
    // device or provider said delivered).
    assert_eq!(funnel(totals), [5, 5, 0, 1, 1, 2, 1], "{totals}");
    assert_eq!(totals["avg_time_to_read_s"], 90.0);
    assert_eq!(totals["cost"], 0.125, "a WhatsApp message and an SMS");
    let channels: Vec<(String, [i64; 7], Value)> = report["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["channel"].as_str().unwrap().to_string(), funnel(c), c["cost"].clone()))
        .collect();
    assert_eq!(
        channels,
        [
            ("inapp".to_string(), [0, 3, 0, 1, 0, 0, 0], json!(0.0)),
            ("sms".to_string(), [0, 1, 0, 0, 1, 1, 0], json!(0.075)),
            ("whatsapp".to_string(), [0, 1, 0, 0, 0, 1, 1], json!(0.05)),
        ],
        "{report}"
    );
    let templates = report["templates"].as_array().unwrap();
    assert_eq!(templates.len(), 1, "{templates:?}");
    assert_eq!(
        (templates[0]["template"].as_str(), funnel(&templates[0])),
        (Some("order_ready"), [1, 1, 0, 1, 0, 0, 0])
    );
    let broadcasts = report["broadcasts"].as_array().unwrap();
    assert_eq!(broadcasts.len(), 1, "{broadcasts:?}");
    assert_eq!(
        (broadcasts[0]["broadcast_id"].as_i64(), funnel(&broadcasts[0])),
        (Some(broadcast_id), [1, 1, 0, 0, 0, 0, 0])
    );

    // Narrowed to a channel, a template, a broadcast.
    let (app_ref, key_ref) = (&app, &key);
    let only = |query: String| async move {
        let path = format!("/api/v1/analytics/messages?from=2026-12-07&to=2026-12-07&{query}");
        funnel(&app_ref.get(key_ref, &path).await.ok(200)["totals"])
    };
    assert_eq!(only("channel=whatsapp".into()).await, [0, 1, 0, 0, 0, 1, 1]);
    assert_eq!(only("template=order_ready".into()).await, [1, 1, 0, 1, 0, 0, 0]);
    assert_eq!(only(format!("broadcast_id={broadcast_id}")).await, [1, 1, 0, 0, 0, 0, 0]);
    // By the hour: everything happened in the 08:00 hour.
    let hourly = app.get(&key, "/api/v1/analytics/messages?from=2026-12-07&to=2026-12-07&interval=hour").await;
    let hours = hourly.ok(200)["series"].as_array().unwrap().clone();
    assert_eq!(hours.len(), 24);
    assert_eq!((hours[8]["at"].as_str(), hours[8]["accepted"].as_i64()), (Some("2026-12-07 08:00:00"), Some(5)));
    assert_eq!(hours[8]["cost"], 0.125);
    assert_eq!(hours[9]["accepted"], 0);

    // The worker folds the deltas into the rollups: the same figures, from fewer rows.
    let deltas = || app.rows("message_rollup_deltas", "1 = 1");
    while hubbub_host::store::rollups::messages::fold(&app.state.db).await.unwrap() > 0 {}
    assert_eq!(deltas().await, 0);
    assert!(app.rows("message_rollups", "1 = 1").await > 0);
    let folded = app.get(&key, "/api/v1/analytics/messages?from=2026-12-07&to=2026-12-07").await.ok(200).clone();
    assert_eq!((&folded["totals"], &folded["channels"]), (&report["totals"], &report["channels"]));

    // Another partner's figures are its own; without prices, a paid try's cost is unknown.
    let theirs = app.get(&other, "/api/v1/analytics/messages?from=2026-12-07&to=2026-12-07").await.ok(200).clone();
    assert_eq!((funnel(&theirs["totals"]), &theirs["currency"]), ([0; 7], &Value::Null));
    app.request(Method::PUT, "/api/v1/settings/prices", Some(&key), Some(&json!({"currency": "EUR", "sms": 0.075})))
        .await
        .ok(200);
    let unpriced = app.get(&key, "/api/v1/analytics/messages?from=2026-12-07&to=2026-12-07").await.ok(200).clone();
    assert_eq!(unpriced["totals"]["cost"], Value::Null, "WhatsApp has no price now");

    // Bad input: 422 on the field.
    for (query, field) in [
        ("channel=fax", "channel"),
        ("broadcast_id=0", "broadcast_id"),
        ("from=2025-12-01&to=2026-12-07", "to"),
        ("interval=week", "interval"),
    ] {
        app.get(&key, &format!("/api/v1/analytics/messages?{query}")).await.field_error(field);
    }
    for (prices, field) in [
        (json!({"currency": "eur", "sms": 0.1}), "currency"),
        (json!({"sms": 0.1}), "currency"),
        (json!({"currency": "EUR", "whatsapp": -1}), "whatsapp"),
        (json!({"currency": "EUR", "sms": 101}), "sms"),
    ] {
        app.request(Method::PUT, "/api/v1/settings/prices", Some(&key), Some(&prices)).await.field_error(field);
    }
}
