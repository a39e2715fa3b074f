#![doc = include_str!("../README.md")]

use std::collections::BTreeMap;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use labfy_core::throttle::Throttle;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};
use tokio_io_timeout::TimeoutStream;
use tower::ServiceExt;

/// The bounds of one listener (SPEC T5, V2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most connections held at once, each one descriptor. At the cap a new
    /// connection takes the place of the oldest one not yet proven; only when
    /// every connection held is proven is the new one closed.
    pub max_connections: usize,
    /// Longest a connection not yet proven may go with no request in
    /// progress: from its accept to its first request's complete header,
    /// and from the end of each answer to the next request's header.
    pub first_request_timeout: Duration,
    /// Longest a client may take to send a request's whole header; hyper's
    /// timer also runs while a keep-alive connection waits for its next
    /// request, so this is how long a proven connection may stay idle.
    pub header_read_timeout: Duration,
    /// Longest a connection may stay without a byte read (a stalled body)
    /// or written (a client that stopped reading).
    pub idle_timeout: Duration,
    /// Longest the connections in flight get to finish at shutdown.
    pub drain_timeout: Duration,
    /// Largest read buffer of a connection (the header, mostly): hyper
    /// answers 431 beyond it.
    pub max_header_buffer: usize,
    /// Youngest a connection may be and be displaced at the cap: every
    /// connection gets at least this long to send its request (a fresh one
    /// of the analyst's, not yet read, is not displaced by the next few
    /// connections of a flood); a new one waits in the backlog meanwhile.
    pub eviction_grace: Duration,
}

/// Longest a new connection waits, at the cap, for the one it displaces to
/// give back its descriptor; it is closed if that takes longer.
pub const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// Whether a connection has *proven* itself: sent a request the application
/// admitted with a valid session. Every request carries its connection's
/// handle in its extensions; the application's guard calls
/// [`ConnectionTrust::prove`] (or [`prove_connection`]) once the session
/// checks out. A proven connection is never displaced at the cap and keeps
/// the longer keep-alive deadline ([`Limits::header_read_timeout`]).
#[derive(Debug, Clone, Default)]
pub struct ConnectionTrust(Arc<AtomicBool>);

