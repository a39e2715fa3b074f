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

use labfy::Failure;
use labfy::jail::ServerJail;
use labfy_core::ErrorKind;
use labfy_ipc::auth::{HANDSHAKE_TIMEOUT, PeerPolicy};
use labfy_ipc::client::Client;
use labfy_ipc::daemon::{self, control_socket, role_name, supervisor_socket};
use labfy_ipc::login::{self, LoginKey};
use labfy_ipc::messages::control::{ControlRequest, ControlResponse};
use labfy_ipc::messages::{Boundary, ChildState, ChildStatus, FailureCode, Role};
use labfy_ipc::secret::{self, Secret};
use labfy_ipc::server;
use labfy_sys::ConfinedChild;
use tokio::process::{Child, Command};

use crate::logs::{LogBook, SUMMARY_PERIOD};

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
    /// Largest body egress keeps per fetch, MiB (SPEC C3).
    pub max_body_mib: u64,
    /// A model endpoint named by port is configured: the server may open
    /// TCP sockets on its own loopback, still with no other network.
    pub loopback_tcp: bool,
    /// The launcher that starts egress in the host's network namespace,
    /// which the supervisor has left (SPEC P4, [`crate::launcher`]); `None`
    /// where the supervisor kept the host's network, and starts egress itself.
    pub host_launcher: Option<Arc<crate::launcher::HostLauncher>>,
    /// The launcher's stderr (egress's too), for the log book.
    pub launcher_log: Option<std::fs::File>,
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

/// A running child: the governor and egress as ordinary processes, the
/// server confined by `labfy-sys` (or, where the platform cannot confine it,
/// SPECIMEN only, as an ordinary process marked "not isolated"), egress a
/// child of the host launcher when the supervisor left the host's network.
enum Proc {
    Plain(Child),
    Confined(ConfinedChild),
    Remote(crate::launcher::RemoteChild),
}

impl Proc {
    fn id(&self) -> Option<u32> {
        match self {
            Proc::Plain(c) => c.id(),
            Proc::Confined(c) => c.id(),
            Proc::Remote(c) => Some(c.id()),
        }
    }

    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self {
            Proc::Plain(c) => c.try_wait(),
            Proc::Confined(c) => c.try_wait(),
            Proc::Remote(c) => Ok(c.try_wait()),
        }
    }

    fn start_kill(&mut self) -> std::io::Result<()> {
        match self {
            Proc::Plain(c) => c.start_kill(),
            Proc::Confined(c) => c.start_kill(),
            Proc::Remote(c) => c.signal(libc::SIGKILL),
        }
    }

    fn terminate(&mut self) {
        match self {
            Proc::Plain(c) => {
                if let Some(pid) = c.id() {
                    // SAFETY: kill(2) on the pid of a child we still hold (not yet reaped).
                    #[allow(unsafe_code)]
                    unsafe {
                        libc::kill(pid as i32, libc::SIGTERM);
                    }
                }
            }
            Proc::Confined(c) => {
                let _ = c.signal(libc::SIGTERM);
            }
            Proc::Remote(c) => {
                let _ = c.signal(libc::SIGTERM);
            }
        }
    }

    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Proc::Plain(c) => c.wait().await,
            Proc::Confined(c) => c.wait().await,
            Proc::Remote(c) => Ok(c.wait().await),
        }
    }

    async fn kill(&mut self) -> std::io::Result<()> {
        match self {
            Proc::Plain(c) => c.kill().await,
            Proc::Confined(c) => c.kill().await.map(drop),
            Proc::Remote(c) => {
                c.signal(libc::SIGKILL)?;
                c.wait().await;
                Ok(())
            }
        }
    }
}

