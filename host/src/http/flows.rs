//! The app's side of bots: flow invitations (`/me/flows/{ref}/start|submit|events`) and in-app chat
//! sessions (`/me/bots/{code}/sessions…`). Every submitted form is validated against the fields of the
//! screen the bot showed before the bot sees it; invalid values are a 422 and the bot is not called.
//! `local` bots run in the Wasm runtime; `webhook` bots get the user's events as signed bot events and
//! answer through their inbound webhook, and the app fetches those steps.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiJson, E404, E409, E502, parse_value};
use crate::auth::UserAuth;
use crate::bots::RuntimeMode;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::forms::{self, FieldDef};
use crate::runtime::{Entry, GuestContext, GuestEvent, GuestReply, RuntimeError};
use crate::secrets::random_alnum;
use crate::state::AppState;
use crate::store::bots::{self, Bot};
use crate::store::flows::{self as store, Session};
use crate::store::outbox::{self, Target};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_flow))
        .routes(routes!(submit_flow))
        .routes(routes!(flow_event))
        .routes(routes!(open_session))
        .routes(routes!(session_steps))
        .routes(routes!(session_event))
}

const STEP_TYPES: &[&str] = &["message", "menu", "flow_screen", "payment", "flow_completed"];

/// One step of a bot's answer (in the document: steps are passed on as the bot made them, checked but not
/// rebuilt).
pub struct Step;

impl utoipa::PartialSchema for Step {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "message {text}; menu {style: button|list, text, sections: [{title, items: [{id, label, description}]}]}; flow_screen {screen: {id, title, kind: form|input|select, fields: [form field]}}; payment {payment: {id, amount_minor, currency, description}}; flow_completed {summary}",
            ))
            .property("type", ObjectBuilder::new().schema_type(Type::String).enum_values(Some(STEP_TYPES.iter().copied())))
            .required("type")
            .into()
    }
}

impl utoipa::ToSchema for Step {}

/// Where a flow is after an event.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = FlowProgress)]
struct Progress {
    /// The flow session's ref.
    #[serde(rename = "ref")]
    reference: String,
    #[schema(schema_with = progress_state_schema)]
    state: &'static str,
    /// When completed: the summary of the `flow_completed` step.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    summary: Option<Value>,
    /// What the bot answered, in order (for a `webhook` bot: the steps it already sent back).
    #[schema(value_type = Vec<Step>)]
    steps: Vec<Value>,
}

/// `state` of a flow after an event: `in_progress` or `completed`.
fn progress_state_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["in_progress", "completed"]))
        .build()
}

/// A chat session's new steps.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SessionSteps)]
struct SessionSteps {
    /// The session's ref (`sess_…`).
    session: String,
    #[schema(value_type = Vec<Step>)]
    steps: Vec<Value>,
}

/// Checks steps a `webhook`-mode bot sent through its inbound webhook (local bots are checked by the
/// runtime): known types, and screens whose fields are well-formed.
pub fn check_steps(steps: Vec<Value>) -> Result<Vec<Value>, String> {
    if steps.len() > 50 {
        return Err("at most 50 steps".into());
    }
    for (i, step) in steps.iter().enumerate() {
        let kind = step.get("type").and_then(Value::as_str).unwrap_or("");
        if !STEP_TYPES.contains(&kind) {
            return Err(format!("step {i}: type must be one of {}", STEP_TYPES.join(", ")));
        }
        if kind == "flow_screen" {
            let screen = step.get("screen").ok_or(format!("step {i}: a flow_screen needs a screen"))?;
            if screen.get("id").and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(format!("step {i}: the screen needs an id"));
            }
            let fields: Vec<FieldDef> = serde_json::from_value(screen.get("fields").cloned().unwrap_or(Value::Null))
                .map_err(|e| format!("step {i}: fields: {e}"))?;
            if fields.is_empty() {
                return Err(format!("step {i}: the screen needs fields"));
            }
            forms::check_definitions(&fields).map_err(|e| format!("step {i}: {e}"))?;
        }
    }
    Ok(steps)
}

