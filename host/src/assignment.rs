//! How a partner's conversations find an agent (docs/console.md, "Assignment"): by hand (`manual`), or by
//! the host, to the members `online` below their capacity — `round_robin` in turn, `capacity` to the least
//! busy. A user's message in a conversation nobody has gives it out as it is written
//! (`store::conversations`); this module decides what the team's changes do: an agent going offline hands
//! theirs back to the queue, and whenever someone may have become free (an agent online, a conversation
//! closed, a capacity or the way of assigning changed) the queue is given out, the longest waiting first.

use crate::clock::Millis;
use crate::names::{AgentStatus, AssignmentMode};
use crate::store::Db;
use crate::store::assignment::{self as store, Settings};
use crate::store::conversations;

/// The most conversations of the queue given out at once (the rest wait for the next change).
const DRAIN_AT_ONCE: i64 = 200;

/// The lowest and highest capacity a member or a partner's default may have.
pub const CAPACITY: std::ops::RangeInclusive<i64> = 1..=1000;

/// Sets member `member_id`'s status: going offline hands their conversations not closed back to the queue,
/// then (online or offline) the queue is given out. `false` when they are not the partner's.
pub async fn set_status(
    db: &Db,
    partner_id: i64,
    member_id: i64,
    status: AgentStatus,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    if !store::set_status(db, partner_id, member_id, status).await? {
        return Ok(false);
    }
    if status == AgentStatus::Offline {
        conversations::release(db, partner_id, member_id, now).await?;
    }
    give_out(db, partner_id, now).await?;
    Ok(true)
}

/// Keeps the partner's way of assigning, then gives out the queue.
pub async fn set_settings(db: &Db, partner_id: i64, settings: Settings, now: Millis) -> Result<(), sqlx::Error> {
    store::set_settings(db, partner_id, settings).await?;
    give_out(db, partner_id, now).await.map(|_| ())
}

/// Gives the partner's queue out to its free agents, the conversation waiting longest first, until nobody
/// is free; nothing when it assigns by hand. Answers how many were given.
pub async fn give_out(db: &Db, partner_id: i64, now: Millis) -> Result<usize, sqlx::Error> {
    if store::settings(db, partner_id).await?.mode == AssignmentMode::Manual {
        return Ok(0);
    }
    let mut given = 0;
    for c in conversations::queue(db, partner_id, DRAIN_AT_ONCE).await? {
        if conversations::give_next(db, &c, now).await?.is_none() {
            break;
        }
        given += 1;
    }
    Ok(given)
}

/// The team as the assignment settings show it: each member's open conversations, ratings, status and
/// capacity, beside the partner's way of assigning and how many conversations wait in the queue.
pub struct Overview {
    pub settings: Settings,
    pub queued: i64,
    /// Each member, their open conversations, and their ratings' average and count.
    pub agents: Vec<(crate::store::members::Member, i64, Option<f64>, i64)>,
}

/// Partner `partner_id`'s [`Overview`].
pub async fn overview(db: &Db, partner_id: i64) -> Result<Overview, sqlx::Error> {
    let settings = store::settings(db, partner_id).await?;
    let loads = store::loads(db, partner_id).await?;
    let ratings = crate::store::ratings::averages(db, partner_id).await?;
    let agents = crate::store::members::list(db, partner_id)
        .await?
        .into_iter()
        .map(|m| {
            let open = loads.get(&m.id).copied().unwrap_or(0);
            let (average, count) = ratings.get(&m.id).map_or((None, 0), |(avg, n)| (Some(*avg), *n));
            (m, open, average, count)
        })
        .collect();
    Ok(Overview { settings, queued: store::queue_length(db, partner_id).await?, agents })
}

/// Sets partner `partner_id`'s way of assigning `mode` (required) and its default capacity (1 to 1000;
/// absent keeps the one set).
pub async fn configure(
    db: &Db,
    partner_id: i64,
    mode: Option<AssignmentMode>,
    default_capacity: Option<i64>,
    now: Millis,
) -> Result<(), crate::validate::KeepError> {
    use crate::validate::Invalid;
    let mode =
        mode.ok_or_else(|| Invalid::new("mode", format!("mode is one of {}", AssignmentMode::names().join(", "))))?;
    let default_capacity = match default_capacity {
        Some(c) if !CAPACITY.contains(&c) => {
            return Err(Invalid::new("default_capacity", "default_capacity is 1 to 1000 conversations").into());
        }
        Some(c) => c,
        None => store::settings(db, partner_id).await?.default_capacity,
    };
    set_settings(db, partner_id, Settings { mode, default_capacity }, now).await?;
    Ok(())
}
