//! `/messages`: send a hub message (every content type, templates, idempotency, E2E envelopes; `send`), read
//! one with its delivery attempts and list them (`read`), and mark read / unread (`mark`). The message record
//! every resource answers messages with lives here.

mod fallback;
mod mark;
mod read;
mod send;
pub(crate) use send::{created, idempotency_header};

use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::clock::record_time;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::messages::Message;
use crate::messages::MessageContent;
pub use crate::messages::compose::{self, Content, MAX_BODY_BYTES, SendMessage, client_ref};
use crate::names::{AttemptKind, AttemptState, Channel, ContentType, Direction, MessageState};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send::send_message, read::list_messages))
        .routes(routes!(mark::mark_many_read))
        .routes(routes!(read::get_message))
        .routes(routes!(mark::mark_read))
        .routes(routes!(mark::mark_unread))
        .routes(routes!(mark::cancel_message))
        .routes(routes!(fallback::get_delivery_settings, fallback::set_delivery_settings))
}

/// The content of a send request, checked (see [`compose::content`]).
pub async fn validate_content(
    state: &AppState,
    partner_id: i64,
    req: &SendMessage,
    phone: Option<&str>,
) -> ApiResult<Content> {
    Ok(compose::content(&state.db, state.config.dev, partner_id, req, phone).await?)
}

/// A message as the API answers it: the common fields, the template fields of a template send, and the
/// content fields of its type.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Message)]
pub struct MessageRecord {
    pub message_id: i64,
    #[serde(rename = "ref")]
    pub reference: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    pub phone: String,
    /// The sending partner's code.
    pub partner: String,
    /// The sending partner's name, as people see it.
    pub partner_name: String,
    /// Who the person sees as the writer of an agent's reply in a conversation: the first word of the
    /// member's display name when they wrote (null: any other message, a reply sent with an API key, or a
    /// member without a name; the app then shows `partner_name`).
    pub sender_name: Option<String>,
    /// The partner's only (never in `/me`): the member who wrote an agent's reply, with their whole display
    /// name when they wrote. Absent for other messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<AuthorRecord>,
    pub direction: Direction,
    #[schema(value_type = ContentType)]
    pub content_type: String,
    pub body: Option<String>,
    pub state: MessageState,
    pub priority: String,
    /// The channel that carried it (null until sent).
    pub channel: Option<Channel>,
    /// The support conversation it belongs to (null for hub messages).
    pub conversation_id: Option<i64>,
    pub created_at: String,
    /// Why a `failed` message was never tried, by its person's choice in the app: `blocked_by_user` (they
    /// blocked this partner) or `marketing_refused` (a marketing message; they turned this partner's
    /// marketing off). Absent otherwise (a failed try says why in its attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When a message sent later goes (absent: it went, or goes, at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rendered_body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    #[serde(flatten)]
    pub content: MessageContent,
    /// With `include=attempts`: every delivery attempt, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Vec<AttemptRecord>>,
    /// With `include=events`: every state the message has been in, oldest first (from `queued`; each later
    /// one is a `message.status` event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<StateChangeRecord>>,
}

/// The member who wrote a message (their id may name a member since removed).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuthorRecord {
    pub member_id: i64,
    pub name: Option<String>,
}

/// One change of a message's state.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MessageStateChange)]
pub struct StateChangeRecord {
    pub state: MessageState,
    /// The channel the message was on when it changed (none before one was tried).
    pub channel: Option<Channel>,
    pub at: String,
}

/// One delivery attempt of a message.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptRecord {
    pub kind: AttemptKind,
    pub channel: Channel,
    /// `waiting`: not tried yet, until `retry_at`; `error` says why (`paced`: the sender's rate is spent
    /// until its turn; `throttled`: the provider asked us to slow down; `provider_unavailable`: the
    /// provider is down, within the partner's retry budget; `over_daily_limit`: Meta's daily limit of new
    /// people is reached; `quiet_hours`: the person's quiet hours, until they end). A `skipped` attempt's
    /// `error` says why it was not tried (`opted_out`, `outside_24h_window`, `channel_refused_by_user`: the
    /// person refuses this channel in the app, `muted_by_user`: they muted this partner, the hub only).
    pub state: AttemptState,
    pub error: Option<String>,
    /// The provider's message id (Twilio MessageSid, WhatsApp message id); receipts are matched by it.
    pub provider_ref: Option<String>,
    pub at: String,
    /// When a `waiting` attempt is tried again (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
}

impl From<crate::messages::DeliveryAttempt> for AttemptRecord {
    fn from(a: crate::messages::DeliveryAttempt) -> Self {
        AttemptRecord {
            kind: a.kind,
            channel: a.channel,
            state: a.state,
            error: a.error,
            provider_ref: a.provider_ref,
            at: record_time(a.at),
            retry_at: a.retry_at.map(record_time),
        }
    }
}

impl MessageRecord {
    /// A message as one of the user's devices sees it: the key wraps of other devices left out, and who of
    /// the partner wrote it by first name only.
    pub fn for_device(m: &Message, device: Option<&str>) -> MessageRecord {
        let mut record = MessageRecord::from(m);
        record.author = None;
        if let Some(envelope) = record.content.e2e_envelope.as_mut() {
            let mut view = serde_json::json!({ "e2e_envelope": envelope.take() });
            crate::encryption::envelope_for_device(&mut view, device);
            *envelope = view["e2e_envelope"].take();
        }
        record
    }
}

impl From<&Message> for MessageRecord {
    fn from(m: &Message) -> Self {
        let template = m.template_code.is_some();
        MessageRecord {
            message_id: m.id,
            reference: m.reference.clone(),
            phone: m.phone.clone(),
            partner: m.partner_code.clone(),
            partner_name: m.partner_name.clone(),
            sender_name: crate::members::first_name(m.author_name.as_deref()),
            author: m.author_id.map(|member_id| AuthorRecord { member_id, name: m.author_name.clone() }),
            direction: m.direction,
            content_type: m.content_type.clone(),
            body: m.body.clone(),
            state: m.state,
            priority: m.priority.clone(),
            channel: m.channel,
            conversation_id: m.conversation_id,
            created_at: record_time(m.created_at),
            error: m.error.clone().filter(|_| m.state == MessageState::Failed),
            send_at: m.send_at.map(record_time),
            template_code: m.template_code.clone(),
            rendered_body: m.rendered_body.clone().filter(|_| template),
            lang: m.lang.clone().filter(|_| template),
            content: serde_json::from_value(m.content.clone()).unwrap_or_default(),
            attempts: None,
            events: None,
        }
    }
}
