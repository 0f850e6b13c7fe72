//! Form fields, flow screens, and typed access to submitted values.

/// A flow screen: a form of several fields, or a single input or select field.
///
/// ```no_run
/// # use hubbub_guest_sdk::{Field, Screen};
/// let screen = Screen::form("delivery", "Delivery")
///     .field(Field::text("address", "Address").required())
///     .field(Field::date("when", "Date").required());
/// ```
pub use crate::wit::hubbub::bot::forms::Screen;
/// How a [`Screen`] is presented.
///
/// ```no_run
/// # use hubbub_guest_sdk::{Field, Screen, ScreenKind};
/// assert_eq!(Screen::input("age", "Age", Field::number("age", "Age")).kind, ScreenKind::Input);
/// ```
pub use crate::wit::hubbub::bot::forms::ScreenKind;
/// The values a user submitted for a screen, already validated by the host. Read them by key with
/// [`text`](Submission::text), [`number`](Submission::number), [`boolean`](Submission::boolean),
/// [`date`](Submission::date) and [`choice`](Submission::choice).
///
/// ```no_run
/// # use hubbub_guest_sdk::Submission;
/// fn plan(submission: &Submission) -> &str {
///     submission.choice("plan").unwrap_or("basic")
/// }
/// ```
pub use crate::wit::hubbub::bot::forms::Submission;
/// One option of a select field; usually built with [`Field::option`].
///
/// ```no_run
/// # use hubbub_guest_sdk::Choice;
/// let basic = Choice { id: "basic".into(), label: "Basic".into() };
/// ```
pub use crate::wit::hubbub::bot::types::Choice;
/// A form field definition. Build one with a constructor per type, then [`required`](Field::required),
/// [`placeholder`](Field::placeholder) and, for selects, [`option`](Field::option).
///
/// ```no_run
/// # use hubbub_guest_sdk::Field;
/// let name = Field::text("name", "Name").required().placeholder("Ada Lovelace");
/// let plan = Field::select("plan", "Plan").option("basic", "Basic").option("pro", "Pro");
/// ```
pub use crate::wit::hubbub::bot::types::Field;
/// The type of a [`Field`]; the host validates submitted values by it.
///
/// ```no_run
/// # use hubbub_guest_sdk::{Field, FieldType};
/// assert_eq!(Field::email("email", "E-mail").type_, FieldType::Email);
/// ```
pub use crate::wit::hubbub::bot::types::FieldType;
/// A value with the key of its field: an entry of a [`Submission`] or of a completion summary.
///
/// ```no_run
/// # use hubbub_guest_sdk::{FieldValue, Value};
/// let item = FieldValue::new("item", Value::Text("coffee".into()));
/// ```
pub use crate::wit::hubbub::bot::types::FieldValue;
/// A submitted value. `text`, `phone` and `email` fields arrive as [`Value::Text`], `select` fields as
/// [`Value::Choice`] (the option id), dates as `YYYY-MM-DD`.
///
/// ```no_run
/// # use hubbub_guest_sdk::Value;
/// fn describe(value: &Value) -> String {
///     match value {
///         Value::Text(s) | Value::Date(s) | Value::Choice(s) => s.clone(),
///         Value::Number(n) => n.to_string(),
///         Value::Boolean(b) => if *b { "yes".into() } else { "no".into() },
///     }
/// }
/// ```
pub use crate::wit::hubbub::bot::types::Value;

impl Field {
    /// A field of the given type; optional, no placeholder, no options.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Field, FieldType};
    /// let field = Field::new(FieldType::Number, "age", "Age");
    /// ```
    pub fn new(type_: FieldType, key: impl Into<String>, label: impl Into<String>) -> Self {
        Field { key: key.into(), type_, label: label.into(), required: false, placeholder: None, options: Vec::new() }
    }

    /// A free-text field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let name = Field::text("name", "Name").required();
    /// ```
    pub fn text(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self::new(FieldType::Text, key, label)
    }

    /// A phone number field (E.164); submitted as [`Value::Text`].
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let phone = Field::phone("phone", "Phone").placeholder("+31612345678");
    /// ```
    pub fn phone(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self::new(FieldType::Phone, key, label)
    }

    /// An e-mail field; submitted as [`Value::Text`].
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let email = Field::email("email", "E-mail").required();
    /// ```
    pub fn email(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self::new(FieldType::Email, key, label)
    }

    /// A number field; submitted as [`Value::Number`].
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let guests = Field::number("guests", "Number of guests");
    /// ```
    pub fn number(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self::new(FieldType::Number, key, label)
    }

    /// A date field (`YYYY-MM-DD`); submitted as [`Value::Date`].
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let birthday = Field::date("birthday", "Birthday");
    /// ```
    pub fn date(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self::new(FieldType::Date, key, label)
    }

    /// A yes/no field; submitted as [`Value::Boolean`].
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let newsletter = Field::boolean("newsletter", "Send me the newsletter");
    /// ```
    pub fn boolean(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self::new(FieldType::Boolean, key, label)
    }

