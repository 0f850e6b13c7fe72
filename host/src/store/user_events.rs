//! The event log: what each user's app is told live (`GET /me/events`), and each partner's console
//! (`GET /conversations/events`), one row per event, numbered per key (`seq`). A user's key is the phone; a
//! partner's is [`partner_key`] (the column keeps its first name, `phone`). A number is taken from the user's row of `user_event_seqs` under its lock,
//! so one user's events commit in the order of their numbers on both engines, and a stream that reads
//! "after N" never skips one that commits late. Events are written in the transactions that make the
//! changes they tell of, and kept [`RETENTION_MS`].
//!
//! Hosts learn that a user has new events (`http::live::wakes::Wakes`): on PostgreSQL every append sends
//! `pg_notify('hubbub_user_events', phone)`, delivered at commit to every host's listener; on SQLite a tail
//! of the log ([`events_after_row`]) hands the streams their events, with what this process has just
//! written taken from memory ([`Fresh`]: the rows its group commits appended, the messages it put
//! into the hub), not read back.

use std::collections::{BTreeMap, HashMap};

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::messages::rows::{COLUMN_LIST, Message, find_many, from_row};
use super::{Backend, Db, decode_name};
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
/// ([`Fresh`]), so the tail hands them to the streams without reading them back.
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
/// its row id and its key (a phone, or a partner's key): SQLite's tail ([`events_after_row`]).
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

// The tail of the log: what an event stream sends, each event with the message it is about.

/// The log's rows with the message each is about when it is about one (`message.*`, `conversation.message`;
/// no message when that one is gone): what an event stream sends, in one read.
const LOGGED: &str = const_format::concatcp!(
    "SELECT e.id AS event_id, e.phone AS event_key, e.seq AS event_seq, e.kind AS event_kind, \
     e.subject_id AS event_subject, e.created_at AS event_at, ",
    COLUMN_LIST,
    " FROM user_events e LEFT JOIN messages m ON m.id = e.subject_id AND e.kind IN ('",
    UserEventKind::ABOUT_A_MESSAGE[0].as_str(),
    "', '",
    UserEventKind::ABOUT_A_MESSAGE[1].as_str(),
    "', '",
    UserEventKind::ABOUT_A_MESSAGE[2].as_str(),
    "') LEFT JOIN partners p ON p.id = m.partner_id "
);

/// A logged event as a stream sends it: the event, and the message it is about.
pub type Logged = (UserEvent, Option<Message>);

fn logged_from_row(r: &AnyRow) -> Result<Logged, sqlx::Error> {
    let event = UserEvent {
        seq: r.try_get("event_seq")?,
        kind: decode_name(r, "event_kind")?,
        subject_id: r.try_get("event_subject")?,
        created_at: r.try_get("event_at")?,
    };
    let message = match r.try_get::<Option<i64>, _>("id")? {
        Some(_) => Some(from_row(r)?),
        None => None,
    };
    Ok((event, message))
}

/// The user's events after `after` (oldest first, at most `limit`), each with the message it is about: one
/// read for what an event stream sends, instead of one for the events and one per message.
pub async fn events_since(db: &Db, phone: &str, after: i64, limit: i64) -> Result<Vec<Logged>, sqlx::Error> {
    const SQL: &str = const_format::concatcp!(LOGGED, "WHERE e.phone = $1 AND e.seq > $2 ORDER BY e.seq LIMIT $3");
    let rows = sqlx::query(SQL).bind(phone).bind(after).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(logged_from_row).collect()
}

/// What SQLite's tail read of the log ([`events_after_row`]).
#[derive(Debug, Default)]
pub struct Tail {
    /// The newest log row read (where the next read starts).
    pub newest: i64,
    /// The read was a whole batch: there may be more to read at once.
    pub whole: bool,
    /// The events of the keys kept, by key, each key's in order, with the messages they are about.
    pub by_key: Vec<(String, Vec<Logged>)>,
}

