//! The workspace server's network namespace, seen from the governor
//! (SPEC P2, P5, M11).
//!
//! The local model's llama-server must be reachable by the server and by
//! nothing else: it runs inside the server's network namespace, bound to
//! that namespace's loopback. The governor finds the namespace through the
//! server's pid (the one the supervisor allows on `governor.sock`), has the
//! llama-server child join it (`labfy_sys::Jail::join_network`), and reaches the model's `/health`
//! from a short-lived thread that enters it alone (a network namespace is
//! per thread; the rest of the governor stays in its own, which `labfy up`
//! gives it empty — SPEC P4).
//!
//! Entering another network namespace needs `CAP_SYS_ADMIN`: the governor
//! runs as root under `labfy up` on the appliance. Without it, a model start
//! is refused with that reason — never started in any other namespace.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

/// A network namespace, held open by a descriptor (it cannot be recycled
/// while held).
#[derive(Debug)]
pub struct Netns {
    file: File,
    inode: u64,
    /// The pid it was found through.
    pub pid: i32,
}

impl Netns {
    /// The network namespace of `pid`.
    pub fn of_pid(pid: i32) -> io::Result<Self> {
        let file = File::open(format!("/proc/{pid}/ns/net"))?;
        let inode = file.metadata()?.ino();
        Ok(Self { file, inode, pid })
    }

    /// The inode that identifies the namespace.
    pub fn inode(&self) -> u64 {
        self.inode
    }

    /// Whether it is this process's own namespace (nothing to enter then).
    pub fn is_own(&self) -> io::Result<bool> {
        Ok(std::fs::metadata("/proc/self/ns/net")?.ino() == self.inode)
    }

    /// The raw descriptor, for the pre-exec sequence of a child.
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Whether the namespace of `pid` is still this one (false when the
    /// server restarted into a new namespace, or is gone).
    pub fn still_of(&self, pid: i32) -> bool {
        std::fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| m.ino() == self.inode)
    }

    /// Connects to `addr` from inside the namespace, within `timeout`. The
    /// socket keeps the namespace it was created in, so the stream is used
    /// from any thread afterwards.
    pub fn connect(&self, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if self.is_own()? {
            return TcpStream::connect_timeout(&addr, timeout);
        }
        let fd = self.raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                enter(fd)?;
                TcpStream::connect_timeout(&addr, timeout)
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
        })
    }

    /// Whether this process may enter the namespace (checked before a model
    /// start, so a refusal comes with its reason).
    pub fn check_enterable(&self) -> io::Result<()> {
        if self.is_own()? {
            return Ok(());
        }
        let fd = self.raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || enter(fd)).join().unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
        })
    }
}

/// `setns(fd, CLONE_NEWNET)` for the calling thread (a short-lived thread
/// of the governor's: llama-server itself joins through its `Jail`).
pub fn enter(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns(2) on a descriptor we hold open; it changes only the
    // calling thread's network namespace and touches no memory.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    if rc != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn own_namespace_is_recognised_and_connects_directly() {
        let me = Netns::of_pid(std::process::id() as i32).unwrap();
        assert!(me.is_own().unwrap());
        assert!(me.still_of(std::process::id() as i32));
        assert!(!me.still_of(i32::MAX));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        me.connect(addr, Duration::from_secs(1)).unwrap();
        assert!(Netns::of_pid(i32::MAX).is_err());
    }
}
