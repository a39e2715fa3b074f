//! What every child daemon does the same way: read the per-boot secret from
//! the runtime directory, then serve its control socket (health, shutdown,
//! peer set) to the supervisor — and only to it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

use crate::IpcError;
use crate::auth::{AllowedPids, HANDSHAKE_TIMEOUT, PeerPolicy};
use crate::messages::control::{ControlRequest, ControlResponse};
use crate::messages::{Boundary, Failure, FailureCode, Health, Role};
use crate::secret::{self, Secret};
use crate::server::{self, Stats};

/// Socket file names in the runtime directory. The workspace server has
/// none: the runtime directory is read-only to it (SPEC T3), and its control
/// channel is a socket pair whose end it inherits ([`CONTROL_FD`]).
pub fn control_socket(runtime_dir: &Path, role: Role) -> PathBuf {
    runtime_dir.join(format!("{}.control.sock", role_name(role)))
}

/// The descriptor on which the workspace server inherits its end of the
/// control pair (named by `LABFY_CONTROL_FD`, after the listener's fd 3).
pub const CONTROL_FD: i32 = 4;

/// The supervisor's own socket (`labfy status`).
pub fn supervisor_socket(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("supervisor.sock")
}

/// The service socket of a daemon (`governor.sock`, `egress.sock`).
pub fn service_socket(runtime_dir: &Path, boundary: Boundary) -> PathBuf {
    runtime_dir.join(match boundary {
        Boundary::Control => "control.sock",
        Boundary::Governor => "governor.sock",
        Boundary::Egress => "egress.sock",
    })
}

/// The directory of the operator's sockets in the runtime directory. It is
/// masked in the confined server's root (SPEC T1): an operator socket
/// accepts any pid with the secret, which the server holds, so only the
/// kernel's view — no path to it — keeps the server from using one.
pub fn operator_dir(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("operator")
}

/// The operator's socket of a daemon (`operator/governor.operator.sock`):
/// same uid and the per-boot secret, any pid — for `labfy resources` and
/// `labfy model …`, which run outside the supervisor's process tree. The
/// workspace server has no path to it ([`operator_dir`]).
pub fn operator_socket(runtime_dir: &Path, boundary: Boundary) -> PathBuf {
    operator_dir(runtime_dir).join(match boundary {
        Boundary::Control => "control.operator.sock",
        Boundary::Governor => "governor.operator.sock",
        Boundary::Egress => "egress.operator.sock",
    })
}

/// The directory of the governed model's socket in the runtime directory
/// (SPEC D1, M11): the governor makes it and binds it, writable, into
/// llama-server's root; the confined server sees it through its read-only
/// view of the runtime directory, where it can connect to the socket and
/// replace nothing.
pub fn model_dir(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("model")
}

/// The governed model's socket: llama-server listens there
/// (`--host …/model.sock`), the server's agent connects there (its endpoint
/// `governed`). A Unix socket rather than a TCP port: the model needs no
/// network at all, and nothing has to enter the server's network namespace.
pub fn model_socket(runtime_dir: &Path) -> PathBuf {
    model_dir(runtime_dir).join("model.sock")
}

/// Lower-case name of a role.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Server => "server",
        Role::Governor => "governor",
        Role::Egress => "egress",
    }
}

/// This process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid()
    }
}

/// The parent's pid (the supervisor's, for a child it started).
pub fn parent_pid() -> i32 {
    // SAFETY: getppid(2) takes no arguments, touches no memory and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::getppid()
    }
}

/// Names the supervisor to a child of the host launcher (egress): the
/// launcher's own parent (SPEC P4; `labfy`'s `launcher.rs`).
pub const SUPERVISOR_PID_ENV: &str = "LABFY_SUPERVISOR_PID";

