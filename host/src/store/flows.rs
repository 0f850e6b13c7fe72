//! Flow sessions: invitations to a bot's flow (opened with their card in the hub) and in-app chat sessions,
//! the guest's state between steps, the screen the user is on, and completion into a read-only card.

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::Db;
use crate::clock::Millis;
use crate::names::{Channel, SessionKind, SessionState};

#[derive(Debug, Clone)]
pub struct Session {
    pub id: i64,
    pub reference: String,
    pub bot_id: i64,
    /// The flow code (`None` for chat sessions).
    pub flow: Option<String>,
    pub kind: SessionKind,
    pub phone: String,
    pub state: SessionState,
    pub title: Option<String>,
    pub message_id: Option<i64>,
    /// The guest's opaque state from its last reply.
    pub guest_state: Option<String>,
    /// The last screen the guest showed (`{id, title, kind, fields}`): submissions are validated
    /// against it.
    pub screen: Option<Value>,
    pub summary: Option<Value>,
    pub invited_at: Millis,
    pub completed_at: Option<Millis>,
    /// The channel the session runs on (`None`: in the app).
    pub channel: Option<Channel>,
    /// What it waits for on the channel: `{"menu": [[id, label], …]}` (a reply "2" or a label answers it)
    /// or `{"form": screen id}`.
    pub waiting: Option<Value>,
}

const COLUMNS: &str = "id, ref, bot_id, flow, kind, phone, state, title, message_id, guest_state, screen, summary, \
    invited_at, completed_at, channel, waiting";

fn json_column(r: &AnyRow, name: &str) -> Result<Option<Value>, sqlx::Error> {
    let text: Option<String> = r.try_get(name)?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

fn from_row(r: &AnyRow) -> Result<Session, sqlx::Error> {
    Ok(Session {
        id: r.try_get("id")?,
        reference: r.try_get("ref")?,
        bot_id: r.try_get("bot_id")?,
        flow: r.try_get("flow")?,
        kind: super::decode_name(r, "kind")?,
        phone: r.try_get("phone")?,
        state: super::decode_name(r, "state")?,
        title: r.try_get("title")?,
        message_id: r.try_get("message_id")?,
        guest_state: r.try_get("guest_state")?,
        screen: json_column(r, "screen")?,
        summary: json_column(r, "summary")?,
        invited_at: r.try_get("invited_at")?,
        completed_at: r.try_get("completed_at")?,
        channel: r
            .try_get::<Option<String>, _>("channel")?
            .map(|c| Channel::parse(&c).ok_or_else(|| sqlx::Error::Decode(format!("unknown channel {c:?}").into())))
            .transpose()?,
        waiting: json_column(r, "waiting")?,
    })
}

/// A flow a message invites its recipient to (the message is the flow's card): the session opened with the
/// card, in the transaction that writes it (`messages::create_routed_in`).
#[derive(Debug, Clone)]
pub struct FlowInvitation {
    pub reference: String,
    pub bot_id: i64,
    pub flow: String,
    pub title: String,
}

/// Opens the session `invitation` names for `phone`, invited by the card `message_id`, in the caller's
/// transaction.
pub async fn open_invited_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    invitation: &FlowInvitation,
    phone: &str,
    message_id: i64,
    now: Millis,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO flow_sessions (ref, bot_id, flow, kind, phone, state, title, message_id, invited_at) \
         VALUES ($1, $2, $3, 'flow', $4, 'invited', $5, $6, $7)",
    )
    .bind(&invitation.reference)
    .bind(invitation.bot_id)
    .bind(&invitation.flow)
    .bind(phone)
    .bind(&invitation.title)
    .bind(message_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Opens an in-app chat session with a bot.
pub async fn open_chat(
    db: &Db,
    reference: &str,
    bot_id: i64,
    phone: &str,
    now: Millis,
) -> Result<Session, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO flow_sessions (ref, bot_id, kind, phone, state, invited_at) VALUES ($1, $2, 'chat', $3, 'in_progress', $4) \
         RETURNING ",
        COLUMNS
    );
    let row = sqlx::query(sql).bind(reference).bind(bot_id).bind(phone).bind(now).fetch_one(db.writer()).await?;
    from_row(&row)
}

