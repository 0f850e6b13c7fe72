use super::*;

/// The inputs of the version-1 test vector in docs/e2e.md: byte `i` of each value is `start + i`.
fn bytes<const N: usize>(start: u8) -> [u8; N] {
    std::array::from_fn(|i| start + i as u8)
}

fn vector_device() -> KeyPair {
    KeyPair::from_secret_bytes(bytes(0x00))
}

fn vector_recipient() -> Recipient {
    Recipient { device_uuid: "dev-vector-1".into(), identity_key_pub: vector_device().public_b64() }
}

const VECTOR_PLAINTEXT: &str = "Your parcel 7731 is ready for pickup.";
const VECTOR_AAD: &str = "hubbub.hub.acme|msg|msg_TESTVECTOR000000000001|v1";

fn vector_envelope() -> Envelope {
    seal_with(
        VECTOR_PLAINTEXT.as_bytes(),
        VECTOR_AAD,
        &[vector_recipient()],
        None,
        bytes(0x40),
        bytes(0x60),
        &[(bytes(0x20), bytes(0x70))],
    )
    .unwrap()
}

/// The expected envelope of docs/e2e.md, byte for byte.
const VECTOR_JSON: &str = r#"{
  "v": 1,
  "alg": "x25519-hkdf-sha256-aes-256-gcm",
  "mode": "sealed",
  "key_version": 1,
  "ciphertext": "9Ud8dyfk8dRq5BUWMrFvOi9FnTFlW_Bqd1qt19nid5JDhJhuVde_O8dzeAThx-2S7an9hIU",
  "nonce": "YGFiY2RlZmdoaWpr",
  "aad": "hubbub.hub.acme|msg|msg_TESTVECTOR000000000001|v1",
  "key_wraps": [
    {
      "device_uuid": "dev-vector-1",
      "wrap": "llR5TdtmvEbWiZ8GJCLBtPKVCVEC7r0AN8Fd5aqO0y6oezPAhCmVd7TrNYtUaOr4",
      "wrap_nonce": "cHFyc3R1dnd4eXp7",
      "sender_eph_pub": "NYBy1jZYgNGu6jKa35EhODhR7SGijjt16WXQ0s0WYlQ"
    }
  ]
}"#;

#[test]
fn the_documented_test_vector_is_reproduced_and_opens() {
    assert_eq!(vector_device().public_b64(), "j0DFrbaPJWJK5bIU6nZ6bslNgp09e14a0bpvPiE4KF8");
    let expected: Envelope = serde_json::from_str(VECTOR_JSON).unwrap();
    assert_eq!(vector_envelope(), expected);
    let opened = open(&expected, "dev-vector-1", &vector_device(), VECTOR_AAD).unwrap();
    assert_eq!(opened, VECTOR_PLAINTEXT.as_bytes());
}

#[test]
fn the_vector_in_the_docs_is_the_one_tested_here() {
    let doc = include_str!("../../docs/e2e.md");
    let block = doc.split("<!-- vector-envelope -->\n```json\n").nth(1).unwrap().split("```").next().unwrap();
    let documented: Envelope = serde_json::from_str(block).unwrap();
    assert_eq!(documented, serde_json::from_str::<Envelope>(VECTOR_JSON).unwrap());
    assert!(doc.contains(&vector_device().public_b64()));
}

fn device(uuid: &str) -> (KeyPair, Recipient) {
    let pair = KeyPair::generate().unwrap();
    let r = Recipient { device_uuid: uuid.into(), identity_key_pub: pair.public_b64() };
    (pair, r)
}

#[test]
fn every_device_opens_a_sealed_message_with_its_own_wrap() {
    let (phone, r1) = device("phone");
    let (web, r2) = device("web");
    let aad = hub_aad("acme", "msg_abcdefghijklmnopqrstuv");
    let env = seal(b"hello both", &aad, &[r1, r2], Some("partner-console")).unwrap();
    assert_eq!(env.key_wraps.len(), 2);
    assert_ne!(env.key_wraps[0].sender_eph_pub, env.key_wraps[1].sender_eph_pub, "one ephemeral key per wrap");
    assert_eq!(open(&env, "phone", &phone, &aad).unwrap(), b"hello both");
    assert_eq!(open(&env, "web", &web, &aad).unwrap(), b"hello both");
    // A device cannot use another device's wrap, and a stranger has none.
    assert!(matches!(open(&env, "web", &phone, &aad), Err(Error::Decrypt)));
    let (stranger, _) = device("stranger");
    assert!(matches!(open(&env, "stranger", &stranger, &aad), Err(Error::NoWrap(_))));
}

