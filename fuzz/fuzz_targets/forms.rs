//! Form field definitions and submitted values, as the host validates them before a guest sees them:
//! never panics; what passes validation is keyed by defined fields only.
#![no_main]

use hubbub_host::forms::{FieldDef, check_definitions, schema, validate};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(input) = serde_json::from_slice::<Value>(data) else { return };
    let Ok(defs) = serde_json::from_value::<Vec<FieldDef>>(input["fields"].clone()) else { return };
    let values: Map<String, Value> = input["values"].as_object().cloned().unwrap_or_default();
    let _ = check_definitions(&defs);
    let _ = schema(&defs);
    if let Ok(clean) = validate(&defs, &values) {
        assert!(clean.keys().all(|k| defs.iter().any(|d| &d.key == k)), "an undefined field passed");
    }
});
