//! `GET /api/v1/openapi.json`: the OpenAPI 3.1 document of the whole API, derived from the code. Each
//! handler carries its `#[utoipa::path]` (route, parameters, request and response types, its own error
//! statuses), each body type its `ToSchema`, and the router that serves the handlers is the one that
//! collects them (`utoipa_axum::routes!`), so a route cannot be served undocumented or documented unserved.
//!
//! The decisions every operation shares are made once, here, in [`finish`]: the error responses any
//! operation can give (by whether it is authenticated and whether it takes a body), the declaration of path
//! parameters, and the security schemes. The document is committed as `docs/openapi.json`; a test fails when
//! the two differ (`hubbub openapi > docs/openapi.json` refreshes it).

use std::sync::LazyLock;

use axum::Json;
use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::state::AppState;

/// The contract's error body: `{"error": {"code", "message", "field"?, "fields"?}}`.
#[derive(Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable: `validation`, `not_found`, `conflict`, `rate_limited`, …
    code: String,
    /// For people; never parsed.
    message: String,
    /// The request field at fault (dotted for nested fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    /// One message per invalid field (form submissions).
    #[serde(skip_serializing_if = "Option::is_none")]
    fields: Option<std::collections::BTreeMap<String, String>>,
}

/// A query filter over a closed set of names. Filters are read as text where an empty value means "no
/// filter" (`?state=` lists everything), so the empty string is one of the values the document allows.
pub fn filter_of(names: &[&'static str], description: &str) -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .description(Some(format!("{description}; empty: no filter")))
        .enum_values(Some(names.iter().copied().chain([""])))
        .build()
}

/// A time as records show them (`YYYY-MM-DD HH:MM:SS`, UTC), every day of it a real date (the 29th of
/// February in leap years only), so that whatever matches is a time the server reads.
pub const RECORD_TIME: &str = "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)\
     |02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29) \
     (?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]";

/// A required time in the record format (`YYYY-MM-DD HH:MM:SS`, UTC).
pub fn record_time_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .pattern(Some(format!("^{RECORD_TIME}$")))
        .build()
}

/// A time filter in the record format (`YYYY-MM-DD HH:MM:SS`, UTC); empty: no filter.
pub fn record_time_filter(description: &str) -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .description(Some(format!("{description} (`YYYY-MM-DD HH:MM:SS`, UTC); empty: no filter")))
        .pattern(Some(format!("^(?:{RECORD_TIME})?$")))
        .build()
}

/// Bytes of any type, in a response (`{"type": "string", "format": "binary"}`).
pub struct Binary;

impl utoipa::PartialSchema for Binary {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Binary)))
            .into()
    }
}

impl utoipa::ToSchema for Binary {}

/// The error responses of the document, one per status, each a type an operation names in its
/// `#[utoipa::path]` (`(status = 404, response = E404)`) for the statuses particular to it; the statuses
/// every operation of a kind can give are added by [`finish`]. `(type, status, description, Retry-After)`.
macro_rules! error_responses {
    ($( $name:ident = $status:literal, $description:literal, $retry_after:literal; )+) => {
        $(
            #[doc = $description]
            pub struct $name;

            impl<'r> utoipa::ToResponse<'r> for $name {
                fn response() -> (&'r str, utoipa::openapi::RefOr<utoipa::openapi::response::Response>) {
                    (stringify!($name), error_response($description, $retry_after).into())
                }
            }
        )+

        const ERRORS: &[(u16, &str, bool)] = &[$(($status, $description, $retry_after)),+];
    };
}

error_responses! {
    E400 = 400, "`bad_request`: not JSON, not an object, or wrong content type", false;
    E401 = 401, "`unauthorized`: credential missing, malformed, unknown or revoked", false;
    E403 = 403, "`forbidden`: valid credential of the wrong kind", false;
    E404 = 404, "`not_found`: no such resource for this caller", false;
    E409 = 409, "`conflict` or `idempotency_conflict`", false;
    E413 = 413, "`payload_too_large`", false;
    E416 = 416, "`range_not_satisfiable`: the range starts past the end; `Content-Range: bytes */{size}` gives the size", false;
    E422 = 422, "`validation` (with `field`), or another 422 code such as `e2e_no_devices` or `template_not_approved`", false;
    E429 = 429, "`rate_limited`; see `Retry-After`", true;
    E502 = 502, "`bot_error` (the bot failed to answer), `delivery_failed` (a provider refused) or `payment_provider_error` (the payment provider refused or did not answer)", false;
    E503 = 503, "`timeout` (the request outlived the host's request timeout) or `unavailable` (the host cannot take this work now; see `Retry-After`)", true;
}

