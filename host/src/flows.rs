//! Flows and chats ([`Flows`]): how a user's flow or chat session moves through its bot. A `local` bot's guest is
//! called in the Wasm runtime (its component loaded first, from memory, the precompiled cache or the
//! database); a `webhook` bot gets the user's events as signed bot events through the outbox and answers
//! through its inbound webhook. Every submitted form is validated against the fields of the screen the bot
//! showed before the bot sees it. What the bot answers is stored as the session's progress, or completes
//! the flow into a read-only card.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::clock::{Millis, SharedClock};
use crate::events;
use crate::forms::{self, FieldDef};
use crate::names::{RuntimeMode, SessionKind, SessionState};
use crate::payments::{self, PaymentError, Payments};
use crate::runtime::{Entry, GuestContext, GuestEvent, GuestReply, Runtime, RuntimeError};
use crate::secrets::random_alnum;
use crate::store::Db;
use crate::store::bots::{self, Bot};
use crate::store::flows::{self as store};
pub use crate::store::flows::{
    Session, find_by_id, find_for_user, list_for_partner as sessions_of_partner, open_forms,
};
use crate::store::outbox::{self, Target};
use crate::store::payments::Payment;
use crate::store::writer::GroupCommit;
use crate::validate::Invalid;

/// The phone a bot is started with when its first steps are checked for WhatsApp (a number that is no one's:
/// the +1 555 01xx range is set aside for fiction).
pub const WHATSAPP_CHECK_PHONE: &str = "+15555550100";

/// The kinds of step a bot answers with.
pub const STEP_TYPES: &[&str] = &["message", "menu", "flow_screen", "payment", "flow_completed"];

/// Why a session could not move.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// A field of the event refused (422 `validation`).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Submitted form values refused, one message per field (422 `validation` with `fields`).
    #[error("{} fields are invalid", .0.len())]
    InvalidFields(BTreeMap<String, String>),
    /// No such flow, session or bot for this user.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The session cannot take this now (a completed flow; a bot without a component).
    #[error("{0}")]
    Conflict(String),
    /// The bot failed to answer (502 `bot_error`).
    #[error("the bot could not answer: {0}")]
    Bot(String),
    /// The payment provider could not open a checkout (502 `payment_provider_error`).
    #[error("the payment provider could not open a checkout: {0}")]
    PaymentProvider(String),
    /// The partner's bots already run their share of the runtime and as many calls wait as may (429).
    #[error("too many calls of this partner's bots are waiting; slow down")]
    QueueFull,
    /// No runtime slot freed up in time for the call (503).
    #[error("the bot runtime is busy; try again shortly")]
    Busy,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// Stored data that cannot be read (a bug).
    #[error("{0}")]
    Internal(String),
}

type Result<T> = std::result::Result<T, FlowError>;

/// One step of a bot's answer (in the document: steps are passed on as the bot made them, checked but not
/// rebuilt).
pub struct Step;

impl utoipa::PartialSchema for Step {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "message {text}; menu {style: button|list, text, sections: [{title, items: [{id, label, description}]}]}; flow_screen {screen: {id, title, kind: form|input|select, fields: [form field]}}; payment {payment: {id (the bot's), ref (pay_…), amount_minor, currency, description, state, checkout_url}}: send the user to checkout_url, the outcome reaches the bot from the payment provider; flow_completed {summary}",
            ))
            .property("type", ObjectBuilder::new().schema_type(Type::String).enum_values(Some(STEP_TYPES.iter().copied())))
            .required("type")
            .into()
    }
}

impl utoipa::ToSchema for Step {}

/// Where a flow is after an event: the steps to show, and for a completed flow its summary.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FlowProgress)]
pub struct Progress {
    /// The flow session's ref.
    #[serde(rename = "ref")]
    pub reference: String,
    /// `in_progress` or `completed`.
    pub state: SessionState,
    /// The completed flow's summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub summary: Option<Value>,
    /// What the bot answered, in order (for a `webhook` bot: the steps it already sent back).
    #[schema(value_type = Vec<Step>)]
    pub steps: Vec<Value>,
}

