//! The operations of the OpenAPI document still described by hand: those of the resources whose handlers
//! do not carry `#[utoipa::path]` yet. [`super::openapi::finish`] adds them to the derived document; each
//! resource converted removes its part here, until this module is gone.

use serde_json::{Map, Value, json};

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn list_of(name: &str) -> Value {
    json!({
        "type": "object",
        "required": ["data", "next_cursor"],
        "properties": {
            "data": { "type": "array", "items": schema_ref(name) },
            "next_cursor": { "type": ["string", "null"], "description": "Pass as `cursor` for the next page; null on the last." }
        }
    })
}

/// One operation. `auth` is a security scheme name, or "" for an open route. Error responses every
/// authenticated route can give are added here.
fn op(summary: &str, tag: &str, auth: &str, body: Option<Value>, ok: (u16, &str, Value), errors: &[u16]) -> Value {
    let mut responses = Map::new();
    responses.insert(
        ok.0.to_string(),
        json!({ "description": ok.1, "content": { "application/json": { "schema": ok.2 } } }),
    );
    let mut all_errors: Vec<u16> = errors.to_vec();
    // Any request may outlive HUBBUB_REQUEST_TIMEOUT_MS (503 `timeout`).
    all_errors.push(503);
    if !auth.is_empty() {
        all_errors.extend([401, 403, 429]);
    }
    if body.is_some() {
        all_errors.extend([400, 413, 422]);
    }
    all_errors.sort();
    all_errors.dedup();
    for code in all_errors {
        responses.insert(code.to_string(), json!({ "$ref": format!("#/components/responses/E{code}") }));
    }
    let mut operation = json!({ "summary": summary, "tags": [tag], "responses": responses });
    if !auth.is_empty() {
        operation["security"] = json!([{ auth: [] }]);
    }
    if let Some(schema) = body {
        operation["requestBody"] = json!({ "required": true, "content": { "application/json": { "schema": schema } } });
    }
    operation
}

fn query_params(params: &[(&str, &str)]) -> Value {
    params
        .iter()
        .map(|(name, description)| json!({ "name": name, "in": "query", "required": false, "schema": { "type": "string" }, "description": description }))
        .collect()
}

fn with_params(mut operation: Value, params: Value) -> Value {
    operation["parameters"] = params;
    operation
}

/// E.164, as every phone number in the API.
const E164: &str = "^\\+[1-9][0-9]{6,14}$";
/// Resource codes (partner, bot, template, field, flow).
const CODE: &str = "^[a-z0-9][a-z0-9_-]{0,63}$";

/// Declares the `{name}` parameters of `path` on the operation (those it does not declare itself).
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

/// An operation whose request body is not JSON (or is signed raw bytes).
fn with_body(mut operation: Value, content_type: &str, schema: Value) -> Value {
    operation["requestBody"] = json!({ "required": true, "content": { content_type: { "schema": schema } } });
    operation
}

const PAGE: [(&str, &str); 2] = [
    ("limit", "Page size: default 50, at most 200 (larger is clamped)."),
    ("cursor", "The `next_cursor` of the previous page."),
];

