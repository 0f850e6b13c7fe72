//! Limits on the routes that send or check one-time codes (`/auth/otp/start|verify`,
//! `/dev/signup|verify|session`): each has its per-phone limits, and these bound them as a whole, per
//! client address and for the whole host, so neither guessing codes across many phones nor running up the
//! SMS bill from many addresses scales. Its extractors are in [`super::abuse`].
//!
//! The client address is the socket's peer; `X-Forwarded-For` is believed only when that peer is one of
//! `HUBBUB_TRUSTED_PROXIES`, and then the right-most address that is not itself a trusted proxy is used.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use axum::http::HeaderMap;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::clock::Millis;
use crate::config::Config;
use crate::http::error::ApiError;
use crate::validate::ip_matches;

/// The code routes' buckets: one per client address, one for the host; and the stream tickets each address
/// presented that were refused, this minute.
pub struct CodeLimits {
    per_ip: DefaultKeyedRateLimiter<IpAddr>,
    global: DefaultDirectRateLimiter,
    trusted_proxies: Vec<String>,
    ticket_misses: Mutex<HashMap<IpAddr, (Millis, u32)>>,
}

/// Refused stream tickets an address may present in a minute; past them, it is answered 429 without a look
/// at the database. A working app presents one ticket per stream it opens, and none refused.
pub const TICKET_MISSES_PER_MIN: u32 = 30;

impl CodeLimits {
    pub fn new(config: &Config) -> CodeLimits {
        let per_ip = config.host_share(config.code_rate_limit_per_ip_per_min);
        let global = config.host_share(config.code_rate_limit_global_per_min);
        CodeLimits {
            per_ip: RateLimiter::keyed(Quota::per_minute(per_ip)),
            global: RateLimiter::direct(Quota::per_minute(global)),
            trusted_proxies: config
                .trusted_proxies
                .iter()
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            ticket_misses: Mutex::default(),
        }
    }

    /// Refuses (429) an address that presented [`TICKET_MISSES_PER_MIN`] refused stream tickets this minute.
    pub fn check_ticket_misses(&self, client: IpAddr, now: Millis) -> Result<(), ApiError> {
        let misses = self.ticket_misses.lock().expect("not poisoned");
        match misses.get(&client) {
            Some((minute, n)) if *minute == now / 60_000 && *n >= TICKET_MISSES_PER_MIN => {
                let wait = ((60_000 - now.rem_euclid(60_000)) as u64).div_ceil(1000);
                Err(ApiError::too_many(wait, "too many refused stream tickets from this address: wait a minute"))
            }
            _ => Ok(()),
        }
    }

    /// Counts a refused stream ticket from `client`.
    pub fn ticket_missed(&self, client: IpAddr, now: Millis) {
        let minute = now / 60_000;
        let mut misses = self.ticket_misses.lock().expect("not poisoned");
        let entry = misses.entry(client).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    fn trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|entry| ip_matches(entry, ip))
    }

    /// The client's address: the peer, or what a trusted proxy says it forwarded for.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusted(peer) {
            return peer;
        }
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|hop| hop.trim().parse::<IpAddr>().map(|ip| ip.to_canonical()))
            .collect::<Vec<_>>();
        for hop in forwarded.into_iter().rev() {
            match hop {
                Ok(ip) if self.trusted(ip) => continue,
                Ok(ip) => return ip,
                // A hop we cannot read: the last one we can vouch for is the proxy before it.
                Err(_) => break,
            }
        }
        peer
    }

    /// Takes a token from the client's bucket and the host's, or says how long to wait.
    pub(super) fn check(&self, client: IpAddr) -> Result<(), ApiError> {
        let wait = |not_until: governor::NotUntil<_>| {
            ApiError::rate_limited(not_until.wait_time_from(DefaultClock::default().now()).as_secs_f64().ceil() as u64)
        };
        self.per_ip.check_key(&client).map_err(wait)?;
        self.global.check().map_err(wait)
    }

    /// Drops idle per-address buckets, and the refused tickets of minutes past.
    pub fn forget_idle(&self, now: Millis) {
        self.per_ip.retain_recent();
        self.ticket_misses.lock().expect("not poisoned").retain(|_, (minute, _)| *minute == now / 60_000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(trusted: &[&str]) -> CodeLimits {
        let mut config = <crate::config::Config as clap::FromArgMatches>::from_arg_matches(
            &<crate::config::Config as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from(["t"]),
        )
        .unwrap();
        config.trusted_proxies = trusted.iter().map(|s| s.to_string()).collect();
        CodeLimits::new(&config)
    }

    fn xff(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", value.parse().unwrap());
        h
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let none = limits(&[]);
        assert_eq!(none.client_ip(ip("203.0.113.9"), &xff("1.2.3.4")), ip("203.0.113.9"));
        let proxied = limits(&["10.0.0.0/8"]);
        assert_eq!(proxied.client_ip(ip("10.0.0.2"), &xff("1.2.3.4")), ip("1.2.3.4"));
        // The client may send its own X-Forwarded-For: only the hops our proxies appended count.
        assert_eq!(proxied.client_ip(ip("10.0.0.2"), &xff("6.6.6.6, 1.2.3.4, 10.0.0.3")), ip("1.2.3.4"));
        assert_eq!(proxied.client_ip(ip("10.0.0.2"), &xff("garbage, 1.2.3.4")), ip("1.2.3.4"));
        assert_eq!(proxied.client_ip(ip("10.0.0.2"), &xff("1.2.3.4, garbage")), ip("10.0.0.2"));
        assert_eq!(proxied.client_ip(ip("10.0.0.2"), &HeaderMap::new()), ip("10.0.0.2"));
        assert_eq!(proxied.client_ip(ip("::ffff:10.0.0.2"), &xff("1.2.3.4")), ip("1.2.3.4"));
        // An untrusted peer's header is ignored.
        assert_eq!(proxied.client_ip(ip("192.0.2.1"), &xff("1.2.3.4")), ip("192.0.2.1"));
    }
}
