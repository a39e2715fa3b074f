//! The `LocalModelSupervisor` (SPEC M11, P5, Q2, Q3): the governor starts
//! **its own** llama-server, and only after admitting it.
//!
//! A start, top to bottom:
//!
//! 1. The request is checked: an absolute path to a regular file (not a
//!    directory, not a device), a 64-hex-digit SHA-256, bounded context and
//!    GPU layers; the configured llama-server is a regular executable file.
//! 2. The file is opened **once**. Its SHA-256 is computed from that
//!    descriptor and compared with the configured value; its GGUF header is
//!    read from it; and llama-server loads that very descriptor
//!    (`-m /proc/self/fd/3`), so the file checked is the file run.
//! 3. The GGUF header sizes the run ([`crate::gguf`]); the ledger admits it
//!    or the start is refused with the ledger's reason. llama-server is
//!    given the flags that hold it to that size (`--cache-ram`,
//!    `--ctx-checkpoints`: by default its prompt cache grows to 8 GiB).
//! 4. A cgroup is created with a memory ceiling above the estimate, no swap,
//!    a lower CPU weight than the desktop and a pids limit.
//! 5. The model's socket directory (`labfy_ipc::daemon::model_dir`, in the
//!    runtime directory) is made ready: created, a stale socket of a
//!    previous run removed.
//! 6. The child is started through `labfy-sys`'s [`Jail`], the sequence the
//!    workspace server also goes through (SPEC T1): it dies with the
//!    governor; joins the cgroup before it runs anything; gets a network
//!    namespace of its own with nothing up (no network at all: it listens
//!    on a Unix socket, `--host /run/model/model.sock`), mount, PID, IPC,
//!    UTS and cgroup namespaces of its own and a minimal read-only root
//!    (the system's libraries, its program's directory, `/dev/null` and
//!    friends, a private `/proc` and `/tmp`, the socket directory as
//!    `/run/model`; the GPU's device nodes and `/sys` when layers are
//!    offloaded); the verified file as fd 3; no core dumps; Landlock (no
//!    file outside its root but fd 3, written only in `/run/model` and
//!    `/tmp`); no capability; a seccomp allow-list (Unix sockets only).
//!    Its identity: as root, the unprivileged uid [`MODEL_UID`]; as the
//!    service user (SPEC D1), a user namespace of its own that maps that
//!    user to itself — no capability over anything outside it, which is
//!    what an unprivileged governor can give. llama-server parses prompts
//!    built from hostile pages: if one took it over, it could reach nothing
//!    the server cannot.
//! 7. `/health` is polled on the socket until it answers 200 (503 while the
//!    model loads). A child that exits first is reported with the tail of
//!    its log.
//!
//! The workspace server reaches the socket through its read-only view of
//! the runtime directory (its agent's endpoint `governed`): no process
//! enters another's network namespace, so none of this needs root, and the
//! model outlives a restart of the server. While it runs, its cgroup's
//! memory is measured into the ledger. If it dies while its reservation
//! holds, it is restarted (with backoff, a bounded number of times) —
//! except after an OOM kill, which releases the reservation and is
//! reported. A stop is SIGTERM, then SIGKILL after a grace period, then the
//! cgroup is removed and the reservation released. The governor never
//! signals a process it did not start, and never connects to port 8080.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use labfy_ipc::messages::governor::{
    Amounts, ModelEstimate, ModelSpec, ModelState, ModelStatus, Refusal, ReservationKind,
};
use labfy_sys::ConfinedChild;
use tokio::sync::{Notify, watch};

use crate::cgroup::{self, Confinement, ExitCause, Limits, Usage};
use crate::gguf;
use crate::ledger::{Ask, Ledger, human};

mod checks;
mod gpu;
mod launch;

pub use checks::{check_program, check_spec, open_model, sha256_of};
use gpu::{Identity, check_gpu_access, gpu_devices};
use launch::{Launch, LogTail, health_status, prepare_socket_dir, spawn, terminate};

