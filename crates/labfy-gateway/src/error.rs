//! Errors of the gateway's transport (STYLE 5). A tool's own failure is not
//! an error here: it is a result with a status and a diagnostic (G8). These
//! are refusals of the request itself: malformed envelope, unknown turn,
//! idempotency conflict.

use labfy_core::ErrorKind;
use labfy_store::StoreError;

/// A refused gateway request.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The envelope is malformed or out of bounds.
    #[error("{0}")]
    Invalid(String),
    /// No such turn, result or request in this workspace and instance.
    #[error("{0}")]
    NotFound(String),
    /// Idempotency conflict, call in flight, or a turn in the wrong state.
    #[error("{0}")]
    Conflict(String),
    /// Policy forbids it (e.g. resuming without an active grant).
    #[error("{0}")]
    Forbidden(String),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A bug: a task that panicked, a state that cannot be. Never the
    /// caller's fault, never a 4xx.
    #[error("{0}")]
    Internal(String),
}

impl GatewayError {
    /// The shared classification.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Conflict(_) => ErrorKind::Conflict,
            Self::Forbidden(_) => ErrorKind::Forbidden,
            Self::Store(e) => e.kind(),
            Self::Internal(_) => ErrorKind::Internal,
        }
    }
}
