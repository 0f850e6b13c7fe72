//! Partner templates and their review status.

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, decode_name, is_unique_violation, outbox};
use crate::clock::Millis;
use crate::names::TemplateStatus;

#[derive(Debug, Clone)]
pub struct Template {
    pub id: i64,
    pub partner_id: i64,
    pub code: String,
    pub channel: String,
    pub lang: String,
    pub category: String,
    pub body: String,
    pub status: TemplateStatus,
    pub variables: Vec<String>,
    pub rejection_reason: Option<String>,
    /// The id Meta's Cloud API gave it when submitted for review (`whatsapp` templates).
    pub provider_template_id: Option<String>,
    pub created_at: Millis,
}

const COLUMNS: &str = "id, partner_id, code, channel, lang, category, body, status, variables, rejection_reason, \
    provider_template_id, created_at";

fn from_row(row: &AnyRow) -> Result<Template, sqlx::Error> {
    let variables: String = row.try_get("variables")?;
    Ok(Template {
        id: row.try_get("id")?,
        partner_id: row.try_get("partner_id")?,
        code: row.try_get("code")?,
        channel: row.try_get("channel")?,
        lang: row.try_get("lang")?,
        category: row.try_get("category")?,
        body: row.try_get("body")?,
        status: decode_name(row, "status")?,
        variables: serde_json::from_str(&variables).unwrap_or_default(),
        rejection_reason: row.try_get("rejection_reason")?,
        provider_template_id: row.try_get("provider_template_id")?,
        created_at: row.try_get("created_at")?,
    })
}

pub struct NewTemplate<'a> {
    pub code: &'a str,
    pub channel: &'a str,
    pub lang: &'a str,
    pub category: &'a str,
    pub body: &'a str,
    pub variables: &'a [String],
}

/// Inserts a `draft` template; `None` when the partner already has this code, channel and language.
pub async fn insert_template(
    db: &Db,
    partner_id: i64,
    t: &NewTemplate<'_>,
    now: Millis,
) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO templates (partner_id, code, channel, lang, category, body, status, variables, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, '",
        TemplateStatus::Draft.as_str(),
        "', $7, $8, $8) RETURNING ",
        COLUMNS
    );
    let result = sqlx::query(sql)
        .bind(partner_id)
        .bind(t.code)
        .bind(t.channel)
        .bind(t.lang)
        .bind(t.category)
        .bind(t.body)
        .bind(serde_json::to_string(t.variables).expect("strings serialise"))
        .bind(now)
        .fetch_one(db.writer())
        .await;
    match result {
        Ok(row) => Ok(Some(from_row(&row)?)),
        Err(e) if is_unique_violation(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A page of the partner's templates, newest first, below `before` (a template id) when given.
pub async fn list_templates(
    db: &Db,
    partner_id: i64,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        COLUMNS,
        " FROM templates WHERE partner_id = $1 AND ($2 IS NULL OR id < $2) ORDER BY id DESC LIMIT $3"
    );
    let rows = sqlx::query(sql).bind(partner_id).bind(before).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

pub async fn find_template(db: &Db, partner_id: i64, id: i64) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM templates WHERE partner_id = $1 AND id = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// The template a send with `code` and `lang` uses: the `inapp` one first, then any channel's.
pub async fn find_for_send(db: &Db, partner_id: i64, code: &str, lang: &str) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        COLUMNS,
        " FROM templates WHERE partner_id = $1 AND code = $2 AND lang = $3 \
         ORDER BY CASE WHEN channel = 'inapp' THEN 0 ELSE 1 END, id LIMIT 1"
    );
    let row = sqlx::query(sql).bind(partner_id).bind(code).bind(lang).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// The approved `whatsapp` template a message sent with `code` and `lang` goes out as on WhatsApp. With
/// `reviewed_by_meta`, only one Meta approved (it has Meta's id).
pub async fn find_whatsapp_for_send(
    db: &Db,
    partner_id: i64,
    code: &str,
    lang: &str,
    reviewed_by_meta: bool,
) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        COLUMNS,
        " FROM templates WHERE partner_id = $1 AND code = $2 AND lang = $3 AND channel = 'whatsapp' AND status = '",
        TemplateStatus::Approved.as_str(),
        "' AND ($4 = 0 OR provider_template_id IS NOT NULL)"
    );
    let row = sqlx::query(sql)
        .bind(partner_id)
        .bind(code)
        .bind(lang)
        .bind(reviewed_by_meta as i64)
        .fetch_optional(db.reader())
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// The template Meta knows as `provider_id`.
pub async fn find_by_provider_id(db: &Db, provider_id: &str) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM templates WHERE provider_template_id = $1");
    let row = sqlx::query(sql).bind(provider_id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// Records the id Meta gave a submitted template; it waits for Meta's decision (`pending`).
pub async fn set_provider_template_id(db: &Db, id: i64, provider_id: &str, now: Millis) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE templates SET provider_template_id = $1, status = $2, updated_at = $3 WHERE id = $4")
        .bind(provider_id)
        .bind(TemplateStatus::Pending.as_str())
        .bind(now)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Applies Meta's decision about the template it knows as `provider_id`: moves it to `status` and records
/// its `template.status` event in one transaction, only when that changes its status (a decision heard
/// twice, from the webhook and the poll or from two hosts, is one event). `None` when nothing changed.
pub async fn decide_by_provider(
    db: &Db,
    provider_id: &str,
    status: TemplateStatus,
    reason: Option<&str>,
    now: Millis,
    event: impl FnOnce(&Template) -> Value,
) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "UPDATE templates SET status = $1, rejection_reason = $2, updated_at = $3 \
         WHERE provider_template_id = $4 AND status <> $1 RETURNING ",
        COLUMNS
    );
    let update = sqlx::query(sql).bind(status.as_str()).bind(reason).bind(now).bind(provider_id);
    decide(db, update, status, now, event).await
}

