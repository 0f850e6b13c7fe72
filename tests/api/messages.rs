//! `POST /messages` rules 1–9, idempotency, reads, lists and read marks (docs/api.md, "Sending").

use std::collections::HashSet;

use base64::Engine;
use serde_json::{Value, json};

use crate::common::TestApp;
use hubbub_host::store::outbox::{self, Target};

const PHONE: &str = "+15551230000";

fn is_record_time(s: &str) -> bool {
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").is_ok()
}

#[tokio::test]
async fn text_message_is_created_queued_with_the_interface_fields() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let r = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "Hello", "priority": "otp"})).await;
    let m = r.ok(201);
    assert!(m["message_id"].as_i64().unwrap() > 0);
    let reference = m["ref"].as_str().unwrap();
    assert!(reference.starts_with("msg_") && reference.len() >= 24, "{reference}");
    assert!(reference[4..].chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    assert_eq!(m["phone"], PHONE);
    assert_eq!(m["partner"], "acme");
    assert_eq!(m["direction"], "out");
    assert_eq!(m["content_type"], "text");
    assert_eq!(m["body"], "Hello");
    assert_eq!(m["state"], "queued");
    assert_eq!(m["priority"], "otp");
    assert!(is_record_time(m["created_at"].as_str().unwrap()), "{}", m["created_at"]);
    // The same record comes back from GET.
    let id = m["message_id"].as_i64().unwrap();
    let got = app.get(&key, &format!("/api/v1/messages/{id}")).await;
    assert_eq!(got.ok(200)["ref"], m["ref"]);
    assert!(got.json.get("attempts").is_none());
    let with = app.delivered(&key, id).await;
    assert_eq!(with["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(with["attempts"][0]["channel"], "sms", "an OTP to a user who is not online goes by SMS");
    assert_eq!(with["attempts"][0]["state"], "sent");
    assert!(is_record_time(with["attempts"][0]["at"].as_str().unwrap()));
    assert!(with.get("events").is_none(), "events only when asked for");
    // Every state it has been in, oldest first: queued (no channel yet), then sent by SMS.
    let both = app.get(&key, &format!("/api/v1/messages/{id}?include=attempts,events")).await;
    let events = both.ok(200)["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!((&events[0]["state"], &events[0]["channel"]), (&json!("queued"), &Value::Null));
    assert_eq!((&events[1]["state"], &events[1]["channel"]), (&json!("sent"), &json!("sms")));
    assert!(events.iter().all(|e| is_record_time(e["at"].as_str().unwrap())));
    assert_eq!(both.json["attempts"].as_array().unwrap().len(), 1);
    // Read by the app: a second change.
    assert_eq!(app.post(&key, &format!("/api/v1/messages/{id}/read"), json!({})).await.ok(200)["state"], "read");
    let later = app.get(&key, &format!("/api/v1/messages/{id}?include=events")).await;
    let states: Vec<&str> =
        later.ok(200)["events"].as_array().unwrap().iter().map(|e| e["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["queued", "sent", "read"]);
    assert!(later.json.get("attempts").is_none());
    // Refs sort by when they were made: a new one lands at the end of their unique index.
    let next = app.post(&key, "/api/v1/messages", json!({"phone": "+15551230001", "body": "Later"})).await;
    let next = next.ok(201)["ref"].as_str().unwrap().to_string();
    assert!(next.as_str() > reference, "{reference} then {next}");
}

#[tokio::test]
async fn rule_1_phone_is_required_and_e164() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/messages", json!({"body": "x"})).await.field_error("phone");
    for bad in ["5551230000", "+0551230000", "+1 555 123", "+12", "phone"] {
        app.post(&key, "/api/v1/messages", json!({"phone": bad, "body": "x"})).await.field_error("phone");
    }
}

#[tokio::test]
async fn rule_2_text_and_system_need_a_body() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE})).await.field_error("body");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "  "})).await.field_error("body");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "system"})).await.field_error("body");
    let r = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": PHONE, "content_type": "system", "body": "Maintenance tonight"}),
        )
        .await;
    assert_eq!(r.ok(201)["content_type"], "system");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "x", "content_type": "sticker"}))
        .await
        .field_error("content_type");
}

