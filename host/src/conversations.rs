//! Support conversations: the states a thread moves through, named once for the store, the API and the
//! events. A user's message (re)opens a thread, an agent's reply leaves it waiting for the user, and only a
//! partner closes it. Every message enters a conversation through [`open`] or [`write`] (or their `_in`
//! forms, in a caller's transaction: messages from WhatsApp and SMS), which decide that state and the events. What a message in a thread may carry is decided here too ([`content`]), and what an
//! end user may send in one ([`from_user`]): never a page or a redirect served on the service's origin,
//! and uploads only of common types, within a quota, served as downloads.

use serde_json::Value;

use crate::clock::Millis;
use crate::config::UploadQuota;
use crate::encryption;
use crate::messages::MessageContent;
use crate::messages::compose::{self, ComposeError, Content, SendMessage};
use crate::messages::send::{SendError, Sending, Sent};
use crate::names::{ContentType, ConversationState, Direction, E2eMode, Encryption, MessageState};
use crate::store::Db;
use crate::store::conversations::{self as store};
pub use crate::store::conversations::{
    Assigned, Conversation, Note, PartnerFilter, PartnerSearch, find_by_id, find_for_partner, find_for_user,
    latest_active, list_for_partner, list_for_phone, notes,
};
use crate::store::messages::{Created, Message, NewMessage};
use crate::store::{is_unique_violation, keys, messages};
use crate::validate::Invalid;
use crate::validate::is_code;

/// What a message in a conversation may carry: plaintext content as any message (see
/// [`compose::content`]), or an encrypted one (`encrypted: true, e2e_mode: "conversation",
/// e2e_key_version, e2e_envelope`, optionally the sender's `ref`) under a content key already shared in the
/// thread.
pub async fn content(db: &Db, dev: bool, c: &Conversation, req: &SendMessage) -> Result<Content, ComposeError> {
    if req.send_at.is_some() {
        let why = "send_at is for messages to a phone (POST /messages): a conversation's messages go at once";
        return Err(ComposeError::Invalid(Invalid::new("send_at", why)));
    }
    if !req.wants_e2e() {
        return compose::content(db, dev, c.partner_id, req, Some(&c.phone)).await;
    }
    let invalid = |field: &str, message: String| ComposeError::Invalid(Invalid::new(field, message));
    if req.encrypted != Some(true) {
        return Err(invalid("encrypted", "encrypted must be true for an encrypted conversation message".into()));
    }
    if req.e2e_mode != Some(E2eMode::Conversation) {
        return Err(invalid("e2e_mode", "e2e_mode must be conversation".into()));
    }
    let version = req
        .e2e_key_version
        .filter(|v| *v >= 1)
        .ok_or_else(|| invalid("e2e_key_version", "e2e_key_version must be a positive integer".into()))?;
    let envelope = encryption::check_envelope(req.e2e_envelope.as_ref(), false)?;
    if envelope.get("key_version").is_some_and(|v| v.as_i64() != Some(version)) {
        return Err(invalid("e2e_envelope.key_version", "e2e_envelope.key_version must be e2e_key_version".into()));
    }
    if req.body.is_some() {
        return Err(invalid("body", "a plaintext body is never accepted with an e2e envelope".into()));
    }
    if req.content_type.is_some_and(|t| t != ContentType::Text) || req.template_code.is_some() {
        return Err(invalid("content_type", "encrypted conversation messages are text (in the envelope)".into()));
    }
    if !keys::has_key_version(db, c.id, version).await? {
        return Err(invalid(
            "e2e_key_version",
            format!("no content key of version {version} was shared in this conversation (POST …/keys first)"),
        ));
    }
    let priority = req.priority.as_deref().map(str::trim).filter(|p| !p.is_empty()).unwrap_or("notification");
    if !is_code(priority) {
        return Err(invalid("priority", "priority must be a short lower-case word, e.g. chat".into()));
    }
    Ok(Content {
        content_type: ContentType::Text,
        body: None,
        rendered_body: None,
        template_code: None,
        lang: None,
        priority: priority.into(),
        content: MessageContent {
            encryption: Some(Encryption::E2e),
            e2e_mode: Some(E2eMode::Conversation),
            e2e_key_version: Some(version),
            e2e_envelope: Some(Value::Object(envelope.clone())),
            ..MessageContent::default()
        },
        media: None,
        reference: compose::client_ref(req, true)?,
        fallback_after_s: None,
    })
}

