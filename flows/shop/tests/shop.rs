//! The order flow run natively with the SDK's test harness: menus, the delivery form (validated as the
//! host validates it), a declined then a confirmed payment, and the completion.

use hubbub_guest_sdk::testing::{Refused, Session, json};
use hubbub_guest_sdk::{FieldValue, MenuStyle, PaymentResult, PaymentStatus, Step, Value};
use shop::{Order, Shop, Stage};

fn ids(session: &Session<Shop>) -> Vec<String> {
    session.menu().unwrap().sections.iter().flat_map(|s| &s.items).map(|i| i.id.clone()).collect()
}

#[test]
fn an_order_goes_through_menus_form_and_payment() {
    let mut session = Session::<Shop>::flow("order").unwrap();
    assert_eq!(ids(&session), ["coffee", "tea"]);
    assert_eq!(session.state(), Order::default());

    session.select("tea").unwrap();
    assert_eq!(session.menu().unwrap().style, MenuStyle::List);
    assert_eq!(ids(&session), ["small", "large", "milk", "none"]);
    session.select("milk").unwrap();
    assert_eq!(session.messages(), ["Milk it is."]);
    session.select("large").unwrap();
    assert_eq!(session.screen().unwrap().id, "delivery");
    assert_eq!(session.state().stage, Stage::Delivery);

    let refused = session.submit("delivery", json!({"address": "", "when": "15-01-2030"})).unwrap_err();
    assert_eq!(refused, Refused::fields([("address", "is required"), ("when", "must be a date written YYYY-MM-DD")]));
    assert_eq!(session.state().stage, Stage::Delivery, "the bot was not called");

    session.submit("delivery", json!({"address": "Dam 1, Amsterdam", "when": "2030-01-15"})).unwrap();
    let pending = session.pending_payment().unwrap();
    assert_eq!((pending.id.as_str(), pending.amount_minor), ("order-tea-large-milk-1", 400));
    assert!(session.screen().is_none(), "no screen waits during the payment");
    assert!(
        session.logs().iter().any(|l| l.message == "payment order-tea-large-milk-1 requested: 400 EUR minor units")
    );

    session.decline_payment().unwrap();
    assert_eq!(session.messages(), ["The payment was declined. Please try again."]);
    assert_eq!(session.pending_payment().unwrap().id, "order-tea-large-milk-2");

    let stale =
        PaymentResult { id: "order-tea-large-milk-1".into(), status: PaymentStatus::Confirmed, reference: None };
    assert_eq!(
        session.payment(stale).unwrap_err(),
        Refused::Bot("payment order-tea-large-milk-1 is not the pending one".into())
    );

    let steps = session.confirm_payment("ref-123").unwrap();
    assert_eq!(steps[0], Step::Message("Paid, thank you! Your large tea with milk arrives on 2030-01-15.".into()));
    assert!(session.is_completed());
    let summary = session.summary().unwrap();
    assert_eq!(summary.last(), Some(&FieldValue::new("reference", Value::Text("ref-123".into()))));
    assert_eq!(session.state().stage, Stage::Done);
    assert!(session.pending_payment().is_none());
}

#[test]
fn events_out_of_order_are_bot_errors() {
    let mut session = Session::<Shop>::flow("order").unwrap();
    assert!(
        matches!(session.text("hello"), Err(Refused::Bot(m)) if m.starts_with("unexpected") && m.contains("hello"))
    );
    assert!(matches!(session.select("latte"), Err(Refused::Bot(m)) if m == "unknown item latte"));
    assert!(matches!(session.submit("delivery", json!({})), Err(Refused::Invalid { field, .. }) if field == "screen"));
    assert!(matches!(session.confirm_payment("x"), Err(Refused::Invalid { field, .. }) if field == "payment"));
}