/// What a runtime failure is to the user: 502 `bot_error`, logged with the bot.
fn bot_error(bot: &Bot, e: RuntimeError) -> ApiError {
    tracing::warn!(bot = %bot.code, error = %e, "bot call failed");
    ApiError::bad_gateway("bot_error", format!("the bot could not answer: {e}"))
}

/// The digest of a local bot's component, loaded into the runtime (from the database after a restart).
async fn ready_component(state: &AppState, bot: &Bot) -> ApiResult<String> {
    let digest =
        bot.component_digest.clone().ok_or_else(|| ApiError::conflict("the bot has no component uploaded yet"))?;
    // From memory, else from the precompiled artifact (never waits for uploads compiling), else compiled
    // from the bytes in the database (another host's upload, or a cleared cache).
    if state.runtime.load_precompiled(&digest).await.map_err(|e| bot_error(bot, e))?.is_none() {
        let (bytes, _, _) =
            bots::component(&state.db, &digest).await?.ok_or_else(|| ApiError::internal("component bytes missing"))?;
        state.runtime.load(&bytes).await.map_err(|e| bot_error(bot, e))?;
    }
    Ok(digest)
}

/// A call into a bot's guest.
#[derive(Clone)]
enum GuestCall {
    Start(Entry),
    /// A user event, with the state of the previous reply.
    Handle(String, GuestEvent),
}

/// Calls the bot's guest, loading its component first when it is not in memory — and once more if it
/// was dropped from memory (least recently used) between the load and the call.
async fn call_guest(state: &AppState, bot: &Bot, call: GuestCall, ctx: GuestContext) -> ApiResult<GuestReply> {
    let mut reloaded = false;
    loop {
        let digest = ready_component(state, bot).await?;
        let started = std::time::Instant::now();
        let result = match call.clone() {
            GuestCall::Start(entry) => state.runtime.start(&digest, &bot.code, entry, ctx.clone()).await,
            GuestCall::Handle(guest_state, event) => {
                state.runtime.handle(&digest, &bot.code, guest_state, event, ctx.clone()).await
            }
        };
        let label = format!("{}/{}", bot.partner_code, bot.code);
        let outcome = result.as_ref().map_or_else(RuntimeError::kind, |_| "ok");
        metrics::histogram!("hubbub_bot_call_duration_seconds", "bot" => label.clone())
            .record(started.elapsed().as_secs_f64());
        metrics::counter!("hubbub_bot_calls_total", "bot" => label, "outcome" => outcome).increment(1);
        match result {
            Err(RuntimeError::NotLoaded) if !reloaded => reloaded = true,
            other => return other.map_err(|e| bot_error(bot, e)),
        }
    }
}

/// What the app sends as a user event.
#[derive(Deserialize, ToSchema)]
#[schema(as = UserEvent)]
struct EventBody {
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema, required = true)]
    kind: Option<String>,
    /// text: the user's text (at most 4096 characters).
    #[schema(max_length = 4096)]
    text: Option<String>,
    /// select: the item id (alias `choice`, `item`); payment: the payment id.
    #[serde(alias = "choice", alias = "item")]
    id: Option<String>,
    /// submit: the screen waiting for a submission.
    screen: Option<String>,
    /// submit: the values, validated against the screen's fields.
    #[schema(value_type = Option<Object>)]
    values: Option<Map<String, Value>>,
    #[schema(schema_with = payment_status_schema)]
    status: Option<String>,
    /// payment: the provider's reference.
    reference: Option<String>,
    /// payment: `{id, status, reference}` instead of the fields above.
    #[schema(value_type = Option<Object>)]
    payment: Option<Value>,
}

/// `type` of a user event.
fn event_type_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["text", "select", "submit", "payment"]))
        .build()
}

/// `status` of a payment event.
fn payment_status_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{SchemaType, Type};
    utoipa::openapi::ObjectBuilder::new()
        .description(Some("payment: the result."))
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some([Value::from("confirmed"), "declined".into(), "cancelled".into(), Value::Null]))
        .build()
}

