//! `/media/{id}`: base64 media that was uploaded with a message, stored once, served to the partner
//! that sent it.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderValue;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::auth::PartnerAuth;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::messages::find_media;

pub fn router() -> Router<AppState> {
    Router::new().route("/media/{id}", get(get_media))
}

async fn get_media(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let media = find_media(&state.db, &id)
        .await?
        .filter(|m| m.partner_id == partner.id);
    let media = media.ok_or_else(|| ApiError::not_found("media"))?;
    let mut response = media.data.into_response();
    let mime = media
        .mimetype
        .as_deref()
        .unwrap_or("application/octet-stream");
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(mime).unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    if let Some(name) = media.filename {
        let safe: String = name
            .chars()
            .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\')
            .collect();
        if let Ok(v) = HeaderValue::from_str(&format!("inline; filename=\"{safe}\"")) {
            headers.insert(CONTENT_DISPOSITION, v);
        }
    }
    Ok(response)
}
