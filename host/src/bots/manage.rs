//! A partner's bots as it keeps them: made with a code, a name and how they run (their token and webhook
//! secret made here, shown once), changed field by field under the rules of each mode (webhook mode needs
//! a URL; a `local` bot on WhatsApp must have menus WhatsApp can show), their credentials rotated, and
//! their component installed.

use serde_json::Value;

use crate::clock::Millis;
use crate::flows::{FlowError, Flows};
use crate::names::{Channel, RuntimeMode};
use crate::runtime::FlowInfo;
use crate::secrets::{digest, random_alnum};
use crate::signing;
use crate::store::Db;
use crate::store::bots::{self as store, NewBot};
pub use crate::store::bots::{Bot, component_info, find, list};
use crate::validate::{Invalid, check_url, is_code, is_ip_list};

/// The channels a bot may answer on.
pub const CHANNELS: &[&str] = &["inapp", "whatsapp", "sms"];

/// Why a bot was not made or changed.
#[derive(Debug, thiserror::Error)]
pub enum BotError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The partner has a bot of this code (409).
    #[error("a bot with code {0:?} already exists")]
    Taken(String),
    /// The change would leave the bot in a state its stored fields refuse (409).
    #[error("{0}")]
    Conflict(&'static str),
    /// WhatsApp cannot show a menu of the bot (422 `whatsapp_menu`).
    #[error("WhatsApp cannot show a menu of this bot (whatsapp is among its channels): {0}")]
    WhatsappMenu(String),
    #[error(transparent)]
    Flow(#[from] FlowError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A new bot token: `bot_<prefix>.<secret>`; returns it with its displayable prefix.
fn new_token() -> (String, String) {
    let prefix = format!("bot_{}", random_alnum(8));
    (format!("{prefix}.{}", random_alnum(40)), prefix)
}

/// A bot to make: its code, name, runtime mode (`local` when absent) and webhook URL (required in webhook
/// mode).
pub struct NewBotInput<'a> {
    pub code: Option<&'a str>,
    pub name: Option<&'a str>,
    pub runtime_mode: Option<&'a str>,
    pub webhook_url: Option<&'a str>,
}

/// A bot just made, with its token and webhook secret (shown this once).
pub struct Made {
    pub bot: Bot,
    pub token: String,
    pub webhook_secret: String,
}

/// Checks a webhook URL the bot would be called at (`dev`: the host's development mode).
async fn checked_url(url: Option<&str>, dev: bool) -> Result<(), Invalid> {
    match url {
        Some(url) => check_url("webhook_url", url, dev).await,
        None => Ok(()),
    }
}

/// Makes a bot of partner `partner_id`.
pub async fn create(
    db: &Db,
    dev: bool,
    partner_id: i64,
    input: NewBotInput<'_>,
    now: Millis,
) -> Result<Made, BotError> {
    let code = input.code.unwrap_or("").trim();
    if !is_code(code) {
        return Err(Invalid::new("code", "code must match ^[a-z0-9][a-z0-9_-]{0,63}$").into());
    }
    let name =
        input.name.map(str::trim).filter(|n| !n.is_empty()).ok_or_else(|| Invalid::new("name", "name is required"))?;
    let mode = match input.runtime_mode.map(str::trim).filter(|m| !m.is_empty()) {
        None => RuntimeMode::default(),
        Some(text) => RuntimeMode::parse(text)
            .ok_or_else(|| Invalid::new("runtime_mode", "runtime_mode must be local or webhook"))?,
    };
    let url = input.webhook_url.map(str::trim).filter(|u| !u.is_empty());
    if mode == RuntimeMode::Webhook && url.is_none() {
        return Err(Invalid::new("webhook_url", "webhook_url is required in webhook runtime mode").into());
    }
    checked_url(url, dev).await?;
    let (token, prefix) = new_token();
    let secret = signing::new_secret();
    let reference = format!("bot_ref_{}", random_alnum(20));
    let new = NewBot {
        reference: &reference,
        code,
        name,
        runtime_mode: mode,
        webhook_url: url,
        webhook_secret: &secret,
        token_hash: &digest(&token),
        token_prefix: &prefix,
    };
    let bot = store::insert(db, partner_id, &new, now).await?.ok_or_else(|| BotError::Taken(code.to_string()))?;
    Ok(Made { bot, token, webhook_secret: secret })
}

/// Changes to a bot: each given replaces what it has (`Some(None)` or empty clears a clearable one).
#[derive(Default)]
pub struct BotChanges {
    pub name: Option<String>,
    pub runtime_mode: Option<String>,
    pub webhook_url: Option<Option<String>>,
    pub channels: Option<Vec<String>>,
    pub allowed_ips: Option<Option<String>>,
    pub entry: Option<Vec<String>>,
    pub entry_flow: Option<Option<String>>,
}

/// The codes of the flows a component offers (as stored: `[{code, title}]`).
fn flow_codes(flows: &Value) -> Vec<String> {
    flows.as_array().into_iter().flatten().filter_map(|f| f["code"].as_str().map(str::to_string)).collect()
}

/// Applies `allowed_ips` (empty clears it).
fn set_allowed_ips(bot: &mut Bot, value: Option<&str>) -> Result<(), Invalid> {
    let list = value.map(str::trim).filter(|l| !l.is_empty());
    if list.is_some_and(|l| !is_ip_list(l)) {
        return Err(Invalid::new("allowed_ips", "allowed_ips must be comma-separated IP addresses or CIDR blocks"));
    }
    bot.allowed_ips = list.map(str::to_string);
    Ok(())
}

/// Whether WhatsApp can show every menu of a `local` bot on WhatsApp with the component `digest` (its
/// `flows`): refused naming each that it cannot.
pub async fn check_whatsapp_menus(
    flows: &Flows<'_>,
    bot: &Bot,
    digest: &str,
    codes: &[String],
) -> Result<(), BotError> {
    if bot.runtime_mode != RuntimeMode::Local || !bot.channels.iter().any(|c| c == Channel::Whatsapp.as_str()) {
        return Ok(());
    }
    let misfits = flows.whatsapp_misfits(bot, digest, codes).await?;
    if misfits.is_empty() {
        return Ok(());
    }
    Err(BotError::WhatsappMenu(misfits.join("; ")))
}

/// Changes `bot`. Webhook mode needs a URL: webhook mode asked for while clearing the URL contradicts
/// itself (refused on `webhook_url`); otherwise a bot left in webhook mode without a URL clashes with what
/// is stored ([`BotError::Conflict`]). Adding `whatsapp` to a local bot's channels checks its menus as an
/// upload does.
pub async fn update(flows: &Flows<'_>, dev: bool, mut bot: Bot, req: BotChanges) -> Result<Bot, BotError> {
    let db = flows.db;
    let was_on_whatsapp = bot.channels.iter().any(|c| c == Channel::Whatsapp.as_str());
    if let Some(name) = req.name {
        let name = name.trim();
        if name.is_empty() {
            return Err(Invalid::new("name", "name cannot be empty").into());
        }
        bot.name = name.to_string();
    }
    if let Some(mode) = &req.runtime_mode {
        bot.runtime_mode = RuntimeMode::parse(mode)
            .ok_or_else(|| Invalid::new("runtime_mode", "runtime_mode must be local or webhook"))?;
    }
    let contradicts = req.runtime_mode.as_deref().map(str::trim) == Some(RuntimeMode::Webhook.as_str())
        && req.webhook_url.as_ref().is_some_and(|u| u.as_deref().is_none_or(|u| u.trim().is_empty()));
    if let Some(url) = req.webhook_url {
        let url = url.as_deref().map(str::trim).filter(|u| !u.is_empty());
        checked_url(url, dev).await?;
        bot.webhook_url = url.map(str::to_string);
    }
    if bot.runtime_mode == RuntimeMode::Webhook && bot.webhook_url.is_none() {
        return Err(match contradicts {
            true => Invalid::new("webhook_url", "webhook_url is required in webhook runtime mode").into(),
            false => BotError::Conflict("a bot in webhook mode needs its webhook_url: give one, or runtime_mode local"),
        });
    }
    if let Some(channels) = req.channels {
        if channels.is_empty() || channels.iter().any(|c| !CHANNELS.contains(&c.as_str())) {
            return Err(Invalid::new("channels", "channels must be a non-empty list of inapp, whatsapp, sms").into());
        }
        bot.channels = channels;
    }
    if let Some(ips) = req.allowed_ips {
        set_allowed_ips(&mut bot, ips.as_deref())?;
    }
    if let Some(entry) = req.entry {
        let channels = [Channel::Whatsapp.as_str(), Channel::Sms.as_str()];
        if let Some(bad) = entry.iter().find(|c| !channels.contains(&c.as_str())) {
            return Err(Invalid::new("entry", format!("entry lists whatsapp or sms, not {bad:?}")).into());
        }
        bot.entry_channels = channels.iter().filter(|c| entry.iter().any(|e| e == *c)).map(|c| c.to_string()).collect();
    }
    if let Some(missing) = bot.entry_channels.iter().find(|c| !bot.channels.contains(c)) {
        let why = format!("{missing} is not among the bot's channels: add it there too");
        return Err(Invalid::new("entry", why).into());
    }
    let component_flows = match &bot.component_digest {
        Some(digest) => store::component_info(db, digest).await?.map(|(_, flows)| flow_codes(&flows)),
        None => None,
    };
    if let Some(flow) = req.entry_flow {
        let flow = flow.as_deref().map(str::trim).filter(|f| !f.is_empty());
        if let (Some(flow), Some(codes)) = (flow, &component_flows)
            && !codes.iter().any(|c| c == flow)
        {
            let why = format!("the bot's component has no flow {flow:?} (it has: {})", codes.join(", "));
            return Err(Invalid::new("entry_flow", why).into());
        }
        bot.entry_flow = flow.map(str::to_string);
    }
    if let (Some(digest), Some(codes)) = (bot.component_digest.clone(), &component_flows)
        && !was_on_whatsapp
    {
        check_whatsapp_menus(flows, &bot, &digest, codes).await?;
    }
    store::update(db, &bot, flows.clock.now_ms()).await?;
    Ok(bot)
}

/// A new token for `bot`, shown once; the old one stops working.
pub async fn rotate_token(db: &Db, bot: &Bot, now: Millis) -> Result<String, sqlx::Error> {
    let (token, prefix) = new_token();
    store::set_token(db, bot.id, &digest(&token), &prefix, now).await?;
    Ok(token)
}

/// A new webhook secret for `bot`, shown once.
pub async fn rotate_secret(db: &Db, bot: &mut Bot, now: Millis) -> Result<String, sqlx::Error> {
    let secret = signing::new_secret();
    store::set_webhook_secret(db, bot.id, &secret, now).await?;
    bot.webhook_secret = secret.clone();
    Ok(secret)
}

/// Sets `bot`'s webhook URL (required), and its `allowed_ips` when given (empty clears); a new secret
/// when `rotate` (shown once).
pub async fn set_webhook(
    db: &Db,
    dev: bool,
    mut bot: Bot,
    url: Option<&str>,
    allowed_ips: Option<&str>,
    rotate: bool,
    now: Millis,
) -> Result<(Bot, Option<String>), BotError> {
    let url = url.map(str::trim).filter(|u| !u.is_empty());
    let url = url.ok_or_else(|| Invalid::new("webhook_url", "webhook_url is required"))?;
    checked_url(Some(url), dev).await?;
    bot.webhook_url = Some(url.to_string());
    if let Some(ips) = allowed_ips {
        set_allowed_ips(&mut bot, Some(ips))?;
    }
    store::update(db, &bot, now).await?;
    let secret = if rotate { Some(rotate_secret(db, &mut bot, now).await?) } else { None };
    Ok((bot, secret))
}

/// Installs a loaded component (`digest`, its `bytes` and `flows`) as `bot`'s, once WhatsApp can show its
/// menus (when the bot is on WhatsApp); sessions started from now run it.
pub async fn install(
    flows: &Flows<'_>,
    bot: &Bot,
    digest: &str,
    bytes: &[u8],
    offered: &[FlowInfo],
    now: Millis,
) -> Result<Value, BotError> {
    let codes: Vec<String> = offered.iter().map(|f| f.code.clone()).collect();
    check_whatsapp_menus(flows, bot, digest, &codes).await?;
    let listed = serde_json::to_value(offered).map_err(|e| sqlx::Error::Encode(e.into()))?;
    store::set_component(flows.db, bot.id, digest, bytes, &listed, now).await?;
    Ok(listed)
}
