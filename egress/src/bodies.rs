//! Fetched bodies waiting for the server (SPEC C3): each body is streamed
//! to a file of its own in egress's part of the scratch directory (the
//! governor measures that directory and admitted the campaign's scratch),
//! hashed as it arrives, and never held whole in memory. The server reads
//! it in chunks of at most [`BODY_CHUNK_BYTES`] (`ReadBody`), then releases
//! it (`ReleaseBody`); a body nobody releases is deleted after
//! [`BODY_TTL`], and the directory is emptied when egress starts.
//!
//! Only the workspace that fetched a body may read or release it: a handle
//! is a fresh UUID and is checked together with its workspace.
//!
//! The directory is opened once, and every file in it is created, opened and
//! deleted relative to that open directory (`openat`, `unlinkat`, never
//! following a link), never by path again (SPEC V5): whoever can rename or
//! swap a directory on the path later — the server shares the scratch
//! directory — cannot divert a body into a directory of its choosing, nor
//! hand egress a file of its own to serve as one.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use labfy_ipc::messages::egress::BODY_CHUNK_BYTES;
use rustix::fs::{AtFlags, Mode, OFlags};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

/// How long a body waits for the server before it is deleted.
pub const BODY_TTL: Duration = Duration::from_secs(10 * 60);
/// Most bodies waiting at once; past it the oldest is deleted (a server
/// that never releases cannot fill the scratch directory).
pub const MAX_WAITING_BODIES: usize = 64;

/// Egress's part of the scratch directory: `<scratch>/egress`.
pub fn bodies_dir(scratch_dir: &Path) -> PathBuf {
    scratch_dir.join("egress")
}

/// The waiting bodies. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Bodies {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where the directory was when it was opened (for the log).
    dir: PathBuf,
    /// The directory itself: every file call is relative to it.
    fd: Arc<OwnedFd>,
    waiting: Mutex<HashMap<Uuid, Waiting>>,
}

struct Waiting {
    workspace: Uuid,
    /// The file's name in the directory.
    name: String,
    len: u64,
    kept_at: Instant,
}

/// Deletes `name` from the directory `fd`; a file already gone is no error.
fn remove(fd: &OwnedFd, name: &str) {
    if let Err(e) = rustix::fs::unlinkat(fd, name, AtFlags::empty()) {
        if e != rustix::io::Errno::NOENT {
            tracing::warn!(error = %e, name, "a fetched body's file was not deleted");
        }
    }
}

impl Bodies {
    /// Opens `dir` (created private if missing) and deletes what an earlier
    /// run left there: no handle to it survives a restart.
    pub fn open(dir: &Path) -> io::Result<Self> {
        fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let fd = rustix::fs::open(
            dir,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            if entry.file_type() == rustix::fs::FileType::RegularFile {
                rustix::fs::unlinkat(&fd, entry.file_name(), AtFlags::empty())?;
            }
        }
        Ok(Self {
            inner: Arc::new(Inner { dir: dir.to_owned(), fd: Arc::new(fd), waiting: Mutex::new(HashMap::new()) }),
        })
    }

