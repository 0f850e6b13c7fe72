//! Bots, flows and the Wasm runtime over HTTP (docs/api.md, "Bots and flows"): credentials, component upload, the
//! sample flows end to end, validation before the guest is called, malicious guests, the inbound
//! webhook's authentication, and `webhook`-mode bots.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, eventually, wasm};

const PHONE: &str = "+15551230000";

/// Creates a local bot and uploads `component`; returns (bot token, webhook secret).
pub(crate) async fn local_bot(app: &TestApp, key: &str, code: &str, component: &str) -> (String, String) {
    let r = app
        .post(key, "/api/v1/bots", json!({"code": code, "name": format!("{code} bot"), "runtime_mode": "local"}))
        .await;
    let body = r.ok(201).clone();
    app.upload_component(key, code, &wasm(component)).await.ok(200);
    (body["bot_token"].as_str().unwrap().to_string(), body["webhook_secret"].as_str().unwrap().to_string())
}

/// A user linked to the partner, logged in; returns the token.
async fn user(app: &TestApp, key: &str, phone: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.login(phone).await
}

async fn guest_state(app: &TestApp, reference: &str) -> Option<String> {
    sqlx::query_scalar("SELECT guest_state FROM flow_sessions WHERE ref = $1")
        .bind(reference)
        .fetch_one(app.state.db.reader())
        .await
        .unwrap()
}

#[tokio::test]
async fn create_read_rotate_and_scope_bot_credentials() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let r = app.post(&key, "/api/v1/bots", json!({"code": "helper", "name": "Helper", "runtime_mode": "local"})).await;
    let created = r.ok(201).clone();
    let token = created["bot_token"].as_str().unwrap().to_string();
    let secret = created["webhook_secret"].as_str().unwrap().to_string();
    assert!(token.starts_with("bot_") && token.contains('.'));
    assert!(secret.starts_with("whsec_"));
    assert!(created["warning"].as_str().unwrap().contains("once"));
    let creds = &created["bot"]["credentials"];
    assert_eq!(creds["token_configured"], true);
    assert!(token.starts_with(creds["token_prefix"].as_str().unwrap()));
    assert_eq!(creds["inbound_webhook_path"], "/api/v1/bots/helper/webhook");
    app.post(&key, "/api/v1/bots", json!({"code": "helper", "name": "Again"})).await.error(409, "conflict");
    // The partner's bots are listed (never the token or secret); another partner's are not.
    app.post(&key, "/api/v1/bots", json!({"code": "listed", "name": "Listed"})).await.ok(201);
    let listed = app.get(&key, "/api/v1/bots").await.ok(200).clone();
    let codes: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|b| b["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["helper", "listed"]);
    assert!(!listed.to_string().contains(&token[12..]) && !listed.to_string().contains(&secret[10..]));
    assert!(app.get(&other, "/api/v1/bots").await.ok(200)["data"].as_array().unwrap().is_empty());
    app.post(&key, "/api/v1/bots", json!({"code": "Bad Code", "name": "x"})).await.field_error("code");
    app.post(&key, "/api/v1/bots", json!({"code": "x", "name": "x", "runtime_mode": "cloud"}))
        .await
        .field_error("runtime_mode");
    app.post(&key, "/api/v1/bots", json!({"code": "y", "name": "y", "runtime_mode": "webhook"}))
        .await
        .field_error("webhook_url");
    // Webhook mode on a bot that has no URL: the request is well formed, the bot's state is in the way (409);
    // webhook mode while clearing the URL contradicts itself (422).
    let to_webhook = json!({"runtime_mode": "webhook"});
    app.request(Method::PATCH, "/api/v1/bots/helper", Some(&key), Some(&to_webhook)).await.error(409, "conflict");
    let cleared = json!({"runtime_mode": "webhook", "webhook_url": ""});
    app.request(Method::PATCH, "/api/v1/bots/helper", Some(&key), Some(&cleared)).await.field_error("webhook_url");
    // Read with the partner key or the bot's own token; never the secrets.
    let got = app.get(&key, "/api/v1/bots/helper").await;
    assert_eq!(got.ok(200)["bot"]["code"], "helper");
    assert!(!got.json.to_string().contains(&secret) && !got.json.to_string().contains(&token));
    app.get(&token, "/api/v1/bots/helper").await.ok(200);
    let c = app.get(&token, "/api/v1/bots/helper/credentials").await;
    assert_eq!(c.ok(200)["credentials"]["token_prefix"], creds["token_prefix"]);
    app.get(&other, "/api/v1/bots/helper").await.error(404, "not_found");
    // A bot token is scoped: not another bot, not the partner-key routes.
    app.post(&key, "/api/v1/bots", json!({"code": "second", "name": "Second"})).await.ok(201);
    app.get(&token, "/api/v1/bots/second").await.error(403, "forbidden");
    app.post(&token, "/api/v1/bots/helper/token/rotate", json!({})).await.error(403, "forbidden");
    app.get(&token, "/api/v1/messages").await.error(403, "forbidden");
    // PATCH.
    let r = app
        .request(
            Method::PATCH,
            "/api/v1/bots/helper",
            Some(&key),
            Some(&json!({"name": "Helper 2", "channels": ["inapp", "sms"], "allowed_ips": "127.0.0.1, 10.0.0.0/8"})),
        )
        .await;
    let bot = r.ok(200)["bot"].clone();
    assert_eq!(bot["name"], "Helper 2");
    assert_eq!(bot["channels"], json!(["inapp", "sms"]));
    app.request(Method::PATCH, "/api/v1/bots/helper", Some(&key), Some(&json!({"allowed_ips": "not-an-ip"})))
        .await
        .field_error("allowed_ips");
    app.request(Method::PATCH, "/api/v1/bots/helper", Some(&key), Some(&json!({"channels": ["fax"]})))
        .await
        .field_error("channels");
    // Rotation: the old token stops working.
    let rotated = app.post(&key, "/api/v1/bots/helper/token/rotate", json!({})).await.ok(200)["bot_token"]
        .as_str()
        .unwrap()
        .to_string();
    app.get(&token, "/api/v1/bots/helper").await.error(401, "unauthorized");
    app.get(&rotated, "/api/v1/bots/helper").await.ok(200);
    let new_secret =
        app.post(&key, "/api/v1/bots/helper/webhook/secret/rotate", json!({})).await.ok(200)["webhook_secret"]
            .as_str()
            .unwrap()
            .to_string();
    assert_ne!(new_secret, secret);
}

