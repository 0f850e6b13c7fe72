//! End-to-end encryption: the key directory, sealed hub messages opened by each device, encrypted
//! conversations in both directions, the opaque offline alert, the reference CLI, and a scan of the raw
//! database for the plaintext. Sealing and opening use the reference library (`hubbub-e2e`), as a partner
//! and an app would.

use hubbub_encryption::{self as e2e, Envelope, KeyPair, KeyWrap, Recipient};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{FakeServer, TestApp, eventually, hubbub_with_input};

const PHONE: &str = "+15551230000";

/// A claimed user of `acme` logged in on `device`, with that device's key published.
async fn user_with_key(app: &TestApp, partner_key: &str, device: &str) -> (String, KeyPair) {
    app.post(partner_key, "/api/v1/accounts/link", json!({"phone": PHONE})).await;
    let (token, _) = app.login_device(PHONE, Some(device)).await;
    let pair = KeyPair::generate().unwrap();
    let r = app.post(&token, "/api/v1/me/devices/keys", json!({"identity_key_pub": pair.public_b64()})).await;
    assert_eq!(r.ok(201)["device_uuid"], device);
    (token, pair)
}

/// What a partner does: read the directory, seal for every device with keys.
async fn seal_for_user(app: &TestApp, key: &str, partner: &str, reference: &str, text: &str) -> Envelope {
    let dir = app.get(key, &format!("/api/v1/keys/{PHONE}")).await.ok(200).clone();
    let recipients: Vec<Recipient> = dir["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["has_keys"] == true)
        .map(|d| serde_json::from_value(d.clone()).unwrap())
        .collect();
    e2e::seal(text.as_bytes(), &e2e::hub_aad(partner, reference), &recipients, None).unwrap()
}

fn new_ref() -> String {
    format!("msg_{}", hubbub_host::secrets::random_alnum(24))
}

fn sealed_send(reference: &str, env: &Envelope) -> Value {
    json!({"phone": PHONE, "ref": reference, "encryption": "e2e", "e2e_envelope": env})
}

#[tokio::test]
async fn the_key_directory_publishes_replaces_and_never_shows_other_partners_agents() {
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let (token, _) = app.login_device(PHONE, Some("phone-1")).await;
    let k1 = KeyPair::generate().unwrap();
    let k2 = KeyPair::generate().unwrap();

    // Bad keys, each a 422 on the field.
    for bad in [json!({}), json!({"identity_key_pub": "AAAA"}), json!({"identity_key_pub": "+".repeat(43)})] {
        app.post(&token, "/api/v1/me/devices/keys", bad).await.field_error("identity_key_pub");
    }
    let body = json!({"identity_key_pub": k1.public_b64(), "device_uuid": "bad uuid"});
    app.post(&token, "/api/v1/me/devices/keys", body).await.field_error("device_uuid");

    // The token's device; then a second device named in the body (padding accepted, stored without).
    let r = app.post(&token, "/api/v1/me/devices/keys", json!({"identity_key_pub": k1.public_b64()})).await;
    let d = r.ok(201);
    assert_eq!(
        (d["device_uuid"].as_str(), d["has_keys"].as_bool(), d["key_version"].as_i64()),
        (Some("phone-1"), Some(true), Some(1))
    );
    let padded = format!("{}=", k2.public_b64());
    let r = app
        .post(
            &token,
            "/api/v1/me/devices/keys",
            json!({"identity_key_pub": padded, "device_uuid": "web-1", "platform": "web"}),
        )
        .await;
    assert_eq!(r.ok(201)["identity_key_pub"], k2.public_b64());

    // Republishing a different key replaces it and bumps key_version; the same key changes nothing.
    let k3 = KeyPair::generate().unwrap();
    let r = app.post(&token, "/api/v1/me/devices/keys", json!({"identity_key_pub": k3.public_b64()})).await;
    assert_eq!(r.ok(201)["key_version"], 2);
    let r = app.post(&token, "/api/v1/me/devices/keys", json!({"identity_key_pub": k3.public_b64()})).await;
    assert_eq!(r.ok(201)["key_version"], 2);

    // Another user cannot take over this device.
    let (other, _) = app.login_device("+15559990000", None).await;
    let body = json!({"identity_key_pub": k1.public_b64(), "device_uuid": "phone-1"});
    app.post(&other, "/api/v1/me/devices/keys", body).await.error(409, "conflict");

    // Agent devices, one per partner.
    app.post(&acme, "/api/v1/agent/devices/keys", json!({"identity_key_pub": k1.public_b64()}))
        .await
        .field_error("device_uuid");
    let r = app
        .post(
            &acme,
            "/api/v1/agent/devices/keys",
            json!({"device_uuid": "console-a", "identity_key_pub": k1.public_b64()}),
        )
        .await;
    assert_eq!(r.ok(201)["key_version"], 1);
    let r = app
        .post(
            &globex,
            "/api/v1/agent/devices/keys",
            json!({"device_uuid": "console-g", "identity_key_pub": k2.public_b64()}),
        )
        .await;
    r.ok(201);

    // The directory answers only for phones the partner is linked to.
    app.get(&acme, &format!("/api/v1/keys/{PHONE}")).await.error(404, "not_found");
    for partner in [&acme, &globex] {
        app.post(partner, "/api/v1/accounts/link", json!({"phone": PHONE})).await.ok(200);
    }
    let dir = app.get(&acme, &format!("/api/v1/keys/{PHONE}")).await.ok(200).clone();
    assert_eq!(dir["phone"], PHONE);
    let devices: Vec<(&str, &str, i64)> = dir["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["device_uuid"].as_str().unwrap(),
                d["identity_key_pub"].as_str().unwrap(),
                d["key_version"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(devices, vec![("phone-1", k3.public_b64().as_str(), 2), ("web-1", k2.public_b64().as_str(), 1)]);
    assert_eq!(dir["devices"][1]["platform"], "web");
    let agents =
        |d: &Value| d["agent_devices"].as_array().unwrap().iter().map(|a| a["device_uuid"].clone()).collect::<Vec<_>>();
    assert_eq!(agents(&dir), vec![json!("console-a")]);
    let dir = app.get(&globex, &format!("/api/v1/keys/{PHONE}")).await.ok(200).clone();
    assert_eq!(agents(&dir), vec![json!("console-g")], "never another partner's agent devices");

    // A linked phone without devices has empty lists; an unlinked one is 404 (whether it uses the app or
    // not); a bad phone is 422; credentials of the wrong kind are 403.
    app.post(&acme, "/api/v1/accounts/link", json!({"phone": "+15550000000"})).await.ok(200);
    let none = app.get(&acme, "/api/v1/keys/+15550000000").await.ok(200).clone();
    assert_eq!(none["devices"], json!([]));
    assert_eq!(agents(&none), vec![json!("console-a")]);
    app.get(&acme, "/api/v1/keys/+15559990000").await.error(404, "not_found");
    app.get(&acme, "/api/v1/keys/12345").await.field_error("phone");
    app.get(&token, &format!("/api/v1/keys/{PHONE}")).await.error(403, "forbidden");
    app.post(&acme, "/api/v1/me/devices/keys", json!({"identity_key_pub": k1.public_b64()}))
        .await
        .error(403, "forbidden");
    app.post(&token, "/api/v1/agent/devices/keys", json!({"device_uuid": "x", "identity_key_pub": k1.public_b64()}))
        .await
        .error(403, "forbidden");
}

#[tokio::test]
async fn a_sealed_hub_message_reaches_each_device_with_its_own_wrap() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    let (phone_token, phone_key) = user_with_key(&app, &key, "phone-1").await;
    let (web_token, _) = app.login_device(PHONE, Some("web-1")).await;
    let web_key = KeyPair::generate().unwrap();
    app.post(&web_token, "/api/v1/me/devices/keys", json!({"identity_key_pub": web_key.public_b64()})).await.ok(201);

    let reference = new_ref();
    let env = seal_for_user(&app, &key, "acme", &reference, "Your code is 4821, valid 5 minutes").await;
    assert_eq!(env.key_wraps.len(), 2);
    let mut body = sealed_send(&reference, &env);
    body["idempotency_key"] = json!("e2e-1");
    let m = app.post(&key, "/api/v1/messages", body.clone()).await.ok(201).clone();
    assert_eq!(
        (m["ref"].as_str(), m["body"].clone(), m["encryption"].as_str()),
        (Some(reference.as_str()), Value::Null, Some("e2e"))
    );
    let id = m["message_id"].as_i64().unwrap();

    // A retry under the same idempotency key is the same message, not a ref conflict.
    let again = app.post(&key, "/api/v1/messages", body).await;
    assert_eq!(again.ok(201)["message_id"], id);
    assert_eq!(again.headers.get("idempotent-replayed").unwrap(), "true");
    // Any other reuse of the ref is a conflict, whoever sends it.
    app.post(&key, "/api/v1/messages", sealed_send(&reference, &env)).await.error(409, "conflict");
    let globex = app.partner("globex").await;
    app.post(&globex, "/api/v1/messages", sealed_send(&reference, &env)).await.error(409, "conflict");
    // Without `ref`, an aad of the documented shape names it (so the message can be opened).
    let named = new_ref();
    let env2 = seal_for_user(&app, &key, "acme", &named, "second").await;
    let r =
        app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "encryption": "e2e", "e2e_envelope": env2})).await;
    assert_eq!(r.ok(201)["ref"], named.as_str());
    // `encrypted: false` is simply a plaintext message.
    let plain = json!({"phone": PHONE, "body": "plain", "encrypted": false});
    assert_eq!(app.post(&key, "/api/v1/messages", plain).await.ok(201)["body"], "plain");
    // A chosen ref must look like ours, and only E2E messages choose one.
    app.post(&key, "/api/v1/messages", sealed_send("msg_short", &env)).await.field_error("ref");
    app.post(&key, "/api/v1/messages", json!({"phone": PHONE, "body": "hi", "ref": new_ref()}))
        .await
        .field_error("ref");

    // The partner sees the whole envelope; it is delivered in the hub.
    let full = app.delivered(&key, id).await;
    assert_eq!(full["channel"], "inapp");
    assert_eq!(serde_json::from_value::<Envelope>(full["e2e_envelope"].clone()).unwrap(), env);

    // Each device sees only its own wrap, and opens the message with it.
    for (token, device, pair) in [(&phone_token, "phone-1", &phone_key), (&web_token, "web-1", &web_key)] {
        let inbox = app.get(token, "/api/v1/me/messages").await.ok(200).clone();
        let record = inbox["data"].as_array().unwrap().iter().find(|m| m["ref"] == reference.as_str()).unwrap();
        let wraps = record["e2e_envelope"]["key_wraps"].as_array().unwrap();
        assert_eq!(wraps.len(), 1, "{device} sees one wrap");
        assert_eq!(wraps[0]["device_uuid"], device);
        let seen: Envelope = serde_json::from_value(record["e2e_envelope"].clone()).unwrap();
        let aad = e2e::hub_aad(record["partner"].as_str().unwrap(), record["ref"].as_str().unwrap());
        let plain = e2e::open(&seen, device, pair, &aad).unwrap();
        assert_eq!(plain, b"Your code is 4821, valid 5 minutes");
    }
    assert_eq!(app.message(&key, id).await["state"], "delivered");
}

