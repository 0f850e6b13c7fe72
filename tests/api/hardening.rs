//! The holes a security review found, one test each (each fails on the code before its fix), on both
//! databases.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hubbub_host::clock::ManualClock;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{
    FakeServer, Resp, TEST_JWT_SECRET, TEST_SECRET_KEY, TestApp, TestDb, eventually, spawn_server, test_config,
};

const PHONE: &str = "+15551230000";

fn postgres() -> bool {
    std::env::var("HUBBUB_TEST_DATABASE_URL").is_ok_and(|u| u.starts_with("postgres"))
}

/// An HS256 JWT for `sub`, signed with `key`, built by hand (as an attacker would).
fn forge_jwt(key: &[u8], sub: &str) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(json!({"sub": sub, "iat": 0, "exp": 4_000_000_000i64}).to_string());
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(format!("{header}.{claims}").as_bytes());
    format!("{header}.{claims}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

/// A user linked to the partner, logged in; returns the token.
async fn linked_user(app: &TestApp, key: &str, phone: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.login(phone).await
}

async fn post_raw(app: &TestApp, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    let mut req = app.client.post(format!("{}{path}", app.base)).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    Resp::from(req.body(body.to_string()).send().await.unwrap()).await
}

#[tokio::test]
async fn an_empty_jwt_secret_counts_as_unset_and_a_short_one_refuses_to_start() {
    // The forger's tokens are real HS256 tokens: one signed with a host's secret is accepted.
    let normal = TestApp::start().await;
    normal.get(&forge_jwt(TEST_JWT_SECRET.as_bytes(), PHONE), "/api/v1/me/messages").await.ok(200);

    // An empty setting is "unset": a secret is generated, and a token signed with the empty key is refused.
    let app = TestApp::start_with(|c| c.jwt_secret = Some(String::new())).await;
    app.get(&forge_jwt(b"", PHONE), "/api/v1/me/messages").await.error(401, "unauthorized");
    let token = app.login(PHONE).await;
    app.get(&token, "/api/v1/me/messages").await.ok(200);

    // A set secret under 32 bytes: the host does not start, and says why.
    let db = TestDb::new().await;
    let mut config = test_config(&db.url);
    config.jwt_secret = Some("x".repeat(31));
    let err = hubbub_host::prepare(config, Arc::new(ManualClock::new(0))).await.err().expect("refuses to start");
    assert!(err.to_string().contains("HUBBUB_JWT_SECRET") && err.to_string().contains("32"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .arg("serve")
        .env("HUBBUB_DATABASE_URL", &db.url)
        .env("HUBBUB_LISTEN", "127.0.0.1:0")
        .env("HUBBUB_SECRET_KEY", TEST_SECRET_KEY)
        .env("HUBBUB_JWT_SECRET", "short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 32 bytes"), "{out:?}");
}

#[tokio::test]
async fn template_rendering_cannot_amplify_a_small_request() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let body = "{{a}}".repeat(5_000);
    let t = app
        .post(
            &key,
            "/api/v1/templates",
            json!({"code": "boom", "channel": "inapp", "category": "utility", "body": body}),
        )
        .await;
    let id = t.ok(201)["template_id"].clone();
    app.post(&key, &format!("/api/v1/templates/{id}/submit"), json!({})).await.ok(200);
    // 25 KB of template and a 20 KB variable would render 100 MB: refused before it is built.
    let huge = json!({"phone": PHONE, "template_code": "boom", "vars": {"a": "x".repeat(20_000)}});
    app.post(&key, "/api/v1/messages", huge).await.field_error("vars");
    // The same cap as a body sent directly.
    app.send_text(&key, PHONE, &"x".repeat(64 * 1024 + 1)).await.field_error("body");
    app.send_text(&key, PHONE, &"x".repeat(64 * 1024)).await.ok(201);
    let fits = json!({"phone": PHONE, "template_code": "boom", "vars": {"a": "xy"}});
    assert_eq!(app.post(&key, "/api/v1/messages", fits).await.ok(201)["rendered_body"].as_str().unwrap().len(), 10_000);
    let listed = app.get(&key, "/api/v1/messages").await;
    assert_eq!(listed.ok(200)["data"].as_array().unwrap().len(), 2, "nothing of the refused sends was stored");
}

#[tokio::test]
async fn user_content_is_never_served_as_a_page_of_the_service() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let script = STANDARD.encode("<html><script>fetch('/api/v1/me/messages')</script></html>");
    for (mime, inline) in [
        ("text/html", false),
        ("image/svg+xml", false),
        ("application/xhtml+xml", false),
        ("text/xml", false),
        ("application/pdf", false),
        ("image/png", true),
        ("audio/mpeg", true),
        ("video/mp4", true),
    ] {
        let send = json!({"phone": PHONE, "content_type": "document", "media_base64": script, "media_mimetype": mime, "media_filename": "x.bin"});
        let m = app.post(&key, "/api/v1/messages", send).await.ok(201).clone();
        let media = app.client.get(format!("{}{}", app.base, m["media"]["url"].as_str().unwrap())).bearer_auth(&key);
        let content = app.client.get(format!("{}/api/v1/content/{}", app.base, m["ref"].as_str().unwrap()));
        for response in [media.send().await.unwrap(), content.send().await.unwrap()] {
            assert_eq!(response.status(), 200);
            let h = response.headers();
            assert_eq!(h["x-content-type-options"], "nosniff", "{mime}");
            assert!(h["content-security-policy"].to_str().unwrap().starts_with("sandbox"), "{mime}");
            let disposition = h["content-disposition"].to_str().unwrap();
            assert_eq!(disposition.starts_with("inline"), inline, "{mime}: {disposition}");
            assert_eq!(disposition.starts_with("attachment"), !inline, "{mime}: {disposition}");
        }
    }
    // The newsletter reader keeps its sandboxed CSP, and every API response says nosniff.
    let html =
        json!({"phone": PHONE, "content_type": "html", "subject": "News", "html": "<p>Hi</p><script>x()</script>"});
    let m = app.post(&key, "/api/v1/messages", html).await.ok(201).clone();
    let r = app.client.get(format!("{}/api/v1/content/{}", app.base, m["ref"].as_str().unwrap())).send().await.unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.starts_with("sandbox") && csp.contains("default-src 'none'"), "{csp}");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(app.get(&key, "/api/v1/messages").await.headers["x-content-type-options"], "nosniff");
}

