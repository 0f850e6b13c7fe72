//! People's preferences (`/me/preferences`, docs/preferences.md): a partner blocked, muted or its marketing
//! off; channels refused; quiet hours in the person's time zone (and a partner's default window) — each
//! honoured on sends, broadcasts, bots' answers, the fallback after the hub and Web Push.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, eventually, t, tries};

const PHONE: &str = "+15557700001";

async fn put_preferences(app: &TestApp, token: &str, doc: Value) -> crate::common::Resp {
    app.request(Method::PUT, "/api/v1/me/preferences", Some(token), Some(&doc)).await
}

/// A send of `body` (with `extra` fields) to `phone`: the API's answer.
async fn send(app: &TestApp, key: &str, phone: &str, extra: Value) -> Value {
    let mut body = json!({"phone": phone, "body": "Your order shipped"});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    app.post(key, "/api/v1/messages", body).await.ok(201).clone()
}

/// A person's token for `phone`, who has not signed in on a device: their account is not claimed, so
/// messages go to them by WhatsApp, then SMS.
fn token_for(app: &TestApp, phone: &str) -> String {
    hubbub_host::http::auth::issue_user_token(&app.state, phone, None).unwrap().0
}

/// `phone` signed in on a device (claimed, with a device: reached in the hub), and its token.
async fn person_with_the_app(app: &TestApp, phone: &str) -> String {
    let claimed = |partner: &str, at| hubbub_host::events::account_claimed(partner, phone, at);
    let db = &app.state.db;
    assert!(hubbub_host::store::accounts::sign_in(db, phone, "phone-1", None, app.now(), claimed).await.unwrap());
    hubbub_host::http::auth::issue_user_token(&app.state, phone, Some("phone-1")).unwrap().0
}

