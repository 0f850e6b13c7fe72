//! The delivery queue: one job per accepted message, claimed by workers with a lease (so a crashed
//! process's work is picked up again) and row locks that several processes skip past on PostgreSQL.

use sqlx::{Any, Transaction};

use super::messages::{self, Created, Message, NewMessage, Placed};
use super::writer::{GroupCommit, Writes};
use super::{Backend, Db};
use crate::clock::Millis;
use crate::names::{AttemptKind, AttemptState, Channel, MessageState};

/// Queues a message again after a failure receipt, to continue its chain: `sms` or `alert_sms`.
pub async fn enqueue_resume_in(
    tx: &mut Transaction<'_, Any>,
    message_id: i64,
    resume: &str,
    at: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO delivery_jobs (message_id, next_attempt_at, resume) VALUES ($1, $2, $3) \
         ON CONFLICT (message_id) DO NOTHING",
    )
    .bind(message_id)
    .bind(at)
    .bind(resume)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A claimed job: the message, what a receipt asked to continue (`None`: a first delivery), and where it
/// waited, if it did: the channel its chain goes on from, since when that channel's provider is down, and how
/// many times it waited.
#[derive(Debug, Clone, Default)]
pub struct Job {
    pub message_id: i64,
    pub resume: Option<String>,
    pub chain_from: Option<Channel>,
    pub outage_since: Option<Millis>,
    pub waits: i64,
}

/// Claims up to `limit` due jobs for `lease_ms`. A job whose lease ran out (its worker died) is due again.
pub async fn claim_due(db: &Db, now: Millis, lease_ms: i64, limit: i64) -> Result<Vec<Job>, sqlx::Error> {
    use sqlx::Row;
    let sql = match db.backend() {
        Backend::Postgres => {
            "UPDATE delivery_jobs SET lease_until = $1 WHERE message_id IN (SELECT message_id FROM delivery_jobs \
             WHERE next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until <= $2) \
             ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) \
             RETURNING message_id, resume, chain_from, outage_since, waits"
        }
        Backend::Sqlite => {
            "UPDATE delivery_jobs SET lease_until = $1 WHERE message_id IN (SELECT message_id FROM delivery_jobs \
             WHERE next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until <= $2) \
             ORDER BY next_attempt_at LIMIT $3) RETURNING message_id, resume, chain_from, outage_since, waits"
        }
    };
    let rows = sqlx::query(sql).bind(now + lease_ms).bind(now).bind(limit).fetch_all(db.writer()).await?;
    rows.iter()
        .map(|r| {
            Ok(Job {
                message_id: r.try_get("message_id")?,
                resume: r.try_get("resume")?,
                chain_from: super::decode_optional_name(r, "chain_from")?,
                outage_since: r.try_get("outage_since")?,
                waits: r.try_get("waits")?,
            })
        })
        .collect()
}

/// One channel try of a message, to record.
#[derive(Debug)]
pub struct NewAttempt {
    pub kind: AttemptKind,
    pub channel: Channel,
    pub state: AttemptState,
    pub error: Option<String>,
    /// The provider's id of what it accepted (for its delivery receipts).
    pub provider_ref: Option<String>,
    /// When a `waiting` attempt is tried again.
    pub retry_at: Option<Millis>,
}

/// A job put back to wait: due again `at`, to go on from `chain_from`, its provider down since
/// `outage_since` (if that is why).
#[derive(Debug, Clone, Copy)]
pub struct PutBack {
    pub at: Millis,
    pub chain_from: Channel,
    pub outage_since: Option<Millis>,
}

