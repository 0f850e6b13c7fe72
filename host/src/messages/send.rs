//! Sending a hub message, as one call: the request's content checked ([`super::compose`]), the message
//! stored with its delivery job (the group-commit writer), an idempotent retry recognised, and the delivery
//! worker woken. When routing's answer is the hub alone (a claimed user with a device; not a code, not an
//! encrypted message, whose routes depend on more), the message is put in the hub as it is written — `sent`
//! on `inapp`, the user's `message.created` in the same transaction — instead of waiting for the worker, and
//! its job is only the fallback after the hub.

use serde_json::Value;
use tokio::sync::Notify;

use super::compose::{self, ComposeError, SendMessage};
use super::routing;
use crate::clock::Millis;
use crate::events;
use crate::names::{Direction, MessageState};
use crate::store::deliveries::{MessageWriter, Written};
use crate::store::messages::{self as store, Created, HubRoute, Message, NewMessage};
use crate::store::{Db, is_unique_violation};
use crate::validate::{Invalid, required_phone};

/// What a send needs of the host: the database, whether dev mode allows local URLs, the writer of new
/// messages, the delivery worker's wake-up, the default fallback window and who hears of a message put in
/// the hub.
pub struct Sending<'a> {
    pub db: &'a Db,
    pub dev: bool,
    pub writer: &'a MessageWriter,
    pub wake: &'a Notify,
    pub now: Millis,
    /// The host's fallback window after the hub (seconds), for a message and partner that set none.
    pub hub_fallback_after_s: u64,
    pub arrivals: &'a dyn HubArrivals,
}

/// Told of each message a send put in the hub for a user with a device subscribed to Web Push, once it is
/// written (those devices are pushed to). A user without one costs no more than the insert's own look.
pub trait HubArrivals: Send + Sync {
    fn arrived(&self, message: Message);
}

/// What a send did.
#[derive(Debug)]
pub enum Sent {
    /// A new message, queued for delivery.
    New(Message),
    /// The same `idempotency_key` with the same payload within 24 h: the original message, nothing new.
    Replayed(Message),
}

/// Why a send was refused.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Compose(#[from] ComposeError),
    /// The same `idempotency_key` with a different payload.
    #[error("idempotency_key was already used with a different payload")]
    IdempotencyConflict,
    /// A sender-chosen `ref` that another message has (refs are unique across the service).
    #[error("ref is already used by another message")]
    RefTaken,
    #[error(transparent)]
    Database(sqlx::Error),
}

impl From<Invalid> for SendError {
    fn from(e: Invalid) -> Self {
        SendError::Compose(ComposeError::Invalid(e))
    }
}

impl From<sqlx::Error> for SendError {
    /// Creating a message can only break a unique constraint through its ref (idempotency keys are handled
    /// in the insert).
    fn from(e: sqlx::Error) -> Self {
        if is_unique_violation(&e) { SendError::RefTaken } else { SendError::Database(e) }
    }
}

/// Sends `req` (whose JSON body as sent is `raw`) from the partner: checks it, stores it, wakes delivery.
/// `header_key` is the `Idempotency-Key` header, used when the body has no `idempotency_key`.
pub async fn send(
    host: &Sending<'_>,
    partner_id: i64,
    req: &SendMessage,
    raw: &Value,
    header_key: Option<String>,
) -> Result<Sent, SendError> {
    let phone = required_phone(req.phone.as_deref())?;
    let idempotency = compose::idempotency(req, raw, header_key)?;
    let send_at = compose::send_at(req.send_at.as_deref(), host.now)?;
    let content = compose::content(host.db, host.dev, partner_id, req, Some(phone)).await?;
    let mut message = content.into_message(partner_id, phone, Direction::Out, None);
    message.send_at = send_at;
    if let Some((key, hash)) = idempotency {
        message.idempotency_key = Some(key);
        message.request_hash = Some(hash);
    }
    accept(host, message).await
}

/// Accepts an outbound hub message made ready elsewhere (a developer's template send, a flow's card): the
/// one place a new outbound message is stored — with its delivery job (the group-commit writer), or in the
/// hub at once ([`route_now`]) —, an idempotent retry recognised (its `idempotency_key` and `request_hash`),
/// counted (`hubbub_messages_accepted_total`), and delivery woken.
pub async fn accept(host: &Sending<'_>, mut message: NewMessage) -> Result<Sent, SendError> {
    let partner_id = message.partner_id;
    let idempotency = message.idempotency_key.clone().zip(message.request_hash.clone());
    route_now(host, &mut message);
    let written = match host.writer.create(message, host.now).await {
        // Two identical retries racing (several hosts): the loser's chosen ref collides with the winner's
        // message, which is the one to replay.
        Err(e) if is_unique_violation(&e) && idempotency.is_some() => {
            let (key, hash) = idempotency.expect("checked");
            match store::find_replay(host.db, partner_id, &key, &hash).await? {
                Some(replay) => Written { created: replay, to_push: false },
                None => return Err(e.into()),
            }
        }
        other => other?,
    };
    match written.created {
        Created::New(m) => {
            tracing::info!(message_id = m.id, "message accepted");
            metrics::counter!("hubbub_messages_accepted_total").increment(1);
            if m.state == MessageState::Sent {
                // In the hub already: counted as the worker counts what it routes, and pushed to subscribed devices.
                routing::count(m.channel, m.state);
                if written.to_push {
                    host.arrivals.arrived(m.clone());
                }
            } else {
                host.wake.notify_one();
            }
            Ok(Sent::New(m))
        }
        Created::Replayed(m) => Ok(Sent::Replayed(m)),
        Created::KeyReused => Err(SendError::IdempotencyConflict),
    }
}

/// Cancels the partner's scheduled message `id` before it goes (see `store::messages::cancel_scheduled`).
pub async fn cancel(db: &Db, partner_id: i64, id: i64, now: Millis) -> Result<store::Canceled, sqlx::Error> {
    store::cancel_scheduled(db, partner_id, id, now, events::message_status).await
}

/// Lets `message` go into the hub as it is written, when it is a message whose route is the hub alone for a
/// recipient reached there (see the module's note): the writer reads the recipient in the insert itself and
/// applies routing's rule (`routing::reached_in_app`). A code's route depends on whether the user is online,
/// an encrypted message has its alert, an answer in a conversation goes where the user wrote from: the
/// worker routes those.
fn route_now(host: &Sending<'_>, message: &mut NewMessage) {
    let later = message.send_at.is_some();
    if later || message.priority == "otp" || routing::encrypted(&message.content) || message.conversation_id.is_some() {
        return;
    }
    message.hub = Some(HubRoute {
        reached: routing::reached_in_app,
        follow_up: routing::after_hub,
        default_after_s: host.hub_fallback_after_s,
        event: events::message_status,
    });
}
