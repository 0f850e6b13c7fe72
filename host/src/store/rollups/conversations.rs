//! The rollups of what conversations came to (`conversation_rollups`): a row per partner, hour and agent,
//! bumped in the transaction of each change that counts (a conversation opened, first answered, resolved,
//! its SLA breached, rated) and summed for the figures (`GET /api/v1/analytics/conversations`).

use sqlx::Row;
use sqlx::Transaction;

use super::HOUR_MS;
use crate::clock::Millis;
use crate::store::Db;

/// What one change adds to its hour's row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bump {
    pub opened: i64,
    pub resolved: i64,
    pub resolution_ms: i64,
    pub first_responses: i64,
    pub first_response_ms: i64,
    pub sla_breaches: i64,
    pub ratings: i64,
    pub rating_sum: i64,
}

/// Adds `bump` to partner `partner_id`'s row of the hour of `at` for member `agent` (`None`: no member), in
/// the caller's transaction.
pub async fn bump_in(
    tx: &mut Transaction<'_, sqlx::Any>,
    partner_id: i64,
    at: Millis,
    agent: Option<i64>,
    b: Bump,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO conversation_rollups (partner_id, hour, agent_id, opened, resolved, resolution_ms, \
         first_responses, first_response_ms, sla_breaches, ratings, rating_sum) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (partner_id, hour, agent_id) DO UPDATE SET \
         opened = conversation_rollups.opened + excluded.opened, \
         resolved = conversation_rollups.resolved + excluded.resolved, \
         resolution_ms = conversation_rollups.resolution_ms + excluded.resolution_ms, \
         first_responses = conversation_rollups.first_responses + excluded.first_responses, \
         first_response_ms = conversation_rollups.first_response_ms + excluded.first_response_ms, \
         sla_breaches = conversation_rollups.sla_breaches + excluded.sla_breaches, \
         ratings = conversation_rollups.ratings + excluded.ratings, \
         rating_sum = conversation_rollups.rating_sum + excluded.rating_sum",
    )
    .bind(partner_id)
    .bind(at - at.rem_euclid(HOUR_MS))
    .bind(agent.unwrap_or(0))
    .bind(b.opened)
    .bind(b.resolved)
    .bind(b.resolution_ms)
    .bind(b.first_responses)
    .bind(b.first_response_ms)
    .bind(b.sla_breaches)
    .bind(b.ratings)
    .bind(b.rating_sum)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A group of the rollups: a bucket (its start), an agent (`None`: no member), and what it came to.
#[derive(Debug, Clone, Copy)]
pub struct Rolled {
    pub bucket: Millis,
    pub agent: Option<i64>,
    pub sums: Bump,
}

/// Partner `partner_id`'s rows of the hours in `[from, to)`, summed by bucket of `step` from `from` and by
/// agent.
pub async fn groups(
    db: &Db,
    partner_id: i64,
    from: Millis,
    to: Millis,
    step: Millis,
) -> Result<Vec<Rolled>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT hour - ((hour - $2) % $4) AS bucket, agent_id, CAST(SUM(opened) AS BIGINT) AS opened, \
         CAST(SUM(resolved) AS BIGINT) AS resolved, CAST(SUM(resolution_ms) AS BIGINT) AS resolution_ms, \
         CAST(SUM(first_responses) AS BIGINT) AS first_responses, \
         CAST(SUM(first_response_ms) AS BIGINT) AS first_response_ms, \
         CAST(SUM(sla_breaches) AS BIGINT) AS sla_breaches, CAST(SUM(ratings) AS BIGINT) AS ratings, \
         CAST(SUM(rating_sum) AS BIGINT) AS rating_sum \
         FROM conversation_rollups WHERE partner_id = $1 AND hour >= $2 AND hour < $3 GROUP BY 1, 2 ORDER BY 1",
    )
    .bind(partner_id)
    .bind(from)
    .bind(to)
    .bind(step)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            let agent: i64 = r.try_get("agent_id")?;
            Ok(Rolled {
                bucket: r.try_get("bucket")?,
                agent: (agent != 0).then_some(agent),
                sums: Bump {
                    opened: r.try_get("opened")?,
                    resolved: r.try_get("resolved")?,
                    resolution_ms: r.try_get("resolution_ms")?,
                    first_responses: r.try_get("first_responses")?,
                    first_response_ms: r.try_get("first_response_ms")?,
                    sla_breaches: r.try_get("sla_breaches")?,
                    ratings: r.try_get("ratings")?,
                    rating_sum: r.try_get("rating_sum")?,
                },
            })
        })
        .collect()
}

impl std::ops::AddAssign for Bump {
    fn add_assign(&mut self, o: Bump) {
        self.opened += o.opened;
        self.resolved += o.resolved;
        self.resolution_ms += o.resolution_ms;
        self.first_responses += o.first_responses;
        self.first_response_ms += o.first_response_ms;
        self.sla_breaches += o.sla_breaches;
        self.ratings += o.ratings;
        self.rating_sum += o.rating_sum;
    }
}
