//! Messages moving from state to state: each move guarded by the states it may come from, written with its
//! history row, its `message.status` event, the user's log event and what it adds to the partner's figures
//! (`store::rollups::messages`), in the caller's transaction; and moves
//! foreseen from messages as read (a device got them), written in a batch.

use sqlx::{Any, Row, Transaction};

use super::create::StatusEvent;
use super::rows::{Message, SELECT, from_row};
use crate::clock::Millis;
use crate::names::{Channel, Direction, MessageState, UserEventKind};
use crate::store::outbox::{self, Target};

/// Moves a message to `state` when it is in one of `from`, recording the change in the state history and
/// the `message.status` event (built by `event`) in the same transaction. Returns the updated message, or
/// `None` when the message was not in one of `from` (nothing changes then).
pub async fn transition_in(
    tx: &mut Transaction<'_, Any>,
    message_id: i64,
    from: &[MessageState],
    state: MessageState,
    channel: Option<Channel>,
    now: Millis,
    event: StatusEvent,
) -> Result<Option<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.id = $1");
    let Some(row) = sqlx::query(sql).bind(message_id).fetch_optional(&mut **tx).await? else { return Ok(None) };
    let current = from_row(&row)?;
    Ok(transition_read_in(tx, &[&current], from, state, channel, now, event).await?.pop())
}

/// [`transition_in`] for messages the caller has read already (the delivery worker), all moving from one
/// of `from` to `state` on `channel`: one update for all of them, one insert of their history rows and one
/// of their events. Nothing is read inside the transaction, since only a message's state, seq and channel
/// ever change, and those come back from the update. Answers the messages that moved.
pub async fn transition_read_in(
    tx: &mut Transaction<'_, Any>,
    messages: &[&Message],
    from: &[MessageState],
    state: MessageState,
    channel: Option<Channel>,
    now: Millis,
    event: StatusEvent,
) -> Result<Vec<Message>, sqlx::Error> {
    let updated = transition_unrecorded_in(tx, messages, from, state, channel, now).await?;
    record_transitions_in(tx, &updated, now, event).await?;
    Ok(updated)
}

/// [`transition_read_in`]'s update alone: the caller writes what goes with the moves ([`Recorded::of`] the
/// messages answered), say with those of other moves in the same transaction (the delivery worker's
/// finished jobs: one write for every kind of move).
pub async fn transition_unrecorded_in(
    tx: &mut Transaction<'_, Any>,
    messages: &[&Message],
    from: &[MessageState],
    state: MessageState,
    channel: Option<Channel>,
    now: Millis,
) -> Result<Vec<Message>, sqlx::Error> {
    let backend = crate::store::backend_of(tx);
    if messages.is_empty() || from.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "UPDATE messages SET state = ?, channel = COALESCE(?, channel), seq = seq + 1, updated_at = ? \
         WHERE id IN (SELECT id FROM ({}) AS given) AND state IN ({}) RETURNING id, seq, channel",
        crate::store::json_table(backend, &[("id", "BIGINT")]),
        in_list(from)
    );
    let mut ids = crate::store::JsonRows::default();
    for m in messages {
        ids.push(&[m.id]);
    }
    let update = sqlx::query(sqlx::AssertSqlSafe(crate::store::placeholders(backend, &sql)))
        .bind(state.as_str())
        .bind(channel.map(Channel::as_str))
        .bind(now)
        .bind(ids.value());
    let mut moved = std::collections::HashMap::new();
    for row in update.fetch_all(&mut **tx).await? {
        moved.insert(
            row.try_get::<i64, _>("id")?,
            (row.try_get::<i64, _>("seq")?, crate::store::decode_optional_name(&row, "channel")?),
        );
    }
    Ok(messages
        .iter()
        .filter_map(|m| moved.remove(&m.id).map(|(seq, channel)| Message { state, seq, channel, ..(*m).clone() }))
        .collect())
}

/// What canceling a scheduled message did.
#[derive(Debug)]
pub enum Canceled {
    /// It was scheduled and has not gone: `canceled` now, its job gone.
    Canceled(Message),
    /// It is not scheduled (any more): sent, being sent, or canceled already; nothing changed.
    TooLate(Message),
    /// The partner has no such message.
    NotFound,
}

