//! `/settings/webhook`, `/webhooks/test`, `/webhooks/deliveries`: where a partner's events go, a signed
//! test ping, and the delivery log with manual retry.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, ApiQuery, E404, E422, List, PageParams, query_text};
use crate::clock::{parse_record_time, record_time};
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{DeliveryState, string_enum};
use crate::webhooks::SendOutcome;
use crate::webhooks::endpoints::{self, DeliveryQuery, Target, WebhookDelivery};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(set_webhook))
        .routes(routes!(test_webhook))
        .routes(routes!(list_deliveries))
        .routes(routes!(retry_delivery))
        .routes(routes!(get_delivery))
        .routes(routes!(retry_failed))
}

/// Where events go. The secret is created on first use, and again when rotated.
#[derive(Deserialize, ToSchema)]
pub struct SetWebhook {
    /// HTTPS (localhost in dev mode), with a host that resolves only to public addresses; null or empty
    /// clears it.
    #[schema(schema_with = crate::http::optional_public_url_schema)]
    webhook_url: Option<String>,
    /// A new secret replaces the current one.
    rotate_secret: Option<bool>,
}

/// The webhook settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookSettings {
    pub webhook_url: Option<String>,
    /// `whsec_` and the secret's first characters.
    pub webhook_secret_prefix: String,
    /// Only when created or rotated: the whole secret, shown this once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
}

/// Applies webhook settings for a partner or a developer: the secret is answered only when it is new.
pub async fn settings(state: &AppState, target: Target, req: SetWebhook) -> ApiResult<WebhookSettings> {
    let url = req.webhook_url.as_deref();
    let set = endpoints::set(&state.webhooks, target, url, req.rotate_secret.unwrap_or(false)).await?;
    Ok(WebhookSettings {
        webhook_url: set.url,
        webhook_secret_prefix: set.secret_prefix,
        webhook_secret: set.new_secret,
    })
}

/// Set where events go; the secret (whsec_…) is shown only when created or rotated.
#[utoipa::path(
    put,
    path = "/settings/webhook",
    tag = "webhooks",
    security(("partnerKey" = [])),
    request_body = SetWebhook,
    responses((status = 200, description = "The settings", body = WebhookSettings))
)]
async fn set_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<SetWebhook>,
) -> ApiResult<Json<WebhookSettings>> {
    Ok(Json(settings(&state, Target::Partner(partner.id), req).await?))
}

/// What a test delivery did (partner and bot webhooks alike).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookTestOutcome)]
pub struct TestOutcome {
    /// Whether the endpoint answered 2xx.
    pub ok: bool,
    /// The HTTP status the endpoint answered (null when none).
    pub status: Option<u16>,
    /// Why it failed.
    pub error: Option<String>,
}

/// Send one signed sample message.status event now.
#[utoipa::path(
    post,
    path = "/webhooks/test",
    tag = "webhooks",
    security(("partnerKey" = [])),
    responses((status = 200, description = "What happened", body = TestOutcome))
)]
async fn test_webhook(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
) -> ApiResult<Json<TestOutcome>> {
    Ok(Json(test_event(&state, Target::Partner(partner.id), &partner.code).await?))
}

/// Sends one signed sample `message.status` event to `target`'s webhook now (`partner` is the code the
/// sample names): what the endpoint answered.
pub async fn test_event(state: &AppState, target: Target, partner: &str) -> ApiResult<TestOutcome> {
    Ok(TestOutcome::from(endpoints::test(&state.webhooks, target, partner).await?))
}

impl From<SendOutcome> for TestOutcome {
    fn from(outcome: SendOutcome) -> Self {
        TestOutcome { ok: outcome.ok(), status: outcome.status, error: outcome.error }
    }
}

/// One event's delivery to the webhook.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookDelivery)]
pub struct DeliveryRecord {
    /// Equals the X-Service-Delivery header
    pub delivery_id: String,
    pub event: String,
    pub state: DeliveryState,
    pub attempts: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    /// When the next attempt is due (pending deliveries only).
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    /// The delivery this one waits for: events about the same message go in order, and the one before it
    /// is still pending (retrying after a failure). This one goes once that one is delivered or dead;
    /// sending this one again sends that one first.
    pub waiting_for: Option<String>,
}

impl From<&WebhookDelivery> for DeliveryRecord {
    fn from(d: &WebhookDelivery) -> Self {
        DeliveryRecord {
            delivery_id: d.delivery_id.clone(),
            event: d.event.clone(),
            state: d.state,
            attempts: d.attempts,
            last_status: d.last_status,
            last_error: d.last_error.clone(),
            next_attempt_at: (d.state == DeliveryState::Pending).then(|| record_time(d.next_attempt_at)),
            created_at: record_time(d.created_at),
            waiting_for: d.waiting_for.clone(),
        }
    }
}

string_enum! {
    /// What a deliveries list can be filtered by: a delivery's state, or `failed` (its last attempt failed
    /// and it is still being retried: pending, with attempts).
    enum DeliveryStateFilter {
        Pending = "pending",
        Succeeded = "succeeded",
        Failed = "failed",
        Dead = "dead",
    }
}

