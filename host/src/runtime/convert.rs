//! Conversions between the API's types and the WIT types, with the checks on what a guest answers:
//! steps become the contract's JSON (`docs/api.md`, "Bots and flows"; the step shapes of the OpenAPI document), malformed steps and oversized replies are refused.

use std::collections::HashSet;
use std::io;

use serde_json::{Map, Number, Value as Json, json};

use super::bindings as wit;
use super::{Entry, FlowInfo, GuestContext, GuestEvent, GuestReply, RuntimeError, truncate};
use crate::forms::{self, FieldDef, FieldType};

/// Most flows a component may offer.
const MAX_FLOWS: usize = 256;

pub(super) fn entry(entry: Entry) -> wit::Entry {
    match entry {
        Entry::Flow(code) => wit::Entry::Flow(code),
        Entry::Chat => wit::Entry::Chat,
    }
}

pub(super) fn context(ctx: GuestContext) -> wit::Context {
    wit::Context { bot: ctx.bot, phone: ctx.phone }
}

/// The event as the guest sees it. A submission's values are typed by the screen's fields; a value
/// that does not fit its field is a caller bug, refused as `Malformed`.
pub(super) fn event(event: GuestEvent) -> Result<wit::UserEvent, RuntimeError> {
    Ok(match event {
        GuestEvent::Text(text) => wit::UserEvent::Text(text),
        GuestEvent::Select(id) => wit::UserEvent::Select(id),
        GuestEvent::Submit { screen, mut values, fields } => {
            let mut typed = Vec::with_capacity(values.len());
            for field in &fields {
                if let Some(value) = values.remove(&field.key) {
                    typed.push(wit::FieldValue { key: field.key.clone(), value: submitted_value(field, value)? });
                }
            }
            if let Some(key) = values.keys().next() {
                return Err(malformed(format!("submitted value {key:?} has no field")));
            }
            wit::UserEvent::Submit(wit::Submission { screen, values: typed })
        }
        GuestEvent::Payment { id, status, reference } => {
            let status = match status.as_str() {
                "confirmed" => wit::PaymentStatus::Confirmed,
                "declined" => wit::PaymentStatus::Declined,
                "cancelled" => wit::PaymentStatus::Cancelled,
                other => return Err(malformed(format!("unknown payment status {other:?}"))),
            };
            wit::UserEvent::Payment(wit::PaymentResult { id, status, reference })
        }
    })
}

fn submitted_value(field: &FieldDef, value: Json) -> Result<wit::Value, RuntimeError> {
    Ok(match (field.kind, value) {
        (FieldType::Text | FieldType::Phone | FieldType::Email, Json::String(s)) => wit::Value::Text(s),
        (FieldType::Date, Json::String(s)) => wit::Value::Date(s),
        (FieldType::Select, Json::String(s)) => wit::Value::Choice(s),
        (FieldType::Number, Json::Number(n)) => match n.as_f64() {
            Some(n) => wit::Value::Number(n),
            None => return Err(malformed(format!("value of {:?} is not a number", field.key))),
        },
        (FieldType::Boolean, Json::Bool(b)) => wit::Value::Boolean(b),
        (kind, _) => {
            return Err(malformed(format!("value of {:?} does not fit a {kind:?} field", field.key)));
        }
    })
}

/// The guest's reply as JSON steps, checked, within `max_output_bytes` (steps as JSON plus the state).
pub(super) fn reply(reply: wit::Reply, max_output_bytes: usize) -> Result<GuestReply, RuntimeError> {
    if reply.state.len() > max_output_bytes {
        return Err(RuntimeError::OutputTooLarge);
    }
    let steps = reply.steps.into_iter().map(step).collect::<Result<Vec<_>, _>>()?;
    if json_len_exceeds(&steps, max_output_bytes - reply.state.len()) {
        return Err(RuntimeError::OutputTooLarge);
    }
    Ok(GuestReply { steps, state: reply.state })
}

/// The flows a component offers: codes as resource codes, each once.
pub(super) fn flows(flows: Vec<wit::FlowInfo>) -> Result<Vec<FlowInfo>, String> {
    if flows.len() > MAX_FLOWS {
        return Err(format!("more than {MAX_FLOWS} flows"));
    }
    let mut seen = HashSet::new();
    flows
        .into_iter()
        .map(|flow| {
            if !crate::validate::is_code(&flow.code) {
                return Err(format!(
                    "flow code {:?} must match ^[a-z0-9][a-z0-9_-]{{0,63}}$",
                    truncate(&flow.code, 80)
                ));
            }
            if !seen.insert(flow.code.clone()) {
                return Err(format!("flow {:?} is listed twice", flow.code));
            }
            Ok(FlowInfo { code: flow.code, title: truncate(&flow.title, 200) })
        })
        .collect()
}

