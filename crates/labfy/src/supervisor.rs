//! The supervisor (SPEC P1, P3): `labfy up` starts the workspace server, the
//! governor and egress as separate processes, watches their health over
//! their control sockets, restarts a crashed one with exponential backoff
//! (giving up, with a report, after repeated fast crashes), answers
//! `labfy status`, and stops them all in order on SIGINT/SIGTERM.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use labfy_core::ErrorKind;
use labfy_ipc::auth::{HANDSHAKE_TIMEOUT, PeerPolicy};
use labfy_ipc::client::Client;
use labfy_ipc::daemon::{self, control_socket, role_name, supervisor_socket};
use labfy_ipc::messages::control::{ControlRequest, ControlResponse};
use labfy_ipc::messages::{Boundary, ChildStatus, Role};
use labfy_ipc::secret::{self, Secret};
use labfy_ipc::server;
use tokio::process::{Child, Command};

use crate::cli::Failure;

/// First restart delay; doubled after each crash, up to [`BACKOFF_MAX`].
pub const BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest restart delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Crashes counted within this window…
pub const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// …beyond this many, the supervisor gives up on the child.
pub const MAX_CRASHES: usize = 5;
/// How long a child has to answer its first health check.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a child has to exit after an orderly shutdown request.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// Period of the supervision loop (exit detection, restarts).
pub const TICK: Duration = Duration::from_millis(100);
/// Period of health checks of a running child.
pub const HEALTH_PERIOD: Duration = Duration::from_secs(1);

/// The three child programs.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `labfy-server`.
    pub server: PathBuf,
    /// `labfy-governor`.
    pub governor: PathBuf,
    /// `labfy-egress`.
    pub egress: PathBuf,
}

impl Programs {
    /// The programs beside the running `labfy` (overridable, one by one, by
    /// `LABFY_SERVER_BIN`, `LABFY_GOVERNOR_BIN`, `LABFY_EGRESS_BIN`).
    pub fn beside_current_exe() -> Result<Self, Failure> {
        let exe = std::env::current_exe()?;
        let dir = exe.parent().unwrap_or(Path::new("."));
        let find = |name: &str, var: &str| -> Result<PathBuf, Failure> {
            let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| dir.join(name));
            if path.is_file() {
                Ok(path)
            } else {
                Err(Failure::new(
                    ErrorKind::Unavailable,
                    format!(
                        "{} not found; build every program first (cargo build --workspace --bins) or set {var}",
                        path.display()
                    ),
                ))
            }
        };
        Ok(Self {
            server: find("labfy-server", "LABFY_SERVER_BIN")?,
            governor: find("labfy-governor", "LABFY_GOVERNOR_BIN")?,
            egress: find("labfy-egress", "LABFY_EGRESS_BIN")?,
        })
    }
}

/// What `labfy up` hands to the supervisor.
pub struct Plan {
    /// Whether the workspace is REAL: then the server must be isolated, or
    /// nothing is started.
    pub real_workspace: bool,
    /// The data directory (the server opens the store there).
    pub data_dir: PathBuf,
    /// The workspace the server serves.
    pub workspace: String,
    /// The private runtime directory (sockets, secret).
    pub runtime_dir: PathBuf,
    /// The child programs.
    pub programs: Programs,
    /// The llama-server the governor may start (SPEC M11).
    pub llama_server: Option<PathBuf>,
    /// An arti configuration file for egress (bridges, or a private test
    /// network); without it, egress uses the real Tor network.
    pub arti_config: Option<PathBuf>,
}

/// The default runtime directory: `/run/labfy` for root, else
/// `$XDG_RUNTIME_DIR/labfy`, else `/tmp/labfy-<uid>`.
pub fn default_runtime_dir() -> PathBuf {
    if daemon::euid() == 0 {
        return PathBuf::from("/run/labfy");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        Some(x) => PathBuf::from(x).join("labfy"),
        None => std::env::temp_dir().join(format!("labfy-{}", daemon::euid())),
    }
}

struct Slot {
    role: Role,
    program: PathBuf,
    args: Vec<OsString>,
    child: Option<Child>,
    state: &'static str,
    detail: String,
    restarts: u32,
    crashes: VecDeque<Instant>,
    backoff: Duration,
    restart_at: Option<Instant>,
    started_at: Instant,
    last_health: Instant,
    /// Last successful health answer (or start).
    last_ok: Instant,
    control: Option<Client<ControlRequest, ControlResponse>>,
}

