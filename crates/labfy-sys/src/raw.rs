//! Thin wrappers over the system calls the child makes between `clone3` and
//! `execve`. Every one of them is async-signal-safe: a system call on memory
//! prepared before the clone, no allocation (`io::Error::last_os_error`
//! allocates nothing), no lock.

use std::ffi::CStr;
use std::io;

/// `mount_setattr(2)`: the same number on x86_64 and aarch64 (and every
/// architecture with the unified syscall table); not in the libc crate yet.
const SYS_MOUNT_SETATTR: libc::c_long = 442;
/// `MOUNT_ATTR_RDONLY` of `<linux/mount.h>`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID` of `<linux/mount.h>`.
const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV` of `<linux/mount.h>`.
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr` of `<linux/mount.h>`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A negative return is the errno of the call.
pub(crate) fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// Same, for `syscall(2)`'s `long`.
pub(crate) fn check_long(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// open + write + close.
pub(crate) fn write_file(path: &CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: a valid NUL-terminated path and a buffer of the stated length.
    unsafe {
        let fd = check(libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))?;
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// `mount(2)` with optional source, type and data.
pub(crate) fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let p = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: NUL-terminated strings or null pointers, as mount(2) accepts.
    check(unsafe { libc::mount(p(source), target.as_ptr(), p(fstype), flags, p(data).cast()) }).map(drop)
}

/// Sets read-only (and nosuid, nodev) on the mount at `path`, and on every
/// mount below it when `recursive`; or clears read-only.
pub(crate) fn set_readonly(path: &CStr, readonly: bool, recursive: bool) -> io::Result<()> {
    let hardening = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    let attr = MountAttr {
        attr_set: if readonly { MOUNT_ATTR_RDONLY | hardening } else { 0 },
        attr_clr: if readonly { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE as libc::c_uint } else { 0 };
    // SAFETY: a valid path and a mount_attr of the size passed.
    check_long(unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Whether `path` exists (without following a final symbolic link).
fn exists(path: &CStr) -> bool {
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::F_OK, libc::AT_SYMLINK_NOFOLLOW) == 0 }
}

/// `mkdir(2)`; an existing entry is fine (also under a read-only mount,
/// where the kernel may answer EROFS before EEXIST).
pub(crate) fn mkdir(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    if exists(path) {
        return Ok(());
    }
    // SAFETY: a valid NUL-terminated path.
    check(unsafe { libc::mkdir(path.as_ptr(), mode) }).map(drop)
}

/// Creates an empty file (a mount point for a file bind); an existing one is fine.
pub(crate) fn touch(path: &CStr) -> io::Result<()> {
    if exists(path) {
        return Ok(());
    }
    // SAFETY: a valid NUL-terminated path; the descriptor is closed at once.
    unsafe {
        let fd = check(libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o444))?;
        libc::close(fd);
    }
    Ok(())
}

/// `symlink(2)`.
pub(crate) fn symlink(target: &CStr, link: &CStr) -> io::Result<()> {
    // SAFETY: valid NUL-terminated paths.
    check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) }).map(drop)
}

/// `chdir(2)`.
pub(crate) fn chdir(path: &CStr) -> io::Result<()> {
    // SAFETY: a valid NUL-terminated path.
    check(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

/// `pivot_root(".", ".")` then detach the old root, stacked on the same
/// directory (the idiom of pivot_root(2)'s manual page): no directory for the
/// old root is needed, and nothing of it stays reachable.
pub(crate) fn pivot_here() -> io::Result<()> {
    let dot = c".";
    // SAFETY: valid NUL-terminated paths.
    unsafe {
        check_long(libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()))?;
        check(libc::umount2(dot.as_ptr(), libc::MNT_DETACH))?;
    }
    chdir(c"/")
}

/// `prctl(2)` with integer arguments.
pub(crate) fn prctl(op: libc::c_int, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: prctl with plain integers touches no memory of ours.
    check(unsafe { libc::prctl(op, arg, 0, 0, 0) }).map(drop)
}

/// Brings `lo` up in the current network namespace.
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket of ours, a zeroed ifreq on this stack frame.
    unsafe {
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
        up.map(drop)
    }
}

/// `setrlimit(2)`, soft and hard alike.
pub(crate) fn set_limit(resource: u32, value: u64) -> io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: a valid rlimit on this stack frame.
    check(unsafe { libc::setrlimit(resource as _, &lim) }).map(drop)
}

