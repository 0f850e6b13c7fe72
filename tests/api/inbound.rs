//! Messages users send from SMS and WhatsApp: provider-shaped, signed webhooks into a host whose providers
//! are fake servers that record what they receive.

use serde_json::{Value, json};

use crate::common::{
    FakeServer, Resp, TestApp, eventually, t, tries, twilio_post, whatsapp_notify, whatsapp_notify_signed,
};
use hubbub_host::inbound::UNROUTED_REPLY;

/// Twilio's inbound webhook: `From` wrote `Body` to our number (signed, or with `signature`, forged).
pub(crate) async fn sms_in(app: &TestApp, sid: &str, from: &str, body: &str, signature: Option<&str>) -> Resp {
    let params = [("MessageSid", sid), ("From", from), ("To", "+15550001111"), ("Body", body), ("NumMedia", "0")];
    twilio_post(app, "inbound", &params, signature).await
}

/// A WhatsApp Cloud API notification of one message from `from` to our phone number id `12345`.
fn whatsapp_message(id: &str, from: &str, at_ms: i64, kind: Value) -> Value {
    let mut message = json!({"from": from.trim_start_matches('+'), "id": id, "timestamp": (at_ms / 1000).to_string()});
    for (k, v) in kind.as_object().unwrap() {
        message[k] = v.clone();
    }
    json!([{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550009999", "phone_number_id": "12345"},
        "contacts": [{"profile": {"name": "Ana"}, "wa_id": from.trim_start_matches('+')}], "messages": [message]}}])
}

/// The partner's conversations.
async fn conversations(app: &TestApp, key: &str) -> Vec<Value> {
    app.get(key, "/api/v1/conversations").await.ok(200)["data"].as_array().unwrap().clone()
}

/// The messages of conversation `id` as the partner sees it.
async fn thread(app: &TestApp, key: &str, id: i64) -> Vec<Value> {
    app.get(key, &format!("/api/v1/conversations/{id}")).await.ok(200)["messages"].as_array().unwrap().clone()
}

/// Waits until every kept inbound message is routed.
async fn routed(app: &TestApp) {
    eventually("inbound messages routed", || async {
        hubbub_host::store::inbound::waiting(&app.state.db, 10).await.unwrap().is_empty()
    })
    .await;
}

/// What the fake provider received for `phone` (Twilio's `To` form field; the Graph API's `to`).
fn sent_to(server: &FakeServer, phone: &str) -> Vec<Value> {
    let digits = phone.trim_start_matches('+');
    server
        .received()
        .iter()
        .filter_map(|r| {
            let json = r.json();
            if json["to"].as_str() == Some(digits) {
                return Some(json);
            }
            let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&r.body).ok()?;
            let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            (get("To").as_deref() == Some(phone)).then(|| json!({"To": get("To"), "Body": get("Body")}))
        })
        .collect()
}

#[tokio::test]
async fn an_sms_opens_support_goes_on_in_it_and_agents_answer_by_sms() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000101";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);

    // The first SMS opens a conversation with the partner the phone is linked to; it is answered with
    // empty TwiML at once.
    let r = sms_in(&app, "SMin1", phone, "My parcel is late", None).await;
    assert_eq!(r.status, 200);
    routed(&app).await;
    let list = conversations(&app, &acme).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["channel"], "sms");
    assert_eq!(list[0]["state"], "open");
    let id = list[0]["conversation_id"].as_i64().unwrap();
    let messages = thread(&app, &acme, id).await;
    assert_eq!(messages.len(), 1);
    assert_eq!((messages[0]["direction"].as_str(), messages[0]["channel"].as_str()), (Some("in"), Some("sms")));
    assert_eq!(messages[0]["body"], "My parcel is late");

    // Twilio retries the webhook: nothing new. A bad signature is 401, a webhook without From 422.
    sms_in(&app, "SMin1", phone, "My parcel is late", None).await;
    sms_in(&app, "SMin2", phone, "Forged", Some("bm90IGl0")).await.error(401, "unauthorized");
    let params = [("MessageSid", "SMin3"), ("To", "+15550001111"), ("Body", "x")];
    let r = twilio_post(&app, "inbound", &params, None).await;
    r.field_error("From");

    // An agent's answer goes back by SMS (the user has no app here, nor WhatsApp open), and the thread waits
    // for the user; their next SMS goes on in the same thread and reopens it.
    let reply =
        app.post(&acme, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "It ships today"})).await;
    let reply_id = reply.ok(201)["message_id"].as_i64().unwrap();
    let reply = app.delivered(&acme, reply_id).await;
    assert_eq!(crate::common::attempts(&reply), vec![("sms".to_string(), "sent".to_string())]);
    let out = sent_to(&sms, phone);
    assert_eq!(out.last().unwrap()["Body"], "acme Inc.: It ships today", "{out:?}");
    assert_eq!(conversations(&app, &acme).await[0]["state"], "pending");
    sms_in(&app, "SMin4", phone, "Thanks!", None).await;
    routed(&app).await;
    let messages = thread(&app, &acme, id).await;
    let bodies: Vec<&str> = messages.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["My parcel is late", "It ships today", "Thanks!"]);
    assert_eq!(conversations(&app, &acme).await.len(), 1);
    assert_eq!(conversations(&app, &acme).await[0]["state"], "open");

    // An agent who answers from the console is named by first name in the SMS, beside the partner.
    let agent = "+15550000199";
    let invitation = crate::members::invitation(&app, &acme, "agent").await;
    app.request(reqwest::Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": agent}))).await.ok(202);
    let text = sent_to(&sms, agent).last().unwrap()["Body"].as_str().unwrap().to_string();
    let code = text.split(|c: char| !c.is_ascii_digit()).find(|w| w.len() == 6).unwrap().to_string();
    let body = json!({"phone": agent, "code": code, "invitation": invitation, "name": "Ana Lima"});
    let signed = app.client.post(format!("{}/api/v1/members/sessions", app.base)).json(&body).send().await.unwrap();
    let cookie = signed.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let ana = crate::members::Browser { app: &app, cookie };
    let path = format!("/api/v1/conversations/{id}/messages");
    let reply = ana.send(reqwest::Method::POST, &path, json!({"body": "Found it"})).await;
    app.delivered(&acme, reply.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(sent_to(&sms, phone).last().unwrap()["Body"], "Ana from acme Inc.: Found it");
}

#[tokio::test]
async fn stop_opts_a_phone_out_of_sms_and_start_opts_it_back_in() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000102";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);

    sms_in(&app, "SMstop", phone, " Stop ", None).await;
    routed(&app).await;
    assert!(conversations(&app, &acme).await.is_empty(), "a keyword opens no conversation");
    let id = app.send_text(&acme, phone, "Your order shipped").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&acme, id).await;
    assert_eq!(m["state"], "failed");
    let tried = tries(&m);
    assert_eq!(tried, [t("whatsapp", "skipped", "outside_24h_window"), t("sms", "skipped", "opted_out")]);
    assert!(sent_to(&sms, phone).is_empty(), "no SMS went to an opted-out phone");

    sms_in(&app, "SMstart", phone, "START", None).await;
    routed(&app).await;
    let id = app.send_text(&acme, phone, "Your order arrived").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&acme, id).await;
    assert_eq!(m["state"], "sent");
    assert_eq!(sent_to(&sms, phone).len(), 1);

    // In a conversation a keyword is also the user's answer: "Cancel" opts out and the agent reads it.
    sms_in(&app, "SMconv", phone, "Can I change my order?", None).await;
    routed(&app).await;
    let id = conversations(&app, &acme).await[0]["conversation_id"].as_i64().unwrap();
    sms_in(&app, "SMcancel", phone, "Cancel", None).await;
    routed(&app).await;
    let bodies: Vec<String> =
        thread(&app, &acme, id).await.iter().map(|m| m["body"].as_str().unwrap().to_string()).collect();
    assert_eq!(bodies, ["Can I change my order?", "Cancel"]);
    let sms_channel = hubbub_host::names::Channel::Sms;
    let reason =
        hubbub_host::store::opt_outs::reason(&app.state.db, phone, sms_channel, "", "+15550001111").await.unwrap();
    assert_eq!(reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn whatsapp_messages_reach_the_conversation_and_answers_keep_to_the_window() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000103";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);

    let text =
        whatsapp_message("wamid.u1", phone, app.now(), json!({"type": "text", "text": {"body": "Do you have shoes?"}}));
    assert_eq!(app.whatsapp_notify(text.clone()).await.ok(200)["inbound"], 1);
    let tap = json!({"type": "interactive", "interactive": {"type": "button_reply", "button_reply": {"id": "red", "title": "Red ones"}}});
    assert_eq!(app.whatsapp_notify(whatsapp_message("wamid.u2", phone, app.now(), tap)).await.ok(200)["inbound"], 1);
    // Meta retries a notification: nothing twice. A forged one is 401. Another number of the same Meta app
    // is none of this host's business.
    assert_eq!(app.whatsapp_notify(text.clone()).await.ok(200)["inbound"], 0);
    let mut elsewhere = whatsapp_message("wamid.u3", phone, app.now(), json!({"type": "text", "text": {"body": "?"}}));
    elsewhere[0]["value"]["metadata"]["phone_number_id"] = json!("99999");
    assert_eq!(app.whatsapp_notify(elsewhere).await.ok(200)["inbound"], 0);
    whatsapp_notify_signed(&app.client, &app.base, text, Some("sha256=00")).await.error(401, "unauthorized");
    routed(&app).await;
    let list = conversations(&app, &acme).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["channel"], "whatsapp");
    let id = list[0]["conversation_id"].as_i64().unwrap();
    let messages = thread(&app, &acme, id).await;
    let seen: Vec<(&str, &str)> =
        messages.iter().map(|m| (m["body"].as_str().unwrap(), m["channel"].as_str().unwrap())).collect();
    assert_eq!(seen, [("Do you have shoes?", "whatsapp"), ("Red ones", "whatsapp")]);

    // The agent's answer goes out on WhatsApp, as the Cloud API's text message.
    let reply = app.post(&acme, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "Yes, size?"})).await;
    let reply = app.delivered(&acme, reply.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(crate::common::attempts(&reply), vec![("whatsapp".to_string(), "sent".to_string())]);
    let out = sent_to(&wa, phone);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["messaging_product"], "whatsapp");
    assert_eq!(out[0]["type"], "text");
    assert_eq!(out[0]["text"]["body"], "acme Inc.: Yes, size?");

    // A day later the window is shut: a free-form answer is refused, naming it.
    app.clock.advance_ms(24 * 60 * 60 * 1000 + 1_000);
    let refused =
        app.post(&acme, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "Still there?"})).await;
    refused.error(409, "conflict");
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("24-hour window"), "{message}");
    assert_eq!(thread(&app, &acme, id).await.len(), 3, "the refused answer is not kept");

    // A partner who lets such answers go on by the other channels: WhatsApp is skipped, SMS takes it.
    let fallback = json!({"whatsapp_window_fallback": true});
    let settings = app.request(reqwest::Method::PUT, "/api/v1/settings/delivery", Some(&acme), Some(&fallback)).await;
    assert_eq!(settings.ok(200)["whatsapp_window_fallback"], true);
    assert_eq!(app.get(&acme, "/api/v1/settings/delivery").await.ok(200)["whatsapp_window_fallback"], true);
    let late = app.post(&acme, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "Still there?"})).await;
    let late = app.delivered(&acme, late.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(tries(&late), [t("whatsapp", "skipped", "outside_24h_window"), t("sms", "sent", "")]);
    assert_eq!(sent_to(&wa, phone).len(), 1, "nothing more on WhatsApp");
    assert_eq!(sent_to(&sms, phone).last().unwrap()["Body"], "acme Inc.: Still there?");
}

