//! WhatsApp templates are Meta's to approve. With the Cloud API as the WhatsApp provider and a business
//! account id configured, submitting a `whatsapp` template sends it to Meta (`POST /{waba}/message_templates`,
//! the body with positional parameters) and it stays `pending` until Meta decides; the decision arrives by the
//! webhook (`message_template_status_update`) or by the background poll, and becomes the template's status
//! with its `template.status` event, once however often it is heard.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Delivery;
use crate::config::{Config, WhatsAppProviderKind};
use crate::events;
use crate::names::TemplateStatus;
use crate::providers::{meta_call, meta_lang, meta_template_name};
use crate::store::partners;
use crate::store::templates::{self, Template};
use crate::template;

/// The Graph API account templates are submitted under.
pub struct MetaReview {
    http: reqwest::Client,
    base_url: String,
    token: String,
    business_account_id: String,
}

/// Why a submission did not reach Meta's queue or a decision.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// Meta could not be reached or failed (timeouts, 5xx): nothing changed, try again.
    #[error("{0}")]
    Unavailable(String),
    /// The partner has no template of that id.
    #[error("template not found")]
    NotFound,
    /// The template was submitted already (it is in this state).
    #[error("the template is already {0}")]
    Submitted(TemplateStatus),
    #[error(transparent)]
    Store(#[from] sqlx::Error),
}

/// Submits partner (`partner_id`, `partner_code`)'s template `id` for review: a WhatsApp template goes to
/// Meta when Meta's review is configured (a body our own review rejects never goes there); any other is
/// decided here ([`template::decide`]: the automatic review when `auto_review`, else `pending`).
pub async fn submit(
    delivery: &Delivery,
    (partner_id, partner_code): (i64, &str),
    id: i64,
    auto_review: bool,
) -> Result<Template, SubmitError> {
    let t = templates::find_template(&delivery.db, partner_id, id).await?.ok_or(SubmitError::NotFound)?;
    if !t.status.can_submit() {
        return Err(SubmitError::Submitted(t.status));
    }
    let by_meta = delivery.meta_review.as_ref().filter(|_| t.channel == crate::names::Channel::Whatsapp.as_str());
    if let Some(review) = by_meta.filter(|_| template::review(&t.body).is_ok()) {
        return review.submit(delivery, &t, partner_code).await;
    }
    template::decide(&delivery.db, (partner_id, partner_code), &t, auto_review, delivery.now())
        .await?
        .ok_or(SubmitError::NotFound)
}

impl MetaReview {
    /// Meta reviews `whatsapp` templates when the Cloud API is the WhatsApp provider and the business
    /// account id is set; otherwise they are reviewed like the others.
    pub fn from_config(config: &Config, http: &reqwest::Client) -> Option<MetaReview> {
        let cloud = config.whatsapp_provider == Some(WhatsAppProviderKind::Cloud)
            || (config.whatsapp_provider.is_none() && !config.dev && config.whatsapp_token.is_some());
        let account = config.whatsapp_business_account_id.clone().filter(|a| !a.is_empty())?;
        cloud.then(|| MetaReview {
            http: http.clone(),
            base_url: config.whatsapp_base_url.trim_end_matches('/').to_string(),
            token: config.whatsapp_token.clone().unwrap_or_default(),
            business_account_id: account,
        })
    }

