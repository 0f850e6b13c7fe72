//! WhatsApp outside the 24-hour window, against a fake Cloud API: template messages go as `type: template`
//! at any time; free-form text goes only to people who wrote in the last 24 hours (otherwise the try is
//! skipped and SMS takes over); `whatsapp` templates are Meta's to approve (submission, the status webhook,
//! the background poll).

use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, eventually, t, tries};
use hubbub_host::store::outbox::{self, Target};

const PHONE: &str = "+15551230000";

/// A host whose WhatsApp is the (fake) Cloud API with Meta's template review under account `waba-1`.
async fn host(wa: &FakeServer, sms: &FakeServer, sync_s: u64) -> TestApp {
    let (wa, sms) = (wa.clone(), sms.clone());
    TestApp::start_with(move |c| {
        crate::common::fake_providers(c, &wa, &sms);
        c.whatsapp_business_account_id = Some("waba-1".into());
        c.whatsapp_template_sync_s = sync_s;
    })
    .await
}

async fn template_events(app: &TestApp) -> Vec<Value> {
    let pid = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap().id;
    let events = outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("template.status")).await.unwrap();
    events.into_iter().map(|(_, _, p)| p).collect()
}

async fn create_template(app: &TestApp, key: &str, code: &str, body: &str) -> i64 {
    let t = json!({"code": code, "channel": "whatsapp", "lang": "en", "category": "utility", "body": body});
    app.post(key, "/api/v1/templates", t).await.ok(201)["template_id"].as_i64().unwrap()
}

#[tokio::test]
async fn free_form_text_goes_by_whatsapp_only_inside_the_24_hour_window() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(201, 0).await);
    let app = host(&wa, &sms, 300).await;
    let key = app.partner("acme").await;

    // Never wrote: the WhatsApp try is skipped (recorded), SMS takes over, and Meta is never called.
    let id = app.send_text(&key, PHONE, "Your parcel ships today").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(tries(&m), vec![t("whatsapp", "skipped", "outside_24h_window"), t("sms", "sent", "")]);
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("sms")));
    assert!(wa.received().is_empty());

    // A forged notification opens no window.
    let forged = json!({"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {"messages": [{"from": "15551230000", "timestamp": "1"}]}}]}]});
    let r = app
        .client
        .post(format!("{}/api/v1/providers/whatsapp/webhook", app.base))
        .header("x-hub-signature-256", hubbub_host::delivery::receipts::meta_signature("wrong", b"{}"))
        .body(forged.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // The person writes: for 24 hours free-form text goes by WhatsApp.
    app.whatsapp_wrote(PHONE).await;
    let id = app.send_text(&key, PHONE, "Out for delivery").await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(tries(&app.delivered(&key, id).await), vec![t("whatsapp", "sent", "")]);
    let sent = wa.received().last().unwrap().json();
    assert_eq!((sent["type"].as_str(), sent["to"].as_str()), (Some("text"), Some("15551230000")));

    // A day later the window has closed again.
    app.clock.advance_ms(24 * 60 * 60 * 1000 + 1_000);
    let id = app.send_text(&key, PHONE, "Delivered").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(tries(&m), vec![t("whatsapp", "skipped", "outside_24h_window"), t("sms", "sent", "")]);
    app.stop().await;
}

#[tokio::test]
async fn whatsapp_templates_are_meta_approved_and_then_sent_as_templates_at_any_time() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(201, 0).await);
    wa.answer("/waba-1/message_templates", 200, json!({"id": "77", "status": "PENDING", "category": "UTILITY"}));
    let app = host(&wa, &sms, 300).await;
    let key = app.partner("acme").await;
    let id = create_template(&app, &key, "order-shipped", "Hi {{name}}, order {{order}} shipped").await;

    // Submitting sends it to Meta's review: pending, with positional parameters and examples.
    let r = app.post(&key, &format!("/api/v1/templates/{id}/submit"), json!({})).await;
    assert_eq!(r.ok(200)["status"], "pending");
    let submitted = wa.received()[0].clone();
    assert_eq!(submitted.path, "/waba-1/message_templates");
    assert_eq!(submitted.headers["authorization"], "Bearer wa-token");
    let body = submitted.json();
    assert_eq!((body["name"].as_str(), body["language"].as_str()), (Some("order_shipped"), Some("en")));
    assert_eq!(body["category"], "UTILITY");
    assert_eq!(body["components"][0]["text"], "Hi {{1}}, order {{2}} shipped");
    assert_eq!(body["components"][0]["example"]["body_text"], json!([["name", "order"]]));
    assert!(template_events(&app).await.is_empty(), "pending is not a decision");
    // It is Meta's to decide: not in the operators' queue, and their review refuses it.
    let queue = crate::cli::hubbub(&app.db.url, &["template", "pending"]);
    assert!(queue.status.success() && !String::from_utf8_lossy(&queue.stdout).contains("order-shipped"));
    let review = crate::cli::hubbub(&app.db.url, &["template", "review", "--id", &id.to_string(), "--approve"]);
    assert!(!review.status.success() && String::from_utf8_lossy(&review.stderr).contains("Meta"), "{review:?}");

    // Before Meta approves, a send from it cannot use it on WhatsApp outside the window: SMS.
    let send = json!({"phone": PHONE, "template_code": "order-shipped", "vars": {"name": "Ana", "order": 42}});
    let m = app.post(&key, "/api/v1/messages", send.clone()).await;
    let m = app.delivered(&key, m.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(tries(&m), vec![t("whatsapp", "skipped", "outside_24h_window"), t("sms", "sent", "")]);

    // Meta approves (its webhook): approved, one template.status event however often it is told.
    let approved = json!([{"field": "message_template_status_update", "value": {"event": "APPROVED", "message_template_id": 77, "message_template_name": "order_shipped", "message_template_language": "en", "reason": "NONE"}}]);
    assert_eq!(app.whatsapp_notify(approved.clone()).await.ok(200)["templates"], 1);
    assert_eq!(app.whatsapp_notify(approved).await.ok(200)["templates"], 0);
    assert_eq!(app.get(&key, &format!("/api/v1/templates/{id}")).await.ok(200)["status"], "approved");
    let events = template_events(&app).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0]["status"].as_str(), events[0]["channel"].as_str()), (Some("approved"), Some("whatsapp")));

    // Now a send from it goes by WhatsApp as a template message, outside the window too.
    let before = wa.received().len();
    let m = app.post(&key, "/api/v1/messages", send).await;
    let m = app.delivered(&key, m.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(tries(&m), vec![t("whatsapp", "sent", "")]);
    assert_eq!(m["vars"], json!({"name": "Ana", "order": 42}));
    let sent = wa.received()[before].json();
    assert_eq!(sent["type"], "template");
    assert_eq!(sent["template"]["name"], "order_shipped");
    assert_eq!(sent["template"]["language"]["code"], "en");
    let parameters = &sent["template"]["components"][0]["parameters"];
    assert_eq!(*parameters, json!([{"type": "text", "text": "Ana"}, {"type": "text", "text": "42"}]));
    app.stop().await;
}