pub async fn find_for_user(db: &Db, phone: &str, reference: &str) -> Result<Option<Session>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM flow_sessions WHERE phone = $1 AND ref = $2");
    let row = sqlx::query(sql).bind(phone).bind(reference).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// Opens a session of `bot_id` that runs on WhatsApp or SMS, in the caller's transaction: a chat, or the
/// flow `flow`.
pub async fn open_on_channel_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    reference: &str,
    bot_id: i64,
    flow: Option<&str>,
    phone: &str,
    channel: Channel,
    now: Millis,
) -> Result<Session, sqlx::Error> {
    let sql = const_format::concatcp!(
        "INSERT INTO flow_sessions (ref, bot_id, flow, kind, phone, state, title, invited_at, channel, active_at) \
         VALUES ($1, $2, $3, $4, $5, 'in_progress', $3, $6, $7, $6) RETURNING ",
        COLUMNS
    );
    let kind = if flow.is_some() { SessionKind::Flow } else { SessionKind::Chat };
    let row = sqlx::query(sql)
        .bind(reference)
        .bind(bot_id)
        .bind(flow)
        .bind(kind.as_str())
        .bind(phone)
        .bind(now)
        .bind(channel.as_str())
        .fetch_one(&mut **tx)
        .await?;
    from_row(&row)
}

