//! Routing and fallback (docs/api.md, "Sending"): the hub for claimed users with a device, otherwise WhatsApp
//! then SMS; OTPs by SMS when offline; providers that fail or time out; durability across restarts and
//! several hosts.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, attempts, eventually, spawn_server};
use hubbub_host::store::outbox::{self, Target};

const PHONE: &str = "+15551230000";

fn pair(c: &str, s: &str) -> (String, String) {
    (c.to_string(), s.to_string())
}

#[tokio::test]
async fn claimed_user_with_a_device_is_reached_in_the_hub() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    let id = app.send_text(&key, PHONE, "hello hub").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(m["state"], "sent");
    assert_eq!(m["channel"], "inapp");
    assert_eq!(attempts(&m), vec![pair("inapp", "sent")]);
    assert!(app.sink(PHONE, "whatsapp").await.is_empty());
    // The user's app fetches it: delivered, then read.
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    assert_eq!(app.message(&key, id).await["state"], "delivered");
    let reference = m["ref"].as_str().unwrap();
    app.post(&token, &format!("/api/v1/me/messages/{reference}/read"), json!({})).await.ok(200);
    assert_eq!(app.message(&key, id).await["state"], "read");
    // Every change was a message.status event, in order, with growing seq.
    let pid = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap().id;
    let events = outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("message.status")).await.unwrap();
    let mine: Vec<&Value> = events.iter().rev().map(|(_, _, p)| p).filter(|p| p["message_id"] == id).collect();
    let states: Vec<(&str, i64, &str)> = mine
        .iter()
        .map(|p| (p["state"].as_str().unwrap(), p["seq"].as_i64().unwrap(), p["channel"].as_str().unwrap()))
        .collect();
    assert_eq!(states, vec![("sent", 1, "inapp"), ("delivered", 2, "inapp"), ("read", 3, "inapp")]);
}

#[tokio::test]
async fn unclaimed_users_get_whatsapp_with_the_text_and_links() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    // HUBBUB_PUBLIC_URL: where the app is.
    let app_url = app.state.config.public_url.clone();
    let text = app.send_text(&key, PHONE, "Your parcel ships today").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, text).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("whatsapp")));
    assert_eq!(attempts(&m), vec![pair("whatsapp", "sent")]);
    let link = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "link", "link_url": "https://example.com/offer", "body": "Half price"})).await;
    app.delivered(&key, link.ok(201)["message_id"].as_i64().unwrap()).await;
    let html = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": PHONE, "content_type": "html", "html": "<p>News</p>", "subject": "November news"}),
        )
        .await;
    let html_ref = html.ok(201)["ref"].as_str().unwrap().to_string();
    app.delivered(&key, html.json["message_id"].as_i64().unwrap()).await;
    let image = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "image", "media_base64": "aGVsbG8=", "media_mimetype": "image/png", "body": "Look"})).await;
    let image_ref = image.ok(201)["ref"].as_str().unwrap().to_string();
    app.delivered(&key, image.json["message_id"].as_i64().unwrap()).await;
    let wa = app.sink(PHONE, "whatsapp").await;
    assert_eq!(wa.len(), 4);
    assert!(wa[0].contains("Your parcel ships today") && wa[0].starts_with("acme Inc."), "{}", wa[0]);
    assert!(wa[1].contains("Half price") && wa[1].contains("https://example.com/offer"), "{}", wa[1]);
    // Newsletters and stored media link into the app, which opens the message (after sign-in).
    assert!(wa[2].contains("November news") && wa[2].contains(&format!("{app_url}/m/{html_ref}")), "{}", wa[2]);
    assert!(wa[3].contains("Look") && wa[3].contains(&format!("{app_url}/m/{image_ref}")), "{}", wa[3]);
    // A flow invitation links to its form in the app.
    app.post(
        &key,
        "/api/v1/bots",
        json!({"code": "desk", "name": "Desk", "runtime_mode": "webhook", "webhook_url": "http://127.0.0.1:9/hook"}),
    )
    .await
    .ok(201);
    let invited = app.post(&key, "/api/v1/bots/desk/flows/intake/invite", json!({"phone": PHONE})).await;
    let flow_ref = invited.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    app.delivered(&key, invited.json["flow_session"]["message_id"].as_i64().unwrap()).await;
    let wa = app.sink(PHONE, "whatsapp").await;
    assert!(
        wa[4].contains("invites you to fill in") && wa[4].ends_with(&format!("{app_url}/forms/{flow_ref}")),
        "{}",
        wa[4]
    );
    // The content links (what the app's newsletter reader shows) work without credentials.
    let page = app.client.get(format!("{}/api/v1/content/{html_ref}", app.base)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("sandbox"));
    assert_eq!(page.text().await.unwrap(), "<p>News</p>");
    let img = app.client.get(format!("{}/api/v1/content/{image_ref}", app.base)).send().await.unwrap();
    assert_eq!(img.bytes().await.unwrap().as_ref(), b"hello");
    assert_eq!(app.client.get(format!("{}/api/v1/content/msg_nope", app.base)).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn otp_priority_goes_straight_to_sms_when_offline() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let r = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "Code 1234", "priority": "otp"})).await;
    let m = app.delivered(&key, r.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(attempts(&m), vec![pair("sms", "sent")]);
    assert!(app.sink(PHONE, "whatsapp").await.is_empty());
    // A claimed user who is online gets it in the hub; offline, by SMS.
    let token = app.login(PHONE).await;
    app.get(&token, "/api/v1/me/forms").await.ok(200);
    let r = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "Code 5678", "priority": "otp"})).await;
    assert_eq!(
        attempts(&app.delivered(&key, r.ok(201)["message_id"].as_i64().unwrap()).await),
        vec![pair("inapp", "sent")]
    );
    app.clock.advance_ms(301_000);
    let r = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "Code 9999", "priority": "otp"})).await;
    assert_eq!(
        attempts(&app.delivered(&key, r.ok(201)["message_id"].as_i64().unwrap()).await),
        vec![pair("sms", "sent")]
    );
}

