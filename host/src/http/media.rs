//! `/media/{id}`: base64 media uploaded with a message, stored once, served to the partner that sent
//! it and to its recipients (an end user's upload: to its partner and the user, always as a download).
//! `/content/{ref}`: the link SMS and WhatsApp texts carry for media and newsletters; the unguessable
//! message ref is the capability, and only what a partner sent to a user is served there — never a user's
//! message, so no one can publish a page, a redirect or a download on the service's origin.

use axum::extract::{Path, State};
use axum::http::header::{ACCEPT_RANGES, CONTENT_DISPOSITION, CONTENT_RANGE, CONTENT_TYPE, IF_RANGE, RANGE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use axum::http::StatusCode;
use axum::http::header::{CONTENT_SECURITY_POLICY, LOCATION, X_CONTENT_TYPE_OPTIONS};

use crate::http::auth::{AnyAuth, Credential};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::messages::{find_by_ref, find_media, media_sent_to};
use crate::names::Direction;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_media)).routes(routes!(get_content))
}

/// Download media uploaded as base64.
///
/// For the sending partner, or a recipient with a user JWT (developer keys and bot tokens are 403). Served
/// with `X-Content-Type-Options: nosniff`, `Content-Security-Policy: sandbox`, and `Content-Disposition:
/// attachment` for every type but common images, audio and video. A single `Range: bytes=…` is answered
/// with `206` and that part (so audio and video seek); several ranges, or a `Range` with `If-Range`, get
/// the whole file; a range past the end is `416` with `Content-Range: bytes */{size}`.
#[utoipa::path(
    get,
    path = "/media/{id}",
    tag = "messages",
    security(("partnerKey" = []), ("userJwt" = [])),
    responses(
        (status = 200, description = "The bytes, with the type they were sent with", content((super::openapi::Binary = "application/octet-stream"))),
        (status = 206, description = "The part that `Range` asked for, with `Content-Range`", content((super::openapi::Binary = "application/octet-stream"))),
        (status = 404, response = super::E404),
        (status = 416, response = super::E416),
    )
)]
async fn get_media(
    State(state): State<AppState>,
    AnyAuth(caller): AnyAuth,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let media = find_media(&state.db, &id).await?.ok_or_else(|| ApiError::not_found("media"))?;
    let allowed = match &caller {
        Credential::Partner(p, _) => media.partner_id == p.id,
        Credential::Member(s) => media.partner_id == s.partner.id,
        Credential::User(u) => media_sent_to(&state.db, &id, &u.sub).await?,
        Credential::Developer(_) | Credential::Bot(_) => {
            return Err(ApiError::forbidden("media is served to its sending partner and its recipients only"));
        }
    };
    if !allowed {
        return Err(ApiError::not_found("media"));
    }
    serve_media(media, &headers)
}

/// Media types a browser may show inline: images, audio and video it cannot run script in. Everything
/// else (HTML, SVG, XML, PDF, unknown) is a download.
const INLINE_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/avif",
    "image/bmp",
    "audio/mpeg",
    "audio/mp4",
    "audio/aac",
    "audio/ogg",
    "audio/wav",
    "audio/webm",
    "audio/flac",
    "video/mp4",
    "video/webm",
    "video/ogg",
    "video/quicktime",
];

/// The one part of `len` bytes that `headers` ask for, `Ok(None)` for the whole (no `Range`, one that is
/// not bytes, several ranges, or `If-Range`: there is no validator to compare it with), or `416`.
fn wanted_range(headers: &HeaderMap, len: u64) -> ApiResult<Option<std::ops::RangeInclusive<u64>>> {
    let Some(range) = headers.get(RANGE).and_then(|v| v.to_str().ok()) else { return Ok(None) };
    if headers.contains_key(IF_RANGE) || !range.trim_start().starts_with("bytes=") {
        return Ok(None);
    }
    let Ok(parsed) = http_range_header::parse_range_header(range) else { return Ok(None) };
    match parsed.validate(len) {
        Ok(mut ranges) if ranges.len() == 1 => Ok(ranges.pop()),
        Ok(_) => Ok(None),
        Err(_) => Err(ApiError::range_not_satisfiable(len)),
    }
}

