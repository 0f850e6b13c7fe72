//! The agent desk: what a partner's agents (or its key) do in a conversation — reply on the person's
//! channel (within WhatsApp's 24-hour window, or by a template there), write without a thread, change it
//! (close, assign or transfer with a note, label), note it, apply a macro, and show that they are typing.
//! Each is one entry here; the rules of a conversation itself are `crate::conversations`'.

use serde_json::Value;

use crate::clock::Millis;
use crate::conversations::{self, Reader};
use crate::delivery::Delivery;
use crate::macros::{self, Assignee};
use crate::messages::compose::{ComposeError, SendMessage};
use crate::messages::send::{self, SendError, Sending, Sent};
use crate::names::{Channel, ConversationState, Direction, Encryption};
use crate::store::conversations::{self as store, Conversation, Note};
use crate::store::labels::{self, Change};
use crate::store::members::Member;
use crate::store::writer::WrittenWithin;
use crate::store::{keys, partners};
use crate::validate::{Invalid, required_phone};

/// Why an agent's action was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeskError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The conversation cannot take it now (409).
    #[error("{0}")]
    Conflict(&'static str),
    /// The conversation is gone (404).
    #[error("conversation not found")]
    NotFound,
    #[error(transparent)]
    Send(#[from] SendError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<ComposeError> for DeskError {
    fn from(e: ComposeError) -> Self {
        DeskError::Send(SendError::Compose(e))
    }
}

/// What the desk works with: the send of messages (with the host's development mode), delivery (WhatsApp's
/// window and typing indicator), and when each side of each conversation was last told of typing.
pub struct Desk<'a> {
    pub sending: Sending<'a>,
    pub delivery: &'a Delivery,
    pub typing: &'a WrittenWithin<(i64, bool)>,
}

impl Desk<'_> {
    fn now(&self) -> Millis {
        self.sending.now
    }
}

/// Why an answer outside WhatsApp's window is refused.
const OUTSIDE_WINDOW: &str = "the user wrote from WhatsApp more than 24 hours ago, and outside WhatsApp's 24-hour \
    window only an approved template can reach them: send one (template_code) that has an approved whatsapp \
    version, or let such answers go on by the hub and SMS (PUT /settings/delivery, whatsapp_window_fallback)";

/// An agent's reply in conversation `c` of partner `partner_id`: the thread then waits for the person.
/// Written by `author` when a member sent it (the person sees their first name); a key's reply carries no
/// author. The person wrote from WhatsApp: the answer goes back there, and after 24 hours WhatsApp takes only
/// an approved template — unless the partner lets such an answer go on by the hub and SMS. `idempotency`
/// (a key and the digest of the request) makes a retry answer the original.
pub async fn reply(
    desk: &Desk<'_>,
    partner_id: i64,
    author: Option<&Member>,
    c: &Conversation,
    req: &SendMessage,
    idempotency: Option<(String, String)>,
) -> Result<Sent, DeskError> {
    let db = desk.sending.db;
    let content = conversations::content(db, desk.sending.dev, c, req).await?;
    if c.channel == Some(Channel::Whatsapp)
        && !crate::delivery::within_window(desk.delivery, partner_id, &c.phone).await?
        && !partners::whatsapp_window_fallback(db, partner_id).await?
    {
        let template = match content.template_code.as_deref() {
            Some(code) => {
                crate::delivery::find_whatsapp_template(desk.delivery, partner_id, code, content.lang.as_deref())
                    .await?
                    .is_some()
            }
            None => false,
        };
        if !template {
            return Err(DeskError::Conflict(OUTSIDE_WINDOW));
        }
    }
    let mut message = content.into_message(partner_id, &c.phone, Direction::Out, Some(c.id));
    message.author_id = author.map(|m| m.id);
    message.author_name = author.and_then(|m| m.name.clone());
    if let Some((key, hash)) = idempotency {
        // Scoped to the partner's replies in this thread: keys of the user or of other threads never meet.
        message.idempotency_key = Some(format!("agent:{partner_id}:{}:{key}", c.id));
        message.request_hash = Some(hash);
    }
    Ok(conversations::write(&desk.sending, c.id, message).await?)
}

