//! The accept loop of a daemon's socket: a bounded number of connections,
//! each authenticated, then request → response until the peer leaves. A bad
//! peer costs only its own connection.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::IpcError;
use crate::auth::{self, Peer, PeerPolicy};
use crate::frame::{IO_TIMEOUT, read_frame, write_frame};
use crate::messages::{Request, Response};

/// Most connections served at once on one socket.
pub const MAX_CONNECTIONS: usize = 32;
/// How long an authenticated connection may stay silent.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Counters a daemon can report (and tests can check).
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections authenticated.
    pub accepted: AtomicU64,
    /// Connections refused at authentication.
    pub refused: AtomicU64,
    /// Connections closed for a bad frame (oversized, malformed, timeout).
    pub dropped: AtomicU64,
    /// Requests answered.
    pub answered: AtomicU64,
}

/// Binds a Unix socket at `path` (replacing a stale one) with mode 0600.
pub fn bind(path: &Path) -> Result<UnixListener, IpcError> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves `listener` forever: authenticates each peer under `policy`, then
/// answers each `Request<Req>` with `handler`'s `Resp`.
pub async fn serve<Req, Resp, H, F>(listener: UnixListener, policy: PeerPolicy, stats: Arc<Stats>, handler: H)
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + Sync + 'static,
    H: Fn(Req, Peer) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Resp> + Send,
{
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let policy = Arc::new(policy);
    let mut accept_failures = labfy_core::throttle::Throttle::default();
    let mut over_cap = labfy_core::throttle::Throttle::default();
    // Peers refused or connections that failed: another process can make as
    // many as it likes, so they are logged once, then counted (SPEC V6).
    let closed = Arc::new(std::sync::Mutex::new(labfy_core::throttle::Throttle::default()));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors (another process's flood, red team 3
                // F3): one line, then a count at most every few seconds.
                if let Some(unlogged) = accept_failures.occurred(std::time::Instant::now()) {
                    tracing::warn!(boundary = ?policy.boundary, error = %e, unlogged, "accept failed");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Some(unlogged) = over_cap.occurred(std::time::Instant::now()) {
                tracing::warn!(boundary = ?policy.boundary, unlogged, "too many IPC connections; closing a new one");
            }
            drop(stream);
            continue;
        };
        let (policy, stats, handler, closed) = (policy.clone(), stats.clone(), handler.clone(), closed.clone());
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(e) = connection(stream, &policy, &stats, handler).await {
                let now = std::time::Instant::now();
                let said = closed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).occurred(now);
                if let Some(unlogged) = said {
                    tracing::warn!(boundary = ?policy.boundary, error = %e, unlogged, "IPC connection closed");
                }
            }
        });
    }
}

/// Serves one already-connected stream — the end of a socket pair the
/// supervisor keeps, passed to the workspace server as a descriptor: no path
/// in the runtime directory that another process could connect to. The
/// peer still authenticates (uid and secret).
pub async fn serve_one<Req, Resp, H, F>(stream: UnixStream, policy: PeerPolicy, stats: Arc<Stats>, handler: H)
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + Sync + 'static,
    H: Fn(Req, Peer) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Resp> + Send,
{
    if let Err(e) = connection(stream, &policy, &stats, handler).await {
        tracing::warn!(boundary = ?policy.boundary, error = %e, "IPC connection closed");
    }
}

async fn connection<Req, Resp, H, F>(
    mut stream: UnixStream,
    policy: &PeerPolicy,
    stats: &Stats,
    handler: H,
) -> Result<(), IpcError>
where
    Req: DeserializeOwned,
    Resp: Serialize,
    H: Fn(Req, Peer) -> F,
    F: Future<Output = Resp>,
{
    let peer = match auth::accept(&mut stream, policy).await {
        Ok(p) => p,
        Err(e) => {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    };
    stats.accepted.fetch_add(1, Ordering::Relaxed);
    loop {
        let request: Request<Req> = match read_frame(&mut stream, IDLE_TIMEOUT).await {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(e) => {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        let body = handler(request.body, peer).await;
        write_frame(&mut stream, &Response { id: request.id, body }, IO_TIMEOUT).await?;
        stats.answered.fetch_add(1, Ordering::Relaxed);
    }
}
