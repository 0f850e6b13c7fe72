//! End users: OTP login, user JWTs, presence and the `/me` routes (docs/api.md, "The app").

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestApp;
use hubbub_host::store::outbox::{self, Target};

const PHONE: &str = "+15551230000";

async fn otp_start(app: &TestApp, phone: &str) -> crate::common::Resp {
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": phone}))).await
}

async fn otp_verify(app: &TestApp, phone: &str, code: &str) -> crate::common::Resp {
    app.request(Method::POST, "/api/v1/auth/otp/verify", None, Some(&json!({"phone": phone, "code": code}))).await
}

#[tokio::test]
async fn login_sends_a_code_by_sms_and_returns_a_jwt() {
    let app = TestApp::start().await;
    let r = otp_start(&app, PHONE).await;
    assert!(r.ok(202)["expires_at"].as_str().is_some());
    let sms = app.sink(PHONE, "sms").await;
    assert_eq!(sms.len(), 1);
    let code = app.last_code(PHONE).await;
    assert!(sms[0].contains(&code));
    // The code is stored only as a digest.
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT code_hash FROM otp_codes").fetch_all(app.state.db.reader()).await.unwrap();
    assert!(stored.iter().all(|h| !h.contains(&code) && h.len() == 64));
    let r = app
        .request(
            Method::POST,
            "/api/v1/auth/otp/verify",
            None,
            Some(&json!({"phone": PHONE, "code": code, "device_uuid": "dev-a", "platform": "web"})),
        )
        .await;
    let body = r.ok(200);
    assert_eq!(body["device_uuid"], "dev-a");
    assert_eq!(body["account"]["phone"], PHONE);
    assert_eq!(body["account"]["state"], "claimed");
    assert!(body["expires_at"].as_str().unwrap().len() == 19);
    let token = body["token"].as_str().unwrap();
    let claims = hubbub_host::http::auth::verify_user_token(&app.state, token).unwrap();
    assert_eq!(claims.sub, PHONE);
    assert_eq!(claims.dev.as_deref(), Some("dev-a"));
    assert!(claims.exp * 1000 > app.now());
    // The code is used up.
    otp_verify(&app, PHONE, &code).await.error(401, "unauthorized");
    app.get(token, "/api/v1/me/messages").await.ok(200);
}

#[tokio::test]
async fn wrong_codes_count_and_five_void_the_code() {
    let app = TestApp::start().await;
    otp_start(&app, PHONE).await.ok(202);
    let code = app.last_code(PHONE).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for _ in 0..5 {
        otp_verify(&app, PHONE, wrong).await.error(401, "unauthorized");
    }
    otp_verify(&app, PHONE, &code).await.error(401, "unauthorized");
    // A new code works.
    otp_start(&app, PHONE).await.ok(202);
    let code = app.last_code(PHONE).await;
    otp_verify(&app, PHONE, wrong).await.error(401, "unauthorized");
    otp_verify(&app, PHONE, &code).await.ok(200);
}

#[tokio::test]
async fn codes_expire_after_ten_minutes_and_a_new_code_voids_the_old() {
    let app = TestApp::start().await;
    otp_start(&app, PHONE).await.ok(202);
    let code = app.last_code(PHONE).await;
    app.clock.advance_ms(10 * 60 * 1000 + 1);
    otp_verify(&app, PHONE, &code).await.error(401, "unauthorized");
    otp_start(&app, PHONE).await.ok(202);
    let first = app.last_code(PHONE).await;
    app.clock.advance_ms(1000);
    otp_start(&app, PHONE).await.ok(202);
    let second = app.last_code(PHONE).await;
    if first != second {
        otp_verify(&app, PHONE, &first).await.error(401, "unauthorized");
    }
    otp_verify(&app, PHONE, &second).await.ok(200);
}

