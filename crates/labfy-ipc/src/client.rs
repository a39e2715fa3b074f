//! The calling side: connect, authenticate, then request → response with a
//! deadline per call.

use std::marker::PhantomData;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::UnixStream;

use crate::IpcError;
use crate::auth;
use crate::frame::{read_frame, write_frame};
use crate::messages::{Boundary, Request, Response};
use crate::secret::Secret;

/// Default deadline of one call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// An authenticated connection for one boundary.
pub struct Client<Req, Resp> {
    stream: UnixStream,
    next_id: u64,
    timeout: Duration,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<Req: Serialize, Resp: DeserializeOwned> Client<Req, Resp> {
    /// Connects to `path` and authenticates for `boundary` with `secret`.
    pub async fn connect(path: &Path, boundary: Boundary, secret: &Secret) -> Result<Self, IpcError> {
        let mut stream = tokio::time::timeout(CALL_TIMEOUT, UnixStream::connect(path))
            .await
            .map_err(|_| IpcError::Timeout("connecting"))??;
        auth::hello(&mut stream, boundary, secret).await?;
        Ok(Self { stream, next_id: 1, timeout: CALL_TIMEOUT, _types: PhantomData })
    }

    /// Authenticates on an already-connected stream (the supervisor's end of
    /// the workspace server's control pair).
    pub async fn from_stream(mut stream: UnixStream, boundary: Boundary, secret: &Secret) -> Result<Self, IpcError> {
        auth::hello(&mut stream, boundary, secret).await?;
        Ok(Self { stream, next_id: 1, timeout: CALL_TIMEOUT, _types: PhantomData })
    }

    /// Sets the deadline of each call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends `body` and waits for its response.
    pub async fn call(&mut self, body: Req) -> Result<Resp, IpcError> {
        let id = self.next_id;
        self.next_id += 1;
        write_frame(&mut self.stream, &Request { id, body }, self.timeout).await?;
        let response: Response<Resp> = read_frame(&mut self.stream, self.timeout)
            .await?
            .ok_or_else(|| IpcError::Io(std::io::ErrorKind::UnexpectedEof.into()))?;
        if response.id != id {
            return Err(IpcError::Malformed(format!("response to request {} while waiting for {id}", response.id)));
        }
        Ok(response.body)
    }

    /// The raw stream (for tests that misbehave on purpose).
    pub fn stream_mut(&mut self) -> &mut UnixStream {
        &mut self.stream
    }
}