/// Media types an end user may upload, each with the file name extensions it may carry.
const USER_UPLOAD_TYPES: &[(&str, &[&str])] = &[
    ("image/png", &["png"]),
    ("image/jpeg", &["jpg", "jpeg"]),
    ("image/gif", &["gif"]),
    ("image/webp", &["webp"]),
    ("application/pdf", &["pdf"]),
    ("text/plain", &["txt"]),
    ("audio/mpeg", &["mp3"]),
    ("audio/mp4", &["m4a"]),
    ("audio/ogg", &["ogg", "oga", "opus"]),
    ("audio/aac", &["aac"]),
    ("audio/webm", &["weba", "webm"]),
    ("video/mp4", &["mp4", "m4v"]),
    ("video/webm", &["webm"]),
    ("video/quicktime", &["mov"]),
];

/// The leading bytes of the types that have a fixed signature: an upload must be what it says it is.
const SIGNATURES: &[(&str, &[u8])] = &[
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
    ("image/gif", b"GIF8"),
    ("application/pdf", b"%PDF-"),
];

/// What an end user may send in a conversation, on top of [`content`]: text, links (shown to agents, never
/// redirected through the service), and media — by URL, or uploaded as one of [`USER_UPLOAD_TYPES`] whose
/// bytes and file name agree with its type, within the user's `quota`. No `html` or `system` messages.
/// An upload is marked as the user's, which makes it a download wherever it is served.
pub async fn from_user(
    db: &Db,
    mut content: Content,
    phone: &str,
    quota: UploadQuota,
    now: Millis,
) -> Result<Content, ComposeError> {
    let invalid = |field: &str, message: String| ComposeError::Invalid(Invalid::new(field, message));
    if matches!(content.content_type, ContentType::Html | ContentType::System) {
        return Err(invalid("content_type", format!("users cannot send {} messages", content.content_type)));
    }
    let Some(media) = content.media.as_mut() else { return Ok(content) };
    let mimetype = media.mimetype.as_deref().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let allowed: Vec<&str> = USER_UPLOAD_TYPES.iter().map(|(t, _)| *t).collect();
    let Some((_, extensions)) = USER_UPLOAD_TYPES.iter().find(|(t, _)| *t == mimetype) else {
        return Err(invalid(
            "media_mimetype",
            format!("an upload must be one of {} (media_mimetype)", allowed.join(", ")),
        ));
    };
    let family = match content.content_type {
        ContentType::Image => "image/",
        ContentType::Audio => "audio/",
        ContentType::Video => "video/",
        _ => "",
    };
    if !mimetype.starts_with(family) {
        return Err(invalid("media_mimetype", format!("a {} message carries {family}* media", content.content_type)));
    }
    if let Some((_, signature)) = SIGNATURES.iter().find(|(t, _)| *t == mimetype)
        && !media.data.starts_with(signature)
    {
        return Err(invalid("media_base64", format!("the bytes are not {mimetype}")));
    }
    if mimetype == "image/webp" && !(media.data.starts_with(b"RIFF") && media.data.get(8..12) == Some(b"WEBP")) {
        return Err(invalid("media_base64", "the bytes are not image/webp".into()));
    }
    if let Some(name) = &media.filename {
        let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
        if !extensions.contains(&extension.as_str()) {
            return Err(invalid("media_filename", format!("a {mimetype} file is named .{}", extensions.join(" or ."))));
        }
    }
    let used = messages::uploaded_since(db, phone, now - quota.window_ms).await?;
    if used + media.data.len() as i64 > quota.bytes {
        return Err(invalid(
            "media_base64",
            format!(
                "over the upload quota: {} MiB per {} hours per user",
                quota.bytes >> 20,
                quota.window_ms / 3_600_000
            ),
        ));
    }
    media.uploaded_by = Some(phone.to_string());
    Ok(content)
}

/// Who reads a conversation: the user (the agents' messages become read) or the partner's agents (the
/// user's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    User,
    Agent,
}

impl Reader {
    /// The direction of the messages this reader reads: those the other side wrote.
    pub fn reads(self) -> Direction {
        match self {
            Reader::User => Direction::Out,
            Reader::Agent => Direction::In,
        }
    }
}

