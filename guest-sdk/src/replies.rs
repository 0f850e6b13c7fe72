//! Replies and the events and entries they answer.

use crate::{FieldValue, Menu, PaymentRequest, Screen};

/// How a session starts: a named flow, or an in-app chat.
///
/// ```no_run
/// # use hubbub_guest_sdk::Entry;
/// fn describe(entry: &Entry) -> String {
///     match entry {
///         Entry::Flow(code) => format!("flow {code}"),
///         Entry::Chat => "chat".to_string(),
///     }
/// }
/// ```
pub use crate::wit::hubbub::bot::replies::Entry;
/// A flow the component offers, listed by [`Bot::flows`](crate::Bot::flows).
///
/// ```no_run
/// # use hubbub_guest_sdk::FlowInfo;
/// let flow = FlowInfo::new("order", "Order a drink");
/// ```
pub use crate::wit::hubbub::bot::replies::FlowInfo;
/// The answer to a start or an event: steps to show and the new session state, of the bot's
/// [`State`](crate::Bot::State) type (`String` unless the bot says otherwise). Build it with
/// [`Reply::new`] and the step methods.
///
/// ```no_run
/// # use hubbub_guest_sdk::{Menu, Reply};
/// #[derive(Default, serde::Serialize, serde::Deserialize)]
/// struct Order {
///     item: Option<String>,
/// }
///
/// let reply: Reply<Order> = Reply::new(Order::default())
///     .message("Welcome!")
///     .menu(Menu::buttons("What would you like?").item("coffee", "Coffee").item("tea", "Tea"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Reply<S = String> {
    /// The steps to show, in order.
    pub steps: Vec<Step>,
    /// The session state the host keeps and hands to the next [`Bot::handle`](crate::Bot::handle).
    pub state: S,
}

/// One step shown to the user; usually added through the [`Reply`] builder methods.
///
/// ```no_run
/// # use hubbub_guest_sdk::{Reply, Step};
/// let reply: Reply = Reply::new("").step(Step::Message("Hello".into()));
/// ```
pub use crate::wit::hubbub::bot::replies::Step;
/// Something the user did in a session.
///
/// ```no_run
/// # use hubbub_guest_sdk::UserEvent;
/// fn kind(event: &UserEvent) -> &'static str {
///     match event {
///         UserEvent::Text(_) => "text",
///         UserEvent::Select(_) => "select",
///         UserEvent::Submit(_) => "submit",
///         UserEvent::Payment(_) => "payment",
///     }
/// }
/// ```
pub use crate::wit::hubbub::bot::replies::UserEvent;

impl FlowInfo {
    /// A flow with its code (as in `/bots/{bot}/flows/{flow}`) and title.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::FlowInfo;
    /// let flow = FlowInfo::new("signup", "Sign up");
    /// ```
    pub fn new(code: impl Into<String>, title: impl Into<String>) -> Self {
        FlowInfo { code: code.into(), title: title.into() }
    }
}

impl<S> Reply<S> {
    /// A reply with no steps yet that stores `state` as the session state.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Reply;
    /// #[derive(Default, serde::Serialize, serde::Deserialize)]
    /// struct Signup {
    ///     submits: u32,
    /// }
    ///
    /// let typed: Reply<Signup> = Reply::new(Signup { submits: 1 }).message("Thanks");
    /// let raw: Reply = Reply::new("chat").message("Hi");
    /// ```
    pub fn new(state: impl Into<S>) -> Self {
        Reply { steps: Vec::new(), state: state.into() }
    }

    /// Appends a step.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Reply, Step};
    /// let reply: Reply = Reply::new("").step(Step::Completed(Vec::new()));
    /// ```
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// Appends a text message.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Reply;
    /// let reply: Reply = Reply::new("").message("Thanks, we got it.");
    /// ```
    pub fn message(self, text: impl Into<String>) -> Self {
        self.step(Step::Message(text.into()))
    }

    /// Appends a menu.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Menu, Reply};
    /// let reply: Reply = Reply::new("").menu(Menu::buttons("Anything else?").item("yes", "Yes").item("no", "No"));
    /// ```
    pub fn menu(self, menu: Menu) -> Self {
        self.step(Step::Menu(menu))
    }

    /// Appends a flow screen.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Field, Reply, Screen};
    /// let reply: Reply = Reply::new("").screen(Screen::form("details", "Details").field(Field::text("name", "Name")));
    /// ```
    pub fn screen(self, screen: Screen) -> Self {
        self.step(Step::Screen(screen))
    }

    /// Appends a payment step.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{PaymentRequest, Reply};
    /// let reply: Reply = Reply::new("").payment(PaymentRequest::new("order-1", 350, "EUR", "Coffee"));
    /// ```
    pub fn payment(self, request: PaymentRequest) -> Self {
        self.step(Step::Payment(request))
    }

    /// Appends the completion step with its summary (may be empty).
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{FieldValue, Reply, Value};
    /// let reply: Reply = Reply::new("").completed(vec![FieldValue::new("item", Value::Text("tea".into()))]);
    /// ```
    pub fn completed(self, summary: Vec<FieldValue>) -> Self {
        self.step(Step::Completed(summary))
    }
}
