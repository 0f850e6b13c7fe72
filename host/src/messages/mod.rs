//! The lifecycle of a message: its direction, its states and the moves between them, named once for the
//! store, the delivery worker, provider receipts, the API and the events.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::names::string_enum;

pub mod compose;

string_enum! {
    /// Where a message is (the `state` of a message record and of `message.status` events).
    pub enum MessageState {
        /// Accepted, waiting for the delivery worker.
        Queued = "queued",
        /// Handed to a channel (the hub, WhatsApp or SMS).
        Sent = "sent",
        /// In the user's app, or confirmed by the provider.
        Delivered = "delivered",
        /// Opened by the user (or marked read by the partner).
        Read = "read",
        /// Every channel failed.
        Failed = "failed",
    }
}

string_enum! {
    /// Who sent a message: `out` from a partner (or a developer, or a bot) to a user, `in` from a user.
    pub enum Direction {
        Out = "out",
        In = "in",
    }
}

string_enum! {
    /// What a message carries.
    pub enum ContentType {
        Text = "text",
        Image = "image",
        Document = "document",
        Audio = "audio",
        Video = "video",
        Link = "link",
        Html = "html",
        System = "system",
    }
}

string_enum! {
    /// How a hub message is encrypted: only end to end.
    pub enum Encryption {
        E2e = "e2e",
    }
}

string_enum! {
    /// The end-to-end mode of a conversation message.
    pub enum E2eMode {
        Conversation = "conversation",
    }
}

string_enum! {
    /// The channels a message travels on (the `channel` of messages and attempts), a template is written
    /// for, and a bot answers on.
    pub enum Channel {
        /// The in-app hub inbox.
        Inapp = "inapp",
        Whatsapp = "whatsapp",
        Sms = "sms",
    }
}

string_enum! {
    /// What a delivery attempt carried: the message itself, or the opaque alert about an encrypted message
    /// for a user who is not in the app.
    pub enum AttemptKind {
        Delivery = "delivery",
        Alert = "alert",
    }
}

string_enum! {
    /// How a provider took an attempt: accepted (`sent`, later confirmed or failed by its receipts),
    /// refused (`failed`), or not tried because it could not carry this message (`skipped`: free-form
    /// WhatsApp text to someone outside the 24-hour window, `error` = `outside_24h_window`).
    pub enum AttemptState {
        Sent = "sent",
        Failed = "failed",
        Skipped = "skipped",
    }
}

impl ContentType {
    /// The types whose message carries a file (`media_url` or `media_base64`).
    pub fn is_media(self) -> bool {
        matches!(self, ContentType::Image | ContentType::Document | ContentType::Audio | ContentType::Video)
    }
}

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
    #[schema(schema_with = crate::e2e::envelope_schema_ref)]
    pub e2e_envelope: Option<Value>,
    /// Template sends: the variables the template was rendered with (a WhatsApp template message carries
    /// them as its parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub vars: Option<serde_json::Map<String, Value>>,
    /// Flow invitations: the flow card (`ref`, `bot`, `flow`, `title`, `state`, and `summary` once completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub flow: Option<Value>,
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

use MessageState::*;

impl MessageState {
    /// The states an outgoing message passes through to the user's app, in order.
    pub const HUB_PATH: [MessageState; 4] = [Queued, Sent, Delivered, Read];
    /// The states of a message the user's app does not have yet.
    pub const UNDELIVERED: [MessageState; 2] = [Queued, Sent];
    /// The states a message can be marked read from.
    pub const BEFORE_READ: [MessageState; 3] = [Queued, Sent, Delivered];

    /// The first state of a message: outgoing messages wait for delivery; a user's own message has reached
    /// the partner.
    pub fn initial(direction: Direction) -> MessageState {
        match direction {
            Direction::Out => Queued,
            Direction::In => Delivered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outgoing_messages_start_queued_and_incoming_ones_delivered() {
        assert_eq!(MessageState::initial(Direction::Out), Queued);
        assert_eq!(MessageState::initial(Direction::In), Delivered);
        assert_eq!(MessageState::HUB_PATH[..3], MessageState::BEFORE_READ);
    }
}
