//! The user's live event stream (`GET /me/events`, Server-Sent Events): tickets, events as they happen,
//! replay after a lost connection, reset past the log, logout, bounds, and a stream on one host hearing what
//! another host did (on PostgreSQL through LISTEN/NOTIFY).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Resp, TestApp, TestDb, eventually};

const PHONE: &str = "+15551230000";

/// One event as the stream sent it.
#[derive(Debug, Clone)]
struct Sent {
    id: Option<String>,
    event: String,
    data: Value,
}

/// A stream read as a client reads it.
struct EventStream {
    response: reqwest::Response,
    buffer: String,
}

impl EventStream {
    /// The next event (comments skipped), or `None` when nothing comes within `within` or the stream ends.
    async fn next(&mut self, within: Duration) -> Option<Sent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::from("message"), String::new());
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if frame.lines().all(|l| l.starts_with(':') || l.is_empty()) {
                    continue;
                }
                return Some(Sent { id, event, data: serde_json::from_str(&data).unwrap_or(Value::Null) });
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes).replace("\r\n", "\n")),
                _ => return None,
            }
        }
    }

    /// The next event of kind `event` whose body passes `wanted`, skipping others.
    async fn next_where(&mut self, event: &str, wanted: impl Fn(&Value) -> bool) -> Sent {
        loop {
            let sent = self.next_of(event).await;
            if wanted(&sent.data) {
                return sent;
            }
        }
    }

    /// The next event of kind `event`, skipping others.
    async fn next_of(&mut self, event: &str) -> Sent {
        loop {
            let sent = self.next(Duration::from_secs(10)).await.unwrap_or_else(|| panic!("no {event} event came"));
            if sent.event == event {
                return sent;
            }
        }
    }
}

/// A ticket for the user's stream.
async fn ticket(app: &TestApp, token: &str) -> String {
    app.post(token, "/api/v1/me/events/ticket", json!({})).await.ok(201)["ticket"].as_str().unwrap().to_string()
}

/// Opens the stream with `ticket` (and a last event id); answers the stream, or the refusal.
async fn open_with(app: &TestApp, ticket: &str, last: Option<&str>) -> Result<EventStream, Resp> {
    open_at(app, &format!("/api/v1/me/events?ticket={ticket}"), None, last).await
}

/// Opens the stream at `path` (with an `auth` header, and a last event id); answers it, or the refusal.
async fn open_at(
    app: &TestApp,
    path: &str,
    auth: Option<(&str, String)>,
    last: Option<&str>,
) -> Result<EventStream, Resp> {
    let mut request = app.client.get(format!("{}{path}", app.base));
    if let Some((name, value)) = auth {
        request = request.header(name, value);
    }
    if let Some(last) = last {
        request = request.header("last-event-id", last);
    }
    let response = request.send().await.unwrap();
    if response.status() != 200 {
        return Err(Resp::from(response).await);
    }
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    Ok(EventStream { response, buffer: String::new() })
}

async fn open(app: &TestApp, token: &str, last: Option<&str>) -> EventStream {
    let ticket = ticket(app, token).await;
    open_with(app, &ticket, last).await.unwrap_or_else(|r| panic!("the stream did not open: {r:?}"))
}

async fn user(app: &TestApp, key: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    app.login(PHONE).await
}