#[tokio::test]
async fn real_providers_are_called_with_their_api_shapes() {
    let wa = FakeServer::start(200, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    // Inside the 24-hour window: free-form WhatsApp text may go.
    app.whatsapp_wrote(PHONE).await;
    let id = app.send_text(&key, PHONE, "via whatsapp").await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(attempts(&app.delivered(&key, id).await), vec![pair("whatsapp", "sent")]);
    let got = wa.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/12345/messages");
    assert_eq!(got[0].headers["authorization"], "Bearer wa-token");
    let body = got[0].json();
    assert_eq!(body["messaging_product"], "whatsapp");
    assert_eq!(body["to"], "15551230000");
    assert_eq!(body["type"], "text");
    assert!(body["text"]["body"].as_str().unwrap().contains("via whatsapp"));
    let otp = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "code 42", "priority": "otp"})).await;
    assert_eq!(
        attempts(&app.delivered(&key, otp.ok(201)["message_id"].as_i64().unwrap()).await),
        vec![pair("sms", "sent")]
    );
    let got = sms.received();
    assert_eq!(got[0].path, "/2010-04-01/Accounts/AC1/Messages.json");
    assert!(got[0].headers["authorization"].to_str().unwrap().starts_with("Basic "));
    let form: HashMap<String, String> = serde_urlencoded::from_bytes(&got[0].body).unwrap();
    assert_eq!(form["To"], PHONE);
    assert_eq!(form["From"], "+15550001111");
    assert!(form["Body"].contains("code 42"));
}

