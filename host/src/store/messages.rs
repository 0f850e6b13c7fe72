//! Hub messages: creation with idempotency, reads, lists, state changes with their history, delivery
//! attempts, and base64 media stored once.

use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::outbox::{self, Target};
use super::{Db, decode_name, like_pattern};
use crate::clock::Millis;
use crate::names::{AttemptKind, AttemptState, Channel, Direction, MessageState, UserEventKind};

#[derive(Debug, Clone)]
pub struct Message {
    pub id: i64,
    pub reference: String,
    pub partner_id: i64,
    pub partner_code: String,
    pub phone: String,
    pub direction: Direction,
    pub content_type: String,
    pub body: Option<String>,
    pub rendered_body: Option<String>,
    pub template_code: Option<String>,
    pub lang: Option<String>,
    pub priority: String,
    /// Type-specific content: `media`, `link`, `html`, `subject`, `preview`, `encryption`, `e2e_envelope`.
    pub content: Value,
    pub state: MessageState,
    /// The channel that carried it (`None` until it is sent).
    pub channel: Option<Channel>,
    pub seq: i64,
    /// The support conversation it belongs to (`None` for hub messages).
    pub conversation_id: Option<i64>,
    /// The developer who sent it (developer sends; their events go to the developer).
    pub developer_id: Option<i64>,
    pub created_at: Millis,
}

impl Message {
    /// Whether the message, as it is now, has just arrived in its user's hub (`sent` in the app): the change
    /// that tells the user's app `message.created` (for a hub message, outside a conversation).
    pub fn arrived_in_hub(&self) -> bool {
        self.channel == Some(Channel::Inapp) && self.state == MessageState::Sent
    }
}

const COLUMN_LIST: &str = "m.id, m.ref, m.partner_id, p.code AS partner_code, m.phone, m.direction, \
    m.content_type, m.body, m.rendered_body, m.template_code, m.lang, m.priority, m.content, m.state, \
    m.channel, m.seq, m.conversation_id, m.developer_id, m.created_at, m.request_hash";
const COLUMNS: &str = const_format::concatcp!("SELECT ", COLUMN_LIST);
const FROM: &str = " FROM messages m JOIN partners p ON p.id = m.partner_id ";
const SELECT: &str = const_format::concatcp!(COLUMNS, FROM);

fn from_row(row: &AnyRow) -> Result<Message, sqlx::Error> {
    let content: String = row.try_get("content")?;
    Ok(Message {
        id: row.try_get("id")?,
        reference: row.try_get("ref")?,
        partner_id: row.try_get("partner_id")?,
        partner_code: row.try_get("partner_code")?,
        phone: row.try_get("phone")?,
        direction: decode_name(row, "direction")?,
        content_type: row.try_get("content_type")?,
        body: row.try_get("body")?,
        rendered_body: row.try_get("rendered_body")?,
        template_code: row.try_get("template_code")?,
        lang: row.try_get("lang")?,
        priority: row.try_get("priority")?,
        content: serde_json::from_str(&content).unwrap_or(Value::Null),
        state: decode_name(row, "state")?,
        channel: super::decode_optional_name(row, "channel")?,
        seq: row.try_get("seq")?,
        conversation_id: row.try_get("conversation_id")?,
        developer_id: row.try_get("developer_id")?,
        created_at: row.try_get("created_at")?,
    })
}

/// Decoded base64 media to store once and reference from the message.
#[derive(Debug)]
pub struct NewMedia {
    pub id: String,
    pub filename: Option<String>,
    pub mimetype: Option<String>,
    pub sha256: String,
    pub data: Vec<u8>,
    /// The end user who uploaded it (their phone); `None` for a partner's.
    pub uploaded_by: Option<String>,
}

/// A validated message, ready to store.
#[derive(Debug)]
pub struct NewMessage {
    pub reference: String,
    pub partner_id: i64,
    /// `out` (partner to user, delivered through the channels) or `in` (user to partner).
    pub direction: Direction,
    pub conversation_id: Option<i64>,
    pub developer_id: Option<i64>,
    pub phone: String,
    pub content_type: String,
    pub body: Option<String>,
    pub rendered_body: Option<String>,
    pub template_code: Option<String>,
    pub lang: Option<String>,
    pub priority: String,
    pub content: Value,
    pub media: Option<NewMedia>,
    pub idempotency_key: Option<String>,
    /// Digest of the canonical request, to tell a retry from a different payload under the same key.
    pub request_hash: Option<String>,
    /// Seconds without a device getting it in the hub before it goes on to WhatsApp then SMS: `None` = the
    /// partner's setting, `Some(-1)` = the hub only.
    pub fallback_after_s: Option<i64>,
    /// The channel a user's message came by (`None`: the app; an outgoing message gets its channel when it
    /// is sent).
    pub channel: Option<Channel>,
    /// Put in the hub as it is written when its recipient is reached there (see [`HubRoute`]), instead of
    /// queued for the delivery worker; `None`: the worker routes it.
    pub hub: Option<HubRoute>,
}

/// Builds the `message.status` event of a message as it is after a change, made at a time: its JSON text
/// (the caller's: the store knows no event shapes).
pub type StatusEvent = fn(&Message, Millis) -> String;

