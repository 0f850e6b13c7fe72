//! The authorization matrix: every documented operation (and so every route: `conventions` keeps the two
//! equal) × every kind of credential → the answer the contract gives (401 / 403 / 404 / allowed). A route
//! without a row here fails the test, so a new route cannot ship without saying who may call it.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{TEST_JWT_SECRET, TestApp, eventually};

const PHONE: &str = "+15551230000";

/// Who may call an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// A partner key; another partner's resources are 404.
    Partner,
    /// A partner key, or the token of the bot the path names.
    PartnerOrBot,
    /// The platform partner's key only; any other partner is 403.
    Platform,
    /// A user JWT (`/me`).
    User,
    /// A developer key or session key (`/dev`).
    Developer,
    /// Media: the sending partner or a recipient user.
    MediaReaders,
    /// The inbound bot webhook: the bot's own credentials (token, secret, signatures), nothing else.
    BotWebhook,
    /// A partner member's session cookie only (their own session's routes): every bearer credential is 403.
    Member,
    /// No credential (sign-in, provider callbacks with their own signatures, content links, the
    /// document): whatever is sent in `Authorization` changes nothing.
    Open,
}

use Access::*;

/// Every operation and who may call it.
const MATRIX: &[(&str, &str, Access)] = &[
    ("POST", "/api/v1/accounts/link", Partner),
    ("GET", "/api/v1/analytics/conversations", Partner),
    ("GET", "/api/v1/analytics/messages", Partner),
    ("GET", "/api/v1/accounts/{phone}", Partner),
    ("DELETE", "/api/v1/accounts/{phone}", Partner),
    ("GET", "/api/v1/api-keys", Partner),
    ("POST", "/api/v1/api-keys", Partner),
    ("DELETE", "/api/v1/api-keys/{id}", Partner),
    ("POST", "/api/v1/agent/devices/keys", Partner),
    ("POST", "/api/v1/agent/messages", Partner),
    ("GET", "/api/v1/audit-log", Partner),
    ("POST", "/api/v1/auth/otp/start", Open),
    ("POST", "/api/v1/auth/otp/verify", Open),
    ("POST", "/api/v1/bots", Partner),
    ("GET", "/api/v1/bots", Partner),
    ("GET", "/api/v1/bots/{code}", PartnerOrBot),
    ("PATCH", "/api/v1/bots/{code}", Partner),
    ("PUT", "/api/v1/bots/{code}/component", Partner),
    ("GET", "/api/v1/bots/{code}/credentials", PartnerOrBot),
    ("POST", "/api/v1/bots/{code}/flows/{flow}/invite", Partner),
    ("POST", "/api/v1/bots/{code}/token/rotate", Partner),
    ("POST", "/api/v1/bots/{code}/webhook", BotWebhook),
    ("PUT", "/api/v1/bots/{code}/webhook", Partner),
    ("POST", "/api/v1/bots/{code}/webhook/secret/rotate", Partner),
    ("POST", "/api/v1/bots/{code}/webhook/test", Partner),
    ("GET", "/api/v1/broadcasts", Partner),
    ("POST", "/api/v1/broadcasts", Partner),
    ("GET", "/api/v1/broadcasts/audience", Partner),
    ("GET", "/api/v1/broadcasts/{id}", Partner),
    ("POST", "/api/v1/broadcasts/{id}/cancel", Partner),
    ("GET", "/api/v1/content/{ref}", Open),
    ("GET", "/api/v1/conversations", Partner),
    ("GET", "/api/v1/canned-replies", Partner),
    ("POST", "/api/v1/canned-replies", Partner),
    ("PUT", "/api/v1/canned-replies/{id}", Partner),
    ("DELETE", "/api/v1/canned-replies/{id}", Partner),
    ("GET", "/api/v1/labels", Partner),
    ("POST", "/api/v1/labels", Partner),
    ("DELETE", "/api/v1/labels/{id}", Partner),
    ("GET", "/api/v1/macros", Partner),
    ("POST", "/api/v1/macros", Partner),
    ("PUT", "/api/v1/macros/{id}", Partner),
    ("DELETE", "/api/v1/macros/{id}", Partner),
    ("POST", "/api/v1/conversations/{id}/macro", Partner),
    ("POST", "/api/v1/conversations/{id}/typing", Partner),
    ("GET", "/api/v1/settings/assignment", Partner),
    ("GET", "/api/v1/settings/business-hours", Partner),
    ("PUT", "/api/v1/settings/business-hours", Partner),
    ("GET", "/api/v1/settings/slas", Partner),
    ("GET", "/api/v1/settings/csat", Partner),
    ("PUT", "/api/v1/settings/csat", Partner),
    ("GET", "/api/v1/settings/prices", Partner),
    ("PUT", "/api/v1/settings/prices", Partner),
    ("PUT", "/api/v1/settings/slas", Partner),
    ("PUT", "/api/v1/settings/assignment", Partner),
    ("GET", "/api/v1/conversations/events", Partner),
    ("GET", "/api/v1/conversations/{id}", Partner),
    ("PATCH", "/api/v1/conversations/{id}", Partner),
    ("GET", "/api/v1/conversations/{id}/devices", Partner),
    ("GET", "/api/v1/conversations/{id}/keys", Partner),
    ("POST", "/api/v1/conversations/{id}/keys", Partner),
    ("POST", "/api/v1/conversations/{id}/messages", Partner),
    ("POST", "/api/v1/conversations/{id}/read", Partner),
    ("GET", "/api/v1/conversations/{id}/notes", Partner),
    ("POST", "/api/v1/conversations/{id}/notes", Partner),
    ("GET", "/api/v1/dev-sink/messages", Platform),
    ("GET", "/api/v1/flow-sessions", Partner),
    ("GET", "/api/v1/dev/keys", Developer),
    ("DELETE", "/api/v1/dev/keys/{prefix}", Developer),
    ("POST", "/api/v1/dev/messages", Developer),
    ("GET", "/api/v1/dev/messages", Developer),
    ("GET", "/api/v1/dev/usage", Developer),
    ("POST", "/api/v1/dev/webhooks/test", Developer),
    ("POST", "/api/v1/dev/session", Open),
    ("PUT", "/api/v1/dev/settings", Developer),
    ("POST", "/api/v1/dev/signup", Open),
    ("GET", "/api/v1/dev/templates", Developer),
    ("POST", "/api/v1/dev/verify", Open),
    ("GET", "/api/v1/keys/{phone}", Partner),
    ("GET", "/api/v1/me/account", User),
    ("DELETE", "/api/v1/me/account", User),
    ("POST", "/api/v1/me/export", User),
    ("GET", "/api/v1/me/export/{export_id}", User),
    ("GET", "/api/v1/me/export/{export_id}/download/{signature}", Open),
    ("GET", "/api/v1/me/bots", User),
    ("POST", "/api/v1/me/bots/{bot}/sessions", User),
    ("GET", "/api/v1/me/bots/{bot}/sessions/{session}", User),
    ("POST", "/api/v1/me/bots/{bot}/sessions/{session}/events", User),
    ("GET", "/api/v1/me/conversations", User),
    ("POST", "/api/v1/me/conversations", User),
    ("GET", "/api/v1/me/conversations/{ref}", User),
    ("GET", "/api/v1/me/conversations/{ref}/devices", User),
    ("GET", "/api/v1/me/conversations/{ref}/keys", User),
    ("POST", "/api/v1/me/conversations/{ref}/keys", User),
    ("POST", "/api/v1/me/conversations/{ref}/messages", User),
    ("POST", "/api/v1/me/conversations/{ref}/read", User),
    ("POST", "/api/v1/me/conversations/{ref}/typing", User),
    ("POST", "/api/v1/me/conversations/{ref}/rating", User),
    ("POST", "/api/v1/me/devices/keys", User),
    ("GET", "/api/v1/me/events", Open),
    ("POST", "/api/v1/me/events/ticket", User),
    ("POST", "/api/v1/me/flows/{ref}/events", User),
    ("POST", "/api/v1/me/flows/{ref}/start", User),
    ("POST", "/api/v1/me/flows/{ref}/submit", User),
    ("GET", "/api/v1/me/forms", User),
    ("GET", "/api/v1/me/messages", User),
    ("GET", "/api/v1/me/preferences", User),
    ("PUT", "/api/v1/me/preferences", User),
    ("DELETE", "/api/v1/me/tokens", User),
    ("GET", "/api/v1/me/push", User),
    ("POST", "/api/v1/me/push/subscriptions", User),
    ("DELETE", "/api/v1/me/push/subscriptions", User),
    ("POST", "/api/v1/push/ack/{token}", Open),
    ("GET", "/api/v1/me/unread", User),
    ("GET", "/api/v1/me/messages/{ref}", User),
    ("GET", "/api/v1/me/flows/{ref}", User),
    ("GET", "/api/v1/me/flows/{ref}/steps", User),
    ("POST", "/api/v1/me/messages/{ref}/read", User),
    ("GET", "/api/v1/media/{id}", MediaReaders),
    ("GET", "/api/v1/members", Partner),
    ("POST", "/api/v1/members/invitations", Partner),
    ("GET", "/api/v1/members/me", Member),
    ("PATCH", "/api/v1/members/me", Member),
    ("POST", "/api/v1/members/me/passkeys/challenges", Member),
    ("POST", "/api/v1/members/me/passkeys", Member),
    ("GET", "/api/v1/members/me/passkeys", Member),
    ("DELETE", "/api/v1/members/me/passkeys/{id}", Member),
    ("POST", "/api/v1/members/passkey-challenges", Open),
    ("POST", "/api/v1/members/sessions/passkey", Open),
    ("POST", "/api/v1/members/sessions", Open),
    ("DELETE", "/api/v1/members/sessions", Member),
    ("DELETE", "/api/v1/members/sessions/current", Member),
    ("PATCH", "/api/v1/members/{id}", Partner),
    ("DELETE", "/api/v1/members/{id}", Partner),
    ("GET", "/api/v1/messages", Partner),
    ("GET", "/api/v1/exports/messages", Partner),
    ("POST", "/api/v1/messages", Partner),
    ("POST", "/api/v1/messages/read", Partner),
    ("GET", "/api/v1/messages/{id}", Partner),
    ("POST", "/api/v1/messages/{id}/read", Partner),
    ("POST", "/api/v1/messages/{id}/unread", Partner),
    ("POST", "/api/v1/messages/{id}/cancel", Partner),
    ("GET", "/api/v1/openapi.json", Open),
    ("GET", "/api/v1/payments", Partner),
    ("GET", "/api/v1/payments/{id}", Partner),
    ("POST", "/api/v1/payments/{id}/refund", Partner),
    ("GET", "/pay/{ref}", Open),
    ("POST", "/pay/{ref}", Open),
    ("GET", "/api/v1/form-links/{token}", Open),
    ("POST", "/api/v1/form-links/{token}", Open),
    ("GET", "/healthz", Open),
    ("GET", "/metrics", Open),
    ("GET", "/readyz", Open),
    ("POST", "/api/v1/providers/twilio/status", Open),
    ("POST", "/api/v1/providers/twilio/inbound", Open),
    ("GET", "/api/v1/providers/whatsapp/webhook", Open),
    ("POST", "/api/v1/providers/whatsapp/webhook", Open),
    ("POST", "/api/v1/providers/stripe/webhook", Open),
    ("GET", "/api/v1/settings/account-fields", Partner),
    ("POST", "/api/v1/settings/account-fields", Partner),
    ("DELETE", "/api/v1/settings/account-fields/{id}", Partner),
    ("GET", "/api/v1/settings/delivery", Partner),
    ("PUT", "/api/v1/settings/delivery", Partner),
    ("GET", "/api/v1/settings/retention", Partner),
    ("PUT", "/api/v1/settings/retention", Partner),
    ("GET", "/api/v1/settings/senders", Partner),
    ("PUT", "/api/v1/settings/senders/whatsapp", Partner),
    ("PUT", "/api/v1/settings/senders/sms", Partner),
    ("DELETE", "/api/v1/settings/senders/whatsapp", Partner),
    ("DELETE", "/api/v1/settings/senders/sms", Partner),
    ("PATCH", "/api/v1/settings/account-fields/{id}", Partner),
    ("PUT", "/api/v1/settings/webhook", Partner),
    ("POST", "/api/v1/system/broadcasts", Platform),
    ("GET", "/api/v1/templates", Partner),
    ("POST", "/api/v1/templates", Partner),
    ("GET", "/api/v1/templates/{id}", Partner),
    ("POST", "/api/v1/templates/{id}/submit", Partner),
    ("GET", "/api/v1/webhooks/deliveries", Partner),
    ("POST", "/api/v1/webhooks/deliveries/{id}/retry", Partner),
    ("GET", "/api/v1/webhooks/deliveries/{id}", Partner),
    ("POST", "/api/v1/webhooks/deliveries/retry", Partner),
    ("POST", "/api/v1/webhooks/test", Partner),
];

