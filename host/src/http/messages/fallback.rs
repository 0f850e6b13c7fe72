//! `/settings/delivery`: how long the partner's hub messages wait for one of the user's devices before they
//! go on to WhatsApp, then SMS; and whether agents' free-form answers outside WhatsApp's 24-hour window go
//! on by the other channels.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::delivery::settings;
use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::http::{ApiJson, E422};
use crate::preferences::Window;

/// The partner's delivery settings.
#[derive(Serialize, ToSchema)]
#[schema(as = DeliverySettings)]
pub(super) struct DeliverySettings {
    /// Seconds a hub message waits for one of the user's devices (a live stream, a fetch, a push
    /// acknowledged) before it goes on to WhatsApp, then SMS; `null`: the hub only. A message may set its
    /// own (`fallback_after_s`).
    #[schema(minimum = 0, maximum = 604800)]
    hub_fallback_after_s: Option<i64>,
    /// True when the partner has not chosen: the host's default applies (`HUBBUB_HUB_FALLBACK_AFTER_S`).
    default: bool,
    /// An agent's free-form answer to a user who wrote from WhatsApp more than 24 hours ago (WhatsApp takes
    /// only approved templates then): `false` refuses it with 409 naming the window; `true` sends it on by
    /// the other channels, the hub (when the user has the app) then SMS.
    whatsapp_window_fallback: bool,
    /// Seconds a message waits out its provider's outage (5xx, timeouts, no connection), trying again
    /// with backoff, before its chain moves on to the next channel. A provider's throttle is never an
    /// outage: throttled messages wait their turn whatever this says.
    #[schema(minimum = 0, maximum = 86400)]
    provider_retry_s: i64,
    /// A `message.attempt` webhook event for every WhatsApp and SMS try (sent, failed, skipped, waiting),
    /// besides the `message.status` events of the message's state.
    attempt_events: bool,
    /// When the WhatsApp business account reached Meta's daily limit of people it may reach first (a
    /// template to someone whose window is closed): `wait` for room (the attempt waits, error
    /// `over_daily_limit`, until the oldest of the day's people leaves the rolling 24 hours), or go by `sms`.
    #[schema(value_type = String, pattern = "^(wait|sms)$")]
    over_limit: String,
    /// The quiet window for people who set none in the app: the partner's notifications and marketing wait
    /// until it ends (codes and chat pass), in the person's time zone when they set one, else in this
    /// window's. `null`: none.
    quiet_hours: Option<DefaultQuietHours>,
}

/// A partner's default quiet window: `HH:MM` to `HH:MM` (across midnight when the end is earlier) in an IANA
/// time zone.
#[derive(Serialize, Deserialize, ToSchema)]
pub(super) struct DefaultQuietHours {
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$", example = "21:00")]
    start: String,
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$", example = "08:00")]
    end: String,
    /// For people who set no time zone of their own.
    #[schema(example = "Europe/Berlin")]
    time_zone: String,
}

/// A new fallback window.
#[derive(Deserialize, ToSchema)]
#[schema(as = DeliverySettingsUpdate)]
pub(super) struct Update {
    /// 0 to 604800 seconds, or `null` for the hub only. Absent: back to the host's default.
    #[serde(default, deserialize_with = "crate::messages::compose::present")]
    #[schema(value_type = Option<i64>, nullable, minimum = 0, maximum = 604800)]
    hub_fallback_after_s: Option<Option<i64>>,
    /// See `DeliverySettings`; absent: `false`.
    whatsapp_window_fallback: Option<bool>,
    /// 0 to 86400 seconds (see `DeliverySettings`); absent: 60.
    #[schema(minimum = 0, maximum = 86400)]
    provider_retry_s: Option<i64>,
    /// See `DeliverySettings`; absent: `false`.
    attempt_events: Option<bool>,
    /// `wait` or `sms` (see `DeliverySettings`); absent: `wait`.
    #[schema(pattern = "^(wait|sms)$")]
    over_limit: Option<String>,
    /// See `DeliverySettings`; absent or `null`: none.
    quiet_hours: Option<DefaultQuietHours>,
}

async fn answer(state: &AppState, partner_id: i64) -> ApiResult<Json<DeliverySettings>> {
    let s = settings::read(&state.db, partner_id, state.config.hub_fallback_after_s as i64).await?;
    Ok(Json(DeliverySettings {
        hub_fallback_after_s: s.hub_fallback_after_s,
        default: s.default,
        whatsapp_window_fallback: s.whatsapp_window_fallback,
        provider_retry_s: s.provider_retry_s,
        attempt_events: s.attempt_events,
        over_limit: s.over_limit,
        quiet_hours: s.quiet_hours.map(|(w, time_zone)| DefaultQuietHours {
            start: Window::format(w.start),
            end: Window::format(w.end),
            time_zone,
        }),
    }))
}

/// My delivery settings.
#[utoipa::path(
    get,
    path = "/settings/delivery",
    tag = "messages",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The settings", body = DeliverySettings))
)]
pub(super) async fn get_delivery_settings(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<DeliverySettings>> {
    answer(&state, partner.id).await
}

/// Set how long hub messages wait for a device before WhatsApp, then SMS, and whether agents' answers
/// outside WhatsApp's window go on by the hub and SMS (each field absent: its default).
#[utoipa::path(
    put,
    path = "/settings/delivery",
    tag = "messages",
    security(("partnerKey" = [])),
    request_body = Update,
    responses((status = 200, description = "The settings", body = DeliverySettings), (status = 422, response = E422))
)]
pub(super) async fn set_delivery_settings(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<Update>,
) -> ApiResult<Json<DeliverySettings>> {
    let update = settings::Update {
        hub_fallback_after_s: req.hub_fallback_after_s,
        whatsapp_window_fallback: req.whatsapp_window_fallback,
        provider_retry_s: req.provider_retry_s,
        attempt_events: req.attempt_events,
        over_limit: req.over_limit.as_deref(),
        quiet_hours: req.quiet_hours.as_ref().map(|q| (q.start.as_str(), q.end.as_str(), q.time_zone.as_str())),
    };
    settings::set(&state.db, partner.id, update).await?;
    answer(&state, partner.id).await
}
