//! What a command reports when it fails: a sentence and an exit status,
//! one mapping from error kinds for every command (and for `labfy-bench`).

use labfy_core::ErrorKind;
use labfy_server::listener::ListenerError;
use labfy_store::StoreError;

/// A failure to report: a sentence and an exit code.
pub struct Failure {
    message: String,
    kind: ErrorKind,
}

impl Failure {
    /// A failure of `kind`, told by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { message: message.into(), kind }
    }

    /// The sentence.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The process's exit status for it (the crate's README lists them).
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            ErrorKind::InvalidInput => 2,
            ErrorKind::Storage => 3,
            ErrorKind::Unavailable | ErrorKind::Conflict => 4,
            ErrorKind::Forbidden => 5,
            _ => 1,
        }
    }
}

/// The kind of failure a daemon's answer is, for the exit status and the
/// message (the one mapping from IPC codes, for every command).
pub fn error_kind(code: labfy_ipc::messages::FailureCode) -> ErrorKind {
    use labfy_ipc::messages::FailureCode as C;
    match code {
        C::InvalidInput => ErrorKind::InvalidInput,
        C::NotFound => ErrorKind::NotFound,
        C::Conflict => ErrorKind::Conflict,
        C::Forbidden | C::Refused => ErrorKind::Forbidden,
        C::Unavailable | C::Timeout | C::RateLimited => ErrorKind::Unavailable,
        C::Storage => ErrorKind::Storage,
        C::Internal => ErrorKind::Internal,
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Self::new(e.kind(), e.to_string())
    }
}

impl From<ListenerError> for Failure {
    fn from(e: ListenerError) -> Self {
        let kind = match e {
            ListenerError::InUse(_) => ErrorKind::Unavailable,
            ListenerError::NotLoopback(_) => ErrorKind::InvalidInput,
            _ => ErrorKind::Internal,
        };
        Self::new(kind, e.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Self::new(ErrorKind::Internal, e.to_string())
    }
}
