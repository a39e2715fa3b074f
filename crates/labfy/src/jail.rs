//! Starting the workspace server with no network of its own (SPEC P2).
//!
//! One linear sequence (STYLE 9), run in the child between `fork` and
//! `exec`. Everything it needs is prepared before the fork, because after it
//! only async-signal-safe system calls are allowed: no allocation, no locks.
//!
//! 1. Die with the supervisor (`PR_SET_PDEATHSIG`).
//! 2. The listening socket becomes fd 3 (`LISTEN_FDS`); every other inherited
//!    descriptor closes at exec.
//! 3. A new user namespace and, owned by it, new network and mount
//!    namespaces. The process has capabilities only inside its own user
//!    namespace, so it can never `setns()` back into the host's network
//!    namespace (that needs `CAP_SYS_ADMIN` over the host's user namespace).
//! 4. Identity uid/gid maps: the same ids inside as outside, so file access
//!    and `SO_PEERCRED` seen by the governor and egress are unchanged.
//! 5. The whole file tree read-only, except the data directory and the
//!    runtime directory: with the supervisor's uid (root, when run as root)
//!    the server could otherwise write files that another program would run
//!    outside its namespaces.
//! 6. Loopback up — the only interface: for the local model server the
//!    governor will start beside it. Nothing routes anywhere else.
//! 7. Limits: no core dumps (they would hold session tokens), bounded fds.
//! 8. No capability survives exec: the bounding set is emptied and root's
//!    automatic capabilities are locked out (`SECBIT_NOROOT`).
//! 9. No privilege can be regained through exec (`PR_SET_NO_NEW_PRIVS`).
//!
//! The environment is cleared by the caller (`Command::env_clear`).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

/// Open files the server may hold.
pub const SERVER_MAX_FILES: u64 = 4096;
/// Highest capability number tried when emptying the bounding set.
const CAP_MAX_TRIED: i32 = 63;

/// `mount_setattr(2)`: the same number on x86_64 and aarch64 (and every
/// architecture with the unified syscall table); not in the libc crate yet.
const SYS_MOUNT_SETATTR: libc::c_long = 442;
/// `MOUNT_ATTR_RDONLY` of `<linux/mount.h>`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// `struct mount_attr` of `<linux/mount.h>`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Most paths kept writable.
const MAX_WRITABLE: usize = 4;

/// What the sequence needs, built before the fork.
pub struct ServerJail {
    uid_map: CString,
    gid_map: CString,
    writable: Vec<CString>,
}

impl ServerJail {
    /// Maps for this process's effective uid and gid; `writable` (absolute,
    /// existing directories, at most four) stay writable, all else read-only.
    pub fn new(writable: &[&std::path::Path]) -> io::Result<Self> {
        // SAFETY: geteuid/getegid take no arguments and cannot fail.
        #[allow(unsafe_code)]
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let map = |id: u32| CString::new(format!("{id} {id} 1\n")).unwrap_or_default();
        if writable.len() > MAX_WRITABLE {
            return Err(io::Error::other("too many writable paths"));
        }
        let mut paths = Vec::with_capacity(writable.len());
        for p in writable {
            let real = std::fs::canonicalize(p)?;
            use std::os::unix::ffi::OsStrExt;
            paths.push(CString::new(real.as_os_str().as_bytes()).map_err(io::Error::other)?);
        }
        Ok(Self { uid_map: map(uid), gid_map: map(gid), writable: paths })
    }

    /// Installs the sequence as `cmd`'s pre-exec hook, with `listener` as the
    /// socket to pass as fd 3.
    pub fn install(self, cmd: &mut tokio::process::Command, listener: RawFd) {
        // SAFETY: the closure runs in the child between fork and exec. It
        // only makes system calls on values prepared before the fork (the
        // CStrings moved in, integers, a zeroed ifreq on the stack) and
        // allocates nothing; io::Error::last_os_error builds no heap value.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || self.run_in_child(listener));
        }
    }

    #[allow(unsafe_code)]
    unsafe fn run_in_child(&self, listener: RawFd) -> io::Result<()> {
        // SAFETY (whole function): raw system calls with valid pointers to
        // memory owned by `self` or by this stack frame; see `install`.
        unsafe {
            // 1. Die with the supervisor, whatever kills it.
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM))?;
            // The supervisor is non-dumpable and a forked child stays so until
            // exec: /proc/self would belong to root and, run as an ordinary
            // user, the maps of step 4 could not be written. The exec'd
            // server is dumpable anyway; the other Labfy processes are not.
            check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;

            // 2. The listener becomes fd 3; dup2 onto itself would keep
            //    FD_CLOEXEC, so that case clears the flag instead. Every other
            //    descriptor above 3 is marked close-on-exec (not closed: the
            //    standard library still needs its exec-status pipe).
            check(if listener == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(listener, 3) })?;
            check(libc::close_range(4, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int))?;

            // 3. New user namespace, and network and mount namespaces it owns.
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWNS))?;

            // 4. Identity maps (setgroups must be denied before gid_map).
            write_file(c"/proc/self/setgroups", c"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;

            // 5. Nothing propagates back to the host; bind the writable paths
            //    onto themselves (own mounts), make the whole tree read-only,
            //    then the writable paths writable again.
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for path in &self.writable {
                check(libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
            }
            set_readonly(c"/", true)?;
            for path in &self.writable {
                set_readonly(path, false)?;
            }

            // 6. Loopback up, the only interface of the new namespace.
            let sock = check(libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0))?;
            let mut ifr: libc::ifreq = std::mem::zeroed();
            for (i, b) in b"lo\0".iter().enumerate() {
                ifr.ifr_name[i] = *b as libc::c_char;
            }
            let up = check(libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut ifr)).and_then(|_| {
                ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
                check(libc::ioctl(sock, libc::SIOCSIFFLAGS, &ifr))
            });
            libc::close(sock);
            up?;

            // 7. No core dumps; bounded open files.
            let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            check(libc::setrlimit(libc::RLIMIT_CORE, &zero))?;
            let files = libc::rlimit { rlim_cur: SERVER_MAX_FILES, rlim_max: SERVER_MAX_FILES };
            check(libc::setrlimit(libc::RLIMIT_NOFILE, &files))?;

            // 8. No capability survives exec, not even inside the namespace.
            for cap in 0..=CAP_MAX_TRIED {
                // EINVAL past the kernel's last capability: nothing to drop.
                if libc::prctl(libc::PR_CAPBSET_DROP, cap) != 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
                {
                    return Err(io::Error::last_os_error());
                }
            }
            let bits = libc::SECBIT_NOROOT | libc::SECBIT_NOROOT_LOCKED;
            check(libc::prctl(libc::PR_SET_SECUREBITS, bits))?;

            // 9. Nothing exec'd from here on can gain a privilege.
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        }
        Ok(())
    }
}

/// Sets or clears read-only on the mount at `path` and every mount below it.
#[allow(unsafe_code)]
unsafe fn set_readonly(path: &CStr, readonly: bool) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: if readonly { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if readonly { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid path and a mount_attr of the size passed.
    let rc = unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// open + write + close, with no allocation.
#[allow(unsafe_code)]
unsafe fn write_file(path: &CStr, data: &CStr) -> io::Result<()> {
    // SAFETY: valid NUL-terminated paths and a buffer of the stated length.
    unsafe {
        let fd = check(libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))?;
        let bytes = data.to_bytes();
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
