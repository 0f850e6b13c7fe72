//! The event log: what each user's app is told live (`GET /me/events`), and each partner's console
//! (`GET /conversations/events`), one row per event, numbered per key (`seq`). A user's key is the phone; a
//! partner's is [`partner_key`] (the column keeps its first name, `phone`). A number is taken from the user's row of `user_event_seqs` under its lock,
//! so one user's events commit in the order of their numbers on both engines, and a stream that reads
//! "after N" never skips one that commits late. Events are written in the transactions that make the
//! changes they tell of, and kept [`RETENTION_MS`].
//!
//! Hosts learn that a user has new events (`http::streams::Wakes`): on PostgreSQL every append sends
//! `pg_notify('hubbub_user_events', phone)`, delivered at commit to every host's listener; on SQLite a tail
//! of the log (`messages::events_after_row`) hands the streams their events, with what this process has just
//! written taken from memory (`messages::Fresh`: the rows its group commits appended, the messages it put
//! into the hub), not read back.

use std::collections::{BTreeMap, HashMap};

use sqlx::{Any, Row, Transaction};

use super::{Backend, Db};
use crate::clock::Millis;
use crate::names::UserEventKind;

/// The key of a partner's own log (what its console's stream follows): `partner:{id}`, never a phone.
pub fn partner_key(partner_id: i64) -> String {
    format!("partner:{partner_id}")
}

/// How long events are kept for a stream to replay: 24 hours.
pub const RETENTION_MS: Millis = 24 * 3_600_000;

/// The PostgreSQL channel that tells hosts a user has new events (the payload is the phone).
pub const CHANNEL: &str = "hubbub_user_events";

/// An event to record for a user: what changed, and the id of what it is about (a message, a
/// conversation, a session, an account).
#[derive(Debug, Clone)]
pub struct NewUserEvent {
    pub phone: String,
    pub kind: UserEventKind,
    pub subject_id: i64,
}

/// Records `events` in the caller's transaction, numbering each user's in order.
pub async fn append_in(tx: &mut Transaction<'_, Any>, events: &[NewUserEvent], now: Millis) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let backend = super::backend_of(tx);
    // One increment per user, in phone order (a consistent lock order between transactions).
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for e in events {
        *counts.entry(e.phone.as_str()).or_default() += 1;
    }
    let sql = format!(
        "INSERT INTO user_event_seqs (phone, last) VALUES {} ON CONFLICT (phone) DO UPDATE \
         SET last = user_event_seqs.last + excluded.last RETURNING phone, last",
        super::rows(counts.len(), "(?, ?)")
    );
    let mut upsert = super::query_rows(backend, &sql, counts.len());
    for (phone, count) in &counts {
        upsert = upsert.bind(*phone).bind(*count);
    }
    let mut next: HashMap<String, i64> = HashMap::new();
    for row in upsert.fetch_all(&mut **tx).await? {
        let (phone, last): (String, i64) = (row.try_get("phone")?, row.try_get("last")?);
        let first = last - counts.get(phone.as_str()).copied().unwrap_or(0) + 1;
        next.insert(phone, first);
    }
    let sql = format!(
        "INSERT INTO user_events (phone, seq, kind, subject_id, created_at) VALUES {}",
        super::rows(events.len(), "(?, ?, ?, ?, ?)")
    );
    // Inside a group commit that keeps what it appends (`collecting`), the rows' ids are asked back.
    let collecting = APPENDED.try_with(|_| ()).is_ok();
    let sql = if collecting { format!("{sql} RETURNING id, phone, seq") } else { sql };
    let mut insert = super::query_rows(backend, &sql, events.len());
    let mut appended: HashMap<(&str, i64), &NewUserEvent> = HashMap::new();
    for e in events {
        let seq = next.get_mut(&e.phone).ok_or(sqlx::Error::RowNotFound)?;
        insert = insert.bind(&e.phone).bind(*seq).bind(e.kind.as_str()).bind(e.subject_id).bind(now);
        if collecting {
            appended.insert((e.phone.as_str(), *seq), e);
        }
        *seq += 1;
    }
    if collecting {
        let mut rows = Vec::with_capacity(events.len());
        for row in insert.fetch_all(&mut **tx).await? {
            let (id, phone, seq): (i64, String, i64) = (row.try_get("id")?, row.try_get("phone")?, row.try_get("seq")?);
            let e = appended.get(&(phone.as_str(), seq)).ok_or(sqlx::Error::RowNotFound)?;
            let event = UserEvent { seq, kind: e.kind, subject_id: e.subject_id, created_at: now };
            rows.push((id, phone, event));
        }
        APPENDED.with(|kept| kept.borrow_mut().extend(rows));
    } else {
        insert.execute(&mut **tx).await?;
    }
    if backend == Backend::Postgres {
        let sql = format!(
            "SELECT pg_notify('{CHANNEL}', phone) FROM (VALUES {}) AS woken (phone)",
            super::rows(counts.len(), "(?)")
        );
        let mut notify = super::query_rows(backend, &sql, counts.len());
        for phone in counts.keys() {
            notify = notify.bind(*phone);
        }
        notify.fetch_all(&mut **tx).await?;
    }
    Ok(())
}

/// A row of the log: its id, its key (a phone, or a partner's key) and the event.
pub type LogRow = (i64, String, UserEvent);