#[tokio::test]
async fn a_developer_email_changes_only_with_its_own_verified_code() {
    const DEV: &str = "+15557770001";
    let app = TestApp::start().await;
    let open = |path: &'static str, body: Value| {
        let app = &app;
        async move { app.request(Method::POST, path, None, Some(&body)).await }
    };
    let stored = |phone: &'static str| {
        let app = &app;
        async move { hubbub_host::store::developers::find_by_phone(&app.state.db, phone).await.unwrap().unwrap().email }
    };
    open("/api/v1/dev/signup", json!({"phone": DEV, "email": "owner@example.com"})).await.ok(202);
    assert_eq!(stored(DEV).await, None, "nothing is stored before the code is verified");
    let code = app.last_code(DEV).await;
    let r = open("/api/v1/dev/verify", json!({"phone": DEV, "code": code})).await;
    assert_eq!(r.ok(200)["developer"]["email"], "owner@example.com");
    // Anyone can ask for a code for this phone with another e-mail: nothing changes…
    open("/api/v1/dev/signup", json!({"phone": DEV, "email": "attacker@example.net"})).await.ok(202);
    assert_eq!(stored(DEV).await.as_deref(), Some("owner@example.com"));
    // …not even when the owner signs in with the code that request sent.
    let code = app.last_code(DEV).await;
    let r = open("/api/v1/dev/session", json!({"phone": DEV, "code": code})).await;
    assert_eq!(r.ok(200)["developer"]["email"], "owner@example.com");
    assert_eq!(stored(DEV).await.as_deref(), Some("owner@example.com"));
}

