//! The confinement steps a `pre_exec` hook of another crate may take (the
//! governor's llama-server, the supervisor's unconfined children), so that
//! each rule is written once, here. Every function is async-signal-safe: a
//! system call on integers, no allocation.

use std::io;

use crate::raw;

/// Dies with the parent (`PR_SET_PDEATHSIG`), by `signal`.
pub fn die_with_parent(signal: libc::c_int) -> io::Result<()> {
    raw::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong)
}

/// `fd` becomes descriptor `target` without close-on-exec (dup2 onto itself
/// would keep the flag, so that case clears it).
pub fn place_fd(fd: libc::c_int, target: libc::c_int) -> io::Result<()> {
    // SAFETY: descriptor operations on integers.
    raw::check(unsafe { if fd == target { libc::fcntl(fd, libc::F_SETFD, 0) } else { libc::dup2(fd, target) } })
        .map(drop)
}

/// Every descriptor from `first` up closes at exec.
pub fn close_from(first: libc::c_uint) -> io::Result<()> {
    // SAFETY: close_range with plain integers.
    raw::check(unsafe { libc::close_range(first, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC as i32) }).map(drop)
}

/// No core dumps (they would hold what the process read).
pub fn no_core_dumps() -> io::Result<()> {
    raw::set_limit(libc::RLIMIT_CORE, 0)
}

/// No capability survives exec: the bounding set emptied, ambient cleared,
/// root's automatic capabilities locked out (`SECBIT_NOROOT`).
pub fn drop_capabilities() -> io::Result<()> {
    raw::drop_capabilities()
}

/// Nothing exec'd from here on can gain a privilege.
pub fn no_new_privs() -> io::Result<()> {
    raw::prctl(libc::PR_SET_NO_NEW_PRIVS, 1)
}
