//! The conventions of docs/api.md: auth, the error shape, lists, limits, OpenAPI.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestApp;

const PHONE: &str = "+15551230000";

#[tokio::test]
async fn missing_malformed_and_unknown_keys_are_401() {
    let app = TestApp::start().await;
    let r = app.request(Method::GET, "/api/v1/messages", None, None).await;
    r.error(401, "unauthorized");
    let r = app
        .client
        .get(format!("{}/api/v1/messages", app.base))
        .header("authorization", "Basic abc")
        .send()
        .await
        .unwrap();
    crate::common::Resp::from(r).await.error(401, "unauthorized");
    app.get("sk_notarealkey", "/api/v1/messages").await.error(401, "unauthorized");
    app.get("garbage", "/api/v1/messages").await.error(401, "unauthorized");
    let key = app.partner("acme").await;
    app.get(&key, "/api/v1/messages").await.ok(200);
    // A key with one character changed is unknown.
    let mut bad = key.clone().into_bytes();
    let last = bad.len() - 1;
    bad[last] = if bad[last] == b'a' { b'b' } else { b'a' };
    app.get(&String::from_utf8(bad).unwrap(), "/api/v1/messages").await.error(401, "unauthorized");
}

#[tokio::test]
async fn other_partners_resources_are_404_never_403() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let sent = app.send_text(&acme, PHONE, "hello").await;
    let id = sent.ok(201)["message_id"].as_i64().unwrap();
    app.get(&globex, &format!("/api/v1/messages/{id}")).await.error(404, "not_found");
    app.post(&globex, &format!("/api/v1/messages/{id}/read"), json!({})).await.error(404, "not_found");
    app.post(&globex, &format!("/api/v1/messages/{id}/unread"), json!({})).await.error(404, "not_found");
    // Bulk read ignores other partners' ids.
    let r = app.post(&globex, "/api/v1/messages/read", json!({"message_ids": [id]})).await;
    assert_eq!(r.ok(200)["updated"], 0);
    let listed = app.get(&globex, "/api/v1/messages").await;
    assert_eq!(listed.ok(200)["data"].as_array().unwrap().len(), 0);
    let t = app
        .post(
            &acme,
            "/api/v1/templates",
            json!({"code": "t1", "channel": "inapp", "category": "utility", "body": "hi"}),
        )
        .await;
    let tid = t.ok(201)["template_id"].as_i64().unwrap();
    app.get(&globex, &format!("/api/v1/templates/{tid}")).await.error(404, "not_found");
    app.post(&globex, &format!("/api/v1/templates/{tid}/submit"), json!({})).await.error(404, "not_found");
    app.get(&acme, "/api/v1/messages/abc").await.error(404, "not_found");
    app.get(&acme, "/api/v1/messages/999999").await.error(404, "not_found");
}

#[tokio::test]
async fn bad_bodies_are_400_with_the_error_shape() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let url = format!("{}/api/v1/messages", app.base);
    let send = |body: &'static str, ct: Option<&'static str>| {
        let mut req = app.client.post(&url).bearer_auth(&key).body(body);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        req.send()
    };
    for (body, ct) in [
        ("{not json", Some("application/json")),
        ("[1,2]", Some("application/json")),
        ("\"text\"", Some("application/json")),
        ("{\"phone\":\"+15551230000\",\"body\":\"x\"}", Some("text/plain")),
        ("{\"phone\":\"+15551230000\",\"body\":\"x\"}", None),
    ] {
        let r = crate::common::Resp::from(send(body, ct).await.unwrap()).await;
        r.error(400, "bad_request");
    }
    // A field of the wrong type is a validation error naming the field.
    app.post(&key, "/api/v1/messages", json!({"phone": 15551230000u64, "body": "x"})).await.field_error("phone");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "x", "vars": "nope"})).await.field_error("vars");
    // Unknown fields are ignored.
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "x", "whatever": true})).await.ok(201);
}

