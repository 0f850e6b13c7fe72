//! New messages: one, or many in one transaction, with the partner's idempotency key (24 hours), the hub's
//! decision taken as each is written (`HubRoute`), and their delivery jobs.

use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::media::{NewMedia, insert_media_in};
use super::rows::{Message, SELECT, from_row};
use crate::clock::Millis;
use crate::names::{Channel, Direction, MessageState};
use crate::store::Db;
use crate::store::flows::{FlowInvitation, open_invited_in};
use crate::store::preferences::refusal_of_row;

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
    /// The provider account a user's message came through: a partner's own sender's (its Twilio account SID
    /// or WhatsApp business account id), or `''` — the app, or the host's own senders.
    pub account: String,
    /// Put in the hub as it is written when its recipient is reached there (see [`HubRoute`]), instead of
    /// queued for the delivery worker; `None`: the worker routes it.
    pub hub: Option<HubRoute>,
    /// The flow this message is the card of: its session is opened with it, in its transaction.
    pub invites: Option<FlowInvitation>,
    /// When it is sent (`None`: at once): until then it is `scheduled`, its delivery job due then.
    pub send_at: Option<Millis>,
    /// The member who wrote it (an agent's reply), and their display name as it is now.
    pub author_id: Option<i64>,
    pub author_name: Option<String>,
}

impl NewMessage {
    /// An outgoing notification of text `body` from partner `partner_id` to `phone`, under a new ref, with
    /// nothing else set: what a send that composes its own message (a developer's template, a flow's
    /// invitation card) starts from.
    pub fn text_to(partner_id: i64, phone: &str, body: String) -> NewMessage {
        NewMessage {
            reference: crate::secrets::new_message_ref(),
            partner_id,
            direction: Direction::Out,
            conversation_id: None,
            developer_id: None,
            phone: phone.to_string(),
            content_type: "text".into(),
            body: Some(body),
            rendered_body: None,
            template_code: None,
            lang: None,
            priority: "notification".into(),
            content: Value::Object(Default::default()),
            media: None,
            idempotency_key: None,
            request_hash: None,
            fallback_after_s: None,
            channel: None,
            account: String::new(),
            hub: None,
            invites: None,
            send_at: None,
            author_id: None,
            author_name: None,
        }
    }