#[tokio::test]
async fn sends_are_limited_per_phone() {
    let app = TestApp::start().await;
    for _ in 0..5 {
        otp_start(&app, PHONE).await.ok(202);
    }
    let r = otp_start(&app, PHONE).await;
    r.error(429, "rate_limited");
    assert!(r.headers.contains_key("retry-after"));
    otp_start(&app, "+15559998888").await.ok(202);
    app.clock.advance_ms(15 * 60 * 1000 + 1);
    otp_start(&app, PHONE).await.ok(202);
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": "555"})))
        .await
        .field_error("phone");
    app.request(Method::POST, "/api/v1/auth/otp/verify", None, Some(&json!({"phone": PHONE})))
        .await
        .field_error("code");
}

#[tokio::test]
async fn jwt_rejections_and_credential_kinds() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    // Tampered payload.
    let parts: Vec<&str> = token.split('.').collect();
    let forged_claims = base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        br#"{"sub":"+15550000000","iat":0,"exp":9999999999}"#,
    );
    let tampered = format!("{}.{}.{}", parts[0], forged_claims, parts[2]);
    app.get(&tampered, "/api/v1/me/messages").await.error(401, "unauthorized");
    // Signed with another secret.
    let other = TestApp::start_with(|c| c.jwt_secret = Some("mN4bV7cX1zQ8wE5rT2yU9iO3pA6sD0fG".into())).await;
    let foreign = hubbub_host::http::auth::issue_user_token(&other.state, PHONE, None).unwrap().0;
    app.get(&foreign, "/api/v1/me/messages").await.error(401, "unauthorized");
    // Expired.
    let expired = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap().0;
    app.clock.advance_ms((app.state.config.user_token_ttl_s as i64 + 1) * 1000);
    app.get(&expired, "/api/v1/me/messages").await.error(401, "unauthorized");
    // Garbage that looks like a JWT.
    app.get("a.b.c", "/api/v1/me/messages").await.error(401, "unauthorized");
    // Wrong kinds: a user token on partner routes, a partner key on /me.
    let fresh = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap().0;
    app.get(&fresh, "/api/v1/messages").await.error(403, "forbidden");
    app.get(&key, "/api/v1/me/messages").await.error(403, "forbidden");
    drop(token);
}

#[tokio::test]
async fn me_calls_record_presence() {
    let app = TestApp::start().await;
    let token = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap().0;
    assert!(hubbub_host::store::devices::last_seen(&app.state.db, PHONE).await.unwrap().is_none());
    app.get(&token, "/api/v1/me/forms").await.ok(200);
    let seen = hubbub_host::store::devices::last_seen(&app.state.db, PHONE).await.unwrap().unwrap();
    assert_eq!(seen, app.now());
    app.clock.advance_ms(60_000);
    app.get(&token, "/api/v1/me/bots").await.ok(200);
    assert_eq!(hubbub_host::store::devices::last_seen(&app.state.db, PHONE).await.unwrap().unwrap(), app.now());
}

/// Within 15 s of writing a user's activity the host sends no presence statement at all (it would wait
/// for the database's one writer on every `/me` call); after that it writes again.
#[tokio::test]
async fn presence_is_written_at_most_every_15_s_per_phone() {
    let app = TestApp::start().await;
    let token = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap().0;
    let last_seen = || async { hubbub_host::store::devices::last_seen(&app.state.db, PHONE).await.unwrap() };
    app.get(&token, "/api/v1/me/forms").await.ok(200);
    assert_eq!(last_seen().await, Some(app.now()));
    // Remove the row behind the host's back: a call that wrote would put it back.
    sqlx::query("DELETE FROM presence").execute(app.state.db.writer()).await.unwrap();
    app.clock.advance_ms(14_000);
    app.get(&token, "/api/v1/me/forms").await.ok(200);
    assert_eq!(last_seen().await, None, "no statement within 15 s of the last write");
    app.clock.advance_ms(1_000);
    app.get(&token, "/api/v1/me/forms").await.ok(200);
    assert_eq!(last_seen().await, Some(app.now()), "written again 15 s after the last write");
}

