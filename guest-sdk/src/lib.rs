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
//! between calls; the host stores the state string and hands it back with the next event.
//!
//! Layout: the types come from the WIT package `hubbub:bot@0.1.0` (`wit/v0.1.0` in the repository) and
//! are re-exported here with builders: [`forms`](Field) (fields, screens, submissions),
//! [`menus`](Menu), [`payments`](PaymentRequest), [`replies`](Reply), and the [`log`] module.
//!
//! ```no_run
//! use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, UserEvent, log};
//!
//! struct Hello;
//!
//! impl Bot for Hello {
//!     fn flows() -> Vec<FlowInfo> {
//!         Vec::new()
//!     }
//!
//!     fn start(_entry: Entry, ctx: Context) -> Result<Reply, String> {
//!         log::info(&format!("chat with {}", ctx.phone));
//!         Ok(Reply::new("").message("Hello! Say something."))
//!     }
//!
//!     fn handle(state: String, event: UserEvent, _ctx: Context) -> Result<Reply, String> {
//!         match event {
//!             UserEvent::Text(text) => Ok(Reply::new(state).message(format!("You said: {text}"))),
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

/// Who the guest is talking to: the bot's code and the user's phone number.
///
/// ```no_run
/// # use hubbub_guest_sdk::Context;
/// fn greeting(ctx: &Context) -> String {
///     format!("Hello {}, this is {}", ctx.phone, ctx.bot)
/// }
/// ```
pub use wit::hubbub::bot::types::Context;

/// A bot: the three entry points the host calls. Export an implementation with [`export_bot!`].
///
/// The functions take no `self`: a component instance may be fresh on every call, so anything that
/// must survive between events goes into [`Reply::state`].
///
/// ```no_run
/// use hubbub_guest_sdk::{Bot, Context, Entry, Field, FlowInfo, Reply, Screen, UserEvent};
///
/// struct Feedback;
///
/// impl Bot for Feedback {
///     fn flows() -> Vec<FlowInfo> {
///         vec![FlowInfo::new("feedback", "Feedback")]
///     }
///
///     fn start(entry: Entry, _ctx: Context) -> Result<Reply, String> {
///         match entry {
///             Entry::Flow(code) if code == "feedback" => Ok(Reply::new("").screen(
///                 Screen::form("feedback", "Your feedback").field(Field::text("comment", "Comment").required()),
///             )),
///             other => Err(format!("cannot start {other:?}")),
///         }
///     }
///
///     fn handle(state: String, event: UserEvent, _ctx: Context) -> Result<Reply, String> {
///         match event {
///             UserEvent::Submit(submission) => Ok(Reply::new(state).message("Thanks!").completed(submission.values)),
///             other => Err(format!("unexpected event {other:?}")),
///         }
///     }
/// }
///
/// hubbub_guest_sdk::export_bot!(Feedback);
/// # fn main() {}
/// ```
pub trait Bot {
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
    fn start(entry: Entry, ctx: Context) -> Result<Reply, String>;

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
    fn handle(state: String, event: UserEvent, ctx: Context) -> Result<Reply, String>;
}

/// Adapts a [`Bot`] to the generated export trait; used by [`export_bot!`].
#[doc(hidden)]
pub struct BotExport<B>(core::marker::PhantomData<B>);

impl<B: Bot> wit::exports::hubbub::bot::handler::Guest for BotExport<B> {
    fn flows() -> Vec<FlowInfo> {
        B::flows()
    }

    fn start(entry: Entry, ctx: Context) -> Result<Reply, String> {
        B::start(entry, ctx)
    }

    fn handle(state: String, event: UserEvent, ctx: Context) -> Result<Reply, String> {
        B::handle(state, event, ctx)
    }
}

/// Exports a [`Bot`] implementation as the component's `hubbub:bot/handler`. Use it once, in the
/// bot crate (a `cdylib`).
///
/// ```no_run
/// use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, UserEvent};
///
/// struct Quiet;
///
/// impl Bot for Quiet {
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
        const _: () = {
            type HubbubBotExport = $crate::BotExport<$bot>;
    $crate::wit::export!(HubbubBotExport with_types_in $crate::wit);
        };
    };
}
