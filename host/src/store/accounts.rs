//! End-user accounts (keyed by phone), their links to partners with the partners' custom field values,
//! the partners' account field definitions, and claiming.

use serde_json::{Map, Value};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::outbox::{self, Target};
use super::{Db, is_unique_violation};
use crate::clock::Millis;
use crate::forms::FieldDef;
use crate::names::AccountState;

#[derive(Debug, Clone)]
pub struct Account {
    pub id: i64,
    pub phone: String,
    pub state: AccountState,
    /// The name as the reader may see it: a partner sees the name it gave (each partner link has its own);
    /// the user sees the first name any partner gave.
    pub display_name: Option<String>,
}

/// The account columns for the user's own view: the first display name a linked partner gave.
const USER_VIEW: &str = "SELECT a.id, a.phone, a.state, (SELECT l.display_name FROM account_links l \
    WHERE l.account_id = a.id AND l.display_name IS NOT NULL ORDER BY l.linked_at, l.partner_id LIMIT 1) AS display_name \
    FROM accounts a WHERE a.phone = $1";

fn account_from_row(row: &AnyRow) -> Result<Account, sqlx::Error> {
    Ok(Account {
        id: row.try_get("id")?,
        phone: row.try_get("phone")?,
        state: super::decode_name(row, "state")?,
        display_name: row.try_get("display_name")?,
    })
}

pub async fn find_account(db: &Db, phone: &str) -> Result<Option<Account>, sqlx::Error> {
    let row = sqlx::query(USER_VIEW).bind(phone).fetch_optional(db.reader()).await?;
    row.as_ref().map(account_from_row).transpose()
}

/// Which partner a new conversation that `phone` starts from WhatsApp or SMS is with, in one read: the
/// platform partner, else the partner the phone's account was linked to last — `None` when the phone is
/// linked to no partner (or has no account).
///
/// With `shared` (a channel), only a partner that has no sender of its own on that channel (the message came
/// to the host's shared number).
pub async fn new_conversation_partner(
    db: &Db,
    phone: &str,
    shared: Option<crate::names::Channel>,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COALESCE((SELECT p.id FROM partners p WHERE p.is_platform = 1 \
           AND ($2 IS NULL OR p.id NOT IN (SELECT s.partner_id FROM partner_senders s WHERE s.channel = $2)) \
           ORDER BY p.id LIMIT 1), l.partner_id) \
         FROM account_links l JOIN accounts a ON a.id = l.account_id WHERE a.phone = $1 \
         AND ($2 IS NULL OR l.partner_id NOT IN (SELECT s.partner_id FROM partner_senders s WHERE s.channel = $2)) \
         ORDER BY l.linked_at DESC, l.partner_id DESC LIMIT 1",
    )
    .bind(phone)
    .bind(shared.map(|c| c.as_str()))
    .fetch_optional(db.reader())
    .await
}

/// A partner an account is linked to, with the values of its account fields.
pub struct LinkedPartner {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub fields: Map<String, Value>,
}

/// The partners an account is linked to, in link order.
pub async fn linked_partners(db: &Db, account_id: i64) -> Result<Vec<LinkedPartner>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT p.id, p.code, p.name, l.fields FROM account_links l JOIN partners p ON p.id = l.partner_id \
         WHERE l.account_id = $1 ORDER BY l.linked_at, p.id",
    )
    .bind(account_id)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            let fields: String = r.try_get("fields")?;
            Ok(LinkedPartner {
                id: r.try_get("id")?,
                code: r.try_get("code")?,
                name: r.try_get("name")?,
                fields: serde_json::from_str(&fields).unwrap_or_default(),
            })
        })
        .collect()
}

/// The account of `phone` as one partner sees it: only when linked, with that partner's field values.
pub async fn find_linked(
    db: &Db,
    partner_id: i64,
    phone: &str,
) -> Result<Option<(Account, Map<String, Value>)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT a.id, a.phone, a.state, l.display_name, l.fields FROM accounts a \
         JOIN account_links l ON l.account_id = a.id WHERE a.phone = $1 AND l.partner_id = $2",
    )
    .bind(phone)
    .bind(partner_id)
    .fetch_optional(db.reader())
    .await?;
    row.map(|r| {
        let fields: String = r.try_get("fields")?;
        Ok((account_from_row(&r)?, serde_json::from_str(&fields).unwrap_or_default()))
    })
    .transpose()
}

