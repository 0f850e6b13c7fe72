//! Value checks shared by every part of the service: E.164 phones, codes, e-mail addresses, dates.
//! Form and account-field validation build on these.

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

/// An absolute `http(s)` URL with a host.
pub fn is_http_url(s: &str) -> bool {
    match reqwest::Url::parse(s) {
        Ok(url) => matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty()),
        Err(_) => false,
    }
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

    #[test]
    fn urls() {
        assert!(is_http_url("https://cdn.example.com/a.png") && is_http_url("http://localhost:8080/x"));
        assert!(!is_http_url("ftp://example.com/a") && !is_http_url("not a url") && !is_http_url("https://"));
    }
}

/// Whether `ip` is `entry`: an address or a CIDR block (`10.0.0.0/8`, `2001:db8::/32`).
pub fn ip_matches(entry: &str, ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    let (addr, bits) = match entry.split_once('/') {
        Some((a, b)) => match b.parse::<u32>() {
            Ok(bits) => (a, Some(bits)),
            Err(_) => return false,
        },
        None => (entry, None),
    };
    let Ok(net) = addr.parse::<IpAddr>() else { return false };
    let ip = match (net, ip) {
        (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        _ => ip,
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let bits = bits.unwrap_or(32).min(32);
            let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let bits = bits.unwrap_or(128).min(128);
            let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

/// A valid `allowed_ips` list: comma-separated addresses or CIDR blocks.
pub fn is_ip_list(list: &str) -> bool {
    list.split(',').map(str::trim).filter(|e| !e.is_empty()).all(|entry| {
        let (addr, bits) = entry.split_once('/').map(|(a, b)| (a, Some(b))).unwrap_or((entry, None));
        match addr.parse::<std::net::IpAddr>() {
            Ok(ip) => bits.is_none_or(|b| b.parse::<u32>().is_ok_and(|b| b <= if ip.is_ipv4() { 32 } else { 128 })),
            Err(_) => false,
        }
    })
}

/// Whether a literal IP is one a public URL must not point at (loopback, private, link-local, …).
pub fn is_non_public_ip(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64 // carrier-grade NAT
        }
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00 // unique local
                || (v6.segments()[0] & 0xffc0) == 0xfe80 // link-local
                || v6.to_ipv4_mapped().is_some_and(|v4| is_non_public_ip(v4.into()))
        }
    }
}

/// The URL rule for webhook and media URLs: HTTPS to a public host; in dev mode `http://localhost` and
/// `http://127.0.0.1` too. Names are resolved later, where the URL is used; this checks the text.
pub fn check_public_url(raw: &str, dev: bool) -> Result<reqwest::Url, &'static str> {
    let url = reqwest::Url::parse(raw).map_err(|_| "must be an absolute URL")?;
    let host = url.host().ok_or("must have a host")?;
    let local = match &host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost") || d.to_ascii_lowercase().ends_with(".localhost"),
        url::Host::Ipv4(ip) => is_non_public_ip((*ip).into()),
        url::Host::Ipv6(ip) => is_non_public_ip((*ip).into()),
    };
    let loopback_name = matches!(&host, url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost"))
        || matches!(&host, url::Host::Ipv4(ip) if ip.is_loopback())
        || matches!(&host, url::Host::Ipv6(ip) if ip.is_loopback());
    match url.scheme() {
        "https" | "http" if dev && loopback_name => Ok(url),
        "https" if !local => Ok(url),
        "https" => Err("must not point at a private or loopback address"),
        "http" => Err("must use https"),
        _ => Err("must be an https URL"),
    }
}

#[cfg(test)]
mod ip_tests {
    use super::*;

    #[test]
    fn allowed_ip_matching() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(ip_matches("127.0.0.1", ip("127.0.0.1")));
        assert!(!ip_matches("127.0.0.1", ip("127.0.0.2")));
        assert!(ip_matches("10.0.0.0/8", ip("10.9.8.7")));
        assert!(!ip_matches("10.0.0.0/8", ip("11.0.0.1")));
        assert!(ip_matches("0.0.0.0/0", ip("1.2.3.4")));
        assert!(ip_matches("2001:db8::/32", ip("2001:db8::1")));
        assert!(ip_matches("127.0.0.1", ip("::ffff:127.0.0.1")));
        assert!(!ip_matches("nonsense", ip("127.0.0.1")));
        assert!(is_ip_list("127.0.0.1, 10.0.0.0/8,2001:db8::/32"));
        assert!(!is_ip_list("127.0.0.1/33") && !is_ip_list("host.example"));
    }
}

#[cfg(test)]
mod url_tests {
    use super::check_public_url;

    #[test]
    fn public_url_rules() {
        assert!(check_public_url("https://hooks.example.com/x", false).is_ok());
        assert!(check_public_url("http://hooks.example.com/x", false).is_err());
        assert!(check_public_url("https://127.0.0.1/x", false).is_err());
        assert!(check_public_url("https://10.1.2.3/x", false).is_err());
        assert!(check_public_url("https://[::1]/x", false).is_err());
        assert!(check_public_url("http://localhost:9000/x", false).is_err());
        assert!(check_public_url("http://localhost:9000/x", true).is_ok());
        assert!(check_public_url("http://127.0.0.1:9000/x", true).is_ok());
        assert!(check_public_url("http://10.0.0.1/x", true).is_err());
        assert!(check_public_url("ftp://example.com/x", true).is_err());
    }
}
