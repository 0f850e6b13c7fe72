//! Data taken out. `GET /exports/messages`: a partner's, every message of the partner (hub and conversation
//! messages, with their delivery attempts) as NDJSON, oldest first, read a page at a time: memory stays flat
//! whatever the number of messages; owners and admins only, each export written to the audit log (who, when,
//! what). `/me/export`: a person's, a zip of every record about them prepared in the background
//! ([`crate::exports`]) and downloaded from a signed link for 24 hours.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::messages::{AttemptRecord, MessageRecord};
use super::{ApiQuery, E403, E404, E422};
use crate::clock::{Millis, record_time};
use crate::http::auth::{PartnerAuth, UserAuth};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::messages::{attempts_of, export_page};
use crate::store::Db;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(export_messages))
        .routes(routes!(start_my_export))
        .routes(routes!(my_export))
        .routes(routes!(download_my_export))
}

/// Messages read from the database at a time while an export streams.
const PAGE: i64 = 500;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ExportQuery {
    /// Only messages created at this time or later (RFC 3339, e.g. `2026-12-01T00:00:00Z`). Absent: all.
    #[param(format = DateTime)]
    since: Option<String>,
}

/// Export my messages (NDJSON).
///
/// Every message of the partner, hub and conversation messages alike, oldest first, one JSON object a line:
/// the message as `GET /messages/{id}` gives it, with its `attempts`. Streamed as it is read (a page at a
/// time), so an export of millions of messages holds no more than a page in memory; a client reads it line by
/// line. Owners and admins only; each export is recorded in the audit log.
#[utoipa::path(
    get,
    path = "/exports/messages",
    tag = "messages",
    security(("partnerKey" = []), ("memberSession" = [])),
    params(ExportQuery),
    responses(
        (status = 200, description = "One message a line (application/x-ndjson)", content_type = "application/x-ndjson", body = MessageRecord),
        (status = 403, response = E403),
        (status = 422, response = E422)
    )
)]
async fn export_messages(
    State(state): State<AppState>,
    PartnerAuth(partner): PartnerAuth,
    ApiQuery(query): ApiQuery<ExportQuery>,
) -> ApiResult<Response> {
    let since = match query.since.as_deref().map(str::trim) {
        None => None,
        Some(text) => Some(
            chrono::DateTime::parse_from_rfc3339(text)
                .map_err(|_| {
                    ApiError::validation("since", "since is a time in RFC 3339 form, e.g. 2026-12-01T00:00:00Z")
                })?
                .timestamp_millis(),
        ),
    };
    let pages = futures_util::stream::unfold(Some(0_i64), move |after| {
        let db = state.db.clone();
        async move {
            let after = after?;
            match page(&db, partner.id, since, after).await {
                Ok(None) => None,
                Ok(Some((lines, last))) => Some((Ok::<Bytes, sqlx::Error>(lines), Some(last))),
                // The answer has begun: a failure can only end it early (the client sees no final newline).
                Err(e) => {
                    tracing::warn!(error = %e, "a messages export failed while streaming");
                    Some((Err(e), None))
                }
            }
        }
    });
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(pages)).into_response())
}

/// The lines of the page of messages after the id `after`, and the last id in it; `None` at the end.
async fn page(
    db: &Db,
    partner_id: i64,
    since: Option<Millis>,
    after: i64,
) -> Result<Option<(Bytes, i64)>, sqlx::Error> {
    let messages = export_page(db, partner_id, since, after, PAGE).await?;
    let Some(last) = messages.last().map(|m| m.id) else { return Ok(None) };
    let ids: Vec<i64> = messages.iter().map(|m| m.id).collect();
    let mut attempts = attempts_of(db, &ids).await?;
    let mut lines = Vec::with_capacity(messages.len() * 512);
    for m in &messages {
        let mut record = MessageRecord::from(m);
        record.attempts =
            Some(attempts.remove(&m.id).unwrap_or_default().into_iter().map(AttemptRecord::from).collect());
        serde_json::to_writer(&mut lines, &record).expect("a record serialises");
        lines.push(b'\n');
    }
    Ok(Some((Bytes::from(lines), last)))
}

