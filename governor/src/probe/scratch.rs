//! The scratch directory: free space (statvfs, every sample) and Labfy's own
//! usage (bytes of the files under it, walked at most every
//! [`WALK_MIN_INTERVAL`]) (SPEC Q1).
//!
//! The walk does not follow symbolic links, stops after [`WALK_MAX_ENTRIES`]
//! entries (the figure is then a lower bound, and a fact says so), and is
//! spaced so that it costs at most 1/[`WALK_COST_FACTOR`] of one core: after a
//! walk that took `t`, the next one waits `max(WALK_MIN_INTERVAL, t ×
//! WALK_COST_FACTOR)`. In between the last figure is reused.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use labfy_ipc::messages::governor::ScratchSample;

/// Shortest time between two walks of the scratch directory.
pub const WALK_MIN_INTERVAL: Duration = Duration::from_secs(15);

/// A walk that took `t` is not repeated before `t × WALK_COST_FACTOR`
/// (400: at most 0.25 % of one core).
pub const WALK_COST_FACTOR: u32 = 400;

/// Most directory entries (files, directories, links) one walk looks at.
pub const WALK_MAX_ENTRIES: usize = 100_000;

/// Size of a file system, from statvfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// `f_blocks × f_frsize`, bytes.
    pub total: u64,
    /// `f_bavail × f_frsize`: free to an unprivileged user, bytes.
    pub free: u64,
}

/// Widens a statvfs field (its C type differs between targets).
#[allow(clippy::useless_conversion)]
fn widen<T: Into<u64>>(v: T) -> u64 {
    v.into()
}

/// statvfs of `path`.
#[allow(unsafe_code)]
pub fn statvfs(path: &Path) -> io::Result<Space> {
    let c_path =
        CString::new(path.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `libc::statvfs` is plain old data, all-zero is a valid value.
    let mut out: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a NUL-terminated string alive for the call; `out`
    // is a valid, writable `struct statvfs`.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut out) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let frsize = widen(out.f_frsize);
    Ok(Space { total: widen(out.f_blocks).saturating_mul(frsize), free: widen(out.f_bavail).saturating_mul(frsize) })
}

/// What one walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Walk {
    /// Sum of the sizes of the regular files seen, bytes.
    pub bytes: u64,
    /// Entries looked at.
    pub entries: usize,
    /// True when the walk stopped at the entry bound (`bytes` is a lower bound).
    pub truncated: bool,
    /// Entries or directories that could not be read.
    pub errors: usize,
}

/// Sums the sizes of the regular files under `dir`, without following
/// symbolic links, looking at most at `max_entries` entries.
pub fn walk_usage(dir: &Path, max_entries: usize) -> Walk {
    let mut walk = Walk::default();
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = match fs::read_dir(&current) {
            Ok(e) => e,
            Err(_) => {
                walk.errors += 1;
                continue;
            }
        };
        for entry in entries {
            if walk.entries == max_entries {
                walk.truncated = true;
                return walk;
            }
            walk.entries += 1;
            let Ok(entry) = entry else {
                walk.errors += 1;
                continue;
            };
            // `DirEntry::file_type` and `metadata` do not follow symlinks.
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(entry.path()),
                Ok(t) if t.is_file() => match entry.metadata() {
                    Ok(m) => walk.bytes = walk.bytes.saturating_add(m.len()),
                    Err(_) => walk.errors += 1,
                },
                Ok(_) => {} // symlink, socket, fifo: no bytes of their own counted
                Err(_) => walk.errors += 1,
            }
        }
    }
    walk
}

/// The scratch probe: statvfs every sample, the walk when due.
#[derive(Debug)]
pub struct ScratchProbe {
    dir: PathBuf,
    last: Option<Walk>,
    next_walk: Option<Instant>,
}

impl ScratchProbe {
    /// A probe of `dir`; nothing is read yet.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir, last: None, next_walk: None }
    }

    /// Samples at `now`. A missing or unreadable directory is `None` and a fact.
    pub fn sample_at(&mut self, now: Instant, facts: &mut Vec<String>) -> Option<ScratchSample> {
        let shown = self.dir.display().to_string();
        match fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                facts.push(format!("scratch: {shown} is not a directory"));
                return None;
            }
            Err(e) => {
                facts.push(format!("scratch: {shown} unreadable ({e})"));
                return None;
            }
        }
        let space = match statvfs(&self.dir) {
            Ok(s) => s,
            Err(e) => {
                facts.push(format!("scratch: statvfs of {shown} failed ({e})"));
                return None;
            }
        };
        let walk = match (self.last, self.next_walk) {
            (Some(last), Some(at)) if now < at => last,
            _ => {
                let started = Instant::now();
                let walk = walk_usage(&self.dir, WALK_MAX_ENTRIES);
                let spacing = started.elapsed().saturating_mul(WALK_COST_FACTOR).max(WALK_MIN_INTERVAL);
                self.last = Some(walk);
                self.next_walk = Some(now + spacing);
                walk
            }
        };
        if walk.truncated {
            facts.push(format!(
                "scratch: walk of {shown} stopped at {WALK_MAX_ENTRIES} entries; Labfy's usage is at least {} bytes",
                walk.bytes
            ));
        }
        if walk.errors > 0 {
            facts.push(format!("scratch: {} entries under {shown} unreadable", walk.errors));
        }
        Some(ScratchSample { path: shown, total: space.total, free: space.free, labfy_used: walk.bytes })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn walk_sums_files_and_skips_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), vec![0u8; 1000]).unwrap();
        fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        fs::write(dir.path().join("sub/deeper/b"), vec![0u8; 24]).unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("big"), vec![0u8; 5000]).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link-dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("big"), dir.path().join("link-file")).unwrap();
        let walk = walk_usage(dir.path(), WALK_MAX_ENTRIES);
        assert_eq!(walk, Walk { bytes: 1024, entries: 6, truncated: false, errors: 0 });
    }

    #[test]
    fn walk_bound_edges() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            fs::write(dir.path().join(format!("f{i}")), [0u8; 10]).unwrap();
        }
        let exact = walk_usage(dir.path(), 5);
        assert_eq!((exact.bytes, exact.truncated), (50, false));
        let short = walk_usage(dir.path(), 4);
        assert_eq!((short.bytes, short.entries, short.truncated), (40, 4, true));
    }

    #[test]
    fn walk_is_reused_until_due() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), [0u8; 100]).unwrap();
        let mut probe = ScratchProbe::new(dir.path().to_path_buf());
        let t0 = Instant::now();
        let mut facts = Vec::new();
        assert_eq!(probe.sample_at(t0, &mut facts).unwrap().labfy_used, 100);
        fs::write(dir.path().join("b"), [0u8; 50]).unwrap();
        let s = probe.sample_at(t0 + Duration::from_secs(1), &mut facts).unwrap();
        assert_eq!(s.labfy_used, 100, "reused between walks");
        let s = probe.sample_at(t0 + Duration::from_secs(3600), &mut facts).unwrap();
        assert_eq!(s.labfy_used, 150);
        assert!(s.total > 0 && s.free <= s.total, "{s:?}");
        assert!(facts.is_empty(), "{facts:?}");
    }

    #[test]
    fn missing_directory_is_none_and_a_fact() {
        let dir = tempfile::tempdir().unwrap();
        let mut probe = ScratchProbe::new(dir.path().join("missing"));
        let mut facts = Vec::new();
        assert_eq!(probe.sample_at(Instant::now(), &mut facts), None);
        assert_eq!(facts.len(), 1);
        assert!(facts[0].starts_with("scratch: ") && facts[0].contains("missing"), "{facts:?}");
    }
}
