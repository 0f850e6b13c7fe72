//! Runs a bot natively in tests: no Wasm, no host. A [`Session`] starts a flow or a chat, sends events
//! (text, menu picks, submissions, payment outcomes) and keeps what the host would keep between calls:
//! the state string, the screen waiting for a submission, the pending payment, the completion. Log lines
//! are captured.
//!
//! Submissions are validated before the bot is called with the host's own validator (the `hubbub-forms`
//! crate, the code the host runs, not a copy): a submission the host would refuse with 422 `fields` is
//! [`Refused::Fields`] with the same message per field, and the bot is not called. The values the bot
//! receives are normalised as the host normalises them (`"34"` for a number field arrives as `34`,
//! `"yes"` for a boolean as `true`, text trimmed).
//!
//! Enable the feature in the bot's `[dev-dependencies]`:
//!
//! ```toml
//! [dev-dependencies]
//! hubbub-guest-sdk = { path = "…/guest-sdk", features = ["testing"] }
//! ```
//!
//! and give the bot crate an `rlib` beside its `cdylib` (`crate-type = ["cdylib", "rlib"]`) so tests in
//! `tests/` can name the bot type. Run them with a plain `cargo test` (a native target).
//!
//! ```
//! use hubbub_guest_sdk::testing::{Refused, Session, json};
//! use hubbub_guest_sdk::{Bot, Context, Entry, Field, FlowInfo, Reply, Screen, UserEvent};
//!
//! struct Hello;
//!
//! impl Bot for Hello {
//!     type State = u32; // submissions accepted so far
//!
//!     fn flows() -> Vec<FlowInfo> {
//!         vec![FlowInfo::new("hello", "Hello")]
//!     }
//!     fn start(_entry: Entry, _ctx: Context) -> Result<Reply<u32>, String> {
//!         Ok(Reply::new(0u32).screen(Screen::form("who", "Who are you?").field(Field::email("email", "E-mail").required())))
//!     }
//!     fn handle(n: u32, event: UserEvent, _ctx: Context) -> Result<Reply<u32>, String> {
//!         match event {
//!             UserEvent::Submit(submission) => Ok(Reply::new(n + 1).completed(submission.values)),
//!             other => Err(format!("unexpected {other:?}")),
//!         }
//!     }
//! }
//!
//! let mut session = Session::<Hello>::flow("hello").unwrap();
//! let refused = session.submit("who", json!({"email": "ana@"})).unwrap_err();
//! assert_eq!(refused, Refused::fields([("email", "not a valid e-mail address")]));
//! assert_eq!(session.state(), 0, "the bot was not called");
//! session.submit("who", json!({"email": " ana@example.com "})).unwrap();
//! assert_eq!(session.state(), 1);
//! assert!(session.is_completed());
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use hubbub_forms::{FieldDef, FieldType as FormFieldType};
use serde_json::Map;

/// A JSON value (`serde_json::Value`): submitted values as the app sends them.
///
/// ```
/// use hubbub_guest_sdk::testing::{Json, json};
/// let values: Json = json!({"plan": "pro"});
/// ```
pub use serde_json::Value as Json;
/// `json!` from `serde_json`, to write submitted values as the app sends them.
///
/// ```
/// let values = hubbub_guest_sdk::testing::json!({"name": "Ana", "age": "34"});
/// ```
pub use serde_json::json;

use crate::log::Level;
use crate::{
    Bot, Context, Entry, Field, FieldType, FieldValue, Menu, PaymentRequest, PaymentResult, PaymentStatus, Screen,
    Step, Submission, UserEvent, Value,
};

/// Why the harness did not get a reply: what the host would have answered instead of the bot's steps.
///
/// ```
/// use hubbub_guest_sdk::testing::Refused;
///
/// let refused = Refused::fields([("email", "is required")]);
/// assert_eq!(refused.to_string(), "invalid fields: email: is required");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// Submitted values the host refuses (422 `validation` with `fields`): a message per field key.
    /// The bot was not called.
    Fields(BTreeMap<String, String>),
    /// An event the host refuses before calling the bot (422 `validation`): the parameter at fault
    /// (`text`, `id`, `screen`, `values`, `payment`, `flow`) and the message.
    Invalid {
        /// The parameter at fault.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The bot answered `Err` (or its stored state did not parse): the host reports a bot error (502
    /// `bot_error`) and keeps the session as it was.
    Bot(String),
    /// The bot's reply breaks a rule the host checks (e.g. a screen whose field definitions are not
    /// valid): the host reports it as a bot error too.
    Malformed(String),
    /// The flow is completed; its card is read-only (409 `conflict`).
    Completed,
}