/// Turns an event body into a guest event; a submission is validated against the session's screen here.
fn guest_event(session: &Session, body: EventBody) -> ApiResult<GuestEvent> {
    match body.kind.as_deref() {
        Some("text") => {
            let text = body
                .text
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ApiError::validation("text", "text is required"))?;
            if text.chars().count() > 4096 {
                return Err(ApiError::validation("text", "text is at most 4096 characters"));
            }
            Ok(GuestEvent::Text(text))
        }
        Some("select") => Ok(GuestEvent::Select(
            body.id
                .filter(|i| !i.is_empty())
                .ok_or_else(|| ApiError::validation("id", "id (the chosen item) is required"))?,
        )),
        Some("submit") => submission(session, body.screen.as_deref(), body.values.unwrap_or_default()),
        Some("payment") => {
            let payment = body.payment.unwrap_or(Value::Null);
            let pick = |field: &str, flat: Option<String>| {
                flat.or_else(|| payment.get(field).and_then(Value::as_str).map(str::to_string))
            };
            let id =
                pick("id", body.id).ok_or_else(|| ApiError::validation("id", "id (the payment id) is required"))?;
            let status = pick("status", body.status).unwrap_or_default();
            if !["confirmed", "declined", "cancelled"].contains(&status.as_str()) {
                return Err(ApiError::validation("status", "status must be confirmed, declined or cancelled"));
            }
            Ok(GuestEvent::Payment { id, status, reference: pick("reference", body.reference) })
        }
        _ => Err(ApiError::validation("type", "type must be text, select, submit or payment")),
    }
}

/// Validates submitted values against the screen the bot showed: the bot is called only with clean values.
fn submission(session: &Session, screen_id: Option<&str>, values: Map<String, Value>) -> ApiResult<GuestEvent> {
    let screen = session
        .screen
        .as_ref()
        .ok_or_else(|| ApiError::validation("screen", "no screen is waiting for a submission"))?;
    let expected = screen["id"].as_str().unwrap_or("");
    if screen_id != Some(expected) {
        return Err(ApiError::validation("screen", format!("the screen waiting for a submission is {expected:?}")));
    }
    let fields: Vec<FieldDef> = serde_json::from_value(screen["fields"].clone()).map_err(ApiError::internal)?;
    let clean = forms::validate(&fields, &values).map_err(ApiError::invalid_fields)?;
    Ok(GuestEvent::Submit { screen: expected.to_string(), values: clean, fields })
}

/// Stores what the bot answered and builds the response: `completed` with the summary when the reply
/// completes a flow.
async fn apply(state: &AppState, session: &Session, reply: GuestReply) -> ApiResult<Progress> {
    let screen = reply.steps.iter().rev().find(|s| s["type"] == "flow_screen").map(|s| s["screen"].clone());
    if let Some(done) = reply.steps.iter().find(|s| s["type"] == "flow_completed") {
        let summary = done.get("summary").cloned().unwrap_or_else(|| json!({}));
        if session.kind == "flow" {
            if !store::complete(&state.db, session, &reply.state, &summary, state.now()).await? {
                return Err(ApiError::conflict("the flow is already completed"));
            }
            return Ok(Progress {
                reference: session.reference.clone(),
                state: "completed",
                summary: Some(summary),
                steps: reply.steps,
            });
        }
    }
    store::save_progress(&state.db, session.id, &reply.state, screen.as_ref()).await?;
    Ok(Progress { reference: session.reference.clone(), state: "in_progress", summary: None, steps: reply.steps })
}

/// Sends a user event of a `webhook`-mode bot's session to the bot; answers with the steps it already
/// sent back (the rest arrive through the inbound webhook).
async fn forward(state: &AppState, bot: &Bot, session: &Session, event: &str, payload: Value) -> ApiResult<Progress> {
    let mut tx = state.db.writer().begin().await?;
    let body = events::bot_event(bot, event, payload);
    outbox::enqueue(&mut tx, Target::Bot(bot.id), event, &body, &format!("session:{}", session.id), state.now())
        .await?;
    tx.commit().await?;
    let steps = store::take_pending(&state.db, session.id).await?;
    Ok(Progress { reference: session.reference.clone(), state: "in_progress", summary: None, steps })
}

