//! The child's file tree (SPEC T1): a fresh tmpfs that holds only what it was
//! given, entered with `pivot_root`. Built in the parent as a list of
//! operations on paths relative to the new root; run in the child in order.

use std::collections::BTreeSet;
use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::SpawnError;
use crate::raw;

/// Size of the tmpfs the new root lives on (directories and mount points only).
pub const ROOT_TMPFS_BYTES: u64 = 1 << 20;
/// Most operations one root may hold.
pub const MAX_ROOT_OPS: usize = 256;
/// The devices every child gets (bound from the host's `/dev`).
const DEVICES: [&str; 4] = ["null", "zero", "random", "urandom"];

/// One operation, paths relative to the new root.
#[derive(Debug)]
pub(crate) enum RootOp {
    /// `mkdir`, an existing directory being fine.
    Mkdir(CString),
    /// An empty file, the mount point of a file bind.
    Touch(CString),
    /// A bind mount of a host path, read-only unless `writable`.
    Bind { source: CString, target: CString, writable: bool },
    /// A tmpfs (a private `/tmp`, or an empty read-only mask).
    Tmpfs { target: CString, options: CString, readonly: bool },
    /// A symbolic link (`/lib` → `usr/lib` on merged-/usr systems).
    Symlink { target: CString, link: CString },
}

/// The child's root, built with the methods below; every path is absolute
/// and kept at the same place inside as outside, so the program's arguments
/// stay valid — except where a `*_at` method names another place.
#[derive(Debug, Default)]
pub struct Root {
    pub(crate) ops: Vec<RootOp>,
    made: BTreeSet<PathBuf>,
    /// Paths bound so far (relative), and whether writable.
    bound: Vec<(PathBuf, bool)>,
    pub(crate) proc: bool,
    described: Vec<String>,
}

fn cstring(path: &Path) -> Result<CString, SpawnError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SpawnError::prepare(format!("{} holds a NUL", path.display())))
}

/// `/a/b` → `a/b` (relative to the new root); refuses `..` and relative paths.
fn inside(path: &Path) -> Result<PathBuf, SpawnError> {
    if !path.is_absolute() {
        return Err(SpawnError::prepare(format!("{} is not absolute", path.display())));
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => out.push(n),
            _ => return Err(SpawnError::prepare(format!("{} is not a plain path", path.display()))),
        }
    }
    Ok(out)
}

/// `host` resolved (symbolic links followed; it must exist), and its path
/// relative to the new root.
fn resolve(host: &Path) -> Result<(PathBuf, PathBuf), SpawnError> {
    let real = std::fs::canonicalize(host).map_err(|e| SpawnError {
        step: crate::Step::Prepare,
        source: e,
        detail: host.display().to_string(),
    })?;
    let rel = inside(&real)?;
    Ok((real, rel))
}