#[tokio::test]
async fn webhook_and_bot_urls_reach_only_globally_routable_addresses() {
    let app = TestApp::start_with(|c| c.dev = false).await;
    let key = app.partner("acme").await;
    let refused = [
        "https://[::127.0.0.1]/h",
        "https://[::ffff:0:7f00:1]/h",
        "https://[64:ff9b::a9fe:a9fe]/h",
        "https://[2002:7f00:1::1]/h",
        "https://[fec0::1]/h",
        "https://[ff02::1]/h",
        "https://0.0.0.1/h",
        "https://198.18.0.1/h",
        "https://240.0.0.1/h",
        "https://192.0.0.1/h",
        "https://224.0.0.1/h",
        "https://0x7f.1/h",
        "https://hooks.example.com/h\r\nX-Injected: 1",
    ];
    for (i, url) in refused.iter().enumerate() {
        let r =
            app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&json!({"webhook_url": url}))).await;
        r.field_error("webhook_url");
        let bot = json!({"code": format!("b{i}"), "name": "B", "runtime_mode": "webhook", "webhook_url": url});
        app.post(&key, "/api/v1/bots", bot).await.field_error("webhook_url");
    }
    let public = json!({"webhook_url": "https://93.184.215.14/h"});
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&public)).await.ok(200);
}