fn event_payload(session: &Session, event: &GuestEvent) -> Value {
    let event = match event {
        GuestEvent::Text(text) => json!({"type": "text", "text": text}),
        GuestEvent::Select(id) => json!({"type": "select", "id": id}),
        GuestEvent::Submit { screen, values, .. } => json!({"type": "submit", "screen": screen, "values": values}),
        GuestEvent::Payment { id, status, reference } => {
            json!({"type": "payment", "id": id, "status": status, "reference": reference})
        }
    };
    json!({ "session": session.reference, "phone": session.phone, "flow": session.flow, "event": event })
}

/// Runs one user event of a session (flow or chat) through its bot.
async fn handle_event(state: &AppState, session: &Session, event: GuestEvent) -> ApiResult<Progress> {
    let bot = bots::find_by_id(&state.db, session.bot_id).await?.ok_or_else(|| ApiError::not_found("bot"))?;
    if bot.runtime_mode == RuntimeMode::Webhook {
        let payload = event_payload(session, &event);
        return forward(state, &bot, session, "session.event", payload).await;
    }
    let ctx = GuestContext { bot: bot.code.clone(), phone: session.phone.clone() };
    let guest_state = session.guest_state.clone().unwrap_or_default();
    let reply = call_guest(state, &bot, GuestCall::Handle(guest_state, event), ctx).await?;
    apply(state, session, reply).await
}

async fn my_flow(state: &AppState, user: &UserAuth, reference: &str) -> ApiResult<Session> {
    let session = store::find_for_user(&state.db, &user.phone, reference)
        .await?
        .filter(|s| s.kind == "flow")
        .ok_or_else(|| ApiError::not_found("flow"))?;
    if session.state == "completed" {
        return Err(ApiError::conflict("the flow is completed; its card is read-only"));
    }
    Ok(session)
}

