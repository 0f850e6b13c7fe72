//! Bots: how each one runs, named once for the store, the API, the flow engine and the document.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a bot's answers come from: `local`, its Wasm component run by this host in the sandbox, or
/// `webhook`, the partner's own server, called with signed events and answering through the inbound webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeMode {
    #[default]
    Local,
    Webhook,
}

impl RuntimeMode {
    pub const ALL: [RuntimeMode; 2] = [RuntimeMode::Local, RuntimeMode::Webhook];

    pub const fn as_str(self) -> &'static str {
        match self {
            RuntimeMode::Local => "local",
            RuntimeMode::Webhook => "webhook",
        }
    }

    pub fn parse(text: &str) -> Option<RuntimeMode> {
        RuntimeMode::ALL.into_iter().find(|mode| mode.as_str() == text)
    }
}

impl fmt::Display for RuntimeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_has_one_string_form() {
        for mode in RuntimeMode::ALL {
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
            assert_eq!(RuntimeMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(RuntimeMode::default(), RuntimeMode::Local);
    }
}
