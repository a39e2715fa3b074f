//! `LocalModelClient`: the loopback-only client of an OpenAI-compatible model
//! server such as llama.cpp's `llama-server` (SPEC M3, M4).
//!
//! - **Configuration** ([`AgentMode`], [`ModelConfig`]; M4): explicit flags or
//!   variables, validated once; without them, the demo agent.
//! - **Endpoint** ([`Endpoint`]; M3): only canonical `http://127.0.0.1:<port>`
//!   or `http://[::1]:<port>`, never port 8080; or a Unix socket,
//!   `unix:<path>` — the governed model's (endpoint `governed`, SPEC D1).
//! - **Transport**: one plain `tokio::net::TcpStream` (or `UnixStream`) per
//!   request, connected to the endpoint's address and nothing else — no DNS, no proxy (no
//!   environment variable is read), no TLS — with hyper's low-level HTTP/1
//!   client on top. No redirect is followed, no cookie, netrc or
//!   `Authorization` header is sent. Time is bounded (a connect deadline and
//!   a total deadline, the configured timeout) and so is size (request body,
//!   response head, response body), each by a named constant.
//! - **Answers** ([`ChatResponse`]): `choices[0].message.content`,
//!   `finish_reason`, `usage`; everything else is a [`ClientError`] of a
//!   [`FailureClass`], its text bounded.
//! - **Cancellation** ([`CancelToken`]; M8): cancelling drops the request in
//!   flight (its connection is closed); an answer that arrives anyway is
//!   ignored.

mod config;
mod endpoint;
mod error;
mod wire;

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::watch;

pub use config::{
    AgentFlags, AgentMode, ConfigError, DEFAULT_TIMEOUT_SECS, ENV_ENDPOINT, ENV_MODE, ENV_MODEL, ENV_TIMEOUT,
    FLAG_ENDPOINT, FLAG_MODE, FLAG_MODEL, FLAG_TIMEOUT, GOVERNED, MAX_MODEL_ID_LEN, MAX_TIMEOUT_SECS, MIN_TIMEOUT_SECS,
    MODE_DEMO, MODE_LOCAL_MODEL, ModelConfig, ModelIdError, TimeoutError, process_env,
};
pub use endpoint::{Endpoint, EndpointError, FORBIDDEN_PORT, MAX_ENDPOINT_LEN, MAX_SOCKET_PATH_BYTES, Target};
pub use error::{ClientError, FailureClass};
pub use wire::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, MAX_DIAGNOSTIC_CHARS, ResponseFormat, Role, Usage,
};

/// The chat path, fixed by the client (M3).
pub const CHAT_PATH: &str = "/v1/chat/completions";
/// llama-server's readiness path.
pub const HEALTH_PATH: &str = "/health";
/// Largest request body sent, in bytes; a larger request is refused before
/// any connection.
pub const MAX_REQUEST_BODY_BYTES: usize = 1024 * 1024;
/// Largest `200` response body read, in bytes; past it reading stops and the
/// request fails.
pub const MAX_RESPONSE_BODY_BYTES: usize = 1024 * 1024;
/// Largest part of an error (non-`200`) body read for its diagnostic, in
/// bytes; the rest is never read.
pub const MAX_ERROR_BODY_BYTES: usize = 16 * 1024;
/// Largest response head (status line and headers), in bytes.
pub const MAX_RESPONSE_HEAD_BYTES: usize = 16 * 1024;
/// Deadline of the TCP connection, within the total deadline. Loopback
/// answers at once or refuses at once; this only bounds the odd case.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of a `GET /health`, within the configured timeout.
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// hyper's smallest allowed read buffer bound.
const MIN_READ_BUF_BYTES: usize = 8 * 1024;

/// The client of one local model server (SPEC M3). Cheap to clone; holds no
/// connection between requests.
#[derive(Debug, Clone)]
pub struct LocalModelClient {
    config: ModelConfig,
}

/// The model server's readiness, from `GET /health`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `200`: it answers chat requests.
    Ready,
    /// `503`: it is loading its model.
    Loading,
    /// Anything else, with a short reason for the UI's unavailability line
    /// (M10).
    Unavailable {
        /// Why, bounded.
        reason: String,
    },
}

