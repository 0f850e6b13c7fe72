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
    // Through the text index: each word starts a word, in any case, anywhere in the conversation.
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=DAMA").await.ok(200)), vec![b], "a word's start");
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=parcel%20damaged").await.ok(200)), vec![b]);
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=sorry").await.ok(200)), vec![b], "the agent's words");
    assert!(ids(app.get(&acme, "/api/v1/conversations?q=amaged").await.ok(200)).is_empty(), "not a word's middle");
    assert!(ids(app.get(&acme, "/api/v1/conversations?q=parcel%20invoice").await.ok(200)).is_empty());
    // The words of one conversation, wherever they are in it: the user's message and the agent's answer, or
    // the subject and a message.
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=parcel%20sorry").await.ok(200)), vec![b], "two messages");
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=delivery%20sorr").await.ok(200)), vec![b], "subject");
    assert!(ids(app.get(&acme, "/api/v1/conversations?q=wrong%20sorry").await.ok(200)).is_empty(), "two threads");
    assert!(ids(app.get(&acme, "/api/v1/conversations?q=damaged&state=open").await.ok(200)).is_empty(), "filtered");
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=damaged&state=pending").await.ok(200)), vec![b]);
    // A search's pages: newest first, the cursor going on from the last one shown.
    app.post(&acme, &format!("/api/v1/conversations/{a}/messages"), json!({"body": "Sorry, fixed"})).await.ok(201);
    let first = app.get(&acme, "/api/v1/conversations?q=sorry&limit=1").await.ok(200).clone();
    assert_eq!(ids(&first), vec![b]);
    let cursor = first["next_cursor"].as_str().expect("a next page").to_string();
    let second =
        app.get(&acme, &format!("/api/v1/conversations?q=sorry&limit=1&cursor={cursor}")).await.ok(200).clone();
    assert_eq!(ids(&second), vec![a]);
    let by_phone = app.get(&acme, "/api/v1/conversations?q=%2B1555&limit=1").await.ok(200).clone();
    assert_eq!(ids(&by_phone), vec![b], "the phone's part pages too");
    let cursor = by_phone["next_cursor"].as_str().expect("a next page").to_string();
    assert_eq!(
        ids(app.get(&acme, &format!("/api/v1/conversations?q=%2B1555&limit=1&cursor={cursor}")).await.ok(200)),
        vec![a]
    );
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=%2B15550000002").await.ok(200)), vec![b], "a phone");
    let long = "x".repeat(601);
    app.get(&acme, &format!("/api/v1/conversations?q={long}")).await.field_error("q");
    // Another partner's words are not found, even in the same index.
    let cy = linked_user(&app, &globex, "+15550000003").await;
    app.post(&cy, "/api/v1/me/conversations", json!({"partner": "globex", "body": "Parcel damaged again"}))
        .await
        .ok(201);
    assert_eq!(ids(app.get(&acme, "/api/v1/conversations?q=damaged").await.ok(200)), vec![b]);
    assert_eq!(ids(app.get(&globex, "/api/v1/conversations?q=damaged").await.ok(200)).len(), 1);
    app.get(&acme, "/api/v1/conversations?state=lost").await.field_error("state");
    assert!(!ids(app.get(&globex, "/api/v1/conversations").await.ok(200)).iter().any(|id| [a, b].contains(id)));
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