/// `reader` has seen the conversation: every message the other side wrote that is not read yet becomes
/// `read` (the user's reading walks an agent's message along the hub path), each move with its
/// `message.status` to the partner and its `conversation.message` to the user's app. Answers how many moved.
pub async fn read_by(db: &Db, c: &Conversation, reader: Reader, now: Millis) -> Result<usize, sqlx::Error> {
    let unread = messages::unread_in_conversation(db, c.id, reader.reads()).await?;
    if unread.is_empty() {
        return Ok(0);
    }
    let moved = match reader {
        Reader::User => crate::messages::read_in_hub(db, &unread, now).await?,
        Reader::Agent => {
            crate::messages::mark(db, &unread, &MessageState::BEFORE_READ, MessageState::Read, now).await?
        }
    };
    Ok(moved.len())
}

/// The state a new message moves its conversation to: the user's (re)opens it, back in the agents' queue;
/// an agent's leaves it waiting for the user.
pub fn state_after(message: &NewMessage) -> ConversationState {
    match message.direction {
        Direction::In => ConversationState::Open,
        Direction::Out => ConversationState::Pending,
    }
}

/// Opens conversation `reference` with the user's first message (in the app), with the partner's
/// `conversation.message` and the user's events (and the automatic reply outside business hours: delivery
/// is woken for it).
pub async fn open(
    host: &Sending<'_>,
    reference: &str,
    subject: Option<&str>,
    first: NewMessage,
) -> Result<(Conversation, Message), sqlx::Error> {
    let mut tx = host.db.begin().await?;
    let opened =
        store::open_in(&mut tx, reference, subject, first, host.now, crate::events::conversation_message).await?;
    let replied = away_reply_in(&mut tx, &opened.0, host.now).await?;
    tx.commit().await?;
    if replied {
        host.wake.notify_one();
    }
    Ok(opened)
}

/// [`open`] in the caller's transaction (a message from WhatsApp or SMS, written with its own change): the
/// caller wakes delivery when an automatic reply was written (`true`).
pub async fn open_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    reference: &str,
    first: NewMessage,
    now: Millis,
) -> Result<(Conversation, Message, bool), sqlx::Error> {
    let (c, m) = store::open_in(tx, reference, None, first, now, crate::events::conversation_message).await?;
    let replied = away_reply_in(tx, &c, now).await?;
    Ok((c, m, replied))
}

/// What the partner's team says to a person's message when it is out of its business hours
/// (`business_hours`), in the caller's transaction: its automatic reply with when it is back, on the
/// person's channel, once per closed period in each conversation (`store::service_levels`). It leaves the
/// conversation waiting for the agents, and its SLA running. Answers whether it was written.
async fn away_reply_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    c: &Conversation,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let settings = crate::store::service_levels::settings_in(tx, c.partner_id).await?;
    let (Some(hours), Some(text)) = (&settings.hours, &settings.away_message) else { return Ok(false) };
    if hours.open_at(now) {
        return Ok(false);
    }
    let since = hours.last_close(now).unwrap_or(Millis::MIN);
    if !crate::store::service_levels::claim_away_reply_in(tx, c.id, since, now).await? {
        return Ok(false);
    }
    let back = hours.next_open(now).and_then(|at| crate::business_hours::back_at(hours, at));
    let body = match back {
        Some(back) => format!("{text}\n\nWe're back {back}."),
        None => text.clone(),
    };
    let reply = Content::service_text(body, MessageContent::default());
    let message = reply.into_message(c.partner_id, &c.phone, Direction::Out, Some(c.id));
    store::append_in(tx, c.id, message, ConversationState::Open, now, crate::events::conversation_message).await?;
    Ok(true)
}

