//! The agents' desk (issue 74, points 1 and 5): labels on conversations and the list filtered by them,
//! macros that reply, label, note, assign and close at once, and assignment — round robin and by capacity
//! among the agents online, transfers with a note, and an agent going offline handing theirs back.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestApp;
use crate::members::{Browser, invitation, sign_in};

const OWNER: &str = "+15550300001";
const ANA: &str = "+15550300002";
const BO: &str = "+15550300003";
const CY: &str = "+15550300004";
const USER: &str = "+15550300060";

/// A member of `key`'s partner with `role` and `name`, signed in.
async fn member<'a>(app: &'a TestApp, key: &str, phone: &str, role: &str, name: &str) -> (Browser<'a>, i64) {
    let (r, browser) = sign_in(app, phone, json!({"invitation": invitation(app, key, role).await, "name": name})).await;
    let id = r.ok(201)["member"]["id"].as_i64().unwrap();
    (browser.unwrap(), id)
}

/// The user opens a conversation with acme, saying `body`: its id.
async fn opens(app: &TestApp, user: &str, body: &str) -> i64 {
    let c = app.post(user, "/api/v1/me/conversations", json!({"partner": "acme", "body": body})).await;
    c.ok(201)["conversation_id"].as_i64().unwrap()
}

fn ids(list: &Value) -> Vec<i64> {
    list["data"].as_array().unwrap().iter().map(|c| c["conversation_id"].as_i64().unwrap()).collect()
}

async fn assignee_of(app: &TestApp, key: &str, c: i64) -> Value {
    app.get(key, &path(c)).await.ok(200)["assignee_id"].clone()
}

async fn put_assignment(app: &TestApp, key: &str, body: Value) -> crate::common::Resp {
    app.request(Method::PUT, "/api/v1/settings/assignment", Some(key), Some(&body)).await
}

/// Sets the member's own status: the status they have now.
async fn me(b: &Browser<'_>, status: &str) -> Value {
    b.send(Method::PATCH, "/api/v1/members/me", json!({"status": status})).await.ok(200)["member"]["status"].clone()
}

fn path(id: i64) -> String {
    format!("/api/v1/conversations/{id}")
}

#[tokio::test]
async fn labels_are_kept_by_admins_put_on_conversations_and_filter_the_list_and_the_user_never_sees_them() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let (agent, _) = member(&app, &key, ANA, "agent", "Ana Lima").await;
    let (admin, _) = member(&app, &key, BO, "admin", "Bo Chen").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    let (a, b) = (opens(&app, &user, "billing question").await, opens(&app, &user, "delivery late").await);

    // Kept by admins (lower case, a colour), refused for agents; bad names and colours are 422 on the field.
    let billing = admin.send(Method::POST, "/api/v1/labels", json!({"name": " Billing ", "color": "#2563EB"})).await;
    assert_eq!((billing.ok(201)["name"].as_str(), billing.json["color"].as_str()), (Some("billing"), Some("#2563eb")));
    let billing_id = billing.json["id"].as_i64().unwrap();
    let vip = app.post(&key, "/api/v1/labels", json!({"name": "vip"})).await.ok(201).clone();
    assert_eq!(vip["color"], "#6b7280");
    agent.send(Method::POST, "/api/v1/labels", json!({"name": "mine"})).await.error(403, "forbidden");
    app.post(&key, "/api/v1/labels", json!({"name": "BILLING"})).await.error(409, "conflict");
    for bad in [json!({"name": "x".repeat(1000)}), json!({"name": ""}), json!({"name": "two words"}), json!({})] {
        app.post(&key, "/api/v1/labels", bad).await.field_error("name");
    }
    app.post(&key, "/api/v1/labels", json!({"name": "red", "color": "red"})).await.field_error("color");
    app.post(&other, "/api/v1/labels", json!({"name": "theirs"})).await.ok(201);

    // An agent labels a conversation; the list filters by a label; a label not the partner's is refused.
    let labelled = agent.send(Method::PATCH, &path(a), json!({"labels": ["billing", "VIP"]})).await;
    assert_eq!(labelled.ok(200)["labels"], json!(["billing", "vip"]));
    agent.send(Method::PATCH, &path(b), json!({"labels": ["vip"]})).await.ok(200);
    assert_eq!(ids(agent.get("/api/v1/conversations?label=billing&state=").await.ok(200)), [a]);
    assert_eq!(ids(agent.get("/api/v1/conversations?label=vip").await.ok(200)), [b, a]);
    assert!(ids(agent.get("/api/v1/conversations?label=theirs").await.ok(200)).is_empty());
    app.get(&key, "/api/v1/conversations?label=no%20such").await.field_error("label");
    agent.send(Method::PATCH, &path(b), json!({"labels": ["theirs"]})).await.field_error("labels");
    agent.send(Method::PATCH, &path(b), json!({"labels": ["x".repeat(1000)]})).await.field_error("labels");
    let many: Vec<String> = (0..21).map(|i| format!("l{i}")).collect();
    agent.send(Method::PATCH, &path(b), json!({"labels": many})).await.field_error("labels");
    let listed = agent.get("/api/v1/labels").await.ok(200).clone();
    let counts: Vec<(&str, i64)> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["name"].as_str().unwrap(), l["conversations"].as_i64().unwrap()))
        .collect();
    assert_eq!(counts, [("billing", 1), ("vip", 2)]);
    assert_eq!(app.get(&key, &path(a)).await.ok(200)["labels"], json!(["billing", "vip"]));

    // The user sees no labels, in the list or the thread.
    let theirs = app.get(&user, "/api/v1/me/conversations").await.ok(200).clone();
    assert!(!theirs.to_string().contains("\"labels\"") && !theirs.to_string().contains("vip"), "{theirs}");
    let thread_ref = theirs["data"][0]["ref"].as_str().unwrap();
    let thread = app.get(&user, &format!("/api/v1/me/conversations/{thread_ref}")).await.ok(200).to_string();
    assert!(!thread.contains("\"labels\"") && !thread.contains("vip"), "{thread}");

    // Replaced as a whole; a label deleted leaves its conversations; another partner's is not found.
    agent.send(Method::PATCH, &path(a), json!({"labels": []})).await.ok(200);
    assert_eq!(app.get(&key, &path(a)).await.ok(200)["labels"], json!([]));
    let vip_path = format!("/api/v1/labels/{}", vip["id"]);
    app.request(Method::DELETE, &vip_path, Some(&other), None).await.error(404, "not_found");
    agent.call(Method::DELETE, &vip_path, None, Some("same-origin")).await.error(403, "forbidden");
    assert_eq!(admin.call(Method::DELETE, &vip_path, None, Some("same-origin")).await.status.as_u16(), 204);
    assert_eq!(app.get(&key, &path(b)).await.ok(200)["labels"], json!([]));
    assert_eq!(app.rows("conversation_labels", "1 = 1").await, 0);
    app.request(Method::DELETE, &format!("/api/v1/labels/{billing_id}"), Some(&key), None).await;
    assert_eq!(app.get(&key, "/api/v1/labels").await.ok(200)["data"], json!([]));
}

