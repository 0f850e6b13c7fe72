//! The value rules the validator applies beyond the JSON Schema, also used by the host for its own
//! parameters: E.164 phones, codes, e-mail addresses, calendar dates.

/// E.164 as the contract fixes it: `^\+[1-9][0-9]{6,14}$`.
pub fn is_e164(s: &str) -> bool {
    let Some(digits) = s.strip_prefix('+') else {
        return false;
    };
    (7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0')
}

/// Resource codes: `^[a-z0-9][a-z0-9_-]{0,63}$`.
pub fn is_code(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

/// A pragmatic e-mail check: one `@`, a non-empty local part, a dotted domain of sane labels, no spaces.
pub fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    if local.is_empty() || local.len() > 64 || domain.len() > 253 || s.chars().any(char::is_whitespace) {
        return false;
    }
    if domain.contains('@') || !domain.contains('.') {
        return false;
    }
    domain.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// A real calendar date written `YYYY-MM-DD`.
pub fn is_date(s: &str) -> bool {
    s.len() == 10 && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e164() {
        for ok in ["+15551230000", "+4930123456", "+1234567", "+123456789012345"] {
            assert!(is_e164(ok), "{ok}");
        }
        for bad in ["15551230000", "+0551230000", "+123456", "+1234567890123456", "+1555abc0000", "", "+"] {
            assert!(!is_e164(bad), "{bad}");
        }
    }

    #[test]
    fn codes() {
        assert!(is_code("acme") && is_code("a") && is_code("0-a_b"));
        assert!(!is_code("") && !is_code("Acme") && !is_code("-a") && !is_code("a b") && !is_code(&"a".repeat(65)));
    }

    #[test]
    fn emails() {
        assert!(is_email("ana@example.com") && is_email("a.b+c@mail.example.co"));
        for bad in ["ana", "ana@", "@example.com", "ana@example", "a na@example.com", "ana@@example.com", "ana@-x.com"]
        {
            assert!(!is_email(bad), "{bad}");
        }
    }

    #[test]
    fn dates() {
        assert!(is_date("2024-02-29"));
        assert!(!is_date("2023-02-29") && !is_date("2024-13-01") && !is_date("2024-1-01") && !is_date("tomorrow"));
    }
}
