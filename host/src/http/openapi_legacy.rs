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

    // Derived: messages, templates, media, accounts, login, users (http::me), dev sink, webhooks,
    // conversations, keys, provider receipts, health and metrics.
    let user = "userJwt";

    // Broadcasts
    let broadcast_body = json!({ "allOf": [schema_ref("SendMessage"), { "type": "object", "properties": {
        "audience": { "type": "string", "enum": ["linked"], "default": "linked" } },
        "not": { "anyOf": [{ "required": ["phone"] }, { "required": ["encryption"] }, { "required": ["e2e_envelope"] }] },
        "description": "Content fields as for a message; no phone, no encryption" }] });
    add(
        "/api/v1/broadcasts",
        "post",
        op(
            "Send the same content to every linked and claimed user; fans out in the background",
            "broadcasts",
            partner,
            Some(broadcast_body.clone()),
            (202, "Accepted (state queued, total null)", schema_ref("Broadcast")),
            &[],
        ),
    );
    add(
        "/api/v1/broadcasts",
        "get",
        with_params(
            op(
                "Broadcasts, newest first",
                "broadcasts",
                partner,
                None,
                (200, "A page of broadcasts", list_of("Broadcast")),
                &[422],
            ),
            query_params(&PAGE),
        ),
    );
    add(
        "/api/v1/broadcasts/{id}",
        "get",
        op(
            "A broadcast and its progress",
            "broadcasts",
            partner,
            None,
            (200, "The broadcast", schema_ref("Broadcast")),
            &[404],
        ),
    );
    add(
        "/api/v1/system/broadcasts",
        "post",
        op(
            "Platform partner only: an announcement to every claimed account",
            "broadcasts",
            partner,
            Some(broadcast_body),
            (202, "Accepted", schema_ref("Broadcast")),
            &[],
        ),
    );

    // Developers
    let developer = "developerKey";
    let code_login = json!({ "type": "object", "required": ["phone", "code"], "properties": { "phone": { "type": "string", "pattern": E164 }, "code": { "type": "string", "pattern": "\\S" } } });
    let developer_schema = json!({ "type": "object", "properties": {
        "developer_id": { "type": "integer" }, "phone": { "type": "string", "pattern": E164 }, "email": { "type": ["string", "null"] }, "created_at": { "type": "string" } } });
    add(
        "/api/v1/dev/signup",
        "post",
        op(
            "Sign up (or start a sign-in): sends a code by SMS. The e-mail travels with the code and is stored only when that code verifies the sign-up (POST /dev/verify); a sign-in never changes it. Limited per client address and host (429)",
            "developers",
            "",
            Some(
                json!({ "type": "object", "required": ["phone"], "properties": { "phone": { "type": "string", "pattern": E164 }, "email": { "type": ["string", "null"] } } }),
            ),
            (
                202,
                "Code sent",
                json!({ "type": "object", "properties": { "phone": { "type": "string", "pattern": E164 }, "expires_at": { "type": "string" } } }),
            ),
            &[429, 502],
        ),
    );
    add(
        "/api/v1/dev/verify",
        "post",
        op(
            "Verify the sign-up: the developer and an sk_dev_ API key, shown once",
            "developers",
            "",
            Some(code_login.clone()),
            (
                200,
                "Verified",
                json!({ "type": "object", "properties": { "developer": developer_schema.clone(), "api_key": { "type": "string" } } }),
            ),
            &[401, 409, 429],
        ),
    );
    add(
        "/api/v1/dev/session",
        "post",
        op(
            "Sign in with a new code: a 12-hour session key (sk_dev_…), shown once",
            "developers",
            "",
            Some(code_login),
            (
                200,
                "Signed in",
                json!({ "type": "object", "properties": { "developer": developer_schema, "api_key": { "type": "string" }, "expires_at": { "type": "string" } } }),
            ),
            &[401],
        ),
    );
    add(
        "/api/v1/dev/keys",
        "get",
        op(
            "My keys, by prefix (never the keys)",
            "developers",
            developer,
            None,
            (200, "Keys {prefix, kind, active, created_at, expires_at, revoked_at}", json!({ "type": "object" })),
            &[],
        ),
    );
    add("/api/v1/dev/keys/{prefix}", "delete", {
        let mut o = op("Revoke one of my keys", "developers", developer, None, (204, "Revoked", json!({})), &[404]);
        o["responses"]["204"] = json!({ "description": "Revoked" });
        o
    });
    add(
        "/api/v1/dev/templates",
        "get",
        op(
            "The approved template catalog (the platform's approved templates)",
            "developers",
            developer,
            None,
            (200, "Templates {code, lang, channel, category, body, variables}", json!({ "type": "object" })),
            &[],
        ),
    );
    add(
        "/api/v1/dev/messages",
        "post",
        op(
            "Send an approved template; no body, no partner; daily quota (429)",
            "developers",
            developer,
            Some(json!({ "type": "object", "required": ["phone", "template_code"], "properties": {
            "phone": { "type": "string", "pattern": E164 }, "template_code": { "type": "string" }, "vars": { "type": "object" },
            "lang": { "type": "string" }, "idempotency_key": { "type": "string" } } })),
            (201, "The message", schema_ref("Message")),
            &[409],
        ),
    );
    add(
        "/api/v1/dev/settings",
        "put",
        op(
            "My webhook (message.status of my messages), as PUT /settings/webhook",
            "developers",
            developer,
            Some(
                json!({ "type": "object", "properties": { "webhook_url": { "type": ["string", "null"] }, "rotate_secret": { "type": "boolean" } } }),
            ),
            (200, "The settings; webhook_secret only when created or rotated", json!({ "type": "object" })),
            &[],
        ),
    );

    // Bots and flows
    let bot_or_partner = |mut o: Value| {
        o["security"] = json!([{ "partnerKey": [] }, { "botToken": [] }]);
        o
    };
    let bot_record = json!({ "type": "object", "properties": { "bot": schema_ref("Bot") } });
    add(
        "/api/v1/bots",
        "post",
        op(
            "Create a bot; its token and webhook secret are returned once",
            "bots",
            partner,
            Some(json!({ "type": "object", "required": ["code", "name"], "properties": {
            "code": { "type": "string", "pattern": CODE }, "name": { "type": "string", "minLength": 1, "pattern": "\\S" },
            "runtime_mode": { "type": "string", "enum": crate::bots::RuntimeMode::names(), "default": crate::bots::RuntimeMode::default() },
            "webhook_url": { "type": ["string", "null"], "description": "Required in webhook mode" } } })),
            (
                201,
                "The bot with its credentials",
                json!({ "type": "object", "properties": {
            "bot": { "type": "object" }, "bot_token": { "type": "string" }, "webhook_secret": { "type": "string" }, "warning": { "type": "string" } } }),
            ),
            &[409],
        ),
    );
    add(
        "/api/v1/bots/{code}",
        "get",
        bot_or_partner(op(
            "A bot (partner key, or that bot's own token)",
            "bots",
            partner,
            None,
            (200, "The bot", bot_record.clone()),
            &[404],
        )),
    );
    add(
        "/api/v1/bots/{code}",
        "patch",
        op(
            "Update name, runtime_mode, webhook_url, channels, allowed_ips (empty clears)",
            "bots",
            partner,
            Some(json!({ "type": "object", "properties": {
            "name": { "type": "string" }, "runtime_mode": { "type": "string" }, "webhook_url": { "type": ["string", "null"] },
            "channels": { "type": "array", "items": { "type": "string", "enum": ["inapp", "whatsapp", "sms"] } },
            "allowed_ips": { "type": ["string", "null"] } } })),
            (200, "The bot", bot_record.clone()),
            &[404],
        ),
    );
    add(
        "/api/v1/bots/{code}/credentials",
        "get",
        bot_or_partner(op(
            "Credential prefixes (never the token or secret)",
            "bots",
            partner,
            None,
            (200, "Credentials", json!({ "type": "object", "properties": { "credentials": { "type": "object" } } })),
            &[404],
        )),
    );
    add(
        "/api/v1/bots/{code}/token/rotate",
        "post",
        op(
            "A new bot token, shown once; the old one stops working",
            "bots",
            partner,
            None,
            (200, "{bot_token}", json!({ "type": "object" })),
            &[404],
        ),
    );
    add(
        "/api/v1/bots/{code}/webhook",
        "put",
        op(
            "Set the bot's webhook URL (and optionally rotate its secret, set allowed_ips)",
            "bots",
            partner,
            Some(json!({ "type": "object", "required": ["webhook_url"], "properties": {
            "webhook_url": { "type": "string" }, "rotate_secret": { "type": "boolean" }, "allowed_ips": { "type": "string" } } })),
            (200, "{bot, webhook_secret?}", bot_record),
            &[404],
        ),
    );
    add("/api/v1/bots/{code}/webhook", "post", {
        let mut o = op(
            "Inbound events from the bot: {event: reply|ping, data}. The caller's address is checked against allowed_ips first (403). Auth: the bot token, X-Service-Bot-Secret, X-Service-Signature (sha256=<hex HMAC of the body>), or the Standard Webhooks headers (webhook-id, webhook-timestamp within 5 minutes, webhook-signature v1,<base64 HMAC of id.timestamp.body keyed with the base64-decoded secret after whsec_>). An event with a webhook-id (which then needs a fresh webhook-timestamp) is applied once: a repeat answers {ok: true, duplicate: true}. Reply steps are appended to what the app has not fetched yet",
            "bots",
            "",
            Some(
                json!({ "type": "object", "required": ["event"], "properties": { "event": { "type": "string", "enum": ["reply", "ping"] },
                "data": { "type": "object", "description": "reply: {session, steps}" } } }),
            ),
            (
                200,
                "{ok: true, duplicate?: true}",
                json!({ "type": "object", "properties": { "ok": { "type": "boolean" }, "duplicate": { "type": "boolean" } } }),
            ),
            &[401, 403, 404],
        );
        o["security"] = json!([{ "botToken": [] }]);
        o["parameters"] = json!([
            { "name": "webhook-id", "in": "header", "required": false, "schema": { "type": "string", "maxLength": 256 }, "description": "Event id: a repeat is acknowledged and ignored." },
            { "name": "webhook-timestamp", "in": "header", "required": false, "schema": { "type": "string" }, "description": "Seconds since the epoch; required with webhook-id; within 5 minutes of now." },
            { "name": "webhook-signature", "in": "header", "required": false, "schema": { "type": "string" }, "description": "Standard Webhooks: space-separated v1,<base64> signatures." }
        ]);
        o
    });
    add(
        "/api/v1/bots/{code}/webhook/secret/rotate",
        "post",
        op(
            "A new webhook secret, shown once",
            "bots",
            partner,
            None,
            (200, "{webhook_secret}", json!({ "type": "object" })),
            &[404],
        ),
    );
    add(
        "/api/v1/bots/{code}/webhook/test",
        "post",
        op(
            "Send a signed bot.webhook.test event now",
            "bots",
            partner,
            None,
            (200, "{ok, status, error}", json!({ "type": "object" })),
            &[404],
        ),
    );
    add("/api/v1/bots/{code}/component", "put", {
        let mut o = op(
            "Upload the bot's Wasm component (raw bytes, Content-Type application/wasm, up to HUBBUB_COMPONENT_LIMIT, 64 MiB by default; streamed to disk); 422 invalid_component otherwise. Compilations run a few at a time (HUBBUB_BOT_COMPILE_CONCURRENCY): when all are busy the upload is refused at once with 503 and Retry-After",
            "bots",
            partner,
            None,
            (200, "{component: {digest, size, flows, uploaded_at}}", json!({ "type": "object" })),
            &[400, 404, 413, 422, 503],
        );
        let wasm = json!({ "schema": { "type": "string", "format": "binary" } });
        o["requestBody"] =
            json!({ "required": true, "content": { "application/wasm": wasm, "application/octet-stream": wasm } });
        o
    });
    add(
        "/api/v1/bots/{code}/flows/{flow}/invite",
        "post",
        op(
            "Invite a user to a flow: a flow card in the hub and an entry in /me/forms",
            "bots",
            partner,
            Some(
                json!({ "type": "object", "required": ["phone"], "properties": { "phone": { "type": "string", "pattern": E164 } } }),
            ),
            (201, "{flow_session: {ref, bot, flow, phone, state, message_id}}", json!({ "type": "object" })),
            &[404],
        ),
    );
    let steps = json!({ "type": "object", "properties": { "ref": { "type": "string" }, "state": { "type": "string", "enum": ["in_progress", "completed"] },
        "summary": { "type": "object" }, "steps": { "type": "array", "items": schema_ref("Step") } } });
    let event_body = json!({ "type": "object", "required": ["type"], "properties": {
        "type": { "type": "string", "enum": ["text", "select", "submit", "payment"] }, "text": { "type": "string" },
        "id": { "type": "string", "description": "select: the item id; payment: the payment id" },
        "screen": { "type": "string" }, "values": { "type": "object" },
        "status": { "type": "string", "enum": ["confirmed", "declined", "cancelled"] }, "reference": { "type": "string" } } });
    add(
        "/api/v1/me/flows/{ref}/start",
        "post",
        op("Start an invited flow", "flows", user, None, (200, "The first steps", steps.clone()), &[404, 409, 502]),
    );
    add(
        "/api/v1/me/flows/{ref}/submit",
        "post",
        op(
            "Submit a screen: values are validated against its fields (422 with fields, the bot is not called)",
            "flows",
            user,
            Some(
                json!({ "type": "object", "required": ["screen", "values"], "properties": { "screen": { "type": "string" }, "values": { "type": "object" } } }),
            ),
            (200, "The next steps, or completed with the summary", steps.clone()),
            &[404, 409, 502],
        ),
    );
    add(
        "/api/v1/me/flows/{ref}/events",
        "post",
        op(
            "Another event in a flow (menu choice, text, payment result)",
            "flows",
            user,
            Some(event_body.clone()),
            (200, "The next steps", steps.clone()),
            &[404, 409, 502],
        ),
    );
    add(
        "/api/v1/me/bots/{code}/sessions",
        "post",
        op(
            "Open an in-app chat session with a bot of a linked partner",
            "flows",
            user,
            None,
            (201, "{session, steps}", json!({ "type": "object" })),
            &[404, 409, 502],
        ),
    );
    add(
        "/api/v1/me/bots/{code}/sessions/{session}",
        "get",
        op(
            "Steps a webhook-mode bot answered since the last call (each shown once)",
            "flows",
            user,
            None,
            (200, "{session, steps}", json!({ "type": "object" })),
            &[404],
        ),
    );
    add(
        "/api/v1/me/bots/{code}/sessions/{session}/events",
        "post",
        op(
            "A user event in a chat session",
            "flows",
            user,
            Some(event_body),
            (200, "{session, steps}", json!({ "type": "object" })),
            &[404, 409, 502],
        ),
    );

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
            "Broadcast": {
                "type": "object",
                "properties": {
                    "broadcast_id": { "type": "integer" },
                    "state": { "type": "string", "enum": ["queued", "sending", "completed", "failed"] },
                    "audience": { "type": "string", "description": "linked, or all for system broadcasts" },
                    "content_type": { "type": "string" },
                    "body": { "type": ["string", "null"] },
                    "priority": { "type": "string" },
                    "total": { "type": ["integer", "null"], "description": "Recipients, counted when the fan-out starts" },
                    "sent": { "type": "integer", "description": "Messages written and handed to delivery" },
                    "failed": { "type": "integer" },
                    "created_at": { "type": "string" },
                    "completed_at": { "type": ["string", "null"] }
                }
            },
            "Bot": {
                "type": "object",
                "properties": {
                    "ref": { "type": "string" }, "code": { "type": "string" }, "name": { "type": "string" },
                    "partner": { "type": "string" },
                    "runtime_mode": { "type": "string", "enum": crate::bots::RuntimeMode::names() },
                    "webhook_url": { "type": ["string", "null"] },
                    "channels": { "type": "array", "items": { "type": "string" } },
                    "allowed_ips": { "type": ["string", "null"] },
                    "credentials": { "type": "object", "properties": {
                        "token_prefix": { "type": "string" }, "token_configured": { "type": "boolean" },
                        "webhook_url": { "type": ["string", "null"] }, "webhook_secret_prefix": { "type": "string" },
                        "inbound_webhook_path": { "type": "string" } } },
                    "component": { "type": ["object", "null"] },
                    "created_at": { "type": "string" }
                }
            },
            "Step": {
                "type": "object",
                "required": ["type"],
                "description": "message {text}; menu {style: button|list, text, sections: [{title, items: [{id, label, description}]}]}; flow_screen {screen: {id, title, kind: form|input|select, fields: [form field]}}; payment {payment: {id, amount_minor, currency, description}}; flow_completed {summary}",
                "properties": { "type": { "type": "string", "enum": ["message", "menu", "flow_screen", "payment", "flow_completed"] } }
            },
        }
    })
}
