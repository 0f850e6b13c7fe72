//! The dev checkout (`/pay/{ref}`, outside `/api`): the page the dev payment provider sends users to,
//! served by the host itself, with Pay, Decline and Cancel. The payment's ref is the capability. Posting
//! the form applies the outcome as a verified provider event would (and tells the bot, once), then shows
//! the result with a link back to the app. Only payments of the dev provider have this page; no script.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{E404, E422};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{PaymentState, ProviderName};
use crate::payments::Payment;
use crate::payments::{self, Outcome};

/// What the page may do: inline styles, and post its form to this origin; nothing else.
const POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(checkout_page, checkout_action))
}

/// The button pressed on the checkout page.
#[derive(Deserialize, ToSchema)]
#[schema(as = CheckoutForm)]
struct CheckoutForm {
    /// `pay` (→ succeeded), `decline` (→ failed) or `cancel` (→ canceled).
    #[schema(value_type = String, pattern = "^(pay|decline|cancel)$")]
    action: Option<String>,
}

/// A payment of the dev provider, on a host in dev mode only: a production host (which refuses to start
/// with the dev provider) answers 404 even for a dev payment left in its database.
async fn dev_payment(state: &AppState, reference: &str) -> ApiResult<Payment> {
    if !state.config.dev {
        return Err(ApiError::not_found("payment"));
    }
    payments::find_by_ref(&state.db, reference)
        .await?
        .filter(|p| p.provider == ProviderName::Dev)
        .ok_or_else(|| ApiError::not_found("payment"))
}

/// The dev checkout page of a payment: amount, description, and Pay / Decline / Cancel while it is open.
#[utoipa::path(
    get,
    path = "/pay/{ref}",
    tag = "payments",
    responses(
        (status = 200, description = "The checkout page", content_type = "text/html", body = String),
        (status = 404, response = E404),
    )
)]
async fn checkout_page(State(state): State<AppState>, Path(reference): Path<String>) -> ApiResult<Response> {
    let payment = dev_payment(&state, &reference).await?;
    page(&state, &payment).await
}

/// Pay, decline or cancel on the dev checkout; answers the page with the result.
#[utoipa::path(
    post,
    path = "/pay/{ref}",
    tag = "payments",
    request_body(content = CheckoutForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "The checkout page with the result", content_type = "text/html", body = String),
        (status = 404, response = E404),
        (status = 422, response = E422),
    )
)]
async fn checkout_action(
    State(state): State<AppState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let payment = dev_payment(&state, &reference).await?;
    let form: CheckoutForm = serde_urlencoded::from_bytes(&body).unwrap_or(CheckoutForm { action: None });
    let to = match form.action.as_deref() {
        Some("pay") => PaymentState::Succeeded,
        Some("decline") => PaymentState::Failed,
        Some("cancel") => PaymentState::Canceled,
        _ => return Err(ApiError::validation("action", "action must be pay, decline or cancel")),
    };
    let outcome = Outcome {
        reference: Some(payment.reference.clone()),
        provider_payment: None,
        state: to,
        // The dev checkout takes exactly what it shows.
        amount_minor: Some(payment.amount_minor),
        currency: Some(payment.currency.clone()),
    };
    let payment = match state.payments.apply(ProviderName::Dev, None, &outcome).await? {
        Some(applied) => {
            super::payments::tell_guest(&state, &applied).await;
            applied.payment
        }
        None => payment,
    };
    page(&state, &payment).await
}

async fn page(state: &AppState, payment: &Payment) -> ApiResult<Response> {
    let back = payments::back_path(&state.db, payment).await?;
    let amount = escape(&payments::display_amount(payment.amount_minor, &payment.currency));
    let description = escape(&payment.description);
    let open = matches!(payment.state, PaymentState::RequiresPayment | PaymentState::Processing);
    let body = if open {
        format!(
            r#"<form method="post"><button name="action" value="pay" class="pay">Pay {amount}</button>
<button name="action" value="decline">Decline</button>
<button name="action" value="cancel">Cancel</button></form>"#
        )
    } else {
        let result = match payment.state {
            PaymentState::Succeeded => "Paid. Thank you!",
            PaymentState::Failed => "The payment was declined.",
            PaymentState::Canceled => "The payment was cancelled.",
            PaymentState::Refunded => "The payment was refunded.",
            _ => "",
        };
        format!(r#"<p class="result" data-state="{}">{result}</p>"#, payment.state)
    };
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Checkout (dev)</title>
<style>body{{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}}
.amount{{font-size:2rem;margin:.5rem 0}}button{{font-size:1rem;margin:.25rem;padding:.5rem 1rem}}
.pay{{font-weight:bold}}.note{{color:#666;font-size:.85rem}}</style></head>
<body><h1>Checkout</h1>
<p class="note">Development checkout: no money moves.</p>
<p class="description">{description}</p>
<p class="amount">{amount}</p>
<p>State: <span class="state">{state}</span></p>
{body}
<p><a href="{back}" class="back">Back to the app</a></p>
</body></html>
"#,
        state = payment.state,
        back = escape(&back),
    );
    let mut response = Html(html).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    Ok(response)
}

/// Text for HTML (element content and quoted attributes).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
