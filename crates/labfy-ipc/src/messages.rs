//! The messages that cross process boundaries: one pair of enums per
//! boundary (STYLE 8). Adding a variant is a protocol change: bump
//! [`PROTOCOL_VERSION`] when an old peer could not understand it. Variants
//! without data are written `Variant {}`: serde lets unknown fields through on
//! unit variants of internally tagged enums, and every message here is closed.

/// The typed ids the messages carry (`labfy-core`'s): a peer builds them
/// without depending on `labfy-core` itself.
pub use labfy_core::{CampaignRef, GrantRef, JobRef};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Version spoken in `Hello`; peers of another version are refused.
pub const PROTOCOL_VERSION: u16 = 1;

/// Which boundary a connection is for. A socket serves exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundary {
    /// Supervisor ↔ each child: health and shutdown.
    Control,
    /// Workspace server ↔ governor.
    Governor,
    /// Workspace server ↔ egress.
    Egress,
}

/// A request with the id its response will carry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request<T> {
    /// Chosen by the caller; echoed in the response.
    pub id: u64,
    /// The request itself.
    pub body: T,
}

/// A response to the request with the same id.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response<T> {
    /// The request's id.
    pub id: u64,
    /// The answer.
    pub body: T,
}

/// The roles of Labfy's child processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The workspace server.
    Server,
    /// The resource governor.
    Governor,
    /// The egress daemon.
    Egress,
}

/// What a process says about its health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// Who answers.
    pub role: Role,
    /// Its process id.
    pub pid: u32,
    /// Milliseconds since it started.
    pub uptime_ms: u64,
    /// True when it does its job; false while starting or degraded.
    pub ready: bool,
    /// One short human-readable line.
    pub detail: String,
    /// The workspace server only: the workspace the analyst asked to open
    /// (SPEC C1). A wish, not an order: the supervisor checks it against the
    /// store and the server's confinement before restarting the server on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_to: Option<uuid::Uuid>,
}

/// A refusal or failure answered instead of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// Stable code.
    pub code: FailureCode,
    /// Bounded human-readable message.
    pub message: String,
}

impl Failure {
    /// A failure with `code` and `message`.
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

/// Why a daemon answered a failure instead of a result: one closed set for
/// every boundary, so that a caller matches a variant, never a string. On
/// the wire, `SCREAMING_SNAKE_CASE` (`NOT_FOUND`, …); a code outside the set
/// does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailureCode {
    /// The request is malformed or out of bounds.
    InvalidInput,
    /// What it names does not exist (or no longer: a reservation released,
    /// a grant egress never saw).
    NotFound,
    /// The request contradicts the present state.
    Conflict,
    /// The caller may not ask this.
    Forbidden,
    /// A policy refused it (a grant's terms, an admission).
    Refused,
    /// The service cannot serve it now (Tor not bootstrapped, no probe).
    Unavailable,
    /// It did not finish in time.
    Timeout,
    /// Too many requests.
    RateLimited,
    /// The daemon's own store failed (egress's ledger).
    Storage,
    /// A fault of the daemon itself.
    Internal,
}

impl FailureCode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "INVALID_INPUT",
            Self::NotFound => "NOT_FOUND",
            Self::Conflict => "CONFLICT",
            Self::Forbidden => "FORBIDDEN",
            Self::Refused => "REFUSED",
            Self::Unavailable => "UNAVAILABLE",
            Self::Timeout => "TIMEOUT",
            Self::RateLimited => "RATE_LIMITED",
            Self::Storage => "STORAGE",
            Self::Internal => "INTERNAL",
        }
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one child of the supervisor stands (on the wire: `starting`,
/// `healthy`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    /// Spawned, not yet answering its health check.
    Starting,
    /// Answering its health check.
    Healthy,
    /// Running, its health check failing.
    Unhealthy,
    /// Died; started again after a back-off.
    Restarting,
    /// The workspace server being restarted on another workspace (not a crash).
    Switching,
    /// Gave up on it (too many deaths, or it could not start).
    Failed,
    /// Being stopped.
    Stopping,
    /// Stopped.
    Stopped,
}

impl ChildState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
            Self::Restarting => "restarting",
            Self::Switching => "switching",
            Self::Failed => "failed",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for ChildState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// What the supervisor knows of one child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildStatus {
    /// Which child.
    pub role: Role,
    /// Where it stands.
    pub state: ChildState,
    /// Current pid, when running.
    pub pid: Option<u32>,
    /// Restarts since `labfy up` started.
    pub restarts: u32,
    /// Last health detail or failure reason.
    pub detail: String,
    /// How the child is confined, as the supervisor applied it (the
    /// workspace server: SPEC T1), naming any protection this platform
    /// lacks; `None` for children that are not confined.
    #[serde(default)]
    pub confinement: Option<String>,
    /// Warnings and errors it logged since `labfy up` started (SPEC U8:
    /// the lines are in the log file, the count and the last reason here).
    #[serde(default)]
    pub warnings: u64,
    /// The last one's message.
    #[serde(default)]
    pub last_warning: Option<String>,
}

/// Supervisor ↔ child, and `labfy status` ↔ supervisor.
pub mod control {
    use super::*;

