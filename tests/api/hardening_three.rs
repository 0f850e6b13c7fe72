//! The third review's findings (docs/security.md, "Hardening III"): each test fails on the code before its
//! fix. Shared senders cannot be taken over, a provider's signature speaks for its own account only, API keys
//! act with the role of the member who made it and are audited, the unsigned WhatsApp webhook costs nothing,
//! and the smaller holes (sign-up e-mails, stream tickets, form links of webhook bots, tokens without `iat`).

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, Resp, TestApp, fake_providers, twilio_post, whatsapp_notify_signed};
use crate::members::{invitation, sign_in};

/// A partner's own Twilio account (a well-formed SID) and the host's.
const ACME_SID: &str = "AC0123456789abcdef0123456789abcdef";
const HOST_SID: &str = "ACffffffffffffffffffffffffffffffff";

/// A host with fake providers, its own Twilio account SID and WhatsApp business account.
async fn host(wa: &FakeServer, sms: &FakeServer) -> TestApp {
    let (wa, sms) = (wa.clone(), sms.clone());
    TestApp::start_with(move |c| {
        fake_providers(c, &wa, &sms);
        c.twilio_account_sid = Some(HOST_SID.into());
        c.whatsapp_business_account_id = Some("800".into());
    })
    .await
}

async fn put(app: &TestApp, key: &str, channel: &str, body: Value) -> Resp {
    app.request(Method::PUT, &format!("/api/v1/settings/senders/{channel}"), Some(key), Some(&body)).await
}

/// Twilio's answer listing `numbers` as the account's.
fn twilio_numbers(numbers: &[&str]) -> Value {
    json!({"incoming_phone_numbers": numbers.iter().map(|n| json!({"phone_number": n})).collect::<Vec<_>>()})
}

fn numbers_path(sid: &str) -> String {
    format!("/2010-04-01/Accounts/{sid}/IncomingPhoneNumbers.json")
}

#[tokio::test]
async fn the_hosts_own_senders_are_refused_and_a_partners_own_is_proved_at_the_provider() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let sms_sender = |from: &str, sid: &str| json!({"account_sid": sid, "auth_token": "acme-tw-token", "from": from});
    let wa_sender = |id: &str, waba: &str| json!({"phone_number_id": id, "business_account_id": waba, "token": "acme-wa-token", "app_secret": "acme-secret"});
    sms.answer(&numbers_path(ACME_SID), 200, twilio_numbers(&["+15550001111", "+15550002222"]));
    wa.answer("/900/phone_numbers", 200, json!({"data": [{"id": "12345"}, {"id": "111"}]}));
    wa.answer("/800/phone_numbers", 200, json!({"data": [{"id": "12345"}, {"id": "111"}]}));

    // The host's shared numbers are never a partner's, whatever the provider says of the credentials.
    put(&app, &acme, "sms", sms_sender("+15550001111", ACME_SID)).await.field_error("from");
    put(&app, &acme, "whatsapp", wa_sender("12345", "900")).await.field_error("phone_number_id");

    // A number the credentials do not hold, credentials the provider refuses, a provider that cannot be
    // asked: refused, nothing kept.
    put(&app, &acme, "sms", sms_sender("+15550003333", ACME_SID)).await.field_error("from");
    wa.answer("/900/phone_numbers", 200, json!({"data": [{"id": "333"}]}));
    put(&app, &acme, "whatsapp", wa_sender("111", "900")).await.field_error("phone_number_id");
    wa.answer("/900/phone_numbers", 401, json!({"error": {"message": "Invalid OAuth access token"}}));
    put(&app, &acme, "whatsapp", wa_sender("111", "900")).await.field_error("token");
    sms.answer(&numbers_path(ACME_SID), 503, json!({"message": "try later"}));
    put(&app, &acme, "sms", sms_sender("+15550002222", ACME_SID)).await.error(502, "provider_unavailable");
    assert_eq!(app.get(&acme, "/api/v1/settings/senders").await.ok(200)["data"], json!([]));

    // Held: kept; the provider was asked with the partner's own credentials.
    sms.answer(&numbers_path(ACME_SID), 200, twilio_numbers(&["+15550002222"]));
    put(&app, &acme, "sms", sms_sender("+15550002222", ACME_SID)).await.ok(200);
    let asked = sms.received().into_iter().rfind(|r| r.path == numbers_path(ACME_SID)).unwrap();
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{ACME_SID}:acme-tw-token"));
    assert_eq!(asked.headers["authorization"].to_str().unwrap(), format!("Basic {basic}"));
    wa.answer("/900/phone_numbers", 200, json!({"data": [{"id": "333"}, {"id": "111"}]}));
    put(&app, &acme, "whatsapp", wa_sender("111", "900")).await.ok(200);
    let asked = wa.received().into_iter().rfind(|r| r.path == "/900/phone_numbers").unwrap();
    assert_eq!(asked.headers["authorization"], "Bearer acme-wa-token");

    // A messaging service is the account's when Twilio says so.
    let service = "MG0123456789abcdef0123456789abcdef";
    sms.answer(&format!("/v1/Services/{service}"), 200, json!({"sid": service, "account_sid": HOST_SID}));
    put(&app, &acme, "sms", sms_sender(service, ACME_SID)).await.field_error("from");
    sms.answer(&format!("/v1/Services/{service}"), 200, json!({"sid": service, "account_sid": ACME_SID}));
    assert_eq!(put(&app, &acme, "sms", sms_sender(service, ACME_SID)).await.ok(200)["address"], service);
    put(&app, &acme, "sms", sms_sender("MG0123456789abcdef0123456789abc/..", ACME_SID)).await.field_error("from");

    // A sender that a partner took before these checks is the host's again when a host starts.
    let acme_id = partner_id(&app, "acme").await;
    let taken = hubbub_host::store::senders::Sender {
        partner_id: acme_id,
        channel: hubbub_host::names::Channel::Whatsapp,
        address: "12345".into(),
        account: "900".into(),
        token: "t".into(),
        app_secret: Some("acme-secret".into()),
        mps: None,
        updated_at: app.now(),
    };
    hubbub_host::store::senders::remove_address(&app.state.db, taken.channel, "111").await.unwrap();
    assert!(hubbub_host::store::senders::set(&app.state.db, &taken, app.now()).await.unwrap());
    let (wa2, sms2) = (wa.clone(), sms.clone());
    let restarted = TestApp::start_on(app.db.clone(), move |c| fake_providers(c, &wa2, &sms2)).await;
    let held = hubbub_host::store::senders::by_address(&restarted.state.db, taken.channel, "12345").await.unwrap();
    assert!(held.is_none(), "the host's number was taken back");
}