#[tokio::test]
async fn rule_3_media_types_need_a_url_or_base64() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    for t in ["image", "document", "audio", "video"] {
        app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": t, "body": "caption"}))
            .await
            .field_error("media_url");
        let r = app
            .post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": t, "media_url": "https://cdn.example.com/f.bin", "body": "caption", "media_filename": "f.bin", "media_mimetype": "application/octet-stream"}))
            .await;
        let m = r.ok(201);
        assert_eq!(m["content_type"], t);
        assert_eq!(m["body"], "caption");
        assert_eq!(m["media"]["url"], "https://cdn.example.com/f.bin");
        assert_eq!(m["media"]["filename"], "f.bin");
        assert_eq!(m["media"]["size"], Value::Null);
    }
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "image", "media_url": "not a url"}))
        .await
        .field_error("media_url");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "image", "media_base64": "%%%"}))
        .await
        .field_error("media_base64");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "image", "media_url": "https://a.example/x.png", "media_base64": "aGk="})).await.field_error("media_url");
}

#[tokio::test]
async fn base64_media_is_stored_once_and_served_to_the_sender() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let bytes: Vec<u8> = (0u8..=255).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let r = app
        .post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "image", "media_base64": b64, "media_mimetype": "image/png", "media_filename": "dot.png"}))
        .await;
    let m = r.ok(201);
    assert_eq!(m["media"]["size"], 256);
    let url = m["media"]["url"].as_str().unwrap();
    assert!(url.starts_with("/api/v1/media/med_"), "{url}");
    let got = app.client.get(format!("{}{url}", app.base)).bearer_auth(&key).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.headers()["content-type"], "image/png");
    assert_eq!(got.bytes().await.unwrap().to_vec(), bytes);
    app.get(&other, url).await.error(404, "not_found");
}

#[tokio::test]
async fn audio_and_video_are_served_in_parts_so_players_can_seek() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let m = app
        .post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "video", "media_base64": b64, "media_mimetype": "video/mp4", "media_filename": "clip.mp4"}))
        .await
        .ok(201)
        .clone();
    let content = format!("{}/api/v1/content/{}", app.base, m["ref"].as_str().unwrap());
    let media = format!("{}{}", app.base, m["media"]["url"].as_str().unwrap());
    let get = |url: &str, range: Option<&str>, if_range: bool| {
        let mut r = app.client.get(url).bearer_auth(&key);
        if let Some(range) = range {
            r = r.header("range", range);
        }
        if if_range {
            r = r.header("if-range", "\"x\"");
        }
        r.send()
    };
    for url in [&content, &media] {
        // The whole file says that parts can be asked for.
        let whole = get(url, None, false).await.unwrap();
        assert_eq!(whole.status(), 200);
        assert_eq!(whole.headers()["accept-ranges"], "bytes");
        assert_eq!(whole.bytes().await.unwrap().len(), 1000);
        // One part: 206 with that part and where it is.
        for (range, from, to) in [
            ("bytes=100-199", 100, 199),
            ("bytes=990-", 990, 999),
            ("bytes=-10", 990, 999),
            ("bytes=900-5000", 900, 999),
        ] {
            let part = get(url, Some(range), false).await.unwrap();
            assert_eq!(part.status(), 206, "{range}");
            assert_eq!(part.headers()["content-range"], format!("bytes {from}-{to}/1000"), "{range}");
            assert_eq!(part.headers()["content-type"], "video/mp4");
            assert_eq!(part.headers()["content-security-policy"], "sandbox; default-src 'none'");
            assert_eq!(part.bytes().await.unwrap().to_vec(), bytes[from..=to].to_vec(), "{range}");
        }
        // Past the end: 416 in the error shape, with the size.
        let past = get(url, Some("bytes=1000-"), false).await.unwrap();
        assert_eq!(past.status(), 416);
        assert_eq!(past.headers()["content-range"], "bytes */1000");
        let body: serde_json::Value = past.json().await.unwrap();
        assert_eq!(body["error"]["code"], "range_not_satisfiable");
        // Several ranges, an If-Range (no validator to compare) or another unit: the whole file.
        for (range, if_range) in
            [("bytes=0-1, 5-6", false), ("bytes=0-1", true), ("items=0-1", false), ("bytes=oops", false)]
        {
            let whole = get(url, Some(range), if_range).await.unwrap();
            assert_eq!(whole.status(), 200, "{range} {if_range}");
            assert_eq!(whole.bytes().await.unwrap().len(), 1000, "{range}");
        }
    }
}