#[tokio::test]
async fn webhooks_ignore_proxies_named_in_the_environment() {
    let proxy = FakeServer::start(200, 0).await;
    let receiver = FakeServer::start(200, 0).await;
    let db = TestDb::new().await;
    let out = crate::cli::hubbub(&db.url, &["partner", "create", "--code", "acme", "--name", "Acme"]);
    let key: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = key["api_key"].as_str().unwrap().to_string();
    let env = [
        ("HUBBUB_DEV", "1"),
        ("HUBBUB_JWT_SECRET", TEST_JWT_SECRET),
        ("HTTP_PROXY", proxy.url.as_str()),
        ("http_proxy", proxy.url.as_str()),
        ("HTTPS_PROXY", proxy.url.as_str()),
        ("ALL_PROXY", proxy.url.as_str()),
    ];
    let (mut child, port) = spawn_server(&db.url, &env).await;
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let client = reqwest::Client::new();
    let set = client
        .put(format!("{base}/settings/webhook"))
        .bearer_auth(&key)
        .json(&json!({"webhook_url": format!("{}/hook", receiver.url)}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let test = client.post(format!("{base}/webhooks/test")).bearer_auth(&key).json(&json!({})).send().await.unwrap();
    let outcome: Value = test.json().await.unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(outcome["ok"], true, "{outcome}");
    assert_eq!(receiver.received().len(), 1);
    assert!(proxy.received().is_empty(), "the webhook went through the proxy");
}

#[tokio::test]
async fn uploads_are_refused_when_compilers_are_busy_and_never_stall_precompiled_bots() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_path_buf();
    let app = TestApp::start_with(move |c| {
        c.bot_max_loaded = 1;
        c.component_cache_dir = dir;
        c.component_limit = 4 << 20;
    })
    .await;
    let key = app.partner("acme").await;
    let upload = |code: &'static str, bytes: Vec<u8>| {
        let (app, key) = (&app, &key);
        async move {
            let r = app
                .client
                .put(format!("{}/api/v1/bots/{code}/component", app.base))
                .bearer_auth(key)
                .header("content-type", "application/wasm")
                .body(bytes)
                .send()
                .await
                .unwrap();
            Resp::from(r).await
        }
    };
    for code in ["chat", "shop", "signup"] {
        app.post(&key, "/api/v1/bots", json!({"code": code, "name": code, "runtime_mode": "local"})).await.ok(201);
    }
    upload("chat", crate::common::wasm("chat")).await.ok(200);
    upload("shop", crate::common::wasm("shop")).await.ok(200);
    assert_eq!(app.state.runtime.loaded_count(), 1, "chat was dropped from memory; its artifact stays");

    // A long compilation holds the only compiler slot: a new component is refused at once…
    let slot = app.state.runtime.occupy_compiler().expect("a free compiler slot");
    let busy = upload("signup", crate::common::wasm("signup")).await;
    busy.error(503, "unavailable");
    assert!(busy.headers.get("retry-after").is_some());
    // …while a precompiled bot loads from its artifact and answers without waiting.
    let token = linked_user(&app, &key, PHONE).await;
    let r = tokio::time::timeout(Duration::from_secs(5), app.post(&token, "/api/v1/me/bots/chat/sessions", json!({})))
        .await
        .expect("a precompiled bot never waits for a compilation");
    assert!(r.ok(201)["steps"].as_array().is_some_and(|s| !s.is_empty()));
    drop(slot);
    upload("signup", crate::common::wasm("signup")).await.ok(200);

    // Over the limit is 413, and no upload file is left behind.
    upload("signup", vec![0u8; (4 << 20) + 1]).await.error(413, "payload_too_large");
    let leftovers: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("upload-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test]
async fn signed_inbound_bot_events_apply_once_and_steps_are_appended() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let bot = json!({"code": "remote", "name": "Remote", "runtime_mode": "webhook", "webhook_url": recv.url});
    let created = app.post(&key, "/api/v1/bots", bot).await.ok(201).clone();
    let (token, secret) = (created["bot_token"].as_str().unwrap(), created["webhook_secret"].as_str().unwrap());
    let user = linked_user(&app, &key, PHONE).await;
    let session = app.post(&user, "/api/v1/me/bots/remote/sessions", json!({})).await.ok(201)["session"].clone();
    let reply = |text: &str| {
        json!({"event": "reply", "data": {"session": session, "steps": [{"type": "message", "text": text}]}})
            .to_string()
    };
    let path = "/api/v1/bots/remote/webhook";
    let now = (app.now() / 1000).to_string();
    let signed = |id: &str, ts: &str, body: &str| {
        let sig = hubbub_host::signing::standard_signature(secret, id, ts.parse().unwrap(), body.as_bytes());
        [
            ("webhook-id".to_string(), id.to_string()),
            ("webhook-timestamp".into(), ts.into()),
            ("webhook-signature".into(), sig),
        ]
    };
    let send = |headers: [(String, String); 3], body: String| {
        let app = &app;
        async move {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            post_raw(app, path, &h, &body).await
        }
    };
    let first = reply("first");
    assert_eq!(send(signed("evt_1", &now, &first), first.clone()).await.ok(200)["ok"], true);
    // The same signed event again (a replay, or the bot's retry): acknowledged, applied once.
    let again = send(signed("evt_1", &now, &first), first.clone()).await;
    assert_eq!(again.ok(200)["duplicate"], true);
    // A stale timestamp, a tampered body, an id without a timestamp: refused.
    let stale = (app.now() / 1000 - 301).to_string();
    send(signed("evt_2", &stale, &first), first.clone()).await.error(401, "unauthorized");
    let mut tampered = signed("evt_3", &now, &first);
    tampered[0].1 = "evt_4".into();
    send(tampered, first.clone()).await.error(401, "unauthorized");
    let no_ts =
        post_raw(&app, path, &[("authorization", &format!("Bearer {token}")), ("webhook-id", "evt_5")], &first).await;
    no_ts.error(401, "unauthorized");
    // Events authenticated the older ways are de-duplicated too when they carry an id and a timestamp.
    let second = reply("second");
    let bearer = format!("Bearer {token}");
    let headers = [("authorization", bearer.as_str()), ("webhook-id", "evt_6"), ("webhook-timestamp", now.as_str())];
    assert_eq!(post_raw(&app, path, &headers, &second).await.ok(200)["ok"], true);
    assert_eq!(post_raw(&app, path, &headers, &second).await.ok(200)["duplicate"], true);
    // Steps are appended in order, each once.
    let got = app.get(&user, &format!("/api/v1/me/bots/remote/sessions/{}", session.as_str().unwrap())).await;
    let texts: Vec<&str> =
        got.ok(200)["steps"].as_array().unwrap().iter().map(|s| s["text"].as_str().unwrap()).collect();
    assert_eq!(texts, vec!["first", "second"]);
}

#[tokio::test]
async fn a_replayed_failure_receipt_sends_no_second_sms() {
    let wa = FakeServer::start(200, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    // Inside the 24-hour window: free-form WhatsApp text may go.
    app.whatsapp_wrote(PHONE).await;
    let id = app.send_text(&key, PHONE, "your parcel").await.ok(201)["message_id"].as_i64().unwrap();
    let wamid = app.delivered(&key, id).await["attempts"][0]["provider_ref"].as_str().unwrap().to_string();
    let failed = json!({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [{"field": "messages", "value": {"statuses": [
        {"id": wamid, "status": "failed", "errors": [{"code": 131047, "title": "Re-engagement message"}]}
    ]}}]}]})
    .to_string();
    let signature = hubbub_host::delivery::receipts::meta_signature("app-secret", failed.as_bytes());
    let headers = [("x-hub-signature-256", signature.as_str())];
    let post = || post_raw(&app, "/api/v1/providers/whatsapp/webhook", &headers, &failed);
    assert_eq!(post().await.ok(200)["applied"], 1);
    eventually("the SMS fallback", || async { sms.received().len() == 1 }).await;
    for _ in 0..3 {
        post().await.ok(200);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sms.received().len(), 1, "a replayed failure must not send another SMS");
    assert_eq!(app.message(&key, id).await["attempts"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn each_partner_sees_only_the_display_name_it_gave() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let name = |key: &str| {
        let (app, key) = (&app, key.to_string());
        async move { app.get(&key, &format!("/api/v1/accounts/{PHONE}")).await.ok(200)["display_name"].clone() }
    };
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE, "display_name": "Ana (Acme)"})).await.ok(200);
    let r = app.post(&globex, "/api/v1/accounts/link", json!({"phone": PHONE})).await;
    assert_eq!(r.ok(200)["account"]["display_name"], Value::Null, "globex gave no name and sees none");
    assert_eq!(name(&globex).await, Value::Null);
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": PHONE, "display_name": "A. Globex"})).await.ok(200);
    assert_eq!(name(&globex).await, "A. Globex");
    assert_eq!(name(&acme).await, "Ana (Acme)", "another partner's name never replaces this one's");
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE, "fields": {}})).await.ok(200);
    assert_eq!(name(&acme).await, "Ana (Acme)", "kept when not given again");
    let token = app.login(PHONE).await;
    assert_eq!(app.get(&token, "/api/v1/me/account").await.ok(200)["display_name"], "Ana (Acme)");
}

