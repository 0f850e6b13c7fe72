//! Support conversations, from both sides: a user opens one with a partner and writes in it
//! (`/me/conversations…`); the partner's agents list, read, answer and close them (`/conversations…`), and
//! `POST /agent/messages` answers in the latest open thread of a phone or, without one, sends a hub
//! message. States: `open` (waiting for an agent) → agent reply → `pending` (waiting for the user) → user
//! reply → `open`; closed by the partner; a user message reopens.
//!
//! End-to-end encrypted threads: either side shares a content key by uploading its wraps to every peer
//! device (`…/keys`, one row per device and key version), then posts messages encrypted with it
//! (`encrypted: true, e2e_mode: "conversation", e2e_key_version, e2e_envelope`). Each side reads the wraps
//! addressed to its own devices and the peer directory (`…/devices`). The server stores ciphertext only.

mod agent;
mod desk;
mod encryption;
mod user;

use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::messages::MessageRecord;
use super::{List, Page, parse_id};
use crate::clock::record_time;

use crate::conversations::{self, Conversation, Reader, Seen};
use crate::http::auth::UserAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::messages::Message;
use crate::names::{Channel, ConversationState, Direction};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(user::list_my_conversations, user::open_conversation))
        .routes(routes!(user::get_my_conversation))
        .routes(routes!(user::write_in_my_conversation))
        .routes(routes!(user::read_my_conversation))
        .routes(routes!(user::typing_in_my_conversation))
        .routes(routes!(user::rate_my_conversation))
        .routes(routes!(encryption::share_my_conversation_key, encryption::my_conversation_keys))
        .routes(routes!(encryption::my_conversation_devices))
        .routes(routes!(agent::list_conversations))
        .routes(routes!(agent::get_conversation, agent::close_conversation))
        .routes(routes!(agent::reply_in_conversation))
        .routes(routes!(agent::read_conversation))
        .routes(routes!(agent::typing_in_conversation))
        .routes(routes!(agent::list_notes, agent::add_note))
        .routes(routes!(desk::apply_macro))
        .routes(routes!(encryption::share_conversation_key, encryption::conversation_keys))
        .routes(routes!(encryption::conversation_devices))
        .routes(routes!(agent::agent_send))
}

/// Messages embedded in a conversation record (the latest ones, oldest first).
const EMBEDDED_MESSAGES: i64 = 200;

/// A support conversation.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Conversation)]
pub struct ConversationRecord {
    pub conversation_id: i64,
    #[serde(rename = "ref")]
    pub reference: String,
    #[schema(pattern = "^\\+[1-9][0-9]{6,14}$")]
    pub phone: String,
    /// The partner's code.
    pub partner: String,
    /// The partner's name, as people see it.
    pub partner_name: String,
    pub subject: Option<String>,
    pub state: ConversationState,
    /// Messages from the other side not read yet: the agents' for the user (`/me/…`), the user's for the
    /// partner. `POST …/read` reads them.
    #[schema(minimum = 0)]
    pub unread: i64,
    pub last_message_at: String,
    pub created_at: String,
    /// Where the user last wrote from: `whatsapp` or `sms` (agents' replies go back on it), or null (the
    /// app).
    pub channel: Option<Channel>,
    /// For the partner only: the member the conversation is assigned to (null: nobody). Never shown to the
    /// user.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>)]
    pub assignee_id: Option<Option<i64>>,
    /// For the partner only: the SLA running on it (null: none runs — it waits for the person, is closed, or
    /// the partner sets no SLA). Never shown to the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<SlaRecord>)]
    pub sla: Option<Option<SlaRecord>>,
    /// For the partner only: when an agent first replied (null: not yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub first_response_at: Option<Option<String>>,
    /// Its satisfaction question, when the person was asked to rate it (null: never), and their answer.
    pub rating: Option<RatingRecord>,
    /// For the partner only: the names of its labels, by name. Never shown to the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    pub labels: Option<Vec<String>>,
    /// Its latest message, as the lists show it (null when its messages are gone: a retention purge).
    pub last_message: Option<LastMessageRecord>,
}

/// A conversation's satisfaction question and its answer.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationRating)]
pub struct RatingRecord {
    pub asked_at: String,
    /// 1 (poor) to 5 (great); null: not answered yet.
    pub score: Option<i64>,
    pub comment: Option<String>,
    pub rated_at: Option<String>,
}

