//! Messages users send from SMS and WhatsApp: provider-shaped, signed webhooks into a host whose providers
//! are fake servers that record what they receive.

use serde_json::{Value, json};

use crate::common::{
    FakeServer, Resp, TestApp, eventually, t, tries, twilio_post, whatsapp_notify, whatsapp_notify_signed,
};
use hubbub_host::inbound::UNROUTED_REPLY;

/// Twilio's inbound webhook: `From` wrote `Body` to our number (signed, or with `signature`, forged).
async fn sms_in(app: &TestApp, sid: &str, from: &str, body: &str, signature: Option<&str>) -> Resp {
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
    let reason = hubbub_host::store::opt_outs::reason(&app.state.db, phone, sms_channel, "+15550001111").await.unwrap();
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
        sender: "dev".into(),
        body: Some("hello".into()),
        content: json!({}),
        context_ref: None,
        received_at: app.now(),
    };
    assert!(inbound::record(db, &message("SMfail")).await.unwrap());
    assert!(inbound::record(db, &message("SMnext")).await.unwrap());
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