#[tokio::test]
async fn a_new_conversation_is_with_the_partner_written_to_and_strangers_get_one_polite_reply() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;

    // A phone linked to no partner: one polite reply, however often it writes.
    let stranger = "+15550000104";
    sms_in(&app, "SMx1", stranger, "hello?", None).await;
    routed(&app).await;
    sms_in(&app, "SMx2", stranger, "anyone?", None).await;
    routed(&app).await;
    let replies = sent_to(&sms, stranger);
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0]["Body"], UNROUTED_REPLY);
    assert!(conversations(&app, &acme).await.is_empty() && conversations(&app, &globex).await.is_empty());

    // Linked to two partners: an SMS goes to the one linked last …
    let phone = "+15550000105";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.clock.advance_ms(1_000);
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    sms_in(&app, "SMy1", phone, "Where is my invoice?", None).await;
    routed(&app).await;
    assert_eq!(conversations(&app, &globex).await.len(), 1);
    assert!(conversations(&app, &acme).await.is_empty());

    // … and a WhatsApp reply to acme's message goes to acme, though globex's thread is open.
    app.whatsapp_wrote(phone).await;
    let sent = app.send_text(&acme, phone, "Your parcel is on its way").await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(app.delivered(&acme, sent).await["channel"], "whatsapp");
    let wamid = format!("wamid.{}", wa.received().len());
    let answer =
        json!({"type": "text", "text": {"body": "Thank you"}, "context": {"from": "15550009999", "id": wamid}});
    app.whatsapp_notify(whatsapp_message("wamid.y2", phone, app.now(), answer)).await.ok(200);
    routed(&app).await;
    let list = conversations(&app, &acme).await;
    assert_eq!(list.len(), 1);
    let id = list[0]["conversation_id"].as_i64().unwrap();
    assert_eq!(thread(&app, &acme, id).await[0]["body"], "Thank you");
    assert_eq!(conversations(&app, &globex).await.len(), 1);
}

/// A host whose WhatsApp templates Meta reviews (the fake Graph API under business account `waba-1`).
async fn reviewed_host(wa: &FakeServer, sms: &FakeServer) -> TestApp {
    let (wa, sms) = (wa.clone(), sms.clone());
    TestApp::start_with(move |c| {
        crate::common::fake_providers(c, &wa, &sms);
        c.whatsapp_business_account_id = Some("waba-1".into());
    })
    .await
}

/// A `whatsapp` template of `category` that Meta approved (Meta's id `meta_id`).
async fn approved_template(app: &TestApp, wa: &FakeServer, key: &str, code: &str, category: &str, meta_id: i64) {
    let answer = json!({"id": meta_id.to_string(), "status": "PENDING", "category": category.to_uppercase()});
    wa.answer("/waba-1/message_templates", 200, answer);
    let t = json!({"code": code, "channel": "whatsapp", "lang": "en", "category": category, "body": "Hi {{name}}"});
    let id = app.post(key, "/api/v1/templates", t).await.ok(201)["template_id"].as_i64().unwrap();
    app.post(key, &format!("/api/v1/templates/{id}/submit"), json!({})).await.ok(200);
    let name = code.replace('-', "_");
    let approved = json!([{"field": "message_template_status_update", "value": {"event": "APPROVED",
        "message_template_id": meta_id, "message_template_name": name, "message_template_language": "en", "reason": "NONE"}}]);
    assert_eq!(app.whatsapp_notify(approved).await.ok(200)["templates"], 1);
}

