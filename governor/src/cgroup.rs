//! Confinement of what the governor starts, in cgroups (SPEC Q3).
//!
//! A [`Confinement`] is one cgroup, `labfy/<name>`, created with its limits
//! (memory max, swap max, CPU quota and weight, pids max) *before* any process
//! is in it. A child joins it between `fork` and `exec` through a
//! [`ChildJoin`] prepared in the parent, so it never runs a single instruction
//! of the confined program outside its limits. When the run ends,
//! [`exit_cause`] tells an OOM kill from any other death, and
//! [`Confinement::delete`] kills what remains and removes the cgroup.
//!
//! Where the cgroups go is a [`Tree`] (SPEC D2): the whole hierarchy when the
//! governor runs as root, the sub-tree systemd delegated to the service, or a
//! directory given as a parameter (the fixture trees of the tests). The tree
//! is resolved once at start ([`install`]).
//!
//! The limits are written and read through `cgroups-rs`, to which the tree
//! is a `Hierarchy`. Raw cgroupfs access is limited to what that crate lacks
//! or does against fixed paths, each place saying so: the tree's controllers
//! and `cgroup.subtree_control` (`tree.rs`), the child's `cgroup.procs` writes
//! (no allocation is allowed after `fork`), v2 `memory.events` (`oom_kill`),
//! v2 `memory.swap.max` read back, and telling a missing file from a zero
//! (`cgroups-rs` reports an unreadable file as 0).
//!
//! Facts measured on a v1 machine (`../shared/notes/platform-facts.md`): an
//! allocation over the limit is killed with SIGKILL and `memory.oom_control`
//! `oom_kill` rises, while `memory.failcnt` stays 0; so an OOM is recognised
//! by SIGKILL plus a risen `oom_kill` counter (v2: `memory.events`).
//!
//! `labfy/` sits at the tree's root (as root, v1: one per controller,
//! `/sys/fs/cgroup/<controller>/labfy/<name>`; v2: `/sys/fs/cgroup/labfy/<name>`;
//! delegated: `<unit's cgroup>/labfy/<name>`), not inside the governor's own
//! cgroup: a confined child leaves the governor's cgroup and is bound by its
//! own limits only.
//!
//! A tree that is not ours (not root, no delegation), lacks a controller or
//! is read-only is [`CgroupError::Unavailable`] with the reason, and the
//! governor then refuses to start what it cannot confine — it never runs it
//! unconfined.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::cpuacct::CpuAcctController;
use cgroups_rs::fs::error::{Error as CgroupsRsError, ErrorKind as CgroupsRsErrorKind};
use cgroups_rs::fs::memory::{MemController, Memory};
use cgroups_rs::fs::pid::PidController;
use cgroups_rs::fs::{Cgroup, Controller, MaxValue, Resources};
use serde::{Deserialize, Serialize};

mod tree;

pub use tree::{Origin, SUPERVISOR_LEAF, Tree, TreeSpec, UNIFIED_MOUNT, enter_supervisor_leaf};

/// The parent of every Labfy cgroup, in each hierarchy. Created on first use
/// and kept (it is shared by all runs; removing it would race a new run).
pub const PARENT: &str = "labfy";

/// Longest accepted cgroup name (the part after `labfy/`), in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// How long [`Confinement::delete`] waits for killed processes to leave the
/// cgroup before giving up with [`CgroupError::Busy`].
pub const DELETE_WAIT: Duration = Duration::from_secs(5);

/// How long `Drop` waits (best effort; it must not hold a caller long).
pub const DROP_WAIT: Duration = Duration::from_secs(2);

/// How often the cgroup is polled while processes are leaving it.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Rounds of [`Confinement::kill_all`] on v1: each round kills every listed
/// process, so a process forked during one round is killed in the next.
const KILL_ROUNDS: usize = 20;

/// A cgroup under `labfy/` younger than this is never swept: it may be a run
/// that another process is setting up right now.
pub const STALE_MIN_AGE: Duration = Duration::from_secs(60);

/// Smallest accepted memory limit (nothing useful runs in less).
pub const MIN_MEMORY_MAX: u64 = 1024 * 1024;

/// CFS period used with a CPU quota, in microseconds (the kernel default).
pub const CPU_PERIOD_US: u64 = 100_000;

/// Largest accepted CPU quota, in percent of one core (1000 cores).
pub const MAX_CPU_QUOTA_PERCENT: u32 = 100_000;

/// Accepted CPU weights, in cgroup v2 units (default 100); on v1 a weight is
/// converted to `cpu.shares` (100 ↦ 1024).
pub const CPU_WEIGHT_RANGE: std::ops::RangeInclusive<u64> = 1..=10_000;

/// Largest accepted `pids_max` (the kernel's `PID_MAX_LIMIT`).
pub const MAX_PIDS: u64 = 4_194_304;

/// `cgroups-rs` controller names attached to a confinement, when mounted.
/// `cpuacct` is v1 only (CPU usage); on v2 CPU usage comes from `cpu.stat`.
const CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "pids"];

