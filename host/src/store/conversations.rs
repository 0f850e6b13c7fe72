//! Support conversations between a user and a partner's agents, and the messages in them. Every new
//! message moves the conversation's state and records a `conversation.message` event in the same
//! transaction.

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::messages::{Created, Message, NewMessage, create_in};
use super::outbox::{self, Target};
use super::user_events::{self, NewUserEvent};
use super::{Db, decode_name, like_pattern};
use crate::clock::Millis;
use crate::names::{Channel, ConversationState, Direction, SlaKind, UserEventKind};

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: i64,
    pub reference: String,
    pub partner_id: i64,
    pub partner_code: String,
    /// The partner's name, as people see it.
    pub partner_name: String,
    pub phone: String,
    pub subject: Option<String>,
    pub state: ConversationState,
    pub last_message_at: Millis,
    pub created_at: Millis,
    /// The member it is assigned to, if any (the partner's side only).
    pub assignee_id: Option<i64>,
    /// The channel the user last wrote from (`None`: the app): agents' replies go back on it.
    pub channel: Option<Channel>,
    /// The SLA running on it (waiting for an agent), due when, breached when (`store::service_levels`).
    pub sla_kind: Option<SlaKind>,
    pub sla_due_at: Option<Millis>,
    pub sla_breached_at: Option<Millis>,
    /// When an agent first replied.
    pub first_response_at: Option<Millis>,
    /// Its satisfaction question: when asked, and the answer (`store::ratings`).
    pub csat_asked_at: Option<Millis>,
    pub csat_score: Option<i64>,
    pub csat_comment: Option<String>,
    pub csat_rated_at: Option<Millis>,
}

const COLUMNS: &str = "SELECT c.id, c.ref, c.partner_id, p.code AS partner_code, p.name AS partner_name, c.phone, c.subject, c.state, \
    c.last_message_at, c.created_at, c.assignee_id, c.channel, c.sla_kind, c.sla_due_at, c.sla_breached_at, \
    c.first_response_at, c.csat_asked_at, c.csat_score, c.csat_comment, c.csat_rated_at ";
const SELECT: &str = const_format::concatcp!(COLUMNS, "FROM conversations c JOIN partners p ON p.id = c.partner_id ");

/// Whose conversations a partner's list shows.
#[derive(Debug, Clone, Copy)]
pub enum Assigned {
    Anyone,
    Nobody,
    Member(i64),
}

fn from_row(row: &AnyRow) -> Result<Conversation, sqlx::Error> {
    Ok(Conversation {
        id: row.try_get("id")?,
        reference: row.try_get("ref")?,
        partner_id: row.try_get("partner_id")?,
        partner_code: row.try_get("partner_code")?,
        partner_name: row.try_get("partner_name")?,
        phone: row.try_get("phone")?,
        subject: row.try_get("subject")?,
        state: decode_name(row, "state")?,
        last_message_at: row.try_get("last_message_at")?,
        created_at: row.try_get("created_at")?,
        assignee_id: row.try_get("assignee_id")?,
        channel: super::decode_optional_name(row, "channel")?,
        sla_kind: super::decode_optional_name(row, "sla_kind")?,
        sla_due_at: row.try_get("sla_due_at")?,
        sla_breached_at: row.try_get("sla_breached_at")?,
        first_response_at: row.try_get("first_response_at")?,
        csat_asked_at: row.try_get("csat_asked_at")?,
        csat_score: row.try_get("csat_score")?,
        csat_comment: row.try_get("csat_comment")?,
        csat_rated_at: row.try_get("csat_rated_at")?,
    })
}

/// Builds the `conversation.message` payload of a new message.
pub type EventFn = fn(&Conversation, &Message, Millis) -> Value;