fn step(step: wit::Step) -> Result<Json, RuntimeError> {
    Ok(match step {
        wit::Step::Message(text) => json!({"type": "message", "text": text}),
        wit::Step::Menu(menu) => menu_step(menu)?,
        wit::Step::Screen(screen) => screen_step(screen)?,
        wit::Step::Payment(payment) => payment_step(payment)?,
        wit::Step::Completed(summary) => {
            json!({"type": "flow_completed", "summary": summary_json(summary)?})
        }
    })
}

fn menu_step(menu: wit::Menu) -> Result<Json, RuntimeError> {
    if menu.sections.iter().all(|section| section.items.is_empty()) {
        return Err(malformed("a menu has no items"));
    }
    if menu.sections.iter().any(|section| section.items.is_empty()) {
        return Err(malformed("a menu section has no items"));
    }
    let mut ids = HashSet::new();
    for item in menu.sections.iter().flat_map(|section| &section.items) {
        if item.id.is_empty() || !ids.insert(item.id.as_str()) {
            return Err(malformed(format!("menu item ids must be unique and non-empty ({:?})", item.id)));
        }
    }
    let style = match menu.style {
        wit::MenuStyle::Button => "button",
        wit::MenuStyle::List => "list",
    };
    let sections: Vec<Json> = menu
        .sections
        .into_iter()
        .map(|section| {
            let items: Vec<Json> = section
                .items
                .into_iter()
                .map(|item| json!({"id": item.id, "label": item.label, "description": item.description}))
                .collect();
            json!({"title": section.title, "items": items})
        })
        .collect();
    Ok(json!({"type": "menu", "style": style, "text": menu.text, "sections": sections}))
}

fn screen_step(screen: wit::Screen) -> Result<Json, RuntimeError> {
    if screen.id.is_empty() {
        return Err(malformed("a screen has no id"));
    }
    if screen.fields.is_empty() {
        return Err(malformed(format!("screen {:?} has no fields", screen.id)));
    }
    let fields: Vec<FieldDef> = screen.fields.into_iter().map(field_def).collect();
    forms::check_definitions(&fields).map_err(|e| malformed(format!("screen {:?}: {e}", screen.id)))?;
    let kind = match screen.kind {
        wit::ScreenKind::Form => "form",
        wit::ScreenKind::Input => "input",
        wit::ScreenKind::Select => "select",
    };
    if kind != "form" && fields.len() != 1 {
        return Err(malformed(format!("{kind} screen {:?} must have exactly one field", screen.id)));
    }
    if kind == "select" && fields[0].kind != FieldType::Select {
        return Err(malformed(format!("select screen {:?} needs a select field", screen.id)));
    }
    Ok(json!({
        "type": "flow_screen",
        "screen": {"id": screen.id, "title": screen.title, "kind": kind, "fields": fields},
    }))
}

fn field_def(field: wit::Field) -> FieldDef {
    FieldDef {
        key: field.key,
        kind: match field.type_ {
            wit::FieldType::Text => FieldType::Text,
            wit::FieldType::Phone => FieldType::Phone,
            wit::FieldType::Email => FieldType::Email,
            wit::FieldType::Number => FieldType::Number,
            wit::FieldType::Date => FieldType::Date,
            wit::FieldType::Boolean => FieldType::Boolean,
            wit::FieldType::Select => FieldType::Select,
        },
        label: field.label,
        required: field.required,
        placeholder: field.placeholder,
        options: field.options.into_iter().map(|choice| forms::Choice { id: choice.id, label: choice.label }).collect(),
    }
}

fn payment_step(payment: wit::PaymentRequest) -> Result<Json, RuntimeError> {
    if payment.id.is_empty() {
        return Err(malformed("a payment has no id"));
    }
    if payment.currency.len() != 3 || !payment.currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(malformed(format!("payment currency {:?} is not an ISO 4217 code", payment.currency)));
    }
    Ok(json!({
        "type": "payment",
        "payment": {
            "id": payment.id,
            "amount_minor": payment.amount_minor,
            "currency": payment.currency,
            "description": payment.description,
        },
    }))
}