/// Cancels the partner's scheduled message `id` while it has not gone: its job is taken back unless a worker
/// holds it (then it is being sent), and the message moves from `scheduled` to `canceled` with its history
/// row and `message.status` event, in one transaction.
pub async fn cancel_scheduled(
    db: &crate::store::Db,
    partner_id: i64,
    id: i64,
    now: Millis,
    event: StatusEvent,
) -> Result<Canceled, sqlx::Error> {
    let mut tx = db.begin().await?;
    let sql = const_format::concatcp!(SELECT, "WHERE m.partner_id = $1 AND m.id = $2");
    let Some(row) = sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(&mut *tx).await? else {
        return Ok(Canceled::NotFound);
    };
    let message = from_row(&row)?;
    if message.state != MessageState::Scheduled {
        return Ok(Canceled::TooLate(message));
    }
    let taken =
        sqlx::query("DELETE FROM delivery_jobs WHERE message_id = $1 AND (lease_until IS NULL OR lease_until <= $2)")
            .bind(id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    if taken.rows_affected() == 0 {
        return Ok(Canceled::TooLate(message));
    }
    let moved =
        transition_read_in(&mut tx, &[&message], &[MessageState::Scheduled], MessageState::Canceled, None, now, event)
            .await?
            .pop();
    match moved {
        Some(canceled) => {
            tx.commit().await?;
            Ok(Canceled::Canceled(canceled))
        }
        None => Ok(Canceled::TooLate(message)),
    }
}

/// The states of `from`, for `state IN (…)`: names of a closed set, never input, so written into the
/// statement rather than bound.
fn in_list(from: &[MessageState]) -> String {
    from.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ")
}

/// The history rows and `message.status` events of changes just applied, one statement each.
async fn record_transitions_in(
    tx: &mut Transaction<'_, Any>,
    updated: &[Message],
    now: Millis,
    event: StatusEvent,
) -> Result<(), sqlx::Error> {
    Recorded::of(updated, now, event).write_in(tx, now).await
}

/// What changes of messages write besides the messages themselves, built from each message as it is after
/// its change: its history row, its `message.status` event, and what its user's app (in a conversation,
/// also the partner's agents) is told. Built before the transaction that writes it when need be
/// ([`Foreseen`]), and joined with others'.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    history: crate::store::JsonRows,
    events: outbox::EventRows,
    told: Vec<crate::store::user_events::NewUserEvent>,
    /// What the changes add to the partner's figures.
    counted: crate::store::rollups::messages::Deltas,
}

impl Recorded {
    pub fn of(updated: &[Message], now: Millis, event: StatusEvent) -> Recorded {
        let mut recorded = Recorded::default();
        for m in updated {
            recorded.push(m, now, event);
        }
        recorded
    }

    /// Adds the records of `m`'s change, made at `now`.
    pub fn push(&mut self, m: &Message, now: Millis, event: StatusEvent) {
        self.history.push(&(m.id, m.seq, m.state.as_str(), m.channel.map(Channel::as_str), now));
        let payload = event(m, now);
        self.events.push(&outbox::NewEvent {
            target: m.developer_id.map(Target::Developer).unwrap_or(Target::Partner(m.partner_id)),
            event: "message.status",
            payload: &payload,
            ordering_key: format!("message:{}", m.id),
            at: now,
        });
        self.told.extend(told_of(m));
        self.counted.moved(m.counted(), now);
    }

    /// Adds what other changes (not moves of state: a try billed, a channel changed) add to the figures.
    pub fn count(&mut self, counted: &crate::store::rollups::messages::Deltas) {
        self.counted.append(counted);
    }

    /// Adds `other`'s records after these.
    pub fn append(&mut self, other: &Recorded) {
        self.history.append(&other.history);
        self.events.append(&other.events);
        self.told.extend_from_slice(&other.told);
        self.counted.append(&other.counted);
    }

