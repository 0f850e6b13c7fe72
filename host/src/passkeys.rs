//! Passkeys (WebAuthn) for members: the relying party this host is, and the one place that decides how a
//! ceremony is kept between its two requests and how a member is named to an authenticator.
//!
//! The relying party's id is the host name of `HUBBUB_PUBLIC_URL` and its only origin that URL: browsers
//! refuse WebAuthn for an IP address, so a host reached as `http://127.0.0.1:…` offers no passkeys (its
//! routes say why). Every ceremony requires user verification (a PIN or biometric on the authenticator), the
//! library's default for passkeys.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::Sha256;
use webauthn_rs::prelude::{Passkey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential, Url, Uuid};
use webauthn_rs::{Webauthn, WebauthnBuilder};

use crate::clock::Millis;
use crate::secrets::{digest, new_passkey_ceremony};
use crate::store::Db;
use crate::store::members::{self, Member};
use crate::store::passkeys::{self as store, Ceremony};
pub use crate::store::passkeys::{StoredPasskey, of_member};
use crate::validate::Invalid;

/// A ceremony's challenge is good for this long (5 minutes), once.
pub const CEREMONY_MS: i64 = 5 * 60 * 1000;

/// The relying party, when the public URL allows one.
pub struct RelyingParty {
    webauthn: Result<Webauthn, String>,
}

impl RelyingParty {
    pub fn new(public_url: &str) -> Self {
        let webauthn = Url::parse(public_url).map_err(|e| e.to_string()).and_then(|origin| {
            let Some(domain) = origin.domain().map(str::to_owned) else {
                return Err(format!(
                    "passkeys need the host reached by a domain name, and HUBBUB_PUBLIC_URL is {public_url} \
                     (browsers refuse passkeys for an IP address)"
                ));
            };
            WebauthnBuilder::new(&domain, &origin)
                .and_then(|b| b.rp_name("Hubbub").build())
                .map_err(|e| format!("passkeys cannot be offered for {public_url}: {e}"))
        });
        RelyingParty { webauthn }
    }

    /// The relying party, or why this host offers no passkeys.
    pub fn get(&self) -> Result<&Webauthn, &str> {
        self.webauthn.as_ref().map_err(String::as_str)
    }
}

/// The user handle a member's passkeys carry (stored by the authenticator, sent back at sign-in): derived
/// from the member's id under the host's key, so it names no one outside this deployment and needs no
/// column of its own.
pub fn user_handle(key: &[u8], member_id: i64) -> Uuid {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(b"hubbub member passkey user handle\0");
    mac.update(&member_id.to_be_bytes());
    let out = mac.finalize().into_bytes();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&out[..16]);
    Uuid::from_bytes(bytes)
}

/// Why a passkey ceremony was refused.
#[derive(Debug, thiserror::Error)]
pub enum PasskeyError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// This host offers no passkeys (409), or the passkey is registered already (409).
    #[error("{0}")]
    Conflict(String),
    /// A ceremony unknown, used or expired, or an answer that does not check out (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The phone has no passkey, or the passkey is none of the member's (404).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// What the host kept could not be read or written (500).
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

const UNUSABLE: &str = "the passkey challenge is unknown, used or expired: start again";

/// A ceremony begun: what the browser passes to WebAuthn (`options`), the single-use token that names the
/// ceremony when the browser answers, and until when it is good.
pub struct Challenge {
    pub token: String,
    pub options: Value,
    pub expires_at: Millis,
}

/// What passkey ceremonies work with: the database, the relying party this host is, the host's key (for
/// members' user handles), and now.
pub struct Ceremonies<'a> {
    pub db: &'a Db,
    pub party: &'a RelyingParty,
    pub key: &'a [u8],
    pub now: Millis,
}