impl DeliveryStateFilter {
    /// The stored state to list, and whether only deliveries with a failed attempt count.
    fn stored(self) -> (DeliveryState, bool) {
        match self {
            DeliveryStateFilter::Pending => (DeliveryState::Pending, false),
            DeliveryStateFilter::Succeeded => (DeliveryState::Succeeded, false),
            DeliveryStateFilter::Failed => (DeliveryState::Pending, true),
            DeliveryStateFilter::Dead => (DeliveryState::Dead, false),
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeliveryFilter {
    #[param(schema_with = delivery_filter_schema)]
    #[serde(default, deserialize_with = "super::filter")]
    state: Option<DeliveryStateFilter>,
    /// Only deliveries of this event (`message.status`, …).
    event: Option<String>,
    #[param(schema_with = since_schema)]
    since: Option<String>,
    #[param(schema_with = until_schema)]
    until: Option<String>,
}

fn since_schema() -> utoipa::openapi::Object {
    super::openapi::record_time_filter("Only deliveries created at or after this time")
}

fn until_schema() -> utoipa::openapi::Object {
    super::openapi::record_time_filter("Only deliveries created before this time")
}

/// A time filter of the query, read as records write times.
fn time_filter(field: &'static str, text: Option<String>) -> ApiResult<Option<i64>> {
    query_text(text)
        .map(|t| {
            parse_record_time(&t)
                .ok_or_else(|| ApiError::validation(field, format!("{field} is a time as YYYY-MM-DD HH:MM:SS (UTC)")))
        })
        .transpose()
}

/// The states a delivery list can be filtered by.
fn delivery_filter_schema() -> utoipa::openapi::Object {
    super::openapi::filter_of(
        &DeliveryStateFilter::names(),
        "pending, succeeded, failed (retrying after a failure) or dead",
    )
}

/// Event deliveries, newest first.
#[utoipa::path(
    get,
    path = "/webhooks/deliveries",
    tag = "webhooks",
    security(("partnerKey" = [])),
    params(DeliveryFilter, PageParams),
    responses(
        (status = 200, description = "A page of deliveries", body = List<DeliveryRecord>),
        (status = 422, response = E422),
    )
)]
async fn list_deliveries(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(filter): ApiQuery<DeliveryFilter>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<DeliveryRecord>>> {
    let page = page.page()?;
    let (state_filter, only_failed) = match filter.state.map(DeliveryStateFilter::stored) {
        Some((state, only_failed)) => (Some(state), only_failed),
        None => (None, false),
    };
    let event = query_text(filter.event);
    let query = DeliveryQuery {
        state: state_filter,
        only_failed,
        event: event.as_deref(),
        since: time_filter("since", filter.since)?,
        until: time_filter("until", filter.until)?,
    };
    let rows =
        endpoints::list_deliveries(&state.db, Target::Partner(partner.id), &query, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |d| d.id, |d| DeliveryRecord::from(d))))
}

/// One delivery with what it sends.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookDeliveryDetail)]
pub struct DeliveryDetail {
    #[serde(flatten)]
    delivery: DeliveryRecord,
    /// The request body every attempt sends (signed with `X-Service-Signature`); the response of the last
    /// attempt is `last_status` and `last_error` (bodies are not kept).
    payload: Value,
}

/// One delivery, with the event it carries.
#[utoipa::path(
    get,
    path = "/webhooks/deliveries/{id}",
    tag = "webhooks",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The delivery and its request body", body = DeliveryDetail), (status = 404, response = E404))
)]
async fn get_delivery(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<DeliveryDetail>> {
    let (delivery, payload) = endpoints::find_delivery(&state.db, Target::Partner(partner.id), &id)
        .await?
        .ok_or_else(|| ApiError::not_found("delivery"))?;
    let payload = serde_json::from_str(&payload).unwrap_or(Value::String(payload));
    Ok(Json(DeliveryDetail { delivery: DeliveryRecord::from(&delivery), payload }))
}

/// Which failed deliveries to send again.
#[derive(Deserialize, ToSchema)]
#[schema(as = RetryFailed)]
struct RetryFailed {
    /// Deliveries created at or after this time (`YYYY-MM-DD HH:MM:SS` UTC, as records show times).
    #[schema(schema_with = super::openapi::record_time_schema, required = true)]
    since: Option<String>,
}

/// How many deliveries were made due.
#[derive(Serialize, ToSchema)]
#[schema(as = RetriedDeliveries)]
struct Retried {
    retried: u64,
}

/// Send every failed delivery since a time again now.
///
/// Dead deliveries, and pending ones whose last attempt failed, created at or after `since`: each is sent
/// again now with its own delivery id (a receiver that already has one de-duplicates it).
#[utoipa::path(
    post,
    path = "/webhooks/deliveries/retry",
    tag = "webhooks",
    security(("partnerKey" = [])),
    request_body = RetryFailed,
    responses((status = 200, description = "How many were made due", body = Retried), (status = 422, response = E422))
)]
async fn retry_failed(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<RetryFailed>,
) -> ApiResult<Json<Retried>> {
    let since = time_filter("since", req.since)?
        .ok_or_else(|| ApiError::validation("since", "since is a time as YYYY-MM-DD HH:MM:SS (UTC)"))?;
    let retried = endpoints::retry_failed_since(&state.db, Target::Partner(partner.id), since, state.now()).await?;
    Ok(Json(Retried { retried }))
}

/// Send a delivery again now (same delivery id).
///
/// A delivery that waits for an earlier one about the same message (`waiting_for`) goes after it: the
/// earlier ones still pending are sent again now too, in order.
#[utoipa::path(
    post,
    path = "/webhooks/deliveries/{id}/retry",
    tag = "webhooks",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The delivery", body = DeliveryRecord), (status = 404, response = E404))
)]
async fn retry_delivery(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<DeliveryRecord>> {
    let delivery = endpoints::retry_now(&state.db, Target::Partner(partner.id), &id, state.now())
        .await?
        .ok_or_else(|| ApiError::not_found("delivery"))?;
    Ok(Json(DeliveryRecord::from(&delivery)))
}