    /// Writes them, one statement each; the users' events are logged at `now`.
    pub async fn write_in(self, tx: &mut Transaction<'_, Any>, now: Millis) -> Result<(), sqlx::Error> {
        self.counted.write_in(tx).await?;
        if self.history.is_empty() {
            return Ok(());
        }
        let backend = crate::store::backend_of(tx);
        let rows = crate::store::json_table(
            backend,
            &[("message_id", "BIGINT"), ("seq", "BIGINT"), ("state", "TEXT"), ("channel", "TEXT"), ("at", "BIGINT")],
        );
        let sql = format!(
            "INSERT INTO message_states (message_id, seq, state, channel, at) \
             SELECT message_id, seq, state, channel, at FROM ({rows}) AS history"
        );
        sqlx::query(sqlx::AssertSqlSafe(crate::store::placeholders(backend, &sql)))
            .bind(self.history.value())
            .execute(&mut **tx)
            .await?;
        self.events.insert_in(tx).await?;
        crate::store::user_events::append_in(tx, &self.told, now).await
    }
}

/// What the users' apps hear of a message's change. Of its hub messages: one arriving in the hub, and each
/// later change. Of the messages of its conversations as they move (delivered, read: the receipts either
/// side sees). Not of a hub message becoming delivered: a device of the user's own made it so, and the app
/// shows no "delivered" on what it receives (one event less per message for every open stream). A
/// conversation's messages are told each move: the thread shows its receipts.
fn told_of(m: &Message) -> impl Iterator<Item = crate::store::user_events::NewUserEvent> {
    let told = |phone: String, kind| crate::store::user_events::NewUserEvent { phone, kind, subject_id: m.id };
    let hub_delivered =
        m.conversation_id.is_none() && m.direction == Direction::Out && m.state == MessageState::Delivered;
    let (user, agents) = match m.conversation_id {
        _ if hub_delivered => (None, None),
        // The thread's receipts, for its user and for the partner's agents.
        Some(_) => (
            Some(told(m.phone.clone(), UserEventKind::ConversationMessage)),
            Some(told(crate::store::user_events::partner_key(m.partner_id), UserEventKind::ConversationMessage)),
        ),
        None if m.arrived_in_hub() => (Some(told(m.phone.clone(), UserEventKind::MessageCreated)), None),
        None if m.channel == Some(Channel::Inapp) => (Some(told(m.phone.clone(), UserEventKind::MessageUpdated)), None),
        None => (None, None),
    };
    user.into_iter().chain(agents)
}

/// Moves an outgoing message forward to `target` one step at a time along queued → sent → delivered →
/// read, so each state it passes records its own change and `message.status` event, in order: a hub
/// message the app fetches before the delivery worker marked it `sent` still tells its partner `sent`,
/// then `delivered`. A message already at or past `target` (or failed) is left as it is. Answers the
/// message after the last step taken.
pub async fn advance_in(
    tx: &mut Transaction<'_, Any>,
    message_id: i64,
    target: MessageState,
    channel: Option<Channel>,
    now: Millis,
    event: StatusEvent,
) -> Result<Option<Message>, sqlx::Error> {
    Ok(advance_many_in(tx, &[message_id], target, channel, now, event).await?.pop().flatten())
}

/// [`advance_in`] for many messages at once (the app's fetch and read): one read of them all, then
/// [`advance_read_many_in`]. Answers, for each id in order, the message after the last step it took, or
/// `None` when it did not move (already there or past it, failed, gone, or an id given twice).
pub async fn advance_many_in(
    tx: &mut Transaction<'_, Any>,
    ids: &[i64],
    target: MessageState,
    channel: Option<Channel>,
    now: Millis,
    event: StatusEvent,
) -> Result<Vec<Option<Message>>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let backend = crate::store::backend_of(tx);
    let sql = format!("{SELECT}WHERE m.id IN ({})", vec!["?"; ids.len()].join(", "));
    let mut read = crate::store::query_rows(backend, &sql, ids.len());
    for id in ids {
        read = read.bind(*id);
    }
    let current: Vec<Message> = read.fetch_all(&mut **tx).await?.iter().map(from_row).collect::<Result<_, _>>()?;
    let current: Vec<&Message> = current.iter().collect();
    let mut moved: std::collections::HashMap<i64, Message> =
        advance_read_many_in(tx, &current, target, channel, now, event)
            .await?
            .into_iter()
            .flatten()
            .map(|m| (m.id, m))
            .collect();
    Ok(ids.iter().map(|id| moved.remove(id)).collect())
}