/// The user signs out the token (`DELETE /me/tokens`).
async fn sign_out(app: &TestApp, token: &str) {
    let r = app.client.delete(format!("{}/api/v1/me/tokens", app.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(r.status(), 204);
}

#[tokio::test]
async fn hub_messages_arrive_live_and_a_reconnect_replays_what_was_missed_once() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut stream = open(&app, &token, None).await;
    let sent = app.send_text(&key, PHONE, "Your order shipped").await.ok(201).clone();
    let created = stream.next_of("message.created").await;
    assert_eq!(created.data["ref"], sent["ref"]);
    assert_eq!(created.data["body"], "Your order shipped");
    // Sent down the stream, it reached a device: delivered, for the partner.
    let id = sent["message_id"].as_i64().unwrap();
    eventually("delivered by the stream", || async { app.message(&key, id).await["state"] == "delivered" }).await;
    // The event's body is the message as the inbox lists it (on SQLite, the stream's copy is the one this host
    // kept as it wrote the message, not read back: it is no other), but for its state then.
    let mut listed = app.get(&token, "/api/v1/me/messages").await.json["data"][0].clone();
    assert_eq!(listed["ref"], sent["ref"]);
    assert_eq!((&listed["state"], &created.data["state"]), (&json!("delivered"), &json!("sent")));
    listed["state"] = json!("sent");
    assert_eq!(created.data, listed);
    // Read on another device: this one hears of it.
    let reference = sent["ref"].as_str().unwrap();
    app.post(&token, &format!("/api/v1/me/messages/{reference}/read"), json!({})).await.ok(200);
    // It moves through delivered to read, each step an event; a body is the message as it is when sent.
    let updated = loop {
        let updated = stream.next_of("message.updated").await;
        assert_eq!(updated.data["ref"].as_str(), Some(reference));
        if updated.data["state"] == "read" {
            break updated;
        }
    };
    let mut seen = updated.id.clone().expect("events have ids");
    assert!(seen.parse::<i64>().unwrap() > created.id.unwrap().parse::<i64>().unwrap(), "ids increase");
    while let Some(more) = stream.next(Duration::from_millis(300)).await {
        seen = more.id.expect("events have ids");
    }
    drop(stream);

    // While the app is away, another message arrives; reconnecting with the last id gets it, and only it.
    let mut missed = Vec::new();
    for text in ["And an invoice", "And a receipt"] {
        let m = app.send_text(&key, PHONE, text).await.ok(201).clone();
        let id = m["message_id"].as_i64().unwrap();
        eventually("the message reaches the hub", || async { app.message(&key, id).await["state"] == "sent" }).await;
        missed.push(m["ref"].clone());
    }
    let mut again = open(&app, &token, Some(&seen)).await;
    let mut created = Vec::new();
    while let Some(event) = again.next(Duration::from_millis(500)).await {
        match event.event.as_str() {
            "message.created" => created.push(event.data["ref"].clone()),
            // Sent down this stream, each is now delivered.
            "message.updated" => assert_eq!(event.data["state"], "delivered", "{event:?}"),
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(created, missed, "what was missed, in order, each once");
}

/// A host's own writes wake its streams as they commit: with the log's poll a minute apart (on SQLite what
/// other processes wrote is found by that poll; PostgreSQL hosts hear by `LISTEN`), a message still arrives
/// at once.
#[tokio::test]
async fn a_hosts_own_writes_reach_its_streams_without_waiting_for_the_poll() {
    let app = TestApp::start_with(|c| c.stream_poll_ms = 60_000).await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut stream = open(&app, &token, None).await;
    for text in ["First", "Second"] {
        let sent = app.send_text(&key, PHONE, text).await.ok(201).clone();
        let created = loop {
            let event = stream.next(Duration::from_secs(5)).await.expect("the message came before the poll");
            if event.event == "message.created" {
                break event;
            }
        };
        assert_eq!(created.data["ref"], sent["ref"]);
    }
}

#[tokio::test]
async fn a_ticket_opens_one_stream_once_and_nothing_else_does() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let t = ticket(&app, &token).await;
    let stream = open_with(&app, &t, None).await.ok().expect("the ticket works once");
    drop(stream);
    open_with(&app, &t, None).await.err().unwrap().error(401, "unauthorized");
    open_with(&app, "evt_forged0000000000000000000000000", None).await.err().unwrap().error(401, "unauthorized");
    let bare = Resp::from(app.client.get(format!("{}/api/v1/me/events", app.base)).send().await.unwrap()).await;
    bare.error(401, "unauthorized");
    // The user's token in the URL is no credential either.
    open_with(&app, &token, None).await.err().unwrap().error(401, "unauthorized");
    // An expired ticket.
    let late = ticket(&app, &token).await;
    app.clock.advance_ms(61_000);
    open_with(&app, &late, None).await.err().unwrap().error(401, "unauthorized");
    // Partner keys do not get tickets.
    app.post(&key, "/api/v1/me/events/ticket", json!({})).await.error(403, "forbidden");
}

#[tokio::test]
async fn past_the_kept_log_a_stream_says_reset() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut stream = open(&app, &token, None).await;
    app.send_text(&key, PHONE, "one").await.ok(201);
    let first = stream.next_of("message.created").await.id.unwrap();
    drop(stream);
    let mut stream = open(&app, &token, None).await;
    app.send_text(&key, PHONE, "two").await.ok(201);
    let second = stream.next_of("message.created").await;
    drop(stream);
    // A day later the log no longer holds what came after `first`.
    app.clock.advance_ms(hubbub_host::store::user_events::RETENTION_MS + 1);
    app.state.housekeep().await;
    let mut stream = open(&app, &token, Some(&first)).await;
    assert_eq!(stream.next(Duration::from_secs(5)).await.unwrap().event, "reset");
    // From the newest id, nothing is missing: no reset.
    drop(stream);
    let (newest, _) = hubbub_host::store::user_events::bounds(&app.state.db, PHONE).await.unwrap();
    assert!(newest >= second.id.unwrap().parse::<i64>().unwrap());
    let mut stream = open(&app, &token, Some(&newest.to_string())).await;
    assert!(stream.next(Duration::from_millis(300)).await.is_none(), "nothing missed: no reset");
}

#[tokio::test]
async fn signing_out_ends_the_stream_with_a_logout_event() {
    let app = TestApp::start_with(|c| c.stream_heartbeat_ms = 100).await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut stream = open(&app, &token, None).await;
    sign_out(&app, &token).await;
    assert_eq!(stream.next_of("logout").await.data["reason"], "signed_out");
    assert!(stream.next(Duration::from_secs(2)).await.is_none(), "the stream ends");
}

/// A stream that events keep coming down still checks its sign-in at each heartbeat: signed out, it ends
/// while the events go on (a heartbeat that waited for a quiet moment would never come).
#[tokio::test]
async fn a_busy_stream_still_ends_at_the_next_heartbeat_after_signing_out() {
    let app = TestApp::start_with(|c| c.stream_heartbeat_ms = 100).await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut stream = open(&app, &token, None).await;
    // A message every 25 ms, for 6 s: the stream is never quiet for a heartbeat's 75–100 ms.
    let sending = {
        let (client, base, key) = (app.client.clone(), app.base.clone(), key.clone());
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + Duration::from_secs(6);
            while tokio::time::Instant::now() < until {
                let body = json!({"phone": PHONE, "body": "busy"});
                let r = client.post(format!("{base}/api/v1/messages")).bearer_auth(&key).json(&body).send().await;
                assert_eq!(r.unwrap().status(), 201);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };
    stream.next_of("message.created").await;
    sign_out(&app, &token).await;
    let logout = tokio::time::timeout(Duration::from_secs(3), stream.next_of("logout")).await;
    assert!(!sending.is_finished(), "the sends went on all the while");
    assert_eq!(logout.expect("the stream ends while events still come").data["reason"], "signed_out");
    sending.abort();
}

#[tokio::test]
async fn streams_are_bounded_per_user_and_per_host_with_clear_errors() {
    let app = TestApp::start_with(|c| {
        c.streams_per_user = 3;
        c.max_streams = 5;
    })
    .await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(open(&app, &token, None).await);
    }
    // Many more opens from the same user: each a 429 in the error shape, and the host keeps serving.
    for _ in 0..50 {
        let t = ticket(&app, &token).await;
        let refused = open_with(&app, &t, None).await.err().expect("over the user's bound");
        refused.error(429, "rate_limited");
        assert!(refused.headers.get("retry-after").is_some());
    }
    // Another user fills the host: 503.
    app.post(&key, "/api/v1/accounts/link", json!({"phone": "+15551230001"})).await.ok(200);
    let other = app.login("+15551230001").await;
    held.push(open(&app, &other, None).await);
    held.push(open(&app, &other, None).await);
    let t = ticket(&app, &other).await;
    open_with(&app, &t, None).await.err().expect("over the host's bound").error(503, "unavailable");
    assert_eq!(app.state.streams.open_count(), 5);
    app.get(&key, "/api/v1/messages").await.ok(200);
    // Closed streams give their places back.
    held.clear();
    eventually("closed streams are counted out", || async { app.state.streams.open_count() == 0 }).await;
    open(&app, &token, None).await;
}

#[tokio::test]
async fn conversations_and_bot_replies_arrive_live() {
    let recv = crate::common::FakeServer::start(200, 0).await;
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut stream = open(&app, &token, None).await;
    let thread = app.post(&token, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Help"})).await;
    let thread = thread.ok(201).clone();
    let mine = stream.next_of("conversation.message").await;
    assert_eq!(mine.data["message"]["body"], "Help");
    let id = thread["conversation_id"].as_i64().unwrap();
    app.post(&key, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "On it"})).await.ok(201);
    let reply = stream.next_of("conversation.message").await;
    assert_eq!(reply.data["message"]["body"], "On it");
    assert_eq!(reply.data["conversation"]["ref"], thread["ref"]);
    assert_eq!(reply.data["conversation"]["state"], "pending");
    assert_eq!(reply.data["conversation"]["unread"], 1, "the agent's reply is unread");
    // Sent down the stream, the reply reached a device: delivered (and the stream says so).
    let reply_id = reply.data["message"]["message_id"].clone();
    let is = |id: &Value, state: &'static str| {
        let id = id.clone();
        move |d: &Value| d["message"]["message_id"] == id && d["message"]["state"] == state
    };
    stream.next_where("conversation.message", is(&reply_id, "delivered")).await;
    // Read receipts: the agent reads the user's message, the user reads the reply; each side hears it.
    app.post(&key, &format!("/api/v1/conversations/{id}/read"), json!({})).await.ok(200);
    stream.next_where("conversation.message", is(&mine.data["message"]["message_id"], "read")).await;
    let reference = thread["ref"].as_str().unwrap();
    app.post(&token, &format!("/api/v1/me/conversations/{reference}/read"), json!({})).await.ok(200);
    let read = stream.next_where("conversation.message", is(&reply_id, "read")).await;
    assert_eq!(read.data["conversation"]["unread"], 0);
    let close = json!({"state": "closed"});
    app.request(Method::PATCH, &format!("/api/v1/conversations/{id}"), Some(&key), Some(&close)).await.ok(200);
    assert_eq!(stream.next_of("conversation.updated").await.data["state"], "closed");

    // A webhook bot's reply: the app is told the session has new steps.
    let bot = json!({"code": "remote", "name": "Remote", "runtime_mode": "webhook", "webhook_url": recv.url});
    let bot = app.post(&key, "/api/v1/bots", bot).await.ok(201).clone();
    let session = app.post(&token, "/api/v1/me/bots/remote/sessions", json!({})).await.ok(201)["session"].clone();
    let reply = json!({"event": "reply", "data": {"session": session, "steps": [{"type": "message", "text": "Hi"}]}});
    app.post(bot["bot_token"].as_str().unwrap(), "/api/v1/bots/remote/webhook", reply).await.ok(200);
    let flow = stream.next_of("flow.updated").await;
    assert_eq!((&flow.data["ref"], flow.data["kind"].as_str()), (&session, Some("chat")));
}