/// A host with fake providers and a fake push service, acme, and a person with the app (linked to acme, a
/// device subscribed to pushes, WhatsApp's window open): the WhatsApp fake, the push service, the host, acme's
/// key and the person's token.
async fn subscribed_person() -> (FakeServer, FakeServer, TestApp, String, String) {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let service = FakeServer::start(201, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let token = person_with_the_app(&app, PHONE).await;
    app.whatsapp_wrote(PHONE).await;
    let device = crate::push::Device::new().subscription(&format!("{}/push/device-1", service.url));
    app.post(&token, "/api/v1/me/push/subscriptions", device).await.ok(201);
    (wa, service, app, acme, token)
}

fn id(m: &Value) -> i64 {
    m["message_id"].as_i64().unwrap()
}

/// The minute of the day (UTC) of the app's clock.
fn minute_now(app: &TestApp) -> i64 {
    (app.now() / 60_000).rem_euclid(1440)
}

fn hh_mm(minute: i64) -> String {
    let m = minute.rem_euclid(1440);
    format!("{:02}:{:02}", m / 60, m % 60)
}

#[tokio::test]
async fn a_person_reads_and_replaces_their_preferences_and_bad_ones_are_refused() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    app.partner("globex").await;
    let token = app.login(PHONE).await;
    // Nothing set: the defaults, and no partner yet.
    let none = app.get(&token, "/api/v1/me/preferences").await.ok(200).clone();
    assert_eq!(
        none,
        json!({"time_zone": null, "quiet_hours": null, "channels": {"whatsapp": true, "sms": true}, "partners": {}})
    );
    // A partner that sent them a message is listed, with its name and the defaults.
    send(&app, &acme, PHONE, json!({})).await;
    let listed = app.get(&token, "/api/v1/me/preferences").await.ok(200).clone();
    assert_eq!(
        listed["partners"]["acme"],
        json!({"name": "acme Inc.", "muted": false, "blocked": false, "marketing": true})
    );
    // The whole document replaced; another partner named too.
    let doc = json!({"time_zone": "Europe/Berlin", "quiet_hours": {"start": "22:00", "end": "07:00"},
        "channels": {"whatsapp": true, "sms": false},
        "partners": {"acme": {"muted": true}, "globex": {"blocked": true, "marketing": false}}});
    let stored = put_preferences(&app, &token, doc).await.ok(200).clone();
    assert_eq!(stored["time_zone"], "Europe/Berlin");
    assert_eq!(stored["quiet_hours"], json!({"start": "22:00", "end": "07:00"}));
    assert_eq!(stored["channels"], json!({"whatsapp": true, "sms": false}));
    assert_eq!(
        stored["partners"]["acme"],
        json!({"name": "acme Inc.", "muted": true, "blocked": false, "marketing": true})
    );
    assert_eq!(stored["partners"]["globex"]["blocked"], true);
    assert_eq!(app.get(&token, "/api/v1/me/preferences").await.ok(200), &stored);
    // A partner left out goes back to the defaults (acme stays listed: it sent them a message).
    let fewer = put_preferences(&app, &token, json!({"partners": {}})).await.ok(200).clone();
    assert_eq!(fewer["partners"]["acme"]["muted"], false);
    assert!(fewer["partners"].get("globex").is_none(), "{fewer}");
    assert_eq!((fewer["time_zone"].clone(), fewer["quiet_hours"].clone()), (Value::Null, Value::Null));

    // Bad input: each a 422 naming its field; nothing changed.
    for (bad, field) in [
        (json!({"time_zone": "Mars/Olympus_Mons"}), "time_zone"),
        (json!({"quiet_hours": {"start": "7:00", "end": "08:00"}}), "quiet_hours.start"),
        (json!({"quiet_hours": {"start": "22:00", "end": "24:00"}}), "quiet_hours.end"),
        (json!({"quiet_hours": {"start": "22:00", "end": "22:00"}}), "quiet_hours.end"),
        (json!({"partners": {"nobody": {"blocked": true}}}), "partners.nobody"),
        (json!({"channels": {"sms": "no"}}), "channels.sms"),
    ] {
        let r = put_preferences(&app, &token, bad.clone()).await;
        assert_eq!(r.status, 422, "{bad}: {}", r.json);
        r.field_error(field);
    }
    assert_eq!(app.get(&token, "/api/v1/me/preferences").await.ok(200), &fewer);
    // A partner's key is not a person's token.
    assert_eq!(app.get(&acme, "/api/v1/me/preferences").await.status, 403);
    app.stop().await;
}