/// acme with its own Twilio number (+15550002222) and WhatsApp number (111, app secret `acme-secret`) on a
/// host whose shared senders are +15550001111 and 12345.
async fn acme_with_own_senders(app: &TestApp, wa: &FakeServer, sms: &FakeServer) {
    let acme = app.partner("acme").await;
    sms.answer(&numbers_path(ACME_SID), 200, twilio_numbers(&["+15550002222"]));
    wa.answer("/900/phone_numbers", 200, json!({"data": [{"id": "111"}]}));
    let own_sms = json!({"account_sid": ACME_SID, "auth_token": "acme-tw-token", "from": "+15550002222"});
    put(app, &acme, "sms", own_sms).await.ok(200);
    let own_wa = json!({"phone_number_id": "111", "business_account_id": "900", "token": "acme-wa", "app_secret": "acme-secret"});
    put(app, &acme, "whatsapp", own_wa).await.ok(200);
}

/// A WhatsApp notification about our number `number`, signed with `secret`.
async fn notify(app: &TestApp, secret: &str, number: &str, mut changes: Value) -> Resp {
    for change in changes.as_array_mut().unwrap() {
        if change["field"] != "message_template_status_update" {
            change["value"]["metadata"] = json!({"phone_number_id": number});
        }
    }
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": changes.clone()}]});
    let signature = hubbub_host::delivery::receipts::meta_signature(secret, body.to_string().as_bytes());
    whatsapp_notify_signed(&app.client, &app.base, changes, Some(&signature)).await
}

/// Waits until every kept inbound message is routed.
async fn routed(app: &TestApp) {
    crate::common::eventually("inbound messages routed", || async {
        hubbub_host::store::inbound::waiting(&app.state.db, 10).await.unwrap().is_empty()
    })
    .await;
}

/// The partner whose conversation holds the message with `body`, if one does.
async fn conversation_partner(app: &TestApp, body: &str) -> Option<i64> {
    sqlx::query_scalar(
        "SELECT c.partner_id FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.body = $1",
    )
    .bind(body)
    .fetch_optional(app.state.db.reader())
    .await
    .unwrap()
}

/// The id of partner `code`.
async fn partner_id(app: &TestApp, code: &str) -> i64 {
    hubbub_host::store::partners::find_by_code(&app.state.db, code).await.unwrap().unwrap().id
}

