//! Payments the host owns. A guest's payment step becomes a payment (`pay_…`) of its partner, bot and
//! session, checked here (an ISO 4217 currency of [`CURRENCIES`], an amount in its minor units, > 0 and at
//! most `HUBBUB_PAYMENT_MAX_MINOR`), with a checkout at the configured [`PaymentProvider`]: Stripe (a
//! Checkout Session) or the dev checkout page the host serves itself (`/pay/{ref}`). Only a verified
//! provider outcome — a signed Stripe event, or the dev checkout — moves a payment along
//! `requires_payment → processing → succeeded | failed | canceled`, later `refunded`; the transition that
//! ends a payment also claims, in the same statement, the one call of the guest with
//! `user-event::payment` (the flow engine makes it, [`crate::flows::Flows::payment_outcome`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;

use crate::clock::SharedClock;
use crate::config::{Config, PaymentProviderKind};
use crate::events;
use crate::names::{PaymentState, ProviderName};
use crate::secrets::{constant_time_eq, random_alnum};
use crate::store::Db;
use crate::store::bots::Bot;
use crate::store::flows::Session;
use crate::store::payments::{self as store, NewPayment};
pub use crate::store::payments::{Filter, Payment, find_by_ref, list_for_partner};

/// ISO 4217 codes payments may use, with the exponent of their minor unit (cents: 2; yen: 0; fils: 3).
pub const CURRENCIES: &[(&str, u32)] = &[
    ("AED", 2),
    ("ARS", 2),
    ("AUD", 2),
    ("BGN", 2),
    ("BHD", 3),
    ("BRL", 2),
    ("CAD", 2),
    ("CHF", 2),
    ("CLP", 0),
    ("CNY", 2),
    ("COP", 2),
    ("CZK", 2),
    ("DKK", 2),
    ("EGP", 2),
    ("EUR", 2),
    ("GBP", 2),
    ("HKD", 2),
    ("HUF", 2),
    ("IDR", 2),
    ("ILS", 2),
    ("INR", 2),
    ("ISK", 0),
    ("JOD", 3),
    ("JPY", 0),
    ("KES", 2),
    ("KRW", 0),
    ("KWD", 3),
    ("MAD", 2),
    ("MXN", 2),
    ("MYR", 2),
    ("NGN", 2),
    ("NOK", 2),
    ("NZD", 2),
    ("OMR", 3),
    ("PEN", 2),
    ("PHP", 2),
    ("PKR", 2),
    ("PLN", 2),
    ("QAR", 2),
    ("RON", 2),
    ("SAR", 2),
    ("SEK", 2),
    ("SGD", 2),
    ("THB", 2),
    ("TND", 3),
    ("TRY", 2),
    ("TWD", 2),
    ("UAH", 2),
    ("USD", 2),
    ("VND", 0),
    ("ZAR", 2),
];

/// The minor-unit exponent of an ISO 4217 code this host takes (upper case), if any.
pub fn exponent(currency: &str) -> Option<u32> {
    CURRENCIES.iter().find(|(code, _)| *code == currency).map(|(_, e)| *e)
}

/// `amount_minor` of `currency` for people: `12.50 EUR`, `500 JPY`, `1.250 BHD`.
pub fn display_amount(amount_minor: i64, currency: &str) -> String {
    let exp = exponent(currency).unwrap_or(2);
    if exp == 0 {
        return format!("{amount_minor} {currency}");
    }
    let unit = 10i64.pow(exp);
    format!("{}.{:0width$} {currency}", amount_minor / unit, amount_minor % unit, width = exp as usize)
}

/// What a guest asked for in a payment step (`{id, amount_minor, currency, description}`).
#[derive(Debug, Clone)]
pub struct Request {
    pub id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub description: String,
}

