//! The lifecycle of a message: its direction, its states and the moves between them, named once for the
//! store, the delivery worker, provider receipts, the API and the events.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a message is (the `state` of a message record and of `message.status` events). Each state has one
/// string form, the same in the database, the API and the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageState {
    /// Accepted, waiting for the delivery worker.
    Queued,
    /// Handed to a channel (the hub, WhatsApp or SMS).
    Sent,
    /// In the user's app, or confirmed by the provider.
    Delivered,
    /// Opened by the user (or marked read by the partner).
    Read,
    /// Every channel failed.
    Failed,
}

use MessageState::*;

impl MessageState {
    pub const ALL: [MessageState; 5] = [Queued, Sent, Delivered, Read, Failed];
    /// The states an outgoing message passes through to the user's app, in order.
    pub const HUB_PATH: [MessageState; 4] = [Queued, Sent, Delivered, Read];
    /// The states of a message the user's app does not have yet.
    pub const UNDELIVERED: [MessageState; 2] = [Queued, Sent];
    /// The states a message can be marked read from.
    pub const BEFORE_READ: [MessageState; 3] = [Queued, Sent, Delivered];

    pub const fn as_str(self) -> &'static str {
        match self {
            Queued => "queued",
            Sent => "sent",
            Delivered => "delivered",
            Read => "read",
            Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<MessageState> {
        MessageState::ALL.into_iter().find(|state| state.as_str() == text)
    }

    /// The first state of a message: outgoing messages wait for delivery; a user's own message has reached
    /// the partner.
    pub fn initial(direction: Direction) -> MessageState {
        match direction {
            Direction::Out => Queued,
            Direction::In => Delivered,
        }
    }
}

/// Who sent a message: `out` from a partner (or a developer, or a bot) to a user, `in` from a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Out,
    In,
}

impl Direction {
    pub const fn as_str(self) -> &'static str {
        match self {
            Direction::Out => "out",
            Direction::In => "in",
        }
    }

    pub fn parse(text: &str) -> Option<Direction> {
        [Direction::Out, Direction::In].into_iter().find(|d| d.as_str() == text)
    }
}

impl fmt::Display for MessageState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_has_one_string_form() {
        for state in MessageState::ALL {
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
            assert_eq!(serde_json::from_value::<MessageState>(state.as_str().into()).unwrap(), state);
            assert_eq!(MessageState::parse(state.as_str()), Some(state));
            assert_eq!(state.to_string(), state.as_str());
        }
        assert_eq!(MessageState::parse("Queued"), None);
        assert_eq!(MessageState::parse(""), None);
        for direction in [Direction::Out, Direction::In] {
            assert_eq!(serde_json::to_value(direction).unwrap(), direction.as_str());
            assert_eq!(Direction::parse(direction.as_str()), Some(direction));
        }
        assert_eq!(MessageState::initial(Direction::Out), Queued);
        assert_eq!(MessageState::initial(Direction::In), Delivered);
    }
}
