//! Write Hubbub bots as WebAssembly components.
//!
//! A bot is a type implementing [`Bot`], exported with [`export_bot!`] from a `cdylib` crate built with
//! `cargo build --target wasm32-wasip2 --release`. The host calls it on three occasions:
//!
//! - [`Bot::flows`] when the component is uploaded, to list the flows it offers;
//! - [`Bot::start`] when a user starts a flow or an in-app chat session;
//! - [`Bot::handle`] for every user event in that session (text, menu pick, screen submission, payment).
//!
//! Each call answers a [`Reply`]: the [`Step`]s to show and the session state. The guest keeps nothing
//! between calls; the host stores the state and hands it back with the next event. The state is the
//! bot's own [`Bot::State`] type: a struct with serde derives (stored as JSON; feature `typed-state`,
//! on by default), or `String` for the raw string.
//!
//! Layout: the types come from the WIT package `hubbub:bot@0.1.0` (`wit/v0.1.0` in the repository) and
//! are re-exported here with builders: [`forms`](Field) (fields, screens, submissions),
//! [`menus`](Menu), [`payments`](PaymentRequest), [`replies`](Reply), the [`log`] module and
//! [session state](State). With the feature `testing`, the `testing` module runs a bot natively in
//! tests, validating submissions exactly as the host does.
//!
//! ```no_run
//! use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, UserEvent, log};
//! use serde::{Deserialize, Serialize};
//!
//! struct Hello;
//!
//! #[derive(Default, Serialize, Deserialize)]
//! struct Said {
//!     messages: u32,
//! }
//!
//! impl Bot for Hello {
//!     type State = Said;
//!
//!     fn flows() -> Vec<FlowInfo> {
//!         Vec::new()
//!     }
//!
//!     fn start(_entry: Entry, ctx: Context) -> Result<Reply<Said>, String> {
//!         log::info(&format!("chat with {}", ctx.phone));
//!         Ok(Reply::new(Said::default()).message("Hello! Say something."))
//!     }
//!
//!     fn handle(mut said: Said, event: UserEvent, _ctx: Context) -> Result<Reply<Said>, String> {
//!         match event {
//!             UserEvent::Text(text) => {
//!                 said.messages += 1;
//!                 let answer = format!("You said: {text} ({} messages so far)", said.messages);
//!                 Ok(Reply::new(said).message(answer))
//!             }
//!             _ => Err("unexpected event".to_string()),
//!         }
//!     }
//! }
//!
//! hubbub_guest_sdk::export_bot!(Hello);
//! # fn main() {}
//! ```

#![warn(missing_docs)]

mod forms;
pub mod log;
mod menus;
mod payments;
mod replies;
mod state;
#[cfg(all(feature = "testing", not(target_arch = "wasm32")))]
pub mod testing;

/// Bindings generated from the WIT package. Not part of the API: use the re-exports at the crate root.
#[doc(hidden)]
pub mod wit {
    #![allow(missing_docs)]

    wit_bindgen::generate!({
        world: "bot",
        path: "../wit/v0.1.0",
        pub_export_macro: true,
        default_bindings_module: "hubbub_guest_sdk::wit",
        additional_derives: [PartialEq],
    });
}

pub use forms::{Choice, Field, FieldType, FieldValue, Screen, ScreenKind, Submission, Value};
pub use menus::{Menu, MenuItem, MenuSection, MenuStyle};
pub use payments::{PaymentRequest, PaymentResult, PaymentStatus};
pub use replies::{Entry, FlowInfo, Reply, Step, UserEvent};
pub use state::State;

/// Who the guest is talking to: the bot's code and the user's phone number.
///
/// ```no_run
/// # use hubbub_guest_sdk::Context;
/// fn greeting(ctx: &Context) -> String {
///     format!("Hello {}, this is {}", ctx.phone, ctx.bot)
/// }
/// ```
pub use wit::hubbub::bot::types::Context;

/// A bot: its state type and the three entry points the host calls. Export an implementation with
/// [`export_bot!`].
///
/// The functions take no `self`: a component instance may be fresh on every call, so anything that
/// must survive between events goes into the [`Reply`]'s state, of type [`State`](Bot::State).
///
/// ```no_run
/// use hubbub_guest_sdk::{Bot, Context, Entry, Field, FlowInfo, Reply, Screen, UserEvent};
/// use serde::{Deserialize, Serialize};
///
/// struct Feedback;
///
/// #[derive(Default, Serialize, Deserialize)]
/// struct Sent {
///     answers: u32,
/// }
///
/// impl Bot for Feedback {
///     type State = Sent;
///
///     fn flows() -> Vec<FlowInfo> {
///         vec![FlowInfo::new("feedback", "Feedback")]
///     }
///
///     fn start(entry: Entry, _ctx: Context) -> Result<Reply<Sent>, String> {
///         match entry {
///             Entry::Flow(code) if code == "feedback" => Ok(Reply::new(Sent::default()).screen(
///                 Screen::form("feedback", "Your feedback").field(Field::text("comment", "Comment").required()),
///             )),
///             other => Err(format!("cannot start {other:?}")),
///         }
///     }
///
///     fn handle(mut sent: Sent, event: UserEvent, _ctx: Context) -> Result<Reply<Sent>, String> {
///         match event {
///             UserEvent::Submit(submission) => {
///                 sent.answers += 1;
///                 Ok(Reply::new(sent).message("Thanks!").completed(submission.values))
///             }
///             other => Err(format!("unexpected event {other:?}")),
///         }
///     }
/// }
///
/// hubbub_guest_sdk::export_bot!(Feedback);
/// # fn main() {}
/// ```
pub trait Bot {
    /// The session state: what the bot keeps between events. A type with serde derives and a
    /// `Default` (the state before the first reply) is stored as JSON; `String` is stored as it is.
    /// A stored state that does not parse is reported by the host as a bot error, and `handle` is not
    /// called.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, UserEvent};
    /// struct Echo;
    ///
    /// impl Bot for Echo {
    ///     type State = String; // the raw state string, unchanged
    ///
    ///     fn flows() -> Vec<FlowInfo> {
    ///         Vec::new()
    ///     }
    ///     fn start(_entry: Entry, _ctx: Context) -> Result<Reply, String> {
    ///         Ok(Reply::new("echo"))
    ///     }
    ///     fn handle(state: String, _event: UserEvent, _ctx: Context) -> Result<Reply, String> {
    ///         Ok(Reply::new(state))
    ///     }
    /// }
    /// ```
    type State: State;

