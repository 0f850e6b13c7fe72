//! `/exports`: a partner takes its data out. `GET /exports/messages` streams every message of the partner
//! (hub and conversation messages, with their delivery attempts) as NDJSON, oldest first, read a page at a
//! time: memory stays flat whatever the number of messages. Owners and admins only; each export is written to
//! the audit log (who, when, what).

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::messages::{AttemptRecord, MessageRecord};
use super::{ApiQuery, E403, E422};
use crate::clock::Millis;
use crate::http::auth::PartnerAuth;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::store::Db;
use crate::store::messages as store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(export_messages))
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
    let messages = store::export_page(db, partner_id, since, after, PAGE).await?;
    let Some(last) = messages.last().map(|m| m.id) else { return Ok(None) };
    let ids: Vec<i64> = messages.iter().map(|m| m.id).collect();
    let mut attempts = store::attempts_of(db, &ids).await?;
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
