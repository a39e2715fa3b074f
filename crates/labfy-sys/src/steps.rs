//! The confinement steps a `pre_exec` hook of another crate may take, so
//! that each rule is written once, here: the supervisor's governor (which
//! keeps the host's namespaces but the network one: it needs cgroups, never
//! the network — [`NoNetwork`]) and egress (which keeps them all: it is the
//! network), and the governor's cgroup tests. Every confined child — the
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

/// A network namespace of the caller's own with nothing in it — no
/// interface up, not even `lo` — entered between fork and exec: the
/// supervisor gives one to the governor, which needs cgroups and Unix
/// sockets but never the network (SPEC P4, issue 18). As root, only the
/// network namespace is new; otherwise a user namespace comes with it (the
/// kernel's condition), with the caller's own uid and gid mapped to
/// themselves, so files, cgroups and the `SO_PEERCRED` the other daemons
/// see are unchanged. Prepared in the parent ([`NoNetwork::prepare`]);
/// [`NoNetwork::enter`] allocates nothing.
#[derive(Debug, Clone)]
pub struct NoNetwork {
    root: bool,
    uid_map: CString,
    gid_map: CString,
}

impl NoNetwork {
    /// Prepares the maps for the calling process's ids.
    pub fn prepare() -> Self {
        // SAFETY: getuid/getgid/geteuid cannot fail and touch no memory.
        let (uid, gid, euid) = unsafe { (libc::getuid(), libc::getgid(), libc::geteuid()) };
        let line = |id: u32| CString::new(format!("{id} {id} 1")).unwrap_or_default();
        Self { root: euid == 0, uid_map: line(uid), gid_map: line(gid) }
    }

    /// Whether the namespace comes without a user namespace (root).
    pub fn as_root(&self) -> bool {
        self.root
    }

    /// Unshares into the empty network namespace (and, when not root, a
    /// user namespace with the identity maps).
    pub fn enter(&self) -> io::Result<()> {
        if self.root {
            return raw::unshare(libc::CLONE_NEWNET);
        }
        raw::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)?;
        // Dumpable again for the maps: the supervisor is not, and then
        // /proc/self is root's (the program's own start makes it
        // non-dumpable again, labfy-ipc `forbid_ptrace`).
        raw::prctl(libc::PR_SET_DUMPABLE, 1)?;
        raw::write_file(c"/proc/self/setgroups", b"deny")?;
        raw::write_file(c"/proc/self/uid_map", self.uid_map.as_bytes())?;
        raw::write_file(c"/proc/self/gid_map", self.gid_map.as_bytes())
    }
}
