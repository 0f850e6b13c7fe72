//! Passkeys (WebAuthn) for members: the relying party this host is, and the one place that decides how a
//! ceremony is kept between its two requests and how a member is named to an authenticator.
//!
//! The relying party's id is the host name of `HUBBUB_PUBLIC_URL` and its only origin that URL: browsers
//! refuse WebAuthn for an IP address, so a host reached as `http://127.0.0.1:…` offers no passkeys (its
//! routes say why). Every ceremony requires user verification (a PIN or biometric on the authenticator), the
//! library's default for passkeys.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use webauthn_rs::prelude::{Url, Uuid};
use webauthn_rs::{Webauthn, WebauthnBuilder};

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