/// A user's support threads, newest first; with `words`, those whose subject or messages have them all.
pub async fn list_for_phone(
    db: &Db,
    phone: &str,
    words: Option<&[String]>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Conversation>, sqlx::Error> {
    const LIST: &str = const_format::concatcp!(SELECT, "WHERE c.phone = $1 AND ($2 IS NULL OR c.id < $2) ");
    let Some(words) = words else {
        let sql = const_format::concatcp!(LIST, "ORDER BY c.id DESC LIMIT $3");
        let rows = sqlx::query(sql).bind(phone).bind(before).bind(limit).fetch_all(db.reader()).await?;
        return rows.iter().map(from_row).collect();
    };
    let sql =
        format!("{LIST} AND {} ORDER BY c.id DESC LIMIT $4", super::search::conversation_has_words(db.backend(), 3));
    let matching = super::search::matching(db.backend(), phone, words);
    let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(phone).bind(before).bind(matching).bind(limit);
    query.fetch_all(db.reader()).await?.iter().map(from_row).collect()
}

/// A partner's search: the words (every one starts a word of the subject or of a message, anywhere in the
/// conversation, through the text index), or the contact's phone holding `phone` (a part of it, as typed).
pub struct PartnerSearch {
    pub words: Vec<String>,
    pub phone: String,
}

impl PartnerSearch {
    /// Whether the text could be a part of a phone (`+` and digits, as phones are kept): anything else
    /// cannot be in one, and is not looked for there.
    fn could_be_a_phone(&self) -> bool {
        !self.phone.is_empty() && self.phone.chars().all(|c| c.is_ascii_digit() || c == '+')
    }
}

/// What a partner's list of conversations shows: those in a state, of an assignee, with a label (by id), and
/// a search.
#[derive(Clone, Copy)]
pub struct PartnerFilter<'a> {
    pub state: Option<ConversationState>,
    pub assigned: Assigned,
    pub label: Option<i64>,
    pub search: Option<&'a PartnerSearch>,
    /// Only those with an SLA running (`Some(false)`), or breached (`Some(true)`).
    pub sla: Option<bool>,
    /// Those with an SLA running, the one due first first (no cursor: the first page only).
    pub by_due: bool,
}

/// A partner's conversations, newest first, by state, assignee, label and a search.
pub async fn list_for_partner(
    db: &Db,
    partner_id: i64,
    filter: &PartnerFilter<'_>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Conversation>, sqlx::Error> {
    let PartnerFilter { state, assigned, label, search, sla, by_due } = *filter;
    // The conditions the list asks for, and only those, so that each engine plans for what is asked.
    let mut binds = vec![Bind::Int(partner_id)];
    let mut filters = vec!["c.partner_id = $1".to_string()];
    let mut add = |condition: &str, bind: Bind| {
        binds.push(bind);
        filters.push(condition.replace('?', &format!("${}", binds.len())));
        binds.len()
    };
    if let Some(state) = state {
        add("c.state = ?", Bind::Text(state.as_str().to_string()));
    }
    let cursor = before.map(|id| add("c.id < ?", Bind::Int(id)));
    if let Some(label) = label {
        add("c.id IN (SELECT conversation_id FROM conversation_labels WHERE label_id = ?)", Bind::Int(label));
    }
    match assigned {
        Assigned::Anyone => {}
        Assigned::Nobody => filters.push("c.assignee_id IS NULL".to_string()),
        Assigned::Member(id) => {
            add("c.assignee_id = ?", Bind::Int(id));
        }
    }
    match (sla, by_due) {
        (Some(true), _) => filters.push("c.sla_breached_at IS NOT NULL".to_string()),
        (Some(false), _) | (None, true) => filters.push("c.sla_due_at IS NOT NULL".to_string()),
        (None, false) => {}
    }
    let order = if by_due { "c.sla_due_at, c.id" } else { "c.id DESC" };
    let filters = filters.join(" AND ");
    binds.push(Bind::Int(limit));
    let l = binds.len();
    let page = |sql: String, extra: Option<String>| {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for bind in &binds {
            query = match bind {
                Bind::Int(v) => query.bind(*v),
                Bind::Text(v) => query.bind(v.clone()),
            };
        }
        if let Some(extra) = extra {
            query = query.bind(extra);
        }
        async move { query.fetch_all(db.reader()).await?.iter().map(from_row).collect::<Result<Vec<_>, _>>() }
    };
    let Some(search) = search else {
        return page(format!("{SELECT}WHERE {filters} ORDER BY {order} LIMIT ${l}"), None).await;
    };
    // Each part of a search through its own index, each a page of its own, merged: the words by the text
    // index, the phone among the partner's conversations.
    let n = l + 1;
    let mut found = Vec::new();
    if !search.words.is_empty() {
        let matching = super::search::partner_matching(db.backend(), partner_id, &search.words);
        let queries = super::search::partner_conversations_with_words(db.backend(), COLUMNS, &filters, n, l, cursor);
        let tries = queries.len();
        for (i, sql) in queries.into_iter().enumerate() {
            let rows = page(sql, Some(matching.clone())).await?;
            if rows.len() as i64 >= limit || i + 1 == tries {
                found.extend(rows);
                break;
            }
        }
    }
    if search.could_be_a_phone() {
        let sql = format!(
            "{SELECT}WHERE c.id IN (SELECT id FROM conversations WHERE partner_id = $1 AND phone LIKE ${n} \
             ESCAPE '\\') AND {filters} ORDER BY c.id DESC LIMIT ${l}"
        );
        found.extend(page(sql, Some(like_pattern(&search.phone))).await?);
    }
    found.sort_by_key(|c| std::cmp::Reverse(c.id));
    found.dedup_by_key(|c| c.id);
    if by_due {
        found.sort_by_key(|c| (c.sla_due_at, c.id));
    }
    found.truncate(usize::try_from(limit).unwrap_or(0));
    Ok(found)
}

