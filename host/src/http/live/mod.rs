//! Live: the event streams of the API, as Server-Sent Events. A user's stream (`GET /me/events`, [`user`])
//! and a console's (`GET /conversations/events`, [`console`]) are each an [`sse::Tail`] over one key's event
//! log (`store::user_events`): a user's phone, or a partner's key. The streams open on this host are
//! counted in [`registry`] and woken by [`wakes`] (PostgreSQL's `LISTEN`, or a tail of SQLite's log).

pub mod console;
pub mod registry;
pub mod sse;
pub mod user;
pub mod wakes;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(user::stream_ticket))
        .routes(routes!(user::event_stream))
        .routes(routes!(console::conversation_events))
}