/// Writes `message` in conversation `conversation_id` (the user's or an agent's, by its direction), moving
/// the conversation on ([`state_after`]); an agent's new message wakes delivery. A retry under the message's
/// idempotency key answers the original and changes nothing; the same key with another message, or a
/// sender-chosen `ref` another message has, is refused.
pub async fn write(host: &Sending<'_>, conversation_id: i64, message: NewMessage) -> Result<Sent, SendError> {
    let refused = |e: sqlx::Error| if is_unique_violation(&e) { SendError::RefTaken } else { SendError::Database(e) };
    let written = if message.direction == Direction::Out {
        let state = state_after(&message);
        let written =
            store::append(host.db, conversation_id, message, state, host.now, crate::events::conversation_message)
                .await
                .map_err(refused)?;
        if matches!(written, Created::New(_)) {
            // An agent's reply is an outbound message accepted as any other (`messages::send::accept`).
            metrics::counter!("hubbub_messages_accepted_total").increment(1);
            host.wake.notify_one();
        }
        written
    } else {
        let mut tx = host.db.begin().await.map_err(SendError::Database)?;
        let (written, replied) = write_in(&mut tx, conversation_id, message, host.now).await.map_err(refused)?;
        tx.commit().await.map_err(SendError::Database)?;
        if replied {
            host.wake.notify_one();
        }
        written
    };
    match written {
        Created::New(m) => Ok(Sent::New(m)),
        Created::Replayed(m) => Ok(Sent::Replayed(m)),
        Created::KeyReused => Err(SendError::IdempotencyConflict),
    }
}

/// [`write`] of the user's messages in the caller's transaction (from WhatsApp or SMS), with the automatic
/// reply outside business hours: the caller wakes delivery when one was written (`true`).
pub async fn write_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    conversation_id: i64,
    message: NewMessage,
    now: Millis,
) -> Result<(Created, bool), sqlx::Error> {
    let state = state_after(&message);
    let written =
        store::append_in(tx, conversation_id, message, state, now, crate::events::conversation_message).await?;
    let replied = match &written {
        Created::New(_) => match store::find_by_id_in(tx, conversation_id).await? {
            Some(c) => away_reply_in(tx, &c, now).await?,
            None => false,
        },
        _ => false,
    };
    Ok((written, replied))
}

/// How long a satisfaction question waits for its answer (7 days).
pub const RATING_WAITS_MS: Millis = 7 * 24 * 60 * 60 * 1000;

/// Closes partner `partner_id`'s conversation `id` (a person's message reopens it); when the partner asks
/// for ratings and an agent answered in it, the person is asked to rate it on their channel (once: not
/// again until they wrote since). `None` when it is not the partner's.
pub async fn close(host: &Sending<'_>, partner_id: i64, id: i64) -> Result<Option<Conversation>, sqlx::Error> {
    let Some(c) = store::set_state(host.db, partner_id, id, ConversationState::Closed, host.now).await? else {
        return Ok(None);
    };
    crate::assignment::give_out(host.db, partner_id, host.now).await?;
    if !ask_rating(host, &c).await? {
        return Ok(Some(c));
    }
    store::find_for_partner(host.db, partner_id, id).await
}

/// Asks the person of closed conversation `c` to rate it, when its partner asks for ratings (see
/// [`close`]): the question is a message in the conversation that leaves it closed, carrying its scale
/// (`rating`), and goes on the person's channel. Answers whether it was asked.
async fn ask_rating(host: &Sending<'_>, c: &Conversation) -> Result<bool, sqlx::Error> {
    let (enabled, question) = crate::store::ratings::settings(host.db, c.partner_id).await?;
    if !enabled {
        return Ok(false);
    }
    let mut tx = host.db.begin().await?;
    if !crate::store::ratings::claim_ask_in(&mut tx, c.id, host.now).await? {
        return Ok(false);
    }
    let question = question.unwrap_or_else(|| crate::store::ratings::DEFAULT_QUESTION.to_string());
    let scale =
        MessageContent { rating: Some(crate::messages::RatingRequest { min: 1, max: 5 }), ..MessageContent::default() };
    let ask = Content::service_text(question, scale);
    let message = ask.into_message(c.partner_id, &c.phone, Direction::Out, Some(c.id));
    store::append_in(&mut tx, c.id, message, ConversationState::Closed, host.now, crate::events::conversation_message)
        .await?;
    tx.commit().await?;
    host.wake.notify_one();
    Ok(true)
}