/// A value bound to a query built for what a request asks.
enum Bind {
    Int(i64),
    Text(String),
}

pub async fn find_for_partner(db: &Db, partner_id: i64, id: i64) -> Result<Option<Conversation>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE c.partner_id = $1 AND c.id = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn find_for_user(db: &Db, phone: &str, reference: &str) -> Result<Option<Conversation>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE c.phone = $1 AND c.ref = $2");
    let row = sqlx::query(sql).bind(phone).bind(reference).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// The latest open or pending conversation of a phone with a partner (agent sends attach to it).
pub async fn latest_active(db: &Db, partner_id: i64, phone: &str) -> Result<Option<Conversation>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE c.partner_id = $1 AND c.phone = $2 AND c.state IN ('open', 'pending') ORDER BY c.id DESC LIMIT 1"
    );
    let row = sqlx::query(sql).bind(partner_id).bind(phone).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// The open or pending conversation of a phone that moved last, with any partner (a message the user
/// sends from WhatsApp or SMS goes on in it).
///
/// With `shared` (a channel), only one the person last wrote in through the app or the host's own senders,
/// of a partner that has no sender of its own on that channel: a message to the host's shared number is
/// never one for a partner that has its own there, nor goes on in a conversation a partner's own number
/// holds (on any channel: that partner's signature could have forged it).
pub async fn latest_active_of_phone(
    db: &Db,
    phone: &str,
    shared: Option<Channel>,
) -> Result<Option<Conversation>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE c.phone = $1 AND c.state IN ('open', 'pending') \
         AND ($2 IS NULL OR (c.account = '' \
              AND c.partner_id NOT IN (SELECT s.partner_id FROM partner_senders s WHERE s.channel = $2))) \
         ORDER BY c.last_message_at DESC, c.id DESC LIMIT 1"
    );
    let row = sqlx::query(sql).bind(phone).bind(shared.map(|c| c.as_str())).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// A conversation by id, whoever's it is (the event stream's rendering: the user's own, by its event).
