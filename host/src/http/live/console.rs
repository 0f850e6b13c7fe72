//! `GET /conversations/events`: the partner's support conversations live, as Server-Sent Events — what the
//! console's inbox and open thread follow instead of polling.
//!
//! The same machinery as the users' stream (`GET /me/events`): the partner's events are kept in the event
//! log under the partner's key, written in the transactions that make the changes, and woken by
//! PostgreSQL's `NOTIFY` (or SQLite's tail); `Last-Event-ID` replays what a reconnecting console missed.
//! A member's browser opens it with its session cookie (`EventSource` sends it on the same origin); an API
//! client with the partner key. At each heartbeat the key or session is checked again: revoked or signed
//! out, a `logout` event ends the stream.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::json;

use super::sse::{Audience, Follow, Tail, last_event_id, sse};
use crate::conversations;
use crate::conversations::Reader;
use crate::http::auth::PartnerWatch;
use crate::http::conversations::record;
use crate::http::error::ApiResult;
use crate::http::messages::MessageRecord;
use crate::http::state::AppState;
use crate::http::{ApiQuery, E401, E403, E429, E503};
use crate::messages::Message;
use crate::names::UserEventKind;
use crate::store::user_events::{UserEvent, partner_key};

/// How a console reconnects.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// The last event id the console has (instead of the `Last-Event-ID` header).
    last_event_id: Option<String>,
}

/// The partner's conversations, live (Server-Sent Events).
///
/// Events: `conversation.message` (`{conversation, message}`: a new message from either side, or one whose
/// state moved — delivered, read), `conversation.updated` (the conversation: its state, its assignee, or a
/// new internal note), `conversation.typing` (`{conversation_id, from: "user"}`: the person is writing in the
/// app; show it for a few seconds), `webhook.deliveries` (`{}`: the partner's webhook deliveries were tried, so the
/// delivery log moved; at most one a second), `reset` (the events since the
/// given id are no longer kept: fetch afresh) and
/// `logout` (the key was revoked or the session ended). Each `id` increases per partner; reconnect with
/// `Last-Event-ID` to get what was missed (kept 24 hours). End-to-end encrypted messages carry their
/// envelope, never a body. A member's session cookie or the partner key opens it.
#[utoipa::path(
    get,
    path = "/conversations/events",
    tag = "conversations",
    security(("partnerKey" = []), ("memberSession" = [])),
    params(EventsQuery, ("Last-Event-ID" = Option<String>, Header, description = "The last event id the console has.")),
    responses(
        (status = 200, description = "The stream", content_type = "text/event-stream", body = String),
        (status = 401, response = E401),
        (status = 403, response = E403),
        (status = 429, response = E429),
        (status = 503, response = E503),
    )
)]
pub async fn conversation_events(
    State(state): State<AppState>,
    watch: PartnerWatch,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let slot = state.streams.open(&watch.holder)?;
    let key = partner_key(watch.partner.id);
    let (follow, reset) = Follow::open(&state, key, last_event_id(&headers, query.last_event_id)).await?;
    Ok(sse(&state, Tail::new(follow, reset, slot, Console { state: state.clone(), watch })))
}

/// One console's stream.
struct Console {
    state: AppState,
    watch: PartnerWatch,
}

impl Audience for Console {
    async fn render(&mut self, event: UserEvent, message: Option<Message>) -> Option<Event> {
        match self.rendered(&event, message).await {
            Ok(rendered) => rendered,
            Err(error) => {
                tracing::warn!(?error, "a console stream could not render an event");
                None
            }
        }
    }

    async fn still_valid(&mut self) -> bool {
        self.watch.still_valid(&self.state).await.unwrap_or(true)
    }
}

impl Console {
    /// An event as the console sees it; `None` when what it is about is gone (or not the partner's).
    async fn rendered(&self, event: &UserEvent, message: Option<Message>) -> ApiResult<Option<Event>> {
        let partner_id = self.watch.partner.id;
        let body = match event.kind {
            UserEventKind::ConversationMessage => {
                let Some(m) = message else { return Ok(None) };
                let Some(c) = m.conversation_id else { return Ok(None) };
                let Some(c) = conversations::find_for_partner(&self.state.db, partner_id, c).await? else {
                    return Ok(None);
                };
                let conversation = record(&self.state, &c, Reader::Agent).await?;
                json!({ "conversation": conversation, "message": MessageRecord::from(&m) })
            }
            UserEventKind::ConversationUpdated => {
                let Some(c) = conversations::find_for_partner(&self.state.db, partner_id, event.subject_id).await?
                else {
                    return Ok(None);
                };
                json!(record(&self.state, &c, Reader::Agent).await?)
            }
            // The delivery log moved: the console's Webhooks page fetches it again (nothing else is said).
            UserEventKind::WebhookDeliveries => json!({}),
            // The person writes in the app: shown a few seconds, never when replayed stale.
            UserEventKind::ConversationTyping => {
                if self.state.now() - event.created_at > crate::conversations::TYPING_SHOWN_MS {
                    return Ok(None);
                }
                json!({ "conversation_id": event.subject_id, "from": "user" })
            }
            _ => return Ok(None),
        };
        Ok(Some(Event::default().id(event.seq.to_string()).event(event.kind.as_str()).data(body.to_string())))
    }
}