/// The content-key wraps of `version` to every device of the thread, made by whoever shares the key.
fn wraps_for(key: &[u8; 32], conv_ref: &str, version: i64, devices: &[(&str, &str, &KeyPair)]) -> Value {
    let aad = e2e::conversation_key_aad(conv_ref, version);
    devices
        .iter()
        .map(|(kind, uuid, pair)| {
            let r = Recipient { device_uuid: uuid.to_string(), identity_key_pub: pair.public_b64() };
            let mut w = e2e::wrap_key(key, &r, &aad).unwrap();
            w.device_kind = Some(kind.to_string());
            serde_json::to_value(w).unwrap()
        })
        .collect()
}

/// The content key of `version` for one device, from the wraps the server holds for it.
fn content_key(keys: &Value, conv_ref: &str, version: i64, pair: &KeyPair) -> [u8; 32] {
    let wrap = keys["wraps"].as_array().unwrap().iter().find(|w| w["key_version"] == version).expect("a wrap");
    let wrap: KeyWrap = serde_json::from_value(wrap.clone()).unwrap();
    e2e::unwrap_key(&wrap, pair, &e2e::conversation_key_aad(conv_ref, version)).unwrap()
}

fn encrypted(key: &[u8; 32], version: i64, conv_ref: &str, text: &str) -> Value {
    let reference = new_ref();
    let env = e2e::encrypt(key, version, text.as_bytes(), &e2e::conversation_aad(conv_ref, &reference)).unwrap();
    json!({"encrypted": true, "e2e_mode": "conversation", "e2e_key_version": version, "ref": reference, "e2e_envelope": env})
}