/// How a new message goes into the hub in the transaction that writes it, when what the insert reads of its
/// recipient (a claimed account, a device) is, by its sender's rule (`reached`), the hub alone: written
/// `queued`, then moved to `sent` on `inapp` with its attempt, its `message.status` event and the user's
/// `message.created` (`deliveries::MessageWriter`), exactly as the delivery worker would have; its job is
/// only the fallback after the hub, when it has one. The rules are the sender's (`messages::routing`): the
/// store knows none.
#[derive(Debug, Clone, Copy)]
pub struct HubRoute {
    /// Whether a recipient (claimed, with a device) is reached in the hub alone.
    pub reached: fn(bool, bool) -> bool,
    /// The job that follows a message put in the hub — from its priority, its content, its window (the
    /// message's or its partner's; `None`: `default_after_s`) and the time —, if any.
    pub follow_up: fn(&str, &Value, Option<i64>, u64, Millis) -> Option<(&'static str, Millis)>,
    pub default_after_s: u64,
    /// Builds the `message.status` event.
    pub event: StatusEvent,
}

/// A message put in the hub as it was written: its job to follow, its event builder, and whether its
/// recipient has a device subscribed to Web Push (read in the insert, so a send to a user without one reads
/// nothing more for the push).
#[derive(Debug, Clone, Copy)]
pub struct InHub {
    pub follow_up: Option<(&'static str, Millis)>,
    pub event: StatusEvent,
    pub subscribed: bool,
}

/// What an insert answers besides the new row's id: the sender's code.
const RETURNED: &str = "(SELECT p.code FROM partners p WHERE p.id = messages.partner_id) AS partner_code";

/// [`RETURNED`], and what a [`HubRoute`] decides by: the recipient's claimed accounts and devices, the
/// partner's window; and whether the recipient has a push subscription ([`InHub::subscribed`]). Asked only
/// when a message has a route, so other inserts read nothing more.
const RETURNED_REACH: &str = "(SELECT p.code FROM partners p WHERE p.id = messages.partner_id) AS partner_code, \
     (SELECT p.hub_fallback_after_s FROM partners p WHERE p.id = messages.partner_id) AS partner_after_s, \
     (SELECT COUNT(*) FROM accounts a WHERE a.phone = messages.phone AND a.state = 'claimed') AS claimed, \
     (SELECT COUNT(*) FROM devices d WHERE d.phone = messages.phone) AS devices, \
     (SELECT COUNT(*) FROM push_subscriptions s WHERE s.phone = messages.phone) AS subscriptions";

/// Whether the message just inserted (its returned `row`) goes into the hub now, by its [`HubRoute`].
fn hub_decision(m: &NewMessage, row: &AnyRow, now: Millis) -> Result<Option<InHub>, sqlx::Error> {
    let Some(route) = m.hub else { return Ok(None) };
    let (claimed, devices): (i64, i64) = (row.try_get("claimed")?, row.try_get("devices")?);
    if !(route.reached)(claimed > 0, devices > 0) {
        return Ok(None);
    }
    let window = m.fallback_after_s.or(row.try_get::<Option<i64>, _>("partner_after_s")?);
    let follow_up = (route.follow_up)(&m.priority, &m.content, window, route.default_after_s, now);
    let subscribed = row.try_get::<i64, _>("subscriptions")? > 0;
    Ok(Some(InHub { follow_up, event: route.event, subscribed }))
}

/// What a create did.
#[derive(Debug)]
pub enum Created {
    New(Message),
    /// The idempotency key was seen within its window with the same payload: the original message.
    Replayed(Message),
    /// The idempotency key was seen within its window with a different payload.
    KeyReused,
}

/// How long an idempotency key deduplicates.
pub const IDEMPOTENCY_WINDOW_MS: i64 = 24 * 3600 * 1000;

/// The columns every new message is written with, and their placeholders (bound by [`bind_new`]).
const NEW_COLUMNS: &str = "ref, partner_id, phone, content_type, body, rendered_body, template_code, lang, priority, \
    content, state, seq, direction, conversation_id, developer_id, created_at, updated_at, fallback_after_s, channel";
const NEW_ROW: &str = "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?";

/// Binds the [`NEW_COLUMNS`] of `m`, created at `now`.
fn bind_new<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
    m: &'q NewMessage,
    now: Millis,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
    query
        .bind(&m.reference)
        .bind(m.partner_id)
        .bind(&m.phone)
        .bind(&m.content_type)
        .bind(&m.body)
        .bind(&m.rendered_body)
        .bind(&m.template_code)
        .bind(&m.lang)
        .bind(&m.priority)
        .bind(m.content.to_string())
        .bind(MessageState::initial(m.direction).as_str())
        .bind(m.direction.as_str())
        .bind(m.conversation_id)
        .bind(m.developer_id)
        .bind(now)
        .bind(now)
        .bind(m.fallback_after_s)
        .bind(m.channel.map(Channel::as_str))
}

/// Creates a `queued` message in the caller's transaction, or finds the original under the same
/// idempotency key. Safe under races: the unique `(partner_id, idempotency_key)` constraint decides which
/// request creates.
pub async fn create_in(tx: &mut Transaction<'_, Any>, m: &NewMessage, now: Millis) -> Result<Created, sqlx::Error> {
    Ok(create_routed_in(tx, m, now).await?.0)
}

/// [`create_in`], answering too whether the new message went into the hub ([`HubRoute`]): then the caller
/// moves it there in the same transaction (`deliveries::MessageWriter`).
pub async fn create_routed_in(
    tx: &mut Transaction<'_, Any>,
    m: &NewMessage,
    now: Millis,
) -> Result<(Created, Option<InHub>), sqlx::Error> {
    if let Some(key) = &m.idempotency_key {
        // A key older than the window is free again.
        sqlx::query(
            "UPDATE messages SET idempotency_key = NULL \
             WHERE partner_id = $1 AND idempotency_key = $2 AND created_at < $3",
        )
        .bind(m.partner_id)
        .bind(key)
        .bind(now - IDEMPOTENCY_WINDOW_MS)
        .execute(&mut **tx)
        .await?;
        // A retry is answered before inserting, so a sender-chosen ref of the original is not a conflict.
        let sql = const_format::concatcp!(SELECT, "WHERE m.partner_id = $1 AND m.idempotency_key = $2");
        if let Some(row) = sqlx::query(sql).bind(m.partner_id).bind(key).fetch_optional(&mut **tx).await? {
            return Ok((replay_or_reused(&row, m.request_hash.as_deref())?, None));
        }
    }
    // The new row is answered from what was written: its id and the sender's code come back with the
    // insert, so no read-back follows.
    let sql = format!(
        "INSERT INTO messages ({NEW_COLUMNS}, idempotency_key, request_hash, media_id) VALUES ({NEW_ROW}, ?, ?, ?) \
         ON CONFLICT (partner_id, idempotency_key) DO NOTHING RETURNING id, {}",
        if m.hub.is_some() { RETURNED_REACH } else { RETURNED }
    );
    let inserted = bind_new(super::query_rows(super::backend_of(tx), &sql, 1), m, now)
        .bind(&m.idempotency_key)
        .bind(&m.request_hash)
        .bind(m.media.as_ref().map(|media| media.id.as_str()))
        .fetch_optional(&mut **tx)
        .await?;

    let Some(row) = inserted else {
        let sql = const_format::concatcp!(SELECT, "WHERE m.partner_id = $1 AND m.idempotency_key = $2");
        let row = sqlx::query(sql).bind(m.partner_id).bind(&m.idempotency_key).fetch_one(&mut **tx).await?;
        return Ok((replay_or_reused(&row, m.request_hash.as_deref())?, None));
    };

    let message = stored(m, row.try_get("id")?, row.try_get("partner_code")?, now);
    let in_hub = hub_decision(m, &row, now)?;
    if let Some(media) = &m.media {
        insert_media_in(tx, m.partner_id, media, now).await?;
    }
    record_created_in(tx, &[(&message, in_hub.is_none())]).await?;
    Ok((Created::New(message), in_hub))
}

/// What goes with new messages: their first state rows and, for outgoing ones queued for the delivery
/// worker (`true` beside them), their delivery jobs.
async fn record_created_in(tx: &mut Transaction<'_, Any>, created: &[(&Message, bool)]) -> Result<(), sqlx::Error> {
    let backend = super::backend_of(tx);
    let sql = format!(
        "INSERT INTO message_states (message_id, seq, state, channel, at) VALUES {}",
        super::rows(created.len(), "(?, 0, ?, NULL, ?)")
    );
    let mut states = super::query_rows(backend, &sql, created.len());
    for (m, _) in created {
        states = states.bind(m.id).bind(m.state.as_str()).bind(m.created_at);
    }
    states.execute(&mut **tx).await?;
    let jobs: Vec<(i64, Millis)> = created
        .iter()
        .filter(|(m, queued)| *queued && m.direction == Direction::Out)
        .map(|(m, _)| (m.id, m.created_at))
        .collect();
    enqueue_in(tx, &jobs).await
}

/// The message `m` as stored under `id` (a new message, as written).
fn stored(m: &NewMessage, id: i64, partner_code: String, now: Millis) -> Message {
    Message {
        id,
        reference: m.reference.clone(),
        partner_id: m.partner_id,
        partner_code,
        phone: m.phone.clone(),
        direction: m.direction,
        content_type: m.content_type.clone(),
        body: m.body.clone(),
        rendered_body: m.rendered_body.clone(),
        template_code: m.template_code.clone(),
        lang: m.lang.clone(),
        priority: m.priority.clone(),
        content: m.content.clone(),
        state: MessageState::initial(m.direction),
        channel: m.channel,
        seq: 0,
        conversation_id: m.conversation_id,
        developer_id: m.developer_id,
        created_at: now,
    }
}

/// [`create_routed_in`] for many messages at once (the message writer's batch): those without an idempotency
/// key or media — nearly all — are written with three multi-row statements (the messages, their first
/// state rows, their delivery jobs) instead of three statements each; the others one by one. Answers in
/// the order of `items`. Any failure (a sender-chosen ref already taken) fails the whole call.
pub async fn create_many_in(
    tx: &mut Transaction<'_, Any>,
    items: &[(NewMessage, Millis)],
) -> Result<Vec<(Created, Option<InHub>)>, sqlx::Error> {
    let backend = super::backend_of(tx);
    let mut out: Vec<Option<(Created, Option<InHub>)>> = items.iter().map(|_| None).collect();
    let mut plain = Vec::new();
    for (i, (m, now)) in items.iter().enumerate() {
        if m.idempotency_key.is_none() && m.media.is_none() {
            plain.push(i);
        } else {
            out[i] = Some(create_routed_in(tx, m, *now).await?);
        }
    }
    if !plain.is_empty() {
        let sql = format!(
            "INSERT INTO messages ({NEW_COLUMNS}) VALUES {} RETURNING id, ref, {}",
            super::rows(plain.len(), &format!("({NEW_ROW})")),
            if plain.iter().any(|&i| items[i].0.hub.is_some()) { RETURNED_REACH } else { RETURNED }
        );
        let mut insert = super::query_rows(backend, &sql, plain.len());
        for &i in &plain {
            let (m, now) = &items[i];
            insert = bind_new(insert, m, *now);
        }
        // RETURNING's order is not defined: rows are matched back by their (unique) ref.
        let mut rows = std::collections::HashMap::with_capacity(plain.len());
        for row in insert.fetch_all(&mut **tx).await? {
            rows.insert(row.try_get::<String, _>("ref")?, row);
        }
        let mut written = Vec::with_capacity(plain.len());
        for &i in &plain {
            let (m, now) = &items[i];
            let row = rows.remove(&m.reference).ok_or(sqlx::Error::RowNotFound)?;
            let message = stored(m, row.try_get("id")?, row.try_get("partner_code")?, *now);
            written.push((i, message, hub_decision(m, &row, *now)?));
        }
        let created: Vec<(&Message, bool)> = written.iter().map(|(_, m, hub)| (m, hub.is_none())).collect();
        record_created_in(tx, &created).await?;
        for (i, m, hub) in written {
            out[i] = Some((Created::New(m), hub));
        }
    }
    Ok(out.into_iter().map(|c| c.expect("every item was written")).collect())
}

/// What a retry under `key` is answered with, when that key is taken: the original (same payload) or a
/// reused key (another payload). For a retry that lost a race to its twin on another host.
pub async fn find_replay(db: &Db, partner_id: i64, key: &str, hash: &str) -> Result<Option<Created>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.partner_id = $1 AND m.idempotency_key = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(key).fetch_optional(db.writer()).await?;
    row.map(|row| replay_or_reused(&row, Some(hash))).transpose()
}

