//! Field definitions and the one validator for submitted values: the Hubbub host validates flow forms (a
//! screen's fields) and account fields (required at linking) with it, and the guest SDK's test harness
//! (`hubbub_guest_sdk::testing`) applies it to the submissions it sends a bot, so a bot's tests see what
//! the host would refuse. Definitions compile to a JSON Schema checked with `jsonschema`; formats the
//! schema cannot express exactly (a real calendar date, our e-mail and E.164 rules, in [`rules`]) are
//! checked after it. Values are normalised first: numeric strings become numbers and `"yes"`/`"no"`
//! become booleans.
//!
//! ```
//! use hubbub_forms::{FieldDef, validate};
//! use serde_json::json;
//!
//! let fields: Vec<FieldDef> = serde_json::from_value(json!([
//!     {"key": "email", "type": "email", "label": "E-mail", "required": true},
//!     {"key": "age", "type": "number", "label": "Age"}
//! ]))
//! .unwrap();
//! let clean = validate(&fields, json!({"email": "ana@example.com", "age": "34"}).as_object().unwrap()).unwrap();
//! assert_eq!(clean["age"], 34);
//! let errors = validate(&fields, json!({"email": "ana@"}).as_object().unwrap()).unwrap_err();
//! assert_eq!(errors["email"], "not a valid e-mail address");
//! ```

#![warn(missing_docs)]

pub mod rules;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::rules::{is_code, is_date, is_e164, is_email};

/// The type of a form field (INTERFACE.md's form field table), written in lower case in JSON.
///
/// ```
/// # use hubbub_forms::FieldType;
/// assert_eq!(serde_json::to_value(FieldType::Email).unwrap(), "email");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// Free text, at most 4096 characters.
    Text,
    /// An E.164 phone number.
    Phone,
    /// An e-mail address.
    Email,
    /// A number (a numeric string is accepted).
    Number,
    /// A calendar date written `YYYY-MM-DD`.
    Date,
    /// Yes or no (`"yes"`/`"no"`/`"true"`/`"false"` are accepted).
    Boolean,
    /// The id of one of the field's options.
    Select,
}

// The doc comments of `Choice` are its description in the host's OpenAPI document (`docs/openapi.json`):
// the struct's one line only, the fields none. `id` is what is submitted, `label` what the user sees.
/// One offered option of a `select` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[allow(missing_docs)]
pub struct Choice {
    #[cfg_attr(feature = "utoipa", schema(min_length = 1))]
    pub id: String,
    #[cfg_attr(feature = "utoipa", schema(min_length = 1))]
    pub label: String,
}

/// A field definition, as INTERFACE.md shows it.
///
/// ```
/// # use hubbub_forms::{FieldDef, FieldType};
/// # use hubbub_forms::Choice;
/// let def: FieldDef = serde_json::from_str(r#"{"key": "name", "type": "text", "label": "Name", "required": true}"#).unwrap();
/// assert_eq!(def.kind, FieldType::Text);
/// let plan = FieldDef {
///     key: "plan".into(),
///     kind: FieldType::Select,
///     label: "Plan".into(),
///     required: true,
///     placeholder: None,
///     options: vec![Choice { id: "pro".into(), label: "Pro".into() }],
/// };
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldDef {
    /// The key the value is submitted under.
    pub key: String,
    /// The type, which decides how the value is checked.
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// What the user sees.
    pub label: String,
    /// Whether a (non-blank) value must be submitted.
    #[serde(default)]
    pub required: bool,
    /// The hint shown in the empty field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// The options of a `select` field (none for other types).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<Choice>,
}

/// Longest accepted text value.
const MAX_TEXT: usize = 4096;

fn is_blank(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// The value as the field's type wants it, where a lenient spelling is accepted.
fn normalise(kind: FieldType, v: &Value) -> Value {
    match (kind, v) {
        (FieldType::Number, Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(n) if n.is_finite() => {
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    json!(n as i64)
                } else {
                    json!(n)
                }
            }
            _ => v.clone(),
        },
        (FieldType::Boolean, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "yes" | "true" => Value::Bool(true),
            "no" | "false" => Value::Bool(false),
            _ => v.clone(),
        },
        (FieldType::Text | FieldType::Phone | FieldType::Email | FieldType::Date, Value::String(s)) => {
            Value::String(s.trim().to_string())
        }
        _ => v.clone(),
    }
}