#[tokio::test]
async fn code_routes_are_limited_per_client_address_and_for_the_host() {
    let app = TestApp::start_with(|c| c.code_rate_limit_per_ip_per_min = 3).await;
    let start = |phone: String, forwarded: Option<&'static str>| {
        let app = &app;
        async move {
            let body = json!({"phone": phone}).to_string();
            let headers: Vec<(&str, &str)> = forwarded.map(|f| ("x-forwarded-for", f)).into_iter().collect();
            post_raw(app, "/api/v1/auth/otp/start", &headers, &body).await
        }
    };
    for i in 0..3 {
        start(format!("+1555000000{i}"), None).await.ok(202);
    }
    let refused = start("+15550000009".into(), None).await;
    refused.error(429, "rate_limited");
    assert!(refused.headers.get("retry-after").is_some());
    // The bucket covers every code route, and X-Forwarded-For from a peer that is not a trusted proxy
    // changes nothing.
    start("+15550000008".into(), Some("203.0.113.7")).await.error(429, "rate_limited");
    let verify = json!({"phone": "+15550000000", "code": "123456"}).to_string();
    post_raw(&app, "/api/v1/auth/otp/verify", &[], &verify).await.error(429, "rate_limited");
    let signup = json!({"phone": "+15550000007"}).to_string();
    post_raw(&app, "/api/v1/dev/signup", &[], &signup).await.error(429, "rate_limited");

    // Behind a trusted proxy each client has its own bucket, and the host's limit bounds them all.
    let proxied = TestApp::start_with(|c| {
        c.code_rate_limit_per_ip_per_min = 2;
        c.code_rate_limit_global_per_min = 5;
        c.trusted_proxies = vec!["127.0.0.1".into()];
    })
    .await;
    let start = |n: u32, client: &'static str| {
        let app = &proxied;
        async move {
            let body = json!({"phone": format!("+1555100{n:04}")}).to_string();
            post_raw(app, "/api/v1/auth/otp/start", &[("x-forwarded-for", client)], &body).await
        }
    };
    start(1, "198.51.100.1").await.ok(202);
    start(2, "198.51.100.1").await.ok(202);
    start(3, "198.51.100.1").await.error(429, "rate_limited");
    start(4, "198.51.100.2").await.ok(202);
    start(5, "198.51.100.2").await.ok(202);
    start(6, "198.51.100.3").await.ok(202);
    start(7, "198.51.100.4").await.error(429, "rate_limited");
}