/// The original of a retried request: the same payload is a replay, another payload a reused key.
fn replay_or_reused(row: &AnyRow, request_hash: Option<&str>) -> Result<Created, sqlx::Error> {
    let stored_hash: Option<String> = row.try_get("request_hash")?;
    Ok(if stored_hash.as_deref() == request_hash { Created::Replayed(from_row(row)?) } else { Created::KeyReused })
}

/// Records that a message went out on another channel (an SMS after WhatsApp failed), its state unchanged.
pub async fn set_channel_in(
    tx: &mut Transaction<'_, Any>,
    id: i64,
    channel: Channel,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE messages SET channel = $1, updated_at = $2 WHERE id = $3")
        .bind(channel.as_str())
        .bind(now)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// One of the partner's messages.
pub async fn find_message(db: &Db, partner_id: i64, id: i64) -> Result<Option<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.partner_id = $1 AND m.id = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// Filters of the partner's message list.
#[derive(Debug, Default)]
pub struct MessageFilter {
    pub phone: Option<String>,
    pub state: Option<MessageState>,
    pub q: Option<String>,
    pub before: Option<i64>,
    pub limit: i64,
}

/// A page of the partner's messages, newest first.
pub async fn list_messages(db: &Db, partner_id: i64, f: &MessageFilter) -> Result<Vec<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE m.partner_id = $1 AND ($2 IS NULL OR m.phone = $2) AND ($3 IS NULL OR m.state = $3) \
         AND ($4 IS NULL OR LOWER(COALESCE(m.body, '')) LIKE $4 ESCAPE '\\' \
              OR LOWER(COALESCE(m.rendered_body, '')) LIKE $4 ESCAPE '\\' OR m.phone LIKE $4 ESCAPE '\\') \
         AND ($5 IS NULL OR m.id < $5) ORDER BY m.id DESC LIMIT $6"
    );
    let rows = sqlx::query(sql)
        .bind(partner_id)
        .bind(&f.phone)
        .bind(f.state.map(MessageState::as_str))
        .bind(f.q.as_deref().map(like_pattern))
        .bind(f.before)
        .bind(f.limit)
        .fetch_all(db.reader())
        .await?;
    rows.iter().map(from_row).collect()
}