/// The states a message has passed through, and its `message.status` events' states, in order.
async fn history(app: &TestApp, id: i64) -> (Vec<String>, Vec<String>) {
    let db = app.state.db.reader();
    let states: Vec<String> = sqlx::query_scalar("SELECT state FROM message_states WHERE message_id = $1 ORDER BY seq")
        .bind(id)
        .fetch_all(db)
        .await
        .unwrap();
    let events: Vec<String> = sqlx::query_scalar(
        "SELECT payload FROM outbox_events WHERE ordering_key LIKE $1 AND event = 'message.status' ORDER BY id",
    )
    .bind(format!("%:message:{id}"))
    .fetch_all(db)
    .await
    .unwrap();
    let events = events.iter().map(|p| serde_json::from_str::<Value>(p).unwrap()["state"].as_str().unwrap().into());
    (states, events.collect())
}

#[tokio::test]
async fn a_message_handed_over_while_queued_walks_to_delivered_and_a_replay_hands_nothing_over_again() {
    // No delivery worker: an agent's reply stays `queued` until a device gets it.
    let app = TestApp::start_with(|c| c.workers = false).await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut stream = open(&app, &token, None).await;
    let thread = app.post(&token, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Help"})).await;
    let id = thread.ok(201)["conversation_id"].as_i64().unwrap();
    let reply = app.post(&key, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "On it"})).await;
    let reply_id = reply.ok(201)["message_id"].as_i64().unwrap();
    let handed = stream.next_where("conversation.message", |d| d["message"]["message_id"] == reply_id).await;
    assert_eq!(handed.data["message"]["state"], "queued", "the stream read it before any worker moved it");
    // The stream's copy said `queued`: the message walks through `sent` to `delivered`, each step recorded
    // and told, in order.
    let walked =
        (vec!["queued".to_string(), "sent".into(), "delivered".into()], vec!["sent".into(), "delivered".into()]);
    eventually("the reply walks to delivered", || async { history(&app, reply_id).await == walked }).await;

    // A hub message, delivered down the stream, then read.
    let sent = app.send_text(&key, PHONE, "Your order shipped").await.ok(201).clone();
    let (message_id, reference) = (sent["message_id"].as_i64().unwrap(), sent["ref"].as_str().unwrap().to_string());
    let created = stream.next_where("message.created", |d| d["message_id"] == message_id).await;
    eventually("delivered by the stream", || async { app.message(&key, message_id).await["state"] == "delivered" })
        .await;
    app.post(&token, &format!("/api/v1/me/messages/{reference}/read"), json!({})).await.ok(200);
    let read = (
        vec!["queued".to_string(), "sent".into(), "delivered".into(), "read".into()],
        vec!["sent".to_string(), "delivered".into(), "read".into()],
    );
    assert_eq!(history(&app, message_id).await, read);
    drop(stream);
    // Replayed from before it was created, the message comes again as it is now (read), and is not handed
    // over again: no step back, no second `delivered`.
    let before = (created.id.unwrap().parse::<i64>().unwrap() - 1).to_string();
    let mut again = open(&app, &token, Some(&before)).await;
    let replayed = again.next_where("message.created", |d| d["message_id"] == message_id).await;
    assert_eq!(replayed.data["state"], "read");
    tokio::time::sleep(hubbub_host::messages::HANDED_OVER_GATHER * 4).await;
    assert_eq!(history(&app, message_id).await, read);
}