/// What the app sends as a user event.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[schema(as = UserEvent)]
pub struct EventBody {
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema, required = true)]
    pub kind: Option<String>,
    /// text: the user's text (at most 4096 characters).
    #[schema(max_length = 4096)]
    pub text: Option<String>,
    /// select: the item id (alias `choice`, `item`).
    #[serde(alias = "choice", alias = "item")]
    pub id: Option<String>,
    /// submit: the screen waiting for a submission.
    pub screen: Option<String>,
    /// submit: the values, validated against the screen's fields.
    #[schema(value_type = Option<Object>)]
    pub values: Option<Map<String, Value>>,
}

/// `type` of a user event (a payment's outcome never comes from the app: see [`crate::payments`]).
fn event_type_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["text", "select", "submit"]))
        .build()
}

/// Checks steps a `webhook`-mode bot sent through its inbound webhook (local bots are checked by the
/// runtime): known types, and screens whose fields are well-formed.
pub fn check_steps(steps: Vec<Value>) -> std::result::Result<Vec<Value>, String> {
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

/// Turns an event body into a guest event; a submission is validated against the session's screen here.
pub fn guest_event(session: &Session, body: EventBody) -> Result<GuestEvent> {
    match body.kind.as_deref() {
        Some("text") => {
            let text =
                body.text.filter(|t| !t.trim().is_empty()).ok_or_else(|| Invalid::new("text", "text is required"))?;
            if text.chars().count() > 4096 {
                return Err(Invalid::new("text", "text is at most 4096 characters").into());
            }
            Ok(GuestEvent::Text(text))
        }
        Some("select") => Ok(GuestEvent::Select(
            body.id.filter(|i| !i.is_empty()).ok_or_else(|| Invalid::new("id", "id (the chosen item) is required"))?,
        )),
        Some("submit") => submission(session, body.screen.as_deref(), body.values.unwrap_or_default()),
        Some("payment") => Err(Invalid::new(
            "type",
            "a payment's outcome comes from the payment provider, not from the app: send the user to the step's checkout_url",
        )
        .into()),
        _ => Err(Invalid::new("type", "type must be text, select or submit").into()),
    }
}

/// Validates submitted values against the screen the bot showed: the bot is called only with clean values.
pub fn submission(session: &Session, screen_id: Option<&str>, values: Map<String, Value>) -> Result<GuestEvent> {
    let screen =
        session.screen.as_ref().ok_or_else(|| Invalid::new("screen", "no screen is waiting for a submission"))?;
    let expected = screen["id"].as_str().unwrap_or("");
    if screen_id != Some(expected) {
        return Err(Invalid::new("screen", format!("the screen waiting for a submission is {expected:?}")).into());
    }
    let fields: Vec<FieldDef> =
        serde_json::from_value(screen["fields"].clone()).map_err(|e| FlowError::Internal(e.to_string()))?;
    let clean = forms::validate(&fields, &values).map_err(FlowError::InvalidFields)?;
    Ok(GuestEvent::Submit { screen: expected.to_string(), values: clean, fields })
}

/// A call into a bot's guest.
#[derive(Clone)]
enum GuestCall {
    Start(Entry),
    /// A user event, with the state of the previous reply.
    Handle(String, GuestEvent),
}

/// Flows and chats on this host: what they work with (the database, the clock, the bot runtime, payments
/// and the group commit of progress). Named `Flows`, not an engine: the one engine here is wasmtime's.
pub struct Flows<'a> {
    pub db: &'a Db,
    pub clock: &'a SharedClock,
    pub runtime: &'a Runtime,
    pub payments: &'a Payments,
    /// The group commit of steps' progress.
    pub progress: &'a GroupCommit<store::Step, ()>,
}