/// SQLite's tail of the log, whose one writer commits row ids in order: every key's events after log row
/// `after_id` (at most `limit`), those of the keys `kept` wants (the keys with a stream on this host) each
/// with the message it is about — so a read hands every stream what it sends. The log rows come from
/// [`Fresh`] as far as this process's group commits appended them without a gap; from the log when the first
/// row is one they did not append; and with `read_log` (the tail's poll, which finds what other processes
/// wrote) also from the log after the last of them: rows another process appended after all of this one's
/// leave no gap among them to read from.
/// A `message.created` takes its message from [`Fresh`] when this process has just put it into the hub (as
/// it was then); the other messages are read in one statement, and only for the keys kept.
pub async fn events_after_row(
    db: &Db,
    after_id: i64,
    limit: i64,
    read_log: bool,
    kept: impl Fn(&str) -> bool,
) -> Result<Tail, sqlx::Error> {
    // What this process's group commits appended is in memory, up to the first row they did not append; the
    // log is read from there when that is nothing, and at the poll (rows another process appended after all
    // of this one's are no gap among them).
    let fresh = db.fresh();
    let mut rows = fresh.and_then(|f| f.take_rows(after_id, limit as usize)).unwrap_or_default();
    if rows.is_empty() || (read_log && (rows.len() as i64) < limit) {
        let from = rows.last().map_or(after_id, |(id, _, _)| *id);
        let read = after_row(db, from, limit - rows.len() as i64).await?;
        if let (Some(fresh), Some((newest, _, _))) = (fresh, read.last()) {
            fresh.forget_rows(*newest);
        }
        rows.extend(read);
    }
    let newest = rows.last().map_or(after_id, |(id, _, _)| *id);
    let whole = rows.len() as i64 == limit;
    let is_created = |e: &UserEvent| e.kind == UserEventKind::MessageCreated;
    // Every fresh message the log tells of is taken, for a stream here or not: each is told of once.
    let created: Vec<i64> = rows.iter().filter(|(_, _, e)| is_created(e)).map(|(_, _, e)| e.subject_id).collect();
    let fresh = db.fresh().map(|f| f.take(&created)).unwrap_or_default();
    let mut by_key: Vec<(String, Vec<UserEvent>)> = Vec::new();
    let mut place: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (_, key, event) in rows {
        let at = match place.get(&key) {
            Some(at) => *at,
            None if kept(&key) => {
                place.insert(key.clone(), by_key.len());
                by_key.push((key, Vec::new()));
                by_key.len() - 1
            }
            None => continue,
        };
        by_key[at].1.push(event);
    }
    // An event's fresh message: only its own user's (ids are never reused).
    let fresh_for = |key: &str, e: &UserEvent| fresh.get(&e.subject_id).filter(|m| is_created(e) && m.phone == key);
    let unread: Vec<i64> = by_key
        .iter()
        .flat_map(|(key, events)| events.iter().map(move |e| (key, e)))
        .filter(|(key, e)| e.kind.is_about_a_message() && fresh_for(key, e).is_none())
        .map(|(_, e)| e.subject_id)
        .collect();
    let read = find_many(db, &unread).await?;
    let by_key = by_key
        .into_iter()
        .map(|(key, events)| {
            let logged = events
                .into_iter()
                .map(|e| {
                    let message = match fresh_for(&key, &e) {
                        Some(m) => Some(m.clone()),
                        None if e.kind.is_about_a_message() => read.get(&e.subject_id).cloned(),
                        None => None,
                    };
                    (e, message)
                })
                .collect();
            (key, logged)
        })
        .collect();
    Ok(Tail { newest, whole, by_key })
}

/// What this process has just written, kept for SQLite's tail of the log ([`events_after_row`]), which
/// would otherwise read it back to hand it to the streams: the hub messages it put into the hub (each with
/// its `message.created` in the log), and the log rows its group commits appended
/// (`store::writer`, once committed). Each is taken once; only the newest [`FRESH_KEPT`] of each are kept
/// (one the tail read past before it was kept is forgotten in time, and what is not kept is read from the
/// database).
#[derive(Debug, Default)]
pub struct Fresh {
    kept: std::sync::Mutex<(std::collections::HashMap<i64, Message>, std::collections::VecDeque<i64>)>,
    /// Log rows by id: their keys and events.
    events: std::sync::Mutex<std::collections::BTreeMap<i64, (String, UserEvent)>>,
}

/// The most messages, and log rows, [`Fresh`] keeps: seconds of sends at the rates one SQLite host takes,
/// while its tail reads within milliseconds.
const FRESH_KEPT: usize = 4096;

impl Fresh {
    /// Keeps `message`, just committed into the hub with its `message.created`.
    pub fn keep(&self, message: Message) {
        let mut kept = self.kept.lock().expect("fresh messages poisoned");
        let (messages, order) = &mut *kept;
        order.push_back(message.id);
        messages.insert(message.id, message);
        while order.len() > FRESH_KEPT {
            if let Some(id) = order.pop_front() {
                messages.remove(&id);
            }
        }
    }

    /// Takes those of `ids` that are kept.
    pub fn take(&self, ids: &[i64]) -> std::collections::HashMap<i64, Message> {
        if ids.is_empty() {
            return Default::default();
        }
        let mut kept = self.kept.lock().expect("fresh messages poisoned");
        ids.iter().filter_map(|id| kept.0.remove(id).map(|m| (*id, m))).collect()
    }