impl ConnectionTrust {
    /// Marks the connection as proven, for the rest of its life.
    pub fn prove(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the connection was proven.
    pub fn is_proven(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Proves the connection `request` came on, if it came through [`serve`]
/// (a request built in a test, with no connection, carries no handle).
pub fn prove_connection<B>(request: &Request<B>) {
    if let Some(trust) = request.extensions().get::<ConnectionTrust>() {
        trust.prove();
    }
}

/// One connection held, as the loop sees it.
#[derive(Debug, Default)]
struct Connection {
    /// Its socket, open for as long as the connection is in the loop's
    /// table (it leaves the table, under its lock, before the socket closes).
    fd: RawFd,
    trust: ConnectionTrust,
    /// When it was accepted, in milliseconds since the loop started.
    accepted_ms: u64,
    /// Requests whose answer is not yet fully written.
    busy: AtomicUsize,
    /// When the connection last had nothing in progress — its accept or the
    /// end of its last answer — in milliseconds since the loop started.
    idle_since_ms: AtomicU64,
    /// Closes the connection at once (it was displaced at the cap).
    evict: Notify,
}

impl Connection {
    /// When an unproven connection with nothing in progress is to close;
    /// `None` once proven. While a request is in progress, a time to look
    /// again.
    fn first_request_deadline(&self, epoch: Instant, limit: Duration) -> Option<Instant> {
        if self.trust.is_proven() {
            return None;
        }
        if self.busy.load(Ordering::Acquire) > 0 {
            return Some(Instant::now() + limit);
        }
        Some(epoch + Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire)) + limit)
    }
}

/// A request in progress on `connection`, until its answer's body has been
/// written (or dropped).
struct InProgress {
    connection: Arc<Connection>,
    epoch: Instant,
}

impl InProgress {
    fn start(connection: Arc<Connection>, epoch: Instant) -> Self {
        connection.busy.fetch_add(1, Ordering::AcqRel);
        Self { connection, epoch }
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        // The idle time first, so a deadline read once `busy` is zero is
        // already the new one.
        self.connection.idle_since_ms.store(millis_since(self.epoch), Ordering::Release);
        self.connection.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a task panicked mid-update of a plain map.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connection to displace among `held` (keyed by accept order): the
/// oldest unproven one that has sent nothing yet to be read (`waiting`
/// tells which have) and has nothing in progress, else the oldest unproven
/// one with nothing in progress, else the oldest unproven one; none when
/// every connection is proven.
fn victim(held: &BTreeMap<u64, Arc<Connection>>, waiting: impl Fn(&Connection) -> bool) -> Option<u64> {
    let unproven = || held.iter().filter(|(_, c)| !c.trust.is_proven());
    let idle = || unproven().filter(|(_, c)| c.busy.load(Ordering::Acquire) == 0);
    idle().find(|(_, c)| !waiting(c)).or_else(|| idle().next()).or_else(|| unproven().next()).map(|(id, _)| *id)
}

/// Whether bytes the loop has not read yet wait on `connection`'s socket —
/// a request that arrived with its connection, before its task first ran.
/// A closed peer has none.
#[allow(unsafe_code)]
fn bytes_waiting(connection: &Connection) -> bool {
    let mut byte = 0u8;
    // SAFETY: `fd` is open — the caller holds the table's lock, and a
    // connection leaves the table before its socket is closed; MSG_PEEK |
    // MSG_DONTWAIT reads nothing and never blocks, into a byte of our own.
    let n = unsafe { libc::recv(connection.fd, (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    n > 0
}

/// Serves `app` on `listener` under `limits` until `shutdown` resolves, then
/// drains: the accept loop of the workspace server's UI and of egress's
/// confirmation page (SPEC T5, V2).
///
/// A connection is admitted while fewer than [`Limits::max_connections`]
/// are held. At the cap the oldest connection not yet proven (see
/// [`ConnectionTrust`]) is closed and the new one takes its descriptor:
/// connections that only wait — another local user's — cannot keep a
/// fresh connection of the analyst's out, and the analyst's proven
/// connections are never taken back. An unproven connection also closes
/// after [`Limits::first_request_timeout`] without a request in progress.
/// Failures to accept (out of descriptors) are logged once, then with a
/// count at most every few seconds.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let epoch = Instant::now();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let held: Arc<Mutex<BTreeMap<u64, Arc<Connection>>>> = Arc::default();
    let graceful = GracefulShutdown::new();
    let mut accept_failures = Throttle::default();
    let mut next_id = 0u64;
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // EMFILE and friends: one line, then a count at most
                    // every few seconds, and a pause instead of a spin.
                    if let Some(unlogged) = accept_failures.occurred(Instant::now()) {
                        tracing::warn!(error = %e, unlogged, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let slot = loop {
            if let Ok(slot) = slots.clone().try_acquire_owned() {
                break Some(slot);
            }
            let now_ms = millis_since(epoch);
            let grace_ms = u64::try_from(limits.eviction_grace.as_millis()).unwrap_or(u64::MAX);
            let choice = {
                let mut held = lock(&held);
                match victim(&held, bytes_waiting).map(|id| (id, now_ms.saturating_sub(held[&id].accepted_ms))) {
                    Some((id, age)) if age >= grace_ms => Ok(held.remove(&id)),
                    Some((_, age)) => Err(Some(Duration::from_millis(grace_ms - age))),
                    None => Err(None),
                }
            };
            match choice {
                Ok(displaced) => {
                    if let Some(displaced) = displaced {
                        displaced.evict.notify_one();
                    }
                    // The displaced connection's task gives its slot back
                    // once its socket is closed: the cap counts descriptors.
                    break tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned())
                        .await
                        .ok()
                        .and_then(Result::ok);
                }
                // The oldest candidate is still in its grace: wait for it.
                Err(Some(young)) => tokio::time::sleep(young).await,
                Err(None) => {
                    tracing::debug!("connection cap reached, every connection proven; closing a new one");
                    break None;
                }
            }
        };
        let Some(slot) = slot else { continue };
        next_id += 1;
        let id = next_id;
        let accepted_ms = millis_since(epoch);
        let connection = Arc::new(Connection { fd: stream.as_raw_fd(), accepted_ms, ..Connection::default() });
        connection.idle_since_ms.store(accepted_ms, Ordering::Release);
        lock(&held).insert(id, connection.clone());

        let _ = stream.set_nodelay(true);
        let mut io = TimeoutStream::new(stream);
        io.set_read_timeout(Some(limits.idle_timeout));
        io.set_write_timeout(Some(limits.idle_timeout));
        let io = TokioIo::new(Box::pin(io));
        let (app, on_request) = (app.clone(), connection.clone());
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            let in_progress = InProgress::start(on_request.clone(), epoch);
            request.extensions_mut().insert(on_request.trust.clone());
            let answer = app.clone().oneshot(request);
            async move {
                let response = answer.await?;
                // The request stays in progress until its body is written.
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _in_progress: &InProgress = &in_progress;
                        frame
                    }))
                }))
            }
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_buf_size(limits.max_header_buffer)
            .keep_alive(true);
        let served = graceful.watch(builder.serve_connection(io, service));
        let held = held.clone();
        tokio::spawn(async move {
            let mut served = Box::pin(served);
            let why = watch(served.as_mut(), &connection, epoch, limits.first_request_timeout).await;
            tracing::debug!(why, "HTTP connection closed");
            // Out of the table first, then the socket closes; only then does
            // the connection's slot go back.
            lock(&held).remove(&id);
            drop(served);
            drop(slot);
        });
        // Every task ready to run — the new connection's first read above
        // all — runs before the next accept: a client that sent its request
        // with its connection is read (and can prove itself) before enough
        // newer connections arrive to displace it.
        tokio::task::yield_now().await;
    }
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("HTTP connections still open after the drain; closing them");
    }
    Ok(())
}