#[tokio::test]
async fn component_upload_validates_and_reports_flows() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/bots", json!({"code": "signup", "name": "Sign-up"})).await.ok(201);
    let bytes = wasm("signup");
    let r = app.upload_component(&key, "signup", &bytes).await;
    let component = r.ok(200)["component"].clone();
    let digest = format!("sha256:{}", sha2_hex(&bytes));
    assert_eq!(component["digest"], digest);
    assert_eq!(component["size"], bytes.len());
    assert_eq!(component["flows"][0]["code"], "signup");
    assert_eq!(app.get(&key, "/api/v1/bots/signup").await.json["bot"]["component"]["digest"], digest);
    let refused = app.upload_component(&key, "signup", b"definitely not wasm").await;
    refused.error(422, "invalid_component");
    // The refusal names the WIT versions this host runs.
    assert!(refused.json["error"]["message"].as_str().unwrap().contains("hubbub:bot@0.1.0"), "{}", refused.json);
    app.upload_component(&key, "signup", &[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00])
        .await
        .error(422, "invalid_component");
    app.upload_component(&key, "nobody", &bytes).await.error(404, "not_found");
}

fn sha2_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn signup_values() -> Value {
    json!({"name": "Ana", "email": "ana@example.com", "phone": "+15551112222", "birthday": "1990-02-28", "plan": "pro", "newsletter": "yes"})
}