/// The limits of one confinement (SPEC Q3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory limit in bytes (v1 `memory.limit_in_bytes`, v2 `memory.max`).
    pub memory_max: u64,
    /// Swap allowed beyond `memory_max`, in bytes; `None` allows no swap
    /// (v1 `memory.memsw.limit_in_bytes` = memory + swap, v2 `memory.swap.max`).
    pub swap_max: Option<u64>,
    /// CPU quota in percent of one core (150 = one and a half cores).
    pub cpu_quota_percent: Option<u32>,
    /// CPU weight in v2 units, 1 to 10 000 (default 100), see [`CPU_WEIGHT_RANGE`].
    pub cpu_weight: Option<u64>,
    /// Most processes (and threads) alive at once in the cgroup.
    pub pids_max: Option<u64>,
}

impl Limits {
    /// A memory limit and nothing else (no swap).
    pub fn memory(memory_max: u64) -> Self {
        Self { memory_max, swap_max: None, cpu_quota_percent: None, cpu_weight: None, pids_max: None }
    }

    /// Refuses values the kernel would reject or silently clamp.
    fn validate(&self) -> Result<(), CgroupError> {
        let bad = |why: String| Err(CgroupError::InvalidLimits(why));
        let i64_max = i64::MAX.unsigned_abs();
        if !(MIN_MEMORY_MAX..=i64_max).contains(&self.memory_max) {
            return bad(format!("memory_max {} is not between {MIN_MEMORY_MAX} and {i64_max} bytes", self.memory_max));
        }
        if let Some(swap) = self.swap_max
            && self.memory_max.checked_add(swap).is_none_or(|total| total > i64_max)
        {
            return bad(format!("memory_max + swap_max ({} + {swap}) exceeds {i64_max} bytes", self.memory_max));
        }
        if let Some(quota) = self.cpu_quota_percent
            && !(1..=MAX_CPU_QUOTA_PERCENT).contains(&quota)
        {
            return bad(format!("cpu_quota_percent {quota} is not between 1 and {MAX_CPU_QUOTA_PERCENT}"));
        }
        if let Some(weight) = self.cpu_weight
            && !CPU_WEIGHT_RANGE.contains(&weight)
        {
            return bad(format!(
                "cpu_weight {weight} is not between {} and {}",
                CPU_WEIGHT_RANGE.start(),
                CPU_WEIGHT_RANGE.end()
            ));
        }
        if let Some(pids) = self.pids_max
            && !(1..=MAX_PIDS).contains(&pids)
        {
            return bad(format!("pids_max {pids} is not between 1 and {MAX_PIDS}"));
        }
        Ok(())
    }

    /// The controllers these limits need; a missing one is `Unavailable`.
    fn required_controllers(&self) -> Vec<&'static str> {
        let mut required = vec!["memory"];
        if self.cpu_quota_percent.is_some() || self.cpu_weight.is_some() {
            required.push("cpu");
        }
        if self.pids_max.is_some() {
            required.push("pids");
        }
        required
    }
}

/// Converts a v2 CPU weight (1–10 000, default 100) to v1 `cpu.shares`
/// (2–262 144, default 1024).
fn weight_to_shares(weight: u64) -> u64 {
    (weight.saturating_mul(1024) / 100).clamp(2, cgroups_rs::CPU_SHARES_V1_MAX)
}