/// The person's answer to conversation `c`'s satisfaction question: a score of 1 to 5 and an optional
/// comment (at most 1,000 characters), within [`RATING_WAITS_MS`] of the question, once.
pub async fn rate(
    db: &Db,
    c: &Conversation,
    score: i64,
    comment: Option<&str>,
    now: Millis,
) -> Result<Result<(), Invalid>, sqlx::Error> {
    if !(1..=5).contains(&score) {
        return Ok(Err(Invalid::new("score", "score is 1 (poor) to 5 (great)")));
    }
    let comment = comment.map(str::trim).filter(|c| !c.is_empty());
    if comment.is_some_and(|c| c.chars().count() > 1000) {
        return Ok(Err(Invalid::new("comment", "a comment is at most 1,000 characters")));
    }
    if c.csat_asked_at.is_none_or(|at| at < now - RATING_WAITS_MS) || c.csat_score.is_some() {
        let why = match (c.csat_asked_at, c.csat_score) {
            (_, Some(_)) => "this conversation was rated already",
            (None, _) => "this conversation was not asked to be rated",
            _ => "the question was asked more than 7 days ago",
        };
        return Ok(Err(Invalid::new("score", why)));
    }
    if !crate::store::ratings::rate(db, c.id, score, comment, now - RATING_WAITS_MS, now).await? {
        return Ok(Err(Invalid::new("score", "this conversation was rated already")));
    }
    Ok(Ok(()))
}

/// The score a person's message on WhatsApp or SMS gives, when it is one: `1` to `5` alone (a WhatsApp
/// list's row title is its number).
pub fn score_of(text: &str) -> Option<i64> {
    let t = text.trim();
    (t.len() == 1).then(|| t.parse::<i64>().ok()).flatten().filter(|s| (1..=5).contains(s))
}

/// How long a "typing" signal lasts: the side that writes sends one at most every [`TYPING_EVERY_MS`]
/// while it writes, and the other shows "typing…" until this long after the last (a stream replaying
/// older ones skips them).
pub const TYPING_SHOWN_MS: Millis = 6_000;
/// The least time between two "typing" signals of one side of a conversation (more are dropped).
pub const TYPING_EVERY_MS: Millis = 2_000;

/// `writer` is writing in conversation `c`: the other side is told (`conversation.typing` on its stream),
/// unless this side was told less than [`TYPING_EVERY_MS`] ago by this host (`recent`); on WhatsApp the
/// caller shows Meta's typing indicator too. Answers whether it was told.
pub async fn typing(
    db: &Db,
    c: &Conversation,
    writer: Reader,
    recent: &crate::store::writer::WrittenWithin<(i64, bool)>,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let key = (c.id, writer == Reader::User);
    if recent.recent(&key, now) {
        return Ok(false);
    }
    recent.mark(key, now);
    store::typing(db, c, writer == Reader::User, now).await?;
    Ok(true)
}

/// The most labels a conversation carries.
pub const MAX_LABELS: usize = 20;

/// The ids of partner `partner_id`'s labels named `names` (at most [`MAX_LABELS`], each a label's name:
/// `validate::label_name`), in order, once each; a name that is not one, or not one the partner has, is
/// refused on `field`.
pub async fn label_ids(
    db: &Db,
    partner_id: i64,
    names: &[String],
    field: &str,
) -> Result<Result<Vec<i64>, Invalid>, sqlx::Error> {
    if names.len() > MAX_LABELS {
        return Ok(Err(Invalid::new(field, format!("a conversation carries at most {MAX_LABELS} labels"))));
    }
    let mut wanted = Vec::with_capacity(names.len());
    for raw in names {
        match crate::validate::label_name(raw) {
            Ok(name) if !wanted.contains(&name) => wanted.push(name),
            Ok(_) => {}
            Err(why) => return Ok(Err(Invalid::new(field, why))),
        }
    }
    let found = crate::store::labels::by_names(db, partner_id, &wanted).await?;
    Ok(wanted
        .iter()
        .map(|n| {
            found
                .get(n)
                .copied()
                .ok_or_else(|| Invalid::new(field, format!("no label named {n:?}: add it first (POST /labels)")))
        })
        .collect())
}

/// Conversation `c` (assigned now) was handed over by member `by` (none: the partner key) because `why`: an
/// internal note says to whom, and why.
pub async fn transferred(
    db: &Db,
    c: &Conversation,
    by: Option<i64>,
    why: &str,
    now: Millis,
) -> Result<(), sqlx::Error> {
    let to = match c.assignee_id {
        Some(id) => crate::store::members::find(db, id).await?.map(|m| m.name.unwrap_or(m.phone)).unwrap_or_default(),
        None => "the queue".to_string(),
    };
    store::add_note(db, c, by, &format!("Transferred to {to}: {why}"), now).await?;
    Ok(())
}

/// Why a person's new conversation was refused: a field, or no linked partner of that code (404).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Compose(#[from] ComposeError),
    #[error("partner not found")]
    NoPartner,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<Invalid> for OpenError {
    fn from(e: Invalid) -> Self {
        OpenError::Compose(ComposeError::Invalid(e))
    }
}

