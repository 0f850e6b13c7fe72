//! Members' passkeys, end to end against a software authenticator written here from the WebAuthn
//! specification (a P-256 key, `none` attestation, CBOR by hand): register one after signing in with a code,
//! sign in with it into the same cookie session, and the refusals — a challenge used twice or begun by
//! another member, another origin, an authenticator that did not verify its user, a wrong signature, a phone
//! without passkeys, a removed passkey, a removed member.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{Resp, TestApp};
use crate::members::{Browser, invitation, sign_in};

const ORIGIN: &str = "https://hubbub.example.com";
const RP_ID: &str = "hubbub.example.com";
const OWNER: &str = "+15550200001";
const AGENT: &str = "+15550200002";

/// User present, user verified; attested credential data follows.
const UP: u8 = 0x01;
const UV: u8 = 0x04;
const AT: u8 = 0x40;

fn cbor_head(major: u8, len: usize, out: &mut Vec<u8>) {
    match len {
        0..24 => out.push((major << 5) | len as u8),
        24..256 => out.extend([(major << 5) | 24, len as u8]),
        _ => {
            out.push((major << 5) | 25);
            out.extend((len as u16).to_be_bytes());
        }
    }
}

fn cbor_text(s: &str, out: &mut Vec<u8>) {
    cbor_head(3, s.len(), out);
    out.extend(s.as_bytes());
}

fn cbor_bytes(b: &[u8], out: &mut Vec<u8>) {
    cbor_head(2, b.len(), out);
    out.extend(b);
}

/// A passkey on a software authenticator.
struct Authenticator {
    key: EcdsaKeyPair,
    id: Vec<u8>,
    counter: u32,
    origin: String,
    flags: u8,
}

impl Authenticator {
    fn new() -> Self {
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
        let mut id = [0u8; 16];
        aws_lc_rs::rand::fill(&mut id).unwrap();
        Authenticator { key, id: id.to_vec(), counter: 0, origin: ORIGIN.into(), flags: UP | UV }
    }

    fn client_data(&self, kind: &str, options: &Value) -> Vec<u8> {
        let challenge = options["publicKey"]["challenge"].as_str().expect("a challenge");
        serde_json::to_vec(&json!({"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": false}))
            .unwrap()
    }

    fn auth_data(&mut self, flags: u8) -> Vec<u8> {
        self.counter += 1;
        let mut out = Sha256::digest(RP_ID.as_bytes()).to_vec();
        out.push(flags);
        out.extend(self.counter.to_be_bytes());
        out
    }

    /// The answer of `navigator.credentials.create()` to `options`, in WebAuthn's JSON form.
    fn create(&mut self, options: &Value) -> Value {
        let point = self.key.public_key().as_ref().to_vec();
        let (x, y) = (&point[1..33], &point[33..65]);
        // COSE_Key: {1: 2 (EC2), 3: -7 (ES256), -1: 1 (P-256), -2: x, -3: y}.
        let mut cose = vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21];
        cbor_bytes(x, &mut cose);
        cose.push(0x22);
        cbor_bytes(y, &mut cose);
        let mut auth_data = self.auth_data(self.flags | AT);
        auth_data.extend([0u8; 16]); // AAGUID
        auth_data.extend((self.id.len() as u16).to_be_bytes());
        auth_data.extend(&self.id);
        auth_data.extend(cose);
        let mut attestation = vec![0xa3];
        cbor_text("fmt", &mut attestation);
        cbor_text("none", &mut attestation);
        cbor_text("attStmt", &mut attestation);
        attestation.push(0xa0);
        cbor_text("authData", &mut attestation);
        cbor_bytes(&auth_data, &mut attestation);
        json!({
            "id": B64.encode(&self.id),
            "rawId": B64.encode(&self.id),
            "type": "public-key",
            "response": {
                "attestationObject": B64.encode(attestation),
                "clientDataJSON": B64.encode(self.client_data("webauthn.create", options)),
            },
            "clientExtensionResults": {},
        })
    }

    /// The answer of `navigator.credentials.get()` to `options`.
    fn get(&mut self, options: &Value) -> Value {
        let auth_data = self.auth_data(self.flags);
        let client_data = self.client_data("webauthn.get", options);
        let mut signed = auth_data.clone();
        signed.extend(Sha256::digest(&client_data));
        let signature = self.key.sign(&SystemRandom::new(), &signed).unwrap();
        json!({
            "id": B64.encode(&self.id),
            "rawId": B64.encode(&self.id),
            "type": "public-key",
            "response": {
                "authenticatorData": B64.encode(auth_data),
                "clientDataJSON": B64.encode(client_data),
                "signature": B64.encode(signature.as_ref()),
            },
            "clientExtensionResults": {},
        })
    }
}

