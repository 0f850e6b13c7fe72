//! Payloads of the events partners receive, built in one place so every producer sends the same shape.
//! Each is a type, so the OpenAPI document describes exactly what is sent (its `webhooks`).

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::clock::{Millis, iso_time};
use crate::names::{AttemptKind, AttemptState, Channel, Direction, MessageState, TemplateStatus};
use crate::store::conversations::Conversation;
use crate::store::deliveries::NewAttempt;
use crate::store::messages::Message;
use crate::store::templates::Template;

/// `message.status`: a delivery state change of a message. `seq` only grows per message.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageStatusEvent {
    /// `message.status`.
    pub event: &'static str,
    pub partner: String,
    pub message_ref: String,
    pub message_id: i64,
    /// Grows with each change of this message: apply an event only when its `seq` is higher than the last.
    pub seq: i64,
    pub state: MessageState,
    pub channel: Channel,
    pub phone: String,
    /// Why a `failed` message was never tried: `blocked_by_user` (the person blocked the partner in the app)
    /// or `marketing_refused` (they turned its marketing off). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// ISO 8601 UTC.
    pub at: String,
}

/// `message.attempt`: one try of a message on WhatsApp or SMS (for partners that asked for them: `PUT
/// /settings/delivery {"attempt_events": true}`): sent, failed, skipped, or waiting until `retry_at`.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageAttemptEvent {
    /// `message.attempt`.
    pub event: &'static str,
    pub partner: String,
    pub message_ref: String,
    pub message_id: i64,
    /// `delivery` (the message) or `alert` (the opaque alert about an encrypted message).
    pub kind: AttemptKind,
    pub channel: Channel,
    pub state: AttemptState,
    /// Why it failed, was skipped or waits (`paced`, `throttled`, `provider_unavailable`, …).
    pub error: Option<String>,
    /// The provider's id of what it took.
    pub provider_ref: Option<String>,
    /// When a waiting try goes again (ISO 8601 UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
    pub phone: String,
    /// ISO 8601 UTC.
    pub at: String,
}

/// `template.status`: a review decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct TemplateStatusEvent {
    /// `template.status`.
    pub event: &'static str,
    pub partner: String,
    pub template_id: i64,
    pub code: String,
    pub lang: String,
    pub channel: String,
    pub status: TemplateStatus,
    /// Why it was rejected.
    pub reason: Option<String>,
    pub at: String,
}

/// `account.claimed`: the user verified the phone of an account linked to the partner.
#[derive(Debug, Serialize, ToSchema)]
pub struct AccountClaimedEvent {
    /// `account.claimed`.
    pub event: &'static str,
    pub partner: String,
    pub phone: String,
    pub at: String,
}

/// `account.erased`: a person linked to the partner erased themself (`DELETE /me/account`): their messages,
/// conversations and link to the partner are gone. The phone is not named: `phone_sha256` is the SHA-256 of
/// its E.164 form (lower-case hex), for the partner to find and erase its own records of them.
#[derive(Debug, Serialize, ToSchema)]
pub struct AccountErasedEvent {
    /// `account.erased`.
    pub event: &'static str,
    pub partner: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub phone_sha256: String,
    pub at: String,
}

/// `conversation.message`: a new message in a support conversation (no body when encrypted).
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationMessageEvent {
    /// `conversation.message`.
    pub event: &'static str,
    pub partner: String,
    pub conversation_id: i64,
    /// The conversation's ref.
    #[serde(rename = "ref")]
    pub reference: String,
    pub message_ref: String,
    pub direction: Direction,
    pub phone: String,
    pub at: String,
    /// The text; absent for end-to-end encrypted messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub body: Option<Option<String>>,
    /// `true` (and no body) for end-to-end encrypted messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
}

/// `conversation.sla_breached`: a conversation waited for the partner's agents past its SLA's due time.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationSlaBreachedEvent {
    /// `conversation.sla_breached`.
    pub event: &'static str,
    pub partner: String,
    pub conversation_id: i64,
    /// The conversation's ref.
    #[serde(rename = "ref")]
    pub reference: String,
    /// `first_response` or `next_response`.
    #[schema(value_type = crate::names::SlaKind)]
    pub sla: Option<crate::names::SlaKind>,
    /// When it was due (counted in the partner's business hours).
    pub due_at: Option<String>,
    /// The member it is assigned to, if any.
    pub assignee_id: Option<i64>,
    pub phone: String,
    pub at: String,
}

/// `payment.status`: a payment was created or changed state. `seq` only grows per payment.
#[derive(Debug, Serialize, ToSchema)]
pub struct PaymentStatusEvent {
    /// `payment.status`.
    pub event: &'static str,
    pub partner: String,
    pub payment_id: i64,
    /// The payment's ref (`pay_…`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// The bot's code.
    pub bot: String,
    pub phone: String,
    pub state: crate::names::PaymentState,
    pub amount_minor: i64,
    /// ISO 4217.
    pub currency: String,
    /// Grows with each change of this payment: apply an event only when its `seq` is higher than the last.
    pub seq: i64,
    pub at: String,
}