/// An error response: the error body, and `Retry-After` where the client should wait.
fn error_response(description: &str, retry_after: bool) -> utoipa::openapi::response::Response {
    use utoipa::openapi::header::Header;
    use utoipa::openapi::{ContentBuilder, ObjectBuilder, Ref, ResponseBuilder, Type};
    let mut response = ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))).build());
    if retry_after {
        response = response.header("Retry-After", Header::new(ObjectBuilder::new().schema_type(Type::Integer)));
    }
    response.build()
}

/// The security schemes: `(name, description, bearer format)`.
const SCHEMES: &[(&str, &str, Option<&str>)] = &[
    ("partnerKey", "Partner API key `sk_…`", None),
    ("developerKey", "Developer key `sk_dev_…`", None),
    ("botToken", "Bot token `bot_<prefix>.<secret>`, scoped to its bot", None),
    (
        "userJwt",
        "User JWT from OTP login (HS256; claims `sub` = phone, `dev` = device uuid, `exp`, `iat`; `sub` and `exp` are required, and a token without `iat` counts as issued at the epoch)",
        Some("JWT"),
    ),
];

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Hubbub API",
        version = "1.0.0",
        description = "Partner messaging: hub messages with WhatsApp and SMS fallback, templates, accounts, conversations, broadcasts, bots and flows, end-to-end encrypted envelopes, signed webhooks.\n\nErrors always have the body `{\"error\": {\"code\", \"message\", \"field\"?, \"fields\"?}}`. Lists are `{\"data\": [...], \"next_cursor\"}`, newest first. Record times are `YYYY-MM-DD HH:MM:SS` UTC. Every response carries `x-request-id`."
    ),
    servers((url = "/")),
    components(schemas(
        ErrorBody,
        crate::encryption::EnvelopeSchema,
        crate::events::MessageStatusEvent,
        crate::events::MessageAttemptEvent,
        crate::events::TemplateStatusEvent,
        crate::events::AccountClaimedEvent,
        crate::events::AccountErasedEvent,
        crate::events::ConversationMessageEvent,
        crate::events::ConversationSlaBreachedEvent,
        crate::events::PaymentStatusEvent,
    )),
    modifiers(&SecuritySchemes)
)]
struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, description, format) in SCHEMES {
            let mut scheme = Http::new(HttpAuthScheme::Bearer);
            scheme.description = Some(description.to_string());
            scheme.bearer_format = format.map(str::to_string);
            components.add_security_scheme(*name, SecurityScheme::Http(scheme));
        }
        let mut cookie = utoipa::openapi::security::ApiKeyValue::new(crate::members::COOKIE);
        cookie.description = Some(
            "A partner member's session (`POST /members/sessions`): an HttpOnly, SameSite=Strict cookie. A request \
             that changes something must also come from this origin (`Sec-Fetch-Site: same-origin`, or an `Origin` \
             equal to the host's public URL): the CSRF check."
                .to_string(),
        );
        components.add_security_scheme(
            "memberSession",
            SecurityScheme::ApiKey(utoipa::openapi::security::ApiKey::Cookie(cookie)),
        );
    }
}

/// The router every documented route is collected by, starting from the document's fixed parts.
pub fn base() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
}

/// `GET /api/v1/openapi.json`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(serve))
}

/// The OpenAPI document of this API (what this route serves; also `docs/openapi.json`).
#[utoipa::path(get, path = "/openapi.json", tag = "meta", responses((status = 200, description = "This document", body = Object)))]
async fn serve() -> Json<&'static Value> {
    Json(document())
}

/// The whole document, built once.
pub fn document() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
        let (_, derived) = super::documented().split_for_parts();
        finish(derived)
    });
    &DOCUMENT
}

/// The document as committed in `docs/openapi.json`: pretty-printed, ending in a newline.
pub fn document_text() -> String {
    let mut text = serde_json::to_string_pretty(document()).expect("a JSON value serialises");
    text.push('\n');
    text
}

/// The derived document with what every operation shares (error responses, path parameters) and the
/// events partners receive.
fn finish(derived: utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(derived).expect("the document serialises");
    doc["webhooks"] = webhooks();
    let responses: Map<String, Value> = ERRORS
        .iter()
        .map(|(status, description, retry_after)| {
            let response = serde_json::to_value(error_response(description, *retry_after)).expect("serialises");
            (format!("E{status}"), response)
        })
        .collect();
    doc["components"]["responses"] = Value::Object(responses);
    rules_between_fields(&mut doc);
    for (path, ops) in doc["paths"].as_object_mut().expect("paths") {
        for operation in ops.as_object_mut().into_iter().flat_map(|ops| ops.values_mut()) {
            common_errors(operation);
            declare_path_params(path, operation);
        }
    }
    doc
}

