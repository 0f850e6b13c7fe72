//! The transactional outbox of webhook events: an event is written in the same transaction as the change
//! that causes it, and delivered later by the webhook dispatcher.

use std::collections::BTreeMap;

use serde_json::Value;
use sqlx::{Any, Transaction};

use super::user_events::{self, NewUserEvent, partner_key};
use super::writer::{GroupCommit, Writes};
use crate::clock::Millis;
use crate::names::{DeliveryState, UserEventKind};
use crate::secrets::ordered_id;

/// Who receives an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// Why an event of a target without a webhook URL is `dead` (the deliveries list shows it; a retry after
/// the URL is configured sends it).
pub const NO_URL: &str = "no webhook_url configured";

/// An event to record (see [`enqueue`]).
#[derive(Debug)]
pub struct NewEvent<'a> {
    pub target: Target,
    pub event: &'a str,
    /// The event's body, as JSON text: stored, signed and sent as it is.
    pub payload: &'a str,
    pub ordering_key: String,
    pub at: Millis,
}

/// Records one event for delivery. `ordering_key` groups events that must arrive in order (e.g. all the
/// status changes of one message) of one target: the event names its predecessor in the group
/// (`after_id`), and is not sent while that one is still pending. Returns the delivery id (the
/// `X-Service-Delivery` header).
///
/// A target that has no webhook URL now gets the event already `dead` (with [`NO_URL`]): the dispatcher
/// would only claim it to find that out, two writes per event for nothing. Nor is such an event's
/// predecessor looked up (`after_id` 0): it matters only if the event is sent, and a retry that makes it
/// pending names it then ([`REVIVE`]).
pub async fn enqueue(
    tx: &mut Transaction<'_, Any>,
    target: Target,
    event: &str,
    payload: &Value,
    ordering_key: &str,
    now: Millis,
) -> Result<String, sqlx::Error> {
    let payload = payload.to_string();
    let one = NewEvent { target, event, payload: &payload, ordering_key: ordering_key.to_string(), at: now };
    let mut ids = enqueue_many(tx, std::slice::from_ref(&one)).await?;
    Ok(ids.pop().expect("one event, one id"))
}

/// [`enqueue`] for many events in one statement. Their ordering keys must differ (an event's predecessor
/// is looked up among the rows already stored). Answers their delivery ids in order.
///
/// The events are rows of one bound value ([`super::JsonRows`]) joined once to their targets (whether each
/// has an endpoint) and to the ordering keys' last events: a batch of a few hundred runs about three times
/// faster than rows that each carried their own subqueries, and faster again than a value bound per column
/// of each row (docs/performance.md).
pub async fn enqueue_many(tx: &mut Transaction<'_, Any>, events: &[NewEvent<'_>]) -> Result<Vec<String>, sqlx::Error> {
    let mut rows = EventRows::default();
    for e in events {
        rows.push(e);
    }
    rows.insert_in(tx).await
}

/// Events as the rows [`enqueue_many`] inserts, each with its delivery id: built before the transaction
/// that inserts them when need be (the streams' `delivered` marks), and joined with others'.
#[derive(Debug, Default, Clone)]
pub struct EventRows {
    rows: super::JsonRows,
    ids: Vec<String>,
}

impl EventRows {
    pub fn push(&mut self, e: &NewEvent<'_>) {
        let delivery_id = ordered_id("dlv_");
        let ordering_key = format!("{}:{}:{}", e.target.kind(), e.target.id(), e.ordering_key);
        self.rows.push(&(&delivery_id, e.target.kind(), e.target.id(), e.event, e.payload, ordering_key, e.at));
        self.ids.push(delivery_id);
    }

    /// Adds `other`'s events after these.
    pub fn append(&mut self, other: &EventRows) {
        self.rows.append(&other.rows);
        self.ids.extend_from_slice(&other.ids);
    }