/// Why a confinement could not be made, used or removed.
#[derive(thiserror::Error, Debug)]
pub enum CgroupError {
    /// Confinement is not possible here: no cgroup filesystem, a read-only
    /// hierarchy, a missing controller, or not root. The sentence says which.
    /// The governor must then refuse to start the process.
    #[error("cgroup confinement is unavailable: {0}")]
    Unavailable(String),
    /// The name is not `[a-z0-9-]{1,64}`.
    #[error("invalid cgroup name {name:?}: {why}")]
    InvalidName {
        /// The refused name (as given).
        name: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A limit is out of range.
    #[error("invalid limits: {0}")]
    InvalidLimits(String),
    /// `labfy/<name>` already exists (a live run, or a leftover for
    /// [`sweep_stale`]); it is never adopted.
    #[error("cgroup labfy/{0} already exists")]
    Exists(String),
    /// A limit was written but does not read back (cgroups-rs ignores some
    /// write errors, so every limit is checked).
    #[error("limit not applied: {file} reads {found}, wanted {wanted}")]
    LimitNotApplied {
        /// The cgroupfs file.
        file: &'static str,
        /// What was asked.
        wanted: String,
        /// What the kernel reports.
        found: String,
    },
    /// Processes were still in the cgroup after the bounded wait.
    #[error("cgroup labfy/{name} still holds {remaining} process(es) after {waited:?}")]
    Busy {
        /// The cgroup name.
        name: String,
        /// How many processes remained.
        remaining: usize,
        /// How long it waited.
        waited: Duration,
    },
    /// A cgroups-rs operation failed for another reason.
    #[error("cgroup {op} failed: {source}")]
    Cgroup {
        /// What was being done.
        op: &'static str,
        /// The cgroups-rs error (its source holds the OS error).
        #[source]
        source: CgroupsRsError,
    },
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Maps a cgroups-rs error: permission, read-only or missing-file causes mean
/// confinement is unavailable here; the rest is reported as it is.
fn classify(op: &'static str, error: CgroupsRsError) -> CgroupError {
    let os = std::error::Error::source(&error)
        .and_then(|cause| cause.downcast_ref::<io::Error>())
        .and_then(io::Error::raw_os_error);
    let why = match os {
        Some(libc::EROFS) => "the cgroup hierarchy is mounted read-only",
        Some(libc::EACCES | libc::EPERM) => {
            "permission denied writing cgroupfs (the sub-tree is neither root's to give nor delegated to this user)"
        }
        Some(libc::ENOENT) => "a controller file is missing (controller or kernel feature not available)",
        _ => return CgroupError::Cgroup { op, source: error },
    };
    CgroupError::Unavailable(format!("{op}: {why} ({error})"))
}

/// Which cgroup hierarchy a confinement lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hierarchy {
    /// One hierarchy per controller (`/sys/fs/cgroup/<controller>/`).
    V1,
    /// The unified hierarchy (`/sys/fs/cgroup/`).
    V2,
}

/// What a confinement has used so far. A field is `None` where the kernel
/// does not offer it or it cannot be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Memory charged now, bytes (v1 `memory.usage_in_bytes`, v2 `memory.current`).
    pub memory_current: Option<u64>,
    /// Highest memory charged, bytes (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`).
    pub memory_peak: Option<u64>,
    /// Processes killed by the OOM killer (v1 `memory.oom_control` `oom_kill`,
    /// v2 `memory.events` `oom_kill`).
    pub oom_kills: Option<u64>,
    /// Processes (tasks) in the cgroup now (`pids.current`).
    pub pids_current: Option<u64>,
    /// Forks refused because `pids_max` was reached (`pids.events` `max`).
    pub pids_limit_hits: Option<u64>,
    /// CPU time used, nanoseconds (v1 `cpuacct.usage`, v2 `cpu.stat` `usage_usec`).
    pub cpu_usage_ns: Option<u64>,
}

/// Names of the cgroups this process holds, so [`sweep_stale`] and a second
/// [`Confinement::create`] of the same name keep off them.
static LIVE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn live() -> MutexGuard<'static, BTreeSet<String>> {
    // A panic elsewhere while holding the set leaves it consistent (insert/remove only).
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A name held in [`LIVE`] for as long as its confinement exists.
#[derive(Debug)]
struct Reservation(String);

impl Reservation {
    fn take(name: &str) -> Result<Self, CgroupError> {
        if live().insert(name.to_owned()) {
            Ok(Self(name.to_owned()))
        } else {
            Err(CgroupError::Exists(name.to_owned()))
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        live().remove(&self.0);
    }
}

/// Checks a cgroup name: `[a-z0-9-]`, 1 to [`MAX_NAME_LEN`] bytes. The name
/// becomes a path component in every hierarchy, so nothing else is allowed
/// (no `/`, no `.`, no upper case).
pub fn validate_name(name: &str) -> Result<(), CgroupError> {
    let refuse = |why| Err(CgroupError::InvalidName { name: name.chars().take(MAX_NAME_LEN + 8).collect(), why });
    if name.is_empty() {
        return refuse("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return refuse("it is longer than 64 bytes");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return refuse("only a-z, 0-9 and - are allowed");
    }
    Ok(())
}

#[allow(unsafe_code)]
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions, touches no memory and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Sends SIGKILL to `pid`; a process already gone is not an error.
#[allow(unsafe_code)]
fn sigkill(pid: u32) -> Result<(), CgroupError> {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return Ok(()) };
    if pid <= 0 {
        return Ok(()); // never signal a process group or every process
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ESRCH) => Ok(()),
        _ => Err(CgroupError::Io { op: format!("kill -9 {pid}"), source: error }),
    }
}

/// The tree the governor was started with ([`install`]); `None` until then.
static TREE: OnceLock<Result<Tree, String>> = OnceLock::new();

/// Resolves `spec` once, at governor start, into the tree every later
/// confinement of this process uses. A tree that cannot be resolved is kept
/// as its reason: each model start and sandbox run is then refused with it.
pub fn install(spec: &TreeSpec) -> Result<Tree, CgroupError> {
    // Kept as the reason's words, re-wrapped on each use (not its Display,
    // which would say "unavailable" twice).
    let resolved = TREE.get_or_init(|| {
        Tree::resolve(spec).map_err(|e| match e {
            CgroupError::Unavailable(why) => why,
            other => other.to_string(),
        })
    });
    resolved.clone().map_err(CgroupError::Unavailable)
}

/// The tree installed at start, or (in a process that installed none, such
/// as a test) the one `auto` names.
pub fn configured() -> Result<Tree, CgroupError> {
    match TREE.get() {
        Some(resolved) => resolved.clone().map_err(CgroupError::Unavailable),
        None => Tree::resolve(&TreeSpec::Auto),
    }
}

