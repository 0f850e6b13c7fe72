//! Value checks shared by every part of the service: E.164 phones, codes, e-mail addresses, dates.
//! Form and account-field validation build on these.

pub use hubbub_forms::rules::{is_code, is_date, is_e164, is_email};

/// A request field a domain rule refuses: the field (dotted for nested fields) and why. Domain modules
/// answer it (alone or inside their own error enums); the API answers 422 `validation` naming the field.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

/// Why a partner's named thing (a label, a canned reply, a macro, an account field) was not kept or
/// changed: a field refused, none of that id (another partner's is none either), its name taken by
/// another of the partner's, or the database failed. The API answers 422, 404, 409 or 500.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Taken(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A request's `phone`: required, and E.164.
pub fn required_phone(phone: Option<&str>) -> Result<&str, Invalid> {
    let phone =
        phone.map(str::trim).filter(|p| !p.is_empty()).ok_or_else(|| Invalid::new("phone", "phone is required"))?;
    if !is_e164(phone) {
        return Err(Invalid::new("phone", "phone must be E.164, e.g. +15551230000"));
    }
    Ok(phone)
}

/// A list's `phone` filter: absent or empty is no filter, anything else must be E.164.
pub fn phone_filter(phone: Option<String>) -> Result<Option<String>, Invalid> {
    match phone.map(|p| p.trim().to_string()).filter(|p| !p.is_empty()) {
        Some(p) if !is_e164(&p) => Err(Invalid::new("phone", "phone must be E.164, e.g. +15551230000")),
        phone => Ok(phone),
    }
}

/// A request's one-time `code` (of `POST /auth/otp/start` or `POST /dev/signup`): required, trimmed.
pub fn required_code(code: Option<&str>) -> Result<&str, Invalid> {
    code.map(str::trim).filter(|c| !c.is_empty()).ok_or_else(|| Invalid::new("code", "code is required"))
}

/// The most words a search takes, the longest word, and the longest search.
pub const SEARCH_WORDS: usize = 8;
pub const SEARCH_WORD_CHARS: usize = 64;
pub const SEARCH_CHARS: usize = 600;

/// What someone typed in a search box, as the text indexes take it: its words (runs of letters and
/// digits), lower case, each matched as the start of a word. As a search box does, it takes what it can
/// rather than refusing: the first [`SEARCH_WORDS`] words, each cut to its first [`SEARCH_WORD_CHARS`]
/// characters (still the start of the same words); no word at all is a search that matches nothing (empty).
/// Only a text longer than [`SEARCH_CHARS`] is refused, on `q`.
pub fn search_words(q: &str) -> Result<Vec<String>, Invalid> {
    if q.chars().count() > SEARCH_CHARS {
        return Err(Invalid::new("q", format!("q is at most {SEARCH_CHARS} characters")));
    }
    Ok(q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(SEARCH_WORDS)
        .map(|w| w.chars().take(SEARCH_WORD_CHARS).collect::<String>().to_lowercase())
        .collect())
}

/// The longest label name.
pub const LABEL_CHARS: usize = 50;

/// A label's name as kept: trimmed and lower case, 1 to [`LABEL_CHARS`] of `a-z`, `0-9`, `-` and `_` (so a
/// name reads the same in a list's filter, a macro and a URL).
pub fn label_name(raw: &str) -> Result<String, String> {
    let name = raw.trim().to_ascii_lowercase();
    if name.is_empty()
        || name.len() > LABEL_CHARS
        || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "a label is 1 to {LABEL_CHARS} of a-z, 0-9, - and _ (given {} characters)",
            raw.chars().count()
        ));
    }
    Ok(name)
}

impl Invalid {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid { field: field.into(), message: message.into() }
    }

    /// The same refusal of a field the request names otherwise.
    pub fn renamed(self, field: &str) -> Self {
        Invalid { message: self.message.replace(&self.field, field), field: field.to_string() }
    }
}

