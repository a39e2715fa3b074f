//! `sandbox.exec` (SPEC X1): the gateway holds no program and no
//! confinement. The server lends a [`Sandbox`] — the governor's runs, asked
//! over IPC — as it lends a [`crate::Fetcher`]; the gateway gives it the
//! call's program name, script, arguments and the text of the evidence the
//! call chose, and maps its answer onto the protocol's result statuses.
//!
//! The governor, not the gateway, is the authority: it holds the operator's
//! allow-list, admits the run, confines it with no network and bounds it.
//! The run's streams and files come back as untrusted data; nothing becomes
//! evidence without the analyst.

use labfy_core::ObjectRef;
use serde::Serialize;
use uuid::Uuid;

/// One input file: an evidence's text, read-only at `/input/<name>`.
#[derive(Debug, Clone)]
pub struct SandboxInputFile {
    /// `<uuid>.txt`.
    pub name: String,
    /// The evidence it holds (none for a capability test's own file).
    pub evidence: Option<ObjectRef>,
    /// Its text, UTF-8.
    pub text: String,
}

/// One run the agent asked for.
#[derive(Debug, Clone)]
pub struct SandboxAsk {
    /// The workspace (the server's).
    pub workspace: Uuid,
    /// A name of the operator's allow-list.
    pub program: String,
    /// The script (`/script/main`).
    pub script: Option<String>,
    /// Arguments after the program's command.
    pub args: Vec<String>,
    /// The inputs.
    pub inputs: Vec<SandboxInputFile>,
    /// Longest run, seconds.
    pub timeout_seconds: u64,
    /// The turn and call that asked.
    pub turn_id: Uuid,
    /// The call.
    pub call_id: Uuid,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SandboxEnded {
    /// It exited by itself.
    Exited {
        /// Its exit code.
        code: i32,
    },
    /// A signal ended it.
    Signalled {
        /// The signal.
        signal: i32,
    },
    /// The governor stopped it at a bound.
    Stopped {
        /// Which, in words.
        reason: String,
    },
}

/// One stream's first bytes, as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxStreamText {
    /// The text kept.
    pub text: String,
    /// Bytes written in all.
    pub bytes: u64,
    /// True when `text` holds less than was written.
    pub truncated: bool,
}

/// One file the run left in `/work`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxFileOut {
    /// Its path under `/work`.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// SHA-256, hex.
    pub sha256: String,
    /// Its text when it is UTF-8 and the report carried it.
    pub text: Option<String>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxRan {
    /// The program's name.
    pub program: String,
    /// How it ended.
    pub end: SandboxEnded,
    /// stdout.
    pub stdout: SandboxStreamText,
    /// stderr.
    pub stderr: SandboxStreamText,
    /// Files left in `/work`.
    pub files: Vec<SandboxFileOut>,
    /// Files beyond the report's bound.
    pub files_unlisted: u32,
    /// Start to exit, ms.
    pub duration_ms: u64,
    /// Peak memory, bytes.
    pub peak_memory_bytes: u64,
    /// CPU time, ms.
    pub cpu_ms: u64,
    /// The reservation it ran under (the governor's admission log).
    pub reservation: String,
    /// Protections applied.
    pub confinement: Vec<String>,
    /// Protections this kernel lacks.
    pub missing: Vec<String>,
}

/// What came of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxOutcome {
    /// It ran (whatever its exit).
    Ran(Box<SandboxRan>),
    /// The governor refused it: not on the allow-list, bad input, or
    /// admission (memory pressure). The reason.
    Refused(String),
    /// No sandbox now (no governor, none configured). The reason.
    Unavailable(String),
    /// It could not run. The reason.
    Failed(String),
}

/// The governor's runs, lent to the gateway. Calls block (the server runs
/// the gateway on its blocking pool) for at most the run's time and
/// [`SANDBOX_CALL_MARGIN_SECONDS`].
pub trait Sandbox: Send + Sync {
    /// Carries out `ask`. `Err` is a failure of the lender itself.
    fn run(&self, ask: &SandboxAsk) -> Result<SandboxOutcome, String>;
}

/// Time a call waits beyond the run's own bound (admission, confinement,
/// reading back).
pub const SANDBOX_CALL_MARGIN_SECONDS: u64 = 20;