/// [`advance_many_in`] for messages the caller has read already (the group commit of messages handed to
/// devices down their streams, which read each with its event): no read, only per step of the hub path one
/// update of those that may be at that step, with its history rows and events. A message is offered to the
/// steps from the state it was read in on; it may have moved on since (the delivery worker, another
/// device), and the update's own `state IN (…)` decides, on the row as it is when this transaction gets it.
/// The updates lock the rows in the same order as every other update of several messages, before the
/// user's event counter, so two such transactions never deadlock. Answers, for each message in order, the
/// message after the last step it took, or `None` when it did not move (already there or past it, failed,
/// gone, or given twice).
pub async fn advance_read_many_in(
    tx: &mut Transaction<'_, Any>,
    messages: &[&Message],
    target: MessageState,
    channel: Option<Channel>,
    now: Millis,
    event: StatusEvent,
) -> Result<Vec<Option<Message>>, sqlx::Error> {
    const HUB_PATH: [MessageState; 4] = MessageState::HUB_PATH;
    let Some(end) = target.hub_step() else { return Ok(vec![None; messages.len()]) };
    let position = |m: &Message| m.state.hub_step();
    // Each message once, as read: failed (off the path) or already there, nothing to offer. Those that move
    // are kept as they are after each step (each message is cloned once, as it moves first).
    let mut seen = std::collections::HashSet::new();
    let offered: Vec<&Message> =
        messages.iter().copied().filter(|m| seen.insert(m.id) && position(m).is_some_and(|p| p < end)).collect();
    let mut moved: std::collections::HashMap<i64, Message> = std::collections::HashMap::new();
    for step in 1..=end {
        // Every message not known to be past this step is offered to it.
        let at_step: Vec<&Message> = offered
            .iter()
            .map(|m| moved.get(&m.id).unwrap_or(m))
            .filter(|m| position(m).is_some_and(|p| p < step))
            .collect();
        if at_step.is_empty() {
            continue;
        }
        let stepped =
            transition_read_in(tx, &at_step, &HUB_PATH[step - 1..step], HUB_PATH[step], channel, now, event).await?;
        for m in stepped {
            moved.insert(m.id, m);
        }
    }
    let mut answered = std::collections::HashSet::new();
    Ok(messages.iter().map(|m| if answered.insert(m.id) { moved.remove(&m.id) } else { None }).collect())
}

/// A message's moves along the hub path to a target, worked out from the message as it was read, before the
/// transaction that makes them ([`advance_foreseen_in`]): what they write is built beforehand, so the
/// transaction holds the writer (SQLite's one) only for its statements. The streams' `delivered` marks: a
/// batch of 1,024 held the writer ~12.5 µs a mark when it built them, ~8.7 when they came built
/// (docs/performance.md).
#[derive(Debug)]
pub struct Foreseen {
    /// The message after its last move.
    after: Message,
    /// Its state, sequence number and channel as read.
    read: (MessageState, i64, Option<Channel>),
    /// When the moves are made (their history, events and `updated_at`).
    at: Millis,
    /// Its row of the batch's update: its id, state and `seq` as read (the guard), and as after the moves.
    guard: crate::store::JsonRows,
    recorded: Recorded,
}

impl Foreseen {
    /// The message as it was read.
    fn read(&self) -> Message {
        let (state, seq, channel) = self.read;
        Message { state, seq, channel, ..self.after.clone() }
    }
}

/// The moves of `message` (as read) one step at a time along the hub path to `target` over `channel`
/// (`None`: the channel it has) at `at`, each with the event `event` makes of it, as
/// [`advance_read_many_in`] would make them; `None` when it has none to make (failed, or there already).
pub fn foresee(
    message: Message,
    target: MessageState,
    channel: Option<Channel>,
    at: Millis,
    event: StatusEvent,
) -> Option<Foreseen> {
    let end = target.hub_step()?;
    let from = message.state.hub_step().filter(|from| *from < end)?;
    let read = (message.state, message.seq, message.channel);
    let mut recorded = Recorded::default();
    let mut after = message;
    for state in &MessageState::HUB_PATH[from + 1..=end] {
        after = Message { state: *state, seq: after.seq + 1, channel: channel.or(after.channel), ..after };
        recorded.push(&after, at, event);
    }
    let mut guard = crate::store::JsonRows::default();
    let to = (after.state.as_str(), after.seq, after.channel.map(Channel::as_str));
    guard.push(&(after.id, read.0.as_str(), read.1, to.0, to.1, to.2, at));
    Some(Foreseen { after, read, at, guard, recorded })
}

