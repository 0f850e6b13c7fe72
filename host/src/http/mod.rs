//! The HTTP API: one module per resource, each exposing `router()`, merged here under `/api/v1` with the
//! layers every request passes through (request id, tracing, body limit), and the fallback: the end-user
//! web app's files and pages (`app`), else the JSON 404.
//! Request parsing helpers that every resource uses live here too.

pub mod abuse;
pub mod accounts;
pub mod analytics;
pub mod api_keys;
pub mod app;
pub mod assignment;
pub mod auth;
pub mod bots;
pub mod broadcasts;
pub mod canned_replies;
pub mod checkout;
pub mod code_limits;
pub mod conversations;
pub mod dev_sink;
pub mod developers;
pub mod error;
pub mod exports;
pub mod flows;
pub mod form_links;
pub mod health;
pub mod keys;
pub mod labels;
pub mod listener;
pub mod live;
pub mod login;
pub mod macros;
pub mod me;
pub mod media;
pub mod members;
pub mod messages;
pub mod metrics;
pub mod openapi;
pub mod passkeys;
pub mod payments;
pub mod preferences;
pub mod push;
pub mod receipts;
pub mod retention;
pub mod senders;
pub mod service_levels;
pub mod state;
pub mod templates;
pub mod webhooks;

use std::collections::HashMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderName, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;

use axum::BoxError;
use axum::error_handling::HandleErrorLayer;
use axum::response::IntoResponse;
use tower::ServiceBuilder;
use tower::timeout::TimeoutLayer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;

use crate::http::error::ApiError;
use crate::http::state::AppState;

pub use openapi::{E400, E401, E403, E404, E409, E413, E416, E422, E429, E502, E503};

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Every route of the service, each handler describing itself (`#[utoipa::path]`), with the document they
/// make: the router that serves a route is the one that documents it.
pub fn documented() -> OpenApiRouter<AppState> {
    let api = OpenApiRouter::new()
        .merge(messages::router())
        .merge(exports::router())
        .merge(templates::router())
        .merge(media::router())
        .merge(accounts::router())
        .merge(api_keys::router())
        .merge(canned_replies::router())
        .merge(labels::router())
        .merge(macros::router())
        .merge(assignment::router())
        .merge(analytics::router())
        .merge(service_levels::router())
        .merge(members::router())
        .merge(passkeys::router())
        .merge(login::router())
        .merge(me::router())
        .merge(preferences::router())
        .merge(retention::router())
        .merge(live::router())
        .merge(push::router())
        .merge(dev_sink::router())
        .merge(webhooks::router())
        .merge(conversations::router())
        .merge(keys::router())
        .merge(broadcasts::router())
        .merge(developers::router())
        .merge(bots::router())
        .merge(flows::router())
        .merge(form_links::router())
        .merge(receipts::router())
        .merge(senders::router())
        .merge(payments::router())
        .merge(openapi::router())
        .route_layer(axum::middleware::from_fn(metrics::track_request));
    // Outside `/api/v1`, and not counted in the request metrics: probes, metrics, and the dev checkout
    // page (a real route, so the web app's fallback never answers for it).
    openapi::base().nest("/api/v1", api).merge(health::router()).merge(metrics::router()).merge(checkout::router())
}

/// The whole application: every route, every layer.
pub fn app(state: AppState) -> Router {
    let body_limit = state.config.body_limit;
    let request_timeout = Duration::from_millis(state.config.request_timeout_ms.max(1));
    let (documented, _) = documented().split_for_parts();
    documented
        // The web app's files and pages, compressed (br or gzip, as the browser accepts); anything else is the
        // API's JSON 404.
        .fallback(axum::handler::Handler::layer(app::fallback, tower_http::compression::CompressionLayer::new()))
        .layer(DefaultBodyLimit::max(body_limit))
        // What members change is written to the audit log (the slot is filled by `auth`).
        .layer(axum::middleware::from_fn_with_state(state.clone(), members::audit))
        // A handler that panics answers 500 in the error shape, and the host keeps serving.
        .layer(CatchPanicLayer::custom(panic_response))
        // A request that takes longer than HUBBUB_REQUEST_TIMEOUT_MS is answered 503 `timeout`.
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(move |_: BoxError| async move { ApiError::timed_out(request_timeout) }))
                .layer(TimeoutLayer::new(request_timeout)),
        )
        // No response of the API is ever to be sniffed into another type (stored user content above all).
        .layer(SetResponseHeaderLayer::if_not_present(
            axum::http::header::X_CONTENT_TYPE_OPTIONS,
            axum::http::HeaderValue::from_static("nosniff"),
        ))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            let request_id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
            tracing::info_span!(
                "request",
                method = %req.method(),
                path = %loggable_path(req.uri().path()),
                request_id,
                partner = tracing::field::Empty,
            )
        }))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .with_state(state)
}

