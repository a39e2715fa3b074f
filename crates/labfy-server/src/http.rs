//! The server's HTTP connections (SPEC T5): hyper's HTTP/1.1 connection,
//! driven by our own accept loop so that every connection is bounded —
//! a cap on connections held at once, a deadline on a request's header, an
//! inactivity deadline on reads and writes (idle keep-alive connections
//! close), and a drain on shutdown.
//!
//! What a local client can do with many connections is therefore bounded by
//! time as well as by count; the analyst's browser keeps the keep-alive
//! connections it already holds, which the cap never takes back.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;

/// Most connections held at once; well below the server's 4,096
/// descriptors, so the store, the IPC clients and the logs always have room.
pub const MAX_CONNECTIONS: usize = 512;
/// Longest a client may take to send a request's whole header; hyper's timer
/// runs too while a keep-alive connection waits for its next request, so
/// an idle connection closes after this long.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a connection may stay without a byte read (a stalled body) or
/// written (a client that stopped reading).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest the connections in flight get to finish at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest read buffer of a connection (the header, mostly): hyper answers
/// 431 beyond it.
pub const MAX_HEADER_BUFFER: usize = 64 * 1024;

/// Serves `app` on `listener` until `shutdown` resolves, then drains.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // At the cap a new connection is closed at once (not left in the
        // backlog): the connections already held — the analyst's — go on.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("connection cap reached; closing a new connection");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut io = TimeoutStream::new(stream);
        io.set_read_timeout(Some(IDLE_TIMEOUT));
        io.set_write_timeout(Some(IDLE_TIMEOUT));
        let io = TokioIo::new(Box::pin(io));
        let service = TowerToHyperService::new(app.clone());
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .max_buf_size(MAX_HEADER_BUFFER)
            .keep_alive(true);
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "HTTP connection ended");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("HTTP connections still open after the drain; closing them");
    }
    Ok(())
}