/// Start an invited flow.
#[utoipa::path(
    post,
    path = "/me/flows/{ref}/start",
    tag = "flows",
    security(("userJwt" = [])),
    responses(
        (status = 200, description = "The first steps", body = Progress),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn start_flow(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
) -> ApiResult<Json<Progress>> {
    let session = my_flow(&state, &user, &reference).await?;
    let bot = bots::find_by_id(&state.db, session.bot_id).await?.ok_or_else(|| ApiError::not_found("bot"))?;
    let flow = session.flow.clone().unwrap_or_default();
    if bot.runtime_mode == RuntimeMode::Webhook {
        store::save_progress(&state.db, session.id, session.guest_state.as_deref().unwrap_or(""), None).await?;
        let payload =
            json!({ "session": session.reference, "phone": session.phone, "flow": flow, "event": {"type": "start"} });
        return Ok(Json(forward(&state, &bot, &session, "flow.start", payload).await?));
    }
    let ctx = GuestContext { bot: bot.code.clone(), phone: session.phone.clone() };
    let reply = call_guest(&state, &bot, GuestCall::Start(Entry::Flow(flow)), ctx).await?;
    Ok(Json(apply(&state, &session, reply).await?))
}

/// A screen's values.
#[derive(Deserialize, ToSchema)]
#[schema(as = FlowSubmit)]
struct Submit {
    /// The id of the screen waiting for a submission.
    #[schema(value_type = String, required = true)]
    screen: Option<String>,
    /// The values, validated against the screen's fields.
    #[schema(value_type = Object, required = true)]
    values: Option<Map<String, Value>>,
}

/// Submit a screen: values are validated against its fields (422 with fields, the bot is not called).
#[utoipa::path(
    post,
    path = "/me/flows/{ref}/submit",
    tag = "flows",
    security(("userJwt" = [])),
    request_body = Submit,
    responses(
        (status = 200, description = "The next steps, or completed with the summary", body = Progress),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn submit_flow(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(req): ApiJson<Submit>,
) -> ApiResult<Json<Progress>> {
    let session = my_flow(&state, &user, &reference).await?;
    let event = submission(&session, req.screen.as_deref(), req.values.unwrap_or_default())?;
    Ok(Json(handle_event(&state, &session, event).await?))
}

/// Another event in a flow (menu choice, text, payment result).
#[utoipa::path(
    post,
    path = "/me/flows/{ref}/events",
    tag = "flows",
    security(("userJwt" = [])),
    request_body = EventBody,
    responses(
        (status = 200, description = "The next steps", body = Progress),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn flow_event(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Json<Progress>> {
    let session = my_flow(&state, &user, &reference).await?;
    let event = guest_event(&session, parse_value(raw)?)?;
    Ok(Json(handle_event(&state, &session, event).await?))
}

/// Open an in-app chat session with a bot of a linked partner.
#[utoipa::path(
    post,
    path = "/me/bots/{code}/sessions",
    tag = "flows",
    security(("userJwt" = [])),
    responses(
        (status = 201, description = "The session and the bot's first steps", body = SessionSteps),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn open_session(
    State(state): State<AppState>,
    user: UserAuth,
    Path(code): Path<String>,
) -> ApiResult<(StatusCode, Json<SessionSteps>)> {
    let bot = bots::find_for_user(&state.db, &user.phone, &code).await?.ok_or_else(|| ApiError::not_found("bot"))?;
    let reference = format!("sess_{}", random_alnum(24));
    let session = store::open_chat(&state.db, &reference, bot.id, &user.phone, state.now()).await?;
    let steps = if bot.runtime_mode == RuntimeMode::Webhook {
        let payload = json!({ "session": session.reference, "phone": session.phone, "event": {"type": "start"} });
        forward(&state, &bot, &session, "session.start", payload).await?.steps
    } else {
        let ctx = GuestContext { bot: bot.code.clone(), phone: user.phone.clone() };
        let reply = call_guest(&state, &bot, GuestCall::Start(Entry::Chat), ctx).await?;
        apply(&state, &session, reply).await?.steps
    };
    Ok((StatusCode::CREATED, Json(SessionSteps { session: session.reference, steps })))
}

async fn my_session(state: &AppState, user: &UserAuth, code: &str, reference: &str) -> ApiResult<Session> {
    let bot = bots::find_for_user(&state.db, &user.phone, code).await?.ok_or_else(|| ApiError::not_found("bot"))?;
    store::find_for_user(&state.db, &user.phone, reference)
        .await?
        .filter(|s| s.kind == "chat" && s.bot_id == bot.id)
        .ok_or_else(|| ApiError::not_found("session"))
}

/// A user event in a chat session.
#[utoipa::path(
    post,
    path = "/me/bots/{code}/sessions/{session}/events",
    tag = "flows",
    security(("userJwt" = [])),
    request_body = EventBody,
    responses(
        (status = 200, description = "The bot's next steps", body = SessionSteps),
        (status = 404, response = E404),
        (status = 409, response = E409),
        (status = 502, response = E502),
    )
)]
async fn session_event(
    State(state): State<AppState>,
    user: UserAuth,
    Path((code, reference)): Path<(String, String)>,
    ApiJson(raw): ApiJson<Value>,
) -> ApiResult<Json<SessionSteps>> {
    let session = my_session(&state, &user, &code, &reference).await?;
    let event = guest_event(&session, parse_value(raw)?)?;
    let out = handle_event(&state, &session, event).await?;
    Ok(Json(SessionSteps { session: session.reference, steps: out.steps }))
}

/// Steps a webhook-mode bot answered since the last call (each shown once).
#[utoipa::path(
    get,
    path = "/me/bots/{code}/sessions/{session}",
    tag = "flows",
    security(("userJwt" = [])),
    responses((status = 200, description = "The steps not fetched yet", body = SessionSteps), (status = 404, response = E404))
)]
async fn session_steps(
    State(state): State<AppState>,
    user: UserAuth,
    Path((code, reference)): Path<(String, String)>,
) -> ApiResult<Json<SessionSteps>> {
    let session = my_session(&state, &user, &code, &reference).await?;
    let steps = store::take_pending(&state.db, session.id).await?;
    Ok(Json(SessionSteps { session: session.reference, steps }))
}