impl Refused {
    /// [`Refused::Fields`] from `(key, message)` pairs, for assertions.
    ///
    /// ```
    /// # use hubbub_guest_sdk::testing::Refused;
    /// let expected = Refused::fields([("plan", "must be one of the offered options")]);
    /// ```
    pub fn fields<'a>(errors: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Refused::Fields(errors.into_iter().map(|(k, m)| (k.to_string(), m.to_string())).collect())
    }

    fn invalid(field: &str, message: impl Into<String>) -> Self {
        Refused::Invalid { field: field.to_string(), message: message.into() }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Fields(errors) => {
                let fields: Vec<String> = errors.iter().map(|(key, message)| format!("{key}: {message}")).collect();
                write!(f, "invalid fields: {}", fields.join(", "))
            }
            Refused::Invalid { field, message } => write!(f, "invalid {field}: {message}"),
            Refused::Bot(message) => write!(f, "bot error: {message}"),
            Refused::Malformed(message) => write!(f, "malformed reply: {message}"),
            Refused::Completed => write!(f, "the flow is completed"),
        }
    }
}

impl std::error::Error for Refused {}

/// A line the bot logged with [`log`](crate::log).
///
/// ```
/// use hubbub_guest_sdk::log::Level;
/// use hubbub_guest_sdk::testing::LogLine;
///
/// let line = LogLine { level: Level::Info, message: "flow started".into() };
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// The severity.
    pub level: Level,
    /// The text.
    pub message: String,
}

/// The context a session gets unless one is given: bot `test`, phone `+15551230000`.
///
/// ```
/// let ctx = hubbub_guest_sdk::testing::context();
/// assert_eq!(ctx.phone, "+15551230000");
/// ```
pub fn context() -> Context {
    Context { bot: "test".to_string(), phone: "+15551230000".to_string() }
}

/// One session of bot `B` (a flow or a chat) as the host would run it. See the [module](self) example.
pub struct Session<B: Bot> {
    ctx: Context,
    flow: bool,
    state: String,
    screen: Option<Screen>,
    payment: Option<PaymentRequest>,
    summary: Option<Vec<FieldValue>>,
    steps: Vec<Step>,
    logs: Vec<LogLine>,
    bot: PhantomData<B>,
}

