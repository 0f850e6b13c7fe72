//! Hubbub end-to-end encryption, protocol version 1 (`docs/e2e.md` is the specification).
//!
//! The server routes and stores what this crate produces and never decrypts it. Partners use the library (or
//! the `hubbub e2e` commands built on it) to seal hub messages for every device of a user; devices use it to
//! open them and to exchange conversation content keys with agents.
//!
//! Construction, per recipient device:
//! - a fresh ephemeral X25519 key pair `(e, E)`; `shared = X25519(e, P)` with the device's identity key `P`;
//! - `wrap_key = HKDF-SHA256(ikm = shared, salt = E ‖ P, info = "hubbub-e2e-v1|wrap|" ‖ device_uuid)`, 32 bytes;
//! - `wrap = AES-256-GCM(wrap_key, wrap_nonce, content_key, aad)`.
//!
//! The content is `AES-256-GCM(content_key, nonce, plaintext, aad)` with the `aad` string of the envelope,
//! `<context_prefix>|msg|<ref>|v1`. Every byte string on the wire is base64url without padding.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use hkdf::Hkdf;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};

/// The protocol version carried in `v`.
pub const VERSION: u32 = 1;
/// The algorithm name carried in `alg`.
pub const ALG: &str = "x25519-hkdf-sha256-aes-256-gcm";
/// `mode` of a hub message sealed to every device of one user.
pub const MODE_SEALED: &str = "sealed";
/// `mode` of a conversation message, encrypted with the conversation's content key.
pub const MODE_CONVERSATION: &str = "conversation";
/// The HKDF `info` prefix; the recipient's `device_uuid` follows it.
pub const WRAP_INFO_PREFIX: &str = "hubbub-e2e-v1|wrap|";

/// Everything that can go wrong sealing or opening.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} is not valid base64url")]
    Encoding(&'static str),
    #[error("{0} must be {1} bytes")]
    Length(&'static str, usize),
    #[error("unsupported envelope: {0}")]
    Unsupported(String),
    #[error("the envelope's aad {found:?} is not the expected {expected:?}")]
    AadMismatch { expected: String, found: String },
    #[error("no key wrap for device {0}")]
    NoWrap(String),
    #[error("the public key is a low-order point")]
    WeakKey,
    #[error("authentication failed: the data was altered or is not for this key")]
    Decrypt,
    #[error("the system random source failed")]
    Random,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One recipient device's wrap of the content key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyWrap {
    pub device_uuid: String,
    pub wrap: String,
    pub wrap_nonce: String,
    pub sender_eph_pub: String,
    /// `user` or `agent` in conversation key uploads; absent in sealed hub messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_kind: Option<String>,
}

/// The `e2e_envelope` object of INTERFACE.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub v: u32,
    pub alg: String,
    pub mode: String,
    pub key_version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_device_uuid: Option<String>,
    pub ciphertext: String,
    pub nonce: String,
    pub aad: String,
    #[serde(default)]
    pub key_wraps: Vec<KeyWrap>,
}

/// A device (or agent device) to seal for, as the key directory lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipient {
    pub device_uuid: String,
    /// base64url X25519 public key.
    pub identity_key_pub: String,
}

/// A device's identity key pair.
#[derive(Clone)]
pub struct KeyPair {
    secret: StaticSecret,
    public: PublicKey,
}

impl KeyPair {
    /// A new random key pair.
    pub fn generate() -> Result<Self> {
        Ok(Self::from_secret_bytes(random()?))
    }

    pub fn from_secret_bytes(bytes: [u8; 32]) -> Self {
        let secret = StaticSecret::from(bytes);
        let public = PublicKey::from(&secret);
        Self { secret, public }
    }

    /// Reads a base64url private key (as `keygen` prints it).
    pub fn from_secret_b64(s: &str) -> Result<Self> {
        Ok(Self::from_secret_bytes(decode_array("private_key", s)?))
    }

    pub fn secret_b64(&self) -> String {
        encode(self.secret.as_bytes())
    }

    pub fn public_b64(&self) -> String {
        encode(self.public.as_bytes())
    }
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair").field("public", &self.public_b64()).finish_non_exhaustive()
    }
}

/// Whether a 32-byte X25519 public key is a low-order point (all-zero shared secret with any key): such
/// a key can never receive a wrap, so directories refuse it.
pub fn is_weak_public_key(bytes: &[u8]) -> bool {
    let Ok(bytes) = <[u8; 32]>::try_from(bytes) else { return false };
    // Any fixed non-zero scalar tells: X25519 with a low-order point is all zeros for every scalar.
    !StaticSecret::from([0x5a; 32]).diffie_hellman(&PublicKey::from(bytes)).was_contributory()
}

/// The `aad` of a sealed hub message from partner `partner_code`.
pub fn hub_aad(partner_code: &str, message_ref: &str) -> String {
    format!("hubbub.hub.{partner_code}|msg|{message_ref}|v1")
}