/// The JSON Schema of a set of definitions.
///
/// ```
/// # use hubbub_forms::{FieldDef, schema};
/// let defs: Vec<FieldDef> = serde_json::from_str(r#"[{"key": "age", "type": "number", "label": "Age"}]"#).unwrap();
/// assert_eq!(schema(&defs)["properties"]["age"]["type"], "number");
/// ```
pub fn schema(defs: &[FieldDef]) -> Value {
    let mut properties = Map::new();
    for def in defs {
        let prop = match def.kind {
            FieldType::Text => json!({"type": "string", "maxLength": MAX_TEXT}),
            FieldType::Phone => json!({"type": "string", "pattern": "^\\+[1-9][0-9]{6,14}$"}),
            FieldType::Email => json!({"type": "string", "format": "email", "maxLength": 254}),
            FieldType::Number => json!({"type": "number"}),
            FieldType::Date => json!({"type": "string", "format": "date"}),
            FieldType::Boolean => json!({"type": "boolean"}),
            FieldType::Select => {
                json!({"type": "string", "enum": def.options.iter().map(|o| o.id.clone()).collect::<Vec<_>>()})
            }
        };
        properties.insert(def.key.clone(), prop);
    }
    let required: Vec<&str> = defs.iter().filter(|d| d.required).map(|d| d.key.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": required})
}

fn type_message(kind: FieldType) -> &'static str {
    match kind {
        FieldType::Text => "must be text of at most 4096 characters",
        FieldType::Phone => "must be an E.164 phone number, e.g. +15551230000",
        FieldType::Email => "not a valid e-mail address",
        FieldType::Number => "must be a number",
        FieldType::Date => "must be a date written YYYY-MM-DD",
        FieldType::Boolean => "must be true or false (yes/no)",
        FieldType::Select => "must be one of the offered options",
    }
}

/// Validates `values` against `defs`. Returns the normalised values of the defined fields (others are
/// dropped), or a message per invalid field key.
///
/// ```
/// # use hubbub_forms::{FieldDef, validate};
/// let defs: Vec<FieldDef> = serde_json::from_str(r#"[{"key": "name", "type": "text", "label": "Name", "required": true}]"#).unwrap();
/// let errors = validate(&defs, &serde_json::Map::new()).unwrap_err();
/// assert_eq!(errors["name"], "is required");
/// ```
pub fn validate(
    defs: &[FieldDef],
    values: &Map<String, Value>,
) -> Result<Map<String, Value>, BTreeMap<String, String>> {
    let mut errors = BTreeMap::new();
    let mut clean = Map::new();
    for def in defs {
        match values.get(&def.key) {
            Some(v) if !is_blank(v) => {
                clean.insert(def.key.clone(), normalise(def.kind, v));
            }
            _ if def.required => {
                errors.insert(def.key.clone(), "is required".to_string());
            }
            _ => {}
        }
    }
    let instance = Value::Object(clean.clone());
    match jsonschema::options().should_validate_formats(true).build(&schema(defs)) {
        Ok(validator) => {
            for error in validator.iter_errors(&instance) {
                let path = error.instance_path().as_str().trim_start_matches('/').to_string();
                let key = path.split('/').next().unwrap_or("").to_string();
                if let Some(def) = defs.iter().find(|d| d.key == key) {
                    errors.entry(key).or_insert_with(|| type_message(def.kind).to_string());
                }
            }
        }
        Err(e) => {
            // Definitions are checked when they are stored; this is a bug, but no value passes unchecked.
            #[cfg(feature = "tracing")]
            tracing::error!(error = %e, "field definitions do not compile to a schema");
            #[cfg(not(feature = "tracing"))]
            let _ = e;
            for def in defs {
                errors.entry(def.key.clone()).or_insert_with(|| "cannot be validated".to_string());
            }
        }
    }
    // Exact format rules beyond the schema.
    for def in defs {
        let Some(Value::String(s)) = clean.get(&def.key) else { continue };
        let ok = match def.kind {
            FieldType::Email => is_email(s),
            FieldType::Phone => is_e164(s),
            FieldType::Date => is_date(s),
            _ => true,
        };
        if !ok {
            errors.entry(def.key.clone()).or_insert_with(|| type_message(def.kind).to_string());
        }
    }
    if errors.is_empty() { Ok(clean) } else { Err(errors) }
}

