//! Session state: what a bot keeps between events, as its [`Bot::State`](crate::Bot::State) type.
//!
//! The host stores a string per session. The SDK turns it into the bot's state type before
//! [`Bot::handle`](crate::Bot::handle) and back after every reply:
//!
//! - `String` is the raw string, passed through unchanged (for bots that encode their state
//!   themselves);
//! - any other type (feature `typed-state`, on by default) is JSON through `serde_json`. The empty
//!   string, which the host holds before a session's first reply, is the type's `Default`. A state that
//!   does not parse is an `Err` the host reports as a bot error; the bot is not called.

use std::any::Any;

/// A type a bot can keep as its session state. With the default feature `typed-state` every
/// `Serialize + DeserializeOwned + Default` type is one (stored as JSON, `String` as-is); without it only
/// `String` is.
///
/// ```
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Default, Serialize, Deserialize)]
/// struct Progress {
///     step: u32,
/// }
///
/// fn is_state<S: hubbub_guest_sdk::State>() {}
/// is_state::<Progress>();
/// is_state::<String>();
/// ```
#[cfg(feature = "typed-state")]
pub trait State: serde::Serialize + serde::de::DeserializeOwned + Default + 'static {}

#[cfg(feature = "typed-state")]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Default + 'static> State for T {}

/// A type a bot can keep as its session state: without the feature `typed-state`, only `String` (the raw
/// state string).
///
/// ```
/// fn is_state<S: hubbub_guest_sdk::State>() {}
/// is_state::<String>();
/// ```
#[cfg(not(feature = "typed-state"))]
pub trait State: Default + 'static + sealed::Raw {}

#[cfg(not(feature = "typed-state"))]
impl State for String {}

#[cfg(not(feature = "typed-state"))]
mod sealed {
    pub trait Raw {}
    impl Raw for String {}
}

/// The state in the string the host stored: `String` as it is, other types from JSON (`""` is the
/// default).
pub(crate) fn decode<S: State>(raw: String) -> Result<S, String> {
    let raw = match (Box::new(raw) as Box<dyn Any>).downcast::<S>() {
        Ok(state) => return Ok(*state),
        Err(raw) => *raw.downcast::<String>().expect("a String"),
    };
    #[cfg(feature = "typed-state")]
    {
        if raw.is_empty() {
            return Ok(S::default());
        }
        serde_json::from_str(&raw).map_err(|e| format!("bad state for {}: {e}", std::any::type_name::<S>()))
    }
    #[cfg(not(feature = "typed-state"))]
    {
        unreachable!("without typed-state only String is a State ({} bytes)", raw.len())
    }
}

/// The string the host stores for `state`.
pub(crate) fn encode<S: State>(state: S) -> Result<String, String> {
    match (Box::new(state) as Box<dyn Any>).downcast::<String>() {
        Ok(raw) => Ok(*raw),
        #[cfg(feature = "typed-state")]
        Err(state) => {
            let state = state.downcast::<S>().expect("the state");
            serde_json::to_string(&*state)
                .map_err(|e| format!("state {} does not serialise: {e}", std::any::type_name::<S>()))
        }
        #[cfg(not(feature = "typed-state"))]
        Err(_) => unreachable!("without typed-state only String is a State"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "typed-state")]
    #[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Counter {
        n: u32,
    }

    #[test]
    fn strings_pass_through_unchanged() {
        assert_eq!(decode::<String>("chat".into()).unwrap(), "chat");
        assert_eq!(decode::<String>(String::new()).unwrap(), "");
        assert_eq!(encode("not json {".to_string()).unwrap(), "not json {");
    }

    #[cfg(feature = "typed-state")]
    #[test]
    fn typed_states_are_json_and_empty_is_the_default() {
        assert_eq!(decode::<Counter>(String::new()).unwrap(), Counter::default());
        assert_eq!(decode::<Counter>(r#"{"n":3}"#.into()).unwrap(), Counter { n: 3 });
        assert_eq!(encode(Counter { n: 4 }).unwrap(), r#"{"n":4}"#);
        let error = decode::<Counter>("chat".into()).unwrap_err();
        assert!(error.starts_with("bad state for hubbub_guest_sdk::state::tests::Counter: "), "{error}");
        assert!(encode(std::collections::HashMap::from([((1, 2), 3)])).is_err(), "tuple keys are not JSON");
    }
}