#[tokio::test]
async fn a_blocked_partner_reaches_the_person_by_no_way_and_its_view_says_so() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let token = person_with_the_app(&app, PHONE).await;
    put_preferences(&app, &token, json!({"partners": {"acme": {"blocked": true}}})).await.ok(200);

    // A send answers 201 with the message failed, never tried.
    let m = send(&app, &acme, PHONE, json!({})).await;
    assert_eq!((m["state"].as_str(), m["error"].as_str()), (Some("failed"), Some("blocked_by_user")), "{m}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = app.message(&acme, id(&m)).await;
    assert_eq!(m["state"], "failed");
    assert!(m["attempts"].as_array().unwrap().is_empty(), "{m}");
    assert!(wa.received().is_empty() && sms.received().is_empty());
    assert_eq!(app.get(&token, "/api/v1/me/messages").await.ok(200)["data"].as_array().unwrap().len(), 0);
    // A scheduled one fails at its time.
    let later = send(&app, &acme, PHONE, json!({"send_at": hubbub_host::clock::iso_time(app.now() + 60_000)})).await;
    assert_eq!(later["state"], "scheduled");
    app.clock.advance_ms(61_000);
    eventually("the scheduled one fails", || async { app.message(&acme, id(&later)).await["state"] == "failed" }).await;
    assert_eq!(app.message(&acme, id(&later)).await["error"], "blocked_by_user");
    // A broadcast reaches everyone else but not them.
    let b = app.post(&acme, "/api/v1/broadcasts", json!({"body": "Doors open at nine"})).await.ok(202).clone();
    let b_id = b["broadcast_id"].as_i64().or(b["id"].as_i64()).unwrap();
    eventually("the broadcast fans out", || async {
        app.get(&acme, &format!("/api/v1/broadcasts/{b_id}")).await.json["state"] == "completed"
    })
    .await;
    let listed = app.get(&acme, &format!("/api/v1/messages?phone=%2B{}&limit=50", &PHONE[1..])).await.ok(200).clone();
    let from_broadcast = listed["data"].as_array().unwrap().iter().find(|m| m["body"] == "Doors open at nine").cloned();
    let from_broadcast = from_broadcast.expect("the broadcast's message to them");
    eventually("the broadcast's message fails", || async {
        app.message(&acme, id(&from_broadcast)).await["state"] == "failed"
    })
    .await;
    assert_eq!(app.message(&acme, id(&from_broadcast)).await["error"], "blocked_by_user");
    assert!(wa.received().is_empty() && sms.received().is_empty());
    // The partner's view of the account says it is blocked; another partner's says nothing of the sort.
    let account = app.get(&acme, &format!("/api/v1/accounts/{PHONE}")).await.ok(200).clone();
    assert_eq!(account["blocked"], true, "{account}");
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    assert_eq!(app.get(&globex, &format!("/api/v1/accounts/{PHONE}")).await.ok(200)["blocked"], false);
    // The other partner reaches them.
    let other = send(&app, &globex, PHONE, json!({})).await;
    assert_ne!(other["state"], "failed");
    // Unblocked, the partner reaches them again.
    put_preferences(&app, &token, json!({})).await.ok(200);
    let again = send(&app, &acme, PHONE, json!({})).await;
    assert_ne!(again["state"], "failed");
    assert!(again.get("error").is_none(), "{again}");
    app.stop().await;
}

#[tokio::test]
async fn marketing_off_refuses_a_partners_marketing_and_nothing_else() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let token = app.login(PHONE).await;
    put_preferences(&app, &token, json!({"partners": {"acme": {"marketing": false}}})).await.ok(200);
    let marketing = send(&app, &acme, PHONE, json!({"category": "marketing"})).await;
    assert_eq!((marketing["state"].as_str(), marketing["error"].as_str()), (Some("failed"), Some("marketing_refused")));
    assert_eq!(marketing["category"], "marketing");
    // A template of category marketing is marketing.
    let template = json!({"code": "sale", "channel": "inapp", "lang": "en", "category": "marketing",
        "body": "Hi {{name}}, 20% off today"});
    app.post(&acme, "/api/v1/templates", template).await.ok(201);
    let sale = send(&app, &acme, PHONE, json!({"template_code": "sale", "vars": {"name": "Ada"}})).await;
    assert_eq!(sale["error"], "marketing_refused", "{sale}");
    // A category that contradicts the template's is refused.
    let r = app
        .post(
            &acme,
            "/api/v1/messages",
            json!({"phone": PHONE, "template_code": "sale", "vars": {"name": "Ada"},
            "category": "utility"}),
        )
        .await;
    assert_eq!(r.status, 422);
    r.field_error("category");
    // Anything else goes.
    let receipt = send(&app, &acme, PHONE, json!({"category": "utility"})).await;
    assert_ne!(receipt["state"], "failed");
    assert_ne!(send(&app, &acme, PHONE, json!({})).await["state"], "failed");
    // A marketing broadcast's message to them fails the same way; a broadcast of news reaches them.
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    for (body, category, state) in [("Half price", "marketing", "failed"), ("We moved", "utility", "sent")] {
        let b = app.post(&acme, "/api/v1/broadcasts", json!({"body": body, "category": category})).await;
        let b_id = b.ok(202)["broadcast_id"].as_i64().or(b.json["id"].as_i64()).unwrap();
        eventually("the broadcast fans out", || async {
            app.get(&acme, &format!("/api/v1/broadcasts/{b_id}")).await.json["state"] == "completed"
        })
        .await;
        let mine = || async {
            let list = app.get(&acme, "/api/v1/messages?limit=50").await.ok(200).clone();
            list["data"].as_array().unwrap().iter().find(|m| m["body"] == body).cloned().unwrap()
        };
        eventually("its message is routed", || async { mine().await["state"] != "queued" }).await;
        let m = mine().await;
        assert_eq!(m["state"], state, "{m}");
        assert_eq!(m["error"].as_str(), (state == "failed").then_some("marketing_refused"), "{m}");
    }
    app.stop().await;
}

