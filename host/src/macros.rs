//! Macros: several actions an agent applies to a conversation at once, kept by the partner under a name
//! (`/api/v1/macros`). What an action may be, and the checks of a list of them against what the partner
//! has (its labels, canned replies and members), are decided here, once for saving a macro and again for
//! applying it (a label or a reply may have gone since). Applied, the actions run in one order whatever
//! order they were saved in: the reply first (the one that can be refused, by the conversation), then the
//! labels, the note, the assignee, and closing last.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::clock::Millis;
use crate::store::macros::{self as macro_store, Written};
pub use crate::store::macros::{Macro, list};
use crate::store::{Db, canned_replies, members};
use crate::validate::{Invalid, KeepError};

/// The most actions a macro has.
pub const MAX_ACTIONS: usize = 10;
/// The longest text of a reply, in characters (a message's).
pub const REPLY_CHARS: usize = 4096;
/// The longest note, in characters (a note's).
pub const NOTE_CHARS: usize = 4000;

/// One action of a macro.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[schema(as = MacroAction)]
pub enum Action {
    /// Reply in the conversation (on the person's channel, signed by the member applying it): with `body`,
    /// or with the text of canned reply `canned_reply_id` as it is when applied. One of the two.
    Reply {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(min_length = 1, max_length = 4096)]
        body: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(minimum = 1)]
        canned_reply_id: Option<i64>,
    },
    /// Add these of the partner's labels (1 to 10) to the conversation.
    AddLabels {
        #[schema(min_items = 1, max_items = 10)]
        labels: Vec<String>,
    },
    /// Assign the conversation: `me` (the member applying it), `none`, or a member's id.
    Assign {
        #[schema(pattern = "^(me|none|[1-9][0-9]{0,17})$")]
        assignee: String,
    },
    /// Add an internal note (the team sees it, the person never does).
    Note {
        #[schema(min_length = 1, max_length = 4000)]
        body: String,
    },
    /// Close the conversation (the person's next message reopens it).
    Close,
}

/// Whom an [`Action::Assign`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignee {
    Applier,
    Nobody,
    Member(i64),
}

/// A macro's actions, checked against what the partner has, in the order they run.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// The reply's text (a canned reply's as it is now).
    pub reply: Option<String>,
    /// The ids of the labels to add.
    pub labels: Vec<i64>,
    pub note: Option<String>,
    pub assign: Option<Assignee>,
    pub close: bool,
}

/// A text of 1 to `max` characters, not only spaces.
fn text(field: String, body: &str, max: usize) -> Result<String, Invalid> {
    if body.trim().is_empty() || body.chars().count() > max {
        return Err(Invalid::new(field, format!("a text of 1 to {max} characters, not only spaces")));
    }
    Ok(body.to_string())
}