impl Slot {
    fn status(&self) -> ChildStatus {
        ChildStatus {
            role: self.role,
            state: self.state.to_owned(),
            pid: self.child.as_ref().and_then(Child::id),
            restarts: self.restarts,
            detail: self.detail.clone(),
        }
    }
}

/// How the server is started.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Isolation {
    /// Not tried yet.
    Untried,
    /// In its own user and network namespaces (`jail`).
    Namespaces,
    /// Namespaces are not permitted here: SPECIMEN only, marked in the UI.
    Unavailable(String),
}

/// Starts one child. Its environment is cleared; it dies with the
/// supervisor (`PR_SET_PDEATHSIG`). The server gets the listening socket as
/// fd 3 with `LISTEN_FDS=1` and, when `jail` is set, the isolation sequence
/// of [`crate::jail`].
fn spawn(slot: &Slot, runtime_dir: &Path, listener: Option<RawFd>, jail: Option<&[&Path]>) -> std::io::Result<Child> {
    let mut cmd = Command::new(&slot.program);
    cmd.env_clear().env("LABFY_LOG", std::env::var("LABFY_LOG").unwrap_or_else(|_| "warn".into()));
    // The governor's tunables (headroom, thresholds, model defaults) come
    // from `LABFY_GOVERNOR_*` variables (deploy/labfy.env), the server's agent
    // configuration (SPEC M4) from `LABFY_AGENT_*`, each to its own child
    // only; no other variable crosses into a child.
    let passed = match slot.role {
        Role::Governor => Some("LABFY_GOVERNOR_"),
        Role::Server => Some("LABFY_AGENT_"),
        Role::Egress => None,
    };
    if let Some(prefix) = passed {
        cmd.envs(std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(|k| k.starts_with(prefix))));
    }
    cmd.arg("--runtime-dir")
        .arg(runtime_dir)
        .args(&slot.args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // Their own process group: a Ctrl-C in the terminal reaches the
        // supervisor only, which then stops the children in order.
        .process_group(0)
        .kill_on_drop(true);
    match (listener, jail) {
        (Some(fd), Some(writable)) => {
            cmd.env("LISTEN_FDS", "1");
            crate::jail::ServerJail::new(writable)?.install(&mut cmd, fd);
        }
        (listener, _) => {
            if listener.is_some() {
                cmd.env("LISTEN_FDS", "1");
            }
            // SAFETY: the closure runs between fork and exec and makes only
            // async-signal-safe system calls (prctl, fcntl, dup2) on values copied in.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(move || {
                    // Die with the supervisor, whatever kills it.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if let Some(fd) = listener {
                        let rc = if fd == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(fd, 3) };
                        if rc < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
    }
    cmd.spawn()
}

/// Starts the server, isolated when the platform allows. The first failure
/// to create the namespaces decides for the rest of the run: a REAL
/// workspace is then refused; a SPECIMEN one runs marked "not isolated".
fn spawn_server(
    slot: &Slot,
    runtime_dir: &Path,
    data_dir: &Path,
    listener: RawFd,
    isolation: &mut Isolation,
    real: bool,
) -> Result<std::io::Result<Child>, Failure> {
    if matches!(isolation, Isolation::Unavailable(_)) {
        return Ok(spawn(slot, runtime_dir, Some(listener), None));
    }
    // The server writes only its data directory and its runtime directory.
    let writable = [data_dir, runtime_dir];
    match spawn(slot, runtime_dir, Some(listener), Some(&writable)) {
        Ok(child) => {
            *isolation = Isolation::Namespaces;
            Ok(Ok(child))
        }
        Err(e)
            if *isolation == Isolation::Untried
                && matches!(
                    e.raw_os_error(),
                    Some(libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EACCES | libc::ENOSYS)
                ) =>
        {
            let reason = format!("cannot create a network namespace for the server here ({e})");
            if real {
                return Err(Failure::new(
                    ErrorKind::Forbidden,
                    format!("{reason}: a REAL workspace is refused (SPEC P2)"),
                ));
            }
            eprintln!("labfy: NOT ISOLATED — {reason}; serving SPECIMEN data only");
            *isolation = Isolation::Unavailable(reason);
            Ok(spawn(slot, runtime_dir, Some(listener), None))
        }
        Err(e) => Ok(Err(e)),
    }
}

