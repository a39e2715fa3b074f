//! Deterministic crash points (SPEC K4): where a test may `kill -9` a
//! process, by name, at the instant a state machine's transition is durable.
//!
//! A state machine calls [`point`] right after it has committed a transition
//! (`grant.recorded` after the grant's transaction) and the server calls it
//! with `answer:<METHOD> <route>` once an answer's state is on disk, just
//! before the answer leaves. The crash-point harness (`tests/crash_points.rs`)
//! starts `labfy up` with `LABFY_CRASH_AT=<name>` and `LABFY_CRASH_MARK=<file>`
//! and runs a scenario; the first process that reaches the named point
//! creates the mark (so the restarted process does not crash again) and
//! sends itself `SIGKILL` — the same end as an operator's `kill -9`: no
//! destructor, no flush, no answer (PID 1 of a namespace, which cannot be
//! sent one from inside, ends with `_exit`, the same end for its files).
//!
//! Only a build with debug assertions (the dev and test profiles) reads the
//! variables; in a release build [`point`] is empty and the package ships no
//! way to crash on request.

/// The named transitions, by the state machine that owns them and the
/// process that runs it. The `answer:` points are not listed: every route
/// has one.
pub const POINTS: &[Point] = &[
    Point { name: GRANT_RECORDED, machine: "grant", process: "server" },
    Point { name: CAMPAIGN_ADMITTED, machine: "campaign", process: "server" },
    Point { name: CAMPAIGN_ENDED, machine: "campaign", process: "server" },
    Point { name: IMPORT_FILE_STORED, machine: "import", process: "server" },
    Point { name: IMPORT_ENDED, machine: "import", process: "server" },
    Point { name: JOB_ENDED, machine: "export", process: "server" },
    Point { name: TOOL_REQUEST_DECIDED, machine: "tool request", process: "server" },
    Point { name: WORKSPACE_OPEN_REQUESTED, machine: "workspace switch", process: "server" },
    Point { name: WORKSPACE_SWITCHING, machine: "workspace switch", process: "supervisor" },
];

/// A grant's row is committed (its campaign not yet admitted).
pub const GRANT_RECORDED: &str = "grant.recorded";
/// A campaign is admitted (queued, nothing fetched).
pub const CAMPAIGN_ADMITTED: &str = "campaign.admitted";
/// A campaign's end is committed.
pub const CAMPAIGN_ENDED: &str = "campaign.ended";
/// One imported file's evidence and blob are committed.
pub const IMPORT_FILE_STORED: &str = "import.file_stored";
/// An import job has its final status.
pub const IMPORT_ENDED: &str = "import.ended";
/// A job (an export, a sandbox run) has its final status.
pub const JOB_ENDED: &str = "job.ended";
/// A tool request is approved or refused.
pub const TOOL_REQUEST_DECIDED: &str = "tool_request.decided";
/// The analyst's request to open another workspace is recorded.
pub const WORKSPACE_OPEN_REQUESTED: &str = "workspace.open_requested";
/// The supervisor has stopped the old server and not yet started the new.
pub const WORKSPACE_SWITCHING: &str = "workspace.switching";

/// One named crash point.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// What `LABFY_CRASH_AT` names.
    pub name: &'static str,
    /// The state machine whose transition it follows.
    pub machine: &'static str,
    /// The process that reaches it.
    pub process: &'static str,
}

/// The variable naming the point to crash at.
pub const ENV_AT: &str = "LABFY_CRASH_AT";
/// The variable naming the mark file: created when the point fires; while it
/// exists the point does not fire again.
pub const ENV_MARK: &str = "LABFY_CRASH_MARK";

/// The answer point of a route: `answer:POST /api/v1/agent-tools/turns`.
pub fn answer_point(method: &str, route: &str) -> String {
    format!("answer:{method} {route}")
}

/// Reached `name`: in a debug build armed for it, crash now (see the module).
#[inline]
pub fn point(name: &str) {
    #[cfg(debug_assertions)]
    armed::fire(name);
    #[cfg(not(debug_assertions))]
    let _ = name;
}

/// Whether a point is armed at all (cheap; lets a caller skip building a
/// dynamic name).
#[inline]
pub fn armed() -> bool {
    #[cfg(debug_assertions)]
    return armed::target().is_some();
    #[cfg(not(debug_assertions))]
    false
}

#[cfg(debug_assertions)]
mod armed {
    use std::io::Write;
    use std::path::PathBuf;
    use std::sync::OnceLock;

    pub(super) fn target() -> Option<&'static (String, PathBuf)> {
        static TARGET: OnceLock<Option<(String, PathBuf)>> = OnceLock::new();
        TARGET
            .get_or_init(|| {
                let at = std::env::var(super::ENV_AT).ok().filter(|s| !s.is_empty())?;
                let mark = std::env::var_os(super::ENV_MARK).map(PathBuf::from).filter(|p| p.is_absolute())?;
                Some((at, mark))
            })
            .as_ref()
    }

    pub(super) fn fire(name: &str) {
        let Some((at, mark)) = target() else { return };
        if at != name {
            return;
        }
        // Once: the process restarted after the crash passes the point.
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).create_new(true).open(mark) else { return };
        let _ = writeln!(f, "{name}").and_then(|()| f.sync_all());
        eprintln!("labfy: crash point {name}: SIGKILL");
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        // Still here: PID 1 of a PID namespace (the confined server) ignores
        // a SIGKILL sent from inside it. Ending every thread at once without
        // a destructor or a flush is what the kill does to the files.
        // SAFETY: _exit(2) takes an integer and does not return.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(137)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_unique_and_dotted() {
        let mut names: Vec<&str> = super::POINTS.iter().map(|p| p.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a point named twice");
        assert!(names.iter().all(|n| n.split('.').count() == 2 && !n.contains(' ')), "{names:?}");
    }

    #[test]
    fn an_unarmed_point_returns() {
        // No LABFY_CRASH_AT in a unit test's environment: reaching any point
        // goes on.
        assert!(std::env::var_os(super::ENV_AT).is_none());
        super::point(super::GRANT_RECORDED);
        assert!(!super::armed());
    }
}
