//! A target's webhook endpoint as its owner keeps it (a partner's, a developer's, a bot's): where events
//! go and the secret that signs them (made on first use, rotated on request, shown only then), a signed
//! test sent now, and the deliveries its owner reads, retries and sends again.

use serde_json::{Value, json};

use super::{SendOutcome, Webhooks, endpoint, send_signed};
use crate::clock::iso_time;
use crate::signing;
pub use crate::store::outbox::{
    DeliveryQuery, NO_URL, Target, WebhookDelivery, find_delivery, list_deliveries, retry_failed_since, retry_now,
};
use crate::store::{developers, partners};
use crate::validate::{KeepError, check_url};

/// A target's endpoint settings: its URL, the first characters of its secret, and the whole secret when it
/// was made or rotated now (shown this once).
pub struct Settings {
    pub url: Option<String>,
    pub secret_prefix: String,
    pub new_secret: Option<String>,
}

/// Sets where `target`'s events go (`url`: HTTPS to a public host, `localhost` in dev mode; absent or empty:
/// nowhere) and makes its secret on first use or when `rotate`.
pub async fn set(webhooks: &Webhooks, target: Target, url: Option<&str>, rotate: bool) -> Result<Settings, KeepError> {
    let db = &webhooks.db;
    let url = url.map(str::trim).filter(|u| !u.is_empty());
    if let Some(url) = url {
        check_url("webhook_url", url, webhooks.config.dev).await?;
    }
    let current = match target {
        Target::Developer(id) => developers::webhook_secret(db, id).await?,
        _ => partners::webhook_secret(db, target.id()).await?,
    };
    let new_secret = (current.is_none() || rotate).then(signing::new_secret);
    match target {
        Target::Developer(id) => developers::set_webhook(db, id, url, new_secret.as_deref()).await?,
        _ => partners::set_webhook(db, target.id(), url, new_secret.as_deref()).await?,
    }
    let secret = new_secret.clone().or(current).unwrap_or_default();
    Ok(Settings { url: url.map(str::to_string), secret_prefix: signing::secret_prefix(&secret), new_secret })
}

/// Sends one signed sample `message.status` event to `target`'s endpoint now (`partner`: the code the
/// sample names): what the endpoint answered, or [`NO_URL`] when it has none.
pub async fn test(webhooks: &Webhooks, target: Target, partner: &str) -> Result<SendOutcome, sqlx::Error> {
    let Some(endpoint) = endpoint(webhooks, target).await? else {
        return Ok(SendOutcome { status: None, error: Some(NO_URL.into()) });
    };
    let sample = json!({
        "event": "message.status",
        "partner": partner,
        "message_ref": "msg_test00000000000000000000",
        "message_id": 0,
        "seq": 0,
        "state": crate::names::MessageState::Delivered,
        "channel": "inapp",
        "phone": "+15550000000",
        "at": iso_time(webhooks.now()),
        "test": true,
    });
    Ok(send_test(webhooks, &endpoint, &sample).await)
}

/// Sends `body` (an event's JSON, its `event` named inside) once to `endpoint`, signed, as a test delivery.
pub async fn send_test(webhooks: &Webhooks, endpoint: &super::Endpoint, body: &Value) -> SendOutcome {
    let delivery_id = format!("dlv_test_{}", crate::secrets::random_alnum(20));
    send_signed(webhooks, endpoint, &delivery_id, body["event"].as_str().unwrap_or(""), &body.to_string()).await
}
