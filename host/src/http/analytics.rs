//! `/analytics/…`: a partner's figures (`crate::analytics`), read from rollups kept as things happen.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::analytics::{self, Bump, Counts, DAY_MS, Filter, Interval, Prices};
use crate::clock::{Millis, record_time};
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::http::{ApiJson, ApiQuery, E403, E422};
use crate::names::Channel;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(conversation_analytics))
        .routes(routes!(message_analytics))
        .routes(routes!(get_prices, set_prices))
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

impl RangeQuery {
    /// The range and interval asked for, checked (`analytics::range`); `now` ends it when `to` is absent.
    fn range(&self, now: Millis) -> ApiResult<((Millis, Millis), Interval)> {
        let interval = match self.interval.as_deref().unwrap_or("") {
            "" | "day" => Interval::Day,
            "hour" => Interval::Hour,
            _ => return Err(ApiError::validation("interval", "interval is day or hour")),
        };
        let to = match self.to.as_deref().filter(|t| !t.is_empty()) {
            Some(text) => day("to", text)?,
            None => now,
        };
        let from = match self.from.as_deref().filter(|t| !t.is_empty()) {
            Some(text) => day("from", text)?,
            None => to - 29 * DAY_MS,
        };
        Ok((analytics::range(from, to, interval)?, interval))
    }
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
    let (range, interval) = q.range(state.now())?;
    let report = analytics::conversations(&state.db, partner.id, range, interval).await?;
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
            .map(|(id, b)| Agent { member_id: id, name: report.names.get(&id).cloned(), figures: b.into() })
            .collect(),
    }))
}

/// Which messages a report counts.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MessagesQuery {
    /// Only messages sent on this channel: `inapp`, `whatsapp` or `sms` (acceptances, counted before a
    /// channel is chosen, are then left out).
    #[param(pattern = "^(inapp|whatsapp|sms)?$")]
    channel: Option<String>,
    /// Only messages of this template (its code).
    template: Option<String>,
    /// Only messages of this broadcast.
    #[param(minimum = 1)]
    broadcast_id: Option<i64>,
}

/// What messages came to in a bucket, a range, or on a channel, of a template or of a broadcast. Each
/// change counts in the hour it happened: a message accepted on one day and read the next counts once each
/// day.
#[derive(Serialize, ToSchema)]
#[schema(as = MessageFigures)]
struct MessageFigures {
    /// Messages accepted to send (by channel: not counted, since none is chosen yet).
    accepted: i64,
    /// Handed to a channel: into the hub, to WhatsApp or to the SMS provider.
    sent: i64,
    /// Delivered: on a device of the person's, or confirmed by the provider.
    delivered: i64,
    /// Read by the person (or marked read).
    read: i64,
    /// Failed on every channel.
    failed: i64,
    /// Messages people wrote (in conversations).
    received: i64,
    /// Tries a provider accepted on WhatsApp or SMS (each billed): deliveries, fallbacks and SMS alerts.
    paid: i64,
    /// Messages that went on to WhatsApp or SMS because no device of the person's got them from the hub in
    /// time (the fallback).
    fallbacks: i64,
    /// The average time from acceptance (or the scheduled time) to read, in seconds (null: none read).
    avg_time_to_read_s: Option<f64>,
    /// What the paid tries cost at the prices set (`PUT /settings/prices`), in that currency (null: a
    /// channel with paid tries has no price).
    cost: Option<f64>,
}

impl MessageFigures {
    fn of(c: Counts, cost: Option<i64>) -> MessageFigures {
        MessageFigures {
            accepted: c.accepted,
            sent: c.sent,
            delivered: c.delivered,
            read: c.read,
            failed: c.failed,
            received: c.received,
            paid: c.paid,
            fallbacks: c.fallbacks,
            avg_time_to_read_s: average(c.read_ms, c.read, 1000.0),
            cost: cost.map(|micros| micros as f64 / 1e6),
        }
    }
}

