//! `/analytics/…`: a partner's figures (`crate::analytics`), read from rollups kept as things happen.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::analytics::{self, DAY_MS, Interval};
use crate::clock::{Millis, record_time};
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::{ApiQuery, E403, E422};
use crate::store::members;
use crate::store::rollups::Bump;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(conversation_analytics))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RangeQuery {
    /// The first day, `YYYY-MM-DD` (UTC); absent: 29 days before `to`.
    #[param(pattern = "^([0-9]{4}-[0-9]{2}-[0-9]{2})?$")]
    from: Option<String>,
    /// The last day, `YYYY-MM-DD` (UTC), at most 366 days after `from`; absent: today.
    #[param(pattern = "^([0-9]{4}-[0-9]{2}-[0-9]{2})?$")]
    to: Option<String>,
    /// `day` (the default) or `hour` (a range of at most 31 days).
    #[param(pattern = "^(day|hour)?$")]
    interval: Option<String>,
}

/// What conversations came to in a bucket, a range, or for an agent.
#[derive(Serialize, ToSchema)]
#[schema(as = ConversationFigures)]
struct Figures {
    /// Conversations people opened.
    opened: i64,
    /// Conversations closed (each closing of a reopened one counts).
    resolved: i64,
    /// Conversations first answered by an agent.
    first_responses: i64,
    /// The average time from a conversation's first message to its first agent reply, in seconds (null: none).
    avg_first_response_s: Option<f64>,
    /// The average time from a conversation's opening to its closing, in seconds (null: none).
    avg_resolution_s: Option<f64>,
    /// SLAs breached.
    sla_breaches: i64,
    /// Ratings people gave.
    ratings: i64,
    /// Their average, 1 to 5 (null: none).
    csat_average: Option<f64>,
}

fn average(sum: i64, n: i64, scale: f64) -> Option<f64> {
    (n > 0).then(|| ((sum as f64 / n as f64 / scale) * 100.0).round() / 100.0)
}

impl From<Bump> for Figures {
    fn from(b: Bump) -> Self {
        Figures {
            opened: b.opened,
            resolved: b.resolved,
            first_responses: b.first_responses,
            avg_first_response_s: average(b.first_response_ms, b.first_responses, 1000.0),
            avg_resolution_s: average(b.resolution_ms, b.resolved, 1000.0),
            sla_breaches: b.sla_breaches,
            ratings: b.ratings,
            csat_average: average(b.rating_sum, b.ratings, 1.0),
        }
    }
}

/// A bucket of the range.
#[derive(Serialize, ToSchema)]
#[schema(as = ConversationFiguresAt)]
struct Bucket {
    /// The bucket's start (UTC).
    at: String,
    #[serde(flatten)]
    figures: Figures,
}

/// An agent's figures over the range: the conversations they first answered (their replies), closed while
/// they had them, whose SLA was breached while they had them, and rated for their work.
#[derive(Serialize, ToSchema)]
#[schema(as = AgentFigures)]
struct Agent {
    member_id: i64,
    /// Their display name (null: none, or a member since removed).
    name: Option<String>,
    #[serde(flatten)]
    figures: Figures,
}

/// The partner's conversations over a range.
#[derive(Serialize, ToSchema)]
#[schema(as = ConversationAnalytics)]
struct Report {
    from: String,
    to: String,
    /// `day` or `hour`.
    interval: String,
    /// Every bucket of the range, oldest first (zero when nothing happened).
    series: Vec<Bucket>,
    totals: Figures,
    /// By agent, those with anything to count.
    agents: Vec<Agent>,
}

/// A day `YYYY-MM-DD` (UTC) as milliseconds.
fn day(field: &str, text: &str) -> ApiResult<Millis> {
    let date: jiff::civil::Date =
        text.parse().map_err(|_| ApiError::validation(field, format!("{field} is a day YYYY-MM-DD")))?;
    let at =
        date.to_zoned_datetime(jiff::tz::TimeZone::UTC).map_err(|_| ApiError::validation(field, "out of range"))?;
    Ok(at.timestamp().as_millisecond())
}

/// My conversations' figures.
///
/// By the day (or hour) over a range of whole UTC days (at most 366; by the hour 31), and by agent: opened,
/// resolved, first responses and their average time, average resolution time, SLA breaches, ratings and
/// their average. Read from rollups kept as each of these happens, never by scanning conversations.
#[utoipa::path(
    get,
    path = "/analytics/conversations",
    tag = "analytics",
    security(("partnerKey" = [])),
    params(RangeQuery),
    responses(
        (status = 200, description = "The figures", body = Report),
        (status = 403, response = E403),
        (status = 422, response = E422),
    )
)]
async fn conversation_analytics(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(q): ApiQuery<RangeQuery>,
) -> ApiResult<Json<Report>> {
    let interval = match q.interval.as_deref().unwrap_or("") {
        "" | "day" => Interval::Day,
        "hour" => Interval::Hour,
        _ => return Err(ApiError::validation("interval", "interval is day or hour")),
    };
    let to = match q.to.as_deref().filter(|t| !t.is_empty()) {
        Some(text) => day("to", text)?,
        None => state.now(),
    };
    let from = match q.from.as_deref().filter(|t| !t.is_empty()) {
        Some(text) => day("from", text)?,
        None => to - 29 * DAY_MS,
    };
    let range = analytics::range(from, to, interval)?;
    let report = analytics::conversations(&state.db, partner.id, range, interval).await?;
    let names: std::collections::HashMap<i64, Option<String>> =
        members::list(&state.db, partner.id).await?.into_iter().map(|m| (m.id, m.name)).collect();
    let date = |ms: Millis| record_time(ms)[..10].to_string();
    Ok(Json(Report {
        from: date(range.0),
        to: date(range.1 - DAY_MS),
        interval: if interval == Interval::Day { "day" } else { "hour" }.into(),
        series: report.series.into_iter().map(|(at, b)| Bucket { at: record_time(at), figures: b.into() }).collect(),
        totals: report.totals.into(),
        agents: report
            .agents
            .into_iter()
            .map(|(id, b)| Agent { member_id: id, name: names.get(&id).cloned().flatten(), figures: b.into() })
            .collect(),
    }))
}
