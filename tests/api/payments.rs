//! Payments the host owns: a guest's payment step becomes a `pay_…` payment with a checkout (the dev
//! checkout page, or a Stripe Checkout Session at a fake Stripe), only a verified provider outcome moves it
//! and tells the guest (once), a user's own payment event is refused, and partners list, read and refund
//! their payments and get `payment.status` events.

use hubbub_host::config::PaymentProviderKind;
use hubbub_host::store::outbox::{self, Target};
use serde_json::{Value, json};

use crate::bots::local_bot;
use crate::common::{FakeServer, Resp, TestApp};

const PHONE: &str = "+15551230000";
const WEBHOOK_SECRET: &str = "whsec_test_secret";

/// A user linked to the partner, logged in; returns the token.
async fn user(app: &TestApp, key: &str, phone: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": phone})).await.ok(200);
    app.login(phone).await
}

/// Runs the shop's `order` flow up to its payment (a large coffee: 4.00 EUR); answers the flow ref and
/// the submit's answer.
async fn shop_to_payment(app: &TestApp, key: &str, token: &str) -> (String, Resp) {
    let invite = app.post(key, "/api/v1/bots/shop/flows/order/invite", json!({"phone": PHONE})).await;
    let reference = invite.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let path = |p: &str| format!("/api/v1/me/flows/{reference}/{p}");
    app.post(token, &path("start"), json!({})).await.ok(200);
    app.post(token, &path("events"), json!({"type": "select", "id": "coffee"})).await.ok(200);
    app.post(token, &path("events"), json!({"type": "select", "id": "large"})).await.ok(200);
    let values = json!({"screen": "delivery", "values": {"address": "Main St 1", "when": "2026-12-01"}});
    let r = app.post(token, &path("submit"), values).await;
    (reference, r)
}

fn payment_step(r: &Resp) -> Value {
    let steps = r.ok(200)["steps"].as_array().unwrap_or_else(|| panic!("no steps in {}", r.json));
    steps.iter().find(|s| s["type"] == "payment").unwrap_or_else(|| panic!("no payment step in {}", r.json))["payment"]
        .clone()
}

/// The `payment.status` events recorded for the partner, oldest first.
async fn status_events(app: &TestApp, partner_id: i64) -> Vec<Value> {
    let mut events: Vec<Value> =
        outbox::list_for_target(&app.state.db, Target::Partner(partner_id), Some("payment.status"))
            .await
            .unwrap()
            .into_iter()
            .map(|(_, _, payload)| payload)
            .collect();
    events.reverse();
    events
}

async fn partner_id(app: &TestApp, code: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM partners WHERE code = $1")
        .bind(code)
        .fetch_one(app.state.db.reader())
        .await
        .unwrap()
}

async fn steps(app: &TestApp, token: &str, flow: &str) -> Value {
    app.get(token, &format!("/api/v1/me/flows/{flow}/steps")).await.ok(200).clone()
}