/// Checks a set of definitions itself: keys are codes and unique, select fields have options.
///
/// ```
/// # use hubbub_forms::{FieldDef, check_definitions};
/// let defs: Vec<FieldDef> = serde_json::from_str(r#"[{"key": "plan", "type": "select", "label": "Plan"}]"#).unwrap();
/// assert_eq!(check_definitions(&defs).unwrap_err(), r#"select field "plan" needs options"#);
/// ```
pub fn check_definitions(defs: &[FieldDef]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for def in defs {
        if !is_code(&def.key) {
            return Err(format!("field key {:?} must match ^[a-z0-9][a-z0-9_-]{{0,63}}$", def.key));
        }
        if !seen.insert(def.key.as_str()) {
            return Err(format!("field key {:?} appears twice", def.key));
        }
        if def.kind == FieldType::Select && def.options.is_empty() {
            return Err(format!("select field {:?} needs options", def.key));
        }
        if def.kind != FieldType::Select && !def.options.is_empty() {
            return Err(format!("only select fields have options ({:?})", def.key));
        }
        let mut ids = std::collections::HashSet::new();
        if def.options.iter().any(|o| o.id.is_empty() || !ids.insert(o.id.as_str())) {
            return Err(format!("options of {:?} need unique, non-empty ids", def.key));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signup_fields() -> Vec<FieldDef> {
        serde_json::from_value(json!([
            {"key": "name", "type": "text", "label": "Name", "required": true},
            {"key": "email", "type": "email", "label": "E-mail", "required": true},
            {"key": "phone", "type": "phone", "label": "Phone", "required": true},
            {"key": "birthday", "type": "date", "label": "Birthday", "required": false},
            {"key": "plan", "type": "select", "label": "Plan", "required": true, "options": [{"id": "basic", "label": "Basic"}, {"id": "pro", "label": "Pro"}]},
            {"key": "newsletter", "type": "boolean", "label": "Newsletter", "required": false},
            {"key": "age", "type": "number", "label": "Age", "required": false}
        ]))
        .unwrap()
    }

    fn run(v: Value) -> Result<Map<String, Value>, BTreeMap<String, String>> {
        validate(&signup_fields(), v.as_object().unwrap())
    }

    #[test]
    fn valid_values_pass_and_are_normalised() {
        let out = run(json!({"name": " Ana ", "email": "ana@example.com", "phone": "+15551230000", "birthday": "1990-02-28", "plan": "pro", "newsletter": "yes", "age": "34", "extra": 1})).unwrap();
        assert_eq!(out["name"], "Ana");
        assert_eq!(out["newsletter"], true);
        assert_eq!(out["age"], 34);
        assert!(!out.contains_key("extra"));
    }

    #[test]
    fn every_type_rejects_bad_values() {
        let errors = run(json!({"name": 5, "email": "ana@", "phone": "555", "birthday": "2023-02-30", "plan": "gold", "newsletter": "maybe", "age": "old"})).unwrap_err();
        for key in ["name", "email", "phone", "birthday", "plan", "newsletter", "age"] {
            assert!(errors.contains_key(key), "{key} not rejected: {errors:?}");
        }
        assert_eq!(errors["email"], "not a valid e-mail address");
    }

    #[test]
    fn required_fields_must_be_present_and_not_blank() {
        let errors = run(json!({"name": "  ", "plan": null})).unwrap_err();
        assert_eq!(errors["name"], "is required");
        assert_eq!(errors["email"], "is required");
        assert_eq!(errors["plan"], "is required");
        assert!(!errors.contains_key("birthday"), "optional");
    }

    #[test]
    fn definitions_are_checked() {
        assert!(check_definitions(&signup_fields()).is_ok());
        let mut bad = signup_fields();
        bad[4].options.clear();
        assert!(check_definitions(&bad).is_err());
        let mut dup = signup_fields();
        dup[1].key = "name".into();
        assert!(check_definitions(&dup).is_err());
    }
}