/// Reads and checks a payment step's `payment` object; the error says what the guest got wrong.
pub fn check_request(payment: &Value, max_minor: i64) -> Result<Request, String> {
    let id = payment["id"].as_str().filter(|s| !s.is_empty()).ok_or("a payment needs an id")?;
    if id.chars().count() > 200 {
        return Err("a payment id is at most 200 characters".into());
    }
    let currency = payment["currency"].as_str().unwrap_or("");
    if exponent(currency).is_none() {
        return Err(format!("payment currency {currency:?} is not an ISO 4217 code this host takes"));
    }
    let amount = payment["amount_minor"]
        .as_u64()
        .ok_or("payment amount_minor must be a whole number of the currency's minor units")?;
    if amount == 0 {
        return Err("payment amount_minor must be greater than 0".into());
    }
    if amount > max_minor.max(0) as u64 {
        return Err(format!("payment amount_minor {amount} is over this host's maximum of {max_minor}"));
    }
    let description = payment["description"].as_str().unwrap_or("").trim().to_string();
    if description.chars().count() > 500 {
        return Err("a payment description is at most 500 characters".into());
    }
    Ok(Request { id: id.to_string(), amount_minor: amount as i64, currency: currency.to_string(), description })
}

/// Why a payment could not be made or moved.
#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    /// The guest's request is not one the host takes (a `bot_error`).
    #[error("{0}")]
    Invalid(String),
    /// No payment provider is configured on this host.
    #[error("payments are not configured on this host (HUBBUB_PAYMENT_PROVIDER)")]
    NotConfigured,
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The payment is not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    /// The provider refused or did not answer.
    #[error("{0}")]
    Provider(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A checkout the provider opened: where the user pays, and the provider's id for it.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub url: String,
    pub provider_ref: Option<String>,
}

/// Whether a refund is done or will be confirmed by the provider later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundOutcome {
    Done,
    Pending,
}

pub type ProviderFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Takes payments: opens a checkout for a payment, refunds one.
pub trait PaymentProvider: Send + Sync {
    fn name(&self) -> ProviderName;
    /// Opens the checkout of `payment`; `return_url` is where the user goes back to the app.
    fn checkout<'a>(&'a self, payment: &'a Payment, return_url: &'a str) -> ProviderFuture<'a, Checkout>;
    /// Refunds `payment` in full.
    fn refund<'a>(&'a self, payment: &'a Payment) -> ProviderFuture<'a, RefundOutcome>;
}

/// The dev checkout: the host's own page at `/pay/{ref}` with Pay, Decline and Cancel.
pub struct DevCheckout {
    pub public_url: String,
}

impl PaymentProvider for DevCheckout {
    fn name(&self) -> ProviderName {
        ProviderName::Dev
    }

    fn checkout<'a>(&'a self, payment: &'a Payment, _: &'a str) -> ProviderFuture<'a, Checkout> {
        let url = format!("{}/pay/{}", self.public_url.trim_end_matches('/'), payment.reference);
        Box::pin(async move { Ok(Checkout { url, provider_ref: None }) })
    }

    fn refund<'a>(&'a self, _: &'a Payment) -> ProviderFuture<'a, RefundOutcome> {
        Box::pin(async { Ok(RefundOutcome::Done) })
    }
}

/// Stripe: `POST /v1/checkout/sessions` (form-encoded, with an `Idempotency-Key`), `POST /v1/refunds`.
pub struct Stripe {
    pub http: reqwest::Client,
    pub base_url: String,
    pub secret_key: String,
}

impl Stripe {
    async fn post(&self, path: &str, idempotency_key: &str, fields: &[(&str, String)]) -> Result<Value, String> {
        let url = format!("{}{path}", self.base_url.trim_end_matches('/'));
        let form = serde_urlencoded::to_string(fields).map_err(|e| format!("stripe: {e}"))?;
        let response = self
            .http
            .post(url)
            .bearer_auth(&self.secret_key)
            .header("Idempotency-Key", idempotency_key)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    "stripe: timed out".to_string()
                } else if e.is_connect() {
                    "stripe: could not connect".to_string()
                } else {
                    format!("stripe: {e}")
                }
            })?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let detail = body["error"]["message"].as_str().unwrap_or("");
            return Err(format!("stripe: HTTP {} {detail}", status.as_u16()).trim_end().to_string());
        }
        Ok(body)
    }
}

impl PaymentProvider for Stripe {
    fn name(&self) -> ProviderName {
        ProviderName::Stripe
    }