/// The provider's id of the latest attempt of message `id`.
async fn provider_ref(app: &TestApp, id: i64) -> String {
    sqlx::query_scalar("SELECT provider_ref FROM delivery_attempts WHERE message_id = $1 ORDER BY id DESC LIMIT 1")
        .bind(id)
        .fetch_one(app.state.db.reader())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_partners_own_signature_speaks_for_its_own_senders_only() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    acme_with_own_senders(&app, &wa, &sms).await;
    let globex = app.partner("globex").await;
    let (on_whatsapp, on_sms) = ("+15550000301", "+15550000302");
    for phone in [on_whatsapp, on_sms] {
        app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    }
    // globex's messages go from the host's shared senders: one on WhatsApp (the person wrote there), one by SMS.
    app.whatsapp_wrote(on_whatsapp).await;
    let by_whatsapp =
        app.send_text(&globex, on_whatsapp, "Your parcel is on its way").await.ok(201)["message_id"].as_i64().unwrap();
    let by_sms = app.send_text(&globex, on_sms, "Your code is ready").await.ok(201)["message_id"].as_i64().unwrap();
    for id in [by_whatsapp, by_sms] {
        assert_eq!(app.delivered(&globex, id).await["state"], "sent");
    }
    let (wamid, sid) = (provider_ref(&app, by_whatsapp).await, provider_ref(&app, by_sms).await);

    // acme's app signs statuses of globex's messages, as if about acme's number: they move nothing (a
    // failure would have sent globex's message on by SMS).
    let read = json!([{"field": "messages", "value": {"statuses": [{"id": wamid, "status": "read"}]}}]);
    assert_eq!(notify(&app, "acme-secret", "111", read.clone()).await.ok(200)["applied"], 0);
    let failed = json!([{"field": "messages", "value": {"statuses": [{"id": wamid, "status": "failed",
        "recipient_id": on_whatsapp.trim_start_matches('+'), "errors": [{"code": 131050, "title": "stopped"}]}]}}]);
    assert_eq!(notify(&app, "acme-secret", "111", failed).await.ok(200)["applied"], 0);
    // Naming the host's number does not make acme's signature the host's.
    notify(&app, "acme-secret", "12345", read.clone()).await.error(401, "unauthorized");
    let message = app.message(&globex, by_whatsapp).await;
    assert_eq!(message["state"], "sent");
    assert_eq!(message["attempts"].as_array().unwrap().len(), 1, "no SMS after a forged failure");
    // The host's own signature moves it.
    assert_eq!(notify(&app, "app-secret", "12345", read).await.ok(200)["applied"], 1);

    // The same on Twilio: acme's account signs a status of globex's SMS.
    let status = [
        ("MessageSid", sid.as_str()),
        ("MessageStatus", "undelivered"),
        ("AccountSid", ACME_SID),
        ("From", "+15550002222"),
        ("To", on_sms),
        ("ErrorCode", "21610"),
    ];
    let signed = |route: &str, params: &[(&str, &str)]| {
        let owned: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let url = format!("https://hubbub.example.com/api/v1/providers/twilio/{route}");
        hubbub_host::delivery::receipts::twilio_signature("acme-tw-token", &url, &owned)
    };
    let r = twilio_post(&app, "status", &status, Some(&signed("status", &status))).await;
    assert_eq!(r.ok(200)["applied"], false);
    assert_eq!(app.message(&globex, by_sms).await["state"], "sent");
    // Its opt-out (error 21610) is of acme's sender, not the host's: globex still reaches the phone by SMS.
    let sms_channel = hubbub_host::names::Channel::Sms;
    let of = |account: &'static str, sender: &'static str| {
        hubbub_host::store::opt_outs::reason(&app.state.db, on_sms, sms_channel, account, sender)
    };
    assert_eq!(of(ACME_SID, "+15550002222").await.unwrap().as_deref(), Some("twilio 21610"));
    assert_eq!(of("", "+15550001111").await.unwrap(), None);
    // A STOP that acme's account signs, "to" the host's number, opts the phone out of acme's sender only.
    let stop = [
        ("MessageSid", "SMstop1"),
        ("AccountSid", ACME_SID),
        ("From", on_sms),
        ("To", "+15550001111"),
        ("Body", "STOP"),
        ("NumMedia", "0"),
    ];
    assert_eq!(twilio_post(&app, "inbound", &stop, Some(&signed("inbound", &stop))).await.status, 200);
    routed(&app).await;
    assert_eq!(of("", "+15550001111").await.unwrap(), None);
    let again = app.send_text(&globex, on_sms, "Still here").await.ok(201)["message_id"].as_i64().unwrap();
    let tries = crate::common::tries(&app.delivered(&globex, again).await);
    assert_eq!(tries.last(), Some(&crate::common::t("sms", "sent", "")), "{tries:?}");

    // A partner's own number in the host's own Twilio account (the operator bought it for the partner): the
    // host's signature speaks for it, as the partner's — its STOP is of that partner's sender.
    sms.answer(&numbers_path(HOST_SID), 200, twilio_numbers(&["+15550004444"]));
    let in_host_account = json!({"account_sid": HOST_SID, "auth_token": "tw-token", "from": "+15550004444"});
    put(&app, &globex, "sms", in_host_account).await.ok(200);
    let stop = [
        ("MessageSid", "SMstop2"),
        ("AccountSid", HOST_SID),
        ("From", on_sms),
        ("To", "+15550004444"),
        ("Body", "STOP"),
        ("NumMedia", "0"),
    ];
    assert_eq!(twilio_post(&app, "inbound", &stop, None).await.status, 200);
    routed(&app).await;
    assert_eq!(of(HOST_SID, "+15550004444").await.unwrap().as_deref(), Some("stop"));
    let last = app.send_text(&globex, on_sms, "Are you there?").await.ok(201)["message_id"].as_i64().unwrap();
    let tries = crate::common::tries(&app.delivered(&globex, last).await);
    assert_eq!(tries.last(), Some(&crate::common::t("sms", "skipped", "opted_out")), "{tries:?}");
}

