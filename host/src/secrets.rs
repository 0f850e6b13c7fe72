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

/// A new identifier of a row written many times a second (a message's `ref`, a webhook delivery's id):
/// `prefix`, the time it was made in milliseconds as eight base-62 digits, then 22 characters of
/// [`random_alnum`]. One made later sorts after one made earlier, so each new row lands at the end of the
/// identifier's unique index, not on a random page of it: with identifiers random throughout, each row of a
/// batch had a page of that index of its own to read into SQLite's cache and to write to its log at commit,
/// more of them as the table grew (docs/performance.md). The random part keeps it unguessable (131 bits);
/// the time part tells only when it was made.
pub fn ordered_id(prefix: &str) -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let mut time = [b'0'; 8];
    for digit in time.iter_mut().rev() {
        *digit = DIGITS[(ms % 62) as usize];
        ms /= 62;
    }
    let time = std::str::from_utf8(&time).expect("base-62 digits are ASCII");
    format!("{prefix}{time}{}", random_alnum(22))
}

/// A new message `ref` made by the server ([`ordered_id`]); a sender's own (end-to-end encrypted messages)
/// is checked by `encryption::client_ref` instead.
pub fn new_message_ref() -> String {
    ordered_id("msg_")
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

/// A new member session token (the cookie's value): `ms_` + 43 random alphanumerics.
pub fn new_member_session() -> String {
    format!("ms_{}", random_alnum(43))
}

/// A new member invitation: `inv_` + 40 random alphanumerics.
pub fn new_invitation() -> String {
    format!("inv_{}", random_alnum(40))
}

/// A new passkey ceremony token (held by the browser between a ceremony's two requests): `pkc_` + 40 random
/// alphanumerics.
pub fn new_passkey_ceremony() -> String {
    format!("pkc_{}", random_alnum(40))
}

/// The displayable prefix of a credential: its kind marker plus the first 8 random characters.
pub fn display_prefix(secret: &str, marker: &str) -> String {
    let rest = secret.strip_prefix(marker).unwrap_or(secret);
    format!("{marker}{}", &rest[..rest.len().min(8)])
}

/// Shortest secret an operator may set (`HUBBUB_JWT_SECRET`, `HUBBUB_METRICS_TOKEN`), in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// Least variety a set secret must show, in bits (see [`estimated_bits`]).
pub const MIN_SECRET_BITS: f64 = 128.0;

/// A lower bound of how hard `secret` is to guess, in bits: its length times the Shannon entropy of its
/// characters, or of the steps between neighbouring characters when that is smaller. Repeated characters
/// (`aaaa…`), a repeated word (`test-secret-test-secret…`) and runs (`abcd…`, `abab…`) score low; 32 random
/// bytes in base64 or hex score about 200 bits. It cannot see that a varied string is public (a quote, a
/// password from a list): [`generate`] makes one that is not.
pub fn estimated_bits(secret: &str) -> f64 {
    fn entropy<T: Ord>(items: impl Iterator<Item = T>) -> f64 {
        let mut counts = std::collections::BTreeMap::new();
        let mut n = 0usize;
        for item in items {
            *counts.entry(item).or_insert(0usize) += 1;
            n += 1;
        }
        counts.values().map(|&c| c as f64 / n as f64).map(|p| -p * p.log2()).sum()
    }
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 2 {
        return 0.0;
    }
    let steps = chars.windows(2).map(|w| w[1] as i64 - w[0] as i64);
    chars.len() as f64 * entropy(chars.iter()).min(entropy(steps))
}

/// Why the operator's secret `name` cannot be used: shorter than [`MIN_SECRET_BYTES`], or of less variety
/// than [`MIN_SECRET_BITS`].
pub fn check_strength(name: &str, secret: &str) -> Result<(), String> {
    let fix = "make one with `hubbub secrets generate` (32 random bytes)";
    if secret.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "{name} is {} bytes long; it must be at least {MIN_SECRET_BYTES} bytes: {fix}",
            secret.len()
        ));
    }
    let bits = estimated_bits(secret);
    if bits < MIN_SECRET_BITS {
        return Err(format!(
            "{name} has too little variety (about {bits:.0} bits, at least {MIN_SECRET_BITS:.0} are needed: repeated \
             characters, words or runs are guessable): {fix}"
        ));
    }
    Ok(())
}

/// A new secret of full entropy: 32 random bytes, base64url without padding (43 characters).
pub fn generate() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes::<32>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_secrets_are_refused_and_generated_ones_pass() {
        for weak in [
            "a".repeat(32),
            "test-secret-test-secret-test-sec".to_string(),
            "abcdefghijklmnopqrstuvwxyz012345".to_string(),
            "ab".repeat(20),
            "short".to_string(),
        ] {
            assert!(check_strength("HUBBUB_JWT_SECRET", &weak).is_err(), "{weak} was accepted");
        }
        for _ in 0..100 {
            let strong = generate();
            assert_eq!(strong.len(), 43);
            assert!(check_strength("HUBBUB_JWT_SECRET", &strong).is_ok(), "{strong}: {}", estimated_bits(&strong));
            let hex24 = hex(&random_bytes::<24>());
            assert!(check_strength("HUBBUB_METRICS_TOKEN", &hex24).is_ok(), "{hex24}");
        }
    }

    /// Ordered identifiers sort by when they were made (a later one after an earlier one, also as bytes, as
    /// SQLite's unique index compares them), keep their random part, and are the shape refs must have.
    #[test]
    fn ordered_ids_sort_by_time_and_stay_random() {
        let earlier = new_message_ref();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = new_message_ref();
        assert!(earlier.as_bytes() < later.as_bytes(), "{earlier} {later}");
        assert_eq!(later.len(), 4 + 8 + 22);
        assert!(later[4..].bytes().all(|b| b.is_ascii_alphanumeric()), "{later}");
        // Made in the same millisecond, they differ in their random part only.
        let (a, b) = (ordered_id("dlv_"), ordered_id("dlv_"));
        assert_ne!(a, b);
        assert!(a.starts_with("dlv_") && b.starts_with("dlv_"));
        // The time part is the clock's: after 2020 and before 2100 in base 62.
        let in_2020 = "0RmHKPlA"; // 1,577,836,800,000 ms
        let in_2100 = "1AE08Ie8"; // 4,102,444,800,000 ms
        assert!((in_2020..in_2100).contains(&&later[4..12]), "{later}");
    }

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
