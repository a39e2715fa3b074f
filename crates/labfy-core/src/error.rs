//! The error classification shared across crates (STYLE 5).

use serde::Serialize;

/// What kind of failure happened, independent of which crate reported it.
///
/// The HTTP layer maps each kind to one status code; the CLI maps each kind to
/// an exit code and a sentence. Keep the list short: a kind answers "what should
/// the caller do about it", not "what went wrong in detail".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorKind {
    /// The caller sent something malformed or out of bounds; fix the input.
    InvalidInput,
    /// The named object does not exist (or is not visible from this workspace).
    NotFound,
    /// The request conflicts with what is stored (duplicate, wrong state).
    Conflict,
    /// A policy forbids it, whatever the input.
    Forbidden,
    /// A resource or a dependency is not available now; it may be later.
    Unavailable,
    /// The data on disk is not what Labfy expects (corrupt, foreign, too new).
    Storage,
    /// A broken invariant: a bug in Labfy. Reported, never a panic.
    Internal,
}

impl ErrorKind {
    /// Stable machine-readable code used in JSON error bodies.
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidInput => "INVALID_INPUT",
            Self::NotFound => "NOT_FOUND",
            Self::Conflict => "CONFLICT",
            Self::Forbidden => "FORBIDDEN",
            Self::Unavailable => "UNAVAILABLE",
            Self::Storage => "STORAGE",
            Self::Internal => "INTERNAL",
        }
    }
}