#[tokio::test]
async fn login_claims_linked_accounts_and_each_partner_gets_account_claimed() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    assert_eq!(app.get(&acme, &format!("/api/v1/accounts/{PHONE}")).await.json["state"], "unclaimed");
    let (token, body) = app.login_device(PHONE, None).await;
    assert_eq!(body["account"]["state"], "claimed");
    assert_eq!(body["account"]["partners"].as_array().unwrap().len(), 2);
    assert_eq!(app.get(&acme, &format!("/api/v1/accounts/{PHONE}")).await.json["state"], "claimed");
    for code in ["acme", "globex"] {
        let p = hubbub_host::store::partners::find_by_code(&app.state.db, code).await.unwrap().unwrap();
        let events =
            outbox::list_for_target(&app.state.db, Target::Partner(p.id), Some("account.claimed")).await.unwrap();
        assert_eq!(events.len(), 1, "{code}");
        let e = &events[0].2;
        assert_eq!(e["event"], "account.claimed");
        assert_eq!(e["partner"], code);
        assert_eq!(e["phone"], PHONE);
        assert!(e["at"].as_str().unwrap().ends_with('Z'));
    }
    // A second login claims nothing new.
    app.login(PHONE).await;
    let p = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap();
    assert_eq!(
        outbox::list_for_target(&app.state.db, Target::Partner(p.id), Some("account.claimed")).await.unwrap().len(),
        1
    );
    let me = app.get(&token, "/api/v1/me/account").await;
    assert_eq!(me.ok(200)["partners"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn inbox_lists_newest_first_and_fetching_marks_delivered() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    let a = app.send_text(&key, PHONE, "first").await.ok(201)["message_id"].as_i64().unwrap();
    let b = app.send_text(&key, PHONE, "second").await.ok(201)["message_id"].as_i64().unwrap();
    app.send_text(&key, "+15559990000", "someone else").await.ok(201);
    let r = app.get(&token, "/api/v1/me/messages").await;
    let data = r.ok(200)["data"].as_array().unwrap().clone();
    assert_eq!(data.iter().map(|m| m["message_id"].as_i64().unwrap()).collect::<Vec<_>>(), vec![b, a]);
    assert!(data.iter().all(|m| m["state"] == "delivered"), "{data:?}");
    let seen = app.message(&key, a).await;
    assert_eq!(seen["state"], "delivered");
    assert_eq!(seen["channel"], "inapp");
    // Reading by ref; another user's ref is 404.
    let reference = data[1]["ref"].as_str().unwrap();
    let r = app.post(&token, &format!("/api/v1/me/messages/{reference}/read"), json!({})).await;
    assert_eq!(r.ok(200)["state"], "read");
    assert_eq!(app.message(&key, a).await["state"], "read");
    let stranger = app.login("+15557776666").await;
    app.post(&stranger, &format!("/api/v1/me/messages/{reference}/read"), json!({})).await.error(404, "not_found");
    // Paging.
    let page = app.get(&token, "/api/v1/me/messages?limit=1").await;
    assert_eq!(page.ok(200)["data"].as_array().unwrap().len(), 1);
    let cursor = page.json["next_cursor"].as_str().unwrap();
    let next = app.get(&token, &format!("/api/v1/me/messages?limit=1&cursor={cursor}")).await;
    assert_eq!(next.ok(200)["data"][0]["message_id"], a);
}

#[tokio::test]
async fn me_lists_have_the_list_shape() {
    let app = TestApp::start().await;
    let token = app.login(PHONE).await;
    for path in ["/api/v1/me/conversations", "/api/v1/me/bots", "/api/v1/me/forms", "/api/v1/me/messages"] {
        let r = app.get(&token, path).await;
        assert!(r.ok(200)["data"].is_array(), "{path}");
        assert_eq!(r.json["next_cursor"], Value::Null);
    }
}

#[tokio::test]
async fn recipients_can_fetch_their_base64_media() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = app.login(PHONE).await;
    let stranger = app.login("+15557776666").await;
    let m = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "content_type": "document", "media_base64": "aGVsbG8=", "media_filename": "a.txt", "media_mimetype": "text/plain"})).await;
    let url = m.ok(201)["media"]["url"].as_str().unwrap().to_string();
    let got = app.client.get(format!("{}{url}", app.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.text().await.unwrap(), "hello");
    app.get(&stranger, &url).await.error(404, "not_found");
}