impl<B: Bot> fmt::Debug for Session<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("ctx", &self.ctx)
            .field("flow", &self.flow)
            .field("state", &self.state)
            .field("screen", &self.screen)
            .field("payment", &self.payment)
            .field("summary", &self.summary)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl<B: Bot> Session<B> {
    /// Starts the flow `code`, which the bot must list in [`Bot::flows`] (the host invites to no other).
    ///
    /// ```
    /// # use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, UserEvent};
    /// # struct Hello;
    /// # impl Bot for Hello {
    /// #     type State = String;
    /// #     fn flows() -> Vec<FlowInfo> { vec![FlowInfo::new("hello", "Hello")] }
    /// #     fn start(_: Entry, _: Context) -> Result<Reply, String> { Ok(Reply::new("").message("Hi")) }
    /// #     fn handle(s: String, _: UserEvent, _: Context) -> Result<Reply, String> { Ok(Reply::new(s)) }
    /// # }
    /// use hubbub_guest_sdk::testing::Session;
    ///
    /// let session = Session::<Hello>::flow("hello").unwrap();
    /// assert_eq!(session.messages(), ["Hi"]);
    /// assert!(Session::<Hello>::flow("other").is_err());
    /// ```
    pub fn flow(code: &str) -> Result<Self, Refused> {
        if !B::flows().iter().any(|flow| flow.code == code) {
            return Err(Refused::invalid("flow", format!("the bot offers no flow {code:?}")));
        }
        Self::start(Entry::Flow(code.to_string()), context())
    }

    /// Starts an in-app chat.
    ///
    /// ```
    /// # use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, UserEvent};
    /// # struct Hello;
    /// # impl Bot for Hello {
    /// #     type State = String;
    /// #     fn flows() -> Vec<FlowInfo> { Vec::new() }
    /// #     fn start(_: Entry, _: Context) -> Result<Reply, String> { Ok(Reply::new("").message("Hi")) }
    /// #     fn handle(s: String, _: UserEvent, _: Context) -> Result<Reply, String> { Ok(Reply::new(s)) }
    /// # }
    /// let session = hubbub_guest_sdk::testing::Session::<Hello>::chat().unwrap();
    /// assert_eq!(session.messages(), ["Hi"]);
    /// ```
    pub fn chat() -> Result<Self, Refused> {
        Self::start(Entry::Chat, context())
    }

    /// Starts a session with any entry and context, calling [`Bot::start`] directly (no check that a
    /// flow is listed).
    ///
    /// ```
    /// # use hubbub_guest_sdk::{Bot, FlowInfo, Reply, UserEvent};
    /// # struct Hello;
    /// # impl Bot for Hello {
    /// #     type State = String;
    /// #     fn flows() -> Vec<FlowInfo> { Vec::new() }
    /// #     fn start(_: Entry, ctx: Context) -> Result<Reply, String> { Ok(Reply::new("").message(format!("Hi {}", ctx.phone))) }
    /// #     fn handle(s: String, _: UserEvent, _: Context) -> Result<Reply, String> { Ok(Reply::new(s)) }
    /// # }
    /// use hubbub_guest_sdk::{Context, Entry};
    /// use hubbub_guest_sdk::testing::Session;
    ///
    /// let ctx = Context { bot: "hello".into(), phone: "+31612345678".into() };
    /// let session = Session::<Hello>::start(Entry::Chat, ctx).unwrap();
    /// assert_eq!(session.messages(), ["Hi +31612345678"]);
    /// ```
    pub fn start(entry: Entry, ctx: Context) -> Result<Self, Refused> {
        let mut session = Session {
            flow: matches!(entry, Entry::Flow(_)),
            ctx,
            state: String::new(),
            screen: None,
            payment: None,
            summary: None,
            steps: Vec::new(),
            logs: Vec::new(),
            bot: PhantomData,
        };
        let ctx = session.ctx.clone();
        session.call(|| crate::call_start::<B>(entry, ctx))?;
        Ok(session)
    }

    /// Sends a text message. The host refuses a blank text or one over 4096 characters.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// let steps = session.text("hello").unwrap();
    /// # }
    /// ```
    pub fn text(&mut self, text: &str) -> Result<Vec<Step>, Refused> {
        if text.trim().is_empty() {
            return Err(Refused::invalid("text", "text is required"));
        }
        if text.chars().count() > 4096 {
            return Err(Refused::invalid("text", "text is at most 4096 characters"));
        }
        self.handle(UserEvent::Text(text.to_string()))
    }

    /// Picks a menu item by id. The host refuses an empty id.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// let steps = session.select("coffee").unwrap();
    /// # }
    /// ```
    pub fn select(&mut self, id: &str) -> Result<Vec<Step>, Refused> {
        if id.is_empty() {
            return Err(Refused::invalid("id", "id (the chosen item) is required"));
        }
        self.handle(UserEvent::Select(id.to_string()))
    }

    /// Submits `values` (a JSON object, as the app sends it) for the screen `screen`, which must be the
    /// one waiting. They are validated against its fields as the host validates them; the bot gets
    /// the normalised values, or is not called and the answer is [`Refused::Fields`].
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// use hubbub_guest_sdk::testing::json;
    /// let steps = session.submit("details", json!({"name": "Ana", "newsletter": "yes"})).unwrap();
    /// # }
    /// ```
    pub fn submit(&mut self, screen: &str, values: Json) -> Result<Vec<Step>, Refused> {
        self.open()?;
        let waiting =
            self.screen.as_ref().ok_or_else(|| Refused::invalid("screen", "no screen is waiting for a submission"))?;
        if waiting.id != screen {
            return Err(Refused::invalid("screen", format!("the screen waiting for a submission is {:?}", waiting.id)));
        }
        let Json::Object(values) = values else {
            return Err(Refused::invalid("values", "values must be an object"));
        };
        let defs: Vec<FieldDef> = waiting.fields.iter().map(field_def).collect();
        let clean = hubbub_forms::validate(&defs, &values).map_err(Refused::Fields)?;
        let submission = Submission { screen: waiting.id.clone(), values: typed_values(&defs, clean) };
        self.handle(UserEvent::Submit(submission))
    }

    /// Reports the pending payment confirmed by the provider with `reference`.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// let steps = session.confirm_payment("ref-123").unwrap();
    /// # }
    /// ```
    pub fn confirm_payment(&mut self, reference: &str) -> Result<Vec<Step>, Refused> {
        self.payment_outcome(PaymentStatus::Confirmed, Some(reference.to_string()))
    }

    /// Reports the pending payment declined.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// let steps = session.decline_payment().unwrap();
    /// # }
    /// ```
    pub fn decline_payment(&mut self) -> Result<Vec<Step>, Refused> {
        self.payment_outcome(PaymentStatus::Declined, None)
    }

    /// Reports the pending payment cancelled by the user.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// let steps = session.cancel_payment().unwrap();
    /// # }
    /// ```
    pub fn cancel_payment(&mut self) -> Result<Vec<Step>, Refused> {
        self.payment_outcome(PaymentStatus::Cancelled, None)
    }

    /// Sends any payment result, pending or not (e.g. to test a bot's answer to a stale one).
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// use hubbub_guest_sdk::{PaymentResult, PaymentStatus};
    /// let stale = PaymentResult { id: "order-1".into(), status: PaymentStatus::Confirmed, reference: None };
    /// let refused = session.payment(stale).unwrap_err();
    /// # }
    /// ```
    pub fn payment(&mut self, result: PaymentResult) -> Result<Vec<Step>, Refused> {
        let steps = self.handle(UserEvent::Payment(result))?;
        if !steps.iter().any(|step| matches!(step, Step::Payment(_))) {
            self.payment = None;
        }
        Ok(steps)
    }

    fn payment_outcome(&mut self, status: PaymentStatus, reference: Option<String>) -> Result<Vec<Step>, Refused> {
        let id = self.payment.as_ref().ok_or_else(|| Refused::invalid("payment", "no payment is pending"))?.id.clone();
        self.payment(PaymentResult { id, status, reference })
    }

    /// The steps of the last reply.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert!(!session.steps().is_empty());
    /// # }
    /// ```
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The texts of the last reply's messages.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert_eq!(session.messages(), ["Milk it is."]);
    /// # }
    /// ```
    pub fn messages(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter_map(|step| match step {
                Step::Message(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The last menu of the last reply.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// let ids: Vec<&str> = session.menu().unwrap().sections[0].items.iter().map(|i| i.id.as_str()).collect();
    /// # }
    /// ```
    pub fn menu(&self) -> Option<&Menu> {
        self.steps.iter().rev().find_map(|step| match step {
            Step::Menu(menu) => Some(menu),
            _ => None,
        })
    }

    /// The screen waiting for a submission: the last screen of the last reply, as the host keeps it.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert_eq!(session.screen().unwrap().id, "details");
    /// # }
    /// ```
    pub fn screen(&self) -> Option<&Screen> {
        self.screen.as_ref()
    }

    /// The payment requested last and not answered yet.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert_eq!(session.pending_payment().unwrap().amount_minor, 350);
    /// # }
    /// ```
    pub fn pending_payment(&self) -> Option<&PaymentRequest> {
        self.payment.as_ref()
    }

    /// Whether the flow is completed (a completion step ends a flow; a chat goes on).
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert!(session.is_completed());
    /// # }
    /// ```
    pub fn is_completed(&self) -> bool {
        self.flow && self.summary.is_some()
    }

    /// The summary of the completion step, once there was one.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// let keys: Vec<&str> = session.summary().unwrap().iter().map(|v| v.key.as_str()).collect();
    /// # }
    /// ```
    pub fn summary(&self) -> Option<&[FieldValue]> {
        self.summary.as_deref()
    }

    /// The session state, decoded from the string the host would store.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot<State = String>>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert_eq!(session.state(), "chat");
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// If the stored string does not decode (the bot's next call would fail too).
    pub fn state(&self) -> B::State {
        crate::state::decode(self.state.clone()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The state string the host would store.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert_eq!(session.raw_state(), r#"{"submits":1}"#);
    /// # }
    /// ```
    pub fn raw_state(&self) -> &str {
        &self.state
    }

    /// Replaces the stored state string, e.g. with one an older version of the bot wrote.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &mut hubbub_guest_sdk::testing::Session<B>) {
    /// session.set_raw_state("not json");
    /// assert!(session.text("hi").is_err());
    /// # }
    /// ```
    pub fn set_raw_state(&mut self, state: impl Into<String>) {
        self.state = state.into();
    }

    /// Every line the bot logged in this session so far.
    ///
    /// ```no_run
    /// # fn demo<B: hubbub_guest_sdk::Bot>(session: &hubbub_guest_sdk::testing::Session<B>) {
    /// assert!(session.logs().iter().any(|line| line.message.contains("started")));
    /// # }
    /// ```
    pub fn logs(&self) -> &[LogLine] {
        &self.logs
    }

    /// A flow whose card is completed takes no more events.
    fn open(&self) -> Result<(), Refused> {
        if self.is_completed() { Err(Refused::Completed) } else { Ok(()) }
    }

    fn handle(&mut self, event: UserEvent) -> Result<Vec<Step>, Refused> {
        self.open()?;
        let (state, ctx) = (self.state.clone(), self.ctx.clone());
        self.call(|| crate::call_handle::<B>(state, event, ctx))
    }

    /// Calls the bot; on a reply the host accepts, keeps what the host keeps.
    fn call(
        &mut self,
        f: impl FnOnce() -> Result<crate::wit::hubbub::bot::replies::Reply, String>,
    ) -> Result<Vec<Step>, Refused> {
        let (result, lines) = crate::log::native::capture(f);
        self.logs.extend(lines.into_iter().map(|(level, message)| LogLine { level, message }));
        let reply = result.map_err(Refused::Bot)?;
        for step in &reply.steps {
            if let Step::Screen(screen) = step {
                let defs: Vec<FieldDef> = screen.fields.iter().map(field_def).collect();
                if screen.fields.is_empty() {
                    return Err(Refused::Malformed(format!("screen {:?} has no fields", screen.id)));
                }
                hubbub_forms::check_definitions(&defs)
                    .map_err(|e| Refused::Malformed(format!("screen {:?}: {e}", screen.id)))?;
            }
        }
        self.state = reply.state;
        self.screen = reply.steps.iter().rev().find_map(|step| match step {
            Step::Screen(screen) => Some(screen.clone()),
            _ => None,
        });
        if let Some(request) = reply.steps.iter().rev().find_map(|step| match step {
            Step::Payment(request) => Some(request.clone()),
            _ => None,
        }) {
            self.payment = Some(request);
        }
        if let Some(summary) = reply.steps.iter().find_map(|step| match step {
            Step::Completed(summary) => Some(summary.clone()),
            _ => None,
        }) {
            self.summary = Some(summary);
        }
        self.steps = reply.steps;
        Ok(self.steps.clone())
    }
}

/// The host's definition of an SDK field.
fn field_def(field: &Field) -> FieldDef {
    FieldDef {
        key: field.key.clone(),
        kind: match field.type_ {
            FieldType::Text => FormFieldType::Text,
            FieldType::Phone => FormFieldType::Phone,
            FieldType::Email => FormFieldType::Email,
            FieldType::Number => FormFieldType::Number,
            FieldType::Date => FormFieldType::Date,
            FieldType::Boolean => FormFieldType::Boolean,
            FieldType::Select => FormFieldType::Select,
        },
        label: field.label.clone(),
        required: field.required,
        placeholder: field.placeholder.clone(),
        options: field
            .options
            .iter()
            .map(|choice| hubbub_forms::Choice { id: choice.id.clone(), label: choice.label.clone() })
            .collect(),
    }
}

/// Validated values as the guest receives them, in the order of the fields.
fn typed_values(defs: &[FieldDef], mut clean: Map<String, Json>) -> Vec<FieldValue> {
    defs.iter()
        .filter_map(|def| {
            let value = clean.remove(&def.key)?;
            let value = match (def.kind, value) {
                (FormFieldType::Text | FormFieldType::Phone | FormFieldType::Email, Json::String(s)) => Value::Text(s),
                (FormFieldType::Date, Json::String(s)) => Value::Date(s),
                (FormFieldType::Select, Json::String(s)) => Value::Choice(s),
                (FormFieldType::Number, Json::Number(n)) => Value::Number(n.as_f64()?),
                (FormFieldType::Boolean, Json::Bool(b)) => Value::Boolean(b),
                (kind, value) => unreachable!("the validator let {value} through for a {kind:?} field"),
            };
            Some(FieldValue::new(def.key.clone(), value))
        })
        .collect()
}