/// A cancellation signal shared between the runtime and a request in flight
/// (M8). Cloning shares it; once cancelled it stays cancelled.
#[derive(Debug, Clone)]
pub struct CancelToken {
    state: std::sync::Arc<watch::Sender<bool>>,
}

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Self { state: std::sync::Arc::new(watch::Sender::new(false)) }
    }

    /// Cancels: every request waiting on this token ends with
    /// [`ClientError::Cancelled`], and later requests are not sent.
    pub fn cancel(&self) {
        self.state.send_replace(true);
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        *self.state.borrow()
    }

    /// Resolves once the token is cancelled.
    pub async fn cancelled(&self) {
        let mut seen = self.state.subscribe();
        if seen.wait_for(|cancelled| *cancelled).await.is_err() {
            // The sender lives as long as `self`: unreachable, but never
            // report a cancellation that did not happen.
            std::future::pending::<()>().await;
        }
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

/// What came back from one exchange, body already bounded.
struct Reply {
    status: StatusCode,
    body: Vec<u8>,
}

/// What to do when a body is larger than its bound.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// Fail with [`ClientError::ResponseTooLarge`].
    Fail,
    /// Keep the first bytes and stop reading.
    Truncate,
}

impl LocalModelClient {
    /// A client of the configured server. Makes no connection.
    pub fn new(config: ModelConfig) -> Self {
        Self { config }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// `POST /v1/chat/completions` with the configured model id and
    /// `"stream": false`, within the configured timeout (M3).
    ///
    /// Dropping the returned future closes the connection; see
    /// [`chat_cancellable`](Self::chat_cancellable) to tie it to a
    /// [`CancelToken`].
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ClientError> {
        let body = request
            .wire_body(self.config.model())
            .map_err(|e| ClientError::Encode { reason: wire::diagnostic(&e.to_string()) })?;
        if body.len() > MAX_REQUEST_BODY_BYTES {
            return Err(ClientError::RequestTooLarge { size: body.len(), max: MAX_REQUEST_BODY_BYTES });
        }
        let request = self
            .request(Method::POST, CHAT_PATH)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ClientError::Encode { reason: wire::diagnostic(&e.to_string()) })?;
        let reply = self.exchange(request, self.config.timeout()).await?;
        match reply.status {
            StatusCode::OK => wire::parse_chat_response(&reply.body),
            status => Err(status_error(status, &reply.body)),
        }
    }

