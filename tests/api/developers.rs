//! Developer accounts (docs/api.md and the OpenAPI document): sign-up, keys, the approved catalog, template-only sends,
//! their webhooks, the 403 matrix, quota and rate limit.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, eventually};

const DEV_PHONE: &str = "+15557770000";
const USER: &str = "+15551230000";

async fn post_open(app: &TestApp, path: &str, body: Value) -> crate::common::Resp {
    app.request(Method::POST, path, None, Some(&body)).await
}

/// Signs a developer up and returns the `sk_dev_` API key.
async fn developer(app: &TestApp, phone: &str) -> String {
    post_open(app, "/api/v1/dev/signup", json!({"phone": phone, "email": "dev@example.com"})).await.ok(202);
    let code = app.last_code(phone).await;
    let r = post_open(app, "/api/v1/dev/verify", json!({"phone": phone, "code": code})).await;
    r.ok(200)["api_key"].as_str().unwrap().to_string()
}

/// A platform partner with approved templates, and another partner with its own.
async fn catalog(app: &TestApp) -> (String, String) {
    let platform = app.partner_with("hubbub", true).await;
    let acme = app.partner("acme").await;
    for (key, code, body, submit) in [
        (&platform, "welcome", "Welcome {{name}}!", true),
        (&platform, "draft_only", "Not yet {{x}}", false),
        (&acme, "acme_promo", "Acme {{x}}", true),
    ] {
        let t = app
            .post(
                key,
                "/api/v1/templates",
                json!({"code": code, "channel": "inapp", "category": "utility", "body": body}),
            )
            .await;
        if submit {
            app.post(key, &format!("/api/v1/templates/{}/submit", t.ok(201)["template_id"]), json!({})).await.ok(200);
        }
    }
    (platform, acme)
}

