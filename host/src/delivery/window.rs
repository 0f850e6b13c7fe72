//! What delivery asks of WhatsApp beside a send: the 24-hour window a person's last message opens, the
//! approved template a message goes out as outside it, and the typing indicator.

use serde_json::Value;

use super::{Delivery, Sending};
use crate::clock::Millis;
use crate::names::Channel;
use crate::providers::TemplateMessage;
use crate::store::messages::Message;
use crate::store::{templates, whatsapp};

/// How long after a person's last WhatsApp message free-form text may still reach them.
const WINDOW_MS: Millis = 24 * 60 * 60 * 1000;

/// The partner's `whatsapp` template of `code` in `lang` (default `en`) that may be sent (approved by Meta
/// when the Cloud API is the provider): such a template reaches a person outside the 24-hour window.
pub async fn find_whatsapp_template(
    delivery: &Delivery,
    partner_id: i64,
    code: &str,
    lang: Option<&str>,
) -> Result<Option<templates::Template>, sqlx::Error> {
    let reviewed_by_meta = delivery.whatsapp.has_free_form_window();
    templates::find_whatsapp_for_send(&delivery.db, partner_id, code, lang.unwrap_or("en"), reviewed_by_meta).await
}

/// Shows WhatsApp's typing indicator to the person of conversation `c` (who last wrote from WhatsApp), as an
/// answer to their latest message to the number the partner's messages go from; nothing when there is none.
/// A failure is only logged: a typing indicator is never worth an error.
pub async fn whatsapp_typing(delivery: &Delivery, c: &crate::store::conversations::Conversation) {
    let shown = async {
        let Some(sending) = delivery.sending(Some(c.partner_id), Channel::Whatsapp).await? else { return Ok(()) };
        let Some(latest) = whatsapp::latest_inbound_ref(&delivery.db, &sending.sender, &c.phone).await? else {
            return Ok(());
        };
        if let Err(error) = sending.provider.typing(&latest).await {
            tracing::info!(%error, "WhatsApp's typing indicator could not be shown");
        }
        Ok::<(), sqlx::Error>(())
    };
    if let Err(error) = shown.await {
        tracing::warn!(%error, "WhatsApp's typing indicator could not be shown");
    }
}

/// Whether `phone` wrote in the last 24 hours to the WhatsApp number `partner_id`'s messages go from (its own,
/// or the host's): free-form text may reach them from it.
pub async fn within_window(delivery: &Delivery, partner_id: i64, phone: &str) -> Result<bool, sqlx::Error> {
    let Some(sending) = delivery.sending(Some(partner_id), Channel::Whatsapp).await? else { return Ok(false) };
    window_open(delivery, &sending, phone).await
}

/// Whether `phone` wrote to the number of `sending` in the last 24 hours.
pub(super) async fn window_open(delivery: &Delivery, sending: &Sending, phone: &str) -> Result<bool, sqlx::Error> {
    let last = whatsapp::last_inbound(&delivery.db, &sending.account, &sending.sender, phone).await?;
    Ok(last.is_some_and(|at| delivery.now() - at < WINDOW_MS))
}

/// The approved WhatsApp template a WhatsApp try of a template message goes out as (any time, inside the
/// window or not): the partner's `whatsapp` template of the same code and language, approved by Meta when
/// the Cloud API is the provider, with the message's variables as its parameters.
pub(super) async fn whatsapp_template(
    delivery: &Delivery,
    channel: Channel,
    message: &Message,
) -> Result<Option<TemplateMessage>, sqlx::Error> {
    let (Channel::Whatsapp, Some(code)) = (channel, message.template_code.as_deref()) else {
        return Ok(None);
    };
    let Some(template) = find_whatsapp_template(delivery, message.partner_id, code, message.lang.as_deref()).await?
    else {
        return Ok(None);
    };
    let vars = message.content.get("vars").and_then(Value::as_object).cloned().unwrap_or_default();
    let Ok(text) = crate::template::render(&template.body, &vars, crate::messages::compose::MAX_BODY_BYTES) else {
        return Ok(None);
    };
    let parameters = template
        .variables
        .iter()
        .map(|name| match vars.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        })
        .collect();
    Ok(Some(TemplateMessage {
        name: crate::providers::meta_template_name(&template.code),
        lang: template.lang,
        parameters,
        text,
        marketing: template.category == crate::names::Category::Marketing.as_str(),
    }))
}