#[tokio::test]
async fn a_whatsapp_marketing_stop_keeps_marketing_templates_out_until_the_person_writes_again() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = reviewed_host(&wa, &sms).await;
    let acme = app.partner("acme").await;
    approved_template(&app, &wa, &acme, "spring-sale", "marketing", 71).await;
    approved_template(&app, &wa, &acme, "order-update", "utility", 72).await;
    let phone = "+15550000106";
    let send = |code: &str| json!({"phone": phone, "template_code": code, "vars": {"name": "Ana"}});
    // Meta: the person stopped marketing messages from the business (error 131050).
    let stopped = json!([{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"phone_number_id": "12345"},
        "statuses": [{"id": "wamid.unknown", "status": "failed", "recipient_id": phone.trim_start_matches('+'),
            "errors": [{"code": 131050, "title": "User has stopped marketing messages"}]}]}}]);
    whatsapp_notify(&app.client, &app.base, stopped).await.ok(200);
    // A marketing template: not on WhatsApp (SMS instead); a utility one still is.
    let id = app.post(&acme, "/api/v1/messages", send("spring-sale")).await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(tries(&app.delivered(&acme, id).await), [t("whatsapp", "skipped", "opted_out"), t("sms", "sent", "")]);
    let id = app.post(&acme, "/api/v1/messages", send("order-update")).await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(tries(&app.delivered(&acme, id).await), [t("whatsapp", "sent", "")]);
    let to_phone: Vec<Value> = sent_to(&wa, phone);
    assert_eq!(to_phone.len(), 1);
    assert_eq!(to_phone[0]["template"]["name"], "order_update");

    // They write again: marketing reaches them on WhatsApp again.
    app.whatsapp_wrote(phone).await;
    routed(&app).await;
    let id = app.post(&acme, "/api/v1/messages", send("spring-sale")).await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(tries(&app.delivered(&acme, id).await), [t("whatsapp", "sent", "")]);
}

#[tokio::test]
async fn outside_the_window_an_agent_answers_a_whatsapp_user_with_an_approved_template() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = reviewed_host(&wa, &sms).await;
    let acme = app.partner("acme").await;
    approved_template(&app, &wa, &acme, "order-update", "utility", 73).await;
    let phone = "+15550000109";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let text = whatsapp_message("wamid.w1", phone, app.now(), json!({"type": "text", "text": {"body": "Any news?"}}));
    app.whatsapp_notify(text).await.ok(200);
    routed(&app).await;
    let id = conversations(&app, &acme).await[0]["conversation_id"].as_i64().unwrap();
    app.clock.advance_ms(24 * 60 * 60 * 1000 + 1_000);
    let path = format!("/api/v1/conversations/{id}/messages");
    app.post(&acme, &path, json!({"body": "Still there?"})).await.error(409, "conflict");
    let answer = app.post(&acme, &path, json!({"template_code": "order-update", "vars": {"name": "Ana"}})).await;
    let answer = app.delivered(&acme, answer.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(tries(&answer), [t("whatsapp", "sent", "")]);
    assert_eq!(sent_to(&wa, phone).last().unwrap()["type"], "template");
}

#[tokio::test]
async fn twilio_refusing_an_opted_out_phone_opts_it_out_here_too() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000107";
    let first = app.send_text(&acme, phone, "Your order shipped").await.ok(201)["message_id"].as_i64().unwrap();
    let sid = app.delivered(&acme, first).await["attempts"][1]["provider_ref"].as_str().unwrap().to_string();
    // The phone had sent STOP to Twilio's number directly: Twilio's callback says so (error 21610).
    let params = [
        ("MessageSid", sid.as_str()),
        ("MessageStatus", "failed"),
        ("ErrorCode", "21610"),
        ("To", phone),
        ("From", "+15550001111"),
        ("AccountSid", "AC1"),
    ];
    let r = twilio_post(&app, "status", &params, None).await;
    assert_eq!(r.ok(200)["applied"], true);
    let next = app.send_text(&acme, phone, "Your order arrived").await.ok(201)["message_id"].as_i64().unwrap();
    let m = app.delivered(&acme, next).await;
    assert_eq!(tries(&m), [t("whatsapp", "skipped", "outside_24h_window"), t("sms", "skipped", "opted_out")]);
}

#[tokio::test]
async fn a_message_whose_routing_keeps_failing_is_set_aside_and_holds_up_no_other() {
    use hubbub_host::names::{Channel, InboundState};
    use hubbub_host::store::inbound::{self, MAX_ATTEMPTS, NewInbound};
    let app = TestApp::start_with(|c| c.workers = false).await;
    let db = &app.state.db;
    let message = |id: &str| NewInbound {
        channel: Channel::Sms,
        provider_ref: id.to_string(),
        phone: "+15550000108".into(),
        user_id: None,
        sender: "dev".into(),
        account: String::new(),
        body: Some("hello".into()),
        content: json!({}),
        context_ref: None,
        received_at: app.now(),
    };
    let received = [message("SMfail"), message("SMnext")];
    assert_eq!(hubbub_host::inbound::receive(&app.state.routing().delivery, &received).await.unwrap(), 2);
    for _ in 1..MAX_ATTEMPTS {
        inbound::failed(db, inbound::waiting(db, 1).await.unwrap()[0].id, app.now()).await.unwrap();
    }
    assert_eq!(inbound::waiting(db, 1).await.unwrap()[0].provider_ref, "SMfail", "still tried, first");
    inbound::failed(db, inbound::waiting(db, 1).await.unwrap()[0].id, app.now()).await.unwrap();
    let set_aside = inbound::find(db, Channel::Sms, "SMfail").await.unwrap().unwrap();
    assert_eq!(set_aside.state, InboundState::Failed);
    let waiting = inbound::waiting(db, 10).await.unwrap();
    assert_eq!(waiting.iter().map(|m| m.provider_ref.as_str()).collect::<Vec<_>>(), ["SMnext"]);
}

/// What the fake provider received for `phone` after the first `seen`, once there are at least `n` more.
pub(crate) async fn more_sent(server: &FakeServer, phone: &str, seen: usize, n: usize) -> Vec<Value> {
    eventually("the bot's answer sent", || async { sent_to(server, phone).len() >= seen + n }).await;
    sent_to(server, phone)[seen..].to_vec()
}

/// A reply button or list row tapped on WhatsApp.
fn tap(kind: &str, id: &str, title: &str) -> Value {
    json!({"type": "interactive", "interactive": {"type": kind, kind: {"id": id, "title": title}}})
}

/// The token of a form link in a text.
fn form_token(text: &str) -> String {
    let start = text.find("https://hubbub.example.com/f/").expect(text) + "https://hubbub.example.com/f/".len();
    text[start..].split_whitespace().next().unwrap().to_string()
}

/// The shop sample bot, set as the partner's entry bot on WhatsApp and SMS with its flow `order`.
pub(crate) async fn shop_on_channels(app: &TestApp, key: &str) {
    crate::bots::local_bot(app, key, "shop", "shop").await;
    let bot = app
        .patch(
            key,
            "/api/v1/bots/shop",
            json!({"channels": ["inapp", "whatsapp", "sms"], "entry": ["sms", "whatsapp"], "entry_flow": "order"}),
        )
        .await;
    let bot = &bot.ok(200)["bot"];
    assert_eq!((bot["entry"].clone(), bot["entry_flow"].clone()), (json!(["whatsapp", "sms"]), json!("order")));
}