    fn checkout<'a>(&'a self, payment: &'a Payment, return_url: &'a str) -> ProviderFuture<'a, Checkout> {
        Box::pin(async move {
            let name = if payment.description.is_empty() { "Payment".to_string() } else { payment.description.clone() };
            let fields = [
                ("mode", "payment".to_string()),
                ("client_reference_id", payment.reference.clone()),
                ("metadata[payment_ref]", payment.reference.clone()),
                ("payment_intent_data[metadata][payment_ref]", payment.reference.clone()),
                ("line_items[0][quantity]", "1".to_string()),
                ("line_items[0][price_data][currency]", payment.currency.to_ascii_lowercase()),
                ("line_items[0][price_data][unit_amount]", payment.amount_minor.to_string()),
                ("line_items[0][price_data][product_data][name]", name),
                ("success_url", return_url.to_string()),
                ("cancel_url", return_url.to_string()),
            ];
            let body =
                self.post("/v1/checkout/sessions", &format!("hubbub-checkout-{}", payment.reference), &fields).await?;
            let url = body["url"].as_str().filter(|u| !u.is_empty()).ok_or("stripe: the session has no url")?;
            Ok(Checkout { url: url.to_string(), provider_ref: body["id"].as_str().map(str::to_string) })
        })
    }

    fn refund<'a>(&'a self, payment: &'a Payment) -> ProviderFuture<'a, RefundOutcome> {
        Box::pin(async move {
            let intent = payment
                .provider_payment
                .clone()
                .ok_or("stripe: the payment intent of this payment is not known yet (no checkout.session.completed)")?;
            let fields = [("payment_intent", intent), ("metadata[payment_ref]", payment.reference.clone())];
            let body = self.post("/v1/refunds", &format!("hubbub-refund-{}", payment.reference), &fields).await?;
            match body["status"].as_str() {
                Some("succeeded") => Ok(RefundOutcome::Done),
                Some("failed" | "canceled") => {
                    Err(format!("stripe: the refund {}", body["status"].as_str().unwrap_or("")))
                }
                _ => Ok(RefundOutcome::Pending),
            }
        })
    }
}

/// Tolerance of a `Stripe-Signature` timestamp, in seconds (Stripe's libraries use 5 minutes).
pub const STRIPE_TOLERANCE_S: i64 = 300;

/// Checks a `Stripe-Signature` header (`t=<unix>,v1=<hex>[,v1=…]`): one `v1` must be the hex
/// HMAC-SHA256, keyed with the endpoint's signing secret, of `<t>.<raw body>` (compared in constant time),
/// and `t` within [`STRIPE_TOLERANCE_S`] of `now_s`.
pub fn verify_stripe_signature(
    secret: &str,
    header: Option<&str>,
    body: &[u8],
    now_s: i64,
) -> Result<(), &'static str> {
    let header = header.ok_or("Stripe-Signature is missing")?;
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", s)) => signatures.push(s),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or("Stripe-Signature has no timestamp")?;
    if signatures.is_empty() {
        return Err("Stripe-Signature has no v1 signature");
    }
    let expected = stripe_signature(secret, timestamp, body);
    if !signatures.iter().fold(false, |found, s| constant_time_eq(s, &expected) | found) {
        return Err("Stripe-Signature does not match");
    }
    if (now_s - timestamp).abs() > STRIPE_TOLERANCE_S {
        return Err("Stripe-Signature is too old (or from the future)");
    }
    Ok(())
}

/// The hex HMAC-SHA256 of `<timestamp>.<body>` keyed with `secret` (Stripe's `v1` scheme).
pub fn stripe_signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    crate::secrets::hex(&mac.finalize().into_bytes())
}

/// What a provider event says about one payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Our `pay_…` ref, when the event carries it (`client_reference_id`, `metadata.payment_ref`).
    pub reference: Option<String>,
    /// The provider's payment id (Stripe's PaymentIntent), when the event carries it.
    pub provider_payment: Option<String>,
    pub state: PaymentState,
    /// The amount and currency the provider took, to check against the payment's.
    pub amount_minor: Option<i64>,
    pub currency: Option<String>,
}

