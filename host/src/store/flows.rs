//! Flow sessions: invitations to a bot's flow, their progress and the guest's state between steps.

use sqlx::Row;

use super::Db;
use crate::clock::Millis;

/// An open flow invitation, as `GET /me/forms` lists it.
#[derive(Debug, Clone)]
pub struct OpenForm {
    pub reference: String,
    pub bot: String,
    pub flow: String,
    pub title: Option<String>,
    pub state: String,
    pub invited_at: Millis,
}

/// The user's flow invitations that are not completed, newest first.
pub async fn open_forms(db: &Db, phone: &str) -> Result<Vec<OpenForm>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT s.ref, b.code AS bot, s.flow, s.title, s.state, s.invited_at FROM flow_sessions s \
         JOIN bots b ON b.id = s.bot_id WHERE s.phone = $1 AND s.kind = 'flow' AND s.state <> 'completed' \
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
                flow: r.try_get::<Option<String>, _>("flow")?.unwrap_or_default(),
                title: r.try_get("title")?,
                state: r.try_get("state")?,
                invited_at: r.try_get("invited_at")?,
            })
        })
        .collect()
}
