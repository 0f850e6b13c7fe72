//! Web Push as the host sends it: one request to a push service (RFC 8030) per device, authenticated with
//! VAPID (RFC 8292: an ES256 JWT naming the push service's origin, with the host's public key) and carrying
//! a payload only the device can read (RFC 8291: ECDH P-256 with the device's key, HKDF-SHA256, then the
//! `aes128gcm` content coding of RFC 8188).
//!
//! The cryptography is aws-lc-rs's (ECDH, HKDF, AES-GCM, ECDSA key generation) — the library the host
//! already links for its JWTs — and the JWT is jsonwebtoken's; this file only arranges them as the RFCs
//! say, and its test reproduces RFC 8291's published example byte for byte.

use aws_lc_rs::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::agreement::{ECDH_P256, PrivateKey, UnparsedPublicKey, agree};
use aws_lc_rs::hkdf::{HKDF_SHA256, KeyType, Salt};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

/// The length of an uncompressed P-256 point (`p256dh`, the VAPID and sender public keys).
pub const P256_POINT: usize = 65;
/// The length of a subscription's authentication secret.
pub const AUTH_SECRET: usize = 16;
/// The record size the payload is sent in: one record, as every push service takes.
const RECORD_SIZE: u32 = 4096;
/// The largest payload one record holds (the tag and the padding delimiter take 17 bytes).
pub const MAX_PAYLOAD: usize = RECORD_SIZE as usize - 17;

/// What went wrong building a push.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError {
    /// The subscription's keys are not a P-256 point and a 16-byte secret.
    BadKeys,
    /// The payload does not fit one record.
    TooLarge,
    /// The key store failed (it does not, short of memory).
    Crypto,
}

/// The host's VAPID key pair: generated once, kept (sealed) with the other secrets in the database, the
/// same on every host that shares it.
pub struct Vapid {
    encoding: jsonwebtoken::EncodingKey,
    public: Vec<u8>,
    subject: Option<String>,
}

impl Vapid {
    /// A new private key, as it is stored: base64 of its PKCS#8 document.
    pub fn generate() -> String {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("P-256 key generation");
        STANDARD.encode(pair.to_pkcs8v1().expect("PKCS#8 of a new key").as_ref())
    }

    /// The stored key, with the contact the push services see (`sub`: a `mailto:` or `https:` URL; none
    /// leaves the claim out).
    pub fn from_stored(stored: &str, subject: Option<&str>) -> Result<Vapid, String> {
        let der = STANDARD.decode(stored.trim()).map_err(|_| "the VAPID key is not base64".to_string())?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der)
            .map_err(|e| format!("the VAPID key is not a P-256 PKCS#8 key: {e}"))?;
        Ok(Vapid {
            encoding: jsonwebtoken::EncodingKey::from_ec_der(&der),
            public: pair.public_key().as_ref().to_vec(),
            subject: subject.map(str::to_string),
        })
    }

    /// The public key as the browser's `applicationServerKey` takes it (base64url of the point).
    pub fn public_key(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.public)
    }

    /// The `Authorization` header for a request to `endpoint`: `vapid t=<JWT>, k=<public key>`, the JWT
    /// naming the endpoint's origin (`aud`), expiring in 12 hours (`exp`, at most 24 by RFC 8292).
    pub fn authorization(&self, endpoint: &url::Url, now_s: i64) -> Result<String, PushError> {
        let audience = endpoint.origin().ascii_serialization();
        let mut claims = serde_json::json!({ "aud": audience, "exp": now_s + 12 * 3600 });
        if let Some(subject) = &self.subject {
            claims["sub"] = serde_json::Value::from(subject.as_str());
        }
        let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        let token = jsonwebtoken::encode(&header, &claims, &self.encoding).map_err(|_| PushError::Crypto)?;
        Ok(format!("vapid t={token}, k={}", self.public_key()))
    }
}

