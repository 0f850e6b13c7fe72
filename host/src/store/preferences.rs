//! People's preferences as stored (`preferences`, `partner_preferences`) and partners' default quiet
//! windows; read with each message delivery routes ([`HONOURED_COLUMNS`]), or alone for a push or a bot's
//! answer ([`honoured`]). The rules are in `crate::preferences`.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::Db;
use crate::clock::Millis;
use crate::preferences::{Honoured, Window};

/// A person's whole preferences document as stored.
#[derive(Debug, Clone, Default)]
pub struct Document {
    pub time_zone: Option<String>,
    pub quiet: Option<Window>,
    /// The channels taken (`false`: refused).
    pub whatsapp: bool,
    pub sms: bool,
    pub partners: Vec<PartnerChoice>,
}

/// What a person chose for one partner (`partner_id`), with the partner's code and name.
#[derive(Debug, Clone)]
pub struct PartnerChoice {
    pub partner_id: i64,
    pub code: String,
    pub name: String,
    pub muted: bool,
    pub blocked: bool,
    pub marketing: bool,
}

/// The columns a read of messages `m` (joined to their partner `p` and to [`HONOURED_JOINS`]) adds for
/// [`honoured_of_row`].
pub(crate) const HONOURED_COLUMNS: &str = "pr.time_zone AS pref_time_zone, pr.quiet_start AS pref_quiet_start, \
    pr.quiet_end AS pref_quiet_end, pr.whatsapp AS pref_whatsapp, pr.sms AS pref_sms, pp.muted AS pref_muted, \
    pp.blocked AS pref_blocked, pp.marketing AS pref_marketing, p.quiet_start AS partner_quiet_start, \
    p.quiet_end AS partner_quiet_end, p.quiet_time_zone AS partner_quiet_time_zone";

/// The joins [`HONOURED_COLUMNS`] read through, after `messages m` and `partners p`.
pub(crate) const HONOURED_JOINS: &str = " LEFT JOIN preferences pr ON pr.phone = m.phone \
    LEFT JOIN partner_preferences pp ON pp.phone = m.phone AND pp.partner_id = m.partner_id ";

/// What a row with [`HONOURED_COLUMNS`] says the person chose: their quiet window if they set one, else
/// the partner's default (in the person's time zone when they set one, else the partner's).
pub(crate) fn honoured_of_row(row: &AnyRow) -> Result<Honoured, sqlx::Error> {
    let flag = |name: &str, default: bool| -> Result<bool, sqlx::Error> {
        Ok(row.try_get::<Option<i64>, _>(name)?.map_or(default, |v| v != 0))
    };
    let time_zone: Option<String> = row.try_get("pref_time_zone")?;
    let own = Window::stored(row.try_get("pref_quiet_start")?, row.try_get("pref_quiet_end")?);
    let partners = Window::stored(row.try_get("partner_quiet_start")?, row.try_get("partner_quiet_end")?);
    let partner_zone: Option<String> = row.try_get("partner_quiet_time_zone")?;
    let quiet = match (own, partners) {
        (Some(window), _) => Some((time_zone.unwrap_or_else(|| "UTC".into()), window)),
        (None, Some(window)) => Some((time_zone.or(partner_zone).unwrap_or_else(|| "UTC".into()), window)),
        (None, None) => None,
    };
    Ok(Honoured {
        whatsapp: flag("pref_whatsapp", true)?,
        sms: flag("pref_sms", true)?,
        muted: flag("pref_muted", false)?,
        blocked: flag("pref_blocked", false)?,
        marketing: flag("pref_marketing", true)?,
        quiet,
    })
}

/// What `phone` chose that `partner_id`'s messages meet (a push, a bot's answer).
pub async fn honoured(db: &Db, phone: &str, partner_id: i64) -> Result<Honoured, sqlx::Error> {
    let sql = format!(
        "SELECT {HONOURED_COLUMNS} FROM partners p \
         LEFT JOIN preferences pr ON pr.phone = $1 \
         LEFT JOIN partner_preferences pp ON pp.phone = $1 AND pp.partner_id = p.id WHERE p.id = $2"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(phone).bind(partner_id).fetch_optional(db.reader()).await?;
    row.as_ref().map(honoured_of_row).transpose().map(Option::unwrap_or_default)
}

/// What a new message's insert answers of its person's choice for its partner (`refusal`): 2 blocked, 1
/// marketing off, 0 or NULL neither. Read in the insert's `RETURNING`, so a send reads nothing more.
pub(crate) const REFUSAL_RETURNED: &str = "(SELECT CASE WHEN pp.blocked <> 0 THEN 2 WHEN pp.marketing = 0 THEN 1 \
     ELSE 0 END FROM partner_preferences pp WHERE pp.phone = messages.phone AND pp.partner_id = messages.partner_id) \
     AS refusal";

/// What a row with [`REFUSAL_RETURNED`] says of a message (`marketing` or not): why it reaches no one.
pub(crate) fn refusal_of_row(row: &AnyRow, marketing: bool) -> Result<Option<&'static str>, sqlx::Error> {
    let refusal = row.try_get::<Option<i64>, _>("refusal")?.unwrap_or(0);
    let chosen = Honoured { blocked: refusal == 2, marketing: refusal != 1, ..Honoured::default() };
    Ok(chosen.refusal(marketing))
}

