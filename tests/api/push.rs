//! Web Push (RFC 8030, VAPID RFC 8292, aes128gcm RFC 8291): subscribing a device, what a push service
//! receives when a message reaches the hub (decrypted here with the device's key), the acknowledgement that
//! makes the message delivered, and a subscription the push service says is gone.

use aws_lc_rs::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::agreement::{ECDH_P256, PrivateKey, UnparsedPublicKey, agree};
use aws_lc_rs::hkdf::{HKDF_SHA256, KeyType, Salt};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, eventually};

const PHONE: &str = "+15551230000";

/// A browser's side of a subscription: its P-256 key pair and authentication secret.
pub(crate) struct Device {
    key: PrivateKey,
    auth: [u8; 16],
}

impl Device {
    pub(crate) fn new() -> Device {
        let mut auth = [0u8; 16];
        aws_lc_rs::rand::fill(&mut auth).unwrap();
        Device { key: PrivateKey::generate(&ECDH_P256).unwrap(), auth }
    }

    fn public(&self) -> Vec<u8> {
        self.key.compute_public_key().unwrap().as_ref().to_vec()
    }

    pub(crate) fn subscription(&self, endpoint: &str) -> Value {
        json!({"endpoint": endpoint, "expirationTime": null,
               "keys": {"p256dh": URL_SAFE_NO_PAD.encode(self.public()), "auth": URL_SAFE_NO_PAD.encode(self.auth)}})
    }

    /// Reads an `aes128gcm` body as the browser does (RFC 8291 §3.4, RFC 8188 §2).
    fn decrypt(&self, body: &[u8]) -> Vec<u8> {
        struct Len(usize);
        impl KeyType for Len {
            fn len(&self) -> usize {
                self.0
            }
        }
        let hkdf = |salt: &[u8], ikm: &[u8], info: &[&[u8]], len: usize| {
            let mut out = vec![0u8; len];
            Salt::new(HKDF_SHA256, salt).extract(ikm).expand(info, Len(len)).unwrap().fill(&mut out).unwrap();
            out
        };
        let (salt, rest) = body.split_at(16);
        assert_eq!(u32::from_be_bytes(rest[..4].try_into().unwrap()), 4096, "record size");
        let id_len = rest[4] as usize;
        let (sender, record) = rest[5..].split_at(id_len);
        let shared = agree(&self.key, &UnparsedPublicKey::new(&ECDH_P256, sender), (), |s| Ok(s.to_vec())).unwrap();
        let ikm = hkdf(&self.auth, &shared, &[b"WebPush: info\0", &self.public(), sender], 32);
        let cek = hkdf(salt, &ikm, &[b"Content-Encoding: aes128gcm\0"], 16);
        let nonce = hkdf(salt, &ikm, &[b"Content-Encoding: nonce\0"], 12);
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek).unwrap());
        let mut record = record.to_vec();
        let plain = key
            .open_in_place(Nonce::try_assume_unique_for_key(&nonce).unwrap(), Aad::empty(), &mut record)
            .unwrap()
            .to_vec();
        assert_eq!(plain.last(), Some(&2), "the last record's delimiter");
        plain[..plain.len() - 1].to_vec()
    }
}