#[tokio::test]
async fn username_pairings_and_template_decisions_belong_to_the_account_that_signed() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    acme_with_own_senders(&app, &wa, &sms).await;
    let globex = app.partner("globex").await;
    let phone = "+15550000311";
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let message = |id: &str, from: Option<&str>, user_id: &str| {
        let mut m = json!({"id": id, "timestamp": (app.now() / 1000).to_string(), "type": "text",
            "text": {"body": "hello"}, "from_user_id": user_id});
        if let Some(from) = from {
            m["from"] = json!(from.trim_start_matches('+'));
        }
        json!([{"field": "messages", "value": {"messaging_product": "whatsapp", "messages": [m]}}])
    };
    // acme's app pairs the username BSUID-1 with the phone, at acme's number.
    assert_eq!(
        notify(&app, "acme-secret", "111", message("wamid.p1", Some(phone), "BSUID-1")).await.ok(200)["inbound"],
        1
    );
    // A message to the host's number with that BSUID only is not the phone's there: it reaches no one.
    assert_eq!(notify(&app, "app-secret", "12345", message("wamid.p2", None, "BSUID-1")).await.ok(200)["inbound"], 1);
    let kept = hubbub_host::store::inbound::find(&app.state.db, hubbub_host::names::Channel::Whatsapp, "wamid.p2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.phone, "", "the host's number never saw BSUID-1 with a phone");
    assert_eq!((kept.sender.as_str(), kept.account.as_str()), ("12345", ""));
    let first = hubbub_host::store::inbound::find(&app.state.db, hubbub_host::names::Channel::Whatsapp, "wamid.p1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((first.sender.as_str(), first.account.as_str()), ("111", "900"));

    // A template of globex's, submitted to Meta under the host's business account.
    wa.answer("/800/message_templates", 200, json!({"id": "77", "status": "PENDING", "category": "UTILITY"}));
    let template = json!({"code": "shipped", "channel": "whatsapp", "lang": "en", "category": "utility",
        "body": "Hi {{name}}, it shipped"});
    let id = app.post(&globex, "/api/v1/templates", template).await.ok(201)["template_id"].as_i64().unwrap();
    assert_eq!(
        app.post(&globex, &format!("/api/v1/templates/{id}/submit"), json!({})).await.ok(200)["status"],
        "pending"
    );
    let decided =
        json!({"field": "message_template_status_update", "value": {"event": "APPROVED", "message_template_id": 77}});
    // acme's app may not decide it (its notification names its own number, so its signature is checked).
    let acme_says = json!([{"field": "messages", "value": {"statuses": []}}, decided.clone()]);
    assert_eq!(notify(&app, "acme-secret", "111", acme_says).await.ok(200)["templates"], 0);
    let state = app.get(&globex, &format!("/api/v1/templates/{id}")).await.ok(200)["status"].clone();
    assert_ne!(state, "approved");
    assert_eq!(notify(&app, "app-secret", "12345", json!([decided])).await.ok(200)["templates"], 1);
    assert_eq!(app.get(&globex, &format!("/api/v1/templates/{id}")).await.ok(200)["status"], "approved");
}

#[tokio::test]
async fn the_whatsapp_webhook_checks_its_signature_before_anything_costs() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    let url = format!("{}/api/v1/providers/whatsapp/webhook", app.base);
    let post = |body: Vec<u8>, signature: Option<String>| {
        let mut r = app.client.post(&url).header("content-type", "application/json").body(body);
        if let Some(signature) = signature {
            r = r.header("x-hub-signature-256", signature);
        }
        async move { Resp::from(r.send().await.unwrap()).await }
    };
    let forged = || Some(format!("sha256={}", "0".repeat(64)));
    // No signature, or not one at all: 401 before the body is read.
    let r = post(b"{}".to_vec(), None).await;
    assert!(r.error(401, "unauthorized").is_none());
    assert!(r.json["error"]["message"].as_str().unwrap().contains("missing"));
    post(b"{}".to_vec(), Some("sha1=abc".into())).await.error(401, "unauthorized");
    // Not JSON: the signature still comes first (401 forged, 400 signed by the host's app).
    post(b"not json".to_vec(), forged()).await.error(401, "unauthorized");
    let signed = hubbub_host::delivery::receipts::meta_signature("app-secret", b"not json");
    post(b"not json".to_vec(), Some(signed)).await.error(400, "bad_request");
    // Many numbers in an unsigned body: refused without looking each up.
    let changes: Vec<Value> = (0..40_000)
        .map(|n| json!({"field": "messages", "value": {"metadata": {"phone_number_id": n.to_string()}}}))
        .collect();
    let many = json!({"entry": [{"id": "1", "changes": changes[..5_000].to_vec()}]}).to_string().into_bytes();
    let r = post(many, forged()).await;
    r.error(401, "unauthorized");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("at most 16 numbers"), "{}", r.json);
    // A body past the provider routes' limit (1 MiB) is 413, unread.
    let huge = json!({"entry": [{"id": "1", "changes": changes}]}).to_string().into_bytes();
    assert!(huge.len() > 1 << 20);
    post(huge, forged()).await.error(413, "payload_too_large");
    // Twilio: a signature that is missing or malformed is 401 at once.
    crate::common::twilio_post(&app, "status", &[("MessageSid", "SM1")], Some("x")).await.error(401, "unauthorized");
}