    /// Keeps log rows a transaction of this process's appended, once it has committed.
    pub fn keep_rows(&self, rows: Vec<super::user_events::LogRow>) {
        if rows.is_empty() {
            return;
        }
        let mut kept = self.events.lock().expect("fresh log rows poisoned");
        kept.extend(rows.into_iter().map(|(id, key, event)| (id, (key, event))));
        while kept.len() > FRESH_KEPT {
            kept.pop_first();
        }
    }

    /// The kept log rows that follow `after_id` without a gap (at most `limit`), taken; `None` when the row
    /// after `after_id` is not kept (another process's, a write's outside a group commit, or one forgotten:
    /// the caller reads the log). A row id is never reused (the log's ids are `AUTOINCREMENT`, and a
    /// rolled-back transaction's ids are taken again by the next): rows kept without a gap are every row
    /// of the log there. Rows up to `after_id` are let go.
    pub fn take_rows(&self, after_id: i64, limit: usize) -> Option<Vec<super::user_events::LogRow>> {
        let mut kept = self.events.lock().expect("fresh log rows poisoned");
        let_go(&mut kept, after_id);
        let mut rows = Vec::new();
        while rows.len() < limit {
            let next = after_id + 1 + rows.len() as i64;
            match kept.remove(&next) {
                Some((key, event)) => rows.push((next, key, event)),
                None => break,
            }
        }
        (!rows.is_empty()).then_some(rows)
    }

    /// Lets go of the kept log rows up to `newest` (the log was read up to there).
    pub fn forget_rows(&self, newest: i64) {
        let_go(&mut self.events.lock().expect("fresh log rows poisoned"), newest);
    }
}

/// Drops the kept log rows up to `upto`.
fn let_go<V>(kept: &mut std::collections::BTreeMap<i64, V>, upto: i64) {
    *kept = kept.split_off(&(upto + 1));
}

#[cfg(test)]
mod tail_tests {
    use super::{FRESH_KEPT, Fresh, events_after_row};
    use crate::names::UserEventKind;
    use crate::store::Db;
    use crate::store::messages::{db_with_messages, find_any};
    use crate::store::user_events::{NewUserEvent, append_in, newest_id};
    use crate::store::writer::GroupCommit;

    /// SQLite's tail hands the keys with a stream their events in order, each with its message: a fresh one
    /// (just put into the hub by this process) from memory, as it was written, taken once; the others read
    /// from the database; the events of keys with no stream are skipped, their fresh messages taken all the
    /// same.
    #[tokio::test]
    async fn the_tail_hands_watched_keys_their_events_with_fresh_messages_from_memory() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let start = newest_id(&db).await.unwrap();
        let told = |phone: &str, kind, subject_id| NewUserEvent { phone: phone.into(), kind, subject_id };
        let mut tx = db.begin().await.unwrap();
        let events = [
            told("+1", UserEventKind::MessageCreated, 1),
            told("+2", UserEventKind::MessageCreated, 3),
            told("+1", UserEventKind::MessageCreated, 2),
            told("+1", UserEventKind::MessageUpdated, 1),
            told("+1", UserEventKind::AccountUpdated, 0),
        ];
        append_in(&mut tx, &events, 0).await.unwrap();
        tx.commit().await.unwrap();
        // Messages 1 and 3 were just written by this process: message 1 as the writer had it (its body told
        // apart from the row's, to see where the stream's copy comes from).
        let fresh = db.fresh().expect("SQLite keeps fresh messages");
        let mut one = find_any(&db, 1).await.unwrap().unwrap();
        one.body = Some("one, as written".into());
        fresh.keep(one);
        fresh.keep(find_any(&db, 3).await.unwrap().unwrap());