/// `POST /pay/{ref}` of the dev checkout with Pay.
async fn pay(app: &TestApp, checkout_url: &str) {
    let reference = checkout_url.rsplit('/').next().unwrap();
    let r = app
        .client
        .post(format!("{}/pay/{reference}", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("action=pay")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn the_shop_bot_runs_on_whatsapp_with_buttons_a_list_a_form_link_and_a_checkout() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000201";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    shop_on_channels(&app, &acme).await;
    let now = app.now();
    let say = |id: &str, kind: Value| app.whatsapp_notify(whatsapp_message(id, phone, now, kind));

    // "Hi" on WhatsApp starts the entry flow: its button menu is WhatsApp's reply buttons.
    say("wamid.s1", json!({"type": "text", "text": {"body": "Hi"}})).await.ok(200);
    let out = more_sent(&wa, phone, 0, 1).await;
    assert_eq!(
        out[0],
        json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": phone.trim_start_matches('+'),
            "type": "interactive", "interactive": {"type": "button", "body": {"text": "What would you like?"},
            "action": {"buttons": [{"type": "reply", "reply": {"id": "coffee", "title": "Coffee"}},
                                   {"type": "reply", "reply": {"id": "tea", "title": "Tea"}}]}}})
    );
    let sessions = app.get(&acme, "/api/v1/flow-sessions?bot=shop").await.ok(200)["data"].clone();
    assert_eq!((sessions[0]["kind"].as_str(), sessions[0]["flow"].as_str()), (Some("flow"), Some("order")));

    // Tapping "Tea" is the menu's choice: the list of sizes and extras, in its sections.
    say("wamid.s2", tap("button_reply", "tea", "Tea")).await.ok(200);
    let out = more_sent(&wa, phone, 1, 1).await;
    let list = &out[0]["interactive"];
    assert_eq!((list["type"].as_str(), list["action"]["button"].as_str()), (Some("list"), Some("Choose")));
    assert_eq!(
        list["action"]["sections"],
        json!([{"title": "Size", "rows": [{"id": "small", "title": "Small"}, {"id": "large", "title": "Large"}]},
               {"title": "Extras", "rows": [{"id": "milk", "title": "Milk"}, {"id": "none", "title": "No extras"}]}])
    );
    // A list row, then another: a text and the sizes again, then the form as a cta_url button.
    say("wamid.s3", tap("list_reply", "milk", "Milk")).await.ok(200);
    let out = more_sent(&wa, phone, 2, 2).await;
    assert_eq!(out[0]["text"]["body"], "Milk it is.");
    assert_eq!(out[1]["interactive"]["type"], "list");
    say("wamid.s4", tap("list_reply", "large", "Large")).await.ok(200);
    let out = more_sent(&wa, phone, 4, 1).await;
    let form = &out[0]["interactive"];
    assert_eq!(form["type"], "cta_url");
    assert_eq!(form["body"]["text"], "Please fill in Delivery.");
    assert_eq!(form["action"]["name"], "cta_url");
    assert_eq!(form["action"]["parameters"]["display_text"], "Open the form");
    let token = form_token(form["action"]["parameters"]["url"].as_str().unwrap());

    // The link opens the form without a login; its values are checked as in the app, and it is used once.
    let linked = app.client.get(format!("{}/api/v1/form-links/{token}", app.base)).send().await.unwrap();
    let linked: Value = linked.json().await.unwrap();
    assert_eq!((linked["screen"]["id"].as_str(), linked["channel"].as_str()), (Some("delivery"), Some("whatsapp")));
    assert_eq!(linked["bot"], "shop bot");
    let submit = |values: Value| {
        app.client.post(format!("{}/api/v1/form-links/{token}", app.base)).json(&json!({"values": values})).send()
    };
    let refused: Value = submit(json!({"address": ""})).await.unwrap().json().await.unwrap();
    assert_eq!(refused["error"]["code"], "validation", "{refused}");
    assert!(refused["error"]["fields"]["address"].is_string() && refused["error"]["fields"]["when"].is_string());
    let sent = submit(json!({"address": "1 Main St", "when": "2026-12-01"})).await.unwrap();
    assert_eq!(sent.status(), 200);
    assert_eq!(sent.json::<Value>().await.unwrap(), json!({"state": "in_progress", "channel": "whatsapp"}));
    let again = submit(json!({"address": "1 Main St", "when": "2026-12-01"})).await.unwrap();
    assert_eq!(again.status(), 409);
    let nobody = app.client.get(format!("{}/api/v1/form-links/nope", app.base)).send().await.unwrap();
    assert_eq!(nobody.status(), 404);

    // The payment goes out as a checkout button; once paid, the flow's completion arrives as text.
    let out = more_sent(&wa, phone, 5, 1).await;
    let checkout = &out[0]["interactive"];
    assert_eq!(checkout["type"], "cta_url");
    assert_eq!(checkout["body"]["text"], "large tea with milk: 4.00 EUR.");
    assert_eq!(checkout["action"]["parameters"]["display_text"], "Pay");
    pay(&app, checkout["action"]["parameters"]["url"].as_str().unwrap()).await;
    let out = more_sent(&wa, phone, 6, 2).await;
    assert_eq!(out[0]["text"]["body"], "Paid, thank you! Your large tea with milk arrives on 2026-12-01.");
    let done = out[1]["text"]["body"].as_str().unwrap();
    assert!(done.starts_with("Done.\n") && done.contains("item: tea") && done.contains("address: 1 Main St"), "{done}");
    let sessions = app.get(&acme, "/api/v1/flow-sessions?bot=shop").await.ok(200)["data"].clone();
    assert_eq!(sessions[0]["state"], "completed");
    // Nothing reached a support conversation, and the SMS provider was never used.
    assert!(conversations(&app, &acme).await.is_empty());
    assert!(sms.received().is_empty());
}