async fn health(slot: &mut Slot, runtime_dir: &Path, secret: &Secret) -> Result<(bool, String), String> {
    if slot.control.is_none() {
        let path = control_socket(runtime_dir, slot.role);
        let client = Client::connect(&path, Boundary::Control, secret).await.map_err(|e| e.to_string())?;
        slot.control = Some(client.with_timeout(Duration::from_secs(2)));
    }
    let Some(client) = slot.control.as_mut() else { return Err("no control connection".into()) };
    match client.call(ControlRequest::Health {}).await {
        Ok(ControlResponse::Health(h)) => Ok((h.ready, h.detail)),
        Ok(other) => Err(format!("unexpected answer {other:?}")),
        Err(e) => {
            slot.control = None;
            Err(e.to_string())
        }
    }
}

async fn tell(slot: &mut Slot, request: ControlRequest) -> Result<ControlResponse, String> {
    match slot.control.as_mut() {
        Some(c) => c.call(request).await.map_err(|e| e.to_string()),
        None => Err("no control connection".into()),
    }
}

/// Runs the supervisor until SIGINT/SIGTERM or until the server cannot be
/// kept running. `on_ready` is called once every child answered its first
/// health check.
pub async fn run(plan: Plan, listener: std::net::TcpListener, on_ready: impl FnOnce()) -> Result<(), Failure> {
    // 1. The private runtime directory and this boot's secret.
    if let Some(parent) = plan.runtime_dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    refuse_if_running(&plan.runtime_dir).await?;
    secret::create_private_dir(&plan.runtime_dir).map_err(|e| Failure::new(ErrorKind::Storage, e.to_string()))?;
    let secret =
        secret::create_secret(&plan.runtime_dir).map_err(|e| Failure::new(ErrorKind::Storage, e.to_string()))?;
    let result = supervise(&plan, &listener, &secret, on_ready).await;
    // Whatever happened, the runtime directory goes with the supervisor.
    if let Err(e) = std::fs::remove_dir_all(&plan.runtime_dir) {
        tracing::warn!(error = %e, "could not remove the runtime directory");
    }
    result
}

async fn refuse_if_running(runtime_dir: &Path) -> Result<(), Failure> {
    let sock = supervisor_socket(runtime_dir);
    if sock.exists() && tokio::net::UnixStream::connect(&sock).await.is_ok() {
        return Err(Failure::new(
            ErrorKind::Conflict,
            format!("another labfy up is running with runtime directory {}", runtime_dir.display()),
        ));
    }
    // Stale leftovers of a supervisor that died: clear them.
    if runtime_dir.exists() {
        secret::check_private_dir(runtime_dir).map_err(|e| Failure::new(ErrorKind::Storage, e.to_string()))?;
        std::fs::remove_dir_all(runtime_dir)?;
    }
    Ok(())
}

