//! Support conversations and agent messages (docs/api.md).

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{TestApp, eventually};
use hubbub_host::store::outbox::{self, Target};

const PHONE: &str = "+15551230000";

async fn linked_user(app: &TestApp, key: &str, phone: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.login(phone).await
}

#[tokio::test]
async fn the_state_machine_from_both_sides() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let user = linked_user(&app, &key, PHONE).await;
    // The user opens support: open, with the first message.
    let r = app
        .post(
            &user,
            "/api/v1/me/conversations",
            json!({"partner": "acme", "subject": "Late parcel", "body": "Where is my parcel?"}),
        )
        .await;
    let c = r.ok(201).clone();
    assert_eq!(c["state"], "open");
    assert_eq!(c["partner"], "acme");
    assert_eq!(c["subject"], "Late parcel");
    assert!(c["ref"].as_str().unwrap().starts_with("conv_"));
    assert_eq!(c["messages"][0]["direction"], "in");
    assert_eq!(c["messages"][0]["body"], "Where is my parcel?");
    let id = c["conversation_id"].as_i64().unwrap();
    let reference = c["ref"].as_str().unwrap().to_string();
    // The agent replies: pending.
    let r = app.post(&key, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "It ships tomorrow"})).await;
    let reply = r.ok(201).clone();
    assert_eq!(reply["direction"], "out");
    assert_eq!(reply["conversation_id"], id);
    assert_eq!(app.get(&key, &format!("/api/v1/conversations/{id}")).await.json["state"], "pending");
    // The user answers: open again.
    app.post(&user, &format!("/api/v1/me/conversations/{reference}/messages"), json!({"body": "Thanks!"}))
        .await
        .ok(201);
    assert_eq!(app.get(&key, &format!("/api/v1/conversations/{id}")).await.json["state"], "open");
    // The partner closes it; a user message reopens it.
    let r = app
        .request(Method::PATCH, &format!("/api/v1/conversations/{id}"), Some(&key), Some(&json!({"state": "closed"})))
        .await;
    assert_eq!(r.ok(200)["state"], "closed");
    app.request(Method::PATCH, &format!("/api/v1/conversations/{id}"), Some(&key), Some(&json!({"state": "open"})))
        .await
        .field_error("state");
    app.post(&user, &format!("/api/v1/me/conversations/{reference}/messages"), json!({"body": "One more thing"}))
        .await
        .ok(201);
    let full = app.get(&key, &format!("/api/v1/conversations/{id}")).await;
    assert_eq!(full.ok(200)["state"], "open");
    let bodies: Vec<&str> =
        full.json["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, vec!["Where is my parcel?", "It ships tomorrow", "Thanks!", "One more thing"]);
    // The user sees the thread; it is not in the hub inbox.
    let mine = app.get(&user, "/api/v1/me/conversations").await;
    assert_eq!(mine.ok(200)["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        app.get(&user, &format!("/api/v1/me/conversations/{reference}")).await.ok(200)["messages"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let hub = app.get(&user, "/api/v1/me/messages").await;
    assert!(hub.ok(200)["data"].as_array().unwrap().is_empty());
    // The agent's reply is delivered to the user like any outgoing message.
    let delivered = app.delivered(&key, reply["message_id"].as_i64().unwrap()).await;
    assert_eq!(delivered["channel"], "inapp");
    // Every message is a conversation.message event, in order.
    let pid = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap().id;
    let events =
        outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("conversation.message")).await.unwrap();
    let directions: Vec<&str> = events.iter().rev().map(|(_, _, p)| p["direction"].as_str().unwrap()).collect();
    assert_eq!(directions, vec!["in", "out", "in", "in"]);
    let first = &events.last().unwrap().2;
    assert_eq!(first["event"], "conversation.message");
    assert_eq!(first["partner"], "acme");
    assert_eq!(first["conversation_id"], id);
    assert_eq!(first["ref"], reference.as_str());
    assert_eq!(first["phone"], PHONE);
    assert!(first["message_ref"].as_str().unwrap().starts_with("msg_"));
}

#[tokio::test]
async fn opening_needs_a_linked_partner_and_a_body() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.partner("globex").await;
    let user = linked_user(&app, &key, PHONE).await;
    app.post(&user, "/api/v1/me/conversations", json!({"partner": "globex", "body": "hi"}))
        .await
        .error(404, "not_found");
    app.post(&user, "/api/v1/me/conversations", json!({"partner": "nobody", "body": "hi"}))
        .await
        .error(404, "not_found");
    app.post(&user, "/api/v1/me/conversations", json!({"body": "hi"})).await.field_error("partner");
    app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme"})).await.field_error("body");
    app.post(&key, "/api/v1/me/conversations", json!({"partner": "acme", "body": "hi"})).await.error(403, "forbidden");
}

