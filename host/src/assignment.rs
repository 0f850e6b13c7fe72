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