fn value(event: impl Serialize) -> Value {
    serde_json::to_value(event).expect("an event serialises")
}

/// `message.status` of `m` now, as JSON text: written straight from the struct (for each move of every
/// message, in the send path and in each `delivered` mark), not built as a [`Value`] first.
pub fn message_status(m: &Message, at: Millis) -> String {
    let event = MessageStatusEvent {
        event: "message.status",
        partner: m.partner_code.clone(),
        message_ref: m.reference.clone(),
        message_id: m.id,
        seq: m.seq,
        state: m.state,
        channel: m.channel.unwrap_or(Channel::Inapp),
        phone: m.phone.clone(),
        error: m.error.clone().filter(|_| m.state == MessageState::Failed),
        at: iso_time(at),
    };
    serde_json::to_string(&event).expect("an event serialises")
}

/// `message.attempt` of one try of `m`, recorded at `at`.
pub fn message_attempt(m: &Message, a: &NewAttempt, at: Millis) -> String {
    let event = MessageAttemptEvent {
        event: "message.attempt",
        partner: m.partner_code.clone(),
        message_ref: m.reference.clone(),
        message_id: m.id,
        kind: a.kind,
        channel: a.channel,
        state: a.state,
        error: a.error.clone(),
        provider_ref: a.provider_ref.clone(),
        retry_at: a.retry_at.map(iso_time),
        phone: m.phone.clone(),
        at: iso_time(at),
    };
    serde_json::to_string(&event).expect("an event serialises")
}

/// `template.status` of `t`.
pub fn template_status(partner_code: &str, t: &Template, at: Millis) -> Value {
    value(TemplateStatusEvent {
        event: "template.status",
        partner: partner_code.to_string(),
        template_id: t.id,
        code: t.code.clone(),
        lang: t.lang.clone(),
        channel: t.channel.clone(),
        status: t.status,
        reason: t.rejection_reason.clone(),
        at: iso_time(at),
    })
}

/// `account.claimed` of `phone`.
pub fn account_claimed(partner_code: &str, phone: &str, at: Millis) -> Value {
    value(AccountClaimedEvent {
        event: "account.claimed",
        partner: partner_code.to_string(),
        phone: phone.to_string(),
        at: iso_time(at),
    })
}

/// `account.erased` of `phone`, for the partner `partner_code`: its JSON text (the phone only as its hash).
pub fn account_erased(partner_code: &str, phone: &str, at: Millis) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(phone.as_bytes());
    let event = AccountErasedEvent {
        event: "account.erased",
        partner: partner_code.to_string(),
        phone_sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        at: iso_time(at),
    };
    serde_json::to_string(&event).expect("an event serialises")
}

/// `conversation.message` of `m` in `c`.
pub fn conversation_message(c: &Conversation, m: &Message, at: Millis) -> Value {
    let encrypted = m.content.get("encryption").is_some();
    value(ConversationMessageEvent {
        event: "conversation.message",
        partner: c.partner_code.clone(),
        conversation_id: c.id,
        reference: c.reference.clone(),
        message_ref: m.reference.clone(),
        direction: m.direction,
        phone: c.phone.clone(),
        at: iso_time(at),
        body: (!encrypted).then(|| m.body.clone()),
        encrypted: encrypted.then_some(true),
    })
}

/// `conversation.sla_breached` of `c`, breached at `at`.
pub fn conversation_sla_breached(c: &Conversation, at: Millis) -> Value {
    value(ConversationSlaBreachedEvent {
        event: "conversation.sla_breached",
        partner: c.partner_code.clone(),
        conversation_id: c.id,
        reference: c.reference.clone(),
        sla: c.sla_kind,
        due_at: c.sla_due_at.map(iso_time),
        assignee_id: c.assignee_id,
        phone: c.phone.clone(),
        at: iso_time(at),
    })
}

/// `payment.status` of `p` now.
pub fn payment_status(p: &crate::store::payments::Payment, at: Millis) -> Value {
    value(PaymentStatusEvent {
        event: "payment.status",
        partner: p.partner_code.clone(),
        payment_id: p.id,
        reference: p.reference.clone(),
        bot: p.bot_code.clone(),
        phone: p.phone.clone(),
        state: p.state,
        amount_minor: p.amount_minor,
        currency: p.currency.clone(),
        seq: p.seq,
        at: iso_time(at),
    })
}

/// A bot event (`bot.webhook.test`, and the user events of `webhook`-mode bots):
/// `{event, bot: {ref, code, partner_code}, payload}`.
pub fn bot_event(bot: &crate::store::bots::Bot, event: &str, payload: Value) -> Value {
    json!({
        "event": event,
        "bot": { "ref": bot.reference, "code": bot.code, "partner_code": bot.partner_code },
        "payload": payload,
    })
}