    /// What the supervisor asks a child.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum ControlRequest {
        /// Are you alive and ready?
        Health {},
        /// Stop in order: finish or refuse in-flight work, then exit.
        Shutdown {},
        /// The pids allowed on the daemon's service socket (the workspace
        /// server's, after each (re)start). Replaces the previous set.
        SetPeers {
            /// Process ids, as the supervisor sees them.
            pids: Vec<i32>,
        },
        /// Supervisor only: the state of every child (`labfy status`).
        Status {},
    }

    /// What a child answers.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum ControlResponse {
        /// Health report.
        Health(Health),
        /// Shutdown accepted; the process exits shortly.
        ShuttingDown {},
        /// The peer set was replaced.
        PeersSet {},
        /// Supervisor only: every child's state.
        Status {
            /// One entry per child.
            children: Vec<ChildStatus>,
        },
        /// Refused or failed.
        Failed(Failure),
    }
}

/// Workspace server (and the operator's `labfy` commands) ↔ governor
/// (SPEC Q, M11): samples, reservations, admission, the local model.
pub mod governor {
    use super::*;

    /// Bytes of each resource the ledger counts (SPEC Q2).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Amounts {
        /// GPU memory (VRAM; on a UMA APU, GTT counts here too).
        pub vram: u64,
        /// Host RAM.
        pub ram: u64,
        /// Swap.
        pub swap: u64,
        /// Scratch directory space.
        pub scratch: u64,
    }

    /// Memory pressure from `/proc/pressure/memory` (percent of wall time
    /// over the last 10 s with some / all tasks stalled on memory).
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Psi {
        /// `some avg10`.
        pub some_avg10: f64,
        /// `full avg10`.
        pub full_avg10: f64,
    }

    /// Host memory (sysinfo) and pressure.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct HostSample {
        /// Total RAM, bytes.
        pub ram_total: u64,
        /// Used RAM, bytes.
        pub ram_used: u64,
        /// RAM available to new work, bytes.
        pub ram_available: u64,
        /// Total swap, bytes.
        pub swap_total: u64,
        /// Used swap, bytes.
        pub swap_used: u64,
        /// Memory pressure, where the kernel reports it.
        pub psi: Option<Psi>,
    }

    /// The scratch directory: free space, and what Labfy itself holds there.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ScratchSample {
        /// The directory.
        pub path: String,
        /// Size of its file system, bytes.
        pub total: u64,
        /// Free bytes available to Labfy.
        pub free: u64,
        /// Bytes of the files under the directory.
        pub labfy_used: u64,
    }

    /// Which vendor's GPU.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum GpuVendor {
        /// AMD (amdgpu sysfs, ROCm SMI).
        Amd,
        /// NVIDIA (NVML).
        Nvidia,
    }

    /// One GPU. A figure the probe could not read is `None`, never a guess.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct GpuSample {
        /// Stable id within the machine (`card0`, `nvidia0`).
        pub id: String,
        /// Vendor.
        pub vendor: GpuVendor,
        /// PCI address or product name, as the probe found it.
        pub name: String,
        /// True for an APU sharing system memory (small VRAM carve-out, GTT-heavy).
        pub uma: bool,
        /// VRAM total, bytes.
        pub vram_total: Option<u64>,
        /// VRAM used, bytes (most pessimistic of the sources).
        pub vram_used: Option<u64>,
        /// GTT total, bytes (AMD).
        pub gtt_total: Option<u64>,
        /// GTT used, bytes (AMD).
        pub gtt_used: Option<u64>,
        /// GPU busy, percent.
        pub busy_percent: Option<u8>,
        /// Highest temperature reported, millidegrees Celsius.
        pub temperature_mc: Option<i64>,
        /// Power draw, microwatts.
        pub power_uw: Option<u64>,
        /// Where the figures come from (`amdgpu sysfs`, `amdgpu sysfs + ROCm SMI`, `NVML`).
        pub source: String,
    }

    /// One sampling round of every probe.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Sample {
        /// Unix time of the sample, milliseconds.
        pub at_ms: u64,
        /// RAM, swap, pressure.
        pub host: HostSample,
        /// Scratch space; `None` when it could not be read (see `facts`).
        pub scratch: Option<ScratchSample>,
        /// Every GPU found (none is a fact, not an error).
        pub gpus: Vec<GpuSample>,
        /// Reported facts and degraded states: a missing library, an
        /// unreadable file, two sources that disagree.
        pub facts: Vec<String>,
    }

    /// What a reservation is for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ReservationKind {
        /// A llama-server the governor started.
        Model,
        /// A research campaign.
        Campaign,
        /// A `sandbox.exec` run (SPEC X1).
        Sandbox,
        /// Documents read by parser workers — text, and OCR inside them —
        /// for an import (SPEC A1, I1).
        Reading,
    }

    /// One reservation of the ledger.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Reservation {
        /// `reservation:<uuid>`-like id (`res-<uuid>`).
        pub id: String,
        /// Who holds it (`model:<file name>`, `campaign:<uuid>`).
        pub owner: String,
        /// What it is for.
        pub kind: ReservationKind,
        /// Reserved bytes (the estimate).
        pub reserved: Amounts,
        /// CPU cores it holds (a parser worker or a sandbox run is one;
        /// 0: none counted).
        #[serde(default)]
        pub cores: u32,
        /// Peak measured usage of what runs under it, when measured.
        pub measured_peak: Option<Amounts>,
        /// Higher is more important; the lowest is stopped first under pressure.
        pub priority: u8,
        /// Unix ms when the lease lapses unless renewed; `None`: held while the process lives.
        pub lease_expires_ms: Option<u64>,
        /// Unix ms of admission.
        pub admitted_ms: u64,
    }

    /// What a logged decision was (SPEC Q5, U6): an admission or a refusal,
    /// and the ends of a reservation — never a release shown as a refusal.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum DecisionOutcome {
        /// Admitted: a reservation was made.
        Admitted,
        /// Refused at admission.
        Refused,
        /// Released by its holder (a run or campaign that ended).
        Released,
        /// Its lease lapsed without renewal.
        Lapsed,
        /// Stopped by the governor (pressure, an OOM kill).
        Stopped,
    }

    /// One admission decision, for the log (SPEC Q5).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Decision {
        /// Unix ms.
        pub at_ms: u64,
        /// Who asked.
        pub owner: String,
        /// For what.
        pub kind: ReservationKind,
        /// Asked bytes.
        pub asked: Amounts,
        /// Admitted, refused, or how a reservation ended.
        pub outcome: DecisionOutcome,
        /// One sentence: why.
        pub reason: String,
        /// What holds the resource that was missing (reservation owners,
        /// `pressure`, `usage outside Labfy`).
        pub blocked_by: Vec<String>,
    }

    /// The size of a model run, from its GGUF header (SPEC Q2).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ModelEstimate {
        /// Tensor bytes.
        pub weights: u64,
        /// KV cache for the context asked.
        pub kv_cache: u64,
        /// Compute buffers and runtime, stated.
        pub overhead: u64,
        /// What is reserved, per resource.
        pub reserved: Amounts,
        /// Architecture named in the header.
        pub architecture: String,
        /// Layers (blocks).
        pub layers: u32,
        /// Context length used.
        pub context: u32,
    }

    /// What the operator asks to start (`labfy model start`).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ModelSpec {
        /// Absolute path of the GGUF file.
        pub gguf: String,
        /// Its expected SHA-256, 64 lower-case hex digits.
        pub sha256: String,
        /// Context size; `None`: the governor's default.
        pub ctx: Option<u32>,
        /// Layers offloaded to the GPU; 0 keeps everything in RAM.
        pub gpu_layers: u32,
    }

    /// The local model the governor runs, if any.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ModelStatus {
        /// Where it stands.
        pub state: ModelState,
        /// What was asked.
        pub spec: ModelSpec,
        /// `unix:<runtime>/model/model.sock`, once it answers (the server's
        /// agent endpoint `governed`).
        pub endpoint: Option<String>,
        /// llama-server's pid, while it runs.
        pub pid: Option<u32>,
        /// The ledger's reservation.
        pub reservation: Option<String>,
        /// The estimate admitted.
        pub estimate: ModelEstimate,
        /// Peak memory of its cgroup so far, bytes.
        pub peak_memory: Option<u64>,
        /// Restarts after a death while the reservation held.
        pub restarts: u32,
        /// Last event, one line.
        pub detail: String,
        /// GPU memory its process holds now, per card (AMD: the driver's
        /// fdinfo), beside what the estimate reserved.
        #[serde(default)]
        pub gpu_memory: Vec<GpuMemoryUse>,
    }

    /// GPU memory one process holds on one card.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct GpuMemoryUse {
        /// The card's PCI address.
        pub pdev: String,
        /// VRAM, bytes.
        pub vram: u64,
        /// GTT, bytes.
        pub gtt: u64,
        /// Where the figures come from (`amdgpu fdinfo`).
        pub source: String,
    }

    /// Where the local model stands (on the wire: `starting`, `loading`…).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ModelState {
        /// Admitted; its process being spawned.
        Starting,
        /// Its process runs and loads the model; `/health` not yet 200.
        Loading,
        /// Answering on its socket.
        Ready,
        /// Died while its reservation held; started again after a back-off.
        Restarting,
        /// Being stopped.
        Stopping,
        /// Stopped (asked, or its reservation released); the reservation is gone.
        Stopped,
        /// Could not start, or gave up on it; the reservation is gone.
        Failed,
    }

    impl ModelState {
        /// The wire name.
        pub fn as_str(self) -> &'static str {
            match self {
                Self::Starting => "starting",
                Self::Loading => "loading",
                Self::Ready => "ready",
                Self::Restarting => "restarting",
                Self::Stopping => "stopping",
                Self::Stopped => "stopped",
                Self::Failed => "failed",
            }
        }

        /// Whether a start has come to an end: ready, or nothing runs any more.
        pub fn is_settled(self) -> bool {
            matches!(self, Self::Ready | Self::Stopped | Self::Failed)
        }
    }

    impl std::fmt::Display for ModelState {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.pad(self.as_str())
        }
    }

    /// A campaign asking to run (SPEC Q2).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct CampaignAsk {
        /// `campaign:<uuid>`.
        pub campaign: CampaignRef,
        /// Scratch bytes it may write.
        pub scratch_bytes: u64,
        /// RAM it may hold.
        pub ram_bytes: u64,
        /// Fetches in flight at once.
        pub concurrency: u32,
        /// Priority (0–255; higher is more important).
        pub priority: u8,
    }

    /// Most parser workers one reading may ask for.
    pub const MAX_READING_WORKERS: u32 = 16;

    /// Document reading to admit (SPEC A1, I1): parser workers, each one
    /// CPU core and up to `ram_per_worker` bytes of RAM, for as long as the
    /// asking process holds the reservation (released by it, or when it
    /// dies). OCR runs only inside admitted workers: it is admitted as the
    /// CPU work it is.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ReadingAsk {
        /// The import job that reads (`job:<uuid>`).
        pub job: JobRef,
        /// Workers wanted (1 to [`MAX_READING_WORKERS`]).
        pub workers: u32,
        /// Fewest that will do (1 to `workers`): the governor admits as
        /// many as fit, and refuses below this.
        pub min_workers: u32,
        /// RAM one worker may hold, in bytes.
        pub ram_per_worker: u64,
        /// Priority (0–255; higher is more important).
        pub priority: u8,
    }

    /// Everything the governor knows now (SPEC Q5).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct GovernorState {
        /// The latest sample, once one was taken.
        pub sample: Option<Sample>,
        /// What admission may hand out per resource, after headroom.
        pub admissible: Amounts,
        /// Current reservations.
        pub reservations: Vec<Reservation>,
        /// Latest decisions, oldest first (bounded).
        pub decisions: Vec<Decision>,
        /// Why new admissions are refused now, when they are.
        pub pressure: Option<String>,
        /// The local model, if one was asked for.
        pub model: Option<ModelStatus>,
        /// Sampling period, milliseconds.
        pub sample_period_ms: u64,
        /// The sandbox: its allowed programs, or why it has none (SPEC X1).
        pub sandbox: SandboxStatus,
        /// Where confined runs go, or why none can be (SPEC D1, D2).
        pub confinement: ConfinementStatus,
    }

    /// The governor's cgroup tree as it found it at start (SPEC D2): a
    /// model start or a sandbox run is refused with `detail` when not ready.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ConfinementStatus {
        /// Whether cgroups can be made there with Labfy's controllers.
        pub ready: bool,
        /// The tree and its controllers, or why it cannot be used, in one line.
        pub detail: String,
    }

    /// Longest `sandbox.exec` run, milliseconds (SPEC X1).
    pub const MAX_SANDBOX_MS: u64 = 60_000;
    /// Most bytes of inputs (evidence and script together) one run is
    /// given: base64 keeps the request under
    /// [`crate::frame::MAX_FRAME_BYTES`].
    pub const MAX_SANDBOX_INPUT_BYTES: usize = 600 * 1024;
    /// Most input files one run is given.
    pub const MAX_SANDBOX_INPUTS: usize = 8;
    /// Most arguments the model adds to a program's command.
    pub const MAX_SANDBOX_ARGS: usize = 16;
    /// Longest such argument, in bytes.
    pub const MAX_SANDBOX_ARG_BYTES: usize = 256;
    /// Most bytes of stdout, and of stderr, a report carries.
    pub const MAX_SANDBOX_STREAM_BYTES: usize = 64 * 1024;
    /// Most bytes of written files a report carries (each file whole or
    /// not at all).
    pub const MAX_SANDBOX_FILE_BYTES: usize = 256 * 1024;
    /// Most written files a report lists.
    pub const MAX_SANDBOX_FILES: usize = 16;

    /// The sandbox as the governor offers it.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxStatus {
        /// Whether a run may be asked for now.
        pub ready: bool,
        /// Why not, or what it offers, in one line.
        pub detail: String,
        /// The operator's allow-list.
        pub programs: Vec<SandboxProgram>,
    }

    /// One program of the operator's allow-list.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxProgram {
        /// Its name, the one a call gives (`python3`).
        pub name: String,
        /// Its command; `{script}` stands for the script's path.
        pub command: Vec<String>,
    }

    /// One file a run is given, read-only under `/input`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxInput {
        /// Its file name (`[A-Za-z0-9._-]`, no leading dot).
        pub name: String,
        /// Its bytes, base64.
        pub data_b64: String,
    }

    /// A run to admit, confine and carry out (SPEC X1). The program is a
    /// name of the allow-list, never a path: the governor holds the list.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxRun {
        /// Who asks, for the admission log (`agent:<call id>`).
        pub owner: String,
        /// A name of the allow-list.
        pub program: String,
        /// The script, at `/script/main` (the command's `{script}`).
        pub script: Option<String>,
        /// Arguments after the program's command.
        pub args: Vec<String>,
        /// Files under `/input`.
        pub inputs: Vec<SandboxInput>,
        /// Longest run, milliseconds (at most [`MAX_SANDBOX_MS`]).
        pub timeout_ms: u64,
    }

    /// How a run ended.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
    pub enum SandboxEnd {
        /// It exited by itself with this code.
        Exited {
            /// The exit code.
            code: i32,
        },
        /// A signal ended it (not one of the governor's bounds).
        Signalled {
            /// The signal.
            signal: i32,
        },
        /// The governor stopped it at a bound: time, output, memory.
        Stopped {
            /// Which bound, in words.
            reason: String,
        },
    }

    /// One regular file the run left in `/work`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxFile {
        /// Its path under `/work`.
        pub name: String,
        /// Its size in bytes.
        pub size: u64,
        /// SHA-256 of its bytes, hex.
        pub sha256: String,
        /// Its bytes, base64, when they fit the report's bound.
        pub data_b64: Option<String>,
    }

    /// One stream of a run: its first bytes, and how many it wrote.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxStream {
        /// The first [`MAX_SANDBOX_STREAM_BYTES`], as text (invalid UTF-8
        /// replaced).
        pub text: String,
        /// Bytes written in all.
        pub bytes: u64,
    }

    /// What a run did (its streams and files are untrusted data).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SandboxReport {
        /// The program's name.
        pub program: String,
        /// The reservation it ran under.
        pub reservation: String,
        /// How it ended.
        pub end: SandboxEnd,
        /// Its stdout.
        pub stdout: SandboxStream,
        /// Its stderr.
        pub stderr: SandboxStream,
        /// Files it left in `/work`, by name.
        pub files: Vec<SandboxFile>,
        /// Files beyond [`MAX_SANDBOX_FILES`], not listed.
        pub files_unlisted: u32,
        /// Start to exit, milliseconds.
        pub duration_ms: u64,
        /// Peak memory of its cgroup, bytes (0 where unmeasured).
        pub peak_memory_bytes: u64,
        /// CPU time, milliseconds (0 where unmeasured).
        pub cpu_ms: u64,
        /// The protections applied, one line each.
        pub confinement: Vec<String>,
        /// Protections this kernel lacks, one line each.
        pub missing: Vec<String>,
    }

    /// Bytes used out of a total.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Gauge {
        /// In use.
        pub used: u64,
        /// In all.
        pub total: u64,
    }

    /// One point of the governor's history (SPEC U6): what the UI's chart
    /// draws, kept by the governor so the chart has a past when it opens.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct HistoryPoint {
        /// Unix ms of the sample.
        pub at_ms: u64,
        /// RAM.
        pub ram: Option<Gauge>,
        /// Swap.
        pub swap: Option<Gauge>,
        /// VRAM of every GPU read, summed; `None` when none was read.
        pub vram: Option<Gauge>,
        /// GTT (AMD), likewise.
        pub gtt: Option<Gauge>,
        /// Labfy's scratch space: its use out of the file system's size.
        pub scratch: Option<Gauge>,
        /// Reserved and not yet used by the runs holding it (the chart's
        /// dashed line above the use).
        pub ahead: Amounts,
    }

    /// The governor's recent history: one point every `step_ms`, oldest
    /// first, at most the last hour.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct History {
        /// Milliseconds between two points (a multiple of the sampling
        /// period).
        pub step_ms: u64,
        /// The points.
        pub points: Vec<HistoryPoint>,
    }

    /// A refusal with its reason (SPEC Q2).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Refusal {
        /// One sentence.
        pub reason: String,
        /// What holds the missing resource.
        pub blocked_by: Vec<String>,
    }

    impl Refusal {
        /// The refusal as one line for a person: `refused by the governor:
        /// <reason> (held by <…>)`.
        pub fn said(&self) -> String {
            if self.blocked_by.is_empty() {
                format!("refused by the governor: {}", self.reason)
            } else {
                format!("refused by the governor: {} (held by {})", self.reason, self.blocked_by.join(", "))
            }
        }
    }

    /// What the server (or the operator) asks the governor.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum GovernorRequest {
        /// Is the governor alive and ready?
        Health {},
        /// Samples, reservations, decisions, the model.
        State {},
        /// The recent history of the samples (SPEC U6).
        History {},
        /// Check, admit and start the local model (one at a time).
        ModelStart(ModelSpec),
        /// Stop the local model and release its reservation.
        ModelStop {},
        /// Admit a campaign.
        AdmitCampaign(CampaignAsk),
        /// Admit document reading: parser workers, OCR included (SPEC A1).
        AdmitReading(ReadingAsk),
        /// Release a reservation (a campaign that ended).
        Release {
            /// The reservation id.
            reservation: String,
        },
        /// Admit, confine and carry out one sandbox run (SPEC X1); the
        /// answer comes when it has ended.
        SandboxRun(Box<SandboxRun>),
        /// Renew a campaign's lease while it runs (SPEC F5). A reservation
        /// the governor no longer holds — released under pressure, or its
        /// lease lapsed — is `NOT_FOUND`, with the reason it went: the
        /// campaign stops.
        Renew {
            /// The reservation id.
            reservation: String,
        },
    }

    /// What the governor answers.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum GovernorResponse {
        /// Health report.
        Health(Health),
        /// The whole state.
        State(Box<GovernorState>),
        /// The recent history.
        History(Box<History>),
        /// The model's status after a start or stop.
        Model(Box<ModelStatus>),
        /// No model is running (after a stop).
        ModelStopped {},
        /// Admitted under this reservation.
        Admitted {
            /// The reservation id.
            reservation: String,
        },
        /// Document reading admitted under this reservation, with this
        /// many workers (from the ask's `min_workers` to its `workers`).
        AdmittedReading {
            /// The reservation id.
            reservation: String,
            /// Workers admitted.
            workers: u32,
        },
        /// Refused by admission.
        Refused(Refusal),
        /// A sandbox run ended (SPEC X1).
        SandboxRan(Box<SandboxReport>),
        /// Released.
        Released {},
        /// The lease is renewed.
        Renewed {
            /// Unix ms when it lapses unless renewed again.
            lease_expires_ms: u64,
        },
        /// Refused or failed for another reason.
        Failed(Failure),
    }
}