/// The outcome a Stripe event reports, for the event types payments listen to; `None` for the others.
pub fn stripe_outcome(event: &Value) -> Option<Outcome> {
    let object = &event["data"]["object"];
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    let reference = text(&object["client_reference_id"]).or_else(|| text(&object["metadata"]["payment_ref"]));
    let state = match event["type"].as_str()? {
        "checkout.session.completed" => {
            if object["payment_status"] == "paid" {
                PaymentState::Succeeded
            } else {
                PaymentState::Processing
            }
        }
        "checkout.session.async_payment_succeeded" => PaymentState::Succeeded,
        "checkout.session.async_payment_failed" => PaymentState::Failed,
        "checkout.session.expired" => PaymentState::Canceled,
        "charge.refunded" => {
            if object["refunded"] != true {
                return None;
            }
            return Some(Outcome {
                reference,
                provider_payment: text(&object["payment_intent"]),
                state: PaymentState::Refunded,
                amount_minor: None,
                currency: None,
            });
        }
        _ => return None,
    };
    Some(Outcome {
        reference,
        provider_payment: text(&object["payment_intent"]),
        state,
        amount_minor: object["amount_total"].as_i64(),
        currency: text(&object["currency"]).map(|c| c.to_ascii_uppercase()),
    })
}

/// What applying an outcome did.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The payment after it (unchanged when the outcome changed nothing).
    pub payment: Payment,
    /// Whether it changed the payment's state.
    pub changed: bool,
    /// Whether this call claimed the one guest notification: the caller tells the guest now.
    pub notify_guest: bool,
}

/// The payments service: the database, the clock, the configured provider and the limits.
pub struct Payments {
    pub db: Db,
    pub clock: SharedClock,
    pub provider: Option<Arc<dyn PaymentProvider>>,
    pub max_minor: i64,
    pub public_url: String,
}

impl Payments {
    /// The service the configuration selects: `HUBBUB_PAYMENT_PROVIDER`, else the dev checkout in dev
    /// mode, else none (payment steps are refused).
    pub fn new(config: &Config, db: Db, clock: SharedClock) -> Payments {
        let kind = config.payment_provider.or(config.dev.then_some(PaymentProviderKind::Dev));
        let provider: Option<Arc<dyn PaymentProvider>> = match kind {
            Some(PaymentProviderKind::Dev) => Some(Arc::new(DevCheckout { public_url: config.public_url.clone() })),
            Some(PaymentProviderKind::Stripe) => Some(Arc::new(Stripe {
                http: reqwest::Client::builder()
                    .timeout(Duration::from_millis(config.provider_timeout_ms))
                    .connect_timeout(Duration::from_millis(config.provider_timeout_ms.min(5_000)))
                    .build()
                    .expect("HTTP client builds"),
                base_url: config.stripe_base_url.clone(),
                secret_key: config.stripe_secret_key.clone().unwrap_or_default(),
            })),
            None => None,
        };
        Payments { db, clock, provider, max_minor: config.payment_max_minor, public_url: config.public_url.clone() }
    }

    /// Where the app shows `session` (the checkout's way back).
    pub fn return_url(&self, session: &Session, bot: &Bot) -> String {
        format!("{}{}", self.public_url.trim_end_matches('/'), app_path(session, &bot.code))
    }

    /// Creates the payment a guest asked for in `session` and opens its checkout. A checkout the provider
    /// refuses leaves the payment `failed` (the guest never saw it: its reply is not kept).
    pub async fn create(&self, bot: &Bot, session: &Session, request: Request) -> Result<Payment, PaymentError> {
        let provider = self.provider.as_ref().ok_or(PaymentError::NotConfigured)?;
        let now = self.clock.now_ms();
        let new = NewPayment {
            reference: format!("pay_{}", random_alnum(28)),
            partner_id: bot.partner_id,
            partner_code: bot.partner_code.clone(),
            bot_id: bot.id,
            bot_code: bot.code.clone(),
            session_id: session.id,
            phone: session.phone.clone(),
            guest_id: request.id,
            amount_minor: request.amount_minor,
            currency: request.currency,
            description: request.description,
            provider: provider.name(),
        };
        let payment = store::create(&self.db, &new, now, events::payment_status).await?;
        match provider.checkout(&payment, &self.return_url(session, bot)).await {
            Ok(checkout) => {
                Ok(store::set_checkout(&self.db, payment.id, &checkout.url, checkout.provider_ref.as_deref()).await?)
            }
            Err(why) => {
                tracing::warn!(payment_id = payment.id, error = %why, "checkout could not be opened");
                let mut tx = self.db.begin().await?;
                store::transition_in(
                    &mut tx,
                    payment.id,
                    PaymentState::Failed,
                    true,
                    self.clock.now_ms(),
                    events::payment_status,
                )
                .await?;
                tx.commit().await?;
                Err(PaymentError::Provider(why))
            }
        }
    }