/// Checks `actions` against partner `partner_id`'s labels, canned replies and members: 1 to
/// [`MAX_ACTIONS`], each kind once, each naming what the partner has. The field of a refusal is
/// `actions[i]…`.
pub async fn plan(db: &Db, partner_id: i64, actions: &[Action]) -> Result<Result<Plan, Invalid>, sqlx::Error> {
    if actions.is_empty() || actions.len() > MAX_ACTIONS {
        return Ok(Err(Invalid::new("actions", format!("a macro has 1 to {MAX_ACTIONS} actions"))));
    }
    let mut plan = Plan::default();
    let mut seen = Vec::new();
    for (i, action) in actions.iter().enumerate() {
        let at = |field: &str| if field.is_empty() { format!("actions[{i}]") } else { format!("actions[{i}].{field}") };
        let kind = std::mem::discriminant(action);
        if seen.contains(&kind) {
            return Ok(Err(Invalid::new(at("type"), "each kind of action comes once in a macro")));
        }
        seen.push(kind);
        match action {
            Action::Reply { body, canned_reply_id } => match (body, canned_reply_id) {
                (Some(body), None) => match text(at("body"), body, REPLY_CHARS) {
                    Ok(body) => plan.reply = Some(body),
                    Err(e) => return Ok(Err(e)),
                },
                (None, Some(id)) => match canned_replies::find(db, partner_id, *id).await? {
                    Some(reply) => plan.reply = Some(reply.body),
                    None => {
                        return Ok(Err(Invalid::new(at("canned_reply_id"), format!("no canned reply {id} here"))));
                    }
                },
                _ => return Ok(Err(Invalid::new(at("body"), "a reply has a body or a canned_reply_id, one of them"))),
            },
            Action::AddLabels { labels: names } => {
                if names.is_empty() || names.len() > 10 {
                    return Ok(Err(Invalid::new(at("labels"), "1 to 10 labels")));
                }
                match crate::conversations::label_ids(db, partner_id, names, &at("labels")).await? {
                    Ok(ids) => plan.labels = ids,
                    Err(e) => return Ok(Err(e)),
                }
            }
            Action::Assign { assignee } => {
                let assignee = match assignee.as_str() {
                    "me" => Assignee::Applier,
                    "none" => Assignee::Nobody,
                    id => match id.parse::<i64>().ok().filter(|id| *id > 0) {
                        Some(id) if members::find(db, id).await?.is_some_and(|m| m.partner_id == partner_id) => {
                            Assignee::Member(id)
                        }
                        _ => {
                            let why = "assignee is me, none or the id of one of the partner's members";
                            return Ok(Err(Invalid::new(at("assignee"), why)));
                        }
                    },
                };
                plan.assign = Some(assignee);
            }
            Action::Note { body } => match text(at("body"), body, NOTE_CHARS) {
                Ok(body) => plan.note = Some(body),
                Err(e) => return Ok(Err(e)),
            },
            Action::Close => plan.close = true,
        }
    }
    Ok(Ok(plan))
}

/// Keeps a macro: `name` 1 to 80 characters without control characters, unique among the partner's, and
/// `actions` as [`plan`] takes them.
pub async fn create(
    db: &Db,
    partner_id: i64,
    name: Option<&str>,
    actions: &[Action],
    now: Millis,
) -> Result<Macro, KeepError> {
    let (name, actions) = checked(db, partner_id, name, actions).await?;
    written(macro_store::create(db, partner_id, &name, &actions, now).await?)
}

/// Replaces the partner's macro `id` (name and actions both, checked as for [`create`]); another partner's
/// is not found, whatever the body says.
pub async fn replace(
    db: &Db,
    partner_id: i64,
    id: i64,
    name: Option<&str>,
    actions: &[Action],
    now: Millis,
) -> Result<Macro, KeepError> {
    macro_store::find(db, partner_id, id).await?.ok_or(KeepError::NotFound("macro"))?;
    let (name, actions) = checked(db, partner_id, name, actions).await?;
    written(macro_store::update(db, partner_id, id, &name, &actions, now).await?)
}

/// Deletes the partner's macro `id`.
pub async fn delete(db: &Db, partner_id: i64, id: i64) -> Result<(), KeepError> {
    if !macro_store::delete(db, partner_id, id).await? {
        return Err(KeepError::NotFound("macro"));
    }
    Ok(())
}

/// The name and the actions, checked against what the partner has.
async fn checked(
    db: &Db,
    partner_id: i64,
    name: Option<&str>,
    actions: &[Action],
) -> Result<(String, serde_json::Value), KeepError> {
    let name = name.map(str::trim).unwrap_or("");
    if name.is_empty() || name.chars().count() > 80 || crate::validate::has_control_chars(name) {
        return Err(Invalid::new("name", "name is 1 to 80 characters, without control characters").into());
    }
    plan(db, partner_id, actions).await??;
    let actions = serde_json::to_value(actions).map_err(|e| KeepError::Database(sqlx::Error::Encode(e.into())))?;
    Ok((name.to_string(), actions))
}

fn written(w: Written) -> Result<Macro, KeepError> {
    match w {
        Written::Done(m) => Ok(m),
        Written::NotFound => Err(KeepError::NotFound("macro")),
        Written::Taken => Err(KeepError::Taken("another macro has this name".into())),
    }
}
