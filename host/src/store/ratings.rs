//! Satisfaction ratings (CSAT): whether a partner asks for one when a conversation is closed, and with
//! which question; per conversation, the question asked (of whose work: the assignee then) and the answer;
//! each agent's average.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::Transaction;

use super::user_events::{self, NewUserEvent};
use super::{Db, user_events::partner_key};
use crate::clock::Millis;
use crate::names::UserEventKind;

/// The question asked when the partner sets none.
pub const DEFAULT_QUESTION: &str =
    "How did we do? Please rate this conversation from 1 (poor) to 5 (great): reply with a number.";

/// Whether the partner asks for ratings, and its question (`None`: [`DEFAULT_QUESTION`]).
pub async fn settings(db: &Db, partner_id: i64) -> Result<(bool, Option<String>), sqlx::Error> {
    let row = sqlx::query("SELECT csat_enabled, csat_question FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(db.reader())
        .await?;
    Ok((row.try_get::<i64, _>("csat_enabled")? == 1, row.try_get("csat_question")?))
}

/// Keeps whether the partner asks for ratings, and its question.
pub async fn set_settings(db: &Db, partner_id: i64, enabled: bool, question: Option<&str>) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE partners SET csat_enabled = $1, csat_question = $2 WHERE id = $3")
        .bind(i64::from(enabled))
        .bind(question)
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Whether closed conversation `conversation_id` is to be asked for a rating now: an agent answered in it,
/// and it was not asked since the person last wrote. Noted as asked, of its assignee's work (the caller
/// writes the question in the same transaction); an earlier answer is forgotten.
pub async fn claim_ask_in(
    tx: &mut Transaction<'_, sqlx::Any>,
    conversation_id: i64,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let claimed = sqlx::query(
        "UPDATE conversations SET csat_asked_at = $1, csat_agent_id = assignee_id, csat_score = NULL, \
         csat_comment = NULL, csat_rated_at = NULL WHERE id = $2 AND state = 'closed' \
         AND first_response_at IS NOT NULL AND (csat_asked_at IS NULL OR csat_asked_at < last_message_at)",
    )
    .bind(now)
    .bind(conversation_id)
    .execute(&mut **tx)
    .await?;
    Ok(claimed.rows_affected() == 1)
}

/// The answer to conversation `conversation_id`'s question, asked since `since` and not answered yet; its
/// partner's agents are told. `false` when there is no such question.
pub async fn rate(
    db: &Db,
    conversation_id: i64,
    score: i64,
    comment: Option<&str>,
    since: Millis,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let rated = sqlx::query(
        "UPDATE conversations SET csat_score = $1, csat_comment = $2, csat_rated_at = $3 WHERE id = $4 \
         AND csat_asked_at IS NOT NULL AND csat_asked_at >= $5 AND csat_score IS NULL \
         RETURNING partner_id, csat_agent_id",
    )
    .bind(score)
    .bind(comment)
    .bind(now)
    .bind(conversation_id)
    .bind(since)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(rated) = rated else { return Ok(false) };
    let partner: i64 = rated.try_get("partner_id")?;
    let bump = super::rollups::conversations::Bump { ratings: 1, rating_sum: score, ..Default::default() };
    super::rollups::conversations::bump_in(&mut tx, partner, now, rated.try_get("csat_agent_id")?, bump).await?;
    let told = NewUserEvent {
        phone: partner_key(partner),
        kind: UserEventKind::ConversationUpdated,
        subject_id: conversation_id,
    };
    user_events::append_in(&mut tx, &[told], now).await?;
    tx.commit().await?;
    Ok(true)
}

/// The conversation of `phone` (with `partner_id`'s, when known) whose question asked since `since` waits
/// for an answer, the latest asked: its id.
pub async fn awaiting(
    db: &Db,
    phone: &str,
    partner_id: Option<i64>,
    since: Millis,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM conversations WHERE phone = $1 AND csat_asked_at IS NOT NULL AND csat_score IS NULL \
         AND csat_asked_at >= $2 AND state = 'closed' AND ($3 IS NULL OR partner_id = $3) \
         ORDER BY csat_asked_at DESC LIMIT 1",
    )
    .bind(phone)
    .bind(since)
    .bind(partner_id)
    .fetch_optional(db.reader())
    .await
}

/// Each of the partner's agents' ratings: their average score and how many, by member.
pub async fn averages(db: &Db, partner_id: i64) -> Result<HashMap<i64, (f64, i64)>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT csat_agent_id, CAST(SUM(csat_score) AS BIGINT) AS total, COUNT(*) AS n FROM conversations \
         WHERE partner_id = $1 AND csat_score IS NOT NULL AND csat_agent_id IS NOT NULL GROUP BY csat_agent_id",
    )
    .bind(partner_id)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            let (total, n): (i64, i64) = (r.try_get("total")?, r.try_get("n")?);
            Ok((r.try_get("csat_agent_id")?, (total as f64 / n.max(1) as f64, n)))
        })
        .collect()
}
