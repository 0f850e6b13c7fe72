//! Messages users send from WhatsApp or SMS. A provider's webhook hands each one over (its text, or what
//! the person tapped) and is answered at once; the message is kept once by its provider's id
//! (`store::inbound`), and a worker routes it after (`docs/providers.md`, "Messages from users"):
//!
//! 1. SMS's opt-out keywords (`STOP`, `UNSUBSCRIBE`, …, and `START`, …) set or clear the phone's opt-out of
//!    the number it was sent to, and go no further;
//! 2. the phone's bot session on that channel that moved in the last day and is not completed (with the
//!    partner of our WhatsApp message it replies to, `context.id`, when there is one) gets it as the next
//!    event: a tapped reply button or list row, a number or a label of the menu waiting is the choice,
//!    anything else is text; while a form waits, the form's link is sent again;
//! 3. an open or pending support conversation of the phone (the one that moved last, with any partner) gets
//!    it as the user's message, marked with its channel, and the agents' answers go back on that channel;
//! 4. otherwise it is for a partner: the partner of `context.id`, else the platform partner, else the
//!    partner the phone was linked to last — when the phone is linked to a partner at all. That partner's
//!    entry bot on the channel starts a session there (its chat, or its entry flow); without one, a new
//!    support conversation is opened;
//! 5. a phone linked to no partner gets one polite reply a day on that channel, never more.
//!
//! A bot's steps go out on the session's channel ([`deliver`], rendered by `channel_steps`); a form screen
//! goes as a link that opens it in the app, once, without a login (`form_links`). Files (WhatsApp images,
//! documents, audio, video, stickers; SMS `MediaUrl`s) are fetched from the provider and kept as Hubbub
//! media, and go to support as in 3 and 4 (a bot takes text and choices only). Other kinds of message
//! (reactions, …) are kept (`unsupported`) and reach no one.
//!
//! A message sent to a partner's own number (`store::senders`) is that partner's in 2 to 4, whoever else
//! the phone knows; the partner of `context.id` comes next.

mod files;
pub mod form_links;
mod parse;
mod pipeline;
mod receive;
mod route;
mod sessions;

use std::sync::Arc;

use crate::delivery::Delivery;
use crate::flows::Flows;
use crate::payments::Payments;
use crate::runtime::Runtime;
use crate::store::flows as sessions_store;
use crate::store::writer::GroupCommit;

pub use parse::{Keyword, from_twilio, from_whatsapp, keyword};
pub use pipeline::{route_waiting, run_worker};
pub use receive::receive;
pub use route::{RATED_REPLY, UNROUTED_REPLY, route};
pub use sessions::{FORM_LINK_TTL_MS, apply_reply, deliver};

/// What routing inbound messages works with: delivery (the database, the clock, the providers) and what
/// runs bots (their runtime, payments, the group commit of their progress).
#[derive(Clone)]
pub struct Routing {
    pub delivery: Arc<Delivery>,
    pub runtime: Runtime,
    pub payments: Arc<Payments>,
    pub progress: GroupCommit<sessions_store::Step, ()>,
}

impl Routing {
    /// The flow engine over these.
    pub fn flows(&self) -> Flows<'_> {
        Flows {
            db: &self.delivery.db,
            clock: &self.delivery.clock,
            runtime: &self.runtime,
            payments: &self.payments,
            progress: &self.progress,
        }
    }
}