#[tokio::test]
async fn whatsapp_failure_or_timeout_falls_back_to_sms_and_both_failing_is_failed() {
    let wa = FakeServer::start(500, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    // No retry budget: a provider that is down hands over at once (tests/api/pacing.rs has the budget).
    let now = json!({"provider_retry_s": 0});
    app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&key), Some(&now)).await.ok(200);
    // Inside the 24-hour window: free-form WhatsApp text may go.
    app.whatsapp_wrote(PHONE).await;
    let id = app.send_text(&key, PHONE, "try wa").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(attempts(&m), vec![pair("whatsapp", "failed"), pair("sms", "sent")]);
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("sms")));
    assert!(m["attempts"][0]["error"].as_str().unwrap().contains("500"));
    // A timeout is a failed attempt too.
    wa.set(200, 2_000);
    let id = app.send_text(&key, PHONE, "slow wa").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(attempts(&m), vec![pair("whatsapp", "failed"), pair("sms", "sent")]);
    assert!(m["attempts"][0]["error"].as_str().unwrap().contains("timed out"), "{}", m["attempts"][0]);
    // Both failing: failed, with a message.status for it.
    wa.set(500, 0);
    sms.set(400, 0);
    let id = app.send_text(&key, PHONE, "nobody home").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(m["state"], "failed");
    assert_eq!(attempts(&m), vec![pair("whatsapp", "failed"), pair("sms", "failed")]);
    let pid = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap().id;
    let events = outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("message.status")).await.unwrap();
    assert!(events.iter().any(|(_, _, p)| p["message_id"] == id && p["state"] == "failed"));
}

#[tokio::test]
async fn unconfigured_providers_fail_attempts_instead_of_crashing() {
    let app = TestApp::start_with(|c| c.dev = false).await;
    let key = app.partner("acme").await;
    let id = app.send_text(&key, PHONE, "no providers").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(m["state"], "failed");
    assert!(m["attempts"][0]["error"].as_str().unwrap().contains("no WhatsApp provider"));
}

#[tokio::test]
async fn several_hosts_on_one_database_deliver_each_message_once() {
    let a = TestApp::start().await;
    // Two hosts whose clocks agree (leases are compared across hosts).
    let b = TestApp::start_on_clock(a.db.clone(), a.clock.clone(), |_| {}).await;
    let key = a.partner("acme").await;
    let mut ids = Vec::new();
    for i in 0..40 {
        let host = if i % 2 == 0 { &a } else { &b };
        ids.push(
            host.send_text(&key, &format!("+1555000{:04}", i), &format!("m{i}")).await.ok(201)["message_id"]
                .as_i64()
                .unwrap(),
        );
    }
    for id in &ids {
        let m = a.delivered(&key, *id).await;
        assert_eq!(attempts(&m), vec![pair("whatsapp", "sent")], "message {id}");
    }
    let sent: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM dev_sink WHERE channel = 'whatsapp'")
        .fetch_one(a.state.db.reader())
        .await
        .unwrap();
    assert_eq!(sent, 40, "one WhatsApp text per message");
    b.stop().await;
}