/// A bucket of the range.
#[derive(Serialize, ToSchema)]
#[schema(as = MessageFiguresAt)]
struct MessageBucket {
    /// The bucket's start (UTC).
    at: String,
    #[serde(flatten)]
    figures: MessageFigures,
}

/// A channel's figures over the range.
#[derive(Serialize, ToSchema)]
#[schema(as = ChannelFigures)]
struct ChannelRow {
    channel: Channel,
    #[serde(flatten)]
    figures: MessageFigures,
}

/// A template's figures over the range.
#[derive(Serialize, ToSchema)]
#[schema(as = TemplateFigures)]
struct TemplateRow {
    /// The template's code.
    template: String,
    #[serde(flatten)]
    figures: MessageFigures,
}

/// A broadcast's figures over the range.
#[derive(Serialize, ToSchema)]
#[schema(as = BroadcastFigures)]
struct BroadcastRow {
    broadcast_id: i64,
    #[serde(flatten)]
    figures: MessageFigures,
}

/// The partner's messages over a range.
#[derive(Serialize, ToSchema)]
#[schema(as = MessageAnalytics)]
struct MessageReport {
    from: String,
    to: String,
    /// `day` or `hour`.
    interval: String,
    /// The currency of the costs (null: no prices set).
    currency: Option<String>,
    /// Every bucket of the range, oldest first (zero when nothing happened).
    series: Vec<MessageBucket>,
    totals: MessageFigures,
    /// By the channel messages were sent on, those with anything to count: the delivery funnel (sent →
    /// delivered → read, and failed) on each, with its paid tries and their cost.
    channels: Vec<ChannelRow>,
    /// By template, those with anything to count: each template's funnel (accepted → … → failed).
    templates: Vec<TemplateRow>,
    /// By broadcast, those with anything to count.
    broadcasts: Vec<BroadcastRow>,
}

/// My messages' figures.
///
/// By the day (or hour) over a range of whole UTC days (at most 366; by the hour 31): the delivery funnel
/// (accepted → sent → delivered → read, and failed), messages people wrote, the average time to read, the
/// tries billed on WhatsApp and SMS with the fallbacks among them and their cost at the prices set
/// (`PUT /settings/prices`); over the range by channel, template and broadcast. Narrowed to one channel,
/// template or broadcast by the query. Read from rollups kept as each change happens, never by scanning
/// messages; a change shows within a second.
#[utoipa::path(
    get,
    path = "/analytics/messages",
    tag = "analytics",
    security(("partnerKey" = [])),
    params(RangeQuery, MessagesQuery),
    responses(
        (status = 200, description = "The figures", body = MessageReport),
        (status = 403, response = E403),
        (status = 422, response = E422),
    )
)]
async fn message_analytics(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(range): ApiQuery<RangeQuery>,
    ApiQuery(q): ApiQuery<MessagesQuery>,
) -> ApiResult<Json<MessageReport>> {
    let (range, interval) = range.range(state.now())?;
    let channel = match q.channel.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(text) => Some(
            Channel::parse(text).ok_or_else(|| ApiError::validation("channel", "channel is inapp, whatsapp or sms"))?,
        ),
    };
    if q.broadcast_id.is_some_and(|id| id < 1) {
        return Err(ApiError::validation("broadcast_id", "broadcast_id is a broadcast's id, 1 or more"));
    }
    let template = q.template.filter(|t| !t.is_empty());
    let filter = Filter { channel, template, broadcast_id: q.broadcast_id };
    let report = analytics::messages(&state.db, partner.id, range, interval, &filter).await?;
    let date = |ms: Millis| record_time(ms)[..10].to_string();
    Ok(Json(MessageReport {
        from: date(range.0),
        to: date(range.1 - DAY_MS),
        interval: if interval == Interval::Day { "day" } else { "hour" }.into(),
        currency: report.prices.currency.clone(),
        series: report
            .series
            .into_iter()
            .map(|(at, c, cost)| MessageBucket { at: record_time(at), figures: MessageFigures::of(c, cost) })
            .collect(),
        totals: MessageFigures::of(report.totals, report.cost),
        channels: report
            .channels
            .into_iter()
            .map(|(channel, c, cost)| ChannelRow { channel, figures: MessageFigures::of(c, cost) })
            .collect(),
        templates: report
            .templates
            .into_iter()
            .map(|(template, c)| TemplateRow { template, figures: MessageFigures::of(c, None) })
            .collect(),
        broadcasts: report
            .broadcasts
            .into_iter()
            .map(|(id, c)| BroadcastRow { broadcast_id: id, figures: MessageFigures::of(c, None) })
            .collect(),
    }))
}