/// Server ↔ egress (SPEC E1–E6, P4). Egress is the only process with a
/// network, and its only path out is Tor (arti). Every fetch names the
/// workspace, the campaign and the grant; egress re-checks the grant in the
/// store itself (read-only) before any stream opens.
pub mod egress {
    use super::*;

    /// Longest URL a fetch may name, in bytes.
    pub const MAX_URL_BYTES: usize = 2048;
    /// Largest body egress keeps by default, in bytes (SPEC C3: at least
    /// 8 MiB); the operator sets another with `labfy up --max-body-mib`.
    pub const DEFAULT_MAX_BODY_BYTES: u64 = 8 * 1024 * 1024;
    /// Largest body bound an operator may set (1 GiB): a body waits in
    /// egress's scratch directory, admitted by the governor, never in RAM.
    pub const MAX_BODY_BYTES_CEILING: u64 = 1024 * 1024 * 1024;
    /// Most bytes one `ReadBody` answers (base64 keeps the frame under
    /// [`crate::frame::MAX_FRAME_BYTES`]).
    pub const BODY_CHUNK_BYTES: u64 = 512 * 1024;
    /// Most redirects one fetch follows (each hop re-checked against scope).
    pub const MAX_REDIRECTS: u8 = 5;
    /// Most response headers kept in provenance.
    pub const MAX_KEPT_HEADERS: usize = 16;