#[tokio::test]
async fn the_signup_flow_end_to_end_with_server_side_validation() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "signup", "signup").await;
    let token = user(&app, &key, PHONE).await;
    let r = app.post(&key, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": PHONE})).await;
    let invite = r.ok(201)["flow_session"].clone();
    assert_eq!(invite["state"], "invited");
    assert_eq!(invite["flow"], "signup");
    let reference = invite["ref"].as_str().unwrap().to_string();
    app.post(&key, "/api/v1/bots/signup/flows/nope/invite", json!({"phone": PHONE})).await.error(404, "not_found");
    // The card is in the hub and the flow in /me/forms.
    let hub = app.get(&token, "/api/v1/me/messages").await;
    assert_eq!(hub.ok(200)["data"][0]["flow"]["ref"], reference.as_str());
    let forms = app.get(&token, "/api/v1/me/forms").await;
    assert_eq!(forms.ok(200)["data"][0]["ref"], reference.as_str());
    assert_eq!(forms.json["data"][0]["flow"], "signup");
    // Start: the details screen with its six fields.
    let r = app.post(&token, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await;
    let started = r.ok(200).clone();
    assert_eq!(started["state"], "in_progress");
    let screen = &started["steps"][0]["screen"];
    assert_eq!(started["steps"][0]["type"], "flow_screen");
    assert_eq!(screen["id"], "details");
    assert_eq!(screen["kind"], "form");
    let keys: Vec<&str> = screen["fields"].as_array().unwrap().iter().map(|f| f["key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["name", "email", "phone", "birthday", "plan", "newsletter"]);
    let before = guest_state(&app, &reference).await;
    // Invalid values: 422 with a message per field, and the guest is not called (its counter stays).
    let bad = json!({"name": "", "email": "ana@", "phone": "555", "birthday": "2023-02-30", "plan": "gold", "newsletter": "maybe"});
    let r = app
        .post(&token, &format!("/api/v1/me/flows/{reference}/submit"), json!({"screen": "details", "values": bad}))
        .await;
    r.error(422, "validation");
    let fields = r.json["error"]["fields"].as_object().unwrap();
    for key in ["name", "email", "phone", "birthday", "plan", "newsletter"] {
        assert!(fields.contains_key(key), "{key} not reported: {fields:?}");
    }
    app.post(
        &token,
        &format!("/api/v1/me/flows/{reference}/submit"),
        json!({"screen": "other", "values": signup_values()}),
    )
    .await
    .field_error("screen");
    assert_eq!(guest_state(&app, &reference).await, before, "the guest was not called");
    // Valid: completed with a summary echoing the values.
    let r = app
        .post(
            &token,
            &format!("/api/v1/me/flows/{reference}/submit"),
            json!({"screen": "details", "values": signup_values()}),
        )
        .await;
    let done = r.ok(200).clone();
    assert_eq!(done["state"], "completed");
    assert_eq!(done["summary"]["name"], "Ana");
    assert_eq!(done["summary"]["plan"], "pro");
    assert_eq!(done["summary"]["newsletter"], true);
    assert_eq!(done["steps"][0]["type"], "flow_completed");
    assert!(guest_state(&app, &reference).await.unwrap().contains("\"submits\":1"));
    // The card is read-only, and the form leaves the list.
    app.post(
        &token,
        &format!("/api/v1/me/flows/{reference}/submit"),
        json!({"screen": "details", "values": signup_values()}),
    )
    .await
    .error(409, "conflict");
    app.post(&token, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await.error(409, "conflict");
    assert!(app.get(&token, "/api/v1/me/forms").await.json["data"].as_array().unwrap().is_empty());
    let card = app.get(&token, "/api/v1/me/messages").await.json["data"][0].clone();
    assert_eq!(card["flow"]["state"], "completed");
    assert_eq!(card["flow"]["summary"]["email"], "ana@example.com");
    // Someone else's flow is 404.
    let stranger = app.login("+15559990000").await;
    app.post(&stranger, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await.error(404, "not_found");

    // The partner sees its bots' sessions, newest first: by bot (the console's Bots page) and by phone (the
    // contact panel).
    let again = app.post(&key, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": "+15557654321"})).await;
    let newest = again.ok(201)["flow_session"]["ref"].clone();
    let list = app.get(&key, "/api/v1/flow-sessions?bot=signup").await;
    let data = list.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 2);
    assert_eq!((&data[0]["ref"], &data[0]["state"], &data[0]["kind"]), (&newest, &json!("invited"), &json!("flow")));
    assert_eq!(data[1]["ref"], reference.as_str());
    assert_eq!(
        (&data[1]["state"], &data[1]["flow"], &data[1]["title"]),
        (&json!("completed"), &json!("signup"), &json!("Sign up"))
    );
    assert!(data[1]["completed_at"].is_string() && data[0]["completed_at"].is_null());
    assert_eq!(data[1]["bot"], "signup");
    let mine = app.get(&key, &format!("/api/v1/flow-sessions?phone={}", PHONE.replace('+', "%2B"))).await;
    let mine = mine.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0]["ref"], reference.as_str());
    let page = app.get(&key, "/api/v1/flow-sessions?limit=1").await;
    assert_eq!(page.ok(200)["data"].as_array().unwrap().len(), 1);
    let next = page.json["next_cursor"].as_str().unwrap().to_string();
    let rest = app.get(&key, &format!("/api/v1/flow-sessions?limit=1&cursor={next}")).await;
    assert_eq!(rest.ok(200)["data"][0]["ref"], reference.as_str());
    app.get(&key, "/api/v1/flow-sessions?phone=555").await.field_error("phone");
    app.get(&key, "/api/v1/flow-sessions?bot=nope").await.error(404, "not_found");
    // Another partner sees none of them, and its filter on this bot is 404.
    let other = app.partner("globex").await;
    assert!(app.get(&other, "/api/v1/flow-sessions").await.ok(200)["data"].as_array().unwrap().is_empty());
    app.get(&other, "/api/v1/flow-sessions?bot=signup").await.error(404, "not_found");
}

#[tokio::test]
async fn the_shop_flow_menus_form_payment_and_the_chat_bot() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    local_bot(&app, &key, "chat", "chat").await;
    let token = user(&app, &key, PHONE).await;
    let reference = app.post(&key, "/api/v1/bots/shop/flows/order/invite", json!({"phone": PHONE})).await.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let path = |p: &str| format!("/api/v1/me/flows/{reference}/{p}");
    let r = app.post(&token, &path("start"), json!({})).await;
    let menu = &r.ok(200)["steps"][0];
    assert_eq!(menu["type"], "menu");
    assert_eq!(menu["style"], "button");
    let r = app.post(&token, &path("events"), json!({"type": "select", "id": "coffee"})).await;
    let list = r.ok(200)["steps"].as_array().unwrap().iter().find(|s| s["type"] == "menu").unwrap().clone();
    assert_eq!(list["style"], "list");
    assert!(list["sections"].as_array().unwrap().len() >= 2);
    let r = app.post(&token, &path("events"), json!({"type": "select", "id": "large"})).await;
    let screen =
        r.ok(200)["steps"].as_array().unwrap().iter().find(|s| s["type"] == "flow_screen").unwrap()["screen"].clone();
    assert_eq!(screen["id"], "delivery");
    app.post(&token, &path("submit"), json!({"screen": "delivery", "values": {"address": "Main St 1"}}))
        .await
        .field_error("when");
    let r = app
        .post(
            &token,
            &path("submit"),
            json!({"screen": "delivery", "values": {"address": "Main St 1", "when": "2026-12-01"}}),
        )
        .await;
    let payment =
        r.ok(200)["steps"].as_array().unwrap().iter().find(|s| s["type"] == "payment").unwrap()["payment"].clone();
    assert_eq!(payment["currency"], "EUR");
    // The outcome comes from the (dev) payment provider, never from the app (tests/api/payments.rs).
    let pay = |reference: String, action: &'static str| {
        let client = app.client.clone();
        let url = format!("{}/pay/{reference}", app.base);
        async move {
            let r = client
                .post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("action={action}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        }
    };
    pay(payment["ref"].as_str().unwrap().to_string(), "decline").await;
    let r = app.get(&token, &path("steps")).await;
    let retry =
        r.ok(200)["steps"].as_array().unwrap().iter().find(|s| s["type"] == "payment").unwrap()["payment"]["ref"]
            .as_str()
            .unwrap()
            .to_string();
    pay(retry.clone(), "pay").await;
    let done = app.get(&token, &path("steps")).await;
    let done = done.ok(200);
    assert_eq!(done["state"], "completed");
    assert_eq!(done["summary"]["reference"], retry.as_str());
    // The chat bot: a session, text and menu events; never a support conversation.
    let r = app.post(&token, "/api/v1/me/bots/chat/sessions", json!({})).await;
    let session = r.ok(201)["session"].as_str().unwrap().to_string();
    assert!(r.json["steps"].as_array().unwrap().iter().any(|s| s["type"] == "menu"));
    let r = app
        .post(
            &token,
            &format!("/api/v1/me/bots/chat/sessions/{session}/events"),
            json!({"type": "text", "text": "hello"}),
        )
        .await;
    assert!(r.ok(200)["steps"][0]["text"].as_str().unwrap().contains("hello"));
    let r = app
        .post(
            &token,
            &format!("/api/v1/me/bots/chat/sessions/{session}/events"),
            json!({"type": "select", "id": "hours"}),
        )
        .await;
    assert_eq!(r.ok(200)["steps"][0]["type"], "message");
    app.post(&token, &format!("/api/v1/me/bots/chat/sessions/{session}/events"), json!({"type": "dance"}))
        .await
        .field_error("type");
    assert!(app.get(&token, "/api/v1/me/conversations").await.json["data"].as_array().unwrap().is_empty());
    assert_eq!(app.get(&token, "/api/v1/me/bots").await.json["data"].as_array().unwrap().len(), 2);
    // Another partner's user cannot reach these bots.
    let stranger = app.login("+15559990000").await;
    app.post(&stranger, "/api/v1/me/bots/chat/sessions", json!({})).await.error(404, "not_found");
}

#[tokio::test]
async fn misbehaving_guests_get_bot_error_while_others_keep_answering() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "evil", "evil").await;
    local_bot(&app, &key, "signup", "signup").await;
    let token = user(&app, &key, PHONE).await;
    // A well-behaved bot answering all along, concurrently.
    let good = {
        let (client, base, key, token) = (app.client.clone(), app.base.clone(), key.clone(), token.clone());
        tokio::spawn(async move {
            let mut answered = 0;
            for _ in 0..10 {
                let invite: Value = client
                    .post(format!("{base}/api/v1/bots/signup/flows/signup/invite"))
                    .bearer_auth(&key)
                    .json(&json!({"phone": PHONE}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let reference = invite["flow_session"]["ref"].as_str().unwrap().to_string();
                let r = client
                    .post(format!("{base}/api/v1/me/flows/{reference}/start"))
                    .bearer_auth(&token)
                    .json(&json!({}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                answered += 1;
            }
            answered
        })
    };
    for flow in ["loop", "memory", "huge", "trap", "malformed"] {
        let reference = app
            .post(&key, &format!("/api/v1/bots/evil/flows/{flow}/invite"), json!({"phone": PHONE}))
            .await
            .ok(201)["flow_session"]["ref"]
            .as_str()
            .unwrap()
            .to_string();
        let r = app.post(&token, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await;
        r.error(502, "bot_error");
    }
    for flow in ["file", "env"] {
        let reference = app
            .post(&key, &format!("/api/v1/bots/evil/flows/{flow}/invite"), json!({"phone": PHONE}))
            .await
            .ok(201)["flow_session"]["ref"]
            .as_str()
            .unwrap()
            .to_string();
        let r = app.post(&token, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await;
        let text = r.json.to_string();
        assert!(!text.contains("root:x:0:0"), "no file content leaks: {text}");
        assert!(!text.contains("HUBBUB_") && !text.contains("PATH="), "no environment leaks: {text}");
    }
    assert_eq!(good.await.unwrap(), 10);
    // The host still serves.
    app.get(&key, "/api/v1/bots/evil").await.ok(200);
}

#[tokio::test]
async fn the_inbound_webhook_accepts_exactly_three_auth_methods() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let created = app.post(&key, "/api/v1/bots", json!({"code": "hook", "name": "Hook"})).await.ok(201).clone();
    let token = created["bot_token"].as_str().unwrap().to_string();
    let secret = created["webhook_secret"].as_str().unwrap().to_string();
    let other = app.post(&key, "/api/v1/bots", json!({"code": "other", "name": "Other"})).await.ok(201)["bot_token"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!("{}/api/v1/bots/hook/webhook", app.base);
    let body = json!({"event": "ping", "data": {}}).to_string();
    let send = |headers: Vec<(&'static str, String)>, body: String| {
        let mut req = app.client.post(&url).header("content-type", "application/json").body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.send()
    };
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(status(send(vec![("authorization", format!("Bearer {token}"))], body.clone()).await.unwrap()), 200);
    assert_eq!(status(send(vec![("x-service-bot-secret", secret.clone())], body.clone()).await.unwrap()), 200);
    let sig = hubbub_host::signing::service_signature(&secret, body.as_bytes());
    assert_eq!(status(send(vec![("x-service-signature", format!("sha256={sig}"))], body.clone()).await.unwrap()), 200);
    assert_eq!(status(send(vec![("x-service-signature", sig.clone())], body.clone()).await.unwrap()), 200);
    // Rejections.
    assert_eq!(status(send(vec![], body.clone()).await.unwrap()), 401);
    assert_eq!(status(send(vec![("authorization", "Bearer bot_nope.nope".into())], body.clone()).await.unwrap()), 401);
    assert_eq!(status(send(vec![("authorization", format!("Bearer {other}"))], body.clone()).await.unwrap()), 403);
    assert_eq!(status(send(vec![("x-service-bot-secret", "whsec_wrong".into())], body.clone()).await.unwrap()), 401);
    assert_eq!(
        status(
            send(
                vec![("x-service-signature", format!("sha256={sig}"))],
                json!({"event": "ping", "data": {"x": 1}}).to_string()
            )
            .await
            .unwrap()
        ),
        401,
        "signature over another body"
    );
    let unknown = send(vec![("authorization", format!("Bearer {token}"))], json!({"event": "explode"}).to_string())
        .await
        .unwrap();
    assert_eq!(status(unknown), 422);
    // allowed_ips: this test's address is 127.0.0.1.
    app.request(Method::PATCH, "/api/v1/bots/hook", Some(&key), Some(&json!({"allowed_ips": "10.0.0.1"})))
        .await
        .ok(200);
    assert_eq!(status(send(vec![("authorization", format!("Bearer {token}"))], body.clone()).await.unwrap()), 403);
    app.get(&token, "/api/v1/bots/hook").await.error(403, "forbidden");
    app.request(Method::PATCH, "/api/v1/bots/hook", Some(&key), Some(&json!({"allowed_ips": "127.0.0.0/8"})))
        .await
        .ok(200);
    assert_eq!(status(send(vec![("authorization", format!("Bearer {token}"))], body.clone()).await.unwrap()), 200);
    app.request(Method::PATCH, "/api/v1/bots/hook", Some(&key), Some(&json!({"allowed_ips": ""}))).await.ok(200);
    app.get(&token, "/api/v1/bots/hook").await.ok(200);
}

#[tokio::test]
async fn webhook_mode_bots_get_signed_events_and_answer_through_the_inbound_webhook() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let created = app
        .post(
            &key,
            "/api/v1/bots",
            json!({"code": "remote", "name": "Remote", "runtime_mode": "webhook", "webhook_url": recv.url}),
        )
        .await
        .ok(201)
        .clone();
    let token = created["bot_token"].as_str().unwrap().to_string();
    let secret = created["webhook_secret"].as_str().unwrap().to_string();
    // The test ping is signed the bot way.
    let r = app.post(&key, "/api/v1/bots/remote/webhook/test", json!({})).await;
    assert_eq!(r.ok(200)["ok"], true);
    let ping = recv.received()[0].clone();
    assert_eq!(ping.headers["x-service-event"], "bot.webhook.test");
    assert_eq!(ping.headers["x-service-bot"], "remote");
    assert_eq!(ping.headers["x-service-bot-secret"].to_str().unwrap(), secret);
    let sig = hubbub_host::signing::service_signature(&secret, &ping.body);
    assert_eq!(ping.headers["x-service-signature"].to_str().unwrap(), format!("sha256={sig}"));
    let payload = ping.json();
    assert_eq!(payload["event"], "bot.webhook.test");
    assert_eq!(payload["bot"]["code"], "remote");
    assert_eq!(payload["bot"]["partner_code"], "acme");
    assert!(payload["bot"]["ref"].is_string());
    assert_eq!(payload["payload"], json!({}));
    // A user's chat goes to the bot as signed events; its reply comes back through the inbound webhook.
    let user_token = user(&app, &key, PHONE).await;
    let r = app.post(&user_token, "/api/v1/me/bots/remote/sessions", json!({})).await;
    let session = r.ok(201)["session"].as_str().unwrap().to_string();
    app.post(
        &user_token,
        &format!("/api/v1/me/bots/remote/sessions/{session}/events"),
        json!({"type": "text", "text": "hi"}),
    )
    .await
    .ok(200);
    eventually("session events at the bot", || async { recv.received().len() >= 3 }).await;
    let event = recv.received().iter().find(|r| r.headers["x-service-event"] == "session.event").unwrap().json();
    assert_eq!(event["payload"]["session"], session.as_str());
    assert_eq!(event["payload"]["event"], json!({"type": "text", "text": "hi"}));
    let reply = json!({"event": "reply", "data": {"session": session, "steps": [{"type": "message", "text": "Hello from the partner"}]}});
    let r = app
        .client
        .post(format!("{}/api/v1/bots/remote/webhook", app.base))
        .bearer_auth(&token)
        .json(&reply)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let bad = json!({"event": "reply", "data": {"session": session, "steps": [{"type": "teleport"}]}});
    let r = app
        .client
        .post(format!("{}/api/v1/bots/remote/webhook", app.base))
        .bearer_auth(&token)
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let got = app.get(&user_token, &format!("/api/v1/me/bots/remote/sessions/{session}")).await;
    assert_eq!(got.ok(200)["steps"], json!([{"type": "message", "text": "Hello from the partner"}]));
    assert_eq!(
        app.get(&user_token, &format!("/api/v1/me/bots/remote/sessions/{session}")).await.json["steps"],
        json!([]),
        "shown once"
    );
}

#[tokio::test]
async fn bots_keep_answering_when_their_components_take_turns_in_memory() {
    // One component in memory at a time: each call past the first finds its bot's component dropped and
    // loads it again (from the database and the precompiled artifact).
    let app = TestApp::start_with(|c| c.bot_max_loaded = 1).await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    local_bot(&app, &key, "chat", "chat").await;
    let token = user(&app, &key, PHONE).await;
    for _ in 0..3 {
        let r = app.post(&token, "/api/v1/me/bots/chat/sessions", json!({})).await;
        assert!(r.ok(201)["steps"].as_array().unwrap().iter().any(|s| s["type"] == "menu"));
        let invite = app.post(&key, "/api/v1/bots/shop/flows/order/invite", json!({"phone": PHONE})).await;
        let reference = invite.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
        let r = app.post(&token, &format!("/api/v1/me/flows/{reference}/start"), json!({})).await;
        assert_eq!(r.ok(200)["steps"][0]["type"], "menu");
        assert_eq!(app.state.runtime.loaded_count(), 1);
    }
}