/// An agent's message to a phone without naming a thread: into the person's latest open or pending
/// conversation with the partner, else a hub message (as `POST /messages` sends one; `raw` is the request
/// as given, `header_key` its `Idempotency-Key`). Never a new conversation: only people open them. A sealed
/// end-to-end message (`encryption: "e2e"` with key wraps) is always a hub message; an encrypted conversation
/// message needs a thread.
pub async fn send_to_phone(
    desk: &Desk<'_>,
    partner_id: i64,
    author: Option<&Member>,
    req: &SendMessage,
    raw: &Value,
    idempotency: Option<(String, String)>,
    header_key: Option<String>,
) -> Result<Sent, DeskError> {
    let phone = required_phone(req.phone.as_deref())?;
    let sealed = req.encryption == Some(Encryption::E2e) && req.encrypted != Some(true) && req.e2e_mode.is_none();
    if !sealed && let Some(c) = store::latest_active(desk.sending.db, partner_id, phone).await? {
        return reply(desk, partner_id, author, &c, req, idempotency).await;
    }
    if req.encrypted == Some(true) || req.e2e_mode.is_some() {
        return Err(Invalid::new("e2e_mode", "no open conversation with this phone for a conversation message").into());
    }
    Ok(send::send(&desk.sending, partner_id, req, raw, header_key).await?)
}

/// What an agent changes in a conversation (at least one): `state` (only `closed`), the assignee (a member,
/// or `None` for nobody) with an optional note saying why (a transfer), and its labels (replaced).
pub struct Changes<'a> {
    pub state: Option<&'a str>,
    pub assignee: Option<Option<i64>>,
    pub note: Option<&'a str>,
    pub labels: Option<&'a [String]>,
}

/// The longest note of a transfer, in characters.
pub const TRANSFER_NOTE_CHARS: usize = 3900;

/// Changes conversation `c` of partner `partner_id` as member `by` (none: the partner key): closing frees
/// a place for the assignee (the queue is given out when the partner assigns by itself) and asks the person
/// for a rating when the partner asks for ratings.
pub async fn change(
    desk: &Desk<'_>,
    partner_id: i64,
    by: Option<i64>,
    mut c: Conversation,
    req: Changes<'_>,
) -> Result<Conversation, DeskError> {
    let (db, now) = (desk.sending.db, desk.now());
    if req.note.is_some() && req.assignee.is_none() {
        return Err(Invalid::new("note", "a note goes with a transfer (assignee_id)").into());
    }
    if req.state.is_none() && req.assignee.is_none() && req.labels.is_none() {
        return Err(Invalid::new("state", "set state (closed), assignee_id or labels").into());
    }
    if req.state.is_some_and(|s| s != ConversationState::Closed.as_str()) {
        return Err(Invalid::new("state", "state can only be set to closed (a user message reopens)").into());
    }
    let note = match req.note.map(str::trim) {
        None => None,
        Some(n) if n.is_empty() || n.chars().count() > TRANSFER_NOTE_CHARS => {
            return Err(Invalid::new("note", "a transfer's note is 1 to 3,900 characters").into());
        }
        Some(n) => Some(n),
    };
    let labels = match req.labels {
        None => None,
        Some(names) => Some(conversations::label_ids(db, partner_id, names, "labels").await??),
    };
    if let Some(assignee) = req.assignee {
        if assignee.is_some_and(|id| id < 1) {
            return Err(Invalid::new("assignee_id", "assignee_id is a member's id").into());
        }
        c = store::assign(db, partner_id, c.id, assignee, now)
            .await?
            .ok_or_else(|| Invalid::new("assignee_id", "no such member of this partner"))?;
        if let Some(note) = note {
            conversations::transferred(db, &c, by, note, now).await?;
        }
    }
    if let Some(labels) = labels {
        labels::put_on(db, &c, &labels, Change::Replace, now).await?;
    }
    if req.state.is_some() {
        c = conversations::close(&desk.sending, partner_id, c.id).await?.ok_or(DeskError::NotFound)?;
    }
    Ok(c)
}

/// The longest note, in characters.
pub const NOTE_CHARS: usize = 4000;

