//! Messages: what one may carry ([`compose`]), sending one ([`send`]), and the moves of its state that
//! people make — the app fetching or reading it, the partner marking it — each in its transaction with its
//! `message.status` event. The names of its states and channels are in [`crate::names`].

use crate::clock::Millis;
use crate::events;
use crate::names::{Channel, E2eMode, Encryption, MessageState};
use crate::store::Db;
use crate::store::messages as store;
pub use crate::store::messages::{
    Canceled, DeliveryAttempt, Message, MessageFilter, StoredMedia, attempts_of, export_page, find_any, find_by_ref,
    find_media, find_message, list_attempts, list_hub, list_messages, list_state_changes, media_sent_to, unread_of,
};
use crate::validate::{Invalid, is_e164};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

pub mod compose;
pub mod routing;
pub mod send;

/// What a message carries besides its body, by type: stored with the message and spread into its record.
#[derive(Debug, Default, Clone, Serialize, Deserialize, ToSchema)]
pub struct MessageContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<Media>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Link>,
    /// HTML messages: the document, shown sandboxed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// `e2e` for end-to-end encrypted messages (which carry `e2e_envelope` and no body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Encryption>,
    /// `conversation`, for encrypted conversation messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_mode: Option<E2eMode>,
    /// Encrypted conversation messages: the content key version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_key_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::encryption::envelope_schema_ref)]
    pub e2e_envelope: Option<Value>,
    /// Template sends: the variables the template was rendered with (a WhatsApp template message carries
    /// them as its parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub vars: Option<serde_json::Map<String, Value>>,
    /// `marketing`, `utility` or `authentication`: the template's category, or the one the send gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Flow invitations: the flow card (`ref`, `bot`, `flow`, `title`, `state`, and `summary` once completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub flow: Option<Value>,
    /// A satisfaction question after a conversation was closed: the app shows its scale as buttons, WhatsApp
    /// as a list, SMS asks for a number (`POST /me/conversations/{ref}/rating` answers it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<RatingRequest>,
}

/// The scale of a satisfaction question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RatingRequest {
    /// 1.
    pub min: i64,
    /// 5.
    pub max: i64,
}

/// The file of a media message.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Media {
    /// The URL given, or `/api/v1/media/{id}` for bytes sent in base64.
    pub url: String,
    pub filename: Option<String>,
    pub mimetype: Option<String>,
    /// In bytes, for stored media.
    pub size: Option<i64>,
}

/// The target of a link message.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Link {
    pub url: String,
    pub label: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub image_url: Option<String>,
}

/// The user's app got these messages (its inbox): each one not delivered yet moves to `delivered` in the
/// hub, in one transaction; `messages` are updated in place.
///
/// All of them move together, one statement per step (`advance_many_in`), so this transaction takes its
/// locks in the same order as the delivery worker's (the messages, then the user's event counter): one
/// message at a time, the two could each hold what the other waits for (a deadlock on PostgreSQL).
pub async fn fetched_by_app(db: &Db, messages: &mut [Message], now: Millis) -> Result<(), sqlx::Error> {
    let ids: Vec<i64> =
        messages.iter().filter(|m| MessageState::UNDELIVERED.contains(&m.state)).map(|m| m.id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let mut tx = db.begin().await?;
    let inapp = Some(Channel::Inapp);
    let moved = store::advance_many_in(&mut tx, &ids, MessageState::Delivered, inapp, now, events::message_status);
    let moved: std::collections::HashMap<i64, Message> =
        moved.await?.into_iter().flatten().map(|m| (m.id, m)).collect();
    tx.commit().await?;
    for m in messages.iter_mut() {
        if let Some(moved) = moved.get(&m.id) {
            *m = moved.clone();
        }
    }
    Ok(())
}

/// Moves a message forward along the hub path to `to` (the app opened or read it); `None` when it is there
/// already or past it.
pub async fn advance_in_hub(db: &Db, id: i64, to: MessageState, now: Millis) -> Result<Option<Message>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let moved = store::advance_in(&mut tx, id, to, Some(Channel::Inapp), now, events::message_status).await?;
    tx.commit().await?;
    Ok(moved)
}

/// How long the messages handed to devices gather before they are written `delivered` (at most
/// [`HANDED_OVER_BATCH`] in one transaction). Each transaction costs the one SQLite writer its round trips
/// however many rows it holds: at 2,400 sends/s down streams, batches of ~500 (200 ms) held the writer
/// 51–97 µs per message where batches of ~160 (50 ms) held it 74–176 µs (docs/performance.md).
pub const HANDED_OVER_GATHER: std::time::Duration = std::time::Duration::from_millis(200);

/// Most messages written `delivered` in one transaction.
const HANDED_OVER_BATCH: usize = 1024;

/// A message a device got down its event stream (as the stream read it), and when, with what making it
/// `delivered` writes built then ([`handed_over`]), outside the transaction that writes it.
pub type HandedOver = store::Foreseen;

/// `message` (as its stream read it) handed to a device at `at`: its moves to `delivered` and what they
/// write, built now; `None` when it has none to make.
pub fn handed_over(message: Message, at: Millis) -> Option<HandedOver> {
    store::foresee(message, MessageState::Delivered, Some(Channel::Inapp), at, events::message_status)
}

