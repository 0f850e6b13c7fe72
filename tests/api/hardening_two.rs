//! The holes the second security review found (`docs/security.md` lists each threat with its defence and
//! the test here that shows it), one test each, on both databases. Each fails on the code before its fix.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hubbub_host::clock::ManualClock;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Resp, TestApp, TestDb, eventually, test_config};

const PHONE: &str = "+15551230000";

/// A user linked to the partner, logged in; returns the token.
async fn linked_user(app: &TestApp, key: &str, phone: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.login(phone).await
}

async fn post_with(app: &TestApp, path: &str, token: Option<&str>, headers: &[(&str, &str)], body: Value) -> Resp {
    let mut req = app.client.post(format!("{}{path}", app.base)).json(&body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    Resp::from(req.send().await.unwrap()).await
}

/// A compiler that takes `seconds` before it compiles (with the real one), as a big component would.
fn slow_compiler(dir: &std::path::Path, seconds: f64) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("slow-compiler.sh");
    let script = format!("#!/bin/sh\nsleep {seconds}\nexec '{}' \"$@\"\n", env!("CARGO_BIN_EXE_hubbub"));
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

async fn upload_within(app: &TestApp, key: &str, code: &str, bytes: Vec<u8>, within: Duration) -> Option<Resp> {
    let request = app
        .client
        .put(format!("{}/api/v1/bots/{code}/component", app.base))
        .bearer_auth(key)
        .header("content-type", "application/wasm")
        .timeout(within)
        .body(bytes);
    match request.send().await {
        Ok(r) => Some(Resp::from(r).await),
        Err(e) if e.is_timeout() => None,
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn a_compilation_keeps_its_slot_until_it_ends_whatever_the_client_does() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (compiler, cache_dir) = (slow_compiler(tools.path(), 1.5), cache.path().to_path_buf());
    let app = TestApp::start_with(move |c| {
        c.bot_compiler = Some(compiler);
        c.component_cache_dir = cache_dir;
        c.bot_compile_concurrency = 1;
    })
    .await;
    let key = app.partner("acme").await;
    for code in ["chat", "shop"] {
        app.post(&key, "/api/v1/bots", json!({"code": code, "name": code, "runtime_mode": "local"})).await.ok(201);
    }
    // The client hangs up while its component compiles…
    let gone = upload_within(&app, &key, "chat", crate::common::wasm("chat"), Duration::from_millis(300)).await;
    assert!(gone.is_none(), "the upload should still be compiling: {gone:?}");
    // …and the compilation keeps its slot: a second upload is refused, not compiled beside it.
    assert_eq!(app.state.runtime.free_compilers(), 0, "the hung-up compilation must keep its slot");
    let busy = app.upload_component(&key, "shop", &crate::common::wasm("shop")).await;
    busy.error(503, "unavailable");
    assert!(busy.headers.get("retry-after").is_some());
    // Once it ends, the slot is free, and the compiled artifact is kept (the same upload is now quick).
    eventually("the compilation ends", || async { app.state.runtime.free_compilers() == 1 }).await;
    app.upload_component(&key, "chat", &crate::common::wasm("chat")).await.ok(200);
}

#[tokio::test]
async fn a_compilation_is_bounded_in_memory_and_time() {
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_path_buf();
    let app = TestApp::start_with(move |c| {
        c.component_cache_dir = cache_dir;
        c.bot_compile_memory_mb = 16;
        c.bot_compile_timeout_ms = 20_000;
    })
    .await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/bots", json!({"code": "shop", "name": "Shop", "runtime_mode": "local"})).await.ok(201);
    let r = app.upload_component(&key, "shop", &crate::common::wasm("shop")).await;
    r.error(422, "invalid_component");
    let message = r.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("16 MiB of memory"), "{message}");
    assert_eq!(app.state.runtime.free_compilers(), 1);

    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (compiler, cache_dir) = (slow_compiler(tools.path(), 30.0), cache.path().to_path_buf());
    let app = TestApp::start_with(move |c| {
        c.bot_compiler = Some(compiler);
        c.component_cache_dir = cache_dir;
        c.bot_compile_timeout_ms = 300;
    })
    .await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/bots", json!({"code": "shop", "name": "Shop", "runtime_mode": "local"})).await.ok(201);
    let r = app.upload_component(&key, "shop", &crate::common::wasm("shop")).await;
    r.error(422, "invalid_component");
    let message = r.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("longer than 0.3 s"), "{message}");
    // The compiler was stopped: its slot is free at once.
    assert_eq!(app.state.runtime.free_compilers(), 1);
}