/// Checks a subscription's keys as the browser sent them (base64url): the device's P-256 public key and
/// its 16-byte authentication secret. Answers them decoded.
pub fn parse_keys(p256dh: &str, auth: &str) -> Result<(Vec<u8>, Vec<u8>), PushError> {
    let decode = |s: &str| URL_SAFE_NO_PAD.decode(s.trim_end_matches('='));
    let (Ok(point), Ok(secret)) = (decode(p256dh), decode(auth)) else { return Err(PushError::BadKeys) };
    if point.len() != P256_POINT || secret.len() != AUTH_SECRET {
        return Err(PushError::BadKeys);
    }
    // A point off the curve is refused by the agreement itself.
    let probe = PrivateKey::generate(&ECDH_P256).map_err(|_| PushError::Crypto)?;
    agree(&probe, &UnparsedPublicKey::new(&ECDH_P256, &point), PushError::BadKeys, |_| Ok(()))?;
    Ok((point, secret))
}

/// Encrypts `payload` for the device with public key `ua_public` and secret `auth` (RFC 8291), with a fresh
/// sender key and salt: the request body, in the `aes128gcm` content coding.
pub fn encrypt(ua_public: &[u8], auth: &[u8], payload: &[u8]) -> Result<Vec<u8>, PushError> {
    let sender = PrivateKey::generate(&ECDH_P256).map_err(|_| PushError::Crypto)?;
    let mut salt = [0u8; 16];
    aws_lc_rs::rand::fill(&mut salt).map_err(|_| PushError::Crypto)?;
    encrypt_with(&sender, &salt, ua_public, auth, payload)
}

/// HKDF output lengths, as aws-lc-rs asks for them.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf(salt: &[u8], ikm: &[u8], info: &[&[u8]], len: usize) -> Result<Vec<u8>, PushError> {
    let mut out = vec![0u8; len];
    let prk = Salt::new(HKDF_SHA256, salt).extract(ikm);
    prk.expand(info, Len(len)).and_then(|okm| okm.fill(&mut out)).map_err(|_| PushError::Crypto)?;
    Ok(out)
}

fn encrypt_with(
    sender: &PrivateKey,
    salt: &[u8; 16],
    ua_public: &[u8],
    auth: &[u8],
    payload: &[u8],
) -> Result<Vec<u8>, PushError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(PushError::TooLarge);
    }
    let as_public = sender.compute_public_key().map_err(|_| PushError::Crypto)?;
    let as_public = as_public.as_ref();
    let shared = agree(sender, &UnparsedPublicKey::new(&ECDH_P256, ua_public), PushError::BadKeys, |s| Ok(s.to_vec()))?;
    // RFC 8291 §3.4: the input keying material binds both public keys and the device's secret.
    let ikm = hkdf(auth, &shared, &[b"WebPush: info\0", ua_public, as_public], 32)?;
    let cek = hkdf(salt, &ikm, &[b"Content-Encoding: aes128gcm\0"], 16)?;
    let nonce = hkdf(salt, &ikm, &[b"Content-Encoding: nonce\0"], 12)?;
    // One record: the payload, then the last record's delimiter (2), no padding.
    let mut record = Vec::with_capacity(payload.len() + 17);
    record.extend_from_slice(payload);
    record.push(2);
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek).map_err(|_| PushError::Crypto)?);
    let nonce = Nonce::try_assume_unique_for_key(&nonce).map_err(|_| PushError::Crypto)?;
    key.seal_in_place_append_tag(nonce, Aad::empty(), &mut record).map_err(|_| PushError::Crypto)?;
    // RFC 8188 §2.1: salt, record size, the key id (the sender's public key) and its length, then the record.
    let mut body = Vec::with_capacity(16 + 4 + 1 + as_public.len() + record.len());
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(as_public.len() as u8);
    body.extend_from_slice(as_public);
    body.extend_from_slice(&record);
    Ok(body)
}

/// What a push service answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Taken (201, or any 2xx).
    Accepted,
    /// The subscription is gone (404 or 410): it must be deleted.
    Gone,
    /// Anything else: a refusal, a timeout, an address the guard refused.
    Failed(String),
}

