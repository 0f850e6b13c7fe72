//! The people of a partner: invitations, sign-in by phone and code into a session cookie, roles, the CSRF
//! check, sign out (everywhere), and the audit log.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::hubbub;
use crate::common::{Resp, TestApp};

const OWNER: &str = "+15550100001";
const AGENT: &str = "+15550100002";
const ADMIN: &str = "+15550100003";

/// A browser's member session: its cookie, sent the way a page of the host's origin sends it.
pub(crate) struct Browser<'a> {
    pub(crate) app: &'a TestApp,
    pub(crate) cookie: String,
}

impl Browser<'_> {
    pub(crate) async fn call(&self, method: Method, path: &str, body: Option<Value>, site: Option<&str>) -> Resp {
        let mut r = self.app.client.request(method, format!("{}{path}", self.app.base)).header("cookie", &self.cookie);
        if let Some(site) = site {
            r = r.header("sec-fetch-site", site);
        }
        if let Some(body) = body {
            r = r.json(&body);
        }
        Resp::from(r.send().await.unwrap()).await
    }

    pub(crate) async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None, Some("same-origin")).await
    }

    pub(crate) async fn send(&self, method: Method, path: &str, body: Value) -> Resp {
        self.call(method, path, Some(body), Some("same-origin")).await
    }
}

/// Signs `phone` in (with `invitation` when given): the answer and, on success, the browser.
pub(crate) async fn sign_in<'a>(app: &'a TestApp, phone: &str, extra: Value) -> (Resp, Option<Browser<'a>>) {
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": phone}))).await.ok(202);
    let code = app.last_code(phone).await;
    let mut body = json!({"phone": phone, "code": code});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = app.client.post(format!("{}/api/v1/members/sessions", app.base)).json(&body).send().await.unwrap();
    let set_cookie = r.headers().get("set-cookie").map(|v| v.to_str().unwrap().to_string());
    let resp = Resp::from(r).await;
    let browser = set_cookie.map(|c| Browser { app, cookie: c.split(';').next().unwrap().to_string() });
    (resp, browser)
}