#[tokio::test]
async fn signup_verify_and_wrong_or_expired_codes() {
    let app = TestApp::start().await;
    post_open(&app, "/api/v1/dev/signup", json!({"phone": "123"})).await.field_error("phone");
    post_open(&app, "/api/v1/dev/signup", json!({"phone": DEV_PHONE, "email": "not-an-email"}))
        .await
        .field_error("email");
    post_open(&app, "/api/v1/dev/signup", json!({"phone": DEV_PHONE})).await.ok(202);
    let code = app.last_code(DEV_PHONE).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    post_open(&app, "/api/v1/dev/verify", json!({"phone": DEV_PHONE, "code": wrong})).await.error(401, "unauthorized");
    app.clock.advance_ms(10 * 60 * 1000 + 1);
    post_open(&app, "/api/v1/dev/verify", json!({"phone": DEV_PHONE, "code": code})).await.error(401, "unauthorized");
    post_open(&app, "/api/v1/dev/signup", json!({"phone": DEV_PHONE, "email": "dev@example.com"})).await.ok(202);
    let code = app.last_code(DEV_PHONE).await;
    let r = post_open(&app, "/api/v1/dev/verify", json!({"phone": DEV_PHONE, "code": code})).await;
    let body = r.ok(200).clone();
    let key = body["api_key"].as_str().unwrap();
    assert!(key.starts_with("sk_dev_"));
    assert_eq!(body["developer"]["phone"], DEV_PHONE);
    assert_eq!(body["developer"]["email"], "dev@example.com");
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT key_hash FROM developer_keys").fetch_all(app.state.db.reader()).await.unwrap();
    assert!(stored.iter().all(|h| h != key && h.len() == 64));
    app.get(key, "/api/v1/dev/keys").await.ok(200);
    // With the API key, a 12-hour session key (what the portal keeps for its tab, so a reload stays signed
    // in without the API key stored anywhere): a key of its own, of kind session, that ends in 12 hours.
    let session = body["session_key"].as_str().unwrap();
    assert!(session.starts_with("sk_dev_") && session != key);
    assert!(body["session_expires_at"].is_string());
    assert!(stored.len() == 2 && stored.iter().all(|h| h != session));
    let keys = app.get(session, "/api/v1/dev/keys").await.ok(200).clone();
    let kinds: Vec<&str> = keys["data"].as_array().unwrap().iter().map(|k| k["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["session", "api"], "newest first: {keys}");
    app.clock.advance_ms(12 * 3600 * 1000 + 1);
    app.get(session, "/api/v1/dev/keys").await.error(401, "unauthorized");
    app.get(key, "/api/v1/dev/keys").await.ok(200);
    // Verifying again is refused: sign in instead.
    post_open(&app, "/api/v1/dev/signup", json!({"phone": DEV_PHONE})).await.ok(202);
    let code = app.last_code(DEV_PHONE).await;
    post_open(&app, "/api/v1/dev/verify", json!({"phone": DEV_PHONE, "code": code})).await.error(409, "conflict");
}

#[tokio::test]
async fn session_keys_expire_and_keys_can_be_listed_and_revoked() {
    let app = TestApp::start().await;
    let api_key = developer(&app, DEV_PHONE).await;
    post_open(&app, "/api/v1/dev/signup", json!({"phone": DEV_PHONE})).await.ok(202);
    let code = app.last_code(DEV_PHONE).await;
    let r = post_open(&app, "/api/v1/dev/session", json!({"phone": DEV_PHONE, "code": code})).await;
    let session = r.ok(200)["api_key"].as_str().unwrap().to_string();
    assert!(session.starts_with("sk_dev_") && session != api_key);
    assert!(r.json["expires_at"].is_string());
    let keys = app.get(&session, "/api/v1/dev/keys").await;
    let data = keys.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 3, "the API key and the sign-up's session key, then this sign-in's");
    assert!(data.iter().all(|k| k["prefix"].as_str().unwrap().len() == 15 && k["active"] == true));
    assert!(!keys.json.to_string().contains(&session[15..]), "never the key itself");
    assert_eq!(data[0]["kind"], "session");
    // 12 hours later the session key is dead, the API key lives.
    app.clock.advance_ms(12 * 3600 * 1000 + 1);
    app.get(&session, "/api/v1/dev/keys").await.error(401, "unauthorized");
    app.get(&api_key, "/api/v1/dev/keys").await.ok(200);
    // Revocation by prefix.
    let prefix = &api_key[..15];
    let r = app.request(Method::DELETE, &format!("/api/v1/dev/keys/{prefix}"), Some(&api_key), None).await;
    assert_eq!(r.status, 204);
    app.get(&api_key, "/api/v1/dev/keys").await.error(401, "unauthorized");
    // Another developer cannot revoke someone else's key.
    let other = developer(&app, "+15557771111").await;
    app.request(Method::DELETE, &format!("/api/v1/dev/keys/{prefix}"), Some(&other), None)
        .await
        .error(404, "not_found");
}

#[tokio::test]
async fn the_catalog_is_the_platforms_approved_templates_only() {
    let app = TestApp::start().await;
    let key = developer(&app, DEV_PHONE).await;
    assert_eq!(app.get(&key, "/api/v1/dev/templates").await.ok(200)["data"], json!([]));
    catalog(&app).await;
    let r = app.get(&key, "/api/v1/dev/templates").await;
    let data = r.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["code"], "welcome");
    assert_eq!(data[0]["lang"], "en");
    assert_eq!(data[0]["variables"], json!(["name"]));
}