        let tail = events_after_row(&db, start, 100, false, |key| key == "+1").await.unwrap();
        assert_eq!((tail.newest, tail.whole), (start + 5, false));
        let keys: Vec<&str> = tail.by_key.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["+1"], "only the watched key");
        let handed: Vec<(i64, UserEventKind, Option<String>)> =
            tail.by_key[0].1.iter().map(|(e, m)| (e.seq, e.kind, m.as_ref().and_then(|m| m.body.clone()))).collect();
        assert_eq!(
            handed,
            [
                (1, UserEventKind::MessageCreated, Some("one, as written".into())),
                (2, UserEventKind::MessageCreated, Some("two".into())),
                (3, UserEventKind::MessageUpdated, Some("one".into())),
                (4, UserEventKind::AccountUpdated, None),
            ],
            "the fresh message from memory, the others from the database, in order"
        );
        assert!(fresh.take(&[1, 3]).is_empty(), "each fresh message is taken once, watched or not");

        // Read again, in batches of two: the messages come from the database; each batch says it was whole.
        let tail = events_after_row(&db, start, 2, false, |_| true).await.unwrap();
        assert_eq!((tail.newest, tail.whole), (start + 2, true));
        let bodies: Vec<(String, Option<String>)> = tail
            .by_key
            .iter()
            .flat_map(|(k, events)| {
                events.iter().map(move |(_, m)| (k.clone(), m.as_ref().and_then(|m| m.body.clone())))
            })
            .collect();
        assert_eq!(bodies, [("+1".into(), Some("one".into())), ("+2".into(), Some("three".into()))]);
        db.close().await;
    }

    /// A group commit whose batch appends `NewUserEvent`s (and fails on an event about subject 0).
    fn event_writer(db: &Db) -> GroupCommit<NewUserEvent, ()> {
        GroupCommit::spawn(db.clone(), 16, |tx, e| {
            Box::pin(async move {
                append_in(tx, std::slice::from_ref(e), 7).await?;
                if e.subject_id == 0 {
                    sqlx::query("SELECT * FROM no_such_table").execute(&mut **tx).await?;
                }
                Ok(())
            })
        })
    }

    /// The log rows a group commit appended are kept once committed, and the tail hands them from memory
    /// (the rows in the log were changed behind its back, and it hands them as they were written) up to the
    /// first row it did not keep (a write outside a group commit): from there it reads the log, and lets go
    /// of what it kept up to where it read. At its poll, it also reads the log after what it kept: a row
    /// written outside a group commit after all of those it kept.
    #[tokio::test]
    async fn the_tail_takes_the_rows_a_group_commit_appended_from_memory() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let writer = event_writer(&db);
        let told = |phone: &str, kind, subject_id| NewUserEvent { phone: phone.into(), kind, subject_id };
        let created_at = |tail: &super::Tail| -> Vec<(String, i64, i64)> {
            let each = |(k, events): &(String, Vec<super::Logged>)| -> Vec<(String, i64, i64)> {
                events.iter().map(|(e, _)| (k.clone(), e.seq, e.created_at)).collect()
            };
            tail.by_key.iter().flat_map(each).collect()
        };
        let tamper = || sqlx::query("UPDATE user_events SET created_at = 1").execute(db.writer());
        let outside = |event: NewUserEvent| async {
            let mut tx = db.begin().await.unwrap();
            append_in(&mut tx, &[event], 7).await.unwrap();
            tx.commit().await.unwrap();
        };

        let start = newest_id(&db).await.unwrap();
        writer.write(told("+1", UserEventKind::MessageCreated, 1)).await.unwrap();
        writer.write(told("+2", UserEventKind::MessageCreated, 3)).await.unwrap();
        outside(told("+1", UserEventKind::AccountUpdated, 0)).await;
        writer.write(told("+1", UserEventKind::MessageCreated, 2)).await.unwrap();
        tamper().await.unwrap();
        let tail = events_after_row(&db, start, 100, false, |_| true).await.unwrap();
        assert_eq!((tail.newest, tail.whole), (start + 2, false));
        assert_eq!(created_at(&tail), [("+1".into(), 1, 7), ("+2".into(), 1, 7)], "as written, from memory");
        let tail = events_after_row(&db, tail.newest, 100, false, |_| true).await.unwrap();
        assert_eq!(tail.newest, start + 4);
        assert_eq!(created_at(&tail), [("+1".into(), 2, 1), ("+1".into(), 3, 1)], "from the log");
        assert_eq!(db.fresh().unwrap().take_rows(start, 100), None, "nothing is kept past a read of the log");

        writer.write(told("+2", UserEventKind::MessageCreated, 3)).await.unwrap();
        tamper().await.unwrap();
        let tail = events_after_row(&db, start + 4, 100, false, |_| true).await.unwrap();
        assert_eq!(created_at(&tail), [("+2".into(), 2, 7)], "from memory");
        // Rows after all of those kept leave no gap to see: the poll reads the log after them.
        writer.write(told("+1", UserEventKind::MessageCreated, 1)).await.unwrap();
        outside(told("+2", UserEventKind::AccountUpdated, 0)).await;
        tamper().await.unwrap();
        let tail = events_after_row(&db, start + 5, 100, false, |_| true).await.unwrap();
        assert_eq!(created_at(&tail), [("+1".into(), 4, 7)], "between polls, what was kept");
        let tail = events_after_row(&db, tail.newest, 100, true, |_| true).await.unwrap();
        assert_eq!(created_at(&tail), [("+2".into(), 3, 1)], "at the poll, the log after it");
        writer.write(told("+1", UserEventKind::MessageCreated, 2)).await.unwrap();
        outside(told("+2", UserEventKind::AccountUpdated, 0)).await;
        tamper().await.unwrap();
        let tail = events_after_row(&db, start + 7, 100, true, |_| true).await.unwrap();
        assert_eq!(created_at(&tail), [("+1".into(), 5, 7), ("+2".into(), 4, 1)], "at the poll, both in one read");
        assert_eq!(tail.newest, start + 9);
        assert_eq!(db.fresh().unwrap().take_rows(start + 7, 100), None, "nothing is kept past a read of the log");
        db.close().await;
    }

    /// What a transaction that failed appended is not kept: the tail never hands an event that is not in the
    /// log.
    #[tokio::test]
    async fn a_failed_group_commit_keeps_no_rows() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let writer = event_writer(&db);
        let start = newest_id(&db).await.unwrap();
        let failing = NewUserEvent { phone: "+1".into(), kind: UserEventKind::AccountUpdated, subject_id: 0 };
        assert!(writer.write(failing).await.is_err());
        assert_eq!(db.fresh().unwrap().take_rows(start, 100), None);
        let tail = events_after_row(&db, start, 100, false, |_| true).await.unwrap();
        assert!(tail.by_key.is_empty());
        db.close().await;
    }

    /// A fresh message is the one an event is about only for the event's own key: one kept under another
    /// user's phone is not handed to this one's stream (it is read from the database instead).
    #[tokio::test]
    async fn a_fresh_message_is_handed_only_to_its_own_user() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let start = newest_id(&db).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        let created = NewUserEvent { phone: "+1".into(), kind: UserEventKind::MessageCreated, subject_id: 1 };
        append_in(&mut tx, &[created], 0).await.unwrap();
        tx.commit().await.unwrap();
        let mut stray = find_any(&db, 1).await.unwrap().unwrap();
        (stray.phone, stray.body) = ("+2".into(), Some("someone else's".into()));
        db.fresh().unwrap().keep(stray);
        let tail = events_after_row(&db, start, 100, false, |_| true).await.unwrap();
        let body = tail.by_key[0].1[0].1.as_ref().and_then(|m| m.body.clone());
        assert_eq!(body.as_deref(), Some("one"));
        db.close().await;
    }

    /// Should a message's arrival be told twice, each event carries the fresh message.
    #[tokio::test]
    async fn a_fresh_message_told_twice_goes_with_both_events() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let start = newest_id(&db).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        let created = NewUserEvent { phone: "+1".into(), kind: UserEventKind::MessageCreated, subject_id: 1 };
        append_in(&mut tx, &[created.clone(), created], 0).await.unwrap();
        tx.commit().await.unwrap();
        db.fresh().unwrap().keep(find_any(&db, 1).await.unwrap().unwrap());
        let tail = events_after_row(&db, start, 100, false, |_| true).await.unwrap();
        let bodies: Vec<Option<String>> =
            tail.by_key[0].1.iter().map(|(_, m)| m.as_ref().and_then(|m| m.body.clone())).collect();
        assert_eq!(bodies, [Some("one".to_string()), Some("one".to_string())]);
        db.close().await;
    }

    /// Only the newest fresh messages, and log rows, are kept.
    #[tokio::test]
    async fn fresh_messages_are_kept_up_to_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let one = find_any(&db, 1).await.unwrap().unwrap();
        let fresh = Fresh::default();
        for id in 1..=(FRESH_KEPT as i64 + 1) {
            fresh.keep(super::Message { id, ..one.clone() });
        }
        let ids: Vec<i64> = fresh.take(&[1, 2, FRESH_KEPT as i64 + 1]).into_keys().collect();
        assert_eq!(ids.len(), 2, "the oldest is forgotten: {ids:?}");
        assert!(!ids.contains(&1));
        let event = crate::store::user_events::UserEvent {
            seq: 1,
            kind: UserEventKind::AccountUpdated,
            subject_id: 0,
            created_at: 0,
        };
        fresh.keep_rows((1..=(FRESH_KEPT as i64 + 1)).map(|id| (id, "+1".to_string(), event.clone())).collect());
        assert_eq!(fresh.take_rows(0, usize::MAX), None, "the oldest log row is forgotten");
        assert_eq!(fresh.take_rows(1, usize::MAX).map(|rows| rows.len()), Some(FRESH_KEPT));
        db.close().await;
    }
}