    /// Applies a verified outcome to the payment `reference` (or, without it, to the one with this
    /// provider payment id). With `event_id`, the outcome is applied only if the provider's event was not
    /// seen before, in the same transaction. A state the payment may not take (a late or repeated event)
    /// changes nothing.
    pub async fn apply(
        &self,
        provider: ProviderName,
        event_id: Option<&str>,
        outcome: &Outcome,
    ) -> Result<Option<Applied>, PaymentError> {
        let now = self.clock.now_ms();
        let mut tx = self.db.begin().await?;
        if let Some(event_id) = event_id
            && !store::first_event_in(&mut tx, provider, event_id, now).await?
        {
            return Ok(None);
        }
        let found = match (&outcome.reference, &outcome.provider_payment) {
            (Some(reference), _) => store::find_by_ref_in(&mut tx, reference).await?,
            (None, Some(intent)) => store::find_by_provider_payment_in(&mut tx, provider, intent).await?,
            (None, None) => None,
        };
        let Some(payment) = found.filter(|p| p.provider == provider) else {
            tx.commit().await?;
            return Ok(None);
        };
        // An event that says money was taken must say how much, and it must be the payment's amount.
        let takes_money = matches!(outcome.state, PaymentState::Succeeded | PaymentState::Processing);
        let amount_ok = match (outcome.amount_minor, &outcome.currency) {
            (Some(amount), Some(currency)) => amount == payment.amount_minor && *currency == payment.currency,
            (None, None) => !takes_money,
            _ => false,
        };
        if !amount_ok {
            tracing::warn!(
                payment_id = payment.id,
                amount = outcome.amount_minor,
                currency = outcome.currency.as_deref(),
                "provider event without the payment's amount: ignored"
            );
            tx.commit().await?;
            return Ok(Some(Applied { payment, changed: false, notify_guest: false }));
        }
        if let Some(intent) = &outcome.provider_payment {
            store::set_provider_payment_in(&mut tx, payment.id, intent).await?;
        }
        let applied =
            match store::transition_in(&mut tx, payment.id, outcome.state, false, now, events::payment_status).await? {
                Some((payment, notify_guest)) => Applied { payment, changed: true, notify_guest },
                None => Applied { payment, changed: false, notify_guest: false },
            };
        tx.commit().await?;
        Ok(Some(applied))
    }

    /// Refunds a succeeded payment in full through its provider: `refunded` when the provider confirms at
    /// once (the dev checkout always does), else once its event says so.
    pub async fn refund(&self, payment: &Payment) -> Result<Payment, PaymentError> {
        if payment.state != PaymentState::Succeeded {
            return Err(PaymentError::Conflict(format!(
                "only a succeeded payment can be refunded; this one is {}",
                payment.state
            )));
        }
        let provider =
            self.provider.as_ref().filter(|p| p.name() == payment.provider).ok_or_else(|| {
                PaymentError::Conflict(format!("the {} provider is not configured", payment.provider))
            })?;
        store::mark_refund_requested(&self.db, payment.id, self.clock.now_ms()).await?;
        match provider.refund(payment).await.map_err(PaymentError::Provider)? {
            RefundOutcome::Done => {
                let mut tx = self.db.begin().await?;
                store::transition_in(
                    &mut tx,
                    payment.id,
                    PaymentState::Refunded,
                    false,
                    self.clock.now_ms(),
                    events::payment_status,
                )
                .await?;
                tx.commit().await?;
            }
            RefundOutcome::Pending => {}
        }
        store::find(&self.db, payment.id).await?.ok_or(PaymentError::NotFound("payment"))
    }
}

