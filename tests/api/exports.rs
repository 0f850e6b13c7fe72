//! A partner's export of its messages (`GET /exports/messages`): NDJSON, oldest first, with attempts, its own
//! messages only, streamed a page at a time (100,000 messages), each export in the audit log. Agents may not
//! export (tests/api/members.rs).

use serde_json::Value;

use crate::common::TestApp;

/// The export's lines, parsed; and whether the answer said how long it was (a stream does not).
async fn export(app: &TestApp, key: &str, query: &str) -> (u16, Vec<Value>, Option<String>) {
    let r =
        app.client.get(format!("{}/api/v1/exports/messages{query}", app.base)).bearer_auth(key).send().await.unwrap();
    let status = r.status().as_u16();
    let kind = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string());
    let text = r.text().await.unwrap();
    if status != 200 {
        return (status, vec![serde_json::from_str(&text).unwrap()], kind);
    }
    assert!(text.is_empty() || text.ends_with('\n'), "every line ends");
    (status, text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(), kind)
}

#[tokio::test]
async fn a_partner_exports_its_own_messages_with_their_attempts_oldest_first() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let m = app.send_text(&acme, &format!("+1555790000{n}"), &format!("Order {n} shipped")).await;
        ids.push(m.ok(201)["message_id"].as_i64().unwrap());
    }
    for id in &ids {
        app.delivered(&acme, *id).await;
    }
    app.send_text(&globex, "+15557900000", "Not acme's").await.ok(201);
    let (status, lines, kind) = export(&app, &acme, "").await;
    assert_eq!((status, kind.as_deref()), (200, Some("application/x-ndjson")));
    let exported: Vec<i64> = lines.iter().map(|l| l["message_id"].as_i64().unwrap()).collect();
    assert_eq!(exported, ids, "acme's messages, oldest first, none of globex's");
    // Each as GET /messages/{id}?include=attempts gives it.
    for (line, id) in lines.iter().zip(&ids) {
        assert_eq!(line, &app.message(&acme, *id).await);
    }
    // `since`: only what was created then or later.
    app.clock.advance_ms(60_000);
    let later = app.send_text(&acme, "+15557900009", "Later").await.ok(201)["message_id"].as_i64().unwrap();
    let since = hubbub_host::clock::iso_time(app.now() - 1_000);
    let (_, lines, _) = export(&app, &acme, &format!("?since={}", urlencode(&since))).await;
    assert_eq!(lines.iter().map(|l| l["message_id"].as_i64().unwrap()).collect::<Vec<_>>(), [later]);
    // Bad input.
    for bad in ["?since=yesterday", "?since="] {
        let (status, body, _) = export(&app, &acme, bad).await;
        assert_eq!(status, 422, "{bad}: {body:?}");
        assert_eq!(body[0]["error"]["field"], "since");
    }
    // The export is in the audit log, naming the key.
    let log = app.get(&acme, "/api/v1/audit-log").await.ok(200).clone();
    let exports: Vec<&Value> =
        log["data"].as_array().unwrap().iter().filter(|e| e["action"] == "GET /api/v1/exports/messages").collect();
    assert_eq!(exports.len(), 4, "{log}");
    assert!(exports.iter().all(|e| !e["key_id"].is_null()));
    assert_eq!(exports[0]["status"], 422);
    app.stop().await;
}

/// `text` with the characters a query string cannot carry as they are escaped.
fn urlencode(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}

#[tokio::test]
async fn an_export_of_a_hundred_thousand_messages_streams_a_page_at_a_time() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let partner = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap();
    // 100,000 delivered messages, written by the database itself (the send path is measured elsewhere).
    sqlx::query(
        "INSERT INTO messages (ref, partner_id, phone, content_type, body, priority, content, state, seq, direction, \
         created_at, updated_at) \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) \
         SELECT 'msg_export_' || CAST(i AS TEXT), $1, '+15557910000', 'text', 'Parcel ' || CAST(i AS TEXT), \
         'notification', '{}', 'delivered', 2, 'out', $2 + i, $2 + i FROM n",
    )
    .bind(partner.id)
    .bind(app.now())
    .execute(app.state.db.writer())
    .await
    .unwrap();
    let r = app.client.get(format!("{}/api/v1/exports/messages", app.base)).bearer_auth(&acme).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // Streamed: the answer does not know its length before it is written.
    assert!(r.headers().get("content-length").is_none(), "{:?}", r.headers());
    let mut r = r;
    let (mut lines, mut last_id, mut pending) = (0, 0_i64, Vec::new());
    while let Some(chunk) = r.chunk().await.unwrap() {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Value = serde_json::from_slice(&pending[..end]).unwrap();
            let id = line["message_id"].as_i64().unwrap();
            assert!(id > last_id, "oldest first");
            last_id = id;
            lines += 1;
            pending.drain(..=end);
        }
    }
    assert!(pending.is_empty());
    assert_eq!(lines, 100_000);
    app.stop().await;
}

/// The entries of a zip: name → bytes.
fn unzip(bytes: &[u8]) -> std::collections::BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a zip");
    let mut entries = std::collections::BTreeMap::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).unwrap();
        let name = file.name().unwrap().to_string();
        let mut content = Vec::new();
        file.read_to_end(&mut content).unwrap();
        entries.insert(name, content);
    }
    entries
}

