//! Templates: their text (`{{placeholder}}` parsing, the automatic review, rendering with variables: pure
//! functions, unit-tested here) and their keeping (a new one checked, a partner's list, a review's
//! decision). Storage is in `store::templates`, Meta's review of WhatsApp templates in
//! `delivery::meta_review`, the API in `http::templates`.

use serde_json::{Map, Value};

/// One piece of a template body.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// Why a body cannot be approved.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum TemplateProblem {
    #[error("unbalanced braces: '{{{{' without a matching '}}}}'")]
    Unclosed,
    #[error("unbalanced braces: '}}}}' without a matching '{{{{'")]
    Unopened,
    #[error("placeholder {0:?} is not an identifier (letters, digits and '_', not starting with a digit)")]
    BadName(String),
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse(body: &str) -> Result<Vec<Piece<'_>>, TemplateProblem> {
    let mut pieces = Vec::new();
    let mut rest = body;
    loop {
        let open = rest.find("{{");
        let close = rest.find("}}");
        match (open, close) {
            (None, None) => {
                if !rest.is_empty() {
                    pieces.push(Piece::Text(rest));
                }
                return Ok(pieces);
            }
            (None, Some(_)) => return Err(TemplateProblem::Unopened),
            (Some(o), Some(c)) if c < o => return Err(TemplateProblem::Unopened),
            (Some(_), None) => return Err(TemplateProblem::Unclosed),
            (Some(o), Some(_)) => {
                if o > 0 {
                    pieces.push(Piece::Text(&rest[..o]));
                }
                let after = &rest[o + 2..];
                let end = after.find("}}").ok_or(TemplateProblem::Unclosed)?;
                let inner = &after[..end];
                if inner.contains("{{") {
                    return Err(TemplateProblem::Unclosed);
                }
                let name = inner.trim();
                if !is_identifier(name) {
                    return Err(TemplateProblem::BadName(name.to_string()));
                }
                pieces.push(Piece::Var(name));
                rest = &after[end + 2..];
            }
        }
    }
}

/// Checks a body the way the automatic review does.
pub fn review(body: &str) -> Result<(), TemplateProblem> {
    parse(body).map(|_| ())
}

/// The distinct placeholder names of a body, in order of first use. A body that does not parse yields
/// the well-formed names it has before the fault (it will be rejected at review anyway).
pub fn variables(body: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = body;
    while let Some(o) = rest.find("{{") {
        let after = &rest[o + 2..];
        let Some(end) = after.find("}}") else { break };
        let name = after[..end].trim();
        if is_identifier(name) && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
        rest = &after[end + 2..];
    }
    names
}