struct Slot {
    role: Role,
    program: PathBuf,
    args: Vec<OsString>,
    child: Option<Proc>,
    /// How the child is confined (the server), for `labfy status`.
    confinement: Option<String>,
    /// Our end of the server's control pair, until the first health check
    /// takes it (the server has no control socket in the runtime directory).
    control_end: Option<std::os::unix::net::UnixStream>,
    state: ChildState,
    detail: String,
    restarts: u32,
    crashes: VecDeque<Instant>,
    backoff: Duration,
    restart_at: Option<Instant>,
    started_at: Instant,
    last_health: Instant,
    /// Last successful health answer (or start).
    last_ok: Instant,
    /// Warnings it had logged when last started: one logged since is named
    /// when it exits.
    logged_at_start: u64,
    control: Option<Client<ControlRequest, ControlResponse>>,
    /// The server's last workspace wish refused (said once, not each check).
    refused_switch: Option<uuid::Uuid>,
}

impl Slot {
    fn status(&self, book: &LogBook) -> ChildStatus {
        let warnings = book.warnings(self.role);
        ChildStatus {
            warnings: warnings.total,
            last_warning: warnings.last,
            role: self.role,
            state: self.state,
            pid: self.child.as_ref().and_then(Proc::id),
            restarts: self.restarts,
            detail: self.detail.clone(),
            confinement: self.confinement.clone(),
        }
    }
}

/// How the server is started.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Isolation {
    /// Not tried yet.
    Untried,
    /// Confined by `labfy-sys` (namespaces, minimal root, seccomp…).
    Confined,
    /// Namespaces are not permitted here: SPECIMEN only, marked in the UI.
    Unavailable(String),
}

/// Environment variables passed to `role`: `LABFY_LOG`, and the
/// governor's tunables (`LABFY_GOVERNOR_*`, deploy/labfy.toml's `[governor]`) to the
/// governor only, the agent configuration (`LABFY_AGENT_*`, SPEC M4) to the
/// server only; no other variable crosses into a child.
fn child_env(role: Role) -> Vec<(OsString, OsString)> {
    let mut env = vec![(OsString::from("LABFY_LOG"), std::env::var_os("LABFY_LOG").unwrap_or_else(|| "warn".into()))];
    let passed = match role {
        Role::Governor => Some("LABFY_GOVERNOR_"),
        Role::Server => Some("LABFY_AGENT_"),
        Role::Egress => Some("LABFY_EGRESS_"),
    };
    if let Some(prefix) = passed {
        env.extend(std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(|k| k.starts_with(prefix))));
    }
    // The crash-point harness's two variables (SPEC K4) and the planted
    // leak's (K5), read by test builds only (labfy_core::crash, ::leak).
    for k in [labfy_core::crash::ENV_AT, labfy_core::crash::ENV_MARK, labfy_core::leak::ENV] {
        if let Some(v) = std::env::var_os(k) {
            env.push((k.into(), v));
        }
    }
    env
}

