//! Logging through the host, which tags each line with the bot (the guest has no stdout of its own).
//! Built for a native target (a bot's tests), lines go to the `testing` harness that runs the bot, or
//! to stderr.
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
    #[cfg(target_arch = "wasm32")]
    host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    native::log(level, message);
}

/// Where log lines go on a native target: the lines of the harness's current call, or stderr.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod native {
    use std::cell::RefCell;

    use super::Level;

    thread_local! {
        static CAPTURED: RefCell<Option<Vec<(Level, String)>>> = const { RefCell::new(None) };
    }

    pub(crate) fn log(level: Level, message: &str) {
        let unheard = CAPTURED.with_borrow_mut(|captured| match captured {
            Some(lines) => {
                lines.push((level, message.to_string()));
                false
            }
            None => true,
        });
        if unheard {
            eprintln!("[{level:?}] {message}");
        }
    }

    /// Runs `f`, returning what it returned and the lines it logged on this thread.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<(Level, String)>) {
        let outer = CAPTURED.replace(Some(Vec::new()));
        let result = f();
        let lines = CAPTURED.replace(outer).unwrap_or_default();
        (result, lines)
    }
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
