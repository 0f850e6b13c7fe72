//! Developers on the `/dev` API: a sign-up proved by a code sent to the phone, their keys (an API key
//! from the sign-up, 12-hour session keys from each sign-in), and their sends: approved templates of the
//! platform's catalog only, within a daily quota (UTC days), through the one entry every outbound message
//! takes ([`messages::send::accept`]).

use serde_json::{Map, Value};

use crate::clock::Millis;
use crate::messages;
use crate::messages::send::{SendError, Sending, Sent};
use crate::otp::{self, Codes, OtpError};
use crate::secrets::{digest, display_prefix, random_alnum};
use crate::store::developers::{self as store};
pub use crate::store::developers::{Developer, KeyListing, find_by_key_hash, list_keys as keys, revoke_key};
use crate::store::messages::NewMessage;
pub use crate::store::messages::list_for_developer as messages;
use crate::store::templates::Template;
use crate::store::{Db, is_unique_violation, partners, templates};
use crate::template::{self, RenderError};
use crate::validate::{Invalid, is_email, required_code, required_phone};

/// How long a session key works.
pub const SESSION_TTL_MS: Millis = 12 * 3600 * 1000;
/// A quota's day (UTC).
pub const DAY_MS: Millis = 24 * 3600 * 1000;

/// Why a developer's request was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeveloperError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A code or key that proves nothing (401).
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The sign-up was verified already (409).
    #[error("already verified: sign in with POST /api/v1/dev/session")]
    AlreadyVerified,
    /// The template is none of the catalog's, in that language (422 `template_not_approved`).
    #[error("{0}")]
    NotApproved(String),
    /// The day's quota is spent until the next UTC day (429).
    #[error("the daily quota is spent")]
    OverQuota { retry_after_s: u64 },
    #[error(transparent)]
    Otp(#[from] OtpError),
    #[error(transparent)]
    Send(#[from] SendError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// Starts a sign-up (or a sign-in) of `phone`: a code by SMS, its text naming the e-mail (masked) it
/// would store, so the phone's owner can tell their sign-up's code from one a stranger asked for with the
/// same phone. The e-mail travels with the code: it is stored only when that code is verified. When the
/// code expires.
pub async fn sign_up(
    codes: &Codes<'_>,
    phone: Option<&str>,
    email: Option<&str>,
    client: std::net::IpAddr,
) -> Result<(String, Millis), DeveloperError> {
    let phone = required_phone(phone)?.to_string();
    let email = email.map(str::trim).filter(|e| !e.is_empty());
    if email.is_some_and(|e| !is_email(e)) {
        return Err(Invalid::new("email", "not a valid e-mail address").into());
    }
    store::insert_signup(codes.db, &phone, codes.clock.now_ms()).await?;
    let signup_for = email.map(|e| format!(" for {}", mask_email(e))).unwrap_or_default();
    let expires_at = otp::start(codes, &phone, "developer", email, client, |code| {
        format!("Your Hubbub developer code{signup_for} is {code}. It expires in 10 minutes.")
    })
    .await?;
    Ok((phone, expires_at))
}

/// An e-mail address as an SMS may show it: the first character of the name and the whole domain.
fn mask_email(email: &str) -> String {
    match email.split_once('@') {
        Some((name, domain)) => format!("{}…@{domain}", name.chars().next().unwrap_or('?')),
        None => "…".to_string(),
    }
}

/// Checks the code and returns the developer it belongs to, with the e-mail given by the sign-up that
/// issued the code (nothing of it is stored before the code is verified).
async fn check_code(
    codes: &Codes<'_>,
    phone: Option<&str>,
    code: Option<&str>,
) -> Result<(Developer, Option<String>), DeveloperError> {
    let phone = required_phone(phone)?;
    let code = required_code(code)?;
    let email = otp::verify(codes, phone, "developer", code).await?;
    let developer = store::find_by_phone(codes.db, phone)
        .await?
        .ok_or(DeveloperError::Unauthorized("no sign-up for this phone"))?;
    Ok((developer, email))
}

/// A verified sign-up: the developer, its API key and a session key (each shown once), and when the
/// session key stops working.
pub struct Verified {
    pub developer: Developer,
    pub api_key: String,
    pub session_key: String,
    pub session_expires_at: Millis,
}

/// Verifies a sign-up with its code: the developer, with an API key and a session key. The e-mail is the
/// one the verified sign-up gave; a sign-in (or anyone's later sign-up for the same phone) never changes
/// it.
pub async fn verify(codes: &Codes<'_>, phone: Option<&str>, code: Option<&str>) -> Result<Verified, DeveloperError> {
    let (mut developer, email) = check_code(codes, phone, code).await?;
    let now = codes.clock.now_ms();
    if developer.verified || !store::mark_verified(codes.db, developer.id, now).await? {
        return Err(DeveloperError::AlreadyVerified);
    }
    if let Some(email) = email {
        store::set_email(codes.db, &developer.phone, &email).await?;
        developer.email = Some(email);
    }
    let api_key = issue_key(codes.db, developer.id, "api", None, now).await?;
    let session_expires_at = now + SESSION_TTL_MS;
    let session_key = issue_key(codes.db, developer.id, "session", Some(session_expires_at), now).await?;
    Ok(Verified { developer, api_key, session_key, session_expires_at })
}

/// Signs a verified developer in with a new code: a session key (shown once) and when it stops working.
pub async fn sign_in(
    codes: &Codes<'_>,
    phone: Option<&str>,
    code: Option<&str>,
) -> Result<(Developer, String, Millis), DeveloperError> {
    let (developer, _) = check_code(codes, phone, code).await?;
    if !developer.verified {
        return Err(DeveloperError::Unauthorized("verify the sign-up first (POST /api/v1/dev/verify)"));
    }
    let now = codes.clock.now_ms();
    let expires_at = now + SESSION_TTL_MS;
    let key = issue_key(codes.db, developer.id, "session", Some(expires_at), now).await?;
    Ok((developer, key, expires_at))
}

/// Issues a new key (`sk_dev_…`) and stores its digest; the key is returned once.
async fn issue_key(
    db: &Db,
    developer_id: i64,
    kind: &str,
    expires_at: Option<Millis>,
    now: Millis,
) -> Result<String, DeveloperError> {
    let mut last = None;
    for _ in 0..3 {
        let key = format!("sk_dev_{}", random_alnum(40));
        let prefix = display_prefix(&key, "sk_dev_");
        match store::insert_key(db, developer_id, &digest(&key), &prefix, kind, expires_at, now).await {
            Ok(()) => return Ok(key),
            Err(e) if is_unique_violation(&e) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.expect("three tries, each a unique violation").into())
}

/// The approved templates developers may send: the platform's (none without a platform partner).
pub async fn catalog(db: &Db) -> Result<Vec<Template>, sqlx::Error> {
    let Some(platform) = partners::find_platform(db).await? else { return Ok(Vec::new()) };
    templates::list_approved(db, platform.id).await
}

/// The platform partner's code (empty without one): what developers' events name.
pub async fn platform_code(db: &Db) -> Result<String, sqlx::Error> {
    Ok(partners::find_platform(db).await?.map(|p| p.code).unwrap_or_default())
}

/// How many messages the developer sent today (UTC) and when the count starts again.
pub async fn usage(db: &Db, developer_id: i64, now: Millis) -> Result<(i64, Millis), sqlx::Error> {
    let day_start = now - now.rem_euclid(DAY_MS);
    Ok((store::sent_since(db, developer_id, day_start).await?, day_start + DAY_MS))
}

/// Fields a developer send may not carry: no free-form content, no partner.
pub const REFUSED: &[&str] = &[
    "body",
    "partner",
    "html",
    "media_url",
    "media_base64",
    "link_url",
    "url",
    "encryption",
    "e2e_envelope",
    "content_type",
];

/// A template send: the recipient, a code of the catalog in a language (`en` when absent), its variables,
/// and an idempotency key.
pub struct DevSend<'a> {
    pub phone: Option<&'a str>,
    pub template_code: Option<&'a str>,
    pub vars: Option<Map<String, Value>>,
    pub lang: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
}

/// Sends an approved template of the catalog for developer `developer_id`, within its daily quota of
/// `quota` messages: each variable as WhatsApp's template parameters take it, the text rendered here.
pub async fn send(host: &Sending<'_>, developer_id: i64, quota: i64, req: DevSend<'_>) -> Result<Sent, DeveloperError> {
    let phone = required_phone(req.phone)?.to_string();
    let code = req.template_code.map(str::trim).filter(|c| !c.is_empty());
    let code = code.ok_or_else(|| Invalid::new("template_code", "template_code is required"))?;
    let lang = req.lang.map(str::trim).filter(|l| !l.is_empty()).unwrap_or("en");
    let key = req.idempotency_key.map(str::trim).filter(|k| !k.is_empty());
    if key.is_some_and(|k| k.len() > 255) {
        return Err(Invalid::new("idempotency_key", "idempotency_key is at most 255 characters").into());
    }
    // What a retry with the same key must repeat: the request as given.
    let request_hash = key.map(|_| digest(&format!("{code}|{lang}|{}|{:?}", req.phone.unwrap_or(""), req.vars)));
    let not_approved = || DeveloperError::NotApproved(format!("{code:?} ({lang}) is not an approved template"));
    let platform = partners::find_platform(host.db).await?.ok_or_else(not_approved)?;
    let template = templates::list_approved(host.db, platform.id)
        .await?
        .into_iter()
        .filter(|t| t.code == code && t.lang == lang)
        .min_by_key(|t| (t.channel != "inapp", t.id))
        .ok_or_else(not_approved)?;
    let vars = req.vars.unwrap_or_default();
    for (name, value) in &vars {
        template::check_parameter(value)
            .map_err(|why| Invalid::new(format!("vars.{name}"), format!("variable {name} {why}")))?;
    }
    let text = template::render(&template.body, &vars, messages::compose::MAX_BODY_BYTES).map_err(|e| match e {
        RenderError::Missing(name) => {
            Invalid::new(format!("vars.{name}"), format!("variable {name} is missing")).into()
        }
        RenderError::Malformed(_) => not_approved(),
        too_long @ RenderError::TooLong { .. } => Invalid::new("vars", too_long.to_string()).into(),
    })?;
    let (sent_today, resets_at) = usage(host.db, developer_id, host.now).await?;
    if sent_today >= quota {
        return Err(DeveloperError::OverQuota { retry_after_s: ((resets_at - host.now) / 1000) as u64 });
    }
    let message = NewMessage {
        developer_id: Some(developer_id),
        rendered_body: Some(text.clone()),
        template_code: Some(template.code),
        lang: Some(template.lang),
        // Developers share the platform's message space: their keys are namespaced.
        idempotency_key: key.map(|k| format!("dev:{developer_id}:{k}")),
        request_hash,
        ..NewMessage::text_to(platform.id, &phone, text)
    };
    Ok(messages::send::accept(host, message).await?)
}
