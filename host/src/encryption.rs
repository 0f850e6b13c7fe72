//! End-to-end encryption, the server's side: the checks on what clients send (envelopes, key wraps, identity
//! keys, client-chosen refs) and what it keeps of them (devices' identity keys, the wraps of each
//! conversation's content keys). The server stores ciphertext and metadata only and never decrypts; the
//! protocol itself is in the `hubbub-e2e` crate and `docs/e2e.md`.

use serde_json::{Map, Value};

use crate::validate::Invalid;

pub use hubbub_encryption::{ALG, MODE_CONVERSATION, MODE_SEALED, VERSION};

/// Where the document describes an envelope (the schema `E2eEnvelope`).
pub fn envelope_schema_ref() -> utoipa::openapi::Ref {
    utoipa::openapi::Ref::from_schema_name("E2eEnvelope")
}

/// An end-to-end encrypted envelope as clients send it: ciphertext only; the server checks its shape and
/// routes it, and never decrypts. `key_wraps`: one per recipient device for sealed hub messages (required
/// there), none for conversation messages; `GET /me/messages` shows each device only its own wrap. (The
/// host reads envelopes as JSON with [`check_envelope`]; this type is their description.)
#[derive(utoipa::ToSchema)]
#[schema(as = E2eEnvelope)]
pub struct EnvelopeSchema {
    /// Always 1.
    #[schema(minimum = 1, maximum = 1)]
    pub v: i64,
    /// The algorithm suite: `x25519-hkdf-sha256-aes-256-gcm`.
    #[schema(pattern = "^x25519-hkdf-sha256-aes-256-gcm$")]
    pub alg: String,
    /// `sealed` (hub messages) or `conversation`.
    pub mode: Option<String>,
    pub key_version: Option<i64>,
    pub sender_device_uuid: Option<String>,
    /// base64url.
    pub ciphertext: String,
    /// base64url.
    pub nonce: String,
    /// What the ciphertext is bound to (`…|msg|<ref>|v1`).
    pub aad: Option<String>,
    pub key_wraps: Option<Vec<KeyWrapSchema>>,
}

/// The content key wrapped for one device.
#[derive(utoipa::ToSchema)]
#[schema(as = E2eKeyWrap)]
pub struct KeyWrapSchema {
    pub device_uuid: String,
    pub wrap: String,
    pub wrap_nonce: String,
    pub sender_eph_pub: String,
}

/// The bytes of a base64url string (padding optional), if it is one and non-empty.
pub fn base64url(v: &str) -> Option<Vec<u8>> {
    hubbub_encryption::decode("value", v).ok().filter(|b| !b.is_empty())
}

/// A base64url field of `obj` that must decode to `len` bytes (any non-empty length with `None`).
fn b64_field(obj: &Map<String, Value>, key: &str, field: &str, len: Option<usize>) -> Result<(), Invalid> {
    let bytes = obj.get(key).and_then(Value::as_str).and_then(base64url);
    match (bytes, len) {
        (Some(b), Some(n)) if b.len() == n => Ok(()),
        (Some(_), None) => Ok(()),
        (_, Some(n)) => Err(Invalid::new(field, format!("{field} must be base64url of {n} bytes"))),
        (None, None) => Err(Invalid::new(field, format!("{field} is required, non-empty base64url"))),
    }
}

/// An X25519 public key: base64url (padding optional) of exactly 32 bytes. Answers it without padding.
pub fn identity_key(raw: Option<&str>) -> Result<String, Invalid> {
    match raw.map(str::trim).and_then(base64url) {
        Some(bytes) if bytes.len() == 32 && hubbub_encryption::is_weak_public_key(&bytes) => {
            Err(Invalid::new("identity_key_pub", "identity_key_pub is a low-order point, not a usable key"))
        }
        Some(bytes) if bytes.len() == 32 => Ok(hubbub_encryption::encode(&bytes)),
        _ => Err(Invalid::new("identity_key_pub", "identity_key_pub must be a base64url X25519 public key (32 bytes)")),
    }
}

/// A device uuid chosen by a client: 1–128 characters of `A-Z a-z 0-9 . _ : -`.
pub fn device_uuid(raw: Option<&str>, field: &str) -> Result<String, Invalid> {
    let v = raw.map(str::trim).unwrap_or("");
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if ok {
        Ok(v.to_string())
    } else {
        Err(Invalid::new(field, format!("{field} must be 1-128 letters, digits or . _ : -")))
    }
}