#[tokio::test]
async fn an_open_stream_notes_the_user_present_at_its_heartbeats_and_as_it_ends() {
    // Users are offline 60 s after their last note; heartbeats come every 100 ms (at most).
    let app = TestApp::start_with(|c| {
        c.stream_heartbeat_ms = 100;
        c.offline_after_s = 60;
    })
    .await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let seen = || async { hubbub_host::store::devices::last_seen(&app.state.db, PHONE).await.unwrap() };
    let stream = open(&app, &token, None).await;
    let opened = app.now();
    assert_eq!(seen().await, Some(opened), "opening a stream is activity");
    // Within the offline time less two heartbeats (59.8 s), heartbeats write nothing: the note is fresh
    // enough that the user never looks offline while the stream is open.
    app.clock.advance_ms(40_000);
    tokio::time::sleep(Duration::from_millis(500) + hubbub_host::store::devices::BEAT_GATHER * 2).await;
    assert_eq!(seen().await, Some(opened), "a heartbeat while the note is fresh writes nothing");
    // Past it, a heartbeat notes the user again (its notes gather for a moment).
    app.clock.advance_ms(20_000);
    let beat = app.now();
    eventually("a heartbeat notes the user present", || async { seen().await == Some(beat) }).await;
    // The stream's end is the last moment the user was here, however fresh the note: the offline timer
    // starts from it.
    app.clock.advance_ms(30_000);
    let gone = app.now();
    drop(stream);
    eventually("the stream's end notes the user present", || async { seen().await == Some(gone) }).await;
}

