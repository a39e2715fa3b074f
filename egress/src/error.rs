//! Why egress cannot start (STYLE 5). Fetch outcomes are not errors: a
//! refusal, an unavailable Tor or a misbehaving server is a
//! [`labfy_ipc::messages::egress::FetchOutcome`] with its reason.

use std::path::PathBuf;

use labfy_core::ErrorKind;

/// A configuration egress refuses to start with (the binary exits 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file or directory could not be read or created.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The data directory does not exist (`labfy up` creates it).
    #[error("data directory {0} does not exist")]
    NoDataDir(PathBuf),
    /// The arti configuration file is larger than egress reads.
    #[error("{path}: larger than {max} bytes; this is not an arti configuration file")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        max: u64,
    },
    /// The arti configuration file is not valid TOML, or a value has the
    /// wrong type.
    #[error("{path}: not a valid arti configuration: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// Keys arti does not know (or that belong to the `arti` program, not to
    /// a Tor client): refused rather than silently ignored.
    #[error("{path}: unknown key(s) {}: not part of arti's client configuration", keys.join(", "))]
    UnknownKeys {
        /// The file.
        path: PathBuf,
        /// The keys, dotted.
        keys: Vec<String>,
    },
    /// The file sets where arti keeps its state or cache: Labfy decides that
    /// (`<data>/egress/arti/{state,cache}`).
    #[error(
        "{path}: `{key}` is Labfy's to set (arti's state and cache live under <data-dir>/egress/arti); remove it — only [storage.permissions] may be given"
    )]
    StorageForced {
        /// The file.
        path: PathBuf,
        /// The key, dotted.
        key: String,
    },
    /// arti refused the configuration as a whole (missing or inconsistent
    /// values).
    #[error("{path}: arti refuses this configuration: {message}")]
    Invalid {
        /// The file, or `(defaults)`.
        path: PathBuf,
        /// arti's message.
        message: String,
    },
}

impl ConfigError {
    /// How the CLI and the supervisor classify it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Io { .. } => ErrorKind::Storage,
            _ => ErrorKind::InvalidInput,
        }
    }
}