/// A message ref chosen by the sender of an E2E message so it can bind `aad` to it: the server's format,
/// `msg_` and 20 to 64 URL-safe characters.
pub fn client_ref(raw: &str) -> Result<String, Invalid> {
    let rest = raw.strip_prefix("msg_").unwrap_or("");
    let ok = (20..=64).contains(&rest.len()) && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(raw.to_string())
    } else {
        Err(Invalid::new("ref", "ref must be msg_ followed by 20-64 URL-safe characters"))
    }
}

/// The message ref an `aad` of the documented shape (`<context_prefix>|msg|<ref>|v1`) names, if it is a
/// well-formed ref.
pub fn ref_in_aad(aad: &str) -> Option<String> {
    let parts: Vec<&str> = aad.rsplitn(4, '|').collect();
    match parts.as_slice() {
        ["v1", reference, "msg", _prefix] => client_ref(reference).ok(),
        _ => None,
    }
}

/// The shape checks of an envelope, in the order `docs/e2e.md` gives: an object, `v` 1, `alg`, then
/// `ciphertext` and `nonce`. `wraps_required` for sealed hub messages (one wrap per recipient device).
pub fn check_envelope(envelope: Option<&Value>, wraps_required: bool) -> Result<&Map<String, Value>, Invalid> {
    let env = envelope
        .and_then(Value::as_object)
        .ok_or_else(|| Invalid::new("e2e_envelope", "e2e_envelope is required (an object) with encryption e2e"))?;
    if env.get("v").and_then(Value::as_i64) != Some(VERSION as i64) {
        return Err(Invalid::new("e2e_envelope.v", "e2e_envelope.v must be 1"));
    }
    if env.get("alg").and_then(Value::as_str) != Some(ALG) {
        return Err(Invalid::new("e2e_envelope.alg", format!("e2e_envelope.alg must be {ALG}")));
    }
    b64_field(env, "ciphertext", "e2e_envelope.ciphertext", None)?;
    b64_field(env, "nonce", "e2e_envelope.nonce", None)?;
    if env.get("aad").is_some_and(|a| !a.is_string()) {
        return Err(Invalid::new("e2e_envelope.aad", "e2e_envelope.aad must be a string"));
    }
    if env.get("key_version").is_some_and(|v| !v.is_i64()) {
        return Err(Invalid::new("e2e_envelope.key_version", "e2e_envelope.key_version must be an integer"));
    }
    if env.get("sender_device_uuid").is_some_and(|v| !v.is_string() && !v.is_null()) {
        return Err(Invalid::new("e2e_envelope.sender_device_uuid", "sender_device_uuid must be a string"));
    }
    if wraps_required && env.get("mode").is_some_and(|m| m.as_str() != Some(MODE_SEALED)) {
        return Err(Invalid::new("e2e_envelope.mode", "e2e_envelope.mode must be sealed for hub messages"));
    }
    // Sealed hub messages need one wrap per recipient device; a conversation envelope may carry wraps
    // too (the envelope of `docs/e2e.md` has them), checked the same way and stored as given.
    let wraps = match env.get("key_wraps") {
        None | Some(Value::Null) if !wraps_required => None,
        wraps => {
            Some(wraps.and_then(Value::as_array).filter(|w| !w.is_empty() || !wraps_required).ok_or_else(|| {
                let what = if wraps_required { "a non-empty array" } else { "an array" };
                Invalid::new("e2e_envelope.key_wraps", format!("e2e_envelope.key_wraps must be {what}"))
            })?)
        }
    };
    // Each is a whole wrap to one device, once; which devices are valid is the caller's check (for hub
    // messages, the recipient's published ones).
    let mut seen = std::collections::HashSet::new();
    for w in wraps.into_iter().flatten() {
        let wrap = check_wrap(w, "e2e_envelope.key_wraps", false)
            .map_err(|e| Invalid::new("e2e_envelope.key_wraps", e.message))?;
        if !seen.insert(wrap["device_uuid"].as_str().unwrap_or_default()) {
            return Err(Invalid::new("e2e_envelope.key_wraps", "two key wraps for one device"));
        }
    }
    Ok(env)
}

