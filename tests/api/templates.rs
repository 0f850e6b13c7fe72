//! Templates (docs/api.md and the OpenAPI document): create, list, submit with the automatic and manual review.

use serde_json::{Value, json};

use crate::common::TestApp;
use hubbub_host::store::outbox::{self, Target};

async fn partner_id(app: &TestApp, code: &str) -> i64 {
    hubbub_host::store::partners::find_by_code(&app.state.db, code).await.unwrap().unwrap().id
}

#[tokio::test]
async fn create_returns_a_draft_with_variables_and_duplicates_conflict() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let body = json!({"code": "welcome", "channel": "whatsapp", "lang": "en", "category": "utility", "body": "Hi {{name}}, order {{ order_id }} ships {{when}}. Bye {{name}}"});
    let r = app.post(&key, "/api/v1/templates", body.clone()).await;
    let t = r.ok(201);
    assert!(t["template_id"].as_i64().is_some());
    assert_eq!(t["status"], "draft");
    assert_eq!(t["variables"], json!(["name", "order_id", "when"]));
    assert_eq!(t["rejection_reason"], Value::Null);
    assert_eq!(t["category"], "utility");
    assert!(t["created_at"].as_str().unwrap().len() == 19);
    app.post(&key, "/api/v1/templates", body.clone()).await.error(409, "conflict");
    // Same code on another channel or language is a different template.
    let mut other = body.clone();
    other["channel"] = json!("sms");
    app.post(&key, "/api/v1/templates", other).await.ok(201);
    let mut other = body.clone();
    other["lang"] = json!("pt-BR");
    app.post(&key, "/api/v1/templates", other).await.ok(201);
    // Another partner may use the same code.
    let globex = app.partner("globex").await;
    app.post(&globex, "/api/v1/templates", body).await.ok(201);
    let list = app.get(&key, "/api/v1/templates").await;
    let data = list.ok(200)["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    assert_eq!(data[0]["lang"], "pt-BR", "newest first");
}

#[tokio::test]
async fn create_validates_every_field() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let ok = json!({"code": "a", "channel": "inapp", "lang": "en", "category": "marketing", "body": "x"});
    for (field, bad) in [
        ("code", json!("Bad Code")),
        ("code", json!(null)),
        ("channel", json!("email")),
        ("lang", json!("english!")),
        ("category", json!("spam")),
        ("category", json!(null)),
        ("body", json!("")),
        ("body", json!("   ")),
    ] {
        let mut body = ok.clone();
        body[field] = bad;
        app.post(&key, "/api/v1/templates", body).await.field_error(field);
    }
    let mut no_lang = ok.clone();
    no_lang.as_object_mut().unwrap().remove("lang");
    assert_eq!(app.post(&key, "/api/v1/templates", no_lang).await.ok(201)["lang"], "en");
}