async fn supervise(
    plan: &Plan,
    listener: &std::net::TcpListener,
    secret: &Secret,
    on_ready: impl FnOnce(),
) -> Result<(), Failure> {
    let dir = plan.runtime_dir.as_path();
    let now = Instant::now();
    let slot = |role, program: &PathBuf, args: Vec<OsString>| Slot {
        role,
        program: program.clone(),
        args,
        child: None,
        state: "starting",
        detail: String::new(),
        restarts: 0,
        crashes: VecDeque::new(),
        backoff: BACKOFF_START,
        restart_at: Some(now),
        started_at: now,
        last_health: now,
        last_ok: now,
        control: None,
    };
    let server_args = vec![
        OsString::from("--data-dir"),
        plan.data_dir.clone().into_os_string(),
        OsString::from("--workspace"),
        OsString::from(&plan.workspace),
    ];
    let mut governor_args = vec![OsString::from("--data-dir"), plan.data_dir.clone().into_os_string()];
    if let Some(p) = &plan.llama_server {
        governor_args.push(OsString::from("--llama-server"));
        governor_args.push(p.clone().into_os_string());
    }
    // Egress re-checks grants in the store (read-only) and keeps arti's
    // state and cache under the data directory.
    let mut egress_args = vec![OsString::from("--data-dir"), plan.data_dir.clone().into_os_string()];
    if let Some(p) = &plan.arti_config {
        egress_args.push(OsString::from("--arti-config"));
        egress_args.push(p.clone().into_os_string());
    }
    // Governor and egress first: the server's peers must exist before it.
    let mut slots = vec![
        slot(Role::Governor, &plan.programs.governor, governor_args),
        slot(Role::Egress, &plan.programs.egress, egress_args),
        slot(Role::Server, &plan.programs.server, server_args),
    ];
    // `labfy status` asks here: same uid, the secret, any pid.
    let statuses: Arc<Mutex<Vec<ChildStatus>>> = Arc::new(Mutex::new(slots.iter().map(Slot::status).collect()));
    let status_listener =
        server::bind(&supervisor_socket(dir)).map_err(|e| Failure::new(ErrorKind::Storage, e.to_string()))?;
    let policy = PeerPolicy {
        boundary: Boundary::Control,
        uid: daemon::euid(),
        pids: None,
        secret: secret.clone(),
        handshake_timeout: HANDSHAKE_TIMEOUT,
    };
    let shared = statuses.clone();
    let status_task = tokio::spawn(server::serve(status_listener, policy, Arc::default(), move |req, _peer| {
        let shared = shared.clone();
        async move {
            match req {
                ControlRequest::Status {} => ControlResponse::Status {
                    children: shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
                },
                _ => ControlResponse::Failed(labfy_ipc::messages::Failure {
                    code: "INVALID_INPUT".into(),
                    message: "the supervisor answers status only".into(),
                }),
            }
        }
    }));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut on_ready = Some(on_ready);
    let mut isolation = Isolation::Untried;
    let mut ticker = tokio::time::interval(TICK);
    let outcome = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(()),
            _ = term.recv() => break Ok(()),
            _ = ticker.tick() => {}
        }
        if let Err(e) =
            tick(&mut slots, dir, &plan.data_dir, secret, listener.as_raw_fd(), &mut isolation, plan.real_workspace)
                .await
        {
            break Err(e);
        }
        *statuses.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = slots.iter().map(Slot::status).collect();
        // Ready: the server healthy, every other child healthy or given up on
        // (a broken governor must not hide a working UI).
        let settled = slots.iter().all(|s| s.state == "healthy" || (s.role != Role::Server && s.state == "failed"));
        if on_ready.is_some() && settled {
            if let Some(f) = on_ready.take() {
                f();
            }
        }
    };
    stop_all(&mut slots).await;
    status_task.abort();
    outcome
}

/// Counts a crash (an exit, or a failure to start): schedules the restart
/// after the current backoff, or gives up after [`MAX_CRASHES`] within
/// [`CRASH_WINDOW`] — which ends the supervisor when it is the server.
fn record_crash(s: &mut Slot, now: Instant, what: &str) -> Result<(), Failure> {
    s.crashes.push_back(now);
    while s.crashes.front().is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW) {
        s.crashes.pop_front();
    }
    if s.crashes.len() >= MAX_CRASHES {
        s.state = "failed";
        s.restart_at = None;
        s.detail = format!(
            "exited {} times within {} s (last: {what}); gave up restarting it",
            s.crashes.len(),
            CRASH_WINDOW.as_secs()
        );
        eprintln!("labfy: {} {}", role_name(s.role), s.detail);
        if s.role == Role::Server {
            return Err(Failure::new(ErrorKind::Unavailable, format!("the workspace server {}", s.detail)));
        }
        return Ok(());
    }
    s.state = "restarting";
    s.detail = format!("{what}; restarting in {} ms", s.backoff.as_millis());
    eprintln!("labfy: {} {}", role_name(s.role), s.detail);
    s.restart_at = Some(now + s.backoff);
    s.backoff = (s.backoff * 2).min(BACKOFF_MAX);
    Ok(())
}