#[tokio::test]
async fn partners_list_and_search_their_own_threads_only() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let ana = linked_user(&app, &acme, "+15550000001").await;
    let bob = linked_user(&app, &acme, "+15550000002").await;
    let a = app
        .post(
            &ana,
            "/api/v1/me/conversations",
            json!({"partner": "acme", "subject": "Invoice", "body": "Wrong amount"}),
        )
        .await
        .ok(201)["conversation_id"]
        .as_i64()
        .unwrap();
    let b = app
        .post(
            &bob,
            "/api/v1/me/conversations",
            json!({"partner": "acme", "subject": "Delivery", "body": "Parcel damaged"}),
        )
        .await
        .ok(201)["conversation_id"]
        .as_i64()
        .unwrap();
    app.post(&acme, &format!("/api/v1/conversations/{b}/messages"), json!({"body": "Sorry about that"})).await.ok(201);
    let ids = |v: &Value| {
        v["data"].as_array().unwrap().iter().map(|c| c["conversation_id"].as_i64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations").await.ok(200)), vec![b, a]);
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?state=open").await.ok(200)), vec![a]);
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?state=pending").await.ok(200)), vec![b]);
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=invoice").await.ok(200)), vec![a], "subject");
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=damaged").await.ok(200)), vec![b], "body");
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=0000001").await.ok(200)), vec![a], "contact");
    app.get(&acme, "/api/v1/conversations?state=lost").await.field_error("state");
    assert!(ids(app.get(&globex, "/api/v1/conversations").await.ok(200)).is_empty());
    app.get(&globex, &format!("/api/v1/conversations/{a}")).await.error(404, "not_found");
    app.post(&globex, &format!("/api/v1/conversations/{a}/messages"), json!({"body": "x"}))
        .await
        .error(404, "not_found");
    app.request(Method::PATCH, &format!("/api/v1/conversations/{a}"), Some(&globex), Some(&json!({"state": "closed"})))
        .await
        .error(404, "not_found");
    // Another user's thread is 404 for a user too.
    let reference =
        app.get(&acme, &format!("/api/v1/conversations/{a}")).await.json["ref"].as_str().unwrap().to_string();
    app.post(&bob, &format!("/api/v1/me/conversations/{reference}/messages"), json!({"body": "x"}))
        .await
        .error(404, "not_found");
    app.get(&bob, &format!("/api/v1/me/conversations/{reference}")).await.error(404, "not_found");
}

#[tokio::test]
async fn agent_messages_attach_to_the_open_thread_or_go_to_the_hub() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let user = linked_user(&app, &key, PHONE).await;
    // No thread: a hub message.
    let r = app.post(&key, "/api/v1/agent/messages", json!({"phone": PHONE, "body": "Hello from support"})).await;
    assert_eq!(r.ok(201)["conversation_id"], Value::Null);
    assert_eq!(app.get(&user, "/api/v1/me/messages").await.json["data"].as_array().unwrap().len(), 1);
    // Media never creates a conversation either.
    let r = app
        .post(
            &key,
            "/api/v1/agent/messages",
            json!({"phone": PHONE, "content_type": "image", "media_url": "https://cdn.example.com/a.png"}),
        )
        .await;
    assert_eq!(r.ok(201)["conversation_id"], Value::Null);
    assert!(app.get(&key, "/api/v1/conversations").await.json["data"].as_array().unwrap().is_empty());
    // With an open thread: attached, and the thread waits for the user.
    let c =
        app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Help"})).await.ok(201).clone();
    let r = app.post(&key, "/api/v1/agent/messages", json!({"phone": PHONE, "body": "On it"})).await;
    assert_eq!(r.ok(201)["conversation_id"], c["conversation_id"]);
    let id = c["conversation_id"].as_i64().unwrap();
    assert_eq!(app.get(&key, &format!("/api/v1/conversations/{id}")).await.json["state"], "pending");
    // A closed thread is not used.
    app.request(Method::PATCH, &format!("/api/v1/conversations/{id}"), Some(&key), Some(&json!({"state": "closed"})))
        .await
        .ok(200);
    let r = app.post(&key, "/api/v1/agent/messages", json!({"phone": PHONE, "body": "Anything else?"})).await;
    assert_eq!(r.ok(201)["conversation_id"], Value::Null);
    app.post(&key, "/api/v1/agent/messages", json!({"body": "x"})).await.field_error("phone");
    eventually("hub messages delivered", || async {
        hubbub_host::store::deliveries::pending_count(&app.state.db, app.now()).await.unwrap() == 0
    })
    .await;
}