/// Runs `update` (an UPDATE of one template's status RETURNING it) and, when it moved a template to a
/// decision, records the `template.status` event `event` builds from it, in the same transaction.
async fn decide<'q>(
    db: &Db,
    update: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    status: TemplateStatus,
    now: Millis,
    event: impl FnOnce(&Template) -> Value,
) -> Result<Option<Template>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(row) = update.fetch_optional(&mut *tx).await? else { return Ok(None) };
    let template = from_row(&row)?;
    if status.is_decision() {
        let payload = event(&template);
        let key = format!("template:{}", template.id);
        let target = outbox::Target::Partner(template.partner_id);
        outbox::enqueue(&mut tx, target, "template.status", &payload, &key, now).await?;
    }
    tx.commit().await?;
    Ok(Some(template))
}

/// Moves a template to `status` (with a reason when rejected) and, in the same transaction, records the
/// `template.status` event built by `event` from the updated template. `None` when there is no such
/// template for this partner.
pub async fn set_status(
    db: &Db,
    partner_id: i64,
    id: i64,
    status: TemplateStatus,
    reason: Option<&str>,
    now: Millis,
    event: impl FnOnce(&Template) -> Value,
) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "UPDATE templates SET status = $1, rejection_reason = $2, updated_at = $3 \
         WHERE partner_id = $4 AND id = $5 RETURNING ",
        COLUMNS
    );
    let update = sqlx::query(sql).bind(status.as_str()).bind(reason).bind(now).bind(partner_id).bind(id);
    decide(db, update, status, now, event).await
}

/// Templates waiting for a decision: the operators' (`hubbub template pending`), or with `at_meta` those
/// submitted to Meta (the background poll asks about them), which are never the operators' to decide.
pub async fn list_pending(db: &Db, at_meta: bool) -> Result<Vec<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        COLUMNS,
        " FROM templates WHERE status = '",
        TemplateStatus::Pending.as_str(),
        "' AND (provider_template_id IS NOT NULL) = ($1 = 1) ORDER BY id"
    );
    let rows = sqlx::query(sql).bind(at_meta as i64).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

/// A template by id alone (operators).
pub async fn find_any(db: &Db, id: i64) -> Result<Option<Template>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM templates WHERE id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// The approved templates of a partner (the developer catalog is the platform partner's).
pub async fn list_approved(db: &Db, partner_id: i64) -> Result<Vec<Template>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        COLUMNS,
        " FROM templates WHERE partner_id = $1 AND status = '",
        TemplateStatus::Approved.as_str(),
        "' ORDER BY code, lang, channel"
    );
    let rows = sqlx::query(sql).bind(partner_id).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}