/// Smallest context accepted.
pub const MIN_CTX: u32 = 256;
/// Largest context accepted (llama.cpp's models top out around here).
pub const MAX_CTX: u32 = 262_144;
/// Most GPU layers accepted (more than any model has).
pub const MAX_GPU_LAYERS: u32 = 1024;
/// Longest model path, bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Priority of the model's reservation (campaigns default lower: the
/// analyst's conversation outlives one campaign).
pub const MODEL_PRIORITY: u8 = 100;
/// The cgroup's memory ceiling: the reservation times this ratio…
pub const LIMIT_RATIO: (u64, u64) = (3, 2);
/// …plus this margin.
pub const LIMIT_MARGIN: u64 = 256 * 1024 * 1024;
/// Processes and threads llama-server may hold.
pub const PIDS_MAX: u64 = 512;
/// CPU weight (v2 units; 100 is the default): the desktop and the server come first.
pub const CPU_WEIGHT: u64 = 50;
/// Log lines of llama-server kept for reports.
pub const LOG_TAIL_LINES: usize = 40;
/// Longest log line kept, bytes.
pub const LOG_LINE_BYTES: usize = 512;
/// Restarts allowed within [`RESTART_WINDOW`] before giving up.
pub const MAX_RESTARTS: usize = 5;
/// Window of [`MAX_RESTARTS`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(600);
/// First restart delay (doubled each time, up to 30 s).
pub const RESTART_BACKOFF: Duration = Duration::from_secs(1);
/// Grace between SIGTERM and SIGKILL at a stop.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// Period of health and usage checks of a running model.
pub const WATCH_PERIOD: Duration = Duration::from_millis(1000);
/// Period of `/health` polls while loading: a connect on a Unix socket and
/// a 503, cheap; its half is what a start waits on average past ready
/// (200 ms measured 100–340 ms of overhead, 25 ms 123 ms; issue 18).
pub const HEALTH_POLL: Duration = Duration::from_millis(25);
/// Deadline of one `/health` request.
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// Hashing reads this much at a time.
const HASH_CHUNK: usize = 1024 * 1024;
/// The uid and gid llama-server runs as: the kernel's overflow id, `nobody`
/// and `nogroup` on Debian — it owns no file, so the model reads only what
/// any user may, plus the GPU devices through their group.
pub const MODEL_UID: u32 = 65_534;
/// Size of llama-server's private `/tmp`.
pub const MODEL_TMP_BYTES: u64 = 16 << 20;
/// Most GPU device nodes given to llama-server.
const MAX_GPU_DEVICES: usize = 16;
/// The longest socket path a `sockaddr_un` holds.
const MAX_SOCKET_PATH: usize = 107;
/// Where the socket directory is inside llama-server's root.
const SOCKET_DIR_INSIDE: &str = "/run/model";
/// The socket's name, in that directory and on the host.
const SOCKET_NAME: &str = "model.sock";

/// How the supervisor runs llama-server (from the governor's configuration).
#[derive(Debug, Clone)]
pub struct ModelSettings {
    /// The llama-server program; `None`: model starts are refused with that reason.
    pub llama_server: Option<PathBuf>,
    /// Context size when the request names none.
    pub default_ctx: u32,
    /// Threads llama-server uses.
    pub threads: u32,
    /// Longest wait for `/health` 200 after the process starts.
    pub start_timeout: Duration,
    /// The directory of the model's socket
    /// (`labfy_ipc::daemon::model_dir` of the runtime directory): the
    /// workspace server's agent connects to `model.sock` there.
    pub socket_dir: PathBuf,
    /// A GPU runtime's directories outside the system's, given read-only
    /// to a llama-server that offloads layers (those that exist).
    pub gpu_runtime_dirs: Vec<PathBuf>,
}

impl ModelSettings {
    /// The model's socket on the host (what the server connects to).
    pub fn socket(&self) -> PathBuf {
        self.socket_dir.join(SOCKET_NAME)
    }
}

/// Why a start was refused.
#[derive(Debug)]
pub enum StartError {
    /// Bad request, file, hash, header or configuration: a sentence.
    Invalid(String),
    /// Another start or run is in progress.
    Busy(String),
    /// The ledger refused (reason and holders).
    Refused(Refusal),
    /// Cannot be done here (no cgroup, no program, no socket directory).
    Unavailable(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(m) | Self::Busy(m) | Self::Unavailable(m) => f.write_str(m),
            Self::Refused(r) => write!(f, "{} (blocked by: {})", r.reason, r.blocked_by.join(", ")),
        }
    }
}

/// One model at a time: its status, and the handle of its life task.
#[derive(Default)]
struct Slot {
    status: Option<ModelStatus>,
    run: Option<RunHandle>,
}