    /// Inserts the events in order, in one statement; answers their delivery ids.
    pub async fn insert_in(self, tx: &mut Transaction<'_, Any>) -> Result<Vec<String>, sqlx::Error> {
        if self.rows.is_empty() {
            return Ok(Vec::new());
        }
        let backend = super::backend_of(tx);
        let rows = super::json_table(
            backend,
            &[
                ("delivery_id", "TEXT"),
                ("target", "TEXT"),
                ("target_id", "BIGINT"),
                ("event", "TEXT"),
                ("payload", "TEXT"),
                ("ordering_key", "TEXT"),
                ("at", "BIGINT"),
            ],
        );
        let sql = format!(
            "WITH v (n, delivery_id, target, target_id, event, payload, ordering_key, at) AS MATERIALIZED ({rows}) \
             INSERT INTO outbox_events (delivery_id, target, target_id, event, payload, ordering_key, state, \
             last_error, next_attempt_at, created_at, updated_at, after_id) \
             SELECT v.delivery_id, v.target, v.target_id, v.event, v.payload, v.ordering_key, \
             CASE WHEN {HAS_ENDPOINT} THEN 'pending' ELSE 'dead' END, CASE WHEN {HAS_ENDPOINT} THEN NULL ELSE ? END, \
             v.at, v.at, v.at, \
             CASE WHEN {HAS_ENDPOINT} THEN COALESCE((SELECT MAX(o.id) FROM outbox_events o WHERE o.ordering_key = v.ordering_key), 0) ELSE 0 END \
             FROM v {ENDPOINTS} ORDER BY v.n"
        );
        sqlx::query(sqlx::AssertSqlSafe(super::placeholders(backend, &sql)))
            .bind(self.rows.value())
            .bind(NO_URL)
            .execute(&mut **tx)
            .await?;
        Ok(self.ids)
    }
}

/// The targets of [`enqueue_many`]'s events (`v`) that have an endpoint — a URL and, for partners and
/// developers, a secret — one join per kind of target: an event whose target has none is `dead` at once,
/// with [`NO_URL`].
const ENDPOINTS: &str = "LEFT JOIN partners p ON v.target = 'partner' AND p.id = v.target_id \
     AND p.webhook_url IS NOT NULL AND p.webhook_secret IS NOT NULL \
     LEFT JOIN developers d ON v.target = 'developer' AND d.id = v.target_id \
     AND d.webhook_url IS NOT NULL AND d.webhook_secret IS NOT NULL \
     LEFT JOIN bots b ON v.target = 'bot' AND b.id = v.target_id AND b.webhook_url IS NOT NULL";

/// Whether [`ENDPOINTS`] found the event's target with an endpoint.
const HAS_ENDPOINT: &str = "COALESCE(p.id, d.id, b.id) IS NOT NULL";

/// What a retry writes to make events pending and due at `$1`: among it each one's predecessor in its ordering
/// group (the latest event of the same key before it; 0 for none), which an event born `dead` was stored
/// without.
const REVIVE: &str = "UPDATE outbox_events SET state = 'pending', next_attempt_at = $1, lease_until = NULL, \
     updated_at = $1, after_id = COALESCE((SELECT MAX(p.id) FROM outbox_events p \
     WHERE p.ordering_key = outbox_events.ordering_key AND p.id < outbox_events.id), 0)";

/// Events waiting to be delivered (for metrics): how many, and when the oldest was created.
pub async fn backlog(db: &super::Db) -> Result<(i64, Option<Millis>), sqlx::Error> {
    use sqlx::Row;
    let row = sqlx::query("SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox_events WHERE state = 'pending'")
        .fetch_one(db.reader())
        .await?;
    Ok((row.try_get("n")?, row.try_get("oldest")?))
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

/// An event claimed for delivery.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    pub id: i64,
    pub delivery_id: String,
    pub target: Target,
    pub event: String,
    pub payload: String,
    pub attempts: i64,
}

fn target_of(kind: &str, id: i64) -> Target {
    match kind {
        "developer" => Target::Developer(id),
        "bot" => Target::Bot(id),
        _ => Target::Partner(id),
    }
}