/// The kinds of credential every operation is tried with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    None,
    Malformed,
    ExpiredJwt,
    OtherPartner,
    DeveloperKey,
    DeveloperSession,
    BotToken,
    UserJwt,
    /// The owning partner (the platform partner), tried last: its calls may change what they touch.
    Owner,
}

const KINDS: &[Kind] = &[
    Kind::None,
    Kind::Malformed,
    Kind::ExpiredJwt,
    Kind::OtherPartner,
    Kind::DeveloperKey,
    Kind::DeveloperSession,
    Kind::BotToken,
    Kind::UserJwt,
    Kind::Owner,
];

/// What an answer must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Status(u16),
    /// Served: not 401, 403 or 5xx; `and_found` also refuses 404 (the path names the caller's resources).
    Allowed {
        and_found: bool,
    },
    /// The same status as without any credential.
    AsAnonymous,
}

fn expect(access: Access, kind: Kind, has_params: bool) -> Expect {
    use Expect::*;
    use Kind as K;
    let allowed = Allowed { and_found: has_params };
    let loose = Allowed { and_found: false };
    if access == Open {
        return AsAnonymous;
    }
    match kind {
        K::None | K::Malformed | K::ExpiredJwt => Status(401),
        _ if access == BotWebhook => {
            if kind == K::BotToken {
                loose
            } else {
                Status(401)
            }
        }
        K::Owner => match access {
            Partner | PartnerOrBot | Platform | MediaReaders => allowed,
            _ => Status(403),
        },
        K::OtherPartner => match access {
            Partner | PartnerOrBot | MediaReaders if has_params => Status(404),
            Partner | PartnerOrBot => loose,
            _ => Status(403),
        },
        K::DeveloperKey => {
            if access == Developer {
                allowed
            } else {
                Status(403)
            }
        }
        // The session key runs after the API key, which may have used up what the path names.
        K::DeveloperSession => {
            if access == Developer {
                loose
            } else {
                Status(403)
            }
        }
        K::BotToken => {
            if access == PartnerOrBot {
                allowed
            } else {
                Status(403)
            }
        }
        K::UserJwt => match access {
            User | MediaReaders => allowed,
            _ => Status(403),
        },
    }
}