struct RunHandle {
    stop: Arc<Notify>,
    stop_reason: Arc<Mutex<Option<String>>>,
    done: watch::Receiver<bool>,
}

/// The local model supervisor (one llama-server at a time).
pub struct LocalModelSupervisor {
    settings: ModelSettings,
    ledger: Arc<Ledger>,
    slot: Mutex<Slot>,
    changed: watch::Sender<u64>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The estimate as the IPC shows it.
fn estimate_view(h: &gguf::GgufHeader, e: &gguf::Estimate) -> ModelEstimate {
    ModelEstimate {
        weights: e.weights,
        kv_cache: e.kv_cache,
        overhead: e.overhead,
        reserved: Amounts { vram: e.vram, ram: e.ram, swap: 0, scratch: 0 },
        architecture: h.architecture.clone(),
        layers: h.block_count,
        context: e.context,
    }
}

/// How a run ended.
enum Ended {
    /// Asked to stop (the reason).
    Stopped(String),
    /// The process exited after it had been ready (its cause, and the log tail).
    Exited(ExitCause, String),
    /// The process exited before it was ever ready: not restarted (a bad
    /// file, a bad program, a CPU it cannot run on do not improve).
    NeverReady(ExitCause, String),
    /// It could not be started at all.
    Failed(String),
}

impl LocalModelSupervisor {
    /// A supervisor with no model.
    pub fn new(settings: ModelSettings, ledger: Arc<Ledger>) -> Arc<Self> {
        let (changed, _) = watch::channel(0);
        Arc::new(Self { settings, ledger, slot: Mutex::new(Slot::default()), changed })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The model's status, if one was asked for.
    pub fn status(&self) -> Option<ModelStatus> {
        self.lock().status.clone()
    }

    fn update(&self, f: impl FnOnce(&mut ModelStatus)) {
        let mut g = self.lock();
        if let Some(s) = g.status.as_mut() {
            f(s);
        }
        drop(g);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Checks, admits and starts the model; returns once it is ready, or
    /// failed, or `wait` has passed (then it goes on loading).
    pub async fn start(self: &Arc<Self>, spec: ModelSpec, wait: Duration) -> Result<ModelStatus, StartError> {
        let (path, ctx) = check_spec(&spec, &self.settings)?;
        let as_root = cgroup::is_root();
        let program = check_program(self.settings.llama_server.as_deref(), as_root)?;
        {
            let g = self.lock();
            if let Some(s) = &g.status {
                if g.run.is_some() {
                    return Err(StartError::Busy(format!(
                        "a model is already {} ({}); stop it first",
                        s.state, s.spec.gguf
                    )));
                }
            }
        }
        // Where the server will find it: a socket address holds 107 bytes.
        let socket = self.settings.socket();
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(StartError::Unavailable(format!(
                "the model's socket {} is longer than a socket address holds ({MAX_SOCKET_PATH} bytes): use a \
                 shorter runtime directory",
                socket.display()
            )));
        }
        cgroup::probe().map_err(|e| StartError::Unavailable(format!("cannot confine the model: {e}")))?;
        // Offloaded layers need the GPU's nodes, which the service user opens
        // through its groups (render, video): said before anything starts.
        if spec.gpu_layers > 0 && !as_root {
            check_gpu_access(&gpu_devices(), &Identity::current())?;
        }
        // One file descriptor from here on: hashed, parsed, then loaded.
        let file = open_model(&path)?;
        let hashed = {
            let f = file.try_clone().map_err(|e| StartError::Invalid(e.to_string()))?;
            tokio::task::spawn_blocking(move || sha256_of(&f))
                .await
                .map_err(|e| StartError::Invalid(e.to_string()))?
                .map_err(|e| StartError::Invalid(format!("model file cannot be read: {e}")))?
        };
        if hashed != spec.sha256 {
            return Err(StartError::Invalid(format!(
                "SHA-256 mismatch for {}: the file is {hashed}, the configuration says {}",
                path.display(),
                spec.sha256
            )));
        }
        let fd_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let header = gguf::read_header(&fd_path)
            .map_err(|e| StartError::Invalid(format!("{} is not a usable GGUF file: {e}", path.display())))?;
        let estimate = header.estimate(ctx, spec.gpu_layers);
        let view = estimate_view(&header, &estimate);
        let name = path.file_name().map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
        let ask = Ask {
            owner: format!("model:{name}"),
            kind: ReservationKind::Model,
            amounts: view.reserved,
            // Not counted in cores: a model's threads are llama-server's
            // own setting (`--model-threads`), and on a GPU it waits on it.
            cores: 0,
            priority: MODEL_PRIORITY,
            lease_ms: None,
        };
        // Admission and the slot under one lock: two starts cannot both pass.
        let reservation = {
            let mut g = self.lock();
            if g.run.is_some() {
                return Err(StartError::Busy("another model start won the race; stop it first".into()));
            }
            let r = self.ledger.admit(ask, now_ms()).map_err(StartError::Refused)?;
            let (done_tx, done_rx) = watch::channel(false);
            let stop = Arc::new(Notify::new());
            let stop_reason = Arc::new(Mutex::new(None));
            g.status = Some(ModelStatus {
                state: ModelState::Starting,
                spec: spec.clone(),
                endpoint: None,
                pid: None,
                reservation: Some(r.id.clone()),
                estimate: view.clone(),
                peak_memory: None,
                gpu_memory: Vec::new(),
                restarts: 0,
                detail: format!(
                    "admitted: {} reserved ({} weights, {} KV cache, {} overhead)",
                    human(view.reserved.ram + view.reserved.vram),
                    human(view.weights),
                    human(view.kv_cache),
                    human(view.overhead)
                ),
            });
            g.run = Some(RunHandle { stop: stop.clone(), stop_reason: stop_reason.clone(), done: done_rx });
            let launch = Launch {
                program,
                model_fd: file.as_raw_fd(),
                ctx,
                gpu_layers: spec.gpu_layers,
                threads: self.settings.threads,
                bounds: estimate.server_args(),
                gpu_runtime_dirs: self.settings.gpu_runtime_dirs.clone(),
            };
            let me = self.clone();
            let reservation = r.id.clone();
            tokio::spawn(async move {
                me.life(launch, file, reservation, as_root, stop, stop_reason).await;
                let _ = done_tx.send(true);
            });
            r.id
        };
        tracing::info!(reservation = %reservation, "model admitted; starting llama-server");
        // Wait for ready or failed, bounded.
        let mut rx = self.changed.subscribe();
        let deadline = Instant::now() + wait;
        loop {
            if let Some(s) = self.status() {
                if s.state.is_settled() {
                    return Ok(s);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, rx.changed()).await.is_err() {
                return self.status().ok_or_else(|| StartError::Unavailable("the model vanished".into()));
            }
        }
    }

    /// Stops the model (SIGTERM, then SIGKILL), removes its cgroup and
    /// releases its reservation. Returns false when none runs.
    pub async fn stop(&self, why: &str) -> bool {
        let handle = {
            let g = self.lock();
            g.run.as_ref().map(|r| (r.stop.clone(), r.stop_reason.clone(), r.done.clone()))
        };
        let Some((stop, reason, mut done)) = handle else { return false };
        *reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why.to_owned());
        stop.notify_one();
        let _ = tokio::time::timeout(STOP_GRACE + Duration::from_secs(5), done.wait_for(|d| *d)).await;
        true
    }

    /// Whether the model's reservation is this one (pressure stops).
    pub fn holds(&self, reservation: &str) -> bool {
        self.lock().status.as_ref().and_then(|s| s.reservation.as_deref()) == Some(reservation)
            && self.lock().run.is_some()
    }

    /// The whole life of one admitted model: spawn, watch, restart, stop.
    async fn life(
        self: Arc<Self>,
        launch: Launch,
        file: std::fs::File,
        reservation: String,
        as_root: bool,
        stop: Arc<Notify>,
        stop_reason: Arc<Mutex<Option<String>>>,
    ) {
        let mut restarts: VecDeque<Instant> = VecDeque::new();
        let mut backoff = RESTART_BACKOFF;
        let final_state: (ModelState, String) = loop {
            let ended = self.run_once(&launch, &reservation, as_root, &stop, &stop_reason).await;
            match ended {
                Ended::Stopped(why) => break (ModelState::Stopped, format!("stopped: {why}")),
                Ended::NeverReady(cause, tail) => {
                    break (
                        ModelState::Failed,
                        format!("llama-server exited before it was ready: {cause}. Log: {tail}"),
                    );
                }
                Ended::Failed(why) => break (ModelState::Failed, why),
                Ended::Exited(ExitCause::OomKilled, tail) => {
                    let limit = self.status().map(|s| s.estimate.reserved.ram).unwrap_or(0);
                    break (
                        ModelState::Failed,
                        format!(
                            "killed by the kernel: out of memory in its cgroup (reservation {}); not restarted. \
                             Log: {tail}",
                            human(limit)
                        ),
                    );
                }
                Ended::Exited(cause, tail) => {
                    if self.ledger.reservation(&reservation).is_none() {
                        break (ModelState::Stopped, format!("{cause}; its reservation is gone, so it stays stopped"));
                    }
                    let now = Instant::now();
                    restarts.push_back(now);
                    while restarts.front().is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW) {
                        restarts.pop_front();
                    }
                    if restarts.len() > MAX_RESTARTS {
                        break (
                            ModelState::Failed,
                            format!("{cause}; it died {} times in {} s: gave up. Log: {tail}", restarts.len(), 600),
                        );
                    }
                    self.update(|s| {
                        s.state = ModelState::Restarting;
                        s.restarts += 1;
                        s.pid = None;
                        s.endpoint = None;
                        s.detail = format!("{cause}; restarting in {} s. Log: {tail}", backoff.as_secs());
                    });
                    tracing::warn!(%cause, "llama-server died; restarting");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.notified() => {
                            let why = stop_reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
                                .clone().unwrap_or_default();
                            break (ModelState::Stopped, format!("stopped while restarting: {why}"));
                        }
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        };
        drop(file);
        let (state, detail) = final_state;
        if self.ledger.release(&reservation, &detail, now_ms()) {
            tracing::info!(%reservation, "model reservation released");
        }
        let mut g = self.lock();
        if let Some(s) = g.status.as_mut() {
            s.state = state;
            s.detail = detail;
            s.pid = None;
            s.endpoint = None;
            s.reservation = None;
        }
        g.run = None;
        drop(g);
        self.changed.send_modify(|n| *n += 1);
    }

    /// One process: confine, spawn, wait until ready, watch until it ends.
    async fn run_once(
        &self,
        launch: &Launch,
        reservation: &str,
        as_root: bool,
        stop: &Notify,
        stop_reason: &Mutex<Option<String>>,
    ) -> Ended {
        let reserved = self.ledger.reservation(reservation).map(|r| r.reserved).unwrap_or_default();
        let ceiling = (reserved.ram + reserved.vram) / LIMIT_RATIO.1 * LIMIT_RATIO.0 + LIMIT_MARGIN;
        let limits = Limits {
            memory_max: ceiling,
            swap_max: None,
            cpu_quota_percent: None,
            cpu_weight: Some(CPU_WEIGHT),
            pids_max: Some(PIDS_MAX),
        };
        let short = uuid::Uuid::new_v4().simple().to_string();
        let confinement = match Confinement::create(&format!("model-{}", &short[..12]), &limits) {
            Ok(c) => c,
            Err(e) => return Ended::Failed(format!("cannot confine the model: {e}")),
        };
        // Its counters before anything ran: an OOM kill is a SIGKILL with
        // the `oom_kill` counter above this.
        let before = confinement.usage();
        let log = LogTail::default();
        let socket_dir = &self.settings.socket_dir;
        if let Err(e) = prepare_socket_dir(socket_dir, as_root.then_some(MODEL_UID)) {
            let _ = confinement.delete();
            return Ended::Failed(format!("the model's socket directory {}: {e}", socket_dir.display()));
        }
        // `missing`: protections this kernel could not give llama-server, said loudly.
        let (child, missing) = match spawn(launch, socket_dir, as_root, confinement.procs_files(), &log) {
            Ok(spawned) => spawned,
            Err(e) => {
                let _ = confinement.delete();
                return Ended::Failed(format!("cannot start {} confined: {e}", launch.program.display()));
            }
        };
        self.update(|s| {
            s.state = ModelState::Loading;
            s.pid = child.id();
            s.endpoint = None;
            s.detail = format!("llama-server started (pid {}), loading the model", child.id().unwrap_or(0));
        });
        let socket = self.settings.socket();
        let mut child = match self.wait_ready(child, &socket, &before, &log, stop, stop_reason, &confinement).await {
            Ok(child) => child,
            Err(ended) => {
                let _ = confinement.delete();
                return match ended {
                    Ended::Exited(ExitCause::OomKilled, tail) => Ended::Exited(ExitCause::OomKilled, tail),
                    Ended::Exited(cause, tail) => Ended::NeverReady(cause, tail),
                    other => other,
                };
            }
        };
        if launch.gpu_layers > 0 {
            // Its early lines are read on another thread: let them land.
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(said) = log.no_gpu() {
                // Running on the CPU alone, it would hold the GPU memory
                // reserved for nothing and use RAM the ledger never gave it:
                // a start the operator must hear about, not a quiet fallback.
                terminate(&mut child).await;
                let _ = confinement.delete();
                return Ended::Failed(format!(
                    "llama-server found no GPU it could use for the {} layers asked, and would run on the CPU \
                     alone: stopped. It said: {said}",
                    launch.gpu_layers
                ));
            }
        }
        let endpoint = format!("unix:{}", socket.display());
        self.update(|s| {
            s.state = ModelState::Ready;
            s.endpoint = Some(endpoint.clone());
            s.detail =
                format!("ready on {} (no network: a Unix socket the workspace server reaches)", socket.display());
            if !missing.is_empty() {
                s.detail.push_str(&format!("; confinement MISSING: {}", missing.join("; ")));
            }
        });
        tracing::info!(socket = %socket.display(), "llama-server ready");
        // Watch: usage into the ledger, exit, stop.
        let mut tick = tokio::time::interval(WATCH_PERIOD);
        let ended = loop {
            tokio::select! {
                status = child.wait() => {
                    let after = confinement.usage();
                    let cause = match status {
                        Ok(s) => cgroup::exit_cause(s, &before, &after),
                        Err(e) => ExitCause::Signal(-e.raw_os_error().unwrap_or(0)),
                    };
                    break Ended::Exited(cause, format!("{}{}", limit_note(&after), log.last(6)));
                }
                _ = stop.notified() => {
                    let why = stop_reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
                        .unwrap_or_else(|| "asked".into());
                    self.update(|s| { s.state = ModelState::Stopping; s.detail = format!("stopping: {why}"); });
                    terminate(&mut child).await;
                    break Ended::Stopped(why);
                }
                _ = tick.tick() => self.measure(&confinement, reservation, child.id()),
            }
        };
        self.measure(&confinement, reservation, None);
        if let Err(e) = confinement.delete() {
            tracing::warn!(error = %e, "could not remove the model's cgroup");
        }
        ended
    }

    /// Polls `/health` until 200; the child back, or how it ended.
    #[allow(clippy::too_many_arguments)]
    async fn wait_ready(
        &self,
        mut child: ConfinedChild,
        socket: &Path,
        before: &Usage,
        log: &LogTail,
        stop: &Notify,
        stop_reason: &Mutex<Option<String>>,
        confinement: &Confinement,
    ) -> Result<ConfinedChild, Ended> {
        let deadline = Instant::now() + self.settings.start_timeout;
        let mut last = String::from("not answering yet");
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let cause = cgroup::exit_cause(status, before, &confinement.usage());
                // Its last lines are still in the pipes: let the readers drain them.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Err(Ended::Exited(cause, format!("{}{}", limit_note(&confinement.usage()), log.last(6))));
            }
            if Instant::now() >= deadline {
                terminate(&mut child).await;
                return Err(Ended::Failed(format!(
                    "llama-server did not become ready within {} s (last: {last}). Log: {}",
                    self.settings.start_timeout.as_secs(),
                    log.last(6)
                )));
            }
            match health_status(socket).await {
                Ok(200) => return Ok(child),
                Ok(code) => last = format!("/health answered {code}"),
                Err(e) => last = e,
            }
            self.measure(confinement, "", child.id());
            tokio::select! {
                _ = tokio::time::sleep(HEALTH_POLL) => {}
                _ = stop.notified() => {
                    terminate(&mut child).await;
                    let why = stop_reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
                        .unwrap_or_else(|| "asked".into());
                    return Err(Ended::Stopped(why));
                }
            }
        }
    }

