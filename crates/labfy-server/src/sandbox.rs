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
        let answer = self.handle.block_on(crate::governor::ask_governor_at(
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

/// Most bytes of written files' text a result shows: with both streams
/// (64 KiB each) the result stays under the gateway's 256 KiB bound; a file
/// past it is listed with its size and digest only.
pub const MAX_SHOWN_FILE_TEXT: usize = 64 * 1024;

/// The governor's report, as the gateway shows it: a file's text when it
/// is UTF-8 and fits [`MAX_SHOWN_FILE_TEXT`], its name, size and digest
/// always.
fn ran(r: SandboxReport) -> SandboxRan {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut shown = 0usize;
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
            .map(|f| {
                let text = f
                    .data_b64
                    .and_then(|d| b64.decode(d).ok())
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .filter(|t| shown + t.len() <= MAX_SHOWN_FILE_TEXT);
                shown += text.as_ref().map_or(0, String::len);
                SandboxFileOut { text, name: f.name, size: f.size, sha256: f.sha256 }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use labfy_ipc::messages::governor::SandboxFile;

    #[test]
    fn files_text_is_shown_within_the_results_bound() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let file = |name: &str, len: usize| SandboxFile {
            name: name.into(),
            size: len as u64,
            sha256: "ab".repeat(32),
            data_b64: Some(b64.encode("x".repeat(len))),
        };
        let report = SandboxReport {
            program: "python3".into(),
            reservation: "res-1".into(),
            end: SandboxEnd::Exited { code: 0 },
            stdout: SandboxStream { text: "o".into(), bytes: 100 },
            stderr: SandboxStream::default(),
            files: vec![file("a.csv", 40 * 1024), file("b.csv", 40 * 1024), file("c.txt", 10)],
            files_unlisted: 0,
            duration_ms: 1,
            peak_memory_bytes: 0,
            cpu_ms: 0,
            confinement: vec![],
            missing: vec![],
        };
        let shown = ran(report);
        let texts: Vec<Option<usize>> = shown.files.iter().map(|f| f.text.as_ref().map(String::len)).collect();
        // The second would pass 64 KiB: listed without its text; the third fits.
        assert_eq!(texts, [Some(40 * 1024), None, Some(10)]);
        assert_eq!(shown.files[1].size, 40 * 1024);
        assert!(shown.stdout.truncated, "100 bytes written, 1 kept");
    }
}