async fn open_post(app: &TestApp, path: &str, body: Value) -> (Resp, Option<String>) {
    let r = app.client.post(format!("{}{path}", app.base)).json(&body).send().await.unwrap();
    let cookie = r.headers().get("set-cookie").map(|v| v.to_str().unwrap().split(';').next().unwrap().to_string());
    (Resp::from(r).await, cookie)
}

/// Begins adding a passkey for `browser`'s member: the challenge.
async fn registration_challenge(browser: &Browser<'_>) -> Value {
    browser.send(Method::POST, "/api/v1/members/me/passkeys/challenges", json!({})).await.ok(201).clone()
}

/// Answers `challenge` with `credential`, as `browser`'s member.
async fn add(browser: &Browser<'_>, challenge: &Value, credential: Value) -> Resp {
    let body = json!({"ceremony": challenge["ceremony"], "credential": credential});
    browser.send(Method::POST, "/api/v1/members/me/passkeys", body).await
}

/// Signs in by answering the sign-in challenge `ceremony` with `credential`: the answer and its cookie.
async fn passkey_sign_in(app: &TestApp, ceremony: &Value, credential: Value) -> (Resp, Option<String>) {
    open_post(app, "/api/v1/members/sessions/passkey", json!({"ceremony": ceremony, "credential": credential})).await
}

/// Registers a passkey of `browser`'s member on `authenticator`.
async fn register(browser: &Browser<'_>, authenticator: &mut Authenticator, name: &str) -> Value {
    let challenge = registration_challenge(browser).await;
    let credential = authenticator.create(&challenge["options"]);
    let body = json!({"ceremony": challenge["ceremony"], "credential": credential, "name": name});
    browser.send(Method::POST, "/api/v1/members/me/passkeys", body).await.ok(201).clone()
}

/// Begins a passkey sign-in for `phone`: the challenge.
async fn sign_in_challenge(app: &TestApp, phone: &str) -> Value {
    open_post(app, "/api/v1/members/passkey-challenges", json!({"phone": phone})).await.0.ok(201).clone()
}