/// Checks that confinement is possible in the configured tree and creates
/// the shared `labfy` parent once (later calls reuse it). The governor calls
/// it at start and before each model start, and refuses to run what it
/// cannot confine.
pub fn probe() -> Result<Hierarchy, CgroupError> {
    let tree = configured()?;
    tree.prepare(&["memory", "cpu", "pids"])?;
    Ok(tree.version())
}

/// One cgroup, `labfy/<name>`, with its limits (SPEC Q3).
///
/// Dropping it without [`Confinement::delete`] kills what is inside and
/// removes it, best effort (failures are logged, never a panic).
#[derive(Debug)]
pub struct Confinement {
    name: String,
    cgroup: Cgroup,
    hierarchy: Hierarchy,
    /// Each attached controller's directory (one on v2).
    dirs: Vec<PathBuf>,
    /// Set once removal was attempted, so `Drop` does not try again.
    removed: bool,
    /// Released after the directory is gone (fields drop after `Drop::drop`).
    _reservation: Reservation,
}

impl Confinement {
    /// Creates `labfy/<name>` with `limits` in the configured tree
    /// ([`install`]), before any process is in it. See [`Confinement::create_in`].
    pub fn create(name: &str, limits: &Limits) -> Result<Self, CgroupError> {
        // Bad input is refused as such before the tree is even looked for.
        validate_name(name)?;
        limits.validate()?;
        Self::create_in(&configured()?, name, limits)
    }

    /// Creates `labfy/<name>` with `limits` in `tree`, before any process is
    /// in it: [`Confinement::make`], then [`Unlimited::limit`].
    pub fn create_in(tree: &Tree, name: &str, limits: &Limits) -> Result<Self, CgroupError> {
        Self::make(tree, name, limits)?.limit()
    }

    /// The first half of [`Confinement::create_in`]: the directories, with
    /// no limit written yet (and so no way for a process to join).
    ///
    /// Steps, in order:
    /// 1. refuse a bad name or limits before touching the filesystem;
    /// 2. make the tree ready (its controllers offered, enabled below its
    ///    root on v2, the `labfy` parent made): refused with the reason when a
    ///    controller the limits need is missing or the tree is not ours;
    /// 3. reserve the name in this process and refuse one that exists on disk;
    /// 4. make the directory in each attached hierarchy (where the kernel
    ///    makes its control files).
    pub fn make(tree: &Tree, name: &str, limits: &Limits) -> Result<Unlimited, CgroupError> {
        // 1. Input first: the name becomes a path component in every
        //    hierarchy, and a limit the kernel would clamp must not pass silently.
        validate_name(name)?;
        limits.validate()?;

        // 2. A missing controller means a limit could not be enforced; a tree
        //    that is not ours (no root, no delegation) cannot take a process.
        let attached = tree.prepare(&limits.required_controllers())?;

        // 3. Hold the name before the directory exists, so `sweep_stale` in
        //    this process never takes a cgroup being set up. An existing
        //    directory is never adopted: its processes would share our limits.
        let reservation = Reservation::take(name)?;
        let path = format!("{PARENT}/{name}");
        let mut dirs = tree.dirs_of(&path, &attached);
        if dirs.iter().any(|dir| dir.exists()) {
            return Err(CgroupError::Exists(name.to_owned()));
        }

        // 4. From the first directory on, `Drop` removes what was made.
        dirs.sort();
        let mut confinement = Self {
            name: name.to_owned(),
            cgroup: tree.load(&path, &attached),
            hierarchy: tree.version(),
            dirs: Vec::new(),
            removed: false,
            _reservation: reservation,
        };
        for dir in &dirs {
            tree::make_dir(dir, false)?;
            confinement.dirs.push(dir.clone());
        }
        tracing::debug!(cgroup = %path, tree = %tree, "cgroup made");
        Ok(Unlimited { confinement, limits: limits.clone() })
    }