pub(crate) async fn invitation(app: &TestApp, key: &str, role: &str) -> String {
    app.post(key, "/api/v1/members/invitations", json!({"role": role})).await.ok(201)["invitation"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn an_owner_joins_by_invitation_invites_an_agent_and_each_role_reaches_only_its_own() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let owner_invite = invitation(&app, &key, "owner").await;

    // A malformed invitation, and a phone that is no member, are refused before any session exists.
    let (r, none) = sign_in(&app, OWNER, json!({"invitation": "inv_short"})).await;
    r.field_error("invitation");
    assert!(none.is_none());
    let (r, none) = sign_in(&app, OWNER, json!({})).await;
    r.error(403, "forbidden");
    assert!(none.is_none());

    // The owner signs in with the invitation: an HttpOnly, SameSite=Strict cookie (not Secure: this is dev
    // mode on http://127.0.0.1; see the CSRF test for an https host).
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": OWNER}))).await.ok(202);
    let code = app.last_code(OWNER).await;
    let r = app
        .client
        .post(format!("{}/api/v1/members/sessions", app.base))
        .json(&json!({"phone": OWNER, "code": code, "invitation": owner_invite}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let set_cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=604800"] {
        assert!(set_cookie.contains(attribute), "{attribute} in {set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "{set_cookie}");
    let owner = Browser { app: &app, cookie: set_cookie.split(';').next().unwrap().to_string() };
    let me = owner.get("/api/v1/members/me").await.ok(200).clone();
    assert_eq!(me["member"]["role"], "owner");
    assert_eq!(me["partner"]["code"], "acme");
    assert_eq!(me["idle_minutes"], 480);

    // The invitation worked once.
    let (r, _) = sign_in(&app, "+15550100009", json!({"invitation": owner_invite})).await;
    r.error(401, "unauthorized");

    // The owner invites an agent and an admin from the browser.
    let agent_invite = owner.send(Method::POST, "/api/v1/members/invitations", json!({"role": "agent"})).await;
    let agent_invite = agent_invite.ok(201)["invitation"].as_str().unwrap().to_string();
    let (r, agent) = sign_in(&app, AGENT, json!({"invitation": agent_invite})).await;
    assert_eq!(r.ok(201)["member"]["role"], "agent");
    let agent = agent.unwrap();
    let admin_invite = owner.send(Method::POST, "/api/v1/members/invitations", json!({"role": "admin"})).await;
    let (_, admin) =
        sign_in(&app, ADMIN, json!({"invitation": admin_invite.ok(201)["invitation"].as_str().unwrap()})).await;
    let admin = admin.unwrap();

    // The agent: conversations and contacts; not webhooks, bots, keys, members or the audit log.
    let globex = app.partner("globex").await;
    let user = app.login("+15550100050").await;
    for partner in [&key, &globex] {
        app.post(partner, "/api/v1/accounts/link", json!({"phone": "+15550100050"})).await.ok(200);
    }
    let conv = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "help"})).await;
    let conv_id = conv.ok(201)["conversation_id"].as_i64().unwrap();
    agent.get("/api/v1/conversations").await.ok(200);
    agent.get(&format!("/api/v1/conversations/{conv_id}")).await.ok(200);
    agent
        .send(Method::POST, &format!("/api/v1/conversations/{conv_id}/messages"), json!({"body": "On it"}))
        .await
        .ok(201);
    agent.get("/api/v1/accounts/+15550100050").await.ok(200);
    agent.get("/api/v1/messages").await.ok(200);
    agent.get("/api/v1/members").await.ok(200); // whom to assign a conversation to
    for path in [
        "/api/v1/templates",
        "/api/v1/api-keys",
        "/api/v1/audit-log",
        "/api/v1/webhooks/deliveries",
        "/api/v1/exports/messages",
    ] {
        agent.get(path).await.error(403, "forbidden");
    }
    agent
        .send(Method::PUT, "/api/v1/settings/webhook", json!({"webhook_url": "https://a.example/h"}))
        .await
        .error(403, "forbidden");
    agent
        .send(Method::POST, "/api/v1/messages", json!({"phone": "+15550100050", "body": "x"}))
        .await
        .error(403, "forbidden");
    agent.send(Method::POST, "/api/v1/members/invitations", json!({"role": "owner"})).await.error(403, "forbidden");
    agent.send(Method::DELETE, "/api/v1/accounts/+15550100050", json!({})).await.error(403, "forbidden");

    // The admin: everything but members and the audit log.
    admin.send(Method::PUT, "/api/v1/settings/webhook", json!({"webhook_url": "https://a.example/h"})).await.ok(200);
    admin.get("/api/v1/api-keys").await.ok(200);
    admin.send(Method::POST, "/api/v1/members/invitations", json!({"role": "agent"})).await.error(403, "forbidden");
    admin.get("/api/v1/audit-log").await.error(403, "forbidden");

    // A member of acme finds nothing of globex's.
    let theirs = app.post(&user, "/api/v1/me/conversations", json!({"partner": "globex", "body": "hi"})).await;
    let theirs = theirs.ok(201)["conversation_id"].as_i64().unwrap();
    app.get(&globex, &format!("/api/v1/conversations/{theirs}")).await.ok(200);
    agent.get(&format!("/api/v1/conversations/{theirs}")).await.error(404, "not_found");
    owner.get(&format!("/api/v1/conversations/{theirs}")).await.error(404, "not_found");

    // A member's session cannot call /me or /dev routes; a bearer credential cannot call a member's own routes.
    agent.get("/api/v1/me/messages").await.error(403, "forbidden");
    app.get(&key, "/api/v1/members/me").await.error(403, "forbidden");

    let members = app.get(&key, "/api/v1/members").await.ok(200).clone();
    let roles: Vec<&str> = members["data"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["owner", "agent", "admin"]);
}

#[tokio::test]
async fn a_cross_site_request_with_the_cookie_changes_nothing() {
    let app = TestApp::start_with(|c| c.public_url = "https://hub.example".into()).await;
    let key = app.partner("acme").await;
    let (r, owner) = sign_in(&app, OWNER, json!({"invitation": invitation(&app, &key, "owner").await})).await;
    assert!(r.headers["set-cookie"].to_str().unwrap().ends_with("; Secure"), "an https host's cookie is Secure");
    let owner = owner.unwrap();
    let invite = json!({"role": "agent"});
    // Another site, no proof at all, or an Origin that is not the host's: 403, and nothing is made.
    for (site, origin) in
        [(Some("cross-site"), None), (Some("same-site"), None), (None, None), (None, Some("https://evil.example"))]
    {
        let mut r = app
            .client
            .post(format!("{}/api/v1/members/invitations", app.base))
            .header("cookie", &owner.cookie)
            .json(&invite);
        if let Some(site) = site {
            r = r.header("sec-fetch-site", site);
        }
        if let Some(origin) = origin {
            r = r.header("origin", origin);
        }
        let r = Resp::from(r.send().await.unwrap()).await;
        r.error(403, "forbidden");
        assert!(r.json["error"]["message"].as_str().unwrap().contains("CSRF"), "{site:?} {origin:?}");
    }
    // Reads pass (a cross-site page cannot read the answer); the host's own origin passes.
    owner.call(Method::GET, "/api/v1/members/me", None, Some("cross-site")).await.ok(200);
    let r = app
        .client
        .post(format!("{}/api/v1/members/invitations", app.base))
        .header("cookie", &owner.cookie)
        .header("origin", "https://hub.example")
        .json(&invite)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    owner.send(Method::POST, "/api/v1/members/invitations", invite).await.ok(201);
    // Only the two accepted calls made invitations.
    let made: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM member_invitations").fetch_one(app.state.db.reader()).await.unwrap();
    assert_eq!(made, 3);
}

#[tokio::test]
async fn the_audit_log_says_who_changed_what_when_and_from_where() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let (_, owner) = sign_in(&app, OWNER, json!({"invitation": invitation(&app, &key, "owner").await})).await;
    let owner = owner.unwrap();
    let before = app.now();
    owner.send(Method::PUT, "/api/v1/settings/webhook", json!({"webhook_url": "https://a.example/h"})).await.ok(200);
    owner.send(Method::POST, "/api/v1/api-keys", json!({"name": ""})).await.field_error("name");
    owner.get("/api/v1/api-keys").await.ok(200);
    // What a partner key changes is logged too, naming the key (made on the command line: no member).
    app.post(&key, "/api/v1/api-keys", json!({"name": "deploy"})).await.ok(201);

    let log = owner.get("/api/v1/audit-log").await.ok(200).clone();
    let all = log["data"].as_array().unwrap();
    let (entries, by_key): (Vec<&Value>, Vec<&Value>) = all.iter().partition(|e| e["key_id"].is_null());
    let actions: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["POST /api/v1/api-keys", "PUT /api/v1/settings/webhook"], "reads are not logged");
    let keyed: Vec<(&str, i64)> =
        by_key.iter().map(|e| (e["action"].as_str().unwrap(), e["status"].as_i64().unwrap())).collect();
    assert_eq!(keyed, [("POST /api/v1/api-keys", 201), ("POST /api/v1/members/invitations", 201)]);
    assert!(by_key.iter().all(|e| e["member_id"].is_null()), "the command line's key is no member's");
    assert_eq!(entries[0]["status"], 422, "a refused change is logged with its answer");
    assert_eq!(entries[1]["status"], 200);
    assert_eq!(entries[1]["target"], "/api/v1/settings/webhook");
    assert_eq!(entries[1]["phone"], OWNER);
    assert_eq!(entries[1]["address"], "127.0.0.1");
    assert!(entries[1]["at"].as_str().unwrap() >= hubbub_host::clock::record_time(before).as_str());
    // The partner key reads it too; paging works.
    let page = app.get(&key, "/api/v1/audit-log?limit=1").await.ok(200).clone();
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    let cursor = page["next_cursor"].as_str().unwrap();
    let next = app.get(&key, &format!("/api/v1/audit-log?limit=1&cursor={cursor}")).await.ok(200).clone();
    assert_eq!(next["data"][0]["action"], "POST /api/v1/api-keys");
}