#[tokio::test]
async fn a_member_adds_a_passkey_and_signs_in_with_it_and_nothing_else_does() {
    let app = TestApp::start_with(|c| c.public_url = ORIGIN.into()).await;
    let key = app.partner("acme").await;
    let (r, owner) = sign_in(&app, OWNER, json!({"invitation": invitation(&app, &key, "owner").await})).await;
    r.ok(201);
    let owner = owner.unwrap();
    let (r, agent) = sign_in(&app, AGENT, json!({"invitation": invitation(&app, &key, "agent").await})).await;
    r.ok(201);
    let agent = agent.unwrap();

    // No passkey yet: the phone signs in with a code (404), as does a phone that is no member.
    open_post(&app, "/api/v1/members/passkey-challenges", json!({"phone": OWNER})).await.0.error(404, "not_found");
    open_post(&app, "/api/v1/members/passkey-challenges", json!({"phone": "+15550209999"}))
        .await
        .0
        .error(404, "not_found");
    open_post(&app, "/api/v1/members/passkey-challenges", json!({"phone": "0800"})).await.0.field_error("phone");

    // The owner adds one. The challenge asks for user verification and names the owner's phone.
    let challenge = registration_challenge(&owner).await;
    let public_key = &challenge["options"]["publicKey"];
    assert_eq!(public_key["rp"]["id"], RP_ID);
    assert_eq!(public_key["user"]["name"], OWNER);
    assert_eq!(public_key["authenticatorSelection"]["userVerification"], "required");
    assert!(challenge["ceremony"].as_str().unwrap().starts_with("pkc_"));
    let mut laptop = Authenticator::new();
    let credential = laptop.create(&challenge["options"]);
    // The agent cannot finish the owner's ceremony.
    let r = add(&agent, &challenge, credential.clone()).await;
    r.error(401, "unauthorized");
    // ... and that attempt used it up: a ceremony is taken once, whoever answers.
    let r = add(&owner, &challenge, credential).await;
    r.error(401, "unauthorized");
    // An answer from another origin is refused on `credential`.
    let mut phishing = Authenticator::new();
    phishing.origin = "https://hubbub.example.com.evil.test".into();
    let challenge = registration_challenge(&owner).await;
    let r = add(&owner, &challenge, phishing.create(&challenge["options"])).await;
    r.field_error("credential");
    // An authenticator that did not verify its user (presence only) is refused too.
    let mut tap_only = Authenticator::new();
    tap_only.flags = UP;
    let challenge = registration_challenge(&owner).await;
    let r = add(&owner, &challenge, tap_only.create(&challenge["options"])).await;
    r.field_error("credential");
    // Not JSON of a credential at all: 422 on `credential`, the ceremony untouched.
    let r = owner
        .send(Method::POST, "/api/v1/members/me/passkeys", json!({"ceremony": challenge["ceremony"], "credential": 7}))
        .await;
    r.field_error("credential");

    let added = register(&owner, &mut laptop, "Work laptop").await;
    assert_eq!(added["name"], "Work laptop");
    assert!(added["last_used_at"].is_null());
    // The same credential again: the challenge excludes it, and an answer with it anyway is refused.
    let challenge = registration_challenge(&owner).await;
    let excluded = &challenge["options"]["publicKey"]["excludeCredentials"];
    assert_eq!(excluded[0]["id"], B64.encode(&laptop.id));
    let r = add(&owner, &challenge, laptop.create(&challenge["options"])).await;
    r.field_error("credential");
    // A credential id registered already, by someone else (not in their exclusions): 409, nothing kept.
    let mut clone = Authenticator::new();
    clone.id = laptop.id.clone();
    let challenge = registration_challenge(&agent).await;
    let r = add(&agent, &challenge, clone.create(&challenge["options"])).await;
    r.error(409, "conflict");
    let listed = owner.get("/api/v1/members/me/passkeys").await;
    assert_eq!(listed.ok(200)["data"].as_array().unwrap().len(), 1);
    assert_eq!(agent.get("/api/v1/members/me/passkeys").await.ok(200)["data"], json!([]));
    // The audit log has the owner adding it.
    let log = owner.get("/api/v1/audit-log").await;
    assert!(log.ok(200)["data"].as_array().unwrap().iter().any(|e| e["action"] == "POST /api/v1/members/me/passkeys"));

    // Sign in with it, in a new browser: the same session cookie as a code gives.
    let challenge = sign_in_challenge(&app, OWNER).await;
    let allowed = &challenge["options"]["publicKey"]["allowCredentials"];
    assert_eq!(allowed.as_array().unwrap().len(), 1);
    assert_eq!(allowed[0]["id"], B64.encode(&laptop.id));
    let answer = laptop.get(&challenge["options"]);
    let (r, cookie) = passkey_sign_in(&app, &challenge["ceremony"], answer.clone()).await;
    assert_eq!(r.ok(201)["member"]["phone"], OWNER);
    let fresh = Browser { app: &app, cookie: cookie.expect("a session cookie") };
    assert_eq!(fresh.get("/api/v1/members/me").await.ok(200)["member"]["role"], "owner");
    let listed = fresh.get("/api/v1/members/me/passkeys").await;
    assert!(listed.ok(200)["data"][0]["last_used_at"].is_string(), "the sign-in is recorded");
    // The same answer again (a replay): the ceremony is used up.
    let (r, cookie) = passkey_sign_in(&app, &challenge["ceremony"], answer).await;
    r.error(401, "unauthorized");
    assert!(cookie.is_none());
    // A signature by another key, and an answer without user verification, sign no one in.
    let challenge = sign_in_challenge(&app, OWNER).await;
    let mut forger = Authenticator::new();
    forger.id = laptop.id.clone();
    let (r, _) = passkey_sign_in(&app, &challenge["ceremony"], forger.get(&challenge["options"])).await;
    r.error(401, "unauthorized");
    let challenge = sign_in_challenge(&app, OWNER).await;
    laptop.flags = UP;
    let (r, _) = passkey_sign_in(&app, &challenge["ceremony"], laptop.get(&challenge["options"])).await;
    r.error(401, "unauthorized");
    laptop.flags = UP | UV;
    // A made-up ceremony is unknown.
    let (r, _) =
        passkey_sign_in(&app, &json!(format!("pkc_{}", "a".repeat(40))), laptop.get(&challenge["options"])).await;
    r.error(401, "unauthorized");

    // Removed, it signs in no more; another member cannot remove it (404).
    let id = added["id"].as_i64().unwrap();
    agent
        .call(Method::DELETE, &format!("/api/v1/members/me/passkeys/{id}"), None, Some("same-origin"))
        .await
        .error(404, "not_found");
    let challenge = sign_in_challenge(&app, OWNER).await;
    let r = owner.call(Method::DELETE, &format!("/api/v1/members/me/passkeys/{id}"), None, Some("same-origin")).await;
    assert_eq!(r.status.as_u16(), 204);
    let (r, _) = passkey_sign_in(&app, &challenge["ceremony"], laptop.get(&challenge["options"])).await;
    r.error(401, "unauthorized");
    open_post(&app, "/api/v1/members/passkey-challenges", json!({"phone": OWNER})).await.0.error(404, "not_found");

    // A removed member's passkeys go with them.
    let mut phone_key = Authenticator::new();
    register(&agent, &mut phone_key, "Phone").await;
    sign_in_challenge(&app, AGENT).await;
    let agent_id = agent.get("/api/v1/members/me").await.ok(200)["member"]["id"].as_i64().unwrap();
    app.request(Method::DELETE, &format!("/api/v1/members/{agent_id}"), Some(&key), None).await.ok(200);
    open_post(&app, "/api/v1/members/passkey-challenges", json!({"phone": AGENT})).await.0.error(404, "not_found");
}

