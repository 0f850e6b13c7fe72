//! Meta's messaging limits: how many people a WhatsApp business account may reach first in a rolling 24
//! hours (its tier), and who it reached. Messages to people who wrote in the last 24 hours are answers, and
//! are not counted (the caller decides which messages count).

use sqlx::Row;

use super::Db;
use crate::clock::Millis;

/// A rolling day.
pub const DAY_MS: Millis = 24 * 60 * 60 * 1000;

/// A business account's limit as kept: `daily_limit` `None` is unlimited; `quality` what Meta last said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub daily_limit: Option<i64>,
    pub quality: Option<String>,
    pub updated_at: Millis,
}

/// The limit kept for `account` (`None`: none kept, the host's default applies).
pub async fn of(db: &Db, account: &str) -> Result<Option<Limit>, sqlx::Error> {
    let row = sqlx::query("SELECT daily_limit, quality, updated_at FROM messaging_limits WHERE account = $1")
        .bind(account)
        .fetch_optional(db.reader())
        .await?;
    row.map(|r| {
        Ok(Limit {
            daily_limit: r.try_get("daily_limit")?,
            quality: r.try_get("quality")?,
            updated_at: r.try_get("updated_at")?,
        })
    })
    .transpose()
}

/// Keeps `account`'s limit (`None`: unlimited), and the quality Meta gave with it when it gave one.
pub async fn set(
    db: &Db,
    account: &str,
    daily_limit: Option<i64>,
    quality: Option<&str>,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO messaging_limits (account, daily_limit, quality, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (account) DO UPDATE SET daily_limit = excluded.daily_limit, \
         quality = COALESCE(excluded.quality, messaging_limits.quality), updated_at = excluded.updated_at",
    )
    .bind(account)
    .bind(daily_limit)
    .bind(quality)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Whether a business-initiated message from `account` may reach `phone` now under `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Yes: the person was reached already today, or is counted now.
    Yes,
    /// No: the limit is reached until `until` (when the oldest of today's people leaves the rolling day).
    Full { until: Millis },
}

/// Counts `phone` among the people `account` reached first today, if there is room under `limit` (`None`:
/// unlimited). A person already counted today takes no more room.
pub async fn take(db: &Db, account: &str, phone: &str, limit: Option<i64>, now: Millis) -> Result<Room, sqlx::Error> {
    let since = now - DAY_MS;
    let counted: Option<Millis> =
        sqlx::query_scalar("SELECT at FROM whatsapp_initiated WHERE account = $1 AND phone = $2")
            .bind(account)
            .bind(phone)
            .fetch_optional(db.writer())
            .await?;
    if counted.is_some_and(|at| at > since) {
        return Ok(Room::Yes);
    }
    // One statement: counted only while the day's count is under the limit.
    let taken = sqlx::query(
        "INSERT INTO whatsapp_initiated (account, phone, at) SELECT $1, $2, $3 \
         WHERE $4 < 0 OR (SELECT COUNT(*) FROM whatsapp_initiated WHERE account = $1 AND at > $5) < $4 \
         ON CONFLICT (account, phone) DO UPDATE SET at = excluded.at",
    )
    .bind(account)
    .bind(phone)
    .bind(now)
    .bind(limit.unwrap_or(-1))
    .bind(since)
    .execute(db.writer())
    .await?;
    if taken.rows_affected() > 0 {
        return Ok(Room::Yes);
    }
    let oldest: Option<Millis> =
        sqlx::query_scalar("SELECT MIN(at) FROM whatsapp_initiated WHERE account = $1 AND at > $2")
            .bind(account)
            .bind(since)
            .fetch_one(db.reader())
            .await?;
    Ok(Room::Full { until: oldest.unwrap_or(now) + DAY_MS })
}

/// The people `account` reached first in the rolling day up to `now`.
pub async fn reached_today(db: &Db, account: &str, now: Millis) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) FROM whatsapp_initiated WHERE account = $1 AND at > $2")
        .bind(account)
        .bind(now - DAY_MS)
        .fetch_one(db.reader())
        .await
}

/// The limit a Meta tier names (`TIER_250`, `TIER_1K`, `TIER_10K`, `TIER_100K`, `TIER_UNLIMITED`, …): `Some(None)`
/// for unlimited, `None` for a name it does not know.
pub fn tier(name: &str) -> Option<Option<i64>> {
    let name = name.trim().to_ascii_uppercase();
    let size = name.strip_prefix("TIER_")?;
    if size == "UNLIMITED" {
        return Some(None);
    }
    let (digits, scale) = match size.strip_suffix('K') {
        Some(digits) => (digits, 1_000),
        None => (size, 1),
    };
    digits.parse::<i64>().ok().filter(|n| *n > 0).map(|n| Some(n * scale))
}

#[cfg(test)]
mod tests {
    use super::tier;

    #[test]
    fn metas_tiers_are_read_as_limits() {
        assert_eq!(tier("TIER_250"), Some(Some(250)));
        assert_eq!(tier("TIER_1K"), Some(Some(1_000)));
        assert_eq!(tier("tier_2k"), Some(Some(2_000)));
        assert_eq!(tier("TIER_100K"), Some(Some(100_000)));
        assert_eq!(tier("TIER_UNLIMITED"), Some(None));
        assert_eq!(tier("TIER_"), None);
        assert_eq!(tier("GREEN"), None);
    }
}