#[tokio::test]
async fn each_user_reaches_the_bot_they_chose_when_two_partners_use_one_code() {
    let app = TestApp::start().await;
    // Partner B registers "support" first, partner A after it; each runs its own component.
    let (a, b) = (app.partner("acme").await, app.partner("bogus").await);
    for (key, wasm) in [(&b, "shop"), (&a, "chat")] {
        let bot = json!({"code": "support", "name": format!("{wasm} support"), "runtime_mode": "local"});
        app.post(key, "/api/v1/bots", bot).await.ok(201);
        app.upload_component(key, "support", &crate::common::wasm(wasm)).await.ok(200);
    }
    // A user linked to both (linking needs no consent) sees two bots, each with its own ref.
    app.post(&b, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let user = linked_user(&app, &a, PHONE).await;
    let listed = app.get(&user, "/api/v1/me/bots").await.ok(200)["data"].clone();
    let ref_of = |partner: &str| {
        listed.as_array().unwrap().iter().find(|b| b["partner"]["code"] == partner).unwrap()["ref"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (ref_a, ref_b) = (ref_of("acme"), ref_of("bogus"));
    assert_ne!(ref_a, ref_b);
    // By ref, each opens the bot chosen: A's chat bot answers, never B's shop (which has no chat).
    let opened = app.post(&user, &format!("/api/v1/me/bots/{ref_a}/sessions"), json!({})).await.ok(201).clone();
    assert_eq!(opened["steps"][0]["text"], "Hi! I'm the Hubbub assistant.", "{opened}");
    let session = opened["session"].as_str().unwrap();
    let text = json!({"type": "text", "text": "hi"});
    app.post(&user, &format!("/api/v1/me/bots/{ref_a}/sessions/{session}/events"), text.clone()).await.ok(200);
    // The session belongs to A's bot: B's ref does not reach it.
    app.post(&user, &format!("/api/v1/me/bots/{ref_b}/sessions/{session}/events"), text).await.error(404, "not_found");
    let stored: (String,) = sqlx::query_as(
        "SELECT p.code FROM flow_sessions s JOIN bots b ON b.id = s.bot_id JOIN partners p ON p.id = b.partner_id \
         WHERE s.ref = $1",
    )
    .bind(session)
    .fetch_one(app.state.db.reader())
    .await
    .unwrap();
    assert_eq!(stored.0, "acme");
    // The bare code is ambiguous for this user: refused, never resolved to whichever came first.
    let ambiguous = app.post(&user, "/api/v1/me/bots/support/sessions", json!({})).await;
    ambiguous.error(409, "conflict");
    // A user linked to A only may still name it by its code.
    let other = linked_user(&app, &a, "+15551230001").await;
    let mine = app.post(&other, "/api/v1/me/bots/support/sessions", json!({})).await.ok(201)["session"].clone();
    let stored: (String,) = sqlx::query_as(
        "SELECT p.code FROM flow_sessions s JOIN bots b ON b.id = s.bot_id JOIN partners p ON p.id = b.partner_id \
         WHERE s.ref = $1",
    )
    .bind(mine.as_str().unwrap())
    .fetch_one(app.state.db.reader())
    .await
    .unwrap();
    assert_eq!(stored.0, "acme");
    // Open forms name the bot unambiguously too.
    app.post(&b, "/api/v1/bots/support/flows/order/invite", json!({"phone": PHONE})).await.ok(201);
    let forms = app.get(&user, "/api/v1/me/forms").await.ok(200)["data"].clone();
    assert_eq!(forms[0]["bot"], "support");
    assert_eq!(forms[0]["bot_ref"], ref_b.as_str());
    assert_eq!(forms[0]["partner"], "bogus");
}

/// Two calls of one partner's bot whose guest sleeps, the second once the first holds the partner's slot
/// (its guest is running: one pooled slot fewer is free), on a host where a partner has one slot and `queue`
/// places to wait (for 100 ms): answers both.
async fn two_sleeping_calls(queue: usize) -> (Resp, Resp) {
    let app = TestApp::start_with(move |c| {
        c.bot_partner_slots = 1;
        c.bot_queue = queue;
        c.bot_queue_wait_ms = 100;
    })
    .await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/bots", json!({"code": "evil", "name": "Evil", "runtime_mode": "local"})).await.ok(201);
    app.upload_component(&key, "evil", &crate::common::wasm("evil")).await.ok(200);
    let token = linked_user(&app, &key, PHONE).await;
    let mut starts = Vec::new();
    for _ in 0..2 {
        let invite = app.post(&key, "/api/v1/bots/evil/flows/sleep/invite", json!({"phone": PHONE})).await;
        starts.push(format!("/api/v1/me/flows/{}/start", invite.ok(201)["flow_session"]["ref"].as_str().unwrap()));
    }
    let idle = app.state.runtime.free_call_slots();
    let first = app.post(&token, &starts[0], json!({}));
    let second = async {
        crate::common::eventually("the first call holds the slot", || async {
            app.state.runtime.free_call_slots() < idle
        })
        .await;
        app.post(&token, &starts[1], json!({})).await
    };
    tokio::join!(first, second)
}

#[tokio::test]
async fn a_partner_over_its_share_of_bot_slots_is_told_to_wait() {
    // One sleeping call holds acme's only slot; the next finds no room in the queue: 429 at once.
    let (first, second) = two_sleeping_calls(0).await;
    first.error(502, "bot_error");
    second.error(429, "rate_limited");
    assert_eq!(second.headers["retry-after"], "1");
    // With room to wait, a call that waits past the deadline is 503 with Retry-After.
    let (first, second) = two_sleeping_calls(4).await;
    first.error(502, "bot_error");
    second.error(503, "unavailable");
    assert_eq!(second.headers["retry-after"], "1");
}

/// A PNG's first bytes, then filler.
fn png(size: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.resize(size, 0);
    bytes
}

#[tokio::test]
async fn users_cannot_publish_pages_redirects_or_downloads_on_the_service_origin() {
    let app = TestApp::start_with(|c| c.user_upload_quota_mb = 1).await;
    let key = app.partner("acme").await;
    let user = linked_user(&app, &key, PHONE).await;
    let open = |message: Value| {
        let (app, user) = (&app, &user);
        async move {
            let mut body = json!({"partner": "acme"});
            body.as_object_mut().unwrap().extend(message.as_object().unwrap().clone());
            app.post(user, "/api/v1/me/conversations", body).await
        }
    };
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let content = |reference: String| {
        let (app, client) = (&app, &no_redirects);
        async move {
            let r = client.get(format!("{}/api/v1/content/{reference}", app.base));
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.headers().get("location").cloned())
        }
    };
    // A link from a user is kept (agents see it) but never redirected through the service.
    let link = open(json!({"content_type": "link", "link_url": "https://evil.example/phish"})).await;
    let reference = link.ok(201)["messages"][0]["ref"].as_str().unwrap().to_string();
    assert_eq!(content(reference).await, (404, None));
    // No HTML pages from users at all.
    open(json!({"content_type": "html", "html": "<form action=https://evil.example>"}))
        .await
        .field_error("content_type");
    // Uploads: common types only, bytes and name agreeing with the type.
    let exe = STANDARD.encode(b"MZ\x90\x00 pretend this runs");
    let upload = |data: &str, mime: &str, name: &str| json!({"content_type": "document", "media_base64": data, "media_mimetype": mime, "media_filename": name});
    open(upload(&exe, "application/x-msdownload", "invoice.exe")).await.field_error("media_mimetype");
    open(upload(&exe, "application/pdf", "invoice.pdf")).await.field_error("media_base64");
    let pdf = STANDARD.encode(b"%PDF-1.7 a real enough pdf");
    open(upload(&pdf, "application/pdf", "invoice.pdf.exe")).await.field_error("media_filename");
    let ok = open(upload(&pdf, "application/pdf", "invoice.pdf")).await;
    let message = ok.ok(201)["messages"][0].clone();
    // The upload is not served at /content (a user's message), and /media serves it as a download only.
    assert_eq!(content(message["ref"].as_str().unwrap().to_string()).await.0, 404);
    let media = message["media"]["url"].as_str().unwrap().to_string();
    for token in [&key, &user] {
        let r = app.client.get(format!("{}{media}", app.base)).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers()["content-disposition"].to_str().unwrap().starts_with("attachment"));
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    }
    // Even an image a user uploaded is a download, not an inline page resource.
    let image = json!({"content_type": "image", "media_base64": STANDARD.encode(png(600 << 10)), "media_mimetype": "image/png", "media_filename": "me.png"});
    let shown = open(image.clone()).await.ok(201)["messages"][0]["media"]["url"].as_str().unwrap().to_string();
    let r = app.client.get(format!("{}{shown}", app.base)).bearer_auth(&key).send().await.unwrap();
    assert!(r.headers()["content-disposition"].to_str().unwrap().starts_with("attachment"));
    // The quota (1 MiB a day here): a second 600 KiB upload is over it.
    let over = open(image).await;
    over.field_error("media_base64");
    assert!(over.json["error"]["message"].as_str().unwrap().contains("quota"), "{}", over.json);
    // What a partner sends is still served at /content.
    let sent = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": PHONE, "content_type": "link", "link_url": "https://acme.example/offer"}),
        )
        .await;
    let (status, location) = content(sent.ok(201)["ref"].as_str().unwrap().to_string()).await;
    assert_eq!((status, location.unwrap()), (302, "https://acme.example/offer".parse().unwrap()));
}