/// Creates the account if needed (`unclaimed`), links it to the partner and stores the partner's field
/// values (merged over earlier ones) and its display name for the account (kept when not given). Returns
/// the account as that partner sees it and the partner's field values.
pub async fn link_account(
    db: &Db,
    partner_id: i64,
    phone: &str,
    display_name: Option<&str>,
    fields: &Map<String, Value>,
    now: Millis,
) -> Result<(Account, Map<String, Value>), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "INSERT INTO accounts (phone, state, created_at) VALUES ($1, 'unclaimed', $2) ON CONFLICT (phone) DO NOTHING",
    )
    .bind(phone)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    let row = sqlx::query("SELECT id, phone, state, CAST(NULL AS TEXT) AS display_name FROM accounts WHERE phone = $1")
        .bind(phone)
        .fetch_one(&mut *tx)
        .await?;
    let mut account = account_from_row(&row)?;
    let link = sqlx::query("SELECT fields, display_name FROM account_links WHERE account_id = $1 AND partner_id = $2")
        .bind(account.id)
        .bind(partner_id)
        .fetch_optional(&mut *tx)
        .await?;
    let existing: Option<String> = link.as_ref().map(|r| r.try_get("fields")).transpose()?;
    let old_name: Option<String> = link.as_ref().map(|r| r.try_get("display_name")).transpose()?.flatten();
    account.display_name = display_name.map(str::to_string).or(old_name);
    let mut merged: Map<String, Value> =
        existing.as_deref().and_then(|f| serde_json::from_str(f).ok()).unwrap_or_default();
    for (k, v) in fields {
        merged.insert(k.clone(), v.clone());
    }
    let merged_text = Value::Object(merged.clone()).to_string();
    if existing.is_some() {
        sqlx::query(
            "UPDATE account_links SET fields = $1, display_name = $2 WHERE account_id = $3 AND partner_id = $4",
        )
        .bind(&merged_text)
        .bind(&account.display_name)
        .bind(account.id)
        .bind(partner_id)
        .execute(&mut *tx)
        .await?;
    } else {
        sqlx::query(
            "INSERT INTO account_links (account_id, partner_id, fields, display_name, linked_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (account_id, partner_id) DO UPDATE SET fields = excluded.fields, display_name = excluded.display_name",
        )
        .bind(account.id)
        .bind(partner_id)
        .bind(&merged_text)
        .bind(&account.display_name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok((account, merged))
}

/// A sign-in with a verified code, in one transaction: claims the account of `phone` ([`claim_in`]) and
/// records the device. `Ok(false)` (and nothing written) when the device uuid is another phone's.
pub async fn sign_in(
    db: &Db,
    phone: &str,
    device_uuid: &str,
    platform: Option<&str>,
    now: Millis,
    claimed_event: impl Fn(&str, Millis) -> Value,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    claim_in(&mut tx, phone, now, claimed_event).await?;
    if !super::devices::ensure_device_in(&mut tx, device_uuid, phone, platform, now).await? {
        return Ok(false);
    }
    tx.commit().await?;
    Ok(true)
}

/// Claims the account of `phone` (creating it claimed if there was none). When it was unclaimed, every
/// linked partner gets an `account.claimed` event (built by `event`) in the same transaction.
async fn claim_in(
    tx: &mut Transaction<'_, Any>,
    phone: &str,
    now: Millis,
    event: impl Fn(&str, Millis) -> Value,
) -> Result<Account, sqlx::Error> {
    sqlx::query(
        "INSERT INTO accounts (phone, state, claimed_at, created_at) VALUES ($1, 'claimed', $2, $2) \
         ON CONFLICT (phone) DO NOTHING",
    )
    .bind(phone)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let claimed: Option<i64> = sqlx::query_scalar(
        "UPDATE accounts SET state = 'claimed', claimed_at = $1 WHERE phone = $2 AND state = 'unclaimed' RETURNING id",
    )
    .bind(now)
    .bind(phone)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(account_id) = claimed {
        let partners = sqlx::query(
            "SELECT p.id, p.code FROM account_links l JOIN partners p ON p.id = l.partner_id WHERE l.account_id = $1",
        )
        .bind(account_id)
        .fetch_all(&mut **tx)
        .await?;
        for p in partners {
            let (id, code): (i64, String) = (p.try_get("id")?, p.try_get("code")?);
            let key = format!("account:{account_id}");
            outbox::enqueue(tx, Target::Partner(id), "account.claimed", &event(&code, now), &key, now).await?;
        }
    }
    let row = sqlx::query(USER_VIEW).bind(phone).fetch_one(&mut **tx).await?;
    account_from_row(&row)
}

// ---- account field definitions ----

/// A partner's account field definition, with its id.
#[derive(Debug, Clone)]
pub struct AccountField {
    pub id: i64,
    /// The account-field type name as partners write it (`char`, `selection`, …).
    pub type_name: String,
    pub def: FieldDef,
}

fn field_from_row(row: &AnyRow) -> Result<AccountField, sqlx::Error> {
    let type_name: String = row.try_get("type")?;
    let options: String = row.try_get("options")?;
    let def = FieldDef {
        key: row.try_get("key")?,
        kind: crate::forms::account_field_kind(&type_name).unwrap_or(crate::forms::FieldType::Text),
        label: row.try_get("label")?,
        required: row.try_get::<i64, _>("required")? != 0,
        placeholder: None,
        options: serde_json::from_str(&options).unwrap_or_default(),
    };
    Ok(AccountField { id: row.try_get("id")?, type_name, def })
}

pub async fn list_fields(db: &Db, partner_id: i64) -> Result<Vec<AccountField>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, key, label, type, required, options FROM account_fields WHERE partner_id = $1 ORDER BY id",
    )
    .bind(partner_id)
    .fetch_all(db.reader())
    .await?;
    rows.iter().map(field_from_row).collect()
}

