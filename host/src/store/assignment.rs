//! Who of a partner's agents takes a conversation: the partner's way of assigning (`manual`, `round_robin`,
//! `capacity`) and default capacity, each member's status and capacity, and the choice itself
//! ([`choose_in`]; `store::conversations` gives the conversation), made in the database so that hosts
//! sharing it choose alike: among the members `online` and below their capacity
//! (conversations assigned to them and not closed), round robin takes the one given a conversation longest
//! ago, capacity the one with the fewest. A choice is kept only if the member was not given another
//! conversation meanwhile (by another host): otherwise it is made again.

use sqlx::Row;
use sqlx::Transaction;

use super::Db;
use crate::clock::Millis;
use crate::names::{AgentStatus, AssignmentMode};

/// How a partner assigns its conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub mode: AssignmentMode,
    /// The capacity of a member who has none of their own.
    pub default_capacity: i64,
}

/// The partner's way of assigning.
pub async fn settings(db: &Db, partner_id: i64) -> Result<Settings, sqlx::Error> {
    let mut conn = db.reader().acquire().await?;
    settings_on(&mut conn, partner_id).await
}

async fn settings_on(conn: &mut sqlx::AnyConnection, partner_id: i64) -> Result<Settings, sqlx::Error> {
    let row = sqlx::query("SELECT assignment, default_capacity FROM partners WHERE id = $1")
        .bind(partner_id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(Settings { mode: super::decode_name(&row, "assignment")?, default_capacity: row.try_get("default_capacity")? })
}

/// Keeps the partner's way of assigning.
pub async fn set_settings(db: &Db, partner_id: i64, settings: Settings) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE partners SET assignment = $1, default_capacity = $2 WHERE id = $3")
        .bind(settings.mode.as_str())
        .bind(settings.default_capacity)
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Sets a member's status; `false` when they are not the partner's.
pub async fn set_status(db: &Db, partner_id: i64, member_id: i64, status: AgentStatus) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("UPDATE members SET status = $1 WHERE id = $2 AND partner_id = $3")
        .bind(status.as_str())
        .bind(member_id)
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Sets a member's capacity (`None`: the partner's default); `false` when they are not the partner's.
pub async fn set_capacity(
    db: &Db,
    partner_id: i64,
    member_id: i64,
    capacity: Option<i64>,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("UPDATE members SET capacity = $1 WHERE id = $2 AND partner_id = $3")
        .bind(capacity)
        .bind(member_id)
        .bind(partner_id)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected() == 1)
}

/// How many conversations not closed each of the partner's members has, by member.
pub async fn loads(db: &Db, partner_id: i64) -> Result<std::collections::HashMap<i64, i64>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT assignee_id, COUNT(*) AS n FROM conversations WHERE partner_id = $1 AND assignee_id IS NOT NULL \
         AND state <> 'closed' GROUP BY assignee_id",
    )
    .bind(partner_id)
    .fetch_all(db.reader())
    .await?;
    rows.iter().map(|r| Ok((r.try_get("assignee_id")?, r.try_get("n")?))).collect()
}

/// The candidates of a choice: the partner's members online and below their capacity, the next first.
fn candidates(mode: AssignmentMode) -> &'static str {
    const BASE: &str = "SELECT id, last_assigned_at FROM (SELECT m.id, m.last_assigned_at, \
        COALESCE(m.capacity, $2) AS cap, (SELECT COUNT(*) FROM conversations c WHERE c.partner_id = $1 \
        AND c.assignee_id = m.id AND c.state <> 'closed') AS load FROM members m \
        WHERE m.partner_id = $1 AND m.status = 'online') a WHERE load < cap ";
    match mode {
        AssignmentMode::Capacity => const_format::concatcp!(BASE, "ORDER BY load, last_assigned_at, id LIMIT 1"),
        _ => const_format::concatcp!(BASE, "ORDER BY last_assigned_at, id LIMIT 1"),
    }
}

/// Chooses the member of partner `partner_id` who takes its next conversation, when it assigns by itself and
/// one is free, in the caller's transaction (which then gives them the conversation: the choice is theirs
/// from now on, as the next one's turn moves past them). `None`: nobody (by hand, or nobody free).
pub async fn choose_in(
    tx: &mut Transaction<'_, sqlx::Any>,
    partner_id: i64,
    now: Millis,
) -> Result<Option<i64>, sqlx::Error> {
    let settings = settings_on(tx, partner_id).await?;
    if settings.mode == AssignmentMode::Manual {
        return Ok(None);
    }
    // A member given a conversation by another host since the choice is chosen again (a few tries: each
    // lost one means someone else moved on).
    for _ in 0..4 {
        let row = sqlx::query(candidates(settings.mode))
            .bind(partner_id)
            .bind(settings.default_capacity)
            .fetch_optional(&mut **tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let (member, last): (i64, i64) = (row.try_get("id")?, row.try_get("last_assigned_at")?);
        let taken = sqlx::query(
            "UPDATE members SET last_assigned_at = CASE WHEN $1 > last_assigned_at THEN $1 ELSE last_assigned_at + 1 END \
             WHERE id = $2 AND last_assigned_at = $3 AND status = 'online'",
        )
        .bind(now)
        .bind(member)
        .bind(last)
        .execute(&mut **tx)
        .await?;
        if taken.rows_affected() == 1 {
            return Ok(Some(member));
        }
    }
    Ok(None)
}

/// How many open conversations of the partner's nobody has.
pub async fn queue_length(db: &Db, partner_id: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM conversations WHERE partner_id = $1 AND assignee_id IS NULL AND state = 'open'",
    )
    .bind(partner_id)
    .fetch_one(db.reader())
    .await
}