/// The document.
pub fn document() -> Value {
    let partner = "partnerKey";
    let mut paths = Map::new();
    let mut add = |path: &str, method: &str, mut operation: Value| {
        declare_path_params(path, &mut operation);
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[method] = operation;
    };

    // Derived: messages, templates, media, accounts, login, users (http::me), conversations and keys.
    let _user = "userJwt";

    // Delivery helpers
    add(
        "/api/v1/dev-sink/messages",
        "get",
        with_params(
            op(
                "Dev mode only, platform partner only: what SMS and WhatsApp would have sent",
                "delivery",
                partner,
                None,
                (200, "Records {channel, phone, text, at}, newest first", json!({ "type": "object" })),
                &[404, 422],
            ),
            query_params(&[("phone", "E.164"), ("channel", "sms or whatsapp"), PAGE[0], PAGE[1]]),
        ),
    );

    // Webhooks
    add(
        "/api/v1/settings/webhook",
        "put",
        op(
            "Set where events go; the secret (whsec_…) is shown only when created or rotated",
            "webhooks",
            partner,
            Some(
                json!({ "type": "object", "properties": { "webhook_url": { "type": ["string", "null"] }, "rotate_secret": { "type": "boolean" } } }),
            ),
            (
                200,
                "The settings",
                json!({ "type": "object", "properties": {
            "webhook_url": { "type": ["string", "null"] }, "webhook_secret_prefix": { "type": "string" },
            "webhook_secret": { "type": "string", "description": "Only when created or rotated" } } }),
            ),
            &[],
        ),
    );
    add(
        "/api/v1/webhooks/test",
        "post",
        op(
            "Send one signed sample message.status event now",
            "webhooks",
            partner,
            None,
            (
                200,
                "What happened",
                json!({ "type": "object", "properties": {
            "ok": { "type": "boolean" }, "status": { "type": ["integer", "null"] }, "error": { "type": ["string", "null"] } } }),
            ),
            &[],
        ),
    );
    add(
        "/api/v1/webhooks/deliveries",
        "get",
        with_params(
            op(
                "Event deliveries, newest first",
                "webhooks",
                partner,
                None,
                (200, "A page of deliveries", list_of("WebhookDelivery")),
                &[422],
            ),
            query_params(&[
                ("state", "pending, succeeded, failed (retrying after a failure) or dead"),
                ("event", "event name"),
                PAGE[0],
                PAGE[1],
            ]),
        ),
    );
    add(
        "/api/v1/webhooks/deliveries/{id}/retry",
        "post",
        op(
            "Send a delivery again now (same delivery id)",
            "webhooks",
            partner,
            None,
            (200, "The delivery", schema_ref("WebhookDelivery")),
            &[404],
        ),
    );

    // Provider receipts (signed by the provider, no API key)
    add(
        "/api/v1/providers/twilio/status",
        "post",
        with_body(
            op(
                "Twilio status callback (StatusCallback of every SMS): delivered/read move the message, undelivered/failed fail it",
                "providers",
                "",
                None,
                (
                    200,
                    "Whether it matched one of our messages",
                    json!({ "type": "object", "properties": { "applied": { "type": "boolean" } } }),
                ),
                &[400, 403, 404, 422],
            ),
            "application/x-www-form-urlencoded",
            json!({ "type": "object", "required": ["MessageSid", "MessageStatus"], "description": "Signed: X-Twilio-Signature (HMAC-SHA1 with the auth token over the URL and sorted parameters)", "properties": { "MessageSid": { "type": "string" }, "MessageStatus": { "type": "string" }, "ErrorCode": { "type": "string" } } }),
        ),
    );
    add(
        "/api/v1/providers/whatsapp/webhook",
        "post",
        with_body(
            op(
                "WhatsApp Cloud API webhook: message statuses (delivered, read, failed)",
                "providers",
                "",
                None,
                (
                    200,
                    "How many statuses matched our messages",
                    json!({ "type": "object", "properties": { "applied": { "type": "integer" } } }),
                ),
                &[400, 403, 404],
            ),
            "application/json",
            json!({ "type": "object", "description": "Signed: X-Hub-Signature-256 = sha256=<hex HMAC-SHA256 of the body with HUBBUB_WHATSAPP_APP_SECRET>. entry[].changes[].value.statuses[] are read." }),
        ),
    );
    add(
        "/api/v1/providers/whatsapp/webhook",
        "get",
        with_params(
            op(
                "Meta's subscription handshake: answers hub.challenge (text) when hub.verify_token is HUBBUB_WHATSAPP_VERIFY_TOKEN",
                "providers",
                "",
                None,
                (200, "The challenge", json!({ "type": "string" })),
                &[403, 404, 422],
            ),
            query_params(&[
                ("hub.mode", "subscribe"),
                ("hub.verify_token", "the configured token"),
                ("hub.challenge", "echoed back"),
            ]),
        ),
    );

    // Broadcasts, developers, bots and flows: derived (http::broadcasts, developers, bots, flows).

    add(
        "/healthz",
        "get",
        op(
            "Liveness: the process answers (outside /api/v1; no credentials, no rate limit)",
            "meta",
            "",
            None,
            (
                200,
                "Alive",
                json!({ "type": "object", "required": ["status"], "properties": { "status": { "const": "ok" } } }),
            ),
            &[],
        ),
    );
    add("/metrics", "get", {
        let mut o = op(
            "Prometheus metrics in the text format (outside /api/v1): requests by route and status with latency histograms, messages accepted and delivered by channel, delivery and webhook backlogs, webhook attempts by outcome, bot calls by bot and outcome, rate-limit refusals, broadcasts in progress. Off (404) unless HUBBUB_METRICS_TOKEN is set; then that token as a bearer credential",
            "meta",
            "",
            None,
            (200, "The metrics", json!({ "type": "string" })),
            &[401, 404],
        );
        o["responses"]["200"]["content"] = json!({ "text/plain": { "schema": { "type": "string" } } });
        o
    });
    add("/readyz", "get", {
        let checks = json!({ "type": "object", "properties": {
            "database": { "type": "string" }, "migrations": { "type": "string" }, "workers": { "type": "string" } } });
        let mut o = op(
            "Readiness: both database pools answer, every migration is applied, the background workers run (outside /api/v1; no credentials, no rate limit)",
            "meta",
            "",
            None,
            (
                200,
                "Ready",
                json!({ "type": "object", "required": ["status", "checks"], "properties": { "status": { "const": "ready" }, "checks": checks.clone() } }),
            ),
            &[],
        );
        o["responses"]["503"] = json!({ "description": "Not ready: the error says which check failed; `checks` has each", "content": { "application/json": { "schema": {
            "allOf": [schema_ref("Error"), { "type": "object", "required": ["status", "checks"],
            "properties": { "status": { "const": "not_ready" }, "checks": checks } }] } } } });
        o
    });

    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Hubbub API",
            "version": "1.0.0",
            "description": "Partner messaging: hub messages with WhatsApp and SMS fallback, templates, accounts, conversations, broadcasts, bots and flows, end-to-end encrypted envelopes, signed webhooks.\n\nErrors always have the body `{\"error\": {\"code\", \"message\", \"field\"?, \"fields\"?}}`. Lists are `{\"data\": [...], \"next_cursor\"}`, newest first. Record times are `YYYY-MM-DD HH:MM:SS` UTC. Every response carries `x-request-id`."
        },
        "servers": [{ "url": "/" }],
        "paths": paths,
        "webhooks": webhooks(),
        "components": components(),
    });
    optional_request_fields_accept_null(&mut document);
    document
}