    /// Reads the limits back; handles a kernel without swap accounting.
    fn verify(&self, limits: &Limits) -> Result<(), CgroupError> {
        let Some(mem) = self.cgroup.controller_of::<MemController>() else {
            return Err(CgroupError::Unavailable("no memory controller attached".to_owned()));
        };
        let memory_file = if self.hierarchy == Hierarchy::V1 { "memory.limit_in_bytes" } else { "memory.max" };
        let Some(stat) = memory_stat(mem) else {
            return Err(CgroupError::LimitNotApplied {
                file: memory_file,
                wanted: limits.memory_max.to_string(),
                found: "an unreadable memory statistics set".to_owned(),
            });
        };
        // The kernel rounds a limit down to whole pages: at most what was asked.
        let wanted = i64::try_from(limits.memory_max).unwrap_or(i64::MAX);
        if !(1..=wanted).contains(&stat.limit_in_bytes) {
            return Err(CgroupError::LimitNotApplied {
                file: memory_file,
                wanted: wanted.to_string(),
                found: stat.limit_in_bytes.to_string(),
            });
        }
        let swap = limits.swap_max.unwrap_or(0);
        match self.hierarchy {
            Hierarchy::V1 if mem.path().join("memory.memsw.limit_in_bytes").exists() => {
                let wanted = i64::try_from(limits.memory_max.saturating_add(swap)).unwrap_or(i64::MAX);
                let found = mem.memswap().limit_in_bytes;
                if !(stat.limit_in_bytes..=wanted).contains(&found) {
                    return Err(CgroupError::LimitNotApplied {
                        file: "memory.memsw.limit_in_bytes",
                        wanted: wanted.to_string(),
                        found: found.to_string(),
                    });
                }
            }
            Hierarchy::V2 if mem.path().join("memory.swap.max").exists() => {
                // Raw read: cgroups-rs reads "max" (no limit) as 0, which would pass.
                let found = read_trimmed(&mem.path().join("memory.swap.max")).unwrap_or_default();
                if found.parse::<u64>().map_or(true, |n| n > swap) {
                    return Err(CgroupError::LimitNotApplied {
                        file: "memory.swap.max",
                        wanted: swap.to_string(),
                        found,
                    });
                }
            }
            // No swap accounting in this kernel: the swap limit cannot be written.
            _ if system_swap_total() == Some(0) => {} // no swap on this machine: nothing to limit
            Hierarchy::V1 if limits.swap_max.is_none() => {
                // v1 without memsw: swappiness 0 keeps this cgroup's memory out of swap.
                mem.set_swappiness(0).map_err(|e| classify("set memory.swappiness", e))?;
            }
            _ => {
                return Err(CgroupError::Unavailable(
                    "swap accounting is off in this kernel and the machine has swap: a swap limit cannot be enforced"
                        .to_owned(),
                ));
            }
        }
        Ok(())
    }

    /// The cgroup's name (the part after `labfy/`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hierarchy it lives in.
    pub fn hierarchy(&self) -> Hierarchy {
        self.hierarchy
    }

    /// Its directory in each attached hierarchy (one on v2).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// What a child runs between `fork` and `exec` to join this cgroup,
    /// prepared now so that the child allocates nothing.
    pub fn joiner(&self) -> ChildJoin {
        ChildJoin { procs: self.procs_files() }
    }