impl Ceremonies<'_> {
    fn webauthn(&self) -> Result<&Webauthn, PasskeyError> {
        self.party.get().map_err(|why| PasskeyError::Conflict(why.to_string()))
    }

    /// Keeps a ceremony's state and answers its challenge.
    async fn begin<T: Serialize>(
        &self,
        kind: Ceremony,
        member_id: Option<i64>,
        options: impl Serialize,
        state: &T,
    ) -> Result<Challenge, PasskeyError> {
        let token = new_passkey_ceremony();
        let kept = serde_json::to_string(state).map_err(internal)?;
        store::begin(self.db, &digest(&token), kind, member_id, &kept, self.now, self.now + CEREMONY_MS).await?;
        let options = serde_json::to_value(options).map_err(internal)?;
        Ok(Challenge { token, options, expires_at: self.now + CEREMONY_MS })
    }

    /// Takes the ceremony named by `token` (once): the member who began it, if one did, and its state.
    async fn take<T: DeserializeOwned>(
        &self,
        token: Option<&str>,
        kind: Ceremony,
    ) -> Result<(Option<i64>, T), PasskeyError> {
        let token = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Invalid::new("ceremony", "ceremony is the pkc_… token of the challenge this answers"))?;
        let (member_id, kept) = store::take(self.db, &digest(token), kind, self.now)
            .await?
            .ok_or_else(|| PasskeyError::Unauthorized(UNUSABLE.into()))?;
        Ok((member_id, serde_json::from_str(&kept).map_err(internal)?))
    }
}

fn internal(e: impl std::fmt::Display) -> PasskeyError {
    PasskeyError::Internal(e.to_string())
}

/// The browser's answer, as the WebAuthn library reads it.
fn credential<T: DeserializeOwned>(raw: Option<Value>) -> Result<T, Invalid> {
    let raw = raw.ok_or_else(|| Invalid::new("credential", "credential is the browser's answer"))?;
    serde_json::from_value(raw)
        .map_err(|e| Invalid::new("credential", format!("credential is not a WebAuthn public key credential: {e}")))
}

fn stored(p: &StoredPasskey) -> Result<Passkey, PasskeyError> {
    serde_json::from_str(&p.passkey).map_err(internal)
}

/// Begins adding a passkey for `member`: the options for `navigator.credentials.create()` (their passkeys
/// excluded) and the ceremony's token.
pub async fn registration_challenge(host: &Ceremonies<'_>, member: &Member) -> Result<Challenge, PasskeyError> {
    let webauthn = host.webauthn()?;
    let existing = store::of_member(host.db, member.id).await?;
    let exclude = existing.iter().map(|p| stored(p).map(|p| p.cred_id().clone())).collect::<Result<_, _>>()?;
    let handle = user_handle(host.key, member.id);
    let display = member.name.as_deref().unwrap_or(&member.phone);
    let (options, registration) =
        webauthn.start_passkey_registration(handle, &member.phone, display, Some(exclude)).map_err(internal)?;
    host.begin(Ceremony::Register, Some(member.id), options, &registration).await
}

/// Adds the passkey the browser made in the ceremony `ceremony` that `member_id` began, named `name`
/// (`Passkey` when absent).
pub async fn register(
    host: &Ceremonies<'_>,
    member_id: i64,
    name: Option<&str>,
    ceremony: Option<&str>,
    answer: Option<Value>,
) -> Result<StoredPasskey, PasskeyError> {
    let webauthn = host.webauthn()?;
    let name = match name {
        Some(raw) => crate::partners::key_name(Some(raw))?,
        None => "Passkey",
    };
    let answer = credential(answer)?;
    let (began_by, registration): (Option<i64>, PasskeyRegistration) = host.take(ceremony, Ceremony::Register).await?;
    if began_by != Some(member_id) {
        return Err(PasskeyError::Unauthorized(UNUSABLE.into()));
    }
    let passkey = webauthn
        .finish_passkey_registration(&answer, &registration)
        .map_err(|e| Invalid::new("credential", format!("the passkey could not be registered: {e}")))?;
    let credential_id = URL_SAFE_NO_PAD.encode(passkey.cred_id().as_slice());
    let kept = serde_json::to_string(&passkey).map_err(internal)?;
    store::add(host.db, member_id, name, &credential_id, &kept, host.now)
        .await?
        .ok_or_else(|| PasskeyError::Conflict("this passkey is registered already".into()))
}

