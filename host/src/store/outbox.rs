//! The transactional outbox of webhook events: an event is written in the same transaction as the change
//! that causes it, and delivered later by the webhook dispatcher.

use serde_json::Value;
use sqlx::{Any, Transaction};

use crate::clock::Millis;
use crate::secrets::random_alnum;

/// Who receives an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Partner(i64),
    Developer(i64),
    Bot(i64),
}

impl Target {
    pub fn kind(self) -> &'static str {
        match self {
            Target::Partner(_) => "partner",
            Target::Developer(_) => "developer",
            Target::Bot(_) => "bot",
        }
    }

    pub fn id(self) -> i64 {
        match self {
            Target::Partner(id) | Target::Developer(id) | Target::Bot(id) => id,
        }
    }
}

/// Records one event for delivery. `ordering_key` groups events that must arrive in order (e.g. all the
/// status changes of one message). Returns the delivery id (the `X-Service-Delivery` header).
pub async fn enqueue(
    tx: &mut Transaction<'_, Any>,
    target: Target,
    event: &str,
    payload: &Value,
    ordering_key: &str,
    now: Millis,
) -> Result<String, sqlx::Error> {
    let delivery_id = format!("dlv_{}", random_alnum(24));
    sqlx::query(
        "INSERT INTO outbox_events (delivery_id, target, target_id, event, payload, ordering_key, state, \
         next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7, $7)",
    )
    .bind(&delivery_id)
    .bind(target.kind())
    .bind(target.id())
    .bind(event)
    .bind(payload.to_string())
    .bind(ordering_key)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(delivery_id)
}

/// Events recorded for a target, newest first (used by tests and the deliveries list).
pub async fn list_for_target(
    db: &super::Db,
    target: Target,
    event: Option<&str>,
) -> Result<Vec<(String, String, Value)>, sqlx::Error> {
    use sqlx::Row;
    let rows = sqlx::query(
        "SELECT delivery_id, event, payload FROM outbox_events \
         WHERE target = $1 AND target_id = $2 AND ($3 IS NULL OR event = $3) ORDER BY id DESC",
    )
    .bind(target.kind())
    .bind(target.id())
    .bind(event)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            let payload: String = r.try_get("payload")?;
            Ok((r.try_get("delivery_id")?, r.try_get("event")?, serde_json::from_str(&payload).unwrap_or(Value::Null)))
        })
        .collect()
}
