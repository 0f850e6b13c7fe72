//! Flow invitations: a partner invites a person to one of its bot's flows — a flow card in their hub and an
//! entry in `/me/forms` (a message, through [`messages::send::accept`] as every outbound message), or on
//! WhatsApp or SMS the flow's first steps there (a form as a link that opens it in the app), the session
//! then running on that channel.

use serde_json::json;

use crate::delivery::Delivery;
use crate::flows::{FlowError, Flows};
use crate::messages;
use crate::messages::send::{SendError, Sending, Sent};
use crate::names::{Channel, RuntimeMode};
use crate::secrets::random_alnum;
use crate::store::bots::{Bot, component_info};
use crate::store::devices;
use crate::store::flows::{self, FlowInvitation};
use crate::store::messages::NewMessage;
use crate::validate::{Invalid, is_code, required_phone};

/// Why an invitation was refused.
#[derive(Debug, thiserror::Error)]
pub enum InviteError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The bot offers no such flow (404).
    #[error("flow not found")]
    NoFlow,
    /// The person cannot be reached so on this channel now (409).
    #[error("{0}")]
    Unreachable(String),
    #[error(transparent)]
    Flow(#[from] FlowError),
    #[error(transparent)]
    Send(#[from] SendError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// An invitation made: its session's ref, `invited` (in the app) or `in_progress` (its first steps sent on
/// WhatsApp or SMS), where it runs, and the flow card in the hub.
pub struct Invitation {
    pub reference: String,
    pub phone: String,
    pub state: &'static str,
    pub channel: Channel,
    pub message_id: Option<i64>,
}

/// What an invitation works with: the flow engine, delivery, and the send of the hub's card.
pub struct Inviting<'a> {
    pub flows: Flows<'a>,
    pub delivery: &'a Delivery,
    pub sending: Sending<'a>,
}

/// Invites `phone` to flow `flow` of `bot` (partner `partner_name`'s) on `channel`: `inapp` (also when
/// absent or empty), `whatsapp`, `sms`, or `auto` (in the app when the person has a device, else WhatsApp
/// when the bot is on it and their window is open, else SMS when the bot is on it and they have not opted
/// out, else in the app). A `local` bot's flows are the ones its component offers.
pub async fn invite(
    host: &Inviting<'_>,
    partner_name: &str,
    bot: &Bot,
    flow: &str,
    phone: Option<&str>,
    channel: Option<&str>,
) -> Result<Invitation, InviteError> {
    let db = host.flows.db;
    let phone = required_phone(phone)?;
    let channel = match channel.map(str::trim).filter(|c| !c.is_empty()) {
        None => Channel::Inapp,
        Some("auto") => auto_channel(host, bot, phone).await?,
        Some(text) => Channel::parse(text)
            .ok_or_else(|| Invalid::new("channel", "channel must be inapp, whatsapp, sms or auto"))?,
    };
    let title = if bot.runtime_mode == RuntimeMode::Local {
        let digest = bot.component_digest.as_deref().ok_or(InviteError::NoFlow)?;
        let (_, flows) = component_info(db, digest).await?.ok_or(InviteError::NoFlow)?;
        let offered = flows.as_array().and_then(|f| f.iter().find(|f| f["code"] == flow).cloned());
        offered.and_then(|f| f["title"].as_str().map(str::to_string)).ok_or(InviteError::NoFlow)?
    } else if is_code(flow) {
        flow.to_string()
    } else {
        return Err(InviteError::NoFlow);
    };
    let reference = format!("flow_{}", random_alnum(24));
    if channel != Channel::Inapp {
        on_channel(host, bot, flow, phone, channel, &reference).await?;
        return Ok(Invitation { reference, phone: phone.to_string(), state: "in_progress", channel, message_id: None });
    }
    let body = format!("{partner_name} invites you to fill in: {title}");
    let content = json!({ "flow": { "ref": reference, "bot": bot.code, "bot_ref": bot.reference, "partner": bot.partner_code, "flow": flow, "title": title, "state": "invited" } });
    let invites = FlowInvitation { reference: reference.clone(), bot_id: bot.id, flow: flow.to_string(), title };
    let card = NewMessage { content, invites: Some(invites), ..NewMessage::text_to(bot.partner_id, phone, body) };
    let (Sent::New(card) | Sent::Replayed(card)) = messages::send::accept(&host.sending, card).await?;
    Ok(Invitation { reference, phone: phone.to_string(), state: "invited", channel, message_id: Some(card.id) })
}

/// Where `channel: auto` invites `phone`.
async fn auto_channel(host: &Inviting<'_>, bot: &Bot, phone: &str) -> Result<Channel, sqlx::Error> {
    if !devices::list_for_phone(host.flows.db, phone).await?.is_empty() {
        return Ok(Channel::Inapp);
    }
    let on = |channel: Channel| bot.channels.iter().any(|c| c == channel.as_str());
    if on(Channel::Whatsapp) && crate::delivery::within_window(host.delivery, bot.partner_id, phone).await? {
        return Ok(Channel::Whatsapp);
    }
    if on(Channel::Sms) && !host.delivery.opted_out(bot.partner_id, Channel::Sms, phone).await? {
        return Ok(Channel::Sms);
    }
    Ok(Channel::Inapp)
}

/// Starts flow `flow` of `bot` with `phone` on WhatsApp or SMS and sends its first steps there.
async fn on_channel(
    host: &Inviting<'_>,
    bot: &Bot,
    flow: &str,
    phone: &str,
    channel: Channel,
    reference: &str,
) -> Result<(), InviteError> {
    if !bot.channels.iter().any(|c| c == channel.as_str()) {
        return Err(InviteError::Unreachable(format!(
            "{} is not among the bot's channels: add it there first (PATCH /bots/{})",
            channel.as_str(),
            bot.code
        )));
    }
    let (db, delivery) = (host.flows.db, host.delivery);
    if channel == Channel::Whatsapp && !crate::delivery::within_window(delivery, bot.partner_id, phone).await? {
        return Err(InviteError::Unreachable(
            "the user has not written on WhatsApp in the last 24 hours, and outside WhatsApp's 24-hour window \
             only templates reach them: invite them by SMS, or in the app"
                .into(),
        ));
    }
    if delivery.opted_out(bot.partner_id, channel, phone).await? {
        return Err(InviteError::Unreachable(format!("the user opted out of {} from this sender", channel.as_str())));
    }
    let mut tx = db.begin().await?;
    let session =
        flows::open_on_channel_in(&mut tx, reference, bot.id, Some(flow), phone, channel, delivery.now()).await?;
    tx.commit().await?;
    match host.flows.start_session(bot, &session).await {
        Ok(progress) => crate::inbound::deliver(delivery, bot.partner_id, &session, &progress.steps).await?,
        Err(e) => {
            // A flow that could not start takes none of the person's messages.
            flows::moved_on_channel(db, session.id, None, None).await?;
            return Err(e.into());
        }
    }
    Ok(())
}
