//! Payments (`/payments…`, partners: list, read, refund) and Stripe's webhook
//! (`/providers/stripe/webhook`: no API key, each event signed with `Stripe-Signature`). The payments
//! domain ([`crate::payments`]) does the work; a verified outcome that ends a payment is then told to its
//! bot through the flow engine, once.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiQuery, E400, E404, E409, E502, List, PageParams, query_text};
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{PaymentState, ProviderName};
use crate::payments::{self, Applied};
use crate::payments::{Filter, Payment};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_payments))
        .routes(routes!(get_payment))
        .routes(routes!(refund_payment))
        .routes(routes!(stripe_webhook))
}

/// A payment as partners see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PaymentRecord {
    pub payment_id: i64,
    /// `pay_…`: also the capability of its checkout page.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The bot's code.
    pub bot: String,
    /// The session's ref (`flow_…` or `sess_…`).
    pub session: String,
    pub phone: String,
    /// The id the bot gave the payment.
    pub guest_id: String,
    /// In the currency's minor units.
    pub amount_minor: i64,
    /// ISO 4217.
    pub currency: String,
    pub description: String,
    pub state: PaymentState,
    /// Grows with each state change (as in `payment.status`).
    pub seq: i64,
    pub provider: ProviderName,
    /// Where the user pays.
    pub checkout_url: Option<String>,
    /// The provider's own id of the checkout (Stripe: `cs_…`).
    pub provider_ref: Option<String>,
    /// When a refund was asked for (the state becomes `refunded` when the provider confirms it).
    pub refund_requested_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Payment> for PaymentRecord {
    fn from(p: &Payment) -> Self {
        PaymentRecord {
            payment_id: p.id,
            reference: p.reference.clone(),
            bot: p.bot_code.clone(),
            session: p.session_ref.clone(),
            phone: p.phone.clone(),
            guest_id: p.guest_id.clone(),
            amount_minor: p.amount_minor,
            currency: p.currency.clone(),
            description: p.description.clone(),
            state: p.state,
            seq: p.seq,
            provider: p.provider,
            checkout_url: p.checkout_url.clone(),
            provider_ref: p.provider_ref.clone(),
            refund_requested_at: p.refund_requested_at.map(record_time),
            created_at: record_time(p.created_at),
            updated_at: record_time(p.updated_at),
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct PaymentFilter {
    #[param(schema_with = state_filter_schema)]
    #[serde(default, deserialize_with = "crate::http::filter")]
    state: Option<PaymentState>,
    /// Only payments of this bot (its code).
    bot: Option<String>,
    /// Only payments of this phone (E.164).
    phone: Option<String>,
}

fn state_filter_schema() -> utoipa::openapi::Object {
    crate::http::openapi::filter_of(&PaymentState::names(), "Only payments in this state")
}

/// The partner's payments, newest first.
#[utoipa::path(
    get,
    path = "/payments",
    tag = "payments",
    security(("partnerKey" = [])),
    params(PaymentFilter, PageParams),
    responses((status = 200, description = "A page of payments", body = List<PaymentRecord>))
)]
async fn list_payments(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(filter): ApiQuery<PaymentFilter>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<List<PaymentRecord>>> {
    let page = page.page()?;
    let filter = Filter { state: filter.state, bot: query_text(filter.bot), phone: query_text(filter.phone) };
    let rows = payments::list_for_partner(&state.db, partner.id, &filter, page.before, page.fetch()).await?;
    Ok(Json(page.list(rows, |p| p.id, |p| PaymentRecord::from(p))))
}

/// One payment of the partner, by `payment_id` or `ref`; another partner's is 404.
async fn partner_payment(state: &AppState, partner_id: i64, id: &str) -> ApiResult<Payment> {
    let number = if id.starts_with("pay_") { None } else { Some(super::parse_id(id, "payment")?) };
    let found = payments::find_for_partner(&state.db, partner_id, id, number).await?;
    found.ok_or_else(|| ApiError::not_found("payment"))
}

/// A payment (by `payment_id` or `ref`).
#[utoipa::path(
    get,
    path = "/payments/{id}",
    tag = "payments",
    security(("partnerKey" = [])),
    responses((status = 200, description = "The payment", body = PaymentRecord), (status = 404, response = E404))
)]
async fn get_payment(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<PaymentRecord>> {
    Ok(Json(PaymentRecord::from(&partner_payment(&state, partner.id, &id).await?)))
}

/// Refund a succeeded payment in full (through its provider). The state is `refunded` once the provider
/// confirms: at once for the dev checkout and usually for Stripe, else with Stripe's `charge.refunded`.
#[utoipa::path(
    post,
    path = "/payments/{id}/refund",
    tag = "payments",
    security(("partnerKey" = [])),
    responses(
        (status = 200, description = "The payment after the refund request", body = PaymentRecord),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn refund_payment(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Json<PaymentRecord>> {
    let payment = partner_payment(&state, partner.id, &id).await?;
    let payment = state.payments.refund(&payment).await?;
    Ok(Json(PaymentRecord::from(&payment)))
}

/// Whether the event changed a payment.
#[derive(Serialize, ToSchema)]
struct StripeReceived {
    received: bool,
    /// False for a repeated event, an event type payments do not use, or one that changes nothing.
    applied: bool,
}

/// Stripe's webhook: `checkout.session.completed` (paid → succeeded, else processing),
/// `checkout.session.async_payment_succeeded|failed`, `checkout.session.expired` (→ canceled),
/// `charge.refunded` (→ refunded). Each event id is applied once.
#[utoipa::path(
    post,
    path = "/providers/stripe/webhook",
    tag = "providers",
    request_body(
        content = Object,
        description = "A Stripe event. Signed: Stripe-Signature = t=<unix seconds>,v1=<hex HMAC-SHA256 of `<t>.<raw body>` with HUBBUB_STRIPE_WEBHOOK_SECRET>; at most 5 minutes old."
    ),
    responses(
        (status = 200, description = "Received", body = StripeReceived),
        (status = 400, response = E400),
        (status = 404, response = E404),
    )
)]
async fn stripe_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<StripeReceived>> {
    let secret = state
        .config
        .stripe_webhook_secret
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::not_found("Stripe provider"))?;
    let signature = headers.get("stripe-signature").and_then(|v| v.to_str().ok());
    let now_s = state.now().div_euclid(1000);
    payments::verify_stripe_signature(secret, signature, &body, now_s).map_err(ApiError::bad_request)?;
    let event: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("body is not valid JSON: {e}")))?;
    let event_id =
        event["id"].as_str().filter(|id| !id.is_empty()).ok_or_else(|| ApiError::bad_request("the event has no id"))?;
    let Some(outcome) = payments::stripe_outcome(&event) else {
        return Ok(Json(StripeReceived { received: true, applied: false }));
    };
    let applied = state.payments.apply(ProviderName::Stripe, Some(event_id), &outcome).await?;
    let changed = applied.as_ref().is_some_and(|a| a.changed);
    if let Some(applied) = applied {
        tell_guest(&state, &applied).await;
    }
    Ok(Json(StripeReceived { received: true, applied: changed }))
}

/// Tells the payment's bot its outcome when this transition claimed it; what the bot answers in a session
/// on WhatsApp or SMS goes out there. The transition stands either way: a bot that fails to answer is
/// logged (the provider must not retry the event for it).
pub(crate) async fn tell_guest(state: &AppState, applied: &Applied) {
    if !applied.notify_guest {
        return;
    }
    match state.flows().payment_outcome(&applied.payment).await {
        Ok(Some((session, steps))) => {
            if let Err(e) = crate::inbound::deliver(&state.delivery, applied.payment.partner_id, &session, &steps).await
            {
                tracing::warn!(payment_id = applied.payment.id, error = %e, "the bot's answer could not be sent");
            }
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(payment_id = applied.payment.id, error = %e, "the bot could not take the payment outcome")
        }
    }
}
