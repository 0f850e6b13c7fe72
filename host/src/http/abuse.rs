//! The extractors of [`super::code_limits`]: `CodeRouteLimit`, taken first by the routes that send or check
//! one-time codes, and `ClientIp`, the client's address as the trusted proxies say.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

use crate::http::error::ApiError;
use crate::http::state::AppState;

/// Taken by the code routes' handlers (first, before the body is read): refuses with 429 and
/// `Retry-After` when the client or the host is over its limit; holds the client's address.
pub struct CodeRouteLimit(pub IpAddr);

/// The client's address: the socket's peer, or what a trusted proxy (`HUBBUB_TRUSTED_PROXIES`) says it
/// forwarded for. What per-address limits and a bot's `allowed_ips` are checked against.
pub struct ClientIp(pub IpAddr);

impl ClientIp {
    pub fn of(parts: &Parts, state: &AppState) -> IpAddr {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        state.code_limits.client_ip(peer, &parts.headers)
    }
}

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(ClientIp(ClientIp::of(parts, state)))
    }
}

impl FromRequestParts<AppState> for CodeRouteLimit {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let client = ClientIp::of(parts, state);
        state.code_limits.check(client).inspect_err(|_| {
            metrics::counter!("hubbub_rate_limited_total", "limit" => "code_route").increment(1);
            tracing::warn!(%client, path = %parts.uri.path(), "code route rate limit");
        })?;
        Ok(CodeRouteLimit(client))
    }
}