/// Adds an internal note to `c` by member `by` (none: the partner key): 1 to [`NOTE_CHARS`] characters.
pub async fn add_note(
    desk: &Desk<'_>,
    c: &Conversation,
    by: Option<i64>,
    body: Option<&str>,
) -> Result<Note, DeskError> {
    let body = body.map(str::trim).unwrap_or("");
    if body.is_empty() || body.chars().count() > NOTE_CHARS {
        return Err(Invalid::new("body", "a note is 1 to 4,000 characters").into());
    }
    Ok(store::add_note(desk.sending.db, c, by, body, desk.now()).await?)
}

/// An agent writes in `c`: the person sees "typing…" in the app for a few seconds, and on WhatsApp when they
/// last wrote from there. Told at most every few seconds.
pub async fn typing(desk: &Desk<'_>, c: &Conversation) -> Result<(), sqlx::Error> {
    let told = conversations::typing(desk.sending.db, c, Reader::Agent, desk.typing, desk.now()).await?;
    if told && c.channel == Some(Channel::Whatsapp) {
        crate::delivery::whatsapp_typing(desk.delivery, c).await;
    }
    Ok(())
}

/// Applies partner `partner_id`'s macro `macro_id` to `c` as `member` (none: the partner key): its actions
/// checked again against what the partner has now (a label or a canned reply may have gone: refused on
/// `macro_id`, and nothing is done), then run in their order — the reply first (refused as a reply would be;
/// never in an end-to-end encrypted conversation, whose replies are sealed in an agent's browser), the
/// labels, the note, the assignee (`me` is the member applying it) and closing. The conversation after it,
/// and the reply.
pub async fn apply_macro(
    desk: &Desk<'_>,
    partner_id: i64,
    member: Option<&Member>,
    c: &Conversation,
    macro_id: Option<i64>,
) -> Result<(Conversation, Option<crate::store::messages::Message>), DeskError> {
    let (db, now) = (desk.sending.db, desk.now());
    let on_macro = |why: String| DeskError::Invalid(Invalid::new("macro_id", why));
    let id = macro_id.filter(|id| *id > 0).ok_or_else(|| on_macro("macro_id is a macro's id".into()))?;
    let saved = crate::store::macros::find(db, partner_id, id)
        .await?
        .ok_or_else(|| on_macro("no such macro of this partner".into()))?;
    let actions: Vec<macros::Action> =
        serde_json::from_value(saved.actions).map_err(|e| sqlx::Error::Decode(e.into()))?;
    let plan = macros::plan(db, partner_id, &actions)
        .await?
        .map_err(|e| on_macro(format!("this macro no longer applies ({}: {}): change it", e.field, e.message)))?;
    let assignee = match plan.assign {
        None => None,
        Some(Assignee::Nobody) => Some(None),
        Some(Assignee::Member(id)) => Some(Some(id)),
        Some(Assignee::Applier) => match member {
            Some(m) => Some(Some(m.id)),
            None => {
                return Err(on_macro(
                    "this macro assigns to the member applying it (me), and the partner key is no member".into(),
                ));
            }
        },
    };
    let mut message = None;
    if let Some(body) = plan.reply {
        if keys::latest_key_version(db, c.id).await?.is_some() {
            return Err(DeskError::Conflict(
                "this conversation is end-to-end encrypted: its replies are sealed in an agent's browser, and a \
                 macro's reply would go in plaintext",
            ));
        }
        let send = SendMessage { body: Some(body), ..SendMessage::default() };
        let (Sent::New(m) | Sent::Replayed(m)) = reply(desk, partner_id, member, c, &send, None).await?;
        message = Some(m);
    }
    if !plan.labels.is_empty() {
        labels::put_on(db, c, &plan.labels, Change::Add, now).await?;
    }
    if let Some(note) = &plan.note {
        store::add_note(db, c, member.map(|m| m.id), note, now).await?;
    }
    if let Some(assignee) = assignee {
        store::assign(db, partner_id, c.id, assignee, now)
            .await?
            .ok_or_else(|| on_macro("the member this macro assigns to is gone: change it".into()))?;
    }
    if plan.close {
        conversations::close(&desk.sending, partner_id, c.id).await?;
    }
    let c = store::find_for_partner(db, partner_id, c.id).await?.ok_or(DeskError::NotFound)?;
    Ok((c, message))
}