    /// Where the directory bodies are written to was when egress opened it.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// A new file to stream one body into; deleted when dropped unless kept.
    pub(crate) async fn spool(&self) -> io::Result<Spool> {
        let name = format!("{}.body", Uuid::new_v4());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&*self.inner.fd, &name, flags, Mode::from_raw_mode(0o600))?;
        let file = tokio::fs::File::from_std(fs::File::from(fd));
        Ok(Spool { file: Some(file), dir: self.inner.fd.clone(), name: Some(name), len: 0, hash: Sha256::new() })
    }

    /// Keeps a finished body for `workspace`: its handle.
    pub(crate) fn keep(&self, workspace: Uuid, spool: &mut Spool) -> Option<String> {
        let name = spool.name.take()?;
        let handle = Uuid::new_v4();
        let mut waiting = self.inner.lock();
        self.inner.expire(&mut waiting);
        while waiting.len() >= MAX_WAITING_BODIES {
            let Some(oldest) = waiting.iter().min_by_key(|(_, w)| w.kept_at).map(|(h, _)| *h) else { break };
            if let Some(w) = waiting.remove(&oldest) {
                tracing::warn!(bytes = w.len, "a fetched body nobody read was deleted to make room");
                remove(&self.inner.fd, &w.name);
            }
        }
        waiting.insert(handle, Waiting { workspace, name, len: spool.len, kept_at: Instant::now() });
        Some(handle.to_string())
    }

    /// At most [`BODY_CHUNK_BYTES`] of a waiting body from `offset`, and
    /// whether they end it.
    pub fn read(&self, workspace: Uuid, handle: &str, offset: u64) -> Result<(Vec<u8>, bool), String> {
        let (name, len) = {
            let mut waiting = self.inner.lock();
            self.inner.expire(&mut waiting);
            let w = find(&waiting, workspace, handle)?;
            (w.name.clone(), w.len)
        };
        if offset > len {
            return Err(format!("offset {offset} is past the body's end ({len} bytes)"));
        }
        let want = (len - offset).min(BODY_CHUNK_BYTES);
        let fd = rustix::fs::openat(
            &*self.inner.fd,
            &name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("the body cannot be read: {e}"))?;
        let mut file = fs::File::from(fd);
        file.seek(SeekFrom::Start(offset)).map_err(|e| format!("the body cannot be read: {e}"))?;
        let mut data = Vec::with_capacity(want as usize);
        file.take(want).read_to_end(&mut data).map_err(|e| format!("the body cannot be read: {e}"))?;
        if data.len() as u64 != want {
            return Err(format!("the body file is shorter than its {len} bytes"));
        }
        Ok((data, offset + want == len))
    }

    /// Deletes a waiting body; false when there was none of that handle.
    pub fn release(&self, workspace: Uuid, handle: &str) -> bool {
        let mut waiting = self.inner.lock();
        let Ok(id) = find(&waiting, workspace, handle).and_then(|_| Uuid::try_parse(handle).map_err(|e| e.to_string()))
        else {
            return false;
        };
        waiting.remove(&id).is_some_and(|w| {
            remove(&self.inner.fd, &w.name);
            true
        })
    }

    /// Bodies waiting now.
    pub fn waiting(&self) -> usize {
        self.inner.lock().len()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn expire(&self, waiting: &mut HashMap<Uuid, Waiting>) {
        waiting.retain(|_, w| {
            let alive = w.kept_at.elapsed() < BODY_TTL;
            if !alive {
                remove(&self.fd, &w.name);
            }
            alive
        });
    }
}

fn find<'a>(waiting: &'a HashMap<Uuid, Waiting>, workspace: Uuid, handle: &str) -> Result<&'a Waiting, String> {
    let gone = || "no such body: it was released, expired or never kept".to_owned();
    let id = Uuid::try_parse(handle).map_err(|_| "a body handle is a UUID".to_owned())?;
    // Another workspace's body reads as absent: a handle says nothing.
    waiting.get(&id).filter(|w| w.workspace == workspace).ok_or_else(gone)
}

/// One body being written; its file is deleted when dropped unless
/// [`Bodies::keep`] took it.
pub(crate) struct Spool {
    file: Option<tokio::fs::File>,
    /// The bodies' directory, and the file's name in it.
    dir: Arc<OwnedFd>,
    name: Option<String>,
    len: u64,
    hash: Sha256,
}

impl Spool {
    /// Appends bytes.
    pub(crate) async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let file = self.file.as_mut().ok_or_else(|| io::Error::other("the body is already finished"))?;
        file.write_all(bytes).await?;
        self.hash.update(bytes);
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and closes the file: the body is complete.
    pub(crate) async fn finish(&mut self) -> io::Result<()> {
        if let Some(mut f) = self.file.take() {
            f.flush().await?;
        }
        Ok(())
    }