#[tokio::test]
async fn read_receipts_both_ways_and_unread_counts() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let user = linked_user(&app, &key, PHONE).await;
    let unread = |token: String| {
        let app = &app;
        async move { app.get(&token, "/api/v1/me/unread").await.ok(200).clone() }
    };
    assert_eq!(unread(user.clone()).await, json!({"messages": 0, "conversations": 0, "bots": 0, "total": 0}));

    let c = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Hello?"})).await;
    let c = c.ok(201).clone();
    assert_eq!(c["unread"], 0);
    let (id, reference) = (c["conversation_id"].as_i64().unwrap(), c["ref"].as_str().unwrap().to_string());
    let mine = c["messages"][0]["message_id"].as_i64().unwrap();
    // The partner has one unread message from the user; the user has nothing unread (their own message).
    let listed = app.get(&key, "/api/v1/conversations").await;
    assert_eq!(listed.ok(200)["data"][0]["unread"], 1);
    assert_eq!(unread(user.clone()).await["conversations"], 0);

    // Two agent replies and a hub message: unread for the user, in each area.
    let mut replies = Vec::new();
    for body in ["Hi!", "How can we help?"] {
        let r = app.post(&key, &format!("/api/v1/conversations/{id}/messages"), json!({"body": body})).await;
        replies.push(r.ok(201)["message_id"].as_i64().unwrap());
    }
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "Your parcel ships today"})).await.ok(201);
    assert_eq!(unread(user.clone()).await, json!({"messages": 1, "conversations": 1, "bots": 0, "total": 2}));
    let list = app.get(&user, "/api/v1/me/conversations").await;
    assert_eq!(list.ok(200)["data"][0]["unread"], 2);

    // Opening the thread hands the replies to the device (delivered); reading it makes them read.
    let thread = app.get(&user, &format!("/api/v1/me/conversations/{reference}")).await;
    let states: Vec<&str> =
        thread.ok(200)["messages"].as_array().unwrap().iter().map(|m| m["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["delivered", "delivered", "delivered"]);
    assert_eq!(thread.json["unread"], 2, "fetched is not read");
    // Another user's or another partner's read is 404.
    let stranger = linked_user(&app, &key, "+15551239999").await;
    app.post(&stranger, &format!("/api/v1/me/conversations/{reference}/read"), json!({})).await.error(404, "not_found");
    app.post(&other, &format!("/api/v1/conversations/{id}/read"), json!({})).await.error(404, "not_found");
    let read = app.post(&user, &format!("/api/v1/me/conversations/{reference}/read"), json!({})).await;
    let read = read.ok(200).clone();
    assert_eq!(read["unread"], 0);
    let out: Vec<&Value> = read["messages"].as_array().unwrap().iter().filter(|m| m["direction"] == "out").collect();
    assert!(out.iter().all(|m| m["state"] == "read"), "{out:?}");
    for reply in &replies {
        assert_eq!(app.get(&key, &format!("/api/v1/messages/{reply}")).await.ok(200)["state"], "read");
    }
    assert_eq!(unread(user.clone()).await, json!({"messages": 1, "conversations": 0, "bots": 0, "total": 1}));
    // The partner heard each reply move, in order, up to read; reading again moves nothing.
    let pid = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap().id;
    let statuses = || async {
        let events = outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("message.status")).await;
        let events = events.unwrap();
        events
            .iter()
            .rev()
            .map(|(_, _, p)| (p["message_id"].as_i64().unwrap(), p["state"].to_string()))
            .collect::<Vec<_>>()
    };
    let seen = statuses().await;
    for reply in &replies {
        let mine: Vec<&str> = seen.iter().filter(|(m, _)| m == reply).map(|(_, s)| s.trim_matches('"')).collect();
        assert_eq!(mine.last(), Some(&"read"), "{seen:?}");
        assert!(mine.contains(&"delivered"), "{seen:?}");
    }
    app.post(&user, &format!("/api/v1/me/conversations/{reference}/read"), json!({})).await.ok(200);
    assert_eq!(statuses().await.len(), seen.len());

    // The agent reads the user's message: the user sees it read.
    assert_eq!(
        app.get(&user, &format!("/api/v1/me/conversations/{reference}")).await.json["messages"][0]["state"],
        "delivered"
    );
    let read = app.post(&key, &format!("/api/v1/conversations/{id}/read"), json!({})).await;
    assert_eq!(read.ok(200)["unread"], 0);
    let thread = app.get(&user, &format!("/api/v1/me/conversations/{reference}")).await;
    let first = &thread.ok(200)["messages"][0];
    assert_eq!((first["message_id"].as_i64(), first["state"].as_str()), (Some(mine), Some("read")));
    assert_eq!(app.get(&key, "/api/v1/conversations").await.json["data"][0]["unread"], 0);
}