pub async fn find_by_id(db: &Db, id: i64) -> Result<Option<Conversation>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE c.id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// A conversation by id, as the caller's transaction sees it.
pub async fn find_by_id_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: i64,
) -> Result<Option<Conversation>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE c.id = $1");
    sqlx::query(sql).bind(id).fetch_optional(&mut **tx).await?.as_ref().map(from_row).transpose()
}

/// Opens a conversation with its first (user) message.
pub async fn open(
    db: &Db,
    reference: &str,
    subject: Option<&str>,
    first: NewMessage,
    now: Millis,
    event: EventFn,
) -> Result<(Conversation, Message), sqlx::Error> {
    let mut tx = db.begin().await?;
    let opened = open_in(&mut tx, reference, subject, first, now, event).await?;
    tx.commit().await?;
    Ok(opened)
}

/// [`open`] in the caller's transaction.
pub async fn open_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    reference: &str,
    subject: Option<&str>,
    mut first: NewMessage,
    now: Millis,
    event: EventFn,
) -> Result<(Conversation, Message), sqlx::Error> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO conversations (ref, partner_id, phone, subject, state, last_message_at, created_at) \
         VALUES ($1, $2, $3, $4, 'open', $5, $5) RETURNING id",
    )
    .bind(reference)
    .bind(first.partner_id)
    .bind(&first.phone)
    .bind(subject)
    .bind(now)
    .fetch_one(&mut **tx)
    .await?;
    first.conversation_id = Some(id);
    let opened = super::rollups::conversations::Bump { opened: 1, ..Default::default() };
    super::rollups::conversations::bump_in(tx, first.partner_id, now, None, opened).await?;
    let Created::New(created) = create_in(tx, &first, now).await? else {
        return Err(sqlx::Error::Protocol("a conversation's first message carries no idempotency key".into()));
    };
    appended_in(tx, id, created, &first.account, ConversationState::Open, now, event).await
}

/// Adds a message to a conversation and moves it to `state`. A retry under the message's idempotency key
/// answers the original (or that the key was used for something else) and changes nothing.
pub async fn append(
    db: &Db,
    conversation_id: i64,
    message: NewMessage,
    state: ConversationState,
    now: Millis,
    event: EventFn,
) -> Result<Created, sqlx::Error> {
    let mut tx = db.begin().await?;
    let created = append_in(&mut tx, conversation_id, message, state, now, event).await?;
    tx.commit().await?;
    Ok(created)
}

/// [`append`] in the caller's transaction.
pub async fn append_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    conversation_id: i64,
    mut message: NewMessage,
    state: ConversationState,
    now: Millis,
    event: EventFn,
) -> Result<Created, sqlx::Error> {
    message.conversation_id = Some(conversation_id);
    Ok(match create_in(tx, &message, now).await? {
        Created::New(m) => {
            Created::New(appended_in(tx, conversation_id, m, &message.account, state, now, event).await?.1)
        }
        retry => retry,
    })
}

/// What follows a new message in a conversation: its state and time, the partner's event, the user's.
/// `account` is the provider account a user's message came through (see [`NewMessage::account`]).
async fn appended_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    conversation_id: i64,
    message: Message,
    account: &str,
    state: ConversationState,
    now: Millis,
    event: EventFn,
) -> Result<(Conversation, Message), sqlx::Error> {
    // A user's message also says where they are now: the app, WhatsApp or SMS, and through whose account.
    let from_user = message.direction == Direction::In;
    sqlx::query(
        "UPDATE conversations SET state = $1, last_message_at = $2, \
         channel = CASE WHEN $3 = 1 THEN $4 ELSE channel END, \
         account = CASE WHEN $3 = 1 THEN $5 ELSE account END WHERE id = $6",
    )
    .bind(state.as_str())
    .bind(now)
    .bind(i64::from(from_user))
    .bind(message.channel.map(Channel::as_str))
    .bind(account)
    .bind(conversation_id)
    .execute(&mut **tx)
    .await?;
    // The person wrote: the partner's SLA starts, if none runs; an agent's reply (it now waits for the
    // person) stops it. An automatic reply leaves it waiting for the agents, and the SLA running.
    if from_user {
        super::service_levels::start_in(tx, message.partner_id, conversation_id, now).await?;
    } else if state == ConversationState::Pending {
        super::service_levels::replied_in(tx, conversation_id, message.author_id, now).await?;
    }
    let mut conversation = reread_in(tx, conversation_id).await?;
    // The user's message in a conversation nobody has: the partner may give it to an agent at once.
    if from_user && conversation.assignee_id.is_none() {
        conversation.assignee_id = give_in(tx, &conversation, now).await?;
    }
    let key = format!("conversation:{conversation_id}");
    let payload = event(&conversation, &message, now);
    outbox::enqueue(tx, Target::Partner(conversation.partner_id), "conversation.message", &payload, &key, now).await?;
    let told = told(&conversation, UserEventKind::ConversationMessage, message.id);
    user_events::append_in(tx, &told, now).await?;
    Ok((conversation, message))
}

