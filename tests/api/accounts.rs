//! Accounts, linking and account field definitions (docs/api.md and the OpenAPI document).

use serde_json::{Value, json};

use crate::common::TestApp;

const PHONE: &str = "+15551230000";

#[tokio::test]
async fn link_creates_or_fetches_and_get_is_404_unless_linked() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let r = app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE, "display_name": "Ana"})).await;
    let body = r.ok(200);
    assert_eq!(body["linked"], true);
    assert_eq!(body["invited"], false);
    assert_eq!(body["account"]["phone"], PHONE);
    assert_eq!(body["account"]["state"], "unclaimed");
    assert_eq!(body["account"]["display_name"], "Ana");
    assert_eq!(body["account"]["partners"], json!([{"code": "acme", "name": "acme Inc."}]));
    // Linking again fetches the same account.
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let got = app.get(&acme, &format!("/api/v1/accounts/{PHONE}")).await;
    assert_eq!(got.ok(200)["phone"], PHONE);
    app.get(&globex, &format!("/api/v1/accounts/{PHONE}")).await.error(404, "not_found");
    app.get(&acme, "/api/v1/accounts/+15550000000").await.error(404, "not_found");
    // A partner's view lists only itself.
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let got = app.get(&globex, &format!("/api/v1/accounts/{PHONE}")).await;
    assert_eq!(got.ok(200)["partners"], json!([{"code": "globex", "name": "globex Inc."}]));
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": "12345"})).await.field_error("phone");
    app.post(&acme, "/api/v1/accounts/link", json!({})).await.field_error("phone");
}

#[tokio::test]
async fn invite_sends_an_sms_invitation() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let r = app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE, "invite": true})).await;
    assert_eq!(r.ok(200)["invited"], true);
    let sms = app.sink(PHONE, "sms").await;
    assert_eq!(sms.len(), 1);
    assert!(sms[0].contains("acme Inc.") && sms[0].contains("claim"), "{}", sms[0]);
    // A claimed user needs no invitation.
    app.login(PHONE).await;
    let r = app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE, "invite": true})).await;
    assert_eq!(r.ok(200)["invited"], false);
}

#[tokio::test]
async fn account_fields_crud_and_required_fields_at_linking() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let r = app
        .post(
            &acme,
            "/api/v1/settings/account-fields",
            json!({"key": "customer_no", "label": "Customer number", "type": "char", "required": true}),
        )
        .await;
    let customer = r.ok(201).clone();
    assert_eq!(customer["type"], "char");
    assert_eq!(customer["required"], true);
    let r = app
        .post(&acme, "/api/v1/settings/account-fields", json!({"key": "tier", "label": "Tier", "type": "selection", "required": false, "options": [{"id": "gold", "label": "Gold"}, {"id": "silver", "label": "Silver"}]}))
        .await;
    let tier_id = r.ok(201)["id"].as_i64().unwrap();
    app.post(&acme, "/api/v1/settings/account-fields", json!({"key": "email", "label": "E-mail", "type": "email"}))
        .await
        .ok(201);
    app.post(&acme, "/api/v1/settings/account-fields", json!({"key": "customer_no", "label": "Again", "type": "char"}))
        .await
        .error(409, "conflict");
    app.post(&acme, "/api/v1/settings/account-fields", json!({"key": "x", "label": "X", "type": "colour"}))
        .await
        .field_error("type");
    app.post(&acme, "/api/v1/settings/account-fields", json!({"key": "Bad Key", "label": "X", "type": "char"}))
        .await
        .field_error("key");
    app.post(&acme, "/api/v1/settings/account-fields", json!({"key": "s", "label": "S", "type": "selection"}))
        .await
        .field_error("options");
    let list = app.get(&acme, "/api/v1/settings/account-fields").await;
    assert_eq!(list.ok(200)["data"].as_array().unwrap().len(), 3);
    assert_eq!(app.get(&globex, "/api/v1/settings/account-fields").await.json["data"], json!([]));

    // Required field missing, then invalid values, then valid.
    let r = app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE})).await;
    r.field_error("fields.customer_no");
    let r = app
        .post(
            &acme,
            "/api/v1/accounts/link",
            json!({"phone": PHONE, "fields": {"customer_no": "C-1", "tier": "platinum", "email": "nope"}}),
        )
        .await;
    assert_eq!(r.error(422, "validation"), None, "two fields at fault");
    let fields = r.json["error"]["fields"].as_object().unwrap();
    assert!(fields.contains_key("fields.tier") && fields.contains_key("fields.email"), "{fields:?}");
    let r = app
        .post(
            &acme,
            "/api/v1/accounts/link",
            json!({"phone": PHONE, "fields": {"customer_no": "C-1", "tier": "gold", "email": "ana@example.com"}}),
        )
        .await;
    assert_eq!(
        r.ok(200)["account"]["fields"],
        json!({"customer_no": "C-1", "tier": "gold", "email": "ana@example.com"})
    );
    // Stored values satisfy the requirement later.
    let r = app.post(&acme, "/api/v1/accounts/link", json!({"phone": PHONE, "fields": {"tier": "silver"}})).await;
    assert_eq!(r.ok(200)["account"]["fields"]["tier"], "silver");
    assert_eq!(r.json["account"]["fields"]["customer_no"], "C-1");

    // Update and delete; another partner's field is 404.
    let r = app
        .request(
            reqwest::Method::PATCH,
            &format!("/api/v1/settings/account-fields/{tier_id}"),
            Some(&acme),
            Some(&json!({"label": "Level", "required": true})),
        )
        .await;
    let updated = r.ok(200);
    assert_eq!(updated["label"], "Level");
    assert_eq!(updated["required"], true);
    assert_eq!(updated["type"], "selection");
    app.request(
        reqwest::Method::PATCH,
        &format!("/api/v1/settings/account-fields/{tier_id}"),
        Some(&globex),
        Some(&json!({"label": "x"})),
    )
    .await
    .error(404, "not_found");
    app.request(
        reqwest::Method::PATCH,
        &format!("/api/v1/settings/account-fields/{tier_id}"),
        Some(&acme),
        Some(&json!({"key": "customer_no"})),
    )
    .await
    .error(409, "conflict");
    app.request(reqwest::Method::DELETE, &format!("/api/v1/settings/account-fields/{tier_id}"), Some(&globex), None)
        .await
        .error(404, "not_found");
    let r = app
        .request(reqwest::Method::DELETE, &format!("/api/v1/settings/account-fields/{tier_id}"), Some(&acme), None)
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(r.json, Value::Null);
    app.request(reqwest::Method::DELETE, &format!("/api/v1/settings/account-fields/{tier_id}"), Some(&acme), None)
        .await
        .error(404, "not_found");
}