/// What the partner pays a message on WhatsApp and by SMS, to cost its figures with.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Prices)]
struct PriceList {
    /// ISO 4217, three capital letters (`EUR`); required with a price (null: none set).
    #[schema(pattern = "^[A-Z]{3}$")]
    currency: Option<String>,
    /// A message on WhatsApp, 0 to 100 in the currency, to the millionth (null: not set).
    #[schema(minimum = 0, maximum = 100)]
    whatsapp: Option<f64>,
    /// An SMS, 0 to 100 in the currency, to the millionth (null: not set).
    #[schema(minimum = 0, maximum = 100)]
    sms: Option<f64>,
}

/// A price in millionths of its currency, checked: 0 to 100.
fn micros(field: &str, price: Option<f64>) -> ApiResult<Option<i64>> {
    match price {
        None => Ok(None),
        Some(p) if p.is_finite() && (0.0..=100.0).contains(&p) => Ok(Some((p * 1e6).round() as i64)),
        Some(_) => Err(ApiError::validation(field, format!("{field} is a price from 0 to 100"))),
    }
}

impl From<Prices> for PriceList {
    fn from(p: Prices) -> Self {
        let units = |m: Option<i64>| m.map(|m| m as f64 / 1e6);
        PriceList { currency: p.currency, whatsapp: units(p.whatsapp_micros), sms: units(p.sms_micros) }
    }
}

/// My prices.
#[utoipa::path(
    get,
    path = "/settings/prices",
    tag = "analytics",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The prices", body = PriceList), (status = 403, response = E403))
)]
async fn get_prices(State(state): State<AppState>, PartnerAuth(partner): PartnerAuth) -> ApiResult<Json<PriceList>> {
    Ok(Json(analytics::prices(&state.db, partner.id).await?.into()))
}

/// Set what I pay a message on WhatsApp and by SMS.
///
/// The figures (`GET /analytics/messages`) cost the tries billed on each channel at these prices, as they
/// are when read: a change of price costs the past at the new price too.
#[utoipa::path(
    put,
    path = "/settings/prices",
    tag = "analytics",
    security(("partnerKey" = [])),
    request_body = PriceList,
    responses(
        (status = 200, description = "The prices", body = PriceList),
        (status = 403, response = E403),
        (status = 422, response = E422),
    )
)]
async fn set_prices(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<PriceList>,
) -> ApiResult<Json<PriceList>> {
    let prices = Prices {
        currency: req.currency.clone(),
        whatsapp_micros: micros("whatsapp", req.whatsapp)?,
        sms_micros: micros("sms", req.sms)?,
    };
    match &prices.currency {
        Some(c) if c.len() != 3 || !c.bytes().all(|b| b.is_ascii_uppercase()) => {
            return Err(ApiError::validation("currency", "currency is an ISO 4217 code, three capital letters"));
        }
        None if prices.whatsapp_micros.is_some() || prices.sms_micros.is_some() => {
            return Err(ApiError::validation("currency", "a price needs its currency"));
        }
        _ => {}
    }
    analytics::set_prices(&state.db, partner.id, &prices).await?;
    Ok(Json(prices.into()))
}
