//! Retention (issue 73, points 1 and 2): `GET/PUT /settings/retention`, and the worker that removes a
//! partner's expired messages, conversations, media, webhook deliveries and bot sessions (from every list,
//! search and index) while sends go on, one host at a time.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{FakeServer, TestApp, eventually};

const PHONE: &str = "+15557930001";
const DAY_MS: i64 = 86_400_000;
/// acme's messages' delivery jobs.
const ACME_JOBS: &str =
    "message_id IN (SELECT id FROM messages WHERE partner_id = (SELECT id FROM partners WHERE code = 'acme'))";

/// Rows of `table` matching `filter`.
async fn count(app: &TestApp, table: &str, filter: &str) -> i64 {
    app.rows(table, filter).await
}

fn list(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Runs one purge on this host now (as its worker does at its turn).
async fn purge(app: &TestApp, holder: &str) -> Option<hubbub_host::retention::Purged> {
    let clock: hubbub_host::clock::SharedClock = app.clock.clone();
    let ceiling = app.state.config.retention_max_days;
    hubbub_host::retention::purge(&app.state.db, &clock, ceiling, holder, &CancellationToken::new()).await.unwrap()
}

async fn put_retention(app: &TestApp, key: &str, body: Value) -> crate::common::Resp {
    app.request(Method::PUT, "/api/v1/settings/retention", Some(key), Some(&body)).await
}

#[tokio::test]
async fn retention_settings_are_validated_capped_by_the_host_and_audited() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let forever = json!({"messages_days": null, "conversations_days": null, "media_days": null,
        "webhook_deliveries_days": null, "bot_sessions_days": null, "max_days": null});
    assert_eq!(app.get(&key, "/api/v1/settings/retention").await.ok(200), &forever);
    let chosen = json!({"messages_days": 30, "conversations_days": 365, "media_days": 7,
        "webhook_deliveries_days": 14, "bot_sessions_days": 90});
    let answer = put_retention(&app, &key, chosen.clone()).await.ok(200).clone();
    let mut expected = chosen.clone();
    expected["max_days"] = Value::Null;
    assert_eq!(answer, expected);
    assert_eq!(app.get(&key, "/api/v1/settings/retention").await.ok(200), &expected);
    // Absent is null: kept as long as the host keeps it.
    let answer = put_retention(&app, &key, json!({"media_days": 2})).await.ok(200).clone();
    assert_eq!((&answer["media_days"], &answer["messages_days"]), (&json!(2), &Value::Null));
    // Bad input: 0, negative, past the longest, not a number; nothing changes.
    for (field, days) in [("messages_days", json!(0)), ("media_days", json!(-3)), ("bot_sessions_days", json!(36_501))]
    {
        put_retention(&app, &key, json!({ field: days })).await.field_error(field);
    }
    let wrong = put_retention(&app, &key, json!({"conversations_days": "thirty"})).await;
    assert_eq!(wrong.status, 422, "{}", wrong.json);
    assert_eq!(app.get(&key, "/api/v1/settings/retention").await.ok(200)["media_days"], 2);
    // Each change is in the audit log.
    let log = app.get(&key, "/api/v1/audit-log").await.ok(200).clone();
    let changes = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "PUT /api/v1/settings/retention" && e["status"] == 200)
        .count();
    assert_eq!(changes, 2, "{log}");
    app.stop().await;

    // A host's ceiling: shown, and nothing may ask for longer.
    let app = TestApp::start_with(|c| c.retention_max_days = Some(30)).await;
    let key = app.partner("acme").await;
    assert_eq!(app.get(&key, "/api/v1/settings/retention").await.ok(200)["max_days"], 30);
    put_retention(&app, &key, json!({"messages_days": 31})).await.field_error("messages_days");
    let answer = put_retention(&app, &key, json!({"messages_days": 30})).await.ok(200).clone();
    assert_eq!((&answer["messages_days"], &answer["max_days"]), (&json!(30), &json!(30)));
    // A ceiling of 0 is refused at start.
    let mut config = crate::common::test_config("sqlite::memory:");
    config.retention_max_days = Some(0);
    let clock = Arc::new(hubbub_host::clock::ManualClock::new(0));
    let refused = hubbub_host::prepare(config, clock).await.err().expect("refuses to start").to_string();
    assert!(refused.contains("HUBBUB_RETENTION_MAX_DAYS"), "{refused}");
}