#[tokio::test]
async fn an_api_key_acts_with_the_role_of_the_member_who_made_it_and_is_audited() {
    let app = TestApp::start_with(|c| c.public_url = "https://hub.example".into()).await;
    let key = app.partner("acme").await;
    let (_, owner) = sign_in(&app, "+15550100011", json!({"invitation": invitation(&app, &key, "owner").await})).await;
    let owner = owner.unwrap();
    let (_, admin) = sign_in(&app, "+15550100012", json!({"invitation": invitation(&app, &key, "admin").await})).await;
    let admin = admin.unwrap();
    let admin_id = admin.get("/api/v1/members/me").await.ok(200)["member"]["id"].as_i64().unwrap();

    // The admin makes a key in the console: it is an admin's.
    let made = admin.send(Method::POST, "/api/v1/api-keys", json!({"name": "ci"})).await.ok(201).clone();
    assert_eq!((made["key"]["role"].as_str(), made["key"]["created_by"].as_i64()), (Some("admin"), Some(admin_id)));
    let admin_key = made["api_key"].as_str().unwrap().to_string();
    let admin_key_id = made["key"]["id"].as_i64().unwrap();
    // With it: no owner invitation, no promotion, no audit log (what the console refuses an admin).
    app.post(&admin_key, "/api/v1/members/invitations", json!({"role": "owner"})).await.error(403, "forbidden");
    let promote = app.patch(&admin_key, &format!("/api/v1/members/{admin_id}"), json!({"role": "owner"})).await;
    promote.error(403, "forbidden");
    app.get(&admin_key, "/api/v1/audit-log").await.error(403, "forbidden");
    app.get(&admin_key, "/api/v1/members").await.ok(200);
    // What an admin may do, it does; a key it makes is an admin's too.
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&admin_key), Some(&json!({"webhook_url": ""})))
        .await
        .ok(200);
    let second = app.post(&admin_key, "/api/v1/api-keys", json!({"name": "ci-2"})).await.ok(201).clone();
    assert_eq!((second["key"]["role"].as_str(), second["key"]["created_by"].as_i64()), (Some("admin"), Some(admin_id)));
    app.send_text(&admin_key, "+15550000399", "hello").await.ok(201);
    // A cross-site request with the admin's cookie is refused, and logged.
    admin
        .call(Method::POST, "/api/v1/api-keys", Some(json!({"name": "x"})), Some("cross-site"))
        .await
        .error(403, "forbidden");
    let member = app.get(&key, "/api/v1/members").await.ok(200)["data"].clone();
    assert_eq!(member.as_array().unwrap().iter().filter(|m| m["role"] == "owner").count(), 1, "nobody was promoted");

    // The log: who made each key, every change made with one (sending messages aside), every refusal.
    let log = owner.get("/api/v1/audit-log").await.ok(200)["data"].clone();
    let seen: Vec<(String, i64, Option<i64>, Option<i64>)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["status"].as_i64().unwrap(),
                e["member_id"].as_i64(),
                e["key_id"].as_i64(),
            )
        })
        .collect();
    let entry = |action: &str, status: i64, key: Option<i64>| (action.to_string(), status, Some(admin_id), key);
    let keys = app.get(&key, "/api/v1/api-keys").await.ok(200)["data"].clone();
    let cli_key = keys.as_array().unwrap().iter().find(|k| k["name"] == "default").unwrap()["id"].as_i64();
    let invited = ("POST /api/v1/members/invitations".to_string(), 201, None, cli_key);
    assert_eq!(
        seen,
        [
            entry("POST /api/v1/api-keys", 403, None),
            entry("POST /api/v1/api-keys", 201, Some(admin_key_id)),
            entry("PUT /api/v1/settings/webhook", 200, Some(admin_key_id)),
            entry("GET /api/v1/audit-log", 403, Some(admin_key_id)),
            entry("PATCH /api/v1/members/{id}", 403, Some(admin_key_id)),
            entry("POST /api/v1/members/invitations", 403, Some(admin_key_id)),
            entry("POST /api/v1/api-keys", 201, None),
            invited.clone(),
            invited,
        ],
        "{log}"
    );
    assert!(log[1]["key_prefix"].as_str().unwrap().starts_with("sk_"));

    // An admin's key may not revoke an owner's (the command line's) key.
    let path = format!("/api/v1/api-keys/{}", cli_key.unwrap());
    app.request(Method::DELETE, &path, Some(&admin_key), None).await.error(403, "forbidden");
    assert!(
        app.get(&key, "/api/v1/api-keys").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["revoked_at"].is_null())
    );
    // The member demoted: their keys act as agents; removed: their keys stop working.
    owner.send(Method::PATCH, &format!("/api/v1/members/{admin_id}"), json!({"role": "agent"})).await.ok(200);
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&admin_key), Some(&json!({"webhook_url": ""})))
        .await
        .error(403, "forbidden");
    owner.send(Method::DELETE, &format!("/api/v1/members/{admin_id}"), json!({})).await.ok(200);
    app.get(&admin_key, "/api/v1/members").await.error(401, "unauthorized");
    // The partner's own key (the command line's) is an owner's.
    app.get(&key, "/api/v1/audit-log").await.ok(200);
}

#[tokio::test]
async fn a_second_developer_sign_up_with_another_e_mail_waits_for_the_first_to_lapse() {
    let app = &TestApp::start().await;
    let phone = "+15550100021";
    let signup = |email: &str| {
        let body = json!({"phone": phone, "email": email});
        async move { app.request(Method::POST, "/api/v1/dev/signup", None, Some(&body)).await }
    };
    signup("ana@example.com").await.ok(202);
    let refused = signup("ana@examp1e.com").await;
    refused.error(409, "conflict");
    assert_eq!(app.sink(phone, "sms").await.len(), 1, "no second code was sent");
    // The same e-mail again is the same sign-up: a new code.
    signup("ana@example.com").await.ok(202);
    // Once the first has lapsed (10 minutes), another e-mail may sign up.
    app.clock.advance_ms(10 * 60 * 1000 + 1);
    signup("ana@examp1e.com").await.ok(202);
}