/// One key wrap entry: `device_uuid`, and `wrap`, `wrap_nonce`, `sender_eph_pub` as non-empty base64url
/// (their sizes are the protocol's business: the server never opens them), and `device_kind` (`user` or
/// `agent`) in conversation key uploads.
pub fn check_wrap<'a>(w: &'a Value, field: &str, with_kind: bool) -> Result<&'a Map<String, Value>, Invalid> {
    let obj = w.as_object().ok_or_else(|| Invalid::new(field, format!("{field} entries must be objects")))?;
    device_uuid(obj.get("device_uuid").and_then(Value::as_str), &format!("{field}.device_uuid"))?;
    for part in ["wrap", "wrap_nonce", "sender_eph_pub"] {
        b64_field(obj, part, &format!("{field}.{part}"), None)?;
    }
    if with_kind && !matches!(obj.get("device_kind").and_then(Value::as_str), Some("user" | "agent")) {
        return Err(Invalid::new(format!("{field}.device_kind"), format!("{field}.device_kind must be user or agent")));
    }
    Ok(obj)
}

/// The wraps of a sealed envelope left for one reader: a device sees only its own.
pub fn envelope_for_device(record: &mut Value, device: Option<&str>) {
    if let Some(wraps) = record.pointer_mut("/e2e_envelope/key_wraps").and_then(Value::as_array_mut) {
        wraps.retain(|w| device.is_some() && w.get("device_uuid").and_then(Value::as_str) == device);
    }
}

use crate::store::conversations::Conversation;
pub use crate::store::devices::Device;
pub use crate::store::keys::{AgentDevice, ConversationKey};
use crate::store::{Db, accounts, devices, keys};

/// The most wraps one share of a content key carries.
pub const MAX_WRAPS: usize = 256;

/// The optional `platform` label of a device (at sign-in too): at most 32 characters.
pub fn platform(raw: Option<&str>) -> Result<Option<String>, Invalid> {
    match raw.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) if p.chars().count() > 32 => Err(Invalid::new("platform", "platform is at most 32 characters")),
        p => Ok(p.map(str::to_string)),
    }
}

/// Publishes the identity key of a device of the person of `phone` (a different key replaces it and bumps
/// its version): the device named, or a new one. `None`: the device is another person's.
pub async fn publish_user_key(
    db: &Db,
    phone: &str,
    key: Option<&str>,
    device: Option<&str>,
    platform_label: Option<&str>,
    now: crate::clock::Millis,
) -> Result<Option<Device>, crate::validate::KeepError> {
    let key = identity_key(key)?;
    let device_uuid = match device {
        Some(uuid) => device_uuid(Some(uuid), "device_uuid")?,
        None => format!("dev_{}", crate::secrets::random_alnum(24)),
    };
    let platform = platform(platform_label)?;
    Ok(devices::publish_key(db, phone, &device_uuid, platform.as_deref(), &key, now).await?)
}

/// Publishes the identity key of an agent device of partner `partner_id` (its member `member_id`'s, when a
/// member publishes it).
pub async fn publish_agent_key(
    db: &Db,
    (partner_id, member_id): (i64, Option<i64>),
    key: Option<&str>,
    device: Option<&str>,
    platform_label: Option<&str>,
    now: crate::clock::Millis,
) -> Result<AgentDevice, crate::validate::KeepError> {
    let device_uuid = device_uuid(device, "device_uuid")?;
    let key = identity_key(key)?;
    let platform = platform(platform_label)?;
    Ok(keys::publish_agent_key(db, partner_id, member_id, &device_uuid, &key, platform.as_deref(), now).await?)
}

/// The devices of the person of `phone` and partner `partner_id`'s agent devices, when the person's account
/// is linked to the partner (`None` otherwise: the directory never tells whether a phone uses the app).
pub async fn directory(
    db: &Db,
    partner_id: i64,
    phone: &str,
) -> Result<Option<(Vec<Device>, Vec<AgentDevice>)>, sqlx::Error> {
    if accounts::find_linked(db, partner_id, phone).await?.is_none() {
        return Ok(None);
    }
    Ok(Some((devices::list_for_phone(db, phone).await?, keys::agent_devices(db, partner_id).await?)))
}