/// The supervisor's pid: the parent's — or, for egress, which the
/// supervisor starts through the host launcher, the parent's parent, as
/// [`SUPERVISOR_PID_ENV`] names it *and* the kernel confirms (the pid the
/// variable names must be the launcher's parent now).
pub fn supervisor_pid() -> i32 {
    let parent = parent_pid();
    let named = std::env::var(SUPERVISOR_PID_ENV).ok().and_then(|v| v.parse::<i32>().ok());
    match named {
        Some(pid) if parent_of(parent) == Some(pid) => pid,
        _ => parent,
    }
}

/// The parent of `pid`, from `/proc/<pid>/stat` (the field after the
/// command name, which may itself hold spaces and parentheses).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Makes this process non-dumpable: no core dump, and no process of the same
/// uid without `CAP_SYS_PTRACE` over our user namespace may ptrace it or read
/// its memory. Every Labfy process but the workspace server calls it first
/// thing, so the server — same uid, inside its own user namespace — cannot
/// reach into the supervisor, the governor or egress.
pub fn forbid_ptrace() -> Result<(), IpcError> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes plain integers and touches no memory.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(IpcError::Io(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A child's control side: its secret, the peers allowed on its service
/// socket, the notification that a shutdown was asked for, and (the
/// workspace server's) the workspace its analyst asked to open.
pub struct ControlPlane {
    /// The per-boot secret.
    pub secret: Secret,
    /// Pids allowed on the service socket (set by the supervisor).
    pub peers: AllowedPids,
    /// Notified when the supervisor asks for a shutdown.
    pub shutdown: Arc<Notify>,
    /// Reported in each health answer ([`Health::switch_to`]).
    pub switch_to: WorkspaceWish,
}

/// The workspace the analyst asked the server to open (SPEC C1), reported
/// to the supervisor with every health answer until it restarts the server.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceWish(Arc<Mutex<Option<uuid::Uuid>>>);

impl WorkspaceWish {
    /// Asks for `workspace` (replacing an earlier wish).
    pub fn set(&self, workspace: uuid::Uuid) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(workspace);
    }

    /// The pending wish, if any.
    pub fn get(&self) -> Option<uuid::Uuid> {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How a child's control plane is reached.
pub enum ControlChannel {
    /// `<role>.control.sock` in the runtime directory, for the parent
    /// process only (the governor, egress).
    Socket,
    /// An inherited, already-connected end of a socket pair (the workspace
    /// server, [`CONTROL_FD`]): only the holder of the other end — the
    /// supervisor — can speak on it. From inside the server's own PID
    /// namespace every outside process has pid 0, so a pid check could not
    /// tell the supervisor from another process of the same uid.
    Inherited(std::os::unix::net::UnixStream),
}

/// Reads the secret and starts serving the control plane on `channel`.
/// `ready` is asked at each health check.
pub fn start_control(
    runtime_dir: &Path,
    role: Role,
    channel: ControlChannel,
    ready: impl Fn() -> (bool, String) + Send + Sync + Clone + 'static,
) -> Result<ControlPlane, IpcError> {
    let secret = secret::read_secret(runtime_dir)?;
    let peers = AllowedPids::default();
    let shutdown = Arc::new(Notify::new());
    let switch_to = WorkspaceWish::default();
    let started = Instant::now();
    let (p, s, w) = (peers.clone(), shutdown.clone(), switch_to.clone());
    let handler = move |req: ControlRequest, _peer| {
        let (p, s, w, ready) = (p.clone(), s.clone(), w.clone(), ready.clone());
        async move {
            match req {
                ControlRequest::Health {} => {
                    let (is_ready, detail) = ready();
                    ControlResponse::Health(Health {
                        role,
                        pid: std::process::id(),
                        uptime_ms: started.elapsed().as_millis() as u64,
                        ready: is_ready,
                        detail,
                        switch_to: w.get(),
                    })
                }
                ControlRequest::Shutdown {} => {
                    s.notify_one();
                    ControlResponse::ShuttingDown {}
                }
                ControlRequest::SetPeers { pids } => {
                    p.set(pids);
                    ControlResponse::PeersSet {}
                }
                ControlRequest::Status {} => ControlResponse::Failed(Failure {
                    code: FailureCode::InvalidInput,
                    message: "only the supervisor reports status".into(),
                }),
            }
        }
    };
    match channel {
        ControlChannel::Socket => {
            let listener = server::bind(&control_socket(runtime_dir, role))?;
            let supervisor = AllowedPids::default();
            supervisor.insert(supervisor_pid());
            let policy = PeerPolicy {
                boundary: Boundary::Control,
                uid: euid(),
                pids: Some(supervisor),
                secret: secret.clone(),
                handshake_timeout: HANDSHAKE_TIMEOUT,
            };
            tokio::spawn(server::serve(listener, policy, Arc::new(Stats::default()), handler));
        }
        ControlChannel::Inherited(stream) => {
            stream.set_nonblocking(true)?;
            let stream = tokio::net::UnixStream::from_std(stream)?;
            let policy = PeerPolicy {
                boundary: Boundary::Control,
                uid: euid(),
                // The descriptor is the credential; see `ControlChannel`.
                pids: None,
                secret: secret.clone(),
                handshake_timeout: HANDSHAKE_TIMEOUT,
            };
            tokio::spawn(server::serve_one(stream, policy, Arc::new(Stats::default()), handler));
        }
    }
    Ok(ControlPlane { secret, peers, shutdown, switch_to })
}

/// Policy of a daemon's service socket: same uid, only the pids the
/// supervisor named (the workspace server's).
pub fn service_policy(plane: &ControlPlane, boundary: Boundary) -> PeerPolicy {
    PeerPolicy {
        boundary,
        uid: euid(),
        pids: Some(plane.peers.clone()),
        secret: plane.secret.clone(),
        handshake_timeout: HANDSHAKE_TIMEOUT,
    }
}

/// The whole life of a child daemon with one service socket: control plane,
/// service socket (only the peers the supervisor names), then wait for a
/// shutdown request, SIGTERM or SIGINT. Returns when it is time to exit.
pub async fn run_service<Req, Resp, H, F>(
    runtime_dir: &Path,
    role: Role,
    boundary: Boundary,
    ready: impl Fn() -> (bool, String) + Send + Sync + Clone + 'static,
    handler: H,
) -> Result<(), IpcError>
where
    Req: serde::de::DeserializeOwned + Send + 'static,
    Resp: serde::Serialize + Send + Sync + 'static,
    H: Fn(Req, crate::auth::Peer) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Resp> + Send + 'static,
{
    let plane = start_control(runtime_dir, role, ControlChannel::Socket, ready)?;
    let listener = server::bind(&service_socket(runtime_dir, boundary))?;
    tokio::spawn(server::serve(listener, service_policy(&plane, boundary), Arc::new(Stats::default()), handler));
    tracing::info!(role = role_name(role), "serving");
    wait_for_shutdown(&plane).await
}

/// Waits for a shutdown request of the supervisor, SIGTERM or SIGINT.
pub async fn wait_for_shutdown(plane: &ControlPlane) -> Result<(), IpcError> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = plane.shutdown.notified() => tracing::info!("shutdown asked by the supervisor"),
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
    }
    Ok(())
}

/// The common `main` of a child daemon: refuses to be ptraced, runs `body`
/// on a single-threaded runtime, and turns its outcome into an exit code with
/// a one-line report on stderr.
pub fn main<F>(name: &str, body: F) -> std::process::ExitCode
where
    F: std::future::Future<Output = Result<(), IpcError>>,
{
    let outcome = forbid_ptrace().and_then(|()| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(IpcError::Io)?.block_on(body)
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_from_the_kernel() {
        let me = std::process::id() as i32;
        assert_eq!(parent_of(me), Some(parent_pid()));
        assert_eq!(parent_of(i32::MAX), None);
        // Without the variable (tests never set it), the parent.
        assert_eq!(supervisor_pid(), parent_pid());
    }
}