/// A page of a developer's messages (template sends through `/dev`), newest first.
pub async fn list_for_developer(
    db: &Db,
    developer_id: i64,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE m.developer_id = $1 AND ($2 IS NULL OR m.id < $2) ORDER BY m.id DESC LIMIT $3"
    );
    let rows = sqlx::query(sql).bind(developer_id).bind(before).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

/// One channel try of a message.
#[derive(Debug, Clone)]
pub struct DeliveryAttempt {
    pub kind: AttemptKind,
    pub channel: Channel,
    /// The provider's id of what it accepted (SMS and WhatsApp).
    pub provider_ref: Option<String>,
    pub state: AttemptState,
    pub error: Option<String>,
    pub at: Millis,
}

pub async fn list_attempts(db: &Db, message_id: i64) -> Result<Vec<DeliveryAttempt>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT kind, channel, state, error, provider_ref, at FROM delivery_attempts WHERE message_id = $1 ORDER BY id",
    )
    .bind(message_id)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(DeliveryAttempt {
                kind: decode_name(r, "kind")?,
                channel: decode_name(r, "channel")?,
                provider_ref: r.try_get("provider_ref")?,
                state: decode_name(r, "state")?,
                error: r.try_get("error")?,
                at: r.try_get("at")?,
            })
        })
        .collect()
}