fn open_in_thread(message: &Value, key: &[u8; 32], conv_ref: &str) -> String {
    let env: Envelope = serde_json::from_value(message["e2e_envelope"].clone()).unwrap();
    let aad = e2e::conversation_aad(conv_ref, message["ref"].as_str().unwrap());
    String::from_utf8(e2e::decrypt(&env, key, &aad).unwrap()).unwrap()
}

#[tokio::test]
async fn an_encrypted_conversation_round_trips_between_user_and_agent() {
    let hook = FakeServer::start(200, 0).await;
    let app = TestApp::start().await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&acme), Some(&json!({"webhook_url": hook.url})))
        .await
        .ok(200);
    let (token, user_key) = user_with_key(&app, &acme, "phone-1").await;
    let agent_key = KeyPair::generate().unwrap();
    let body = json!({"device_uuid": "console-1", "identity_key_pub": agent_key.public_b64()});
    app.post(&acme, "/api/v1/agent/devices/keys", body).await.ok(201);
    let other_agent = KeyPair::generate().unwrap();
    let body = json!({"device_uuid": "console-g", "identity_key_pub": other_agent.public_b64()});
    app.post(&globex, "/api/v1/agent/devices/keys", body).await.ok(201);

    // Opening with an encrypted first message is refused: there is no content key yet.
    let r = app.post(&token, "/api/v1/me/conversations", json!({"partner": "acme", "encrypted": true})).await;
    r.field_error("encrypted");
    let opened = app
        .post(
            &token,
            "/api/v1/me/conversations",
            json!({"partner": "acme", "body": "Hello, a question about my order"}),
        )
        .await;
    let conv = opened.ok(201).clone();
    let (conv_ref, conv_id) = (conv["ref"].as_str().unwrap().to_string(), conv["conversation_id"].as_i64().unwrap());

    // The peer directory, from both sides.
    let peers = app.get(&token, &format!("/api/v1/me/conversations/{conv_ref}/devices")).await.ok(200).clone();
    assert_eq!(peers["devices"][0]["device_uuid"], "phone-1");
    assert_eq!(peers["agent_devices"].as_array().unwrap().len(), 1, "only acme's agents: {peers}");
    assert_eq!(peers["agent_devices"][0]["device_uuid"], "console-1");
    assert_eq!(peers["key_version"], Value::Null);
    let agent_peers = app.get(&acme, &format!("/api/v1/conversations/{conv_id}/devices")).await.ok(200).clone();
    assert_eq!(agent_peers["devices"], peers["devices"]);
    app.get(&globex, &format!("/api/v1/conversations/{conv_id}/devices")).await.error(404, "not_found");

    // The user shares content key 1 with their device and the agent's; bad uploads are refused whole.
    let k1 = e2e::new_content_key().unwrap();
    let wraps = wraps_for(&k1, &conv_ref, 1, &[("user", "phone-1", &user_key), ("agent", "console-1", &agent_key)]);
    let keys_path = format!("/api/v1/me/conversations/{conv_ref}/keys");
    app.post(&token, &keys_path, json!({"key_version": 0, "wraps": wraps})).await.field_error("key_version");
    app.post(&token, &keys_path, json!({"key_version": 1, "wraps": []})).await.field_error("wraps");
    let mut bad = wraps.clone();
    bad[1]["device_kind"] = json!("robot");
    app.post(&token, &keys_path, json!({"key_version": 1, "wraps": bad})).await.field_error("wraps.device_kind");
    let foreign = wraps_for(&k1, &conv_ref, 1, &[("agent", "console-g", &other_agent)]);
    app.post(&token, &keys_path, json!({"key_version": 1, "wraps": foreign})).await.field_error("wraps.device_uuid");
    let mut dup = wraps.clone();
    dup.as_array_mut().unwrap().push(wraps[0].clone());
    app.post(&token, &keys_path, json!({"key_version": 1, "wraps": dup})).await.field_error("wraps.device_uuid");
    let r = app.post(&token, &keys_path, json!({"key_version": 1, "wraps": wraps})).await;
    assert_eq!(r.ok(201)["wraps"].as_array().unwrap().len(), 2);

    // The user writes encrypted; the checks of the fields come first.
    let msg_path = format!("/api/v1/me/conversations/{conv_ref}/messages");
    let mut m = encrypted(&k1, 1, &conv_ref, "My order 7731 never arrived");
    m["e2e_key_version"] = json!(2);
    m["e2e_envelope"]["key_version"] = json!(2);
    app.post(&token, &msg_path, m).await.field_error("e2e_key_version");
    let mut m = encrypted(&k1, 1, &conv_ref, "x");
    m["body"] = json!("plaintext too");
    app.post(&token, &msg_path, m).await.field_error("body");
    let mut m = encrypted(&k1, 1, &conv_ref, "x");
    m.as_object_mut().unwrap().remove("e2e_mode");
    app.post(&token, &msg_path, m).await.field_error("e2e_mode");
    let mut m = encrypted(&k1, 1, &conv_ref, "x");
    m["e2e_envelope"].as_object_mut().unwrap().remove("nonce");
    app.post(&token, &msg_path, m).await.field_error("e2e_envelope.nonce");
    let sent = app.post(&token, &msg_path, encrypted(&k1, 1, &conv_ref, "My order 7731 never arrived")).await;
    let sent = sent.ok(201).clone();
    assert_eq!((sent["body"].clone(), sent["e2e_mode"].as_str()), (Value::Null, Some("conversation")));

    // The agent reads the wrap for its console and opens the user's message.
    let agent_keys_path = format!("/api/v1/conversations/{conv_id}/keys");
    app.get(&acme, &agent_keys_path).await.field_error("device_uuid");
    app.get(&acme, &format!("{agent_keys_path}?device_uuid=console-g")).await.field_error("device_uuid");
    app.get(&globex, &format!("{agent_keys_path}?device_uuid=console-g")).await.error(404, "not_found");
    let keys = app.get(&acme, &format!("{agent_keys_path}?device_uuid=console-1")).await.ok(200).clone();
    assert_eq!(keys["wraps"].as_array().unwrap().len(), 1);
    let agent_k1 = content_key(&keys, &conv_ref, 1, &agent_key);
    let thread = app.get(&acme, &format!("/api/v1/conversations/{conv_id}")).await.ok(200).clone();
    let last = thread["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(open_in_thread(&last, &agent_k1, &conv_ref), "My order 7731 never arrived");

    // The envelope of docs/e2e.md has key_wraps: a client that seals with them is accepted (their shape checked),
    // and they are kept as given.
    let mut with_wraps = encrypted(&k1, 1, &conv_ref, "Tracking says delivered");
    with_wraps["e2e_envelope"]["key_wraps"] = wraps.clone();
    let kept = app.post(&token, &msg_path, with_wraps).await.ok(201).clone();
    assert_eq!(kept["e2e_envelope"]["key_wraps"], wraps);
    let mut bad_wraps = encrypted(&k1, 1, &conv_ref, "x");
    bad_wraps["e2e_envelope"]["key_wraps"] = json!([{"device_uuid": "console-1"}]);
    app.post(&token, &msg_path, bad_wraps).await.field_error("e2e_envelope.key_wraps");

    // The agent answers encrypted; the user's device opens it with its own wrap.
    let reply = encrypted(&agent_k1, 1, &conv_ref, "Refund of 49.90 issued today");
    let r = app.post(&acme, &format!("/api/v1/conversations/{conv_id}/messages"), reply).await;
    assert_eq!(r.ok(201)["direction"], "out");
    let mine = app.get(&token, &keys_path).await.ok(200).clone();
    let user_k1 = content_key(&mine, &conv_ref, 1, &user_key);
    let thread = app.get(&token, &format!("/api/v1/me/conversations/{conv_ref}")).await.ok(200).clone();
    let last = thread["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(open_in_thread(&last, &user_k1, &conv_ref), "Refund of 49.90 issued today");

    // conversation.message events: the plaintext opener has its body, encrypted messages none.
    let conversation_events = || -> Vec<Value> {
        hook.received().iter().map(|r| r.json()).filter(|e| e["event"] == "conversation.message").collect()
    };
    eventually("three conversation.message events", || async { conversation_events().len() >= 3 }).await;
    let (plain, sealed): (Vec<Value>, Vec<Value>) =
        conversation_events().into_iter().partition(|e| e.get("body").is_some());
    assert_eq!(plain.len(), 1);
    assert_eq!(plain[0]["body"], "Hello, a question about my order");
    assert_eq!(sealed.len(), 2);
    assert!(sealed.iter().all(|e| e["encrypted"] == true && e["message_ref"].is_string()), "{sealed:?}");
    let raw: String = hook.received().iter().map(|r| String::from_utf8_lossy(&r.body).to_string()).collect();
    assert!(!raw.contains("7731") && !raw.contains("Refund"));
}

/// Every row of every table, as text (PostgreSQL), or the database files' bytes (SQLite).
async fn raw_database(app: &TestApp) -> Vec<u8> {
    let url = &app.db.url;
    if let Some(rest) = url.strip_prefix("sqlite://") {
        let path = rest.split('?').next().unwrap();
        let mut bytes = Vec::new();
        for suffix in ["", "-wal", "-shm"] {
            bytes.extend(std::fs::read(format!("{path}{suffix}")).unwrap_or_default());
        }
        assert!(bytes.len() > 10_000, "the database files were read");
        bytes
    } else {
        let db = app.state.db.reader();
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() \
             AND table_type = 'BASE TABLE'",
        )
        .fetch_all(db)
        .await
        .unwrap();
        assert!(tables.iter().any(|t| t == "messages"), "tables: {tables:?}");
        let mut text = String::new();
        for t in tables {
            let rows: Vec<String> =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT CAST(t AS TEXT) FROM {t} t")))
                    .fetch_all(db)
                    .await
                    .unwrap();
            text.extend(rows);
        }
        text.into_bytes()
    }
}