/// Makes foreseen moves (all of them [`foresee`]n with `target`, `channel` and `event`): each message still
/// as it was read moves, and the records built for it are written as they are, one statement each for the
/// batch. If any one is not as read (a device or the delivery worker moved it meanwhile), none is taken as
/// foreseen: the batch walks the hub path as [`advance_read_many_in`] does, from the messages as read. A
/// message given twice moves once. Answers, for each item, whether its message moved here.
pub async fn advance_foreseen_in(
    tx: &mut Transaction<'_, Any>,
    items: &[Foreseen],
    target: MessageState,
    channel: Option<Channel>,
    event: StatusEvent,
) -> Result<Vec<bool>, sqlx::Error> {
    use sqlx::Acquire;
    let mut seen = std::collections::HashSet::new();
    let first: Vec<bool> = items.iter().map(|f| seen.insert(f.after.id)).collect();
    let (mut moves, mut recorded) = (crate::store::JsonRows::default(), Recorded::default());
    for f in items.iter().zip(&first).filter(|(_, first)| **first).map(|(f, _)| f) {
        moves.append(&f.guard);
        recorded.append(&f.recorded);
    }
    let now = items.iter().map(|f| f.at).max().unwrap_or_default();
    let backend = crate::store::backend_of(tx);
    let rows = crate::store::json_table(
        backend,
        &[
            ("id", "BIGINT"),
            ("state", "TEXT"),
            ("seq", "BIGINT"),
            ("state_to", "TEXT"),
            ("seq_to", "BIGINT"),
            ("channel_to", "TEXT"),
            ("at", "BIGINT"),
        ],
    );
    let sql = format!(
        "UPDATE messages SET state = g.state_to, seq = g.seq_to, channel = g.channel_to, updated_at = g.at \
         FROM ({rows}) AS g WHERE messages.id = g.id AND messages.state = g.state AND messages.seq = g.seq"
    );
    // Within a savepoint: a batch that does not move as foreseen is undone before it is walked anew.
    let mut foreseen = tx.begin().await?;
    let moved = sqlx::query(sqlx::AssertSqlSafe(crate::store::placeholders(backend, &sql)))
        .bind(moves.value())
        .execute(&mut *foreseen)
        .await?;
    if moved.rows_affected() == moves.len() as u64 {
        foreseen.commit().await?;
        recorded.write_in(tx, now).await?;
        return Ok(first);
    }
    foreseen.rollback().await?;
    let read: Vec<Message> = items.iter().map(Foreseen::read).collect();
    let read: Vec<&Message> = read.iter().collect();
    let moved = advance_read_many_in(tx, &read, target, channel, now, event).await?;
    Ok(moved.iter().map(Option::is_some).collect())
}

#[cfg(test)]
mod tests {
    use crate::store::Db;
    use crate::store::messages::db_with_messages;

    /// The history rows and `message.status` events of messages, oldest first: `(message, seq, state)` and the
    /// events' payloads.
    async fn recorded(db: &Db) -> (Vec<(i64, i64, String)>, Vec<serde_json::Value>) {
        let history = sqlx::query_as("SELECT message_id, seq, state FROM message_states ORDER BY id")
            .fetch_all(db.reader())
            .await
            .unwrap();
        let payloads: Vec<String> =
            sqlx::query_scalar("SELECT payload FROM outbox_events WHERE event = 'message.status' ORDER BY id")
                .fetch_all(db.reader())
                .await
                .unwrap();
        (history, payloads.iter().map(|p| serde_json::from_str(p).unwrap()).collect())
    }