/// The `aad` of a message in the conversation `conversation_ref`.
pub fn conversation_aad(conversation_ref: &str, message_ref: &str) -> String {
    format!("hubbub.conv.{conversation_ref}|msg|{message_ref}|v1")
}

/// The `aad` of the key wraps of version `key_version` of a conversation's content key.
pub fn conversation_key_aad(conversation_ref: &str, key_version: i64) -> String {
    format!("hubbub.conv.{conversation_ref}|key|{key_version}|v1")
}

/// A fresh random 32-byte content key.
pub fn new_content_key() -> Result<[u8; 32]> {
    random()
}

/// Wraps `content_key` for one recipient device.
pub fn wrap_key(content_key: &[u8; 32], recipient: &Recipient, aad: &str) -> Result<KeyWrap> {
    wrap_key_with(content_key, recipient, aad, random()?, random()?)
}

/// [`wrap_key`] with the ephemeral secret and the wrap nonce given (test vectors).
pub fn wrap_key_with(
    content_key: &[u8; 32],
    recipient: &Recipient,
    aad: &str,
    ephemeral_secret: [u8; 32],
    wrap_nonce: [u8; 12],
) -> Result<KeyWrap> {
    let their = PublicKey::from(decode_array::<32>("identity_key_pub", &recipient.identity_key_pub)?);
    let eph = StaticSecret::from(ephemeral_secret);
    let eph_pub = PublicKey::from(&eph);
    let wrap_key = derive_wrap_key(&eph, &their, eph_pub.as_bytes(), &recipient.device_uuid)?;
    let wrap = aead_seal(&wrap_key, &wrap_nonce, content_key, aad)?;
    Ok(KeyWrap {
        device_uuid: recipient.device_uuid.clone(),
        wrap: encode(&wrap),
        wrap_nonce: encode(&wrap_nonce),
        sender_eph_pub: encode(eph_pub.as_bytes()),
        device_kind: None,
    })
}

/// Recovers the content key from a wrap addressed to `device`.
pub fn unwrap_key(wrap: &KeyWrap, device: &KeyPair, aad: &str) -> Result<[u8; 32]> {
    let eph_pub_bytes = decode_array::<32>("sender_eph_pub", &wrap.sender_eph_pub)?;
    let eph_pub = PublicKey::from(eph_pub_bytes);
    let shared = device.secret.diffie_hellman(&eph_pub);
    if !shared.was_contributory() {
        return Err(Error::WeakKey);
    }
    let wrap_key = hkdf(shared.as_bytes(), &eph_pub_bytes, device.public.as_bytes(), &wrap.device_uuid);
    let nonce = decode_array::<12>("wrap_nonce", &wrap.wrap_nonce)?;
    let key = aead_open(&wrap_key, &nonce, &decode("wrap", &wrap.wrap)?, aad)?;
    key.try_into().map_err(|_| Error::Length("content key", 32))
}

/// Seals `plaintext` as a hub message for every recipient device (mode `sealed`, key version 1).
pub fn seal(
    plaintext: &[u8],
    aad: &str,
    recipients: &[Recipient],
    sender_device_uuid: Option<&str>,
) -> Result<Envelope> {
    let wraps = recipients.iter().map(|_| Ok((random()?, random()?))).collect::<Result<Vec<_>>>()?;
    seal_with(plaintext, aad, recipients, sender_device_uuid, random()?, random()?, &wraps)
}

/// [`seal`] with every random input given: the content key, the content nonce and, per recipient, the
/// ephemeral secret and the wrap nonce (test vectors).
pub fn seal_with(
    plaintext: &[u8],
    aad: &str,
    recipients: &[Recipient],
    sender_device_uuid: Option<&str>,
    content_key: [u8; 32],
    nonce: [u8; 12],
    wrap_randomness: &[([u8; 32], [u8; 12])],
) -> Result<Envelope> {
    assert_eq!(recipients.len(), wrap_randomness.len(), "one (ephemeral secret, wrap nonce) per recipient");
    let key_wraps = recipients
        .iter()
        .zip(wrap_randomness)
        .map(|(r, (eph, wn))| wrap_key_with(&content_key, r, aad, *eph, *wn))
        .collect::<Result<Vec<_>>>()?;
    let mut envelope = encrypt_with_nonce(&content_key, 1, plaintext, aad, nonce)?;
    envelope.mode = MODE_SEALED.into();
    envelope.sender_device_uuid = sender_device_uuid.map(str::to_string);
    envelope.key_wraps = key_wraps;
    Ok(envelope)
}