#[tokio::test]
async fn no_plaintext_reaches_the_database_webhooks_or_fallback_texts() {
    const SECRET_HUB: &str = "plaintext-canary-hub-Zq81";
    const SECRET_CONV: &str = "plaintext-canary-conv-Wx52";
    let hook = FakeServer::start(200, 0).await;
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.request(Method::PUT, "/api/v1/settings/webhook", Some(&key), Some(&json!({"webhook_url": hook.url})))
        .await
        .ok(200);
    let (token, user_key) = user_with_key(&app, &key, "phone-1").await;

    // A sealed hub message, delivered and read.
    let reference = new_ref();
    let env = seal_for_user(&app, &key, "acme", &reference, SECRET_HUB).await;
    let id =
        app.post(&key, "/api/v1/messages", sealed_send(&reference, &env)).await.ok(201)["message_id"].as_i64().unwrap();
    app.delivered(&key, id).await;
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    app.post(&token, &format!("/api/v1/me/messages/{reference}/read"), json!({})).await.ok(200);

    // An encrypted conversation message.
    let conv =
        app.post(&token, "/api/v1/me/conversations", json!({"partner": "acme", "body": "hello"})).await.ok(201).clone();
    let conv_ref = conv["ref"].as_str().unwrap();
    let k = e2e::new_content_key().unwrap();
    let wraps = wraps_for(&k, conv_ref, 1, &[("user", "phone-1", &user_key)]);
    app.post(&token, &format!("/api/v1/me/conversations/{conv_ref}/keys"), json!({"key_version": 1, "wraps": wraps}))
        .await
        .ok(201);
    let m = encrypted(&k, 1, conv_ref, SECRET_CONV);
    app.post(&token, &format!("/api/v1/me/conversations/{conv_ref}/messages"), m).await.ok(201);

    // Webhooks delivered (message.status sent, delivered, read; two conversation.message).
    eventually("webhooks delivered", || async { hook.received().len() >= 5 }).await;
    // The control: what was sent really is opaque ciphertext of the canaries.
    let opened = e2e::open(&env, "phone-1", &user_key, &e2e::hub_aad("acme", &reference)).unwrap();
    assert_eq!(opened, SECRET_HUB.as_bytes());

    let raw = raw_database(&app).await;
    let mut webhooks = Vec::new();
    for r in hook.received() {
        webhooks.extend(r.body);
    }
    let texts = hubbub_host::store::dev_sink::list(&app.state.db, None, None, None, 1000).await.unwrap();
    let fallback: String = texts.iter().map(|t| t.text.clone()).collect();
    for secret in [SECRET_HUB, SECRET_CONV] {
        for (place, bytes) in
            [("database", &raw), ("webhooks", &webhooks), ("fallback texts", &fallback.as_bytes().to_vec())]
        {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} found in the {place}");
        }
    }
    // The scan does find what is stored in the clear (the plaintext conversation opener).
    assert!(raw.windows(5).any(|w| w == b"hello"), "the scan sees stored text");
}