/// The answer to a handler that panicked: the contract's 500, the panic in the log (with the request's span).
fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    ApiError::internal(format!("handler panicked: {what}")).into_response()
}

/// The routes whose path carries a bearer capability: whoever has the path may act, with no other
/// credential (a form link, a push acknowledgement, a message's content, a person's export, the dev checkout,
/// the app's links to a form and to a message). Logs and the audit log never show that segment (see [`loggable_path`]); a test
/// checks that every documented route without a credential is here.
pub const CAPABILITY_ROUTES: &[&str] = &[
    "/api/v1/form-links/{token}",
    "/api/v1/push/ack/{token}",
    "/api/v1/content/{ref}",
    "/api/v1/me/export/{export_id}/download/{signature}",
    "/pay/{ref}",
    "/f/{token}",
    "/m/{ref}",
];

/// A request path as logs may show it: the capability segment of a [`CAPABILITY_ROUTES`] path, and every
/// message and payment ref (`msg_…`, `pay_…`: each is a capability wherever it appears, `/content/{ref}`
/// serving the message and `/pay/{ref}` the dev checkout to whoever has it), cut to its prefix.
pub fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    const REFS: [&str; 2] = ["msg_", "pay_"];
    // Read on every request: nothing is allocated unless something is masked.
    // A trailing slash (`/f/{token}/`, which the web app serves too) names the same route.
    let trimmed = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
    let matches = |route: &str| {
        route.split('/').count() == trimmed.split('/').count()
            && route.split('/').zip(trimmed.split('/')).all(|(r, s)| (r.starts_with('{') && !s.is_empty()) || r == s)
    };
    let capability = CAPABILITY_ROUTES.iter().find(|route| matches(route));
    if capability.is_none() && !REFS.iter().any(|prefix| path.contains(prefix)) {
        return std::borrow::Cow::Borrowed(path);
    }
    let mut template = capability.map(|route| route.split('/'));
    let masked: Vec<String> = path
        .split('/')
        .map(|segment| {
            let placeholder = template.as_mut().and_then(Iterator::next).is_some_and(|r| r.starts_with('{'));
            match placeholder || REFS.iter().any(|prefix| segment.starts_with(prefix)) {
                true => format!("{}…", ref_prefix(segment)),
                false => segment.to_string(),
            }
        })
        .collect();
    std::borrow::Cow::Owned(masked.join("/"))
}

/// The kind prefix of a ref (`msg_` of `msg_abc…`), if it has a short one; else nothing.
fn ref_prefix(segment: &str) -> &str {
    match segment.find('_') {
        Some(i) if (1..=4).contains(&i) && segment[..i].bytes().all(|b| b.is_ascii_lowercase()) => &segment[..=i],
        _ => "",
    }
}

/// A JSON object body. Not JSON, not an object or the wrong content type → 400 `bad_request`; over the
/// body limit → 413; a field of the wrong type → 422 `validation` naming the field.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let value = json_object(req, state).await?;
        parse_value(value).map(ApiJson)
    }
}

/// The request body as a JSON object (see [`ApiJson`]).
pub async fn json_object<S: Send + Sync>(req: Request, state: &S) -> Result<Value, ApiError> {
    let is_json = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| {
        ct.split(';').next().is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
    });
    if !is_json {
        return Err(ApiError::bad_request("Content-Type must be application/json"));
    }
    let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::payload_too_large()
        } else {
            ApiError::bad_request(format!("could not read the body: {rejection}"))
        }
    })?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("body must be a JSON object"));
    }
    let mut value = value;
    whole_numbers_as_integers(&mut value);
    Ok(value)
}