    /// Each attached controller's `cgroup.procs`, as C strings: what a
    /// confined child writes itself into between `clone` and `exec` (raw
    /// file writes by design: only async-signal-safe calls are allowed
    /// there, so no cgroups-rs).
    pub fn procs_files(&self) -> Vec<CString> {
        self.dirs.iter().filter_map(|dir| CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).ok()).collect()
    }

    /// What the cgroup has used so far (read through cgroups-rs except v2 `memory.events`).
    pub fn usage(&self) -> Usage {
        let mut usage = Usage::default();
        if let Some(mem) = self.cgroup.controller_of::<MemController>()
            && let Some(stat) = memory_stat(mem)
        {
            // cgroups-rs reports an unreadable file as 0: a file's presence
            // tells a real 0 from "not offered".
            let has = |file: &str| mem.path().join(file).exists();
            match self.hierarchy {
                Hierarchy::V1 => {
                    usage.memory_current = has("memory.usage_in_bytes").then_some(stat.usage_in_bytes);
                    usage.memory_peak = has("memory.max_usage_in_bytes").then_some(stat.max_usage_in_bytes);
                    usage.oom_kills = has("memory.oom_control").then_some(stat.oom_control.oom_kill);
                }
                Hierarchy::V2 => {
                    usage.memory_current = has("memory.current").then_some(stat.usage_in_bytes);
                    usage.memory_peak = has("memory.peak").then_some(stat.max_usage_in_bytes);
                    // Raw read: cgroups-rs does not read `memory.events`.
                    usage.oom_kills =
                        read_trimmed(&mem.path().join("memory.events")).and_then(|text| keyed_value(&text, "oom_kill"));
                }
            }
        }
        if let Some(pids) = self.cgroup.controller_of::<PidController>() {
            usage.pids_current = pids.get_pid_current().ok();
            usage.pids_limit_hits = pids.get_pid_events().ok();
        }
        usage.cpu_usage_ns = match self.hierarchy {
            Hierarchy::V1 => self
                .cgroup
                .controller_of::<CpuAcctController>()
                .filter(|acct| acct.path().join("cpuacct.usage").exists())
                .map(|acct| acct.cpuacct().usage),
            Hierarchy::V2 => self
                .cgroup
                .controller_of::<CpuController>()
                .and_then(|cpu| keyed_value(&cpu.cpu().stat, "usage_usec"))
                .map(|usec| usec.saturating_mul(1000)),
        };
        usage
    }

    /// The processes in the cgroup now (every attached hierarchy, deduplicated).
    pub fn pids(&self) -> Vec<u32> {
        self.cgroup.procs().into_iter().filter_map(|p| u32::try_from(p.pid).ok()).filter(|&p| p != 0).collect()
    }

    /// Sends SIGKILL to everything in the cgroup (v2: `cgroup.kill` where the
    /// kernel has it). Returns once the cgroup is empty or after a few
    /// rounds; [`Confinement::delete`] waits for the stragglers.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        // v2 (5.14+): the kernel kills every member atomically, forks included.
        if self.hierarchy == Hierarchy::V2 {
            match self.cgroup.kill() {
                Ok(()) => return Ok(()),
                Err(e) if *e.kind() == CgroupsRsErrorKind::InvalidOperation => {} // no cgroup.kill: signal each
                Err(e) => return Err(classify("cgroup.kill", e)),
            }
        }
        // v1: signal each listed process, round after round, so that a child
        // forked during a round is killed in the next; pids.max bounds how
        // many can appear. (A pid read here could in theory exit and be reused
        // before the signal; v1 offers no race-free way besides the freezer.)
        for _ in 0..KILL_ROUNDS {
            let pids = self.pids();
            if pids.is_empty() {
                return Ok(());
            }
            for pid in pids {
                sigkill(pid)?;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        Ok(())
    }

    /// Kills what remains, waits (at most [`DELETE_WAIT`]) until the cgroup
    /// is empty and removes its directory from every hierarchy. Blocking: call
    /// it from `spawn_blocking` in async code.
    pub fn delete(mut self) -> Result<(), CgroupError> {
        self.removed = true; // whatever happens, Drop does not try again
        self.remove(DELETE_WAIT)
    }

    fn remove(&self, wait: Duration) -> Result<(), CgroupError> {
        if self.dirs.is_empty() {
            return Ok(()); // creation failed before any directory was made
        }
        // 1. Kill what remains: a run that ended cleanly leaves nothing, a
        //    crash may leave grandchildren behind.
        self.kill_all()?;
        // 2. rmdir fails (EBUSY) while a process is listed: wait, bounded,
        //    killing any straggler that was forked meanwhile. (A zombie is not
        //    listed: an unreaped child does not hold the cgroup.)
        let start = Instant::now();
        loop {
            let left = self.pids();
            if left.is_empty() {
                break;
            }
            if start.elapsed() >= wait {
                return Err(CgroupError::Busy { name: self.name.clone(), remaining: left.len(), waited: wait });
            }
            for pid in left {
                sigkill(pid)?;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        // 3. Remove the directory in every hierarchy (cgroups-rs retries the
        //    rmdir with back-off), then check that none is left.
        self.cgroup.delete().map_err(|e| classify("delete", e))?;
        if let Some(left) = self.dirs.iter().find(|dir| dir.exists()) {
            return Err(CgroupError::Io {
                op: format!("remove {}", left.display()),
                source: io::Error::other("the directory is still there after rmdir"),
            });
        }
        tracing::debug!(cgroup = %self.cgroup.path(), "confinement removed");
        Ok(())
    }
}

/// A cgroup made by [`Confinement::make`], its limits not yet written: it
/// offers no joiner, so nothing can run in it unlimited. Dropping it removes
/// the directories.
#[derive(Debug)]
pub struct Unlimited {
    confinement: Confinement,
    limits: Limits,
}

impl Unlimited {
    /// Its directory in each attached hierarchy (one on v2).
    pub fn dirs(&self) -> &[PathBuf] {
        self.confinement.dirs()
    }

    /// Writes the limits (cgroups-rs) and reads every one back: cgroups-rs
    /// ignores errors of the memory writes (and checks the CPU and pids ones).
    pub fn limit(self) -> Result<Confinement, CgroupError> {
        let Self { confinement, limits } = self;
        let resources = resources(&limits, confinement.hierarchy);
        confinement.cgroup.apply(&resources).map_err(|e| classify("write the limits", e))?;
        confinement.verify(&limits)?;
        tracing::info!(cgroup = %confinement.cgroup.path(), memory_max = limits.memory_max, swap_max = ?limits.swap_max,
            cpu_quota_percent = ?limits.cpu_quota_percent, cpu_weight = ?limits.cpu_weight,
            pids_max = ?limits.pids_max, "confinement created");
        Ok(confinement)
    }
}

impl Drop for Confinement {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        if let Err(error) = self.remove(DROP_WAIT) {
            tracing::warn!(cgroup = %self.cgroup.path(), %error, "could not remove a dropped confinement");
        }
    }
}

/// `MemController::memory_stat`, guarded: its parsers (`memory.numa_stat`,
/// `memory.stat`, `memory.oom_control`) unwrap, and a kernel format they do
/// not expect must cost a sample, not the daemon.
fn memory_stat(mem: &MemController) -> Option<Memory> {
    std::panic::catch_unwind(AssertUnwindSafe(|| mem.memory_stat())).ok()
}

/// The limits as cgroups-rs resources (units converted per hierarchy).
fn resources(limits: &Limits, hierarchy: Hierarchy) -> Resources {
    let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX); // validated: never clamps
    let swap = limits.swap_max.unwrap_or(0);
    let memsw = match hierarchy {
        Hierarchy::V1 => limits.memory_max.saturating_add(swap), // memory + swap
        Hierarchy::V2 => swap,                                   // swap alone
    };
    let mut resources = Resources::default();
    resources.memory.memory_hard_limit = Some(to_i64(limits.memory_max));
    resources.memory.memory_swap_limit = Some(to_i64(memsw));
    if let Some(percent) = limits.cpu_quota_percent {
        let quota_us = u64::from(percent) * CPU_PERIOD_US / 100;
        resources.cpu.period = Some(CPU_PERIOD_US);
        resources.cpu.quota = Some(to_i64(quota_us));
    }
    if let Some(weight) = limits.cpu_weight {
        // cgroups-rs writes `shares` as is: v1 cpu.shares, v2 cpu.weight.
        resources.cpu.shares = Some(if hierarchy == Hierarchy::V1 { weight_to_shares(weight) } else { weight });
    }
    if let Some(pids) = limits.pids_max {
        resources.pid.maximum_number_of_processes = Some(MaxValue::Value(to_i64(pids)));
    }
    resources
}