    /// What the server asks egress.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum EgressRequest {
        /// Is egress alive (and is Tor bootstrapped)?
        Health {},
        /// Tor bootstrap state and activity, for the UI.
        Status {},
        /// One passive fetch under a grant, for a campaign.
        Fetch(FetchRequest),
        /// A grant was revoked: stop its in-flight and queued fetches now.
        StopGrant {
            /// The grant's workspace.
            workspace_id: Uuid,
            /// `grant:<uuid>`.
            grant_id: GrantRef,
        },
        /// A campaign ended: forget its isolation token, and refuse every
        /// later fetch of it (recorded in egress's grant ledger, SPEC T2).
        EndCampaign {
            /// The campaign's workspace.
            workspace_id: Uuid,
            /// `campaign:<uuid>`.
            campaign_id: CampaignRef,
        },
        /// The analyst's decision in the UI, as the server saw it: egress
        /// records it as a *proposal*, which allows nothing until a human
        /// confirms it where the server cannot reach (SPEC T2). Idempotent:
        /// the same proposal again answers the same record.
        Propose(Box<GrantProposal>),
        /// Egress's own record of a grant (with a fresh confirmation link
        /// while it waits for the human).
        GrantState {
            /// The grant's workspace.
            workspace_id: Uuid,
            /// `grant:<uuid>`.
            grant_id: GrantRef,
        },
        /// Egress's append-only fetch log of a grant, oldest first.
        FetchLog {
            /// The grant's workspace.
            workspace_id: Uuid,
            /// `grant:<uuid>`.
            grant_id: GrantRef,
        },
        /// The next bytes of a fetched body waiting in egress's scratch
        /// directory (SPEC C3): at most [`BODY_CHUNK_BYTES`] from `offset`.
        /// Only the workspace that fetched it may read it.
        ReadBody {
            /// The fetch's workspace.
            workspace_id: Uuid,
            /// [`FetchOutcome::body_handle`].
            handle: String,
            /// Where to read from, in bytes.
            offset: u64,
        },
        /// The server has the body (or gives it up): egress deletes it.
        /// Bodies never released are deleted when they expire.
        ReleaseBody {
            /// The fetch's workspace.
            workspace_id: Uuid,
            /// [`FetchOutcome::body_handle`].
            handle: String,
        },
        /// Operator socket only (`labfy grant`): the grants egress knows,
        /// newest first, at most [`MAX_LISTED_GRANTS`].
        Grants {},
        /// Operator socket only (`labfy grant approve|refuse`): a human's
        /// decision on a proposal. Refused on the server's socket.
        Decide {
            /// `grant:<uuid>`.
            grant_id: GrantRef,
            /// True: approve; false: refuse.
            approve: bool,
        },
    }

    /// Most URLs one grant names (the store's bound too).
    pub const MAX_GRANT_URLS: usize = 32;
    /// Most host patterns in a grant's scope.
    pub const MAX_GRANT_HOSTS: usize = 16;
    /// Longest description of a proposal, in characters.
    pub const MAX_PROPOSAL_SUMMARY_CHARS: usize = 500;
    /// Most grants `Grants` lists.
    pub const MAX_LISTED_GRANTS: usize = 100;
    /// Most entries `FetchLog` answers (the newest ones).
    pub const MAX_LOG_ENTRIES: usize = 500;

    /// What the analyst decided in the UI, as the server relays it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct GrantProposal {
        /// The workspace (UUID).
        pub workspace_id: Uuid,
        /// `grant:<uuid>` (the server's id for it).
        pub grant_id: GrantRef,
        /// `campaign:<uuid>`: the one campaign that runs under it.
        pub campaign_id: CampaignRef,
        /// The exact URLs, in order (1–[`MAX_GRANT_URLS`]).
        pub urls: Vec<String>,
        /// Host patterns redirects may reach (1–[`MAX_GRANT_HOSTS`]).
        pub hosts: Vec<String>,
        /// Requests allowed in all (every redirect hop is one).
        pub max_requests: u64,
        /// Body bytes allowed in all.
        pub max_bytes: u64,
        /// How long the grant lasts, from the proposal (1 min – 7 days).
        pub expires_in_minutes: u32,
        /// What the research is for, as the server describes it (shown to
        /// the human as the server's words, never trusted).
        pub summary: String,
    }

    /// Where a grant stands in egress's ledger.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum GrantPhase {
        /// Proposed by the server; allows nothing yet.
        Proposed,
        /// Confirmed by a human: fetches may run within its terms.
        Approved,
        /// Refused by a human.
        Refused,
        /// Approved, then revoked.
        Revoked,
        /// Its time ran out (confirmed or not).
        Expired,
        /// Approved, and its campaign has ended.
        Ended,
    }

    /// Egress's record of one grant (SPEC T2).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct GrantRecord {
        /// `grant:<uuid>`.
        pub grant_id: GrantRef,
        /// The workspace (UUID).
        pub workspace_id: Uuid,
        /// `campaign:<uuid>`.
        pub campaign_id: CampaignRef,
        /// The exact URLs granted, normalised, in order.
        pub urls: Vec<String>,
        /// Host patterns redirects may reach.
        pub hosts: Vec<String>,
        /// Requests allowed.
        pub max_requests: u64,
        /// Body bytes allowed.
        pub max_bytes: u64,
        /// The server's description.
        pub summary: String,
        /// Where it stands now.
        pub phase: GrantPhase,
        /// RFC 3339.
        pub proposed_at: String,
        /// RFC 3339: when it ends (proposal + its duration).
        pub expires_at: String,
        /// RFC 3339: when a human decided.
        pub decided_at: Option<String>,
        /// Where the human decided (`terminal`, `confirmation page`).
        pub decided_via: Option<String>,
        /// RFC 3339.
        pub revoked_at: Option<String>,
        /// RFC 3339.
        pub campaign_ended_at: Option<String>,
        /// Requests started under it (every hop).
        pub requests_used: u64,
        /// Body bytes received under it.
        pub bytes_used: u64,
        /// A one-time link to egress's confirmation page, while the grant
        /// waits for a human (`None` when there is no page or no wait).
        pub confirm_url: Option<String>,
    }

    /// One line of egress's fetch log.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct FetchLogEntry {
        /// Order in the log.
        pub seq: u64,
        /// RFC 3339: when the fetch ended.
        pub at: String,
        /// `campaign:<uuid>` as the fetch named it.
        pub campaign_id: CampaignRef,
        /// The URL asked.
        pub url: String,
        /// The URL of the response, after redirects.
        pub final_url: Option<String>,
        /// How it ended.
        pub status: FetchStatus,
        /// HTTP status of the final response.
        pub http_status: Option<u16>,
        /// Body bytes received.
        pub bytes: u64,
        /// SHA-256 of the body.
        pub sha256: Option<String>,
        /// Why, when not fetched.
        pub reason: Option<String>,
    }

    /// HTTP methods egress knows (SPEC E2: passive only).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum FetchMethod {
        /// `GET`.
        Get,
        /// `HEAD`.
        Head,
    }

    /// One fetch (SPEC E2, E3).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct FetchRequest {
        /// The workspace the campaign belongs to (UUID).
        pub workspace_id: Uuid,
        /// `campaign:<uuid>`: the isolation token is per campaign (E4).
        pub campaign_id: CampaignRef,
        /// `grant:<uuid>`: re-checked by egress in the store (E3).
        pub grant_id: GrantRef,
        /// An absolute `http` or `https` URL.
        pub url: String,
        /// `GET` or `HEAD`.
        pub method: FetchMethod,
    }

    /// How a fetch ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum FetchStatus {
        /// A response was received within bounds (any HTTP status).
        Fetched,
        /// Refused before any stream opened (grant, scope, URL, budget).
        Refused,
        /// Tor is down, not bootstrapped, or the circuit failed (E6).
        Unavailable,
        /// The far side misbehaved (bounds, timeout, malformed HTTP, TLS).
        Failed,
        /// Stopped by a revocation while in flight or queued.
        Stopped,
    }

    /// What one fetch produced: the provenance of the evidence it becomes
    /// (SPEC E5) or the reason it produced nothing.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct FetchOutcome {
        /// How it ended.
        pub status: FetchStatus,
        /// Why, when it is not `FETCHED` (one bounded line).
        pub reason: Option<String>,
        /// The URL asked.
        pub url: String,
        /// The URL of the response (after redirects).
        pub final_url: Option<String>,
        /// Every hop followed, in order (each checked against the scope).
        pub redirects: Vec<String>,
        /// The HTTP status of the final response.
        pub http_status: Option<u16>,
        /// Selected response headers (lower-case names), at most
        /// [`MAX_KEPT_HEADERS`].
        pub headers: Vec<(String, String)>,
        /// The `content-type` header, as received.
        pub content_type: Option<String>,
        /// Where the body waits in egress's scratch directory, to be read
        /// with `ReadBody` and released with `ReleaseBody` (SPEC C3); `None`
        /// for `HEAD`, an empty body, or no response.
        pub body_handle: Option<String>,
        /// Body length in bytes.
        pub body_bytes: u64,
        /// SHA-256 of the body, lower-case hex.
        pub body_sha256: Option<String>,
        /// RFC 3339: when the first stream was asked for.
        pub started_at: String,
        /// Milliseconds from the request to the end of the body.
        pub elapsed_ms: u64,
        /// The campaign's isolation label (its Tor circuits are its own).
        pub isolation: String,
    }

    /// Tor bootstrap and activity (SPEC E1).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct EgressStatus {
        /// True once arti is bootstrapped and can build circuits.
        pub ready: bool,
        /// Bootstrap progress, 0–100.
        pub bootstrap_percent: u8,
        /// arti's phase, one short line.
        pub phase: String,
        /// The last bootstrap or circuit error, bounded.
        pub last_error: Option<String>,
        /// Milliseconds bootstrap took, once done.
        pub bootstrap_ms: Option<u64>,
        /// True when an operator arti configuration file is in use.
        pub custom_network: bool,
        /// The largest body egress keeps, in bytes (the operator's bound):
        /// what a campaign asks the governor's scratch for, per item.
        pub max_body_bytes: u64,
        /// Fetches in flight now.
        pub in_flight: u32,
        /// Campaign slots held (isolation tokens of campaigns neither ended
        /// nor idle long enough to be forgotten): flat under a long load.
        pub campaigns: u32,
        /// Fetches answered since start, by outcome: fetched, refused,
        /// unavailable, failed, stopped.
        pub counts: [u64; 5],
    }

    /// What egress answers.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum EgressResponse {
        /// Health report.
        Health(Health),
        /// Bootstrap state.
        Status(EgressStatus),
        /// A fetch's outcome (refusals included: they carry provenance too).
        Fetched(Box<FetchOutcome>),
        /// A stop or end was applied; how many fetches it stopped.
        Stopped {
            /// Fetches stopped in flight or in queue.
            stopped: u32,
        },
        /// One grant's record.
        Grant(Box<GrantRecord>),
        /// Grants, newest first.
        Grants {
            /// At most [`MAX_LISTED_GRANTS`].
            grants: Vec<GrantRecord>,
        },
        /// A grant's fetch log, oldest first.
        FetchLog {
            /// At most [`MAX_LOG_ENTRIES`], the newest.
            entries: Vec<FetchLogEntry>,
        },
        /// Bytes of a waiting body, from the offset asked.
        BodyChunk {
            /// At most [`BODY_CHUNK_BYTES`], base64 (standard alphabet).
            data_base64: String,
            /// True when these are the body's last bytes.
            eof: bool,
        },
        /// A body was released (false: egress no longer had it).
        BodyReleased {
            /// Whether egress still held it.
            released: bool,
        },
        /// Refused or failed.
        Failed(Failure),
    }
}