/// Opens a sealed envelope with the key of `device_uuid`, checking that its `aad` is `expected_aad` (the
/// context the reader expects: [`hub_aad`] of the record's partner and ref).
pub fn open(envelope: &Envelope, device_uuid: &str, device: &KeyPair, expected_aad: &str) -> Result<Vec<u8>> {
    check_envelope(envelope, expected_aad)?;
    let wrap = envelope
        .key_wraps
        .iter()
        .find(|w| w.device_uuid == device_uuid)
        .ok_or_else(|| Error::NoWrap(device_uuid.to_string()))?;
    let key = unwrap_key(wrap, device, &envelope.aad)?;
    decrypt(envelope, &key, expected_aad)
}

/// Encrypts a conversation message with the conversation's content key (mode `conversation`, no wraps).
pub fn encrypt(content_key: &[u8; 32], key_version: i64, plaintext: &[u8], aad: &str) -> Result<Envelope> {
    encrypt_with_nonce(content_key, key_version, plaintext, aad, random()?)
}

/// [`encrypt`] with the nonce given (test vectors).
pub fn encrypt_with_nonce(
    content_key: &[u8; 32],
    key_version: i64,
    plaintext: &[u8],
    aad: &str,
    nonce: [u8; 12],
) -> Result<Envelope> {
    let ciphertext = aead_seal(content_key, &nonce, plaintext, aad)?;
    Ok(Envelope {
        v: VERSION,
        alg: ALG.into(),
        mode: MODE_CONVERSATION.into(),
        key_version,
        sender_device_uuid: None,
        ciphertext: encode(&ciphertext),
        nonce: encode(&nonce),
        aad: aad.into(),
        key_wraps: Vec::new(),
    })
}

/// Decrypts an envelope's content with a known content key, checking its `aad` is `expected_aad`.
pub fn decrypt(envelope: &Envelope, content_key: &[u8; 32], expected_aad: &str) -> Result<Vec<u8>> {
    check_envelope(envelope, expected_aad)?;
    let nonce = decode_array::<12>("nonce", &envelope.nonce)?;
    aead_open(content_key, &nonce, &decode("ciphertext", &envelope.ciphertext)?, &envelope.aad)
}

/// base64url without padding, the wire encoding of every byte string.
pub fn encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url, with or without padding.
pub fn decode(what: &'static str, s: &str) -> Result<Vec<u8>> {
    let trimmed = s.trim_end_matches('=');
    URL_SAFE_NO_PAD.decode(trimmed).or_else(|_| URL_SAFE.decode(s)).map_err(|_| Error::Encoding(what))
}

/// Decodes base64url into exactly `N` bytes.
pub fn decode_array<const N: usize>(what: &'static str, s: &str) -> Result<[u8; N]> {
    decode(what, s)?.try_into().map_err(|_| Error::Length(what, N))
}

fn check_envelope(envelope: &Envelope, expected_aad: &str) -> Result<()> {
    if envelope.v != VERSION || envelope.alg != ALG {
        return Err(Error::Unsupported(format!("v {} alg {}", envelope.v, envelope.alg)));
    }
    if envelope.aad != expected_aad {
        return Err(Error::AadMismatch { expected: expected_aad.into(), found: envelope.aad.clone() });
    }
    Ok(())
}

fn derive_wrap_key(eph: &StaticSecret, their: &PublicKey, eph_pub: &[u8; 32], device_uuid: &str) -> Result<[u8; 32]> {
    let shared = eph.diffie_hellman(their);
    if !shared.was_contributory() {
        return Err(Error::WeakKey);
    }
    Ok(hkdf(shared.as_bytes(), eph_pub, their.as_bytes(), device_uuid))
}

/// HKDF-SHA256 with salt `eph_pub ‖ recipient_pub` and info `WRAP_INFO_PREFIX ‖ device_uuid`.
fn hkdf(shared: &[u8; 32], eph_pub: &[u8; 32], recipient_pub: &[u8; 32], device_uuid: &str) -> [u8; 32] {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(eph_pub);
    salt[32..].copy_from_slice(recipient_pub);
    let info = format!("{WRAP_INFO_PREFIX}{device_uuid}");
    let mut out = [0u8; 32];
    Hkdf::<Sha256>::new(Some(&salt), shared).expand(info.as_bytes(), &mut out).expect("32 bytes is a valid length");
    out
}

fn aead_seal(key: &[u8; 32], nonce: &[u8; 12], msg: &[u8], aad: &str) -> Result<Vec<u8>> {
    let cipher = Aes256Gcm::new(&Key::<Aes256Gcm>::from(*key));
    cipher.encrypt(&Nonce::from(*nonce), Payload { msg, aad: aad.as_bytes() }).map_err(|_| Error::Decrypt)
}

fn aead_open(key: &[u8; 32], nonce: &[u8; 12], msg: &[u8], aad: &str) -> Result<Vec<u8>> {
    let cipher = Aes256Gcm::new(&Key::<Aes256Gcm>::from(*key));
    cipher.decrypt(&Nonce::from(*nonce), Payload { msg, aad: aad.as_bytes() }).map_err(|_| Error::Decrypt)
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|_| Error::Random)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
