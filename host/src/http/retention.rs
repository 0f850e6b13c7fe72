//! `/settings/retention`: how many days the partner keeps each kind of its data (the retention worker,
//! retention.rs, removes what is older).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::auth::PartnerAuth;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::http::{ApiJson, E403, E422};
use crate::retention;
use crate::retention::Keep;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_retention, set_retention))
}

/// Days the partner keeps each kind of its data; `null` keeps it as long as the host does (`max_days`, or
/// forever when the host sets no ceiling). What is older is removed by a background worker within minutes,
/// from every list, search and export; what still waits to go (a scheduled message, a webhook event not yet
/// delivered, a broadcast still sending) is kept until it went.
#[derive(Serialize, ToSchema)]
#[schema(as = RetentionSettings)]
struct Retention {
    /// Hub messages (those outside conversations), with their attempts and history.
    messages_days: Option<i64>,
    /// Conversations' messages; a conversation whose last message is older goes whole, with its notes.
    conversations_days: Option<i64>,
    /// Uploaded media; a message that showed a file removed keeps its text, and the file answers `404`.
    media_days: Option<i64>,
    /// Webhook deliveries (delivered or given up; never one still to be delivered).
    webhook_deliveries_days: Option<i64>,
    /// Bots' sessions, counted from their last activity; one with a payment keeps the payment's record
    /// without what the bot kept or showed.
    bot_sessions_days: Option<i64>,
    /// The host's ceiling (`HUBBUB_RETENTION_MAX_DAYS`): nothing is kept longer, whatever is chosen here;
    /// `null`: none.
    max_days: Option<i64>,
}

/// How long the partner keeps each kind of its data, in days (see `RetentionSettings`): each 1 or more, no
/// more than the host's `max_days` (36,500 without one); `null` or absent keeps that kind as long as the
/// host does.
#[derive(Deserialize, ToSchema)]
#[schema(as = RetentionUpdate)]
struct Update {
    #[schema(minimum = 1, maximum = 36500)]
    messages_days: Option<i64>,
    #[schema(minimum = 1, maximum = 36500)]
    conversations_days: Option<i64>,
    #[schema(minimum = 1, maximum = 36500)]
    media_days: Option<i64>,
    #[schema(minimum = 1, maximum = 36500)]
    webhook_deliveries_days: Option<i64>,
    #[schema(minimum = 1, maximum = 36500)]
    bot_sessions_days: Option<i64>,
}

impl Retention {
    fn of(keep: Keep, ceiling: Option<u32>) -> Retention {
        Retention {
            messages_days: keep.messages_days,
            conversations_days: keep.conversations_days,
            media_days: keep.media_days,
            webhook_deliveries_days: keep.webhook_deliveries_days,
            bot_sessions_days: keep.bot_sessions_days,
            max_days: ceiling.map(i64::from),
        }
    }
}

impl Update {
    fn keep(&self) -> Keep {
        Keep {
            messages_days: self.messages_days,
            conversations_days: self.conversations_days,
            media_days: self.media_days,
            webhook_deliveries_days: self.webhook_deliveries_days,
            bot_sessions_days: self.bot_sessions_days,
        }
    }
}

/// How long my data is kept.
#[utoipa::path(
    get,
    path = "/settings/retention",
    tag = "settings",
    security(("partnerKey" = []), ("memberSession" = [])),
    responses((status = 200, description = "The retention settings", body = Retention), (status = 403, response = E403))
)]
async fn get_retention(State(state): State<AppState>, PartnerAuth(partner): PartnerAuth) -> ApiResult<Json<Retention>> {
    let keep = retention::chosen(&state.db, partner.id).await?;
    Ok(Json(Retention::of(keep, state.config.retention_max_days)))
}

/// Set how long my data is kept.
///
/// Each field is a number of days, 1 or more and no more than the host's `max_days`; `null` or absent keeps
/// that kind as long as the host does. The change is written to the audit log; data older than a new,
/// shorter time is removed within minutes.
#[utoipa::path(
    put,
    path = "/settings/retention",
    tag = "settings",
    security(("partnerKey" = []), ("memberSession" = [])),
    request_body = Update,
    responses(
        (status = 200, description = "The retention settings", body = Retention),
        (status = 403, response = E403),
        (status = 422, response = E422)
    )
)]
async fn set_retention(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiJson(req): ApiJson<Update>,
) -> ApiResult<Json<Retention>> {
    let keep = req.keep();
    let ceiling = state.config.retention_max_days;
    retention::choose(&state.db, partner.id, &keep, ceiling).await?;
    Ok(Json(Retention::of(keep, ceiling)))
}
