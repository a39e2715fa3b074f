//! Opening the database: checks before anything is written, then migrations.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::migrations::{APPLICATION_ID, LATEST, MIGRATIONS};

/// File name of the database inside a data directory.
pub const DB_FILE: &str = "labfy.sqlite3";

/// How long a connection waits for another writer before reporting `Busy`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Maps an open-time SQLite failure to a sentence about the file.
pub(crate) fn classify_open_error(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            StoreError::NotADatabase { path: path.to_path_buf() }
        }
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            StoreError::ReadOnly { path: path.to_path_buf(), detail: e.to_string() }
        }
        _ => StoreError::from(e),
    }
}

/// Reads the header facts of an open file and refuses what is not ours.
/// Returns the schema version found (0 for a fresh, empty file).
pub(crate) fn check_identity(conn: &Connection, path: &Path) -> Result<i64> {
    check_identity_of(conn, path, APPLICATION_ID, LATEST)
}

/// [`check_identity`] for a file of `app_id` whose newest schema is `latest`
/// (the database, the agent journal).
pub(crate) fn check_identity_of(conn: &Connection, path: &Path, app_id_expected: i32, latest: i64) -> Result<i64> {
    let err = |e| classify_open_error(path, e);
    let app_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(err)?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(err)?;
    let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).map_err(err)?;
    if app_id != app_id_expected && !(app_id == 0 && tables == 0) {
        return Err(StoreError::Foreign { path: path.to_path_buf(), found: app_id });
    }
    if version > latest {
        return Err(StoreError::TooNew { path: path.to_path_buf(), found: version, known: latest });
    }
    Ok(version)
}

/// Page cache of each connection, in KiB (SQLite's default is 2 MiB, far
/// too small for indexes keyed by random UUIDs).
pub const CACHE_KIB: i64 = 32 * 1024;
/// Bytes of the file each connection may map instead of reading.
pub const MMAP_BYTES: i64 = 256 * 1024 * 1024;

/// Connection settings shared by every connection.
/// Prepared statements kept compiled per connection.
const STATEMENT_CACHE: usize = 256;

pub(crate) fn configure(conn: &Connection, path: &Path) -> Result<()> {
    let err = |e| classify_open_error(path, e);
    conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
    conn.pragma_update(None, "foreign_keys", true).map_err(err)?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB).map_err(err)?;
    conn.pragma_update(None, "temp_store", "MEMORY").map_err(err)?;
    // One imported file runs some forty distinct statements (its evidence,
    // provenance, extraction, import record, job); rusqlite's default cache
    // of 16 would compile most of them again for every file.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // mmap_size answers with a row, so it is read rather than updated.
    let _: Option<i64> =
        conn.query_row(&format!("PRAGMA mmap_size = {MMAP_BYTES}"), [], |r| r.get(0)).optional().map_err(err)?;
    Ok(())
}

/// `<data_dir>/<name>`, created empty if absent, mode 0600 in a 0700
/// directory whatever the umask (SPEC T4): the database and the agent
/// journal (SQLite gives their -wal and -shm files the file's mode).
pub(crate) fn private_file(data_dir: &Path, name: &str) -> Result<PathBuf> {
    let dir_err = |source| StoreError::DataDir { path: data_dir.to_path_buf(), source };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(data_dir).map_err(dir_err)?;
    let path = data_dir.join(name);
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
        Ok(_) => Ok(path),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(path),
        Err(source) => Err(dir_err(source)),
    }
}

/// Opens (creating if needed) the read-write database of `data_dir` and brings
/// its schema to [`LATEST`].
pub(crate) fn open_read_write(data_dir: &Path) -> Result<(Connection, PathBuf)> {
    // SPEC T4: the data directory 0700 and the database 0600 whatever the
    // umask (SQLite gives its -wal and -shm files the database's mode).
    let path = private_file(data_dir, DB_FILE)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(&path, flags).map_err(|e| classify_open_error(&path, e))?;
    configure(&conn, &path)?;
    // Every write transaction takes the write lock when it begins, waiting
    // up to BUSY_TIMEOUT for another process's writer (`labfy import`, the
    // server's journal): a deferred one that read first would fail at once
    // on its first write instead (SQLITE_BUSY_SNAPSHOT, no busy wait).
    conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
    // Identity first: nothing is written to a file that is not ours.
    let version = check_identity(&conn, &path)?;
    let mode: String =
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(|e| classify_open_error(&path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::ReadOnly {
            path,
            detail: format!("could not switch to WAL journal mode (got `{mode}`)"),
        });
    }
    // FULL: a committed grant or audit row survives a power loss too.
    conn.pragma_update(None, "synchronous", "FULL").map_err(|e| classify_open_error(&path, e))?;
    migrate(&conn, &path, version)?;
    Ok((conn, path))
}

/// Opens the database of `data_dir` read-only (for readers such as the egress
/// daemon's grant checks). The schema must already be at [`LATEST`].
pub(crate) fn open_read_only(data_dir: &Path) -> Result<(Connection, PathBuf)> {
    let path = data_dir.join(DB_FILE);
    if !path.exists() {
        return Err(StoreError::NotFound(format!("database {}", path.display())));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&path, flags).map_err(|e| classify_open_error(&path, e))?;
    configure(&conn, &path)?;
    let version = check_identity(&conn, &path)?;
    if version != LATEST {
        return Err(StoreError::Conflict(format!(
            "{} has schema version {version}, expected {LATEST}; start `labfy up` once to migrate it",
            path.display()
        )));
    }
    Ok((conn, path))
}

fn migrate(conn: &Connection, path: &Path, from: i64) -> Result<()> {
    if from == 0 {
        conn.pragma_update(None, "application_id", APPLICATION_ID).map_err(|e| classify_open_error(path, e))?;
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(usize::try_from(from).unwrap_or(0)) {
        let target = index as i64 + 1;
        let tx = conn.unchecked_transaction().map_err(|e| classify_open_error(path, e))?;
        tx.execute_batch(sql).map_err(|e| classify_open_error(path, e))?;
        // user_version lives in the header page: it commits with the schema.
        tx.pragma_update(None, "user_version", target).map_err(|e| classify_open_error(path, e))?;
        tx.commit().map_err(|e| classify_open_error(path, e))?;
        tracing::info!(version = target, "schema migrated");
    }
    Ok(())
}

/// Runs `PRAGMA integrity_check` and reports the first problems, if any.
pub(crate) fn integrity_check(conn: &Connection, path: &Path) -> Result<()> {
    let mut stmt = conn.prepare("PRAGMA integrity_check(20)")?;
    let lines: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    if lines == ["ok"] {
        Ok(())
    } else {
        Err(StoreError::Corrupt { path: path.to_path_buf(), detail: lines.join("; ") })
    }
}

/// Schema version of an open connection.
pub(crate) fn schema_version(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0)).optional()?.unwrap_or(0))
}
