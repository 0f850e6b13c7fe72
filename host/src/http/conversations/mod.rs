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
mod encryption;
mod user;

use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::messages::MessageRecord;
use super::{List, Page, parse_id};
use crate::clock::record_time;
use crate::conversations::Reader;
use crate::http::auth::UserAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::names::{Channel, ConversationState};
use crate::store::conversations::{self as store, Conversation};
use crate::store::messages::{self};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(user::list_my_conversations, user::open_conversation))
        .routes(routes!(user::get_my_conversation))
        .routes(routes!(user::write_in_my_conversation))
        .routes(routes!(user::read_my_conversation))
        .routes(routes!(encryption::share_my_conversation_key, encryption::my_conversation_keys))
        .routes(routes!(encryption::my_conversation_devices))
        .routes(routes!(agent::list_conversations))
        .routes(routes!(agent::get_conversation, agent::close_conversation))
        .routes(routes!(agent::reply_in_conversation))
        .routes(routes!(agent::read_conversation))
        .routes(routes!(agent::list_notes, agent::add_note))
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
}

impl ConversationRecord {
    /// As `reader` sees it: the assignee is the partner's business only.
    fn seen_by(c: &Conversation, unread: i64, reader: Reader) -> Self {
        let mut record = ConversationRecord::new(c, unread);
        if matches!(reader, Reader::Agent) {
            record.assignee_id = Some(c.assignee_id);
        }
        record
    }

    pub fn new(c: &Conversation, unread: i64) -> Self {
        ConversationRecord {
            conversation_id: c.id,
            reference: c.reference.clone(),
            phone: c.phone.clone(),
            partner: c.partner_code.clone(),
            subject: c.subject.clone(),
            state: c.state,
            channel: c.channel,
            unread,
            last_message_at: record_time(c.last_message_at),
            created_at: record_time(c.created_at),
            assignee_id: None,
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
    let mut rows = messages::list_conversation(&state.db, c.id, EMBEDDED_MESSAGES).await?;
    if reader == Reader::User {
        crate::messages::fetched_by_app(&state.db, &mut rows, state.now()).await?;
    }
    Ok(ThreadRecord {
        conversation: record(state, c, reader).await?,
        messages: rows.iter().map(MessageRecord::from).collect(),
    })
}

/// A conversation as `reader` sees it, with its unread count.
pub(crate) async fn record(state: &AppState, c: &Conversation, reader: Reader) -> ApiResult<ConversationRecord> {
    let unread = messages::unread_counts(&state.db, &[c.id], reader.reads()).await?;
    Ok(ConversationRecord::seen_by(c, unread.get(&c.id).copied().unwrap_or(0), reader))
}

/// A page of conversations as `reader` sees them, each with its unread count.
async fn page_of(
    state: &AppState,
    page: &Page,
    rows: Vec<Conversation>,
    reader: Reader,
) -> ApiResult<List<ConversationRecord>> {
    let ids: Vec<i64> = rows.iter().take(page.limit as usize).map(|c| c.id).collect();
    let unread = messages::unread_counts(&state.db, &ids, reader.reads()).await?;
    Ok(page.list(rows, |c| c.id, |c| ConversationRecord::seen_by(c, unread.get(&c.id).copied().unwrap_or(0), reader)))
}

/// `reader` has seen the conversation: the other side's messages become `read`; answers the thread.
async fn read(state: &AppState, c: &Conversation, reader: Reader) -> ApiResult<ThreadRecord> {
    crate::conversations::read_by(&state.db, c, reader, state.now()).await?;
    with_messages(state, c, reader).await
}

/// One of the user's conversations, by ref (another user's is 404).
async fn user_thread(state: &AppState, user: &UserAuth, reference: &str) -> ApiResult<Conversation> {
    store::find_for_user(&state.db, &user.phone, reference).await?.ok_or_else(|| ApiError::not_found("conversation"))
}

/// One of the partner's conversations, by id (another partner's is 404).
async fn agent_thread(state: &AppState, partner_id: i64, id: &str) -> ApiResult<Conversation> {
    let id = parse_id(id, "conversation")?;
    store::find_for_partner(&state.db, partner_id, id).await?.ok_or_else(|| ApiError::not_found("conversation"))
}