/// Keeps the wraps of content key `key_version` of conversation `c`, each naming a device of its person
/// (`user`) or an agent device of its partner (`agent`), once each; `uploaded_by`: which side shared it.
pub async fn share_key(
    db: &Db,
    c: &Conversation,
    key_version: Option<i64>,
    wraps: Option<&[Value]>,
    uploaded_by: &str,
    now: crate::clock::Millis,
) -> Result<(i64, Vec<ConversationKey>), crate::validate::KeepError> {
    let key_version = key_version
        .filter(|v| *v >= 1)
        .ok_or_else(|| Invalid::new("key_version", "key_version must be a positive integer"))?;
    let wraps = wraps
        .filter(|w| !w.is_empty() && w.len() <= MAX_WRAPS)
        .ok_or_else(|| Invalid::new("wraps", format!("wraps must be an array of 1 to {MAX_WRAPS} key wraps")))?;
    let user_devices = devices::published_device_uuids(db, &c.phone).await?;
    let agent_devices: Vec<String> =
        keys::agent_devices(db, c.partner_id).await?.into_iter().map(|d| d.device_uuid).collect();
    let mut rows: Vec<ConversationKey> = Vec::with_capacity(wraps.len());
    for w in wraps {
        let obj = check_wrap(w, "wraps", true)?;
        let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (kind, uuid) = (text("device_kind"), text("device_uuid"));
        let known = if kind == "user" { &user_devices } else { &agent_devices };
        if !known.contains(&uuid) {
            let why = format!("{uuid:?} is not a published {kind} device of this conversation");
            return Err(Invalid::new("wraps.device_uuid", why).into());
        }
        if rows.iter().any(|r| r.device_kind == kind && r.device_uuid == uuid) {
            return Err(Invalid::new("wraps.device_uuid", format!("two wraps for device {uuid:?}")).into());
        }
        rows.push(ConversationKey {
            key_version,
            device_kind: kind,
            device_uuid: uuid,
            wrap: text("wrap"),
            wrap_nonce: text("wrap_nonce"),
            sender_eph_pub: text("sender_eph_pub"),
            uploaded_by: uploaded_by.to_string(),
            created_at: now,
        });
    }
    keys::put_conversation_keys(db, c.id, &rows).await?;
    Ok((key_version, rows))
}

/// The wraps of `c`'s content keys addressed to one device (`kind` `user` or `agent`), every version, and
/// the newest version shared.
pub async fn keys_for(
    db: &Db,
    c: &Conversation,
    kind: &str,
    device_uuid: &str,
) -> Result<(Vec<ConversationKey>, Option<i64>), sqlx::Error> {
    let rows = keys::conversation_keys_for(db, c.id, kind, device_uuid).await?;
    Ok((rows, keys::latest_key_version(db, c.id).await?))
}

/// Whether `device_uuid` is one of the devices of the person of `phone`.
pub async fn is_own_device(db: &Db, phone: &str, device_uuid: &str) -> Result<bool, sqlx::Error> {
    Ok(devices::list_for_phone(db, phone).await?.iter().any(|d| d.device_uuid == device_uuid))
}

/// Whether `device_uuid` is one of partner `partner_id`'s agent devices.
pub async fn is_agent_device(db: &Db, partner_id: i64, device_uuid: &str) -> Result<bool, sqlx::Error> {
    Ok(keys::agent_devices(db, partner_id).await?.iter().any(|d| d.device_uuid == device_uuid))
}

