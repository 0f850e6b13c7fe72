//! Partners: the organisations that send through the service, found by code, by id or by one of their API
//! keys, and those keys (made with the role of who made them, shown once, revoked while another works).

use crate::clock::Millis;
use crate::secrets::{digest, display_prefix, new_partner_key};
pub use crate::store::partners::{
    KeyAuth, KeyMaker, KeyUses, Partner, PartnerKey, Revoked, find_by_code, find_by_id, find_by_key_hash, list_keys,
    revoke_key, whatsapp_window_fallback,
};
use crate::store::{Db, partners as store};
use crate::validate::Invalid;

/// A key's name (a partner's API key, a member's session, a passkey): trimmed, 1 to 100 characters, no
/// control characters.
pub fn key_name(raw: Option<&str>) -> Result<&str, Invalid> {
    let name = raw.map(str::trim).unwrap_or("");
    if name.is_empty() || name.chars().count() > 100 || crate::validate::has_control_chars(name) {
        return Err(Invalid::new("name", "name is 1 to 100 characters, without control characters"));
    }
    Ok(name)
}

/// Makes a new API key of partner `partner_id` named `name`, acting with the role of `maker`: the key
/// (shown this once; only its digest is kept) and its record.
pub async fn create_key(
    db: &Db,
    partner_id: i64,
    name: Option<&str>,
    maker: KeyMaker,
    now: Millis,
) -> Result<(PartnerKey, String), crate::validate::KeepError> {
    let name = key_name(name)?;
    let api_key = new_partner_key();
    let key = store::create_key(db, partner_id, name, &digest(&api_key), &display_prefix(&api_key, "sk_"), maker, now)
        .await?;
    Ok((key, api_key))
}