/// Claims up to `limit` due events for `lease_ms`. An event is due when it is pending, its time has
/// come, nobody holds it, and its predecessor with the same ordering key is no longer pending (so a
/// message's `read` never overtakes its `delivered`, even across processes).
pub async fn claim_due(
    db: &super::Db,
    now: Millis,
    lease_ms: i64,
    limit: i64,
) -> Result<Vec<OutboxEvent>, sqlx::Error> {
    use sqlx::Row;
    let sql = match db.backend() {
        super::Backend::Postgres => {
            "UPDATE outbox_events SET lease_until = $1 WHERE id IN (SELECT e.id FROM outbox_events e \
             WHERE e.state = 'pending' AND e.next_attempt_at <= $2 AND (e.lease_until IS NULL OR e.lease_until <= $2) \
             AND (e.after_id = 0 OR COALESCE((SELECT p.state FROM outbox_events p WHERE p.id = e.after_id), '') \
             <> 'pending') \
             ORDER BY e.id LIMIT $3 FOR UPDATE SKIP LOCKED) \
             RETURNING id, delivery_id, target, target_id, event, payload, attempts"
        }
        super::Backend::Sqlite => {
            "UPDATE outbox_events SET lease_until = $1 WHERE id IN (SELECT e.id FROM outbox_events e \
             WHERE e.state = 'pending' AND e.next_attempt_at <= $2 AND (e.lease_until IS NULL OR e.lease_until <= $2) \
             AND (e.after_id = 0 OR COALESCE((SELECT p.state FROM outbox_events p WHERE p.id = e.after_id), '') \
             <> 'pending') \
             ORDER BY e.id LIMIT $3) \
             RETURNING id, delivery_id, target, target_id, event, payload, attempts"
        }
    };
    let rows = sqlx::query(sql).bind(now + lease_ms).bind(now).bind(limit).fetch_all(db.writer()).await?;
    let mut events: Vec<OutboxEvent> = rows
        .iter()
        .map(|r| {
            let kind: String = r.try_get("target")?;
            Ok(OutboxEvent {
                id: r.try_get("id")?,
                delivery_id: r.try_get("delivery_id")?,
                target: target_of(&kind, r.try_get("target_id")?),
                event: r.try_get("event")?,
                payload: r.try_get("payload")?,
                attempts: r.try_get("attempts")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()?;
    events.sort_by_key(|e| e.id);
    Ok(events)
}

/// Gives claimed events back without an attempt (their endpoint is busy), in one transaction.
pub async fn release(db: &super::Db, ids: &[i64]) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    for id in ids {
        sqlx::query("UPDATE outbox_events SET lease_until = NULL WHERE id = $1").bind(id).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// The outcome of one webhook attempt, to record.
#[derive(Debug)]
pub struct Attempt {
    pub id: i64,
    /// The partner whose console's log is told of this attempt (`webhook.deliveries`): the dispatcher sets it
    /// at most once a second a partner, and tells the others later with [`announce`].
    pub announce_to: Option<i64>,
    /// `pending` is retried at `next_attempt_at`.
    pub state: DeliveryState,
    pub status: Option<u16>,
    pub error: Option<String>,
    pub next_attempt_at: Millis,
    pub now: Millis,
}

/// Most attempts recorded in one transaction.
const MAX_ATTEMPT_BATCH: usize = 256;

/// Group commit for attempt outcomes (see `store::writer`): concurrent deliveries' results are written
/// many per transaction (on SQLite, one writer, this is what bounds dispatch throughput). A caller waits
/// for its own write, so an event is never released before its outcome is stored; an attempt whose write
/// failed is sent again when its lease runs out.
#[derive(Clone, Debug)]
pub struct AttemptRecorder(GroupCommit<Attempt, ()>);

impl AttemptRecorder {
    /// Starts the recorder task; it ends when every handle is dropped.
    pub fn spawn(db: super::Db) -> AttemptRecorder {
        AttemptRecorder(GroupCommit::spawn_with(
            db,
            MAX_ATTEMPT_BATCH,
            Writes {
                batch: Some(|tx, attempts| Box::pin(record_attempts_in(tx, attempts))),
                one: |tx, a| Box::pin(record_one_in(tx, a)),
            },
        ))
    }

    /// Records one attempt as part of the next batch.
    pub async fn record(&self, attempt: Attempt) -> Result<(), String> {
        self.0.write(attempt).await.map_err(|e| e.to_string())
    }
}

/// Records a batch of attempts: the final ones (succeeded, dead) with one update per outcome — nearly
/// always a single `succeeded, 200` for the whole batch — and the retries (each with its own next
/// attempt) one by one.
async fn record_attempts_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    attempts: &[Attempt],
) -> Result<Vec<()>, sqlx::Error> {
    let backend = super::backend_of(tx);
    type Outcome<'a> = (DeliveryState, Option<u16>, Option<&'a str>);
    let mut groups: Vec<(Outcome, Vec<i64>, Millis)> = Vec::new();
    for a in attempts {
        if a.state == DeliveryState::Pending {
            record_attempt_in(tx, a).await?;
            continue;
        }
        let outcome = (a.state, a.status, a.error.as_deref());
        match groups.iter_mut().find(|(o, _, _)| *o == outcome) {
            Some((_, ids, at)) => {
                ids.push(a.id);
                *at = (*at).max(a.now);
            }
            None => groups.push((outcome, vec![a.id], a.now)),
        }
    }
    for ((state, status, error), ids, now) in groups {
        let sql = format!(
            "UPDATE outbox_events SET state = ?, attempts = attempts + 1, last_status = ?, last_error = ?, \
             next_attempt_at = ?, lease_until = NULL, updated_at = ? WHERE id IN ({})",
            super::rows(ids.len(), "?")
        );
        let mut update = super::query_rows(backend, &sql, ids.len());
        update = update.bind(state.as_str()).bind(status.map(i64::from)).bind(error).bind(now).bind(now);
        for id in ids {
            update = update.bind(id);
        }
        update.execute(&mut **tx).await?;
    }
    announce_in(tx, attempts).await?;
    Ok(vec![(); attempts.len()])
}

/// Records one attempt on its own (when its batch could not be written).
async fn record_one_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, a: &Attempt) -> Result<(), sqlx::Error> {
    record_attempt_in(tx, a).await?;
    announce_in(tx, std::slice::from_ref(a)).await
}

/// Tells the partners' consoles that their deliveries moved (the attempts that name one in `announce_to`):
/// one `webhook.deliveries` event a partner, on the partner's log, in the transaction that records them.
async fn announce_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, attempts: &[Attempt]) -> Result<(), sqlx::Error> {
    let mut newest: BTreeMap<i64, i64> = BTreeMap::new();
    for a in attempts {
        if let Some(partner_id) = a.announce_to {
            let id = newest.entry(partner_id).or_default();
            *id = (*id).max(a.id);
        }
    }
    let now = attempts.iter().map(|a| a.now).max().unwrap_or_default();
    user_events::append_in(tx, &announcements(newest), now).await
}

/// Tells these partners' consoles that their deliveries moved, on its own (what [`Attempt::announce_to`]
/// left for later).
pub async fn announce(db: &super::Db, partner_ids: &[i64], now: Millis) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    user_events::append_in(&mut tx, &announcements(partner_ids.iter().map(|id| (*id, 0)).collect()), now).await?;
    tx.commit().await
}