    /// The model's memory into the status and the ledger: the larger of its
    /// cgroup's charge and the process's resident set. The cgroup is not
    /// charged for page cache another cgroup faulted in first — the model
    /// file hashed before the start is — while llama-server's resident set
    /// counts the weights it maps; its high-water mark (`VmHWM`) is the peak.
    fn measure(&self, confinement: &Confinement, reservation: &str, pid: Option<u32>) {
        let usage = confinement.usage();
        let (rss, hwm) = pid.map_or((None, None), resident);
        let current = usage.memory_current.max(rss);
        if let (Some(current), false) = (current, reservation.is_empty()) {
            self.ledger.record_usage(reservation, Amounts { ram: current, ..Amounts::default() });
        }
        if let Some(peak) = usage.memory_peak.max(usage.memory_current).max(hwm) {
            self.update(|s| s.peak_memory = Some(s.peak_memory.unwrap_or(0).max(peak)));
        }
        // What it holds on the GPU (AMD: the driver's fdinfo; issue 45, L4).
        if let Some(Ok(gpu)) = pid.map(|p| crate::probe::fdinfo::of_process(Path::new("/proc"), p)) {
            self.update(|s| s.gpu_memory = gpu);
        }
    }
}

/// A limit the cgroup hit, for the report of an exit (SPEC Q3).
fn limit_note(u: &Usage) -> String {
    match u.pids_limit_hits {
        Some(n) if n > 0 => format!("its pids limit ({PIDS_MAX}) refused {n} fork(s). "),
        _ => String::new(),
    }
}

/// `VmRSS` and `VmHWM` of a process, bytes.
fn resident(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return (None, None) };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::gpu::GpuDevice;
    use super::*;

