//! Bots: how each one runs, named once for the store, the API, the flow engine and the document.

use crate::names::string_enum;

string_enum! {
    /// Where a bot's answers come from: `local`, its Wasm component run by this host in the sandbox, or
    /// `webhook`, the partner's own server, called with signed events and answering through the inbound
    /// webhook.
    #[derive(Default)]
    pub enum RuntimeMode {
        #[default]
        Local = "local",
        Webhook = "webhook",
    }
}