#[tokio::test]
async fn smaller_holes_stay_closed() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;

    // allowed_ips is checked before any credential: a wrong secret from outside is 403, like a right one.
    let bot = app.post(&key, "/api/v1/bots", json!({"code": "hook", "name": "Hook"})).await.ok(201).clone();
    let (token, secret) = (bot["bot_token"].as_str().unwrap(), bot["webhook_secret"].as_str().unwrap());
    let ping = json!({"event": "ping"}).to_string();
    app.request(Method::PATCH, "/api/v1/bots/hook", Some(&key), Some(&json!({"allowed_ips": "10.0.0.1"})))
        .await
        .ok(200);
    let path = "/api/v1/bots/hook/webhook";
    post_raw(&app, path, &[("x-service-bot-secret", "whsec_wrong")], &ping).await.error(403, "forbidden");
    post_raw(&app, path, &[("x-service-bot-secret", secret)], &ping).await.error(403, "forbidden");
    // An IPv4-mapped entry matches the IPv4 caller.
    let mapped = json!({"allowed_ips": "::ffff:127.0.0.1"});
    app.request(Method::PATCH, "/api/v1/bots/hook", Some(&key), Some(&mapped)).await.ok(200);
    post_raw(&app, path, &[("x-service-bot-secret", secret)], &ping).await.ok(200);
    app.get(token, "/api/v1/bots/hook").await.ok(200);

    // Media answers 403 to developer keys and bot tokens (the contract's wrong-kind answer).
    let m = json!({"phone": PHONE, "content_type": "image", "media_base64": STANDARD.encode([1u8, 2, 3]), "media_mimetype": "image/png"});
    let media = app.post(&key, "/api/v1/messages", m).await.ok(201)["media"]["url"].as_str().unwrap().to_string();
    app.get(token, &media).await.error(403, "forbidden");

    // Users cannot write system messages into support threads.
    let user = linked_user(&app, &key, PHONE).await;
    let system = json!({"partner": "acme", "body": "Your account is suspended", "content_type": "system"});
    app.post(&user, "/api/v1/me/conversations", system).await.field_error("content_type");
    let c = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "hi"})).await.ok(201).clone();
    let msgs = format!("/api/v1/me/conversations/{}/messages", c["ref"].as_str().unwrap());
    app.post(&user, &msgs, json!({"body": "Refund approved", "content_type": "system"}))
        .await
        .field_error("content_type");

    // device_uuid keeps to its documented charset at login.
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": "+15552220000"}))).await.ok(202);
    let code = app.last_code("+15552220000").await;
    let bad = json!({"phone": "+15552220000", "code": code, "device_uuid": "<script>alert(1)</script>"});
    app.request(Method::POST, "/api/v1/auth/otp/verify", None, Some(&bad)).await.field_error("device_uuid");

    // No control characters in URL fields (the URL parser would drop them, so what is stored differs).
    let link = json!({"phone": PHONE, "content_type": "link", "link_url": "https://example.com/a\r\nSet-Cookie: x=1"});
    app.post(&key, "/api/v1/messages", link).await.field_error("link_url");
    let image = json!({"phone": PHONE, "content_type": "image", "media_url": "https://cdn.example.com/\na.png"});
    app.post(&key, "/api/v1/messages", image).await.field_error("media_url");
}

