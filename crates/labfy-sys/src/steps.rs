//! The confinement steps a `pre_exec` hook of another crate may take, so
//! that each rule is written once, here: the supervisor's governor and
//! egress (which keep the host's namespaces: they need cgroups and the
//! network) and the governor's cgroup tests. Every confined child — the
//! workspace server, the governor's llama-server — goes through a
//! [`crate::Jail`] instead. Every function is async-signal-safe: a system
//! call on integers or prepared C strings, no allocation.

use std::ffi::CString;
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

/// Writes the calling process into each `cgroup.procs` file (`0`, "the
/// writing process"): open, write, close.
pub fn join_cgroups(procs: &[CString]) -> io::Result<()> {
    raw::join_cgroups(procs)
}