#[tokio::test]
async fn every_rejection_of_dev_messages() {
    let app = TestApp::start().await;
    let key = developer(&app, DEV_PHONE).await;
    catalog(&app).await;
    let send = |body: Value| app.post(&key, "/api/v1/dev/messages", body);
    send(json!({"phone": USER, "template_code": "welcome", "vars": {"name": "A"}, "body": "free text"}))
        .await
        .field_error("body");
    send(json!({"phone": USER, "template_code": "welcome", "vars": {"name": "A"}, "partner": "acme"}))
        .await
        .field_error("partner");
    send(json!({"phone": USER, "template_code": "welcome", "vars": {"name": "A"}, "media_url": "https://x.example/a.png"})).await.field_error("media_url");
    send(json!({"phone": USER, "vars": {}})).await.field_error("template_code");
    send(json!({"template_code": "welcome", "vars": {"name": "A"}})).await.field_error("phone");
    let r = send(json!({"phone": USER, "template_code": "nope"})).await;
    assert_eq!(r.error(422, "template_not_approved").as_deref(), Some("template_code"));
    send(json!({"phone": USER, "template_code": "draft_only", "vars": {"x": "1"}}))
        .await
        .error(422, "template_not_approved");
    send(json!({"phone": USER, "template_code": "acme_promo", "vars": {"x": "1"}}))
        .await
        .error(422, "template_not_approved");
    send(json!({"phone": USER, "template_code": "welcome", "lang": "de", "vars": {"name": "A"}}))
        .await
        .error(422, "template_not_approved");
    send(json!({"phone": USER, "template_code": "welcome"})).await.field_error("vars.name");
    let r = send(json!({"phone": USER, "template_code": "welcome", "vars": {"name": "Ana"}, "idempotency_key": "k1"}))
        .await;
    assert_eq!(r.ok(201)["body"], "Welcome Ana!");
    let again =
        send(json!({"phone": USER, "template_code": "welcome", "vars": {"name": "Ana"}, "idempotency_key": "k1"}))
            .await;
    assert_eq!(again.ok(201)["message_id"], r.json["message_id"]);
    send(json!({"phone": USER, "template_code": "welcome", "vars": {"name": "Bob"}, "idempotency_key": "k1"}))
        .await
        .error(409, "idempotency_conflict");
}

#[tokio::test]
async fn a_developer_message_reaches_the_user_and_its_status_the_developers_webhook() {
    let recv = FakeServer::start(200, 0).await;
    let platform_recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = developer(&app, DEV_PHONE).await;
    let (platform, _) = catalog(&app).await;
    app.request(
        Method::PUT,
        "/api/v1/settings/webhook",
        Some(&platform),
        Some(&json!({"webhook_url": platform_recv.url})),
    )
    .await
    .ok(200);
    let settings =
        app.request(Method::PUT, "/api/v1/dev/settings", Some(&key), Some(&json!({"webhook_url": recv.url}))).await;
    let secret = settings.ok(200)["webhook_secret"].as_str().unwrap().to_string();
    let user = app.login(USER).await;
    let m = app
        .post(&key, "/api/v1/dev/messages", json!({"phone": USER, "template_code": "welcome", "vars": {"name": "Ana"}}))
        .await
        .ok(201)
        .clone();
    eventually("the user has it", || async {
        app.get(&user, "/api/v1/me/messages").await.json["data"].as_array().is_some_and(|d| d.len() == 1)
    })
    .await;
    eventually("status at the developer's webhook", || async { !recv.received().is_empty() }).await;
    let got = &recv.received()[0];
    let payload = got.json();
    assert_eq!(payload["event"], "message.status");
    assert_eq!(payload["message_ref"], m["ref"]);
    let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    hmac::Mac::update(&mut mac, &got.body);
    let expected: String = hmac::Mac::finalize(mac).into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(got.headers["x-service-signature"].to_str().unwrap(), expected);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // (The platform may get its own template.status events; never the developer's message.status.)
    assert!(
        platform_recv.received().iter().all(|r| r.headers["x-service-event"] != "message.status"),
        "the platform partner does not get developers' events"
    );
}

#[tokio::test]
async fn the_403_matrix() {
    let app = TestApp::start().await;
    let dev = developer(&app, DEV_PHONE).await;
    let partner = app.partner("acme").await;
    let user = app.login(USER).await;
    for (method, path) in [
        (Method::GET, "/api/v1/messages"),
        (Method::POST, "/api/v1/messages"),
        (Method::GET, "/api/v1/templates"),
        (Method::POST, "/api/v1/accounts/link"),
        (Method::GET, "/api/v1/me/messages"),
        (Method::GET, "/api/v1/conversations"),
    ] {
        app.request(method.clone(), path, Some(&dev), Some(&json!({}))).await.error(403, "forbidden");
    }
    for (method, path) in [
        (Method::GET, "/api/v1/dev/templates"),
        (Method::POST, "/api/v1/dev/messages"),
        (Method::GET, "/api/v1/dev/keys"),
        (Method::PUT, "/api/v1/dev/settings"),
    ] {
        app.request(method.clone(), path, Some(&partner), Some(&json!({}))).await.error(403, "forbidden");
        app.request(method.clone(), path, Some(&user), Some(&json!({}))).await.error(403, "forbidden");
        app.request(method, path, Some("sk_dev_unknown"), Some(&json!({}))).await.error(401, "unauthorized");
    }
}

