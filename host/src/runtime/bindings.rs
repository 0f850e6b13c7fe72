//! Host bindings of the WIT package `hubbub:bot@0.1.0` (`wit/v0.1.0`, frozen): generated code and the names
//! the runtime uses from it, and nothing of the host (as Spin's `world` crate). The `Host` impls live beside
//! the state they touch, in `super::sandbox`.

/// `hubbub:bot@0.1.0`, generated from the frozen `wit/v0.1.0`. A new WIT version gets a module of its own
/// beside this one, and [`latest`] moves to it; components built against older versions keep their module.
pub mod v0_1_0 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "bot",
        additional_derives: [PartialEq],
    });
}

/// The WIT version new bots are built against (`wit/v{VERSION}`), and the only place it is written.
pub const VERSION: &str = "0.1.0";

/// Every WIT version this host runs components of (one bindings module each), oldest first; uploads of
/// anything else are refused with this list.
pub const SERVED: &[&str] = &[VERSION];

/// The bindings of [`VERSION`].
pub use v0_1_0 as latest;

pub(super) use latest::hubbub;
pub(super) use latest::{Bot, BotPre};

pub(super) use hubbub::bot::forms::{Screen, ScreenKind, Submission};
pub(super) use hubbub::bot::log::Level;
pub(super) use hubbub::bot::menus::{Menu, MenuStyle};
#[cfg(test)]
pub(super) use hubbub::bot::menus::{MenuItem, MenuSection};
pub(super) use hubbub::bot::payments::{PaymentRequest, PaymentResult, PaymentStatus};
pub(super) use hubbub::bot::replies::{Entry, FlowInfo, Reply, Step, UserEvent};
#[cfg(test)]
pub(super) use hubbub::bot::types::Choice;
pub(super) use hubbub::bot::types::{Context, Field, FieldType, FieldValue, Value};
