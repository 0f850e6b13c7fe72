//! Template parse, review and render: never panics, never renders past its cap, and a body that passes
//! review always renders when every variable is given.
#![no_main]

use hubbub_host::template::{RenderError, render, review, variables};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\u{0}');
    let body = parts.next().unwrap_or("");
    let values: Vec<&str> = parts.collect();
    let mut vars = Map::new();
    for (i, name) in variables(body).into_iter().enumerate() {
        let value = values.get(i % values.len().max(1)).copied().unwrap_or("x");
        vars.insert(name, Value::from(value));
    }
    match render(body, &vars, MAX) {
        Ok(out) => {
            assert!(out.len() <= MAX, "rendered {} bytes past the cap", out.len());
            assert!(review(body).is_ok(), "rendered a body that review rejects");
        }
        Err(RenderError::Malformed(_)) => assert!(review(body).is_err()),
        Err(RenderError::TooLong { size, max }) => assert!(size > max && max == MAX),
        Err(RenderError::Missing(name)) => panic!("variable {name} was given but reported missing"),
    }
});
