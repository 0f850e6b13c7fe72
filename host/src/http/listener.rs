//! The HTTP/1.1 connections of a host: accepted up to a cap, each served by hyper with a deadline for a
//! request's head and one for idleness, so a client that sends nothing, or one header line now and then,
//! holds its socket for seconds, not forever.
//!
//! - **Header read timeout** (hyper's): a request's head must arrive whole within it, counted from when
//!   the connection opens or its previous response was sent.
//! - **Idle timeout**: a connection with no request in flight for this long is closed (the shorter of the
//!   two ends an idle keep-alive connection).
//! - **Connection cap**: past it, a new connection is answered `503 unavailable` (the contract's error body,
//!   `Retry-After`) and closed — never left hanging; a second, smaller allowance bounds those answers too,
//!   and past both the host stops accepting until a connection closes.
//!
//! TLS and HTTP/2 are a proxy's work: the host speaks HTTP/1.1.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

use crate::http::error::ApiError;

/// How connections are bounded.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

/// Connections over the cap that are still answered with a 503 (then past this, accepting waits).
const OVERFLOW_ANSWERS: usize = 256;

/// Seconds a client turned away for the cap is told to wait.
const RETRY_AFTER_S: u64 = 1;

/// Serves `app` on `listener` until `shutdown` resolves; then stops accepting, lets each connection finish
/// its request in flight, and resolves once every connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let overflow = Arc::new(Semaphore::new(OVERFLOW_ANSWERS));
    // Each connection holds a receiver: `closed()` resolves when the last one is gone.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Accepting waits while both the cap and the overflow allowance are spent.
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            permit = wait_for_room(&open, &overflow) => permit,
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait, as hyper's own accept loops do.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let stop = stop_rx.clone();
        // The room was taken before the connection came: a place under the cap that freed meanwhile is
        // this connection's, not the next one's.
        let permit = match permit {
            Room::Overflow(overflow) => match open.clone().try_acquire_owned() {
                Ok(permit) => {
                    drop(overflow);
                    Room::Open(permit)
                }
                Err(_) => Room::Overflow(overflow),
            },
            open => open,
        };
        match permit {
            Room::Open(permit) => {
                let app = app.clone();
                tokio::spawn(async move {
                    serve_connection(stream, peer, app, limits, stop).await;
                    drop(permit);
                });
            }
            Room::Overflow(permit) => {
                metrics::counter!("hubbub_connections_refused_total").increment(1);
                tokio::spawn(async move {
                    turn_away(stream, limits.header_read_timeout.min(Duration::from_secs(2))).await;
                    drop((permit, stop));
                });
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(stop_rx);
    stop_tx.closed().await;
    Ok(())
}

enum Room {
    Open(tokio::sync::OwnedSemaphorePermit),
    Overflow(tokio::sync::OwnedSemaphorePermit),
}

/// A place for the next connection: under the cap, else in the overflow allowance; waits for either.
async fn wait_for_room(open: &Arc<Semaphore>, overflow: &Arc<Semaphore>) -> Room {
    if let Ok(permit) = open.clone().try_acquire_owned() {
        return Room::Open(permit);
    }
    tokio::select! {
        permit = open.clone().acquire_owned() => Room::Open(permit.expect("never closed")),
        permit = overflow.clone().acquire_owned() => Room::Overflow(permit.expect("never closed")),
    }
}

/// When a connection last finished a request, and how many it has in flight.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds since the connection opened.
    idle_since_ms: AtomicU64,
}

/// Serves one connection until the client closes it, a deadline passes, or the host stops.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) {
    let opened = Instant::now();
    let activity = Arc::new(Activity::default());
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let mut request = request.map(axum::body::Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let app = app.clone();
            let activity = activity.clone();
            activity.in_flight.fetch_add(1, Ordering::SeqCst);
            async move {
                let response = app.oneshot(request).await;
                activity.idle_since_ms.store(opened.elapsed().as_millis() as u64, Ordering::SeqCst);
                activity.in_flight.fetch_sub(1, Ordering::SeqCst);
                response
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
    let connection = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
    let mut connection = std::pin::pin!(connection);
    let mut closing = false;
    let idle_for = || {
        let since = Duration::from_millis(activity.idle_since_ms.load(Ordering::SeqCst));
        opened.elapsed().saturating_sub(since)
    };
    loop {
        // While a request is in flight the connection is not idle: look again a whole timeout later.
        let busy = activity.in_flight.load(Ordering::SeqCst) > 0;
        let wait = if busy { limits.idle_timeout } else { limits.idle_timeout.saturating_sub(idle_for()) };
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, %peer, "connection ended");
                }
                break;
            }
            _ = stop.changed(), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = tokio::time::sleep(wait), if !closing => {
                if activity.in_flight.load(Ordering::SeqCst) == 0 && idle_for() >= limits.idle_timeout {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Answers a connection over the cap with `503 unavailable` and closes it.
async fn turn_away(stream: tokio::net::TcpStream, read_within: Duration) {
    let service = hyper::service::service_fn(|_request: hyper::Request<Incoming>| async {
        let busy = ApiError::unavailable(RETRY_AFTER_S, "this host has as many connections open as it serves; retry");
        Ok::<_, Infallible>(axum::response::IntoResponse::into_response(busy))
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(read_within).keep_alive(false);
    let _ = tokio::time::timeout(read_within * 2, builder.serve_connection(TokioIo::new(stream), service)).await;
}
