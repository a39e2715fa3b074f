//! The governor's sandbox runs lent to the agent gateway (SPEC X1): a
//! `sandbox.exec` call becomes one `SandboxRun` request on the governor's
//! service socket. The governor holds the allow-list, admits, confines and
//! bounds the run; this side only carries the call's data there and the
//! report back.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use labfy_gateway::sandbox::{
    SANDBOX_CALL_MARGIN_SECONDS, SandboxEnded, SandboxFileOut, SandboxRan, SandboxStreamText,
};
use labfy_gateway::{Sandbox, SandboxAsk, SandboxOutcome};
use labfy_ipc::messages::FailureCode;
use labfy_ipc::messages::governor::{
    GovernorRequest, GovernorResponse, MAX_SANDBOX_STREAM_BYTES, SandboxEnd, SandboxInput, SandboxReport, SandboxRun,
    SandboxStream,
};

/// Sandbox runs through the governor of `labfy up`.
pub struct GovernorSandbox {
    runtime_dir: PathBuf,
    handle: tokio::runtime::Handle,
}

impl GovernorSandbox {
    /// Runs through the governor whose sockets are in `runtime_dir`,
    /// driving the call on the current tokio runtime. Call inside one.
    pub fn new(runtime_dir: PathBuf) -> Self {
        Self { runtime_dir, handle: tokio::runtime::Handle::current() }
    }
}

impl Sandbox for GovernorSandbox {
    fn run(&self, ask: &SandboxAsk) -> Result<SandboxOutcome, String> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let run = SandboxRun {
            owner: format!("agent:{}", ask.call_id),
            program: ask.program.clone(),
            script: ask.script.clone(),
            args: ask.args.clone(),
            inputs: ask
                .inputs
                .iter()
                .map(|i| SandboxInput { name: i.name.clone(), data_b64: b64.encode(i.text.as_bytes()) })
                .collect(),
            timeout_ms: ask.timeout_seconds.saturating_mul(1000),
        };
        let wait = Duration::from_secs(ask.timeout_seconds.saturating_add(SANDBOX_CALL_MARGIN_SECONDS));
        let answer = self.handle.block_on(crate::state::ask_governor_at(
            &self.runtime_dir,
            GovernorRequest::SandboxRun(Box::new(run)),
            wait,
        ));
        Ok(match answer {
            Ok(GovernorResponse::SandboxRan(report)) => SandboxOutcome::Ran(Box::new(ran(*report))),
            Ok(GovernorResponse::Refused(r)) => {
                SandboxOutcome::Refused(format!("the governor refused the run: {}", r.reason))
            }
            Ok(GovernorResponse::Failed(f)) => match f.code {
                FailureCode::Forbidden | FailureCode::InvalidInput => SandboxOutcome::Refused(f.message),
                FailureCode::Unavailable => SandboxOutcome::Unavailable(f.message),
                _ => SandboxOutcome::Failed(f.message),
            },
            Ok(_) => SandboxOutcome::Failed("the governor gave an unexpected answer to a sandbox run".into()),
            Err(why) => SandboxOutcome::Unavailable(why),
        })
    }
}

fn stream(s: SandboxStream) -> SandboxStreamText {
    let truncated = s.bytes > s.text.len() as u64 || s.bytes as usize > MAX_SANDBOX_STREAM_BYTES;
    SandboxStreamText { text: s.text, bytes: s.bytes, truncated }
}

/// The governor's report, as the gateway shows it: a file's text when it
/// is UTF-8 and was carried, its name, size and digest always.
fn ran(r: SandboxReport) -> SandboxRan {
    let b64 = base64::engine::general_purpose::STANDARD;
    SandboxRan {
        program: r.program,
        end: match r.end {
            SandboxEnd::Exited { code } => SandboxEnded::Exited { code },
            SandboxEnd::Signalled { signal } => SandboxEnded::Signalled { signal },
            SandboxEnd::Stopped { reason } => SandboxEnded::Stopped { reason },
        },
        stdout: stream(r.stdout),
        stderr: stream(r.stderr),
        files: r
            .files
            .into_iter()
            .map(|f| SandboxFileOut {
                text: f.data_b64.and_then(|d| b64.decode(d).ok()).and_then(|bytes| String::from_utf8(bytes).ok()),
                name: f.name,
                size: f.size,
                sha256: f.sha256,
            })
            .collect(),
        files_unlisted: r.files_unlisted,
        duration_ms: r.duration_ms,
        peak_memory_bytes: r.peak_memory_bytes,
        cpu_ms: r.cpu_ms,
        reservation: r.reservation,
        confinement: r.confinement,
        missing: r.missing,
    }
}