/// The events of a change in `c`: its user's, and its partner's agents' (the console's stream).
fn told(c: &Conversation, kind: UserEventKind, subject_id: i64) -> [NewUserEvent; 2] {
    [NewUserEvent { phone: c.phone.clone(), kind, subject_id }, agents_told(c, kind, subject_id)]
}

/// The event of a change in `c` that only its partner's agents hear (an assignee, a note).
pub(super) fn agents_told(c: &Conversation, kind: UserEventKind, subject_id: i64) -> NewUserEvent {
    NewUserEvent { phone: user_events::partner_key(c.partner_id), kind, subject_id }
}

/// Conversation `id` as the transaction sees it now.
async fn reread_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, id: i64) -> Result<Conversation, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE c.id = $1");
    from_row(&sqlx::query(sql).bind(id).fetch_one(&mut **tx).await?)
}

/// Assigns a conversation to one of the partner's members, or to nobody (`None`). `Ok(None)` when either is
/// not the partner's (the caller says which is unknown by checking the conversation first). The partner's
/// agents are told (the user never is).
pub async fn assign(
    db: &Db,
    partner_id: i64,
    id: i64,
    assignee: Option<i64>,
    now: Millis,
) -> Result<Option<Conversation>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let done = sqlx::query(
        "UPDATE conversations SET assignee_id = $1 WHERE partner_id = $2 AND id = $3 \
         AND ($1 IS NULL OR EXISTS (SELECT 1 FROM members WHERE id = $1 AND partner_id = $2))",
    )
    .bind(assignee)
    .bind(partner_id)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    let conversation = reread_in(&mut tx, id).await?;
    let agents = agents_told(&conversation, UserEventKind::ConversationUpdated, id);
    user_events::append_in(&mut tx, &[agents], now).await?;
    tx.commit().await?;
    Ok(Some(conversation))
}

/// Gives unassigned conversation `c` to the member its partner's way of assigning chooses
/// (`store::assignment::choose_in`), if any, in the caller's transaction; the partner's agents are told.
/// Answers whom.
async fn give_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    c: &Conversation,
    now: Millis,
) -> Result<Option<i64>, sqlx::Error> {
    if c.state == ConversationState::Closed {
        return Ok(None);
    }
    let Some(member) = super::assignment::choose_in(tx, c.partner_id, now).await? else { return Ok(None) };
    let given = sqlx::query("UPDATE conversations SET assignee_id = $1 WHERE id = $2 AND assignee_id IS NULL")
        .bind(member)
        .bind(c.id)
        .execute(&mut **tx)
        .await?;
    if given.rows_affected() == 0 {
        return Ok(None);
    }
    user_events::append_in(tx, &[agents_told(c, UserEventKind::ConversationUpdated, c.id)], now).await?;
    Ok(Some(member))
}

