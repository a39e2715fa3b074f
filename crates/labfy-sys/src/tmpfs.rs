//! A bounded tmpfs mounted on a host directory for the length of one
//! confined run (SPEC X1): the kernel bounds what the run may write — bytes
//! and files — where a watcher polling a directory could only notice it
//! after the disk filled. The caller reads what was written before the
//! mount goes ([`Tmpfs`] unmounts on drop).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::raw;

/// A tmpfs mounted on a directory; unmounted (lazily, `MNT_DETACH`) when
/// dropped. Mounting needs `CAP_SYS_ADMIN` (the governor, root).
#[derive(Debug)]
pub struct Tmpfs {
    path: PathBuf,
    target: CString,
}

impl Tmpfs {
    /// Mounts a tmpfs of at most `bytes` and `files` inodes on the
    /// existing directory `path`, its root owned by `uid`:`gid`, mode 0700;
    /// nothing on it is executable, set-id or a device.
    pub fn mount(path: &Path, bytes: u64, files: u64, uid: u32, gid: u32) -> io::Result<Self> {
        let target = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL"))?;
        let options = CString::new(format!("size={bytes},nr_inodes={files},mode=0700,uid={uid},gid={gid}"))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "tmpfs options"))?;
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        raw::mount(Some(c"tmpfs"), &target, Some(c"tmpfs"), flags, Some(&options))?;
        Ok(Self { path: path.to_path_buf(), target })
    }

    /// Unmounts (`MNT_DETACH`) whatever is mounted on `path`: a tmpfs an
    /// earlier process left behind when it died mid-run.
    pub fn detach_stale(path: &Path) -> io::Result<()> {
        let target = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL"))?;
        // SAFETY: a NUL-terminated path we own.
        raw::check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }).map(drop)
    }

    /// The directory it is mounted on.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Tmpfs {
    /// Unmounts it now, saying whether that worked.
    pub fn unmount(mut self) -> io::Result<()> {
        let done = self.detach();
        self.target = CString::default(); // Drop does nothing more
        done
    }

    fn detach(&self) -> io::Result<()> {
        // SAFETY: a NUL-terminated path we own.
        raw::check(unsafe { libc::umount2(self.target.as_ptr(), libc::MNT_DETACH) }).map(drop)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if !self.target.is_empty() {
            let _ = self.detach(); // best effort: `unmount` is the one that reports
        }
    }
}