/// Starts one child as an ordinary process (the governor, egress; the
/// server only where it cannot be confined, SPECIMEN only). Its environment
/// is cleared but for [`child_env`]; it dies with the supervisor
/// (`PR_SET_PDEATHSIG`); the server gets the listening socket as fd 3 with
/// `LISTEN_FDS=1`.
fn spawn(slot: &Slot, runtime_dir: &Path, fds: Option<(RawFd, RawFd)>, book: &Arc<LogBook>) -> std::io::Result<Proc> {
    let mut cmd = Command::new(&slot.program);
    cmd.env_clear().envs(child_env(slot.role));
    cmd.arg("--runtime-dir")
        .arg(runtime_dir)
        .args(&slot.args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // Into the log book (SPEC U8), not onto the operator's terminal.
        .stderr(std::process::Stdio::piped())
        // Their own process group: a Ctrl-C in the terminal reaches the
        // supervisor only, which then stops the children in order.
        .process_group(0)
        .kill_on_drop(true);
    if fds.is_some() {
        cmd.env("LISTEN_FDS", "1").env("LABFY_CONTROL_FD", daemon::CONTROL_FD.to_string());
    }
    // The governor needs cgroups and Unix sockets, never the network (SPEC
    // P4): a network namespace of its own with nothing in it.
    let no_network = (slot.role == Role::Governor).then(labfy_sys::steps::NoNetwork::prepare);
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe system calls (prctl, unshare, open/write/close,
    // fcntl, dup2) on values prepared above.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            // Die with the supervisor, whatever kills it.
            labfy_sys::steps::die_with_parent(libc::SIGTERM)?;
            if let Some(empty) = &no_network {
                empty.enter()?;
            }
            // The listener on fd 3, the control end on fd 4: both copied
            // above first (one may sit on the other's number).
            if let Some((listener, control)) = fds {
                let high = |fd| libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
                let (l, c) = (high(listener), high(control));
                if l < 0 || c < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                labfy_sys::steps::place_fd(l, 3)?;
                labfy_sys::steps::place_fd(c, daemon::CONTROL_FD)?;
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    if let Some(err) = child.stderr.take().and_then(|e| e.into_owned_fd().ok()) {
        book.follow(slot.role, std::fs::File::from(err));
    }
    Ok(Proc::Plain(child))
}

/// Starts egress through the host launcher (the supervisor has no network
/// to give it): the same arguments and environment as [`spawn`]'s; its
/// stderr is the launcher's, which the log book follows as egress's.
fn spawn_in_host_network(
    slot: &Slot,
    runtime_dir: &Path,
    launcher: &Arc<crate::launcher::HostLauncher>,
) -> std::io::Result<Proc> {
    let mut args = vec![OsString::from("--runtime-dir"), runtime_dir.as_os_str().to_owned()];
    args.extend(slot.args.iter().cloned());
    launcher.spawn(&slot.program, &args, &child_env(slot.role)).map(Proc::Remote)
}

/// Starts the server confined ([`crate::jail`], SPEC T1) when the platform
/// allows. The first failure to confine it decides for the rest of the run:
/// a REAL workspace is then refused; a SPECIMEN one runs marked "not
/// isolated".
fn spawn_server(
    slot: &mut Slot,
    runtime_dir: &Path,
    plan: &Plan,
    listener: RawFd,
    isolation: &mut Isolation,
    book: &Arc<LogBook>,
) -> Result<std::io::Result<Proc>, Failure> {
    let (data_dir, real, loopback_tcp) = (plan.data_dir.as_path(), plan.real_workspace, plan.loopback_tcp);
    // The control pair: our end stays in the slot, theirs becomes fd 4.
    let (ours, theirs) = match std::os::unix::net::UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => return Ok(Err(e)),
    };
    slot.control_end = Some(ours);
    let fds = (listener, theirs.as_raw_fd());
    if let Isolation::Unavailable(reason) = isolation {
        if real {
            // Never reached through a switch (`check_switch`); said here too.
            return Err(Failure::new(
                ErrorKind::Forbidden,
                format!("{reason}: a REAL workspace is refused (SPEC P2, T1)"),
            ));
        }
        return Ok(spawn(slot, runtime_dir, Some(fds), book));
    }
    // Its stderr into the log book, like the others'.
    let (log_read, log_write) = match labfy_sys::pipe() {
        Ok(pair) => pair,
        Err(e) => return Ok(Err(e)),
    };
    let capabilities = std::env::var_os("LABFY_AGENT_CAPABILITIES_DIR").map(std::path::PathBuf::from);
    let spec = ServerJail {
        program: &slot.program,
        data_dir,
        runtime_dir,
        loopback_tcp,
        seccomp: true,
        capabilities_dir: capabilities.as_deref().filter(|p| p.is_absolute()),
    };
    let spawned = spec.build().and_then(|mut jail| {
        jail.arg("--runtime-dir").arg(runtime_dir);
        for a in &slot.args {
            jail.arg(a);
        }
        for (k, v) in child_env(Role::Server) {
            jail.env(k, v);
        }
        jail.env("LISTEN_FDS", "1").listener(listener);
        // What the server shows the analyst about its own confinement (the
        // UI's badge); what is applied is decided here, not by the server.
        jail.env("LABFY_CONFINEMENT_MISSING", jail.confinement().missing_codes.join(","));
        jail.env("LABFY_CONTROL_FD", daemon::CONTROL_FD.to_string()).pass_fd(fds.1, daemon::CONTROL_FD);
        jail.output(log_write.as_raw_fd());
        jail.spawn()
    });
    // Our copy of the write end closes: the reader ends when the server does.
    drop(log_write);
    match spawned {
        Ok((child, confinement)) => {
            book.follow(slot.role, log_read);
            if *isolation == Isolation::Untried {
                book.event(&format!("labfy: workspace server confined: {confinement}"));
            }
            *isolation = Isolation::Confined;
            slot.confinement = Some(confinement.to_string());
            Ok(Ok(Proc::Confined(child)))
        }
        Err(e) if *isolation == Isolation::Untried && e.is_unsupported() => {
            let reason = format!("cannot confine the server here ({e})");
            if real {
                return Err(Failure::new(
                    ErrorKind::Forbidden,
                    format!("{reason}: a REAL workspace is refused (SPEC P2, T1)"),
                ));
            }
            book.event(&format!("labfy: NOT ISOLATED — {reason}; serving SPECIMEN data only"));
            slot.confinement = Some(format!("NOT ISOLATED: {reason}"));
            *isolation = Isolation::Unavailable(reason);
            Ok(spawn(slot, runtime_dir, Some(fds), book))
        }
        Err(e) => Ok(Err(std::io::Error::other(e.to_string()))),
    }
}

/// One health check: ready, the detail line, and (the server's) the
/// workspace its analyst asked to open.
async fn health(
    slot: &mut Slot,
    runtime_dir: &Path,
    secret: &Secret,
) -> Result<(bool, String, Option<uuid::Uuid>), String> {
    if slot.control.is_none() {
        let client = if slot.role == Role::Server {
            // The server's one channel: the pair's end, usable once.
            let end = slot.control_end.take().ok_or("the control channel to the server is lost")?;
            end.set_nonblocking(true).map_err(|e| e.to_string())?;
            let stream = tokio::net::UnixStream::from_std(end).map_err(|e| e.to_string())?;
            Client::from_stream(stream, Boundary::Control, secret).await
        } else {
            Client::connect(&control_socket(runtime_dir, slot.role), Boundary::Control, secret).await
        };
        slot.control = Some(client.map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(2)));
    }
    let Some(client) = slot.control.as_mut() else { return Err("no control connection".into()) };
    match client.call(ControlRequest::Health {}).await {
        Ok(ControlResponse::Health(h)) => Ok((h.ready, h.detail, h.switch_to)),
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
/// kept running. `on_ready` is called, with a one-time login link, once
/// every child answered its first health check.
pub async fn run(mut plan: Plan, listener: std::net::TcpListener, on_ready: impl FnOnce(&str)) -> Result<(), Failure> {
    let storage = |e: labfy_ipc::IpcError| Failure::new(ErrorKind::Storage, e.to_string());
    // 1. The private runtime directory and this boot's secret.
    if let Some(parent) = plan.runtime_dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    refuse_if_running(&plan.runtime_dir).await?;
    secret::create_private_dir(&plan.runtime_dir).map_err(storage)?;
    // The confined server sees both directories at their real paths, so its
    // arguments name them so.
    plan.runtime_dir = std::fs::canonicalize(&plan.runtime_dir)?;
    plan.data_dir = std::fs::canonicalize(&plan.data_dir)?;
    // 2. Egress's state directory, the folder where egress keeps fetched
    //    bodies for the server (SPEC C3) and the operator sockets'
    //    directory, which the server's view masks (SPEC T1, T3).
    labfy::layout::prepare(&plan.data_dir, &plan.runtime_dir).map_err(storage)?;
    let secret = secret::create_secret(&plan.runtime_dir).map_err(storage)?;
    // The log book (SPEC U8): the children's stderr into `<data>/logs`, which
    // the server's view masks too; the terminal gets what is the operator's.
    let live = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let book = LogBook::open_with(&plan.data_dir, Box::new(std::io::stderr()), live)?;
    if let Some(log) = plan.launcher_log.take() {
        book.follow(Role::Egress, log);
    }
    // 3. This boot's login key (SPEC T4): the server reads it; `labfy open`
    //    mints links from it; `on_ready` gets the first link.
    let port = listener.local_addr()?.port();
    let key = LoginKey::generate();
    login::write_login_file(&plan.runtime_dir, port, &key).map_err(storage)?;
    let first_link = login::login_url(port, &key.mint_code(std::time::SystemTime::now()));
    let result = supervise(&mut plan, &listener, &secret, &book, move || on_ready(&first_link)).await;
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
    plan: &mut Plan,
    listener: &std::net::TcpListener,
    secret: &Secret,
    book: &Arc<LogBook>,
    on_ready: impl FnOnce(),
) -> Result<(), Failure> {
    let dir = plan.runtime_dir.clone();
    let dir = dir.as_path();
    let now = Instant::now();
    let slot = |role, program: &PathBuf, args: Vec<OsString>| Slot {
        role,
        program: program.clone(),
        args,
        child: None,
        confinement: None,
        control_end: None,
        state: ChildState::Starting,
        detail: String::new(),
        restarts: 0,
        crashes: VecDeque::new(),
        backoff: BACKOFF_START,
        restart_at: Some(now),
        started_at: now,
        last_health: now,
        last_ok: now,
        logged_at_start: 0,
        control: None,
        refused_switch: None,
    };
    let server_args = server_args(plan);
    let mut governor_args = vec![OsString::from("--data-dir"), plan.data_dir.clone().into_os_string()];
    if let Some(p) = &plan.llama_server {
        governor_args.push(OsString::from("--llama-server"));
        governor_args.push(p.clone().into_os_string());
    }
    // Egress re-checks grants in the store (read-only) and keeps arti's
    // state and cache under the data directory.
    // Fetched bodies wait in `<data>/scratch/egress` (SPEC C3), measured by
    // the governor with the rest of the scratch directory.
    let mut egress_args = vec![
        OsString::from("--data-dir"),
        plan.data_dir.clone().into_os_string(),
        OsString::from("--max-body-mib"),
        OsString::from(plan.max_body_mib.to_string()),
    ];
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
    let statuses: Arc<Mutex<Vec<ChildStatus>>> = Arc::new(Mutex::new(slots.iter().map(|s| s.status(book)).collect()));
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
                    code: FailureCode::InvalidInput,
                    message: "the supervisor answers status only".into(),
                }),
            }
        }
    }));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut on_ready = Some(on_ready);
    let mut isolation = Isolation::Untried;
    let mut ticker = tokio::time::interval(TICK);
    let mut summaries = tokio::time::interval_at(tokio::time::Instant::now() + SUMMARY_PERIOD, SUMMARY_PERIOD);
    let outcome = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(()),
            _ = term.recv() => break Ok(()),
            _ = summaries.tick() => {
                book.summarise();
                continue;
            }
            _ = ticker.tick() => {}
        }
        if let Err(e) = tick(&mut slots, dir, plan, secret, listener.as_raw_fd(), &mut isolation, book).await {
            break Err(e);
        }
        *statuses.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            slots.iter().map(|s| s.status(book)).collect();
        // Ready: the server healthy, every other child healthy or given up on
        // (a broken governor must not hide a working UI).
        let settled = slots
            .iter()
            .all(|s| s.state == ChildState::Healthy || (s.role != Role::Server && s.state == ChildState::Failed));
        if on_ready.is_some() && settled {
            if let Some(f) = on_ready.take() {
                // What the caller prints goes on lines of its own, not after
                // the status line (drawn again at the next health check).
                book.status(None);
                f();
            }
        }
    };
    book.status(None);
    stop_all(&mut slots, book).await;
    status_task.abort();
    // What was logged since the last summary, before the terminal is given back.
    book.summarise_final();
    outcome
}