#[tokio::test]
async fn auto_review_approves_or_rejects_and_records_template_status() {
    let app = TestApp::start_with(|c| {
        c.dev = false;
        c.template_review = hubbub_host::config::TemplateReview::Auto;
    })
    .await;
    let key = app.partner("acme").await;
    let good = app
        .post(
            &key,
            "/api/v1/templates",
            json!({"code": "good", "channel": "inapp", "category": "utility", "body": "Hi {{name}}"}),
        )
        .await;
    let good_id = good.ok(201)["template_id"].as_i64().unwrap();
    let bad = app
        .post(
            &key,
            "/api/v1/templates",
            json!({"code": "bad", "channel": "inapp", "category": "utility", "body": "Hi {{name"}),
        )
        .await;
    let bad_id = bad.ok(201)["template_id"].as_i64().unwrap();
    let badname = app
        .post(
            &key,
            "/api/v1/templates",
            json!({"code": "badname", "channel": "inapp", "category": "utility", "body": "Hi {{first name}}"}),
        )
        .await;
    let badname_id = badname.ok(201)["template_id"].as_i64().unwrap();

    let r = app.post(&key, &format!("/api/v1/templates/{good_id}/submit"), json!({})).await;
    assert_eq!(r.ok(200)["status"], "approved");
    let r = app.post(&key, &format!("/api/v1/templates/{bad_id}/submit"), json!({})).await;
    assert_eq!(r.ok(200)["status"], "rejected");
    assert!(r.json["rejection_reason"].as_str().unwrap().contains("unbalanced"));
    let r = app.post(&key, &format!("/api/v1/templates/{badname_id}/submit"), json!({})).await;
    assert_eq!(r.ok(200)["status"], "rejected");
    assert!(r.json["rejection_reason"].as_str().unwrap().contains("identifier"));
    // An approved template cannot be submitted again.
    app.post(&key, &format!("/api/v1/templates/{good_id}/submit"), json!({})).await.error(409, "conflict");
    // A rejected template cannot be used to send.
    let r = app
        .post(&key, "/api/v1/messages", json!({"phone": "+15551230000", "template_code": "bad", "vars": {"name": "x"}}))
        .await;
    r.error(422, "template_not_approved");

    let pid = partner_id(&app, "acme").await;
    let events = outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("template.status")).await.unwrap();
    assert_eq!(events.len(), 3);
    let approved = events.iter().map(|(_, _, p)| p).find(|p| p["template_id"] == good_id).unwrap();
    assert_eq!(approved["event"], "template.status");
    assert_eq!(approved["partner"], "acme");
    assert_eq!(approved["code"], "good");
    assert_eq!(approved["lang"], "en");
    assert_eq!(approved["channel"], "inapp");
    assert_eq!(approved["status"], "approved");
    assert_eq!(approved["reason"], Value::Null);
    assert!(approved["at"].as_str().unwrap().ends_with('Z'));
    let rejected = events.iter().map(|(_, _, p)| p).find(|p| p["template_id"] == bad_id).unwrap();
    assert_eq!(rejected["status"], "rejected");
    assert!(rejected["reason"].as_str().is_some());
}

#[tokio::test]
async fn manual_review_leaves_templates_pending_until_an_operator_decides() {
    let app = TestApp::start_with(|c| {
        c.dev = false;
        c.template_review = hubbub_host::config::TemplateReview::Manual;
    })
    .await;
    let key = app.partner("acme").await;
    let t = app
        .post(
            &key,
            "/api/v1/templates",
            json!({"code": "promo", "channel": "sms", "category": "marketing", "body": "Sale {{pct}}"}),
        )
        .await;
    let id = t.ok(201)["template_id"].as_i64().unwrap();
    let r = app.post(&key, &format!("/api/v1/templates/{id}/submit"), json!({})).await;
    assert_eq!(r.ok(200)["status"], "pending");
    app.post(&key, &format!("/api/v1/templates/{id}/submit"), json!({})).await.error(409, "conflict");
    let pid = partner_id(&app, "acme").await;
    assert!(
        outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("template.status")).await.unwrap().is_empty(),
        "pending is not a decision"
    );
    // The operator's command approves it.
    let out = crate::cli::hubbub(&app.db.url, &["template", "review", "--id", &id.to_string(), "--approve"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = app.get(&key, &format!("/api/v1/templates/{id}")).await;
    assert_eq!(got.ok(200)["status"], "approved");
    let events = outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("template.status")).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].2["status"], "approved");
}

#[tokio::test]
async fn partners_may_send_with_their_draft_templates() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(
        &key,
        "/api/v1/templates",
        json!({"code": "d", "channel": "inapp", "category": "utility", "body": "Draft {{x}}"}),
    )
    .await
    .ok(201);
    let r = app
        .post(&key, "/api/v1/messages", json!({"phone": "+15551230000", "template_code": "d", "vars": {"x": "ok"}}))
        .await;
    assert_eq!(r.ok(201)["rendered_body"], "Draft ok");
}