    /// Bytes written.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// SHA-256 of the bytes written, lower-case hex.
    pub(crate) fn sha256(&self) -> String {
        hex::encode(self.hash.clone().finalize())
    }
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool").field("name", &self.name).field("len", &self.len).finish()
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            remove(&self.dir, &name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_is_read_in_chunks_by_its_workspace_only_then_released() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("left-over.body"), b"x").unwrap();
        let bodies = Bodies::open(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "an earlier run's bodies are deleted");
        let (ws, other) = (Uuid::new_v4(), Uuid::new_v4());
        let body: Vec<u8> = (0..BODY_CHUNK_BYTES + 10).map(|i| (i % 251) as u8).collect();
        let mut spool = bodies.spool().await.unwrap();
        spool.write(&body[..1000]).await.unwrap();
        spool.write(&body[1000..]).await.unwrap();
        spool.finish().await.unwrap();
        assert_eq!(spool.sha256(), hex::encode(Sha256::digest(&body)));
        let handle = bodies.keep(ws, &mut spool).unwrap();
        drop(spool);
        assert_eq!(bodies.waiting(), 1);

        assert!(bodies.read(other, &handle, 0).unwrap_err().contains("no such body"));
        assert!(!bodies.release(other, &handle), "another workspace cannot release it");
        let (first, eof) = bodies.read(ws, &handle, 0).unwrap();
        assert_eq!((first.len() as u64, eof), (BODY_CHUNK_BYTES, false));
        let (rest, eof) = bodies.read(ws, &handle, BODY_CHUNK_BYTES).unwrap();
        assert!(eof);
        assert_eq!([first, rest].concat(), body);
        assert!(bodies.read(ws, &handle, body.len() as u64 + 1).unwrap_err().contains("past the body's end"));
        assert!(bodies.read(ws, "not-a-uuid", 0).unwrap_err().contains("UUID"));
        assert!(bodies.release(ws, &handle));
        assert!(!bodies.release(ws, &handle));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing left in scratch");
    }

    /// SPEC V5: the directory swapped under egress after it opened it (the
    /// server shares the scratch directory): bodies still go to, are read
    /// from and deleted in the directory egress opened, never the impostor;
    /// a link planted under a body's name is not followed.
    #[tokio::test]
    async fn a_swapped_directory_diverts_no_body() {
        let root = tempfile::tempdir().unwrap();
        let (dir, moved) = (root.path().join("egress"), root.path().join("moved"));
        let bodies = Bodies::open(&dir).unwrap();
        std::fs::rename(&dir, &moved).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let ws = Uuid::new_v4();
        let mut spool = bodies.spool().await.unwrap();
        spool.write(b"the real body").await.unwrap();
        spool.finish().await.unwrap();
        let handle = bodies.keep(ws, &mut spool).unwrap();
        drop(spool);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing written to the impostor");
        let names: Vec<_> = std::fs::read_dir(&moved).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "the body is in the directory egress opened");
        // The impostor offers a file of the same name: egress reads its own.
        std::fs::write(dir.join(&names[0]), b"forged").unwrap();
        assert_eq!(bodies.read(ws, &handle, 0).unwrap(), (b"the real body".to_vec(), true));
        // A link in place of the body is not followed.
        std::fs::remove_file(moved.join(&names[0])).unwrap();
        std::os::unix::fs::symlink(dir.join(&names[0]), moved.join(&names[0])).unwrap();
        assert!(bodies.read(ws, &handle, 0).unwrap_err().contains("cannot be read"));
        assert!(bodies.release(ws, &handle));
        assert!(dir.join(&names[0]).exists(), "the impostor's file is not egress's to delete");
    }

    #[tokio::test]
    async fn an_unfinished_body_leaves_no_file_and_the_oldest_waiting_makes_room() {
        let dir = tempfile::tempdir().unwrap();
        let bodies = Bodies::open(dir.path()).unwrap();
        let mut spool = bodies.spool().await.unwrap();
        spool.write(b"half").await.unwrap();
        drop(spool);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let ws = Uuid::new_v4();
        let mut handles = Vec::new();
        for _ in 0..=MAX_WAITING_BODIES {
            let mut s = bodies.spool().await.unwrap();
            s.write(b"page").await.unwrap();
            s.finish().await.unwrap();
            handles.push(bodies.keep(ws, &mut s).unwrap());
        }
        assert_eq!(bodies.waiting(), MAX_WAITING_BODIES);
        assert!(bodies.read(ws, &handles[0], 0).is_err(), "the oldest made room");
        assert_eq!(bodies.read(ws, &handles[MAX_WAITING_BODIES], 0).unwrap(), (b"page".to_vec(), true));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), MAX_WAITING_BODIES);
    }
}