/// `webhook.deliveries` events, one a partner, each about its newest delivery tried (0 when not known).
fn announcements(newest: BTreeMap<i64, i64>) -> Vec<NewUserEvent> {
    newest
        .into_iter()
        .map(|(partner_id, id)| NewUserEvent {
            phone: partner_key(partner_id),
            kind: UserEventKind::WebhookDeliveries,
            subject_id: id,
        })
        .collect()
}

async fn record_attempt_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, a: &Attempt) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE outbox_events SET state = $1, attempts = attempts + 1, last_status = $2, last_error = $3, \
         next_attempt_at = $4, lease_until = NULL, updated_at = $5 WHERE id = $6",
    )
    .bind(a.state.as_str())
    .bind(a.status.map(i64::from))
    .bind(a.error.as_deref())
    .bind(a.next_attempt_at)
    .bind(a.now)
    .bind(a.id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A delivery as the deliveries list shows it.
#[derive(Debug, Clone)]
pub struct WebhookDelivery {
    pub id: i64,
    pub delivery_id: String,
    pub event: String,
    pub state: DeliveryState,
    pub attempts: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub next_attempt_at: Millis,
    pub created_at: Millis,
    /// The delivery this one waits for: the one before it in its group (an earlier event about the same
    /// message), still pending — it goes only once that one is delivered or dead.
    pub waiting_for: Option<String>,
}

/// A delivery's columns, and `waiting_for` read from its predecessor by primary key.
const DELIVERY_COLUMNS: &str = "id, delivery_id, event, state, attempts, last_status, last_error, next_attempt_at, \
     created_at, (SELECT p.delivery_id FROM outbox_events p WHERE p.id = outbox_events.after_id \
     AND p.state = 'pending') AS waiting_for";

fn delivery_from_row(r: &sqlx::any::AnyRow) -> Result<WebhookDelivery, sqlx::Error> {
    use sqlx::Row;
    Ok(WebhookDelivery {
        id: r.try_get("id")?,
        delivery_id: r.try_get("delivery_id")?,
        event: r.try_get("event")?,
        state: super::decode_name(r, "state")?,
        attempts: r.try_get("attempts")?,
        last_status: r.try_get("last_status")?,
        last_error: r.try_get("last_error")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
        created_at: r.try_get("created_at")?,
        waiting_for: r.try_get("waiting_for")?,
    })
}

/// What a delivery list is narrowed to (every part optional).
#[derive(Debug, Default)]
pub struct DeliveryQuery<'a> {
    pub state: Option<DeliveryState>,
    /// Only deliveries with at least one attempt (with `state` pending: retrying after a failure).
    pub only_failed: bool,
    pub event: Option<&'a str>,
    /// Created at or after.
    pub since: Option<Millis>,
    /// Created before.
    pub until: Option<Millis>,
}