#[tokio::test]
async fn refused_channels_are_skipped_and_a_muted_partner_stays_in_the_hub() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let token = token_for(&app, PHONE);
    app.whatsapp_wrote(PHONE).await;
    // No WhatsApp: the message goes by SMS.
    put_preferences(&app, &token, json!({"channels": {"whatsapp": false}})).await.ok(200);
    let m = app.delivered(&acme, id(&send(&app, &acme, PHONE, json!({})).await)).await;
    assert_eq!(tries(&m), [t("whatsapp", "skipped", "channel_refused_by_user"), t("sms", "sent", "")], "{m}");
    // Neither: it waits in the app.
    put_preferences(&app, &token, json!({"channels": {"whatsapp": false, "sms": false}})).await.ok(200);
    let m = app.delivered(&acme, id(&send(&app, &acme, PHONE, json!({})).await)).await;
    assert_eq!(
        tries(&m),
        [
            t("whatsapp", "skipped", "channel_refused_by_user"),
            t("sms", "skipped", "channel_refused_by_user"),
            t("inapp", "sent", "")
        ]
    );
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("inapp")));
    // A muted partner: the hub only; another partner's messages still go by WhatsApp.
    put_preferences(&app, &token, json!({"partners": {"acme": {"muted": true}}})).await.ok(200);
    let m = app.delivered(&acme, id(&send(&app, &acme, PHONE, json!({})).await)).await;
    assert_eq!(
        tries(&m),
        [t("whatsapp", "skipped", "muted_by_user"), t("sms", "skipped", "muted_by_user"), t("inapp", "sent", "")]
    );
    let other = app.delivered(&globex, id(&send(&app, &globex, PHONE, json!({})).await)).await;
    assert_eq!(tries(&other), [t("whatsapp", "sent", "")]);
    assert_eq!(wa.received().len(), 1);
    assert_eq!(sms.received().len(), 1, "the first message's SMS");
    app.stop().await;
}

#[tokio::test]
async fn a_muted_partners_hub_message_has_no_fallback_and_no_push() {
    let (wa, service, app, acme, token) = subscribed_person().await;
    // Unmuted: a push.
    send(&app, &acme, PHONE, json!({"fallback_after_s": 60})).await;
    eventually("a push", || async { service.received().len() == 1 }).await;
    // Muted: in the hub, no push, and no WhatsApp or SMS once its window ends.
    put_preferences(&app, &token, json!({"partners": {"acme": {"muted": true}}})).await.ok(200);
    let m = send(&app, &acme, PHONE, json!({"fallback_after_s": 60})).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("inapp")), "{m}");
    app.clock.advance_ms(61_000);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(service.received().len(), 1, "no push for the muted partner");
    assert!(wa.received().is_empty(), "no fallback");
    let m = app.message(&acme, id(&m)).await;
    assert_eq!(tries(&m), [t("inapp", "sent", "")], "{m}");
    app.stop().await;
}

