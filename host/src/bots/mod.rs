//! Bots: how each one runs, named once for the store, the API, the flow engine and the document; how a
//! partner keeps them ([`manage`]); and who may speak for a bot on its inbound webhook ([`Inbound`]).

pub mod manage;

use std::net::IpAddr;

use crate::clock::Millis;
use crate::secrets::{constant_time_eq, digest};
use crate::signing;
use crate::store::Db;
use crate::store::bots::{self as store};
pub use crate::store::bots::{Bot, find_by_id, find_by_token_hash, list_for_user};

/// How long an inbound event id is kept, in milliseconds: twice the timestamp tolerance. An event is refused
/// once its timestamp is more than the tolerance away from now, and a timestamp may be up to the tolerance
/// ahead of the moment the id was first seen, so past twice the tolerance no repeat can be accepted.
pub const INBOUND_EVENT_RETENTION_MS: Millis = 2 * signing::TIMESTAMP_TOLERANCE_S * 1000;

/// Forgets the inbound event ids older than [`INBOUND_EVENT_RETENTION_MS`]; answers how many.
pub async fn forget_old_inbound_events(db: &Db, now: Millis) -> Result<u64, sqlx::Error> {
    crate::store::flows::forget_inbound_events(db, now - INBOUND_EVENT_RETENTION_MS).await
}

/// Why a call to a bot's inbound webhook was refused.
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    /// A credential that is missing, wrong, stale or unknown (401).
    #[error("{0}")]
    Unauthorized(String),
    /// A valid credential that may not do this, or a caller outside `allowed_ips` (403).
    #[error("{0}")]
    Forbidden(String),
    /// A malformed header (400).
    #[error("{0}")]
    Malformed(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// What a call to a bot's inbound webhook presents: its address and its credential headers (trimmed,
/// non-empty), and its body.
pub struct Inbound<'a> {
    pub peer: IpAddr,
    pub authorization: Option<&'a str>,
    pub bot_secret: Option<&'a str>,
    pub service_signature: Option<&'a str>,
    pub webhook_id: Option<&'a str>,
    pub webhook_timestamp: Option<&'a str>,
    pub webhook_signature: Option<&'a str>,
    pub body: &'a [u8],
}

/// Whether `peer` may call for a bot with this `allowed_ips` list (none: anyone).
pub fn check_allowed_ips(allowed: Option<&str>, peer: Option<IpAddr>) -> Result<(), InboundError> {
    let Some(list) = allowed.map(str::trim).filter(|l| !l.is_empty()) else { return Ok(()) };
    let ok = peer.is_some_and(|ip| list.split(',').any(|entry| crate::validate::ip_matches(entry.trim(), ip)));
    if ok {
        Ok(())
    } else {
        Err(InboundError::Forbidden("the caller's address is not in the bot's allowed_ips".into()))
    }
}

impl Inbound<'_> {
    /// The bot `code` this call speaks for. The caller's address is checked against `allowed_ips` before
    /// any credential is looked at (so an outsider cannot learn whether a leaked secret is valid); then it
    /// authenticates with the bot's token, its webhook secret in `X-Service-Bot-Secret`, or a signature
    /// over the body: `X-Service-Signature`, or the Standard Webhooks `webhook-signature` over
    /// `webhook-id.webhook-timestamp.body`.
    pub async fn authenticate(&self, db: &Db, code: &str, now_s: i64) -> Result<Bot, InboundError> {
        let candidates = store::find_all_by_code(db, code).await?;
        if !candidates.is_empty()
            && !candidates.iter().any(|b| check_allowed_ips(b.allowed_ips.as_deref(), Some(self.peer)).is_ok())
        {
            return Err(InboundError::Forbidden("the caller's address is not in the bot's allowed_ips".into()));
        }
        let bot = self.credential(db, code, candidates, now_s).await?;
        check_allowed_ips(bot.allowed_ips.as_deref(), Some(self.peer))?;
        Ok(bot)
    }

    async fn credential(&self, db: &Db, code: &str, candidates: Vec<Bot>, now_s: i64) -> Result<Bot, InboundError> {
        let unauthorized = |why: &str| InboundError::Unauthorized(why.to_string());
        if let Some(auth) = self.authorization {
            let token = auth.strip_prefix("Bearer ").or_else(|| auth.strip_prefix("bearer ")).unwrap_or("").trim();
            let hash = digest(token);
            return match store::find_by_token_hash(db, &hash).await? {
                Some((bot, stored)) if constant_time_eq(&stored, &hash) => {
                    if bot.code == code {
                        Ok(bot)
                    } else {
                        Err(InboundError::Forbidden("a bot token is scoped to its own bot".into()))
                    }
                }
                _ => Err(unauthorized("unknown or revoked bot token")),
            };
        }
        // The secret header and the signatures name the bot by its code (codes are unique per partner; the
        // secret decides which bot it is).
        if let Some(secret) = self.bot_secret {
            return candidates
                .into_iter()
                .find(|b| constant_time_eq(&b.webhook_secret, secret))
                .ok_or_else(|| unauthorized("wrong webhook secret"));
        }
        if let Some(signature) = self.service_signature {
            return candidates
                .into_iter()
                .find(|b| signing::verify_service_signature(&b.webhook_secret, self.body, signature))
                .ok_or_else(|| unauthorized("the signature does not verify"));
        }
        if let Some(signature) = self.webhook_signature {
            let id = self.webhook_id.unwrap_or("");
            let timestamp = self.webhook_timestamp.unwrap_or("");
            let mut last = signing::StandardSignatureError::Mismatch;
            for bot in candidates {
                match signing::verify_standard_signature(
                    &bot.webhook_secret,
                    id,
                    timestamp,
                    self.body,
                    signature,
                    now_s,
                ) {
                    Ok(_) => return Ok(bot),
                    Err(e) => last = e,
                }
            }
            return Err(InboundError::Unauthorized(last.to_string()));
        }
        Err(unauthorized(
            "authenticate with the bot token, X-Service-Bot-Secret, X-Service-Signature or webhook-signature",
        ))
    }

    /// The event id of the call (`webhook-id`), which then needs a `webhook-timestamp` within five minutes
    /// of `now_s`: such an event is applied once.
    pub fn event_id(&self, now_s: i64) -> Result<Option<String>, InboundError> {
        let Some(id) = self.webhook_id else { return Ok(None) };
        if id.len() > 256 || !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(InboundError::Malformed("webhook-id must be 1 to 256 visible ASCII characters".into()));
        }
        let timestamp = self.webhook_timestamp.ok_or_else(|| {
            InboundError::Unauthorized("webhook-id needs a webhook-timestamp (seconds since the epoch)".into())
        })?;
        let ts: i64 = timestamp.parse().map_err(|_| {
            InboundError::Unauthorized("webhook-timestamp must be whole seconds since the epoch".into())
        })?;
        if (ts - now_s).abs() > signing::TIMESTAMP_TOLERANCE_S {
            return Err(InboundError::Unauthorized("webhook-timestamp is more than 5 minutes from now".into()));
        }
        Ok(Some(id.to_string()))
    }
}
