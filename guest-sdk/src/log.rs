//! Logging through the host, which tags each line with the bot (the guest has no stdout of its own).
//!
//! ```no_run
//! use hubbub_guest_sdk::log;
//!
//! log::info("flow started");
//! log::warn(&format!("unknown item {}", "latte"));
//! ```

use crate::wit::hubbub::bot::log as host;

/// Severity of a log line.
///
/// ```no_run
/// use hubbub_guest_sdk::log::{self, Level};
/// log::log(Level::Debug, "state parsed");
/// ```
pub use host::Level;

/// Writes a log line at `level`.
///
/// ```no_run
/// use hubbub_guest_sdk::log::{self, Level};
/// log::log(Level::Info, "hello");
/// ```
pub fn log(level: Level, message: &str) {
    host::log(level, message);
}

/// Writes a debug line.
///
/// ```no_run
/// hubbub_guest_sdk::log::debug("state: {}");
/// ```
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Writes an info line.
///
/// ```no_run
/// hubbub_guest_sdk::log::info("flow started");
/// ```
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Writes a warning line.
///
/// ```no_run
/// hubbub_guest_sdk::log::warn("unknown menu item");
/// ```
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Writes an error line.
///
/// ```no_run
/// hubbub_guest_sdk::log::error("state is not valid JSON");
/// ```
pub fn error(message: &str) {
    log(Level::Error, message);
}
