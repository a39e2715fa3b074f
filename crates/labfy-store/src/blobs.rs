//! The content-addressed blob store (SPEC C2): the original bytes of every
//! imported file, under `<data>/blobs/sha256/<2 hex>/<64 hex>`, named by
//! their SHA-256.
//!
//! A blob is written to `<data>/blobs/tmp/` while it is hashed, flushed to
//! disk (`fsync`), then renamed into place and its directory flushed: a
//! crash leaves either no blob or a whole one, never half of one under its
//! final name. A blob is referenced from SQLite (`blobs`, `evidence.
//! blob_sha256`) only after it is in place, so no row names a missing blob;
//! a whole blob whose row was never committed is harmless (the next import
//! of the same bytes finds it), and what a crash left in `tmp/` is removed
//! when the store is next opened.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The blob store's folder under a data directory.
pub fn blob_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("blobs")
}

/// Why a blob was not stored.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// More bytes than the bound.
    #[error("larger than {max} bytes")]
    TooLarge {
        /// The bound.
        max: u64,
    },
    /// The disk is full.
    #[error("the disk is full")]
    DiskFull,
    /// Any other failure of the file system.
    #[error("blob store: {0}")]
    Io(#[from] io::Error),
}

impl BlobError {
    fn of(e: io::Error) -> Self {
        if e.raw_os_error() == Some(libc_enospc()) { BlobError::DiskFull } else { BlobError::Io(e) }
    }
}

/// `ENOSPC` on Linux (the store does not link `libc` for one constant).
const fn libc_enospc() -> i32 {
    28
}

/// A stored blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
    /// Its size.
    pub len: u64,
}

/// How old a file of `tmp/` must be to be taken for the leftover of an
/// interrupted write.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// The blob store of one data directory.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
    /// When set ([`BlobStore::deferring_sync`]), blobs are flushed at
    /// [`BlobStore::sync`] rather than each as it is stored: whether any
    /// waits.
    pending: Option<std::sync::Arc<std::sync::Mutex<bool>>>,
}

