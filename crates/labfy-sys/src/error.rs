//! Which step of a confinement failed, and why.

use std::fmt;

/// The named steps of [`crate::Jail::spawn`], in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// Preparing the plan in the parent (paths, arrays, filters).
    Prepare = 0,
    /// `clone3` with the new namespaces.
    Clone = 1,
    /// `PR_SET_PDEATHSIG` and `PR_SET_DUMPABLE`.
    ParentDeath = 2,
    /// Joining the cgroup the caller prepared, then a cgroup namespace rooted there.
    Cgroup = 3,
    /// The uid and gid maps of the new user namespace.
    IdMaps = 4,
    /// The host name of the new UTS namespace.
    Hostname = 5,
    /// The listener on fd 3, every other descriptor close-on-exec.
    Descriptors = 6,
    /// Building the minimal root (tmpfs, binds, masks).
    Root = 7,
    /// A private `/proc` of the new PID namespace.
    Proc = 8,
    /// `pivot_root` into the new root and detaching the old one.
    PivotRoot = 9,
    /// Loopback up in the new network namespace.
    Loopback = 10,
    /// Resource limits.
    Limits = 11,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs = 12,
    /// The Landlock ruleset.
    Landlock = 13,
    /// Emptying the capability bounding set, locking `SECBIT_NOROOT`.
    Capabilities = 14,
    /// Becoming the unprivileged user the caller named (groups, gid, uid).
    Identity = 15,
    /// Installing the seccomp filters.
    Seccomp = 16,
    /// `execve` of the program.
    Exec = 17,
}

impl Step {
    pub(crate) fn from_u8(n: u8) -> Self {
        use Step::*;
        [
            Prepare,
            Clone,
            ParentDeath,
            Cgroup,
            IdMaps,
            Hostname,
            Descriptors,
            Root,
            Proc,
            PivotRoot,
            Loopback,
            Limits,
            NoNewPrivs,
            Landlock,
            Capabilities,
            Identity,
            Seccomp,
            Exec,
        ]
        .get(n as usize)
        .copied()
        .unwrap_or(Prepare)
    }

    /// A short lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Step::Prepare => "prepare",
            Step::Clone => "namespaces (clone3)",
            Step::ParentDeath => "parent-death signal",
            Step::Cgroup => "cgroup",
            Step::IdMaps => "uid/gid maps",
            Step::Hostname => "host name",
            Step::Descriptors => "descriptors",
            Step::Root => "minimal root",
            Step::Proc => "private /proc",
            Step::PivotRoot => "pivot_root",
            Step::Loopback => "loopback",
            Step::Limits => "resource limits",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "landlock",
            Step::Capabilities => "capabilities",
            Step::Identity => "unprivileged identity",
            Step::Seccomp => "seccomp",
            Step::Exec => "execve",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A confined child could not be started: the step that failed and the
/// kernel's answer. Nothing of the child is left running.
#[derive(Debug, thiserror::Error)]
#[error("confinement step `{step}` failed: {source}{}", if detail.is_empty() { String::new() } else { format!(" ({detail})") })]
pub struct SpawnError {
    /// The step that failed.
    pub step: Step,
    /// The kernel's error.
    #[source]
    pub source: std::io::Error,
    /// What the step was doing (a path, a value), when known.
    pub detail: String,
}

impl SpawnError {
    pub(crate) fn new(step: Step, source: std::io::Error) -> Self {
        Self { step, source, detail: String::new() }
    }

    pub(crate) fn prepare(detail: impl Into<String>) -> Self {
        Self { step: Step::Prepare, source: std::io::Error::from_raw_os_error(libc::EINVAL), detail: detail.into() }
    }

    /// The errno, when the failure came from the kernel.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }

    /// Whether the platform forbids this confinement (a kernel or a service
    /// manager without user namespaces, say), as opposed to a bad plan or a
    /// transient failure.
    pub fn is_unsupported(&self) -> bool {
        matches!(self.step, Step::Clone | Step::IdMaps | Step::Root | Step::PivotRoot | Step::Seccomp)
            && matches!(self.errno(), Some(libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EACCES | libc::ENOSYS))
    }
}