/// Counts a crash (an exit, or a failure to start): schedules the restart
/// after the current backoff, or gives up after [`MAX_CRASHES`] within
/// [`CRASH_WINDOW`] — which ends the supervisor when it is the server.
fn record_crash(s: &mut Slot, now: Instant, what: &str, book: &LogBook) -> Result<(), Failure> {
    s.crashes.push_back(now);
    while s.crashes.front().is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW) {
        s.crashes.pop_front();
    }
    if s.crashes.len() >= MAX_CRASHES {
        s.state = ChildState::Failed;
        s.restart_at = None;
        s.detail = format!(
            "exited {} times within {} s (last: {what}); gave up restarting it",
            s.crashes.len(),
            CRASH_WINDOW.as_secs()
        );
        book.event(&format!("labfy: {} {}", role_name(s.role), s.detail));
        match s.role {
            Role::Server => {
                return Err(Failure::new(ErrorKind::Unavailable, format!("the workspace server {}", s.detail)));
            }
            // Never run on without egress (SPEC K3): the appliance stops
            // with a failure, which its service manager restarts whole.
            Role::Egress => {
                return Err(Failure::new(
                    ErrorKind::Unavailable,
                    format!("egress {}; without it no research can run, so labfy stops", s.detail),
                ));
            }
            // A broken governor must not take a working UI with it: it is
            // shown failed, and model runs and campaigns are refused.
            Role::Governor => return Ok(()),
        }
    }
    s.state = ChildState::Restarting;
    s.detail = format!("{what}; restarting in {} ms", s.backoff.as_millis());
    book.event(&format!("labfy: {} {}", role_name(s.role), s.detail));
    s.restart_at = Some(now + s.backoff);
    s.backoff = (s.backoff * 2).min(BACKOFF_MAX);
    Ok(())
}