/// JSON has one kind of number: `3.0` is the integer 3 (JSON Schema says so too, and the document's
/// `integer` fields promise to take it), while serde would refuse it for an `i64`. Numbers with no
/// fraction, within the range a double holds exactly, become integers; others stay as they are.
fn whole_numbers_as_integers(value: &mut Value) {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() <= EXACT) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// Deserialises a JSON value, naming the field at fault on a type mismatch.
pub fn parse_value<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_string() } else { path };
        ApiError::validation(field, e.into_inner().to_string())
    })
}

/// Query parameters as plain strings (every value is validated by the handler that reads it).
pub struct QueryMap(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for QueryMap {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query).map_err(|_| ApiError::bad_request("malformed query string"))?;
        Ok(QueryMap(pairs.into_iter().collect()))
    }
}

impl QueryMap {
    /// A non-empty string parameter.
    pub fn text(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// `limit` (default 50, clamped to 1..=200) and `cursor` (an id to continue below).
    pub fn page(&self) -> Result<Page, ApiError> {
        // `limit=` (empty) is a mistake, not "no limit": the document says an integer.
        let limit = match self.0.get("limit").map(|v| v.trim()) {
            None => DEFAULT_LIMIT,
            Some(v) => v
                .parse::<i64>()
                .map_err(|_| ApiError::validation("limit", "limit must be a whole number"))?
                .clamp(1, MAX_LIMIT),
        };
        let before = self.text("cursor").map(|c| decode_cursor(&c)).transpose()?;
        Ok(Page { limit, before })
    }
}

/// Query parameters deserialised into `T` (unknown ones ignored); a value of the wrong type → 422
/// `validation` naming the parameter. Several `ApiQuery` extractors may read the same query string.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let pairs = form_urlencoded::parse(query.as_bytes());
        serde_path_to_error::deserialize(serde_urlencoded::Deserializer::new(pairs)).map(ApiQuery).map_err(|e| {
            let field = e.path().to_string();
            ApiError::validation(field, e.into_inner().to_string())
        })
    }
}

/// The search of the app's lists (`/me/messages`, `/me/conversations`).
#[derive(Debug, Default, serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// Search: every word must start a word of the text (its body, subject, preview, link, file name), in any
    /// case and with or without accents. Words are runs of letters and digits; the first 8 count, each up to
    /// its first 64 characters; a `q` with no word matches nothing. Encrypted messages are not searched.
    #[param(max_length = 600)]
    q: Option<String>,
}

impl SearchParams {
    /// The words searched for, if a search was asked for (empty: one that matches nothing); `422` on `q`
    /// when it is too long.
    pub fn words(self) -> Result<Option<Vec<String>>, ApiError> {
        match query_text(self.q) {
            Some(q) => Ok(Some(crate::validate::search_words(&q)?)),
            None => Ok(None),
        }
    }
}

/// The page parameters of every list.
#[derive(Debug, Default, serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Page size: default 50; below 1 counts as 1, above 200 as 200.
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = "^(c[1-9][0-9]{0,17})?$")]
    cursor: Option<String>,
}

impl PageParams {
    /// The page asked for (see [`QueryMap::page`]).
    pub fn page(self) -> Result<Page, ApiError> {
        let map = [("limit", self.limit), ("cursor", self.cursor)]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v?)))
            .collect();
        QueryMap(map).page()
    }
}

/// Reads a closed-set query filter (`#[serde(default, deserialize_with = "filter")]`): absent or empty
/// (`?state=`) is no filter, anything else must be one of the set's names (else 422 on that parameter,
/// through [`ApiQuery`]).
pub fn filter<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr<Err = String>,
{
    let text: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    query_text(text).map(|t| t.parse().map_err(serde::de::Error::custom)).transpose()
}