/// One change of a message's state, from its history.
#[derive(Debug, Clone)]
pub struct StateChange {
    pub state: MessageState,
    pub channel: Option<Channel>,
    pub at: Millis,
}

/// Every state a message has been in, oldest first (from its creation).
pub async fn list_state_changes(db: &Db, message_id: i64) -> Result<Vec<StateChange>, sqlx::Error> {
    let rows = sqlx::query("SELECT state, channel, at FROM message_states WHERE message_id = $1 ORDER BY seq")
        .bind(message_id)
        .fetch_all(db.reader())
        .await?;
    rows.iter()
        .map(|r| {
            Ok(StateChange {
                state: decode_name(r, "state")?,
                channel: super::decode_optional_name(r, "channel")?,
                at: r.try_get("at")?,
            })
        })
        .collect()
}

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
    let backend = super::backend_of(tx);
    if messages.is_empty() || from.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "UPDATE messages SET state = ?, channel = COALESCE(?, channel), seq = seq + 1, updated_at = ? \
         WHERE id IN (SELECT id FROM ({}) AS given) AND state IN ({}) RETURNING id, seq, channel",
        super::json_table(backend, &[("id", "BIGINT")]),
        in_list(from)
    );
    let mut ids = super::JsonRows::default();
    for m in messages {
        ids.push(&[m.id]);
    }
    let update = sqlx::query(sqlx::AssertSqlSafe(super::placeholders(backend, &sql)))
        .bind(state.as_str())
        .bind(channel.map(Channel::as_str))
        .bind(now)
        .bind(ids.value());
    let mut moved = std::collections::HashMap::new();
    for row in update.fetch_all(&mut **tx).await? {
        moved.insert(
            row.try_get::<i64, _>("id")?,
            (row.try_get::<i64, _>("seq")?, super::decode_optional_name(&row, "channel")?),
        );
    }
    let updated: Vec<Message> = messages
        .iter()
        .filter_map(|m| moved.remove(&m.id).map(|(seq, channel)| Message { state, seq, channel, ..(*m).clone() }))
        .collect();
    record_transitions_in(tx, &updated, now, event).await?;
    Ok(updated)
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
    history: super::JsonRows,
    events: outbox::EventRows,
    told: Vec<super::user_events::NewUserEvent>,
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
    }

    /// Adds `other`'s records after these.
    pub fn append(&mut self, other: &Recorded) {
        self.history.append(&other.history);
        self.events.append(&other.events);
        self.told.extend_from_slice(&other.told);
    }

    /// Writes them, one statement each; the users' events are logged at `now`.
    pub async fn write_in(self, tx: &mut Transaction<'_, Any>, now: Millis) -> Result<(), sqlx::Error> {
        if self.history.is_empty() {
            return Ok(());
        }
        let backend = super::backend_of(tx);
        let rows = super::json_table(
            backend,
            &[("message_id", "BIGINT"), ("seq", "BIGINT"), ("state", "TEXT"), ("channel", "TEXT"), ("at", "BIGINT")],
        );
        let sql = format!(
            "INSERT INTO message_states (message_id, seq, state, channel, at) \
             SELECT message_id, seq, state, channel, at FROM ({rows}) AS history"
        );
        sqlx::query(sqlx::AssertSqlSafe(super::placeholders(backend, &sql)))
            .bind(self.history.value())
            .execute(&mut **tx)
            .await?;
        self.events.insert_in(tx).await?;
        super::user_events::append_in(tx, &self.told, now).await
    }
}