pub async fn find_field(db: &Db, partner_id: i64, id: i64) -> Result<Option<AccountField>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT id, key, label, type, required, options FROM account_fields WHERE partner_id = $1 AND id = $2",
    )
    .bind(partner_id)
    .bind(id)
    .fetch_optional(db.reader())
    .await?;
    row.as_ref().map(field_from_row).transpose()
}

/// Inserts a definition; `None` when the key is taken.
pub async fn insert_field(
    db: &Db,
    partner_id: i64,
    type_name: &str,
    def: &FieldDef,
    now: Millis,
) -> Result<Option<AccountField>, sqlx::Error> {
    let result = sqlx::query(
        "INSERT INTO account_fields (partner_id, key, label, type, required, options, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, key, label, type, required, options",
    )
    .bind(partner_id)
    .bind(&def.key)
    .bind(&def.label)
    .bind(type_name)
    .bind(def.required as i64)
    .bind(serde_json::to_string(&def.options).expect("options serialise"))
    .bind(now)
    .fetch_one(db.writer())
    .await;
    match result {
        Ok(row) => Ok(Some(field_from_row(&row)?)),
        Err(e) if is_unique_violation(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces a definition; `Ok(None)` when there is no such field, `Err` unique violation when the new
/// key is taken (the caller maps it to 409).
pub async fn update_field(
    db: &Db,
    partner_id: i64,
    id: i64,
    type_name: &str,
    def: &FieldDef,
) -> Result<Option<AccountField>, sqlx::Error> {
    let row = sqlx::query(
        "UPDATE account_fields SET key = $1, label = $2, type = $3, required = $4, options = $5 \
         WHERE partner_id = $6 AND id = $7 RETURNING id, key, label, type, required, options",
    )
    .bind(&def.key)
    .bind(&def.label)
    .bind(type_name)
    .bind(def.required as i64)
    .bind(serde_json::to_string(&def.options).expect("options serialise"))
    .bind(partner_id)
    .bind(id)
    .fetch_optional(db.writer())
    .await?;
    row.as_ref().map(field_from_row).transpose()
}

pub async fn delete_field(db: &Db, partner_id: i64, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM account_fields WHERE partner_id = $1 AND id = $2")
        .bind(partner_id)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}
