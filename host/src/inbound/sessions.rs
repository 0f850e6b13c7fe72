//! A person's bot session on WhatsApp or SMS: their message as the bot's next event, the partner's entry
//! bot started, and the bot's steps sent back on the channel (a form as a link that opens it in the app).

use serde_json::{Value, json};

use super::Routing;
use crate::channel_steps;
use crate::clock::Millis;
use crate::delivery::{self, Delivery};
use crate::flows::FlowError;
use crate::names::Channel;
use crate::runtime::GuestEvent;
use crate::secrets::{digest, random_alnum};
use crate::store::bots::{self, Bot};
use crate::store::flows::{self as sessions, Session};
use crate::store::inbound::{self, Inbound};
use crate::store::{form_links, opt_outs};

/// How long a form link opens its form (a person who comes back later writes again and gets a new one).
pub const FORM_LINK_TTL_MS: Millis = 60 * 60 * 1000;

/// Takes `m` for a step of `session` (in a transaction with the end of a WhatsApp block, as in [`route`]):
/// `false` when another host took it first.
pub(super) async fn settle_to_session(
    delivery: &Delivery,
    m: &Inbound,
    session: &Session,
) -> Result<bool, sqlx::Error> {
    let mut tx = delivery.db.begin().await?;
    if !inbound::settle_to_session_in(&mut tx, m.id, session.id, delivery.now()).await? {
        return Ok(false);
    }
    if m.channel == Channel::Whatsapp {
        opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.account, &m.sender).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// The id of the reply button or list row tapped (a template's quick reply: its payload).
pub(super) fn tapped(m: &Inbound) -> Option<&str> {
    let c = &m.content;
    c["interactive"]["button_reply"]["id"]
        .as_str()
        .or(c["interactive"]["list_reply"]["id"].as_str())
        .or(c["button"]["payload"].as_str())
}

/// Routes `m` to the bot session that runs on its channel: the menu's choice it names, or its text; while a
/// form waits, its link again.
pub(super) async fn to_session(routing: &Routing, m: &Inbound, session: Session) -> Result<(), sqlx::Error> {
    let delivery = &*routing.delivery;
    if !settle_to_session(delivery, m, &session).await? {
        return Ok(());
    }
    let waiting = session.waiting.clone().unwrap_or(Value::Null);
    let menu: Vec<(String, String)> = serde_json::from_value(waiting["menu"].clone()).unwrap_or_default();
    let body = m.body.as_deref().unwrap_or("").trim();
    let Some(bot) = bots::find_by_id(&delivery.db, session.bot_id).await? else { return Ok(()) };
    let event = match channel_steps::chosen(&menu, body, tapped(m)) {
        Some(id) => GuestEvent::Select(id),
        None if waiting.get("form").is_some() => {
            let screen = json!({"type": "flow_screen", "screen": session.screen.clone().unwrap_or(Value::Null)});
            return deliver(delivery, bot.partner_id, &session, &[screen]).await;
        }
        None => GuestEvent::Text(body.to_string()),
    };
    let result = routing.flows().handle_with(&bot, &session, event).await;
    after_bot(routing, m, &bot, &session, result.map(|p| p.steps), !menu.is_empty()).await
}

/// Starts a session of the partner's entry bot on `m`'s channel (its entry flow, or a chat) and sends its
/// first steps there. The session and `m`'s routing are written together, so another host routing `m` too
/// starts none.
pub(super) async fn start_entry(routing: &Routing, m: &Inbound, bot: &Bot) -> Result<(), sqlx::Error> {
    let delivery = &*routing.delivery;
    let now = delivery.now();
    let flow = bot.entry_flow.as_deref();
    let reference = format!("{}_{}", if flow.is_some() { "flow" } else { "sess" }, random_alnum(24));
    let mut tx = delivery.db.begin().await?;
    let session = sessions::open_on_channel_in(&mut tx, &reference, bot.id, flow, &m.phone, m.channel, now).await?;
    if !inbound::settle_to_session_in(&mut tx, m.id, session.id, now).await? {
        return Ok(());
    }
    if m.channel == Channel::Whatsapp {
        opt_outs::clear_in(&mut tx, &m.phone, m.channel, &m.account, &m.sender).await?;
    }
    tx.commit().await?;
    let result = routing.flows().start_session(bot, &session).await;
    if result.is_err() {
        // A session that could not start takes none of the person's messages.
        sessions::moved_on_channel(&delivery.db, session.id, None, None).await?;
    }
    after_bot(routing, m, bot, &session, result.map(|p| p.steps), false).await
}

/// Sends what the bot answered on the session's channel. A bot that could not be called now (busy) leaves
/// `m` waiting for a later pass; a bot that failed gets the person a short apology, never silence.
pub(super) async fn after_bot(
    routing: &Routing,
    m: &Inbound,
    bot: &Bot,
    session: &Session,
    result: Result<Vec<Value>, FlowError>,
    menu_waiting: bool,
) -> Result<(), sqlx::Error> {
    let delivery = &*routing.delivery;
    let error = match result {
        Ok(steps) => return deliver(delivery, bot.partner_id, session, &steps).await,
        Err(FlowError::Busy | FlowError::QueueFull) => {
            return inbound::unsettle(&delivery.db, m.id, delivery.now()).await;
        }
        Err(FlowError::Database(e)) => {
            inbound::unsettle(&delivery.db, m.id, delivery.now()).await?;
            return Err(e);
        }
        Err(e) => e,
    };
    tracing::warn!(inbound = m.id, bot = %bot.code, error = %error, "a bot could not take a message from WhatsApp or SMS");
    let mut text = format!("Sorry, {} could not take that just now.", bot.name);
    if menu_waiting {
        text.push_str(" Please reply with one of the numbers above.");
    }
    let apology = [channel_steps::Outgoing::Text(text)];
    for outcome in delivery::send_outgoing(delivery, bot.partner_id, m.channel, &m.phone, &apology).await? {
        if !outcome.is_sent() {
            tracing::warn!(inbound = m.id, ?outcome, "the apology could not be sent");
        }
    }
    Ok(())
}

/// Sends a bot's `steps` on the channel `session` runs on (rendered by `channel_steps`; a form screen as a
/// new link to it), from the sender of the bot's partner `partner_id`, and keeps what the session waits for
/// there. A step the provider refuses is logged; the session stays where the bot put it, and the person's
/// next message gets the form's link again.
pub async fn deliver(
    delivery: &Delivery,
    partner_id: i64,
    session: &Session,
    steps: &[Value],
) -> Result<(), sqlx::Error> {
    let Some(channel) = session.channel else { return Ok(()) };
    if steps.is_empty() {
        return Ok(());
    }
    let now = delivery.now();
    let screen = steps.iter().rev().find(|s| s["type"] == "flow_screen").map(|s| &s["screen"]);
    let url = match screen.and_then(|s| s["id"].as_str()) {
        Some(screen) => Some(form_link(delivery, session, screen).await?),
        None => None,
    };
    let rendered = channel_steps::render(channel, steps, url.as_deref());
    let waiting = match (&rendered.menu, steps.last()) {
        (Some(menu), _) => Some(json!({ "menu": menu })),
        (None, Some(last)) if last["type"] == "flow_screen" => Some(json!({ "form": last["screen"]["id"] })),
        _ => None,
    };
    let done = steps.iter().any(|s| s["type"] == "flow_completed");
    sessions::moved_on_channel(&delivery.db, session.id, waiting.as_ref(), (!done).then_some(now)).await?;
    let outcomes = delivery::send_outgoing(delivery, partner_id, channel, &session.phone, &rendered.messages).await?;
    for outcome in outcomes.iter().filter(|o| !o.is_sent()) {
        tracing::warn!(session = %session.reference, ?outcome, "a bot's step could not be sent on {}", channel.as_str());
    }
    Ok(())
}

/// A new link to form `screen` of `session`, for the person to open in the app (`/f/{token}`): the token is
/// kept as its digest, and opens that one form once, for [`FORM_LINK_TTL_MS`].
pub(super) async fn form_link(delivery: &Delivery, session: &Session, screen: &str) -> Result<String, sqlx::Error> {
    let token = random_alnum(32);
    let now = delivery.now();
    form_links::create(&delivery.db, &digest(&token), session.id, screen, now, now + FORM_LINK_TTL_MS).await?;
    Ok(format!("{}/f/{token}", delivery.config.public_url.trim_end_matches('/')))
}

/// Applies a webhook-mode bot's reply to its session `session_ref` (the bot's own): its `steps`, checked; a
/// session on WhatsApp or SMS gets them there, not in the app. `false`: the same event (`event_id`) was
/// applied already. A step the engine refuses is refused on `data.steps`.
pub async fn apply_reply(
    flows: &crate::flows::Flows<'_>,
    delivery: &Delivery,
    bot: &Bot,
    session_ref: &str,
    steps: Vec<Value>,
    event_id: Option<&str>,
) -> Result<bool, FlowError> {
    let on_steps = |why: String| FlowError::Invalid(crate::validate::Invalid::new("data.steps", why));
    let session = sessions::find_for_bot(flows.db, bot.id, session_ref).await?.ok_or(FlowError::NotFound("session"))?;
    let steps = crate::flows::check_steps(steps).map_err(on_steps)?;
    let applied = flows.apply_bot_reply(bot, &session, steps, event_id).await.map_err(|e| match e {
        FlowError::Bot(why) => on_steps(why),
        other => other,
    })?;
    if applied && session.channel.is_some() {
        let steps = flows.pending_steps(&session).await?;
        deliver(delivery, bot.partner_id, &session, &steps).await?;
    }
    Ok(applied)
}
