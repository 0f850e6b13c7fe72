//! Pacing budgets shared by every host on the database: one row a budget (a sender's messages a second, or
//! WhatsApp's pair rate to one person), reserved one slot at a time by a single statement, so two hosts never
//! hand out the same slot and the rate is the sender's, not multiplied by the hosts. Times are microseconds.

use sqlx::Row;

use super::{Backend, Db};

/// What a reservation got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// A slot: send at this time (µs), not before.
    Slot(i64),
    /// No slot near enough: the message joined the line, and its turn comes at about this time (µs).
    Turn(i64),
}

/// Reserves a slot of the budget `key`, whose slots are `interval_us` apart. A slot within `horizon_us` of
/// `now_us` is taken; further off, the message joins the line instead (its turn: after those already in
/// it), so that waiting messages come back one by one rather than all at once. `urgent` (codes, chat)
/// always takes the next slot, ahead of the line.
pub async fn reserve(
    db: &Db,
    key: &str,
    interval_us: i64,
    now_us: i64,
    horizon_us: i64,
    urgent: bool,
) -> Result<Reserved, sqlx::Error> {
    // `SET` expressions read the row as it was, so one statement decides and moves the budget.
    let max = greatest(db);
    let sql = format!(
        "INSERT INTO pacing (key, next_at, queue_at, went) VALUES ($1, $2 + $3, 0, 1) \
         ON CONFLICT (key) DO UPDATE SET \
         went = CASE WHEN $5 = 1 OR pacing.next_at <= $2 + $4 THEN 1 ELSE 0 END, \
         next_at = CASE WHEN $5 = 1 OR pacing.next_at <= $2 + $4 \
             THEN {max}(pacing.next_at, $2) + $3 ELSE pacing.next_at END, \
         queue_at = CASE WHEN $5 = 1 OR pacing.next_at <= $2 + $4 \
             THEN pacing.queue_at ELSE {max}(pacing.queue_at, pacing.next_at) + $3 END \
         RETURNING next_at, queue_at, went"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(key)
        .bind(now_us)
        .bind(interval_us)
        .bind(horizon_us)
        .bind(i64::from(urgent))
        .fetch_one(db.writer())
        .await?;
    let (next_at, queue_at, went): (i64, i64, i64) =
        (row.try_get("next_at")?, row.try_get("queue_at")?, row.try_get("went")?);
    Ok(match went {
        1 => Reserved::Slot(next_at - interval_us),
        // The line's last place is the slot after those before it.
        _ => Reserved::Turn(queue_at - interval_us),
    })
}

/// Holds the budget `key` back until `until_us` (the provider throttled it): no slot before then.
pub async fn hold_off(db: &Db, key: &str, until_us: i64) -> Result<(), sqlx::Error> {
    let sql = format!(
        "INSERT INTO pacing (key, next_at, queue_at, went) VALUES ($1, $2, 0, 0) \
         ON CONFLICT (key) DO UPDATE SET next_at = {}(pacing.next_at, $2)",
        greatest(db)
    );
    sqlx::query(sqlx::AssertSqlSafe(sql)).bind(key).bind(until_us).execute(db.writer()).await?;
    Ok(())
}

/// The larger of two values, as the backend writes it (a name of this module's, never input).
fn greatest(db: &Db) -> &'static str {
    match db.backend() {
        Backend::Postgres => "GREATEST",
        Backend::Sqlite => "MAX",
    }
}

/// Forgets the budgets nobody has used since `before_us` (pair rates of people written to long ago).
pub async fn forget_before(db: &Db, before_us: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query("DELETE FROM pacing WHERE next_at < $1 AND queue_at < $1")
        .bind(before_us)
        .execute(db.writer())
        .await?;
    Ok(done.rows_affected())
}
