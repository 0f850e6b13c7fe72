//! A partner's figures, read from the rollups kept as things happen (`store::rollups`), never by scanning
//! its conversations: each hour's or day's counts and averages, and each agent's over the whole range.

use std::collections::BTreeMap;

use crate::clock::Millis;
use crate::store::Db;
use crate::store::rollups::{self, Bump, HOUR_MS};
use crate::validate::Invalid;

/// A day, in milliseconds.
pub const DAY_MS: Millis = 24 * HOUR_MS;
/// The longest range of a report: a year (and a day, for a leap year).
pub const MAX_DAYS: i64 = 366;
/// The longest range of a report by the hour.
pub const MAX_HOURLY_DAYS: i64 = 31;

/// How a report buckets its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Hour,
    Day,
}

impl Interval {
    fn ms(self) -> Millis {
        match self {
            Interval::Hour => HOUR_MS,
            Interval::Day => DAY_MS,
        }
    }
}

/// A report's range: whole UTC days from `from` (its start) to `to` (its end), checked: `from` not after
/// `to`, at most [`MAX_DAYS`] days (by the hour, [`MAX_HOURLY_DAYS`]).
pub fn range(from: Millis, to: Millis, interval: Interval) -> Result<(Millis, Millis), Invalid> {
    let (from, to) = (from - from.rem_euclid(DAY_MS), to - to.rem_euclid(DAY_MS) + DAY_MS);
    if from >= to {
        return Err(Invalid::new("from", "from is a day on or before to"));
    }
    let days = (to - from) / DAY_MS;
    if days > MAX_DAYS {
        return Err(Invalid::new("to", format!("a report covers at most {MAX_DAYS} days (this one {days})")));
    }
    if interval == Interval::Hour && days > MAX_HOURLY_DAYS {
        let why = format!("a report by the hour covers at most {MAX_HOURLY_DAYS} days (this one {days}): by the day");
        return Err(Invalid::new("interval", why));
    }
    Ok((from, to))
}

/// What conversations came to in a range: each bucket's sums, the whole range's, and each agent's.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every bucket of the range, in order, with its sums (zero when nothing happened).
    pub series: Vec<(Millis, Bump)>,
    pub totals: Bump,
    /// By member (those with anything to count), by id.
    pub agents: BTreeMap<i64, Bump>,
}

/// Partner `partner_id`'s conversations over `[from, to)` (see [`range`]), by `interval`.
pub async fn conversations(
    db: &Db,
    partner_id: i64,
    (from, to): (Millis, Millis),
    interval: Interval,
) -> Result<Report, sqlx::Error> {
    let step = interval.ms();
    let mut buckets: BTreeMap<Millis, Bump> =
        (0..(to - from) / step).map(|i| (from + i * step, Bump::default())).collect();
    let mut report = Report::default();
    for row in rollups::between(db, partner_id, from, to).await? {
        let bucket = row.hour - (row.hour - from).rem_euclid(step);
        *buckets.entry(bucket).or_default() += row.sums;
        report.totals += row.sums;
        if let Some(agent) = row.agent {
            *report.agents.entry(agent).or_default() += row.sums;
        }
    }
    report.series = buckets.into_iter().collect();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_whole_days_of_at_most_a_year() {
        let day = |d: i64| d * DAY_MS;
        assert_eq!(range(day(10) + 5, day(12) + 7, Interval::Day).unwrap(), (day(10), day(13)));
        assert_eq!(range(day(10), day(10), Interval::Hour).unwrap(), (day(10), day(11)));
        assert_eq!(range(day(12), day(10), Interval::Day).unwrap_err().field, "from");
        assert!(range(day(0), day(365), Interval::Day).is_ok(), "366 days");
        assert_eq!(range(day(0), day(366), Interval::Day).unwrap_err().field, "to");
        assert_eq!(range(day(0), day(31), Interval::Hour).unwrap_err().field, "interval");
    }
}