    fn settings() -> ModelSettings {
        ModelSettings {
            llama_server: None,
            default_ctx: 2048,
            threads: 2,
            start_timeout: Duration::from_secs(5),
            socket_dir: PathBuf::from("/run/labfy/model"),
            gpu_runtime_dirs: Vec::new(),
        }
    }

    fn spec(path: &str) -> ModelSpec {
        ModelSpec { gguf: path.into(), sha256: "a".repeat(64), ctx: None, gpu_layers: 0 }
    }

    #[test]
    fn requests_are_checked_before_anything_is_opened() {
        let s = settings();
        assert_eq!(check_spec(&spec("/m.gguf"), &s).unwrap().1, 2048);
        let bad = |sp: ModelSpec| match check_spec(&sp, &s) {
            Err(StartError::Invalid(m)) => m,
            other => panic!("{:?}", other.map(|_| ())),
        };
        assert!(bad(spec("m.gguf")).contains("not absolute"));
        assert!(bad(spec(&format!("/{}", "x".repeat(MAX_PATH_BYTES)))).contains("longer"));
        assert!(bad(ModelSpec { sha256: "A".repeat(64), ..spec("/m") }).contains("sha256"));
        assert!(bad(ModelSpec { sha256: "a".repeat(63), ..spec("/m") }).contains("sha256"));
        assert!(bad(ModelSpec { ctx: Some(MIN_CTX - 1), ..spec("/m") }).contains("context"));
        assert!(check_spec(&ModelSpec { ctx: Some(MIN_CTX), ..spec("/m") }, &s).is_ok());
        assert!(check_spec(&ModelSpec { ctx: Some(MAX_CTX), ..spec("/m") }, &s).is_ok());
        assert!(bad(ModelSpec { ctx: Some(MAX_CTX + 1), ..spec("/m") }).contains("context"));
        assert!(bad(ModelSpec { gpu_layers: MAX_GPU_LAYERS + 1, ..spec("/m") }).contains("gpu_layers"));
    }