/// Everything the paths name, all belonging to the owner (and its user).
struct Fixtures {
    owner: String,
    other: String,
    developer: String,
    developer_session: String,
    spare_key_prefix: String,
    bot_token: String,
    user: String,
    expired: String,
    message_id: i64,
    message_ref: String,
    media_id: String,
    template_id: i64,
    conversation_id: i64,
    conversation_ref: String,
    broadcast_id: i64,
    field_id: i64,
    /// A second key of the owner's, for the revoke route (the owner's own key goes on working).
    api_key_id: i64,
    canned_reply_id: i64,
    label_id: i64,
    macro_id: i64,
    /// An agent of the owner's, for the member routes.
    member_id: i64,
    delivery_id: String,
    flow_ref: String,
    chat_session: String,
    payment_id: i64,
    payment_ref: String,
    /// The person's export of their data.
    export_id: String,
}

impl Fixtures {
    fn credential(&self, kind: Kind) -> Option<String> {
        Some(match kind {
            Kind::None => return None,
            Kind::Malformed => "not-a-credential".into(),
            Kind::ExpiredJwt => self.expired.clone(),
            Kind::OtherPartner => self.other.clone(),
            Kind::DeveloperKey => self.developer.clone(),
            Kind::DeveloperSession => self.developer_session.clone(),
            Kind::BotToken => self.bot_token.clone(),
            Kind::UserJwt => self.user.clone(),
            Kind::Owner => self.owner.clone(),
        })
    }

