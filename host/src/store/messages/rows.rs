//! A hub message as it is stored, and reads of messages by id or ref (whoever sent them).

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::clock::Millis;
use crate::names::{Channel, Direction, MessageState};
use crate::store::{Db, decode_name};

#[derive(Debug, Clone)]
pub struct Message {
    pub id: i64,
    pub reference: String,
    pub partner_id: i64,
    pub partner_code: String,
    /// The partner's name, as people see it.
    pub partner_name: String,
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
    /// When a scheduled message is sent (`None`: at once).
    pub send_at: Option<Millis>,
    /// Why it failed without a try, by the person's choice (`blocked_by_user`, `marketing_refused`).
    pub error: Option<String>,
    /// The member who wrote it (an agent's reply in a conversation), and their display name then.
    pub author_id: Option<i64>,
    pub author_name: Option<String>,
    /// The broadcast it is one of (`None`: sent on its own).
    pub broadcast_id: Option<i64>,
}

impl Message {
    /// Whether the message, as it is now, has just arrived in its user's hub (`sent` in the app): the change
    /// that tells the user's app `message.created` (for a hub message, outside a conversation).
    pub fn arrived_in_hub(&self) -> bool {
        self.channel == Some(Channel::Inapp) && self.state == MessageState::Sent
    }

    /// The message as the partner's figures count its changes (`store::rollups::messages`).
    pub fn counted(&self) -> crate::store::rollups::messages::Subject<'_> {
        crate::store::rollups::messages::Subject {
            partner_id: self.partner_id,
            template: self.template_code.as_deref(),
            broadcast_id: self.broadcast_id,
            direction: self.direction,
            state: self.state,
            channel: self.channel,
            created_at: self.created_at,
            send_at: self.send_at,
        }
    }
}

pub(crate) const COLUMN_LIST: &str = "m.id, m.ref, m.partner_id, p.code AS partner_code, p.name AS partner_name, m.phone, m.direction, \
    m.content_type, m.body, m.rendered_body, m.template_code, m.lang, m.priority, m.content, m.state, \
    m.channel, m.seq, m.conversation_id, m.developer_id, m.created_at, m.request_hash, m.send_at, m.error, m.author_id, m.author_name, m.broadcast_id";

pub(crate) const COLUMNS: &str = const_format::concatcp!("SELECT ", COLUMN_LIST);

pub(crate) const FROM: &str = " FROM messages m JOIN partners p ON p.id = m.partner_id ";

pub(crate) const SELECT: &str = const_format::concatcp!(COLUMNS, FROM);

pub(crate) fn from_row(row: &AnyRow) -> Result<Message, sqlx::Error> {
    let content: String = row.try_get("content")?;
    Ok(Message {
        id: row.try_get("id")?,
        reference: row.try_get("ref")?,
        partner_id: row.try_get("partner_id")?,
        partner_code: row.try_get("partner_code")?,
        partner_name: row.try_get("partner_name")?,
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
        channel: crate::store::decode_optional_name(row, "channel")?,
        seq: row.try_get("seq")?,
        conversation_id: row.try_get("conversation_id")?,
        developer_id: row.try_get("developer_id")?,
        created_at: row.try_get("created_at")?,
        send_at: row.try_get("send_at")?,
        error: row.try_get("error")?,
        author_id: row.try_get("author_id")?,
        author_name: row.try_get("author_name")?,
        broadcast_id: row.try_get("broadcast_id")?,
    })
}

/// One of the partner's messages.
pub async fn find_message(db: &Db, partner_id: i64, id: i64) -> Result<Option<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.partner_id = $1 AND m.id = $2");
    let row = sqlx::query(sql).bind(partner_id).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// Messages by id, whoever sent them (a message that is gone is missing from the answer).
pub async fn find_many(db: &Db, ids: &[i64]) -> Result<std::collections::HashMap<i64, Message>, sqlx::Error> {
    let mut found = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let sql = format!("{SELECT}WHERE m.id IN ({})", vec!["?"; chunk.len()].join(", "));
        let mut read = crate::store::query_rows(db.backend(), &sql, chunk.len());
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

/// A message by id, whoever sent it (delivery workers).
pub async fn find_any(db: &Db, id: i64) -> Result<Option<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.id = $1");
    let row = sqlx::query(sql).bind(id).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}

/// A message by its ref, whoever sent it.
pub async fn find_by_ref(db: &Db, reference: &str) -> Result<Option<Message>, sqlx::Error> {
    let sql = const_format::concatcp!(SELECT, "WHERE m.ref = $1");
    let row = sqlx::query(sql).bind(reference).fetch_optional(db.reader()).await?;
    row.as_ref().map(from_row).transpose()
}