/// The longest subject of a conversation, in characters.
pub const SUBJECT_CHARS: usize = 200;

/// The person of `phone` opens a conversation with the partner of `code` (one their account is linked to),
/// with a subject and a first message in plaintext (a content key is shared in the thread before encrypted
/// ones). `quota`: what they may upload.
pub async fn open_by_user(
    host: &Sending<'_>,
    phone: &str,
    code: Option<&str>,
    subject: Option<&str>,
    first: &SendMessage,
    quota: UploadQuota,
) -> Result<(Conversation, Message), OpenError> {
    let code = code.map(str::trim).filter(|p| !p.is_empty());
    let code = code.ok_or_else(|| Invalid::new("partner", "partner is required"))?;
    let subject = subject.map(str::trim).filter(|s| !s.is_empty());
    if subject.is_some_and(|s| s.chars().count() > SUBJECT_CHARS) {
        return Err(Invalid::new("subject", "subject is at most 200 characters").into());
    }
    // Support is opened with a partner the user is linked to.
    let partner = crate::store::partners::find_by_code(host.db, code).await?.ok_or(OpenError::NoPartner)?;
    if !crate::accounts::is_linked_to(host.db, phone, code).await? {
        return Err(OpenError::NoPartner);
    }
    if first.wants_e2e() {
        let why = "a conversation opens with a plaintext message; share a content key (POST …/keys), then send encrypted ones";
        return Err(Invalid::new("encrypted", why).into());
    }
    let content = compose::content(host.db, host.dev, partner.id, first, Some(phone)).await?;
    let content = from_user(host.db, content, phone, quota, host.now).await?;
    let first = content.into_message(partner.id, phone, Direction::In, None);
    let reference = format!("conv_{}", crate::secrets::random_alnum(24));
    Ok(open(host, &reference, subject, first).await?)
}

/// The person of `phone` writes in their conversation `c`: the thread goes back in the agents' queue,
/// reopening a closed one. `idempotency` (a key and the digest of the request) makes a retry answer the
/// original.
pub async fn write_by_user(
    host: &Sending<'_>,
    c: &Conversation,
    phone: &str,
    req: &SendMessage,
    idempotency: Option<(String, String)>,
    quota: UploadQuota,
) -> Result<Sent, SendError> {
    let content = content(host.db, host.dev, c, req).await?;
    let content = from_user(host.db, content, phone, quota, host.now).await?;
    let mut message = content.into_message(c.partner_id, phone, Direction::In, Some(c.id));
    if let Some((key, hash)) = idempotency {
        // Scoped to this user's thread: keys of other writers or threads never meet.
        message.idempotency_key = Some(format!("me:{phone}:{}:{key}", c.id));
        message.request_hash = Some(hash);
    }
    write(host, c.id, message).await
}

/// What a reader sees beside each of some conversations: how many of the other side's messages it has not
/// read, the latest message, and (the partner's agents only) the labels.
pub struct Seen {
    pub unread: std::collections::HashMap<i64, i64>,
    pub last: std::collections::HashMap<i64, Message>,
    pub labels: std::collections::HashMap<i64, Vec<String>>,
}

/// What `reader` sees beside each of conversations `ids` ([`Seen`]).
pub async fn seen(db: &Db, ids: &[i64], reader: Reader) -> Result<Seen, sqlx::Error> {
    Ok(Seen {
        unread: messages::unread_counts(db, ids, reader.reads()).await?,
        last: messages::latest_in_conversations(db, ids).await?,
        labels: match reader {
            Reader::Agent => crate::store::labels::of_conversations(db, ids).await?,
            Reader::User => std::collections::HashMap::new(),
        },
    })
}

/// The latest `limit` messages of `c`, oldest first, as `reader` reads them: the person's app fetching them
/// has the agents' messages, which become `delivered`.
pub async fn messages_of(
    db: &Db,
    c: &Conversation,
    reader: Reader,
    limit: i64,
    now: Millis,
) -> Result<Vec<Message>, sqlx::Error> {
    let mut rows = messages::list_conversation(db, c.id, limit).await?;
    if reader == Reader::User {
        crate::messages::fetched_by_app(db, &mut rows, now).await?;
    }
    Ok(rows)
}