/// What becomes of the message when its job finishes.
#[derive(Debug)]
pub enum Change {
    /// Its state moves from one of `from` to `to` (with its history row and `message.status` event), on
    /// `channel` (else the one it had).
    State { from: &'static [MessageState], to: MessageState, channel: Option<Channel> },
    /// It went out on another channel, its state unchanged (an SMS after WhatsApp failed).
    Channel(Channel),
}

/// What a claimed job did, to write when it finishes: its channel tries, the message's change, and the
/// job's end. Written by the delivery worker's group commit, many jobs per transaction.
#[derive(Debug)]
pub struct Finished {
    /// The message as the worker read it before delivering.
    pub message: Message,
    pub attempts: Vec<NewAttempt>,
    pub change: Option<Change>,
    pub at: Millis,
    /// Builds the `message.status` event of a change (the caller's: the store knows no event shapes).
    pub event: messages::StatusEvent,
    /// A job to queue for the message once this one ends: what it continues (`after_hub`) and when.
    pub follow_up: Option<(&'static str, Millis)>,
    /// Whether the message has a delivery job to end (a claimed job's); a message going into the hub as it
    /// is written never had one, and asks nothing of the jobs' table.
    pub ends_job: bool,
    /// The job waits instead (its message unchanged): put back until then.
    pub put_back: Option<PutBack>,
    /// The job waited before: its `waiting` attempt gives way to what happened now.
    pub clears_waiting: bool,
    /// Builds the `message.attempt` event of each WhatsApp and SMS try, when the partner asked for them (the
    /// caller's: the store knows no event shapes).
    pub attempt_event: Option<AttemptEvent>,
    /// Its tries are the fallback after the hub (the hub did not reach a device in time).
    pub fallback: bool,
}

/// Builds the `message.attempt` event of one try of a message, recorded at a time: its JSON text.
pub type AttemptEvent = fn(&Message, &NewAttempt, Millis) -> String;

/// Writes finished jobs in the caller's transaction (see [`Finished`]): one statement for all their
/// attempts, one state change per kind of change (say, every message now `sent` in the hub) with one
/// insert of the history rows and one of the events, and one statement ending the jobs (of those that
/// have one, [`Finished::ends_job`]). Answers the messages whose state moved, as they are now.
pub async fn finish_in(tx: &mut Transaction<'_, Any>, done: &[Finished]) -> Result<Vec<Message>, sqlx::Error> {
    let backend = super::backend_of(tx);
    if done.is_empty() {
        return Ok(Vec::new());
    }
    let cleared: Vec<i64> = done.iter().filter(|d| d.clears_waiting).map(|d| d.message.id).collect();
    if !cleared.is_empty() {
        let sql = format!(
            "DELETE FROM delivery_attempts WHERE state = 'waiting' AND message_id IN ({})",
            super::rows(cleared.len(), "?")
        );
        let mut delete = super::query_rows(backend, &sql, cleared.len());
        for id in cleared {
            delete = delete.bind(id);
        }
        delete.execute(&mut **tx).await?;
    }
    let attempts: Vec<(i64, Millis, &NewAttempt)> =
        done.iter().flat_map(|d| d.attempts.iter().map(move |a| (d.message.id, d.at, a))).collect();
    if !attempts.is_empty() {
        let sql = format!(
            "INSERT INTO delivery_attempts (message_id, kind, channel, state, error, provider_ref, at, retry_at) \
             VALUES {}",
            super::rows(attempts.len(), "(?, ?, ?, ?, ?, ?, ?, ?)")
        );
        let mut insert = super::query_rows(backend, &sql, attempts.len());
        for (id, at, a) in attempts {
            insert = insert
                .bind(id)
                .bind(a.kind.as_str())
                .bind(a.channel.as_str())
                .bind(a.state.as_str())
                .bind(&a.error)
                .bind(&a.provider_ref)
                .bind(at)
                .bind(a.retry_at);
        }
        insert.execute(&mut **tx).await?;
    }
    // The partners' `message.attempt` events of their WhatsApp and SMS tries, in the order they were made.
    let mut told = super::outbox::EventRows::default();
    for d in done {
        let Some(event) = d.attempt_event else { continue };
        for a in d.attempts.iter().filter(|a| a.channel != Channel::Inapp) {
            let payload = event(&d.message, a, d.at);
            told.push(&super::outbox::NewEvent {
                target: match d.message.developer_id {
                    Some(id) => super::outbox::Target::Developer(id),
                    None => super::outbox::Target::Partner(d.message.partner_id),
                },
                event: "message.attempt",
                payload: &payload,
                ordering_key: format!("message:{}", d.message.id),
                at: d.at,
            });
        }
    }
    told.insert_in(tx).await?;
    // What the tries and channel changes add to the partners' figures (the state changes count their own).
    let mut counted = super::rollups::messages::Deltas::default();
    for d in done {
        for a in d.attempts.iter().filter(|a| a.state == AttemptState::Sent && a.channel != Channel::Inapp) {
            counted.paid(d.message.counted(), a.channel, d.at, d.fallback && a.kind == AttemptKind::Delivery);
        }
        if let Some(Change::Channel(channel)) = d.change {
            counted.rerouted(d.message.counted(), channel, d.at);
        }
    }
    // Why a message fails without a try (its person refused it), written before its change's event.
    for d in done {
        let failing = matches!(d.change, Some(Change::State { to: MessageState::Failed, .. }));
        if let (true, Some(error)) = (failing, &d.message.error) {
            sqlx::query("UPDATE messages SET error = $1 WHERE id = $2")
                .bind(error)
                .bind(d.message.id)
                .execute(&mut **tx)
                .await?;
        }
    }
    // The state changes, grouped by what they are.
    type Kind = (&'static [MessageState], MessageState, Option<Channel>);
    let mut groups: Vec<(Kind, Vec<&Message>, Millis, messages::StatusEvent)> = Vec::new();
    for d in done {
        match &d.change {
            Some(Change::State { from, to, channel }) => {
                let kind = (*from, *to, *channel);
                match groups.iter_mut().find(|(k, _, _, _)| *k == kind) {
                    Some((_, messages, at, _)) => {
                        messages.push(&d.message);
                        *at = (*at).max(d.at);
                    }
                    None => groups.push((kind, vec![&d.message], d.at, d.event)),
                }
            }
            Some(Change::Channel(channel)) => {
                messages::set_channel_in(tx, d.message.id, *channel, d.at).await?;
            }
            None => {}
        }
    }
    // The moves, an update for each kind; what goes with them (history, events, the users' events, the
    // figures) written once for all.
    let (mut moved, mut recorded, mut last) = (Vec::new(), messages::Recorded::default(), 0);
    recorded.count(&counted);
    for ((from, to, channel), group, at, event) in groups {
        let stepped = messages::transition_unrecorded_in(tx, &group, from, to, channel, at).await?;
        recorded.append(&messages::Recorded::of(&stepped, at, event));
        moved.extend(stepped);
        last = last.max(at);
    }
    recorded.write_in(tx, last).await?;
    let ended: Vec<i64> = done.iter().filter(|d| d.ends_job).map(|d| d.message.id).collect();
    if !ended.is_empty() {
        let sql = format!("DELETE FROM delivery_jobs WHERE message_id IN ({})", super::rows(ended.len(), "?"));
        let mut delete = super::query_rows(backend, &sql, ended.len());
        for id in ended {
            delete = delete.bind(id);
        }
        delete.execute(&mut **tx).await?;
    }
    for d in done {
        if let Some(back) = d.put_back {
            sqlx::query(
                "UPDATE delivery_jobs SET next_attempt_at = $1, lease_until = NULL, chain_from = $2, \
                 outage_since = $3, waits = waits + 1 WHERE message_id = $4",
            )
            .bind(back.at)
            .bind(back.chain_from.as_str())
            .bind(back.outage_since)
            .bind(d.message.id)
            .execute(&mut **tx)
            .await?;
        }
    }
    let follow_ups: Vec<(i64, &str, Millis)> =
        done.iter().filter_map(|d| d.follow_up.map(|(resume, at)| (d.message.id, resume, at))).collect();
    if !follow_ups.is_empty() {
        let sql = format!(
            "INSERT INTO delivery_jobs (message_id, next_attempt_at, resume) VALUES {} ON CONFLICT (message_id) DO NOTHING",
            super::rows(follow_ups.len(), "(?, ?, ?)")
        );
        let mut insert = super::query_rows(backend, &sql, follow_ups.len());
        for (id, resume, at) in follow_ups {
            insert = insert.bind(id).bind(at).bind(resume);
        }
        insert.execute(&mut **tx).await?;
    }
    Ok(moved)
}

/// Most finished jobs written in one transaction.
const MAX_FINISH_BATCH: usize = 256;

/// The delivery worker's group commit of finished jobs (see `store::writer`).
pub fn finisher(db: Db) -> GroupCommit<Finished, ()> {
    GroupCommit::spawn_with(
        db,
        MAX_FINISH_BATCH,
        Writes {
            batch: Some(|tx, done| Box::pin(async move { finish_in(tx, done).await.map(|_| vec![(); done.len()]) })),
            one: |tx, done| Box::pin(async move { finish_in(tx, std::slice::from_ref(done)).await.map(drop) }),
        },
    )
}

/// Most creations written in one transaction.
const MAX_MESSAGE_BATCH: usize = 256;

/// Creates messages in group commits (`store::writer`): each with its first state row and, unless it goes
/// into the hub as it is written ([`messages::HubRoute`]), its delivery job (`messages::create_many_in`);
/// those that go into the hub are moved there in the same transaction, with no job.
#[derive(Clone, Debug)]
pub struct MessageWriter(GroupCommit<(NewMessage, Millis), Written>, Db);

/// What the writer did with a message: created it (or found the original of a retry), and whether it went
/// into the hub for a recipient with a device subscribed to Web Push — then the caller pushes to them.
#[derive(Debug)]
pub struct Written {
    pub created: Created,
    pub to_push: bool,
}

impl MessageWriter {
    /// Starts the writer task; it ends when every handle is dropped.
    pub fn spawn(db: Db) -> MessageWriter {
        let commits = GroupCommit::spawn_with(
            db.clone(),
            MAX_MESSAGE_BATCH,
            Writes {
                batch: Some(|tx, items| {
                    Box::pin(async move {
                        let created = messages::create_many_in(tx, items).await?;
                        into_hub_in(tx, created).await
                    })
                }),
                one: |tx, (message, now)| {
                    Box::pin(async move {
                        let created = messages::create_routed_in(tx, message, *now).await?;
                        Ok(into_hub_in(tx, vec![created]).await?.remove(0))
                    })
                },
            },
        );
        MessageWriter(commits, db)
    }

    /// Creates a message as part of the next batch. One that went into the hub is kept for SQLite's tail of
    /// the event log ([`user_events::Fresh`](super::user_events::Fresh)): its user's streams here send it without reading it back.
    pub async fn create(&self, message: NewMessage, now: Millis) -> Result<Written, sqlx::Error> {
        let written = self.0.write((message, now)).await?;
        if let (Created::New(m), Some(fresh)) = (&written.created, self.1.fresh())
            && m.arrived_in_hub()
        {
            fresh.keep(m.clone());
        }
        Ok(written)
    }
}

/// Moves the new messages that go into the hub ([`Placed::Hub`]) there, as the delivery worker finishes a
/// hub delivery: the `inapp` attempt, `queued` → `sent` with its event and the user's `message.created`, and
/// the fallback's job; and fails those their person refused ([`Placed::Refused`]: `failed`, with why, its
/// event, and its job ended). Answers what was created, those messages as they are now.
async fn into_hub_in(
    tx: &mut Transaction<'_, Any>,
    created: Vec<(Created, Option<Placed>)>,
) -> Result<Vec<Written>, sqlx::Error> {
    let finished: Vec<Finished> = created
        .iter()
        .filter_map(|(created, placed)| {
            let Created::New(message) = created else { return None };
            let finished = |message: Message, event| Finished {
                attempts: Vec::new(),
                change: None,
                at: message.created_at,
                event,
                follow_up: None,
                ends_job: false,
                put_back: None,
                clears_waiting: false,
                attempt_event: None,
                fallback: false,
                message,
            };
            match placed {
                Some(Placed::Hub(hub)) => Some(Finished {
                    attempts: vec![NewAttempt {
                        kind: AttemptKind::Delivery,
                        channel: Channel::Inapp,
                        state: AttemptState::Sent,
                        error: None,
                        provider_ref: None,
                        retry_at: None,
                    }],
                    change: Some(Change::State {
                        from: &[MessageState::Queued],
                        to: MessageState::Sent,
                        channel: Some(Channel::Inapp),
                    }),
                    follow_up: hub.follow_up,
                    ..finished(message.clone(), hub.event)
                }),
                Some(Placed::Refused { why, event }) => Some(Finished {
                    change: Some(Change::State {
                        from: &[MessageState::Queued],
                        to: MessageState::Failed,
                        channel: None,
                    }),
                    ends_job: true,
                    ..finished(Message { error: Some(why.to_string()), ..message.clone() }, *event)
                }),
                None => None,
            }
        })
        .collect();
    let mut moved: std::collections::HashMap<i64, Message> =
        finish_in(tx, &finished).await?.into_iter().map(|m| (m.id, m)).collect();
    Ok(created
        .into_iter()
        .map(|(created, placed)| {
            let to_push = matches!(placed, Some(Placed::Hub(hub)) if hub.subscribed);
            let created = match created {
                Created::New(m) => Created::New(moved.remove(&m.id).unwrap_or(m)),
                other => other,
            };
            Written { created, to_push }
        })
        .collect())
}

/// The attempt a provider receipt is about: found by the provider's id on that channel.
#[derive(Debug, Clone)]
pub struct ReceiptTarget {
    pub attempt_id: i64,
    pub message_id: i64,
    pub kind: AttemptKind,
}

/// The attempt with the provider's id `provider_ref` on `channel` (the latest, should a provider reuse one);
/// with `partner`, only an attempt of that partner's messages (what a partner's own signed webhook may speak
/// of).
pub async fn find_by_provider_ref(
    db: &Db,
    channel: &str,
    provider_ref: &str,
    partner: Option<i64>,
) -> Result<Option<ReceiptTarget>, sqlx::Error> {
    use sqlx::Row;
    const ANY: &str = "SELECT a.id, a.message_id, a.kind FROM delivery_attempts a \
         WHERE a.channel = $1 AND a.provider_ref = $2 ORDER BY a.id DESC LIMIT 1";
    const PARTNERS: &str = "SELECT a.id, a.message_id, a.kind FROM delivery_attempts a \
         JOIN messages m ON m.id = a.message_id \
         WHERE a.channel = $1 AND a.provider_ref = $2 AND m.partner_id = $3 ORDER BY a.id DESC LIMIT 1";
    let query = match partner {
        None => sqlx::query(ANY).bind(channel).bind(provider_ref),
        Some(partner_id) => sqlx::query(PARTNERS).bind(channel).bind(provider_ref).bind(partner_id),
    };
    let row = query.fetch_optional(db.reader()).await?;
    row.map(|r| {
        Ok(ReceiptTarget {
            attempt_id: r.try_get("id")?,
            message_id: r.try_get("message_id")?,
            kind: super::decode_name(&r, "kind")?,
        })
    })
    .transpose()
}

/// Marks an attempt failed after the fact (a provider receipt said it was not delivered). False when it
/// already was: a repeated receipt changes nothing.
pub async fn fail_attempt_in(tx: &mut Transaction<'_, Any>, attempt_id: i64, error: &str) -> Result<bool, sqlx::Error> {
    let done =
        sqlx::query("UPDATE delivery_attempts SET state = 'failed', error = $1 WHERE id = $2 AND state <> 'failed'")
            .bind(error)
            .bind(attempt_id)
            .execute(&mut **tx)
            .await?;
    Ok(done.rows_affected() == 1)
}

/// Delivery jobs due by `now` (for metrics): how many, and the earliest `next_attempt_at` among them. Jobs
/// scheduled later (a fallback after the hub waiting out its window) are not a backlog.
pub async fn backlog(db: &Db, now: Millis) -> Result<(i64, Option<Millis>), sqlx::Error> {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, MIN(next_attempt_at) AS oldest FROM delivery_jobs WHERE next_attempt_at <= $1",
    )
    .bind(now)
    .fetch_one(db.reader())
    .await?;
    Ok((row.try_get("n")?, row.try_get("oldest")?))
}

/// Jobs due by `now` and not yet finished (tests and operators).
pub async fn pending_count(db: &Db, now: Millis) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COUNT(*) FROM delivery_jobs WHERE next_attempt_at <= $1")
        .bind(now)
        .fetch_one(db.reader())
        .await
}
