//! `/me`: the app's side, for an end user with a JWT. The hub inbox (fetching marks messages
//! `delivered`), read marks, the account, bots and open forms (support threads: `http::conversations`). Every call counts as
//! device activity (see `auth::UserAuth`).

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::QueryMap;
use super::accounts::user_account;
use super::messages::message_json;
use crate::auth::UserAuth;
use crate::clock::record_time;
use crate::e2e;
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::messages::MessageState;
use crate::state::AppState;
use crate::store::{accounts, bots, flows, messages};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/messages", get(inbox))
        .route("/me/messages/{ref}/read", post(read))
        .route("/me/account", get(account))
        .route("/me/bots", get(my_bots))
        .route("/me/forms", get(my_forms))
}

async fn inbox(State(state): State<AppState>, user: UserAuth, query: QueryMap) -> ApiResult<Json<Value>> {
    let page = query.page()?;
    let mut rows = messages::list_hub(&state.db, &user.phone, page.before, page.fetch()).await?;
    // The app now has these messages: they are delivered, in the hub.
    let now = state.now();
    let mut tx = state.db.writer().begin().await?;
    for m in rows.iter_mut().take(page.limit as usize).filter(|m| MessageState::UNDELIVERED.contains(&m.state)) {
        if let Some(moved) =
            messages::advance_in(&mut tx, m.id, MessageState::Delivered, Some("inapp"), now, events::message_status)
                .await?
        {
            *m = moved;
        }
    }
    tx.commit().await?;
    // Each device sees its own key wrap of a sealed message (`?device_uuid=` when the token names none).
    let device = query.text("device_uuid").or(user.device);
    Ok(Json(page.respond(rows, |m| m.id, |m| device_view(m, device.as_deref()))))
}

/// A message as one of the user's devices sees it: the key wraps of other devices left out.
fn device_view(m: &messages::Message, device: Option<&str>) -> Value {
    let mut record = message_json(m);
    e2e::envelope_for_device(&mut record, device);
    record
}

async fn read(
    State(state): State<AppState>,
    user: UserAuth,
    Path(reference): Path<String>,
    query: QueryMap,
) -> ApiResult<Json<Value>> {
    let m = messages::find_by_ref(&state.db, &reference)
        .await?
        .filter(|m| m.phone == user.phone)
        .ok_or_else(|| ApiError::not_found("message"))?;
    let mut tx = state.db.writer().begin().await?;
    let moved =
        messages::advance_in(&mut tx, m.id, MessageState::Read, Some("inapp"), state.now(), events::message_status)
            .await?;
    tx.commit().await?;
    let device = query.text("device_uuid").or(user.device);
    Ok(Json(device_view(&moved.unwrap_or(m), device.as_deref())))
}

async fn account(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<Value>> {
    let account =
        accounts::find_account(&state.db, &user.phone).await?.ok_or_else(|| ApiError::not_found("account"))?;
    Ok(Json(serde_json::to_value(user_account(&state, &account).await?).expect("a record serialises")))
}

async fn my_bots(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<Value>> {
    let rows = bots::list_for_user(&state.db, &user.phone).await?;
    let data: Vec<Value> = rows
        .iter()
        .map(|b| json!({"code": b.code, "name": b.name, "partner": {"code": b.partner_code, "name": b.partner_name}}))
        .collect();
    Ok(Json(json!({ "data": data, "next_cursor": null })))
}

async fn my_forms(State(state): State<AppState>, user: UserAuth) -> ApiResult<Json<Value>> {
    let rows = flows::open_forms(&state.db, &user.phone).await?;
    let data: Vec<Value> = rows
        .iter()
        .map(|f| json!({"ref": f.reference, "bot": f.bot, "flow": f.flow, "title": f.title, "state": f.state, "invited_at": record_time(f.invited_at)}))
        .collect();
    Ok(Json(json!({ "data": data, "next_cursor": null })))
}
