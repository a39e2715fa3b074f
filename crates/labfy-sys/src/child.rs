//! The parent's handle on a confined child: its host pid, a pidfd (signals
//! that cannot hit a recycled pid, and an exit the runtime can wait on), and
//! reaping by pid (the child is ours, so its pid stays its until reaped).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A confined child started by [`crate::Jail::spawn`]. Dropped while still
/// running, it is killed (SIGKILL) and reaped when it can be.
#[derive(Debug)]
pub struct ConfinedChild {
    pid: u32,
    pidfd: Option<OwnedFd>,
    status: Option<ExitStatus>,
    /// The directory the child handed over ([`crate::Jail::export_dir`]).
    exported: Option<OwnedFd>,
}

impl ConfinedChild {
    pub(crate) fn new(pid: u32, pidfd: OwnedFd) -> Self {
        Self { pid, pidfd: Some(pidfd), status: None, exported: None }
    }

    pub(crate) fn set_exported(&mut self, dir: OwnedFd) {
        self.exported = Some(dir);
    }

    /// The directory the child handed over before `execve`
    /// ([`crate::Jail::export_dir`]): an `O_PATH` descriptor, readable
    /// through `/proc/self/fd/<n>` after the child is gone.
    pub fn take_exported(&mut self) -> Option<OwnedFd> {
        self.exported.take()
    }

    /// The host pid, while the child has not been reaped.
    pub fn id(&self) -> Option<u32> {
        self.status.is_none().then_some(self.pid)
    }

    /// Sends `signal` through the pidfd (nothing once reaped).
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        let Some(fd) = self.pidfd.as_ref().filter(|_| self.status.is_none()) else { return Ok(()) };
        // SAFETY: pidfd_send_signal on our own pidfd, no siginfo.
        let rc = unsafe {
            libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), signal, std::ptr::null::<libc::siginfo_t>(), 0)
        };
        match rc {
            0 => Ok(()),
            // Already exited (a zombie not reaped yet): nothing to signal.
            _ if io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// SIGKILL, without waiting.
    pub fn start_kill(&mut self) -> io::Result<()> {
        self.signal(libc::SIGKILL)
    }

    /// Reaps the child if it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let mut raw = 0;
        // SAFETY: waitpid on our own child, a status on this stack frame.
        let rc = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut raw, libc::WNOHANG) };
        match rc {
            0 => Ok(None),
            rc if rc < 0 => Err(io::Error::last_os_error()),
            _ => {
                let status = ExitStatus::from_raw(raw);
                self.status = Some(status);
                self.pidfd = None;
                Ok(Some(status))
            }
        }
    }

    /// Waits for the child to exit (the pidfd becomes readable) and reaps it.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(s) = self.try_wait()? {
            return Ok(s);
        }
        // A duplicate: if this wait is cancelled, the handle keeps its pidfd.
        let Some(fd) = self.pidfd.as_ref() else { return Err(io::Error::other("no pidfd")) };
        // SAFETY: an OwnedFd owns its descriptor for the AsyncFd's lifetime.
        let watched = unsafe { AsyncFd::register_with_interest(fd.try_clone()?, Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        loop {
            let mut guard = watched.readable().await?;
            if let Some(s) = self.try_wait()? {
                return Ok(s);
            }
            guard.clear_ready();
        }
    }

    /// SIGKILL, then waits for the exit.
    pub async fn kill(&mut self) -> io::Result<ExitStatus> {
        self.start_kill()?;
        self.wait().await
    }
}

impl Drop for ConfinedChild {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.start_kill();
            // Reaped at once if it is already gone; otherwise it stays a
            // zombie of this process until it exits.
            let _ = self.try_wait();
        }
    }
}

/// A close-on-exec pipe: the read end as a `File`, the write end to give a
/// child with [`crate::Jail::output`] (then dropped by the caller, so the
/// reader sees EOF when the child exits).
pub fn pipe() -> io::Result<(std::fs::File, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nothing else.
    Ok(unsafe { (std::fs::File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
