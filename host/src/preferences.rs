//! People's preferences: what reaches a person and when, as they set it in the app
//! (`/api/v1/me/preferences`, docs/preferences.md) — per partner muted, blocked or no marketing; channels
//! they refuse; quiet hours in their own time zone (a partner's default window for people who set none).
//! Here are the rules; delivery, sends, bots and Web Push ask them of what they read with each message.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::clock::Millis;
use crate::names::Channel;
use crate::validate::Invalid;

/// Why a message failed without a try: the person blocked its partner.
pub const BLOCKED_BY_USER: &str = "blocked_by_user";

/// Why a marketing message failed without a try: the person turned marketing off for its partner.
pub const MARKETING_REFUSED: &str = "marketing_refused";

/// Why a WhatsApp or SMS try was not made: the person refuses that channel.
pub const CHANNEL_REFUSED: &str = "channel_refused_by_user";

/// Why a WhatsApp or SMS try was not made: the person muted the partner (its messages stay in the hub).
pub const MUTED_BY_USER: &str = "muted_by_user";

/// Why an attempt waits: the person's quiet hours, until they end.
pub const QUIET_HOURS: &str = "quiet_hours";

/// A daily window of local time, in minutes after midnight: from `start` up to `end`, across midnight when
/// `end` is the smaller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: i64,
    pub end: i64,
}

impl Window {
    /// The window from `start` to `end`, each `HH:MM` (24-hour); they differ. The error names which is wrong.
    pub fn parse(start: &str, end: &str) -> Result<Window, (&'static str, String)> {
        let start_min = minutes(start).ok_or(("start", format!("start {start:?} is not a time HH:MM")))?;
        let end_min = minutes(end).ok_or(("end", format!("end {end:?} is not a time HH:MM")))?;
        if start_min == end_min {
            return Err(("end", "quiet hours end at another time than they start".to_string()));
        }
        Ok(Window { start: start_min, end: end_min })
    }

    /// The window as stored (minutes), when both ends are there and valid.
    pub fn stored(start: Option<i64>, end: Option<i64>) -> Option<Window> {
        let valid = |m: i64| (0..24 * 60).contains(&m);
        match (start, end) {
            (Some(start), Some(end)) if valid(start) && valid(end) && start != end => Some(Window { start, end }),
            _ => None,
        }
    }

    /// `HH:MM` of a minute of the day.
    pub fn format(minute: i64) -> String {
        format!("{:02}:{:02}", minute / 60, minute % 60)
    }

    fn contains(&self, minute: i64) -> bool {
        if self.start < self.end {
            self.start <= minute && minute < self.end
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

/// `HH:MM` (24-hour) as minutes after midnight.
pub fn minutes(text: &str) -> Option<i64> {
    let (h, m) = text.split_once(':')?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

/// Whether `name` is a time zone of the IANA database (`Europe/Berlin`, `UTC`).
pub fn known_time_zone(name: &str) -> bool {
    !name.is_empty() && TimeZone::get(name).is_ok()
}

/// A quiet window from `start` to `end` as given in `quiet_hours` (a person's, or a partner's default):
/// refused on `quiet_hours.start` or `quiet_hours.end` when one is not `HH:MM` or they are the same.
pub fn quiet_window(start: &str, end: &str) -> Result<Window, Invalid> {
    Window::parse(start, end).map_err(|(field, message)| Invalid::new(format!("quiet_hours.{field}"), message))
}

/// A time zone as given in `field`: trimmed, empty or absent for none, else one of the IANA database.
pub fn time_zone(field: &str, raw: Option<&str>) -> Result<Option<String>, Invalid> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(zone) if known_time_zone(zone) => Ok(Some(zone.to_string())),
        Some(zone) => Err(Invalid::new(field, format!("{zone:?} is not a time zone of the IANA database"))),
    }
}

/// When the quiet `window` in force at `now` in the time zone `tz` ends (`None`: not quiet now). An unknown
/// zone counts as UTC. The end is the window's end on the local calendar (its next occurrence), so a day
/// that changes clocks ends it at that local time all the same.
pub fn quiet_until(now: Millis, tz: &str, window: Window) -> Option<Millis> {
    let zone = TimeZone::get(tz).unwrap_or(TimeZone::UTC);
    let local = Timestamp::from_millisecond(now).ok()?.to_zoned_datetime(zone.clone());
    let minute = i64::from(local.hour()) * 60 + i64::from(local.minute());
    if !window.contains(minute) {
        return None;
    }
    let day = if window.end > minute { local.date() } else { local.date().tomorrow().ok()? };
    let end = day.at((window.end / 60) as i8, (window.end % 60) as i8, 0, 0).to_zoned_datetime(zone).ok()?;
    // A clock change could put the end before now: at least a minute from now.
    Some(end.timestamp().as_millisecond().max(now + 60_000))
}

/// What a person chose that a message of one partner's meets, as read with it: the channels they take,
/// that partner muted, blocked or its marketing off, and the quiet window in force (theirs, else the
/// partner's default) with the time zone it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Honoured {
    pub whatsapp: bool,
    pub sms: bool,
    pub muted: bool,
    pub blocked: bool,
    pub marketing: bool,
    pub quiet: Option<(String, Window)>,
}

impl Default for Honoured {
    /// A person who chose nothing: every channel, nothing muted or blocked, marketing on, no quiet hours.
    fn default() -> Self {
        Honoured { whatsapp: true, sms: true, muted: false, blocked: false, marketing: true, quiet: None }
    }
}

impl Honoured {
    /// Why a message (`marketing` or not) of this partner reaches this person by no way at all.
    pub fn refusal(&self, marketing: bool) -> Option<&'static str> {
        match (self.blocked, marketing && !self.marketing) {
            (true, _) => Some(BLOCKED_BY_USER),
            (false, true) => Some(MARKETING_REFUSED),
            _ => None,
        }
    }