#[tokio::test]
async fn message_refs_never_reach_the_logs() {
    let db = TestDb::new().await;
    let out = crate::cli::hubbub(&db.url, &["partner", "create", "--code", "acme", "--name", "Acme"]);
    let key: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = key["api_key"].as_str().unwrap().to_string();
    let log = tempfile::NamedTempFile::new().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .arg("serve")
        .env("HUBBUB_DATABASE_URL", &db.url)
        .env("HUBBUB_LISTEN", format!("127.0.0.1:{port}"))
        .env("HUBBUB_SECRET_KEY", TEST_SECRET_KEY)
        .env("HUBBUB_DEV", "1")
        .env("HUBBUB_LOG", "debug,sqlx=warn,hyper=warn,wasmtime=warn,cranelift=warn")
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let client = reqwest::Client::new();
    let mut reference = None;
    for _ in 0..200 {
        let sent =
            client.post(format!("{base}/messages")).bearer_auth(&key).json(&json!({"phone": PHONE, "body": "hi"}));
        if let Ok(r) = sent.send().await {
            let m: Value = r.json().await.unwrap();
            reference = Some(m["ref"].as_str().unwrap().to_string());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reference = reference.expect("the host answers");
    assert_eq!(client.get(format!("{base}/content/{reference}")).send().await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.kill().unwrap();
    let _ = child.wait();
    let logs = std::fs::read_to_string(log.path()).unwrap();
    assert!(logs.contains("message accepted"), "the log was captured: {logs}");
    assert!(!logs.contains(&reference[4..]), "a message ref was logged:\n{logs}");
}

#[tokio::test]
async fn secrets_are_sealed_at_rest_and_the_key_rotates() {
    use hubbub_host::store::sealing::{SecretKey, write_key_file};
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("secret.key");
    write_key_file(&key_file, &SecretKey::generate()).unwrap();
    let db = Arc::new(TestDb::new().await);
    let adjust = |file: std::path::PathBuf| {
        move |c: &mut hubbub_host::config::Config| {
            c.secret_key = None;
            c.secret_key_file = Some(file);
            c.jwt_secret = None;
        }
    };
    let app = TestApp::start_on(db.clone(), adjust(key_file.clone())).await;
    let key = app.partner("acme").await;
    let set = json!({"webhook_url": "http://127.0.0.1:9/h"});
    let r = app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&set)).await;
    let partner_secret = r.ok(200)["webhook_secret"].as_str().unwrap().to_string();
    let bot = app.post(&key, "/api/v1/bots", json!({"code": "b", "name": "B"})).await.ok(201).clone();
    let bot_secret = bot["webhook_secret"].as_str().unwrap().to_string();
    let token = app.login(PHONE).await;
    let raw = |db: hubbub_host::store::Db| async move {
        let mut values: Vec<String> = Vec::new();
        for sql in [
            "SELECT value FROM settings WHERE name = 'jwt_secret'",
            "SELECT webhook_secret FROM partners WHERE code = 'acme'",
            "SELECT webhook_secret FROM bots WHERE code = 'b'",
            "SELECT value FROM settings WHERE name = 'vapid_private_key'",
        ] {
            values.push(sqlx::query_scalar(sql).fetch_one(db.reader()).await.unwrap());
        }
        values
    };
    let before = raw(app.state.db.clone()).await;
    let jwt_secret = String::from_utf8(app.state.jwt_secret.to_vec()).unwrap();
    for (value, secret) in before.iter().zip([&jwt_secret, &partner_secret, &bot_secret]) {
        assert!(value.starts_with("enc:v1:"), "{value}");
        assert!(!value.contains(secret.as_str()) && !value.contains(&secret[6..]), "a secret is stored in the clear");
    }
    assert!(before[3].starts_with("enc:v1:"), "the Web Push (VAPID) private key is sealed: {}", before[3]);
    // A secret written in the clear (before sealing existed) is sealed at the next start.
    sqlx::query("UPDATE partners SET webhook_secret = $1 WHERE code = 'acme'")
        .bind(&partner_secret)
        .execute(app.state.db.writer())
        .await
        .unwrap();
    app.stop().await;
    let app = TestApp::start_on(db.clone(), adjust(key_file.clone())).await;
    let resealed = raw(app.state.db.clone()).await;
    assert!(resealed[1].starts_with("enc:v1:") && !resealed[1].contains(&partner_secret[6..]), "{}", resealed[1]);
    app.stop().await;

    // Rotation re-seals everything with a new key and replaces the key file.
    let old_key = std::fs::read_to_string(&key_file).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .args(["secrets", "rotate-key"])
        .env("HUBBUB_DATABASE_URL", &db.url)
        .env("HUBBUB_SECRET_KEY_FILE", &key_file)
        .env_remove("HUBBUB_SECRET_KEY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rotated: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rotated["resealed"], 4, "the JWT secret, the VAPID key and two webhook secrets");
    let new_id = rotated["key_id"].as_str().unwrap().to_string();
    assert_ne!(std::fs::read_to_string(&key_file).unwrap(), old_key);
    assert!(!dir.path().join("secret.key.new").exists());

    let app = TestApp::start_on(db.clone(), adjust(key_file.clone())).await;
    for value in raw(app.state.db.clone()).await {
        assert!(value.starts_with(&format!("enc:v1:{new_id}:")), "{value}");
    }
    // The same secrets come out: old user tokens verify, the webhook secret is the one shown before.
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    let r = app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&set)).await;
    assert_eq!(r.ok(200)["webhook_secret_prefix"], hubbub_host::signing::secret_prefix(&partner_secret));
    app.stop().await;

    // A host with another key cannot open them, and says which setting to fix.
    let mut config = test_config(&db.url);
    config.jwt_secret = None;
    config.secret_key = Some(STANDARD.encode([7u8; 32]));
    let err = hubbub_host::prepare(config, Arc::new(ManualClock::new(0))).await.err().expect("refuses to start");
    assert!(err.to_string().contains("HUBBUB_SECRET_KEY"), "{err:#}");
}