#[tokio::test]
async fn unknown_routes_are_json_404_and_every_response_has_a_request_id() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let r = app.get(&key, "/api/v1/nope").await;
    r.error(404, "not_found");
    assert!(r.headers.get("x-request-id").is_some_and(|v| !v.is_empty()));
    let r = app.get(&key, "/api/v1/messages").await;
    assert!(r.headers.get("x-request-id").is_some());
    // A caller's request id is kept.
    let r = app
        .client
        .get(format!("{}/api/v1/messages", app.base))
        .bearer_auth(&key)
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let app = TestApp::start_with(|c| c.body_limit = 4096).await;
    let key = app.partner("acme").await;
    let r = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "x".repeat(5000)})).await;
    r.error(413, "payload_too_large");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "x".repeat(3000)})).await.ok(201);
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after_per_credential() {
    let app = TestApp::start_with(|c| {
        c.rate_limit_per_s = 1;
        c.rate_limit_burst = 3;
    })
    .await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    for _ in 0..3 {
        app.get(&acme, "/api/v1/messages").await.ok(200);
    }
    let r = app.get(&acme, "/api/v1/messages").await;
    r.error(429, "rate_limited");
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "retry-after {retry}");
    // Another credential has its own bucket.
    app.get(&globex, "/api/v1/messages").await.ok(200);
}

#[tokio::test]
async fn lists_have_data_and_next_cursor_and_clamp_limit() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.send_text(&key, PHONE, &format!("m{i}")).await.ok(201)["message_id"].as_i64().unwrap());
    }
    let page1 = app.get(&key, "/api/v1/messages?limit=2").await;
    let p1 = page1.ok(200);
    let got: Vec<i64> = p1["data"].as_array().unwrap().iter().map(|m| m["message_id"].as_i64().unwrap()).collect();
    assert_eq!(got, vec![ids[4], ids[3]], "newest first");
    let cursor = p1["next_cursor"].as_str().unwrap().to_string();
    let p2 = app.get(&key, &format!("/api/v1/messages?limit=2&cursor={cursor}")).await;
    let got: Vec<i64> = p2.json["data"].as_array().unwrap().iter().map(|m| m["message_id"].as_i64().unwrap()).collect();
    assert_eq!(got, vec![ids[2], ids[1]]);
    let cursor = p2.json["next_cursor"].as_str().unwrap().to_string();
    let p3 = app.get(&key, &format!("/api/v1/messages?limit=2&cursor={cursor}")).await;
    assert_eq!(p3.json["data"].as_array().unwrap().len(), 1);
    assert_eq!(p3.json["next_cursor"], Value::Null);
    // Clamped, not refused.
    let big = app.get(&key, "/api/v1/messages?limit=5000").await;
    assert_eq!(big.ok(200)["data"].as_array().unwrap().len(), 5);
    app.get(&key, "/api/v1/messages?limit=abc").await.field_error("limit");
    app.get(&key, "/api/v1/messages?cursor=zzz").await.field_error("cursor");
}

#[tokio::test]
async fn default_page_is_50() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    for i in 0..55 {
        app.send_text(&key, PHONE, &format!("m{i}")).await.ok(201);
    }
    let r = app.get(&key, "/api/v1/messages").await;
    assert_eq!(r.ok(200)["data"].as_array().unwrap().len(), 50);
    assert!(r.json["next_cursor"].is_string());
}

/// Every documented operation is routed (an unrouted one would hit the JSON fallback, whose message says
/// `route not found`), and every route in the source is documented.
#[tokio::test]
async fn openapi_document_matches_the_router() {
    let app = TestApp::start().await;
    let r = app.request(Method::GET, "/api/v1/openapi.json", None, None).await;
    let doc = r.ok(200).clone();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    let mut documented = Vec::new();
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            documented.push((method.to_uppercase(), path.clone()));
            let concrete = path
                .replace("{id}", "1")
                .replace("{code}", "x")
                .replace("{ref}", "x")
                .replace("{phone}", "+15550000000");
            let concrete = regex_lite_replace(&concrete);
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let resp = app.client.request(method.clone(), format!("{}{}", app.base, concrete)).send().await.unwrap();
            let status = resp.status();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            assert_ne!(status, reqwest::StatusCode::METHOD_NOT_ALLOWED, "{method} {path} is documented but not routed");
            assert_ne!(body["error"]["message"], "route not found", "{method} {path} is documented but not routed");
        }
    }
    // Every `.route("…", method(…))` in the HTTP modules is in the document.
    let mut files = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src/http"))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() { dirs.push(path) } else { files.push(path) }
        }
    }
    assert!(files.iter().any(|f| f.ends_with("bots/manage.rs")), "the resource folders are read too");
    for file in files {
        // The health routes sit outside `/api/v1`; every other module's routes are nested under it.
        let top_level = file.file_name().is_some_and(|n| n == "health.rs" || n == "metrics.rs");
        let source = std::fs::read_to_string(&file).unwrap();
        // Routers built inside unit tests are not the service's.
        let source = source.split("#[cfg(test)]").next().unwrap_or("");
        for (path, methods) in routes_in(source) {
            for method in methods {
                let full = if path.starts_with("/api/") || top_level { path.clone() } else { format!("/api/v1{path}") };
                assert!(
                    documented.contains(&(method.clone(), full.clone())),
                    "{method} {full} is routed but not in the OpenAPI document"
                );
            }
        }
    }
}

