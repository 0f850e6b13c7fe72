//! A partner's business hours (`/api/v1/settings/business-hours`, docs/api.md "Business hours and SLAs"):
//! the hours each weekday its team answers, in its own time zone (the IANA database, through `jiff`), and
//! the holidays it is closed. Here are the rules, pure: whether it is open at a time, when it opens next
//! and last closed (an automatic reply outside hours goes once per closed period), and time counted in
//! business hours only (the SLAs' targets).

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use crate::clock::Millis;

/// The weekdays as the settings name them, Monday first.
pub const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// The most opening intervals a day has.
pub const INTERVALS_A_DAY: usize = 6;
/// The most holidays kept.
pub const MAX_HOLIDAYS: usize = 100;
/// How far the rules look for an opening or a closing (a year and a little: the longest run of holidays).
const HORIZON_DAYS: i32 = 400;

/// A partner's business hours as kept: its time zone, each weekday's opening intervals in minutes after
/// midnight (`[start, end)`, in order, not overlapping; `end` up to 1440), and its holidays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hours {
    pub time_zone: String,
    /// Monday first.
    pub days: [Vec<(i64, i64)>; 7],
    /// `YYYY-MM-DD`, closed all day.
    pub holidays: Vec<String>,
}

/// Why a field of business hours is refused: the field (dotted, as the API names it) and why.
pub type Refusal = (String, String);

/// `HH:MM` (24-hour, `24:00` as an end) as minutes after midnight (`preferences::minutes`, and the day's end).
pub fn minutes(text: &str) -> Option<i64> {
    if text == "24:00" { Some(1440) } else { crate::preferences::minutes(text) }
}

/// `HH:MM` of a minute of the day (`24:00` for the day's end).
pub fn format(minute: i64) -> String {
    crate::preferences::Window::format(minute)
}

/// The weekdays' names, Monday first.
const DAY_NAMES: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// The index of `date`'s weekday, Monday first (of [`DAYS`] and [`DAY_NAMES`]).
fn weekday(date: Date) -> usize {
    date.weekday().to_monday_zero_offset() as usize
}

impl Hours {
    /// Business hours from what the API took: a known time zone, each day's `(start, end)` texts
    /// (`HH:MM`, start before end, in any order but not overlapping), and holidays (`YYYY-MM-DD`, once each).
    pub fn parse(time_zone: &str, days: &[Vec<(String, String)>; 7], holidays: &[String]) -> Result<Hours, Refusal> {
        if !crate::preferences::known_time_zone(time_zone) {
            return Err(("time_zone".into(), format!("{time_zone:?} is not a time zone of the IANA database")));
        }
        let mut parsed: [Vec<(i64, i64)>; 7] = Default::default();
        for (d, intervals) in days.iter().enumerate() {
            let day = DAYS[d];
            if intervals.len() > INTERVALS_A_DAY {
                return Err((format!("hours.{day}"), format!("at most {INTERVALS_A_DAY} intervals a day")));
            }
            for (i, (start, end)) in intervals.iter().enumerate() {
                let at = |field: &str| format!("hours.{day}[{i}].{field}");
                let s = minutes(start)
                    .filter(|m| *m < 1440)
                    .ok_or_else(|| (at("start"), format!("{start:?} is not a time HH:MM")))?;
                let e = minutes(end)
                    .ok_or_else(|| (at("end"), format!("{end:?} is not a time HH:MM (24:00 ends the day)")))?;
                if e <= s {
                    return Err((at("end"), "an interval ends after it starts, on the same day".into()));
                }
                parsed[d].push((s, e));
            }
            let mut sorted = parsed[d].clone();
            sorted.sort();
            if let Some(w) = sorted.windows(2).find(|w| w[1].0 < w[0].1) {
                let i = parsed[d].iter().position(|x| *x == w[1]).unwrap_or(0);
                let why =
                    format!("{}–{} overlaps {}–{}", format(w[1].0), format(w[1].1), format(w[0].0), format(w[0].1));
                return Err((format!("hours.{day}[{i}]"), why));
            }
            parsed[d] = sorted;
        }
        if holidays.len() > MAX_HOLIDAYS {
            return Err(("holidays".into(), format!("at most {MAX_HOLIDAYS} holidays")));
        }
        let mut kept: Vec<String> = Vec::with_capacity(holidays.len());
        for (i, h) in holidays.iter().enumerate() {
            let date: Date =
                h.trim().parse().map_err(|_| (format!("holidays[{i}]"), format!("{h:?} is not a date YYYY-MM-DD")))?;
            let text = date.to_string();
            if kept.contains(&text) {
                return Err((format!("holidays[{i}]"), format!("{text} is listed twice")));
            }
            kept.push(text);
        }
        kept.sort();
        Ok(Hours { time_zone: time_zone.to_string(), days: parsed, holidays: kept })
    }