/// Empties the capability bounding set and locks root's automatic
/// capabilities out (`SECBIT_NOROOT`), so nothing exec'd holds a capability,
/// even inside its own user namespace.
pub(crate) fn drop_capabilities() -> io::Result<()> {
    /// Highest capability number tried when emptying the bounding set.
    const CAP_MAX_TRIED: libc::c_ulong = 63;
    for cap in 0..=CAP_MAX_TRIED {
        // EINVAL past the kernel's last capability: nothing to drop.
        if let Err(e) = prctl(libc::PR_CAPBSET_DROP, cap) {
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(e);
            }
        }
    }
    // No ambient capability either.
    // SAFETY: prctl with plain integers.
    check(unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) })?;
    let bits = libc::SECBIT_NOROOT | libc::SECBIT_NOROOT_LOCKED;
    prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong)
}

/// Installs one seccomp BPF program on this thread (and, with TSYNC, every
/// thread; the child has one).
pub(crate) fn install_seccomp(program: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr().cast_mut() };
    // SAFETY: a sock_fprog pointing at `program`, which outlives the call
    // (the kernel copies it).
    check_long(unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, libc::SECCOMP_FILTER_FLAG_TSYNC, &prog)
    })
    .map(drop)
}

/// Writes all of `buf` to `fd`, ignoring failures (the report pipe).
pub(crate) fn write_all(fd: libc::c_int, buf: &[u8]) {
    // SAFETY: a buffer of the stated length.
    unsafe {
        libc::write(fd, buf.as_ptr().cast(), buf.len());
    }
}

/// `unshare(2)` with `flags`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare with plain integers.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

/// Writes `0` (the writing process) to each open `cgroup.procs` path.
pub(crate) fn join_cgroups(procs: &[std::ffi::CString]) -> io::Result<()> {
    for path in procs {
        write_file(path, b"0")?;
    }
    Ok(())
}

/// Supplementary groups, gid, then uid (the order that keeps the right to
/// change the next): every id real, effective and saved alike.
pub(crate) fn set_identity(uid: libc::uid_t, gid: libc::gid_t, groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: a slice of the stated length; the others take plain integers.
    // The raw system calls, not glibc's wrappers: those signal every thread,
    // and the child has one.
    unsafe {
        check_long(libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()))?;
        check_long(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        check_long(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
    }
    Ok(())
}

/// A control message buffer for one descriptor: `CMSG_SPACE(sizeof(int))`
/// on 64-bit Linux (a 16-byte header, 4 bytes padded to 8), aligned.
#[repr(C, align(8))]
struct OneFd([u8; 24]);

/// A message of one data byte (`iov`) and room for one descriptor
/// (`space`): both live on the caller's frame, which outlives the message.
fn one_fd_msg(iov: &mut libc::iovec, space: &mut OneFd) -> libc::msghdr {
    // SAFETY: msghdr is plain data; all-zero is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.0.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of::<OneFd>();
    msg
}

/// Sends `fd` over the Unix socket `sock` (`SCM_RIGHTS`), with one byte of
/// data. Async-signal-safe: everything lives on this stack frame.
pub(crate) fn send_fd(sock: libc::c_int, fd: libc::c_int) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut space = OneFd([0; 24]);
    let msg = one_fd_msg(&mut iov, &mut space);
    // SAFETY: CMSG_FIRSTHDR/CMSG_DATA compute addresses inside `space`,
    // which is large and aligned enough for one int; `msg` points at
    // buffers of this frame.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        check_long(libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) as libc::c_long).map(drop)
    }
}

/// Receives one descriptor sent by [`send_fd`], without waiting: `None`
/// when nothing was sent (or the message held no descriptor).
pub(crate) fn recv_fd(sock: libc::c_int) -> io::Result<Option<std::os::fd::OwnedFd>> {
    use std::os::fd::FromRawFd;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut space = OneFd([0; 24]);
    let mut msg = one_fd_msg(&mut iov, &mut space);
    // SAFETY: as in `send_fd`; a descriptor the kernel installed for us
    // (close-on-exec) is owned by the OwnedFd made from it.
    unsafe {
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EAGAIN) { Ok(None) } else { Err(e) };
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if n == 0 || cmsg.is_null() || (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Ok(None);
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
        Ok(Some(std::os::fd::OwnedFd::from_raw_fd(fd)))
    }
}

/// `open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)`.
pub(crate) fn open_dir_path(path: &CStr) -> io::Result<libc::c_int> {
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) })
}
