//! A partner erases a person from its data (`DELETE /accounts/{phone}`, issue 73 point 4): its messages,
//! conversations, their traces and its link go; another partner's data and the person's account stay.

use serde_json::{Value, json};

use crate::common::TestApp;

const PHONE: &str = "+15557920001";

/// Rows of `table` whose `column` is one of `ids`.
async fn rows_of(app: &TestApp, table: &str, column: &str, ids: &[i64]) -> i64 {
    let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    app.rows(table, &format!("{column} IN ({list})")).await
}

/// A host, acme and globex both linked to the person, and the person signed in: the host, the two keys and
/// the person's token.
async fn linked_to_two() -> (TestApp, String, String, String) {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    for key in [&acme, &globex] {
        app.post(key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    }
    let user = app.login(PHONE).await;
    (app, acme, globex, user)
}

#[tokio::test]
async fn a_partner_erases_a_person_from_its_data_and_only_its_own() {
    let (app, acme, globex, user) = linked_to_two().await;
    // acme: hub messages (one with a file), a conversation with an agent's answer and a note.
    let mut acme_messages = Vec::new();
    for send in [
        json!({"phone": PHONE, "body": "Your parcel zebra is late"}),
        json!({"phone": PHONE, "content_type": "document", "media_base64": "JVBERi0xLjQK", "media_filename": "invoice.pdf",
               "media_mimetype": "application/pdf", "body": "Your invoice"}),
    ] {
        let m = app.post(&acme, "/api/v1/messages", send).await.ok(201).clone();
        acme_messages.push(m["message_id"].as_i64().unwrap());
    }
    let media = app.message(&acme, acme_messages[1]).await["media"]["url"].as_str().unwrap().to_string();
    let opened =
        app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Where is zebra?"})).await;
    let acme_conversation = opened.ok(201)["conversation_id"].as_i64().unwrap();
    app.post(&acme, &format!("/api/v1/conversations/{acme_conversation}/messages"), json!({"body": "On its way"}))
        .await
        .ok(201);
    // globex: a message and a conversation of its own.
    let kept = app.post(&globex, "/api/v1/messages", json!({"phone": PHONE, "body": "Globex zebra news"})).await;
    let kept = kept.ok(201)["message_id"].as_i64().unwrap();
    let theirs = app.post(&user, "/api/v1/me/conversations", json!({"partner": "globex", "body": "Hello zebra"})).await;
    let globex_conversation = theirs.ok(201)["conversation_id"].as_i64().unwrap();
    let acme_ids: Vec<i64> = {
        let sql = "SELECT id FROM messages WHERE partner_id = (SELECT id FROM partners WHERE code = 'acme')";
        sqlx::query_scalar(sql).fetch_all(app.state.db.reader()).await.unwrap()
    };
    assert_eq!(acme_ids.len(), 4, "two hub messages and the conversation's two");

    let erased = app.request(reqwest::Method::DELETE, &format!("/api/v1/accounts/{PHONE}"), Some(&acme), None).await;
    assert_eq!(erased.ok(200), &json!({"phone": PHONE, "messages": 4, "conversations": 1, "unlinked": true}),);

    // acme holds nothing of them: messages, conversation, account view, file, search.
    for id in &acme_messages {
        app.get(&acme, &format!("/api/v1/messages/{id}")).await.error(404, "not_found");
    }
    app.get(&acme, &format!("/api/v1/conversations/{acme_conversation}")).await.error(404, "not_found");
    app.get(&acme, &format!("/api/v1/accounts/{PHONE}")).await.error(404, "not_found");
    assert_eq!(app.get(&acme, &media).await.status, 404, "the file is gone");
    let found = app.get(&acme, "/api/v1/conversations?q=zebra").await.ok(200).clone();
    assert!(found["data"].as_array().unwrap().is_empty(), "{found}");
    assert_eq!(app.get(&acme, "/api/v1/exports/messages").await.status, 200);
    for (table, column) in [
        ("message_states", "message_id"),
        ("delivery_attempts", "message_id"),
        ("delivery_jobs", "message_id"),
        ("messages", "id"),
    ] {
        assert_eq!(rows_of(&app, table, column, &acme_ids).await, 0, "{table}");
    }
    assert_eq!(rows_of(&app, "conversations", "id", &[acme_conversation]).await, 0);
    // Gone from the search indexes too (each engine's own).
    let (messages_index, conversations_index) = match app.state.db.backend() {
        hubbub_host::store::Backend::Sqlite => (("messages_search", "rowid"), ("conversation_words", "rowid")),
        hubbub_host::store::Backend::Postgres => {
            (("message_words", "message_id"), ("conversation_words", "conversation_id"))
        }
    };
    assert_eq!(rows_of(&app, messages_index.0, messages_index.1, &acme_ids).await, 0);
    assert_eq!(rows_of(&app, conversations_index.0, conversations_index.1, &[acme_conversation]).await, 0);
    // The person's own inbox and search hold globex's only.
    let inbox = app.get(&user, "/api/v1/me/messages?q=zebra").await.ok(200).clone();
    let bodies: Vec<&str> = inbox["data"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["Globex zebra news"]);
    let mine = app.get(&user, "/api/v1/me/conversations").await.ok(200).clone();
    let left: Vec<i64> =
        mine["data"].as_array().unwrap().iter().map(|c| c["conversation_id"].as_i64().unwrap()).collect();
    assert_eq!(left, [globex_conversation]);
    // globex's data and the account stay.
    assert_eq!(app.message(&globex, kept).await["body"], "Globex zebra news");
    let account = app.get(&globex, &format!("/api/v1/accounts/{PHONE}")).await.ok(200).clone();
    assert_eq!(account["phone"], PHONE);
    app.get(&globex, &format!("/api/v1/conversations/{globex_conversation}")).await.ok(200);
    // Recorded in the audit log.
    let log = app.get(&acme, "/api/v1/audit-log").await.ok(200).clone();
    let erasures: Vec<&Value> =
        log["data"].as_array().unwrap().iter().filter(|e| e["action"] == "DELETE /api/v1/accounts/{phone}").collect();
    assert_eq!(erasures.len(), 1, "{log}");
    // Twice, or a phone it never knew: 404. Another partner's erasure is its own.
    app.request(reqwest::Method::DELETE, &format!("/api/v1/accounts/{PHONE}"), Some(&acme), None)
        .await
        .error(404, "not_found");
    app.request(reqwest::Method::DELETE, "/api/v1/accounts/+15557929999", Some(&acme), None)
        .await
        .error(404, "not_found");
    // acme may link them again: it starts from nothing (no old message, no old conversation).
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let listed = app.get(&acme, &format!("/api/v1/messages?phone=%2B{}", &PHONE[1..])).await.ok(200).clone();
    assert!(listed["data"].as_array().unwrap().is_empty(), "{listed}");
    assert!(app.get(&acme, "/api/v1/conversations").await.ok(200)["data"].as_array().unwrap().is_empty());
    app.stop().await;
}

#[tokio::test]
async fn a_person_erases_themself_with_a_fresh_code_and_partners_hear_of_it_without_the_phone() {
    let (app, acme, globex, user) = linked_to_two().await;
    let other = "+15557920002";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": other})).await.ok(200);
    let kept = app.post(&acme, "/api/v1/messages", json!({"phone": other, "body": "Someone else's"})).await;
    let kept = kept.ok(201)["message_id"].as_i64().unwrap();
    let m = app.post(&acme, "/api/v1/messages", json!({"phone": PHONE, "body": "Your parcel zebra"})).await;
    let erased_message = m.ok(201)["message_id"].as_i64().unwrap();
    app.post(&globex, "/api/v1/messages", json!({"phone": PHONE, "body": "Globex news"})).await.ok(201);
    let opened = app.post(&user, "/api/v1/me/conversations", json!({"partner": "globex", "body": "Help zebra"})).await;
    let conversation = opened.ok(201)["conversation_id"].as_i64().unwrap();
    // A bot's flow session of theirs (its card is a message too).
    crate::bots::local_bot(&app, &acme, "signup", "signup").await;
    let invited = app.post(&acme, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": PHONE})).await;
    assert_eq!(invited.status, 201, "{}", invited.json);
    let prefs = json!({"time_zone": "UTC", "partners": {"acme": {"muted": true}}});
    app.request(reqwest::Method::PUT, "/api/v1/me/preferences", Some(&user), Some(&prefs)).await.ok(200);

    // No code, or a wrong one: refused, nothing erased.
    let erase = |body: Value| {
        let (app, user) = (&app, user.clone());
        async move { app.request(reqwest::Method::DELETE, "/api/v1/me/account", Some(&user), Some(&body)).await }
    };
    erase(json!({})).await.field_error("code");
    erase(json!({"code": "000000"})).await.error(401, "unauthorized");
    app.message(&acme, erased_message).await;
    // A fresh code: erased.
    app.request(reqwest::Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": PHONE}))).await.ok(202);
    let code = app.last_code(PHONE).await;
    let done = erase(json!({"code": code})).await;
    assert_eq!(done.ok(200), &json!({"messages": 4, "conversations": 1}), "two hub messages, the card, the thread's");

    // Every partner's side is gone; their account too; the other person's message stays.
    app.get(&acme, &format!("/api/v1/messages/{erased_message}")).await.error(404, "not_found");
    app.get(&globex, &format!("/api/v1/conversations/{conversation}")).await.error(404, "not_found");
    for key in [&acme, &globex] {
        app.get(key, &format!("/api/v1/accounts/{PHONE}")).await.error(404, "not_found");
    }
    assert_eq!(app.message(&acme, kept).await["body"], "Someone else's");
    for (table, column) in
        [("accounts", "phone"), ("devices", "phone"), ("preferences", "phone"), ("partner_preferences", "phone")]
    {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} = $1");
        let n: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(PHONE).fetch_one(app.state.db.reader()).await.unwrap();
        assert_eq!(n, 0, "{table}");
    }
    // The token is over: a second erase is 401.
    erase(json!({"code": "123456"})).await.error(401, "unauthorized");
    // Each linked partner is told, by the phone's hash only, and its audit log says so.
    use sha2::Digest;
    let hash: String = sha2::Sha256::digest(PHONE.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let payloads: Vec<String> =
        sqlx::query_scalar("SELECT payload FROM outbox_events WHERE event = 'account.erased' ORDER BY id")
            .fetch_all(app.state.db.reader())
            .await
            .unwrap();
    assert_eq!(payloads.len(), 2, "acme and globex");
    for payload in &payloads {
        let event: Value = serde_json::from_str(payload).unwrap();
        assert_eq!(event["phone_sha256"], hash);
        assert!(!payload.contains(&PHONE[1..]), "no phone in {payload}");
    }
    for key in [&acme, &globex] {
        let log = app.get(key, "/api/v1/audit-log").await.ok(200).clone();
        let entries = log["data"].as_array().unwrap();
        assert!(entries.iter().any(|e| e["action"] == "account.erased"), "{log}");
    }
    // A later message to the phone starts from nothing.
    let again = app.post(&acme, "/api/v1/messages", json!({"phone": PHONE, "body": "Hello"})).await.ok(201).clone();
    let listed = app.get(&acme, &format!("/api/v1/messages?phone=%2B{}", &PHONE[1..])).await.ok(200).clone();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{again}");
    app.stop().await;
}