#[tokio::test]
async fn stream_tickets_are_checked_without_the_writer_and_refusals_are_limited_per_address() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let phone = "+15550100031";
    app.post(&key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let token = app.login(phone).await;
    let open = |ticket: String| {
        let url = format!("{}/api/v1/me/events?ticket={ticket}", app.base);
        let client = app.client.clone();
        async move {
            let r = client.get(url).timeout(std::time::Duration::from_secs(10)).send().await;
            r.map(|r| r.status().as_u16())
        }
    };
    // While the writer is held, a ticket that is not one of ours is answered at once: it takes no write.
    let mut held = app.state.db.begin().await.unwrap();
    match app.state.db.backend() {
        hubbub_host::store::Backend::Postgres => {
            sqlx::query("LOCK TABLE stream_tickets IN EXCLUSIVE MODE").execute(&mut *held).await.unwrap();
        }
        _ => {
            sqlx::query("DELETE FROM stream_tickets WHERE ticket_hash = 'none'").execute(&mut *held).await.unwrap();
        }
    }
    assert_eq!(open(format!("evt_{}", "x".repeat(32))).await.expect("answered while the writer is held"), 401);
    assert_eq!(open("forged".into()).await.unwrap(), 401);
    held.rollback().await.unwrap();
    // Past 30 refused tickets a minute, the address is told to wait; a good ticket then waits too.
    for _ in 0..28 {
        assert_eq!(open(format!("evt_{}", "y".repeat(32))).await.unwrap(), 401);
    }
    assert_eq!(open("forged".into()).await.unwrap(), 429);
    let ticket = || async {
        let r = app.post(&token, "/api/v1/me/events/ticket", json!({})).await;
        r.ok(201)["ticket"].as_str().unwrap().to_string()
    };
    assert_eq!(open(ticket().await).await.unwrap(), 429);
    // The next minute, a good ticket opens the stream.
    app.clock.advance_ms(60_000);
    assert_eq!(open(ticket().await).await.unwrap(), 200);
}

#[tokio::test]
async fn a_token_without_iat_is_accepted_and_ended_by_sign_out_everywhere() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let phone = "+15550100041";
    app.post(&key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    // The contract's claims only: sub and exp.
    let claims = json!({"sub": phone, "exp": app.now() / 1000 + 3600});
    let secret = jsonwebtoken::EncodingKey::from_secret(crate::common::TEST_JWT_SECRET.as_bytes());
    let bare = jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &secret).unwrap();
    app.get(&bare, "/api/v1/me/messages").await.ok(200);
    // Counted as issued at the epoch: a sign-out everywhere ends it.
    let token = app.login(phone).await;
    app.request(Method::DELETE, "/api/v1/me/tokens", Some(&token), None).await;
    app.get(&bare, "/api/v1/me/messages").await.error(401, "unauthorized");
}

#[tokio::test]
async fn a_partners_message_speaks_for_no_one_once_its_sender_is_gone_and_fetches_only_its_files() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let (wa2, sms2) = (wa.clone(), sms.clone());
    let app = TestApp::start_with(move |c| {
        fake_providers(c, &wa2, &sms2);
        c.twilio_account_sid = Some(HOST_SID.into());
        c.workers = false;
    })
    .await;
    acme_with_own_senders(&app, &wa, &sms).await;
    let globex = app.partner("globex").await;
    let phone = "+15550000321";
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let signed = |params: &[(&str, &str)]| {
        let owned: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let url = "https://hubbub.example.com/api/v1/providers/twilio/inbound";
        hubbub_host::delivery::receipts::twilio_signature("acme-tw-token", url, &owned)
    };
    // A file "URL" of acme's that is the Twilio API itself (another account's messages, its own account's
    // list): never fetched, with the host's credentials or its own.
    let host_list = format!("{}/2010-04-01/Accounts/{HOST_SID}/Messages.json", sms.url);
    let own_list = format!("{}/2010-04-01/Accounts/{ACME_SID}/Messages.json", sms.url);
    let mms = [
        ("MessageSid", "MMx1"),
        ("AccountSid", ACME_SID),
        ("From", phone),
        ("To", "+15550002222"),
        ("NumMedia", "2"),
        ("MediaUrl0", host_list.as_str()),
        ("MediaContentType0", "application/json"),
        ("MediaUrl1", own_list.as_str()),
        ("MediaContentType1", "application/json"),
    ];
    assert_eq!(twilio_post(&app, "inbound", &mms, Some(&signed(&mms))).await.status, 200);
    hubbub_host::inbound::route_waiting(&app.state.routing()).await.unwrap();
    let asked: Vec<String> = sms.received().into_iter().map(|r| r.path).collect();
    assert!(!asked.iter().any(|p| p.ends_with("/Messages.json")), "the API was never asked for a 'file': {asked:?}");
    // Then acme's sender goes before a message is routed: it is no one's.
    let text = [
        ("MessageSid", "SMx2"),
        ("AccountSid", ACME_SID),
        ("From", phone),
        ("To", "+15550002222"),
        ("Body", "Please refund me"),
        ("NumMedia", "0"),
    ];
    assert_eq!(twilio_post(&app, "inbound", &text, Some(&signed(&text))).await.status, 200);
    let acme = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap();
    let sms_channel = hubbub_host::names::Channel::Sms;
    assert!(hubbub_host::store::senders::remove(&app.state.db, acme.id, sms_channel).await.unwrap());
    hubbub_host::inbound::route_waiting(&app.state.routing()).await.unwrap();
    let kept = hubbub_host::store::inbound::find(&app.state.db, sms_channel, "SMx2").await.unwrap().unwrap();
    assert_eq!(kept.state, hubbub_host::names::InboundState::Unrouted);
    let conversations = app.get(&globex, "/api/v1/conversations").await.ok(200)["data"].clone();
    assert_eq!(conversations, json!([]), "nothing reached another partner's conversations");
}