/// One round of supervision: reap exits, restart what is due, check health.
async fn tick(
    slots: &mut [Slot],
    dir: &Path,
    plan: &mut Plan,
    secret: &Secret,
    listener: RawFd,
    isolation: &mut Isolation,
    book: &Arc<LogBook>,
) -> Result<(), Failure> {
    let now = Instant::now();
    // The host launcher cannot be started again once the supervisor has
    // left the host's network: without it egress can never come back, so
    // the appliance stops with a failure its service manager restarts
    // whole (SPEC K3), rather than run on without research.
    if let Some(why) = plan.host_launcher.as_ref().and_then(|l| l.gone()) {
        book.event(&format!("labfy: {why}; egress cannot be started again in the host's network"));
        return Err(Failure::new(
            ErrorKind::Unavailable,
            format!("{why}: egress cannot be started again in the host's network, so labfy stops"),
        ));
    }
    // Children that answered their first health check this round.
    let mut newly_healthy: Vec<Role> = Vec::new();
    // Whether the server was (re)started this round.
    let mut server_spawned = false;
    for s in slots.iter_mut() {
        // A child that exited on its own is a crash.
        if let Some(child) = s.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                s.child = None;
                s.control = None;
                let logged = book.warnings(s.role);
                let why = match logged.last {
                    Some(last) if logged.total > s.logged_at_start => format!("exited ({status}; last logged: {last})"),
                    _ => format!("exited ({status})"),
                };
                record_crash(s, now, &why, book)?;
            }
        }
        // Start (or restart) what is due.
        if s.child.is_none() && s.restart_at.is_some_and(|t| now >= t) {
            s.restart_at = None;
            let spawned = match (s.role, &plan.host_launcher) {
                (Role::Server, _) => spawn_server(s, dir, plan, listener, isolation, book)?,
                (Role::Egress, Some(launcher)) => spawn_in_host_network(s, dir, launcher),
                _ => spawn(s, dir, None, book),
            };
            match spawned {
                Ok(child) => {
                    if s.state == ChildState::Restarting {
                        s.restarts += 1;
                    }
                    s.child = Some(child);
                    server_spawned |= s.role == Role::Server;
                    s.state = ChildState::Starting;
                    s.started_at = now;
                    s.last_ok = now;
                    s.logged_at_start = book.warnings(s.role).total;
                    s.last_health = now - HEALTH_PERIOD;
                }
                Err(e) => record_crash(s, now, &format!("cannot start {}: {e}", s.program.display()), book)?,
            }
        }
        // Health, once a period (more often while starting).
        let period = if s.state == ChildState::Starting { TICK } else { HEALTH_PERIOD };
        if s.child.is_some() && now.duration_since(s.last_health) >= period {
            s.last_health = now;
            match health(s, dir, secret).await {
                Ok((ready, detail, wish)) => {
                    if s.role == Role::Server {
                        if let Some(wanted) = wish {
                            if switch_workspace(s, plan, wanted, isolation, book).await {
                                continue;
                            }
                        }
                    }
                    if s.state == ChildState::Starting {
                        newly_healthy.push(s.role);
                    }
                    s.last_ok = now;
                    let detail = if ready { detail } else { format!("not ready: {detail}") };
                    // One terminal line per change of state (SPEC U8), and
                    // per change of readiness (Tor bootstrapped, say).
                    let was_ready = !s.detail.starts_with("not ready");
                    if s.state != ChildState::Healthy || (s.detail.is_empty() || was_ready) != ready {
                        let pid =
                            s.child.as_ref().and_then(Proc::id).map_or_else(String::new, |p| format!(" (pid {p})"));
                        let state = if ready { "ready" } else { "running" };
                        book.event(&format!("labfy: {} {state}{pid}: {detail}", role_name(s.role)));
                    }
                    // Tor's bootstrap, on a terminal, one line redrawn in
                    // place while it goes on (SPEC U8).
                    if s.role == Role::Egress {
                        let line = (!ready).then(|| format!("labfy: egress: {detail}"));
                        book.status(line.as_deref());
                    }
                    s.state = ChildState::Healthy;
                    s.detail = detail;
                    // A healthy run resets the backoff.
                    if now.duration_since(s.started_at) > CRASH_WINDOW / 4 {
                        s.backoff = BACKOFF_START;
                    }
                }
                Err(e) => {
                    if s.state != ChildState::Starting {
                        if s.state != ChildState::Unhealthy {
                            book.event(&format!("labfy: {} unhealthy: {e}", role_name(s.role)));
                        }
                        s.state = ChildState::Unhealthy;
                        s.detail = e.clone();
                    }
                    // Silent too long: killed, then reaped and restarted as a crash.
                    if now.duration_since(s.last_ok) > START_TIMEOUT {
                        s.state = ChildState::Unhealthy;
                        s.detail = format!("no health answer for {} s ({e}); killing it", START_TIMEOUT.as_secs());
                        book.event(&format!("labfy: {} {}", role_name(s.role), s.detail));
                        if let Some(child) = s.child.as_mut() {
                            let _ = child.start_kill();
                        }
                    }
                }
            }
        }
    }
    // The governor and egress accept only the current server's pid: tell the
    // ones that just started, or all of them as soon as the server is
    // spawned — before it is healthy, since a server resumes its unfinished
    // campaigns at once and asks the governor to admit them (SPEC F4) — and
    // again once it is healthy.
    let server_pid = slots
        .iter()
        .find(|s| s.role == Role::Server && matches!(s.state, ChildState::Starting | ChildState::Healthy))
        .and_then(|s| s.child.as_ref())
        .and_then(Proc::id);
    if let Some(pid) = server_pid {
        let server_new = server_spawned || newly_healthy.contains(&Role::Server);
        for s in slots.iter_mut().filter(|s| s.role != Role::Server && s.state == ChildState::Healthy) {
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
async fn stop_all(slots: &mut [Slot], book: &LogBook) {
    slots.sort_by_key(|s| if s.role == Role::Server { 0 } else { 1 });
    for s in slots.iter_mut() {
        stop_child(s, book).await;
    }
}

/// Asks one child to stop over its control channel (else SIGTERM), then
/// SIGKILLs it after [`STOP_GRACE`].
async fn stop_child(s: &mut Slot, book: &LogBook) {
    let Some(mut child) = s.child.take() else { return };
    s.state = ChildState::Stopping;
    if tell(s, ControlRequest::Shutdown {}).await.is_err() {
        child.terminate();
    }
    if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_err() {
        book.event(&format!("labfy: {} did not stop within {} s; killing it", role_name(s.role), STOP_GRACE.as_secs()));
        let _ = child.kill().await;
    }
    s.control = None;
    s.state = ChildState::Stopped;
}

/// The workspace server's arguments for the plan's workspace.
fn server_args(plan: &Plan) -> Vec<OsString> {
    vec![
        OsString::from("--data-dir"),
        plan.data_dir.clone().into_os_string(),
        OsString::from("--workspace"),
        OsString::from(&plan.workspace),
    ]
}

/// Whether `wanted` may be served now (SPEC C1, P2): ready and in use in the
/// store, and a REAL one only by a confined server. Answers whether it is
/// REAL and its name. The server asked, but the server is the process that
/// parses hostile bytes: its wish is checked here, never trusted.
fn check_switch(data_dir: &Path, wanted: uuid::Uuid, isolation: &Isolation) -> Result<(bool, String), String> {
    let store = labfy_store::ReadOnlyStore::open(data_dir).map_err(|e| e.to_string())?;
    let w = store.reads().workspace(wanted).map_err(|e| e.to_string())?;
    labfy_store::check_openable(&w).map_err(|e| e.to_string())?;
    let real = w.class == labfy_store::WorkspaceClass::Real;
    if real && *isolation != Isolation::Confined {
        return Err(format!("{} is a REAL workspace and the server cannot be confined here (SPEC P2, T1)", w.id));
    }
    Ok((real, w.name))
}

/// Acts on the server's wish to open `wanted` (SPEC C1): when it is another
/// workspace and the check passes, stops the server and schedules its
/// start on `wanted` now (not a crash). Answers whether it did.
async fn switch_workspace(
    s: &mut Slot,
    plan: &mut Plan,
    wanted: uuid::Uuid,
    isolation: &Isolation,
    book: &LogBook,
) -> bool {
    let target = labfy_core::ObjectRef::new(labfy_core::RefKind::Workspace, wanted).to_string();
    if target == plan.workspace {
        return false;
    }
    let (real, name) = match check_switch(&plan.data_dir, wanted, isolation) {
        Ok(ok) => ok,
        Err(reason) => {
            if s.refused_switch != Some(wanted) {
                book.event(&format!("labfy: opening {target} refused: {reason}"));
                s.refused_switch = Some(wanted);
            }
            return false;
        }
    };
    book.event(&format!("labfy: opening {name} ({target}) as the analyst asked: restarting the workspace server"));
    stop_child(s, book).await;
    labfy_core::crash::point(labfy_core::crash::WORKSPACE_SWITCHING);
    plan.workspace = target;
    plan.real_workspace = real;
    s.args = server_args(plan);
    s.refused_switch = None;
    s.state = ChildState::Switching; // not a crash: not counted as a restart
    s.detail = format!("opening {name}");
    s.restart_at = Some(Instant::now());
    true
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The supervisor's own check of the server's wish (SPEC C1, P2): the
    /// server may be compromised, so an unknown, archived or (unconfined)
    /// REAL workspace is refused here whatever the server said.
    #[test]
    fn a_workspace_wish_is_checked_against_the_store_and_the_confinement() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = labfy_store::Store::open(dir.path()).unwrap();
        let (real, _) = store.create_real_workspace("Dossier Durand", "test").unwrap();
        let (kept, _) = store.create_real_workspace("Dossier rangé", "test").unwrap();
        store.archive_workspace(kept.id(), true, "test").unwrap();
        drop(store);
        let confined = Isolation::Confined;
        let unconfined = Isolation::Unavailable("no user namespaces".into());

        assert_eq!(check_switch(dir.path(), real.id(), &confined).unwrap(), (true, "Dossier Durand".to_owned()));
        let e = check_switch(dir.path(), real.id(), &unconfined).unwrap_err();
        assert!(e.contains("REAL") && e.contains("P2"), "{e}");
        let e = check_switch(dir.path(), kept.id(), &confined).unwrap_err();
        assert!(e.contains("archived"), "{e}");
        let e = check_switch(dir.path(), uuid::Uuid::new_v4(), &confined).unwrap_err();
        assert!(e.contains("not found") || e.contains("workspace:"), "{e}");
    }
}
