//! Random identifiers and credentials, and how they are stored: credentials are shown once and kept only
//! as a SHA-256 digest, looked up by that digest and compared in constant time.

use rand::Rng;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// `n` random characters from `[A-Za-z0-9]` (no `_`, so prefixes like `sk_dev_` stay unambiguous).
pub fn random_alnum(n: usize) -> String {
    rand::rng().sample_iter(&Alphanumeric).take(n).map(char::from).collect()
}

/// Random bytes from the OS-seeded generator.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    rand::Rng::fill(&mut rand::rng(), &mut buf[..]);
    buf
}

/// Hex SHA-256 of a secret, the only form in which credentials are stored.
pub fn digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
    out
}

/// Constant-time equality of two strings (length may leak, content does not).
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// A new partner API key: `sk_` + 40 random alphanumerics.
pub fn new_partner_key() -> String {
    format!("sk_{}", random_alnum(40))
}

/// The displayable prefix of a credential: its kind marker plus the first 8 random characters.
pub fn display_prefix(secret: &str, marker: &str) -> String {
    let rest = secret.strip_prefix(marker).unwrap_or(secret);
    format!("{marker}{}", &rest[..rest.len().min(8)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partner_keys_are_unique_and_prefixed() {
        let a = new_partner_key();
        let b = new_partner_key();
        assert!(a.starts_with("sk_") && !a.starts_with("sk_dev_"));
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert_eq!(display_prefix(&a, "sk_").len(), 11);
    }

    #[test]
    fn digest_is_sha256_hex() {
        assert_eq!(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(constant_time_eq("x", "x"));
        assert!(!constant_time_eq("x", "y"));
    }
}
