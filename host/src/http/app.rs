//! The end-user web app (`web/`, built by `build.rs`) on the API's own origin: its files at their paths, and
//! `index.html` for any other page a browser opens outside `/api`, so the app's own routes (`/m/{ref}`,
//! `/forms/{ref}`, …) load it, compressed as the browser accepts (`br`, `gzip`), its content-named files
//! cached for good. What is neither stays the API's JSON 404. Release builds embed the files;
//! debug builds read them from the built folder, so a rebuilt app shows without recompiling the host.

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, REFERRER_POLICY};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
use crate::http::state::AppState;

#[derive(rust_embed::Embed)]
#[folder = "../web/dist"]
struct Assets;

/// What the app's pages may load: only this origin's scripts, styles, workers and API; images and media also
/// from HTTPS (partners' media URLs) and, in dev mode, plain HTTP; frames only from this origin (the
/// newsletter reader shows `/api/v1/content/{ref}`, which is sandboxed by its own policy) and blobs the
/// app made itself (the viewer shows a PDF from a blob typed `application/pdf`).
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob: https:; \
    media-src 'self' blob: https:; frame-src 'self' blob:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; \
    object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const DEV_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob: https: http:; \
    media-src 'self' blob: https: http:; frame-src 'self' blob:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; \
    object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The pages beside the app, by the path they answer under.
const PAGES: &[(&str, &str)] = &[("/console", "console/index.html"), ("/dashboard", "dashboard/index.html")];

/// The router's fallback: an app file, the app's page, or the API's 404.
pub async fn fallback(State(state): State<AppState>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path();
    if !matches!(method, Method::GET | Method::HEAD) || path == "/api" || path.starts_with("/api/") {
        return ApiError::not_found("route").into_response();
    }
    let name = match path.trim_start_matches('/') {
        "" => "index.html",
        name => name,
    };
    // Only plain names below the app's folder (never `..`, hidden files or empty segments).
    let plain =
        name.split('/').all(|segment| !segment.is_empty() && !segment.starts_with('.') && !segment.contains('\\'));
    // The partner console and the developer portal are pages of their own (their code loads only there);
    // every other page is the app's.
    let page = PAGES
        .iter()
        .find(|(prefix, _)| path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
        .map_or("index.html", |(_, page)| page);
    let (name, file) = match plain.then(|| Assets::get(name)).flatten() {
        Some(file) => (name, file),
        None if wants_page(&headers) => match Assets::get(page) {
            Some(file) => (page, file),
            None => return ApiError::not_found("route").into_response(),
        },
        None => return ApiError::not_found("route").into_response(),
    };
    let etag = format!("\"{}\"", crate::secrets::hex(&file.metadata.sha256_hash()));
    let cache = if name.starts_with("assets/") {
        // Vite names every bundled file by its content.
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let mut response = if headers.get(IF_NONE_MATCH).is_some_and(|tag| tag.as_bytes() == etag.as_bytes()) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(CONTENT_TYPE, content_type(name))], file.data.into_owned()).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        headers.insert(ETAG, etag);
    }
    if name.ends_with(".html") {
        let policy = if state.config.dev { DEV_POLICY } else { POLICY };
        headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(policy));
        headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    }
    response
}

/// A browser navigating to a page (it accepts HTML), not a client of the API.
fn wants_page(headers: &HeaderMap) -> bool {
    headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/html"))
}

fn content_type(name: &str) -> HeaderValue {
    let extension = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    HeaderValue::from_static(match extension {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    })
}