#[tokio::test]
async fn media_urls_must_be_https_outside_dev_mode() {
    let app = TestApp::start_with(|c| c.dev = false).await;
    let key = app.partner("acme").await;
    for url in [
        "http://cdn.example.com/a.png",
        "https://127.0.0.1/a.png",
        "https://192.168.1.2/a.png",
        "http://localhost/a.png",
    ] {
        app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "image", "media_url": url}))
            .await
            .field_error("media_url");
    }
    app.post(
        &key,
        "/api/v1/messages",
        json!({"phone": PHONE, "content_type": "image", "media_url": "https://cdn.example.com/a.png"}),
    )
    .await
    .ok(201);
    let dev = TestApp::start().await;
    let key = dev.partner("acme").await;
    dev.post(
        &key,
        "/api/v1/messages",
        json!({"phone": PHONE, "content_type": "image", "media_url": "http://localhost:9000/a.png"}),
    )
    .await
    .ok(201);
}

#[tokio::test]
async fn rule_4_link_needs_link_url_or_its_alias() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "link", "link_label": "Open"}))
        .await
        .field_error("link_url");
    let r = app
        .post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "link", "url": "https://example.com/offer", "cta": "See offer", "link_title": "Offer", "link_description": "Half price", "link_image_url": "https://cdn.example.com/o.png"}))
        .await;
    let m = r.ok(201);
    assert_eq!(
        m["link"],
        json!({"url": "https://example.com/offer", "label": "See offer", "title": "Offer", "description": "Half price", "image_url": "https://cdn.example.com/o.png"})
    );
    let r = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": PHONE, "content_type": "link", "link_url": "https://example.com/x", "link_label": "Go"}),
        )
        .await;
    assert_eq!(r.ok(201)["link"]["label"], "Go");
    app.post(
        &key,
        "/api/v1/messages",
        json!({"phone": PHONE, "content_type": "link", "link_url": "javascript:alert(1)"}),
    )
    .await
    .field_error("link_url");
}

#[tokio::test]
async fn rule_5_html_needs_html() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "html", "subject": "News"}))
        .await
        .field_error("html");
    let r = app
        .post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "html", "html": "<h1>News</h1>", "subject": "November news", "preview": "What's new"}))
        .await;
    let m = r.ok(201);
    assert_eq!(m["html"], "<h1>News</h1>");
    assert_eq!(m["subject"], "November news");
    assert_eq!(m["preview"], "What's new");
}

#[tokio::test]
async fn rule_6_idempotency_key_in_body_replays_the_original() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let body = json!({"phone": PHONE, "body": "once", "idempotency_key": "order-42"});
    let first = app.post(&key, "/api/v1/messages", body.clone()).await;
    first.ok(201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = app.post(&key, "/api/v1/messages", body.clone()).await;
    assert!(again.status == 200 || again.status == 201);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.json["message_id"], first.json["message_id"]);
    assert_eq!(again.json["ref"], first.json["ref"]);
    let different = app
        .post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "twice", "idempotency_key": "order-42"}))
        .await;
    different.error(409, "idempotency_conflict");
    // Another partner's identical key is its own.
    let other = app.partner("globex").await;
    let theirs = app.post(&other, "/api/v1/messages", body).await;
    assert_ne!(theirs.ok(201)["message_id"], first.json["message_id"]);
    let list = app.get(&key, "/api/v1/messages").await;
    assert_eq!(list.ok(200)["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn idempotency_key_header_works_and_expires_after_24h() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let send = |text: &'static str| {
        app.client
            .post(format!("{}/api/v1/messages", app.base))
            .bearer_auth(&key)
            .header("Idempotency-Key", "hdr-1")
            .json(&json!({"phone": PHONE, "body": text}))
            .send()
    };
    let first = crate::common::Resp::from(send("a").await.unwrap()).await;
    first.ok(201);
    let again = crate::common::Resp::from(send("a").await.unwrap()).await;
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.json["message_id"], first.json["message_id"]);
    crate::common::Resp::from(send("b").await.unwrap()).await.error(409, "idempotency_conflict");
    app.clock.advance_ms(24 * 3600 * 1000 + 1000);
    let fresh = crate::common::Resp::from(send("b").await.unwrap()).await;
    assert_ne!(fresh.ok(201)["message_id"], first.json["message_id"]);
    assert!(fresh.headers.get("idempotent-replayed").is_none());
}

