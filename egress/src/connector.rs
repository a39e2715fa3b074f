//! How a fetch gets a byte stream to a host: the seam between the fetch
//! logic (URL rules, grant, redirects, bounds) and Tor.
//!
//! The trait is crate-private on purpose. Outside this crate the only way to
//! build an [`crate::Egress`] is from a [`crate::Tor`], whose connector is
//! arti's; the loopback connector the tests use exists only under
//! `#[cfg(test)]`. So no build of the `labfy-egress` binary has a direct
//! connect path (SPEC P4).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use arti_client::IsolationToken;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A bidirectional byte stream (a Tor stream, in the binary).
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// A boxed stream.
pub(crate) type BoxIo = Box<dyn Io>;

/// A boxed, sendable future.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Bootstrap state of the path out, as [`crate::Egress`] reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bootstrap {
    /// True once streams may be asked for.
    pub ready: bool,
    /// Progress, 0–100.
    pub percent: u8,
    /// One short line.
    pub phase: String,
    /// The last error, bounded.
    pub last_error: Option<String>,
    /// How long bootstrap took, once done.
    pub bootstrap_ms: Option<u64>,
}

/// Opens streams for fetches.
pub(crate) trait Connector: Send + Sync + 'static {
    /// Where bootstrap stands.
    fn bootstrap(&self) -> Bootstrap;

    /// A stream to `host:port`, on circuits isolated by `isolation`. The
    /// host name is resolved by whatever is at the far end of the path
    /// (the Tor exit), never locally. The error is one bounded line.
    fn connect<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        isolation: IsolationToken,
    ) -> BoxFuture<'a, Result<BoxIo, String>>;
}

/// A stream whose reads fail with `TimedOut` when no byte arrives for
/// `idle` while one is awaited (a slow-loris bound; the whole-fetch deadline
/// bounds a peer that trickles).
pub(crate) struct IdleTimeout<S> {
    inner: S,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    armed: bool,
}

impl<S> IdleTimeout<S> {
    pub(crate) fn new(inner: S, idle: Duration) -> Self {
        Self { inner, idle, timer: Box::pin(tokio::time::sleep(idle)), armed: false }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeout<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.armed = false;
                Poll::Ready(r)
            }
            Poll::Pending => {
                if !this.armed {
                    this.timer.as_mut().reset(Instant::now() + this.idle);
                    this.armed = true;
                }
                match this.timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no data for {} s", this.idle.as_secs_f32()),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
