//! Phone, code, e-mail, date, URL and IP checks: never panic, and the URL rule never lets through a
//! non-public literal address or a control character.
#![no_main]

use std::net::IpAddr;

use hubbub_host::validate::{
    check_public_url, has_control_chars, ip_matches, is_code, is_date, is_e164, is_email, is_global_unicast,
    is_http_url, is_ip_list,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let s = s.as_ref();
    let _ = (is_e164(s), is_code(s), is_email(s), is_date(s), is_ip_list(s));
    if is_http_url(s) {
        assert!(!has_control_chars(s));
    }
    for dev in [false, true] {
        if let Ok(url) = check_public_url(s, dev) {
            assert!(!has_control_chars(s), "{s:?} has control characters");
            if !dev {
                assert_eq!(url.scheme(), "https");
                match url.host() {
                    Some(url::Host::Ipv4(ip)) => assert!(is_global_unicast(ip.into()), "{s:?}"),
                    Some(url::Host::Ipv6(ip)) => assert!(is_global_unicast(ip.into()), "{s:?}"),
                    _ => {}
                }
            }
        }
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        let _ = is_global_unicast(ip);
        assert!(ip_matches(s, ip), "{s} does not match itself");
    }
    if data.len() >= 16 {
        let v6 = IpAddr::from(<[u8; 16]>::try_from(&data[..16]).unwrap());
        let v4 = IpAddr::from(<[u8; 4]>::try_from(&data[..4]).unwrap());
        for ip in [v4, v6] {
            // The canonical form of an address is judged like the address.
            assert_eq!(is_global_unicast(ip), is_global_unicast(ip.to_canonical()), "{ip}");
            let _ = ip_matches(s, ip);
        }
    }
});