async fn user(app: &TestApp, key: &str) -> String {
    app.post(key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    app.login(PHONE).await
}

#[tokio::test]
async fn subscriptions_are_checked_and_one_per_device() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let settings = app.get(&token, "/api/v1/me/push").await;
    let vapid = settings.ok(200)["vapid_public_key"].as_str().unwrap().to_string();
    assert_eq!(URL_SAFE_NO_PAD.decode(&vapid).unwrap().len(), 65, "a P-256 point");
    assert_eq!(settings.json["subscribed"], false);
    let device = Device::new();
    let good = device.subscription("https://push.example.com/send/abc");
    // Where it may go: not a private address, not plain HTTP (only localhost in dev mode).
    for endpoint in ["https://10.0.0.1/push", "http://10.0.0.1/push", "ftp://push.example.com/x", "not a url"] {
        let mut bad = good.clone();
        bad["endpoint"] = json!(endpoint);
        app.post(&token, "/api/v1/me/push/subscriptions", bad).await.field_error("endpoint");
    }
    let mut huge = good.clone();
    huge["endpoint"] = json!(format!("https://push.example.com/{}", "x".repeat(100_000)));
    app.post(&token, "/api/v1/me/push/subscriptions", huge).await.field_error("endpoint");
    let mut bad = good.clone();
    bad["keys"]["p256dh"] = json!(URL_SAFE_NO_PAD.encode([4u8; 65]));
    app.post(&token, "/api/v1/me/push/subscriptions", bad).await.field_error("keys.p256dh");
    let mut bad = good.clone();
    bad["keys"]["auth"] = json!("c2hvcnQ");
    app.post(&token, "/api/v1/me/push/subscriptions", bad).await.field_error("keys.auth");
    app.post(&token, "/api/v1/me/push/subscriptions", json!({"endpoint": "https://push.example.com/x"}))
        .await
        .field_error("keys");
    app.post(&token, "/api/v1/me/push/subscriptions", json!({"keys": good["keys"]})).await.field_error("endpoint");
    let r = app.request(Method::POST, "/api/v1/me/push/subscriptions", None, Some(&good)).await;
    assert_eq!(r.status, 401);

    // One per device: subscribing again replaces it; unsubscribing ends it (and again is no error).
    let s = app.post(&token, "/api/v1/me/push/subscriptions", good.clone()).await;
    assert_eq!(s.ok(201)["endpoint"], "https://push.example.com/send/abc");
    let again = Device::new().subscription("https://push.example.com/send/def");
    app.post(&token, "/api/v1/me/push/subscriptions", again).await.ok(201);
    let pid = app.get(&token, "/api/v1/me/push").await;
    assert_eq!(pid.ok(200)["subscribed"], true);
    let rows = hubbub_host::store::push::list_for_phone(&app.state.db, PHONE).await.unwrap();
    assert_eq!(rows.iter().map(|s| s.endpoint.as_str()).collect::<Vec<_>>(), ["https://push.example.com/send/def"]);
    for _ in 0..2 {
        let gone = app.request(Method::DELETE, "/api/v1/me/push/subscriptions", Some(&token), None).await;
        assert_eq!(gone.status, 204);
    }
    assert_eq!(app.get(&token, "/api/v1/me/push").await.json["subscribed"], false);
}

/// The messages a send hands to Web Push.
#[derive(Default)]
struct Arrivals(std::sync::Mutex<Vec<String>>);

impl hubbub_host::messages::send::HubArrivals for Arrivals {
    fn arrived(&self, message: hubbub_host::store::messages::Message) {
        self.0.lock().unwrap().push(message.body.unwrap_or_default());
    }
}

/// A send into the hub learns in its own insert whether the user has a device subscribed to Web Push, and
/// hands the message to the push sender only then: a hub message to a user without one reads nothing more.
#[tokio::test]
async fn a_send_hands_a_hub_message_to_push_only_for_a_user_with_a_subscribed_device() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let partner = hubbub_host::store::partners::find_by_code(&app.state.db, "acme").await.unwrap().unwrap();
    let arrivals = Arrivals::default();
    let send = |body: &str| {
        let raw = json!({"phone": PHONE, "body": body});
        let mut sending = app.state.sending();
        sending.arrivals = &arrivals;
        async move {
            let req = serde_json::from_value(raw.clone()).unwrap();
            match hubbub_host::messages::send::send(&sending, partner.id, &req, &raw, None).await.unwrap() {
                hubbub_host::messages::send::Sent::New(m) => assert_eq!(m.state.as_str(), "sent", "in the hub"),
                other => panic!("a new message, not {other:?}"),
            }
        }
    };
    send("before any subscription").await;
    assert!(arrivals.0.lock().unwrap().is_empty(), "no device is subscribed: nothing to push");

    let endpoint = "https://push.example.com/send/abc";
    app.post(&token, "/api/v1/me/push/subscriptions", Device::new().subscription(endpoint)).await.ok(201);
    send("once subscribed").await;
    assert_eq!(*arrivals.0.lock().unwrap(), ["once subscribed"]);

    app.request(Method::DELETE, "/api/v1/me/push/subscriptions", Some(&token), None).await;
    send("after unsubscribing").await;
    assert_eq!(*arrivals.0.lock().unwrap(), ["once subscribed"], "unsubscribed: nothing more to push");
}