    /// [`chat`](Self::chat), ended early by `cancel` (M8): a cancelled token
    /// sends nothing; a cancellation while the request is in flight closes
    /// its connection; an answer that completes as the token is cancelled is
    /// ignored. In all three cases: [`ClientError::Cancelled`].
    pub async fn chat_cancellable(
        &self,
        request: &ChatRequest,
        cancel: &CancelToken,
    ) -> Result<ChatResponse, ClientError> {
        if cancel.is_cancelled() {
            return Err(ClientError::Cancelled);
        }
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ClientError::Cancelled),
            result = self.chat(request) => result,
        };
        if cancel.is_cancelled() {
            return Err(ClientError::Cancelled);
        }
        result
    }

    /// `GET /health` within [`HEALTH_TIMEOUT`] (or the configured timeout if
    /// shorter): whether the server can take a chat request now.
    pub async fn status(&self) -> Readiness {
        let request = match self.request(Method::GET, HEALTH_PATH).body(Empty::<Bytes>::new()) {
            Ok(request) => request,
            Err(e) => {
                return Readiness::Unavailable { reason: wire::diagnostic(&e.to_string()) };
            }
        };
        let deadline = HEALTH_TIMEOUT.min(self.config.timeout());
        match self.exchange(request, deadline).await {
            Ok(reply) if reply.status == StatusCode::OK => Readiness::Ready,
            Ok(reply) if reply.status == StatusCode::SERVICE_UNAVAILABLE => Readiness::Loading,
            Ok(reply) => Readiness::Unavailable { reason: status_error(reply.status, &reply.body).to_string() },
            Err(e) => Readiness::Unavailable { reason: e.to_string() },
        }
    }

    /// A request to the endpoint with only `Host` and `Accept` set: no
    /// `Authorization`, no `Cookie`, no `User-Agent`.
    fn request(&self, method: Method, path: &str) -> hyper::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.config.endpoint().host_header())
            .header(ACCEPT, "application/json")
    }

    /// One request on one fresh connection, within `deadline`.
    async fn exchange<B>(&self, request: Request<B>, deadline: Duration) -> Result<Reply, ClientError>
    where
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let path = request.uri().path().to_owned();
        let result = match tokio::time::timeout(deadline, self.exchange_inner(request, deadline)).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Timeout { after: deadline }),
        };
        let elapsed_ms = started.elapsed().as_millis();
        match &result {
            Ok(reply) => tracing::debug!(
                endpoint = %self.config.endpoint(),
                path,
                status = reply.status.as_u16(),
                body_bytes = reply.body.len(),
                elapsed_ms,
                "model server answered"
            ),
            Err(e) => tracing::debug!(
                endpoint = %self.config.endpoint(),
                path,
                error = %e,
                elapsed_ms,
                "model server request failed"
            ),
        }
        result
    }

    async fn exchange_inner<B>(&self, request: Request<B>, deadline: Duration) -> Result<Reply, ClientError>
    where
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        // The endpoint's address, and nothing else: no name to resolve, no
        // proxy to consult.
        let connect_deadline = CONNECT_TIMEOUT.min(deadline);
        match self.config.endpoint().target() {
            Target::Loopback(addr) => {
                let stream = connect(connect_deadline, TcpStream::connect(*addr)).await?;
                // Small requests and answers: latency over batching. Best effort.
                let _ = stream.set_nodelay(true);
                self.http1(stream, request).await
            }
            Target::Unix(path) => {
                self.http1(connect(connect_deadline, UnixStream::connect(path)).await?, request).await
            }
        }
    }

    /// One HTTP/1 exchange on a connected stream, its body bounded.
    async fn http1<S, B>(&self, stream: S, request: Request<B>) -> Result<Reply, ClientError>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
            .max_header_size(MAX_RESPONSE_HEAD_BYTES)
            .max_buf_size(MAX_RESPONSE_HEAD_BYTES.max(MIN_READ_BUF_BYTES))
            .handshake::<_, B>(TokioIo::new(stream))
            .await
            .map_err(transport)?;

        let exchange = async move {
            let response = sender.send_request(request).await.map_err(transport)?;
            let status = response.status();
            let (limit, overflow) = match status {
                StatusCode::OK => (MAX_RESPONSE_BODY_BYTES, Overflow::Fail),
                // A redirect's body is never read: nothing in it is used.
                s if s.is_redirection() => (0, Overflow::Truncate),
                _ => (MAX_ERROR_BODY_BYTES, Overflow::Truncate),
            };
            let body = read_bounded(response.into_body(), limit, overflow).await?;
            Ok(Reply { status, body })
        };

        // The connection is driven here rather than in a spawned task, so
        // that dropping this future (timeout, cancellation) closes the socket.
        tokio::pin!(connection);
        tokio::pin!(exchange);
        tokio::select! {
            result = &mut exchange => result,
            // The connection ended first (closed or failed): the exchange
            // now completes with what was received, or with an error.
            _ = &mut connection => exchange.await,
        }
    }
}

/// A connection made within `deadline`.
async fn connect<S>(
    deadline: Duration,
    connecting: impl std::future::Future<Output = std::io::Result<S>>,
) -> Result<S, ClientError> {
    tokio::time::timeout(deadline, connecting)
        .await
        .map_err(|_| ClientError::ConnectTimeout { after: deadline })?
        .map_err(|e| ClientError::Connect { reason: wire::diagnostic(&e.to_string()) })
}

/// Reads at most `limit` bytes of `body`; what happens past it depends on
/// `overflow`. A declared length over the limit fails before reading.
async fn read_bounded(mut body: Incoming, limit: usize, overflow: Overflow) -> Result<Vec<u8>, ClientError> {
    let too_large = || ClientError::ResponseTooLarge { max: limit };
    if overflow == Overflow::Fail && body.size_hint().lower() > limit as u64 {
        return Err(too_large());
    }
    let mut out = Vec::new();
    while out.len() < limit || overflow == Overflow::Fail {
        let Some(frame) = body.frame().await else {
            break;
        };
        let Ok(data) = frame.map_err(transport)?.into_data() else {
            continue; // trailers
        };
        let room = limit - out.len();
        if data.len() > room {
            if overflow == Overflow::Fail {
                return Err(too_large());
            }
            out.extend_from_slice(&data[..room]);
            break;
        }
        out.extend_from_slice(&data);
    }
    Ok(out)
}