    fn zone(&self) -> TimeZone {
        TimeZone::get(&self.time_zone).unwrap_or(TimeZone::UTC)
    }

    /// The opening intervals of local `date` as instants (none on a holiday).
    fn intervals_of(&self, zone: &TimeZone, date: Date) -> Vec<(Millis, Millis)> {
        if self.holidays.binary_search(&date.to_string()).is_ok() {
            return Vec::new();
        }
        let day = weekday(date);
        let at = |minute: i64| -> Option<Millis> {
            let (d, minute) = if minute >= 1440 { (date.tomorrow().ok()?, minute - 1440) } else { (date, minute) };
            let local = d.at((minute / 60) as i8, (minute % 60) as i8, 0, 0);
            Some(local.to_zoned_datetime(zone.clone()).ok()?.timestamp().as_millisecond())
        };
        self.days[day].iter().filter_map(|(s, e)| Some((at(*s)?, at(*e)?))).filter(|(s, e)| s < e).collect()
    }

    /// The local date of `at`.
    fn date_of(zone: &TimeZone, at: Millis) -> Option<Date> {
        Some(Timestamp::from_millisecond(at).ok()?.to_zoned_datetime(zone.clone()).date())
    }

    /// The opening intervals from the local day of `from` on, in order, for [`HORIZON_DAYS`].
    fn forward(&self, from: Millis) -> impl Iterator<Item = (Millis, Millis)> + '_ {
        let zone = self.zone();
        let mut day = Self::date_of(&zone, from);
        (0..HORIZON_DAYS).flat_map(move |_| {
            let Some(d) = day else { return Vec::new() };
            day = d.tomorrow().ok();
            self.intervals_of(&zone, d)
        })
    }

    /// The opening intervals from the local day of `from` back, latest first, for [`HORIZON_DAYS`].
    fn backward(&self, from: Millis) -> impl Iterator<Item = (Millis, Millis)> + '_ {
        let zone = self.zone();
        let mut day = Self::date_of(&zone, from);
        (0..HORIZON_DAYS).flat_map(move |_| {
            let Some(d) = day else { return Vec::new() };
            day = d.yesterday().ok();
            let mut intervals = self.intervals_of(&zone, d);
            intervals.reverse();
            intervals
        })
    }

    /// Whether the team is in at `at`.
    pub fn open_at(&self, at: Millis) -> bool {
        self.forward(at).take_while(|(s, _)| *s <= at).any(|(s, e)| s <= at && at < e)
    }

    /// When the team is in next from `at` (`at` itself when it is in); `None` when it never opens within the
    /// horizon.
    pub fn next_open(&self, at: Millis) -> Option<Millis> {
        self.forward(at).find(|(_, e)| *e > at).map(|(s, _)| s.max(at))
    }

    /// When the team last went out, at or before `at` (the start of the closed period `at` is in, when it is
    /// out); `None` when it never was within the horizon.
    pub fn last_close(&self, at: Millis) -> Option<Millis> {
        self.backward(at).map(|(_, e)| e).find(|e| *e <= at)
    }

    /// How much of `[from, to)` the team is in, in milliseconds.
    pub fn business_ms(&self, from: Millis, to: Millis) -> Millis {
        if to <= from {
            return 0;
        }
        self.forward(from).take_while(|(s, _)| *s < to).map(|(s, e)| (e.min(to) - s.max(from)).max(0)).sum()
    }

    /// The instant by which `ms` of business time have gone by from `from` (the SLA's due time); `None`
    /// beyond the horizon.
    pub fn add_business_ms(&self, from: Millis, ms: Millis) -> Option<Millis> {
        let mut left = ms;
        for (s, e) in self.forward(from).filter(|(_, e)| *e > from) {
            let s = s.max(from);
            if e - s >= left {
                return Some(s + left);
            }
            left -= e - s;
        }
        None
    }
}