/// `{key: value}`: text, date and choice as strings, numbers as JSON numbers (integral ones as
/// integers, as the form validator normalises them), booleans as booleans.
fn summary_json(summary: Vec<wit::FieldValue>) -> Result<Json, RuntimeError> {
    let mut map = Map::with_capacity(summary.len());
    for item in summary {
        let value = match item.value {
            wit::Value::Text(s) | wit::Value::Date(s) | wit::Value::Choice(s) => Json::String(s),
            wit::Value::Boolean(b) => Json::Bool(b),
            wit::Value::Number(n) => number_json(n)
                .ok_or_else(|| malformed(format!("summary value {:?} is not a finite number", item.key)))?,
        };
        if map.insert(item.key.clone(), value).is_some() {
            return Err(malformed(format!("summary key {:?} appears twice", item.key)));
        }
    }
    Ok(Json::Object(map))
}

fn number_json(n: f64) -> Option<Json> {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Some(Json::Number((n as i64).into()))
    } else {
        Number::from_f64(n).map(Json::Number)
    }
}

fn malformed(message: impl AsRef<str>) -> RuntimeError {
    RuntimeError::Malformed(truncate(message.as_ref(), 300))
}

/// Whether `value` serialises to more than `limit` bytes; stops counting once over.
fn json_len_exceeds(value: &impl serde::Serialize, limit: usize) -> bool {
    struct Counter {
        len: usize,
        limit: usize,
    }
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.len += buf.len();
            if self.len > self.limit {
                return Err(io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Counter { len: 0, limit }, value).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(key: &str, type_: wit::FieldType) -> wit::Field {
        wit::Field {
            key: key.into(),
            type_,
            label: key.to_uppercase(),
            required: true,
            placeholder: None,
            options: if type_ == wit::FieldType::Select {
                vec![wit::Choice { id: "a".into(), label: "A".into() }]
            } else {
                Vec::new()
            },
        }
    }

    fn screen(kind: wit::ScreenKind, fields: Vec<wit::Field>) -> wit::Step {
        wit::Step::Screen(wit::Screen { id: "s".into(), title: "S".into(), kind, fields })
    }

    fn reply_of(steps: Vec<wit::Step>) -> Result<GuestReply, RuntimeError> {
        reply(wit::Reply { steps, state: "{}".into() }, 1 << 20)
    }

    #[test]
    fn steps_become_contract_json() {
        let menu = wit::Menu {
            text: "Pick".into(),
            style: wit::MenuStyle::List,
            sections: vec![wit::MenuSection {
                title: Some("Size".into()),
                items: vec![wit::MenuItem { id: "small".into(), label: "Small".into(), description: None }],
            }],
        };
        let payment = wit::PaymentRequest {
            id: "p1".into(),
            amount_minor: 350,
            currency: "EUR".into(),
            description: "Coffee".into(),
        };
        let out = reply_of(vec![
            wit::Step::Message("hi".into()),
            wit::Step::Menu(menu),
            screen(wit::ScreenKind::Select, vec![field("plan", wit::FieldType::Select)]),
            wit::Step::Payment(payment),
        ])
        .unwrap();
        assert_eq!(out.state, "{}");
        assert_eq!(out.steps[0], json!({"type": "message", "text": "hi"}));
        assert_eq!(
            out.steps[1],
            json!({"type": "menu", "style": "list", "text": "Pick", "sections": [
                {"title": "Size", "items": [{"id": "small", "label": "Small", "description": null}]}
            ]})
        );
        assert_eq!(
            out.steps[2],
            json!({"type": "flow_screen", "screen": {"id": "s", "title": "S", "kind": "select", "fields": [
                {"key": "plan", "type": "select", "label": "PLAN", "required": true, "options": [{"id": "a", "label": "A"}]}
            ]}})
        );
        assert_eq!(
            out.steps[3],
            json!({"type": "payment", "payment": {"id": "p1", "amount_minor": 350, "currency": "EUR", "description": "Coffee"}})
        );
    }

    #[test]
    fn summary_values_keep_their_json_types() {
        let value = |key: &str, value| wit::FieldValue { key: key.into(), value };
        let out = reply_of(vec![wit::Step::Completed(vec![
            value("name", wit::Value::Text("Ana".into())),
            value("age", wit::Value::Number(34.0)),
            value("ratio", wit::Value::Number(0.5)),
            value("news", wit::Value::Boolean(true)),
            value("day", wit::Value::Date("2024-02-29".into())),
            value("plan", wit::Value::Choice("pro".into())),
        ])])
        .unwrap();
        assert_eq!(
            out.steps[0],
            json!({"type": "flow_completed", "summary": {
                "name": "Ana", "age": 34, "ratio": 0.5, "news": true, "day": "2024-02-29", "plan": "pro"
            }})
        );
        let nan = reply_of(vec![wit::Step::Completed(vec![value("x", wit::Value::Number(f64::NAN))])]);
        assert!(matches!(nan, Err(RuntimeError::Malformed(_))));
    }

    #[test]
    fn malformed_steps_are_refused() {
        use wit::FieldType as T;
        use wit::ScreenKind as K;
        let no_options = wit::Field { options: Vec::new(), ..field("plan", T::Select) };
        let cases = vec![
            ("no fields", screen(K::Form, vec![])),
            ("duplicate keys", screen(K::Form, vec![field("a", T::Text), field("a", T::Date)])),
            ("select without options", screen(K::Form, vec![no_options])),
            ("input with two fields", screen(K::Input, vec![field("a", T::Text), field("b", T::Text)])),
            ("select screen of text", screen(K::Select, vec![field("a", T::Text)])),
            (
                "empty menu",
                wit::Step::Menu(wit::Menu { text: "x".into(), style: wit::MenuStyle::Button, sections: vec![] }),
            ),
            (
                "bad currency",
                wit::Step::Payment(wit::PaymentRequest {
                    id: "p".into(),
                    amount_minor: 1,
                    currency: "euro".into(),
                    description: String::new(),
                }),
            ),
        ];
        for (name, step) in cases {
            assert!(matches!(reply_of(vec![step]), Err(RuntimeError::Malformed(_))), "{name} accepted");
        }
    }

    #[test]
    fn oversized_replies_are_refused() {
        let big = "x".repeat(600);
        let steps = vec![wit::Step::Message(big.clone()), wit::Step::Message(big)];
        let result = reply(wit::Reply { steps: steps.clone(), state: String::new() }, 1000);
        assert_eq!(result, Err(RuntimeError::OutputTooLarge));
        let state_too_big = reply(wit::Reply { steps: Vec::new(), state: "s".repeat(1001) }, 1000);
        assert_eq!(state_too_big, Err(RuntimeError::OutputTooLarge));
        assert!(reply(wit::Reply { steps, state: String::new() }, 2000).is_ok());
    }

    #[test]
    fn submissions_are_typed_by_their_fields() {
        let fields: Vec<FieldDef> = serde_json::from_value(json!([
            {"key": "name", "type": "text", "label": "Name"},
            {"key": "age", "type": "number", "label": "Age"},
            {"key": "news", "type": "boolean", "label": "News"},
            {"key": "day", "type": "date", "label": "Day"},
            {"key": "plan", "type": "select", "label": "Plan", "options": [{"id": "pro", "label": "Pro"}]},
            {"key": "notes", "type": "text", "label": "Notes"}
        ]))
        .unwrap();
        let values = json!({"plan": "pro", "name": "Ana", "age": 34, "news": false, "day": "2024-01-02"});
        let event = event(GuestEvent::Submit {
            screen: "details".into(),
            values: values.as_object().unwrap().clone(),
            fields: fields.clone(),
        })
        .unwrap();
        let wit::UserEvent::Submit(submission) = event else { panic!("not a submission") };
        assert_eq!(submission.screen, "details");
        let keys: Vec<&str> = submission.values.iter().map(|v| v.key.as_str()).collect();
        assert_eq!(keys, ["name", "age", "news", "day", "plan"], "field order, absent skipped");
        assert_eq!(submission.values[1].value, wit::Value::Number(34.0));
        assert_eq!(submission.values[2].value, wit::Value::Boolean(false));
        assert_eq!(submission.values[3].value, wit::Value::Date("2024-01-02".into()));
        assert_eq!(submission.values[4].value, wit::Value::Choice("pro".into()));

        let wrong_type = json!({"age": "old"});
        let unknown = json!({"colour": "red"});
        for values in [wrong_type, unknown] {
            let result = super::event(GuestEvent::Submit {
                screen: "details".into(),
                values: values.as_object().unwrap().clone(),
                fields: fields.clone(),
            });
            assert!(matches!(result, Err(RuntimeError::Malformed(_))));
        }
    }

    #[test]
    fn payment_statuses_map() {
        let payment =
            |status: &str| event(GuestEvent::Payment { id: "p".into(), status: status.into(), reference: None });
        assert!(matches!(
            payment("declined"),
            Ok(wit::UserEvent::Payment(wit::PaymentResult { status: wit::PaymentStatus::Declined, .. }))
        ));
        assert!(payment("refunded").is_err());
    }

    #[test]
    fn flows_are_checked() {
        let flow = |code: &str| wit::FlowInfo { code: code.into(), title: "T".into() };
        assert_eq!(flows(vec![flow("signup")]).unwrap()[0].code, "signup");
        assert!(flows(vec![flow("Sign Up")]).is_err());
        assert!(flows(vec![flow("a"), flow("a")]).is_err());
    }
}