impl Flows<'_> {
    fn now(&self) -> Millis {
        self.clock.now_ms()
    }

    /// The user's open flow `reference` (a completed one is read-only: a conflict).
    pub async fn open_flow(&self, phone: &str, reference: &str) -> Result<Session> {
        let session = store::find_for_user(self.db, phone, reference)
            .await?
            .filter(|s| s.kind == SessionKind::Flow)
            .ok_or(FlowError::NotFound("flow"))?;
        if session.state == SessionState::Completed {
            return Err(FlowError::Conflict("the flow is completed; its card is read-only".into()));
        }
        Ok(session)
    }

    /// The bot of a linked partner that the user names by its ref, or by its code when only one of the
    /// user's partners has a bot with that code: two partners may use the same code, and the user must
    /// reach the one they chose, never whichever came first.
    pub async fn user_bot(&self, phone: &str, bot: &str) -> Result<Bot> {
        let mut found = bots::find_for_user(self.db, phone, bot).await?;
        match found.len() {
            0 => Err(FlowError::NotFound("bot")),
            1 => Ok(found.remove(0)),
            _ => Err(FlowError::Conflict(format!(
                "more than one of your partners has a bot with the code {bot:?}: name it by its ref (bot_ref_…, as \
                 GET /me/bots lists)"
            ))),
        }
    }

    /// The user's chat session `reference` with the bot `bot` (its ref, or an unambiguous code), and the bot.
    pub async fn chat(&self, phone: &str, bot: &str, reference: &str) -> Result<(Bot, Session)> {
        let bot = self.user_bot(phone, bot).await?;
        let session = store::find_for_user(self.db, phone, reference)
            .await?
            .filter(|s| s.kind == SessionKind::Chat && s.bot_id == bot.id)
            .ok_or(FlowError::NotFound("session"))?;
        Ok((bot, session))
    }

    /// Opens the flow: a local bot shows its first screen; a webhook bot is told the flow started.
    pub async fn start_flow(&self, session: &Session) -> Result<Progress> {
        let bot = bots::find_by_id(self.db, session.bot_id).await?.ok_or(FlowError::NotFound("bot"))?;
        let flow = session.flow.clone().unwrap_or_default();
        if bot.runtime_mode == RuntimeMode::Webhook {
            store::save_progress(self.db, session.id, session.guest_state.as_deref().unwrap_or(""), None).await?;
            let payload = json!({ "session": session.reference, "phone": session.phone, "flow": flow, "event": {"type": "start"} });
            return self.forward(&bot, session, "flow.start", payload).await;
        }
        let ctx = guest_context(&bot, &session.phone);
        let reply = self.call_guest(&bot, GuestCall::Start(Entry::Flow(flow)), ctx).await?;
        self.apply(&bot, session, reply).await
    }

    /// Opens a chat session of the user with `bot`; answers it with the bot's first steps.
    pub async fn open_chat(&self, bot: &Bot, phone: &str) -> Result<(Session, Vec<Value>)> {
        let reference = format!("sess_{}", random_alnum(24));
        let session = store::open_chat(self.db, &reference, bot.id, phone, self.now()).await?;
        let progress = self.start_session(bot, &session).await?;
        Ok((session, progress.steps))
    }

    /// Starts a new session of `bot` (a chat, or a flow — one a person began on WhatsApp or SMS): its first
    /// steps.
    pub async fn start_session(&self, bot: &Bot, session: &Session) -> Result<Progress> {
        if session.kind == SessionKind::Flow {
            return self.start_flow(session).await;
        }
        if bot.runtime_mode == RuntimeMode::Webhook {
            let payload = json!({ "session": session.reference, "phone": session.phone, "event": {"type": "start"} });
            return self.forward(bot, session, "session.start", payload).await;
        }
        let ctx = guest_context(bot, &session.phone);
        let reply = self.call_guest(bot, GuestCall::Start(Entry::Chat), ctx).await?;
        self.apply(bot, session, reply).await
    }

    /// Runs one user event of a session (flow or chat) through its bot.
    pub async fn handle(&self, session: &Session, event: GuestEvent) -> Result<Progress> {
        let bot = bots::find_by_id(self.db, session.bot_id).await?.ok_or(FlowError::NotFound("bot"))?;
        self.handle_with(&bot, session, event).await
    }

    /// [`Flows::handle`] with the session's bot already read.
    pub async fn handle_with(&self, bot: &Bot, session: &Session, event: GuestEvent) -> Result<Progress> {
        debug_assert_eq!(bot.id, session.bot_id);
        if bot.runtime_mode == RuntimeMode::Webhook {
            let payload = event_payload(session, &event);
            return self.forward(bot, session, "session.event", payload).await;
        }
        let ctx = guest_context(bot, &session.phone);
        let guest_state = session.guest_state.clone().unwrap_or_default();
        let reply = self.call_guest(bot, GuestCall::Handle(guest_state, event), ctx).await?;
        self.apply(bot, session, reply).await
    }

    /// Tells a payment's bot its outcome (`user-event::payment`), once: the caller claimed the
    /// notification with the transition ([`crate::payments::Applied::notify_guest`]). A local bot's
    /// answer is kept as the session's pending steps for the app to fetch (`GET /me/flows/{ref}/steps`,
    /// `GET /me/bots/{code}/sessions/{session}`) — or, for a session on WhatsApp or SMS, answered with
    /// the session and its steps for the caller to send there; a webhook bot gets a signed `session.event`.
    pub async fn payment_outcome(&self, payment: &Payment) -> Result<Option<(Session, Vec<Value>)>> {
        let Some(status) = payment.state.guest_status() else { return Ok(None) };
        let session = store::find_by_id(self.db, payment.session_id).await?.ok_or(FlowError::NotFound("session"))?;
        let bot = bots::find_by_id(self.db, session.bot_id).await?.ok_or(FlowError::NotFound("bot"))?;
        let event = GuestEvent::Payment {
            id: payment.guest_id.clone(),
            status: status.to_string(),
            reference: Some(payment.reference.clone()),
        };
        if bot.runtime_mode == RuntimeMode::Webhook {
            let payload = event_payload(&session, &event);
            let mut tx = self.db.begin().await?;
            let body = events::bot_event(&bot, "session.event", payload);
            let key = format!("session:{}", session.id);
            outbox::enqueue(&mut tx, Target::Bot(bot.id), "session.event", &body, &key, self.now()).await?;
            tx.commit().await?;
            return Ok(None);
        }
        let ctx = guest_context(&bot, &session.phone);
        let guest_state = session.guest_state.clone().unwrap_or_default();
        let reply = self.call_guest(&bot, GuestCall::Handle(guest_state, event), ctx).await?;
        let progress = self.apply(&bot, &session, reply).await?;
        if session.channel.is_some() {
            return Ok(Some((session, progress.steps)));
        }
        store::push_pending(self.db, session.id, &progress.steps, self.now()).await?;
        Ok(None)
    }

    /// The menus of a `local` bot's first steps that WhatsApp cannot show (`channel_steps::whatsapp_fit`),
    /// each with where and why: the bot is started as a chat and in each of its `flows`, as a person who
    /// writes to it would start it, with nothing kept. A start the bot refuses (a flow-only bot asked for a
    /// chat) has no steps to check.
    pub async fn whatsapp_misfits(&self, bot: &Bot, digest: &str, flows: &[String]) -> Result<Vec<String>> {
        self.load(bot, digest).await?;
        let mut entries = vec![("a chat".to_string(), Entry::Chat)];
        entries.extend(flows.iter().map(|f| (format!("flow {f:?}"), Entry::Flow(f.clone()))));
        let mut misfits = Vec::new();
        for (name, entry) in entries {
            let ctx = guest_context(bot, WHATSAPP_CHECK_PHONE);
            if let Ok(reply) = self.runtime.start(digest, &bot.code, entry, ctx).await {
                let found = crate::channel_steps::whatsapp_misfits(&reply.steps);
                misfits.extend(found.into_iter().map(|why| format!("{name}, {why}")));
            }
        }
        Ok(misfits)
    }

    /// Turns each payment step of a bot's answer (a local guest's reply, or a webhook bot's inbound reply)
    /// into a payment of the host (checked, with its checkout
    /// opened), and the step into what the app shows: the bot's request with the payment's ref, state and
    /// checkout URL.
    pub async fn open_payments(&self, bot: &Bot, session: &Session, steps: &mut [Value]) -> Result<()> {
        for step in steps.iter_mut().filter(|s| s["type"] == "payment") {
            let request = payments::check_request(&step["payment"], self.payments.max_minor)
                .map_err(|why| bot_error(bot, RuntimeError::Malformed(why)))?;
            let payment = self.payments.create(bot, session, request).await.map_err(|e| match e {
                PaymentError::Provider(why) => FlowError::PaymentProvider(why),
                PaymentError::Database(e) => FlowError::Database(e),
                other => bot_error(bot, RuntimeError::Malformed(other.to_string())),
            })?;
            step["payment"] = json!({
                "id": payment.guest_id,
                "ref": payment.reference,
                "amount_minor": payment.amount_minor,
                "currency": payment.currency,
                "description": payment.description,
                "state": payment.state,
                "checkout_url": payment.checkout_url,
            });
        }
        Ok(())
    }

    /// Applies a `webhook`-mode bot's reply in a session: opens its payments, then keeps its steps for the
    /// app. With an `event_id` the event is claimed before anything else, so a repeat — even one that
    /// arrives while the first is still being applied — does nothing (`Ok(false)`); if applying fails or is
    /// abandoned, the claim is given back so the bot's retry is applied.
    pub async fn apply_bot_reply(
        &self,
        bot: &Bot,
        session: &Session,
        mut steps: Vec<Value>,
        event_id: Option<&str>,
    ) -> Result<bool> {
        let claim = match event_id {
            Some(id) if !store::claim_inbound_event(self.db, bot.id, id, self.now()).await? => return Ok(false),
            Some(id) => Some(EventClaim { db: self.db.clone(), bot_id: bot.id, event_id: id.to_string(), kept: false }),
            None => None,
        };
        self.open_payments(bot, session, &mut steps).await?;
        // The screen it shows is the one a submission is checked against (in the app, and through a form link
        // on WhatsApp or SMS), as for a local bot.
        if let Some(screen) = steps.iter().rev().find(|s| s["type"] == "flow_screen").map(|s| &s["screen"]) {
            store::show_screen(self.db, session.id, screen).await?;
        }
        store::push_pending(self.db, session.id, &steps, self.now()).await?;
        if let Some(mut claim) = claim {
            claim.kept = true;
        }
        Ok(true)
    }

    /// Steps a `webhook`-mode bot sent since the app last asked (each is returned once).
    pub async fn pending_steps(&self, session: &Session) -> Result<Vec<Value>> {
        Ok(store::take_pending(self.db, session.id).await?)
    }

    /// The digest of a local bot's component, loaded into the runtime (from the database after a restart).
    async fn ready_component(&self, bot: &Bot) -> Result<String> {
        let digest = bot
            .component_digest
            .clone()
            .ok_or_else(|| FlowError::Conflict("the bot has no component uploaded yet".into()))?;
        self.load(bot, &digest).await?;
        Ok(digest)
    }

    /// Loads the component `digest` into the runtime: from memory, else from the precompiled artifact (never
    /// waits for uploads compiling), else compiled from the bytes in the database (another host's upload, or
    /// a cleared cache).
    async fn load(&self, bot: &Bot, digest: &str) -> Result<()> {
        if self.runtime.load_precompiled(digest).await.map_err(|e| bot_error(bot, e))?.is_none() {
            let (bytes, _, _) = bots::component(self.db, digest)
                .await?
                .ok_or_else(|| FlowError::Internal("component bytes missing".into()))?;
            self.runtime.load(&bytes).await.map_err(|e| bot_error(bot, e))?;
        }
        Ok(())
    }

    /// Calls the bot's guest, loading its component first when it is not in memory — and once more if it
    /// was dropped from memory (least recently used) between the load and the call.
    async fn call_guest(&self, bot: &Bot, call: GuestCall, ctx: GuestContext) -> Result<GuestReply> {
        let mut reloaded = false;
        loop {
            let digest = self.ready_component(bot).await?;
            let started = std::time::Instant::now();
            let result = match call.clone() {
                GuestCall::Start(entry) => self.runtime.start(&digest, &bot.code, entry, ctx.clone()).await,
                GuestCall::Handle(guest_state, event) => {
                    self.runtime.handle(&digest, &bot.code, guest_state, event, ctx.clone()).await
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

    /// Stores what the bot answered: the session's progress, or the completed flow with its summary.
    async fn apply(&self, bot: &Bot, session: &Session, mut reply: GuestReply) -> Result<Progress> {
        self.open_payments(bot, session, &mut reply.steps).await?;
        let screen = reply.steps.iter().rev().find(|s| s["type"] == "flow_screen").map(|s| s["screen"].clone());
        if let Some(done) = reply.steps.iter().find(|s| s["type"] == "flow_completed")
            && session.kind == SessionKind::Flow
        {
            let summary = done.get("summary").cloned().unwrap_or_else(|| json!({}));
            if !store::complete(self.db, session, &reply.state, &summary, self.now()).await? {
                return Err(FlowError::Conflict("the flow is already completed".into()));
            }
            return Ok(Progress {
                reference: session.reference.clone(),
                state: SessionState::Completed,
                summary: Some(summary),
                steps: reply.steps,
            });
        }
        let step = store::Step { session_id: session.id, guest_state: reply.state.clone(), screen };
        self.progress.write(step).await?;
        Ok(Progress {
            reference: session.reference.clone(),
            state: SessionState::InProgress,
            summary: None,
            steps: reply.steps,
        })
    }

    /// Sends a user event of a `webhook`-mode bot's session to the bot; answers with the steps it already
    /// sent back (the rest arrive through the inbound webhook).
    async fn forward(&self, bot: &Bot, session: &Session, event: &str, payload: Value) -> Result<Progress> {
        let mut tx = self.db.begin().await?;
        let body = events::bot_event(bot, event, payload);
        let key = format!("session:{}", session.id);
        outbox::enqueue(&mut tx, Target::Bot(bot.id), event, &body, &key, self.now()).await?;
        tx.commit().await?;
        let steps = store::take_pending(self.db, session.id).await?;
        Ok(Progress { reference: session.reference.clone(), state: SessionState::InProgress, summary: None, steps })
    }
}

/// What a guest is told of the call: its partner, itself, and the person.
fn guest_context(bot: &Bot, phone: &str) -> GuestContext {
    GuestContext { partner: bot.partner_code.clone(), bot: bot.code.clone(), phone: phone.to_string() }
}

/// A claimed inbound event: given back when dropped before it was kept (applying failed, or the request
/// was abandoned midway).
struct EventClaim {
    db: Db,
    bot_id: i64,
    event_id: String,
    kept: bool,
}

impl Drop for EventClaim {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let (db, bot_id, event_id) = (self.db.clone(), self.bot_id, std::mem::take(&mut self.event_id));
        tokio::spawn(async move {
            if let Err(error) = store::release_inbound_event(&db, bot_id, &event_id).await {
                tracing::error!(%error, bot_id, "could not give back an inbound event id; the bot's retry will be ignored");
            }
        });
    }
}

fn bot_error(bot: &Bot, e: RuntimeError) -> FlowError {
    match e {
        RuntimeError::QueueFull => FlowError::QueueFull,
        RuntimeError::Busy => FlowError::Busy,
        e => {
            tracing::warn!(bot = %bot.code, error = %e, "bot call failed");
            FlowError::Bot(e.to_string())
        }
    }
}

/// The bot event of a user event (webhook-mode bots).
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