/// The server reads every optional request field as "absent" when it is `null`: say so in the document, on
/// the top-level fields of every JSON request body (nested objects such as `e2e_envelope` keep their rules).
fn optional_request_fields_accept_null(document: &mut Value) {
    fn nullable(schema: &mut Value, components: &mut Map<String, Value>, done: &mut Vec<String>) {
        if let Some(name) = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
            let name = name.to_string();
            if !done.contains(&name) {
                done.push(name.clone());
                if let Some(mut component) = components.remove(&name) {
                    nullable(&mut component, components, done);
                    components.insert(name, component);
                }
            }
            return;
        }
        // (`get_mut`, not indexing: indexing a missing key would insert a null.)
        if let Some(parts) = schema.get_mut("allOf").and_then(Value::as_array_mut) {
            parts.iter_mut().for_each(|part| nullable(part, components, done));
        }
        let required: Vec<String> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else { return };
        for (_, property) in properties.iter_mut().filter(|(name, _)| !required.contains(name)) {
            let with_null = match property.get("type") {
                Some(Value::String(t)) => json!([t, "null"]),
                Some(Value::Array(types)) if !types.contains(&json!("null")) => {
                    Value::Array(types.iter().cloned().chain([json!("null")]).collect())
                }
                _ => continue,
            };
            property["type"] = with_null;
            if let Some(values) = property.get_mut("enum").and_then(Value::as_array_mut) {
                values.push(Value::Null);
            }
        }
    }
    let mut components = document["components"]["schemas"].as_object().cloned().unwrap_or_default();
    let mut done = Vec::new();
    if let Some(paths) = document["paths"].as_object_mut() {
        for operation in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|ops| ops.values_mut()) {
            if let Some(schema) = operation.pointer_mut("/requestBody/content/application~1json/schema") {
                nullable(schema, &mut components, &mut done);
            }
        }
    }
    document["components"]["schemas"] = Value::Object(components);
}

/// The events partners receive (OpenAPI 3.1 `webhooks`). Signing: see docs/webhooks.md.
fn webhooks() -> Value {
    let event = |name: &str, properties: Value| {
        json!({ "post": {
            "summary": name,
            "parameters": [
                { "name": "X-Service-Event", "in": "header", "schema": { "type": "string" } },
                { "name": "X-Service-Signature", "in": "header", "schema": { "type": "string" }, "description": "hex HMAC-SHA256 of the raw body keyed with the whole secret" },
                { "name": "X-Service-Delivery", "in": "header", "schema": { "type": "string" }, "description": "the same on every retry" },
                { "name": "webhook-id", "in": "header", "schema": { "type": "string" } },
                { "name": "webhook-timestamp", "in": "header", "schema": { "type": "string" } },
                { "name": "webhook-signature", "in": "header", "schema": { "type": "string" }, "description": "Standard Webhooks v1" }
            ],
            "requestBody": { "content": { "application/json": { "schema": { "type": "object", "properties": properties } } } },
            "responses": { "2XX": { "description": "Received; anything else is retried" } }
        } })
    };
    let s = || json!({ "type": "string" });
    json!({
        "message.status": event("message.status", json!({ "event": s(), "partner": s(), "message_ref": s(), "message_id": { "type": "integer" }, "seq": { "type": "integer" }, "state": s(), "channel": s(), "phone": s(), "at": s() })),
        "template.status": event("template.status", json!({ "event": s(), "partner": s(), "template_id": { "type": "integer" }, "code": s(), "lang": s(), "channel": s(), "status": s(), "reason": { "type": ["string", "null"] }, "at": s() })),
        "account.claimed": event("account.claimed", json!({ "event": s(), "partner": s(), "phone": s(), "at": s() })),
        "conversation.message": event("conversation.message", json!({ "event": s(), "partner": s(), "conversation_id": { "type": "integer" }, "ref": s(), "message_ref": s(), "direction": s(), "phone": s(), "at": s(), "body": { "type": ["string", "null"], "description": "Absent for end-to-end encrypted messages" }, "encrypted": { "type": "boolean", "description": "true (and no body) for end-to-end encrypted messages" } })),
    })
}

