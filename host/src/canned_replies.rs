//! A partner's canned replies: the answers its agents send often, each under a shortcut (`refund`,
//! `opening-hours`) unique to the partner. What a shortcut and a body may be is decided here.

use crate::clock::Millis;
use crate::store::Db;
use crate::store::canned_replies::{self as store, Written};
pub use crate::store::canned_replies::{CannedReply, list};
use crate::validate::{Invalid, KeepError};

/// The longest body of a canned reply, in characters.
pub const BODY_CHARS: usize = 4096;

/// Keeps a reply: `shortcut` 1 to 32 of `a-z`, `0-9`, `-` and `_`, unique among the partner's, and `body`
/// 1 to [`BODY_CHARS`] characters, not only spaces.
pub async fn create(
    db: &Db,
    partner_id: i64,
    shortcut: Option<&str>,
    body: Option<&str>,
    now: Millis,
) -> Result<CannedReply, KeepError> {
    let (shortcut, body) = checked(shortcut, body)?;
    written(store::create(db, partner_id, shortcut, body, now).await?)
}

/// Replaces the partner's reply `id` (shortcut and body both, checked as for [`create`]); another
/// partner's is not found, whatever the body says.
pub async fn replace(
    db: &Db,
    partner_id: i64,
    id: i64,
    shortcut: Option<&str>,
    body: Option<&str>,
    now: Millis,
) -> Result<CannedReply, KeepError> {
    store::find(db, partner_id, id).await?.ok_or(KeepError::NotFound("canned reply"))?;
    let (shortcut, body) = checked(shortcut, body)?;
    written(store::update(db, partner_id, id, shortcut, body, now).await?)
}

/// Deletes the partner's reply `id`.
pub async fn delete(db: &Db, partner_id: i64, id: i64) -> Result<(), KeepError> {
    if !store::delete(db, partner_id, id).await? {
        return Err(KeepError::NotFound("canned reply"));
    }
    Ok(())
}

/// The shortcut and the body, checked.
fn checked<'a>(shortcut: Option<&'a str>, body: Option<&'a str>) -> Result<(&'a str, &'a str), Invalid> {
    let shortcut = shortcut.unwrap_or("");
    if shortcut.is_empty()
        || shortcut.len() > 32
        || !shortcut.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err(Invalid::new("shortcut", "shortcut is 1 to 32 of a-z, 0-9, - and _"));
    }
    let body = body.unwrap_or("");
    if body.trim().is_empty() || body.chars().count() > BODY_CHARS {
        return Err(Invalid::new("body", "body is 1 to 4096 characters, not only spaces"));
    }
    Ok((shortcut, body))
}

fn written(w: Written) -> Result<CannedReply, KeepError> {
    match w {
        Written::Done(r) => Ok(r),
        Written::NotFound => Err(KeepError::NotFound("canned reply")),
        Written::Taken => Err(KeepError::Taken("another canned reply has this shortcut".into())),
    }
}
