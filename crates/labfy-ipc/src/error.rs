//! Errors of the IPC layer; each says which rule was broken.

use std::path::PathBuf;

/// Everything a connection can fail with.
#[derive(Debug, thiserror::Error)]
pub enum IpcError {
    /// The socket failed (peer gone, reset, …).
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// A deadline passed.
    #[error("timed out while {0}")]
    Timeout(&'static str),
    /// A frame announced more bytes than allowed.
    #[error("frame of {len} bytes refused (at most {max})")]
    Oversized {
        /// Announced length.
        len: u32,
        /// The bound.
        max: u32,
    },
    /// The frame is not the JSON expected here.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The peer was refused during authentication.
    #[error("peer refused: {0}")]
    Refused(String),
    /// The runtime directory or secret file is unsafe or unusable.
    #[error("{path}: {reason}")]
    Runtime {
        /// The path concerned.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}