#[tokio::test]
async fn a_partners_messaging_service_in_the_hosts_account_keeps_its_opt_outs() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    let globex = app.partner("globex").await;
    let phone = "+15550000331";
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    // The operator's messaging service, bought in the host's own account for globex.
    let service = "MG0123456789abcdef0123456789abcdef";
    sms.answer(&format!("/v1/Services/{service}"), 200, json!({"sid": service, "account_sid": HOST_SID}));
    let own = json!({"account_sid": HOST_SID, "auth_token": "tw-token", "from": service});
    put(&app, &globex, "sms", own).await.ok(200);
    // A STOP to one of its pool's numbers, signed with the host's token, naming the service.
    let stop = [
        ("MessageSid", "SMmg1"),
        ("AccountSid", HOST_SID),
        ("MessagingServiceSid", service),
        ("From", phone),
        ("To", "+15550006666"),
        ("Body", "STOP"),
        ("NumMedia", "0"),
    ];
    assert_eq!(twilio_post(&app, "inbound", &stop, None).await.status, 200);
    routed(&app).await;
    let sms_channel = hubbub_host::names::Channel::Sms;
    let reason = hubbub_host::store::opt_outs::reason(&app.state.db, phone, sms_channel, HOST_SID, service).await;
    assert_eq!(reason.unwrap().as_deref(), Some("stop"));
    let id = app.send_text(&globex, phone, "Still there?").await.ok(201)["message_id"].as_i64().unwrap();
    let tries = crate::common::tries(&app.delivered(&globex, id).await);
    assert_eq!(tries.last(), Some(&crate::common::t("sms", "skipped", "opted_out")), "{tries:?}");
}

#[tokio::test]
async fn a_sender_proved_no_more_goes_to_the_partner_that_proves_it() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    let acme = app.partner("acme").await;
    app.partner("globex").await;
    let globex_sid = "AC9999999999999999999999999999999a";
    // globex took +15550005555 before senders were proved (written straight into the store).
    let globex_id = partner_id(&app, "globex").await;
    let squatted = hubbub_host::store::senders::Sender {
        partner_id: globex_id,
        channel: hubbub_host::names::Channel::Sms,
        address: "+15550005555".into(),
        account: globex_sid.into(),
        token: "globex-tw-token".into(),
        app_secret: None,
        mps: None,
        updated_at: app.now(),
    };
    assert!(hubbub_host::store::senders::set(&app.state.db, &squatted, app.now()).await.unwrap());
    let claim = json!({"account_sid": ACME_SID, "auth_token": "acme-tw-token", "from": "+15550005555"});
    sms.answer(&numbers_path(ACME_SID), 200, twilio_numbers(&["+15550005555"]));
    // While globex's account holds it too, it stays globex's.
    sms.answer(&numbers_path(globex_sid), 200, twilio_numbers(&["+15550005555"]));
    put(&app, &acme, "sms", claim.clone()).await.error(409, "conflict");
    // Once globex's credentials no longer hold it, it is acme's, which proves it.
    sms.answer(&numbers_path(globex_sid), 200, twilio_numbers(&[]));
    put(&app, &acme, "sms", claim).await.ok(200);
    let sender = hubbub_host::store::senders::by_address(&app.state.db, squatted.channel, "+15550005555").await;
    assert_eq!(sender.unwrap().map(|s| s.account).as_deref(), Some(ACME_SID));
}

#[tokio::test]
async fn refusals_are_rate_limited_before_they_are_audited() {
    let app = TestApp::start_with(|c| {
        c.rate_limit_per_s = 1;
        c.rate_limit_burst = 5;
    })
    .await;
    let key = app.partner("acme").await;
    let (_, agent) = sign_in(&app, "+15550100051", json!({"invitation": invitation(&app, &key, "agent").await})).await;
    let agent = agent.unwrap();
    // The owner's key spent one token on the invitation; the agent's session has its own bucket.
    let mut answers = Vec::new();
    for _ in 0..12 {
        answers.push(
            agent.send(Method::PUT, "/api/v1/settings/webhook", json!({"webhook_url": ""})).await.status.as_u16(),
        );
    }
    let refused = answers.iter().filter(|s| **s == 403).count();
    assert!(refused <= 5 && answers.contains(&429), "{answers:?}");
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'PUT /api/v1/settings/webhook'")
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    assert_eq!(rows as usize, refused, "only the refusals that got past the limit are written");
}