impl Root {
    /// An empty root: nothing but what the methods below add.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, op: RootOp) -> Result<(), SpawnError> {
        if self.ops.len() >= MAX_ROOT_OPS {
            return Err(SpawnError::prepare(format!("more than {MAX_ROOT_OPS} root operations")));
        }
        self.ops.push(op);
        Ok(())
    }

    /// Every missing ancestor of `rel`, then `rel` itself when `dir`.
    fn make_dirs(&mut self, rel: &Path, include_self: bool) -> Result<(), SpawnError> {
        let mut acc = PathBuf::new();
        let comps: Vec<_> = rel.components().collect();
        let n = if include_self { comps.len() } else { comps.len().saturating_sub(1) };
        for c in &comps[..n] {
            acc.push(c);
            if self.made.insert(acc.clone()) {
                let p = cstring(&acc)?;
                self.push(RootOp::Mkdir(p))?;
            }
        }
        Ok(())
    }

    fn bind(&mut self, host: &Path, writable: bool) -> Result<&mut Self, SpawnError> {
        self.bind_to(host, None, writable)
    }

    /// `host` bound at `target` (its own path when `None`).
    fn bind_to(&mut self, host: &Path, place: Option<&Path>, writable: bool) -> Result<&mut Self, SpawnError> {
        let (real, rel) = resolve(host)?;
        let rel = match place {
            Some(t) => inside(t)?,
            None => rel,
        };
        // Already visible read-only through an ancestor bound read-only (the
        // program under /usr, say): nothing to add.
        let covering = self.bound.iter().filter(|(p, _)| rel.starts_with(p)).max_by_key(|(p, _)| p.as_os_str().len());
        if !writable && covering.is_some_and(|(_, w)| !w) {
            return Ok(self);
        }
        self.bound.push((rel.clone(), writable));
        let meta = std::fs::metadata(&real).map_err(|e| SpawnError {
            step: crate::Step::Prepare,
            source: e,
            detail: real.display().to_string(),
        })?;
        if meta.is_dir() {
            self.make_dirs(&rel, true)?;
        } else {
            self.make_dirs(&rel, false)?;
            let p = cstring(&rel)?;
            self.push(RootOp::Touch(p))?;
        }
        let (source, target) = (cstring(&real)?, cstring(&rel)?);
        self.push(RootOp::Bind { source, target, writable })?;
        let at = place.map_or_else(String::new, |t| format!(" at {}", t.display()));
        self.described.push(format!("{}{at}{}", real.display(), if writable { " (rw)" } else { " (ro)" }));
        Ok(self)
    }

    /// `host` (a file or a directory, resolved) at the same path, read-only.
    pub fn read_only(&mut self, host: &Path) -> Result<&mut Self, SpawnError> {
        self.bind(host, false)
    }

    /// `host` (a directory, resolved) at the same path, writable.
    pub fn writable(&mut self, host: &Path) -> Result<&mut Self, SpawnError> {
        self.bind(host, true)
    }

    /// `host` (a file or a directory, resolved) at `target` inside,
    /// read-only: a place of the child's own (`/input`), not the host's.
    pub fn read_only_at(&mut self, host: &Path, target: &Path) -> Result<&mut Self, SpawnError> {
        self.bind_to(host, Some(target), false)
    }

    /// `host` (a directory, resolved) at `target` inside, writable.
    pub fn writable_at(&mut self, host: &Path, target: &Path) -> Result<&mut Self, SpawnError> {
        self.bind_to(host, Some(target), true)
    }

    /// Hides `host` (a directory that exists) behind an empty read-only
    /// tmpfs: what another process keeps there (egress's Tor state, say) is
    /// neither readable nor writable by the child.
    pub fn mask(&mut self, host: &Path) -> Result<&mut Self, SpawnError> {
        let (real, rel) = resolve(host)?;
        self.make_dirs(&rel, true)?;
        let target = cstring(&rel)?;
        self.push(RootOp::Tmpfs { target, options: c"size=4k,mode=0500".to_owned(), readonly: true })?;
        self.described.push(format!("{} (masked)", real.display()));
        Ok(self)
    }

    /// The system's programs and libraries, read-only: `/usr`, and `/lib*`,
    /// `/bin`, `/sbin` as the host has them (symbolic links on merged-/usr
    /// systems, directories elsewhere), the dynamic loader's cache, and
    /// `/etc/alternatives` (links only) where the host has it.
    pub fn system(&mut self) -> Result<&mut Self, SpawnError> {
        self.read_only(Path::new("/usr"))?;
        for top in ["lib", "lib64", "lib32", "libx32", "bin", "sbin"] {
            let host = Path::new("/").join(top);
            match std::fs::symlink_metadata(&host) {
                Ok(m) if m.file_type().is_symlink() => {
                    let target = std::fs::read_link(&host).map_err(|e| SpawnError {
                        step: crate::Step::Prepare,
                        source: e,
                        detail: top.into(),
                    })?;
                    let (target, link) = (cstring(&target)?, cstring(Path::new(top))?);
                    self.push(RootOp::Symlink { target, link })?;
                }
                Ok(m) if m.is_dir() => {
                    self.read_only(&host)?;
                }
                _ => {}
            }
        }
        let cache = Path::new("/etc/ld.so.cache");
        if cache.is_file() {
            self.read_only(cache)?;
        }
        // Debian's alternatives: links under /usr (`/usr/local/cuda`,
        // `/usr/bin/python3` on some systems) lead through it to the real
        // files; without it they dangle (seen with CUDA's runtime, whose
        // libraries a GPU build of llama-server finds through
        // `/usr/local/cuda` → `/etc/alternatives/cuda`). Only links.
        let alternatives = Path::new("/etc/alternatives");
        if alternatives.is_dir() && !alternatives.is_symlink() {
            self.read_only(alternatives)?;
        }
        Ok(self)
    }

    /// `/dev/null`, `/dev/zero`, `/dev/random`, `/dev/urandom`, and nothing
    /// else of `/dev`.
    pub fn devices(&mut self) -> Result<&mut Self, SpawnError> {
        for d in DEVICES {
            let host = Path::new("/dev").join(d);
            if host.exists() {
                self.bind(&host, true)?;
            }
        }
        Ok(self)
    }

    /// A private `/proc` of the child's own PID namespace (it sees only its
    /// own processes).
    pub fn proc(&mut self) -> Result<&mut Self, SpawnError> {
        self.make_dirs(Path::new("proc"), true)?;
        self.proc = true;
        self.described.push("/proc (own PID namespace)".into());
        Ok(self)
    }

    /// A private, bounded `/tmp`.
    pub fn tmp(&mut self, bytes: u64) -> Result<&mut Self, SpawnError> {
        self.make_dirs(Path::new("tmp"), true)?;
        let options =
            CString::new(format!("size={bytes},mode=1777")).map_err(|_| SpawnError::prepare("tmpfs options"))?;
        self.push(RootOp::Tmpfs { target: c"tmp".to_owned(), options, readonly: false })?;
        self.described.push(format!("/tmp (private, {} MiB)", bytes >> 20));
        Ok(self)
    }

    /// A tmpfs of the child's own at `target` inside (`/work`), its bytes
    /// and files bounded by the kernel, its top directory owned by `uid` and
    /// `gid` (as the child's user namespace names them: its own ids there,
    /// or the identity a privileged caller drops it to) and mode 0700. It
    /// lives in the child's mount namespace; [`crate::Jail::export_dir`]
    /// hands it to the caller, who reads it after the run.
    pub fn tmpfs_at(
        &mut self,
        target: &Path,
        bytes: u64,
        files: u64,
        uid: u32,
        gid: u32,
    ) -> Result<&mut Self, SpawnError> {
        let rel = target
            .strip_prefix("/")
            .map_err(|_| SpawnError::prepare(format!("{} is not an absolute path", target.display())))?;
        self.make_dirs(rel, true)?;
        let options = CString::new(format!("size={bytes},nr_inodes={files},mode=0700,uid={uid},gid={gid}"))
            .map_err(|_| SpawnError::prepare("tmpfs options"))?;
        let target_c = CString::new(rel.as_os_str().as_bytes()).map_err(|_| SpawnError::prepare("tmpfs target"))?;
        self.push(RootOp::Tmpfs { target: target_c, options, readonly: false })?;
        self.described.push(format!("{} (a tmpfs of its own, {} MiB, {files} files)", target.display(), bytes >> 20));
        Ok(self)
    }

    /// One line per path the child sees, for reports.
    pub fn describe(&self) -> &[String] {
        &self.described
    }

    /// Runs the operations in the child: every bind source is opened first
    /// (`O_PATH`), then the new root's tmpfs is mounted on `staging` — which
    /// may hide a source's path, never its descriptor — and the operations
    /// run there, binds naming their sources as `/proc/self/fd/N`.
    pub(crate) fn build(&self, staging: &CStr) -> io::Result<()> {
        let mut fds = [-1 as libc::c_int; MAX_ROOT_OPS];
        let outcome = self.open_sources(&mut fds).and_then(|()| self.run_ops(staging, &fds));
        for fd in fds.iter().filter(|fd| **fd >= 0) {
            // SAFETY: closing descriptors this function opened.
            unsafe { libc::close(*fd) };
        }
        outcome
    }

    fn open_sources(&self, fds: &mut [libc::c_int; MAX_ROOT_OPS]) -> io::Result<()> {
        for (i, op) in self.ops.iter().enumerate() {
            if let RootOp::Bind { source, .. } = op {
                // SAFETY: a NUL-terminated path; the descriptor is closed by `build`.
                fds[i] = raw::check(unsafe { libc::open(source.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
            }
        }
        Ok(())
    }

    fn run_ops(&self, staging: &CStr, fds: &[libc::c_int; MAX_ROOT_OPS]) -> io::Result<()> {
        raw::mount(Some(c"tmpfs"), staging, Some(c"tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(ROOT_OPTIONS))?;
        raw::chdir(staging)?;
        for (i, op) in self.ops.iter().enumerate() {
            match op {
                RootOp::Mkdir(p) => raw::mkdir(p, 0o755)?,
                RootOp::Touch(p) => raw::touch(p)?,
                RootOp::Bind { target, writable, .. } => {
                    let mut buf = [0u8; 32];
                    let source = fd_path(&mut buf, fds[i]);
                    raw::mount(Some(source), target, None, libc::MS_BIND | libc::MS_REC, None)?;
                    if !writable {
                        raw::set_readonly(target, true, true)?;
                    }
                }
                RootOp::Tmpfs { target, options, readonly } => {
                    let flags = libc::MS_NOSUID | libc::MS_NODEV | if *readonly { libc::MS_RDONLY } else { 0 };
                    raw::mount(Some(c"tmpfs"), target, Some(c"tmpfs"), flags, Some(options))?;
                }
                RootOp::Symlink { target, link } => raw::symlink(target, link)?,
            }
        }
        Ok(())
    }
}

/// The mount options of the new root's tmpfs: [`ROOT_TMPFS_BYTES`] written
/// out (a constant C string cannot be formatted).
const ROOT_OPTIONS: &CStr = c"size=1048576,mode=0755";
const _: () = assert!(ROOT_TMPFS_BYTES == 1 << 20);

/// `/proc/self/fd/<fd>` written into `buf`, with no allocation.
fn fd_path(buf: &mut [u8; 32], fd: libc::c_int) -> &CStr {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut n = fd.max(0) as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for k in 0..len {
        buf[PREFIX.len() + k] = digits[len - 1 - k];
    }
    buf[PREFIX.len() + len] = 0;
    CStr::from_bytes_until_nul(&buf[..]).unwrap_or(c"/")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fd_paths_are_written_without_allocation() {
        let mut buf = [0u8; 32];
        assert_eq!(fd_path(&mut buf, 0), c"/proc/self/fd/0");
        assert_eq!(fd_path(&mut buf, 7), c"/proc/self/fd/7");
        assert_eq!(fd_path(&mut buf, 1234567890), c"/proc/self/fd/1234567890");
        assert_eq!(fd_path(&mut buf, i32::MAX), c"/proc/self/fd/2147483647");
    }

    #[test]
    fn paths_must_be_absolute_and_plain() {
        assert!(inside(Path::new("relative")).is_err());
        assert!(inside(Path::new("/a/../b")).is_err());
        assert_eq!(inside(Path::new("/a/b")).unwrap(), PathBuf::from("a/b"));
    }

    #[test]
    fn ancestors_are_made_once_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir_all(a.join("b")).unwrap();
        let mut root = Root::new();
        root.writable(&a).unwrap().read_only(&a.join("b")).unwrap();
        let mkdirs: Vec<String> = root
            .ops
            .iter()
            .filter_map(|op| match op {
                RootOp::Mkdir(p) => Some(p.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let rel = inside(&std::fs::canonicalize(&a).unwrap()).unwrap();
        assert_eq!(mkdirs.last().unwrap(), &rel.join("b").to_string_lossy());
        let mut sorted = mkdirs.clone();
        sorted.dedup();
        assert_eq!(sorted, mkdirs, "a directory is made twice");
        assert!(root.describe().iter().any(|l| l.ends_with("(rw)")));
    }

    #[test]
    fn a_missing_path_is_refused_before_anything_starts() {
        let err = Root::new().read_only(Path::new("/nonexistent/labfy")).unwrap_err();
        assert_eq!(err.step, crate::Step::Prepare);
        assert!(err.to_string().contains("/nonexistent/labfy"), "{err}");
    }

    #[test]
    fn the_operations_are_bounded() {
        let mut root = Root::new();
        let mut last = Ok(());
        for _ in 0..=MAX_ROOT_OPS {
            last = root.tmp(1 << 20).map(drop);
            if last.is_err() {
                break;
            }
        }
        assert!(last.is_err(), "more than {MAX_ROOT_OPS} operations accepted");
    }
}