    /// Moves foreseen from the messages as read write what the same moves made in the transaction write: the
    /// message, its history row and its `message.status` event; a message handed over twice (two devices)
    /// moves once.
    #[tokio::test]
    async fn foreseen_moves_write_what_moves_made_in_the_transaction_write() {
        use super::{advance_foreseen_in, advance_read_many_in, foresee};
        use crate::names::{Channel, MessageState};
        use crate::store::messages::find_many;
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let read = find_many(&db, &[1, 2]).await.unwrap();
        let foreseen = |id: i64| {
            let m = read[&id].clone();
            foresee(m, MessageState::Delivered, Some(Channel::Inapp), 7, crate::events::message_status).unwrap()
        };
        // Message 1 foreseen (twice: two devices got it), message 2 moved in the transaction.
        let mut tx = db.begin().await.unwrap();
        let (inapp, status) = (Some(Channel::Inapp), crate::events::message_status);
        let twice = [foreseen(1), foreseen(1)];
        let moved = advance_foreseen_in(&mut tx, &twice, MessageState::Delivered, inapp, status).await.unwrap();
        assert_eq!(moved, [true, false]);
        let moved = advance_read_many_in(&mut tx, &[&read[&2]], MessageState::Delivered, inapp, 7, status).await;
        assert!(moved.unwrap()[0].is_some());
        tx.commit().await.unwrap();
        let now = find_many(&db, &[1, 2]).await.unwrap();
        for id in [1, 2] {
            assert_eq!((now[&id].state, now[&id].seq), (MessageState::Delivered, 1), "message {id}");
        }
        let (history, events) = recorded(&db).await;
        assert_eq!(history, [(1, 1, "delivered".to_string()), (2, 1, "delivered".to_string())]);
        assert_eq!(events.len(), 2, "one event each: {events:?}");
        let without_ids = |e: &serde_json::Value| {
            let mut e = e.clone();
            for key in ["message_id", "message_ref"] {
                e.as_object_mut().unwrap().remove(key);
            }
            e
        };
        assert_eq!(without_ids(&events[0]), without_ids(&events[1]));
        assert_eq!((events[0]["message_id"].as_i64(), events[0]["seq"].as_i64()), (Some(1), Some(1)));
        db.close().await;
    }

    /// A batch of foreseen moves of which one message is no longer as read (a device fetched it meanwhile)
    /// walks the hub path from the messages as read: the others move as foreseen, that one is not moved or
    /// recorded again.
    #[tokio::test]
    async fn foreseen_moves_of_a_message_moved_meanwhile_are_walked_anew() {
        use super::{advance_foreseen_in, advance_in, foresee};
        use crate::names::{Channel, MessageState};
        use crate::store::messages::find_many;
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_messages(dir.path()).await;
        let read = find_many(&db, &[1, 2, 3]).await.unwrap();
        let inapp = Some(Channel::Inapp);
        let status = crate::events::message_status;
        let foreseen: Vec<_> = [1, 2, 3]
            .iter()
            .map(|id| foresee(read[id].clone(), MessageState::Delivered, inapp, 7, status).unwrap())
            .collect();
        // Message 2 is fetched, then read, before the batch is written.
        let mut tx = db.begin().await.unwrap();
        advance_in(&mut tx, 2, MessageState::Read, inapp, 5, status).await.unwrap().unwrap();
        tx.commit().await.unwrap();
        let mut tx = db.begin().await.unwrap();
        let moved = advance_foreseen_in(&mut tx, &foreseen, MessageState::Delivered, inapp, status).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(moved, [true, false, true]);
        let now = find_many(&db, &[1, 2, 3]).await.unwrap();
        let states: Vec<_> = [1, 2, 3].iter().map(|id| (now[id].state, now[id].seq)).collect();
        assert_eq!(states, [(MessageState::Delivered, 1), (MessageState::Read, 2), (MessageState::Delivered, 1)]);
        let (history, events) = recorded(&db).await;
        let history: Vec<_> = history.iter().map(|(id, seq, state)| (*id, *seq, state.as_str())).collect();
        assert_eq!(history, [(2, 1, "delivered"), (2, 2, "read"), (1, 1, "delivered"), (3, 1, "delivered")]);
        let told: Vec<_> =
            events.iter().map(|e| (e["message_id"].as_i64().unwrap(), e["seq"].as_i64().unwrap())).collect();
        assert_eq!(told, [(2, 1), (2, 2), (1, 1), (3, 1)]);
        db.close().await;
    }
}