#[tokio::test]
async fn a_partners_forged_messages_draw_nothing_sent_to_the_shared_number() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    acme_with_own_senders(&app, &wa, &sms).await;
    let globex = app.partner("globex").await;
    let phone = "+15550000341";
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let acme_id = partner_id(&app, "acme").await;
    // acme's account signs "the phone wrote to acme's number" (the phone never did): acme's conversation.
    let forged = [
        ("MessageSid", "SMforged1"),
        ("AccountSid", ACME_SID),
        ("From", phone),
        ("To", "+15550002222"),
        ("Body", "Hello acme"),
        ("NumMedia", "0"),
    ];
    let owned: Vec<(String, String)> = forged.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let url = "https://hubbub.example.com/api/v1/providers/twilio/inbound";
    let signature = hubbub_host::delivery::receipts::twilio_signature("acme-tw-token", url, &owned);
    assert_eq!(twilio_post(&app, "inbound", &forged, Some(&signature)).await.status, 200);
    routed(&app).await;
    // The phone's own message to the shared number (the host's signature) is globex's, not acme's.
    let real = [
        ("MessageSid", "SMreal1"),
        ("AccountSid", HOST_SID),
        ("From", phone),
        ("To", "+15550001111"),
        ("Body", "Where is my globex order?"),
        ("NumMedia", "0"),
    ];
    assert_eq!(twilio_post(&app, "inbound", &real, None).await.status, 200);
    routed(&app).await;
    let owner_of: Option<i64> = conversation_partner(&app, "Where is my globex order?").await;
    let globex_id = partner_id(&app, "globex").await;
    assert_eq!(owner_of, Some(globex_id));
    assert_ne!(owner_of, Some(acme_id));
}

#[tokio::test]
async fn a_partners_forged_whatsapp_message_draws_nothing_sent_to_the_shared_sms_number() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    // acme has its own WhatsApp number only: on SMS it is one of the shared number's partners.
    let acme = app.partner("acme").await;
    wa.answer("/900/phone_numbers", 200, json!({"data": [{"id": "111"}]}));
    let own_wa = json!({"phone_number_id": "111", "business_account_id": "900", "token": "acme-wa", "app_secret": "acme-secret"});
    put(&app, &acme, "whatsapp", own_wa).await.ok(200);
    let globex = app.partner("globex").await;
    let phone = "+15550000342";
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    // acme's app secret signs "the phone wrote to acme's WhatsApp number" (it never did), a moment later
    // than anything globex has: acme's conversation is the phone's latest.
    let forged = json!([{"field": "messages", "value": {"messaging_product": "whatsapp", "messages": [
        {"from": phone.trim_start_matches('+'), "id": "wamid.forged342", "timestamp": (app.now() / 1000).to_string(),
         "type": "text", "text": {"body": "Hello acme"}}]}}]);
    assert_eq!(notify(&app, "acme-secret", "111", forged).await.ok(200)["inbound"], 1);
    routed(&app).await;
    let acme_id = partner_id(&app, "acme").await;
    let forged_in: Option<i64> = conversation_partner(&app, "Hello acme").await;
    assert_eq!(forged_in, Some(acme_id), "the forged message opened acme's conversation");
    // The phone's own SMS to the shared number (the host's signature) does not go on in it: it is globex's.
    let real = [
        ("MessageSid", "SMreal342"),
        ("AccountSid", HOST_SID),
        ("From", phone),
        ("To", "+15550001111"),
        ("Body", "Where is my globex parcel?"),
        ("NumMedia", "0"),
    ];
    assert_eq!(twilio_post(&app, "inbound", &real, None).await.status, 200);
    routed(&app).await;
    let owner_of: Option<i64> = conversation_partner(&app, "Where is my globex parcel?").await;
    let globex_id = partner_id(&app, "globex").await;
    assert_eq!(owner_of, Some(globex_id));
}

#[tokio::test]
async fn whatsapps_window_is_the_numbers_a_person_wrote_to() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = host(&wa, &sms).await;
    acme_with_own_senders(&app, &wa, &sms).await;
    let globex = app.partner("globex").await;
    let phone = "+15550000351";
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    // The phone writes to acme's number (or acme's app says so): the window of acme's number opens.
    let m = json!([{"field": "messages", "value": {"messaging_product": "whatsapp", "messages": [
        {"from": phone.trim_start_matches('+'), "id": "wamid.win1", "timestamp": (app.now() / 1000).to_string(),
         "type": "reaction", "reaction": {"message_id": "wamid.0", "emoji": "👍"}}]}}]);
    assert_eq!(notify(&app, "acme-secret", "111", m).await.ok(200)["inbound"], 1);
    // Not the shared number's: globex's free-form text waits for a template there, and goes by SMS.
    let id = app.send_text(&globex, phone, "Your order").await.ok(201)["message_id"].as_i64().unwrap();
    let tries = crate::common::tries(&app.delivered(&globex, id).await);
    assert_eq!(
        tries,
        [crate::common::t("whatsapp", "skipped", "outside_24h_window"), crate::common::t("sms", "sent", "")]
    );
    // Writing to the shared number opens its own.
    app.whatsapp_wrote(phone).await;
    let id = app.send_text(&globex, phone, "Your order, again").await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(crate::common::tries(&app.delivered(&globex, id).await), [crate::common::t("whatsapp", "sent", "")]);
}
