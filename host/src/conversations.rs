//! Support conversations: the states a thread moves through, named once for the store, the API and the
//! events. A user's message (re)opens a thread, an agent's reply leaves it waiting for the user, and only a
//! partner closes it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a support conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConversationState {
    /// Waiting for an agent (the user wrote last).
    Open,
    /// Waiting for the user (an agent replied last).
    Pending,
    /// Closed by the partner; the user's next message reopens it.
    Closed,
}

impl ConversationState {
    pub const ALL: [ConversationState; 3] =
        [ConversationState::Open, ConversationState::Pending, ConversationState::Closed];

    pub const fn as_str(self) -> &'static str {
        match self {
            ConversationState::Open => "open",
            ConversationState::Pending => "pending",
            ConversationState::Closed => "closed",
        }
    }

    pub fn parse(text: &str) -> Option<ConversationState> {
        ConversationState::ALL.into_iter().find(|state| state.as_str() == text)
    }
}

impl fmt::Display for ConversationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_has_one_string_form() {
        for state in ConversationState::ALL {
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
            assert_eq!(ConversationState::parse(state.as_str()), Some(state));
            assert_eq!(state.to_string(), state.as_str());
        }
        assert_eq!(ConversationState::parse("Open"), None);
    }
}