/// The SLA running on a conversation.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationSla)]
pub struct SlaRecord {
    pub kind: crate::names::SlaKind,
    /// When an agent's reply is due (counted in the partner's business hours).
    pub due_at: String,
    pub breached: bool,
    pub breached_at: Option<String>,
}

/// A conversation's latest message, for a list: who wrote it and the start of its text.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationLastMessage)]
pub struct LastMessageRecord {
    #[serde(rename = "ref")]
    pub reference: String,
    /// `in`: the person wrote it; `out`: the partner.
    pub direction: Direction,
    #[schema(value_type = crate::names::ContentType)]
    pub content_type: String,
    /// The first 140 characters of its text (a caption for media), ending in "…" when cut; null when it has
    /// none or is end-to-end encrypted (the server holds no text of it).
    #[schema(max_length = 141)]
    pub preview: Option<String>,
    pub encrypted: bool,
    /// The first name of the member who wrote an agent's reply (see the message's `sender_name`).
    pub sender_name: Option<String>,
    pub created_at: String,
}

/// How many characters of a message a list shows.
const PREVIEW_CHARS: usize = 140;

impl From<&Message> for LastMessageRecord {
    fn from(m: &Message) -> Self {
        let encrypted = crate::messages::routing::is_encrypted(m);
        let text = m.rendered_body.as_deref().or(m.body.as_deref()).map(str::trim).filter(|t| !t.is_empty());
        let preview = text.filter(|_| !encrypted).map(|t| {
            let mut cut: String = t.chars().take(PREVIEW_CHARS).collect();
            if cut.len() < t.len() {
                cut.push('…');
            }
            cut
        });
        LastMessageRecord {
            reference: m.reference.clone(),
            direction: m.direction,
            content_type: m.content_type.clone(),
            preview,
            encrypted,
            sender_name: crate::members::first_name(m.author_name.as_deref()),
            created_at: record_time(m.created_at),
        }
    }
}

impl ConversationRecord {
    /// As `reader` sees it: the assignee and the labels are the partner's business only.
    fn seen_by(c: &Conversation, seen: &Seen, reader: Reader) -> Self {
        let unread = seen.unread.get(&c.id).copied().unwrap_or(0);
        let mut record = ConversationRecord::new(c, unread, seen.last.get(&c.id));
        if matches!(reader, Reader::Agent) {
            record.assignee_id = Some(c.assignee_id);
            record.first_response_at = Some(c.first_response_at.map(record_time));
            record.sla = Some(match (c.sla_kind, c.sla_due_at) {
                (Some(kind), Some(due)) => Some(SlaRecord {
                    kind,
                    due_at: record_time(due),
                    breached: c.sla_breached_at.is_some(),
                    breached_at: c.sla_breached_at.map(record_time),
                }),
                _ => None,
            });
            record.labels = Some(seen.labels.get(&c.id).cloned().unwrap_or_default());
        }
        record
    }

    /// The record of `c` with `unread` messages and its latest message `last`.
    pub fn new(c: &Conversation, unread: i64, last: Option<&Message>) -> Self {
        ConversationRecord {
            conversation_id: c.id,
            reference: c.reference.clone(),
            phone: c.phone.clone(),
            partner: c.partner_code.clone(),
            partner_name: c.partner_name.clone(),
            subject: c.subject.clone(),
            state: c.state,
            channel: c.channel,
            unread,
            last_message_at: record_time(c.last_message_at),
            created_at: record_time(c.created_at),
            assignee_id: None,
            sla: None,
            first_response_at: None,
            rating: c.csat_asked_at.map(|asked| RatingRecord {
                asked_at: record_time(asked),
                score: c.csat_score,
                comment: c.csat_comment.clone(),
                rated_at: c.csat_rated_at.map(record_time),
            }),
            labels: None,
            last_message: last.map(LastMessageRecord::from),
        }
    }
}

/// A conversation with its messages.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConversationThread)]
pub struct ThreadRecord {
    #[serde(flatten)]
    pub conversation: ConversationRecord,
    /// The latest 200, oldest first
    pub messages: Vec<MessageRecord>,
}