/// A target's deliveries, newest first, filtered by state and event.
pub async fn list_deliveries(
    db: &super::Db,
    target: Target,
    query: &DeliveryQuery<'_>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<WebhookDelivery>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        DELIVERY_COLUMNS,
        " FROM outbox_events WHERE target = $1 AND target_id = $2 AND ($3 IS NULL OR state = $3) \
         AND ($4 IS NULL OR event = $4) AND ($5 IS NULL OR id < $5) AND ($6 = 0 OR attempts > 0) \
         AND ($7 IS NULL OR created_at >= $7) AND ($8 IS NULL OR created_at < $8) ORDER BY id DESC LIMIT $9"
    );
    let rows = sqlx::query(sql)
        .bind(target.kind())
        .bind(target.id())
        .bind(query.state.map(DeliveryState::as_str))
        .bind(query.event)
        .bind(before)
        .bind(i64::from(query.only_failed))
        .bind(query.since)
        .bind(query.until)
        .bind(limit)
        .fetch_all(db.reader())
        .await?;
    rows.iter().map(delivery_from_row).collect()
}

/// One of a target's deliveries with the event it carries (the body every attempt sends, signed).
pub async fn find_delivery(
    db: &super::Db,
    target: Target,
    delivery_id: &str,
) -> Result<Option<(WebhookDelivery, String)>, sqlx::Error> {
    use sqlx::Row;
    let sql = const_format::concatcp!(
        "SELECT ",
        DELIVERY_COLUMNS,
        ", payload FROM outbox_events WHERE target = $1 AND target_id = $2 AND delivery_id = $3"
    );
    let row =
        sqlx::query(sql).bind(target.kind()).bind(target.id()).bind(delivery_id).fetch_optional(db.reader()).await?;
    row.map(|r| Ok((delivery_from_row(&r)?, r.try_get("payload")?))).transpose()
}

/// Makes every failed delivery of a target created since `since` due now (dead ones, and pending ones whose
/// last attempt failed), each with its own delivery id; how many.
pub async fn retry_failed_since(
    db: &super::Db,
    target: Target,
    since: Millis,
    now: Millis,
) -> Result<u64, sqlx::Error> {
    let sql = const_format::concatcp!(
        REVIVE,
        " WHERE target = $2 AND target_id = $3 AND created_at >= $4 \
         AND (state = 'dead' OR (state = 'pending' AND attempts > 0))"
    );
    let done =
        sqlx::query(sql).bind(now).bind(target.kind()).bind(target.id()).bind(since).execute(db.writer()).await?;
    Ok(done.rows_affected())
}

/// Makes one of a target's deliveries due now, whatever its state (same delivery id: a receiver that
/// already has it de-duplicates). `None` when it is not theirs.
///
/// One that waits for an earlier delivery of its group (`waiting_for`: the group is delivered in order)
/// cannot go before it: the earlier ones still pending are made due now too, so the retry sends them in
/// order rather than leaving this one to wait out their backoff.
pub async fn retry_now(
    db: &super::Db,
    target: Target,
    delivery_id: &str,
    now: Millis,
) -> Result<Option<WebhookDelivery>, sqlx::Error> {
    let sql = const_format::concatcp!(
        REVIVE,
        " WHERE target = $2 AND target_id = $3 AND delivery_id = $4 RETURNING ",
        DELIVERY_COLUMNS
    );
    let mut tx = db.begin().await?;
    let row = sqlx::query(sql)
        .bind(now)
        .bind(target.kind())
        .bind(target.id())
        .bind(delivery_id)
        .fetch_optional(&mut *tx)
        .await?;
    let delivery = row.as_ref().map(delivery_from_row).transpose()?;
    if let Some(d) = delivery.as_ref().filter(|d| d.waiting_for.is_some()) {
        sqlx::query(
            "UPDATE outbox_events SET next_attempt_at = $1, updated_at = $1 \
             WHERE ordering_key = (SELECT ordering_key FROM outbox_events WHERE id = $2) AND id < $2 \
             AND state = 'pending' AND next_attempt_at > $1",
        )
        .bind(now)
        .bind(d.id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(delivery)
}