#[tokio::test]
async fn a_person_exports_every_record_about_them_as_a_zip_downloaded_from_a_signed_link() {
    use serde_json::json;
    const PHONE: &str = "+15557940001";
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    for key in [&acme, &globex] {
        app.post(key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    }
    let user = app.login(PHONE).await;
    // Messages from two partners (one with a file), a conversation, a bot session, preferences.
    app.send_text(&acme, PHONE, "Your parcel left").await.ok(201);
    let document = json!({"phone": PHONE, "content_type": "document", "media_base64": "JVBERi0xLjQK",
        "media_filename": "../invoice.pdf", "media_mimetype": "application/pdf", "body": "Your invoice"});
    let with_file = app.post(&acme, "/api/v1/messages", document).await.ok(201)["message_id"].as_i64().unwrap();
    app.send_text(&globex, PHONE, "Globex news").await.ok(201);
    app.post(&user, "/api/v1/me/conversations", json!({"partner": "globex", "body": "A question"})).await.ok(201);
    crate::bots::local_bot(&app, &acme, "signup", "signup").await;
    app.post(&acme, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": PHONE})).await.ok(201);
    let prefs = json!({"time_zone": "Europe/Berlin", "partners": {"globex": {"marketing": false}}});
    app.request(reqwest::Method::PUT, "/api/v1/me/preferences", Some(&user), Some(&prefs)).await.ok(200);
    app.delivered(&acme, with_file).await;
    // Someone else's data stays out of it.
    app.send_text(&acme, "+15557940002", "Not theirs").await.ok(201);

    let started = app.post(&user, "/api/v1/me/export", json!({})).await;
    let started = started.ok(202).clone();
    let id = started["export_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("exp_"), "{started}");
    assert!(matches!(started["state"].as_str(), Some("preparing" | "ready")), "{started}");
    let mut ready = Value::Null;
    for _ in 0..500 {
        ready = app.get(&user, &format!("/api/v1/me/export/{id}")).await.ok(200).clone();
        if ready["state"] != "preparing" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(ready["state"], "ready", "{ready}");
    let url = ready["download_url"].as_str().unwrap().to_string();
    assert!(ready["expires_at"].is_string() && ready["size"].as_i64().unwrap() > 0, "{ready}");

    // The link needs no token; the zip holds every kind of record, as many as the database has.
    let got = app.client.get(format!("{}{url}", app.base)).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.headers()["content-type"], "application/zip");
    let entries = unzip(&got.bytes().await.unwrap());
    let records = |name: &str| -> Vec<Value> {
        serde_json::from_slice::<Vec<Value>>(&entries[&format!("{name}.json")])
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let of_phone = format!("phone = '{PHONE}'");
    let of_messages = format!("m.phone = '{PHONE}'");
    for (name, from, filter) in [
        ("messages", "messages", &of_phone),
        ("message_states", "message_states s JOIN messages m ON m.id = s.message_id", &of_messages),
        ("delivery_attempts", "delivery_attempts d JOIN messages m ON m.id = d.message_id", &of_messages),
        ("conversations", "conversations", &of_phone),
        ("bot_sessions", "flow_sessions", &of_phone),
        ("partner_links", "account_links l JOIN accounts a ON a.id = l.account_id", &format!("a.phone = '{PHONE}'")),
        ("preferences", "preferences", &of_phone),
        ("partner_preferences", "partner_preferences", &of_phone),
        ("devices", "devices", &of_phone),
        ("account", "accounts", &of_phone),
    ] {
        assert_eq!(records(name).len() as i64, app.rows(from, filter).await, "{name}");
    }
    let messages = records("messages");
    assert_eq!(messages.len(), 5, "three hub messages, the flow card, the conversation's: {messages:?}");
    assert!(messages.iter().all(|m| m["phone"] == PHONE));
    let mut partners: Vec<&str> = messages.iter().map(|m| m["partner"].as_str().unwrap()).collect();
    partners.dedup();
    assert!(partners.contains(&"acme") && partners.contains(&"globex"));
    assert!(messages.iter().any(|m| m["body"] == "Globex news"));
    assert_eq!(records("preferences")[0]["time_zone"], "Europe/Berlin");
    assert_eq!(records("account")[0]["phone"], PHONE);
    // The file, named safely inside the archive, with its bytes.
    let files: Vec<&String> = entries.keys().filter(|k| k.starts_with("media/")).collect();
    assert_eq!(files.len(), 1, "{:?}", entries.keys());
    assert!(files[0].ends_with("-invoice.pdf") && !files[0].contains(".."), "{}", files[0]);
    assert_eq!(entries[files[0]], b"%PDF-1.4\n");
    assert!(entries.contains_key("README.txt"));
    for entry in entries.values() {
        assert!(!String::from_utf8_lossy(entry).contains("+15557940002"), "another person's data");
    }

    // Another person cannot see it; a link with a wrong signature is 404; each linked partner's audit log has it.
    let stranger = app.login("+15557940003").await;
    app.get(&stranger, &format!("/api/v1/me/export/{id}")).await.error(404, "not_found");
    let forged = format!("{}{}", &url[..url.len() - 1], if url.ends_with('0') { '1' } else { '0' });
    assert_eq!(app.client.get(format!("{}{forged}", app.base)).send().await.unwrap().status(), 404);
    let other =
        app.post(&stranger, "/api/v1/me/export", json!({})).await.ok(202)["export_id"].as_str().unwrap().to_string();
    let borrowed = url.replace(&id, &other);
    assert_eq!(app.client.get(format!("{}{borrowed}", app.base)).send().await.unwrap().status(), 404);
    for key in [&acme, &globex] {
        let log = app.get(key, "/api/v1/audit-log").await.ok(200).clone();
        assert!(log["data"].as_array().unwrap().iter().any(|e| e["action"] == "account.exported"), "{log}");
    }

    // After 24 hours the link lapses and the export is forgotten.
    app.clock.advance_ms(25 * 60 * 60 * 1000);
    assert_eq!(app.client.get(format!("{}{url}", app.base)).send().await.unwrap().status(), 404);
    app.state.housekeep().await;
    app.get(&user, &format!("/api/v1/me/export/{id}")).await.error(404, "not_found");
}