/// What the users' apps hear of a message's change. Of its hub messages: one arriving in the hub, and each
/// later change. Of the messages of its conversations as they move (delivered, read: the receipts either
/// side sees). Not of a hub message becoming delivered: a device of the user's own made it so, and the app
/// shows no "delivered" on what it receives (one event less per message for every open stream). A
/// conversation's messages are told each move: the thread shows its receipts.
fn told_of(m: &Message) -> impl Iterator<Item = super::user_events::NewUserEvent> {
    let told = |phone: String, kind| super::user_events::NewUserEvent { phone, kind, subject_id: m.id };
    let hub_delivered =
        m.conversation_id.is_none() && m.direction == Direction::Out && m.state == MessageState::Delivered;
    let (user, agents) = match m.conversation_id {
        _ if hub_delivered => (None, None),
        // The thread's receipts, for its user and for the partner's agents.
        Some(_) => (
            Some(told(m.phone.clone(), UserEventKind::ConversationMessage)),
            Some(told(super::user_events::partner_key(m.partner_id), UserEventKind::ConversationMessage)),
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
    let backend = super::backend_of(tx);
    let sql = format!("{SELECT}WHERE m.id IN ({})", vec!["?"; ids.len()].join(", "));
    let mut read = super::query_rows(backend, &sql, ids.len());
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
    guard: super::JsonRows,
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
    let mut guard = super::JsonRows::default();
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
    let (mut moves, mut recorded) = (super::JsonRows::default(), Recorded::default());
    for f in items.iter().zip(&first).filter(|(_, first)| **first).map(|(f, _)| f) {
        moves.append(&f.guard);
        recorded.append(&f.recorded);
    }
    let now = items.iter().map(|f| f.at).max().unwrap_or_default();
    let backend = super::backend_of(tx);
    let rows = super::json_table(
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
    let moved = sqlx::query(sqlx::AssertSqlSafe(super::placeholders(backend, &sql)))
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

/// The ids of the partner's messages among `ids` (others' ids are dropped), or all of a phone's.
pub async fn partner_message_ids(
    db: &Db,
    partner_id: i64,
    phone: Option<&str>,
    ids: &[i64],
) -> Result<Vec<i64>, sqlx::Error> {
    if let Some(phone) = phone {
        return sqlx::query_scalar("SELECT id FROM messages WHERE partner_id = $1 AND phone = $2 ORDER BY id")
            .bind(partner_id)
            .bind(phone)
            .fetch_all(db.reader())
            .await;
    }
    let mut owned = Vec::new();
    for id in ids {
        let found: Option<i64> = sqlx::query_scalar("SELECT id FROM messages WHERE partner_id = $1 AND id = $2")
            .bind(partner_id)
            .bind(id)
            .fetch_optional(db.reader())
            .await?;
        owned.extend(found);
    }
    Ok(owned)
}

/// Stored media, for `GET /media/{id}`.
pub struct StoredMedia {
    pub partner_id: i64,
    pub mimetype: Option<String>,
    pub filename: Option<String>,
    pub data: Vec<u8>,
    /// The end user who uploaded it; `None` for a partner's.
    pub uploaded_by: Option<String>,
}

pub async fn find_media(db: &Db, id: &str) -> Result<Option<StoredMedia>, sqlx::Error> {
    let row = sqlx::query("SELECT partner_id, mimetype, filename, data, uploaded_by FROM media WHERE id = $1")
        .bind(id)
        .fetch_optional(db.reader())
        .await?;
    row.map(|r| {
        Ok(StoredMedia {
            partner_id: r.try_get("partner_id")?,
            mimetype: r.try_get("mimetype")?,
            filename: r.try_get("filename")?,
            data: r.try_get("data")?,
            uploaded_by: r.try_get("uploaded_by")?,
        })
    })
    .transpose()
}

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
pub type Logged = (super::user_events::UserEvent, Option<Message>);

fn logged_from_row(r: &AnyRow) -> Result<Logged, sqlx::Error> {
    let event = super::user_events::UserEvent {
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
        let read = super::user_events::after_row(db, from, limit - rows.len() as i64).await?;
        if let (Some(fresh), Some((newest, _, _))) = (fresh, read.last()) {
            fresh.forget_rows(*newest);
        }
        rows.extend(read);
    }
    let newest = rows.last().map_or(after_id, |(id, _, _)| *id);
    let whole = rows.len() as i64 == limit;
    let is_created = |e: &super::user_events::UserEvent| e.kind == UserEventKind::MessageCreated;
    // Every fresh message the log tells of is taken, for a stream here or not: each is told of once.
    let created: Vec<i64> = rows.iter().filter(|(_, _, e)| is_created(e)).map(|(_, _, e)| e.subject_id).collect();
    let fresh = db.fresh().map(|f| f.take(&created)).unwrap_or_default();
    let mut by_key: Vec<(String, Vec<super::user_events::UserEvent>)> = Vec::new();
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
    let fresh_for = |key: &str, e: &super::user_events::UserEvent| {
        fresh.get(&e.subject_id).filter(|m| is_created(e) && m.phone == key)
    };
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

/// Messages by id, whoever sent them (a message that is gone is missing from the answer).
pub async fn find_many(db: &Db, ids: &[i64]) -> Result<std::collections::HashMap<i64, Message>, sqlx::Error> {
    let mut found = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let sql = format!("{SELECT}WHERE m.id IN ({})", vec!["?"; chunk.len()].join(", "));
        let mut read = super::query_rows(db.backend(), &sql, chunk.len());
        for id in chunk {
            read = read.bind(*id);
        }
        for row in read.fetch_all(db.reader()).await? {
            let m = from_row(&row)?;
            found.insert(m.id, m);
        }
    }
    Ok(found)
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
    events: std::sync::Mutex<std::collections::BTreeMap<i64, (String, super::user_events::UserEvent)>>,
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

/// A message by id, whoever sent it (delivery workers).
pub async fn find_any(db: &Db, id: i64) -> Result<Option<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// A message to deliver, with what routing needs to know of its sender and recipient.
#[derive(Debug)]
pub struct ToDeliver {
    pub message: Message,
    pub partner_name: String,
    /// The recipient has claimed their account (signed in once).
    pub claimed: bool,
    pub has_device: bool,
    /// When the recipient's app was last seen.
    pub last_seen: Option<Millis>,
    /// The fallback window after the hub, in seconds, as the message or its partner set it (`None`: the
    /// host's default; `Some(-1)`: the hub only).
    pub fallback_after_s: Option<i64>,
    /// The channel the user last wrote from, in the conversation the message is in (`None`: the app, or no
    /// conversation).
    pub conversation_channel: Option<Channel>,
    /// The recipient opted out of one of our senders on some channel (which one, each try looks up).
    pub opted_out: bool,
}

/// Messages to deliver and what routing needs (see [`ToDeliver`]), in one read, by id (a message that is
/// gone is missing from the answer).
pub async fn find_to_deliver(db: &Db, ids: &[i64]) -> Result<std::collections::HashMap<i64, ToDeliver>, sqlx::Error> {
    let backend = db.backend();
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let sql = format!(
        "{COLUMNS}, p.name AS partner_name, COALESCE(m.fallback_after_s, p.hub_fallback_after_s) AS fallback_after_s, \
         (SELECT COUNT(*) FROM accounts a WHERE a.phone = m.phone AND a.state = 'claimed') AS claimed, \
         (SELECT COUNT(*) FROM devices d WHERE d.phone = m.phone) AS devices, \
         (SELECT s.last_seen_at FROM presence s WHERE s.phone = m.phone) AS last_seen, \
         (SELECT c.channel FROM conversations c WHERE c.id = m.conversation_id) AS conversation_channel, \
         (SELECT COUNT(*) FROM opt_outs o WHERE o.phone = m.phone) AS opt_outs\
         {FROM}WHERE m.id IN ({})",
        super::rows(ids.len(), "?")
    );
    let mut query = super::query_rows(backend, &sql, ids.len());
    for id in ids {
        query = query.bind(id);
    }
    let mut found = std::collections::HashMap::with_capacity(ids.len());
    for row in query.fetch_all(db.reader()).await? {
        let message = from_row(&row)?;
        let to_deliver = ToDeliver {
            partner_name: row.try_get("partner_name")?,
            claimed: row.try_get::<i64, _>("claimed")? > 0,
            has_device: row.try_get::<i64, _>("devices")? > 0,
            last_seen: row.try_get("last_seen")?,
            fallback_after_s: row.try_get("fallback_after_s")?,
            conversation_channel: super::decode_optional_name(&row, "conversation_channel")?,
            opted_out: row.try_get::<i64, _>("opt_outs")? > 0,
            message,
        };
        found.insert(to_deliver.message.id, to_deliver);
    }
    Ok(found)
}

/// Claims the fallback after the hub of a message that is still only in the hub (`sent` in-app, no device
/// got it): true for the one caller that claimed it. A device that gets the message first ends the chain.
pub async fn claim_hub_fallback(db: &Db, id: i64, now: Millis) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE messages SET hub_fallback_at = $1 WHERE id = $2 AND state = 'sent' AND channel = 'inapp' \
         AND hub_fallback_at IS NULL",
    )
    .bind(now)
    .bind(id)
    .execute(db.writer())
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A message by its ref, whoever sent it.
pub async fn find_by_ref(db: &Db, reference: &str) -> Result<Option<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.ref = $1");
    let row = sqlx::query(sql).bind(reference).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// A page of the hub inbox of `phone` (messages outside support conversations), newest first.
pub async fn list_hub(
    db: &Db,
    phone: &str,
    words: Option<&[String]>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Message>, sqlx::Error> {
    const LIST: &str = const_format::concatcp!(
        SELECT,
        "WHERE m.phone = $1 AND m.conversation_id IS NULL AND ($2 IS NULL OR m.id < $2) "
    );
    let Some(words) = words else {
        let sql = const_format::concatcp!(LIST, "ORDER BY m.id DESC LIMIT $3");
        let rows = sqlx::query(sql).bind(phone).bind(before).bind(limit).fetch_all(db.reader()).await?;
        return rows.iter().map(from_row).collect();
    };
    let sql = format!("{LIST} AND {} ORDER BY m.id DESC LIMIT $4", super::search::message_has_words(db.backend(), 3));
    let matching = super::search::matching(db.backend(), phone, words);
    let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(phone).bind(before).bind(matching).bind(limit);
    query.fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// Whether `phone` received a message carrying the media `media_id`.
pub async fn media_sent_to(db: &Db, media_id: &str, phone: &str) -> Result<bool, sqlx::Error> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE media_id = $1 AND phone = $2")
        .bind(media_id)
        .bind(phone)
        .fetch_one(db.reader())
        .await?;
    Ok(n > 0)
}

/// What a user has not read yet: hub messages, support threads with an agent's message, bot chats with
/// steps the app has not taken (the latest chat with each bot: opening a bot starts a new one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unread {
    pub messages: i64,
    pub conversations: i64,
    pub bots: i64,
}

/// Counts what `phone` has not read yet (a failed message is not waiting to be read).
pub async fn unread_of(db: &Db, phone: &str) -> Result<Unread, sqlx::Error> {
    let row = sqlx::query(
        "SELECT \
           (SELECT COUNT(*) FROM messages WHERE phone = $1 AND conversation_id IS NULL AND direction = 'out' \
              AND state <> 'read' AND state <> 'failed') AS messages, \
           (SELECT COUNT(DISTINCT conversation_id) FROM messages WHERE phone = $1 AND conversation_id IS NOT NULL \
              AND direction = 'out' AND state <> 'read' AND state <> 'failed') AS conversations, \
           (SELECT COUNT(DISTINCT s.id) FROM flow_sessions s JOIN flow_pending_steps p ON p.session_id = s.id \
              WHERE s.phone = $1 AND s.kind = 'chat' AND s.id = (SELECT MAX(l.id) FROM flow_sessions l \
                WHERE l.phone = s.phone AND l.bot_id = s.bot_id AND l.kind = 'chat')) AS bots",
    )
    .bind(phone)
    .fetch_one(db.reader())
    .await?;
    Ok(Unread {
        messages: row.try_get("messages")?,
        conversations: row.try_get("conversations")?,
        bots: row.try_get("bots")?,
    })
}

/// The messages of a conversation written from `direction` that have not been read yet, oldest first.
pub async fn unread_in_conversation(
    db: &Db,
    conversation_id: i64,
    direction: Direction,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM messages WHERE conversation_id = $1 AND direction = $2 AND state <> 'read' AND state <> 'failed' \
         ORDER BY id",
    )
    .bind(conversation_id)
    .bind(direction.as_str())
    .fetch_all(db.reader())
    .await
}

/// How many messages of each of `conversations` written from `direction` have not been read yet.
pub async fn unread_counts(
    db: &Db,
    conversations: &[i64],
    direction: Direction,
) -> Result<std::collections::HashMap<i64, i64>, sqlx::Error> {
    if conversations.is_empty() {
        return Ok(Default::default());
    }
    let sql = format!(
        "SELECT conversation_id, COUNT(*) AS n FROM messages WHERE direction = ? AND state <> 'read' \
         AND state <> 'failed' AND conversation_id IN ({}) GROUP BY conversation_id",
        super::rows(conversations.len(), "?")
    );
    let mut query = super::query_rows(db.backend(), &sql, conversations.len() + 1).bind(direction.as_str());
    for id in conversations {
        query = query.bind(id);
    }
    query.fetch_all(db.reader()).await?.iter().map(|r| Ok((r.try_get("conversation_id")?, r.try_get("n")?))).collect()
}

/// The messages of a conversation, oldest first (the last `limit`).
pub async fn list_conversation(db: &Db, conversation_id: i64, limit: i64) -> Result<Vec<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.conversation_id = $1 ORDER BY m.id DESC LIMIT $2");
    let rows = sqlx::query(sql).bind(conversation_id).bind(limit).fetch_all(db.reader()).await?;
    let mut messages: Vec<Message> = rows.iter().map(from_row).collect::<Result<_, _>>()?;
    messages.reverse();
    Ok(messages)
}

/// Stores decoded base64 media once (messages and broadcasts reference it by id).
pub async fn insert_media_in(
    tx: &mut Transaction<'_, Any>,
    partner_id: i64,
    media: &NewMedia,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO media (id, partner_id, filename, mimetype, size, sha256, data, created_at, uploaded_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&media.id)
    .bind(partner_id)
    .bind(&media.filename)
    .bind(&media.mimetype)
    .bind(media.data.len() as i64)
    .bind(&media.sha256)
    .bind(&media.data)
    .bind(now)
    .bind(&media.uploaded_by)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Bytes of media the end user `phone` uploaded since `since`.
pub async fn uploaded_since(db: &Db, phone: &str, since: Millis) -> Result<i64, sqlx::Error> {
    let bytes: Option<i64> =
        sqlx::query_scalar("SELECT CAST(SUM(size) AS BIGINT) FROM media WHERE uploaded_by = $1 AND created_at >= $2")
            .bind(phone)
            .bind(since)
            .fetch_one(db.reader())
            .await?;
    Ok(bytes.unwrap_or(0))
}

/// Queues new messages for delivery (`(message id, due at)`: a job of `deliveries`), in the transaction
/// that creates them.
pub async fn enqueue_in(tx: &mut Transaction<'_, Any>, jobs: &[(i64, Millis)]) -> Result<(), sqlx::Error> {
    if jobs.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "INSERT INTO delivery_jobs (message_id, next_attempt_at) VALUES {} ON CONFLICT (message_id) DO NOTHING",
        super::rows(jobs.len(), "(?, ?)")
    );
    let mut insert = super::query_rows(super::backend_of(tx), &sql, jobs.len());
    for (message_id, at) in jobs {
        insert = insert.bind(message_id).bind(at);
    }
    insert.execute(&mut **tx).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Db, FRESH_KEPT, Fresh, events_after_row, find_any};
    use crate::names::UserEventKind;
    use crate::store::user_events::{NewUserEvent, append_in, newest_id};
    use crate::store::writer::GroupCommit;

    async fn db_with_messages(dir: &std::path::Path) -> Db {
        let db = Db::sqlite_at(&dir.join("t.db"), 2).await;
        sqlx::query(
            "INSERT INTO partners (id, code, name, key_hash, key_prefix, created_at) VALUES (1, 'p', 'P', 'h', 'k', 0)",
        )
        .execute(db.writer())
        .await
        .unwrap();
        for (id, phone, body) in [(1, "+1", "one"), (2, "+1", "two"), (3, "+2", "three")] {
            sqlx::query(
                "INSERT INTO messages (id, ref, partner_id, phone, direction, content_type, body, priority, content, \
                 state, channel, created_at, updated_at) \
                 VALUES ($1, $2, 1, $3, 'out', 'text', $4, 'normal', '{}', 'sent', 'inapp', 0, 0)",
            )
            .bind(id)
            .bind(format!("msg_{id}"))
            .bind(phone)
            .bind(body)
            .execute(db.writer())
            .await
            .unwrap();
        }
        db
    }

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
        use super::{advance_foreseen_in, advance_read_many_in, find_many, foresee};
        use crate::names::{Channel, MessageState};
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
        use super::{advance_foreseen_in, advance_in, find_many, foresee};
        use crate::names::{Channel, MessageState};
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