#[tokio::test]
async fn a_macro_replies_labels_notes_assigns_and_closes_at_once_and_is_checked_again_when_applied() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let (agent, ana_id) = member(&app, &key, ANA, "agent", "Ana Lima").await;
    let (admin, _) = member(&app, &key, BO, "admin", "Bo Chen").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    let c = opens(&app, &user, "I was charged twice").await;
    app.post(&key, "/api/v1/labels", json!({"name": "billing"})).await.ok(201);
    let canned =
        app.post(&key, "/api/v1/canned-replies", json!({"shortcut": "refund", "body": "Refunded today."})).await;
    let canned_id = canned.ok(201)["id"].as_i64().unwrap();

    // Saved by admins, checked against what the partner has: each refusal names the action's field.
    let refund = json!({"name": "Refund and close", "actions": [
        {"type": "reply", "canned_reply_id": canned_id},
        {"type": "add_labels", "labels": ["billing"]},
        {"type": "note", "body": "Refund sent by macro"},
        {"type": "assign", "assignee": "me"},
        {"type": "close"},
    ]});
    agent.send(Method::POST, "/api/v1/macros", refund.clone()).await.error(403, "forbidden");
    let made = admin.send(Method::POST, "/api/v1/macros", refund.clone()).await;
    let macro_id = made.ok(201)["id"].as_i64().unwrap();
    assert_eq!(made.json["actions"], refund["actions"]);
    app.post(&key, "/api/v1/macros", refund.clone()).await.error(409, "conflict");
    let bad = |actions: Value| json!({"name": "Bad", "actions": actions});
    for (actions, field) in [
        (json!([]), "actions"),
        (json!([{"type": "add_labels", "labels": ["nope"]}]), "actions[0].labels"),
        (json!([{"type": "close"}, {"type": "add_labels", "labels": ["x".repeat(1000)]}]), "actions[1].labels"),
        (json!([{"type": "reply", "body": "a"}, {"type": "reply", "body": "b"}]), "actions[1].type"),
        (json!([{"type": "reply"}]), "actions[0].body"),
        (json!([{"type": "reply", "canned_reply_id": 99999}]), "actions[0].canned_reply_id"),
        (json!([{"type": "assign", "assignee": "99999"}]), "actions[0].assignee"),
        (json!([{"type": "note", "body": "  "}]), "actions[0].body"),
    ] {
        app.post(&key, "/api/v1/macros", bad(actions)).await.field_error(field);
    }
    app.post(&key, "/api/v1/macros", bad(json!([{"type": "explode"}]))).await.error(422, "validation");
    app.post(&key, "/api/v1/macros", json!({"name": " ", "actions": [{"type": "close"}]})).await.field_error("name");
    // Another partner's labels and replies are not this partner's.
    let theirs = json!({"name": "Theirs", "actions": [{"type": "reply", "canned_reply_id": canned_id}]});
    app.post(&other, "/api/v1/macros", theirs).await.field_error("actions[0].canned_reply_id");

    // Applied by an agent: the reply goes signed by them, then the labels, the note, the assignee, closing.
    assert_eq!(agent.get("/api/v1/macros").await.ok(200)["data"][0]["name"], "Refund and close");
    let applied = agent.send(Method::POST, &format!("{}/macro", path(c)), json!({"macro_id": macro_id})).await;
    let conversation = applied.ok(200)["conversation"].clone();
    assert_eq!(applied.json["message"]["body"], "Refunded today.");
    assert_eq!(applied.json["message"]["author"]["member_id"], ana_id);
    assert_eq!(
        (&conversation["state"], &conversation["labels"], &conversation["assignee_id"]),
        (&json!("closed"), &json!(["billing"]), &json!(ana_id))
    );
    let notes = app.get(&key, &format!("{}/notes", path(c))).await.ok(200).clone();
    assert_eq!(notes["data"][0]["body"], "Refund sent by macro");
    let thread_ref = conversation["ref"].as_str().unwrap();
    let seen = app.get(&user, &format!("/api/v1/me/conversations/{thread_ref}")).await.ok(200).clone();
    let last = seen["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["body"].as_str(), last["sender_name"].as_str()), (Some("Refunded today."), Some("Ana")));

    // With the partner key, `me` is no one: refused before anything is done.
    let c2 = opens(&app, &user, "again").await;
    let by_key = app.post(&key, &format!("{}/macro", path(c2)), json!({"macro_id": macro_id})).await;
    by_key.field_error("macro_id");
    // A macro whose label went since is refused when applied, and nothing of it is done (no reply sent).
    let labels = app.get(&key, "/api/v1/labels").await.ok(200)["data"][0]["id"].as_i64().unwrap();
    app.request(Method::DELETE, &format!("/api/v1/labels/{labels}"), Some(&key), None).await;
    let stale = agent.send(Method::POST, &format!("{}/macro", path(c2)), json!({"macro_id": macro_id})).await;
    stale.field_error("macro_id");
    assert!(stale.json["error"]["message"].as_str().unwrap().contains("billing"), "{}", stale.json);
    let untouched = app.get(&key, &path(c2)).await.ok(200).clone();
    assert_eq!((untouched["state"].as_str(), untouched["messages"].as_array().unwrap().len()), (Some("open"), 1));
    // Unknown macros (or another partner's) are 422 on the field; another partner's conversation is 404.
    agent.send(Method::POST, &format!("{}/macro", path(c2)), json!({"macro_id": 99999})).await.field_error("macro_id");
    agent.send(Method::POST, &format!("{}/macro", path(c2)), json!({})).await.field_error("macro_id");
    app.post(&other, &format!("{}/macro", path(c2)), json!({"macro_id": macro_id})).await.error(404, "not_found");

    // Replaced as a whole (now valid again without the label), then applied by the key: it assigns to Ana.
    let mac = format!("/api/v1/macros/{macro_id}");
    let fixed = json!({"name": "Refund", "actions": [{"type": "reply", "body": "Done."}, {"type": "assign", "assignee": ana_id.to_string()}]});
    assert_eq!(admin.send(Method::PUT, &mac, fixed).await.ok(200)["name"], "Refund");
    let applied = app.post(&key, &format!("{}/macro", path(c2)), json!({"macro_id": macro_id})).await;
    assert_eq!(applied.ok(200)["conversation"]["assignee_id"], ana_id);
    assert_eq!(applied.json["conversation"]["state"], "pending");
    app.request(Method::PUT, &mac, Some(&other), Some(&json!({"name": "x", "actions": [{"type": "close"}]})))
        .await
        .error(404, "not_found");
    assert_eq!(admin.call(Method::DELETE, &mac, None, Some("same-origin")).await.status.as_u16(), 204);
    assert_eq!(app.get(&key, "/api/v1/macros").await.ok(200)["data"], json!([]));
}