impl BlobStore {
    /// Opens (creating) `<data>/blobs`, removing what an interrupted write
    /// left in its `tmp/` (files untouched for an hour).
    pub fn open(data_dir: &Path) -> io::Result<Self> {
        let root = blob_dir(data_dir);
        fs::create_dir_all(root.join("tmp"))?;
        fs::create_dir_all(root.join("sha256"))?;
        // What an interrupted write left — not what another process (the
        // workspace server, `labfy import`) is writing now: a writer's file
        // changes as it writes.
        let stale = std::time::SystemTime::now() - STALE_TMP;
        for entry in fs::read_dir(root.join("tmp"))? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_file() && meta.modified().is_ok_and(|m| m < stale) {
                fs::remove_file(entry.path())?;
            }
        }
        Ok(BlobStore { root, pending: None })
    }

    /// The blob store of `data_dir`, for reading only (nothing created).
    pub fn at(data_dir: &Path) -> Self {
        BlobStore { root: blob_dir(data_dir), pending: None }
    }

    /// This store, its blobs made durable together at [`BlobStore::sync`]
    /// instead of one by one (`labfy import`, SPEC I1: one flush for a batch
    /// of files rather than two per file). The caller calls `sync` before
    /// it commits any row that names them.
    pub fn deferring_sync(mut self) -> Self {
        self.pending = Some(std::sync::Arc::default());
        self
    }

    /// Makes every blob stored since the last call durable, with the
    /// folders that name them: one `syncfs` of the data directory's file
    /// system (nothing for a store that flushes each blob).
    pub fn sync(&self) -> io::Result<()> {
        let Some(pending) = &self.pending else { return Ok(()) };
        // Cleared before the flush, and not held during it: a blob stored
        // meanwhile sets it again and waits for the next call (its rows
        // cannot be in the batch being committed: they are recorded after
        // it is stored).
        let waiting = std::mem::take(&mut *pending.lock().map_err(|_| io::Error::other("blob store lock poisoned"))?);
        if !waiting {
            return Ok(());
        }
        labfy_core::durable::sync_file_system(&self.root).inspect_err(|_| {
            if let Ok(mut w) = pending.lock() {
                *w = true;
            }
        })
    }

    /// Where the blob named `sha256` lies (whether or not it exists).
    pub fn path(&self, sha256: &str) -> PathBuf {
        let prefix = sha256.get(..2).unwrap_or("xx");
        self.root.join("sha256").join(prefix).join(sha256)
    }

    /// Opens a stored blob for reading.
    pub fn open_blob(&self, sha256: &str) -> io::Result<File> {
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("not a SHA-256: {sha256:?}")));
        }
        File::open(self.path(sha256))
    }

    /// Reads a stored blob (the file named `name`; `charset`: what its
    /// transport declared, from [`labfy_parse::charset_of`]) with a confined parser
    /// worker started from `program`, within `wall`: what it read, or — the
    /// blob unreadable, the worker dead, late or lying — the blob as binary
    /// with the reason (`labfy_parse::run`). The worker is a plain child of
    /// the caller, which must be confined already (the workspace server);
    /// an unconfined caller uses [`BlobStore::parse_in`].
    pub fn parse_confined(
        &self,
        program: &Path,
        blob: &Blob,
        name: &str,
        charset: Option<&str>,
        wall: std::time::Duration,
    ) -> labfy_parse::Parsed {
        self.parse_blob(blob, |f| labfy_parse::run::parse_confined(program, f, blob.len, name, charset, wall))
    }

    /// [`BlobStore::parse_confined`] for a caller that is not confined
    /// itself (`labfy import` on the host, SPEC V3, I1): the worker is the
    /// `session`'s, in a jail of its own, and reads document after document
    /// (`labfy_parse::session`).
    pub fn parse_in(
        &self,
        session: &mut labfy_parse::session::Session,
        blob: &Blob,
        name: &str,
        charset: Option<&str>,
        wall: std::time::Duration,
    ) -> labfy_parse::Parsed {
        self.parse_blob(blob, |f| session.parse(f, blob.len, name, charset, wall))
    }

    /// `parse` of the blob's file, or the blob as binary when it cannot be
    /// opened.
    fn parse_blob(&self, blob: &Blob, parse: impl FnOnce(File) -> labfy_parse::Parsed) -> labfy_parse::Parsed {
        match self.open_blob(&blob.sha256) {
            Ok(f) => parse(f),
            Err(e) => labfy_parse::Parsed::unread("application/octet-stream", &format!("blob unreadable: {e}")),
        }
    }

    /// A writer for a new blob of at most `max` bytes.
    pub fn writer(&self, max: u64) -> Result<BlobWriter, BlobError> {
        let dir = self.root.join("tmp");
        fs::create_dir_all(&dir).map_err(BlobError::of)?;
        let tmp = dir.join(Uuid::now_v7().to_string());
        let file = OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(BlobError::of)?;
        Ok(BlobWriter { store: self.clone(), tmp, file: Some(file), hash: Sha256::new(), len: 0, max })
    }

    /// Stores everything `reader` gives, up to `max` bytes.
    pub fn put(&self, reader: &mut impl Read, max: u64) -> Result<Blob, BlobError> {
        let mut w = self.writer(max)?;
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(BlobError::Io(e)),
            };
            w.write(&buf[..n])?;
        }
        w.commit()
    }
}

/// A blob being written; dropped without [`BlobWriter::commit`], it leaves
/// nothing.
pub struct BlobWriter {
    store: BlobStore,
    tmp: PathBuf,
    file: Option<File>,
    hash: Sha256,
    len: u64,
    max: u64,
}

