//! Form links: a form screen of a session on WhatsApp or SMS, opened in the app by its link (no login: the
//! link is the capability), once, while the bot still waits for that form; its values go to the bot and its
//! answer out on the session's channel.

use serde_json::{Map, Value};

use crate::delivery::Delivery;
use crate::flows::{FlowError, Flows, Progress};
use crate::names::{Channel, SessionState};
use crate::secrets::digest;
use crate::store::bots::{self, Bot};
use crate::store::flows::{self as sessions, Session};
pub use crate::store::form_links::FormLink;
use crate::store::{form_links, partners};

/// Why a link does not open its form: none of that token (404), or used, lapsed, or its conversation over
/// or moved on (409).
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("form link not found")]
    NotFound,
    #[error("{0}")]
    Unusable(&'static str),
    #[error(transparent)]
    Flow(#[from] FlowError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

const USED: &str = "this form was sent already: the conversation goes on where it started";

/// The link of `token` that may still be used: its session and the session's bot.
pub async fn usable(flows: &Flows<'_>, token: &str) -> Result<(FormLink, Session, Bot), LinkError> {
    let db = flows.db;
    let link = form_links::find(db, &digest(token)).await?.ok_or(LinkError::NotFound)?;
    if link.used_at.is_some() {
        return Err(LinkError::Unusable(USED));
    }
    if link.expires_at <= flows.clock.now_ms() {
        return Err(LinkError::Unusable("this link has lapsed: write to the bot again for a new one"));
    }
    let session = sessions::find_by_id(db, link.session_id).await?.ok_or(LinkError::NotFound)?;
    if session.state == SessionState::Completed || session.channel.is_none() {
        return Err(LinkError::Unusable("this conversation is over"));
    }
    let waiting = session.waiting.as_ref().and_then(|w| w["form"].as_str());
    if waiting != Some(link.screen.as_str()) || session.screen.as_ref().is_none_or(|s| s["id"] != link.screen.as_str())
    {
        return Err(LinkError::Unusable("the bot has moved on from this form"));
    }
    let bot = bots::find_by_id(db, session.bot_id).await?.ok_or(LinkError::NotFound)?;
    Ok((link, session, bot))
}

/// The name of a bot's partner, as a form shows it.
pub async fn partner_name(flows: &Flows<'_>, bot: &Bot) -> Result<String, sqlx::Error> {
    Ok(partners::find_by_id(flows.db, bot.partner_id).await?.map(|p| p.name).unwrap_or_default())
}

/// Submits the form of the link of `token`: `values` validated against its fields (refused, the link still
/// usable); then the link is used up, the bot takes the values, and its answer goes out on the session's
/// channel. The session's state after it, and that channel.
pub async fn submit(
    flows: &Flows<'_>,
    delivery: &Delivery,
    token: &str,
    values: Map<String, Value>,
) -> Result<(Progress, Channel), LinkError> {
    let (link, session, bot) = usable(flows, token).await?;
    let event = crate::flows::submission(&session, Some(&link.screen), values)?;
    let hash = digest(token);
    if !form_links::claim(flows.db, &hash, flows.clock.now_ms()).await? {
        return Err(LinkError::Unusable(USED));
    }
    let progress = match flows.handle_with(&bot, &session, event).await {
        Ok(progress) => progress,
        Err(e) => {
            form_links::release(flows.db, &hash).await?;
            return Err(e.into());
        }
    };
    super::deliver(delivery, bot.partner_id, &session, &progress.steps).await?;
    Ok((progress, session.channel.unwrap_or(Channel::Whatsapp)))
}