#[tokio::test]
async fn dev_only_switches_and_weak_secrets_refuse_to_start() {
    use hubbub_host::config::{PaymentProviderKind, SmsProviderKind, WhatsAppProviderKind};
    let db = TestDb::new().await;
    let refused = |adjust: Box<dyn FnOnce(&mut hubbub_host::config::Config)>| {
        let url = db.url.clone();
        async move {
            let mut config = test_config(&url);
            config.dev = false;
            adjust(&mut config);
            hubbub_host::prepare(config, Arc::new(ManualClock::new(0))).await.err().map(|e| e.to_string())
        }
    };
    let why = refused(Box::new(|c| c.payment_provider = Some(PaymentProviderKind::Dev))).await.expect("refused");
    assert!(why.contains("HUBBUB_PAYMENT_PROVIDER=dev") && why.contains("HUBBUB_DEV"), "{why}");
    let why = refused(Box::new(|c| c.sms_provider = Some(SmsProviderKind::DevSink))).await.expect("refused");
    assert!(why.contains("HUBBUB_SMS_PROVIDER=dev-sink"), "{why}");
    let why = refused(Box::new(|c| c.whatsapp_provider = Some(WhatsAppProviderKind::DevSink))).await.expect("refused");
    assert!(why.contains("HUBBUB_WHATSAPP_PROVIDER=dev-sink"), "{why}");
    for weak in ["a".repeat(32), "abcdefghijklmnopqrstuvwxyz012345".into(), "test-secret-test-secret-test-sec".into()] {
        let w = weak.clone();
        let why = refused(Box::new(move |c| c.jwt_secret = Some(w))).await.expect("refused");
        assert!(why.contains("HUBBUB_JWT_SECRET") && why.contains("variety"), "{weak}: {why}");
    }
    let why = refused(Box::new(|c| c.metrics_token = Some("x".into()))).await.expect("refused");
    assert!(why.contains("HUBBUB_METRICS_TOKEN") && why.contains("32 bytes"), "{why}");
    // A generated secret is accepted; so is a production host with real providers only.
    let generated = hubbub_host::secrets::generate();
    assert_eq!(refused(Box::new(move |c| c.jwt_secret = Some(generated))).await, None);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hubbub")).args(["secrets", "generate"]).output().unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(hubbub_host::secrets::check_strength("HUBBUB_JWT_SECRET", printed.trim()).is_ok(), "{printed}");

    // The dev checkout answers nothing on a host out of dev mode, even for a dev payment in its database.
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    crate::bots::local_bot(&app, &key, "shop", "shop").await;
    let token = linked_user(&app, &key, PHONE).await;
    let invite = app.post(&key, "/api/v1/bots/shop/flows/order/invite", json!({"phone": PHONE})).await;
    let flow = invite.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let path = |p: &str| format!("/api/v1/me/flows/{flow}/{p}");
    app.post(&token, &path("start"), json!({})).await.ok(200);
    app.post(&token, &path("events"), json!({"type": "select", "id": "coffee"})).await.ok(200);
    app.post(&token, &path("events"), json!({"type": "select", "id": "large"})).await.ok(200);
    let values = json!({"screen": "delivery", "values": {"address": "Main St 1", "when": "2026-12-01"}});
    let paid = app.post(&token, &path("submit"), values).await;
    let steps = paid.ok(200)["steps"].as_array().unwrap().clone();
    let payment =
        steps.iter().find(|s| s["type"] == "payment").unwrap()["payment"]["ref"].as_str().unwrap().to_string();
    let production = TestApp::start_on(app.db.clone(), |c| c.dev = false).await;
    let page = production.client.get(format!("{}/pay/{payment}", production.base)).send().await.unwrap();
    assert_eq!(page.status(), 404);
    let pressed = production
        .client
        .post(format!("{}/pay/{payment}", production.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("action=pay")
        .send()
        .await
        .unwrap();
    assert_eq!(pressed.status(), 404);
    let state: (String,) = sqlx::query_as("SELECT state FROM payments WHERE ref = $1")
        .bind(&payment)
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    assert_ne!(state.0, "succeeded");
}

/// A raw connection to the host.
async fn connect(app: &TestApp) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap()
}

/// Whether the host closes `stream` within `within` (reading what it sends until then).
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn slow_and_silent_clients_do_not_hold_sockets() {
    let app = TestApp::start_with(|c| {
        c.header_read_timeout_ms = 400;
        c.idle_timeout_ms = 60_000;
    })
    .await;
    // A connection that sends nothing is closed.
    let mut silent = connect(&app).await;
    assert!(closed_within(&mut silent, Duration::from_secs(5)).await, "a silent connection stays open");
    // One header line every 100 ms never completes a head within the timeout: closed.
    let mut slow = connect(&app).await;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let closed = async {
        for i in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if slow.write_all(format!("X-Slow-{i}: 1\r\n").as_bytes()).await.is_err() {
                return true;
            }
        }
        false
    };
    assert!(closed.await, "a client trickling headers was still connected after 5 s");

    // An idle keep-alive connection is closed after the idle timeout, when it is the shorter.
    let app = TestApp::start_with(|c| {
        c.header_read_timeout_ms = 30_000;
        c.idle_timeout_ms = 300;
    })
    .await;
    let mut kept = connect(&app).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    assert!(closed_within(&mut kept, Duration::from_secs(5)).await, "an idle keep-alive connection stays open");
}

