//! What a partner promises the people who write to it: its business hours (`business_hours::Hours`, kept as
//! JSON), the automatic reply outside them, and its SLA targets; and, per conversation, the SLA running on
//! it (started by a person's message while none runs, stopped by an agent's reply or closing) and when the
//! automatic reply last went. The breach of a running SLA is `conversations::breach_due`'s.

use sqlx::Row;
use sqlx::Transaction;

use super::Db;
use super::rollups::conversations::Bump;
use crate::business_hours::Hours;
use crate::clock::Millis;
use crate::names::SlaKind;

/// A partner's service levels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `None`: always in.
    pub hours: Option<Hours>,
    /// The automatic reply outside business hours (`None`: none).
    pub away_message: Option<String>,
    /// Seconds of business time for the first agent reply.
    pub first_response_s: Option<i64>,
    /// Seconds of business time for an agent reply after the person wrote again.
    pub next_response_s: Option<i64>,
}

impl Settings {
    /// When an SLA of `target_s` started at `from` is due: counted in business hours when there are any.
    pub fn due(&self, from: Millis, target_s: i64) -> Option<Millis> {
        let ms = target_s.saturating_mul(1000);
        match &self.hours {
            Some(hours) => hours.add_business_ms(from, ms),
            None => Some(from.saturating_add(ms)),
        }
    }
}

async fn settings_on(conn: &mut sqlx::AnyConnection, partner_id: i64) -> Result<Settings, sqlx::Error> {
    let row = sqlx::query(
        "SELECT business_hours, away_message, sla_first_response_s, sla_next_response_s FROM partners WHERE id = $1",
    )
    .bind(partner_id)
    .fetch_one(&mut *conn)
    .await?;
    let hours: Option<String> = row.try_get("business_hours")?;
    let hours = match hours {
        Some(json) => Some(serde_json::from_str(&json).map_err(|e| sqlx::Error::Decode(e.into()))?),
        None => None,
    };
    Ok(Settings {
        hours,
        away_message: row.try_get("away_message")?,
        first_response_s: row.try_get("sla_first_response_s")?,
        next_response_s: row.try_get("sla_next_response_s")?,
    })
}

/// The partner's service levels.
pub async fn settings(db: &Db, partner_id: i64) -> Result<Settings, sqlx::Error> {
    let mut conn = db.reader().acquire().await?;
    settings_on(&mut conn, partner_id).await
}

/// [`settings`] in the caller's transaction.
pub async fn settings_in(tx: &mut Transaction<'_, sqlx::Any>, partner_id: i64) -> Result<Settings, sqlx::Error> {
    settings_on(tx, partner_id).await
}

/// Keeps the partner's business hours and automatic reply.
pub async fn set_hours(
    db: &Db,
    partner_id: i64,
    hours: Option<&Hours>,
    away_message: Option<&str>,
) -> Result<(), sqlx::Error> {
    let json = hours.map(|h| serde_json::to_string(h).expect("hours serialise"));
    sqlx::query("UPDATE partners SET business_hours = $1, away_message = $2 WHERE id = $3")
        .bind(json)
        .bind(away_message)
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Keeps the partner's SLA targets (seconds of business time; `None`: none). SLAs running keep the due time
/// they started with.
pub async fn set_targets(db: &Db, partner_id: i64, first: Option<i64>, next: Option<i64>) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE partners SET sla_first_response_s = $1, sla_next_response_s = $2 WHERE id = $3")
        .bind(first)
        .bind(next)
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// A person's message in conversation `conversation_id` of partner `partner_id`, in the caller's transaction:
/// when no SLA runs on it, the partner's starts — `first_response` until an agent first replied, then
/// `next_response` — due its target of business time from `now`.
pub async fn start_in(
    tx: &mut Transaction<'_, sqlx::Any>,
    partner_id: i64,
    conversation_id: i64,
    now: Millis,
) -> Result<(), sqlx::Error> {
    let settings = settings_on(tx, partner_id).await?;
    let first = settings.first_response_s.and_then(|t| settings.due(now, t));
    let next = settings.next_response_s.and_then(|t| settings.due(now, t));
    if first.is_none() && next.is_none() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE conversations SET \
         sla_kind = CASE WHEN first_response_at IS NULL THEN $1 ELSE $2 END, \
         sla_due_at = CASE WHEN first_response_at IS NULL THEN $3 ELSE $4 END, sla_breached_at = NULL \
         WHERE id = $5 AND sla_kind IS NULL \
         AND (CASE WHEN first_response_at IS NULL THEN $3 ELSE $4 END) IS NOT NULL",
    )
    .bind(SlaKind::FirstResponse.as_str())
    .bind(SlaKind::NextResponse.as_str())
    .bind(first)
    .bind(next)
    .bind(conversation_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// An agent (member `author`, or the partner key) replied in conversation `conversation_id`: its SLA stops,
/// and its first reply is noted, and counted in the rollups (the time it took, for the member who wrote it,
/// else the assignee).
pub async fn replied_in(
    tx: &mut Transaction<'_, sqlx::Any>,
    conversation_id: i64,
    author: Option<i64>,
    now: Millis,
) -> Result<(), sqlx::Error> {
    let row =
        sqlx::query("SELECT partner_id, created_at, first_response_at, assignee_id FROM conversations WHERE id = $1")
            .bind(conversation_id)
            .fetch_one(&mut **tx)
            .await?;
    if row.try_get::<Option<i64>, _>("first_response_at")?.is_none() {
        let (partner, created): (i64, i64) = (row.try_get("partner_id")?, row.try_get("created_at")?);
        let agent = author.or(row.try_get("assignee_id")?);
        let bump = Bump { first_responses: 1, first_response_ms: (now - created).max(0), ..Bump::default() };
        super::rollups::conversations::bump_in(tx, partner, now, agent, bump).await?;
    }
    stop_in(tx, conversation_id, true, now).await
}

/// Conversation `conversation_id` no longer waits for the agents (an agent replied, or it was closed): its
/// SLA stops; `replied` notes the first agent reply.
pub async fn stop_in(
    tx: &mut Transaction<'_, sqlx::Any>,
    conversation_id: i64,
    replied: bool,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE conversations SET sla_kind = NULL, sla_due_at = NULL, sla_breached_at = NULL, \
         first_response_at = CASE WHEN $1 = 1 AND first_response_at IS NULL THEN $2 ELSE first_response_at END \
         WHERE id = $3",
    )
    .bind(i64::from(replied))
    .bind(now)
    .bind(conversation_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Whether conversation `conversation_id` is to get the automatic reply now: not since the team last went
/// out (`closed_since`). Noted as sent when it is (the caller sends it in the same transaction).
pub async fn claim_away_reply_in(
    tx: &mut Transaction<'_, sqlx::Any>,
    conversation_id: i64,
    closed_since: Millis,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let claimed = sqlx::query(
        "UPDATE conversations SET away_replied_at = $1 WHERE id = $2 \
         AND (away_replied_at IS NULL OR away_replied_at < $3)",
    )
    .bind(now)
    .bind(conversation_id)
    .bind(closed_since)
    .execute(&mut **tx)
    .await?;
    Ok(claimed.rows_affected() == 1)
}
