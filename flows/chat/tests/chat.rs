//! The chat bot run natively with the SDK's test harness.

use chat::{Chat, ChatState};
use hubbub_guest_sdk::log::Level;
use hubbub_guest_sdk::testing::{Refused, Session, json};
use hubbub_guest_sdk::{ScreenKind, Step};

#[test]
fn greets_echoes_and_answers_menu_picks() {
    let mut session = Session::<Chat>::chat().unwrap();
    assert_eq!(session.messages(), ["Hi! I'm the Hubbub assistant."]);
    let ids: Vec<&str> = session.menu().unwrap().sections[0].items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["help", "hours", "agent"]);
    assert_eq!(session.raw_state(), r#"{"events":0}"#);

    session.text("hello").unwrap();
    assert_eq!(session.messages(), ["You said: hello"]);
    assert_eq!(
        session.text("   ").unwrap_err(),
        Refused::Invalid { field: "text".into(), message: "text is required".into() }
    );

    session.select("hours").unwrap();
    assert_eq!(session.messages(), ["We're open Monday to Friday, 9:00 to 17:00."]);
    assert_eq!(session.state(), ChatState { events: 2 });
    assert!(session.logs().iter().any(|l| l.level == Level::Debug && l.message == "menu pick hours"));
}

#[test]
fn single_field_screens_are_validated_before_the_bot_sees_them() {
    let mut session = Session::<Chat>::chat().unwrap();
    session.select("help").unwrap();
    assert_eq!(session.screen().unwrap().kind, ScreenKind::Select);
    assert_eq!(
        session.submit("topic", json!({"topic": "refunds"})).unwrap_err(),
        Refused::fields([("topic", "must be one of the offered options")])
    );
    assert_eq!(session.state().events, 1, "the bot was not called");
    session.submit("topic", json!({"topic": "orders"})).unwrap();
    assert!(session.messages()[0].starts_with("Orders:"));
    assert!(session.screen().is_none());

    session.select("agent").unwrap();
    assert_eq!(session.screen().unwrap().kind, ScreenKind::Input);
    assert_eq!(session.submit("question", json!({})).unwrap_err(), Refused::fields([("question", "is required")]));
    let steps = session.submit("question", json!({"question": "  Where is my tea? "})).unwrap();
    assert_eq!(steps[0], Step::Message("Thanks, an agent will get back to you about: Where is my tea?".into()));
    assert!(!session.is_completed(), "a chat goes on");
}

#[test]
fn chat_offers_no_flows() {
    let error =
        Session::<Chat>::start(hubbub_guest_sdk::Entry::Flow("signup".into()), hubbub_guest_sdk::testing::context());
    assert_eq!(error.unwrap_err(), Refused::Bot("chat offers no flows (asked for signup)".into()));
}