#[tokio::test]
async fn the_shop_bot_runs_by_sms_with_numbered_replies() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000202";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    shop_on_channels(&app, &acme).await;

    sms_in(&app, "SMs1", phone, "order", None).await;
    let out = more_sent(&sms, phone, 0, 1).await;
    assert_eq!(out[0]["Body"], "What would you like?\n1. Coffee\n2. Tea\nReply 1 or 2.");
    // A number the menu does not have reaches the bot as text; it refuses it, and the person is told how
    // to answer, never left in silence.
    sms_in(&app, "SMs2", phone, "7", None).await;
    let out = more_sent(&sms, phone, 1, 1).await;
    assert_eq!(
        out[0]["Body"],
        "Sorry, shop bot could not take that just now. Please reply with one of the numbers above."
    );
    sms_in(&app, "SMs3", phone, "2", None).await;
    let out = more_sent(&sms, phone, 2, 1).await;
    assert_eq!(
        out[0]["Body"],
        "Which size? You can pick an extra first.\n1. Small\n2. Large\n3. Milk\n4. No extras\nReply 1, 2, 3 or 4."
    );
    // A label answers too (any case).
    sms_in(&app, "SMs4", phone, "small", None).await;
    let out = more_sent(&sms, phone, 3, 1).await;
    let text = out[0]["Body"].as_str().unwrap();
    assert!(text.starts_with("Please fill in Delivery. Open the form: https://hubbub.example.com/f/"), "{text}");
    let first = form_token(text);
    // Writing while the form waits sends its link again (a new one); the first still opens it.
    sms_in(&app, "SMs5", phone, "where is the form?", None).await;
    let out = more_sent(&sms, phone, 4, 1).await;
    let second = form_token(out[0]["Body"].as_str().unwrap());
    assert_ne!(first, second);
    let sent = app
        .client
        .post(format!("{}/api/v1/form-links/{first}", app.base))
        .json(&json!({"values": {"address": "2 High St", "when": "2026-12-02"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    // Sending the form used up every link to it.
    let late = app
        .client
        .post(format!("{}/api/v1/form-links/{second}", app.base))
        .json(&json!({"values": {"address": "2 High St", "when": "2026-12-02"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 409);
    let out = more_sent(&sms, phone, 5, 1).await;
    let text = out[0]["Body"].as_str().unwrap();
    assert!(text.starts_with("small tea: 2.50 EUR. Pay: "), "{text}");
    pay(&app, text.rsplit(' ').next().unwrap()).await;
    let out = more_sent(&sms, phone, 6, 2).await;
    assert_eq!(out[0]["Body"], "Paid, thank you! Your small tea arrives on 2026-12-02.");
    assert!(out[1]["Body"].as_str().unwrap().starts_with("Done.\naddress: 2 High St\n"), "{out:?}");
    assert!(wa.received().is_empty());
}

#[tokio::test]
async fn a_session_on_whatsapp_comes_before_support_and_a_quiet_one_lapses() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000203";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    crate::bots::local_bot(&app, &acme, "helper", "chat").await;
    // The entry needs the channel among the bot's; only WhatsApp and SMS can be entries; the flow must be
    // the component's.
    app.patch(&acme, "/api/v1/bots/helper", json!({"entry": ["whatsapp"]})).await.field_error("entry");
    app.patch(&acme, "/api/v1/bots/helper", json!({"channels": ["inapp"], "entry": ["inapp"]}))
        .await
        .field_error("entry");
    app.patch(&acme, "/api/v1/bots/helper", json!({"channels": ["whatsapp"], "entry_flow": "nope"}))
        .await
        .field_error("entry_flow");
    app.patch(&acme, "/api/v1/bots/helper", json!({"channels": ["whatsapp"], "entry": ["whatsapp"]})).await.ok(200);
    // Another bot taking the entry takes it from this one.
    crate::bots::local_bot(&app, &acme, "other", "chat").await;
    app.patch(&acme, "/api/v1/bots/other", json!({"channels": ["whatsapp"], "entry": ["whatsapp"]})).await.ok(200);
    assert_eq!(app.get(&acme, "/api/v1/bots/helper").await.ok(200)["bot"]["entry"], json!([]));
    app.patch(&acme, "/api/v1/bots/helper", json!({"entry": ["whatsapp"]})).await.ok(200);
    assert_eq!(app.get(&acme, "/api/v1/bots/other").await.ok(200)["bot"]["entry"], json!([]));

    // The chat starts; a typed label is the menu's choice, other text goes to the bot as text.
    let say = |id: &str, text: &str| {
        app.whatsapp_notify(whatsapp_message(id, phone, app.now(), json!({"type": "text", "text": {"body": text}})))
    };
    say("wamid.c1", "hello").await.ok(200);
    let out = more_sent(&wa, phone, 0, 2).await;
    assert_eq!(out[0]["text"]["body"], "Hi! I'm the Hubbub assistant.");
    assert_eq!(out[1]["interactive"]["type"], "button");
    say("wamid.c2", "opening hours").await.ok(200);
    let out = more_sent(&wa, phone, 2, 2).await;
    assert_eq!(out[0]["text"]["body"], "We're open Monday to Friday, 9:00 to 17:00.");
    say("wamid.c3", "thanks").await.ok(200);
    let out = more_sent(&wa, phone, 4, 2).await;
    assert_eq!(out[0]["text"]["body"], "You said: thanks");
    assert!(conversations(&app, &acme).await.is_empty());

    // An open conversation does not take the session's messages while the session goes on …
    sms_in(&app, "SMc1", phone, "About my order", None).await;
    routed(&app).await;
    assert_eq!(conversations(&app, &acme).await.len(), 1);
    say("wamid.c4", "again").await.ok(200);
    let out = more_sent(&wa, phone, 6, 2).await;
    assert_eq!(out[0]["text"]["body"], "You said: again");
    // … and a session quiet for a day lapses: the next message goes to the conversation.
    app.clock.advance_ms(25 * 60 * 60 * 1000);
    say("wamid.c5", "is anyone there?").await.ok(200);
    routed(&app).await;
    let list = conversations(&app, &acme).await;
    let id = list[0]["conversation_id"].as_i64().unwrap();
    let bodies: Vec<String> =
        thread(&app, &acme, id).await.iter().map(|m| m["body"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(bodies.last().map(String::as_str), Some("is anyone there?"));
}

#[tokio::test]
async fn a_menu_whatsapp_cannot_show_is_refused_at_upload() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    app.post(&acme, "/api/v1/bots", json!({"code": "colours", "name": "Colours", "runtime_mode": "local"}))
        .await
        .ok(201);
    // In the app, four buttons are fine.
    app.upload_component(&acme, "colours", &crate::common::wasm("wide_menu")).await.ok(200);
    // Adding WhatsApp to the bot's channels checks its menus: refused, with the reason.
    let r = app.patch(&acme, "/api/v1/bots/colours", json!({"channels": ["inapp", "whatsapp"]})).await;
    r.error(422, "whatsapp_menu");
    let message = r.json["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("a chat, step 0: a button menu has 4 options"), "{message}");
    assert!(message.contains("at most 3 reply buttons"), "{message}");
    assert_eq!(app.get(&acme, "/api/v1/bots/colours").await.ok(200)["bot"]["channels"], json!(["inapp"]));

    // A bot already on WhatsApp: the upload itself is refused, and the component stays the one before.
    app.post(&acme, "/api/v1/bots", json!({"code": "wa", "name": "On WhatsApp", "runtime_mode": "local"}))
        .await
        .ok(201);
    app.patch(&acme, "/api/v1/bots/wa", json!({"channels": ["whatsapp"]})).await.ok(200);
    app.upload_component(&acme, "wa", &crate::common::wasm("wide_menu")).await.error(422, "whatsapp_menu");
    assert_eq!(app.get(&acme, "/api/v1/bots/wa").await.ok(200)["bot"]["component"], Value::Null);
    // The chat sample's three short buttons fit.
    app.upload_component(&acme, "wa", &crate::common::wasm("chat")).await.ok(200);
}

#[tokio::test]
async fn a_whatsapp_message_with_only_a_business_scoped_id_reaches_the_phone_it_was_seen_with() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000204";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let notify = |id: &str, from: Option<&str>, user_id: &str, text: &str| {
        let mut message = json!({"id": id, "timestamp": (app.now() / 1000).to_string(), "type": "text",
            "text": {"body": text}});
        let mut contact = json!({"profile": {"name": "Ana", "username": "@ana"}, "user_id": user_id});
        if let Some(from) = from {
            message["from"] = json!(from.trim_start_matches('+'));
            contact["wa_id"] = json!(from.trim_start_matches('+'));
        }
        app.whatsapp_notify(json!([{"field": "messages", "value": {"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550009999", "phone_number_id": "12345"},
            "contacts": [contact], "messages": [message]}}]))
    };
    // Seen once with the phone and the BSUID: they are kept together.
    notify("wamid.b1", Some(phone), "US.13491208655302741918", "Hello").await.ok(200);
    routed(&app).await;
    // Then with the BSUID only (the person set a username): the same conversation gets it.
    notify("wamid.b2", None, "US.13491208655302741918", "Still there?").await.ok(200);
    routed(&app).await;
    let list = conversations(&app, &acme).await;
    assert_eq!(list.len(), 1);
    let bodies: Vec<String> = thread(&app, &acme, list[0]["conversation_id"].as_i64().unwrap())
        .await
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(bodies, ["Hello", "Still there?"]);
    let kept = hubbub_host::store::inbound::find(&app.state.db, hubbub_host::names::Channel::Whatsapp, "wamid.b2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.phone, phone);
    // A BSUID never seen with a phone reaches no one, and no answer is attempted (there is no number).
    notify("wamid.b3", None, "US.99999999999999999999", "Who am I?").await.ok(200);
    routed(&app).await;
    let kept = hubbub_host::store::inbound::find(&app.state.db, hubbub_host::names::Channel::Whatsapp, "wamid.b3")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((kept.phone.as_str(), kept.state), ("", hubbub_host::names::InboundState::Unrouted));
    assert_eq!(conversations(&app, &acme).await.len(), 1);
    assert!(wa.received().is_empty(), "{:?}", wa.received().iter().map(|r| r.json()).collect::<Vec<_>>());
}

#[tokio::test]
async fn files_from_whatsapp_and_sms_are_fetched_and_kept_as_media_in_the_conversation() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000205";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let jpeg = b"\xff\xd8\xff\xe0 a receipt";
    wa.answer(
        "/m1",
        200,
        json!({"url": format!("{}/files/m1", wa.url), "mime_type": "image/jpeg", "file_size": jpeg.len()}),
    );
    wa.file("/files/m1", "application/octet-stream", jpeg);
    wa.answer(
        "/m2",
        200,
        json!({"url": format!("{}/files/m2", wa.url), "mime_type": "video/mp4", "file_size": 20_000_000}),
    );

    // A photo with a caption, and a video over the host's limit.
    let image = json!({"type": "image", "image": {"id": "m1", "mime_type": "image/jpeg", "caption": "My receipt"}});
    app.whatsapp_notify(whatsapp_message("wamid.f1", phone, app.now(), image)).await.ok(200);
    routed(&app).await;
    let video = json!({"type": "video", "video": {"id": "m2", "mime_type": "video/mp4"}});
    app.whatsapp_notify(whatsapp_message("wamid.f2", phone, app.now(), video)).await.ok(200);
    routed(&app).await;
    let list = conversations(&app, &acme).await;
    assert_eq!(list.len(), 1);
    let id = list[0]["conversation_id"].as_i64().unwrap();
    let messages = thread(&app, &acme, id).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(
        (messages[0]["content_type"].as_str(), messages[0]["body"].as_str()),
        (Some("image"), Some("My receipt"))
    );
    let media = &messages[0]["media"];
    assert_eq!((media["mimetype"].as_str(), media["size"].as_i64()), (Some("image/jpeg"), Some(jpeg.len() as i64)));
    let url = media["url"].as_str().unwrap();
    assert!(url.starts_with("/api/v1/media/med_"), "{url}");
    let kept = app.client.get(format!("{}{url}", app.base)).bearer_auth(&acme).send().await.unwrap();
    assert_eq!(kept.status(), 200);
    assert_eq!(kept.bytes().await.unwrap().as_ref(), jpeg);
    // Both Graph API calls carried the token.
    let asked: Vec<_> = wa.received().into_iter().filter(|r| r.path == "/m1" || r.path == "/files/m1").collect();
    assert_eq!(asked.len(), 2);
    assert!(asked.iter().all(|r| r.headers["authorization"] == "Bearer wa-token"));
    assert_eq!(
        messages[1]["body"],
        "(The user sent a video that could not be kept: the file is larger than 10485760 bytes.)"
    );
    assert!(!wa.received().iter().any(|r| r.path == "/files/m2"), "a file over the limit is not downloaded");

    // An MMS: its file under this Twilio account is fetched with its credentials; a MediaUrl elsewhere is
    // never fetched (nor given the credentials).
    let png = b"\x89PNG a map";
    let media_path = "/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1";
    sms.file(media_path, "image/png", png);
    let mine = format!("{}{media_path}", sms.url);
    let params = [
        ("MessageSid", "MMin1"),
        ("From", phone),
        ("To", "+15550001111"),
        ("Body", "Where I am"),
        ("NumMedia", "2"),
        ("MediaUrl0", mine.as_str()),
        ("MediaContentType0", "image/png"),
        ("MediaUrl1", "https://files.example.net/x.pdf"),
        ("MediaContentType1", "application/pdf"),
    ];
    twilio_post(&app, "inbound", &params, None).await;
    routed(&app).await;
    let messages = thread(&app, &acme, id).await;
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(
        (messages[2]["content_type"].as_str(), messages[2]["body"].as_str()),
        (Some("image"), Some("Where I am"))
    );
    assert_eq!(messages[2]["channel"], "sms");
    let body = messages[3]["body"].as_str().unwrap();
    assert!(body.contains("is not a file of this Twilio account"), "{body}");
    let fetched: Vec<_> = sms.received().into_iter().filter(|r| r.path == media_path).collect();
    assert_eq!(fetched.len(), 1);
    let basic = format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "AC1:tw-token"));
    assert_eq!(fetched[0].headers["authorization"], basic.as_str());

    // The Graph API failing for now: the message waits, and is routed once the file can be fetched.
    wa.answer("/m3", 503, json!({"error": {"message": "try later"}}));
    let audio = json!({"type": "audio", "audio": {"id": "m3", "mime_type": "audio/ogg"}});
    app.whatsapp_notify(whatsapp_message("wamid.f3", phone, app.now(), audio)).await.ok(200);
    eventually("a failed fetch counted", || async {
        let kept = hubbub_host::store::inbound::find(&app.state.db, hubbub_host::names::Channel::Whatsapp, "wamid.f3");
        kept.await.unwrap().is_some_and(|m| m.state == hubbub_host::names::InboundState::Received)
            && wa.received().iter().any(|r| r.path == "/m3")
    })
    .await;
    wa.answer("/m3", 200, json!({"url": format!("{}/files/m3", wa.url), "mime_type": "audio/ogg"}));
    wa.file("/files/m3", "audio/ogg", b"OggS");
    eventually("the audio in the conversation", || async { thread(&app, &acme, id).await.len() == 5 }).await;
    assert_eq!(thread(&app, &acme, id).await[4]["content_type"], "audio");
}

#[tokio::test]
async fn a_flow_invitation_on_whatsapp_or_sms_runs_there() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000206";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    crate::bots::local_bot(&app, &acme, "signup", "signup").await;
    let invite = |channel: &str| {
        let path = "/api/v1/bots/signup/flows/signup/invite";
        app.post(&acme, path, json!({"phone": phone, "channel": channel}))
    };
    // The channel must be the bot's; WhatsApp needs the user's window open.
    invite("whatsapp").await.error(409, "conflict");
    invite("fax").await.field_error("channel");
    app.patch(&acme, "/api/v1/bots/signup", json!({"channels": ["inapp", "whatsapp", "sms"]})).await.ok(200);
    let shut = invite("whatsapp").await;
    shut.error(409, "conflict");
    assert!(shut.json["error"]["message"].as_str().unwrap().contains("24-hour window"));

    // Once they wrote, the flow's first screen goes out as the form's link button; the session is on WhatsApp.
    app.whatsapp_wrote(phone).await;
    let r = invite("whatsapp").await;
    let invited = &r.ok(201)["flow_session"];
    assert_eq!((invited["channel"].as_str(), invited["state"].as_str()), (Some("whatsapp"), Some("in_progress")));
    assert!(invited.get("message_id").is_none(), "no card in the hub");
    let out = more_sent(&wa, phone, 0, 1).await;
    assert_eq!(out[0]["interactive"]["type"], "cta_url");
    let token = form_token(out[0]["interactive"]["action"]["parameters"]["url"].as_str().unwrap());
    let form = app.client.get(format!("{}/api/v1/form-links/{token}", app.base)).send().await.unwrap();
    assert_eq!(form.json::<Value>().await.unwrap()["channel"], "whatsapp");
    let sessions = app.get(&acme, &format!("/api/v1/flow-sessions?phone=%2B{}", &phone[1..])).await.ok(200).clone();
    assert_eq!(sessions["data"][0]["ref"], invited["ref"]);
    // Not in the app's forms: it runs on WhatsApp.
    assert_eq!(hubbub_host::store::flows::open_forms(&app.state.db, phone).await.unwrap().len(), 0);

    // `auto` for a user without the app: WhatsApp while their window is open, else SMS.
    assert_eq!(invite("auto").await.ok(201)["flow_session"]["channel"], "whatsapp");
    assert_eq!(more_sent(&wa, phone, 1, 1).await[0]["interactive"]["type"], "cta_url");

    // By SMS: the link written out.
    let r = invite("sms").await;
    assert_eq!(r.ok(201)["flow_session"]["channel"], "sms");
    let out = more_sent(&sms, phone, 0, 1).await;
    assert!(out[0]["Body"].as_str().unwrap().contains("Open the form: https://hubbub.example.com/f/"), "{out:?}");
    // A phone that opted out of SMS is not invited there.
    app.clock.advance_ms(25 * 60 * 60 * 1000);
    assert_eq!(invite("auto").await.ok(201)["flow_session"]["channel"], "sms");
    sms_in(&app, "SMstop9", phone, "STOP", None).await;
    routed(&app).await;
    invite("sms").await.error(409, "conflict");
    // Reached nowhere else, `auto` is the app's flow card.
    let card = invite("auto").await;
    assert_eq!(card.ok(201)["flow_session"]["channel"], "inapp");
    assert!(card.json["flow_session"]["message_id"].is_i64());
}

/// A WhatsApp notification as `whatsapp_notify` sends it, signed with `secret`.
async fn whatsapp_signed_with(app: &TestApp, secret: &str, changes: Value) -> crate::common::Resp {
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": changes.clone()}]});
    let signature = hubbub_host::delivery::receipts::meta_signature(secret, body.to_string().as_bytes());
    whatsapp_notify_signed(&app.client, &app.base, changes, Some(&signature)).await
}

#[tokio::test]
async fn partners_with_their_own_numbers_get_their_users_messages_and_answer_from_them() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let phone = "+15550000207";
    // The phone is linked to both; globex last (without their own numbers, its messages would go there).
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);

    // Each partner's WhatsApp number, shown back by prefixes only; a number is one partner's. Meta shows the
    // numbers in the business account to the token (the fake, to any token).
    wa.answer("/900/phone_numbers", 200, json!({"data": [{"id": "111"}, {"id": "222"}]}));
    let number = |id: &str, token: &str, secret: &str| json!({"phone_number_id": id, "business_account_id": "900", "token": token, "app_secret": secret});
    let app = &app;
    let put = |key: &str, channel: &str, body: Value| {
        let path = format!("/api/v1/settings/senders/{channel}");
        let key = key.to_string();
        async move { app.request(reqwest::Method::PUT, &path, Some(&key), Some(&body)).await }
    };
    let set = put(&acme, "whatsapp", number("111", "acme-wa-token", "acme-app-secret")).await;
    let shown = set.ok(200).clone();
    assert_eq!((shown["address"].as_str(), shown["token_prefix"].as_str()), (Some("111"), Some("acme-w…")));
    assert!(!shown.to_string().contains("acme-wa-token") && !shown.to_string().contains("acme-app-secret"));
    put(&globex, "whatsapp", number("222", "globex-wa-token", "globex-app-secret")).await.ok(200);
    put(&globex, "whatsapp", number("111", "x", "y")).await.error(409, "conflict");
    put(&globex, "whatsapp", json!({"phone_number_id": "111"})).await.field_error("business_account_id");
    put(&globex, "fax", json!({})).await.error(404, "not_found");
    put(&globex, "sms", json!({"account_sid": "AC1", "auth_token": "t", "from": "+15550003333"}))
        .await
        .field_error("account_sid");
    assert_eq!(app.get(&acme, "/api/v1/settings/senders").await.ok(200)["data"].as_array().unwrap().len(), 1);
    // Sealed at rest: the stored token is not the token.
    let stored: String = sqlx::query_scalar("SELECT token FROM partner_senders WHERE address = '111'")
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    assert!(!stored.contains("acme-wa-token"));

    // A message to acme's number is acme's, checked with acme's app secret (the host's, or globex's, is 401).
    let to = |number: &str, id: &str, text: &str| {
        let mut change = whatsapp_message(id, phone, app.now(), json!({"type": "text", "text": {"body": text}}));
        change[0]["value"]["metadata"]["phone_number_id"] = json!(number);
        change
    };
    // The host's app speaks for the host's number only: what it says of acme's is left out.
    let by_host = whatsapp_signed_with(&app, "app-secret", to("111", "wamid.o1", "Hi acme")).await;
    assert_eq!(by_host.ok(200)["inbound"], 0);
    whatsapp_signed_with(&app, "globex-app-secret", to("111", "wamid.o1", "Hi acme")).await.error(401, "unauthorized");
    assert_eq!(
        whatsapp_signed_with(&app, "acme-app-secret", to("111", "wamid.o1", "Hi acme")).await.ok(200)["inbound"],
        1
    );
    assert_eq!(
        whatsapp_signed_with(&app, "globex-app-secret", to("222", "wamid.o2", "Hi globex")).await.ok(200)["inbound"],
        1
    );
    routed(&app).await;
    let (mine, theirs) = (conversations(&app, &acme).await, conversations(&app, &globex).await);
    assert_eq!((mine.len(), theirs.len()), (1, 1));
    let acme_thread = mine[0]["conversation_id"].as_i64().unwrap();
    assert_eq!(thread(&app, &acme, acme_thread).await[0]["body"], "Hi acme");
    assert_eq!(thread(&app, &globex, theirs[0]["conversation_id"].as_i64().unwrap()).await[0]["body"], "Hi globex");

    // acme's answer goes from acme's number, with acme's token.
    let reply =
        app.post(&acme, &format!("/api/v1/conversations/{acme_thread}/messages"), json!({"body": "Hello!"})).await;
    let reply = app.delivered(&acme, reply.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(tries(&reply), [t("whatsapp", "sent", "")]);
    let sent: Vec<_> = wa.received().into_iter().filter(|r| r.path == "/111/messages").collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].headers["authorization"], "Bearer acme-wa-token");
    assert_eq!(sent[0].json()["text"]["body"], "acme Inc.: Hello!");

    // acme's own Twilio sender: its inbound SMS checked with its auth token, its answers from its number.
    let sid = "AC0123456789abcdef0123456789abcdef";
    let numbers = json!({"incoming_phone_numbers": [{"phone_number": "+15550002222"}]});
    sms.answer(&format!("/2010-04-01/Accounts/{sid}/IncomingPhoneNumbers.json"), 200, numbers);
    let twilio = json!({"account_sid": sid, "auth_token": "acme-tw-token", "from": "+15550002222"});
    put(&acme, "sms", twilio).await.ok(200);
    let params = [
        ("MessageSid", "SMown1"),
        ("AccountSid", sid),
        ("From", phone),
        ("To", "+15550002222"),
        ("Body", "By SMS now"),
        ("NumMedia", "0"),
    ];
    twilio_post(&app, "inbound", &params, None).await.error(401, "unauthorized");
    let owned: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let url = "https://hubbub.example.com/api/v1/providers/twilio/inbound";
    let signature = hubbub_host::delivery::receipts::twilio_signature("acme-tw-token", url, &owned);
    assert_eq!(twilio_post(&app, "inbound", &params, Some(&signature)).await.status, 200);
    routed(&app).await;
    let messages = thread(&app, &acme, acme_thread).await;
    assert_eq!(messages.last().unwrap()["body"], "By SMS now");
    let reply =
        app.post(&acme, &format!("/api/v1/conversations/{acme_thread}/messages"), json!({"body": "Got it"})).await;
    let reply = app.delivered(&acme, reply.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(tries(&reply), [t("sms", "sent", "")]);
    let sent: Vec<_> =
        sms.received().into_iter().filter(|r| r.path == format!("/2010-04-01/Accounts/{sid}/Messages.json")).collect();
    assert_eq!(sent.len(), 1);
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&sent[0].body).unwrap();
    assert!(form.contains(&("From".to_string(), "+15550002222".to_string())), "{form:?}");

    // Removed: acme's users are the host's again.
    let path = "/api/v1/settings/senders/sms";
    assert_eq!(app.request(reqwest::Method::DELETE, path, Some(&acme), None).await.status, 204);
    app.request(reqwest::Method::DELETE, path, Some(&acme), None).await.error(404, "not_found");
}

