//! The server's HTTP connections (SPEC T5, V2): hyper's HTTP/1.1 connection
//! under the bounded accept loop of `labfy-http`, which egress's
//! confirmation page shares — a cap on connections held at once that evicts
//! rather than refuses, a short deadline on an unproven connection's first
//! request, a header deadline (idle keep-alive connections close), an
//! inactivity deadline on reads and writes, and a drain on shutdown.
//!
//! A connection is *proven* once [`crate::security::guard`] admitted one of
//! its requests with a valid session ([`prove_connection`]). At the cap the
//! oldest unproven connection is closed to make room: what another local
//! user does with many connections — hold them idle, or reconnect as fast as
//! they close — cannot keep the analyst's fresh connections out, and the
//! analyst's proven connections are never taken back (red team 3, F2).

use std::future::Future;
use std::time::Duration;

use axum::Router;
pub use labfy_http::{ConnectionTrust, prove_connection};

/// Most connections held at once; well below the server's 4,096
/// descriptors, so the store, the IPC clients and the logs always have room.
pub const MAX_CONNECTIONS: usize = 512;
/// Longest a connection not yet proven may go without a request in progress
/// (from its accept, or from the end of its last answer, to a complete
/// header): a browser sends its request at once.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_millis(2500);
/// Longest a client may take to send a request's whole header; hyper's timer
/// runs too while a keep-alive connection waits for its next request, so
/// a proven idle connection closes after this long.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a connection may stay without a byte read (a stalled body) or
/// written (a client that stopped reading).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest the connections in flight get to finish at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest read buffer of a connection (the header, mostly): hyper answers
/// 431 beyond it.
pub const MAX_HEADER_BUFFER: usize = 64 * 1024;
/// Youngest a connection may be and be displaced at the cap: each one has
/// this long to send its request; at most 512 / 0.1 s = 5,120 connections a
/// second are displaced, the others wait in the backlog.
pub const EVICTION_GRACE: Duration = Duration::from_millis(100);

/// The UI's bounds, from the constants above.
pub const LIMITS: labfy_http::Limits = labfy_http::Limits {
    max_connections: MAX_CONNECTIONS,
    first_request_timeout: FIRST_REQUEST_TIMEOUT,
    header_read_timeout: HEADER_READ_TIMEOUT,
    idle_timeout: IDLE_TIMEOUT,
    drain_timeout: DRAIN_TIMEOUT,
    max_header_buffer: MAX_HEADER_BUFFER,
    eviction_grace: EVICTION_GRACE,
};

/// Serves `app` on `listener` until `shutdown` resolves, then drains.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    labfy_http::serve(listener, app, LIMITS, shutdown).await
}