#[tokio::test]
async fn connections_past_the_cap_get_a_clear_503() {
    let app = TestApp::start_with(|c| {
        c.max_connections = 2;
        c.header_read_timeout_ms = 30_000;
    })
    .await;
    let held = [connect(&app).await, connect(&app).await];
    tokio::time::sleep(Duration::from_millis(100)).await;
    // reqwest opens a third connection: answered at once with the contract's error and Retry-After.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let r = Resp::from(client.get(format!("{}/healthz", app.base)).send().await.unwrap()).await;
    r.error(503, "unavailable");
    assert_eq!(r.headers["retry-after"], "1");
    // A connection that closes makes room again, for the very next one (the host had already set aside an
    // overflow answer for it while the cap was full).
    drop(held);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(client.get(format!("{}/healthz", app.base)).send().await.unwrap().status(), 200);
}

/// A webhook-mode bot `remote` of partner acme with a chat session of a linked user: the bot's webhook
/// secret, the session's ref, the partner key and the user's token.
async fn remote_bot_session(app: &TestApp) -> (String, Value, String, String) {
    let recv = crate::common::FakeServer::start(200, 0).await;
    let key = app.partner("acme").await;
    let bot = json!({"code": "remote", "name": "Remote", "runtime_mode": "webhook", "webhook_url": recv.url});
    let secret = app.post(&key, "/api/v1/bots", bot).await.ok(201)["webhook_secret"].as_str().unwrap().to_string();
    let user = linked_user(app, &key, PHONE).await;
    let session = app.post(&user, "/api/v1/me/bots/remote/sessions", json!({})).await.ok(201)["session"].clone();
    (secret, session, key, user)
}