    /// The path with its parameters filled in with the owner's resources.
    fn concrete(&self, path: &str) -> String {
        let id = |after: &str| -> String {
            match after {
                "messages" => self.message_id.to_string(),
                "templates" => self.template_id.to_string(),
                "conversations" => self.conversation_id.to_string(),
                "broadcasts" => self.broadcast_id.to_string(),
                "account-fields" => self.field_id.to_string(),
                "api-keys" => self.api_key_id.to_string(),
                "canned-replies" => self.canned_reply_id.to_string(),
                "labels" => self.label_id.to_string(),
                "macros" => self.macro_id.to_string(),
                "members" => self.member_id.to_string(),
                "deliveries" => self.delivery_id.clone(),
                "media" => self.media_id.clone(),
                "payments" => self.payment_id.to_string(),
                // No credential of the matrix is a member's session: any id is refused before it is read.
                "passkeys" => "1".to_string(),
                other => panic!("no fixture for {{id}} after {other}"),
            }
        };
        let segments: Vec<&str> = path.split('/').collect();
        let mut out = Vec::new();
        for (i, segment) in segments.iter().enumerate() {
            let before = if i > 0 { segments[i - 1] } else { "" };
            out.push(match *segment {
                "{id}" => id(before),
                "{ref}" => match before {
                    "flows" => self.flow_ref.clone(),
                    "conversations" => self.conversation_ref.clone(),
                    "pay" => self.payment_ref.clone(),
                    _ => self.message_ref.clone(),
                },
                "{bot}" => "chatbot".to_string(),
                "{code}" => "flowbot".to_string(),
                "{flow}" => "signup".to_string(),
                "{phone}" => PHONE.to_string(),
                "{export_id}" => self.export_id.clone(),
                // Not the export's signature: an open route that answers `404` to whatever credential.
                "{signature}" => "0".repeat(64),
                "{prefix}" => self.spare_key_prefix.clone(),
                "{session}" => self.chat_session.clone(),
                // An acknowledgement link the host did not make (its own are in the pushes, tests/api/push.rs).
                "{token}" => "bm90LW1hZGUtYnktdGhlLWhvc3Q".to_string(),
                s if s.starts_with('{') => panic!("no fixture for {s} in {path}"),
                s => s.to_string(),
            });
        }
        out.join("/")
    }
}