/// `phone`'s preferences: what they set, and every partner that sent them a message or that they chose
/// something for (its choices as set, else the defaults).
pub async fn document(db: &Db, phone: &str) -> Result<Document, sqlx::Error> {
    let own = sqlx::query("SELECT time_zone, quiet_start, quiet_end, whatsapp, sms FROM preferences WHERE phone = $1")
        .bind(phone)
        .fetch_optional(db.reader())
        .await?;
    let mut doc = Document { whatsapp: true, sms: true, ..Document::default() };
    if let Some(row) = own {
        doc.time_zone = row.try_get("time_zone")?;
        doc.quiet = Window::stored(row.try_get("quiet_start")?, row.try_get("quiet_end")?);
        doc.whatsapp = row.try_get::<i64, _>("whatsapp")? != 0;
        doc.sms = row.try_get::<i64, _>("sms")? != 0;
    }
    let rows = sqlx::query(
        "SELECT p.id, p.code, p.name, pp.muted, pp.blocked, pp.marketing FROM partners p \
         LEFT JOIN partner_preferences pp ON pp.partner_id = p.id AND pp.phone = $1 \
         WHERE pp.phone IS NOT NULL OR p.id IN (SELECT DISTINCT m.partner_id FROM messages m WHERE m.phone = $1) \
         ORDER BY p.code",
    )
    .bind(phone)
    .fetch_all(db.reader())
    .await?;
    for row in rows {
        let flag = |name: &str, default: bool| -> Result<bool, sqlx::Error> {
            Ok(row.try_get::<Option<i64>, _>(name)?.map_or(default, |v| v != 0))
        };
        doc.partners.push(PartnerChoice {
            partner_id: row.try_get("id")?,
            code: row.try_get("code")?,
            name: row.try_get("name")?,
            muted: flag("muted", false)?,
            blocked: flag("blocked", false)?,
            marketing: flag("marketing", true)?,
        });
    }
    Ok(doc)
}

/// Replaces `phone`'s preferences with `doc` (its partners' choices: those given, the others back to the
/// defaults), in one transaction.
pub async fn replace(db: &Db, phone: &str, doc: &Document, now: Millis) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "INSERT INTO preferences (phone, time_zone, quiet_start, quiet_end, whatsapp, sms, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (phone) DO UPDATE SET time_zone = excluded.time_zone, \
         quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end, whatsapp = excluded.whatsapp, \
         sms = excluded.sms, updated_at = excluded.updated_at",
    )
    .bind(phone)
    .bind(&doc.time_zone)
    .bind(doc.quiet.map(|w| w.start))
    .bind(doc.quiet.map(|w| w.end))
    .bind(i64::from(doc.whatsapp))
    .bind(i64::from(doc.sms))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM partner_preferences WHERE phone = $1").bind(phone).execute(&mut *tx).await?;
    for choice in &doc.partners {
        sqlx::query(
            "INSERT INTO partner_preferences (phone, partner_id, muted, blocked, marketing, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(phone)
        .bind(choice.partner_id)
        .bind(i64::from(choice.muted))
        .bind(i64::from(choice.blocked))
        .bind(i64::from(choice.marketing))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// Whether `phone` blocked `partner_id` (the partner's view of the account says so).
pub async fn blocked(db: &Db, phone: &str, partner_id: i64) -> Result<bool, sqlx::Error> {
    let found: Option<i64> =
        sqlx::query_scalar("SELECT blocked FROM partner_preferences WHERE phone = $1 AND partner_id = $2")
            .bind(phone)
            .bind(partner_id)
            .fetch_optional(db.reader())
            .await?;
    Ok(found.is_some_and(|b| b != 0))
}

/// A partner's default quiet window for people who set none, and the time zone it is in.
pub async fn partner_default(db: &Db, partner_id: i64) -> Result<Option<(Window, Option<String>)>, sqlx::Error> {
    let row = sqlx::query("SELECT quiet_start, quiet_end, quiet_time_zone FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await?;
    let window = Window::stored(row.try_get("quiet_start")?, row.try_get("quiet_end")?);
    Ok(window.map(|w| (w, row.try_get("quiet_time_zone").ok().flatten())))
}