/// `POST /pay/{ref}` with the form's button.
async fn press(app: &TestApp, reference: &str, action: &str) -> (u16, String) {
    let r = app
        .client
        .post(format!("{}/pay/{reference}", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("action={action}"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn payments_the_shop_flow_pays_through_the_dev_checkout_and_the_guest_hears_once() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    let token = user(&app, &key, PHONE).await;
    let (flow, r) = shop_to_payment(&app, &key, &token).await;
    let payment = payment_step(&r);
    let first = payment["ref"].as_str().unwrap().to_string();
    assert!(first.starts_with("pay_") && first.len() >= 4 + 24, "{payment}");
    assert_eq!(payment["amount_minor"], 400);
    assert_eq!(payment["currency"], "EUR");
    assert_eq!(payment["state"], "requires_payment");
    assert!(payment["id"].as_str().unwrap().starts_with("order-coffee-large"));
    let checkout = payment["checkout_url"].as_str().unwrap();
    assert!(checkout.ends_with(&format!("/pay/{first}")), "{checkout}");

    // The user cannot pay by saying so, in a flow or a chat session.
    let own = json!({"type": "payment", "id": payment["id"], "status": "confirmed", "reference": "PAY-1"});
    app.post(&token, &format!("/api/v1/me/flows/{flow}/events"), own.clone()).await.field_error("type");
    local_bot(&app, &key, "chat", "chat").await;
    let session = app.post(&token, "/api/v1/me/bots/chat/sessions", json!({})).await.ok(201)["session"].clone();
    let session = session.as_str().unwrap();
    app.post(&token, &format!("/api/v1/me/bots/chat/sessions/{session}/events"), own).await.field_error("type");
    let record = app.get(&key, &format!("/api/v1/payments/{first}")).await.ok(200).clone();
    assert_eq!(record["state"], "requires_payment");

    // The dev checkout page: a real route (never the web app), no script, the amount and three buttons.
    let page = app.client.get(format!("{}/pay/{first}", app.base)).header("accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.starts_with("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"), "{csp}");
    let html = page.text().await.unwrap();
    assert!(html.contains("4.00 EUR") && html.contains("large coffee"), "{html}");
    for action in ["pay", "decline", "cancel"] {
        assert!(html.contains(&format!(r#"value="{action}""#)), "{html}");
    }
    assert!(!html.contains("<script"));
    let unknown =
        app.client.get(format!("{}/pay/pay_nope", app.base)).header("accept", "text/html").send().await.unwrap();
    assert_eq!(unknown.status(), 404);

    // Declined: the guest hears it once and asks again with a new payment.
    let (status, html) = press(&app, &first, "decline").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"data-state="failed""#) && html.contains(&format!("/forms/{flow}")), "{html}");
    let after = steps(&app, &token, &flow).await;
    let retry = after["steps"].as_array().unwrap().iter().find(|s| s["type"] == "payment").unwrap()["payment"].clone();
    let second = retry["ref"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    assert!(retry["id"].as_str().unwrap().ends_with("-2"), "{retry}");
    // Pressing again changes nothing and calls nobody.
    let (_, html) = press(&app, &first, "pay").await;
    assert!(html.contains(r#"data-state="failed""#));
    assert_eq!(steps(&app, &token, &flow).await["steps"], json!([]));

    // Paid: the flow completes with the payment's ref as its reference; the guest is called exactly once.
    let (status, html) = press(&app, &second, "pay").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"data-state="succeeded""#), "{html}");
    let done = steps(&app, &token, &flow).await;
    assert_eq!(done["state"], "completed");
    assert_eq!(done["summary"]["reference"], second.as_str());
    let kinds: Vec<&str> = done["steps"].as_array().unwrap().iter().map(|s| s["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["message", "flow_completed"]);
    for action in ["pay", "cancel"] {
        press(&app, &second, action).await;
    }
    assert_eq!(steps(&app, &token, &flow).await["steps"], json!([]), "the guest is not called again");
    press(&app, "pay_unknown_ref_000000000000", "pay").await;

    // The partner sees both payments, with filters, and their `payment.status` events with seq.
    let list = app.get(&key, "/api/v1/payments").await.ok(200).clone();
    assert_eq!(list["data"].as_array().unwrap().len(), 2);
    assert!(list.get("next_cursor").is_some());
    assert_eq!(list["data"][0]["ref"], second.as_str(), "newest first");
    let paid = app.get(&key, "/api/v1/payments?state=succeeded").await.ok(200)["data"].clone();
    assert_eq!(paid.as_array().unwrap().len(), 1);
    assert_eq!(paid[0]["bot"], "shop");
    assert_eq!(paid[0]["session"], flow.as_str());
    assert_eq!(app.get(&key, "/api/v1/payments?bot=chat").await.ok(200)["data"], json!([]));
    let by_phone = app.get(&key, "/api/v1/payments?phone=%2B15551230000").await.ok(200)["data"].clone();
    assert_eq!(by_phone.as_array().unwrap().len(), 2);
    app.get(&key, "/api/v1/payments?state=paid").await.field_error("state");
    let events = status_events(&app, partner_id(&app, "acme").await).await;
    let of = |reference: &str| -> Vec<(i64, String)> {
        events
            .iter()
            .filter(|e| e["ref"] == reference)
            .map(|e| (e["seq"].as_i64().unwrap(), e["state"].as_str().unwrap().to_string()))
            .collect()
    };
    assert_eq!(of(&first), [(1, "requires_payment".to_string()), (2, "failed".to_string())]);
    assert_eq!(of(&second), [(1, "requires_payment".to_string()), (2, "succeeded".to_string())]);
    let last = events.last().unwrap();
    for field in
        ["event", "partner", "payment_id", "ref", "bot", "phone", "state", "amount_minor", "currency", "seq", "at"]
    {
        assert!(last.get(field).is_some(), "{field} missing in {last}");
    }
    assert_eq!(last["partner"], "acme");
    assert_eq!(last["phone"], PHONE);

    // Refunds: the dev provider refunds at once; only succeeded payments; other partners see nothing.
    let id = paid[0]["payment_id"].as_i64().unwrap();
    app.post(&key, &format!("/api/v1/payments/{first}/refund"), json!({})).await.error(409, "conflict");
    let refunded = app.post(&key, &format!("/api/v1/payments/{id}/refund"), json!({})).await.ok(200).clone();
    assert_eq!(refunded["state"], "refunded");
    app.post(&key, &format!("/api/v1/payments/{id}/refund"), json!({})).await.error(409, "conflict");
    let other = app.partner("globex").await;
    app.get(&other, &format!("/api/v1/payments/{id}")).await.error(404, "not_found");
    app.get(&other, &format!("/api/v1/payments/{second}")).await.error(404, "not_found");
    app.post(&other, &format!("/api/v1/payments/{id}/refund"), json!({})).await.error(404, "not_found");
    assert_eq!(app.get(&other, "/api/v1/payments").await.ok(200)["data"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn payments_amounts_are_checked_and_a_host_without_a_provider_refuses_payment_steps() {
    // Over the maximum: the guest's request is a bot error, and no payment is made.
    let app = TestApp::start_with(|c| c.payment_max_minor = 399).await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    let token = user(&app, &key, PHONE).await;
    let (_, r) = shop_to_payment(&app, &key, &token).await;
    r.error(502, "bot_error");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("maximum"), "{}", r.json);
    assert_eq!(app.get(&key, "/api/v1/payments").await.ok(200)["data"], json!([]));
    app.stop().await;

    // Not dev mode and no provider: payments are not configured. (No dev sink outside dev mode either: the
    // user's token is issued as `hubbub user token` would.)
    let app = TestApp::start_with(|c| c.dev = false).await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let token = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap().0;
    let (_, r) = shop_to_payment(&app, &key, &token).await;
    r.error(502, "bot_error");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("not configured"), "{}", r.json);
    app.stop().await;
}

/// A Stripe event about the checkout of `reference`.
fn stripe_event(id: &str, kind: &str, reference: &str, payment_status: &str) -> Value {
    json!({
        "id": id,
        "object": "event",
        "type": kind,
        "data": {"object": {
            "id": "cs_test_1",
            "object": "checkout.session",
            "client_reference_id": reference,
            "metadata": {"payment_ref": reference},
            "payment_status": payment_status,
            "payment_intent": "pi_test_1",
            "amount_total": 400,
            "currency": "eur",
        }},
    })
}

/// Posts `event` to the Stripe webhook signed at `t` (unix seconds) with `secret`, as Stripe does.
async fn post_stripe(app: &TestApp, event: &Value, t: i64, secret: &str) -> Resp {
    let body = event.to_string();
    let sig = hubbub_host::payments::stripe_signature(secret, t, body.as_bytes());
    let r = app
        .client
        .post(format!("{}/api/v1/providers/stripe/webhook", app.base))
        .header("content-type", "application/json")
        .header("stripe-signature", format!("t={t},v1={sig}"))
        .body(body)
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

async fn stripe_app(stripe: &FakeServer) -> TestApp {
    let url = stripe.url.clone();
    TestApp::start_with(move |c| {
        c.payment_provider = Some(PaymentProviderKind::Stripe);
        c.stripe_base_url = url;
        c.stripe_secret_key = Some("sk_test_fake".into());
        c.stripe_webhook_secret = Some(WEBHOOK_SECRET.into());
        c.public_url = "https://hubbub.example.com".into();
        c.provider_timeout_ms = 2_000;
    })
    .await
}

#[tokio::test]
async fn payments_stripe_checkout_signed_events_once_in_any_order_and_refunds() {
    let stripe = FakeServer::start(200, 0).await;
    let app = stripe_app(&stripe).await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    let token = user(&app, &key, PHONE).await;
    let (flow, r) = shop_to_payment(&app, &key, &token).await;
    let payment = payment_step(&r);
    let reference = payment["ref"].as_str().unwrap().to_string();
    assert_eq!(payment["checkout_url"], "https://checkout.stripe.test/c/pay/cs_test_1");
    // The Checkout Session: form-encoded, with the secret key, an idempotency key and our ref.
    let created = stripe.received().into_iter().find(|r| r.path == "/v1/checkout/sessions").unwrap();
    assert_eq!(created.headers["authorization"], "Bearer sk_test_fake");
    assert_eq!(created.headers["idempotency-key"].to_str().unwrap(), format!("hubbub-checkout-{reference}"));
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&created.body).unwrap();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(field("client_reference_id").as_deref(), Some(reference.as_str()));
    assert_eq!(field("metadata[payment_ref]").as_deref(), Some(reference.as_str()));
    assert_eq!(field("line_items[0][price_data][unit_amount]").as_deref(), Some("400"));
    assert_eq!(field("line_items[0][price_data][currency]").as_deref(), Some("eur"));
    assert_eq!(field("success_url"), Some(format!("https://hubbub.example.com/forms/{flow}")));
    // Stripe payments have no dev checkout page.
    let page = app.client.get(format!("{}/pay/{reference}", app.base)).send().await.unwrap();
    assert_eq!(page.status(), 404);

    let now = app.now() / 1000;
    let state = || async { app.get(&key, &format!("/api/v1/payments/{reference}")).await.ok(200)["state"].clone() };
    let succeeded = stripe_event("evt_2", "checkout.session.async_payment_succeeded", &reference, "paid");
    // A wrong secret, a tampered body, no header or a stale timestamp: 400 and nothing changes.
    post_stripe(&app, &succeeded, now, "whsec_wrong").await.error(400, "bad_request");
    post_stripe(&app, &succeeded, now - 301, WEBHOOK_SECRET).await.error(400, "bad_request");
    post_stripe(&app, &succeeded, now + 301, WEBHOOK_SECRET).await.error(400, "bad_request");
    let unsigned = app
        .client
        .post(format!("{}/api/v1/providers/stripe/webhook", app.base))
        .header("content-type", "application/json")
        .body(succeeded.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 400);
    let sig = hubbub_host::payments::stripe_signature(WEBHOOK_SECRET, now, succeeded.to_string().as_bytes());
    let mut tampered = succeeded.clone();
    tampered["data"]["object"]["amount_total"] = json!(1);
    let r = app
        .client
        .post(format!("{}/api/v1/providers/stripe/webhook", app.base))
        .header("stripe-signature", format!("t={now},v1={sig}"))
        .body(tampered.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(state().await, "requires_payment");
    assert_eq!(steps(&app, &token, &flow).await["steps"], json!([]));

    // A signed event that says "paid" without saying how much changes nothing.
    let mut no_amount = stripe_event("evt_0", "checkout.session.async_payment_succeeded", &reference, "paid");
    no_amount["data"]["object"].as_object_mut().unwrap().remove("amount_total");
    assert_eq!(post_stripe(&app, &no_amount, now, WEBHOOK_SECRET).await.ok(200)["applied"], false);
    assert_eq!(state().await, "requires_payment");

    // Out of order: succeeded arrives before the completed-but-unpaid (processing) event.
    let r = post_stripe(&app, &succeeded, now - 200, WEBHOOK_SECRET).await;
    assert_eq!(r.ok(200)["applied"], true);
    assert_eq!(state().await, "succeeded");
    let processing = stripe_event("evt_1", "checkout.session.completed", &reference, "unpaid");
    assert_eq!(post_stripe(&app, &processing, now, WEBHOOK_SECRET).await.ok(200)["applied"], false);
    assert_eq!(state().await, "succeeded", "a final state never moves back");
    // The same event again: one transition, one guest call.
    assert_eq!(post_stripe(&app, &succeeded, now, WEBHOOK_SECRET).await.ok(200)["applied"], false);
    let expired = stripe_event("evt_3", "checkout.session.expired", &reference, "unpaid");
    assert_eq!(post_stripe(&app, &expired, now, WEBHOOK_SECRET).await.ok(200)["applied"], false);
    let done = steps(&app, &token, &flow).await;
    assert_eq!(done["state"], "completed");
    assert_eq!(done["summary"]["reference"], reference.as_str());
    assert_eq!(done["steps"].as_array().unwrap().iter().filter(|s| s["type"] == "flow_completed").count(), 1);
    assert_eq!(steps(&app, &token, &flow).await["steps"], json!([]));
    let events = status_events(&app, partner_id(&app, "acme").await).await;
    let states: Vec<&str> = events.iter().map(|e| e["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["requires_payment", "succeeded"]);
    // Event types payments do not use are acknowledged.
    let other = json!({"id": "evt_9", "type": "customer.created", "data": {"object": {}}});
    assert_eq!(post_stripe(&app, &other, now, WEBHOOK_SECRET).await.ok(200)["applied"], false);

    // Refund through Stripe, with an idempotency key and the payment intent from the events.
    let refunded = app.post(&key, &format!("/api/v1/payments/{reference}/refund"), json!({})).await.ok(200).clone();
    assert_eq!(refunded["state"], "refunded");
    let refund = stripe.received().into_iter().find(|r| r.path == "/v1/refunds").unwrap();
    assert_eq!(refund.headers["idempotency-key"].to_str().unwrap(), format!("hubbub-refund-{reference}"));
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&refund.body).unwrap();
    assert!(form.contains(&("payment_intent".to_string(), "pi_test_1".to_string())), "{form:?}");
    // Stripe's own charge.refunded afterwards changes nothing more.
    let charge = json!({"id": "evt_4", "type": "charge.refunded", "data": {"object": {"object": "charge", "payment_intent": "pi_test_1", "refunded": true}}});
    assert_eq!(post_stripe(&app, &charge, now, WEBHOOK_SECRET).await.ok(200)["applied"], false);
    let events = status_events(&app, partner_id(&app, "acme").await).await;
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(events[2]["state"], "refunded");
    app.stop().await;
}

#[tokio::test]
async fn payments_stripe_processing_then_failed_tells_the_guest_declined_and_charge_refunded_refunds() {
    let stripe = FakeServer::start(200, 0).await;
    let app = stripe_app(&stripe).await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    let token = user(&app, &key, PHONE).await;
    let (flow, r) = shop_to_payment(&app, &key, &token).await;
    let reference = payment_step(&r)["ref"].as_str().unwrap().to_string();
    let now = app.now() / 1000;
    let processing = stripe_event("evt_a", "checkout.session.completed", &reference, "unpaid");
    assert_eq!(post_stripe(&app, &processing, now, WEBHOOK_SECRET).await.ok(200)["applied"], true);
    assert_eq!(steps(&app, &token, &flow).await["steps"], json!([]), "processing is not an outcome");
    let failed = stripe_event("evt_b", "checkout.session.async_payment_failed", &reference, "unpaid");
    assert_eq!(post_stripe(&app, &failed, now, WEBHOOK_SECRET).await.ok(200)["applied"], true);
    // The guest heard `declined` and asks again: a new Checkout Session.
    let retry = steps(&app, &token, &flow).await;
    let again = retry["steps"].as_array().unwrap().iter().find(|s| s["type"] == "payment").unwrap()["payment"].clone();
    assert_ne!(again["ref"], reference.as_str());
    assert_eq!(again["checkout_url"], "https://checkout.stripe.test/c/pay/cs_test_2");
    let second = again["ref"].as_str().unwrap().to_string();
    // Paid in one go, then refunded from Stripe's dashboard (charge.refunded, found by the payment intent).
    let mut paid = stripe_event("evt_c", "checkout.session.completed", &second, "paid");
    paid["data"]["object"]["payment_intent"] = json!("pi_test_2");
    assert_eq!(post_stripe(&app, &paid, now, WEBHOOK_SECRET).await.ok(200)["applied"], true);
    assert_eq!(steps(&app, &token, &flow).await["state"], "completed");
    let charge = json!({"id": "evt_d", "type": "charge.refunded", "data": {"object": {"object": "charge", "payment_intent": "pi_test_2", "refunded": true}}});
    assert_eq!(post_stripe(&app, &charge, now, WEBHOOK_SECRET).await.ok(200)["applied"], true);
    let record = app.get(&key, &format!("/api/v1/payments/{second}")).await.ok(200).clone();
    assert_eq!(record["state"], "refunded");
    let first = app.get(&key, &format!("/api/v1/payments/{reference}")).await.ok(200).clone();
    assert_eq!(first["state"], "failed");
    // A host without the webhook secret knows no Stripe endpoint.
    let plain = TestApp::start().await;
    post_stripe(&plain, &charge, now, WEBHOOK_SECRET).await.error(404, "not_found");
    plain.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn payments_concurrent_outcomes_call_the_guest_once() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    local_bot(&app, &key, "shop", "shop").await;
    let token = user(&app, &key, PHONE).await;
    let (flow, r) = shop_to_payment(&app, &key, &token).await;
    let reference = payment_step(&r)["ref"].as_str().unwrap().to_string();
    // Eight presses at once, of different buttons: one wins, the guest is called once.
    let p = |a: &'static str| press(&app, &reference, a);
    let answers =
        tokio::join!(p("pay"), p("decline"), p("cancel"), p("pay"), p("pay"), p("decline"), p("cancel"), p("pay"));
    let answers = [answers.0, answers.1, answers.2, answers.3, answers.4, answers.5, answers.6, answers.7];
    assert!(answers.iter().all(|(status, _)| *status == 200));
    let state =
        app.get(&key, &format!("/api/v1/payments/{reference}")).await.ok(200)["state"].as_str().unwrap().to_string();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.extend(steps(&app, &token, &flow).await["steps"].as_array().unwrap().clone());
    }
    let answers_of_the_guest = seen.iter().filter(|s| s["type"] == "message").count();
    assert_eq!(answers_of_the_guest, 1, "{seen:?}");
    let events: Vec<Value> = status_events(&app, partner_id(&app, "acme").await)
        .await
        .into_iter()
        .filter(|e| e["ref"] == reference.as_str())
        .collect();
    assert_eq!(events.len(), 2, "one transition: {events:?}");
    assert_eq!(events[1]["state"], state.as_str());
    app.stop().await;
}

#[tokio::test]
async fn payments_of_webhook_bots_open_a_checkout_and_the_outcome_is_a_signed_session_event() {
    let recv = FakeServer::start(200, 0).await;
    let app = TestApp::start_with(|c| c.webhook_poll_ms = 20).await;
    let key = app.partner("acme").await;
    let bot = json!({"code": "remote", "name": "Remote", "runtime_mode": "webhook", "webhook_url": recv.url});
    let bot_token = app.post(&key, "/api/v1/bots", bot).await.ok(201)["bot_token"].as_str().unwrap().to_string();
    let token = user(&app, &key, PHONE).await;
    let session = app.post(&token, "/api/v1/me/bots/remote/sessions", json!({})).await.ok(201)["session"].clone();
    let session = session.as_str().unwrap().to_string();
    let reply = |payment: Value| json!({"event": "reply", "data": {"session": session, "steps": [{"type": "payment", "payment": payment}]}});
    let inbound = |body: Value| {
        let r = app.client.post(format!("{}/api/v1/bots/remote/webhook", app.base)).bearer_auth(&bot_token).json(&body);
        async move { Resp::from(r.send().await.unwrap()).await }
    };
    // A request the host does not take is refused to the bot.
    inbound(reply(json!({"id": "p1", "amount_minor": 250, "currency": "XYZ", "description": "Tea"})))
        .await
        .field_error("data.steps");
    inbound(reply(json!({"id": "p1", "amount_minor": 250, "currency": "EUR", "description": "Tea"}))).await.ok(200);
    let got = app.get(&token, &format!("/api/v1/me/bots/remote/sessions/{session}")).await.ok(200).clone();
    let payment = got["steps"][0]["payment"].clone();
    let reference = payment["ref"].as_str().unwrap().to_string();
    assert!(payment["checkout_url"].as_str().unwrap().ends_with(&format!("/pay/{reference}")));
    assert_eq!(press(&app, &reference, "pay").await.0, 200);
    press(&app, &reference, "pay").await;
    crate::common::eventually("the payment event at the bot", || async {
        recv.received().iter().any(|r| r.json()["payload"]["event"]["type"] == "payment")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let events: Vec<Value> =
        recv.received().iter().map(|r| r.json()).filter(|e| e["payload"]["event"]["type"] == "payment").collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "session.event");
    assert_eq!(
        events[0]["payload"]["event"],
        json!({"type": "payment", "id": "p1", "status": "confirmed", "reference": reference})
    );
    app.stop().await;
}