/// An HS256 user token that expired long ago, signed with the host's secret.
fn expired_jwt() -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(json!({"sub": PHONE, "iat": 0, "exp": 1}).to_string());
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(TEST_JWT_SECRET.as_bytes()).unwrap();
    mac.update(format!("{header}.{claims}").as_bytes());
    format!("{header}.{claims}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

async fn open_post(app: &TestApp, path: &str, body: Value) -> Value {
    app.request(Method::POST, path, None, Some(&body)).await.json
}

async fn upload(app: &TestApp, key: &str, code: &str, component: &str) {
    let r = app
        .client
        .put(format!("{}/api/v1/bots/{code}/component", app.base))
        .bearer_auth(key)
        .header("content-type", "application/wasm")
        .body(crate::common::wasm(component))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

async fn fixtures(app: &TestApp) -> Fixtures {
    let owner = app.partner_with("acme", true).await;
    let other = app.partner("globex").await;
    // Bots: one with a flow (its token is the bot credential), one for chats.
    let flowbot = app.post(&owner, "/api/v1/bots", json!({"code": "flowbot", "name": "Flows"})).await.ok(201).clone();
    upload(app, &owner, "flowbot", "signup").await;
    app.post(&owner, "/api/v1/bots", json!({"code": "chatbot", "name": "Chat"})).await.ok(201);
    upload(app, &owner, "chatbot", "chat").await;
    // The user, linked to the owner, with a message, a media message, a flow invitation, a chat session and
    // a support conversation.
    app.post(&owner, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    let user = app.login(PHONE).await;
    let hook = json!({"webhook_url": "http://127.0.0.1:9/hook"});
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&owner), Some(&hook)).await.ok(200);
    let m = app.send_text(&owner, PHONE, "hello").await.ok(201).clone();
    let media = json!({"phone": PHONE, "content_type": "image", "media_base64": STANDARD.encode([1u8, 2, 3]), "media_mimetype": "image/png"});
    let media = app.post(&owner, "/api/v1/messages", media).await.ok(201)["media"]["url"].as_str().unwrap().to_string();
    let invite = app.post(&owner, "/api/v1/bots/flowbot/flows/signup/invite", json!({"phone": PHONE})).await;
    let flow_ref = invite.ok(201)["flow_session"]["ref"].as_str().unwrap().to_string();
    let chat = app.post(&user, "/api/v1/me/bots/chatbot/sessions", json!({})).await.ok(201)["session"].clone();
    let conversation = app.post(&user, "/api/v1/me/conversations", json!({"partner": "acme", "body": "help"})).await;
    let conversation = conversation.ok(201).clone();
    let template = json!({"code": "t1", "channel": "inapp", "category": "utility", "body": "Hi {{name}}"});
    let template_id = app.post(&owner, "/api/v1/templates", template).await.ok(201)["template_id"].as_i64().unwrap();
    let broadcast =
        app.post(&owner, "/api/v1/broadcasts", json!({"body": "News"})).await.ok(202)["broadcast_id"].clone();
    let field = json!({"key": "tier", "label": "Tier", "type": "char", "required": false});
    let field_id = app.post(&owner, "/api/v1/settings/account-fields", field).await.ok(201)["id"].as_i64().unwrap();
    let spare_api_key = app.post(&owner, "/api/v1/api-keys", json!({"name": "spare"})).await;
    let api_key_id = spare_api_key.ok(201)["key"]["id"].as_i64().unwrap();
    let canned = app.post(&owner, "/api/v1/canned-replies", json!({"shortcut": "hi", "body": "Hello!"})).await;
    let canned_reply_id = canned.ok(201)["id"].as_i64().unwrap();
    let label_id = app.post(&owner, "/api/v1/labels", json!({"name": "vip"})).await.ok(201)["id"].as_i64().unwrap();
    let note = json!({"name": "Note", "actions": [{"type": "note", "body": "seen"}]});
    let macro_id = app.post(&owner, "/api/v1/macros", note).await.ok(201)["id"].as_i64().unwrap();
    let invitation = app.post(&owner, "/api/v1/members/invitations", json!({"role": "agent"})).await;
    let invitation = invitation.ok(201)["invitation"].as_str().unwrap().to_string();
    const AGENT: &str = "+15557770001";
    open_post(app, "/api/v1/auth/otp/start", json!({"phone": AGENT})).await;
    let code = app.last_code(AGENT).await;
    let signed_in =
        open_post(app, "/api/v1/members/sessions", json!({"phone": AGENT, "code": code, "invitation": invitation}))
            .await;
    let member_id = signed_in["member"]["id"].as_i64().unwrap();
    let delivery =
        || async { app.get(&owner, "/api/v1/webhooks/deliveries").await.json["data"][0]["delivery_id"].clone() };
    eventually("a webhook delivery", || async { delivery().await.is_string() }).await;
    let delivery_id = delivery().await.as_str().unwrap().to_string();
    // A developer with its API key, a session key, and a spare session key to revoke.
    const DEV: &str = "+15557770000";
    open_post(app, "/api/v1/dev/signup", json!({"phone": DEV})).await;
    let code = app.last_code(DEV).await;
    let developer = open_post(app, "/api/v1/dev/verify", json!({"phone": DEV, "code": code})).await["api_key"].clone();
    let mut sessions = Vec::new();
    for _ in 0..2 {
        open_post(app, "/api/v1/dev/signup", json!({"phone": DEV})).await;
        let code = app.last_code(DEV).await;
        sessions
            .push(open_post(app, "/api/v1/dev/session", json!({"phone": DEV, "code": code})).await["api_key"].clone());
    }
    let spare = sessions[1].as_str().unwrap();
    // A payment of the chat bot's session (as a guest's payment step makes one), for the payment routes.
    let chat_ref = chat.as_str().unwrap();
    let (session_id, bot_id): (i64, i64) = {
        use sqlx::Row;
        let row = sqlx::query("SELECT id, bot_id FROM flow_sessions WHERE ref = $1")
            .bind(chat_ref)
            .fetch_one(app.state.db.reader())
            .await
            .unwrap();
        (row.get("id"), row.get("bot_id"))
    };
    let partner_id: i64 = sqlx::query_scalar("SELECT id FROM partners WHERE code = 'acme'")
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    let new = hubbub_host::store::payments::NewPayment {
        reference: format!("pay_{}", hubbub_host::secrets::random_alnum(28)),
        partner_id,
        partner_code: "acme".into(),
        bot_id,
        bot_code: "chatbot".into(),
        session_id,
        phone: PHONE.into(),
        guest_id: "p1".into(),
        amount_minor: 100,
        currency: "EUR".into(),
        description: "Fixture".into(),
        provider: hubbub_host::names::ProviderName::Dev,
    };
    let payment =
        hubbub_host::store::payments::create(&app.state.db, &new, app.now(), hubbub_host::events::payment_status)
            .await
            .unwrap();
    let export = app.post(&user, "/api/v1/me/export", serde_json::json!({})).await;
    let export_id = export.ok(202)["export_id"].as_str().unwrap().to_string();
    Fixtures {
        export_id,
        payment_id: payment.id,
        payment_ref: payment.reference,
        developer: developer.as_str().unwrap().to_string(),
        developer_session: sessions[0].as_str().unwrap().to_string(),
        spare_key_prefix: hubbub_host::secrets::display_prefix(spare, "sk_dev_"),
        bot_token: flowbot["bot_token"].as_str().unwrap().to_string(),
        expired: expired_jwt(),
        message_id: m["message_id"].as_i64().unwrap(),
        message_ref: m["ref"].as_str().unwrap().to_string(),
        media_id: media.trim_start_matches("/api/v1/media/").to_string(),
        template_id,
        conversation_id: conversation["conversation_id"].as_i64().unwrap(),
        conversation_ref: conversation["ref"].as_str().unwrap().to_string(),
        broadcast_id: broadcast.as_i64().unwrap(),
        field_id,
        api_key_id,
        canned_reply_id,
        label_id,
        macro_id,
        member_id,
        delivery_id,
        flow_ref,
        chat_session: chat.as_str().unwrap().to_string(),
        owner,
        other,
        user,
    }
}

#[tokio::test]
async fn every_route_answers_every_kind_of_credential_as_the_contract_says() {
    let app = TestApp::start_with(|c| {
        c.developer_rate_limit_per_s = 100_000;
        c.developer_rate_limit_burst = 100_000;
    })
    .await;

    // The matrix covers exactly the documented operations (which `conventions` keeps equal to the router).
    let doc = app.request(Method::GET, "/api/v1/openapi.json", None, None).await.json;
    let mut documented = BTreeSet::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let rows: BTreeSet<(String, String)> = MATRIX.iter().map(|(m, p, _)| (m.to_string(), p.to_string())).collect();
    let missing: Vec<_> = documented.difference(&rows).collect();
    assert!(missing.is_empty(), "routes without a row in the auth matrix: {missing:?}");
    let stale: Vec<_> = rows.difference(&documented).collect();
    assert!(stale.is_empty(), "rows for routes that do not exist: {stale:?}");

    let mut f = fixtures(&app).await;
    // Operations that use up what they touch (a rotated token, a deleted field) run last.
    let mut order: Vec<&(&str, &str, Access)> = MATRIX.iter().collect();
    order.sort_by_key(|(method, path, _)| (path.ends_with("/token/rotate"), *method == "DELETE"));
    let mut failures = Vec::new();
    let mut calls = 0;
    for (method, path, access) in order {
        let has_params = path.contains('{');
        let url = format!("{}{}", app.base, f.concrete(path));
        let mut anonymous = None;
        for &kind in KINDS {
            let mut request = app.client.request(Method::from_bytes(method.as_bytes()).unwrap(), &url);
            if let Some(credential) = f.credential(kind) {
                request = request.bearer_auth(credential);
            }
            if *method != "GET" && *method != "DELETE" {
                request = request.header("content-type", "application/json").body("{}");
            }
            let response = request.send().await.unwrap();
            calls += 1;
            let status = response.status().as_u16();
            // An event stream that opened is answered: its body never ends.
            let streaming = response.headers().get("content-type").is_some_and(|v| v == "text/event-stream");
            let body: Value = if streaming { Value::Null } else { response.json().await.unwrap_or(Value::Null) };
            if status >= 400 && !body["error"]["code"].is_string() {
                failures.push(format!("{method} {path} as {kind:?}: {status} without the error shape"));
            }
            let ok = match expect(*access, kind, has_params) {
                Expect::Status(want) => status == want,
                Expect::Allowed { and_found } => {
                    !matches!(status, 401 | 403) && status < 500 && !(and_found && status == 404)
                }
                Expect::AsAnonymous => {
                    let first = *anonymous.get_or_insert(status);
                    status == first && status < 500
                }
            };
            if !ok {
                failures.push(format!(
                    "{method} {path} as {kind:?}: got {status}, expected {:?} ({})",
                    expect(*access, kind, has_params),
                    body["error"]["message"]
                ));
            }
        }
        if *path == "/api/v1/me/tokens" {
            // The user signed out everywhere: a token issued a second later serves the rows after it.
            app.clock.advance_ms(1_000);
            f.user = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap().0;
        }
    }
    assert_eq!(calls, MATRIX.len() * KINDS.len());
    assert!(failures.is_empty(), "{} answers differ from the matrix:\n{}", failures.len(), failures.join("\n"));
}