#[tokio::test]
async fn a_message_in_the_hub_is_pushed_encrypted_and_the_ack_makes_it_delivered() {
    let service = FakeServer::start(201, 0).await;
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let token = user(&app, &key).await;
    let vapid = app.get(&token, "/api/v1/me/push").await.json["vapid_public_key"].as_str().unwrap().to_string();
    let device = Device::new();
    let endpoint = format!("{}/push/device-1", service.url);
    app.post(&token, "/api/v1/me/push/subscriptions", device.subscription(&endpoint)).await.ok(201);

    let sent = app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "Your parcel ships today"})).await;
    let id = sent.ok(201)["message_id"].as_i64().unwrap();
    eventually("the push service gets the push", || async { !service.requests.lock().unwrap().is_empty() }).await;
    let push = service.requests.lock().unwrap()[0].clone();
    assert_eq!(push.path, "/push/device-1");
    assert_eq!(push.headers["content-encoding"], "aes128gcm");
    assert_eq!(push.headers["ttl"], "86400");
    let authorization = push.headers["authorization"].to_str().unwrap();
    assert!(
        authorization.starts_with("vapid t=") && authorization.ends_with(&format!(", k={vapid}")),
        "{authorization}"
    );
    let notice: Value = serde_json::from_slice(&device.decrypt(&push.body)).unwrap();
    assert_eq!(notice["title"], "acme Inc.");
    assert_eq!(notice["body"], "Your parcel ships today");
    assert_eq!(notice["tag"], "hub:acme");
    assert_eq!(notice["url"], format!("/m/{}", sent.json["ref"].as_str().unwrap()));
    assert_eq!(app.message(&key, id).await["state"], "sent");

    // The service worker acknowledges: delivered. A link the host did not make is 404.
    let ack = notice["ack"].as_str().unwrap();
    let mut forged = ack.to_string();
    forged.replace_range(forged.len() - 2.., "AA");
    assert_eq!(app.request(Method::POST, &forged, None, None).await.status, 404);
    assert_eq!(app.request(Method::POST, "/api/v1/push/ack/short", None, None).await.status, 404);
    assert_eq!(app.request(Method::POST, ack, None, None).await.status, 204);
    assert_eq!(app.message(&key, id).await["state"], "delivered");

    // The push service says the subscription is gone: it is deleted, and nothing more is pushed.
    service.set(410, 0);
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "Second"})).await.ok(201);
    eventually("the gone subscription is deleted", || async {
        app.get(&token, "/api/v1/me/push").await.json["subscribed"] == false
    })
    .await;
    assert_eq!(service.requests.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_person_keeps_ten_subscriptions_and_a_token_without_a_device_names_none() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    // Eleven devices sign in and subscribe, one after another: the eleventh replaces the oldest.
    let mut tokens = Vec::new();
    for n in 0..11 {
        // A phone gets a few codes per quarter hour: each sign-in comes a quarter hour after the last.
        app.clock.advance_ms(16 * 60 * 1000);
        let (token, _) = app.login_device(PHONE, Some(&format!("device-{n}"))).await;
        let endpoint = format!("https://push.example.com/sub/{n}");
        app.post(&token, "/api/v1/me/push/subscriptions", Device::new().subscription(&endpoint)).await.ok(201);
        tokens.push(token);
    }
    let kept: Vec<String> =
        sqlx::query_scalar("SELECT device_uuid FROM push_subscriptions WHERE phone = $1 ORDER BY id")
            .bind(PHONE)
            .fetch_all(app.state.db.reader())
            .await
            .unwrap();
    assert_eq!(kept, (1..11).map(|n| format!("device-{n}")).collect::<Vec<_>>());
    assert_eq!(app.get(&tokens[0], "/api/v1/me/push").await.ok(200)["subscribed"], false);
    assert_eq!(app.get(&tokens[10], "/api/v1/me/push").await.ok(200)["subscribed"], true);

    // A token that names no device (`hubbub user token`) cannot subscribe, nor name a device to.
    let (bare, _) = hubbub_host::http::auth::issue_user_token(&app.state, PHONE, None).unwrap();
    let named = json!({"device_uuid": "made-up-1"});
    let mut body = Device::new().subscription("https://push.example.com/sub/bare");
    body["device_uuid"] = named["device_uuid"].clone();
    app.post(&bare, "/api/v1/me/push/subscriptions", body).await.field_error("device_uuid");
    let without = Device::new().subscription("https://push.example.com/sub/bare");
    app.post(&bare, "/api/v1/me/push/subscriptions", without).await.field_error("device_uuid");
    // It may read (or remove) a subscription of one of its phone's devices, which it names.
    assert_eq!(app.get(&bare, "/api/v1/me/push?device_uuid=device-5").await.ok(200)["subscribed"], true);
    assert_eq!(app.get(&bare, "/api/v1/me/push").await.ok(200)["subscribed"], false);
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM push_subscriptions WHERE phone = $1")
        .bind(PHONE)
        .fetch_one(app.state.db.reader())
        .await
        .unwrap();
    assert_eq!(count, 10);
}