#[tokio::test]
async fn a_stream_on_one_host_hears_what_another_host_did() {
    let db = Arc::new(TestDb::new().await);
    let a = TestApp::start_on(db.clone(), |_| {}).await;
    let b = TestApp::start_on(db.clone(), |_| {}).await;
    let key = a.partner("acme").await;
    a.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let token = a.login(PHONE).await;
    let mut on_b = open(&b, &token, None).await;
    let sent = a.send_text(&key, PHONE, "Sent through host A").await.ok(201).clone();
    let created = on_b.next_of("message.created").await;
    assert_eq!(created.data["ref"], sent["ref"]);
}

/// Ten thousand opens from one user, 32 at a time: each is refused with a clear error — the user's bound
/// on streams (`429`), or before that the rate limit on tickets (`429`) — with `Retry-After`; none hangs,
/// the streams already open keep working and the host keeps serving.
#[tokio::test]
async fn ten_thousand_opens_from_one_user_each_get_a_clear_error() {
    let app = TestApp::start_with(|c| {
        c.streams_per_user = 2;
        c.rate_limit_per_s = 100;
        c.rate_limit_burst = 200;
    })
    .await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let mut held = vec![open(&app, &token, None).await, open(&app, &token, None).await];
    let outcomes: Arc<std::sync::Mutex<HashMap<String, usize>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (client, base, token, outcomes) = (app.client.clone(), app.base.clone(), token.clone(), outcomes.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10_000 / 32 + 1 {
                let asked = client.post(format!("{base}/api/v1/me/events/ticket")).bearer_auth(&token).send();
                let asked = tokio::time::timeout(Duration::from_secs(10), asked).await.expect("no hang").unwrap();
                let refused = if asked.status() == 201 {
                    let ticket = asked.json::<Value>().await.unwrap()["ticket"].as_str().unwrap().to_string();
                    let opened = client.get(format!("{base}/api/v1/me/events?ticket={ticket}")).send();
                    let opened = tokio::time::timeout(Duration::from_secs(10), opened).await.expect("no hang").unwrap();
                    assert_ne!(opened.status(), 200, "a stream past the user's bound opened");
                    ("open", Resp::from(opened).await)
                } else {
                    ("ticket", Resp::from(asked).await)
                };
                let (step, r) = refused;
                assert!(r.headers.get("retry-after").is_some(), "{step}: {} {:?}", r.status, r.json);
                let what = format!("{step} {} {}", r.status.as_u16(), r.json["error"]["code"].as_str().unwrap_or("?"));
                *outcomes.lock().unwrap().entry(what).or_default() += 1;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let outcomes = outcomes.lock().unwrap().clone();
    assert_eq!(outcomes.values().sum::<usize>(), 32 * (10_000 / 32 + 1));
    for what in outcomes.keys() {
        assert!(what == "open 429 rate_limited" || what == "ticket 429 rate_limited", "{outcomes:?}");
    }
    assert!(outcomes.contains_key("open 429 rate_limited"), "some reached the stream bound: {outcomes:?}");
    // The host is healthy: the two open streams still hear what happens.
    assert_eq!(app.state.streams.open_count(), 2);
    let sent = app.send_text(&key, PHONE, "Still here").await.ok(201).clone();
    for stream in &mut held {
        assert_eq!(stream.next_of("message.created").await.data["ref"], sent["ref"]);
    }
}

/// Opens the partner's conversation stream (`GET /conversations/events`) with a key, or a member's cookie.
async fn open_console(app: &TestApp, auth: (&str, String), last: Option<&str>) -> Result<EventStream, Resp> {
    open_at(app, "/api/v1/conversations/events", Some(auth), last).await
}

#[tokio::test]
async fn a_partners_conversations_come_live_to_its_console_replay_after_a_reconnect_and_end_with_the_key() {
    let app = TestApp::start_with(|c| c.stream_heartbeat_ms = 100).await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let bearer = |k: &str| ("authorization", format!("Bearer {k}"));
    let token = user(&app, &key).await;
    let mut console = open_console(&app, bearer(&key), None).await.unwrap();
    let mut theirs = open_console(&app, bearer(&other), None).await.unwrap();
    // An agent's browser opens it with the session cookie.
    let (_, agent) = crate::members::sign_in(
        &app,
        "+15550100070",
        json!({"invitation": crate::members::invitation(&app, &key, "agent").await}),
    )
    .await;
    let agent = agent.unwrap();
    let mut agents = open_console(&app, ("cookie", agent.cookie.clone()), None).await.unwrap();

    // The user writes: a new conversation, with its first message, unread by the partner.
    let opened = app.post(&token, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Where is it?"})).await;
    let id = opened.ok(201)["conversation_id"].as_i64().unwrap();
    let reference = opened.json["ref"].as_str().unwrap().to_string();
    for stream in [&mut console, &mut agents] {
        let first = stream.next_of("conversation.message").await;
        assert_eq!(first.data["conversation"]["conversation_id"], id);
        assert_eq!(first.data["conversation"]["unread"], 1);
        assert!(first.data["conversation"]["assignee_id"].is_null());
        assert_eq!(first.data["message"]["body"], "Where is it?");
        assert_eq!(first.data["message"]["direction"], "in");
    }
    let seen = console.next(Duration::from_millis(200)).await;
    assert!(seen.is_none(), "one event for one message: {seen:?}");

    // The agent answers (the conversation waits for the user), and the user reads it: the receipt comes.
    let reply = app.post(&key, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "Tomorrow"})).await;
    let reply_ref = reply.ok(201)["ref"].clone();
    let answered = console.next_where("conversation.message", |d| d["message"]["ref"] == reply_ref).await;
    assert_eq!(answered.data["conversation"]["state"], "pending");
    assert_eq!(answered.data["message"]["direction"], "out");
    app.post(&token, &format!("/api/v1/me/conversations/{reference}/read"), json!({})).await.ok(200);
    console
        .next_where("conversation.message", |d| d["message"]["ref"] == reply_ref && d["message"]["state"] == "read")
        .await;

    // A note and a change of state: the conversation as it now is.
    app.post(&key, &format!("/api/v1/conversations/{id}/notes"), json!({"body": "VIP"})).await.ok(201);
    let noted = console.next_of("conversation.updated").await;
    assert_eq!(noted.data["conversation_id"], id);
    let path = format!("/api/v1/conversations/{id}");
    app.request(Method::PATCH, &path, Some(&key), Some(&json!({"state": "closed"}))).await.ok(200);
    let closed = console.next_where("conversation.updated", |d| d["state"] == "closed").await;
    let agents_closed = agents.next_where("conversation.updated", |d| d["state"] == "closed").await;
    assert_eq!(agents_closed.id, closed.id, "each console counts the partner's events alike");

    // Another partner heard none of it: the first thing it hears is its own conversation.
    app.post(&other, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    app.post(&token, "/api/v1/me/conversations", json!({"partner": "globex", "body": "Hello globex"})).await.ok(201);
    let own = theirs.next(Duration::from_secs(10)).await.expect("globex hears its own conversation");
    assert_eq!(own.data["message"]["body"], "Hello globex", "{own:?}");
    assert_eq!(own.data["conversation"]["partner"], "globex");

    // A console that lost its connection gets what came meanwhile, from the id it had, once.
    drop(console);
    let last = closed.id.clone().unwrap();
    app.post(&token, &format!("/api/v1/me/conversations/{reference}/messages"), json!({"body": "Reopen please"}))
        .await
        .ok(201);
    let mut console = open_console(&app, bearer(&key), Some(&last)).await.unwrap();
    let missed = console.next_of("conversation.message").await;
    assert_eq!(missed.data["message"]["body"], "Reopen please");
    assert_eq!(missed.data["conversation"]["state"], "open");
    assert!(missed.id.unwrap().parse::<i64>().unwrap() > last.parse::<i64>().unwrap());

    // A user's token, or a stream for a user opened on the partner's route, is refused.
    open_console(&app, bearer(&token), None).await.err().unwrap().error(403, "forbidden");
    // The agent signs out: their stream ends with `logout`; revoking the key ends the key's.
    let out = agent.call(Method::DELETE, "/api/v1/members/sessions/current", None, Some("same-origin")).await;
    assert_eq!(out.status.as_u16(), 204);
    assert_eq!(agents.next_of("logout").await.data["reason"], "signed_out");
    let second = app.post(&key, "/api/v1/api-keys", json!({"name": "next"})).await.ok(201)["api_key"].clone();
    let second = second.as_str().unwrap().to_string();
    let listed = app.get(&second, "/api/v1/api-keys").await.ok(200).clone();
    let first_id = listed["data"].as_array().unwrap().last().unwrap()["id"].as_i64().unwrap();
    app.request(Method::DELETE, &format!("/api/v1/api-keys/{first_id}"), Some(&second), None).await.ok(200);
    console.next_of("logout").await;
    assert!(console.next(Duration::from_secs(2)).await.is_none(), "the stream ends");
    open_console(&app, bearer(&key), None).await.err().unwrap().error(401, "unauthorized");
}

/// The console's webhook log is live: each batch of the partner's deliveries tried says so on its stream
/// (`webhook.deliveries`, with no body), and on no other partner's; the person's stream never has it.
#[tokio::test]
async fn a_partners_webhook_deliveries_tried_are_told_to_its_console_and_no_one_elses() {
    let receiver = crate::common::FakeServer::start(500, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let bearer = |k: &str| ("authorization", format!("Bearer {k}"));
    let token = user(&app, &key).await;
    let mut console = open_console(&app, bearer(&key), None).await.unwrap();
    let mut theirs = open_console(&app, bearer(&other), None).await.unwrap();
    let mut person = open(&app, &token, None).await;
    let url = json!({"webhook_url": receiver.url});
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&url)).await.ok(200);
    app.send_text(&key, PHONE, "Hooked").await.ok(201);
    let told = console.next_of("webhook.deliveries").await;
    assert_eq!(told.data, json!({}), "nothing but that the log moved");
    assert!(told.id.is_some(), "replayable like the conversation events");
    eventually("the receiver was called", || async { !receiver.received().is_empty() }).await;
    for (name, stream) in [("globex's console", &mut theirs), ("the person's stream", &mut person)] {
        while let Some(sent) = stream.next(Duration::from_millis(300)).await {
            assert_ne!(sent.event, "webhook.deliveries", "{name} heard another partner's deliveries");
        }
    }
}

#[tokio::test]
async fn typing_is_told_to_the_other_side_throttled_and_never_replayed_stale() {
    let wa = crate::common::FakeServer::start(200, 0).await;
    let sms = crate::common::FakeServer::start(200, 0).await;
    // WhatsApp through a fake Cloud API; SMS (the login codes) in the development sink.
    let app = TestApp::start_with(|c| {
        crate::common::fake_providers(c, &wa, &sms);
        c.sms_provider = None;
        c.twilio_from = None;
    })
    .await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let token = user(&app, &key).await;
    let bearer = |k: &str| ("authorization", format!("Bearer {k}"));
    let opened = app.post(&token, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Hi"})).await;
    let id = opened.ok(201)["conversation_id"].as_i64().unwrap();
    let reference = opened.json["ref"].as_str().unwrap().to_string();
    let mut console = open_console(&app, bearer(&key), None).await.unwrap();
    let mut theirs = open_console(&app, bearer(&other), None).await.unwrap();
    let mut person = open(&app, &token, None).await;

    // The person writes in the app: the partner's console hears it, once however often the app says so.
    let typing = format!("/api/v1/me/conversations/{reference}/typing");
    for _ in 0..3 {
        assert_eq!(app.request(Method::POST, &typing, Some(&token), None).await.status, 204);
    }
    let told = console.next_of("conversation.typing").await;
    assert_eq!(told.data, json!({"conversation_id": id, "from": "user"}));
    assert_eq!(app.rows("user_events", "kind = 'conversation.typing'").await, 1, "throttled to one");
    assert!(theirs.next(Duration::from_millis(300)).await.is_none(), "another partner hears nothing");
    // An agent writes: the person hears it (and their own typing is not echoed back to them).
    let agent_typing = format!("/api/v1/conversations/{id}/typing");
    assert_eq!(app.request(Method::POST, &agent_typing, Some(&key), None).await.status, 204);
    let heard = person.next_of("conversation.typing").await;
    assert_eq!(heard.data, json!({"conversation_id": id, "ref": reference, "from": "agent"}));
    // Two seconds on, the app may say so again.
    app.clock.advance_ms(2_100);
    assert_eq!(app.request(Method::POST, &typing, Some(&token), None).await.status, 204);
    console.next_of("conversation.typing").await;
    assert_eq!(app.rows("user_events", "kind = 'conversation.typing'").await, 3);

    // A stream that reconnects later is not told of typing long over.
    let last = heard.id.clone().unwrap();
    let earlier: i64 = last.parse::<i64>().unwrap() - 1;
    app.clock.advance_ms(10_000);
    let mut again = open(&app, &token, Some(&earlier.to_string())).await;
    assert!(again.next(Duration::from_millis(300)).await.is_none(), "stale typing is not replayed");

    // Someone else's conversation is 404 on either side.
    let stranger = app.login("+15551239999").await;
    app.request(Method::POST, &typing, Some(&stranger), None).await.error(404, "not_found");
    app.request(Method::POST, &agent_typing, Some(&other), None).await.error(404, "not_found");

    // The person last wrote from WhatsApp: an agent writing shows Meta's typing indicator, as an answer to
    // the person's latest message there.
    let message = json!({"from": PHONE.trim_start_matches('+'), "id": "wamid.LATEST", "timestamp": "1",
        "type": "text", "text": {"body": "still there?"}});
    app.whatsapp_notify(json!([{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550009999", "phone_number_id": "12345"},
        "messages": [message]}}]))
        .await
        .ok(200);
    eventually("the WhatsApp message in the conversation", || async {
        app.get(&key, &format!("/api/v1/conversations/{id}")).await.json["channel"] == "whatsapp"
    })
    .await;
    app.clock.advance_ms(2_100);
    assert_eq!(app.request(Method::POST, &agent_typing, Some(&key), None).await.status, 204);
    let shown = wa.received().into_iter().map(|r| r.json()).find(|b| b.get("typing_indicator").is_some());
    let shown = shown.expect("Meta's typing indicator was asked for");
    assert_eq!(shown["message_id"], "wamid.LATEST");
    assert_eq!(shown["status"], "read");
}