/// Whether a text has control characters (CR, LF, NUL, tab, …), which no URL we store may have: the URL
/// parser silently drops some of them, so the stored text would differ from what was checked.
pub fn has_control_chars(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// An absolute `http(s)` URL with a host.
pub fn is_http_url(s: &str) -> bool {
    if has_control_chars(s) {
        return false;
    }
    match reqwest::Url::parse(s) {
        Ok(url) => matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty()),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_words_are_letters_and_digits_lower_cased() {
        assert_eq!(search_words("  Late PARCEL, #42!").unwrap(), ["late", "parcel", "42"]);
        assert_eq!(search_words("Zoë's café").unwrap(), ["zoë", "s", "café"]);
        assert_eq!(search_words("\"* OR NEAR(").unwrap(), ["or", "near"]);
        assert!(search_words("?!").unwrap().is_empty(), "no word: a search that matches nothing");
        assert_eq!(search_words("a b c d e f g h i").unwrap(), ["a", "b", "c", "d", "e", "f", "g", "h"]);
        assert_eq!(search_words(&"x".repeat(65)).unwrap(), ["x".repeat(64)]);
        assert_eq!(search_words(&format!("word{}", " ".repeat(600))).unwrap_err().field, "q");
    }

    #[test]
    fn urls() {
        assert!(is_http_url("https://cdn.example.com/a.png") && is_http_url("http://localhost:8080/x"));
        assert!(!is_http_url("ftp://example.com/a") && !is_http_url("not a url") && !is_http_url("https://"));
        let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_URL));
        assert_eq!(check_public_url(&long, false).unwrap_err(), "must be at most 2048 characters");
        assert!(check_public_url(&long[..MAX_URL], false).is_ok());
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
    // `::ffff:a.b.c.d` is the IPv4 address a.b.c.d, on either side (a /N on a mapped entry counts its
    // IPv4 part).
    let (net, bits) = match (net, bits) {
        (IpAddr::V6(v6), bits) if v6.to_ipv4_mapped().is_some() => {
            (IpAddr::V4(v6.to_ipv4_mapped().expect("checked")), bits.map(|b| b.saturating_sub(96)))
        }
        other => other,
    };
    let ip = ip.to_canonical();
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

/// Whether an address is globally routable unicast, the only kind a webhook or bot URL may reach outside dev
/// mode. An allow-list, not a deny-list: IPv4 special-purpose blocks (this network, private, shared,
/// loopback, link-local, IETF protocol assignments, benchmarking, documentation, multicast, reserved,
/// broadcast) are refused, and IPv6 must be in `2000::/3` outside its special blocks. The IPv4 address
/// embedded in transition forms (mapped `::ffff:0:0/96`, compatible `::/96`, NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16`) is decoded and judged as IPv4; Teredo and local-use NAT64 are refused outright.
pub fn is_global_unicast(ip: std::net::IpAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr};
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(a == 0 // 0.0.0.0/8 "this network"
                || a == 10
                || a == 100 && (b & 0xc0) == 64 // 100.64.0.0/10 shared (carrier-grade NAT)
                || a == 127
                || a == 169 && b == 254
                || a == 172 && (b & 0xf0) == 16
                || a == 192 && b == 0 && c == 0 // 192.0.0.0/24 IETF protocol assignments
                || a == 192 && b == 0 && c == 2 // TEST-NET-1
                || a == 192 && b == 88 && c == 99 // 6to4 relay anycast
                || a == 192 && b == 168
                || a == 198 && (b & 0xfe) == 18 // 198.18.0.0/15 benchmarking
                || a == 198 && b == 51 && c == 100 // TEST-NET-2
                || a == 203 && b == 0 && c == 113 // TEST-NET-3
                || a >= 224) // multicast 224/4, reserved 240/4, broadcast
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded =
                |hi: u16, lo: u16| is_global_unicast(IpAddr::V4(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))));
            if s[..5] == [0; 5] && (s[5] == 0 || s[5] == 0xffff) {
                // IPv4-compatible (incl. :: and ::1) and IPv4-mapped.
                return embedded(s[6], s[7]);
            }
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return embedded(s[6], s[7]); // NAT64 well-known prefix
            }
            if s[0] == 0x2002 {
                return embedded(s[1], s[2]); // 6to4
            }
            let global_block = (s[0] & 0xe000) == 0x2000; // 2000::/3
            let ietf = (s[0] == 0x2001) && (s[1] & 0xfe00) == 0; // 2001::/23 (Teredo, ORCHID, …)
            let documentation = (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] & 0xfff0) == 0x3ff0; // 2001:db8::/32, 3fff::/20
            global_block && !ietf && !documentation
        }
    }
}

/// The longest URL stored (webhooks, media, links, push endpoints).
pub const MAX_URL: usize = 2048;

/// The URL rule for webhook and media URLs: HTTPS to a public host; in dev mode `http://localhost` and
/// `http://127.0.0.1` too. Names are resolved later, where the URL is used; this checks the text.
pub fn check_public_url(raw: &str, dev: bool) -> Result<reqwest::Url, &'static str> {
    if raw.len() > MAX_URL {
        return Err("must be at most 2048 characters");
    }
    if has_control_chars(raw) {
        return Err("must not contain control characters");
    }
    let url = reqwest::Url::parse(raw).map_err(|_| "must be an absolute URL")?;
    let host = url.host().ok_or("must have a host")?;
    let local = match &host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost") || d.to_ascii_lowercase().ends_with(".localhost"),
        url::Host::Ipv4(ip) => !is_global_unicast((*ip).into()),
        url::Host::Ipv6(ip) => !is_global_unicast((*ip).into()),
    };
    let loopback_name = matches!(&host, url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost"))
        || matches!(&host, url::Host::Ipv4(ip) if ip.is_loopback())
        || matches!(&host, url::Host::Ipv6(ip) if ip.is_loopback());
    match url.scheme() {
        "https" | "http" if dev && loopback_name => Ok(url),
        "https" if local => Err("must not point at a private or loopback address"),
        "https" if !has_public_url_shape(raw) => {
            Err("must be https:// then a host name or address, an optional port, and printable characters only")
        }
        "https" => Ok(url),
        "http" => Err("must use https"),
        _ => Err("must be an https URL"),
    }
}