#[tokio::test]
async fn quiet_hours_hold_notifications_until_they_end_and_let_codes_and_chat_through() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let token = token_for(&app, PHONE);
    // Quiet from this minute for an hour in their time zone, five hours behind UTC all year (IANA's
    // `Etc/GMT+5`, whose sign is POSIX's).
    let local = minute_now(&app) - 300;
    let window = json!({"start": hh_mm(local), "end": hh_mm(local + 60)});
    let doc = json!({"time_zone": "Etc/GMT+5", "quiet_hours": window});
    put_preferences(&app, &token, doc).await.ok(200);
    app.whatsapp_wrote(PHONE).await;

    // A notification waits, saying why and until when: the end of their quiet hours.
    let note = send(&app, &acme, PHONE, json!({})).await;
    let waiting = |m: Value| {
        let a = m["attempts"].as_array().unwrap().last().cloned().unwrap_or(Value::Null);
        (a["state"] == "waiting" && a["error"] == "quiet_hours").then_some(a)
    };
    eventually("it waits out the quiet hours", || async { waiting(app.message(&acme, id(&note)).await).is_some() })
        .await;
    let attempt = waiting(app.message(&acme, id(&note)).await).unwrap();
    let retry_at = hubbub_host::clock::parse_record_time(attempt["retry_at"].as_str().unwrap()).unwrap();
    let end = (app.now() / 60_000 + 60) * 60_000;
    assert_eq!(retry_at, end, "the end of the window, {attempt}");
    // A code and a chat message pass; so does nothing marketing.
    let code = send(&app, &acme, PHONE, json!({"priority": "otp", "body": "Your code is 123456"})).await;
    assert_eq!(app.delivered(&acme, id(&code)).await["state"], "sent");
    let chat = send(&app, &acme, PHONE, json!({"priority": "chat", "body": "On my way"})).await;
    assert_eq!(app.delivered(&acme, id(&chat)).await["state"], "sent");
    let promo = send(&app, &acme, PHONE, json!({"priority": "chat", "category": "marketing"})).await;
    eventually("marketing waits whatever its priority", || async {
        waiting(app.message(&acme, id(&promo)).await).is_some()
    })
    .await;
    assert_eq!(wa.received().len() + sms.received().len(), 2, "the code and the chat message");
    // At the end of the window the notification goes.
    app.clock.advance_ms(end - app.now() + 1_000);
    eventually("sent once the quiet hours end", || async { app.message(&acme, id(&note)).await["state"] == "sent" })
        .await;
    let m = app.message(&acme, id(&note)).await;
    assert_eq!(tries(&m), [t("whatsapp", "sent", "")], "the wait gave way to the try: {m}");
    app.stop().await;
}

#[tokio::test]
async fn a_partners_default_quiet_window_holds_people_who_set_none() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let window = json!({"start": hh_mm(minute_now(&app)), "end": hh_mm(minute_now(&app) + 30), "time_zone": "UTC"});
    let settings = json!({"quiet_hours": window});
    let stored = app.request(Method::PUT, "/api/v1/settings/delivery", Some(&acme), Some(&settings)).await;
    assert_eq!(stored.ok(200)["quiet_hours"], window);
    // Bad windows are refused.
    for (bad, field) in [
        (json!({"start": "22:00", "end": "07:00", "time_zone": "Nowhere/Town"}), "quiet_hours.time_zone"),
        (json!({"start": "22:60", "end": "07:00", "time_zone": "UTC"}), "quiet_hours.start"),
    ] {
        let r = app
            .request(Method::PUT, "/api/v1/settings/delivery", Some(&acme), Some(&json!({"quiet_hours": bad})))
            .await;
        assert_eq!(r.status, 422, "{}", r.json);
        r.field_error(field);
    }
    app.whatsapp_wrote(PHONE).await;
    let held = send(&app, &acme, PHONE, json!({})).await;
    eventually("acme's message waits", || async {
        let m = app.message(&acme, id(&held)).await;
        m["attempts"].as_array().unwrap().last().is_some_and(|a| a["error"] == "quiet_hours")
    })
    .await;
    // Another partner has no such window.
    let other = send(&app, &globex, PHONE, json!({})).await;
    assert_eq!(app.delivered(&globex, id(&other)).await["state"], "sent");
    // A person who set quiet hours of their own (none now) is held by theirs, not the partner's.
    let token = token_for(&app, "+15557700002");
    let own = json!({"start": hh_mm(minute_now(&app) + 120), "end": hh_mm(minute_now(&app) + 180)});
    put_preferences(&app, &token, json!({"time_zone": "UTC", "quiet_hours": own})).await.ok(200);
    app.whatsapp_wrote("+15557700002").await;
    let theirs = send(&app, &acme, "+15557700002", json!({})).await;
    assert_eq!(app.delivered(&acme, id(&theirs)).await["state"], "sent");
    app.stop().await;
}