#[tokio::test]
async fn a_phone_of_two_partners_signs_in_to_the_one_whose_passkey_it_uses() {
    let app = TestApp::start_with(|c| c.public_url = ORIGIN.into()).await;
    let acme = app.partner("acme").await;
    let globex = app.partner("globex").await;
    let (r, at_acme) = sign_in(&app, OWNER, json!({"invitation": invitation(&app, &acme, "admin").await})).await;
    r.ok(201);
    let (r, at_globex) = sign_in(&app, OWNER, json!({"invitation": invitation(&app, &globex, "agent").await})).await;
    r.ok(201);
    let (mut work, mut side) = (Authenticator::new(), Authenticator::new());
    register(&at_acme.unwrap(), &mut work, "Work").await;
    register(&at_globex.unwrap(), &mut side, "Side job").await;

    // One challenge lists both partners' passkeys, and names no partner: the passkey used decides.
    let challenge = sign_in_challenge(&app, OWNER).await;
    assert_eq!(challenge["options"]["publicKey"]["allowCredentials"].as_array().unwrap().len(), 2);
    let (r, _) = passkey_sign_in(&app, &challenge["ceremony"], side.get(&challenge["options"])).await;
    assert_eq!(r.ok(201)["partner"]["code"], "globex");
    assert_eq!(r.json["member"]["role"], "agent");
    let challenge = sign_in_challenge(&app, OWNER).await;
    let (r, _) = passkey_sign_in(&app, &challenge["ceremony"], work.get(&challenge["options"])).await;
    assert_eq!(r.ok(201)["partner"]["code"], "acme");
    // Naming a partner narrows the challenge to its passkeys: another's is refused.
    let (r, _) =
        open_post(&app, "/api/v1/members/passkey-challenges", json!({"phone": OWNER, "partner": "acme"})).await;
    let challenge = r.ok(201).clone();
    assert_eq!(challenge["options"]["publicKey"]["allowCredentials"].as_array().unwrap().len(), 1);
    let (r, _) = passkey_sign_in(&app, &challenge["ceremony"], side.get(&challenge["options"])).await;
    r.error(401, "unauthorized");
    let (r, _) =
        open_post(&app, "/api/v1/members/passkey-challenges", json!({"phone": OWNER, "partner": "initech"})).await;
    r.error(404, "not_found");
}

#[tokio::test]
async fn a_host_reached_by_an_address_offers_no_passkeys_and_says_why() {
    let app = TestApp::start_with(|c| c.public_url = "http://127.0.0.1:8080".into()).await;
    let key = app.partner("acme").await;
    let (r, owner) = sign_in(&app, OWNER, json!({"invitation": invitation(&app, &key, "owner").await})).await;
    r.ok(201);
    let r = owner.unwrap().send(Method::POST, "/api/v1/members/me/passkeys/challenges", json!({})).await;
    r.error(409, "conflict");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("domain name"), "{}", r.json);
}