/// A host's write transaction that reads before it writes is never refused because another host on the same
/// database wrote in between (on SQLite, a deferred transaction would answer "database is locked" at once).
#[tokio::test]
async fn a_write_transaction_waits_for_another_hosts_writer_instead_of_failing() {
    let a = TestApp::start_with(|c| c.workers = false).await;
    let b = TestApp::start_on_clock(a.db.clone(), a.clock.clone(), |c| c.workers = false).await;
    let mut tx = a.state.db.begin().await.unwrap();
    let before: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM settings").fetch_one(&mut *tx).await.unwrap();
    // The other host writes while this transaction is open; it waits for this one (or, on PostgreSQL,
    // goes on: the rows differ).
    let other = tokio::spawn({
        let db = b.state.db.clone();
        async move {
            sqlx::query("INSERT INTO settings (name, value) VALUES ('other_host', 'x')").execute(db.writer()).await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    sqlx::query("INSERT INTO settings (name, value) VALUES ('this_host', 'y')").execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    other.await.unwrap().unwrap();
    let after: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM settings").fetch_one(a.state.db.reader()).await.unwrap();
    assert_eq!(after, before + 2, "both hosts' writes are kept");
    b.stop().await;
}

/// A message accepted with 201 is delivered even when the process dies right after answering.
#[tokio::test]
async fn killed_host_loses_no_accepted_message() {
    let slow = FakeServer::start(200, 3_000).await;
    let db = Arc::new(crate::common::TestDb::new().await);
    let create = crate::cli::hubbub(&db.url, &["partner", "create", "--code", "acme", "--name", "Acme"]);
    let key = serde_json::from_slice::<Value>(&create.stdout).unwrap()["api_key"].as_str().unwrap().to_string();
    let (mut child, port) = spawn_server(
        &db.url,
        &[
            ("HUBBUB_DEV", "1"),
            ("HUBBUB_WHATSAPP_PROVIDER", "cloud"),
            ("HUBBUB_WHATSAPP_BASE_URL", slow.url.as_str()),
            ("HUBBUB_WHATSAPP_TOKEN", "t"),
            ("HUBBUB_WHATSAPP_PHONE_NUMBER_ID", "1"),
            ("HUBBUB_WHATSAPP_APP_SECRET", "app-secret"),
            ("HUBBUB_LEASE_MS", "1000"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    // Inside the 24-hour window, so WhatsApp takes free-form text.
    let base = format!("http://127.0.0.1:{port}");
    crate::common::whatsapp_wrote(&client, &base, PHONE, chrono::Utc::now().timestamp_millis()).await;
    let url = format!("http://127.0.0.1:{port}/api/v1/messages");
    let mut ids = Vec::new();
    for attempt in 0..200 {
        match client
            .post(&url)
            .bearer_auth(&key)
            .json(&json!({"phone": PHONE, "body": format!("m{}", ids.len())}))
            .send()
            .await
        {
            Ok(r) => {
                assert_eq!(r.status(), 201);
                ids.push(r.json::<Value>().await.unwrap()["message_id"].as_i64().unwrap());
                if ids.len() == 10 {
                    break;
                }
            }
            Err(_) if ids.is_empty() && attempt < 199 => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            Err(e) => panic!("{e}"),
        }
    }
    // Killed while the (slow) provider calls are in flight: nothing was recorded as delivered.
    child.kill().unwrap();
    child.wait().unwrap();
    // A new host on the same database takes the work over once the dead host's lease runs out.
    let app = TestApp::start_on(db, |c| c.lease_ms = 1000).await;
    app.clock.advance_ms(2_000);
    for id in ids {
        let m = app.delivered(&key, id).await;
        assert_eq!(m["state"], "sent", "message {id}: {m}");
        assert_eq!(m["channel"], "whatsapp");
    }
    eventually("no job left", || async {
        hubbub_host::store::deliveries::pending_count(&app.state.db, app.now()).await.unwrap() == 0
    })
    .await;
}

#[tokio::test]
async fn dev_sink_is_for_the_platform_partner_in_dev_mode() {
    let app = TestApp::start().await;
    let platform = app.partner_with("hubbub", true).await;
    let acme = app.partner("acme").await;
    app.request(reqwest::Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": PHONE}))).await.ok(202);
    app.send_text(&acme, "+15559990000", "hello there").await.ok(201);
    eventually("whatsapp text", || async { !app.sink("+15559990000", "whatsapp").await.is_empty() }).await;
    let r = app.get(&platform, &format!("/api/v1/dev-sink/messages?phone=%2B{}&channel=sms", &PHONE[1..])).await;
    let data = r.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["channel"], "sms");
    assert_eq!(data[0]["phone"], PHONE);
    assert!(data[0]["text"].as_str().unwrap().contains("code"));
    assert_eq!(data[0]["at"].as_str().unwrap().len(), 19);
    let all = app.get(&platform, "/api/v1/dev-sink/messages").await;
    assert_eq!(all.ok(200)["data"].as_array().unwrap().len(), 2);
    assert_eq!(all.json["data"][0]["channel"], "whatsapp", "newest first");
    app.get(&acme, "/api/v1/dev-sink/messages").await.error(403, "forbidden");
    app.get(&platform, "/api/v1/dev-sink/messages?channel=fax").await.field_error("channel");
    let prod = TestApp::start_with(|c| c.dev = false).await;
    let platform = prod.partner_with("hubbub", true).await;
    prod.get(&platform, "/api/v1/dev-sink/messages").await.error(404, "not_found");
}

/// Posts a WhatsApp Cloud API webhook with these statuses, signed unless `signature` is given.
async fn whatsapp_webhook(app: &TestApp, statuses: Value, signature: Option<&str>) -> crate::common::Resp {
    let changes = json!([{"field": "messages", "value": {"statuses": statuses}}]);
    crate::common::whatsapp_notify_signed(&app.client, &app.base, changes, signature).await
}

/// Posts a Twilio status callback, signed as Twilio signs it unless `signature` is given.
async fn twilio_callback(app: &TestApp, params: &[(&str, &str)], signature: Option<&str>) -> crate::common::Resp {
    crate::common::twilio_post(app, "status", params, signature).await
}

#[tokio::test]
async fn provider_receipts_are_verified_and_move_messages() {
    let wa = FakeServer::start(200, 0).await;
    let sms = FakeServer::start(201, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    // Inside the 24-hour window: free-form WhatsApp text may go.
    app.whatsapp_wrote(PHONE).await;

    // WhatsApp: the attempt keeps the provider's id; receipts move the message to delivered, then read.
    let id = app.send_text(&key, PHONE, "your parcel").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&key, id).await;
    assert_eq!(m["attempts"][0]["provider_ref"], "wamid.1");
    let delivered = json!([{"id": "wamid.1", "status": "delivered", "recipient_id": "15551230000"}]);
    whatsapp_webhook(&app, delivered.clone(), Some("sha256=00")).await.error(401, "unauthorized");
    let forged = hubbub_host::delivery::receipts::meta_signature("not-the-secret", b"{}");
    whatsapp_webhook(&app, delivered.clone(), Some(&forged)).await.error(401, "unauthorized");
    assert_eq!(app.message(&key, id).await["state"], "sent", "unsigned receipts change nothing");
    assert_eq!(whatsapp_webhook(&app, delivered, None).await.ok(200)["applied"], 1);
    let m = app.message(&key, id).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("delivered"), Some("whatsapp")));
    let read = json!([{"id": "wamid.1", "status": "read"}, {"id": "wamid.999", "status": "read"}]);
    assert_eq!(whatsapp_webhook(&app, read, None).await.ok(200)["applied"], 1, "unknown ids are ignored");
    assert_eq!(app.message(&key, id).await["state"], "read");
    let history: Vec<String> =
        sqlx::query_scalar("SELECT state FROM message_states WHERE message_id = $1 ORDER BY seq")
            .bind(id)
            .fetch_all(app.state.db.reader())
            .await
            .unwrap();
    assert_eq!(history, vec!["queued", "sent", "delivered", "read"]);

    // WhatsApp fails after accepting a message: the attempt says why, and the chain goes on with SMS.
    let later = app.send_text(&key, PHONE, "second").await.ok(201)["message_id"].as_i64().unwrap();
    let wamid = app.delivered(&key, later).await["attempts"][0]["provider_ref"].as_str().unwrap().to_string();
    let failed =
        json!([{"id": wamid, "status": "failed", "errors": [{"code": 131026, "title": "Message undeliverable"}]}]);
    assert_eq!(whatsapp_webhook(&app, failed, None).await.ok(200)["applied"], 1);
    eventually("the SMS fallback", || async { app.message(&key, later).await["channel"] == "sms" }).await;
    let m = app.message(&key, later).await;
    assert_eq!(m["state"], "sent");
    assert_eq!(attempts(&m), vec![pair("whatsapp", "failed"), pair("sms", "sent")]);
    assert!(m["attempts"][0]["error"].as_str().unwrap().contains("131026"));
    let texts: Vec<HashMap<String, String>> =
        sms.received().iter().map(|r| serde_urlencoded::from_bytes(&r.body).unwrap()).collect();
    assert!(texts.iter().any(|f| f["Body"].contains("second")), "the SMS carries the message");

    // Twilio: the callback URL goes with every SMS; an undelivered receipt fails the message.
    let otp = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "code 42", "priority": "otp"})).await;
    let otp = otp.ok(201)["message_id"].as_i64().unwrap();
    let sent = app.delivered(&key, otp).await;
    assert_eq!(sent["state"], "sent");
    let sid = sent["attempts"][0]["provider_ref"].as_str().unwrap().to_string();
    let form: HashMap<String, String> = serde_urlencoded::from_bytes(&sms.received().last().unwrap().body).unwrap();
    assert_eq!(form["StatusCallback"], "https://hubbub.example.com/api/v1/providers/twilio/status");
    let failed =
        [("MessageSid", sid.as_str()), ("MessageStatus", "undelivered"), ("ErrorCode", "30003"), ("AccountSid", "AC1")];
    twilio_callback(&app, &failed, Some("bm90IGl0")).await.error(401, "unauthorized");
    twilio_callback(&app, &[("MessageStatus", "delivered")], None).await.field_error("MessageSid");
    assert_eq!(
        twilio_callback(&app, &[("MessageSid", sid.as_str()), ("MessageStatus", "sent")], None).await.ok(200)["applied"],
        false
    );
    assert_eq!(twilio_callback(&app, &failed, None).await.ok(200)["applied"], true);
    let m = app.message(&key, otp).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("failed"), Some("sms")));
    assert_eq!(m["attempts"][0]["state"], "failed");
    assert!(m["attempts"][0]["error"].as_str().unwrap().contains("30003"), "{m}");

    // Meta's subscription handshake.
    let get = |q: &str| app.client.get(format!("{}/api/v1/providers/whatsapp/webhook?{q}", app.base)).send();
    let ok = get("hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=1158201444").await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    let bad = get("hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1").await.unwrap();
    assert_eq!(bad.status(), 401);

    // A host without those providers configured has no receipt routes.
    let plain = TestApp::start().await;
    whatsapp_webhook(&plain, json!([]), None).await.error(404, "not_found");
    twilio_callback(&plain, &failed, None).await.error(404, "not_found");
}