/// Removes `member_id`'s passkey `id`; it no longer signs in.
pub async fn remove(db: &Db, member_id: i64, id: i64) -> Result<(), PasskeyError> {
    if !store::remove(db, member_id, id).await? {
        return Err(PasskeyError::NotFound("passkey"));
    }
    Ok(())
}

/// Begins a sign-in of `phone` with a passkey: the passkeys of each of its memberships (of the one partner
/// named); the one used says which member signs in.
pub async fn sign_in_challenge(
    host: &Ceremonies<'_>,
    phone: Option<&str>,
    partner: Option<&str>,
) -> Result<Challenge, PasskeyError> {
    let phone = crate::validate::required_phone(phone)?;
    let webauthn = host.webauthn()?;
    let wanted = partner.map(str::trim).filter(|p| !p.is_empty());
    let mut theirs = Vec::new();
    for (member, partner) in members::memberships(host.db, phone).await? {
        if wanted.is_none_or(|code| code == partner) {
            for p in store::of_member(host.db, member.id).await? {
                theirs.push(stored(&p)?);
            }
        }
    }
    if theirs.is_empty() {
        return Err(PasskeyError::NotFound("passkey of this phone"));
    }
    let (options, authentication) = webauthn.start_passkey_authentication(&theirs).map_err(internal)?;
    host.begin(Ceremony::SignIn, None, options, &authentication).await
}

/// Signs in with the browser's answer to a sign-in ceremony: checked against the passkeys the challenge
/// listed, the one used names the member (its counter moves on).
pub async fn sign_in(
    host: &Ceremonies<'_>,
    ceremony: Option<&str>,
    answer: Option<Value>,
) -> Result<Member, PasskeyError> {
    let webauthn = host.webauthn()?;
    let answer: PublicKeyCredential = credential(answer)?;
    let (_, authentication): (Option<i64>, PasskeyAuthentication) = host.take(ceremony, Ceremony::SignIn).await?;
    let refused = |e: &dyn std::fmt::Display| PasskeyError::Unauthorized(format!("the passkey did not sign in: {e}"));
    let result = webauthn.finish_passkey_authentication(&answer, &authentication).map_err(|e| refused(&e))?;
    let credential_id = URL_SAFE_NO_PAD.encode(result.cred_id().as_slice());
    let row = store::by_credential(host.db, &credential_id)
        .await?
        .ok_or_else(|| refused(&"the passkey was removed meanwhile"))?;
    let mut passkey = stored(&row)?;
    let kept = match passkey.update_credential(&result) {
        Some(true) => Some(serde_json::to_string(&passkey).map_err(internal)?),
        _ => None,
    };
    store::used(host.db, row.id, kept.as_deref(), host.now).await?;
    members::find(host.db, row.member_id).await?.ok_or_else(|| refused(&"the member was removed meanwhile"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_is_a_relying_party_and_an_address_is_not() {
        assert!(RelyingParty::new("https://hub.example.com").get().is_ok());
        assert!(RelyingParty::new("http://localhost:8080").get().is_ok());
        let refused = RelyingParty::new("http://127.0.0.1:8080");
        assert!(refused.get().unwrap_err().contains("domain name"));
    }

    #[test]
    fn a_member_has_one_handle_and_another_member_another() {
        let key = b"host key";
        assert_eq!(user_handle(key, 7), user_handle(key, 7));
        assert_ne!(user_handle(key, 7), user_handle(key, 8));
        assert_ne!(user_handle(key, 7), user_handle(b"another host", 7));
    }
}
