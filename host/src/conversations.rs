//! Support conversations: the states a thread moves through, named once for the store, the API and the
//! events. A user's message (re)opens a thread, an agent's reply leaves it waiting for the user, and only a
//! partner closes it. What a message in a thread may carry is decided here too ([`content`]).

use serde_json::Value;

use crate::e2e;
use crate::error::Invalid;
use crate::messages::compose::{self, ComposeError, Content, SendMessage};
use crate::messages::{ContentType, E2eMode, Encryption, MessageContent};
use crate::names::string_enum;
use crate::store::Db;
use crate::store::conversations::Conversation;
use crate::store::keys;
use crate::validate::is_code;

string_enum! {
    /// Where a support conversation is.
    pub enum ConversationState {
        /// Waiting for an agent (the user wrote last).
        Open = "open",
        /// Waiting for the user (an agent replied last).
        Pending = "pending",
        /// Closed by the partner; the user's next message reopens it.
        Closed = "closed",
    }
}

/// What a message in a conversation may carry: plaintext content as any message (see
/// [`compose::content`]), or an encrypted one (`encrypted: true, e2e_mode: "conversation",
/// e2e_key_version, e2e_envelope`, optionally the sender's `ref`) under a content key already shared in the
/// thread.
pub async fn content(db: &Db, dev: bool, c: &Conversation, req: &SendMessage) -> Result<Content, ComposeError> {
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
    let envelope = e2e::check_envelope(req.e2e_envelope.as_ref(), false)?;
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
    })
}
