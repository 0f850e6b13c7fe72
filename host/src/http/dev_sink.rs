//! `/dev-sink/messages`: in dev mode, what the SMS and WhatsApp providers would have sent (OTP codes,
//! invitations, fallback texts). Only the platform partner may read it.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::QueryMap;
use crate::auth::PartnerAuth;
use crate::clock::record_time;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::dev_sink;

pub fn router() -> Router<AppState> {
    Router::new().route("/dev-sink/messages", get(list))
}

async fn list(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    if !state.config.dev {
        return Err(ApiError::not_found("route"));
    }
    if !partner.is_platform {
        return Err(ApiError::forbidden("the dev sink is for the platform partner only"));
    }
    let page = query.page()?;
    let channel = query.text("channel");
    if channel.as_deref().is_some_and(|c| c != "sms" && c != "whatsapp") {
        return Err(ApiError::validation("channel", "channel must be sms or whatsapp"));
    }
    let rows = dev_sink::list(&state.db, query.text("phone").as_deref(), channel.as_deref(), page.before, page.fetch())
        .await?;
    Ok(Json(page.respond(
        rows,
        |r| r.id,
        |r| json!({"channel": r.channel, "phone": r.phone, "text": r.text, "at": record_time(r.at)}),
    )))
}