fn tries(m: &Value) -> Vec<(String, String, String)> {
    m["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["kind"].as_str().unwrap().into(),
                a["channel"].as_str().unwrap().into(),
                a["state"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn t(kind: &str, channel: &str, state: &str) -> (String, String, String) {
    (kind.into(), channel.into(), state.into())
}

#[tokio::test]
async fn offline_users_get_one_opaque_alert_by_whatsapp_then_sms() {
    const SECRET: &str = "alert-canary-Lp09";
    let wa = FakeServer::start(200, 0).await;
    let sms = FakeServer::start(200, 0).await;
    let app = TestApp::with_fake_providers(&wa, &sms).await;
    let key = app.partner("acme").await;
    // Inside the 24-hour window: free-form WhatsApp text may go.
    app.whatsapp_wrote(PHONE).await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await;
    // Log in with the code the (fake) SMS provider received.
    app.request(Method::POST, "/api/v1/auth/otp/start", None, Some(&json!({"phone": PHONE}))).await.ok(202);
    let sent = String::from_utf8_lossy(&sms.received().last().unwrap().body).to_string();
    let code = sent.split(|c: char| !c.is_ascii_digit()).find(|w| w.len() == 6).unwrap().to_string();
    let verify = json!({"phone": PHONE, "code": code, "device_uuid": "phone-1"});
    let r = app.request(Method::POST, "/api/v1/auth/otp/verify", None, Some(&verify)).await;
    let token = r.ok(200)["token"].as_str().unwrap().to_string();
    let pair = KeyPair::generate().unwrap();
    app.post(&token, "/api/v1/me/devices/keys", json!({"identity_key_pub": pair.public_b64()})).await.ok(201);
    let send = |text: &'static str| {
        let app = &app;
        let key = &key;
        async move {
            let reference = new_ref();
            let env = seal_for_user(app, key, "acme", &reference, text).await;
            let r = app.post(key, "/api/v1/messages", sealed_send(&reference, &env)).await;
            app.delivered(key, r.ok(201)["message_id"].as_i64().unwrap()).await
        }
    };

    // Online (just active): no alert.
    let m = send(SECRET).await;
    assert_eq!(tries(&m), vec![t("delivery", "inapp", "sent")]);

    // Offline for more than 300 s: one alert, by WhatsApp, naming the partner and never the body.
    app.clock.advance_ms(301_000);
    let m = send(SECRET).await;
    assert_eq!(m["state"], "sent");
    assert_eq!(tries(&m), vec![t("delivery", "inapp", "sent"), t("alert", "whatsapp", "sent")]);
    let alert = wa.received()[0].json();
    let text = alert["text"]["body"].as_str().unwrap();
    assert!(text.contains("acme Inc.") && text.contains("inbox") && text.contains("open the app"), "{text}");
    // Its link opens the message in the app, where this device decrypts it.
    let opens = format!("https://hubbub.example.com/m/{}", m["ref"].as_str().unwrap());
    assert!(text.ends_with(&opens), "{text}");
    assert!(!String::from_utf8_lossy(&wa.received()[0].body).contains(SECRET));

    // WhatsApp accepted the alert, then reports it undeliverable: the alert goes by SMS.
    let sms_seen = sms.received().len();
    let wamid = m["attempts"][1]["provider_ref"].as_str().unwrap().to_string();
    let body =
        json!({"entry": [{"changes": [{"value": {"statuses": [{"id": wamid, "status": "failed"}]}}]}]}).to_string();
    let receipt = || {
        app.client
            .post(format!("{}/api/v1/providers/whatsapp/webhook", app.base))
            .header(
                "x-hub-signature-256",
                hubbub_host::delivery::receipts::meta_signature("app-secret", body.as_bytes()),
            )
            .body(body.clone())
            .send()
    };
    assert_eq!(receipt().await.unwrap().status(), 200);
    let id = m["message_id"].as_i64().unwrap();
    eventually("the SMS alert", || async { tries(&app.message(&key, id).await).len() == 3 }).await;
    let m = app.message(&key, id).await;
    assert_eq!(
        tries(&m),
        vec![t("delivery", "inapp", "sent"), t("alert", "whatsapp", "failed"), t("alert", "sms", "sent")]
    );
    assert_eq!(m["state"], "sent", "an alert never changes the message");
    assert_eq!(sms.received().len(), sms_seen + 1);
    // The same receipt again (the provider retries, or someone replays a captured one): no second SMS.
    for _ in 0..2 {
        assert_eq!(receipt().await.unwrap().status(), 200);
    }
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(sms.received().len(), sms_seen + 1, "a replayed failure receipt sent another SMS alert");
    assert_eq!(tries(&app.message(&key, id).await).len(), 3);
    let sms_before = sms.received().len();

    // Still the same offline period: no second alert; a plaintext message never alerts.
    let m = send(SECRET).await;
    assert_eq!(tries(&m), vec![t("delivery", "inapp", "sent")]);
    let plain = app.send_text(&key, PHONE, "plain hello").await.ok(201)["message_id"].as_i64().unwrap();
    assert_eq!(tries(&app.delivered(&key, plain).await), vec![t("delivery", "inapp", "sent")]);
    assert_eq!(wa.received().len(), 1);

    // Another partner has its own alert for the same period.
    let globex = app.partner("globex").await;
    app.post(&globex, "/api/v1/accounts/link", json!({"phone": PHONE})).await;
    let reference = new_ref();
    let env = seal_for_user(&app, &globex, "globex", &reference, SECRET).await;
    let r = app.post(&globex, "/api/v1/messages", sealed_send(&reference, &env)).await;
    let m = app.delivered(&globex, r.ok(201)["message_id"].as_i64().unwrap()).await;
    assert_eq!(tries(&m), vec![t("delivery", "inapp", "sent"), t("alert", "whatsapp", "sent")]);

    // The user comes back, then goes quiet again: a new period. WhatsApp fails now, so SMS carries it.
    app.clock.advance_ms(20_000);
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    app.clock.advance_ms(301_000);
    wa.set(500, 0);
    let m = send(SECRET).await;
    assert_eq!(
        tries(&m),
        vec![t("delivery", "inapp", "sent"), t("alert", "whatsapp", "failed"), t("alert", "sms", "sent")]
    );
    let sms_alerts: Vec<String> =
        sms.received()[sms_before..].iter().map(|r| String::from_utf8_lossy(&r.body).to_string()).collect();
    assert_eq!(sms_alerts.len(), 1);
    assert!(sms_alerts[0].contains("inbox") && !sms_alerts[0].contains(SECRET), "{}", sms_alerts[0]);

    // A new period in which both channels fail: no alert reached the user, so the next message tries again.
    app.clock.advance_ms(20_000);
    app.get(&token, "/api/v1/me/messages").await.ok(200);
    app.clock.advance_ms(301_000);
    sms.set(500, 0);
    let m = send(SECRET).await;
    let both_failed =
        vec![t("delivery", "inapp", "sent"), t("alert", "whatsapp", "failed"), t("alert", "sms", "failed")];
    assert_eq!(tries(&m), both_failed);
    sms.set(201, 0);
    let m = send(SECRET).await;
    assert_eq!(
        tries(&m),
        vec![t("delivery", "inapp", "sent"), t("alert", "whatsapp", "failed"), t("alert", "sms", "sent")]
    );
}

#[tokio::test]
async fn the_reference_cli_seals_for_every_device_and_opens_as_one() {
    let app = TestApp::start().await;
    let key = app.partner("acme").await;
    app.post(&key, "/api/v1/accounts/link", json!({"phone": PHONE})).await;
    let (token, _) = app.login_device(PHONE, Some("phone-1")).await;

    let pair: Value = serde_json::from_str(&hubbub_with_input(&["e2e", "keygen"], &[], "").await).unwrap();
    let public = pair["public_key"].as_str().unwrap();
    assert_eq!(e2e::decode("k", public).unwrap().len(), 32);
    app.post(&token, "/api/v1/me/devices/keys", json!({"identity_key_pub": public})).await.ok(201);

    let env = [("HUBBUB_API_URL", app.base.as_str()), ("HUBBUB_API_KEY", key.as_str())];
    let record: Value = serde_json::from_str(
        &hubbub_with_input(
            &["e2e", "seal", "--phone", PHONE, "--partner", "acme", "--send"],
            &env,
            "Parcel 7731 is ready\n",
        )
        .await,
    )
    .unwrap();
    assert_eq!(record["encryption"], "e2e");
    assert!(record["ref"].as_str().unwrap().starts_with("msg_"));

    let inbox = app.get(&token, "/api/v1/me/messages").await.ok(200).clone();
    let private = pair["private_key"].as_str().unwrap();
    let opened = hubbub_with_input(
        &["e2e", "open", "--private-key", private, "--device-uuid", "phone-1"],
        &[],
        &inbox["data"][0].to_string(),
    )
    .await;
    assert_eq!(opened.trim_end(), "Parcel 7731 is ready");

    // Without --send it prints the request body, bound to the given ref.
    let reference = new_ref();
    let body: Value = serde_json::from_str(
        &hubbub_with_input(
            &["e2e", "seal", "--phone", PHONE, "--partner", "acme", "--ref", &reference, "--text", "hi"],
            &env,
            "",
        )
        .await,
    )
    .unwrap();
    assert_eq!(body["ref"], reference.as_str());
    assert_eq!(body["e2e_envelope"]["aad"], e2e::hub_aad("acme", &reference));
}