/// `{anything}` path parameters replaced by `x`.
fn regex_lite_replace(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => in_param = true,
            '}' => {
                in_param = false;
                out.push('x');
            }
            _ if in_param => {}
            _ => out.push(c),
        }
    }
    out
}

/// `(path, [METHOD…])` of each `.route("path", get(..).post(..))` call in a source file.
fn routes_in(source: &str) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(i) = rest.find(".route(\"") {
        rest = &rest[i + 8..];
        let end = rest.find('"').unwrap();
        let path = rest[..end].to_string();
        // The method chain runs to the end of this `.route(` call: count parentheses.
        let mut depth = 1;
        let mut j = end;
        let bytes = rest.as_bytes();
        while depth > 0 && j < bytes.len() - 1 {
            j += 1;
            match bytes[j] {
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {}
            }
        }
        let call = &rest[end..j];
        let mut methods = Vec::new();
        for m in ["get", "post", "put", "patch", "delete"] {
            if call.contains(&format!(" {m}(")) || call.contains(&format!(".{m}(")) || call.contains(&format!(", {m}("))
            {
                methods.push(m.to_uppercase());
            }
        }
        found.push((path, methods));
        rest = &rest[j..];
    }
    found
}

/// A request in flight when shutdown starts is still answered; the server then stops.
#[tokio::test]
async fn shutdown_finishes_in_flight_requests() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let body = json!({"phone": PHONE, "body": "sent while stopping"}).to_string();
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/v1/messages HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..10]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let db = app.state.db.clone();
    // `stop` consumes the app; its database (on SQLite, a file in a temp dir) must outlive it for the count.
    let _database = app.db.clone();
    let stopping = tokio::spawn(app.stop());
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!stopping.is_finished(), "shutdown waits for the request in flight");
    stream.write_all(&body.as_bytes()[10..]).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    stopping.await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(db.reader()).await.unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn health_and_readiness_need_no_credentials_and_say_what_is_wrong() {
    let app = TestApp::start().await;
    let get = |path: &'static str| {
        let app = &app;
        async move { app.request(Method::GET, path, None, None).await }
    };
    assert_eq!(get("/healthz").await.ok(200)["status"], "ok");
    let ready = get("/readyz").await;
    assert_eq!(ready.ok(200)["status"], "ready", "{}", ready.json);
    assert_eq!(ready.json["checks"], json!({"database": "ok", "migrations": "ok", "workers": "ok"}));
    // A worker that stopped (returned or panicked) makes the host not ready.
    drop(app.state.workers.start("exploded"));
    let not_ready = get("/readyz").await;
    not_ready.error(503, "unavailable");
    assert_eq!(not_ready.json["checks"]["workers"], "stopped: exploded");
    // So does a database that does not answer.
    app.state.db.close().await;
    let down = get("/readyz").await;
    down.error(503, "unavailable");
    assert!(down.json["checks"]["database"].as_str().unwrap().starts_with("unavailable"), "{}", down.json);
    assert_eq!(get("/healthz").await.ok(200)["status"], "ok", "alive all the same");

    // An API-only host has no workers to wait for.
    let api_only = TestApp::start_with(|c| c.workers = false).await;
    let r = api_only.request(Method::GET, "/readyz", None, None).await;
    assert_eq!(r.ok(200)["checks"]["workers"], "off (API-only host)");
}

#[tokio::test]
async fn a_request_past_the_timeout_is_answered_503_timeout() {
    let slow = crate::common::FakeServer::start(200, 3_000).await;
    let app = TestApp::start_with(|c| c.request_timeout_ms = 300).await;
    let key = app.partner("acme").await;
    let hook = json!({"webhook_url": format!("{}/hook", slow.url)});
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&hook)).await.ok(200);
    let started = std::time::Instant::now();
    let r = app.post(&key, "/api/v1/webhooks/test", json!({})).await;
    r.error(503, "timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "answered at the timeout, not after the receiver");
    app.get(&key, "/api/v1/messages").await.ok(200);
}

