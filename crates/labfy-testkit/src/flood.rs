//! A flood of idle connections from another process — and, for a test run
//! as root, from another uid — as red team 3 ran it (`flood.py … idle`, D6,
//! D8): `n` connections to a loopback port held open, each reopened as soon
//! as the other end closes it, until the flood is dropped. And the count of
//! the connections a process holds on a port, read from `/proc`.
//!
//! The flooder is a forked copy of the test process. A fork of a
//! multi-threaded process may only make async-signal-safe calls, so
//! everything it uses is allocated before the fork and the child makes raw
//! system calls only (no allocation, no lock, no panic path), then is killed.

#![allow(unsafe_code)]

use std::collections::HashSet;
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The counters the flooder shares with the test (a shared anonymous map).
#[repr(C)]
struct Counters {
    /// Connections opened (connect started).
    opened: AtomicU64,
    /// Connections the other end closed (EOF or reset seen).
    closed: AtomicU64,
}

/// A running flood; killed when dropped.
#[derive(Debug)]
pub struct Flood {
    pid: libc::pid_t,
    counters: *mut Counters,
}

// SAFETY: the pointer is to a shared mapping of atomics, valid until drop.
unsafe impl Send for Flood {}
// SAFETY: as above; the counters are only read, atomically.
unsafe impl Sync for Flood {}

impl Flood {
    /// Forks a flooder that keeps `connections` idle connections to
    /// 127.0.0.1:`port` open, reopening each one the other end closes. With
    /// `uid`, the flooder raises its descriptor limit and becomes that uid
    /// (and its gid) before opening any: the test must run as root.
    pub fn start(port: u16, connections: usize, uid: Option<u32>) -> io::Result<Self> {
        // Everything the child touches, allocated before the fork.
        let mut fds = vec![libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; connections];
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be() },
            sin_zero: [0; 8],
        };
        // SAFETY: a fresh anonymous shared mapping, checked below; zeroed
        // memory is two valid `AtomicU64`s.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                std::mem::size_of::<Counters>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let counters = map.cast::<Counters>();
        // SAFETY: the child runs `flood`, which makes only async-signal-safe
        // system calls on memory allocated above, and never returns.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            // SAFETY: as above; `counters` is the live shared mapping.
            0 => unsafe { flood(&mut fds, &addr, &*counters, uid) },
            pid => Ok(Self { pid, counters }),
        }
    }

    fn counters(&self) -> &Counters {
        // SAFETY: mapped in `start`, unmapped only in `drop`.
        unsafe { &*self.counters }
    }

    /// Connections opened so far.
    pub fn opened(&self) -> u64 {
        self.counters().opened.load(Ordering::Relaxed)
    }

    /// Connections the other end has closed so far.
    pub fn closed(&self) -> u64 {
        self.counters().closed.load(Ordering::Relaxed)
    }

    /// Waits until `ready` holds of (opened, closed), for at most `limit`;
    /// panics, saying why, if the flooder exited (it could not raise its
    /// limit or change uid) or the time ran out.
    pub fn wait_until(&self, what: &str, limit: Duration, ready: impl Fn(u64, u64) -> bool) {
        let start = Instant::now();
        loop {
            if ready(self.opened(), self.closed()) {
                return;
            }
            let mut status = 0;
            // SAFETY: our own child; WNOHANG does not block.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
                panic!("the flooder exited (status {status:#x}) before {what}");
            }
            assert!(
                start.elapsed() < limit,
                "flood: {what} not reached in {limit:?} ({} opened, {} closed)",
                self.opened(),
                self.closed()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        // SAFETY: our own child, killed and reaped; the mapping is ours and
        // no longer used by anyone.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            libc::munmap(self.counters.cast(), std::mem::size_of::<Counters>());
        }
    }
}

/// The flooder's life. Async-signal-safe calls only.
///
/// # Safety
/// To be called in the child of a fork, on memory allocated before it.
unsafe fn flood(fds: &mut [libc::pollfd], addr: &libc::sockaddr_in, counters: &Counters, uid: Option<u32>) -> ! {
    // SAFETY (the whole body): raw system calls on our own memory and
    // descriptors; the child never returns to the test's code.
    unsafe {
        // Only what the flood opens: none of the test's descriptors (a
        // server's accepted sockets among them) stays open in the child.
        if libc::syscall(libc::SYS_close_range, 3 as libc::c_long, libc::c_long::from(u32::MAX), 0 as libc::c_long) != 0
        {
            for fd in 3..65_536 {
                libc::close(fd);
            }
        }
        let want = (fds.len() + 64) as libc::rlim_t;
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        if limit.rlim_cur < want {
            // Root may raise the hard limit too; anyone may raise the soft one to it.
            let raised = libc::rlimit { rlim_cur: want, rlim_max: want.max(limit.rlim_max) };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                let soft = libc::rlimit { rlim_cur: want.min(limit.rlim_max), rlim_max: limit.rlim_max };
                libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
            }
        }
        if let Some(uid) = uid {
            // Raw calls: this process has one thread, and libc's wrappers
            // would signal threads that are not here.
            let (u, g) = (uid as libc::c_long, uid as libc::c_long);
            if libc::syscall(libc::SYS_setgroups, 0 as libc::c_long, std::ptr::null::<libc::gid_t>()) != 0
                || libc::syscall(libc::SYS_setresgid, g, g, g) != 0
                || libc::syscall(libc::SYS_setresuid, u, u, u) != 0
            {
                libc::_exit(3);
            }
        }
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let mut scratch = [0u8; 512];
        loop {
            for slot in fds.iter_mut() {
                if slot.fd >= 0 {
                    continue;
                }
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0);
                if fd < 0 {
                    break; // out of descriptors or memory: try again after the poll
                }
                let rc = libc::connect(fd, (addr as *const libc::sockaddr_in).cast(), len);
                if rc != 0 && *libc::__errno_location() != libc::EINPROGRESS {
                    libc::close(fd);
                    continue;
                }
                slot.fd = fd;
                slot.revents = 0;
                counters.opened.fetch_add(1, Ordering::Relaxed);
            }
            if libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) <= 0 {
                continue;
            }
            for slot in fds.iter_mut() {
                if slot.fd < 0 || slot.revents == 0 {
                    continue;
                }
                slot.revents = 0;
                let n = libc::read(slot.fd, scratch.as_mut_ptr().cast(), scratch.len());
                if n == 0 || (n < 0 && *libc::__errno_location() != libc::EAGAIN) {
                    libc::close(slot.fd);
                    slot.fd = -1;
                    counters.closed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// How many sockets process `pid` holds open on local TCP `port`, the
/// listening one left out: the connections it serves there. The port is
/// looked up in the caller's network namespace (`/proc/self/net/tcp{,6}`:
/// where the test bound it, even if `pid` later entered a namespace of its
/// own), the sockets in `/proc/<pid>/fd`.
pub fn held_connections(pid: u32, port: u16) -> usize {
    let mut inodes = HashSet::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/self/net/{table}")) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9)) else {
                continue;
            };
            let local_port = local.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            // 0A: LISTEN.
            if local_port == Some(port) && *state != "0A" {
                inodes.insert(format!("socket:[{inode}]"));
            }
        }
    }
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|target| target.to_str().is_some_and(|t| inodes.contains(t)))
        .count()
}