/// A query parameter as [`QueryMap::text`] reads it: trimmed, and absent when empty.
pub fn query_text(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// A page of a list, newest first: `{"data": [...], "next_cursor"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct List<T> {
    pub data: Vec<T>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// What the document says of a webhook URL (`validate::check_public_url`, which checks the same shape, one
/// pattern for every field that takes one): HTTPS to a named host that is not `localhost`, without spaces
/// or control characters. (The host also takes a public IP address, which the pattern does not show.) The
/// host must also resolve to public addresses only, checked when it is set (not expressible here; 422 on
/// the field). In dev mode `http://localhost` is taken too.
const PUBLIC_URL_PATTERN: &str = "^https://(?!localhost([:/?#]|$))(?![^/?#]*\\.localhost([:/?#]|$))(?!([^/?#]*\\.)?xn--)\
    ([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(:[1-9][0-9]{0,3})?([/?#][!-~]*)?$";

/// What every URL field the host calls out to says of itself: the pattern is production's; a development
/// host takes loopback URLs besides, which generated clients should not refuse.
const PUBLIC_URL_DESCRIPTION: &str = "An https:// URL of a public host (it must resolve to public addresses \
    only; 422 on the field otherwise). A development host (HUBBUB_DEV=1) also takes http:// and https:// URLs \
    of a loopback host (localhost, 127.0.0.1, [::1]), which this pattern does not show.";

/// A webhook URL that must be given.
pub fn public_url_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .description(Some(PUBLIC_URL_DESCRIPTION))
        .pattern(Some(PUBLIC_URL_PATTERN))
        .max_length(Some(crate::validate::MAX_URL))
        .build()
}

/// A webhook URL that may be left out: null or empty is none (or clears it).
pub fn optional_public_url_schema() -> utoipa::openapi::Object {
    let either = format!("^$|{}", PUBLIC_URL_PATTERN);
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            utoipa::openapi::Type::String,
            utoipa::openapi::Type::Null,
        ]))
        .description(Some(format!("{PUBLIC_URL_DESCRIPTION} Null or empty: none.")))
        .pattern(Some(either))
        .max_length(Some(crate::validate::MAX_URL))
        .build()
}

impl<T> List<T> {
    /// The one page of a list with nothing in it.
    pub fn empty() -> List<T> {
        List { data: Vec::new(), next_cursor: None }
    }
}

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 200;

/// A page request: how many, and the id to continue below (lists are newest first by id).
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub limit: i64,
    pub before: Option<i64>,
}

impl Page {
    /// How many rows to fetch: one more than the page, to know whether another page follows.
    pub fn fetch(&self) -> i64 {
        self.limit + 1
    }

    /// The page of `fetch()` rows, each rendered as `R`.
    pub fn list<T, R>(&self, mut rows: Vec<T>, id: impl Fn(&T) -> i64, render: impl Fn(&T) -> R) -> List<R> {
        let more = rows.len() as i64 > self.limit;
        rows.truncate(self.limit as usize);
        let next_cursor = if more { rows.last().map(|r| encode_cursor(id(r))) } else { None };
        List { data: rows.iter().map(render).collect(), next_cursor }
    }
}

/// A cursor: `c` and the id to continue below, as [`PageParams`]'s pattern says (`^c[1-9][0-9]{0,17}$`; empty is none):
/// a client learns from the document what the server accepts, and every string the pattern matches works.
fn encode_cursor(id: i64) -> String {
    format!("c{id}")
}

/// A cursor of [`encode_cursor`]'s form, or one from before it (base64url of `id:{id}`), so that a client paging
/// through a list across the upgrade carries on.
fn decode_cursor(cursor: &str) -> Result<i64, ApiError> {
    let current = cursor
        .strip_prefix('c')
        .filter(|n| n.len() <= 18 && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()));
    let earlier = || {
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
        text.strip_prefix("id:")?.parse::<i64>().ok()
    };
    current
        .and_then(|n| n.parse::<i64>().ok())
        .or_else(earlier)
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::validation("cursor", "cursor is not one this API returned"))
}