    /// Submits a template to Meta: `pending` with Meta's id, or already decided when Meta answers so, or
    /// `rejected` with Meta's reason when Meta refuses it (4xx) — decisions with their `template.status`.
    pub async fn submit(&self, delivery: &Delivery, t: &Template, partner_code: &str) -> Result<Template, SubmitError> {
        let names = template::variables(&t.body);
        let mut body = json!({ "type": "BODY", "text": template::positional(&t.body) });
        if !names.is_empty() {
            // Meta asks for an example of each parameter; the placeholder names serve.
            body["example"] = json!({ "body_text": [names] });
        }
        let payload = json!({
            "name": meta_template_name(&t.code),
            "language": meta_lang(&t.lang),
            "category": t.category.to_uppercase(),
            "parameter_format": "POSITIONAL",
            "components": [body],
        });
        let url = format!("{}/{}/message_templates", self.base_url, self.business_account_id);
        let now = delivery.now();
        let answer = match meta_call(self.http.post(url).bearer_auth(&self.token).json(&payload)).await {
            Ok(answer) => answer,
            Err(refused) if refused.is_refusal() => {
                let reason = format!("refused by Meta: {}", refused.reason);
                let event = |t: &Template| events::template_status(partner_code, t, now);
                let rejected = templates::set_status(
                    &delivery.db,
                    t.partner_id,
                    t.id,
                    TemplateStatus::Rejected,
                    Some(&reason),
                    now,
                    event,
                )
                .await?;
                return rejected.ok_or(SubmitError::Store(sqlx::Error::RowNotFound));
            }
            Err(failed) => return Err(SubmitError::Unavailable(failed.reason)),
        };
        let id = answer["id"].as_str().map(str::to_string).or_else(|| answer["id"].as_i64().map(|n| n.to_string()));
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            return Err(SubmitError::Unavailable("whatsapp: Meta's answer carried no template id".into()));
        };
        templates::set_provider_template_id(&delivery.db, t.id, &id, now).await?;
        // Meta may decide at once (e.g. a utility template it approves automatically).
        if let Some(status) = answer["status"].as_str() {
            apply(delivery, &id, status, answer["rejected_reason"].as_str()).await?;
        }
        templates::find_any(&delivery.db, t.id).await?.ok_or(SubmitError::Store(sqlx::Error::RowNotFound))
    }

    /// Asks Meta where one submitted template stands and applies the answer.
    async fn check(&self, delivery: &Delivery, provider_id: &str) -> Result<(), String> {
        let url = format!("{}/{provider_id}?fields=status,rejected_reason", self.base_url);
        let request = self.http.get(url).bearer_auth(&self.token);
        let answer = meta_call(request).await.map_err(|e| e.reason)?;
        let status = answer["status"].as_str().unwrap_or("");
        apply(delivery, provider_id, status, answer["rejected_reason"].as_str()).await.map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// What Meta's template status means here: `None` while it is still deciding (or for a status that changes
/// nothing we send, such as `FLAGGED`).
pub fn decision(meta_status: &str, reason: Option<&str>) -> Option<(TemplateStatus, Option<String>)> {
    let reason = reason.filter(|r| !r.is_empty() && *r != "NONE");
    let why = |what: &str| {
        Some(match reason {
            Some(r) => format!("{what} by Meta: {r}"),
            None => format!("{what} by Meta"),
        })
    };
    match meta_status.to_ascii_uppercase().as_str() {
        "APPROVED" | "REINSTATED" => Some((TemplateStatus::Approved, None)),
        "REJECTED" => Some((TemplateStatus::Rejected, why("rejected"))),
        "DISABLED" => Some((TemplateStatus::Rejected, why("disabled"))),
        "PAUSED" => Some((TemplateStatus::Rejected, why("paused"))),
        "PENDING_DELETION" | "DELETED" | "ARCHIVED" => Some((TemplateStatus::Rejected, why("deleted"))),
        _ => None,
    }
}

/// Applies Meta's status for the template it knows as `provider_id`; whether the template changed.
pub async fn apply(
    delivery: &Delivery,
    provider_id: &str,
    meta_status: &str,
    reason: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let db = &delivery.db;
    let Some((status, reason)) = decision(meta_status, reason) else { return Ok(false) };
    let Some(t) = templates::find_by_provider_id(db, provider_id).await? else { return Ok(false) };
    let partner_code = partners::find_by_id(db, t.partner_id).await?.map(|p| p.code).unwrap_or_default();
    let now = delivery.now();
    let changed = templates::decide_by_provider(db, provider_id, status, reason.as_deref(), now, |t| {
        events::template_status(&partner_code, t, now)
    })
    .await?;
    Ok(changed.is_some())
}

/// The `(template id, status, reason)` updates of a WhatsApp webhook
/// (`entry[].changes[]` with `field: message_template_status_update`).
pub fn template_updates(payload: &Value) -> Vec<(String, String, Option<String>)> {
    let entries = payload["entry"].as_array().into_iter().flatten();
    let changes = entries.flat_map(|e| e["changes"].as_array().into_iter().flatten());
    changes
        .filter(|c| c["field"] == "message_template_status_update")
        .filter_map(|c| {
            let v = &c["value"];
            let id = v["message_template_id"]
                .as_str()
                .map(str::to_string)
                .or_else(|| v["message_template_id"].as_i64().map(|n| n.to_string()))?;
            Some((id, v["event"].as_str()?.to_string(), v["reason"].as_str().map(str::to_string)))
        })
        .collect()
}

/// Asks Meta about every template still waiting for it, every `HUBBUB_WHATSAPP_TEMPLATE_SYNC_S`, until
/// `stop` (the webhook usually tells first; this catches what it missed).
pub async fn run_sync(delivery: Arc<Delivery>, stop: CancellationToken) {
    let Some(review) = delivery.meta_review.as_ref() else { return stop.cancelled().await };
    let every = Duration::from_secs(delivery.config.whatsapp_template_sync_s.max(1));
    loop {
        match templates::list_pending(&delivery.db, true).await {
            Ok(waiting) => {
                for t in waiting {
                    let Some(id) = t.provider_template_id.as_deref() else { continue };
                    if let Err(why) = review.check(&delivery, id).await {
                        tracing::warn!(template_id = t.id, %why, "asking Meta about a template failed");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing templates waiting for Meta failed"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_statuses_become_template_statuses() {
        assert_eq!(decision("APPROVED", Some("NONE")), Some((TemplateStatus::Approved, None)));
        assert_eq!(
            decision("REJECTED", Some("INVALID_FORMAT")),
            Some((TemplateStatus::Rejected, Some("rejected by Meta: INVALID_FORMAT".into())))
        );
        assert_eq!(decision("PAUSED", None), Some((TemplateStatus::Rejected, Some("paused by Meta".into()))));
        assert_eq!(decision("PENDING", None), None);
        assert_eq!(decision("FLAGGED", None), None);
    }

    #[test]
    fn template_updates_are_read_from_their_webhook_field() {
        let payload = json!({"entry": [{"changes": [
            {"field": "message_template_status_update", "value": {"event": "APPROVED", "message_template_id": 77, "reason": "NONE"}},
            {"field": "messages", "value": {"statuses": []}},
        ]}]});
        assert_eq!(
            template_updates(&payload),
            vec![("77".to_string(), "APPROVED".to_string(), Some("NONE".to_string()))]
        );
    }
}