impl BlobWriter {
    /// Appends `bytes`; refused past the bound.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), BlobError> {
        self.len += bytes.len() as u64;
        if self.len > self.max {
            return Err(BlobError::TooLarge { max: self.max });
        }
        self.hash.update(bytes);
        let file = self.file.as_mut().ok_or_else(|| BlobError::Io(io::Error::other("blob already committed")))?;
        file.write_all(bytes).map_err(BlobError::of)
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Flushes the bytes to disk and moves them under their name (or drops
    /// them if that blob is already stored).
    pub fn commit(mut self) -> Result<Blob, BlobError> {
        let file = self.file.take().ok_or_else(|| BlobError::Io(io::Error::other("blob already committed")))?;
        if self.store.pending.is_none() {
            file.sync_all().map_err(BlobError::of)?;
        }
        drop(file);
        let sha256 = hex::encode(std::mem::take(&mut self.hash).finalize());
        let dest = self.store.path(&sha256);
        let dir = dest.parent().ok_or_else(|| BlobError::Io(io::Error::other("blob path has no parent")))?;
        fs::create_dir_all(dir).map_err(BlobError::of)?;
        // Deferred: marked waiting before the name exists, so that no row
        // naming it is committed before the next `sync` — this writer's, or
        // another's that finds the name already there.
        if let Some(pending) = &self.store.pending {
            *pending.lock().map_err(|_| BlobError::Io(io::Error::other("blob store lock poisoned")))? = true;
        }
        // A blob already stored is kept — unless it is not whole (a crash
        // before a deferred flush can leave its name on fewer bytes): then
        // these bytes, which hash to its name, take its place.
        let whole = fs::metadata(&dest).is_ok_and(|m| m.len() == self.len);
        if whole {
            fs::remove_file(&self.tmp)?;
        } else {
            fs::rename(&self.tmp, &dest).map_err(BlobError::of)?;
            if self.store.pending.is_none() {
                File::open(dir)?.sync_all()?;
            }
        }
        Ok(Blob { sha256, len: self.len })
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_named_by_its_hash_and_stored_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = BlobStore::open(dir.path()).expect("open");
        let a = store.put(&mut &b"bonjour"[..], 100).expect("put");
        assert_eq!(a.sha256, crate::sha256_hex(b"bonjour"));
        assert_eq!(a.len, 7);
        assert_eq!(fs::read(store.path(&a.sha256)).expect("read"), b"bonjour");
        let b = store.put(&mut &b"bonjour"[..], 100).expect("again");
        assert_eq!(a, b);
        assert_eq!(fs::read_dir(blob_dir(dir.path()).join("tmp")).expect("tmp").count(), 0);
    }

    #[test]
    fn a_blob_over_the_bound_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = BlobStore::open(dir.path()).expect("open");
        let err = store.put(&mut &[7u8; 1000][..], 999).unwrap_err();
        assert!(matches!(err, BlobError::TooLarge { max: 999 }), "{err}");
        assert_eq!(fs::read_dir(blob_dir(dir.path()).join("tmp")).expect("tmp").count(), 0);
        assert!(!store.path(&crate::sha256_hex(&[7u8; 1000])).exists());
    }

    #[test]
    fn what_a_crash_left_in_tmp_is_removed_at_open_not_what_another_process_writes() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = BlobStore::open(dir.path()).expect("open");
        let tmp = || fs::read_dir(blob_dir(dir.path()).join("tmp")).expect("tmp").count();
        // Another process writing now (the server, `labfy import`).
        let w = store.writer(10).expect("writer");
        std::mem::forget(w);
        BlobStore::open(dir.path()).expect("reopen");
        assert_eq!(tmp(), 1, "a file being written is left alone");
        // Left two hours ago by a write that was interrupted.
        for e in fs::read_dir(blob_dir(dir.path()).join("tmp")).expect("tmp") {
            let f = File::options().write(true).open(e.expect("entry").path()).expect("open");
            f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(7200)).expect("mtime");
        }
        BlobStore::open(dir.path()).expect("reopen");
        assert_eq!(tmp(), 0);
    }

    /// A crash before a deferred flush can leave a blob's name on fewer
    /// bytes: the same bytes stored again take its place.
    #[test]
    fn a_blob_cut_short_is_replaced_by_the_same_bytes_stored_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = BlobStore::open(dir.path()).expect("open").deferring_sync();
        let bytes = b"le texte entier".to_vec();
        let blob = store.put(&mut &bytes[..], 100).expect("put");
        store.sync().expect("sync");
        fs::write(store.path(&blob.sha256), &bytes[..4]).expect("cut");
        let again = store.put(&mut &bytes[..], 100).expect("put again");
        assert_eq!(again, blob);
        assert_eq!(fs::read(store.path(&blob.sha256)).expect("read"), bytes);
    }

    #[test]
    fn only_a_hash_names_a_blob() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = BlobStore::open(dir.path()).expect("open");
        assert!(store.open_blob("../../etc/passwd").is_err());
    }
}