#[tokio::test]
async fn meta_decisions_are_polled_and_refusals_or_outages_are_reported() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(201, 0).await);
    wa.answer("/waba-1/message_templates", 200, json!({"id": "88", "status": "PENDING"}));
    wa.answer("/88", 200, json!({"id": "88", "status": "PENDING"}));
    let app = host(&wa, &sms, 1).await;
    let key = app.partner("acme").await;
    let id = create_template(&app, &key, "promo", "Sale on {{item}}").await;
    app.post(&key, &format!("/api/v1/templates/{id}/submit"), json!({})).await.ok(200);

    // The poll asks Meta about it; a rejection arrives that way with its reason.
    eventually("the poll asks Meta", || async { wa.received().iter().any(|r| r.path == "/88") }).await;
    wa.answer("/88", 200, json!({"id": "88", "status": "REJECTED", "rejected_reason": "INVALID_FORMAT"}));
    eventually("the rejection is applied", || async {
        app.get(&key, &format!("/api/v1/templates/{id}")).await.json["status"] == "rejected"
    })
    .await;
    let record = app.get(&key, &format!("/api/v1/templates/{id}")).await;
    assert_eq!(record.ok(200)["rejection_reason"], "rejected by Meta: INVALID_FORMAT");
    let events = template_events(&app).await;
    assert_eq!(events.iter().filter(|e| e["status"] == "rejected").count(), 1);

    // Meta refuses a submission outright: rejected, with Meta's words.
    wa.answer("/waba-1/message_templates", 400, json!({"error": {"message": "Invalid parameter", "code": 100}}));
    let other = create_template(&app, &key, "news", "Our news").await;
    let r = app.post(&key, &format!("/api/v1/templates/{other}/submit"), json!({})).await;
    assert_eq!(r.ok(200)["status"], "rejected");
    assert!(r.json["rejection_reason"].as_str().unwrap().contains("Invalid parameter"), "{}", r.json);

    // Meta cannot be reached: 503, and the template is untouched (still a draft, to submit again).
    wa.answer("/waba-1/message_templates", 500, json!({"error": {"message": "try later"}}));
    let third = create_template(&app, &key, "later", "Later").await;
    let r = app.post(&key, &format!("/api/v1/templates/{third}/submit"), json!({})).await;
    r.error(503, "unavailable");
    assert_eq!(app.get(&key, &format!("/api/v1/templates/{third}")).await.ok(200)["status"], "draft");
    app.stop().await;
}
