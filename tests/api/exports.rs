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
