//! People's accounts as partners see them: linking one (creating it when needed, with the partner's custom
//! field values, optionally inviting the person by SMS), the partner's field definitions, and an account as
//! its person sees it (every partner linked, with the values each keeps).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::clock::Millis;
use crate::forms::{self, ACCOUNT_FIELD_TYPES, Choice, FieldDef, account_field_kind};
use crate::names::AccountState;
use crate::providers::Provider;
use crate::store::accounts::{self as store};
pub use crate::store::accounts::{Account, AccountField, LinkedPartner, find_account as find, list_fields as fields};
pub use crate::store::erasure::Erased;
use crate::store::members::AuditWrite;
pub use crate::store::preferences::{Document, PartnerChoice, document as preferences};
use crate::store::{Db, erasure, is_unique_violation, partners, preferences};
use crate::validate::{Invalid, KeepError, required_phone};

/// Why a link was refused: a field of the request, or the partner's custom values (by `fields.<key>`).
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{} custom values are invalid", .0.len())]
    Fields(BTreeMap<String, String>),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A link asked for: the person's phone, the name the partner knows them by, values of its custom fields,
/// and whether to invite them by SMS.
pub struct LinkRequest<'a> {
    pub phone: Option<&'a str>,
    pub display_name: Option<&'a str>,
    pub fields: Map<String, Value>,
    pub invite: bool,
}

/// An account as the linking partner sees it: its values, whether the person blocked the partner, and
/// whether an invitation went out.
pub struct Linked {
    pub account: Account,
    pub fields: Map<String, Value>,
    pub blocked: bool,
    pub invited: bool,
}

/// The longest name a partner gives a person.
pub const DISPLAY_NAME_CHARS: usize = 200;

/// Links the person of `req.phone` to partner (`partner_id`, named `partner_name`), creating their account
/// when needed. The partner's required fields are checked over what it already keeps plus what it sends
/// now. An unclaimed account's person is invited by SMS when asked (`invited` says whether the text went
/// out: a failed text is logged, never an error of the link).
pub async fn link(
    db: &Db,
    (partner_id, partner_name): (i64, &str),
    req: LinkRequest<'_>,
    sms: (&dyn Provider, &str),
    now: Millis,
) -> Result<Linked, LinkError> {
    let phone = required_phone(req.phone)?;
    let display_name = req.display_name.map(str::trim).filter(|n| !n.is_empty());
    if display_name.is_some_and(|n| n.chars().count() > DISPLAY_NAME_CHARS) {
        return Err(Invalid::new("display_name", "display_name is at most 200 characters").into());
    }
    let defs: Vec<FieldDef> = store::list_fields(db, partner_id).await?.into_iter().map(|f| f.def).collect();
    let mut merged = store::find_linked(db, partner_id, phone).await?.map(|(_, f)| f).unwrap_or_default();
    merged.extend(req.fields);
    let clean = forms::validate(&defs, &merged)
        .map_err(|errors| LinkError::Fields(errors.into_iter().map(|(k, v)| (format!("fields.{k}"), v)).collect()))?;
    let (account, fields) = store::link_account(db, partner_id, phone, display_name, &clean, now).await?;
    let invited = req.invite && account.state != AccountState::Claimed && {
        let (provider, public_url) = sms;
        let text = format!(
            "{partner_name} invites you to Hubbub. Open {} and sign in with this phone number to claim your account.",
            public_url.trim_end_matches('/')
        );
        match provider.send(phone, &text).await {
            Ok(_) => true,
            Err(reason) => {
                tracing::warn!(%reason, "invitation SMS failed");
                false
            }
        }
    };
    let blocked = preferences::blocked(db, &account.phone, partner_id).await?;
    Ok(Linked { account, fields, blocked, invited })
}

/// The account of `phone` as partner `partner_id` sees it, when linked: its values, and whether the person
/// blocked the partner.
pub async fn find_linked(
    db: &Db,
    partner_id: i64,
    phone: &str,
) -> Result<Option<(Account, Map<String, Value>, bool)>, sqlx::Error> {
    let Some((account, fields)) = store::find_linked(db, partner_id, phone.trim()).await? else { return Ok(None) };
    let blocked = preferences::blocked(db, &account.phone, partner_id).await?;
    Ok(Some((account, fields, blocked)))
}