#[tokio::test]
async fn developers_have_a_daily_quota_and_a_stricter_rate_limit() {
    let app = TestApp::start_with(|c| {
        c.developer_daily_quota = 2;
        c.developer_rate_limit_per_s = 1;
        c.developer_rate_limit_burst = 6;
    })
    .await;
    let key = developer(&app, DEV_PHONE).await;
    catalog(&app).await;
    let send = || {
        app.post(
            &key,
            "/api/v1/dev/messages",
            json!({"phone": USER, "template_code": "welcome", "vars": {"name": "A"}}),
        )
    };
    send().await.ok(201);
    send().await.ok(201);
    let r = send().await;
    r.error(429, "rate_limited");
    assert!(r.headers["retry-after"].to_str().unwrap().parse::<u64>().unwrap() <= 86_400);
    app.clock.advance_ms(24 * 3600 * 1000);
    send().await.ok(201);
    // Burst of 6: the remaining tokens run out, partners are unaffected.
    let mut limited = false;
    for _ in 0..6 {
        if app.get(&key, "/api/v1/dev/keys").await.status == 429 {
            limited = true;
            break;
        }
    }
    assert!(limited, "the developer rate limit applies");
    let partner = app.partner("globex").await;
    app.get(&partner, "/api/v1/messages").await.ok(200);
}

#[tokio::test]
async fn the_dashboard_reads_my_messages_and_usage_and_tests_my_webhook() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.developer_daily_quota = 5).await;
    let key = developer(&app, DEV_PHONE).await;
    let other = developer(&app, "+15557770009").await;
    catalog(&app).await;
    // Before a webhook is set, the test says so.
    let none = app.post(&key, "/api/v1/dev/webhooks/test", json!({})).await.ok(200).clone();
    assert_eq!(none["ok"], false);
    assert!(none["error"].is_string());
    let mut refs = Vec::new();
    for name in ["Ana", "Bo"] {
        let m = app
            .post(
                &key,
                "/api/v1/dev/messages",
                json!({"phone": USER, "template_code": "welcome", "vars": {"name": name}}),
            )
            .await;
        refs.push(m.ok(201)["ref"].as_str().unwrap().to_string());
    }
    // My messages, newest first, paged; another developer's are not mine.
    let mine = app.get(&key, "/api/v1/dev/messages?limit=1").await.ok(200).clone();
    assert_eq!(mine["data"][0]["ref"], refs[1].as_str());
    assert_eq!(mine["data"][0]["body"], "Welcome Bo!");
    let cursor = mine["next_cursor"].as_str().unwrap();
    let older = app.get(&key, &format!("/api/v1/dev/messages?limit=1&cursor={cursor}")).await.ok(200).clone();
    assert_eq!(older["data"][0]["ref"], refs[0].as_str());
    assert!(app.get(&other, "/api/v1/dev/messages").await.ok(200)["data"].as_array().unwrap().is_empty());
    // Usage against the quota.
    let usage = app.get(&key, "/api/v1/dev/usage").await.ok(200).clone();
    assert_eq!((usage["sent_today"].as_i64(), usage["daily_quota"].as_i64()), (Some(2), Some(5)));
    assert!(usage["resets_at"].as_str().unwrap().ends_with("00:00:00"));
    // The webhook test: one signed sample event at my endpoint.
    app.request(Method::PUT, "/api/v1/dev/settings", Some(&key), Some(&json!({"webhook_url": recv.url}))).await.ok(200);
    let tested = app.post(&key, "/api/v1/dev/webhooks/test", json!({})).await.ok(200).clone();
    assert_eq!((tested["ok"].as_bool(), tested["status"].as_i64()), (Some(true), Some(200)));
    // The two sends' own status events may reach the endpoint too, once it is set; the test event is one.
    let got: Vec<_> = recv.received().into_iter().filter(|r| r.json()["test"] == true).collect();
    assert_eq!(got.len(), 1);
    assert!(got[0].headers["x-service-delivery"].to_str().unwrap().starts_with("dlv_test_"));
    // Partner keys and users are not developers.
    let user = app.login(USER).await;
    app.get(&user, "/api/v1/dev/usage").await.error(403, "forbidden");
}