#[tokio::test]
async fn round_robin_and_capacity_give_conversations_to_agents_online_and_an_agent_going_offline_hands_theirs_back() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let (_owner, _) = member(&app, &key, OWNER, "owner", "Olga Owner").await;
    let (ana, ana_id) = member(&app, &key, ANA, "agent", "Ana Lima").await;
    let (bo, bo_id) = member(&app, &key, BO, "agent", "Bo Chen").await;
    let (cy, cy_id) = member(&app, &key, CY, "agent", "Cy Park").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    let assignee = |c: i64| assignee_of(&app, &key, c);

    // Manual (the default): a new conversation waits in the queue.
    let settings = app.get(&key, "/api/v1/settings/assignment").await.ok(200).clone();
    assert_eq!((settings["mode"].as_str(), settings["default_capacity"].as_i64()), (Some("manual"), Some(10)));
    assert_eq!(settings["agents"][1]["status"], "offline");
    let waiting = opens(&app, &user, "anyone there?").await;
    assert!(assignee(waiting).await.is_null());

    // Bad settings are 422 on the field; agents may not change them.
    let put = |body: Value| put_assignment(&app, &key, body);
    put(json!({"mode": "round_robin", "default_capacity": 0})).await.field_error("default_capacity");
    put(json!({"mode": "sometimes"})).await.error(422, "validation");
    put(json!({})).await.field_error("mode");
    ana.send(Method::PUT, "/api/v1/settings/assignment", json!({"mode": "manual"})).await.error(403, "forbidden");
    ana.send(Method::PATCH, "/api/v1/members/me", json!({"status": "busy"})).await.error(422, "validation");
    ana.send(Method::PATCH, "/api/v1/members/me", json!({})).await.field_error("name");

    // Round robin among those online: Ana and Bo (Cy is away). Turning it on gives out the queue.
    assert_eq!(me(&ana, "online").await, "online");
    assert_eq!(me(&bo, "online").await, "online");
    assert_eq!(me(&cy, "away").await, "away");
    put(json!({"mode": "round_robin"})).await.ok(200);
    assert_eq!(assignee(waiting).await, ana_id);
    let mut given = Vec::new();
    for i in 0..4 {
        let c = opens(&app, &user, &format!("question {i}")).await;
        given.push(assignee(c).await.as_i64().unwrap());
    }
    assert_eq!(given, [bo_id, ana_id, bo_id, ana_id]);
    let team = app.get(&key, "/api/v1/settings/assignment").await.ok(200).clone();
    let load: Vec<(i64, i64)> = team["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["member_id"].as_i64().unwrap(), a["open_conversations"].as_i64().unwrap()))
        .collect();
    assert!(load.contains(&(ana_id, 3)) && load.contains(&(bo_id, 2)) && load.contains(&(cy_id, 0)), "{load:?}");

    // Bo goes offline: his conversations go back to the queue, and on to Ana, the one online (capacity 10).
    let bos = ids(app.get(&key, &format!("/api/v1/conversations?assigned={bo_id}")).await.ok(200));
    assert_eq!(bos.len(), 2);
    assert_eq!(me(&bo, "offline").await, "offline");
    for c in &bos {
        assert_eq!(assignee(*c).await, ana_id, "conversation {c}");
    }

    // Capacity: at most 5 for Ana (an owner sets it; 0 is refused), and by capacity the least busy first.
    let ana_member = format!("/api/v1/members/{ana_id}");
    app.request(Method::PATCH, &ana_member, Some(&key), Some(&json!({"capacity": 0}))).await.field_error("capacity");
    let capped = app.request(Method::PATCH, &ana_member, Some(&key), Some(&json!({"capacity": 5}))).await;
    assert_eq!(capped.ok(200)["capacity"], 5);
    put(json!({"mode": "capacity", "default_capacity": 3})).await.ok(200);
    assert_eq!(me(&cy, "online").await, "online");
    // Cy has none: the next three go to Cy (the least busy), then Cy is full (3) and Ana has 5: the queue.
    let mut next = Vec::new();
    for i in 0..4 {
        let c = opens(&app, &user, &format!("more {i}")).await;
        next.push((c, assignee(c).await));
    }
    let to: Vec<Value> = next.iter().map(|(_, a)| a.clone()).collect();
    assert_eq!(to, [json!(cy_id), json!(cy_id), json!(cy_id), Value::Null]);
    assert_eq!(app.get(&key, "/api/v1/settings/assignment").await.ok(200)["queued"], 1);
    // Closing one of Cy's frees a place: the queue is given out.
    cy.send(Method::PATCH, &path(next[0].0), json!({"state": "closed"})).await.ok(200);
    assert_eq!(assignee(next[3].0).await, cy_id);

    // A transfer with a note: the note names who it went to.
    let moved =
        ana.send(Method::PATCH, &path(waiting), json!({"assignee_id": cy_id, "note": "Cy knows this customer"})).await;
    assert_eq!(moved.ok(200)["assignee_id"], cy_id);
    let notes = app.get(&key, &format!("{}/notes", path(waiting))).await.ok(200).clone();
    assert_eq!(notes["data"][0]["body"], "Transferred to Cy Park: Cy knows this customer");
    assert_eq!(notes["data"][0]["member_id"], ana_id);
    ana.send(Method::PATCH, &path(waiting), json!({"note": "alone"})).await.field_error("note");

    // Signing out is going offline: Cy's four go back to the queue; Ana has room for one, the rest wait.
    assert_eq!(
        cy.call(Method::DELETE, "/api/v1/members/sessions/current", None, Some("same-origin")).await.status,
        204
    );
    // Only the one closed stays theirs.
    assert_eq!(ids(app.get(&key, &format!("/api/v1/conversations?assigned={cy_id}")).await.ok(200)), [next[0].0]);
    assert_eq!(app.get(&key, "/api/v1/settings/assignment").await.ok(200)["queued"], 3);
    // Back to manual: nothing more is given out.
    put(json!({"mode": "manual"})).await.ok(200);
    let c = opens(&app, &user, "by hand").await;
    assert!(assignee(c).await.is_null());
}