/// A path id that must be a positive integer; anything else cannot name a resource (404).
pub fn parse_id(raw: &str, what: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| ApiError::not_found(what))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use base64::Engine as _;

    #[test]
    fn a_whole_number_written_with_a_fraction_is_an_integer() {
        let body = serde_json::json!({"a": 3.0, "b": [1.5, -2.0, 1e3], "c": {"d": 9.5e15}, "e": "3.0"});
        let mut read = body;
        super::whole_numbers_as_integers(&mut read);
        assert_eq!(read, serde_json::json!({"a": 3, "b": [1.5, -2, 1000], "c": {"d": 9.5e15}, "e": "3.0"}));
        assert!(read["a"].is_i64() && read["b"][2].is_i64() && read["c"]["d"].is_f64());
    }

    #[test]
    fn a_cursor_is_c_and_an_id_and_one_from_before_still_works() {
        assert_eq!(super::encode_cursor(42), "c42");
        assert_eq!(super::decode_cursor("c42").ok(), Some(42));
        assert_eq!(
            super::decode_cursor(&super::encode_cursor(999_999_999_999_999_999)).ok(),
            Some(999_999_999_999_999_999)
        );
        let earlier = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("id:42");
        assert_eq!(super::decode_cursor(&earlier).ok(), Some(42));
        for bad in ["", "c", "c0", "c01", "c-1", "c1x", "42", "zzz", "c9999999999999999999"] {
            assert!(super::decode_cursor(bad).is_err(), "{bad:?} is not a cursor");
        }
    }
    use axum::routing::get;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_in_the_error_shape() {
        let app: axum::Router = axum::Router::new()
            .route("/boom", get(|| async { std::panic::panic_any::<&str>("boom") as &'static str }))
            .layer(super::CatchPanicLayer::custom(super::panic_response));
        let request = axum::http::Request::get("/boom").body(Body::empty()).unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 500);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["error"]["code"], "internal");
        assert_eq!(json["error"]["message"], "internal error", "the panic's text stays in the log");
    }

    #[test]
    fn logged_paths_never_carry_a_capability() {
        // Every documented route that takes no credential has its path as the credential: each is in
        // CAPABILITY_ROUTES, and a path of it is logged without its secret.
        let doc = serde_json::to_value(super::documented().split_for_parts().1).unwrap();
        let mut open = Vec::new();
        for (path, operations) in doc["paths"].as_object().unwrap() {
            for (method, operation) in operations.as_object().unwrap() {
                let security = operation.get("security").and_then(|s| s.as_array());
                let credential =
                    security.is_some_and(|s| s.iter().any(|r| r.as_object().is_some_and(|r| !r.is_empty())));
                if !credential && path.contains('{') && method != "parameters" {
                    open.push(path.clone());
                }
            }
        }
        assert!(!open.is_empty());
        for path in &open {
            assert!(super::CAPABILITY_ROUTES.contains(&path.as_str()), "{path} takes no credential but is not masked");
        }
        for route in super::CAPABILITY_ROUTES {
            let secret = "Zq7SECRETxYw4kR2";
            let sample = route.split('/').map(|s| if s.starts_with('{') { secret } else { s }).collect::<Vec<_>>();
            let logged = super::loggable_path(&sample.join("/")).to_string();
            assert!(!logged.contains(secret) && logged.contains('…'), "{route}: {logged}");
            let prefixed = sample.join("/").replace(secret, "msg_Zq7SECRETxYw4kR2");
            assert!(super::loggable_path(&prefixed).ends_with("msg_…"), "{route}");
        }
        assert_eq!(super::loggable_path("/api/v1/form-links/Zq7SECRETxYw4kR2"), "/api/v1/form-links/…");
        assert_eq!(super::loggable_path("/api/v1/push/ack/Zq7SECRET"), "/api/v1/push/ack/…");
        assert_eq!(super::loggable_path("/f/Zq7SECRET"), "/f/…");
        assert_eq!(super::loggable_path("/f/Zq7SECRET/"), "/f/…/");
        assert_eq!(super::loggable_path("/api/v1/form-links"), "/api/v1/form-links");
        assert_eq!(super::loggable_path("/api/v1/templates/7/submit"), "/api/v1/templates/7/submit");
    }

    #[test]
    fn url_fields_say_what_a_development_host_takes() {
        for schema in [super::public_url_schema(), super::optional_public_url_schema()] {
            let text = serde_json::to_value(&schema).unwrap()["description"].as_str().unwrap_or("").to_string();
            assert!(text.contains("HUBBUB_DEV=1") && text.contains("127.0.0.1"), "{text}");
        }
    }

    #[test]
    fn logged_paths_never_carry_message_refs() {
        assert_eq!(super::loggable_path("/api/v1/content/msg_abcdefghijklmnopqrstuv"), "/api/v1/content/msg_…");
        assert_eq!(super::loggable_path("/api/v1/me/messages/msg_x1y2z3/read"), "/api/v1/me/messages/msg_…/read");
        assert_eq!(super::loggable_path("/api/v1/messages/42"), "/api/v1/messages/42");
        assert_eq!(super::loggable_path("/pay/pay_abcdefghijklmnopqrstuvwxyz12"), "/pay/pay_…");
        assert_eq!(super::loggable_path("/api/v1/payments/pay_abc"), "/api/v1/payments/pay_…");
    }
}