#[tokio::test]
async fn expired_messages_conversations_and_media_go_from_every_list_and_index_while_sends_go_on() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    for key in [&acme, &globex] {
        app.post(key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    }
    let user = app.login(PHONE).await;
    // The hub only: no job waits to go on to WhatsApp after it.
    let hub_only = json!({"hub_fallback_after_s": null});
    app.request(Method::PUT, "/api/v1/settings/delivery", Some(&acme), Some(&hub_only)).await.ok(200);

    // Three days ago: hub messages (one with a file), a conversation that ended then, and one still going.
    let mut old = Vec::new();
    for i in 0..600 {
        let sent =
            app.post(&acme, "/api/v1/messages", json!({"phone": PHONE, "body": format!("Old walrus {i}")})).await;
        old.push(sent.ok(201)["message_id"].as_i64().unwrap());
    }
    let document = json!({"phone": PHONE, "content_type": "document", "media_base64": "JVBERi0xLjQK",
        "media_filename": "invoice.pdf", "media_mimetype": "application/pdf", "body": "Your walrus invoice"});
    let with_file = app.post(&acme, "/api/v1/messages", document).await.ok(201)["message_id"].as_i64().unwrap();
    old.push(with_file);
    let media = app.message(&acme, with_file).await["media"]["url"].as_str().unwrap().to_string();
    let ended =
        app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Walrus question"})).await;
    let ended = ended.ok(201)["conversation_id"].as_i64().unwrap();
    let going =
        app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Old narwhal matter"})).await;
    let going = going.ok(201)["conversation_id"].as_i64().unwrap();
    let theirs = app.post(&globex, "/api/v1/messages", json!({"phone": PHONE, "body": "Globex walrus"})).await;
    let theirs = theirs.ok(201)["message_id"].as_i64().unwrap();
    eventually("the old messages are sent", || async { count(&app, "delivery_jobs", ACME_JOBS).await == 0 }).await;
    app.clock.advance_ms(3 * DAY_MS);

    // Today: a new hub message, and a new message in the conversation still going.
    let recent = app.post(&acme, "/api/v1/messages", json!({"phone": PHONE, "body": "New walrus"})).await;
    let recent = recent.ok(201)["message_id"].as_i64().unwrap();
    app.post(&acme, &format!("/api/v1/conversations/{going}/messages"), json!({"body": "Fresh orca answer"}))
        .await
        .ok(201);
    let everything = json!({"messages_days": 1, "conversations_days": 1, "media_days": 1});
    put_retention(&app, &acme, everything).await.ok(200);

    // Sends go on while the purge runs (in batches, with pauses between them).
    let sender = {
        let (client, base, key) = (app.client.clone(), app.base.clone(), acme.clone());
        tokio::spawn(async move {
            let mut sent = Vec::new();
            for i in 0..150 {
                let r = client
                    .post(format!("{base}/api/v1/messages"))
                    .bearer_auth(&key)
                    .json(&json!({"phone": PHONE, "body": format!("During {i}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 201);
                sent.push(r.json::<Value>().await.unwrap()["message_id"].as_i64().unwrap());
            }
            sent
        })
    };
    let purged = purge(&app, "host-a").await.expect("the turn was free");
    let during = sender.await.unwrap();
    assert_eq!(purged.messages, old.len() as u64, "{purged:?}");
    assert_eq!(purged.conversation_messages, 2, "the ended conversation's and the going one's old message");
    assert_eq!(purged.media, 1);

    // The old hub messages are gone from the API, the tables and the indexes; the file too.
    for id in [old[0], old[599], with_file] {
        app.get(&acme, &format!("/api/v1/messages/{id}")).await.error(404, "not_found");
    }
    assert_eq!(app.get(&acme, &media).await.status, 404, "the file is gone");
    let ids = list(&old);
    for (table, column) in [("messages", "id"), ("message_states", "message_id"), ("delivery_attempts", "message_id")] {
        assert_eq!(count(&app, table, &format!("{column} IN ({ids})")).await, 0, "{table}");
    }
    let (messages_index, conversations_index) = match app.state.db.backend() {
        hubbub_host::store::Backend::Sqlite => ("messages_search WHERE rowid", "conversation_words WHERE rowid"),
        hubbub_host::store::Backend::Postgres => {
            ("message_words WHERE message_id", "conversation_words WHERE conversation_id")
        }
    };
    let (messages_index, conversations_index) =
        (messages_index.split_once(" WHERE ").unwrap(), conversations_index.split_once(" WHERE ").unwrap());
    assert_eq!(count(&app, messages_index.0, &format!("{} IN ({ids})", messages_index.1)).await, 0);
    assert_eq!(count(&app, conversations_index.0, &format!("{} = {ended}", conversations_index.1)).await, 0);
    // The person's search finds the recent message and globex's, not acme's old ones.
    let found = app.get(&user, "/api/v1/me/messages?q=walrus&limit=100").await.ok(200).clone();
    let mut bodies: Vec<&str> = found["data"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    bodies.sort();
    assert_eq!(bodies, ["Globex walrus", "New walrus"]);
    // The ended conversation is gone whole; the going one keeps its new message, and its search row says so.
    app.get(&acme, &format!("/api/v1/conversations/{ended}")).await.error(404, "not_found");
    let thread = app.get(&acme, &format!("/api/v1/conversations/{going}")).await.ok(200).clone();
    let said: Vec<&str> = thread["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(said, ["Fresh orca answer"]);
    let search = |q: &'static str| {
        let (app, acme) = (&app, &acme);
        async move {
            let found = app.get(acme, &format!("/api/v1/conversations?q={q}")).await.ok(200).clone();
            found["data"].as_array().unwrap().iter().map(|c| c["conversation_id"].as_i64().unwrap()).collect::<Vec<_>>()
        }
    };
    assert_eq!(search("narwhal").await, Vec::<i64>::new(), "the old message's words left the index");
    assert_eq!(search("walrus").await, Vec::<i64>::new());
    assert_eq!(search("orca").await, [going]);

    // What is recent stays: today's message, the sends during the purge, globex's message.
    assert_eq!(app.message(&acme, recent).await["body"], "New walrus");
    assert_eq!(count(&app, "messages", &format!("id IN ({})", list(&during))).await, during.len() as i64);
    assert_eq!(app.message(&globex, theirs).await["body"], "Globex walrus");
    // The export holds what is left, no more.
    let export = app.client.get(format!("{}/api/v1/exports/messages", app.base)).bearer_auth(&acme).send().await;
    let text = export.unwrap().text().await.unwrap();
    assert_eq!(text.lines().count(), 1 + during.len() + 1, "the recent message, the sends, the orca answer");
    // A second pass finds nothing more.
    assert_eq!(purge(&app, "host-a").await.unwrap().total(), 0);
}

#[tokio::test]
async fn webhook_deliveries_go_once_delivered_and_bot_sessions_once_idle_on_the_worker_of_one_host() {
    let receiver = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| {
        c.retention_every_ms = 100;
        // A failed event waits ten days for its next try: still pending when the purge comes.
        c.webhook_backoff_s = vec![864_000];
    })
    .await;
    let acme = app.partner("acme").await;
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&acme), Some(&json!({"webhook_url": receiver.url})))
        .await
        .ok(200);
    crate::bots::local_bot(&app, &acme, "signup", "signup").await;
    let invited = app.post(&acme, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": PHONE})).await;
    let session = invited.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let sent = app.send_text(&acme, PHONE, "An old event").await.ok(201)["message_id"].as_i64().unwrap();
    eventually("the old events are delivered", || async {
        count(&app, "outbox_events", "state = 'pending'").await == 0 && !receiver.requests.lock().unwrap().is_empty()
    })
    .await;
    let delivered = count(&app, "outbox_events", "state = 'succeeded'").await;
    assert!(delivered >= 1);
    // One more old event that its receiver refuses: it waits for its next try.
    *receiver.behaviour.lock().unwrap() = (500, 0);
    app.send_text(&acme, "+15557930002", "A refused event").await.ok(201);
    eventually("the refused event waits", || async {
        count(&app, "outbox_events", "state = 'pending' AND attempts > 0").await >= 1
    })
    .await;
    let waiting = count(&app, "outbox_events", "state = 'pending'").await;
    app.clock.advance_ms(3 * DAY_MS);
    *receiver.behaviour.lock().unwrap() = (200, 0);
    let recent = app.send_text(&acme, "+15557930003", "A new event").await.ok(201)["message_id"].as_i64().unwrap();
    app.delivered(&acme, recent).await;
    let new_session =
        app.post(&acme, "/api/v1/bots/signup/flows/signup/invite", json!({"phone": "+15557930003"})).await;
    let new_session = new_session.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let cut = app.now() - DAY_MS;

    let two_days = json!({"webhook_deliveries_days": 2, "bot_sessions_days": 2});
    put_retention(&app, &acme, two_days).await.ok(200);
    // The host's own worker purges (every 100 ms here).
    eventually("the worker removes the old deliveries", || async {
        count(&app, "outbox_events", &format!("state = 'succeeded' AND created_at < {cut}")).await == 0
    })
    .await;
    eventually("and the idle session", || async {
        count(&app, "flow_sessions", &format!("ref = '{session}'")).await == 0
    })
    .await;
    // The refused event is still there to be delivered; the recent deliveries and session stay.
    assert_eq!(count(&app, "outbox_events", &format!("state = 'pending' AND created_at < {cut}")).await, waiting);
    eventually("the recent events are delivered and stay", || async {
        count(&app, "outbox_events", &format!("state = 'succeeded' AND created_at >= {cut}")).await >= 1
    })
    .await;
    assert_eq!(count(&app, "flow_sessions", &format!("ref = '{new_session}'")).await, 1);
    let deliveries = app.get(&acme, "/api/v1/webhooks/deliveries?limit=100").await.ok(200).clone();
    let since = hubbub_host::clock::record_time(cut);
    for d in deliveries["data"].as_array().unwrap() {
        assert!(d["state"] != "succeeded" || d["created_at"].as_str().unwrap() >= since.as_str(), "{d}");
    }
    let sessions = app.get(&acme, "/api/v1/flow-sessions?bot=signup").await.ok(200).clone();
    let refs: Vec<&str> = sessions["data"].as_array().unwrap().iter().map(|s| s["ref"].as_str().unwrap()).collect();
    assert_eq!(refs, [new_session.as_str()]);
    // The old message itself stays: its partner keeps messages as long as the host does.
    assert_eq!(app.message(&acme, sent).await["body"], "An old event");

    // One host at a time: while this host's worker holds the turn, another's purge does nothing.
    let other = purge(&app, "host-b").await;
    let held: i64 = count(&app, "host_turns", "name = 'retention'").await;
    assert_eq!(held, 1);
    assert!(other.is_none(), "another host purged while the turn was held: {other:?}");
    app.stop().await;
}

/// From outside the process: a `hubbub serve` whose clock runs two days ahead (`HUBBUB_DEV_CLOCK_OFFSET_S`,
/// development only) purges what a partner keeps one day, on the database another host wrote.
#[tokio::test]
async fn a_host_whose_dev_clock_runs_ahead_purges_from_outside_the_process() {
    let db = Arc::new(crate::common::TestDb::new().await);
    let setup = TestApp::start_on(db.clone(), |_| {}).await;
    let key = setup.partner("acme").await;
    let old = setup.send_text(&key, PHONE, "Two days old soon").await.ok(201)["message_id"].as_i64().unwrap();
    setup.delivered(&key, old).await;
    eventually("its jobs are done", || async { count(&setup, "delivery_jobs", "1 = 1").await == 0 }).await;
    put_retention(&setup, &key, json!({"messages_days": 1})).await.ok(200);
    setup.stop().await;

    let ahead = [("HUBBUB_DEV", "1"), ("HUBBUB_DEV_CLOCK_OFFSET_S", "172800"), ("HUBBUB_RETENTION_EVERY_MS", "100")];
    let (mut child, port) = crate::common::spawn_server(&db.url, &ahead).await;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/messages/{old}");
    let mut status = 0;
    for _ in 0..200 {
        status = client.get(&url).bearer_auth(&key).send().await.unwrap().status().as_u16();
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(status, 404, "the message outlived its day on the host two days ahead");
}