/// Milliseconds of a UTC time written `2026-12-07T08:00:00Z`.
fn at(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

#[tokio::test]
async fn outside_business_hours_a_person_gets_one_automatic_reply_per_closed_period_and_slas_count_business_time() {
    // Monday 2026-12-07, 09:00 in Berlin (UTC+1): the team is in.
    let clock = std::sync::Arc::new(hubbub_host::clock::ManualClock::new(at("2026-12-07T08:00:00Z")));
    let app = TestApp::start_on_clock(std::sync::Arc::new(crate::common::TestDb::new().await), clock, |_| {}).await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    let put = |path: &'static str, body: Value| {
        let (app, key) = (&app, key.clone());
        async move { app.request(Method::PUT, path, Some(&key), Some(&body)).await }
    };
    let day = json!([{"start": "09:00", "end": "12:00"}, {"start": "13:00", "end": "17:00"}]);
    let week = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day});
    let good = json!({"enabled": true, "time_zone": "Europe/Berlin", "hours": week, "holidays": ["2026-12-08"],
        "away_message": "Thanks for writing! We're away right now."});

    // Bad hours are 422 on the field; another partner's stay its own.
    let with = |change: Value| {
        let mut body = good.clone();
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let overlapping = json!({"mon": [{"start": "09:00", "end": "13:00"}, {"start": "12:00", "end": "17:00"}]});
    for (body, field) in [
        (with(json!({"hours": overlapping})), "hours.mon[1]"),
        (with(json!({"hours": {"tue": [{"start": "9am", "end": "17:00"}]}})), "hours.tue[0].start"),
        (with(json!({"hours": {"wed": [{"start": "17:00", "end": "09:00"}]}})), "hours.wed[0].end"),
        (with(json!({"time_zone": "Mars/Olympus"})), "time_zone"),
        (with(json!({"time_zone": null})), "time_zone"),
        (with(json!({"holidays": ["2026-02-30"]})), "holidays[0]"),
        (with(json!({"away_message": "x".repeat(1001)})), "away_message"),
    ] {
        put("/api/v1/settings/business-hours", body).await.field_error(field);
    }
    let kept = put("/api/v1/settings/business-hours", good.clone()).await;
    assert_eq!(
        (kept.ok(200)["open_now"].as_bool(), kept.json["next_open_at"].as_str()),
        (Some(true), Some("2026-12-07 08:00:00"))
    );
    assert_eq!(kept.json["hours"]["mon"], day);
    assert_eq!(kept.json["hours"]["sat"], json!([]));
    assert_eq!(app.get(&other, "/api/v1/settings/business-hours").await.ok(200)["enabled"], false);
    // SLA targets: 0 and more than 30 days are refused.
    put("/api/v1/settings/slas", json!({"first_response_s": 0})).await.field_error("first_response_s");
    put("/api/v1/settings/slas", json!({"next_response_s": 2_592_001})).await.field_error("next_response_s");
    put("/api/v1/settings/slas", json!({"first_response_s": 3600, "next_response_s": 1800})).await.ok(200);

    // In hours: no automatic reply; the first response is due an hour later.
    let a = opens(&app, &user, "Order 1 is late").await;
    let thread = app.get(&key, &path(a)).await.ok(200).clone();
    assert_eq!(thread["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        thread["sla"],
        json!({"kind": "first_response", "due_at": "2026-12-07 09:00:00", "breached": false, "breached_at": null})
    );
    let theirs = app.get(&user, "/api/v1/me/conversations").await.ok(200).to_string();
    assert!(!theirs.contains("\"sla\""), "the person never sees the SLA: {theirs}");

    // Past due: breached once, with its webhook; the list filters and sorts by it.
    app.clock.advance_ms(61 * 60_000);
    crate::common::eventually("the breach", || async { app.get(&key, &path(a)).await.json["sla"]["breached"] == true })
        .await;
    let events = || app.rows("outbox_events", "event = 'conversation.sla_breached'");
    assert_eq!(events().await, 1);
    let payload: String =
        sqlx::query_scalar("SELECT payload FROM outbox_events WHERE event = 'conversation.sla_breached'")
            .fetch_one(app.state.db.reader())
            .await
            .unwrap();
    let payload: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!((payload["conversation_id"].as_i64(), payload["sla"].as_str()), (Some(a), Some("first_response")));
    assert_eq!(payload["due_at"], "2026-12-07T09:00:00Z");
    let b = opens(&app, &user, "Where is my refund").await;
    assert_eq!(ids(app.get(&key, "/api/v1/conversations?sla=breached").await.ok(200)), [a]);
    assert_eq!(ids(app.get(&key, "/api/v1/conversations?sort=sla_due").await.ok(200)), [a, b]);
    assert_eq!(ids(app.get(&key, "/api/v1/conversations?sla=running").await.ok(200)), [b, a]);
    app.get(&key, "/api/v1/conversations?sla=late").await.error(422, "validation");
    app.get(&key, "/api/v1/conversations?sort=sla_due&cursor=c5").await.field_error("cursor");

    // An agent's reply meets it (the first response is noted); the person's next message starts the next.
    app.post(&key, &format!("{}/messages", path(a)), json!({"body": "On its way"})).await.ok(201);
    let answered = app.get(&key, &path(a)).await.ok(200).clone();
    assert!(answered["sla"].is_null());
    assert_eq!(answered["first_response_at"], "2026-12-07 09:01:00");
    app.post(
        &user,
        &format!("/api/v1/me/conversations/{}/messages", answered["ref"].as_str().unwrap()),
        json!({"body": "Thanks, when?"}),
    )
    .await
    .ok(201);
    assert_eq!(app.get(&key, &path(a)).await.ok(200)["sla"]["kind"], "next_response");
    assert_eq!(app.get(&key, &path(a)).await.json["sla"]["due_at"], "2026-12-07 09:31:00");
    assert_eq!(events().await, 1, "each SLA is breached once");
    // Closing stops it.
    app.request(Method::PATCH, &path(b), Some(&key), Some(&json!({"state": "closed"}))).await.ok(200);
    assert!(app.get(&key, &path(b)).await.ok(200)["sla"].is_null());

    // Lunch (12:30 in Berlin): the person's message gets the automatic reply, with when the team is back,
    // once for the closed period however often they write.
    app.clock.advance_ms(at("2026-12-07T11:30:00Z") - app.now());
    let reference = answered["ref"].as_str().unwrap().to_string();
    let write = |body: &'static str| {
        let (app, user, reference) = (&app, user.clone(), reference.clone());
        async move {
            let path = format!("/api/v1/me/conversations/{reference}/messages");
            app.post(&user, &path, json!({"body": body})).await.ok(201);
        }
    };
    write("Hello?").await;
    write("Anyone?").await;
    let automatic = |thread: &Value| -> Vec<String> {
        thread["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["direction"] == "out" && m["body"].as_str().unwrap().starts_with("Thanks for writing!"))
            .map(|m| m["body"].as_str().unwrap().to_string())
            .collect()
    };
    let seen = app.get(&user, &format!("/api/v1/me/conversations/{reference}")).await.ok(200).clone();
    assert_eq!(
        automatic(&seen),
        ["Thanks for writing! We're away right now.\n\nWe're back Monday 2026-12-07 at 13:00 (Europe/Berlin)."]
    );
    // It leaves the conversation waiting for the agents, with its SLA running.
    let waiting = app.get(&key, &path(a)).await.ok(200).clone();
    assert_eq!((waiting["state"].as_str(), waiting["sla"]["kind"].as_str()), (Some("open"), Some("next_response")));

    // Monday evening: a new closed period, and Tuesday is a holiday: back on Wednesday.
    app.clock.advance_ms(at("2026-12-07T17:00:00Z") - app.now());
    write("Still nothing").await;
    let seen = app.get(&user, &format!("/api/v1/me/conversations/{reference}")).await.ok(200).clone();
    assert_eq!(automatic(&seen).len(), 2);
    assert!(
        automatic(&seen)[1].ends_with("We're back Wednesday 2026-12-09 at 09:00 (Europe/Berlin)."),
        "{:?}",
        automatic(&seen)
    );
    // An SLA started out of hours counts from the next opening: an hour of business time from Monday 18:00
    // is Wednesday 10:00 in Berlin.
    let c = opens(&app, &user, "Out of hours").await;
    assert_eq!(app.get(&key, &path(c)).await.ok(200)["sla"]["due_at"], "2026-12-09 09:00:00");

    // Turned off: always in, no automatic reply.
    put("/api/v1/settings/business-hours", json!({"enabled": false})).await.ok(200);
    let d = opens(&app, &user, "Off").await;
    assert_eq!(app.get(&key, &path(d)).await.ok(200)["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_closed_conversation_asks_the_person_in_the_app_to_rate_it_once_and_the_agents_average_is_kept() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let (ana, ana_id) = member(&app, &key, ANA, "agent", "Ana Lima").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    let csat = |body: Value| {
        let (app, key) = (&app, key.clone());
        async move { app.request(Method::PUT, "/api/v1/settings/csat", Some(&key), Some(&body)).await }
    };
    csat(json!({"enabled": true, "question": "x".repeat(501)})).await.field_error("question");
    assert_eq!(app.get(&key, "/api/v1/settings/csat").await.ok(200)["enabled"], false);

    // Off (the default): closing asks nothing.
    let quiet = opens(&app, &user, "No survey").await;
    ana.send(Method::POST, &format!("{}/messages", path(quiet)), json!({"body": "Done"})).await.ok(201);
    ana.send(Method::PATCH, &path(quiet), json!({"state": "closed"})).await.ok(200);
    assert!(app.get(&key, &path(quiet)).await.ok(200)["rating"].is_null());

    // On: a conversation nobody answered is not asked about; one Ana answered and had is, once.
    csat(json!({"enabled": true, "question": "Rate us, 1 to 5?"})).await.ok(200);
    let unanswered = opens(&app, &user, "Never mind").await;
    ana.send(Method::PATCH, &path(unanswered), json!({"state": "closed"})).await.ok(200);
    assert!(app.get(&key, &path(unanswered)).await.ok(200)["rating"].is_null());
    let c = opens(&app, &user, "Where is my order?").await;
    ana.send(Method::PATCH, &path(c), json!({"assignee_id": ana_id})).await.ok(200);
    ana.send(Method::POST, &format!("{}/messages", path(c)), json!({"body": "Tomorrow"})).await.ok(201);
    let closed = ana.send(Method::PATCH, &path(c), json!({"state": "closed"})).await.ok(200).clone();
    assert!(closed["rating"]["asked_at"].is_string() && closed["rating"]["score"].is_null(), "{closed}");
    let reference = closed["ref"].as_str().unwrap().to_string();
    let mine = app.get(&user, &format!("/api/v1/me/conversations/{reference}")).await.ok(200).clone();
    let question = mine["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (question["body"].as_str(), question["rating"].clone()),
        (Some("Rate us, 1 to 5?"), json!({"min": 1, "max": 5}))
    );
    assert_eq!(mine["state"], "closed");

    // The person answers in the app: bad scores and comments are 422; once only; it stays closed.
    let rate = format!("/api/v1/me/conversations/{reference}/rating");
    for (body, field) in [
        (json!({"score": 0}), "score"),
        (json!({"score": 6}), "score"),
        (json!({}), "score"),
        (json!({"score": 4, "comment": "x".repeat(1001)}), "comment"),
    ] {
        app.post(&user, &rate, body).await.field_error(field);
    }
    let rated = app.post(&user, &rate, json!({"score": 4, "comment": "Quick answer"})).await.ok(200).clone();
    assert_eq!(
        (rated["rating"]["score"].as_i64(), rated["rating"]["comment"].as_str()),
        (Some(4), Some("Quick answer"))
    );
    assert_eq!(rated["state"], "closed");
    app.post(&user, &rate, json!({"score": 5})).await.field_error("score");
    let other = app.login("+15550300099").await;
    app.post(&other, &rate, json!({"score": 5})).await.error(404, "not_found");
    // Not asked: refused.
    let never = app.get(&user, "/api/v1/me/conversations").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["conversation_id"] == unanswered)
        .unwrap()["ref"]
        .as_str()
        .unwrap()
        .to_string();
    app.post(&user, &format!("/api/v1/me/conversations/{never}/rating"), json!({"score": 3}))
        .await
        .field_error("score");

    // The agents' averages.
    let team = app.get(&key, "/api/v1/settings/assignment").await.ok(200).clone();
    let ana_row = team["agents"].as_array().unwrap().iter().find(|a| a["member_id"] == ana_id).unwrap().clone();
    assert_eq!((ana_row["csat_average"].as_f64(), ana_row["csat_count"].as_i64()), (Some(4.0), Some(1)));
    // Written again (a minute on), it reopens, and closing asks again.
    app.clock.advance_ms(60_000);
    app.post(&user, &format!("/api/v1/me/conversations/{reference}/messages"), json!({"body": "One more thing"}))
        .await
        .ok(201);
    ana.send(Method::POST, &format!("{}/messages", path(c)), json!({"body": "Sure"})).await.ok(201);
    let again = ana.send(Method::PATCH, &path(c), json!({"state": "closed"})).await.ok(200).clone();
    assert!(again["rating"]["score"].is_null(), "asked anew: {again}");
}

#[tokio::test]
async fn analytics_count_conversations_by_day_and_agent_from_rollups_kept_as_things_happen() {
    // Monday 2026-12-07, 08:00 UTC.
    let clock = std::sync::Arc::new(hubbub_host::clock::ManualClock::new(at("2026-12-07T08:00:00Z")));
    let app = TestApp::start_on_clock(std::sync::Arc::new(crate::common::TestDb::new().await), clock, |_| {}).await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let (ana, ana_id) = member(&app, &key, ANA, "agent", "Ana Lima").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    app.request(Method::PUT, "/api/v1/settings/csat", Some(&key), Some(&json!({"enabled": true}))).await.ok(200);
    app.request(Method::PUT, "/api/v1/settings/slas", Some(&key), Some(&json!({"first_response_s": 60}))).await.ok(200);

    // Monday: two conversations; Ana answers the first after 10 minutes and closes it after 30, the person
    // rates it 5; the second waits past its SLA.
    let a = opens(&app, &user, "First").await;
    let b = opens(&app, &user, "Second").await;
    ana.send(Method::PATCH, &path(a), json!({"assignee_id": ana_id})).await.ok(200);
    app.clock.advance_ms(10 * 60_000);
    ana.send(Method::POST, &format!("{}/messages", path(a)), json!({"body": "Hi"})).await.ok(201);
    crate::common::eventually("the breach", || async { app.get(&key, &path(b)).await.json["sla"]["breached"] == true })
        .await;
    app.clock.advance_ms(20 * 60_000);
    let closed = ana.send(Method::PATCH, &path(a), json!({"state": "closed"})).await.ok(200).clone();
    // Closing it again counts nothing more.
    ana.send(Method::PATCH, &path(a), json!({"state": "closed"})).await.ok(200);
    let reference = closed["ref"].as_str().unwrap();
    app.post(&user, &format!("/api/v1/me/conversations/{reference}/rating"), json!({"score": 5})).await.ok(200);
    // Tuesday: a third, answered with the key after 2 minutes.
    app.clock.advance_ms(at("2026-12-08T09:00:00Z") - app.now());
    let c = opens(&app, &user, "Third").await;
    app.clock.advance_ms(2 * 60_000);
    app.post(&key, &format!("{}/messages", path(c)), json!({"body": "Hello"})).await.ok(201);

    let report = app.get(&key, "/api/v1/analytics/conversations?from=2026-12-06&to=2026-12-08").await.ok(200).clone();
    assert_eq!(
        (report["from"].as_str(), report["to"].as_str(), report["interval"].as_str()),
        (Some("2026-12-06"), Some("2026-12-08"), Some("day"))
    );
    let days: Vec<(String, i64, i64)> = report["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (d["at"].as_str().unwrap().to_string(), d["opened"].as_i64().unwrap(), d["resolved"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(
        days,
        [
            ("2026-12-06 00:00:00".to_string(), 0, 0),
            ("2026-12-07 00:00:00".to_string(), 2, 1),
            ("2026-12-08 00:00:00".to_string(), 1, 0)
        ]
    );
    let totals = &report["totals"];
    assert_eq!(
        totals,
        &json!({"opened": 3, "resolved": 1, "first_responses": 2, "avg_first_response_s": 360.0,
            "avg_resolution_s": 1800.0, "sla_breaches": 1, "ratings": 1, "csat_average": 5.0})
    );
    let agents = report["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{agents:?}");
    assert_eq!((agents[0]["member_id"].as_i64(), agents[0]["name"].as_str()), (Some(ana_id), Some("Ana Lima")));
    assert_eq!(
        (agents[0]["first_responses"].as_i64(), agents[0]["avg_first_response_s"].as_f64()),
        (Some(1), Some(600.0))
    );
    assert_eq!((agents[0]["resolved"].as_i64(), agents[0]["csat_average"].as_f64()), (Some(1), Some(5.0)));
    // By the hour: Monday 08:00 has the two opened.
    let hourly = app.get(&key, "/api/v1/analytics/conversations?from=2026-12-07&to=2026-12-07&interval=hour").await;
    let hours = hourly.ok(200)["series"].as_array().unwrap().clone();
    assert_eq!(hours.len(), 24);
    assert_eq!((hours[8]["at"].as_str(), hours[8]["opened"].as_i64()), (Some("2026-12-07 08:00:00"), Some(2)));
    // Another partner's figures are its own.
    assert_eq!(
        app.get(&other, "/api/v1/analytics/conversations?from=2026-12-06&to=2026-12-08").await.ok(200)["totals"]["opened"],
        0
    );

    // Bad ranges are 422 on the field.
    for (query, field) in [
        ("from=2025-12-01&to=2026-12-07", "to"),
        ("from=2026-12-08&to=2026-12-07", "from"),
        ("from=2026-10-01&to=2026-12-07&interval=hour", "interval"),
        ("from=2026-02-30", "from"),
        ("interval=week", "interval"),
    ] {
        app.get(&key, &format!("/api/v1/analytics/conversations?{query}")).await.field_error(field);
    }
}
