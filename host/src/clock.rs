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

/// The machine's clock, shifted by `HUBBUB_DEV_CLOCK_OFFSET_S` on a development host (0 elsewhere: the
/// host refuses an offset without `HUBBUB_DEV`).
#[derive(Debug, Default)]
pub struct SystemClock {
    offset_ms: i64,
}

impl SystemClock {
    /// The machine's clock `offset_s` seconds ahead (behind, when negative).
    pub fn shifted(offset_s: i64) -> SystemClock {
        SystemClock { offset_ms: offset_s.saturating_mul(1000) }
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        Utc::now().timestamp_millis().saturating_add(self.offset_ms)
    }
}

/// A clock that only moves when told to (tests); or, made [`running`](ManualClock::running), one that also
/// follows real time from its start (tests of pacing, whose waits are real).
#[derive(Debug)]
pub struct ManualClock {
    advanced: AtomicI64,
    running_since: Option<std::time::Instant>,
}

impl ManualClock {
    pub fn new(start_ms: Millis) -> Self {
        ManualClock { advanced: AtomicI64::new(start_ms), running_since: None }
    }

    /// A clock at `start_ms` that moves with real time, and further when told to.
    pub fn running(start_ms: Millis) -> Self {
        ManualClock { advanced: AtomicI64::new(start_ms), running_since: Some(std::time::Instant::now()) }
    }

    pub fn advance_ms(&self, ms: i64) {
        self.advanced.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        let real = self.running_since.map_or(0, |since| since.elapsed().as_millis() as i64);
        self.advanced.load(Ordering::SeqCst) + real
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