#[tokio::test]
async fn racing_identical_requests_create_one_message_even_across_hosts() {
    let app = TestApp::start().await;
    let second = TestApp::start_on(app.db.clone(), |_| {}).await;
    let key = app.partner("acme").await;
    let body = json!({"phone": PHONE, "body": "race", "idempotency_key": "race-1"});
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (client, base, key, body) = (
            app.client.clone(),
            if i % 2 == 0 { app.base.clone() } else { second.base.clone() },
            key.clone(),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let r = client.post(format!("{base}/api/v1/messages")).bearer_auth(key).json(&body).send().await.unwrap();
            assert!(r.status().is_success(), "status {}", r.status());
            r.json::<Value>().await.unwrap()["message_id"].as_i64().unwrap()
        }));
    }
    let mut ids = HashSet::new();
    for t in tasks {
        ids.insert(t.await.unwrap());
    }
    assert_eq!(ids.len(), 1, "one message for one key: {ids:?}");
    let list = app.get(&key, "/api/v1/messages").await;
    assert_eq!(list.ok(200)["data"].as_array().unwrap().len(), 1);
    second.stop().await;
}

#[tokio::test]
async fn rule_7_templates_render_into_rendered_body() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(
        &key,
        "/api/v1/templates",
        json!({"code": "otp", "channel": "sms", "lang": "en", "category": "authentication", "body": "SMS {{code}}"}),
    )
    .await
    .ok(201);
    app.post(&key, "/api/v1/templates", json!({"code": "otp", "channel": "inapp", "lang": "en", "category": "authentication", "body": "Hi {{name}}, your code is {{code}}"})).await.ok(201);
    app.post(&key, "/api/v1/templates", json!({"code": "otp", "channel": "inapp", "lang": "es", "category": "authentication", "body": "Hola {{name}}: {{code}}"})).await.ok(201);
    let r = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": PHONE, "template_code": "otp", "vars": {"name": "Ana", "code": 123456}}),
        )
        .await;
    let m = r.ok(201);
    assert_eq!(m["rendered_body"], "Hi Ana, your code is 123456", "inapp preferred, lang en by default");
    assert_eq!(m["body"], m["rendered_body"]);
    assert_eq!(m["template_code"], "otp");
    assert_eq!(m["lang"], "en");
    let r = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": PHONE, "template_code": "otp", "lang": "es", "vars": {"name": "Ana", "code": "9"}}),
        )
        .await;
    assert_eq!(r.ok(201)["rendered_body"], "Hola Ana: 9");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "template_code": "otp", "vars": {"name": "Ana"}}))
        .await
        .field_error("vars.code");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "template_code": "otp"})).await.field_error("vars.name");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "template_code": "nope", "vars": {}}))
        .await
        .field_error("template_code");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "template_code": "otp", "lang": "fr", "vars": {}}))
        .await
        .field_error("template_code");
    // Another partner's template is unknown.
    let other = app.partner("globex").await;
    app.post(
        &other,
        "/api/v1/messages",
        json!({"phone": PHONE, "template_code": "otp", "vars": {"name": "A", "code": "1"}}),
    )
    .await
    .field_error("template_code");
}