/// A conversation with its latest messages, as `reader` sees it. The user's app fetching it has the agents'
/// messages: they become `delivered`.
async fn with_messages(state: &AppState, c: &Conversation, reader: Reader) -> ApiResult<ThreadRecord> {
    let rows = conversations::messages_of(&state.db, c, reader, EMBEDDED_MESSAGES, state.now()).await?;
    // Who of the partner wrote a reply is the partner's business; the person sees a first name.
    let shown = |m: &Message| {
        let mut record = MessageRecord::from(m);
        if reader == Reader::User {
            record.author = None;
        }
        record
    };
    Ok(ThreadRecord { conversation: record(state, c, reader).await?, messages: rows.iter().map(shown).collect() })
}

/// A conversation as `reader` sees it, with its unread count.
pub(crate) async fn record(state: &AppState, c: &Conversation, reader: Reader) -> ApiResult<ConversationRecord> {
    let seen = conversations::seen(&state.db, &[c.id], reader).await?;
    Ok(ConversationRecord::seen_by(c, &seen, reader))
}

/// A page of conversations as `reader` sees them, each with its unread count.
async fn page_of(
    state: &AppState,
    page: &Page,
    rows: Vec<Conversation>,
    reader: Reader,
) -> ApiResult<List<ConversationRecord>> {
    let ids: Vec<i64> = rows.iter().take(page.limit as usize).map(|c| c.id).collect();
    let seen = conversations::seen(&state.db, &ids, reader).await?;
    Ok(page.list(rows, |c| c.id, |c| ConversationRecord::seen_by(c, &seen, reader)))
}

/// `reader` has seen the conversation: the other side's messages become `read`; answers the thread.
async fn read(state: &AppState, c: &Conversation, reader: Reader) -> ApiResult<ThreadRecord> {
    conversations::read_by(&state.db, c, reader, state.now()).await?;
    with_messages(state, c, reader).await
}

/// One of the user's conversations, by ref (another user's is 404).
async fn user_thread(state: &AppState, user: &UserAuth, reference: &str) -> ApiResult<Conversation> {
    conversations::find_for_user(&state.db, &user.phone, reference)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))
}

/// One of the partner's conversations, by id (another partner's is 404).
async fn agent_thread(state: &AppState, partner_id: i64, id: &str) -> ApiResult<Conversation> {
    let id = parse_id(id, "conversation")?;
    conversations::find_for_partner(&state.db, partner_id, id).await?.ok_or_else(|| ApiError::not_found("conversation"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::MessageState;

    fn message(body: Option<&str>, content: serde_json::Value) -> Message {
        Message {
            id: 1,
            reference: "msg_1".into(),
            partner_id: 1,
            partner_code: "acme".into(),
            partner_name: "Acme".into(),
            phone: "+15551230000".into(),
            direction: Direction::Out,
            content_type: "text".into(),
            body: body.map(str::to_string),
            rendered_body: None,
            template_code: None,
            lang: None,
            priority: "chat".into(),
            content,
            state: MessageState::Sent,
            channel: None,
            seq: 1,
            conversation_id: Some(1),
            developer_id: None,
            created_at: 0,
            send_at: None,
            error: None,
            author_id: Some(3),
            author_name: Some("Ana Lima".into()),
            broadcast_id: None,
        }
    }

    #[test]
    fn a_lists_preview_is_the_start_of_the_text_and_never_of_an_encrypted_message() {
        let short = LastMessageRecord::from(&message(Some("  Hello "), serde_json::json!({})));
        assert_eq!(
            (short.preview.as_deref(), short.encrypted, short.sender_name.as_deref()),
            (Some("Hello"), false, Some("Ana"))
        );
        let long = LastMessageRecord::from(&message(Some(&"é".repeat(200)), serde_json::json!({})));
        assert_eq!(long.preview.unwrap(), format!("{}…", "é".repeat(PREVIEW_CHARS)));
        let exact = LastMessageRecord::from(&message(Some(&"a".repeat(PREVIEW_CHARS)), serde_json::json!({})));
        assert_eq!(exact.preview.unwrap(), "a".repeat(PREVIEW_CHARS));
        let sealed = serde_json::json!({"encryption": "e2e", "e2e_envelope": {"alg": "x", "ciphertext": "abc"}});
        let encrypted = LastMessageRecord::from(&message(Some("never shown"), sealed));
        assert_eq!((encrypted.preview, encrypted.encrypted), (None, true));
    }
}