#[tokio::test]
async fn sessions_end_on_sign_out_everywhere_when_idle_and_when_the_member_is_removed() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let (_, first) = sign_in(&app, OWNER, json!({"invitation": invitation(&app, &key, "owner").await})).await;
    let first = first.unwrap();
    let (r, second) = sign_in(&app, OWNER, json!({})).await;
    r.ok(201);
    let second = second.unwrap();
    first.get("/api/v1/members/me").await.ok(200);
    second.get("/api/v1/members/me").await.ok(200);

    // Sign out: this browser only; the cookie is cleared.
    let r = second.call(Method::DELETE, "/api/v1/members/sessions/current", None, Some("same-origin")).await;
    assert_eq!(r.status.as_u16(), 204);
    second.get("/api/v1/members/me").await.error(401, "unauthorized");
    first.get("/api/v1/members/me").await.ok(200);

    // Sign out everywhere ends the others too.
    let (_, third) = sign_in(&app, OWNER, json!({})).await;
    let third = third.unwrap();
    let r = third.call(Method::DELETE, "/api/v1/members/sessions", None, Some("same-origin")).await;
    assert_eq!(r.status.as_u16(), 204);
    first.get("/api/v1/members/me").await.error(401, "unauthorized");
    third.get("/api/v1/members/me").await.error(401, "unauthorized");

    // Idle for 8 hours: the session ends; activity within them keeps it.
    let (_, idle) = sign_in(&app, OWNER, json!({})).await;
    let idle = idle.unwrap();
    app.clock.advance_ms(7 * 3600 * 1000);
    idle.get("/api/v1/members/me").await.ok(200);
    app.clock.advance_ms(7 * 3600 * 1000);
    idle.get("/api/v1/members/me").await.ok(200);
    app.clock.advance_ms(8 * 3600 * 1000 + 1);
    idle.get("/api/v1/members/me").await.error(401, "unauthorized");

    // Busy for 7 days: the session still ends, 7 days after sign-in, whatever its activity.
    let (_, busy) = sign_in(&app, OWNER, json!({})).await;
    let busy = busy.unwrap();
    for _ in 0..(7 * 24 / 6) - 1 {
        app.clock.advance_ms(6 * 3600 * 1000);
        busy.get("/api/v1/members/me").await.ok(200);
    }
    app.clock.advance_ms(6 * 3600 * 1000);
    busy.get("/api/v1/members/me").await.error(401, "unauthorized");

    // The last owner can be neither demoted nor removed; a removed agent's session ends at once.
    let (_, owner) = sign_in(&app, OWNER, json!({})).await;
    let owner = owner.unwrap();
    let owner_id = owner.get("/api/v1/members/me").await.ok(200)["member"]["id"].as_i64().unwrap();
    app.request(Method::PATCH, &format!("/api/v1/members/{owner_id}"), Some(&key), Some(&json!({"role": "agent"})))
        .await
        .error(409, "conflict");
    app.request(Method::DELETE, &format!("/api/v1/members/{owner_id}"), Some(&key), None).await.error(409, "conflict");
    let (_, agent) = sign_in(&app, AGENT, json!({"invitation": invitation(&app, &key, "agent").await})).await;
    let agent = agent.unwrap();
    let agent_id = agent.get("/api/v1/members/me").await.ok(200)["member"]["id"].as_i64().unwrap();
    let renamed = owner.send(Method::PATCH, &format!("/api/v1/members/{agent_id}"), json!({"name": "Ana"})).await;
    assert_eq!(renamed.ok(200)["name"], "Ana");
    // The agent's console publishes its browser's agent device; the partner key publishes one of its own.
    let device = |uuid: &str, byte: u8| json!({"device_uuid": uuid, "identity_key_pub": URL_SAFE_NO_PAD.encode([byte; 32]), "platform": "web"});
    agent.send(Method::POST, "/api/v1/agent/devices/keys", device("agent-web-ana", 7)).await.ok(201);
    app.post(&key, "/api/v1/agent/devices/keys", device("agent-desk", 9)).await.ok(201);
    app.post(&key, "/api/v1/accounts/link", json!({"phone": "+15557770001"})).await.ok(200);
    let agent_devices = || async {
        let r = app.get(&key, "/api/v1/keys/%2B15557770001").await;
        let list = r.ok(200)["agent_devices"].as_array().unwrap().clone();
        list.iter().map(|d| d["device_uuid"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(agent_devices().await, ["agent-web-ana", "agent-desk"]);
    owner.call(Method::DELETE, &format!("/api/v1/members/{agent_id}"), None, Some("same-origin")).await.ok(200);
    agent.get("/api/v1/members/me").await.error(401, "unauthorized");
    // Removed, the agent's browsers are no longer agent devices: no content key is wrapped to them again.
    assert_eq!(agent_devices().await, ["agent-desk"]);
    let other = app.partner("globex").await;
    app.request(Method::DELETE, &format!("/api/v1/members/{owner_id}"), Some(&other), None)
        .await
        .error(404, "not_found");
}

#[tokio::test]
async fn a_phone_that_is_a_member_of_two_partners_names_one() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    sign_in(&app, OWNER, json!({"invitation": invitation(&app, &acme, "owner").await})).await.0.ok(201);
    sign_in(&app, OWNER, json!({"invitation": invitation(&app, &globex, "agent").await})).await.0.ok(201);
    let (r, _) = sign_in(&app, OWNER, json!({})).await;
    assert_eq!(r.error(422, "validation").as_deref(), Some("partner"));
    assert!(r.json["error"]["message"].as_str().unwrap().contains("acme, globex"));
    let (r, browser) = sign_in(&app, OWNER, json!({"partner": "globex"})).await;
    assert_eq!(r.ok(201)["member"]["role"], "agent");
    assert_eq!(browser.unwrap().get("/api/v1/members/me").await.ok(200)["partner"]["code"], "globex");
    sign_in(&app, OWNER, json!({"partner": "initech"})).await.0.error(403, "forbidden");
}

#[tokio::test]
async fn partner_create_prints_the_first_owners_invitation() {
    let app = TestApp::start().await;
    let out = hubbub(&app.db.url, &["partner", "create", "--code", "initech", "--name", "Initech"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    let invitation = created["owner_invitation"].as_str().unwrap();
    assert!(invitation.starts_with("inv_"));
    let (r, _) = sign_in(&app, OWNER, json!({"invitation": invitation})).await;
    assert_eq!(r.ok(201)["member"]["role"], "owner");
    let out = hubbub(&app.db.url, &["partner", "invite", "--code", "initech", "--role", "agent"]);
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (r, _) = sign_in(&app, AGENT, json!({"invitation": made["invitation"]})).await;
    assert_eq!(r.ok(201)["partner"]["code"], "initech");
    assert!(!hubbub(&app.db.url, &["partner", "invite", "--code", "initech", "--role", "boss"]).status.success());
}

#[tokio::test]
async fn agents_assign_conversations_and_keep_notes_the_user_never_sees() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let (_, ana) = sign_in(&app, AGENT, json!({"invitation": invitation(&app, &key, "agent").await})).await;
    let ana = ana.unwrap();
    let (_, bo) = sign_in(&app, ADMIN, json!({"invitation": invitation(&app, &key, "agent").await})).await;
    let bo = bo.unwrap();
    let ana_id = ana.get("/api/v1/members/me").await.ok(200)["member"]["id"].as_i64().unwrap();
    let bo_id = bo.get("/api/v1/members/me").await.ok(200)["member"]["id"].as_i64().unwrap();
    const USER: &str = "+15550100060";
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    let mut ids = Vec::new();
    for body in ["first", "second", "third"] {
        let c = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": body})).await;
        ids.push(c.ok(201)["conversation_id"].as_i64().unwrap());
    }
    let listed = |r: &Value| -> Vec<i64> {
        r["data"].as_array().unwrap().iter().map(|c| c["conversation_id"].as_i64().unwrap()).collect()
    };
    assert_eq!(listed(ana.get("/api/v1/conversations?assigned=none").await.ok(200)), [ids[2], ids[1], ids[0]]);

    // Ana takes the first, and gives the second to Bo.
    let path = |id: i64| format!("/api/v1/conversations/{id}");
    let mine = ana.send(Method::PATCH, &path(ids[0]), json!({"assignee_id": ana_id})).await;
    assert_eq!(mine.ok(200)["assignee_id"], ana_id);
    ana.send(Method::PATCH, &path(ids[1]), json!({"assignee_id": bo_id})).await.ok(200);
    assert_eq!(listed(ana.get("/api/v1/conversations?assigned=me").await.ok(200)), [ids[0]]);
    assert_eq!(listed(bo.get("/api/v1/conversations?assigned=me").await.ok(200)), [ids[1]]);
    assert_eq!(listed(bo.get("/api/v1/conversations?assigned=none").await.ok(200)), [ids[2]]);
    assert_eq!(listed(app.get(&key, &format!("/api/v1/conversations?assigned={bo_id}")).await.ok(200)), [ids[1]]);
    assert_eq!(listed(ana.get("/api/v1/conversations").await.ok(200)).len(), 3);
    // With the key, `me` is nobody: nothing is assigned to a key.
    assert!(listed(app.get(&key, "/api/v1/conversations?assigned=me").await.ok(200)).is_empty());
    assert_eq!(
        app.get(&key, "/api/v1/conversations?assigned=x").await.error(422, "validation").as_deref(),
        Some("assigned")
    );
    // Unassign; a stranger (another partner's member, or no one) cannot be the assignee.
    let back = ana.send(Method::PATCH, &path(ids[1]), json!({"assignee_id": null})).await;
    assert!(back.ok(200)["assignee_id"].is_null());
    ana.send(Method::PATCH, &path(ids[1]), json!({"assignee_id": 99999})).await.field_error("assignee_id");
    ana.send(Method::PATCH, &path(ids[1]), json!({})).await.field_error("state");
    // Assign and close in one change.
    let closed = ana.send(Method::PATCH, &path(ids[2]), json!({"assignee_id": bo_id, "state": "closed"})).await;
    assert_eq!(closed.ok(200)["state"], "closed");
    assert_eq!(closed.json["assignee_id"], bo_id);

    // A note: the agents see it with its author; the user sees neither it nor the assignee.
    let note =
        ana.send(Method::POST, &format!("{}/notes", path(ids[0])), json!({"body": "VIP: refund approved"})).await;
    assert_eq!(note.ok(201)["phone"], AGENT);
    ana.send(Method::POST, &format!("{}/notes", path(ids[0])), json!({"body": "  "})).await.field_error("body");
    let notes = bo.get(&format!("{}/notes", path(ids[0]))).await.ok(200).clone();
    assert_eq!(notes["data"][0]["body"], "VIP: refund approved");
    assert_eq!(notes["data"][0]["member_id"], ana_id);
    let theirs = app.get(&user, "/api/v1/me/conversations").await.ok(200).clone();
    assert!(!theirs.to_string().contains("VIP") && !theirs.to_string().contains("assignee"), "{theirs}");
    let thread_ref =
        theirs["data"].as_array().unwrap().iter().find(|c| c["conversation_id"] == ids[0]).unwrap()["ref"].clone();
    let thread =
        app.get(&user, &format!("/api/v1/me/conversations/{}", thread_ref.as_str().unwrap())).await.ok(200).clone();
    assert!(!thread.to_string().contains("VIP") && !thread.to_string().contains("assignee"), "{thread}");
    let other = app.partner("globex").await;
    app.get(&other, &format!("{}/notes", path(ids[0]))).await.error(404, "not_found");

    // A removed member's assignments and notes stay, without the link.
    app.request(Method::DELETE, &format!("/api/v1/members/{ana_id}"), Some(&key), None).await.ok(200);
    assert!(app.get(&key, &path(ids[0])).await.ok(200)["assignee_id"].is_null());
    assert!(app.get(&key, &format!("{}/notes", path(ids[0]))).await.ok(200)["data"][0]["member_id"].is_null());
}

#[tokio::test]
async fn canned_replies_are_kept_per_partner_by_admins_and_picked_by_agents() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let other = app.partner("globex").await;
    let (_, agent) = sign_in(&app, AGENT, json!({"invitation": invitation(&app, &key, "agent").await})).await;
    let agent = agent.unwrap();
    let (_, admin) = sign_in(&app, ADMIN, json!({"invitation": invitation(&app, &key, "admin").await})).await;
    let admin = admin.unwrap();

    let refund = json!({"shortcut": "refund", "body": "Your refund is on its way.\nIt takes 3 days."});
    let made = admin.send(Method::POST, "/api/v1/canned-replies", refund.clone()).await;
    let id = made.ok(201)["id"].as_i64().unwrap();
    assert_eq!(made.json["body"], "Your refund is on its way.\nIt takes 3 days.");
    app.post(&key, "/api/v1/canned-replies", json!({"shortcut": "hours", "body": "9 to 5"})).await.ok(201);
    // The shortcut is the partner's own: taken here (409), free at another partner.
    admin.send(Method::POST, "/api/v1/canned-replies", refund.clone()).await.error(409, "conflict");
    app.post(&other, "/api/v1/canned-replies", refund.clone()).await.ok(201);
    for bad in ["", "Refund", "two words", &"x".repeat(33)] {
        app.post(&key, "/api/v1/canned-replies", json!({"shortcut": bad, "body": "x"})).await.field_error("shortcut");
    }
    app.post(&key, "/api/v1/canned-replies", json!({"shortcut": "blank", "body": "  "})).await.field_error("body");
    let long = "x".repeat(4097);
    app.post(&key, "/api/v1/canned-replies", json!({"shortcut": "long", "body": long})).await.field_error("body");

    // An agent reads them, by shortcut, and cannot change them.
    let listed = agent.get("/api/v1/canned-replies").await.ok(200).clone();
    let shortcuts: Vec<&str> =
        listed["data"].as_array().unwrap().iter().map(|r| r["shortcut"].as_str().unwrap()).collect();
    assert_eq!(shortcuts, ["hours", "refund"]);
    agent
        .send(Method::POST, "/api/v1/canned-replies", json!({"shortcut": "mine", "body": "x"}))
        .await
        .error(403, "forbidden");
    let path = format!("/api/v1/canned-replies/{id}");
    agent.send(Method::PUT, &path, json!({"shortcut": "refund", "body": "changed"})).await.error(403, "forbidden");

    // Replaced as a whole; another partner's is not found; deleted once.
    let put = admin.send(Method::PUT, &path, json!({"shortcut": "refund-sent", "body": "Refunded."})).await;
    assert_eq!(put.ok(200)["shortcut"], "refund-sent");
    admin.send(Method::PUT, &path, json!({"shortcut": "hours", "body": "x"})).await.error(409, "conflict");
    app.request(Method::PUT, &path, Some(&other), Some(&json!({"shortcut": "a", "body": "b"})))
        .await
        .error(404, "not_found");
    app.request(Method::DELETE, &path, Some(&other), None).await.error(404, "not_found");
    let gone = admin.call(Method::DELETE, &path, None, Some("same-origin")).await;
    assert_eq!(gone.status.as_u16(), 204);
    admin.call(Method::DELETE, &path, None, Some("same-origin")).await.error(404, "not_found");
    assert_eq!(app.get(&key, "/api/v1/canned-replies").await.ok(200)["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn members_are_known_by_name_and_the_person_sees_an_agents_first_name_and_the_partners_name() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    // A name given with an invitation is the new member's; a bad one is refused before the code is used.
    let long = "x".repeat(101);
    let (r, none) =
        sign_in(&app, AGENT, json!({"invitation": invitation(&app, &key, "agent").await, "name": long})).await;
    r.field_error("name");
    assert!(none.is_none());
    let (r, none) = sign_in(&app, AGENT, json!({"name": "Ana Lima"})).await;
    r.error(403, "forbidden"); // no member yet: a name names no one
    assert!(none.is_none());
    let (r, ana) =
        sign_in(&app, AGENT, json!({"invitation": invitation(&app, &key, "agent").await, "name": " Ana Lima "})).await;
    assert_eq!(r.ok(201)["member"]["name"], "Ana Lima");
    let ana = ana.unwrap();
    let ana_id = r.json["member"]["id"].as_i64().unwrap();
    // A member without a name gives themself one; bad names are 422 with the field.
    let (_, bo) = sign_in(&app, ADMIN, json!({"invitation": invitation(&app, &key, "agent").await})).await;
    let bo = bo.unwrap();
    assert!(bo.get("/api/v1/members/me").await.ok(200)["member"]["name"].is_null());
    for bad in [json!({}), json!({"name": "  "}), json!({"name": long}), json!({"name": "Bo\u{7}"})] {
        bo.send(Method::PATCH, "/api/v1/members/me", bad).await.field_error("name");
    }
    let me = bo.send(Method::PATCH, "/api/v1/members/me", json!({"name": "Bo"})).await;
    assert_eq!(me.ok(200)["member"]["name"], "Bo");
    // A name given at a later sign-in replaces theirs; a bad one is refused there too.
    let (r, _) = sign_in(&app, ADMIN, json!({"name": long})).await;
    r.field_error("name");
    let (r, _) = sign_in(&app, ADMIN, json!({"name": "Bo Berg"})).await;
    assert_eq!(r.ok(201)["member"]["name"], "Bo Berg");
    assert_eq!(app.get(&key, "/api/v1/members").await.ok(200)["data"].to_string().matches("\"Bo Berg\"").count(), 1);
    // A key is no member: it has no name of its own to change.
    app.request(Method::PATCH, "/api/v1/members/me", Some(&key), Some(&json!({"name": "Key"})))
        .await
        .error(403, "forbidden");

    // The person writes; Ana answers from her session, then the partner's key answers.
    const USER: &str = "+15550100061";
    app.post(&key, "/api/v1/accounts/link", json!({"phone": USER})).await.ok(200);
    let user = app.login(USER).await;
    let c = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "Where is my order?"})).await;
    let (conversation, reference) = (c.ok(201)["conversation_id"].as_i64().unwrap(), c.json["ref"].clone());
    assert_eq!(c.json["partner_name"], "acme Inc.");
    assert_eq!(c.json["last_message"]["preview"], "Where is my order?");
    assert_eq!(c.json["last_message"]["direction"], "in");
    let path = format!("/api/v1/conversations/{conversation}/messages");
    let reply = ana.send(Method::POST, &path, json!({"body": "It left today."})).await;
    assert_eq!(reply.ok(201)["sender_name"], "Ana");
    assert_eq!(reply.json["author"], json!({"member_id": ana_id, "name": "Ana Lima"}));
    assert_eq!(reply.json["partner_name"], "acme Inc.");
    let long_reply = format!("{} tail", "word ".repeat(40));
    let by_key = app.post(&key, &path, json!({"body": long_reply})).await;
    assert!(by_key.ok(201)["sender_name"].is_null());
    assert!(by_key.json.get("author").is_none(), "a key's reply has no author: {}", by_key.json);

    // The partner's list: the latest message, cut to 140 characters.
    let listed = app.get(&key, "/api/v1/conversations").await.ok(200)["data"][0].clone();
    let preview = listed["last_message"]["preview"].as_str().unwrap();
    assert_eq!(preview.chars().count(), 141);
    assert!(preview.ends_with('…') && long_reply.starts_with(preview.trim_end_matches('…')));
    assert_eq!(listed["last_message"]["direction"], "out");
    assert_eq!(listed["partner_name"], "acme Inc.");

    // The person: the partner by name, Ana's reply by her first name only, never her whole name or who she is.
    let thread = app.get(&user, &format!("/api/v1/me/conversations/{}", reference.as_str().unwrap())).await;
    let thread = thread.ok(200).clone();
    assert_eq!(thread["partner_name"], "acme Inc.");
    let names: Vec<&Value> = thread["messages"].as_array().unwrap().iter().map(|m| &m["sender_name"]).collect();
    assert_eq!(names, [&Value::Null, &json!("Ana"), &Value::Null]);
    let text = thread.to_string();
    assert!(!text.contains("Lima") && !text.contains("\"author\"") && !text.contains(AGENT), "{text}");
    let mine = app.get(&user, "/api/v1/me/conversations").await.ok(200)["data"][0].clone();
    assert_eq!(mine["last_message"]["sender_name"], Value::Null);
    assert!(!mine.to_string().contains("Lima"));
    // The person's hub messages carry the partner's name too.
    app.post(&key, "/api/v1/messages", json!({"phone": USER, "body": "Your parcel is out"})).await.ok(201);
    let hub = app.get(&user, "/api/v1/me/messages?limit=1").await.ok(200)["data"][0].clone();
    assert_eq!(hub["partner_name"], "acme Inc.");

    // A reply keeps the name it was sent with; notes and the audit log name the member as they are now.
    ana.send(Method::PATCH, "/api/v1/members/me", json!({"name": "Ana Souza"})).await.ok(200);
    let agent_thread = app.get(&key, &format!("/api/v1/conversations/{conversation}")).await.ok(200).clone();
    assert_eq!(agent_thread["messages"][1]["author"]["name"], "Ana Lima");
    let note =
        ana.send(Method::POST, &format!("/api/v1/conversations/{conversation}/notes"), json!({"body": "VIP"})).await;
    assert_eq!(note.ok(201)["name"], "Ana Souza");
    let audit = app.get(&key, "/api/v1/audit-log").await.ok(200).clone();
    assert!(audit["data"].as_array().unwrap().iter().any(|e| e["name"] == "Ana Souza"), "{audit}");
}
