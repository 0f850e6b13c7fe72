//! What a partner chooses of its messages' delivery (`/settings/delivery`): how long hub messages wait for a
//! device before WhatsApp, then SMS; whether agents' answers outside WhatsApp's window go on by the other
//! channels; how long a provider's outage is waited out; `message.attempt` events; what a full daily limit
//! does; and the quiet window for people who set none. The worker reads them with each message.

use super::DEFAULT_PROVIDER_RETRY_S;
use crate::messages::compose::fallback_window;
use crate::preferences::{Window, quiet_window};
use crate::store::{Db, partners, preferences};
use crate::validate::{Invalid, KeepError};

/// The longest a partner's messages may wait out a provider's outage: a day.
pub const MAX_PROVIDER_RETRY_S: i64 = 86_400;

/// A partner's delivery settings, with the host's defaults where it chose none.
pub struct Settings {
    /// Seconds a hub message waits for a device; `None`: the hub only.
    pub hub_fallback_after_s: Option<i64>,
    /// The partner has not chosen a wait: the host's default applies.
    pub default: bool,
    pub whatsapp_window_fallback: bool,
    pub provider_retry_s: i64,
    pub attempt_events: bool,
    pub over_limit: String,
    /// The default quiet window and its time zone (UTC when none was given).
    pub quiet_hours: Option<(Window, String)>,
}

/// What a partner sets (each absent: its default).
pub struct Update<'a> {
    /// Absent: the host's default; `Some(None)`: the hub only.
    pub hub_fallback_after_s: Option<Option<i64>>,
    pub whatsapp_window_fallback: Option<bool>,
    pub provider_retry_s: Option<i64>,
    pub attempt_events: Option<bool>,
    pub over_limit: Option<&'a str>,
    /// `start`, `end` and time zone.
    pub quiet_hours: Option<(&'a str, &'a str, &'a str)>,
}

/// Partner `partner_id`'s settings; `host_fallback_after_s`: the host's wait for partners that chose none.
pub async fn read(db: &Db, partner_id: i64, host_fallback_after_s: i64) -> Result<Settings, sqlx::Error> {
    let stored = partners::hub_fallback(db, partner_id).await?;
    let seconds = stored.unwrap_or(host_fallback_after_s);
    Ok(Settings {
        hub_fallback_after_s: (seconds >= 0).then_some(seconds),
        default: stored.is_none(),
        whatsapp_window_fallback: partners::whatsapp_window_fallback(db, partner_id).await?,
        provider_retry_s: partners::provider_retry(db, partner_id).await?.unwrap_or(DEFAULT_PROVIDER_RETRY_S),
        attempt_events: partners::attempt_events(db, partner_id).await?,
        over_limit: partners::over_limit(db, partner_id).await?,
        quiet_hours: preferences::partner_default(db, partner_id)
            .await?
            .map(|(w, zone)| (w, zone.unwrap_or_else(|| "UTC".into()))),
    })
}

/// Sets partner `partner_id`'s settings, checked: a wait of 0 to 604800 seconds, an outage waited out 0 to
/// [`MAX_PROVIDER_RETRY_S`] seconds, `over_limit` `wait` or `sms`, a quiet window in an IANA time zone.
pub async fn set(db: &Db, partner_id: i64, update: Update<'_>) -> Result<(), KeepError> {
    let seconds = fallback_window(update.hub_fallback_after_s).map_err(|e| e.renamed("hub_fallback_after_s"))?;
    let retry = update.provider_retry_s;
    if retry.is_some_and(|s| !(0..=MAX_PROVIDER_RETRY_S).contains(&s)) {
        return Err(Invalid::new("provider_retry_s", "provider_retry_s is 0 to 86400 seconds").into());
    }
    let over_limit = update.over_limit.unwrap_or("wait");
    if !matches!(over_limit, "wait" | "sms") {
        return Err(Invalid::new("over_limit", "over_limit is wait or sms").into());
    }
    let quiet = match update.quiet_hours {
        None => None,
        Some((start, end, zone)) => {
            let window = quiet_window(start, end)?;
            let zone = crate::preferences::time_zone("quiet_hours.time_zone", Some(zone))?
                .ok_or_else(|| Invalid::new("quiet_hours.time_zone", "\"\" is not a time zone of the IANA database"))?;
            Some((window, zone))
        }
    };
    let settings = partners::DeliverySettings {
        hub_fallback_after_s: seconds,
        whatsapp_window_fallback: update.whatsapp_window_fallback.unwrap_or(false),
        provider_retry_s: retry,
        attempt_events: update.attempt_events.unwrap_or(false),
        over_limit,
        quiet,
    };
    partners::set_delivery_settings(db, partner_id, &settings).await?;
    Ok(())
}