/// Posts `steps` as the bot's signed reply in `session`, event id `id`, signed with `secret` now.
async fn signed_reply(app: &TestApp, secret: &str, id: &str, session: &Value, steps: Value) -> Resp {
    let body = json!({"event": "reply", "data": {"session": session, "steps": steps}}).to_string();
    let now = app.now() / 1000;
    let signature = hubbub_host::signing::standard_signature(secret, id, now, body.as_bytes());
    let r = app
        .client
        .post(format!("{}/api/v1/bots/remote/webhook", app.base))
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

#[tokio::test]
async fn a_replayed_signed_bot_event_opens_its_payments_once() {
    let app = TestApp::start().await;
    let (secret, session, key, user) = remote_bot_session(&app).await;
    let step = json!({"type": "payment", "payment": {"id": "order-1", "amount_minor": 999_900, "currency": "EUR", "description": "Order"}});
    // The same signed event, delivered 8 times at once: one reply, one payment.
    let sends = (0..8).map(|_| signed_reply(&app, &secret, "evt_pay", &session, json!([step.clone()])));
    let answers = futures_util::future::join_all(sends).await;
    let applied = answers.iter().filter(|r| r.ok(200)["duplicate"] != true).count();
    assert_eq!(applied, 1, "{answers:?}");
    let payments = app.get(&key, "/api/v1/payments").await.ok(200)["data"].as_array().unwrap().len();
    assert_eq!(payments, 1);
    let steps = app.get(&user, &format!("/api/v1/me/bots/remote/sessions/{}", session.as_str().unwrap())).await;
    assert_eq!(steps.ok(200)["steps"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_sign_up_code_proves_its_own_e_mail() {
    const DEV: &str = "+15557770002";
    let app = TestApp::start().await;
    let open = |path: &'static str, body: Value| {
        let app = &app;
        async move { app.request(Method::POST, path, None, Some(&body)).await }
    };
    open("/api/v1/dev/signup", json!({"phone": DEV, "email": "owner@example.com"})).await.ok(202);
    let owners = app.last_code(DEV).await;
    let texts = app.sink(DEV, "sms").await;
    assert!(texts.last().unwrap().contains("o…@example.com"), "the SMS says whose sign-up it is: {texts:?}");
    // A stranger asks for a code for the same phone with another e-mail: refused while the owner's waits
    // (hardening_three), so the owner's code stays the only one, and valid.
    open("/api/v1/dev/signup", json!({"phone": DEV, "email": "stranger@example.net"})).await.error(409, "conflict");
    let r = open("/api/v1/dev/verify", json!({"phone": DEV, "code": owners})).await;
    assert_eq!(r.ok(200)["developer"]["email"], "owner@example.com");
    let stored = hubbub_host::store::developers::find_by_phone(&app.state.db, DEV).await.unwrap().unwrap();
    assert_eq!(stored.email.as_deref(), Some("owner@example.com"));
}

#[tokio::test]
async fn developer_template_variables_are_values_not_messages() {
    let app = TestApp::start().await;
    let platform = app.partner_with("hubbub", true).await;
    let t = json!({"code": "hello", "channel": "inapp", "lang": "en", "category": "utility", "body": "Hello {{name}}"});
    let id = app.post(&platform, "/api/v1/templates", t).await.ok(201)["template_id"].clone();
    app.post(&platform, &format!("/api/v1/templates/{id}/submit"), json!({})).await.ok(200);
    app.request(Method::POST, "/api/v1/dev/signup", None, Some(&json!({"phone": "+15557770003"}))).await.ok(202);
    let code = app.last_code("+15557770003").await;
    let verified = app
        .request(Method::POST, "/api/v1/dev/verify", None, Some(&json!({"phone": "+15557770003", "code": code})))
        .await;
    let dev_key = verified.ok(200)["api_key"].as_str().unwrap().to_string();
    let send = |name: Value| {
        let (app, dev_key) = (&app, &dev_key);
        async move {
            let body = json!({"phone": PHONE, "template_code": "hello", "vars": {"name": name}});
            app.post(dev_key, "/api/v1/dev/messages", body).await
        }
    };
    send(json!("x".repeat(16 * 1024))).await.field_error("vars.name");
    send(json!("Ana\n\nYour account is locked, call +1 555")).await.field_error("vars.name");
    send(json!("Ana\tB")).await.field_error("vars.name");
    send(json!("Ana      Smith")).await.field_error("vars.name");
    send(json!("Ana")).await.ok(201);
}

#[tokio::test]
async fn one_address_cannot_lock_a_phone_owner_out_of_login() {
    let app = TestApp::start_with(|c| c.trusted_proxies = vec!["127.0.0.1".into()]).await;
    let start = |client: &'static str| {
        let app = &app;
        async move {
            post_with(app, "/api/v1/auth/otp/start", None, &[("x-forwarded-for", client)], json!({"phone": PHONE}))
                .await
        }
    };
    // A stranger spends their five sends…
    for _ in 0..5 {
        start("203.0.113.66").await.ok(202);
    }
    start("203.0.113.66").await.error(429, "rate_limited");
    // …and the owner, from their own address, still gets a code.
    start("198.51.100.7").await.ok(202);
    // The phone's ceiling (20 in 15 minutes) holds across addresses: 6 so far, 14 more from others.
    for client in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
        let sends = if client == "192.0.2.3" { 4 } else { 5 };
        for _ in 0..sends {
            start(client).await.ok(202);
        }
    }
    start("192.0.2.200").await.error(429, "rate_limited");
}

#[tokio::test]
async fn a_user_signs_out_everywhere_on_every_host() {
    let db = Arc::new(TestDb::new().await);
    let clock = Arc::new(ManualClock::new(chrono::Utc::now().timestamp_millis()));
    let a = TestApp::start_on_clock(db.clone(), clock.clone(), |_| {}).await;
    let b = TestApp::start_on_clock(db.clone(), clock.clone(), |_| {}).await;
    let key = a.partner("acme").await;
    let phone = a.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await;
    phone.ok(200);
    let laptop = a.login(PHONE).await;
    let phone_app = a.login(PHONE).await;
    b.get(&phone_app, "/api/v1/me/account").await.ok(200);
    // Signing out everywhere from one device ends every session: here at once…
    let r = a.client.delete(format!("{}/api/v1/me/tokens", a.base)).bearer_auth(&laptop).send().await.unwrap();
    assert_eq!(r.status(), 204);
    a.get(&laptop, "/api/v1/me/account").await.error(401, "unauthorized");
    a.get(&phone_app, "/api/v1/me/account").await.error(401, "unauthorized");
    // …and on the other host once its note of the user is older than it trusts (2 s).
    clock.advance_ms(hubbub_host::store::tokens::NOTE_TTL_MS + 1);
    b.get(&phone_app, "/api/v1/me/account").await.error(401, "unauthorized");
    // A new sign-in works.
    let again = a.login(PHONE).await;
    b.get(&again, "/api/v1/me/account").await.ok(200);
}

#[tokio::test]
async fn a_bot_behind_a_proxy_is_checked_against_its_client_address() {
    let app = TestApp::start_with(|c| c.trusted_proxies = vec!["127.0.0.1".into()]).await;
    let key = app.partner("acme").await;
    let bot = app.post(&key, "/api/v1/bots", json!({"code": "hook", "name": "Hook"})).await.ok(201).clone();
    let token = bot["bot_token"].as_str().unwrap().to_string();
    app.request(Method::PATCH, "/api/v1/bots/hook", Some(&key), Some(&json!({"allowed_ips": "203.0.113.7"})))
        .await
        .ok(200);
    let get = |client: &'static str| {
        let (app, token) = (&app, &token);
        async move {
            let r = app
                .client
                .get(format!("{}/api/v1/bots/hook", app.base))
                .bearer_auth(token)
                .header("x-forwarded-for", client);
            Resp::from(r.send().await.unwrap()).await
        }
    };
    get("203.0.113.7").await.ok(200);
    get("198.51.100.1").await.error(403, "forbidden");
    let ping = json!({"event": "ping"});
    post_with(&app, "/api/v1/bots/hook/webhook", Some(&token), &[("x-forwarded-for", "203.0.113.7")], ping.clone())
        .await
        .ok(200);
    post_with(&app, "/api/v1/bots/hook/webhook", Some(&token), &[("x-forwarded-for", "198.51.100.1")], ping)
        .await
        .error(403, "forbidden");
}

#[tokio::test]
async fn inbound_event_ids_are_forgotten_after_their_retention() {
    let app = TestApp::start().await;
    let (secret, session, _, _) = remote_bot_session(&app).await;
    let ids = || async {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM bot_inbound_events")
            .fetch_one(app.state.db.reader())
            .await
            .unwrap();
        n
    };
    let send = |id: &'static str| {
        let (app, secret, session) = (&app, secret.clone(), session.clone());
        async move {
            let steps = json!([{"type": "message", "text": id}]);
            signed_reply(app, &secret, id, &session, steps).await.ok(200).clone()
        }
    };
    send("evt_old").await;
    app.clock.advance_ms(hubbub_host::bots::INBOUND_EVENT_RETENTION_MS / 2);
    send("evt_new").await;
    app.state.housekeep().await;
    assert_eq!(ids().await, 2, "both are within their retention");
    // Past the retention of the first, housekeeping forgets it and keeps the second.
    app.clock.advance_ms(hubbub_host::bots::INBOUND_EVENT_RETENTION_MS / 2 + 1);
    app.state.housekeep().await;
    assert_eq!(ids().await, 1);
    // A repeat of the one kept is still recognised.
    assert_eq!(send("evt_new").await["duplicate"], true);
}
