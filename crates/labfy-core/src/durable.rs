//! Durability of many files at once (SPEC I1, C5): one `syncfs(2)` of the
//! file system that holds them, rather than one flush per file — what
//! `labfy export` does for a bundle and `labfy import` for a batch of blobs.

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Flushes every file and folder of the file system that holds `path`
/// (written before the call) to its disk.
pub fn sync_file_system(path: &Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: syncfs takes a descriptor this function owns for the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::syncfs(f.as_raw_fd()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
