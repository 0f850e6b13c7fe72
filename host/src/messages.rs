//! The lifecycle of a message: its direction, its states and the moves between them, named once for the
//! store, the delivery worker, provider receipts, the API and the events.

use crate::names::string_enum;

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