    /// Why a message is not tried on `channel` (WhatsApp or SMS): the partner muted, the channel refused.
    pub fn skips(&self, channel: Channel) -> Option<&'static str> {
        match channel {
            Channel::Inapp => None,
            _ if self.muted => Some(MUTED_BY_USER),
            Channel::Whatsapp if !self.whatsapp => Some(CHANNEL_REFUSED),
            Channel::Sms if !self.sms => Some(CHANNEL_REFUSED),
            _ => None,
        }
    }

    /// Until when a message of `priority` (`marketing` or not) keeps quiet at `now`: notifications and
    /// marketing wait out the person's quiet hours; codes and chat (answers in a conversation the person
    /// opened) pass.
    pub fn quiet_until(&self, now: Millis, priority: &str, marketing: bool) -> Option<Millis> {
        let passes = (priority == "otp" || priority == "chat") && !marketing;
        let (tz, window) = self.quiet.as_ref().filter(|_| !passes)?;
        quiet_until(now, tz, *window)
    }
}

/// Whether a message is marketing: a template of category `marketing`, or sent with that category.
pub fn is_marketing(content: &serde_json::Value) -> bool {
    content.get("category").and_then(serde_json::Value::as_str) == Some("marketing")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Millis {
        text.parse::<Timestamp>().expect("a timestamp").as_millisecond()
    }

    #[test]
    fn windows_are_read_as_hh_mm_and_must_differ() {
        assert_eq!(Window::parse("22:00", "07:00"), Ok(Window { start: 1320, end: 420 }));
        assert_eq!(Window::parse("7:00", "08:00").unwrap_err().0, "start");
        assert_eq!(Window::parse("07:00", "24:00").unwrap_err().0, "end");
        assert_eq!(Window::parse("07:00", "07:00").unwrap_err().0, "end");
        assert_eq!(Window::format(1320), "22:00");
        assert!(known_time_zone("Europe/Berlin") && known_time_zone("UTC"));
        assert!(!known_time_zone("Mars/Olympus") && !known_time_zone(""));
    }

    #[test]
    fn quiet_hours_end_at_the_local_time_in_the_persons_zone() {
        let night = Window::parse("22:00", "07:00").unwrap();
        // 23:30 in Berlin (UTC+1 in winter): quiet until 07:00 Berlin the next morning, 06:00 UTC.
        assert_eq!(quiet_until(at("2026-12-07T22:30:00Z"), "Europe/Berlin", night), Some(at("2026-12-08T06:00:00Z")));
        // 02:00 Berlin: the same morning.
        assert_eq!(quiet_until(at("2026-12-08T01:00:00Z"), "Europe/Berlin", night), Some(at("2026-12-08T06:00:00Z")));
        // 12:00 Berlin: not quiet.
        assert_eq!(quiet_until(at("2026-12-08T11:00:00Z"), "Europe/Berlin", night), None);
        // The same instant is 06:00 in New York (UTC-5): quiet there until 07:00, 12:00 UTC.
        assert_eq!(
            quiet_until(at("2026-12-08T11:00:00Z"), "America/New_York", night),
            Some(at("2026-12-08T12:00:00Z"))
        );
        // Summer time: 07:00 Berlin is 05:00 UTC.
        assert_eq!(quiet_until(at("2026-07-01T01:00:00Z"), "Europe/Berlin", night), Some(at("2026-07-01T05:00:00Z")));
        // A window within a day.
        let lunch = Window::parse("12:00", "13:30").unwrap();
        assert_eq!(quiet_until(at("2026-12-08T12:10:00Z"), "UTC", lunch), Some(at("2026-12-08T13:30:00Z")));
        assert_eq!(quiet_until(at("2026-12-08T13:30:00Z"), "UTC", lunch), None);
    }

    #[test]
    fn codes_and_chat_pass_quiet_hours_and_blocks_beat_everything() {
        let quiet = Honoured { quiet: Some(("UTC".into(), Window { start: 0, end: 1439 })), ..Honoured::default() };
        let now = at("2026-12-08T03:00:00Z");
        assert!(quiet.quiet_until(now, "notification", false).is_some());
        assert!(quiet.quiet_until(now, "otp", false).is_none());
        assert!(quiet.quiet_until(now, "chat", false).is_none());
        assert!(quiet.quiet_until(now, "chat", true).is_some(), "marketing never passes");
        let blocked = Honoured { blocked: true, marketing: false, ..Honoured::default() };
        assert_eq!(blocked.refusal(true), Some(BLOCKED_BY_USER));
        let no_marketing = Honoured { marketing: false, ..Honoured::default() };
        assert_eq!(no_marketing.refusal(true), Some(MARKETING_REFUSED));
        assert_eq!(no_marketing.refusal(false), None);
        let muted = Honoured { muted: true, ..Honoured::default() };
        assert_eq!(muted.skips(Channel::Sms), Some(MUTED_BY_USER));
        assert_eq!(muted.skips(Channel::Inapp), None);
        let no_sms = Honoured { sms: false, ..Honoured::default() };
        assert_eq!((no_sms.skips(Channel::Sms), no_sms.skips(Channel::Whatsapp)), (Some(CHANNEL_REFUSED), None));
    }
}
