//! Search in the app's lists (`q` on `/me/messages` and `/me/conversations`), served by each engine's text
//! index (FTS5 on SQLite, tsvector on PostgreSQL).

use serde_json::{Value, json};

use crate::common::TestApp;

const PHONE: &str = "+15551230000";
const OTHER: &str = "+15551239999";

fn bodies(list: &Value) -> Vec<String> {
    let text = |m: &Value| {
        m["body"].as_str().or(m["subject"].as_str()).or(m["link"]["title"].as_str()).unwrap_or_default().to_string()
    };
    list["data"].as_array().unwrap().iter().map(text).collect()
}

#[tokio::test]
async fn users_search_their_own_hub_messages_by_words() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    for phone in [PHONE, OTHER] {
        app.post(&key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    }
    let user = app.login(PHONE).await;
    let other = app.login(OTHER).await;
    let sends = [
        json!({"phone": PHONE, "body": "Your parcel is running late"}),
        json!({"phone": PHONE, "body": "Invoice for October"}),
        json!({"phone": PHONE, "content_type": "html", "html": "<p>x</p>", "subject": "Winter sale", "preview": "Half price"}),
        json!({"phone": PHONE, "content_type": "link", "link_url": "https://example.com/m", "link_title": "Café menu"}),
        json!({"phone": OTHER, "body": "Another parcel, someone else's"}),
    ];
    for send in sends {
        app.post(&key, "/api/v1/messages", send).await.ok(201);
    }
    let search = |q: &str| {
        let (app, user) = (&app, user.clone());
        let path = format!("/api/v1/me/messages?q={}", urlencoding(q));
        async move { app.get(&user, &path).await }
    };
    assert_eq!(bodies(search("parcel").await.ok(200)), ["Your parcel is running late"], "only my own");
    assert_eq!(bodies(search("PARC").await.ok(200)), ["Your parcel is running late"], "a word's start, any case");
    assert_eq!(bodies(search("late parcel").await.ok(200)), ["Your parcel is running late"], "every word");
    assert!(bodies(search("late invoice").await.ok(200)).is_empty());
    assert_eq!(bodies(search("winter").await.ok(200)), ["Winter sale"], "a newsletter's subject");
    assert_eq!(bodies(search("half").await.ok(200)), ["Winter sale"], "and its preview");
    assert_eq!(bodies(search("café").await.ok(200)), ["Café menu"], "a link's title");
    assert_eq!(bodies(search("rcel").await.ok(200)), Vec::<String>::new(), "not the middle of a word");
    let theirs = app.get(&other, "/api/v1/me/messages?q=parcel").await;
    assert_eq!(bodies(theirs.ok(200)), ["Another parcel, someone else's"]);
    // A search box takes what it can: no word matches nothing, the first 8 words count, a long word its
    // first 64 characters; only a text over 600 characters is refused.
    assert!(bodies(search("?!").await.ok(200)).is_empty());
    let nine = "your parcel is running late your parcel is nowhere";
    assert_eq!(bodies(search(nine).await.ok(200)), ["Your parcel is running late"], "the ninth word is left out");
    let long = format!("parcel {}", "x".repeat(64));
    assert!(bodies(search(&long).await.ok(200)).is_empty(), "a 64-character word is searched for as it is");
    search(&"word ".repeat(121)).await.field_error("q");
    // Pages of results, newest first.
    for i in 0..3 {
        app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": format!("Receipt number {i}")}))
            .await
            .ok(201);
    }
    let first = app.get(&user, "/api/v1/me/messages?q=receipt&limit=2").await;
    assert_eq!(bodies(first.ok(200)), ["Receipt number 2", "Receipt number 1"]);
    let cursor = first.json["next_cursor"].as_str().unwrap().to_string();
    let next = app.get(&user, &format!("/api/v1/me/messages?q=receipt&limit=2&cursor={cursor}")).await;
    assert_eq!(bodies(next.ok(200)), ["Receipt number 0"]);
    assert!(next.json["next_cursor"].is_null());
}

#[tokio::test]
async fn users_search_their_conversations_by_subject_and_messages() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let user = app.login(PHONE).await;
    let open = |subject: &str, body: &str| {
        let (app, user) = (&app, user.clone());
        let req = json!({"partner": "acme", "subject": subject, "body": body});
        async move { app.post(&user, "/api/v1/me/conversations", req).await.ok(201).clone() }
    };
    let blender = open("Broken blender", "It smokes when I switch it on").await;
    open("Refund please", "The order never came").await;
    let id = blender["conversation_id"].as_i64().unwrap();
    app.post(&key, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "We will send a replacement"}))
        .await
        .ok(201);
    let subjects = |list: &Value| -> Vec<String> {
        list["data"].as_array().unwrap().iter().map(|c| c["subject"].as_str().unwrap().to_string()).collect()
    };
    let search = |q: &'static str| {
        let (app, user) = (&app, user.clone());
        async move { app.get(&user, &format!("/api/v1/me/conversations?q={q}")).await }
    };
    assert_eq!(subjects(search("blender").await.ok(200)), ["Broken blender"], "by subject");
    assert_eq!(subjects(search("smokes").await.ok(200)), ["Broken blender"], "by the user's message");
    assert_eq!(subjects(search("replacement").await.ok(200)), ["Broken blender"], "by the agent's message");
    assert_eq!(subjects(search("refund").await.ok(200)), ["Refund please"]);
    assert!(subjects(search("blender%20refund").await.ok(200)).is_empty());
    assert_eq!(subjects(app.get(&user, "/api/v1/me/conversations").await.ok(200)).len(), 2);
    assert!(subjects(search("%2A%2A").await.ok(200)).is_empty(), "no word matches nothing");
    // Conversation messages are not in the hub's search.
    assert!(bodies(app.get(&user, "/api/v1/me/messages?q=replacement").await.ok(200)).is_empty());
}

/// `q` as a query parameter.
fn urlencoding(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