/// The app's page of a session: `/forms/{ref}` for a flow, `/bots/{code}` for a chat.
pub fn app_path(session: &Session, bot_code: &str) -> String {
    match session.kind {
        crate::names::SessionKind::Flow => format!("/forms/{}", session.reference),
        crate::names::SessionKind::Chat => format!("/bots/{bot_code}"),
    }
}

/// Partner `partner_id`'s payment `id`: by its `ref` (`pay_…`) or its number (`parse_id` reads one; a
/// number it refuses is the caller's to answer); another partner's is none.
pub async fn find_for_partner(
    db: &Db,
    partner_id: i64,
    id: &str,
    number: Option<i64>,
) -> Result<Option<Payment>, sqlx::Error> {
    if id.starts_with("pay_") {
        return Ok(store::find_by_ref(db, id).await?.filter(|p| p.partner_id == partner_id));
    }
    match number {
        Some(n) => store::find_for_partner(db, partner_id, n).await,
        None => Ok(None),
    }
}

/// Where the app opens the session a payment belongs to (`/` when it is gone).
pub async fn back_path(db: &Db, payment: &Payment) -> Result<String, sqlx::Error> {
    let session = crate::store::flows::find_by_id(db, payment.session_id).await?;
    Ok(session.map(|s| app_path(&s, &payment.bot_code)).unwrap_or_else(|| "/".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_and_currencies_are_checked() {
        let ok = check_request(&serde_json::json!({"id": "p", "amount_minor": 350, "currency": "EUR"}), 1000).unwrap();
        assert_eq!((ok.amount_minor, ok.currency.as_str()), (350, "EUR"));
        for bad in [
            serde_json::json!({"id": "p", "amount_minor": 0, "currency": "EUR"}),
            serde_json::json!({"id": "p", "amount_minor": 1001, "currency": "EUR"}),
            serde_json::json!({"id": "p", "amount_minor": -5, "currency": "EUR"}),
            serde_json::json!({"id": "p", "amount_minor": 1.5, "currency": "EUR"}),
            serde_json::json!({"id": "p", "amount_minor": 5, "currency": "XXX"}),
            serde_json::json!({"id": "p", "amount_minor": 5, "currency": "eur"}),
            serde_json::json!({"id": "", "amount_minor": 5, "currency": "EUR"}),
        ] {
            assert!(check_request(&bad, 1000).is_err(), "{bad}");
        }
        assert_eq!(exponent("JPY"), Some(0));
        assert_eq!(exponent("KRW"), Some(0));
        assert_eq!(exponent("BHD"), Some(3));
        assert_eq!(display_amount(1250, "EUR"), "12.50 EUR");
        assert_eq!(display_amount(500, "JPY"), "500 JPY");
        assert_eq!(display_amount(1250, "KWD"), "1.250 KWD");
    }

    #[test]
    fn final_states_never_move_back() {
        use crate::names::PaymentState::*;
        assert!(RequiresPayment.may_become(Processing));
        assert!(Processing.may_become(Succeeded));
        assert!(!Succeeded.may_become(Processing));
        assert!(!Failed.may_become(Succeeded));
        assert!(Succeeded.may_become(Refunded));
        assert!(!Processing.may_become(Refunded));
    }

    #[test]
    fn stripe_signatures_are_checked_with_a_tolerance() {
        let body = br#"{"id":"evt_1"}"#;
        let sig = stripe_signature("whsec_x", 1000, body);
        let header = format!("t=1000,v1=deadbeef,v1={sig}");
        assert!(verify_stripe_signature("whsec_x", Some(&header), body, 1100).is_ok());
        assert!(verify_stripe_signature("whsec_x", Some(&header), body, 1000 + 301).is_err());
        assert!(verify_stripe_signature("whsec_y", Some(&header), body, 1000).is_err());
        assert!(verify_stripe_signature("whsec_x", Some(&header), b"{}", 1000).is_err());
        assert!(verify_stripe_signature("whsec_x", None, body, 1000).is_err());
    }
}