/// The group commit of messages handed to devices down their event streams (see `store::writer`): each
/// becomes `delivered`, many streams' messages in one transaction, so an open stream costs the send path
/// a share of a transaction instead of one of its own. The streams read each message with its event, and
/// what its move writes is built as it is handed over, so the transaction reads nothing and builds nothing:
/// one update of the messages (checked to find each as its stream read it) and one insert each of their
/// history, events and (in conversations) users' events. Nobody waits on these writes (the event has gone
/// down the stream), so a batch gathers for [`HANDED_OVER_GATHER`]: a few transactions a second instead of
/// one per cycle of the send path's writer, at the cost of `delivered` being recorded up to that much later.
/// Answers, for each message, whether it moved.
pub fn delivered_writer(db: Db) -> crate::store::writer::GroupCommit<HandedOver, bool> {
    use crate::store::writer::{GroupCommit, Writes};
    GroupCommit::spawn_gathering(
        db,
        HANDED_OVER_BATCH,
        HANDED_OVER_GATHER,
        Writes {
            batch: Some(|tx, items| Box::pin(deliver_in(tx, items))),
            one: |tx, item| {
                Box::pin(async move { Ok(deliver_in(tx, std::slice::from_ref(item)).await?.pop().unwrap_or(false)) })
            },
        },
    )
}

/// Messages handed to devices become `delivered`, each from the state its stream read it in.
async fn deliver_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    items: &[HandedOver],
) -> Result<Vec<bool>, sqlx::Error> {
    let (delivered, inapp) = (MessageState::Delivered, Some(Channel::Inapp));
    store::advance_foreseen_in(tx, items, delivered, inapp, events::message_status).await
}

/// The user has read these messages in the app: each walks the hub path to `read` (each step with its
/// event), in one transaction; answers those that moved.
pub async fn read_in_hub(db: &Db, ids: &[i64], now: Millis) -> Result<Vec<Message>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // All together, in the lock order of the delivery worker (see `fetched_by_app`).
    let mut tx = db.begin().await?;
    let moved =
        store::advance_many_in(&mut tx, ids, MessageState::Read, Some(Channel::Inapp), now, events::message_status);
    let moved: Vec<Message> = moved.await?.into_iter().flatten().collect();
    tx.commit().await?;
    Ok(moved)
}

/// The partner marks messages: each in one of `from` moves to `to`; answers those that moved.
pub async fn mark(
    db: &Db,
    ids: &[i64],
    from: &[MessageState],
    to: MessageState,
    now: Millis,
) -> Result<Vec<Message>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let mut moved = Vec::new();
    for id in ids {
        moved.extend(store::transition_in(&mut tx, *id, from, to, None, now, events::message_status).await?);
    }
    tx.commit().await?;
    Ok(moved)
}

/// Why a partner's mark of one message was refused.
#[derive(Debug, thiserror::Error)]
pub enum MarkError {
    #[error("message not found")]
    NotFound,
    #[error("the message failed to deliver; it cannot be marked")]
    Failed,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The partner marks its message `id`: from one of `from` to `to`; answers it as it is then (unchanged when
/// it was not in one of `from`). A failed message cannot be marked.
pub async fn mark_one(
    db: &Db,
    partner_id: i64,
    id: i64,
    from: &[MessageState],
    to: MessageState,
    now: Millis,
) -> Result<Message, MarkError> {
    let current = store::find_message(db, partner_id, id).await?.ok_or(MarkError::NotFound)?;
    if current.state == MessageState::Failed {
        return Err(MarkError::Failed);
    }
    let moved = mark(db, &[id], from, to, now).await?;
    Ok(match moved.into_iter().next() {
        Some(m) => m,
        None => store::find_message(db, partner_id, id).await?.unwrap_or(current),
    })
}

/// The most messages one bulk mark names.
pub const MAX_MARKED: usize = 1000;

/// The partner marks read its messages `ids` (at most [`MAX_MARKED`]), or all its messages to `phone` (a
/// phone that is given must be one: an empty string is not "no phone"): how many moved.
pub async fn mark_read(
    db: &Db,
    partner_id: i64,
    ids: Option<&[i64]>,
    phone: Option<&str>,
    now: Millis,
) -> Result<usize, crate::validate::KeepError> {
    let ids = match (ids, phone) {
        (Some(_), Some(_)) => return Err(Invalid::new("message_ids", "give message_ids or phone, not both").into()),
        (None, None) => return Err(Invalid::new("message_ids", "message_ids or phone is required").into()),
        (Some(ids), None) => {
            if ids.len() > MAX_MARKED {
                return Err(Invalid::new("message_ids", "at most 1000 message_ids at once").into());
            }
            store::partner_message_ids(db, partner_id, None, ids).await?
        }
        (None, Some(phone)) => {
            if !is_e164(phone) {
                return Err(Invalid::new("phone", "phone must be E.164").into());
            }
            store::partner_message_ids(db, partner_id, Some(phone), &[]).await?
        }
    };
    Ok(mark(db, &ids, &MessageState::BEFORE_READ, MessageState::Read, now).await?.len())
}