#[test]
fn tampering_and_replays_into_another_context_fail() {
    let (pair, r) = device("d1");
    let aad = hub_aad("acme", "msg_abcdefghijklmnopqrstuv");
    let env = seal(b"pay 10 EUR", &aad, &[r], None).unwrap();

    let mut flipped = env.clone();
    let mut ct = decode("ciphertext", &flipped.ciphertext).unwrap();
    ct[0] ^= 1;
    flipped.ciphertext = encode(&ct);
    assert!(matches!(open(&flipped, "d1", &pair, &aad), Err(Error::Decrypt)));

    // The same envelope presented as another partner's, or another message, is refused.
    let other = hub_aad("evil", "msg_abcdefghijklmnopqrstuv");
    assert!(matches!(open(&env, "d1", &pair, &other), Err(Error::AadMismatch { .. })));
    let mut relabelled = env.clone();
    relabelled.aad = other.clone();
    assert!(matches!(open(&relabelled, "d1", &pair, &other), Err(Error::Decrypt)));

    // A wrap moved to another device uuid does not open (the uuid is in the HKDF info).
    let mut moved = env.clone();
    moved.key_wraps[0].device_uuid = "d2".into();
    assert!(matches!(open(&moved, "d2", &pair, &aad), Err(Error::Decrypt)));
}

#[test]
fn conversation_keys_wrap_to_agents_and_messages_use_the_shared_key() {
    let (user, ru) = device("user-phone");
    let (agent, ra) = device("agent-1");
    let key = new_content_key().unwrap();
    let key_aad = conversation_key_aad("conv_x", 1);
    let wraps: Vec<KeyWrap> = [ru, ra].iter().map(|r| wrap_key(&key, r, &key_aad).unwrap()).collect();
    assert_eq!(unwrap_key(&wraps[1], &agent, &key_aad).unwrap(), key);
    assert_eq!(unwrap_key(&wraps[0], &user, &key_aad).unwrap(), key);
    assert!(unwrap_key(&wraps[0], &user, &conversation_key_aad("conv_x", 2)).is_err(), "bound to the version");

    let aad = conversation_aad("conv_x", "msg_abcdefghijklmnopqrstuv");
    let env = encrypt(&key, 1, b"my order never came", &aad).unwrap();
    assert_eq!(env.mode, MODE_CONVERSATION);
    assert!(env.key_wraps.is_empty());
    let k = unwrap_key(&wraps[1], &agent, &key_aad).unwrap();
    assert_eq!(decrypt(&env, &k, &aad).unwrap(), b"my order never came");
}

#[test]
fn keys_and_encodings_are_checked() {
    let pair = KeyPair::generate().unwrap();
    let again = KeyPair::from_secret_b64(&pair.secret_b64()).unwrap();
    assert_eq!(again.public_b64(), pair.public_b64());
    assert!(matches!(KeyPair::from_secret_b64("AAAA"), Err(Error::Length(..))));
    assert!(matches!(decode("x", "not base64!"), Err(Error::Encoding(_))));
    assert_eq!(decode("x", "YWI=").unwrap(), b"ab", "padding is accepted");
    // A low-order public key (all zeros) gives no shared secret: refused, not a predictable key.
    assert!(is_weak_public_key(&[0u8; 32]));
    assert!(!is_weak_public_key(&decode("k", &pair.public_b64()).unwrap()));
    let weak = Recipient { device_uuid: "w".into(), identity_key_pub: encode(&[0u8; 32]) };
    assert!(matches!(wrap_key(&[1u8; 32], &weak, "a"), Err(Error::WeakKey)));
    let mut env = seal(b"x", "a", &[device("d").1], None).unwrap();
    env.v = 2;
    assert!(matches!(open(&env, "d", &pair, "a"), Err(Error::Unsupported(_))));
}