    /// A select field; add its options with [`option`](Field::option). Submitted as [`Value::Choice`].
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let plan = Field::select("plan", "Plan").option("basic", "Basic").option("pro", "Pro");
    /// ```
    pub fn select(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self::new(FieldType::Select, key, label)
    }

    /// Makes the field required.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// assert!(Field::text("name", "Name").required().required);
    /// ```
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Sets the hint shown in the empty field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let email = Field::email("email", "E-mail").placeholder("you@example.com");
    /// ```
    pub fn placeholder(mut self, placeholder: impl Into<String>) -> Self {
        self.placeholder = Some(placeholder.into());
        self
    }

    /// Adds an option to a select field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Field;
    /// let size = Field::select("size", "Size").option("small", "Small").option("large", "Large");
    /// ```
    pub fn option(mut self, id: impl Into<String>, label: impl Into<String>) -> Self {
        self.options.push(Choice { id: id.into(), label: label.into() });
        self
    }
}

impl FieldValue {
    /// A value with its key.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{FieldValue, Value};
    /// let paid = FieldValue::new("amount", Value::Number(4.5));
    /// ```
    pub fn new(key: impl Into<String>, value: Value) -> Self {
        FieldValue { key: key.into(), value }
    }
}

impl Screen {
    /// A screen of the given kind with no fields yet.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Field, Screen, ScreenKind};
    /// let screen = Screen::new("details", "Your details", ScreenKind::Form).field(Field::text("name", "Name"));
    /// ```
    pub fn new(id: impl Into<String>, title: impl Into<String>, kind: ScreenKind) -> Self {
        Screen { id: id.into(), title: title.into(), kind, fields: Vec::new() }
    }

    /// A multi-field form; add fields with [`field`](Screen::field).
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Field, Screen};
    /// let screen = Screen::form("details", "Your details")
    ///     .field(Field::text("name", "Name").required())
    ///     .field(Field::email("email", "E-mail").required());
    /// ```
    pub fn form(id: impl Into<String>, title: impl Into<String>) -> Self {
        Self::new(id, title, ScreenKind::Form)
    }

    /// A screen asking for a single field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Field, Screen};
    /// let screen = Screen::input("coupon", "Coupon", Field::text("code", "Coupon code"));
    /// ```
    pub fn input(id: impl Into<String>, title: impl Into<String>, field: Field) -> Self {
        Self::new(id, title, ScreenKind::Input).field(field)
    }

    /// A screen showing the options of a single select field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Field, Screen};
    /// let screen = Screen::select(
    ///     "plan",
    ///     "Choose a plan",
    ///     Field::select("plan", "Plan").required().option("basic", "Basic").option("pro", "Pro"),
    /// );
    /// ```
    pub fn select(id: impl Into<String>, title: impl Into<String>, field: Field) -> Self {
        Self::new(id, title, ScreenKind::Select).field(field)
    }

    /// Appends a field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Field, Screen};
    /// let screen = Screen::form("notes", "Notes").field(Field::text("notes", "Notes"));
    /// ```
    pub fn field(mut self, field: Field) -> Self {
        self.fields.push(field);
        self
    }
}

impl Submission {
    /// The submitted value for `key`, if the user filled it in.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Submission;
    /// fn filled_in(submission: &Submission, key: &str) -> bool {
    ///     submission.get(key).is_some()
    /// }
    /// ```
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.iter().find(|v| v.key == key).map(|v| &v.value)
    }

    /// The text of a `text`, `phone` or `email` field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Submission;
    /// fn name(submission: &Submission) -> &str {
    ///     submission.text("name").unwrap_or("there")
    /// }
    /// ```
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::Text(text) => Some(text),
            _ => None,
        }
    }

    /// The value of a `number` field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Submission;
    /// fn guests(submission: &Submission) -> u32 {
    ///     submission.number("guests").map_or(1, |n| n as u32)
    /// }
    /// ```
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.get(key)? {
            Value::Number(number) => Some(*number),
            _ => None,
        }
    }

    /// The value of a `boolean` field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Submission;
    /// fn wants_newsletter(submission: &Submission) -> bool {
    ///     submission.boolean("newsletter").unwrap_or(false)
    /// }
    /// ```
    pub fn boolean(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Boolean(boolean) => Some(*boolean),
            _ => None,
        }
    }

    /// The value of a `date` field, `YYYY-MM-DD`.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Submission;
    /// fn when(submission: &Submission) -> Option<&str> {
    ///     submission.date("when")
    /// }
    /// ```
    pub fn date(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::Date(date) => Some(date),
            _ => None,
        }
    }

    /// The picked option id of a `select` field.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Submission;
    /// fn is_pro(submission: &Submission) -> bool {
    ///     submission.choice("plan") == Some("pro")
    /// }
    /// ```
    pub fn choice(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::Choice(id) => Some(id),
            _ => None,
        }
    }
}
