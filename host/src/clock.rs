//! Time, injected: the service reads the time only through a [`Clock`], so tests of expiry, presence and
//! retries move a [`ManualClock`] instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};

/// Milliseconds since the Unix epoch, UTC. Every stored time is one of these.
pub type Millis = i64;

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> Millis;
}

pub type SharedClock = Arc<dyn Clock>;

#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        Utc::now().timestamp_millis()
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start_ms: Millis) -> Self {
        ManualClock(AtomicI64::new(start_ms))
    }

    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

fn to_datetime(ms: Millis) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

const RECORD_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// The record format of the contract: `YYYY-MM-DD HH:MM:SS`, UTC.
pub fn record_time(ms: Millis) -> String {
    to_datetime(ms).format(RECORD_FORMAT).to_string()
}

/// A time written as records show them (`YYYY-MM-DD HH:MM:SS`, UTC), as milliseconds; `None` if it is not one.
pub fn parse_record_time(text: &str) -> Option<Millis> {
    chrono::NaiveDateTime::parse_from_str(text.trim(), RECORD_FORMAT).ok().map(|t| t.and_utc().timestamp_millis())
}

/// ISO 8601 UTC, as webhook payloads carry it (`2026-11-22T10:00:00Z`).
pub fn iso_time(ms: Millis) -> String {
    to_datetime(ms).to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let ms = 1_700_000_000_123;
        assert_eq!(record_time(ms), "2023-11-14 22:13:20");
        assert_eq!(iso_time(ms), "2023-11-14T22:13:20Z");
        assert_eq!(parse_record_time(" 2023-11-14 22:13:20 "), Some(1_700_000_000_000));
        assert_eq!(parse_record_time("2023-11-14T22:13:20Z"), None);
        assert_eq!(parse_record_time("2023-02-30 00:00:00"), None);
    }
}