/// The error for a status other than `200`.
fn status_error(status: StatusCode, body: &[u8]) -> ClientError {
    let code = status.as_u16();
    if status.is_redirection() {
        ClientError::Redirect { status: code }
    } else if status == StatusCode::SERVICE_UNAVAILABLE {
        ClientError::NotReady { message: wire::error_message(body) }
    } else if status.is_server_error() {
        ClientError::ServerError { status: code, message: wire::error_message(body) }
    } else if status == StatusCode::BAD_REQUEST && wire::is_context_exceeded(body) {
        ClientError::ContextExceeded { message: wire::error_message(body) }
    } else if status.is_client_error() {
        ClientError::Rejected { status: code, message: wire::error_message(body) }
    } else {
        ClientError::UnexpectedStatus { status: code }
    }
}

/// A hyper error: an answer that is not HTTP (another program on the port,
/// an oversized head) is a protocol error; a broken connection is not.
fn transport(error: hyper::Error) -> ClientError {
    let reason = wire::diagnostic(&error.to_string());
    if error.is_parse() { ClientError::Malformed { reason } } else { ClientError::Transport { reason } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        let class = |s: u16| status_error(StatusCode::from_u16(s).unwrap(), b"").class();
        assert_eq!(class(503), FailureClass::Unavailable);
        assert_eq!(class(500), FailureClass::Unavailable);
        assert_eq!(class(502), FailureClass::Unavailable);
        assert_eq!(class(301), FailureClass::Protocol);
        assert_eq!(class(302), FailureClass::Protocol);
        assert_eq!(class(307), FailureClass::Protocol);
        assert_eq!(class(400), FailureClass::Protocol);
        assert_eq!(class(404), FailureClass::Protocol);
        assert_eq!(class(204), FailureClass::Protocol);
        assert_eq!(status_error(StatusCode::FOUND, b"{}"), ClientError::Redirect { status: 302 });
    }

    #[test]
    fn a_full_context_is_told_apart_from_other_refusals() {
        // llama-server's body (build 11434), and OpenAI's code.
        let llama = br#"{"error":{"code":400,"message":"request (10229 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":10229,"n_ctx":8192}}"#;
        let openai = br#"{"error":{"message":"maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        for body in [&llama[..], &openai[..]] {
            let e = status_error(StatusCode::BAD_REQUEST, body);
            assert!(matches!(e, ClientError::ContextExceeded { message: Some(_) }), "{e:?}");
            assert_eq!(e.class(), FailureClass::InvalidRequest);
        }
        // Another 400, and the same words under another status, are refusals.
        let grammar = br#"{"error":{"code":400,"message":"invalid grammar","type":"invalid_request_error"}}"#;
        assert!(matches!(status_error(StatusCode::BAD_REQUEST, grammar), ClientError::Rejected { status: 400, .. }));
        assert!(matches!(status_error(StatusCode::NOT_FOUND, llama), ClientError::Rejected { status: 404, .. }));
    }

    #[test]
    fn a_cancel_token_stays_cancelled_and_is_shared() {
        let token = CancelToken::default();
        let clone = token.clone();
        assert!(!clone.is_cancelled());
        token.cancel();
        assert!(clone.is_cancelled());
        token.cancel();
        assert!(clone.is_cancelled());
    }

    #[tokio::test]
    async fn cancelled_resolves_for_past_and_future_cancels() {
        let token = CancelToken::new();
        let waiter = tokio::spawn({
            let token = token.clone();
            async move { token.cancelled().await }
        });
        tokio::task::yield_now().await;
        token.cancel();
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
        // Already cancelled: resolves at once.
        tokio::time::timeout(Duration::from_secs(5), token.cancelled()).await.unwrap();
    }
}