/// When the team is back, as the automatic reply says it: the weekday, the time and the zone ("Monday at
/// 09:00 (Europe/Berlin)").
pub fn back_at(hours: &Hours, at: Millis) -> Option<String> {
    let zone = hours.zone();
    let local = Timestamp::from_millisecond(at).ok()?.to_zoned_datetime(zone);
    let day = DAY_NAMES[weekday(local.date())];
    Some(format!("{day} {} at {:02}:{:02} ({})", local.date(), local.hour(), local.minute(), hours.time_zone))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> Millis {
        text.parse::<Timestamp>().unwrap().as_millisecond()
    }

    fn nine_to_five(holidays: &[&str]) -> Hours {
        let weekday = vec![("09:00".to_string(), "12:00".to_string()), ("13:00".into(), "17:00".into())];
        let mut days: [Vec<(String, String)>; 7] = Default::default();
        for d in days.iter_mut().take(5) {
            *d = weekday.clone();
        }
        let holidays: Vec<String> = holidays.iter().map(|h| h.to_string()).collect();
        Hours::parse("Europe/Berlin", &days, &holidays).unwrap()
    }

    #[test]
    fn open_next_and_last_in_the_partners_zone_with_holidays() {
        // 2026-12-07 is a Monday; Berlin is UTC+1 in December.
        let h = nine_to_five(&["2026-12-08"]);
        assert!(h.open_at(ms("2026-12-07T08:30:00Z")), "09:30 in Berlin");
        assert!(!h.open_at(ms("2026-12-07T11:30:00Z")), "the lunch break");
        assert!(!h.open_at(ms("2026-12-07T07:59:00Z")), "08:59 in Berlin");
        // Monday evening: Tuesday is a holiday, so Wednesday at 09:00.
        let evening = ms("2026-12-07T18:00:00Z");
        assert_eq!(h.next_open(evening), Some(ms("2026-12-09T08:00:00Z")));
        assert_eq!(h.last_close(evening), Some(ms("2026-12-07T16:00:00Z")));
        assert_eq!(back_at(&h, ms("2026-12-09T08:00:00Z")).unwrap(), "Wednesday 2026-12-09 at 09:00 (Europe/Berlin)");
        // Saturday: Monday; the last close was Friday's.
        let saturday = ms("2026-12-12T10:00:00Z");
        assert_eq!(h.next_open(saturday), Some(ms("2026-12-14T08:00:00Z")));
        assert_eq!(h.last_close(saturday), Some(ms("2026-12-11T16:00:00Z")));
        // Open now: now.
        assert_eq!(h.next_open(ms("2026-12-07T09:00:00Z")), Some(ms("2026-12-07T09:00:00Z")));
    }

    #[test]
    fn business_time_counts_only_hours_in() {
        let h = nine_to_five(&[]);
        // Friday 16:00 Berlin + 2 business hours: Friday's last hour, then Monday 09:00–10:00.
        let friday = ms("2026-12-11T15:00:00Z");
        let due = h.add_business_ms(friday, 2 * 3_600_000).unwrap();
        assert_eq!(due, ms("2026-12-14T09:00:00Z"));
        assert_eq!(h.business_ms(friday, due), 2 * 3_600_000);
        // Across the lunch break: 11:30–12:00 and 13:00–13:30 in Berlin.
        assert_eq!(h.business_ms(ms("2026-12-07T10:30:00Z"), ms("2026-12-07T12:30:00Z")), 60 * 60_000);
        assert_eq!(h.business_ms(ms("2026-12-07T12:00:00Z"), ms("2026-12-07T11:00:00Z")), 0);
    }

    #[test]
    fn clocks_change_in_the_zone_not_in_utc() {
        // Berlin moves to summer time on 2027-03-28: 09:00 is 08:00 UTC before, 07:00 UTC after.
        let h = nine_to_five(&[]);
        assert_eq!(h.next_open(ms("2027-03-26T18:00:00Z")), Some(ms("2027-03-29T07:00:00Z")));
    }

    #[test]
    fn bad_hours_name_their_field() {
        let mut days: [Vec<(String, String)>; 7] = Default::default();
        days[1] = vec![("09:00".into(), "13:00".into()), ("12:00".into(), "17:00".into())];
        assert_eq!(Hours::parse("UTC", &days, &[]).unwrap_err().0, "hours.tue[1]");
        days[1] = vec![("9am".into(), "13:00".into())];
        assert_eq!(Hours::parse("UTC", &days, &[]).unwrap_err().0, "hours.tue[0].start");
        days[1] = vec![("13:00".into(), "09:00".into())];
        assert_eq!(Hours::parse("UTC", &days, &[]).unwrap_err().0, "hours.tue[0].end");
        days[1] = vec![("09:00".into(), "24:00".into())];
        assert!(Hours::parse("UTC", &days, &[]).is_ok(), "24:00 ends the day");
        assert_eq!(Hours::parse("Mars/Olympus", &days, &[]).unwrap_err().0, "time_zone");
        assert_eq!(Hours::parse("UTC", &days, &["2026-13-01".into()]).unwrap_err().0, "holidays[0]");
        let twice = ["2026-12-25".to_string(), "2026-12-25".to_string()];
        assert_eq!(Hours::parse("UTC", &days, &twice).unwrap_err().0, "holidays[1]");
    }
}