    #[test]
    fn the_program_must_be_an_executable_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(check_program(None, true), Err(StartError::Unavailable(m)) if m.contains("no llama-server")));
        let missing = dir.path().join("nope");
        assert!(
            matches!(check_program(Some(&missing), true), Err(StartError::Unavailable(m)) if m.contains("missing"))
        );
        assert!(
            matches!(check_program(Some(dir.path()), true), Err(StartError::Unavailable(m)) if m.contains("not a regular"))
        );
        let f = dir.path().join("llama-server");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            matches!(check_program(Some(&f), true), Err(StartError::Unavailable(m)) if m.contains("not executable"))
        );
        // Runnable by its owner only: the unprivileged uid could not run it;
        // the service user's own llama-server (it runs as that user) can.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(check_program(Some(&f), false).unwrap(), f);
        assert!(matches!(check_program(Some(&f), true), Err(StartError::Unavailable(m)) if m.contains("chmod o+rx")));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A temporary directory is 0700: its files are out of reach.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(check_program(Some(&f), true), Err(StartError::Unavailable(m)) if m.contains("chmod o+x")));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check_program(Some(&f), true).unwrap(), f);
    }

    #[test]
    fn only_regular_files_are_opened_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(open_model(dir.path()), Err(StartError::Invalid(m)) if m.contains("is a directory")));
        assert!(
            matches!(open_model(Path::new("/dev/null")), Err(StartError::Invalid(m)) if m.contains("not a regular"))
        );
        assert!(matches!(open_model(&dir.path().join("x")), Err(StartError::Invalid(m)) if m.contains("cannot")));
        let f = dir.path().join("m.gguf");
        std::fs::write(&f, b"abc").unwrap();
        let file = open_model(&f).unwrap();
        // SHA-256("abc"), twice: hashing rewinds.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_of(&file).unwrap(), abc);
        assert_eq!(sha256_of(&file).unwrap(), abc);
    }

    #[test]
    fn a_gpu_the_service_user_cannot_open_is_refused_by_name() {
        let node = |path: &str, gid: u32, mode: u32| GpuDevice { path: PathBuf::from(path), uid: 0, gid, mode };
        let labfy = Identity { uid: 997, groups: vec![997, 110] };
        // crw-rw---- root:render (110): open through the group.
        assert!(check_gpu_access(&[node("/dev/kfd", 110, 0o20660)], &labfy).is_ok());
        // One node open is enough (the runtime picks what it may use).
        assert!(
            check_gpu_access(&[node("/dev/kfd", 110, 0o20660), node("/dev/dri/renderD128", 44, 0o20660)], &labfy)
                .is_ok()
        );
        // Not in the group: refused, each node named with its group.
        let outsider = Identity { uid: 998, groups: vec![998] };
        let refused = |devs: &[GpuDevice], who: &Identity| match check_gpu_access(devs, who) {
            Err(StartError::Unavailable(m)) => m,
            other => panic!("{:?}", other.map(|_| ())),
        };
        let m = refused(&[node("/dev/kfd", 110, 0o20660), node("/dev/dri/renderD128", 110, 0o20660)], &outsider);
        assert!(m.contains("/dev/kfd (group 110, mode 660)") && m.contains("renderD128"), "{m}");
        assert!(m.contains("uid 998") && m.contains("render"), "{m}");
        // Readable but not writable by the group: not enough.
        assert!(refused(&[node("/dev/kfd", 110, 0o20640)], &labfy).contains("/dev/kfd"));
        // World read-write (some distributions' render nodes): fine.
        assert!(check_gpu_access(&[node("/dev/dri/renderD128", 44, 0o20666)], &outsider).is_ok());
        // Layers asked of a machine with no GPU node at all.
        assert!(refused(&[], &labfy).contains("--gpu-layers 0"));
    }

    #[test]
    fn the_log_tail_is_bounded() {
        let t = LogTail::default();
        for i in 0..(LOG_TAIL_LINES + 5) {
            t.push(&format!("line {i}"));
        }
        t.push(&"x".repeat(LOG_LINE_BYTES * 2));
        assert_eq!(t.last(LOG_TAIL_LINES + 10).split(" | ").count(), LOG_TAIL_LINES);
        assert!(t.last(1).len() == LOG_LINE_BYTES);
        assert!(t.last(2).starts_with(&format!("line {}", LOG_TAIL_LINES + 4)));
        assert!(!t.last(LOG_TAIL_LINES).contains("line 0 |"));
        assert_eq!(t.no_gpu(), None);
    }

    #[test]
    fn a_server_that_found_no_gpu_is_known_whatever_the_tail_dropped() {
        // The lines llama.cpp prints (seen with a CPU build here; the CUDA
        // line is ggml-cuda's own format).
        let t = LogTail::default();
        t.push("ggml_cuda_init: failed to initialize CUDA: operation not permitted");
        t.push("warning: no usable GPU found, --gpu-layers option will be ignored");
        t.push("warning: one possible reason is that llama.cpp was compiled without GPU support");
        for i in 0..(LOG_TAIL_LINES * 2) {
            t.push(&format!("load_tensors: line {i}"));
        }
        let said = t.no_gpu().unwrap();
        assert!(said.starts_with("ggml_cuda_init: failed to initialize CUDA: operation not permitted | "), "{said}");
        assert!(said.contains("no usable GPU found"), "{said}");
        assert!(!said.contains("compiled without"), "only the marked lines: {said}");
        // A server that offloads says neither.
        let ok = LogTail::default();
        ok.push("load_tensors: offloaded 17/17 layers to GPU");
        assert_eq!(ok.no_gpu(), None);
    }
}