/// One push: the encrypted `body` to `endpoint`, kept by the push service for `ttl_s` seconds, with the
/// VAPID header; `topic` collapses the pushes still waiting there into the latest.
pub async fn send(
    http: &reqwest::Client,
    vapid: &Vapid,
    endpoint: &str,
    body: Vec<u8>,
    ttl_s: u32,
    topic: &str,
    now_s: i64,
) -> Pushed {
    let Ok(url) = url::Url::parse(endpoint) else { return Pushed::Failed("the endpoint is not a URL".into()) };
    let authorization = match vapid.authorization(&url, now_s) {
        Ok(header) => header,
        Err(e) => return Pushed::Failed(format!("{e:?}")),
    };
    let request = http
        .post(url)
        .header("authorization", authorization)
        .header("content-encoding", "aes128gcm")
        .header("content-type", "application/octet-stream")
        .header("ttl", ttl_s.to_string())
        .header("urgency", "normal")
        .header("topic", topic)
        .body(body);
    match request.send().await {
        Ok(response) if response.status().is_success() => Pushed::Accepted,
        Ok(response) if matches!(response.status().as_u16(), 404 | 410) => Pushed::Gone,
        Ok(response) => Pushed::Failed(format!("HTTP {}", response.status().as_u16())),
        Err(e) if e.is_timeout() => Pushed::Failed("timed out".into()),
        Err(e) => Pushed::Failed(crate::providers::root_cause(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(s).unwrap()
    }

    /// RFC 8291, section 5 and appendix A: the published example, byte for byte.
    #[test]
    fn the_rfc_8291_example_encrypts_to_the_published_body() {
        let sender =
            PrivateKey::from_private_key(&ECDH_P256, &b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")).unwrap();
        let ua_public = b64("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4");
        let salt: [u8; 16] = b64("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let body = encrypt_with(
            &sender,
            &salt,
            &ua_public,
            &b64("BTBZMqHH6r4Tts7J_aSIgg"),
            b"When I grow up, I want to be a watermelon",
        )
        .unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.encode(body),
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3\
             jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        );
    }

    #[test]
    fn keys_must_be_a_point_on_the_curve_and_a_16_byte_secret() {
        let point = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
        assert!(parse_keys(point, "BTBZMqHH6r4Tts7J_aSIgg").is_ok());
        assert_eq!(parse_keys(point, "BTBZMqHH6r4Tts7J").unwrap_err(), PushError::BadKeys);
        let mut off_curve = b64(point);
        off_curve[64] ^= 1;
        assert_eq!(
            parse_keys(&URL_SAFE_NO_PAD.encode(off_curve), "BTBZMqHH6r4Tts7J_aSIgg").unwrap_err(),
            PushError::BadKeys
        );
        assert_eq!(parse_keys("not base64!", "BTBZMqHH6r4Tts7J_aSIgg").unwrap_err(), PushError::BadKeys);
    }

    #[test]
    fn the_vapid_header_is_an_es256_jwt_for_the_endpoints_origin_with_the_public_key() {
        let vapid = Vapid::from_stored(&Vapid::generate(), Some("https://hub.example")).unwrap();
        let url = url::Url::parse("https://push.example.net:8443/send/abc?x=1").unwrap();
        let header = vapid.authorization(&url, 1_800_000_000).unwrap();
        let (token, key) = header.strip_prefix("vapid t=").unwrap().split_once(", k=").unwrap();
        assert_eq!(key, vapid.public_key());
        let point = b64(key);
        assert_eq!(point.len(), P256_POINT);
        let (x, y) = (URL_SAFE_NO_PAD.encode(&point[1..33]), URL_SAFE_NO_PAD.encode(&point[33..]));
        let decoding = jsonwebtoken::DecodingKey::from_ec_components(&x, &y).unwrap();
        let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        rules.set_audience(&["https://push.example.net:8443"]);
        rules.validate_exp = false;
        let claims = jsonwebtoken::decode::<serde_json::Value>(token, &decoding, &rules).unwrap().claims;
        assert_eq!(claims["exp"], 1_800_000_000 + 12 * 3600);
        assert_eq!(claims["sub"], "https://hub.example");
        assert!(Vapid::from_stored("bm90IGEga2V5", None).is_err());
    }

    #[test]
    fn a_payload_fits_one_record() {
        let point = b64("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4");
        let auth = b64("BTBZMqHH6r4Tts7J_aSIgg");
        assert_eq!(encrypt(&point, &auth, &vec![b'x'; MAX_PAYLOAD]).unwrap().len(), 16 + 4 + 1 + 65 + 4096);
        assert_eq!(encrypt(&point, &auth, &vec![b'x'; MAX_PAYLOAD + 1]).unwrap_err(), PushError::TooLarge);
    }
}