/// [`give_in`] in a transaction of its own (nothing is kept when nobody takes it): the conversation as it is
/// now, or `None`.
pub async fn give_next(db: &Db, c: &Conversation, now: Millis) -> Result<Option<Conversation>, sqlx::Error> {
    let mut tx = db.begin().await?;
    if give_in(&mut tx, c, now).await?.is_none() {
        return Ok(None);
    }
    let conversation = reread_in(&mut tx, c.id).await?;
    tx.commit().await?;
    Ok(Some(conversation))
}

/// Takes every conversation not closed from member `member_id` (gone offline): they are unassigned, back in
/// the queue; the partner's agents are told. Answers them.
pub async fn release(db: &Db, partner_id: i64, member_id: i64, now: Millis) -> Result<Vec<Conversation>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE c.partner_id = $1 AND c.assignee_id = $2 AND c.state <> 'closed' ORDER BY c.last_message_at"
    );
    let rows = sqlx::query(sql).bind(partner_id).bind(member_id).fetch_all(&mut *tx).await?;
    let mut released = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut c = from_row(row)?;
        sqlx::query("UPDATE conversations SET assignee_id = NULL WHERE id = $1").bind(c.id).execute(&mut *tx).await?;
        user_events::append_in(&mut tx, &[agents_told(&c, UserEventKind::ConversationUpdated, c.id)], now).await?;
        c.assignee_id = None;
        released.push(c);
    }
    tx.commit().await?;
    Ok(released)
}

/// The partner's queue: its open conversations nobody has, the one waiting longest first, at most `limit`.
pub async fn queue(db: &Db, partner_id: i64, limit: i64) -> Result<Vec<Conversation>, sqlx::Error> {
    let sql = const_format::concatcp!(
        SELECT,
        "WHERE c.partner_id = $1 AND c.assignee_id IS NULL AND c.state = 'open' ORDER BY c.last_message_at, c.id \
         LIMIT $2"
    );
    let rows = sqlx::query(sql).bind(partner_id).bind(limit).fetch_all(db.reader()).await?;
    rows.iter().map(from_row).collect()
}

/// Someone is writing in conversation `c`: the person (`to_agents`: its partner's agents are told) or an
/// agent (the person is told).
pub async fn typing(db: &Db, c: &Conversation, to_agents: bool, now: Millis) -> Result<(), sqlx::Error> {
    let event = if to_agents {
        agents_told(c, UserEventKind::ConversationTyping, c.id)
    } else {
        NewUserEvent { phone: c.phone.clone(), kind: UserEventKind::ConversationTyping, subject_id: c.id }
    };
    let mut tx = db.begin().await?;
    user_events::append_in(&mut tx, &[event], now).await?;
    tx.commit().await
}

/// Marks up to `limit` SLAs due by `now` and not breached yet as breached, each with its partner's
/// `event` (`conversation.sla_breached`) and its agents told; hosts sharing the database each claim their
/// own. Answers how many.
pub async fn breach_due(db: &Db, now: Millis, limit: i64, event: BreachFn) -> Result<usize, sqlx::Error> {
    let mut tx = db.begin().await?;
    let due: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM conversations WHERE sla_due_at IS NOT NULL AND sla_breached_at IS NULL AND sla_due_at <= $1 \
         ORDER BY sla_due_at LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    let mut breached = 0;
    for id in due {
        let claimed = sqlx::query(
            "UPDATE conversations SET sla_breached_at = $1 WHERE id = $2 AND sla_breached_at IS NULL \
             AND sla_due_at IS NOT NULL AND sla_due_at <= $1",
        )
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if claimed.rows_affected() == 0 {
            continue;
        }
        let c = reread_in(&mut tx, id).await?;
        let breach = super::rollups::conversations::Bump { sla_breaches: 1, ..Default::default() };
        super::rollups::conversations::bump_in(&mut tx, c.partner_id, now, c.assignee_id, breach).await?;
        let key = format!("conversation:{id}");
        outbox::enqueue(
            &mut tx,
            Target::Partner(c.partner_id),
            "conversation.sla_breached",
            &event(&c, now),
            &key,
            now,
        )
        .await?;
        user_events::append_in(&mut tx, &[agents_told(&c, UserEventKind::ConversationUpdated, id)], now).await?;
        breached += 1;
    }
    tx.commit().await?;
    Ok(breached)
}