#[tokio::test]
async fn rule_8_e2e_sends_are_checked_in_contract_order() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let env = json!({"v": 1, "alg": "x25519-hkdf-sha256-aes-256-gcm", "mode": "sealed", "key_version": 1, "ciphertext": "Y2lwaGVy", "nonce": "bm9uY2Vub25jZQ", "aad": "hubbub|msg|x|v1", "key_wraps": [{"device_uuid": "dev-1", "wrap": "d3JhcA", "wrap_nonce": "bm9uY2U", "sender_eph_pub": "cHVi"}]});
    let send = |envelope: Value| {
        app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "encryption": "e2e", "e2e_envelope": envelope}))
    };
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "encryption": "e2e"})).await.field_error("e2e_envelope");
    let mut e = env.clone();
    e.as_object_mut().unwrap().remove("ciphertext");
    send(e).await.field_error("e2e_envelope.ciphertext");
    let mut e = env.clone();
    e["nonce"] = json!("");
    send(e).await.field_error("e2e_envelope.nonce");
    let mut e = env.clone();
    e["v"] = json!(2);
    send(e).await.field_error("e2e_envelope.v");
    let mut e = env.clone();
    e["key_wraps"] = json!([]);
    send(e).await.field_error("e2e_envelope.key_wraps");
    app.post(
        &key,
        "/api/v1/messages",
        json!({"phone": PHONE, "encryption": "e2e", "body": "secret", "e2e_envelope": env}),
    )
    .await
    .field_error("body");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "encryption": "rot13", "body": "x"}))
        .await
        .field_error("encryption");
    // No published device key yet.
    send(env.clone()).await.error(422, "e2e_no_devices");
    // With a published device: wraps must name it.
    sqlx::query("INSERT INTO devices (device_uuid, phone, platform, identity_key_pub, key_version, created_at) VALUES ('dev-1', $1, 'web', 'a2V5', 1, 0)")
        .bind(PHONE)
        .execute(app.state.db.writer())
        .await
        .unwrap();
    let mut e = env.clone();
    e["key_wraps"][0]["device_uuid"] = json!("someone-else");
    send(e).await.field_error("e2e_envelope.key_wraps");
    let r = send(env.clone()).await;
    let m = r.ok(201);
    assert_eq!(m["body"], Value::Null);
    assert_eq!(m["encryption"], "e2e");
    assert_eq!(m["e2e_envelope"], env);
}

#[tokio::test]
async fn rule_9_media_messages_create_no_conversation() {
    // Hub messages are standalone: the record has no conversation, and nothing but the message is stored.
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let r = app
        .post(
            &key,
            "/api/v1/messages",
            json!({"phone": PHONE, "content_type": "video", "media_url": "https://cdn.example.com/v.mp4"}),
        )
        .await;
    assert!(r.ok(201).get("conversation_id").is_none_or(Value::is_null));
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages").fetch_one(app.state.db.reader()).await.unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn list_filters_by_phone_state_and_search() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let a =
        app.send_text(&key, "+15550000001", "Your parcel is on its way").await.ok(201)["message_id"].as_i64().unwrap();
    app.send_text(&key, "+15550000002", "Invoice 100% paid").await.ok(201);
    app.send_text(&key, "+15550000001", "Dinner at eight").await.ok(201);
    let ids =
        |v: &Value| v["data"].as_array().unwrap().iter().map(|m| m["message_id"].as_i64().unwrap()).collect::<Vec<_>>();
    let r = app.get(&key, "/api/v1/messages?phone=%2B15550000001").await;
    assert_eq!(ids(r.ok(200)).len(), 2);
    let r = app.get(&key, "/api/v1/messages?q=PARCEL").await;
    assert_eq!(ids(r.ok(200)), vec![a]);
    let r = app.get(&key, "/api/v1/messages?q=100%25").await;
    assert_eq!(ids(r.ok(200)).len(), 1, "% is matched literally");
    let r = app.get(&key, "/api/v1/messages?q=0000002").await;
    assert_eq!(ids(r.ok(200)).len(), 1, "q searches the contact too");
    app.post(&key, &format!("/api/v1/messages/{a}/read"), json!({})).await.ok(200);
    let r = app.get(&key, "/api/v1/messages?state=read").await;
    assert_eq!(ids(r.ok(200)), vec![a]);
    for m in app.get(&key, "/api/v1/messages").await.json["data"].as_array().unwrap() {
        app.delivered(&key, m["message_id"].as_i64().unwrap()).await;
    }
    let r = app.get(&key, "/api/v1/messages?state=sent").await;
    assert_eq!(ids(r.ok(200)).len(), 2, "the two others went out by WhatsApp");
    app.get(&key, "/api/v1/messages?state=lost").await.field_error("state");
    app.get(&key, "/api/v1/messages?phone=123").await.field_error("phone");
}