/// Rules between the fields of a request body that a derive cannot say, added to their schemas so that a
/// client (and schemathesis) learns them before a 422: each is a JSON Schema `anyOf`/`oneOf` of the
/// combinations the handler takes.
fn rules_between_fields(doc: &mut Value) {
    // Each branch is a whole object schema with typed properties, as code generators want them.
    let object = |required: &[&str], properties: Value| json!({ "type": "object", "required": required, "properties": properties });
    let none = json!({ "type": "null" });
    let field_types: Vec<&str> =
        crate::forms::ACCOUNT_FIELD_TYPES.iter().copied().filter(|t| *t != "selection").collect();
    let rules = [
        // `POST /messages/read`: the ids, or a phone, not both.
        (
            "BulkRead",
            json!({ "oneOf": [
                object(&["message_ids"], json!({ "message_ids": { "type": "array", "items": { "type": "integer" } }, "phone": none })),
                object(&["phone"], json!({ "phone": { "type": "string" }, "message_ids": none })),
            ] }),
        ),
        // `POST /bots`: a bot in webhook mode needs the URL its events go to.
        (
            "CreateBot",
            json!({ "anyOf": [
                object(&[], json!({ "runtime_mode": { "type": ["string", "null"], "enum": ["local", null] } })),
                object(&["runtime_mode", "webhook_url"], json!({
                    "runtime_mode": { "type": "string", "enum": ["webhook"] },
                    "webhook_url": { "type": "string", "minLength": 1 },
                })),
            ] }),
        ),
        // `PATCH /bots/{code}`: webhook mode is not asked for while clearing the URL.
        (
            "UpdateBot",
            json!({ "anyOf": [
                object(&[], json!({ "runtime_mode": { "type": ["string", "null"], "enum": ["local", null] } })),
                object(&[], json!({ "webhook_url": { "type": "string", "minLength": 1 } })),
            ] }),
        ),
        // `PATCH /conversations/{id}`: closing it, assigning it, or both; not nothing.
        (
            "UpdateConversation",
            json!({ "anyOf": [
                object(&["state"], json!({ "state": { "type": "string", "enum": ["closed"] } })),
                object(&["assignee_id"], json!({ "assignee_id": { "type": ["integer", "null"], "minimum": 1 } })),
            ] }),
        ),
        // Account fields: a selection has its options, and only a selection has options.
        (
            "AccountFieldInput",
            json!({ "oneOf": [
                object(&["type", "options"], json!({
                    "type": { "type": "string", "enum": ["selection"] },
                    "options": { "type": "array", "minItems": 1, "items": { "$ref": "#/components/schemas/Choice" } },
                })),
                object(&[], json!({ "type": { "type": "string", "enum": field_types }, "options": none })),
            ] }),
        ),
    ];
    for (name, rule) in rules {
        let schema = doc["components"]["schemas"][name].as_object_mut().unwrap_or_else(|| panic!("no schema {name}"));
        schema.extend(rule.as_object().expect("a rule is an object").clone());
    }
}

/// The events partners receive (OpenAPI `webhooks`), each POSTed signed to the partner's URL: the payload
/// types of [`crate::events`], with the signature headers (docs/webhooks.md).
fn webhooks() -> Value {
    let header = |name: &str, description: &str| json!({ "name": name, "in": "header", "required": true, "schema": { "type": "string" }, "description": description });
    let headers = json!([
        header("X-Service-Event", "The event name"),
        header("X-Service-Delivery", "The delivery id: the same on every retry"),
        header("X-Service-Signature", "Hex HMAC-SHA256 of the raw body keyed with the whole secret"),
        header("webhook-id", "Standard Webhooks: the delivery id"),
        header("webhook-timestamp", "Standard Webhooks: seconds since the epoch"),
        header("webhook-signature", "Standard Webhooks v1: `v1,<base64 HMAC-SHA256 of id.timestamp.body>`"),
    ]);
    let events = [
        ("message.status", "MessageStatusEvent"),
        ("message.attempt", "MessageAttemptEvent"),
        ("template.status", "TemplateStatusEvent"),
        ("account.claimed", "AccountClaimedEvent"),
        ("account.erased", "AccountErasedEvent"),
        ("conversation.message", "ConversationMessageEvent"),
        ("conversation.sla_breached", "ConversationSlaBreachedEvent"),
        ("payment.status", "PaymentStatusEvent"),
    ];
    let webhooks = events.iter().map(|(event, schema)| {
        let operation = json!({ "post": {
            "summary": event,
            "parameters": headers,
            "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } },
            "responses": { "2XX": { "description": "Received; any other answer is retried with backoff" } },
        } });
        (event.to_string(), operation)
    });
    Value::Object(webhooks.collect())
}