/// Serves stored media so that it can never run as a page of the service's origin: `nosniff`, a
/// `sandbox` CSP, and `attachment` for an end user's upload and for every type not in [`INLINE_TYPES`];
/// with `Accept-Ranges: bytes`, and one asked-for part as `206`.
fn serve_media(media: crate::messages::StoredMedia, request: &HeaderMap) -> ApiResult<Response> {
    let mime = media.mimetype.as_deref().unwrap_or("application/octet-stream");
    let essence = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let inline = media.uploaded_by.is_none() && INLINE_TYPES.contains(&essence.as_str());
    let len = media.data.len() as u64;
    let mut response = match wanted_range(request, len)? {
        Some(part) => {
            let (start, end) = (*part.start(), *part.end());
            let mut r = media.data[start as usize..=end as usize].to_vec().into_response();
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            let value = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")).expect("digits");
            r.headers_mut().insert(CONTENT_RANGE, value);
            r
        }
        None => media.data.into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(mime).unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox; default-src 'none'"));
    let disposition = if inline { "inline" } else { "attachment" };
    let safe: Option<String> =
        media.filename.map(|name| name.chars().filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\').collect());
    let value = match safe.filter(|n| !n.is_empty()) {
        Some(name) => format!("{disposition}; filename=\"{name}\""),
        None => disposition.to_string(),
    };
    headers
        .insert(CONTENT_DISPOSITION, HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("attachment")));
    Ok(response)
}

/// The content an SMS or WhatsApp text links to (newsletter HTML, media); the ref is the capability.
///
/// Only messages a partner sent to a user are served (a user's messages are 404), and never an
/// end-to-end encrypted one.
#[utoipa::path(
    get,
    path = "/content/{ref}",
    tag = "delivery",
    responses(
        (status = 200, description = "HTML, bytes or text", content((String = "text/html"), (String = "text/plain"), (super::openapi::Binary = "application/octet-stream"))),
        (status = 206, description = "Stored media: the part that `Range` asked for (as on `/media/{id}`)", content((super::openapi::Binary = "application/octet-stream"))),
        (status = 302, description = "Links and media sent by URL redirect to it"),
        (status = 404, response = super::E404),
        (status = 416, response = super::E416),
    )
)]
async fn get_content(
    State(state): State<AppState>,
    Path(reference): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let m = find_by_ref(&state.db, &reference).await?.ok_or_else(|| ApiError::not_found("content"))?;
    if m.direction != Direction::Out || m.content.get("encryption").is_some() {
        return Err(ApiError::not_found("content"));
    }
    let redirect = |url: &str| -> ApiResult<Response> {
        let location = HeaderValue::from_str(url).map_err(|_| ApiError::not_found("content"))?;
        Ok((StatusCode::FOUND, [(LOCATION, location)]).into_response())
    };
    match m.content_type.as_str() {
        "html" => {
            let html = m.content["html"].as_str().unwrap_or("").to_string();
            // Partner HTML is shown as a document without scripts or forms.
            Ok((
                [
                    (CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
                    (
                        CONTENT_SECURITY_POLICY,
                        HeaderValue::from_static(
                            "sandbox; default-src 'none'; img-src https: data:; style-src 'unsafe-inline'",
                        ),
                    ),
                ],
                html,
            )
                .into_response())
        }
        "link" => redirect(m.content["link"]["url"].as_str().unwrap_or("")),
        "image" | "document" | "audio" | "video" => {
            let url = m.content["media"]["url"].as_str().unwrap_or("");
            match url.strip_prefix("/api/v1/media/") {
                Some(id) => serve_media(
                    find_media(&state.db, id).await?.ok_or_else(|| ApiError::not_found("content"))?,
                    &headers,
                ),
                None => redirect(url),
            }
        }
        _ => Ok(([(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], m.body.unwrap_or_default())
            .into_response()),
    }
}