#[tokio::test]
async fn a_bot_answers_nothing_to_a_person_who_blocked_its_partner_nor_on_a_channel_they_refuse() {
    use crate::inbound::{more_sent, shop_on_channels, sms_in};
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    shop_on_channels(&app, &acme).await;
    let token = token_for(&app, PHONE);
    // Blocked: the entry bot's menu never goes out.
    put_preferences(&app, &token, json!({"partners": {"acme": {"blocked": true}}})).await.ok(200);
    sms_in(&app, "SMp1", PHONE, "order", None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        sms.received().is_empty(),
        "no answer to a person who blocked the partner: {:?}",
        sms.received().iter().map(|r| r.json()).collect::<Vec<_>>()
    );
    // SMS refused: nothing by SMS either.
    put_preferences(&app, &token, json!({"channels": {"sms": false}})).await.ok(200);
    sms_in(&app, "SMp2", PHONE, "order", None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(sms.received().is_empty(), "no answer on a refused channel");
    // Muted only: the bot answers what the person wrote (muting keeps answers): its session, whose menu
    // they never saw, asks for one of its numbers.
    put_preferences(&app, &token, json!({"partners": {"acme": {"muted": true}}})).await.ok(200);
    sms_in(&app, "SMp3", PHONE, "order", None).await;
    let out = more_sent(&sms, PHONE, 0, 1).await;
    assert!(out[0]["Body"].as_str().unwrap().starts_with("Sorry, shop bot could not take that"), "{}", out[0]);
    app.stop().await;
}

#[tokio::test]
async fn in_quiet_hours_the_hub_is_silent_and_its_fallback_waits_for_their_end() {
    let (wa, service, app, acme, token) = subscribed_person().await;
    let window = json!({"start": hh_mm(minute_now(&app)), "end": hh_mm(minute_now(&app) + 10)});
    let end = (app.now() / 60_000 + 10) * 60_000;
    put_preferences(&app, &token, json!({"time_zone": "UTC", "quiet_hours": window})).await.ok(200);
    // A notification is in the hub at once, silently.
    let m = send(&app, &acme, PHONE, json!({"fallback_after_s": 60})).await;
    assert_eq!((m["state"].as_str(), m["channel"].as_str()), (Some("sent"), Some("inapp")), "{m}");
    // Chat passes: its push goes.
    send(&app, &acme, PHONE, json!({"priority": "chat", "body": "Your driver is here"})).await;
    eventually("the chat message's push", || async { service.received().len() == 1 }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(service.received().len(), 1, "no push for the notification");
    // No device got it: its fallback after the hub waits for the end of the quiet hours.
    app.clock.advance_ms(61_000);
    eventually("the fallback waits", || async {
        tries(&app.message(&acme, id(&m)).await).last() == Some(&t("whatsapp", "waiting", "quiet_hours"))
    })
    .await;
    assert!(wa.received().is_empty());
    app.clock.advance_ms(end - app.now() + 1_000);
    // (The chat message, pushed but never acknowledged, has gone on after its own window meanwhile.)
    eventually("then it goes", || async {
        tries(&app.message(&acme, id(&m)).await) == [t("inapp", "sent", ""), t("whatsapp", "sent", "")]
    })
    .await;
    app.stop().await;
}