    /// The flows this component offers, each with its code and title. A chat-only bot returns none.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::FlowInfo;
    /// fn flows() -> Vec<FlowInfo> {
    ///     vec![FlowInfo::new("signup", "Sign up")]
    /// }
    /// ```
    fn flows() -> Vec<FlowInfo>;

    /// Starts a session: the flow named by [`Entry::Flow`], or an in-app chat for [`Entry::Chat`].
    /// An `Err` is logged by the host and shown to the user as a bot error.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Context, Entry, Reply};
    /// fn start(entry: Entry, _ctx: Context) -> Result<Reply, String> {
    ///     match entry {
    ///         Entry::Chat => Ok(Reply::new("").message("Hi!")),
    ///         Entry::Flow(code) => Err(format!("unknown flow {code}")),
    ///     }
    /// }
    /// ```
    fn start(entry: Entry, ctx: Context) -> Result<Reply<Self::State>, String>;

    /// Handles a user event; `state` is the state of the session's previous [`Reply`].
    /// An `Err` is logged by the host and shown to the user as a bot error.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Context, Reply, UserEvent};
    /// fn handle(state: String, event: UserEvent, _ctx: Context) -> Result<Reply, String> {
    ///     match event {
    ///         UserEvent::Text(text) => Ok(Reply::new(state).message(format!("You said: {text}"))),
    ///         other => Err(format!("unexpected event {other:?}")),
    ///     }
    /// }
    /// ```
    fn handle(state: Self::State, event: UserEvent, ctx: Context) -> Result<Reply<Self::State>, String>;
}

/// The WIT reply of a bot's reply: its state as the string the host stores.
pub(crate) fn wit_reply<S: State>(reply: Reply<S>) -> Result<wit::hubbub::bot::replies::Reply, String> {
    Ok(wit::hubbub::bot::replies::Reply { steps: reply.steps, state: state::encode(reply.state)? })
}

/// `start` as the host calls it: the state encoded.
pub(crate) fn call_start<B: Bot>(entry: Entry, ctx: Context) -> Result<wit::hubbub::bot::replies::Reply, String> {
    wit_reply(B::start(entry, ctx)?)
}

/// `handle` as the host calls it: the stored state decoded (an `Err` if it does not parse), the new one
/// encoded.
pub(crate) fn call_handle<B: Bot>(
    state: String,
    event: UserEvent,
    ctx: Context,
) -> Result<wit::hubbub::bot::replies::Reply, String> {
    wit_reply(B::handle(state::decode(state)?, event, ctx)?)
}

/// Adapts a [`Bot`] to the generated export trait; used by [`export_bot!`].
#[doc(hidden)]
pub struct BotExport<B>(core::marker::PhantomData<B>);

impl<B: Bot> wit::exports::hubbub::bot::handler::Guest for BotExport<B> {
    fn flows() -> Vec<FlowInfo> {
        B::flows()
    }

    fn start(entry: Entry, ctx: Context) -> Result<wit::hubbub::bot::replies::Reply, String> {
        call_start::<B>(entry, ctx)
    }

    fn handle(state: String, event: UserEvent, ctx: Context) -> Result<wit::hubbub::bot::replies::Reply, String> {
        call_handle::<B>(state, event, ctx)
    }
}

/// Exports a [`Bot`] implementation as the component's `hubbub:bot/handler`. Use it once, in the
/// bot crate (a `cdylib`). It exports nothing when the crate is built for a native target (as for the
/// bot's tests with the `testing` module), only for `wasm32`.
///
/// ```no_run
/// use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, UserEvent};
///
/// struct Quiet;
///
/// impl Bot for Quiet {
///     type State = String;
///
///     fn flows() -> Vec<FlowInfo> {
///         Vec::new()
///     }
///     fn start(_entry: Entry, _ctx: Context) -> Result<Reply, String> {
///         Ok(Reply::new(""))
///     }
///     fn handle(state: String, _event: UserEvent, _ctx: Context) -> Result<Reply, String> {
///         Ok(Reply::new(state))
///     }
/// }
///
/// hubbub_guest_sdk::export_bot!(Quiet);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! export_bot {
    ($bot:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type HubbubBotExport = $crate::BotExport<$bot>;
    $crate::wit::export!(HubbubBotExport with_types_in $crate::wit);
        };
    };
}