/// Builds the `conversation.sla_breached` payload of a conversation whose SLA was just breached.
pub type BreachFn = fn(&Conversation, Millis) -> Value;

/// An internal note on a conversation: for the partner's agents only.
#[derive(Debug, Clone)]
pub struct Note {
    pub id: i64,
    pub member_id: Option<i64>,
    pub phone: Option<String>,
    /// The member's display name now.
    pub name: Option<String>,
    pub body: String,
    pub created_at: Millis,
}

fn note_from_row(row: &AnyRow) -> Result<Note, sqlx::Error> {
    Ok(Note {
        id: row.try_get("id")?,
        member_id: row.try_get("member_id")?,
        phone: row.try_get("phone")?,
        name: row.try_get("name")?,
        body: row.try_get("body")?,
        created_at: row.try_get("created_at")?,
    })
}

const NOTE_SELECT: &str = "SELECT n.id, n.member_id, m.phone, m.name, n.body, n.created_at \
    FROM conversation_notes n LEFT JOIN members m ON m.id = n.member_id ";

/// Adds a note by `member_id` (none: the partner key) to conversation `c`; the partner's agents are told.
pub async fn add_note(
    db: &Db,
    c: &Conversation,
    member_id: Option<i64>,
    body: &str,
    now: Millis,
) -> Result<Note, sqlx::Error> {
    let mut tx = db.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO conversation_notes (conversation_id, member_id, body, created_at) VALUES ($1, $2, $3, $4) \
         RETURNING id",
    )
    .bind(c.id)
    .bind(member_id)
    .bind(body)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let sql = const_format::concatcp!(NOTE_SELECT, "WHERE n.id = $1");
    let note = note_from_row(&sqlx::query(sql).bind(id).fetch_one(&mut *tx).await?)?;
    let agents = agents_told(c, UserEventKind::ConversationUpdated, c.id);
    user_events::append_in(&mut tx, &[agents], now).await?;
    tx.commit().await?;
    Ok(note)
}

/// A conversation's notes, oldest first.
pub async fn notes(db: &Db, conversation_id: i64) -> Result<Vec<Note>, sqlx::Error> {
    let sql = const_format::concatcp!(NOTE_SELECT, "WHERE n.conversation_id = $1 ORDER BY n.id");
    let rows = sqlx::query(sql).bind(conversation_id).fetch_all(db.reader()).await?;
    rows.iter().map(note_from_row).collect()
}

/// Sets a partner's conversation state; `None` when it is not theirs. Its user and the partner's agents are
/// told.
pub async fn set_state(
    db: &Db,
    partner_id: i64,
    id: i64,
    state: ConversationState,
    now: Millis,
) -> Result<Option<Conversation>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let was: Option<String> = sqlx::query_scalar("SELECT state FROM conversations WHERE partner_id = $1 AND id = $2")
        .bind(partner_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    let done = sqlx::query("UPDATE conversations SET state = $1 WHERE partner_id = $2 AND id = $3")
        .bind(state.as_str())
        .bind(partner_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    let conversation = reread_in(&mut tx, id).await?;
    if state == ConversationState::Closed && was.as_deref() != Some(ConversationState::Closed.as_str()) {
        super::service_levels::stop_in(&mut tx, id, false, now).await?;
        let resolution_ms = (now - conversation.created_at).max(0);
        let resolved = super::rollups::conversations::Bump { resolved: 1, resolution_ms, ..Default::default() };
        super::rollups::conversations::bump_in(&mut tx, partner_id, now, conversation.assignee_id, resolved).await?;
    }
    user_events::append_in(&mut tx, &told(&conversation, UserEventKind::ConversationUpdated, id), now).await?;
    tx.commit().await?;
    Ok(Some(conversation))
}
