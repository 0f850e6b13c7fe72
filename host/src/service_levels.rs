//! What a partner promises the people who write to it: its business hours (with the automatic reply
//! outside them), the SLA targets its conversations run under, and whether people are asked to rate a
//! conversation when it is closed. Each is checked here and kept in `store::service_levels` and
//! `store::ratings`; the SLA worker is `crate::slas`.

use crate::business_hours::{DAYS, Hours};
pub use crate::store::ratings::settings as ratings;
use crate::store::service_levels as store;
pub use crate::store::service_levels::{Settings, settings};
use crate::store::{Db, ratings};
use crate::validate::{Invalid, KeepError};

/// Business hours as given: on or off, an IANA time zone (required when on), each day's intervals (`start`,
/// `end`: `HH:MM`, either absent refused), holidays (`YYYY-MM-DD`), and the automatic reply (1 to 1,000
/// characters; `None`: none).
pub struct HoursInput<'a> {
    pub enabled: bool,
    pub time_zone: Option<&'a str>,
    pub days: [Vec<(Option<String>, Option<String>)>; 7],
    pub holidays: &'a [String],
    pub away_message: Option<&'a str>,
}

/// Sets partner `partner_id`'s business hours. The hours are checked whether they are kept or not (off,
/// they are forgotten).
pub async fn set_hours(db: &Db, partner_id: i64, input: HoursInput<'_>) -> Result<(), KeepError> {
    let away = match input.away_message.map(str::trim) {
        None => None,
        Some(text) if text.is_empty() || text.chars().count() > 1000 => {
            return Err(Invalid::new("away_message", "away_message is 1 to 1,000 characters").into());
        }
        Some(text) => Some(text),
    };
    let zone = match input.time_zone.map(str::trim).unwrap_or("") {
        "" if input.enabled => {
            return Err(Invalid::new("time_zone", "time_zone is required with business hours").into());
        }
        zone if input.enabled => zone,
        _ => "UTC",
    };
    let mut days: [Vec<(String, String)>; 7] = Default::default();
    for (d, intervals) in input.days.iter().enumerate() {
        for (i, interval) in intervals.iter().enumerate() {
            let (Some(start), Some(end)) = interval else {
                let field = format!("hours.{}[{i}]", DAYS[d]);
                return Err(Invalid::new(field, "an interval has a start and an end").into());
            };
            days[d].push((start.clone(), end.clone()));
        }
    }
    let hours = Hours::parse(zone, &days, input.holidays).map_err(|(field, why)| Invalid::new(field, why))?;
    store::set_hours(db, partner_id, input.enabled.then_some(&hours), away).await?;
    Ok(())
}

/// The longest rating question, in characters.
pub const QUESTION_CHARS: usize = 500;

/// Sets whether partner `partner_id` asks for ratings, and its question (1 to [`QUESTION_CHARS`]
/// characters, trimmed; `None`: the default); answers the question kept.
pub async fn set_ratings(
    db: &Db,
    partner_id: i64,
    enabled: bool,
    question: Option<&str>,
) -> Result<Option<String>, KeepError> {
    let question = match question.map(str::trim) {
        None => None,
        Some(q) if q.is_empty() || q.chars().count() > QUESTION_CHARS => {
            return Err(Invalid::new("question", "question is 1 to 500 characters").into());
        }
        Some(q) => Some(q.to_string()),
    };
    ratings::set_settings(db, partner_id, enabled, question.as_deref()).await?;
    Ok(question)
}

/// The longest SLA target: 30 days, in seconds.
pub const MAX_TARGET_S: i64 = 2_592_000;

/// Sets partner `partner_id`'s SLA targets, in seconds of business time (1 to [`MAX_TARGET_S`]; `None`:
/// none): they apply to the SLAs that start from now on.
pub async fn set_targets(db: &Db, partner_id: i64, first: Option<i64>, next: Option<i64>) -> Result<(), KeepError> {
    for (field, value) in [("first_response_s", first), ("next_response_s", next)] {
        if value.is_some_and(|v| !(1..=MAX_TARGET_S).contains(&v)) {
            return Err(Invalid::new(field, format!("{field} is 1 to 2,592,000 seconds, or null for none")).into());
        }
    }
    store::set_targets(db, partner_id, first, next).await?;
    Ok(())
}