/// A person's export of their data.
#[derive(Serialize, ToSchema)]
#[schema(as = PersonExport)]
struct PersonExportRecord {
    export_id: String,
    /// `preparing`, then `ready` (download it from `download_url`) or `failed` (ask for another).
    #[schema(pattern = "^(preparing|ready|failed)$")]
    state: String,
    created_at: String,
    /// Once `ready`: where the zip is downloaded, a path on this host that needs no token (keep it to
    /// yourself), good until `expires_at`.
    download_url: Option<String>,
    expires_at: Option<String>,
    /// The zip's size in bytes, once ready.
    size: Option<i64>,
    /// Why it failed.
    error: Option<String>,
}

fn export_record(state: &AppState, e: &crate::exports::PersonExport) -> PersonExportRecord {
    let ready = e.state == "ready";
    PersonExportRecord {
        export_id: e.id.clone(),
        state: e.state.clone(),
        created_at: record_time(e.created_at),
        download_url: ready.then(|| {
            let signature = crate::exports::download_signature(&state.jwt_secret, &e.id);
            format!("/api/v1/me/export/{}/download/{signature}", e.id)
        }),
        expires_at: if ready { e.expires_at.map(record_time) } else { None },
        size: e.size,
        error: e.error.clone(),
    }
}

/// Export my data.
///
/// Prepares a zip of every record the service holds about me — every partner's messages to and from me
/// with their history and delivery attempts, conversations, bot sessions, payments, my account and links,
/// preferences, devices and opt-outs, as JSON, and the files of my messages — in the background; follow it
/// with `GET /me/export/{export_id}`. End-to-end encrypted messages are exported as the ciphertext the
/// service holds. While one is being prepared, asking again answers that one. Each partner I am linked to
/// has the request in its audit log.
#[utoipa::path(
    post,
    path = "/me/export",
    tag = "users",
    security(("userJwt" = [])),
    responses(
        (status = 202, description = "Being prepared", body = PersonExportRecord),
        (status = 401, response = crate::http::E401)
    )
)]
async fn start_my_export(
    State(state): State<AppState>,
    user: UserAuth,
    crate::http::abuse::ClientIp(client): crate::http::abuse::ClientIp,
) -> ApiResult<(StatusCode, Json<PersonExportRecord>)> {
    let started = crate::exports::start(&state.db, &state.clock, &user.phone, &client.to_string()).await?;
    Ok((StatusCode::ACCEPTED, Json(export_record(&state, &started))))
}

/// One of my exports: its state and, once ready, its download link.
#[utoipa::path(
    get,
    path = "/me/export/{export_id}",
    tag = "users",
    security(("userJwt" = [])),
    params(("export_id" = String, Path, description = "The export's id (`exp_…`)")),
    responses(
        (status = 200, description = "The export", body = PersonExportRecord),
        (status = 404, response = E404)
    )
)]
async fn my_export(
    State(state): State<AppState>,
    user: UserAuth,
    Path(export_id): Path<String>,
) -> ApiResult<Json<PersonExportRecord>> {
    let found = crate::exports::find(&state.db, &user.phone, &export_id).await?;
    let found = found.ok_or_else(|| ApiError::not_found("export"))?;
    Ok(Json(export_record(&state, &found)))
}

/// Download an export (the zip).
///
/// The `download_url` of a ready export: no token needed, the link is signed; `404` once it lapsed (24
/// hours after it was ready) or when the signature is not this export's.
#[utoipa::path(
    get,
    path = "/me/export/{export_id}/download/{signature}",
    tag = "users",
    params(
        ("export_id" = String, Path, description = "The export's id"),
        ("signature" = String, Path, description = "The link's signature, as `download_url` gives it")
    ),
    responses(
        (status = 200, description = "The zip", content((super::openapi::Binary = "application/zip"))),
        (status = 404, response = E404)
    )
)]
async fn download_my_export(
    State(state): State<AppState>,
    Path((export_id, signature)): Path<(String, String)>,
) -> ApiResult<Response> {
    let archive = crate::exports::download(&state.db, &state.jwt_secret, &export_id, &signature, state.now()).await?;
    let archive = archive.ok_or_else(|| ApiError::not_found("export"))?;
    let disposition = format!(
        "attachment; filename=\"hubbub-export-{}.zip\"",
        crate::clock::record_time(state.now()).replace([' ', ':'], "-")
    );
    Ok(([(header::CONTENT_TYPE, "application/zip".to_string()), (header::CONTENT_DISPOSITION, disposition)], archive)
        .into_response())
}