fn error_response(description: &str) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": schema_ref("Error") } } })
}

fn components() -> Value {
    json!({
        "securitySchemes": {
            "partnerKey": { "type": "http", "scheme": "bearer", "description": "Partner API key `sk_…`" },
            "developerKey": { "type": "http", "scheme": "bearer", "description": "Developer key `sk_dev_…`" },
            "botToken": { "type": "http", "scheme": "bearer", "description": "Bot token `bot_<prefix>.<secret>`, scoped to its bot" },
            "userJwt": { "type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "User JWT from OTP login" },
        },
        "responses": {
            "E400": error_response("`bad_request`: not JSON, not an object, or wrong content type"),
            "E401": error_response("`unauthorized`: credential missing, malformed, unknown or revoked"),
            "E403": error_response("`forbidden`: valid credential of the wrong kind"),
            "E404": error_response("`not_found`: no such resource for this caller"),
            "E409": error_response("`conflict` or `idempotency_conflict`"),
            "E413": error_response("`payload_too_large`"),
            "E422": error_response("`validation` (with `field`), or another 422 code such as `e2e_no_devices` or `template_not_approved`"),
            "E429": {
                "description": "`rate_limited`; see `Retry-After`",
                "headers": { "Retry-After": { "schema": { "type": "integer" } } },
                "content": { "application/json": { "schema": schema_ref("Error") } }
            },
            "E502": error_response("`bot_error` (the bot failed to answer) or `delivery_failed` (a provider refused)"),
            "E503": {
                "description": "`timeout` (the request outlived the host's request timeout) or `unavailable` (the host cannot take this work now; see `Retry-After`)",
                "headers": { "Retry-After": { "schema": { "type": "integer" } } },
                "content": { "application/json": { "schema": schema_ref("Error") } }
            },
        },
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error"],
                "properties": { "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": { "type": "string" },
                        "message": { "type": "string" },
                        "field": { "type": "string" },
                        "fields": { "type": "object", "additionalProperties": { "type": "string" } }
                    }
                } }
            },
            // Referenced by derived schemas (`crate::e2e::envelope_schema_ref`).
            "E2eEnvelope": {
                "type": "object",
                "required": ["v", "alg", "ciphertext", "nonce"],
                "description": "Ciphertext only; the server never decrypts. key_wraps: one per recipient device for sealed hub messages (required there), none for conversation messages. GET /me/messages shows each device only its own wrap.",
                "properties": {
                    "v": { "type": "integer", "const": 1 },
                    "alg": { "type": "string", "const": crate::e2e::ALG },
                    "mode": { "type": "string" },
                    "key_version": { "type": "integer" },
                    "sender_device_uuid": { "type": "string" },
                    "ciphertext": { "type": "string" },
                    "nonce": { "type": "string" },
                    "aad": { "type": "string" },
                    "key_wraps": { "type": "array", "items": { "type": "object", "properties": {
                        "device_uuid": { "type": "string" }, "wrap": { "type": "string" },
                        "wrap_nonce": { "type": "string" }, "sender_eph_pub": { "type": "string" }
                    } } }
                }
            },
            "WebhookDelivery": {
                "type": "object",
                "properties": {
                    "delivery_id": { "type": "string", "description": "Equals the X-Service-Delivery header" },
                    "event": { "type": "string" },
                    "state": { "type": "string", "enum": ["pending", "succeeded", "dead"] },
                    "attempts": { "type": "integer" },
                    "last_status": { "type": ["integer", "null"] },
                    "last_error": { "type": ["string", "null"] },
                    "next_attempt_at": { "type": ["string", "null"] },
                    "created_at": { "type": "string" }
                }
            },
        }
    })
}