#[tokio::test]
async fn a_pass_routes_many_phones_at_once_and_each_phones_messages_in_order() {
    use hubbub_host::names::Channel;
    use hubbub_host::store::inbound::NewInbound;
    let app = TestApp::start_with(|c| c.workers = false).await;
    let acme = app.partner("acme").await;
    let phones: Vec<String> = (0..20).map(|i| format!("+1555000{:04}", 3000 + i)).collect();
    for phone in &phones {
        app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    }
    // Three messages from each, interleaved as they would arrive.
    for n in 0..3 {
        for (i, phone) in phones.iter().enumerate() {
            let m = NewInbound {
                channel: Channel::Sms,
                provider_ref: format!("SMorder{i}-{n}"),
                phone: phone.clone(),
                user_id: None,
                sender: "dev".into(),
                account: String::new(),
                body: Some(format!("message {n}")),
                content: json!({}),
                context_ref: None,
                received_at: app.now(),
            };
            assert_eq!(hubbub_host::inbound::receive(&app.state.routing().delivery, &[m]).await.unwrap(), 1);
        }
    }
    assert_eq!(hubbub_host::inbound::route_waiting(&app.state.routing()).await.unwrap(), 60);
    let list = conversations(&app, &acme).await;
    assert_eq!(list.len(), 20, "one conversation per phone");
    for c in list {
        let bodies: Vec<String> = thread(&app, &acme, c["conversation_id"].as_i64().unwrap())
            .await
            .iter()
            .map(|m| m["body"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(bodies, ["message 0", "message 1", "message 2"]);
    }
}

#[tokio::test]
async fn a_webhook_bots_form_opens_from_its_link_on_whatsapp() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let (wa2, sms2) = (wa.clone(), sms.clone());
    let app = TestApp::start_with(move |c| {
        crate::common::fake_providers(c, &wa2, &sms2);
        c.webhook_poll_ms = 20;
    })
    .await;
    let recv = FakeServer::start(200, 0).await;
    let acme = app.partner("acme").await;
    let phone = "+15550000221";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    let bot = json!({"code": "remote", "name": "Remote", "runtime_mode": "webhook", "webhook_url": recv.url});
    let token = app.post(&acme, "/api/v1/bots", bot).await.ok(201)["bot_token"].as_str().unwrap().to_string();
    app.patch(&acme, "/api/v1/bots/remote", json!({"channels": ["whatsapp"], "entry": ["whatsapp"]})).await.ok(200);
    // "Hi" on WhatsApp starts a session of the partner's bot: it is told, and answers with a form.
    app.whatsapp_notify(whatsapp_message(
        "wamid.w1",
        phone,
        app.now(),
        json!({"type": "text", "text": {"body": "Hi"}}),
    ))
    .await
    .ok(200);
    eventually("the bot told of the session", || async {
        recv.received().iter().any(|r| r.headers.get("x-service-event").is_some_and(|e| e == "session.start"))
    })
    .await;
    let started = recv.received().into_iter().find(|r| r.headers["x-service-event"] == "session.start").unwrap();
    let session = started.json()["payload"]["session"].as_str().unwrap().to_string();
    let screen = json!({"id": "details", "title": "Your details", "kind": "form",
        "fields": [{"key": "email", "type": "email", "label": "E-mail", "required": true}]});
    let reply =
        json!({"event": "reply", "data": {"session": session, "steps": [{"type": "flow_screen", "screen": screen}]}});
    let r = app.client.post(format!("{}/api/v1/bots/remote/webhook", app.base)).bearer_auth(&token).json(&reply).send();
    assert_eq!(r.await.unwrap().status(), 200);
    let out = more_sent(&wa, phone, 0, 1).await;
    let link = form_token(out[0]["interactive"]["action"]["parameters"]["url"].as_str().expect("a form link"));

    // The link opens the form (it answered 409 "the bot has moved on" for webhook bots), checks its values,
    // and the bot gets them.
    let opened = app.client.get(format!("{}/api/v1/form-links/{link}", app.base)).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    assert_eq!(opened.json::<Value>().await.unwrap()["screen"]["id"], "details");
    let submit = |values: Value| {
        app.client.post(format!("{}/api/v1/form-links/{link}", app.base)).json(&json!({"values": values})).send()
    };
    assert_eq!(submit(json!({"email": "not an address"})).await.unwrap().status(), 422);
    assert_eq!(submit(json!({"email": "ana@example.com"})).await.unwrap().status(), 200);
    eventually("the bot got the form", || async {
        recv.received().iter().any(|r| r.json()["payload"]["event"]["type"] == "submit")
    })
    .await;
    let got = recv.received().into_iter().find(|r| r.json()["payload"]["event"]["type"] == "submit").unwrap();
    assert_eq!(got.json()["payload"]["event"]["values"], json!({"email": "ana@example.com"}));
}

#[tokio::test]
async fn a_closed_conversation_asks_for_a_rating_by_sms_and_as_a_whatsapp_list_and_the_number_answered_is_kept() {
    let (wa, sms) = (FakeServer::start(200, 0).await, FakeServer::start(200, 0).await);
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let acme = app.partner("acme").await;
    app.request(reqwest::Method::PUT, "/api/v1/settings/csat", Some(&acme), Some(&json!({"enabled": true})))
        .await
        .ok(200);
    let close = |id: i64| {
        let (app, acme) = (&app, acme.clone());
        async move {
            let path = format!("/api/v1/conversations/{id}");
            app.request(reqwest::Method::PATCH, &path, Some(&acme), Some(&json!({"state": "closed"})))
                .await
                .ok(200)
                .clone()
        }
    };

    // By SMS: the question goes as text; the person's "5" is the rating, thanked, and opens nothing.
    let phone = "+15550000301";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    sms_in(&app, "SMr1", phone, "My parcel is late", None).await;
    routed(&app).await;
    let id = conversations(&app, &acme).await[0]["conversation_id"].as_i64().unwrap();
    let reply =
        app.post(&acme, &format!("/api/v1/conversations/{id}/messages"), json!({"body": "It ships today"})).await;
    app.delivered(&acme, reply.ok(201)["message_id"].as_i64().unwrap()).await;
    let closed = close(id).await;
    assert_eq!((closed["state"].as_str(), closed["rating"]["score"].clone()), (Some("closed"), Value::Null));
    let asked = thread(&app, &acme, id).await.last().unwrap().clone();
    assert_eq!(asked["rating"], json!({"min": 1, "max": 5}));
    app.delivered(&acme, asked["message_id"].as_i64().unwrap()).await;
    let question = sent_to(&sms, phone).last().unwrap()["Body"].as_str().unwrap().to_string();
    assert!(question.contains("from 1 (poor) to 5 (great)"), "{question}");
    // Closed again, it is not asked again.
    close(id).await;
    assert_eq!(thread(&app, &acme, id).await.len(), 3);
    sms_in(&app, "SMr2", phone, " 5 ", None).await;
    routed(&app).await;
    let rated = app.get(&acme, &format!("/api/v1/conversations/{id}")).await.ok(200).clone();
    assert_eq!((rated["state"].as_str(), rated["rating"]["score"].as_i64()), (Some("closed"), Some(5)));
    assert_eq!(rated["messages"].as_array().unwrap().len(), 3, "the rating is no message in the conversation");
    eventually("the thanks", || async {
        sent_to(&sms, phone).last().is_some_and(|m| m["Body"] == hubbub_host::inbound::RATED_REPLY)
    })
    .await;
    // Another number later is a new conversation, as ever.
    sms_in(&app, "SMr3", phone, "4", None).await;
    routed(&app).await;
    assert_eq!(conversations(&app, &acme).await.len(), 2);

    // On WhatsApp: the question is a list of the scale; the row picked comes back as its number.
    let wa_phone = "+15550000302";
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": wa_phone})).await.ok(200);
    whatsapp_notify(
        &app.client,
        &app.base,
        whatsapp_message("wamid.r1", wa_phone, app.now(), json!({"type": "text", "text": {"body": "Hi"}})),
    )
    .await
    .ok(200);
    routed(&app).await;
    let wa_id = conversations(&app, &acme).await.iter().find(|c| c["phone"] == wa_phone).unwrap()["conversation_id"]
        .as_i64()
        .unwrap();
    let reply = app.post(&acme, &format!("/api/v1/conversations/{wa_id}/messages"), json!({"body": "Hello!"})).await;
    app.delivered(&acme, reply.ok(201)["message_id"].as_i64().unwrap()).await;
    close(wa_id).await;
    let asked = thread(&app, &acme, wa_id).await.last().unwrap().clone();
    app.delivered(&acme, asked["message_id"].as_i64().unwrap()).await;
    let list = sent_to(&wa, wa_phone).last().unwrap().clone();
    assert_eq!(list["type"], "interactive", "{list}");
    let rows = list["interactive"]["action"]["sections"][0]["rows"].as_array().unwrap().clone();
    let titles: Vec<&str> = rows.iter().map(|r| r["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["5", "4", "3", "2", "1"]);
    let picked = json!({"type": "interactive", "interactive": {"type": "list_reply",
        "list_reply": {"id": "rating:3", "title": "3", "description": "OK"}}});
    whatsapp_notify(&app.client, &app.base, whatsapp_message("wamid.r2", wa_phone, app.now(), picked)).await.ok(200);
    routed(&app).await;
    let rated = app.get(&acme, &format!("/api/v1/conversations/{wa_id}")).await.ok(200).clone();
    assert_eq!((rated["state"].as_str(), rated["rating"]["score"].as_i64()), (Some("closed"), Some(3)));
}
