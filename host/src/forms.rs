//! Field definitions and the one validator for submitted values, shared by flow forms (a screen's fields)
//! and account fields (required at linking). The validator lives in the `hubbub-forms` crate
//! (`guest-sdk/forms`), so the guest SDK's test harness applies exactly what the host applies; account
//! field types are the host's own.

pub use hubbub_forms::{Choice, FieldDef, FieldType, check_definitions, schema, validate};

/// Account field types (`docs/api.md` and the OpenAPI document's `AccountField`) and the form field type that validates each.
pub const ACCOUNT_FIELD_TYPES: &[&str] = &["char", "text", "number", "date", "selection", "boolean", "email", "phone"];

pub fn account_field_kind(type_name: &str) -> Option<FieldType> {
    Some(match type_name {
        "char" | "text" => FieldType::Text,
        "number" => FieldType::Number,
        "date" => FieldType::Date,
        "selection" => FieldType::Select,
        "boolean" => FieldType::Boolean,
        "email" => FieldType::Email,
        "phone" => FieldType::Phone,
        _ => return None,
    })
}