/// Removes `labfy/*` cgroups left by an earlier run that crashed: those not
/// held by this process, with no process inside, and older than
/// [`STALE_MIN_AGE`]. Returns the names removed; a leftover that still holds
/// processes is logged and kept (it may be an orphaned server: kill it first).
pub fn sweep_stale() -> Vec<String> {
    match configured() {
        Ok(tree) => sweep_stale_in(&tree),
        Err(_) => Vec::new(), // nothing of ours to sweep
    }
}

/// [`sweep_stale`] in `tree`.
pub fn sweep_stale_in(tree: &Tree) -> Vec<String> {
    let Ok(attached) = tree.offered() else { return Vec::new() };
    // Held for the whole sweep: no `create` in this process can start
    // setting up a cgroup between the check and the removal.
    let live = live();
    let mut candidates: BTreeSet<String> = BTreeSet::new();
    for root in tree.roots() {
        let Ok(entries) = std::fs::read_dir(root.join(PARENT)) else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir())
                && let Some(name) = entry.file_name().to_str()
                && validate_name(name).is_ok()
                && !live.contains(name)
            {
                candidates.insert(name.to_owned());
            }
        }
    }
    let mut removed = Vec::new();
    for name in candidates {
        let path = format!("{PARENT}/{name}");
        let cgroup = tree.load(&path, &attached);
        let dirs = tree.dirs_of(&path, &attached);
        if dirs.iter().any(|dir| modified_within(dir, STALE_MIN_AGE)) {
            continue; // young: maybe being set up by another process
        }
        let procs = cgroup.procs();
        if !procs.is_empty() {
            tracing::warn!(cgroup = %path, processes = procs.len(), "leftover cgroup still holds processes; kept");
            continue;
        }
        match cgroup.delete() {
            Ok(()) => removed.push(name),
            Err(error) => tracing::warn!(cgroup = %path, %error, "could not remove a leftover cgroup"),
        }
    }
    if !removed.is_empty() {
        tracing::info!(removed = ?removed, "stale cgroups removed");
    }
    removed
}

/// Whether `dir` exists and was modified (for a cgroup: created) less than
/// `age` ago. An unreadable time counts as young, so it is kept.
fn modified_within(dir: &Path, age: Duration) -> bool {
    match std::fs::metadata(dir).and_then(|m| m.modified()) {
        Ok(time) => SystemTime::now().duration_since(time).map_or(true, |elapsed| elapsed < age),
        Err(error) => error.kind() != io::ErrorKind::NotFound,
    }
}

/// Reads a small file, trimmed. Raw access, used only where cgroups-rs lacks the item.
fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|text| text.trim().to_owned())
}

/// The value of `key` in a flat-keyed file (`key value` per line).
fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(char::is_whitespace)?;
        if k == key { v.trim().parse().ok() } else { None }
    })
}

/// The machine's total swap in bytes, from `/proc/meminfo` (raw: cgroups-rs
/// does not read it). Used only when the kernel has no swap accounting.
fn system_swap_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = text.lines().find_map(|line| line.strip_prefix("SwapTotal:"))?.trim().trim_end_matches("kB").trim();
    kib.parse::<u64>().ok().map(|k| k.saturating_mul(1024))
}

/// What a child runs between `fork` and `exec` to join its cgroup: it writes
/// `0` (meaning "the writing process") to each attached controller's
/// `cgroup.procs`. Owns the paths as C strings, so [`ChildJoin::join`]
/// allocates nothing.
#[derive(Debug, Clone)]
pub struct ChildJoin {
    procs: Vec<CString>,
}

impl ChildJoin {
    /// Moves the calling process into the cgroup. Call only in the child
    /// between `fork` and `exec` (e.g. from `CommandExt::pre_exec`): it uses
    /// only `open`, `write` and `close`, which are async-signal-safe. An error
    /// makes the spawn fail, so the program never runs unconfined.
    pub fn join(&self) -> io::Result<()> {
        if self.procs.is_empty() {
            // Nothing to join would mean running unconfined: refuse.
            return Err(io::ErrorKind::NotFound.into());
        }
        labfy_sys::steps::join_cgroups(&self.procs)
    }
}

/// Why a confined process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitCause {
    /// It exited with this code.
    Exited(i32),
    /// The kernel's OOM killer killed it: it reached its cgroup's memory limit.
    OomKilled,
    /// A signal killed it (not the OOM killer, or it could not be told).
    Signal(i32),
}