#[tokio::test]
async fn read_unread_and_bulk_read_move_states_and_record_events() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let a = app.send_text(&key, PHONE, "a").await.ok(201)["message_id"].as_i64().unwrap();
    let b = app.send_text(&key, PHONE, "b").await.ok(201)["message_id"].as_i64().unwrap();
    let c = app.send_text(&key, "+15559990000", "c").await.ok(201)["message_id"].as_i64().unwrap();
    // Let delivery run first so the order of events is fixed.
    for id in [a, b, c] {
        app.delivered(&key, id).await;
    }
    let r = app.post(&key, &format!("/api/v1/messages/{a}/read"), json!({})).await;
    assert_eq!(r.ok(200)["state"], "read");
    // Reading again changes nothing.
    assert_eq!(app.post(&key, &format!("/api/v1/messages/{a}/read"), json!({})).await.ok(200)["state"], "read");
    let r = app.post(&key, &format!("/api/v1/messages/{a}/unread"), json!({})).await;
    assert_eq!(r.ok(200)["state"], "delivered");
    let r = app.post(&key, "/api/v1/messages/read", json!({"message_ids": [a, b, 999999]})).await;
    assert_eq!(r.ok(200)["updated"], 2);
    let r = app.post(&key, "/api/v1/messages/read", json!({"phone": "+15559990000"})).await;
    assert_eq!(r.ok(200)["updated"], 1);
    assert_eq!(app.get(&key, &format!("/api/v1/messages/{c}")).await.json["state"], "read");
    app.post(&key, "/api/v1/messages/read", json!({})).await.field_error("message_ids");
    app.post(&key, "/api/v1/messages/read", json!({"phone": "bad"})).await.field_error("phone");
    // Every change is a message.status event with a growing seq.
    let partner = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap();
    let events =
        outbox::list_for_target(&app.state.db, Target::Partner(partner.id), Some("message.status")).await.unwrap();
    let for_a: Vec<&Value> = events.iter().rev().map(|(_, _, p)| p).filter(|p| p["message_id"] == a).collect();
    let states: Vec<&str> = for_a.iter().map(|p| p["state"].as_str().unwrap()).collect();
    assert_eq!(states, vec!["sent", "read", "delivered", "read"]);
    let seqs: Vec<i64> = for_a.iter().map(|p| p["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    let p = for_a[1];
    assert_eq!(p["event"], "message.status");
    assert_eq!(p["partner"], "acme");
    assert_eq!(p["phone"], PHONE);
    assert!(p["message_ref"].as_str().unwrap().starts_with("msg_"));
    assert!(p["at"].as_str().unwrap().ends_with('Z'));
}

/// The message writer commits concurrent creations together, several rows per statement. A batch in which
/// one message cannot be written (its ref is taken) is written again one message at a time: that message
/// alone fails, every other one is stored — once, queued for delivery — and delivered.
#[tokio::test]
async fn one_bad_message_in_a_group_commit_fails_only_itself() {
    use hubbub_host::names::Direction;
    use hubbub_host::store::messages::{Created, NewMessage};
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let first = app.post(&key, "/api/v1/messages", json!({"phone": "+15550001000", "body": "first"})).await;
    let taken = first.ok(201)["ref"].as_str().unwrap().to_string();
    let partner = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap();
    let message = |i: usize, reference: String| NewMessage {
        reference,
        partner_id: partner.id,
        direction: Direction::Out,
        conversation_id: None,
        developer_id: None,
        phone: format!("+1555000{:04}", 2000 + i),
        content_type: "text".into(),
        body: Some(format!("message {i}")),
        rendered_body: None,
        template_code: None,
        lang: None,
        priority: "notification".into(),
        content: json!({}),
        media: None,
        idempotency_key: None,
        request_hash: None,
        fallback_after_s: None,
        channel: None,
        account: String::new(),
        hub: None,
        invites: None,
        send_at: None,
        author_id: None,
        author_name: None,
    };
    let now = app.state.now();
    let writer = hubbub_host::store::deliveries::MessageWriter::spawn(app.state.db.clone());
    let creations = (0..40).map(|i| {
        let reference = if i == 17 { taken.clone() } else { format!("msg_batch{i:03}") };
        let created = writer.create(message(i, reference), now);
        async move { created.await.map(|written| written.created) }
    });
    let results = futures_util::future::join_all(creations).await;
    for (i, result) in results.iter().enumerate() {
        match result {
            Err(e) if i == 17 => assert!(hubbub_host::store::is_unique_violation(e), "{e}"),
            Ok(Created::New(m)) if i != 17 => {
                assert_eq!(m.reference, format!("msg_batch{i:03}"));
                assert_eq!(m.partner_code, "acme");
                assert_eq!(m.seq, 0);
            }
            other => panic!("message {i}: {other:?}"),
        }
    }
    for i in [0, 16, 18, 39] {
        let Ok(Created::New(m)) = &results[i] else { unreachable!("checked above") };
        let got = app.get(&key, &format!("/api/v1/messages/{}", m.id)).await;
        assert_eq!(got.ok(200)["ref"], format!("msg_batch{i:03}"));
    }
    let listed = app.get(&key, "/api/v1/messages?limit=100").await;
    assert_eq!(listed.ok(200)["data"].as_array().unwrap().len(), 40, "the first message and 39 of the batch");
    // Every stored message has its job: all of them are delivered (the dev providers take them).
    crate::common::eventually("all delivered", || async {
        let listed = app.get(&key, "/api/v1/messages?limit=100").await;
        listed.json["data"].as_array().unwrap().iter().all(|m| m["state"] == "sent")
    })
    .await;
}

/// Every outbound hub message is sent the way `POST /messages` sends one (`messages::send`): to a user with
/// the app, it is in the hub as it is accepted — an agent's message without a thread, a developer's
/// template message, a flow's card alike (each used to be written on its own, queued for the worker).
#[tokio::test]
async fn every_outbound_message_is_sent_as_post_messages_sends_one() {
    let app = TestApp::start().await;
    let platform = app.partner_with("hubbub", true).await;
    let acme = app.partner("acme").await;
    for key in [&platform, &acme] {
        app.post(key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    }
    app.login(PHONE).await;
    let state_of = |r: &crate::common::Resp| r.ok(201)["state"].as_str().unwrap().to_string();
    assert_eq!(state_of(&app.send_text(&acme, PHONE, "From POST /messages").await), "sent");
    let agent = app.post(&acme, "/api/v1/agent/messages", json!({"phone": PHONE, "body": "From an agent"})).await;
    assert_eq!(state_of(&agent), "sent");
    assert!(agent.json["conversation_id"].is_null(), "no thread: a hub message");

    // A developer's message from the platform's approved template.
    let t = json!({"code": "welcome", "channel": "inapp", "category": "utility", "body": "Welcome {{name}}!"});
    let id = app.post(&platform, "/api/v1/templates", t).await.ok(201)["template_id"].clone();
    app.post(&platform, &format!("/api/v1/templates/{id}/submit"), json!({})).await.ok(200);
    let dev_phone = "+15557770042";
    let open = |path: &'static str, body: Value| {
        let app = &app;
        async move { app.request(reqwest::Method::POST, path, None, Some(&body)).await }
    };
    open("/api/v1/dev/signup", json!({"phone": dev_phone})).await.ok(202);
    let code = app.last_code(dev_phone).await;
    let dev = open("/api/v1/dev/verify", json!({"phone": dev_phone, "code": code})).await.ok(200)["api_key"].clone();
    let dev = dev.as_str().unwrap();
    let sent = app
        .post(dev, "/api/v1/dev/messages", json!({"phone": PHONE, "template_code": "welcome", "vars": {"name": "Ana"}}))
        .await;
    assert_eq!(state_of(&sent), "sent");

    // A flow's card in the app, with its session opened in the same transaction.
    crate::bots::local_bot(&app, &acme, "signup", "signup").await;
    let invite = app.post(&acme, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": PHONE})).await;
    let invited = invite.ok(201)["flow_session"].clone();
    let card = app.message(&acme, invited["message_id"].as_i64().unwrap()).await;
    assert_eq!(card["state"], "sent");
    assert_eq!(card["flow"]["ref"], invited["ref"]);
    let sessions = app.get(&acme, "/api/v1/flow-sessions?bot=signup").await.ok(200)["data"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["ref"], invited["ref"]);
}