/// A host renews the lease of work in flight, so a short lease never lets another host repeat a slow
/// delivery — and a dead host's work is taken over within one lease (`killed_host_loses_no_accepted_message`).
#[tokio::test]
async fn a_host_keeps_the_lease_of_work_in_flight_so_no_other_host_repeats_it() {
    let slow = FakeServer::start(200, 5_000).await;
    let sms = FakeServer::start(201, 0).await;
    let db = Arc::new(crate::common::TestDb::new().await);
    let settings = |c: &mut hubbub_host::config::Config| {
        crate::common::fake_providers(c, &slow, &sms);
        c.provider_timeout_ms = 10_000;
        c.lease_ms = 600;
    };
    let a = TestApp::start_on(db.clone(), settings).await;
    let b = TestApp::start_on_clock(db, a.clock.clone(), settings).await;
    let key = a.partner("acme").await;
    a.whatsapp_wrote(PHONE).await;
    let id = a.send_text(&key, PHONE, "only once").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("a host calls the provider", || async { slow.received().len() == 1 }).await;
    let lease_until = || async {
        sqlx::query_scalar::<_, Option<i64>>("SELECT lease_until FROM delivery_jobs WHERE message_id = $1")
            .bind(id)
            .fetch_optional(a.state.db.reader())
            .await
            .unwrap()
            .flatten()
    };
    // Five leases pass while the call is in flight, half a lease at a time; after each step the host
    // that holds the job renews its lease (every third of the lease) before time moves on.
    for _ in 0..10 {
        a.clock.advance_ms(300);
        let now = a.now();
        eventually("the lease is renewed", || async { lease_until().await.is_some_and(|t| t >= now + 500) }).await;
    }
    let m = a.delivered(&key, id).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("whatsapp")));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(slow.received().len(), 1, "another host repeated a delivery in flight");
    assert_eq!(a.message(&key, id).await["attempts"].as_array().unwrap().len(), 1);
    drop(b);
}
