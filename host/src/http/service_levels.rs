//! `/settings/business-hours` and `/settings/slas`: when the partner's team is in (its time zone, each
//! weekday's hours, its holidays) and what it says outside them (`business_hours`, the automatic reply of
//! `conversations`), and the SLA targets its conversations run under (the breaches: `slas`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::business_hours::{Hours, format};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::http::{ApiJson, E403, E422};
use crate::service_levels;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_business_hours, set_business_hours))
        .routes(routes!(get_slas, set_slas))
        .routes(routes!(get_csat, set_csat))
}

/// An interval of a day the team is in.
#[derive(Serialize, Deserialize, ToSchema, Clone)]
#[schema(as = OpeningInterval)]
struct Interval {
    /// `HH:MM`, 24-hour.
    #[schema(value_type = String, required = true, pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    start: Option<String>,
    /// `HH:MM`, after `start` (`24:00` ends the day).
    #[schema(value_type = String, required = true, pattern = "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")]
    end: Option<String>,
}

/// Each weekday's intervals (a day absent or empty: closed).
#[derive(Serialize, Deserialize, ToSchema, Default, Clone)]
#[serde(deny_unknown_fields)]
#[schema(as = WeekHours)]
struct Week {
    #[serde(default)]
    #[schema(max_items = 6)]
    mon: Vec<Interval>,
    #[serde(default)]
    #[schema(max_items = 6)]
    tue: Vec<Interval>,
    #[serde(default)]
    #[schema(max_items = 6)]
    wed: Vec<Interval>,
    #[serde(default)]
    #[schema(max_items = 6)]
    thu: Vec<Interval>,
    #[serde(default)]
    #[schema(max_items = 6)]
    fri: Vec<Interval>,
    #[serde(default)]
    #[schema(max_items = 6)]
    sat: Vec<Interval>,
    #[serde(default)]
    #[schema(max_items = 6)]
    sun: Vec<Interval>,
}

impl Week {
    fn days(&self) -> [&Vec<Interval>; 7] {
        [&self.mon, &self.tue, &self.wed, &self.thu, &self.fri, &self.sat, &self.sun]
    }

    fn of(hours: &Hours) -> Week {
        let day = |d: usize| {
            hours.days[d]
                .iter()
                .map(|(s, e)| Interval { start: Some(format(*s)), end: Some(format(*e)) })
                .collect::<Vec<_>>()
        };
        Week { mon: day(0), tue: day(1), wed: day(2), thu: day(3), fri: day(4), sat: day(5), sun: day(6) }
    }
}

/// When the partner's team is in, and what people who write outside those hours are told.
#[derive(Serialize, ToSchema)]
#[schema(as = BusinessHours)]
struct BusinessHoursRecord {
    /// `false`: always in (no automatic reply; SLAs count every hour).
    enabled: bool,
    /// An IANA time zone (`Europe/Berlin`).
    time_zone: Option<String>,
    hours: Week,
    /// `YYYY-MM-DD`, closed all day, in order.
    holidays: Vec<String>,
    /// Sent to a person who writes outside business hours, once per conversation per closed period, with
    /// when the team is back; null: nothing is sent.
    away_message: Option<String>,
    /// Whether the team is in now.
    open_now: bool,
    /// When it is in next (now, when it is in; null: never within a year, or always in).
    next_open_at: Option<String>,
}

/// Business hours to keep.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BusinessHoursUpdate)]
struct HoursUpdate {
    /// `false` (or absent): always in; the rest is then ignored and forgotten.
    #[serde(default)]
    enabled: bool,
    /// An IANA time zone; required when enabled.
    #[schema(max_length = 64)]
    time_zone: Option<String>,
    #[serde(default)]
    hours: Week,
    /// At most 100 dates `YYYY-MM-DD`.
    #[serde(default)]
    #[schema(max_items = 100)]
    holidays: Vec<String>,
    /// 1 to 1,000 characters; null: no automatic reply.
    #[schema(min_length = 1, max_length = 1000, pattern = "\\S")]
    away_message: Option<String>,
}

async fn hours_record(state: &AppState, partner_id: i64) -> ApiResult<BusinessHoursRecord> {
    let settings = service_levels::settings(&state.db, partner_id).await?;
    let now = state.now();
    Ok(match &settings.hours {
        Some(h) => BusinessHoursRecord {
            enabled: true,
            time_zone: Some(h.time_zone.clone()),
            hours: Week::of(h),
            holidays: h.holidays.clone(),
            away_message: settings.away_message.clone(),
            open_now: h.open_at(now),
            next_open_at: h.next_open(now).map(record_time),
        },
        None => BusinessHoursRecord {
            enabled: false,
            time_zone: None,
            hours: Week::default(),
            holidays: Vec::new(),
            away_message: settings.away_message.clone(),
            open_now: true,
            next_open_at: None,
        },
    })
}