    /// The state it is written in: `scheduled` for a message sent later, else its direction's first.
    pub fn initial_state(&self) -> MessageState {
        match self.send_at {
            Some(_) => MessageState::Scheduled,
            None => MessageState::initial(self.direction),
        }
    }
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

/// What an insert answers besides the new row's id: the sender's code and name, and whether the person refused the
/// partner's messages (`store::preferences::REFUSAL_RETURNED`).
const RETURNED: &str = const_format::concatcp!(
    "(SELECT p.code FROM partners p WHERE p.id = messages.partner_id) AS partner_code, \
     (SELECT p.name FROM partners p WHERE p.id = messages.partner_id) AS partner_name, ",
    crate::store::preferences::REFUSAL_RETURNED
);

/// [`RETURNED`], and what a [`HubRoute`] decides by: the recipient's claimed accounts and devices, the
/// partner's window; and whether the recipient has a push subscription ([`InHub::subscribed`]). Asked only
/// when a message has a route, so other inserts read nothing more.
const RETURNED_REACH: &str = const_format::concatcp!(
    RETURNED,
    ", (SELECT p.hub_fallback_after_s FROM partners p WHERE p.id = messages.partner_id) AS partner_after_s, \
     (SELECT COUNT(*) FROM accounts a WHERE a.phone = messages.phone AND a.state = 'claimed') AS claimed, \
     (SELECT COUNT(*) FROM devices d WHERE d.phone = messages.phone) AS devices, \
     (SELECT COUNT(*) FROM push_subscriptions s WHERE s.phone = messages.phone) AS subscriptions"
);

/// Where a message with a [`HubRoute`] goes as it is written, instead of to the delivery worker.
#[derive(Debug, Clone, Copy)]
pub enum Placed {
    /// Into the hub.
    Hub(InHub),
    /// Nowhere: its person blocked its partner, or refused its marketing (why): it fails at once, with its
    /// `message.status` event built by `event`.
    Refused { why: &'static str, event: StatusEvent },
}

/// Where the message just inserted (its returned `row`) goes now, by its [`HubRoute`]: nowhere when its
/// person refused it, into the hub when its recipient is reached there.
fn placement(m: &NewMessage, row: &AnyRow, now: Millis) -> Result<Option<Placed>, sqlx::Error> {
    let Some(route) = m.hub else { return Ok(None) };
    if m.direction == Direction::Out
        && let Some(why) = refusal_of_row(row, crate::preferences::is_marketing(&m.content))?
    {
        return Ok(Some(Placed::Refused { why, event: route.event }));
    }
    let (claimed, devices): (i64, i64) = (row.try_get("claimed")?, row.try_get("devices")?);
    if !(route.reached)(claimed > 0, devices > 0) {
        return Ok(None);
    }
    let window = m.fallback_after_s.or(row.try_get::<Option<i64>, _>("partner_after_s")?);
    let follow_up = (route.follow_up)(&m.priority, &m.content, window, route.default_after_s, now);
    let subscribed = row.try_get::<i64, _>("subscriptions")? > 0;
    Ok(Some(Placed::Hub(InHub { follow_up, event: route.event, subscribed })))
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
    content, state, seq, direction, conversation_id, developer_id, created_at, updated_at, fallback_after_s, channel, \
    send_at, author_id, author_name";

const NEW_ROW: &str = "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?";

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
        .bind(m.initial_state().as_str())
        .bind(m.direction.as_str())
        .bind(m.conversation_id)
        .bind(m.developer_id)
        .bind(now)
        .bind(now)
        .bind(m.fallback_after_s)
        .bind(m.channel.map(Channel::as_str))
        .bind(m.send_at)
        .bind(m.author_id)
        .bind(&m.author_name)
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
) -> Result<(Created, Option<Placed>), sqlx::Error> {
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
    let inserted = bind_new(crate::store::query_rows(crate::store::backend_of(tx), &sql, 1), m, now)
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

    let message = stored(m, row.try_get("id")?, &row, now)?;
    let in_hub = placement(m, &row, now)?;
    if let Some(media) = &m.media {
        insert_media_in(tx, m.partner_id, media, now).await?;
    }
    record_created_in(tx, &[(&message, !matches!(in_hub, Some(Placed::Hub(_))))]).await?;
    if let Some(invitation) = &m.invites {
        open_invited_in(tx, invitation, &message.phone, message.id, now).await?;
    }
    Ok((Created::New(message), in_hub))
}

/// What goes with new messages: their first state rows, what they add to the partner's figures and, for
/// outgoing ones queued for the delivery worker (`true` beside them), their delivery jobs.
async fn record_created_in(tx: &mut Transaction<'_, Any>, created: &[(&Message, bool)]) -> Result<(), sqlx::Error> {
    let backend = crate::store::backend_of(tx);
    let sql = format!(
        "INSERT INTO message_states (message_id, seq, state, channel, at) VALUES {}",
        crate::store::rows(created.len(), "(?, 0, ?, NULL, ?)")
    );
    let mut states = crate::store::query_rows(backend, &sql, created.len());
    for (m, _) in created {
        states = states.bind(m.id).bind(m.state.as_str()).bind(m.created_at);
    }
    states.execute(&mut **tx).await?;
    let mut counted = crate::store::rollups::messages::Deltas::default();
    for (m, _) in created {
        counted.created(m.counted());
    }
    counted.write_in(tx).await?;
    // A scheduled message's job is due when it is sent.
    let jobs: Vec<(i64, Millis)> = created
        .iter()
        .filter(|(m, queued)| *queued && m.direction == Direction::Out)
        .map(|(m, _)| (m.id, m.send_at.unwrap_or(m.created_at)))
        .collect();
    enqueue_in(tx, &jobs).await
}

/// The message `m` as stored under `id` (a new message, as written).
fn stored(m: &NewMessage, id: i64, row: &AnyRow, now: Millis) -> Result<Message, sqlx::Error> {
    Ok(Message {
        id,
        reference: m.reference.clone(),
        partner_id: m.partner_id,
        partner_code: row.try_get("partner_code")?,
        partner_name: row.try_get("partner_name")?,
        phone: m.phone.clone(),
        direction: m.direction,
        content_type: m.content_type.clone(),
        body: m.body.clone(),
        rendered_body: m.rendered_body.clone(),
        template_code: m.template_code.clone(),
        lang: m.lang.clone(),
        priority: m.priority.clone(),
        content: m.content.clone(),
        state: m.initial_state(),
        channel: m.channel,
        seq: 0,
        conversation_id: m.conversation_id,
        developer_id: m.developer_id,
        created_at: now,
        send_at: m.send_at,
        error: None,
        author_id: m.author_id,
        author_name: m.author_name.clone(),
        broadcast_id: None,
    })
}

/// [`create_routed_in`] for many messages at once (the message writer's batch): those without an idempotency
/// key, media or a flow to open — nearly all — are written with three multi-row statements (the messages, their first
/// state rows, their delivery jobs) instead of three statements each; the others one by one. Answers in
/// the order of `items`. Any failure (a sender-chosen ref already taken) fails the whole call.
pub async fn create_many_in(
    tx: &mut Transaction<'_, Any>,
    items: &[(NewMessage, Millis)],
) -> Result<Vec<(Created, Option<Placed>)>, sqlx::Error> {
    let backend = crate::store::backend_of(tx);
    let mut out: Vec<Option<(Created, Option<Placed>)>> = items.iter().map(|_| None).collect();
    let mut plain = Vec::new();
    for (i, (m, now)) in items.iter().enumerate() {
        if m.idempotency_key.is_none() && m.media.is_none() && m.invites.is_none() {
            plain.push(i);
        } else {
            out[i] = Some(create_routed_in(tx, m, *now).await?);
        }
    }
    if !plain.is_empty() {
        let sql = format!(
            "INSERT INTO messages ({NEW_COLUMNS}) VALUES {} RETURNING id, ref, {}",
            crate::store::rows(plain.len(), &format!("({NEW_ROW})")),
            if plain.iter().any(|&i| items[i].0.hub.is_some()) { RETURNED_REACH } else { RETURNED }
        );
        let mut insert = crate::store::query_rows(backend, &sql, plain.len());
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
            let message = stored(m, row.try_get("id")?, &row, *now)?;
            written.push((i, message, placement(m, &row, *now)?));
        }
        let created: Vec<(&Message, bool)> =
            written.iter().map(|(_, m, placed)| (m, !matches!(placed, Some(Placed::Hub(_))))).collect();
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

/// Queues new messages for delivery (`(message id, due at)`: a job of `deliveries`), in the transaction
/// that creates them.
pub async fn enqueue_in(tx: &mut Transaction<'_, Any>, jobs: &[(i64, Millis)]) -> Result<(), sqlx::Error> {
    if jobs.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "INSERT INTO delivery_jobs (message_id, next_attempt_at) VALUES {} ON CONFLICT (message_id) DO NOTHING",
        crate::store::rows(jobs.len(), "(?, ?)")
    );
    let mut insert = crate::store::query_rows(crate::store::backend_of(tx), &sql, jobs.len());
    for (message_id, at) in jobs {
        insert = insert.bind(message_id).bind(at);
    }
    insert.execute(&mut **tx).await?;
    Ok(())
}