/// Adds the error statuses any operation of its kind can give: every request can outlive the request
/// timeout (503); an authenticated one can be refused its credential or rate-limited (401, 403, 429); one
/// with a body can be malformed, too large or invalid (400, 413, 422); one with query parameters can be
/// given a value of the wrong type or out of range (422).
fn common_errors(operation: &mut Value) {
    let mut statuses = vec![503];
    if operation["security"].as_array().is_some_and(|s| !s.is_empty()) {
        statuses.extend([401, 403, 429]);
    }
    if operation.get("requestBody").is_some() {
        statuses.extend([400, 413, 422]);
    }
    if operation["parameters"].as_array().is_some_and(|ps| ps.iter().any(|p| p["in"] == "query")) {
        statuses.push(422);
    }
    let responses = operation["responses"].as_object_mut().expect("every operation has responses");
    for status in statuses {
        responses
            .entry(status.to_string())
            .or_insert_with(|| json!({ "$ref": format!("#/components/responses/E{status}") }));
    }
}

/// E.164, as every phone number in the API.
pub const E164: &str = "^\\+[1-9][0-9]{6,14}$";
/// Resource codes (partner, bot, template, field, flow).
pub const CODE: &str = "^[a-z0-9][a-z0-9_-]{0,63}$";

/// Declares the `{name}` parameters of `path` on the operation (those it does not declare itself), with
/// one schema per name across the API.
fn declare_path_params(path: &str, operation: &mut Value) {
    let names = path.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')));
    for name in names {
        let declared = operation["parameters"]
            .as_array()
            .is_some_and(|params| params.iter().any(|p| p["name"] == name && p["in"] == "path"));
        if declared {
            continue;
        }
        let (schema, description) = match name {
            "phone" => (json!({ "type": "string", "pattern": E164 }), "The user's phone number (E.164)"),
            "code" | "flow" => (json!({ "type": "string", "pattern": CODE }), "A resource code"),
            "id" => (json!({ "type": "string", "minLength": 1 }), "The resource's id, as its record gives it"),
            "ref" => (json!({ "type": "string", "minLength": 1 }), "The resource's ref, as its record gives it"),
            "prefix" => {
                (json!({ "type": "string", "minLength": 1 }), "The key's displayed prefix (`sk_dev_` and 8 characters)")
            }
            _ => (json!({ "type": "string", "minLength": 1 }), "An id from an earlier answer"),
        };
        let param =
            json!({ "name": name, "in": "path", "required": true, "schema": schema, "description": description });
        match operation["parameters"].as_array_mut() {
            Some(params) => params.push(param),
            None => operation["parameters"] = json!([param]),
        }
    }
}

#[cfg(test)]
mod tests {
    /// `docs/openapi.json` is the document the code derives; `HUBBUB_BLESS=1` rewrites it.
    #[test]
    fn the_committed_document_is_the_derived_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
        let derived = super::document_text();
        if std::env::var_os("HUBBUB_BLESS").is_some() {
            std::fs::write(path, &derived).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == derived,
            "docs/openapi.json differs from the document the code derives: run `cargo run -p hubbub-host -- openapi > docs/openapi.json` (or HUBBUB_BLESS=1 cargo test -p hubbub-host --lib openapi)"
        );
    }

    /// Every `$ref` in the document resolves.
    #[test]
    fn every_reference_resolves() {
        fn walk(value: &serde_json::Value, doc: &serde_json::Value, dangling: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(target) = map.get("$ref").and_then(|r| r.as_str()) {
                        let pointer = target.trim_start_matches('#');
                        if doc.pointer(pointer).is_none() {
                            dangling.push(target.to_string());
                        }
                    }
                    map.values().for_each(|v| walk(v, doc, dangling));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, doc, dangling)),
                _ => {}
            }
        }
        let doc = super::document();
        let mut dangling = Vec::new();
        walk(doc, doc, &mut dangling);
        assert!(dangling.is_empty(), "references that resolve to nothing: {dangling:?}");
    }
}
