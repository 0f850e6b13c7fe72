//! The signup flow run natively with the SDK's test harness: submissions are validated exactly as the
//! host validates them, before the bot is called.

use hubbub_guest_sdk::log::Level;
use hubbub_guest_sdk::testing::{LogLine, Refused, Session, json};
use hubbub_guest_sdk::{FieldValue, ScreenKind, Step, Value};
use signup::{Signup, SignupState};

fn details() -> hubbub_guest_sdk::testing::Json {
    json!({
        "name": " Ana Silva ", "email": "ana@example.com", "phone": "+31612345678",
        "birthday": "1990-02-28", "plan": "pro", "newsletter": "yes"
    })
}

#[test]
fn shows_the_details_form_and_logs_the_start() {
    let session = Session::<Signup>::flow("signup").unwrap();
    let screen = session.screen().expect("details is waiting");
    assert_eq!((screen.id.as_str(), screen.kind), ("details", ScreenKind::Form));
    let keys: Vec<&str> = screen.fields.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["name", "email", "phone", "birthday", "plan", "newsletter"]);
    assert_eq!(session.state(), SignupState { submits: 0 });
    assert_eq!(session.raw_state(), r#"{"submits":0}"#);
    assert_eq!(session.logs(), [LogLine { level: Level::Info, message: "signup started for +15551230000".into() }]);
}

#[test]
fn invalid_details_are_refused_per_field_and_never_reach_the_bot() {
    let mut session = Session::<Signup>::flow("signup").unwrap();
    let refused = session
        .submit(
            "details",
            json!({"name": "  ", "email": "ana@", "phone": "0612345678", "birthday": "2023-02-30", "plan": "gold", "newsletter": "maybe"}),
        )
        .unwrap_err();
    assert_eq!(
        refused,
        Refused::fields([
            ("birthday", "must be a date written YYYY-MM-DD"),
            ("email", "not a valid e-mail address"),
            ("name", "is required"),
            ("newsletter", "must be true or false (yes/no)"),
            ("phone", "must be an E.164 phone number, e.g. +15551230000"),
            ("plan", "must be one of the offered options"),
        ])
    );
    assert_eq!(session.state().submits, 0, "the bot was not called");
    assert_eq!(session.logs().len(), 1, "only the start logged");
    assert!(session.screen().is_some(), "details still waits");

    let refused = session.submit("other", details()).unwrap_err();
    assert_eq!(
        refused,
        Refused::Invalid {
            field: "screen".into(),
            message: r#"the screen waiting for a submission is "details""#.into()
        }
    );
}

#[test]
fn valid_details_complete_with_the_normalised_values() {
    let mut session = Session::<Signup>::flow("signup").unwrap();
    let steps = session.submit("details", details()).unwrap();
    let text = |key: &str, s: &str| FieldValue::new(key, Value::Text(s.into()));
    let summary = vec![
        text("name", "Ana Silva"),
        text("email", "ana@example.com"),
        text("phone", "+31612345678"),
        FieldValue::new("birthday", Value::Date("1990-02-28".into())),
        FieldValue::new("plan", Value::Choice("pro".into())),
        FieldValue::new("newsletter", Value::Boolean(true)),
    ];
    assert_eq!(steps, [Step::Completed(summary.clone())]);
    assert!(session.is_completed());
    assert_eq!(session.summary(), Some(summary.as_slice()));
    assert_eq!(session.state(), SignupState { submits: 1 });
    assert_eq!(session.logs()[1].message, "signup details submitted (1 so far)");
    assert_eq!(session.submit("details", details()).unwrap_err(), Refused::Completed);
}

#[test]
fn a_state_that_does_not_parse_is_a_bot_error_and_unknown_flows_are_refused() {
    let mut session = Session::<Signup>::flow("signup").unwrap();
    session.set_raw_state("not json");
    let Refused::Bot(message) = session.submit("details", details()).unwrap_err() else { panic!("a bot error") };
    assert!(message.starts_with("bad state for signup::SignupState: "), "{message}");
    assert!(matches!(Session::<Signup>::flow("nope"), Err(Refused::Invalid { .. })));
    let error =
        Session::<Signup>::start(hubbub_guest_sdk::Entry::Flow("nope".into()), hubbub_guest_sdk::testing::context());
    assert_eq!(error.unwrap_err(), Refused::Bot("unknown flow nope".into()));
    assert_eq!(Session::<Signup>::chat().unwrap_err(), Refused::Bot("signup is a flow, not a chat bot".into()));
}