/// The partners an account is linked to, in link order, each with its field definitions (to name the
/// values it keeps).
pub async fn linked_partners(db: &Db, account_id: i64) -> Result<Vec<(LinkedPartner, Vec<AccountField>)>, sqlx::Error> {
    let mut linked = Vec::new();
    for partner in store::linked_partners(db, account_id).await? {
        let defs = store::list_fields(db, partner.id).await?;
        linked.push((partner, defs));
    }
    Ok(linked)
}

/// Whether `phone`'s account is linked to the partner of `code`.
pub async fn is_linked_to(db: &Db, phone: &str, code: &str) -> Result<bool, sqlx::Error> {
    let Some(account) = store::find_account(db, phone).await? else { return Ok(false) };
    Ok(store::linked_partners(db, account.id).await?.iter().any(|p| p.code == code))
}

/// An account field definition as given: every part on creation, those to change on a change.
#[derive(Default)]
pub struct FieldInput {
    pub key: Option<String>,
    pub label: Option<String>,
    pub kind: Option<String>,
    pub required: Option<bool>,
    pub options: Option<Vec<Choice>>,
}

/// Defines a field: its key unique among the partner's.
pub async fn create_field(db: &Db, partner_id: i64, input: FieldInput, now: Millis) -> Result<AccountField, KeepError> {
    let (type_name, def) = build_field(input, None)?;
    store::insert_field(db, partner_id, &type_name, &def, now)
        .await?
        .ok_or_else(|| KeepError::Taken(format!("field key {:?} already exists", def.key)))
}