/// Whether `raw` has the shape the document gives a webhook URL (`http::PUBLIC_URL_PATTERN`): `https://`, a
/// host of letter, digit and hyphen labels (the last beginning with a letter, none `xn--`), an optional port
/// of one to four digits without a leading zero, then printable ASCII only. An address for a host (four
/// dotted numbers, or bracketed IPv6) is left to the address checks.
fn has_public_url_shape(raw: &str) -> bool {
    let Some(rest) = raw.strip_prefix("https://") else { return false };
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.find(']') {
            Some(end) => (&authority[..end + 2], &v6[end + 1..]),
            None => return false,
        },
        None => authority.split_at(authority.rfind(':').unwrap_or(authority.len())),
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| {
            (1..=4).contains(&p.len()) && !p.starts_with('0') && p.bytes().all(|b| b.is_ascii_digit())
        });
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
            && !l.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("xn--"))
    };
    let host_ok = if host.starts_with('[') {
        true
    } else if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        host.split('.').count() == 4 && host.split('.').all(|p| (1..=3).contains(&p.len()))
    } else {
        host.split('.').all(label)
            && host.rsplit('.').next().is_some_and(|l| l.starts_with(|c: char| c.is_ascii_alphabetic()))
    };
    port_ok && host_ok && tail.bytes().all(|b| (b'!'..=b'~').contains(&b))
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
        assert!(ip_matches("::ffff:127.0.0.1", ip("127.0.0.1")));
        assert!(ip_matches("::ffff:10.0.0.0/104", ip("10.9.8.7")));
        assert!(!ip_matches("::ffff:10.0.0.0/104", ip("11.0.0.1")));
        assert!(!ip_matches("::ffff:127.0.0.1", ip("127.0.0.2")));
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
        // The shape the document's pattern gives, and nothing outside it.
        for ok in ["https://hooks.example.com:8443/x?y=1#z", "https://93.184.215.14/h", "https://a-b.example.io"] {
            assert!(check_public_url(ok, false).is_ok(), "{ok}");
        }
        for shape in [
            "https://u*",
            "https://u*/x",
            "https://user@hooks.example.com/x",
            "https://hooks.example.com:0/x",
            "https://hooks.example.com:08443/x",
            "https://hooks.example.com:10443/x",
            "https://1.2.3/x",
            "https://xn--80ak6aa92e.com/x",
            "https://hooks.example.com./x",
            "https://-hooks.example.com/x",
            "https://hooks.example.1/x",
            "https://hooks.example.com/caf\u{e9}",
            "https://hooks.example.com/a b",
        ] {
            assert!(check_public_url(shape, false).is_err(), "{shape}");
        }
        for raw in ["https://example.com/a\r\nSet-Cookie: x", "https://example.com/\u{0}", "https://exa\tmple.com/"] {
            assert!(check_public_url(raw, false).is_err(), "{raw:?}");
            assert!(!super::is_http_url(raw), "{raw:?}");
        }
    }

    #[test]
    fn only_globally_routable_unicast_is_public() {
        use super::is_global_unicast;
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        for private in [
            "::127.0.0.1",
            "::ffff:0:7f00:1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "3fff::1",
            "fec0::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::",
            "::1",
            "100::1",
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!is_global_unicast(ip(private)), "{private} must not count as public");
            let literal =
                if private.contains(':') { format!("https://[{private}]/x") } else { format!("https://{private}/x") };
            assert!(check_public_url(&literal, false).is_err(), "{literal}");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "198.20.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_global_unicast(ip(public)), "{public} is public");
        }
        // Non-canonical IPv4 spellings are normalised by the URL parser before the check.
        for sneaky in ["https://0x7f.1/x", "https://2130706433/x", "https://0177.0.0.1/x", "https://127.1/x"] {
            assert!(check_public_url(sneaky, false).is_err(), "{sneaky}");
        }
    }
}

/// Checks a URL the service will call, given in `field` (a webhook, a push endpoint): HTTPS (localhost in
/// dev mode), and outside dev mode a host that resolves only to public addresses.
pub async fn check_url(field: &str, raw: &str, dev: bool) -> Result<(), Invalid> {
    resolves_public(raw, dev).await.map_err(|why| Invalid::new(field, format!("{field} {why}")))
}

async fn resolves_public(raw: &str, dev: bool) -> Result<(), String> {
    let url = check_public_url(raw, dev).map_err(str::to_string)?;
    if dev {
        return Ok(());
    }
    if let Some(url::Host::Domain(host)) = url.host() {
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs: Vec<std::net::SocketAddr> =
            tokio::net::lookup_host((host, port)).await.map_err(|_| format!("host {host} does not resolve"))?.collect();
        if addrs.is_empty() || addrs.iter().any(|a| !is_global_unicast(a.ip())) {
            return Err("must not resolve to a private or loopback address".into());
        }
    }
    Ok(())
}
