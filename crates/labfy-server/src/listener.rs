//! Where the listening socket comes from: inherited from the supervisor
//! (systemd `LISTEN_FDS` convention, fd 3) or bound here — loopback only,
//! either way (SPEC S1, P2).

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::{FromRawFd, OwnedFd};

/// First inherited descriptor in the `LISTEN_FDS` convention.
pub const LISTEN_FDS_START: i32 = 3;

/// Why no listener could be had.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    /// `LISTEN_FDS` is set but not to `1`.
    #[error("LISTEN_FDS={0}: exactly one inherited listening socket is expected")]
    Count(String),
    /// `LISTEN_PID` names another process.
    #[error("LISTEN_PID={0} is not this process; the inherited socket is not meant for it")]
    Pid(String),
    /// fd 3 is not a usable TCP listener.
    #[error("inherited fd 3 is not a listening TCP socket: {0}")]
    NotAListener(String),
    /// The socket is not on a loopback address.
    #[error("refusing to serve on {0}: Labfy serves only on loopback addresses")]
    NotLoopback(SocketAddr),
    /// The port is taken.
    #[error("{0} is already in use (another Labfy, or another program); pick another port with --port")]
    InUse(SocketAddr),
    /// Any other bind failure.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// Takes the listening socket passed by the supervisor, if `LISTEN_FDS` says
/// there is one. The variables are removed so no child inherits them.
pub fn inherited() -> Result<Option<TcpListener>, ListenerError> {
    let Ok(count) = std::env::var("LISTEN_FDS") else {
        return Ok(None);
    };
    if count != "1" {
        return Err(ListenerError::Count(count));
    }
    // LISTEN_PID cannot be set from a pre_exec hook (see notes); when present it must match.
    if let Ok(pid) = std::env::var("LISTEN_PID") {
        if pid != std::process::id().to_string() {
            return Err(ListenerError::Pid(pid));
        }
    }
    // SAFETY: fcntl(F_GETFD) only queries descriptor flags; any int is a valid argument.
    #[allow(unsafe_code)]
    let flags = unsafe { libc::fcntl(LISTEN_FDS_START, libc::F_GETFD) };
    if flags < 0 {
        return Err(ListenerError::NotAListener(std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: fd 3 is open (checked above) and, by the LISTEN_FDS contract, ours
    // alone from here on: nothing else in this process uses or closes it.
    #[allow(unsafe_code)]
    let fd = unsafe { OwnedFd::from_raw_fd(LISTEN_FDS_START) };
    let socket = socket2::Socket::from(fd);
    let check = |ok: bool, what: &str| {
        if ok { Ok(()) } else { Err(ListenerError::NotAListener(what.to_owned())) }
    };
    let ty = socket.r#type().map_err(|e| ListenerError::NotAListener(e.to_string()))?;
    check(ty == socket2::Type::STREAM, "not a stream socket")?;
    let local = socket.local_addr().map_err(|e| ListenerError::NotAListener(e.to_string()))?;
    let addr = local.as_socket().ok_or_else(|| ListenerError::NotAListener("not an IP socket".into()))?;
    if !addr.ip().is_loopback() {
        return Err(ListenerError::NotLoopback(addr));
    }
    socket.set_cloexec(true).map_err(|e| ListenerError::NotAListener(e.to_string()))?;
    // SAFETY: `inherited` is called at start-up, before the async runtime or any
    // other thread exists, so nothing reads the environment concurrently.
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    Ok(Some(socket.into()))
}

/// Binds `addr`, which must be a loopback address.
pub fn bind_loopback(addr: SocketAddr) -> Result<TcpListener, ListenerError> {
    if !addr.ip().is_loopback() {
        return Err(ListenerError::NotLoopback(addr));
    }
    TcpListener::bind(addr).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AddrInUse {
            ListenerError::InUse(addr)
        } else {
            ListenerError::Bind { addr, source }
        }
    })
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::from([127, 0, 0, 1]), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_bound() {
        let err = bind_loopback("0.0.0.0:0".parse().unwrap()).unwrap_err();
        assert!(matches!(err, ListenerError::NotLoopback(_)));
        let l = bind_loopback(loopback(0)).unwrap();
        let taken = l.local_addr().unwrap();
        assert!(matches!(bind_loopback(taken), Err(ListenerError::InUse(a)) if a == taken));
    }
}
