//! What can go wrong talking to the model server, and what the runtime
//! should make of it (SPEC M3, M7; STYLE 5).

use std::time::Duration;

/// The class of a [`ClientError`]: what the agent runtime does about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureClass {
    /// The model server is not there, not ready, too slow or failing: the
    /// turn ends `MODEL_UNAVAILABLE` (M7) and the UI shows a short
    /// unavailability line (M10). Never a fallback to the demo agent (M4).
    Unavailable,
    /// The server answered something the client cannot use (malformed, a
    /// redirect, a 4xx, too large): the turn ends `MODEL_PROTOCOL_ERROR`.
    Protocol,
    /// The request was cancelled by the caller; its answer, if any, is
    /// ignored (M8).
    Cancelled,
    /// The request could not be sent as built (too large), or the server
    /// said it does not fit the model's context: a budget (or a bug) on
    /// Labfy's side, not the server's fault.
    InvalidRequest,
}

/// A failed model request. Every text it carries is bounded (a few hundred
/// characters, control characters removed): never a whole body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection failed (refused, reset, unreachable).
    #[error("cannot connect to the model server: {reason}")]
    Connect {
        /// The OS error, as text.
        reason: String,
    },
    /// The TCP connection did not complete within the connect deadline.
    #[error("connecting to the model server timed out after {}ms", after.as_millis())]
    ConnectTimeout {
        /// The deadline that expired.
        after: Duration,
    },
    /// The exchange did not complete within the configured timeout.
    #[error("the model server did not answer within {}s", after.as_secs())]
    Timeout {
        /// The configured timeout.
        after: Duration,
    },
    /// The connection broke during the exchange (closed early, reset, bad
    /// HTTP framing).
    #[error("the exchange with the model server failed: {reason}")]
    Transport {
        /// What the HTTP layer said, bounded.
        reason: String,
    },
    /// `503`: llama-server is loading its model (or has no free slot).
    #[error("the model server is not ready (503){}", opt_message(message))]
    NotReady {
        /// The server's `error.message`, bounded, if it gave one.
        message: Option<String>,
    },
    /// Another `5xx`.
    #[error("the model server failed ({status}){}", opt_message(message))]
    ServerError {
        /// The HTTP status.
        status: u16,
        /// The server's `error.message`, bounded, if it gave one.
        message: Option<String>,
    },
    /// A `3xx`: redirects are never followed (M3).
    #[error("the model server answered a redirect ({status}); redirects are never followed")]
    Redirect {
        /// The HTTP status.
        status: u16,
    },
    /// A `4xx`: the server refused the request (e.g. an invalid grammar or
    /// schema: `invalid_request_error`).
    #[error("the model server refused the request ({status}){}", opt_message(message))]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The server's `error.message`, bounded, if it gave one.
        message: Option<String>,
    },
    /// A `400` saying the request does not fit the model's context window
    /// (llama-server's `exceed_context_size_error`, OpenAI's
    /// `context_length_exceeded`): the conversation has grown too long. The
    /// runtime concludes the turn from what it has rather than failing it.
    #[error("the request does not fit the model's context{}", opt_message(message))]
    ContextExceeded {
        /// The server's `error.message`, bounded, if it gave one.
        message: Option<String>,
    },
    /// A status the client does not handle (`1xx` other than the protocol's,
    /// `2xx` other than 200).
    #[error("the model server answered an unexpected status ({status})")]
    UnexpectedStatus {
        /// The HTTP status.
        status: u16,
    },
    /// The response body exceeds its bound; reading stopped there.
    #[error("the model server's answer exceeds {max} bytes; reading stopped")]
    ResponseTooLarge {
        /// The bound, in bytes.
        max: usize,
    },
    /// The response body is not the expected JSON.
    #[error("the model server's answer is malformed: {reason}")]
    Malformed {
        /// What is wrong, bounded.
        reason: String,
    },
    /// The request body exceeds its bound; nothing was sent.
    #[error("the request is {size} bytes, more than {max}; nothing was sent")]
    RequestTooLarge {
        /// The encoded size, in bytes.
        size: usize,
        /// The bound, in bytes.
        max: usize,
    },
    /// The request could not be encoded; nothing was sent.
    #[error("the request could not be encoded: {reason}")]
    Encode {
        /// The encoder's message, bounded.
        reason: String,
    },
    /// Cancelled by the caller; the answer, if one comes, is ignored (M8).
    #[error("the model request was cancelled")]
    Cancelled,
}

impl ClientError {
    /// What the runtime should make of it.
    pub fn class(&self) -> FailureClass {
        match self {
            Self::Connect { .. }
            | Self::ConnectTimeout { .. }
            | Self::Timeout { .. }
            | Self::Transport { .. }
            | Self::NotReady { .. }
            | Self::ServerError { .. } => FailureClass::Unavailable,
            Self::Redirect { .. }
            | Self::Rejected { .. }
            | Self::UnexpectedStatus { .. }
            | Self::ResponseTooLarge { .. }
            | Self::Malformed { .. } => FailureClass::Protocol,
            Self::RequestTooLarge { .. } | Self::Encode { .. } | Self::ContextExceeded { .. } => {
                FailureClass::InvalidRequest
            }
            Self::Cancelled => FailureClass::Cancelled,
        }
    }
}

fn opt_message(message: &Option<String>) -> String {
    match message {
        Some(m) => format!(": {m}"),
        None => String::new(),
    }
}