#[tokio::test]
async fn a_hub_message_the_app_fetches_before_its_delivery_still_reports_sent_then_delivered() {
    // No delivery worker in this host: what the worker routes stays queued until the app fetches it.
    let app = TestApp::start_with(|c| c.workers = false).await;
    let key = app.partner("acme").await;
    let hook = json!({"webhook_url": "http://127.0.0.1:9/hook"});
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&hook)).await.ok(200);
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let token = app.login(PHONE).await;
    let history = |id: i64| {
        let app = &app;
        async move {
            let states: Vec<String> =
                sqlx::query_scalar("SELECT state FROM message_states WHERE message_id = $1 ORDER BY seq")
                    .bind(id)
                    .fetch_all(app.state.db.reader())
                    .await
                    .unwrap();
            let events: Vec<String> = sqlx::query_scalar(
                "SELECT payload FROM outbox_events WHERE ordering_key LIKE $1 AND event = 'message.status' ORDER BY id",
            )
            .bind(format!("%:message:{id}"))
            .fetch_all(app.state.db.reader())
            .await
            .unwrap();
            let events: Vec<String> = events
                .iter()
                .map(|p| serde_json::from_str::<Value>(p).unwrap()["state"].as_str().unwrap().to_string())
                .collect();
            (states, events)
        }
    };
    // A plain message to a claimed user with a device is in the hub as the send answers, worker or not:
    // `sent` on `inapp`, with its attempt, its event and the user's `message.created`.
    let sent = app.send_text(&key, PHONE, "at once").await.ok(201).clone();
    assert_eq!((&sent["state"], &sent["channel"]), (&json!("sent"), &json!("inapp")), "{sent}");
    let id = sent["message_id"].as_i64().unwrap();
    let got = app.get(&key, &format!("/api/v1/messages/{id}?include=attempts")).await.ok(200).clone();
    assert_eq!(got["state"], "sent");
    let attempts = got["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{got}");
    assert_eq!((&attempts[0]["channel"], &attempts[0]["state"]), (&json!("inapp"), &json!("sent")));
    assert_eq!(history(id).await, (vec!["queued".to_string(), "sent".into()], vec!["sent".to_string()]));
    let told: Vec<(String, i64)> = sqlx::query_as("SELECT kind, subject_id FROM user_events WHERE phone = $1")
        .bind(PHONE)
        .fetch_all(app.state.db.reader())
        .await
        .unwrap();
    assert!(told.contains(&("message.created".to_string(), id)), "{told:?}");
    // Its job is only the fallback after the hub, due when the window ends (the default, 300 s).
    let due: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT next_attempt_at, resume FROM delivery_jobs WHERE message_id = $1")
            .bind(id)
            .fetch_all(app.state.db.reader())
            .await
            .unwrap();
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].1.as_deref(), Some("after_hub"));
    assert!(due[0].0 >= app.state.now() + 290_000, "{due:?}");
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    assert_eq!(history(id).await.1, ["sent", "delivered"]);

    // A code is routed by the worker (its route depends on whether the user is online): fetched while
    // still queued, it reports sent, then delivered.
    let code = json!({"phone": PHONE, "body": "fetched", "priority": "otp"});
    let fetched = app.post(&key, "/api/v1/messages", code).await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(app.message(&key, fetched).await["state"], "queued");
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    let (states, events) = history(fetched).await;
    assert_eq!(states, ["queued", "sent", "delivered"]);
    assert_eq!(events, ["sent", "delivered"], "every state change has its event, in order");

    // Opened straight from the push, before any fetch: sent, delivered, read.
    let opened = app.send_text(&key, PHONE, "opened").await.ok(201).clone();
    let path = format!("/api/v1/me/messages/{}/read", opened["ref"].as_str().unwrap());
    assert_eq!(app.post(&token, &path, json!({})).await.ok(200)["state"], "read");
    let (states, events) = history(opened["message_id"].as_i64().unwrap()).await;
    assert_eq!(states, ["queued", "sent", "delivered", "read"]);
    assert_eq!(events, ["sent", "delivered", "read"]);
}