/// My business hours.
#[utoipa::path(
    get,
    path = "/settings/business-hours",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The business hours", body = BusinessHoursRecord), (status = 403, response = E403))
)]
async fn get_business_hours(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<BusinessHoursRecord>> {
    Ok(Json(hours_record(&state, partner.id).await?))
}

/// Set my business hours.
///
/// Each interval is `HH:MM`–`HH:MM` within a day (`24:00` ends it), a day's not overlapping; an unknown
/// time zone, a time that does not parse, an end before its start, overlapping intervals or a date that is
/// not one are `422` naming the field (`hours.tue[1]`, `holidays[0]`). Outside these hours a person's message
/// gets `away_message` (with when the team is back) once per conversation per closed period, and SLAs stop
/// counting.
#[utoipa::path(
    put,
    path = "/settings/business-hours",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = HoursUpdate,
    responses(
        (status = 200, description = "The business hours", body = BusinessHoursRecord),
        (status = 403, response = E403),
        (status = 422, response = E422),
    )
)]
async fn set_business_hours(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<HoursUpdate>,
) -> ApiResult<Json<BusinessHoursRecord>> {
    let days = req.hours.days().map(|intervals| intervals.iter().map(|i| (i.start.clone(), i.end.clone())).collect());
    let input = service_levels::HoursInput {
        enabled: req.enabled,
        time_zone: req.time_zone.as_deref(),
        days,
        holidays: &req.holidays,
        away_message: req.away_message.as_deref(),
    };
    service_levels::set_hours(&state.db, partner.id, input).await?;
    Ok(Json(hours_record(&state, partner.id).await?))
}

/// Whether the person is asked to rate a conversation when it is closed, and how.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CsatSettings)]
struct Csat {
    /// Asked when an agent closes a conversation an agent answered in (once, until the person writes again).
    #[serde(default)]
    enabled: bool,
    /// The question, 1 to 500 characters (null: "How did we do? Please rate this conversation from 1 (poor)
    /// to 5 (great): reply with a number."). The app shows the scale as buttons, WhatsApp as a list; on SMS
    /// the person replies with a number.
    #[schema(min_length = 1, max_length = 500, pattern = "\\S")]
    question: Option<String>,
}

/// My ratings settings.
#[utoipa::path(
    get,
    path = "/settings/csat",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The settings", body = Csat), (status = 403, response = E403))
)]
async fn get_csat(State(state): State<AppState>, PartnerAuth(partner): PartnerAuth) -> ApiResult<Json<Csat>> {
    let (enabled, question) = service_levels::ratings(&state.db, partner.id).await?;
    Ok(Json(Csat { enabled, question }))
}

/// Ask people to rate their conversations.
///
/// When a conversation an agent answered in is closed, the person is asked on their channel (in the app as
/// buttons, on WhatsApp as a list within its 24-hour window, on SMS as a numbered question) to rate it 1 to
/// 5, with an optional comment in the app; their answer is on the conversation (`rating`) and averaged per
/// agent (`GET /settings/assignment`).
#[utoipa::path(
    put,
    path = "/settings/csat",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = Csat,
    responses((status = 200, description = "The settings", body = Csat), (status = 403, response = E403), (status = 422, response = E422))
)]
async fn set_csat(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<Csat>,
) -> ApiResult<Json<Csat>> {
    let question = service_levels::set_ratings(&state.db, partner.id, req.enabled, req.question.as_deref()).await?;
    Ok(Json(Csat { enabled: req.enabled, question }))
}

/// The SLA targets the partner's conversations run under, in seconds of business time (null: none).
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SlaTargets)]
struct Targets {
    /// From a person's first message to an agent's first reply: 1 to 2,592,000 (30 days).
    #[schema(minimum = 1, maximum = 2592000)]
    first_response_s: Option<i64>,
    /// From a person's message after an agent's reply to the next reply.
    #[schema(minimum = 1, maximum = 2592000)]
    next_response_s: Option<i64>,
}

/// My SLA targets.
#[utoipa::path(
    get,
    path = "/settings/slas",
    tag = "conversations",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The targets", body = Targets), (status = 403, response = E403))
)]
async fn get_slas(State(state): State<AppState>, PartnerAuth(partner): PartnerAuth) -> ApiResult<Json<Targets>> {
    let s = service_levels::settings(&state.db, partner.id).await?;
    Ok(Json(Targets { first_response_s: s.first_response_s, next_response_s: s.next_response_s }))
}

/// Set my SLA targets.
///
/// An SLA starts when a person writes and no SLA runs on the conversation; an agent's reply (or closing)
/// stops it; past its due time (counted in business hours) it is breached: the conversation shows it, and a
/// `conversation.sla_breached` webhook goes. Changing the targets changes the SLAs that start from now on.
/// `0`, a negative or over 30 days is `422`.
#[utoipa::path(
    put,
    path = "/settings/slas",
    tag = "conversations",
    security(("partnerKey" = [])),
    request_body = Targets,
    responses(
        (status = 200, description = "The targets", body = Targets),
        (status = 403, response = E403),
        (status = 422, response = E422),
    )
)]
async fn set_slas(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<Targets>,
) -> ApiResult<Json<Targets>> {
    service_levels::set_targets(&state.db, partner.id, req.first_response_s, req.next_response_s).await?;
    Ok(Json(req))
}