#[cfg(test)]
mod tests {
    use super::control::*;
    use super::*;

    #[test]
    fn wire_forms_are_stable_and_closed() {
        let r = Request { id: 7, body: ControlRequest::Health {} };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"id":7,"body":{"type":"health"}}"#);
        for bad in [
            r#"{"id":7,"body":{"type":"reboot"}}"#,
            r#"{"id":7,"body":{"type":"health","x":1}}"#,
            r#"{"id":7,"body":{"type":"health"},"extra":true}"#,
            r#"{"id":"7","body":{"type":"health"}}"#,
        ] {
            assert!(serde_json::from_str::<Request<ControlRequest>>(bad).is_err(), "{bad}");
        }
        assert_eq!(serde_json::to_string(&Boundary::Governor).unwrap(), r#""governor""#);
        let health = r#"{"type":"health","role":"server","pid":1,"uptime_ms":2,"ready":true,"detail":"ok"}"#;
        assert!(serde_json::from_str::<ControlResponse>(health).is_ok());
        let extra = r#"{"type":"health","role":"server","pid":1,"uptime_ms":2,"ready":true,"detail":"ok","z":0}"#;
        assert!(serde_json::from_str::<ControlResponse>(extra).is_err());
    }

    /// Ids travel typed (issue 14): the text form is the one every process
    /// reads the same way, and a message naming the wrong kind of object,
    /// a bare UUID or a malformed one never decodes.
    #[test]
    fn ids_are_typed_on_the_wire() {
        const WS: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
        const G: &str = "grant:0190a4f1-0000-7000-8000-000000000001";
        const C: &str = "campaign:0190a4f1-0000-7000-8000-000000000002";
        let fetch = |ws: &str, c: &str, g: &str| {
            format!(
                r#"{{"type":"fetch","workspace_id":"{ws}","campaign_id":"{c}","grant_id":"{g}","url":"https://a/","method":"GET"}}"#
            )
        };
        let good: egress::EgressRequest = serde_json::from_str(&fetch(WS, C, G)).unwrap();
        assert_eq!(serde_json::to_string(&good).unwrap(), fetch(WS, C, G), "the text form is unchanged");
        let bare = G.trim_start_matches("grant:");
        for (bad, why) in [
            (fetch(WS, G, G), "expected a `campaign:` reference"),
            (fetch(WS, C, C), "expected a `grant:` reference"),
            (fetch(WS, C, bare), "bare UUID"),
            (fetch("workspace", C, G), "UUID"),
            (fetch(WS, "campaign:nope", G), "invalid UUID"),
            (format!(r#"{{"type":"decide","grant_id":"{C}","approve":true}}"#), "expected a `grant:` reference"),
            (
                format!(r#"{{"type":"end_campaign","workspace_id":"{WS}","campaign_id":"{G}"}}"#),
                "expected a `campaign:`",
            ),
        ] {
            let e = serde_json::from_str::<egress::EgressRequest>(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let ask = |c: &str| {
            format!(
                r#"{{"type":"admit_campaign","campaign":"{c}","scratch_bytes":1,"ram_bytes":1,"concurrency":1,"priority":1}}"#
            )
        };
        assert!(serde_json::from_str::<governor::GovernorRequest>(&ask(C)).is_ok());
        let e = serde_json::from_str::<governor::GovernorRequest>(&ask(G)).unwrap_err().to_string();
        assert!(e.contains("expected a `campaign:` reference"), "{e}");
    }
}
