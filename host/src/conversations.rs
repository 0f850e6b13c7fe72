//! Support conversations: the states a thread moves through, named once for the store, the API and the
//! events. A user's message (re)opens a thread, an agent's reply leaves it waiting for the user, and only a
//! partner closes it.

use crate::names::string_enum;

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