/// Drives one connection until it ends, is displaced, or — unproven — waits
/// past its first-request deadline; the connection (and its socket) is
/// dropped on return. Says why it ended.
async fn watch<F, E>(mut served: Pin<&mut F>, connection: &Connection, epoch: Instant, limit: Duration) -> &'static str
where
    F: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    loop {
        let deadline = connection.first_request_deadline(epoch, limit);
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            ended = served.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "HTTP connection failed");
                }
                return "ended";
            }
            () = connection.evict.notified() => return "displaced at the connection cap",
            () = expiry => {
                let again = connection.first_request_deadline(epoch, limit);
                if again.is_some_and(|at| at <= Instant::now()) && connection.busy.load(Ordering::Acquire) == 0 {
                    return "no request from an unproven connection in time";
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(states: &[(bool, usize)]) -> BTreeMap<u64, Arc<Connection>> {
        states
            .iter()
            .enumerate()
            .map(|(i, &(proven, busy))| {
                let c = Connection { fd: i as RawFd + 1, ..Connection::default() };
                if proven {
                    c.trust.prove();
                }
                c.busy.store(busy, Ordering::Relaxed);
                (i as u64 + 1, Arc::new(c))
            })
            .collect()
    }

    #[test]
    fn the_oldest_unproven_connection_that_sent_nothing_is_displaced_first() {
        let nothing = |_: &Connection| false;
        // proven, unproven busy, unproven idle, unproven idle
        assert_eq!(victim(&table(&[(true, 0), (false, 1), (false, 0), (false, 0)]), nothing), Some(3));
        // Bytes waiting on the oldest idle one (say fd 3 is the third): the next.
        let third = |c: &Connection| c.fd == 3;
        assert_eq!(victim(&table(&[(true, 0), (false, 1), (false, 0), (false, 0)]), third), Some(4));
        // Bytes waiting on every idle one: the oldest idle one all the same.
        assert_eq!(victim(&table(&[(false, 1), (false, 0), (false, 0)]), |_| true), Some(2));
        // Every unproven one busy: the oldest unproven.
        assert_eq!(victim(&table(&[(true, 0), (false, 2), (true, 1), (false, 1)]), nothing), Some(2));
        // Only proven connections: none is taken back.
        assert_eq!(victim(&table(&[(true, 0), (true, 3)]), nothing), None);
        assert_eq!(victim(&table(&[]), nothing), None);
    }

    #[test]
    fn a_proven_connection_has_no_first_request_deadline() {
        let epoch = Instant::now();
        let c = Connection::default();
        c.idle_since_ms.store(1_000, Ordering::Relaxed);
        let limit = Duration::from_secs(2);
        assert_eq!(c.first_request_deadline(epoch, limit), Some(epoch + Duration::from_secs(3)));
        let request = Request::new(());
        prove_connection(&request); // no handle: nothing happens
        let mut request = Request::new(());
        request.extensions_mut().insert(c.trust.clone());
        prove_connection(&request);
        assert!(c.trust.is_proven());
        assert_eq!(c.first_request_deadline(epoch, limit), None);
    }
}
