//! A partner's figures, read from the rollups kept as things happen (`store::rollups`), never by scanning
//! its conversations or messages: each hour's or day's counts and averages, each agent's over the whole
//! range, and its messages' by channel (with what the paid ones cost), template and broadcast.

use std::collections::BTreeMap;

use crate::clock::Millis;
use crate::names::Channel;
pub use crate::store::rollups::DAY_MS;
use crate::store::rollups::HOUR_MS;
pub use crate::store::rollups::conversations::Bump;
use crate::store::rollups::conversations::{self as rollups};
use crate::store::rollups::messages as message_rollups;
pub use crate::store::rollups::messages::{Counts, Filter, Prices};
use crate::store::{Db, members};
use crate::validate::Invalid;

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
    /// The members' display names, by id (a member without one, or removed since, is missing).
    pub names: std::collections::HashMap<i64, String>,
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
    for row in rollups::groups(db, partner_id, from, to, step).await? {
        *buckets.entry(row.bucket).or_default() += row.sums;
        report.totals += row.sums;
        if let Some(agent) = row.agent {
            *report.agents.entry(agent).or_default() += row.sums;
        }
    }
    report.series = buckets.into_iter().collect();
    report.names = members::list(db, partner_id).await?.into_iter().filter_map(|m| Some((m.id, m.name?))).collect();
    Ok(report)
}

/// What the partner pays a message on each paid channel.
pub async fn prices(db: &Db, partner_id: i64) -> Result<Prices, sqlx::Error> {
    message_rollups::prices(db, partner_id).await
}

/// Keeps what the partner pays a message on each paid channel (checked by the caller).
pub async fn set_prices(db: &Db, partner_id: i64, prices: &Prices) -> Result<(), sqlx::Error> {
    message_rollups::set_prices(db, partner_id, prices).await
}

/// What a partner's messages came to in a range: each bucket's counts, the whole range's, and the range's
/// by channel, template and broadcast, with the partner's prices to cost the paid tries.
#[derive(Debug, Clone, Default)]
pub struct MessageReport {
    /// Every bucket of the range, in order: its counts, and its paid tries' cost (`None`: no price set for a
    /// channel that had any).
    pub series: Vec<(Millis, Counts, Option<i64>)>,
    pub totals: Counts,
    /// The whole range's cost, in millionths of the partner's currency.
    pub cost: Option<i64>,
    /// By channel the messages were sent on (those with anything counted), with their cost.
    pub channels: Vec<(Channel, Counts, Option<i64>)>,
    /// By template (messages sent with one), by code.
    pub templates: Vec<(String, Counts)>,
    /// By broadcast (messages of one), by id.
    pub broadcasts: Vec<(i64, Counts)>,
    pub prices: Prices,
}

/// What `paid` tries on `channel` cost at `prices`, in millionths (`None`: the channel has no price and had
/// paid tries; the hub costs nothing).
pub fn cost(prices: &Prices, channel: Option<Channel>, paid: i64) -> Option<i64> {
    let price = match channel {
        Some(Channel::Whatsapp) => prices.whatsapp_micros,
        Some(Channel::Sms) => prices.sms_micros,
        _ => Some(0),
    };
    if paid == 0 { Some(0) } else { price.map(|p| p * paid) }
}

/// Adds up costs, of which any unknown makes the sum unknown.
fn add_cost(sum: Option<i64>, more: Option<i64>) -> Option<i64> {
    Some(sum? + more?)
}

/// Partner `partner_id`'s messages over `[from, to)` (see [`range`]), by `interval`, of those `filter` lets
/// through.
pub async fn messages(
    db: &Db,
    partner_id: i64,
    (from, to): (Millis, Millis),
    interval: Interval,
    filter: &Filter,
) -> Result<MessageReport, sqlx::Error> {
    let step = interval.ms();
    let prices = message_rollups::prices(db, partner_id).await?;
    let mut buckets: BTreeMap<Millis, (Counts, Option<i64>)> =
        (0..(to - from) / step).map(|i| (from + i * step, (Counts::default(), Some(0)))).collect();
    let mut channels: BTreeMap<&'static str, (Channel, Counts, Option<i64>)> = BTreeMap::new();
    let mut templates: BTreeMap<String, Counts> = BTreeMap::new();
    let mut broadcasts: BTreeMap<i64, Counts> = BTreeMap::new();
    let mut report = MessageReport { cost: Some(0), ..MessageReport::default() };
    for g in message_rollups::groups(db, partner_id, (from, to), step, filter).await? {
        let (counts, cost) = (g.counts, cost(&prices, g.channel, g.counts.paid));
        let bucket = buckets.entry(g.bucket).or_insert((Counts::default(), Some(0)));
        bucket.0 += counts;
        bucket.1 = add_cost(bucket.1, cost);
        report.totals += counts;
        report.cost = add_cost(report.cost, cost);
        if let Some(channel) = g.channel {
            let by = channels.entry(channel.as_str()).or_insert((channel, Counts::default(), Some(0)));
            by.1 += counts;
            by.2 = add_cost(by.2, cost);
        }
        if !g.template.is_empty() {
            *templates.entry(g.template).or_default() += counts;
        }
        if g.broadcast_id != 0 {
            *broadcasts.entry(g.broadcast_id).or_default() += counts;
        }
    }
    report.series = buckets.into_iter().map(|(at, (counts, cost))| (at, counts, cost)).collect();
    report.channels = channels.into_values().collect();
    report.templates = templates.into_iter().collect();
    report.broadcasts = broadcasts.into_iter().collect();
    report.prices = prices;
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