tokio::task_local! {
    /// The log rows appended within [`collecting`].
    static APPENDED: std::cell::RefCell<Vec<LogRow>>;
}

/// Runs `write` (a transaction of this task's, begun and ended within it), answering with what it appended
/// to the log ([`append_in`]), in the order appended. Whether those rows were committed is the caller's to
/// know: a group commit keeps them for SQLite's tail once its transaction has committed
/// (`messages::Fresh`), so the tail hands them to the streams without reading them back.
pub async fn collecting<T>(write: impl Future<Output = T>) -> (T, Vec<LogRow>) {
    APPENDED
        .scope(std::cell::RefCell::new(Vec::new()), async move {
            let result = write.await;
            (result, APPENDED.with(|kept| kept.take()))
        })
        .await
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserEvent {
    pub seq: i64,
    pub kind: UserEventKind,
    pub subject_id: i64,
    pub created_at: Millis,
}

/// The user's newest event number (0 when none was ever recorded), and the oldest still kept.
pub async fn bounds(db: &Db, phone: &str) -> Result<(i64, Option<i64>), sqlx::Error> {
    let last: Option<i64> = sqlx::query_scalar("SELECT last FROM user_event_seqs WHERE phone = $1")
        .bind(phone)
        .fetch_optional(db.reader())
        .await?;
    let oldest: Option<i64> = sqlx::query_scalar("SELECT MIN(seq) FROM user_events WHERE phone = $1")
        .bind(phone)
        .fetch_one(db.reader())
        .await?;
    Ok((last.unwrap_or(0), oldest))
}

/// Forgets events and used or expired tickets older than `before`; answers how many events went.
pub async fn forget_before(db: &Db, before: Millis) -> Result<u64, sqlx::Error> {
    let done = sqlx::query("DELETE FROM user_events WHERE created_at < $1").bind(before).execute(db.writer()).await?;
    sqlx::query("DELETE FROM stream_tickets WHERE expires_at < $1").bind(before).execute(db.writer()).await?;
    Ok(done.rows_affected())
}

/// Every key's events after log row `after_id`, in the order they were written (at most `limit`), each with
/// its row id and its key (a phone, or a partner's key): SQLite's tail (`messages::events_after_row`).
pub async fn after_row(db: &Db, after_id: i64, limit: i64) -> Result<Vec<LogRow>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, phone, seq, kind, subject_id, created_at FROM user_events WHERE id > $1 ORDER BY id LIMIT $2",
    )
    .bind(after_id)
    .bind(limit)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            let event = UserEvent {
                seq: r.try_get("seq")?,
                kind: super::decode_name(r, "kind")?,
                subject_id: r.try_get("subject_id")?,
                created_at: r.try_get("created_at")?,
            };
            Ok((r.try_get("id")?, r.try_get("phone")?, event))
        })
        .collect()
}

/// The newest log row's id: where a tail starts.
pub async fn newest_id(db: &Db) -> Result<i64, sqlx::Error> {
    let id: Option<i64> = sqlx::query_scalar("SELECT MAX(id) FROM user_events").fetch_one(db.reader()).await?;
    Ok(id.unwrap_or(0))
}

/// What a stream ticket was issued for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub phone: String,
    pub device: Option<String>,
    /// The issue and expiry times (seconds) of the token it was asked for with: the stream ends when that
    /// token would stop working.
    pub token_iat: i64,
    pub token_exp: i64,
}

/// Stores a new ticket's digest.
pub async fn insert_ticket(db: &Db, hash: &str, ticket: &Ticket, expires_at: Millis) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO stream_tickets (ticket_hash, phone, device, token_iat, token_exp, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(hash)
    .bind(&ticket.phone)
    .bind(&ticket.device)
    .bind(ticket.token_iat)
    .bind(ticket.token_exp)
    .bind(expires_at)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// Whether a ticket with this digest is there to be used (unused, unexpired): a read, so that a ticket
/// that is not costs the writer nothing.
pub async fn ticket_usable(db: &Db, hash: &str, now: Millis) -> Result<bool, sqlx::Error> {
    let found: Option<i64> = sqlx::query_scalar(
        "SELECT 1 FROM stream_tickets WHERE ticket_hash = $1 AND used_at IS NULL AND expires_at > $2",
    )
    .bind(hash)
    .bind(now)
    .fetch_optional(db.reader())
    .await?;
    Ok(found.is_some())
}

/// Uses a ticket: `Some` once, for an unexpired ticket with this digest; `None` after (or for an unknown
/// or expired one).
pub async fn redeem_ticket(db: &Db, hash: &str, now: Millis) -> Result<Option<Ticket>, sqlx::Error> {
    let row = sqlx::query(
        "UPDATE stream_tickets SET used_at = $1 WHERE ticket_hash = $2 AND used_at IS NULL AND expires_at > $1 \
         RETURNING phone, device, token_iat, token_exp",
    )
    .bind(now)
    .bind(hash)
    .fetch_optional(db.writer())
    .await?;
    row.map(|r| {
        Ok(Ticket {
            phone: r.try_get("phone")?,
            device: r.try_get("device")?,
            token_iat: r.try_get("token_iat")?,
            token_exp: r.try_get("token_exp")?,
        })
    })
    .transpose()
}