/// Changes the partner's field `id`: the parts given replace those kept.
pub async fn update_field(db: &Db, partner_id: i64, id: i64, input: FieldInput) -> Result<AccountField, KeepError> {
    let current = store::find_field(db, partner_id, id).await?.ok_or(KeepError::NotFound("account field"))?;
    let (type_name, def) = build_field(input, Some(&current))?;
    match store::update_field(db, partner_id, id, &type_name, &def).await {
        Ok(Some(updated)) => Ok(updated),
        Ok(None) => Err(KeepError::NotFound("account field")),
        Err(e) if is_unique_violation(&e) => Err(KeepError::Taken(format!("field key {:?} already exists", def.key))),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the partner's field `id` (the values kept in it stay, shown by key).
pub async fn delete_field(db: &Db, partner_id: i64, id: i64) -> Result<(), KeepError> {
    if !store::delete_field(db, partner_id, id).await? {
        return Err(KeepError::NotFound("account field"));
    }
    Ok(())
}

/// A complete, checked definition from `input` laid over `base` (a change) or nothing (a creation).
fn build_field(input: FieldInput, base: Option<&AccountField>) -> Result<(String, FieldDef), Invalid> {
    let key = input.key.or_else(|| base.map(|b| b.def.key.clone())).unwrap_or_default();
    let label = input.label.or_else(|| base.map(|b| b.def.label.clone())).unwrap_or_default();
    let type_name = input.kind.or_else(|| base.map(|b| b.type_name.clone())).unwrap_or_default();
    let required = input.required.or(base.map(|b| b.def.required)).unwrap_or(false);
    let options = input.options.or_else(|| base.map(|b| b.def.options.clone())).unwrap_or_default();
    if !crate::validate::is_code(&key) {
        return Err(Invalid::new("key", "key must match ^[a-z0-9][a-z0-9_-]{0,63}$"));
    }
    if label.trim().is_empty() {
        return Err(Invalid::new("label", "label is required"));
    }
    let kind = account_field_kind(&type_name)
        .ok_or_else(|| Invalid::new("type", format!("type must be one of {}", ACCOUNT_FIELD_TYPES.join(", "))))?;
    let def = FieldDef { key, kind, label: label.trim().to_string(), required, placeholder: None, options };
    forms::check_definitions(std::slice::from_ref(&def)).map_err(|msg| Invalid::new("options", msg))?;
    Ok((type_name, def))
}

/// Erases what partner `partner_id` holds about `phone` (its messages to and from them, its conversations
/// with them, its link to their account), at once and for good; `None` when it holds nothing about them.
pub async fn erase_for_partner(db: &Db, partner_id: i64, phone: &str) -> Result<Option<Erased>, sqlx::Error> {
    erasure::partner_erases(db, partner_id, phone.trim()).await
}

/// Erases the person of `phone` (who proved it with a code) from every partner's data and their account,
/// telling each linked partner (`account.erased`) and writing the erasure in each one's audit log, as from
/// `address`.
pub async fn erase_person(db: &Db, phone: &str, address: &str, now: Millis) -> Result<Erased, sqlx::Error> {
    let linked = erasure::linked_partners(db, phone).await?;
    let told: Vec<(i64, String)> =
        linked.iter().map(|(id, code)| (*id, crate::events::account_erased(code, phone, now))).collect();
    let audit: Vec<AuditWrite> = linked
        .iter()
        .map(|(id, _)| AuditWrite {
            partner_id: *id,
            member_id: None,
            key_id: None,
            action: "account.erased".into(),
            target: "/api/v1/me/account".into(),
            status: 200,
            address: address.to_string(),
            at: now,
        })
        .collect();
    erasure::person_erases(db, phone, &told, &audit, now).await
}

/// The most partners a person's preferences name.
pub const MAX_PREFERRED_PARTNERS: usize = 1000;

/// What a person chooses of what reaches them and when (the whole document: what it leaves out goes back
/// to the defaults): a time zone, a quiet window (`start`, `end`), the channels they take, and per partner
/// (by code) muted, blocked and marketing.
pub struct PreferencesUpdate<'a> {
    pub time_zone: Option<&'a str>,
    pub quiet: Option<(&'a str, &'a str)>,
    pub whatsapp: bool,
    pub sms: bool,
    pub partners: Vec<(&'a str, PartnerChoiceInput)>,
}

/// What a person chooses for one partner.
pub struct PartnerChoiceInput {
    pub muted: bool,
    pub blocked: bool,
    pub marketing: bool,
}

/// Replaces the preferences of the person of `phone`: a time zone of the IANA database, a quiet window of
/// two different `HH:MM`, at most [`MAX_PREFERRED_PARTNERS`] partners, each one that exists.
pub async fn set_preferences(
    db: &Db,
    phone: &str,
    update: PreferencesUpdate<'_>,
    now: Millis,
) -> Result<Document, KeepError> {
    let time_zone = crate::preferences::time_zone("time_zone", update.time_zone)?;
    let quiet = update.quiet.map(|(start, end)| crate::preferences::quiet_window(start, end)).transpose()?;
    if update.partners.len() > MAX_PREFERRED_PARTNERS {
        return Err(Invalid::new("partners", format!("at most {MAX_PREFERRED_PARTNERS} partners")).into());
    }
    let mut chosen = Vec::with_capacity(update.partners.len());
    for (code, choice) in update.partners {
        let partner = partners::find_by_code(db, code)
            .await?
            .ok_or_else(|| Invalid::new(format!("partners.{code}"), format!("no partner {code:?}")))?;
        chosen.push(PartnerChoice {
            partner_id: partner.id,
            code: partner.code,
            name: partner.name,
            muted: choice.muted,
            blocked: choice.blocked,
            marketing: choice.marketing,
        });
    }
    let doc = Document { time_zone, quiet, whatsapp: update.whatsapp, sms: update.sms, partners: chosen };
    preferences::replace(db, phone, &doc, now).await?;
    Ok(preferences::document(db, phone).await?)
}

/// Why a sign-in was refused: a field, the code, or a device another person's account holds (409).
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(transparent)]
    Otp(#[from] crate::otp::OtpError),
    #[error("device_uuid belongs to another account's device")]
    DeviceTaken,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The person of `phone` signs in on a device with the code sent to them: their account is claimed (each
/// linked partner told `account.claimed`) and the device noted (`device`, or a new one; `platform`, a
/// label). Their account and the device's id.
pub async fn sign_in(
    codes: &crate::otp::Codes<'_>,
    phone: &str,
    code: Option<&str>,
    device: Option<&str>,
    platform: Option<&str>,
) -> Result<(Account, String), SignInError> {
    let code = crate::validate::required_code(code)?;
    let device_uuid = match device.map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) => crate::encryption::device_uuid(Some(d), "device_uuid")?,
        None => uuid::Uuid::new_v4().to_string(),
    };
    let platform = crate::encryption::platform(platform)?;
    crate::otp::verify(codes, phone, "login", code).await?;
    let claimed = |partner: &str, at| crate::events::account_claimed(partner, phone, at);
    let now = codes.clock.now_ms();
    if !store::sign_in(codes.db, phone, &device_uuid, platform.as_deref(), now, claimed).await? {
        return Err(SignInError::DeviceTaken);
    }
    let account = store::find_account(codes.db, phone).await?;
    Ok((account.ok_or_else(|| sqlx::Error::RowNotFound)?, device_uuid))
}