#[tokio::test]
async fn shutdown_gives_up_on_a_stuck_request_after_its_grace_period() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::start_with(|c| c.shutdown_timeout_ms = 300).await;
    let key = app.partner("acme").await;
    let addr = app.base.trim_start_matches("http://").to_string();
    // A request whose body never finishes arriving.
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/v1/messages HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"phone\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    tokio::time::timeout(std::time::Duration::from_secs(5), app.stop()).await.expect("shutdown is bounded");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300), "it waited for the grace period first");
    drop(stream);
}

/// The value of the first sample of `name` whose labels contain every `labels` pair (0 when absent).
fn sample(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .find(|l| labels.iter().all(|label| l.contains(label)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The scraper's token (varied enough for the host to accept it).
const METRICS_TOKEN: &str = "Qm8vT3xK6pW1zR9nB4yL7cJ2hF5sD0gA";

#[tokio::test]
async fn metrics_are_served_to_the_scraper_only_and_the_numbers_move() {
    let app = TestApp::start_with(|c| {
        c.metrics_token = Some(METRICS_TOKEN.into());
        c.code_rate_limit_per_ip_per_min = 1;
    })
    .await;
    // A partner code of its own, so the bot label is this test's alone (the registry is process-wide).
    let key = app.partner("metered").await;
    let receiver = crate::common::FakeServer::start(200, 0).await;
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&json!({"webhook_url": receiver.url})))
        .await
        .ok(200);
    let scrape = || {
        let app = &app;
        async move {
            let r = app.client.get(format!("{}/metrics", app.base)).bearer_auth(METRICS_TOKEN).send().await.unwrap();
            assert_eq!(r.status(), 200);
            assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
            r.text().await.unwrap()
        }
    };
    app.request(Method::GET, "/metrics", None, None).await.error(401, "unauthorized");
    app.request(Method::GET, "/metrics", Some(&key), None).await.error(401, "unauthorized");
    let before = scrape().await;
    let route = "route=\"/api/v1/messages\"";
    let sends = sample(&before, "hubbub_http_requests_total", &[route, "method=\"POST\"", "status=\"201\""]);
    let accepted = sample(&before, "hubbub_messages_accepted_total", &[]);
    let attempts = sample(&before, "hubbub_webhook_attempts_total", &["outcome=\"succeeded\""]);
    let limited = sample(&before, "hubbub_rate_limited_total", &["limit=\"code_route\""]);
    let id = app.send_text(&key, PHONE, "counted").await.ok(201)["message_id"].as_i64().unwrap();
    app.send_text(&key, "12345", "refused").await.field_error("phone");
    app.delivered(&key, id).await;
    crate::common::eventually("a webhook event reaches the receiver", || async { !receiver.received().is_empty() })
        .await;
    // Bot calls by bot and outcome: one that answers, one that traps, one that runs out of time.
    crate::bots::local_bot(&app, &key, "meter", "evil").await;
    crate::bots::local_bot(&app, &key, "signup", "signup").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    // A token minted directly: signing in would use up this test's one code-route call.
    let user = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap().0;
    for (bot, flow, status) in [("signup", "signup", 200), ("meter", "trap", 502), ("meter", "loop", 502)] {
        let invite = app.post(&key, &format!("/api/v1/bots/{bot}/flows/{flow}/invite"), json!({"phone": PHONE})).await;
        let reference = invite.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
        let r = app.post(&user, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await;
        assert_eq!(r.status.as_u16(), status, "{bot}/{flow}: {:?}", r.json);
    }
    // A refusal by the code-route limit (one start a minute from this address).
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": "+15552220000"}))).await;
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": "+15552220001"})))
        .await
        .error(429, "rate_limited");
    let after = scrape().await;
    assert!(sample(&after, "hubbub_webhook_attempts_total", &["outcome=\"succeeded\""]) >= attempts + 1.0, "{after}");
    assert!(sample(&after, "hubbub_rate_limited_total", &["limit=\"code_route\""]) >= limited + 1.0, "{after}");
    assert_eq!(sample(&after, "hubbub_bot_calls_total", &["bot=\"metered/signup\"", "outcome=\"ok\""]), 1.0, "{after}");
    assert_eq!(
        sample(&after, "hubbub_bot_calls_total", &["bot=\"metered/meter\"", "outcome=\"trap\""]),
        1.0,
        "{after}"
    );
    assert_eq!(
        sample(&after, "hubbub_bot_calls_total", &["bot=\"metered/meter\"", "outcome=\"timeout\""]),
        1.0,
        "{after}"
    );
    assert_eq!(sample(&after, "hubbub_bot_call_duration_seconds_count", &["bot=\"metered/meter\""]), 2.0, "{after}");
    assert!(sample(&after, "hubbub_http_requests_total", &[route, "method=\"POST\"", "status=\"201\""]) >= sends + 1.0);
    assert!(sample(&after, "hubbub_http_requests_total", &[route, "status=\"422\""]) >= 1.0);
    assert!(sample(&after, "hubbub_messages_accepted_total", &[]) >= accepted + 1.0);
    assert!(sample(&after, "hubbub_messages_total", &["state=\"sent\""]) >= 1.0, "{after}");
    assert!(after.contains("hubbub_http_request_duration_seconds_bucket{"), "latency histograms");
    for gauge in [
        "hubbub_delivery_backlog",
        "hubbub_webhook_backlog",
        "hubbub_webhook_backlog_oldest_seconds",
        "hubbub_broadcasts_in_progress",
        "hubbub_bot_pool_resident_bytes",
    ] {
        assert!(after.lines().any(|l| l.starts_with(gauge)), "{gauge} missing");
    }
    assert!(!after.contains("msg_"), "no message ref in the metrics");
    // Off without a token.
    let plain = TestApp::start().await;
    plain.request(Method::GET, "/metrics", None, None).await.error(404, "not_found");
}

#[tokio::test]
async fn rate_limits_are_for_the_whole_service_when_hosts_share_the_database() {
    // Two hosts behind one balancer, a burst of 4 per credential for the service: 2 on each host.
    let limits = |c: &mut hubbub_host::config::Config| {
        c.hosts = 2;
        c.rate_limit_per_s = 1;
        c.rate_limit_burst = 4;
    };
    let a = TestApp::start_with(limits).await;
    let b = TestApp::start_on(a.db.clone(), limits).await;
    let key = a.partner("acme").await;
    let mut answered = Vec::new();
    for host in [&a, &b, &a, &b, &a, &b] {
        answered.push(host.get(&key, "/api/v1/messages").await.status.as_u16());
    }
    assert_eq!(answered, [200, 200, 200, 200, 429, 429], "the service allowed its burst, not twice it");
}

#[tokio::test]
async fn closed_set_filters_are_typed_empty_is_no_filter_and_a_stranger_value_is_422_naming_the_choices() {
    let app = TestApp::start_with(|c| c.dev = true).await;
    let key = app.partner_with("acme", true).await;
    for (path, field, expected) in [
        ("/api/v1/conversations?state=", "state", None),
        ("/api/v1/conversations?state=open", "state", None),
        ("/api/v1/conversations?state=shut", "state", Some("open, pending, closed")),
        ("/api/v1/webhooks/deliveries?state=failed", "state", None),
        ("/api/v1/webhooks/deliveries?state=", "state", None),
        ("/api/v1/webhooks/deliveries?state=lost", "state", Some("pending, succeeded, failed, dead")),
        ("/api/v1/dev-sink/messages?channel=sms", "channel", None),
        ("/api/v1/dev-sink/messages?channel=", "channel", None),
        ("/api/v1/dev-sink/messages?channel=inapp", "channel", Some("sms, whatsapp")),
    ] {
        let r = app.get(&key, path).await;
        match expected {
            None => {
                r.ok(200);
            }
            Some(choices) => {
                r.error(422, "validation");
                assert_eq!(r.json["error"]["field"], field, "{path}");
                let message = r.json["error"]["message"].as_str().unwrap();
                assert!(message.contains(choices), "{path}: {message}");
            }
        }
    }
    app.stop().await;
}

#[test]
fn every_operation_has_an_id_of_its_own() {
    // Generated clients name a method after each operationId: two alike do not compile (TypeScript) or one
    // hides the other.
    let doc = hubbub_host::http::openapi::document();
    let mut seen = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if let Some(id) = op["operationId"].as_str() {
                if let Some(first) = seen.insert(id.to_string(), format!("{method} {path}")) {
                    panic!("operationId {id} is both {first} and {method} {path}");
                }
            }
        }
    }
    assert!(seen.len() > 100, "{} operations", seen.len());
}
