//! Errors of the store (STYLE 5): each variant names what happened and what to do.

use std::path::PathBuf;

use labfy_core::ErrorKind;

/// Everything the store can refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data directory could not be created or used.
    #[error("cannot use data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The database file is not SQLite at all (corrupt, or another kind of file).
    #[error(
        "{path} is not a SQLite database (corrupt, or another kind of file); Labfy leaves it untouched — move it aside or pick another data directory"
    )]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// A SQLite database, but not one of Labfy's.
    #[error(
        "{path} is a SQLite database that does not belong to Labfy (application_id {found:#010x}, tables present); Labfy leaves it untouched — pick another data directory"
    )]
    Foreign {
        /// The file.
        path: PathBuf,
        /// The application id found in its header.
        found: i32,
    },
    /// Written by a newer Labfy: migrating down is never attempted.
    #[error(
        "{path} has schema version {found}, newer than this build knows ({known}); upgrade Labfy — the file is left untouched"
    )]
    TooNew {
        /// The file.
        path: PathBuf,
        /// The schema version in the file.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The file or its directory cannot be written.
    #[error("{path} cannot be written (read-only file, directory or file system): {detail}")]
    ReadOnly {
        /// The file.
        path: PathBuf,
        /// SQLite's words.
        detail: String,
    },
    /// The SQLite file failed its integrity check.
    #[error("{path} failed its integrity check: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// First lines of `PRAGMA integrity_check`.
        detail: String,
    },
    /// Input refused by a bound or a rule; the message says which.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The object does not exist in this workspace.
    #[error("{0} not found")]
    NotFound(String),
    /// The request conflicts with stored state.
    #[error("conflict: {0}")]
    Conflict(String),
    /// SQLite found damage while reading or writing (after a successful open).
    #[error(
        "the database file is damaged ({0}); stop Labfy, keep the file, and restore the data directory from a backup"
    )]
    Damaged(String),
    /// The database is busy beyond the busy timeout.
    #[error("database busy: {0}")]
    Busy(String),
    /// Any other SQLite failure: a bug or an environment problem.
    #[error("storage failure: {0}")]
    Sqlite(rusqlite::Error),
    /// A broken invariant (a bug), reported instead of a panic.
    #[error("broken invariant: {0}")]
    Internal(String),
}

/// How the triggers of a received investigation begin their refusal
/// (`migrations`, version 10).
const READ_ONLY_PREFIX: &str = "read-only: ";

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Self::Busy(e.to_string()),
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Self::Damaged(e.to_string()),
            // A write into a received investigation, stopped by its
            // triggers (SPEC I4): a refusal, said as such.
            Some(ErrorCode::ConstraintViolation) => match &e {
                rusqlite::Error::SqliteFailure(_, Some(m)) if m.starts_with(READ_ONLY_PREFIX) => {
                    Self::Conflict(format!("this investigation was received from another appliance and is {m}"))
                }
                _ => Self::Sqlite(e),
            },
            _ => Self::Sqlite(e),
        }
    }
}

impl StoreError {
    /// The shared classification of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Conflict(_) => ErrorKind::Conflict,
            Self::Busy(_) => ErrorKind::Unavailable,
            Self::DataDir { .. }
            | Self::NotADatabase { .. }
            | Self::Foreign { .. }
            | Self::TooNew { .. }
            | Self::ReadOnly { .. }
            | Self::Corrupt { .. }
            | Self::Damaged(_) => ErrorKind::Storage,
            Self::Sqlite(_) | Self::Internal(_) => ErrorKind::Internal,
        }
    }
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