impl fmt::Display for ExitCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited(0) => write!(f, "the process exited normally (code 0)"),
            Self::Exited(code) => write!(f, "the process exited with code {code}"),
            Self::OomKilled => write!(
                f,
                "the process was killed by the kernel's OOM killer: it reached the memory limit of its cgroup"
            ),
            Self::Signal(signal) => match signal_name(*signal) {
                Some(name) => write!(f, "the process was killed by signal {signal} ({name})"),
                None => write!(f, "the process was killed by signal {signal}"),
            },
        }
    }
}

fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

/// Why a confined process ended, from its wait status and the cgroup's usage
/// read before it started and after it ended: SIGKILL with a risen `oom_kill`
/// counter is an OOM kill (`memory.failcnt` is no evidence: it stays 0 on v1);
/// SIGKILL without one (or with an unreadable counter) is a plain signal.
pub fn exit_cause(status: ExitStatus, before: &Usage, after: &Usage) -> ExitCause {
    if let Some(code) = status.code() {
        return ExitCause::Exited(code);
    }
    let oom_rose = matches!((before.oom_kills, after.oom_kills), (Some(b), Some(a)) if a > b);
    match status.signal() {
        Some(libc::SIGKILL) if oom_rose => ExitCause::OomKilled,
        Some(signal) => ExitCause::Signal(signal),
        // A stop/continue report: `wait` never returns one for an ended process.
        None => ExitCause::Signal(status.stopped_signal().unwrap_or(libc::SIGCONT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule_at_the_edges() {
        assert!(validate_name("a").is_ok());
        assert!(validate_name("llama-0-9").is_ok());
        assert!(validate_name(&"a".repeat(MAX_NAME_LEN)).is_ok());
        for bad in ["", "..", ".", "/", "a/b", "A", "llama_1", "a b", "é"] {
            assert!(matches!(validate_name(bad), Err(CgroupError::InvalidName { .. })), "{bad:?} accepted");
        }
        assert!(validate_name(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
    }

    #[test]
    fn limits_are_bounded() {
        assert!(Limits::memory(MIN_MEMORY_MAX).validate().is_ok());
        assert!(Limits::memory(MIN_MEMORY_MAX - 1).validate().is_err());
        let ok = Limits {
            memory_max: 1 << 30,
            swap_max: Some(1 << 30),
            cpu_quota_percent: Some(MAX_CPU_QUOTA_PERCENT),
            cpu_weight: Some(*CPU_WEIGHT_RANGE.end()),
            pids_max: Some(MAX_PIDS),
        };
        assert!(ok.validate().is_ok());
        let over = |f: fn(&mut Limits)| {
            let mut l = ok.clone();
            f(&mut l);
            l.validate().is_err()
        };
        assert!(over(|l| l.swap_max = Some(u64::MAX)));
        assert!(over(|l| l.cpu_quota_percent = Some(0)));
        assert!(over(|l| l.cpu_quota_percent = Some(MAX_CPU_QUOTA_PERCENT + 1)));
        assert!(over(|l| l.cpu_weight = Some(0)));
        assert!(over(|l| l.cpu_weight = Some(CPU_WEIGHT_RANGE.end() + 1)));
        assert!(over(|l| l.pids_max = Some(0)));
        assert!(over(|l| l.pids_max = Some(MAX_PIDS + 1)));
    }

    #[test]
    fn weight_maps_to_shares() {
        assert_eq!(weight_to_shares(100), 1024);
        assert_eq!(weight_to_shares(1), 10);
        assert_eq!(weight_to_shares(10_000), 102_400);
    }

    #[test]
    fn required_controllers_follow_the_limits() {
        assert_eq!(Limits::memory(1 << 20).required_controllers(), ["memory"]);
        let all = Limits { cpu_weight: Some(100), pids_max: Some(8), ..Limits::memory(1 << 20) };
        assert_eq!(all.required_controllers(), ["memory", "cpu", "pids"]);
    }

    #[test]
    fn keyed_files_parse() {
        let events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(keyed_value(events, "oom_kill"), Some(1));
        assert_eq!(keyed_value(events, "oom"), Some(1));
        assert_eq!(keyed_value(events, "missing"), None);
        assert_eq!(keyed_value("usage_usec 1500\nuser_usec 1000\n", "usage_usec"), Some(1500));
    }

    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Confinement>();
        send_sync::<ChildJoin>();
    }

    #[test]
    fn an_empty_joiner_refuses() {
        assert!(ChildJoin { procs: Vec::new() }.join().is_err());
    }

    #[test]
    fn causes_read_as_sentences() {
        assert_eq!(ExitCause::Exited(0).to_string(), "the process exited normally (code 0)");
        assert_eq!(ExitCause::Signal(9).to_string(), "the process was killed by signal 9 (SIGKILL)");
        assert!(ExitCause::OomKilled.to_string().contains("OOM killer"));
        assert_eq!(ExitCause::Signal(64).to_string(), "the process was killed by signal 64");
    }
}