/// One round of supervision: reap exits, restart what is due, check health.
async fn tick(
    slots: &mut [Slot],
    dir: &Path,
    data_dir: &Path,
    secret: &Secret,
    listener: RawFd,
    isolation: &mut Isolation,
    real: bool,
) -> Result<(), Failure> {
    let now = Instant::now();
    // Children that answered their first health check this round.
    let mut newly_healthy: Vec<Role> = Vec::new();
    for s in slots.iter_mut() {
        // A child that exited on its own is a crash.
        if let Some(child) = s.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                s.child = None;
                s.control = None;
                record_crash(s, now, &format!("exited ({status})"))?;
            }
        }
        // Start (or restart) what is due.
        if s.child.is_none() && s.restart_at.is_some_and(|t| now >= t) {
            s.restart_at = None;
            let spawned = if s.role == Role::Server {
                spawn_server(s, dir, data_dir, listener, isolation, real)?
            } else {
                spawn(s, dir, None, None)
            };
            match spawned {
                Ok(child) => {
                    if s.state == "restarting" {
                        s.restarts += 1;
                    }
                    s.child = Some(child);
                    s.state = "starting";
                    s.started_at = now;
                    s.last_ok = now;
                    s.last_health = now - HEALTH_PERIOD;
                }
                Err(e) => record_crash(s, now, &format!("cannot start {}: {e}", s.program.display()))?,
            }
        }
        // Health, once a period (more often while starting).
        let period = if s.state == "starting" { TICK } else { HEALTH_PERIOD };
        if s.child.is_some() && now.duration_since(s.last_health) >= period {
            s.last_health = now;
            match health(s, dir, secret).await {
                Ok((ready, detail)) => {
                    if s.state == "starting" {
                        newly_healthy.push(s.role);
                    }
                    s.last_ok = now;
                    s.state = "healthy";
                    s.detail = if ready { detail } else { format!("not ready: {detail}") };
                    // A healthy run resets the backoff.
                    if now.duration_since(s.started_at) > CRASH_WINDOW / 4 {
                        s.backoff = BACKOFF_START;
                    }
                }
                Err(e) => {
                    if s.state != "starting" {
                        s.state = "unhealthy";
                        s.detail = e.clone();
                    }
                    // Silent too long: killed, then reaped and restarted as a crash.
                    if now.duration_since(s.last_ok) > START_TIMEOUT {
                        s.state = "unhealthy";
                        s.detail = format!("no health answer for {} s ({e}); killing it", START_TIMEOUT.as_secs());
                        eprintln!("labfy: {} {}", role_name(s.role), s.detail);
                        if let Some(child) = s.child.as_mut() {
                            let _ = child.start_kill();
                        }
                    }
                }
            }
        }
    }
    // The governor and egress accept only the current server's pid: tell the
    // ones that just started, or all of them when the server just did.
    let server_pid = slots
        .iter()
        .find(|s| s.role == Role::Server && s.state == "healthy")
        .and_then(|s| s.child.as_ref())
        .and_then(Child::id);
    if let Some(pid) = server_pid {
        let server_new = newly_healthy.contains(&Role::Server);
        for s in slots.iter_mut().filter(|s| s.role != Role::Server && s.state == "healthy") {
            if server_new || newly_healthy.contains(&s.role) {
                if let Err(e) = tell(s, ControlRequest::SetPeers { pids: vec![pid as i32] }).await {
                    tracing::warn!(role = role_name(s.role), error = %e, "could not set peers");
                }
            }
        }
    }
    Ok(())
}

/// Orderly stop: the server first (it is the peers' client), then the others;
/// each is asked over its control socket, then SIGKILLed after [`STOP_GRACE`].
async fn stop_all(slots: &mut [Slot]) {
    slots.sort_by_key(|s| if s.role == Role::Server { 0 } else { 1 });
    for s in slots.iter_mut() {
        let Some(mut child) = s.child.take() else { continue };
        s.state = "stopping";
        if tell(s, ControlRequest::Shutdown {}).await.is_err() {
            if let Some(pid) = child.id() {
                // SAFETY: kill(2) on the pid of a child we still hold (not yet reaped).
                #[allow(unsafe_code)]
                unsafe {
                    libc::kill(pid as i32, libc::SIGTERM);
                }
            }
        }
        if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_err() {
            eprintln!("labfy: {} did not stop within {} s; killing it", role_name(s.role), STOP_GRACE.as_secs());
            let _ = child.kill().await;
        }
        s.state = "stopped";
    }
}

/// `labfy status`: asks the running supervisor.
pub async fn status(runtime_dir: &Path) -> Result<Vec<ChildStatus>, Failure> {
    let sock = supervisor_socket(runtime_dir);
    let not_running =
        || Failure::new(ErrorKind::Unavailable, format!("labfy is not running (no supervisor at {})", sock.display()));
    if !sock.exists() {
        return Err(not_running());
    }
    let secret = secret::read_secret(runtime_dir).map_err(|e| Failure::new(ErrorKind::Storage, e.to_string()))?;
    let mut client: Client<ControlRequest, ControlResponse> =
        Client::connect(&sock, Boundary::Control, &secret).await.map_err(|_| not_running())?;
    match client.call(ControlRequest::Status {}).await {
        Ok(ControlResponse::Status { children }) => Ok(children),
        Ok(other) => Err(Failure::new(ErrorKind::Internal, format!("unexpected answer: {other:?}"))),
        Err(e) => Err(Failure::new(ErrorKind::Unavailable, e.to_string())),
    }
}