/// What a user wrote offline is sent with an idempotency key: however often the app retries it (a lost
/// answer, a second tab), the conversation holds it once, and the partner hears of it once.
#[tokio::test]
async fn a_users_retried_write_is_kept_once() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let user = linked_user(&app, &key, PHONE).await;
    let c = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Hello?"})).await;
    let (id, reference) = (c.ok(201)["conversation_id"].as_i64().unwrap(), c.json["ref"].as_str().unwrap().to_string());
    let path = format!("/api/v1/me/conversations/{reference}/messages");
    let write = json!({"body": "Written on the train", "idempotency_key": "offline-7f3a"});
    let first = app.post(&user, &path, write.clone()).await;
    first.ok(201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = app.post(&user, &path, write.clone()).await;
    assert_eq!(again.ok(201)["message_id"], first.json["message_id"]);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    // The header works as well as the field; another message under the same key is a conflict.
    let header = app
        .client
        .post(format!("{}{path}", app.base))
        .bearer_auth(&user)
        .header("Idempotency-Key", "offline-7f3a")
        .json(&json!({"body": "Written on the train"}))
        .send();
    let header = crate::common::Resp::from(header.await.unwrap()).await;
    assert_eq!(header.ok(201)["message_id"], first.json["message_id"]);
    let other = json!({"body": "Something else", "idempotency_key": "offline-7f3a"});
    app.post(&user, &path, other).await.error(409, "idempotency_conflict");
    app.post(&user, &path, json!({"body": "x", "idempotency_key": "k".repeat(256)}))
        .await
        .field_error("idempotency_key");

    // The same key in another of the user's threads is another message.
    let second = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Another topic"})).await;
    let second = second.ok(201)["ref"].as_str().unwrap().to_string();
    let elsewhere = app.post(&user, &format!("/api/v1/me/conversations/{second}/messages"), write).await;
    assert_ne!(elsewhere.ok(201)["message_id"], first.json["message_id"]);

    let thread = app.get(&key, &format!("/api/v1/conversations/{id}")).await;
    let bodies: Vec<&str> =
        thread.ok(200)["messages"].as_array().unwrap().iter().filter_map(|m| m["body"].as_str()).collect();
    assert_eq!(bodies, vec!["Hello?", "Written on the train"], "written once");
    let pid = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap().id;
    let events =
        outbox::list_for_target(&app.state.db, Target::Partner(pid), Some("conversation.message")).await.unwrap();
    let trains = events.iter().filter(|(_, _, p)| p["body"] == "Written on the train").count();
    assert_eq!(trains, 2, "one event for the message, one for the other thread's");
}

/// An agent's retried reply (a lost answer, a double click) is written once: the thread holds it once and
/// the user gets it once; by the conversation's route and by `/agent/messages`, by field and by header.
#[tokio::test]
async fn an_agents_retried_reply_is_kept_once() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let user = linked_user(&app, &key, PHONE).await;
    let c = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Where is it?"})).await;
    let id = c.ok(201)["conversation_id"].as_i64().unwrap();
    let path = format!("/api/v1/conversations/{id}/messages");
    let reply = json!({"body": "On its way", "idempotency_key": "agent-42"});
    let first = app.post(&key, &path, reply.clone()).await;
    first.ok(201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = app.post(&key, &path, reply.clone()).await;
    assert_eq!(again.ok(201)["message_id"], first.json["message_id"]);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    app.post(&key, &path, json!({"body": "Something else", "idempotency_key": "agent-42"}))
        .await
        .error(409, "idempotency_conflict");
    // `/agent/messages` goes to the same thread: the header works as the field does.
    let send = |body: &'static str| {
        let request = app.client.post(format!("{}/api/v1/agent/messages", app.base)).bearer_auth(&key);
        request.header("Idempotency-Key", "agent-43").json(&json!({"phone": PHONE, "body": body})).send()
    };
    let by_header = crate::common::Resp::from(send("Tracking: 123").await.unwrap()).await;
    let by_header_id = by_header.ok(201)["message_id"].clone();
    let retried = crate::common::Resp::from(send("Tracking: 123").await.unwrap()).await;
    assert_eq!(retried.ok(201)["message_id"], by_header_id);
    assert_eq!(retried.headers["idempotent-replayed"], "true");

    let thread = app.get(&key, &format!("/api/v1/conversations/{id}")).await;
    let bodies: Vec<&str> =
        thread.ok(200)["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["Where is it?", "On its way", "Tracking: 123"]);
}

#[tokio::test]
async fn a_conversation_with_more_words_than_an_index_row_holds_still_takes_messages() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let user = linked_user(&app, &acme, "+15550000301").await;
    let opened = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Lots to say"})).await;
    let opened = opened.ok(201).clone();
    let (id, reference) = (opened["conversation_id"].as_i64().unwrap(), opened["ref"].as_str().unwrap().to_string());
    // 25 messages of 5,000 different words each (1.3 MB of words): past the 1 MB of words that one
    // PostgreSQL tsvector holds ("string is too long for tsvector").
    let mut n = 0u64;
    for _ in 0..25 {
        let words: Vec<String> = (0..5_000)
            .map(|_| {
                n += 1;
                format!("word{n:x}zz")
            })
            .collect();
        let body = json!({"body": words.join(" ")});
        app.post(&acme, &format!("/api/v1/conversations/{id}/messages"), body).await.ok(201);
    }
    // The thread goes on, and what its row holds is still found.
    let next = json!({"body": "Still there?"});
    app.post(&user, &format!("/api/v1/me/conversations/{reference}/messages"), next).await.ok(201);
    let found = app.get(&acme, "/api/v1/conversations?q=lots").await;
    assert_eq!(found.ok(200)["data"][0]["conversation_id"], id);
}
