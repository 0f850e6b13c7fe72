//! The component upload of a `local` bot: streamed to disk and hashed, compiled a few at a time.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use futures_util::StreamExt;
use serde::Serialize;
use utoipa::ToSchema;

use super::{Component, owned};
use crate::bots::manage as bots;
use crate::clock::record_time;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::openapi::Binary;
use crate::http::state::AppState;
use crate::http::{E404, E503};
use crate::runtime::{ComponentSource, RuntimeError, WIT_VERSIONS_SERVED, WhenBusy};

/// `{"component": …}`.
#[derive(Serialize, ToSchema)]
#[schema(as = BotComponentUploaded)]
pub(super) struct Uploaded {
    component: Component,
}

/// Upload the bot's Wasm component.
///
/// Raw bytes, Content-Type application/wasm (or application/octet-stream), up to HUBBUB_COMPONENT_LIMIT (64
/// MiB by default; streamed to disk); 422 invalid_component when it is not a hubbub:bot component; 422
/// whatsapp_menu when `whatsapp` is among the bot's channels and its first steps (as a chat, and in each
/// flow) hold a menu WhatsApp cannot show (more than 3 reply buttons, more than 10 list rows, titles too
/// long), each reason listed.
/// Compilations run a few at a time (HUBBUB_BOT_COMPILE_CONCURRENCY): when all are busy the upload is
/// refused at once with 503 and Retry-After.
#[utoipa::path(
    put,
    path = "/bots/{code}/component",
    tag = "bots",
    security(("partnerKey" = [])),
    request_body(content((Binary = "application/wasm"), (Binary = "application/octet-stream"))),
    responses(
        (status = 200, description = "The component", body = Uploaded),
        (status = 404, response = E404),
        (status = 503, response = E503),
    )
)]
pub(super) async fn upload_bot_component(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    Path(code): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Uploaded>> {
    let bot = owned(&state, &partner, &code).await?;
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !content_type.starts_with("application/wasm") && !content_type.starts_with("application/octet-stream") {
        return Err(ApiError::bad_request("Content-Type must be application/wasm"));
    }
    let upload = receive_upload(&state, &headers, body).await?;
    let source = ComponentSource::File { path: upload.file.path(), sha256_hex: upload.sha256_hex.clone() };
    let loaded = state.runtime.load_from(source, WhenBusy::Refuse).await.map_err(|e| match e {
        RuntimeError::CompilerBusy => {
            ApiError::unavailable(UPLOAD_RETRY_AFTER_S, "every component compiler is busy; upload again shortly")
        }
        busy @ (RuntimeError::Busy | RuntimeError::QueueFull) => ApiError::unavailable(1, busy.to_string()),
        RuntimeError::InvalidComponent(why) => {
            let served: Vec<String> = WIT_VERSIONS_SERVED.iter().map(|v| format!("hubbub:bot@{v}")).collect();
            let accepted = served.join(", ");
            ApiError::unprocessable(
                "invalid_component",
                format!("not a component this host runs (it accepts {accepted}, as in wit/ of the repository): {why}"),
            )
        }
        other => ApiError::unprocessable(
            "invalid_component",
            format!("the component failed when asked for its flows: {other}"),
        ),
    })?;
    let bytes = tokio::fs::read(upload.file.path()).await.map_err(ApiError::internal)?;
    let now = state.now();
    let flows = bots::install(&state.flows(), &bot, &loaded.digest, &bytes, &loaded.flows, now).await?;
    tracing::info!(bot = %bot.code, digest = %loaded.digest, size = loaded.size, "component uploaded");
    Ok(Json(Uploaded {
        component: Component {
            digest: loaded.digest,
            size: loaded.size as i64,
            flows,
            uploaded_at: Some(record_time(now)),
        },
    }))
}

/// Seconds an upload refused for busy compilers is told to wait.
const UPLOAD_RETRY_AFTER_S: u64 = 5;

/// A component upload, on disk (removed when dropped) with the SHA-256 of its bytes.
pub(super) struct Upload {
    file: tempfile::NamedTempFile,
    sha256_hex: String,
}

/// Streams a request body to a temporary file beside the component cache, hashing it on the way, so an
/// upload never sits in memory whole; over `HUBBUB_COMPONENT_LIMIT` bytes is 413.
pub(super) async fn receive_upload(state: &AppState, headers: &HeaderMap, body: Body) -> ApiResult<Upload> {
    use sha2::{Digest, Sha256};
    use tokio::io::AsyncWriteExt;
    let limit = state.config.component_limit;
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large());
    }
    let file = tempfile::Builder::new()
        .prefix("upload-")
        .suffix(".wasm")
        .tempfile_in(&state.config.component_cache_dir)
        .map_err(ApiError::internal)?;
    let mut out = tokio::fs::File::from_std(file.as_file().try_clone().map_err(ApiError::internal)?);
    let mut hasher = Sha256::new();
    let mut size = 0usize;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("could not read the body: {e}")))?;
        size += chunk.len();
        if size > limit {
            return Err(ApiError::payload_too_large());
        }
        hasher.update(&chunk);
        out.write_all(&chunk).await.map_err(ApiError::internal)?;
    }
    out.flush().await.map_err(ApiError::internal)?;
    Ok(Upload { file, sha256_hex: crate::secrets::hex(&hasher.finalize()) })
}