/// The body as WhatsApp writes it: each `{{name}}` becomes `{{n}}`, its position in [`variables`] from 1
/// (Meta's positional parameters, sent in that order).
pub fn positional(body: &str) -> String {
    let names = variables(body);
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(end) = after.find("}}") else { break };
        let name = after[..end].trim();
        out.push_str(&rest[..open]);
        match names.iter().position(|n| n == name) {
            Some(i) => out.push_str(&format!("{{{{{}}}}}", i + 1)),
            None => out.push_str(&rest[open..open + 2 + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Why a body could not be rendered.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RenderError {
    #[error("variable {0:?} is missing")]
    Missing(String),
    #[error(transparent)]
    Malformed(#[from] TemplateProblem),
    #[error("the rendered text would be {size} bytes; at most {max} are allowed")]
    TooLong { size: usize, max: usize },
}

/// Renders a body with `vars`: strings as they are, numbers and booleans as JSON prints them. The result
/// may be at most `max_bytes` long; its size is computed before anything is allocated, so a short body
/// that repeats a long variable cannot make the host build a huge string.
pub fn render(body: &str, vars: &Map<String, Value>, max_bytes: usize) -> Result<String, RenderError> {
    let pieces = parse(body)?;
    let mut values: Vec<std::borrow::Cow<'_, str>> = Vec::with_capacity(pieces.len());
    let mut size = 0usize;
    for piece in &pieces {
        let text = match piece {
            Piece::Text(t) => std::borrow::Cow::Borrowed(*t),
            Piece::Var(name) => match vars.get(*name) {
                Some(Value::String(s)) => std::borrow::Cow::Borrowed(s.as_str()),
                Some(Value::Null) | None => return Err(RenderError::Missing(name.to_string())),
                Some(other) => std::borrow::Cow::Owned(other.to_string()),
            },
        };
        size = size.saturating_add(text.len());
        values.push(text);
    }
    if size > max_bytes {
        return Err(RenderError::TooLong { size, max: max_bytes });
    }
    let mut out = String::with_capacity(size);
    values.iter().for_each(|v| out.push_str(v));
    Ok(out)
}

/// Longest value of one variable a developer may fill in, in characters.
pub const MAX_PARAMETER_CHARS: usize = 200;

/// Whether `value` may fill a variable of an approved template sent by a developer. As WhatsApp does for
/// template parameters: short (at most [`MAX_PARAMETER_CHARS`] characters), with no newline or tab and no
/// run of more than four spaces, so a variable names a value and cannot carry a message of its own past
/// the review.
pub fn check_parameter(value: &Value) -> Result<(), String> {
    let text = match value {
        Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
        Value::Number(_) | Value::Bool(_) => std::borrow::Cow::Owned(value.to_string()),
        Value::Null => return Ok(()),
        _ => return Err("must be a string, a number or a boolean".into()),
    };
    if text.chars().count() > MAX_PARAMETER_CHARS {
        return Err(format!("is at most {MAX_PARAMETER_CHARS} characters"));
    }
    if text.contains(['\n', '\r', '\t']) {
        return Err("may not contain a newline or a tab".into());
    }
    if text.contains("     ") {
        return Err("may not contain more than four spaces in a row".into());
    }
    Ok(())
}

pub use crate::store::templates::{Template, find_template as find, list_templates as list};

/// A template to keep: its code, channel, language (`en` when absent), category and body.
pub struct NewTemplateInput<'a> {
    pub code: Option<&'a str>,
    pub channel: Option<crate::names::Channel>,
    pub lang: Option<&'a str>,
    pub category: Option<crate::names::Category>,
    pub body: Option<&'a str>,
}

/// Keeps a new template of partner `partner_id` (a draft), checked: a code, a channel, a language code, a
/// category and a body; unique by code, channel and language.
pub async fn create(
    db: &crate::store::Db,
    partner_id: i64,
    input: NewTemplateInput<'_>,
    now: crate::clock::Millis,
) -> Result<Template, crate::validate::KeepError> {
    use crate::names::{Category, Channel};
    use crate::validate::{Invalid, KeepError};
    let code = input.code.unwrap_or("").trim();
    if !crate::validate::is_code(code) {
        return Err(Invalid::new("code", "code must match ^[a-z0-9][a-z0-9_-]{0,63}$").into());
    }
    let channel = input
        .channel
        .ok_or_else(|| Invalid::new("channel", format!("channel must be one of {}", Channel::names().join(", "))))?
        .as_str();
    let lang = input.lang.map(str::trim).filter(|l| !l.is_empty()).unwrap_or("en");
    if !is_lang(lang) {
        return Err(Invalid::new("lang", "lang must be a language code such as en or pt-BR").into());
    }
    let category = input
        .category
        .ok_or_else(|| Invalid::new("category", format!("category must be one of {}", Category::names().join(", "))))?
        .as_str();
    let body = input.body.unwrap_or("");
    if body.trim().is_empty() {
        return Err(Invalid::new("body", "body is required").into());
    }
    let variables = variables(body);
    let new = crate::store::templates::NewTemplate { code, channel, lang, category, body, variables: &variables };
    crate::store::templates::insert_template(db, partner_id, &new, now)
        .await?
        .ok_or_else(|| KeepError::Taken(format!("template {code:?} already exists for {channel} in {lang}")))
}

/// Whether `s` is a language code: `en`, `pt-BR`, `es_419`.
fn is_lang(s: &str) -> bool {
    let mut parts = s.split(['-', '_']);
    let primary = parts.next().unwrap_or("");
    (2..=3).contains(&primary.len())
        && primary.chars().all(|c| c.is_ascii_lowercase())
        && parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// The automatic review's decision for a body: `approved`, or `rejected` with the reason.
pub fn auto_decision(body: &str) -> (crate::names::TemplateStatus, Option<String>) {
    match review(body) {
        Ok(()) => (crate::names::TemplateStatus::Approved, None),
        Err(problem) => (crate::names::TemplateStatus::Rejected, Some(problem.to_string())),
    }
}

/// Decides partner (`partner_id`, `partner_code`)'s submitted template `id` here: by the automatic review
/// when the host reviews automatically, else `pending` for an operator; with its `template.status` event.
pub async fn decide(
    db: &crate::store::Db,
    (partner_id, partner_code): (i64, &str),
    t: &Template,
    auto_review: bool,
    now: crate::clock::Millis,
) -> Result<Option<Template>, sqlx::Error> {
    let (status, reason) =
        if auto_review { auto_decision(&t.body) } else { (crate::names::TemplateStatus::Pending, None) };
    crate::store::templates::set_status(db, partner_id, t.id, status, reason.as_deref(), now, |t| {
        crate::events::template_status(partner_code, t, now)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_short_single_line_values() {
        assert!(check_parameter(&json!("Ana")).is_ok());
        assert!(check_parameter(&json!(42)).is_ok());
        assert!(check_parameter(&json!("a    b")).is_ok());
        assert!(check_parameter(&json!("a     b")).is_err());
        assert!(check_parameter(&json!("line\nbreak")).is_err());
        assert!(check_parameter(&json!("tab\there")).is_err());
        assert!(check_parameter(&json!("x".repeat(201))).is_err());
        assert!(check_parameter(&json!("é".repeat(200))).is_ok());
        assert!(check_parameter(&json!({"a": 1})).is_err());
    }

    use serde_json::json;

    fn vars(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn extracts_variables_in_order_without_duplicates() {
        assert_eq!(variables("Hi {{name}}, code {{ code }} for {{name}}"), vec!["name", "code"]);
        assert!(variables("no placeholders").is_empty());
    }

    #[test]
    fn renders_strings_and_numbers() {
        let out = render("Hi {{name}}, you owe {{ amount }}.", &vars(json!({"name": "Ana", "amount": 12.5})), 1000);
        assert_eq!(out.unwrap(), "Hi Ana, you owe 12.5.");
    }

    #[test]
    fn missing_variable_is_named() {
        assert_eq!(render("Hi {{name}}", &Map::new(), 1000), Err(RenderError::Missing("name".into())));
        assert_eq!(render("Hi {{name}}", &vars(json!({"name": null})), 1000), Err(RenderError::Missing("name".into())));
    }

    #[test]
    fn rendering_is_capped_before_it_allocates() {
        let body = "{{a}}".repeat(5_000);
        let big = vars(json!({"a": "x".repeat(20_000)}));
        assert_eq!(render(&body, &big, 65_536), Err(RenderError::TooLong { size: 100_000_000, max: 65_536 }));
        assert_eq!(render("{{a}}{{a}}", &vars(json!({"a": "xyz"})), 6).unwrap(), "xyzxyz");
        assert!(matches!(
            render("{{a}}{{a}}", &vars(json!({"a": "xyz"})), 5),
            Err(RenderError::TooLong { size: 6, .. })
        ));
    }

    #[test]
    fn review_rejects_unbalanced_and_bad_names() {
        assert_eq!(review("Hi {{name"), Err(TemplateProblem::Unclosed));
        assert_eq!(review("Hi name}}"), Err(TemplateProblem::Unopened));
        assert_eq!(review("Hi {{ {{name}}"), Err(TemplateProblem::Unclosed));
        assert_eq!(review("Hi {{first name}}"), Err(TemplateProblem::BadName("first name".into())));
        assert_eq!(review("Hi {{1st}}"), Err(TemplateProblem::BadName("1st".into())));
        assert_eq!(review("Hi {{}}"), Err(TemplateProblem::BadName(String::new())));
        assert!(review("Hi {{name}}, {{ code_2 }}").is_ok());
        assert!(review("plain text with { single } braces").is_ok());
    }

    #[test]
    fn whatsapp_bodies_are_positional_in_order_of_first_use() {
        assert_eq!(super::positional("Hi {{name}}, order {{ order }} for {{name}}"), "Hi {{1}}, order {{2}} for {{1}}");
        assert_eq!(super::positional("No placeholders"), "No placeholders");
        assert_eq!(super::positional("{{a}}{{b}} and {{"), "{{1}}{{2}} and {{");
    }

    #[test]
    fn languages() {
        assert!(super::is_lang("en") && super::is_lang("pt-BR") && super::is_lang("es_419"));
        assert!(!super::is_lang("EN") && !super::is_lang("e") && !super::is_lang("en-") && !super::is_lang(""));
    }
}