/// The session of `phone` on `channel` that moved last, since `since` and not completed — with `partner_id`'s
/// bots only, when given.
pub async fn active_on_channel(
    db: &Db,
    phone: &str,
    channel: Channel,
    partner_id: Option<i64>,
    shared_only: bool,
    since: Millis,
) -> Result<Option<Session>, sqlx::Error> {
    let sql = const_format::concatcp!(
        "SELECT ",
        COLUMNS,
        " FROM flow_sessions WHERE phone = $1 AND channel = $2 AND active_at >= $3 AND state <> 'completed' \
         AND ($4 IS NULL OR bot_id IN (SELECT id FROM bots WHERE partner_id = $4)) \
         AND ($5 = 0 OR bot_id NOT IN (SELECT b.id FROM bots b JOIN partner_senders s ON s.partner_id = b.partner_id \
           WHERE s.channel = $2)) ORDER BY active_at DESC, id DESC LIMIT 1"
    );
    let row = sqlx::query(sql)
        .bind(phone)
        .bind(channel.as_str())
        .bind(since)
        .bind(partner_id)
        .bind(shared_only as i64)
        .fetch_optional(db.reader())
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// A session on a channel moved: what it waits for now (none: nothing in particular) and when (`None`: it
/// takes no more of the person's messages).
pub async fn moved_on_channel(
    db: &Db,
    id: i64,
    waiting: Option<&Value>,
    at: Option<Millis>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE flow_sessions SET waiting = $1, active_at = $2 WHERE id = $3")
        .bind(waiting.map(Value::to_string))
        .bind(at)
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// A session by id.
pub async fn find_by_id(db: &Db, id: i64) -> Result<Option<Session>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM flow_sessions WHERE id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// A session of one bot by ref (inbound webhook replies).
pub async fn find_for_bot(db: &Db, bot_id: i64, reference: &str) -> Result<Option<Session>, sqlx::Error> {
    let sql = const_format::concatcp!("SELECT ", COLUMNS, " FROM flow_sessions WHERE bot_id = $1 AND ref = $2");
    let row = sqlx::query(sql).bind(bot_id).bind(reference).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// A partner's sessions, newest first: of one bot, of one phone, or both.
pub async fn list_for_partner(
    db: &Db,
    partner_id: i64,
    bot_id: Option<i64>,
    phone: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<(Session, String)>, sqlx::Error> {
    let sql = "SELECT s.id, s.ref, s.bot_id, s.flow, s.kind, s.phone, s.state, s.title, s.message_id, s.guest_state, \
         s.screen, s.summary, s.invited_at, s.completed_at, s.channel, s.waiting, b.code AS bot_code \
         FROM flow_sessions s JOIN bots b ON b.id = s.bot_id \
         WHERE b.partner_id = $1 AND ($2 IS NULL OR s.bot_id = $2) AND ($3 IS NULL OR s.phone = $3) \
         AND ($4 IS NULL OR s.id < $4) ORDER BY s.id DESC LIMIT $5";
    let rows = sqlx::query(sql)
        .bind(partner_id)
        .bind(bot_id)
        .bind(phone)
        .bind(before)
        .bind(limit)
        .fetch_all(db.reader())
        .await?;
    rows.iter().map(|r| Ok((from_row(r)?, r.try_get("bot_code")?))).collect()
}

/// A session's progress after a step: the guest's state and the screen it shows (none: unchanged).
#[derive(Debug)]
pub struct Step {
    pub session_id: i64,
    pub guest_state: String,
    pub screen: Option<Value>,
}

/// Saves a session's progress (a completed session is left as it is).
pub async fn save_progress(db: &Db, id: i64, guest_state: &str, screen: Option<&Value>) -> Result<(), sqlx::Error> {
    let step = Step { session_id: id, guest_state: guest_state.to_string(), screen: screen.cloned() };
    let mut tx = db.begin().await?;
    save_progress_in(&mut tx, &step).await?;
    tx.commit().await
}

/// [`save_progress`] in the caller's transaction.
pub async fn save_progress_in(tx: &mut sqlx::Transaction<'_, sqlx::Any>, step: &Step) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE flow_sessions SET state = 'in_progress', guest_state = $1, screen = COALESCE($2, screen) \
         WHERE id = $3 AND state <> 'completed'",
    )
    .bind(&step.guest_state)
    .bind(step.screen.as_ref().map(Value::to_string))
    .bind(step.session_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Keeps the screen a `webhook`-mode bot shows (its state is its own: only the screen, against which a
/// submission is checked).
pub async fn show_screen(db: &Db, id: i64, screen: &Value) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE flow_sessions SET screen = $1 WHERE id = $2 AND state <> 'completed'")
        .bind(screen.to_string())
        .bind(id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// The group commit of bot steps' progress (see `store::writer`): concurrent steps share a transaction.
pub fn progress_writer(db: Db) -> super::writer::GroupCommit<Step, ()> {
    super::writer::GroupCommit::spawn(db, 256, |tx, step| Box::pin(save_progress_in(tx, step)))
}

/// Completes a flow: the session and its card (read-only, with the summary). False when it was already
/// completed (a concurrent submit won).
pub async fn complete(
    db: &Db,
    session: &Session,
    guest_state: &str,
    summary: &Value,
    now: Millis,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let done = sqlx::query(
        "UPDATE flow_sessions SET state = 'completed', guest_state = $1, summary = $2, completed_at = $3 \
         WHERE id = $4 AND state <> 'completed'",
    )
    .bind(guest_state)
    .bind(summary.to_string())
    .bind(now)
    .bind(session.id)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    if let Some(message_id) = session.message_id {
        let content: Option<String> = sqlx::query_scalar("SELECT content FROM messages WHERE id = $1")
            .bind(message_id)
            .fetch_optional(&mut *tx)
            .await?;
        let mut content: Value =
            content.and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_else(|| serde_json::json!({}));
        content["flow"]["state"] = Value::from("completed");
        content["flow"]["summary"] = summary.clone();
        sqlx::query("UPDATE messages SET content = $1, updated_at = $2 WHERE id = $3")
            .bind(content.to_string())
            .bind(now)
            .bind(message_id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Appends steps a bot answered, for the app to fetch, and tells the user's app (`flow.updated`).
pub async fn push_pending(db: &Db, id: i64, steps: &[Value], now: Millis) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    let phone: String =
        sqlx::query_scalar("SELECT phone FROM flow_sessions WHERE id = $1").bind(id).fetch_one(&mut *tx).await?;
    let told =
        super::user_events::NewUserEvent { phone, kind: crate::names::UserEventKind::FlowUpdated, subject_id: id };
    super::user_events::append_in(&mut tx, &[told], now).await?;
    for step in steps {
        sqlx::query("INSERT INTO flow_pending_steps (session_id, step) VALUES ($1, $2)")
            .bind(id)
            .bind(step.to_string())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}

/// Claims an inbound event id of the bot before anything is done for it: true for the one caller that
/// claimed it, false for every repeat (at once or later, on every host).
pub async fn claim_inbound_event(db: &Db, bot_id: i64, event_id: &str, now: Millis) -> Result<bool, sqlx::Error> {
    let claimed = sqlx::query(
        "INSERT INTO bot_inbound_events (bot_id, event_id, received_at) VALUES ($1, $2, $3) \
         ON CONFLICT (bot_id, event_id) DO NOTHING",
    )
    .bind(bot_id)
    .bind(event_id)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(claimed.rows_affected() == 1)
}

/// Gives a claimed event id back, when applying it failed, so the bot's retry is applied.
pub async fn release_inbound_event(db: &Db, bot_id: i64, event_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM bot_inbound_events WHERE bot_id = $1 AND event_id = $2")
        .bind(bot_id)
        .bind(event_id)
        .execute(db.writer())
        .await?;
    Ok(())
}

/// Forgets inbound event ids older than `before` (past the timestamp tolerance a replay would fail anyway).
pub async fn forget_inbound_events(db: &Db, before: Millis) -> Result<u64, sqlx::Error> {
    let done =
        sqlx::query("DELETE FROM bot_inbound_events WHERE received_at < $1").bind(before).execute(db.writer()).await?;
    Ok(done.rows_affected())
}

/// Takes the pending steps of a session, oldest first (they are shown once).
pub async fn take_pending(db: &Db, id: i64) -> Result<Vec<Value>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let rows = sqlx::query("SELECT id, step FROM flow_pending_steps WHERE session_id = $1 ORDER BY id")
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
    let Some(last) = rows.last() else { return Ok(Vec::new()) };
    let last: i64 = last.try_get("id")?;
    sqlx::query("DELETE FROM flow_pending_steps WHERE session_id = $1 AND id <= $2")
        .bind(id)
        .bind(last)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter().map(|r| Ok(serde_json::from_str(&r.try_get::<String, _>("step")?).unwrap_or(Value::Null))).collect()
}

/// An open flow invitation, as `GET /me/forms` lists it.
#[derive(Debug, Clone)]
pub struct OpenForm {
    pub reference: String,
    pub bot: String,
    pub bot_ref: String,
    pub partner: String,
    pub flow: String,
    pub title: Option<String>,
    pub state: SessionState,
    pub invited_at: Millis,
}

/// The user's flow invitations that are not completed, newest first.
pub async fn open_forms(db: &Db, phone: &str) -> Result<Vec<OpenForm>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT s.ref, b.code AS bot, b.ref AS bot_ref, p.code AS partner, s.flow, s.title, s.state, s.invited_at \
         FROM flow_sessions s JOIN bots b ON b.id = s.bot_id JOIN partners p ON p.id = b.partner_id WHERE s.phone = $1 AND s.kind = 'flow' AND s.state <> 'completed' AND s.channel IS NULL \
         ORDER BY s.id DESC",
    )
    .bind(phone)
    .fetch_all(db.reader())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(OpenForm {
                reference: r.try_get("ref")?,
                bot: r.try_get("bot")?,
                bot_ref: r.try_get("bot_ref")?,
                partner: r.try_get("partner")?,
                flow: r.try_get::<Option<String>, _>("flow")?.unwrap_or_default(),
                title: r.try_get("title")?,
                state: super::decode_name(r, "state")?,
                invited_at: r.try_get("invited_at")?,
            })
        })
        .collect()
}