/// The devices of both sides of `c` (its person's, its partner's agent devices) and the newest content key
/// version shared in it.
pub async fn peers(db: &Db, c: &Conversation) -> Result<(Vec<Device>, Vec<AgentDevice>, Option<i64>), sqlx::Error> {
    Ok((
        devices::list_for_phone(db, &c.phone).await?,
        keys::agent_devices(db, c.partner_id).await?,
        keys::latest_key_version(db, c.id).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wrap() -> Value {
        json!({"device_uuid": "d1", "wrap": "A".repeat(64), "wrap_nonce": "A".repeat(16), "sender_eph_pub": "A".repeat(43)})
    }

    #[test]
    fn envelope_checks_run_in_contract_order() {
        let field = |v: Value, wraps: bool| check_envelope(Some(&v), wraps).err().map(|e| e.field);
        let base =
            json!({"v": 1, "alg": ALG, "ciphertext": "YWJj", "nonce": "AAAAAAAAAAAAAAAA", "key_wraps": [wrap()]});
        assert_eq!(field(base.clone(), true), None);
        assert_eq!(field(json!("x"), true).as_deref(), Some("e2e_envelope"));
        let mut v2 = base.clone();
        v2["v"] = json!(2);
        v2["ciphertext"] = json!("");
        assert_eq!(field(v2, true).as_deref(), Some("e2e_envelope.v"));
        let mut no_ct = base.clone();
        no_ct.as_object_mut().unwrap().remove("ciphertext");
        no_ct["nonce"] = json!("");
        assert_eq!(field(no_ct, true).as_deref(), Some("e2e_envelope.ciphertext"));
        let mut bad_nonce = base.clone();
        bad_nonce["nonce"] = json!("not base64!");
        assert_eq!(field(bad_nonce, true).as_deref(), Some("e2e_envelope.nonce"));
        let mut dup = base.clone();
        dup["key_wraps"] = json!([wrap(), wrap()]);
        assert_eq!(field(dup, true).as_deref(), Some("e2e_envelope.key_wraps"));
        let mut bare = base.clone();
        bare["key_wraps"] = json!([{"device_uuid": "d1"}]);
        assert_eq!(field(bare, true).as_deref(), Some("e2e_envelope.key_wraps"), "a wrap needs its bytes");
        let mut mode = base.clone();
        mode["mode"] = json!("conversation");
        assert_eq!(field(mode, true).as_deref(), Some("e2e_envelope.mode"));
        let mut version = base.clone();
        version["key_version"] = json!("1");
        assert_eq!(field(version, true).as_deref(), Some("e2e_envelope.key_version"));
        let mut no_wraps = base.clone();
        no_wraps["key_wraps"] = json!([]);
        assert_eq!(field(no_wraps.clone(), true).as_deref(), Some("e2e_envelope.key_wraps"));
        assert_eq!(field(no_wraps, false), None, "conversation messages need no wraps");
        // A conversation envelope may carry wraps (the envelope of `docs/e2e.md` has them): checked, then kept.
        assert_eq!(field(base.clone(), false), None, "conversation envelopes may carry wraps");
        let mut conv_bad = base.clone();
        conv_bad["key_wraps"] = json!([{"device_uuid": "d1"}]);
        assert_eq!(field(conv_bad, false).as_deref(), Some("e2e_envelope.key_wraps"));
        let mut conv_dup = base.clone();
        conv_dup["key_wraps"] = json!([wrap(), wrap()]);
        assert_eq!(field(conv_dup, false).as_deref(), Some("e2e_envelope.key_wraps"));
        let mut conv_obj = base;
        conv_obj["key_wraps"] = json!({"d1": "x"});
        assert_eq!(field(conv_obj, false).as_deref(), Some("e2e_envelope.key_wraps"));
    }

    #[test]
    fn wraps_keys_and_refs_are_checked_for_length_and_alphabet() {
        assert!(check_wrap(&wrap(), "wraps", false).is_ok());
        assert!(check_wrap(&wrap(), "wraps", true).is_err(), "device_kind is required in key uploads");
        let mut bad = wrap();
        bad["wrap"] = json!("");
        assert_eq!(check_wrap(&bad, "wraps", false).unwrap_err().field, "wraps.wrap");
        let key = hubbub_encryption::KeyPair::generate().unwrap().public_b64();
        assert_eq!(identity_key(Some(&format!("{key}="))).unwrap(), key);
        assert!(identity_key(Some("AAAA")).is_err());
        assert!(identity_key(Some(&"A".repeat(43))).is_err(), "all zeros is a low-order point");
        assert!(identity_key(Some(&"+".repeat(43))).is_err(), "base64url, not standard base64");
        assert!(client_ref("msg_abcdefghijklmnopqrst").is_ok());
        assert!(client_ref("msg_short").is_err());
        assert!(client_ref("abc_abcdefghijklmnopqrst").is_err());
        assert!(client_ref("msg_abcdefghijklmnopqrs/").is_err());
        assert!(device_uuid(Some("dev 1"), "device_uuid").is_err());
    }

    #[test]
    fn a_ref_is_read_from_an_aad_of_the_documented_shape() {
        let r = "msg_abcdefghijklmnopqrstuv";
        assert_eq!(ref_in_aad(&format!("hubbub.hub.acme|msg|{r}|v1")).as_deref(), Some(r));
        assert_eq!(ref_in_aad(&format!("a|b|msg|{r}|v1")).as_deref(), Some(r));
        assert_eq!(ref_in_aad("hubbub|msg|x|v1"), None, "not a ref");
        assert_eq!(ref_in_aad(r), None);
        assert_eq!(ref_in_aad(&format!("p|key|{r}|v1")), None);
    }

    #[test]
    fn a_device_sees_only_its_own_wrap() {
        let mut record = json!({"e2e_envelope": {"key_wraps": [{"device_uuid": "a"}, {"device_uuid": "b"}]}});
        envelope_for_device(&mut record, Some("b"));
        assert_eq!(record["e2e_envelope"]["key_wraps"], json!([{"device_uuid": "b"}]));
        envelope_for_device(&mut record, None);
        assert_eq!(record["e2e_envelope"]["key_wraps"], json!([]));
    }
}