#[tokio::test]
async fn the_secret_key_is_generated_beside_sqlite_and_required_with_postgresql() {
    let db = TestDb::new().await;
    let out = Command::new(env!("CARGO_BIN_EXE_hubbub"))
        .args(["partner", "create", "--code", "acme", "--name", "Acme"])
        .env("HUBBUB_DATABASE_URL", &db.url)
        .env_remove("HUBBUB_SECRET_KEY")
        .env_remove("HUBBUB_SECRET_KEY_FILE")
        .output()
        .unwrap();
    if postgres() {
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("HUBBUB_SECRET_KEY"), "{out:?}");
        return;
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file = db.url.trim_start_matches("sqlite://").split('?').next().unwrap().to_string() + ".key";
    let text = std::fs::read_to_string(&file).expect("the key file beside the database");
    assert!(hubbub_host::store::sealing::SecretKey::parse(&text).is_ok());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
}

#[tokio::test]
async fn what_the_schema_fuzzer_found_stays_fixed() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    // Every path parameter is declared on its operations.
    let doc = app.request(Method::GET, "/api/v1/openapi.json", None, None).await.json;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        let names: Vec<&str> = path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
        for (method, op) in ops.as_object().unwrap() {
            for name in &names {
                let declared = op["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"] == *name && p["in"] == "path"));
                assert!(declared, "{method} {path} does not declare {{{name}}}");
            }
        }
    }
    // A local bot without a component cannot answer: 409, not a 5xx.
    app.post(&key, "/api/v1/bots", json!({"code": "empty", "name": "Empty"})).await.ok(201);
    let user = linked_user(&app, &key, PHONE).await;
    app.post(&user, "/api/v1/me/bots/empty/sessions", json!({})).await.error(409, "conflict");
    // A phone that is given must be one.
    app.post(&key, "/api/v1/messages/read", json!({"phone": ""})).await.field_error("phone");
    // null is "not given" for every optional field, flags included.
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE, "invite": null, "fields": null})).await.ok(200);
    let hook = json!({"webhook_url": "http://127.0.0.1:9/h", "rotate_secret": null});
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&hook)).await.ok(200);
}
