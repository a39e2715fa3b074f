//! `sandbox.exec` runs (SPEC X1): a program of the operator's allow-list,
//! admitted by the ledger, confined in a cgroup of its own (memory with no
//! swap, processes, one core) and by the shared confinement sequence
//! (`labfy_sys::Jail`) with **no network at all** — a network namespace of
//! its own where not even loopback is up — as an unprivileged uid (root's
//! governor) or, as the service user, in a user namespace of its own.
//!
//! What the run sees:
//! - `/input`: the files it was given (evidence texts), read-only;
//! - `/script/main`: the script, read-only (the command's `{script}`);
//! - `/work`: its working directory, a tmpfs of its own mount namespace,
//!   bounded by the kernel (bytes and files), handed to the governor as a
//!   descriptor before the program starts (`Jail::export_dir`): its files
//!   are read back after the run and offered — never stored — as untrusted
//!   data. No mount is made on the host, so no privilege is needed;
//! - `/tmp`: a private tmpfs; the system's programs and libraries,
//!   read-only; nothing else of the host.
//!
//! Bounds: time (the call's, at most [`MAX_SANDBOX_MS`]), output (the
//! first [`MAX_SANDBOX_STREAM_BYTES`] of each stream kept, the run stopped
//! past [`STREAM_STOP_BYTES`] in all), memory ([`MEMORY_MAX`], tmpfs pages
//! included: the kernel's OOM killer ends it), processes ([`PIDS_MAX`]),
//! files written ([`WORK_BYTES`], [`WORK_FILES`]). Each stop says which.
//!
//! The server, assumed compromised, can only choose a *name* of the list
//! and give data: the program, the confinement and the bounds are the
//! governor's.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use labfy_ipc::messages::FailureCode;
use labfy_ipc::messages::governor::{
    MAX_SANDBOX_ARG_BYTES, MAX_SANDBOX_ARGS, MAX_SANDBOX_FILE_BYTES, MAX_SANDBOX_FILES, MAX_SANDBOX_INPUT_BYTES,
    MAX_SANDBOX_INPUTS, MAX_SANDBOX_MS, MAX_SANDBOX_STREAM_BYTES, SandboxEnd, SandboxFile, SandboxProgram,
    SandboxReport, SandboxRun, SandboxStatus, SandboxStream,
};
use labfy_sys::seccomp::{Policy, Sockets};
use labfy_sys::{ConfinedChild, Jail, Root, SpawnError, Tmpfs};
use sha2::{Digest, Sha256};
use std::os::fd::OwnedFd;

use crate::cgroup::{self, Confinement, ExitCause, Limits};

/// The uid a run has under a root governor (`nobody`): it owns `/work` and
/// nothing else. Under the service user a run keeps that user's ids, in a
/// user namespace of its own.
pub const SANDBOX_UID: u32 = 65_534;
/// Memory of a run's cgroup, tmpfs pages included; no swap.
pub const MEMORY_MAX: u64 = 512 * 1024 * 1024;
/// Processes and threads alive at once.
pub const PIDS_MAX: u64 = 64;
/// CPU: one core at most.
pub const CPU_QUOTA_PERCENT: u32 = 100;
/// Bytes a run may write in `/work` (a tmpfs: the kernel refuses more).
pub const WORK_BYTES: u64 = 32 * 1024 * 1024;
/// Files (inodes) in `/work`.
pub const WORK_FILES: u64 = 256;
/// Size of the private `/tmp`.
pub const TMP_BYTES: u64 = 16 * 1024 * 1024;
/// Output, both streams together, past which the run is stopped.
pub const STREAM_STOP_BYTES: u64 = 16 * 1024 * 1024;
/// Open files per process.
const NOFILE: u64 = 256;
/// Depth of `/work` read back.
const WORK_DEPTH: usize = 4;
/// Longest wait for the stream readers after the run ended.
const DRAIN_WAIT: Duration = Duration::from_secs(2);
/// Priority of a run in the ledger (campaigns default higher).
pub const SANDBOX_PRIORITY: u8 = 40;
/// The placeholder of a command that stands for the script's path.
pub const SCRIPT_PLACEHOLDER: &str = "{script}";
/// Where the script is inside a run.
pub const SCRIPT_PATH: &str = "/script/main";
/// Longest program name.
const MAX_NAME: usize = 32;
/// The programs offered when the operator names none, where installed: Python
/// with its standard library (isolated mode, no user site, no bytecode
/// written) and jq.
pub const DEFAULT_PROGRAMS: &[&str] = &["python3=/usr/bin/python3 -I -B {script}", "jq=/usr/bin/jq -f {script}"];

/// One program of the allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The name a call gives.
    pub name: String,
    /// The program, an absolute path.
    pub program: PathBuf,
    /// Its arguments; [`SCRIPT_PLACEHOLDER`] stands for the script.
    pub args: Vec<String>,
}

impl Allowed {
    /// `name=/abs/program arg… {script} …` (words split on spaces).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let (name, command) = spec.split_once('=').ok_or_else(|| format!("{spec:?} is not name=/path/to/program …"))?;
        let name = name.trim();
        let ok_name = !name.is_empty()
            && name.len() <= MAX_NAME
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && name.as_bytes()[0].is_ascii_alphanumeric();
        if !ok_name {
            return Err(format!(
                "sandbox program name {name:?}: 1–{MAX_NAME} of a-z 0-9 . _ -, starting with a letter or digit"
            ));
        }
        let mut words = command.split_whitespace();
        let program = PathBuf::from(words.next().ok_or_else(|| format!("sandbox program {name}: no command"))?);
        if !program.is_absolute() {
            return Err(format!("sandbox program {name}: {} is not an absolute path", program.display()));
        }
        let args: Vec<String> = words.map(str::to_owned).collect();
        if args.len() > MAX_SANDBOX_ARGS {
            return Err(format!("sandbox program {name}: more than {MAX_SANDBOX_ARGS} arguments"));
        }
        Ok(Self { name: name.to_owned(), program, args })
    }

    /// Whether its command takes a script.
    pub fn takes_script(&self) -> bool {
        self.args.iter().any(|a| a == SCRIPT_PLACEHOLDER)
    }

    fn published(&self) -> SandboxProgram {
        let mut command = vec![self.program.display().to_string()];
        command.extend(self.args.iter().cloned());
        SandboxProgram { name: self.name.clone(), command }
    }
}

/// The allow-list and where runs are prepared.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The programs, in the operator's order.
    pub programs: Vec<Allowed>,
    /// Why there are none, when there are none.
    pub none_because: String,
    /// Where each run's directories are made (`<scratch>/sandbox`).
    pub dir: PathBuf,
}

impl SandboxSettings {
    /// From the operator's specs: `none` alone turns the sandbox off; no
    /// spec at all offers [`DEFAULT_PROGRAMS`] that are installed. A named
    /// program that is not an executable file is an error: the operator
    /// meant it.
    pub fn from_specs(specs: &[String], dir: PathBuf) -> Result<Self, String> {
        if specs.iter().any(|s| s.trim() == "none") {
            if specs.len() > 1 {
                return Err("--sandbox-program none cannot be combined with programs".into());
            }
            return Ok(Self { programs: Vec::new(), none_because: "the operator turned it off".into(), dir });
        }
        let mut programs: Vec<Allowed> = Vec::new();
        if specs.is_empty() {
            for spec in DEFAULT_PROGRAMS {
                let a = Allowed::parse(spec)?;
                if is_executable(&a.program) {
                    programs.push(a);
                }
            }
        } else {
            for spec in specs {
                let a = Allowed::parse(spec)?;
                if !is_executable(&a.program) {
                    return Err(format!(
                        "sandbox program {}: {} is not an executable file",
                        a.name,
                        a.program.display()
                    ));
                }
                if programs.iter().any(|p| p.name == a.name) {
                    return Err(format!("sandbox program {} is named twice", a.name));
                }
                programs.push(a);
            }
        }
        let none_because = if programs.is_empty() {
            "no program is allowed (none of the defaults is installed; give --sandbox-program)".into()
        } else {
            String::new()
        };
        Ok(Self { programs, none_because, dir })
    }

    /// What the state publishes.
    pub fn status(&self) -> SandboxStatus {
        if self.programs.is_empty() {
            return SandboxStatus { ready: false, detail: self.none_because.clone(), programs: Vec::new() };
        }
        let names: Vec<&str> = self.programs.iter().map(|p| p.name.as_str()).collect();
        SandboxStatus {
            ready: true,
            detail: format!(
                "{} — no network, {} MiB, {PIDS_MAX} processes, one core, at most {} s",
                names.join(", "),
                MEMORY_MAX >> 20,
                MAX_SANDBOX_MS / 1000
            ),
            programs: self.programs.iter().map(Allowed::published).collect(),
        }
    }
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How the governor stops a run from outside (memory pressure, SPEC Q4):
/// the reason, then a wake-up.
#[derive(Debug, Default)]
pub struct Stop {
    notify: tokio::sync::Notify,
    reason: std::sync::Mutex<Option<String>>,
}

impl Stop {
    /// Stops the run, saying why.
    pub fn stop(&self, reason: String) {
        *self.reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason);
        self.notify.notify_one();
    }

    fn reason(&self) -> String {
        self.reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone().unwrap_or_else(|| "asked".into())
    }
}

/// Removes the run directories a governor that died mid-run left in
/// `dir` (unmounting their `/work` first); the names of those removed.
pub fn sweep_stale(dir: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return removed };
    for entry in entries.flatten() {
        let path = entry.path();
        let _ = Tmpfs::detach_stale(&path.join("work")); // not mounted: nothing to do
        for d in ["input", "script"] {
            let _ = std::fs::set_permissions(path.join(d), std::fs::Permissions::from_mode(0o700));
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    removed
}

/// A refusal or failure, with its code, before or around a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError {
    /// The IPC failure code.
    pub code: FailureCode,
    /// Why, in one sentence.
    pub message: String,
}

fn refuse(code: FailureCode, message: impl Into<String>) -> RunError {
    RunError { code, message: message.into() }
}

/// A run's request, checked: the program found, the inputs decoded.
#[derive(Debug)]
pub struct Checked {
    allowed: Allowed,
    script: Option<String>,
    args: Vec<String>,
    inputs: Vec<(String, Vec<u8>)>,
    timeout: Duration,
}

fn safe_file_name(name: &str) -> bool {
    (1..=80).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Checks a request against the allow-list and the bounds; refuses by
/// default, saying why.
pub fn check(settings: &SandboxSettings, run: SandboxRun) -> Result<Checked, RunError> {
    if settings.programs.is_empty() {
        return Err(refuse(FailureCode::Unavailable, format!("no sandbox: {}", settings.none_because)));
    }
    let Some(allowed) = settings.programs.iter().find(|p| p.name == run.program) else {
        let names: Vec<&str> = settings.programs.iter().map(|p| p.name.as_str()).collect();
        return Err(refuse(
            FailureCode::Forbidden,
            format!("{:?} is not on the operator's allow-list ({})", run.program, names.join(", ")),
        ));
    };
    match (&run.script, allowed.takes_script()) {
        (None, true) => {
            return Err(refuse(FailureCode::InvalidInput, format!("{} runs a script: give one", allowed.name)));
        }
        (Some(_), false) => {
            return Err(refuse(
                FailureCode::InvalidInput,
                format!("{} takes no script (its command has no {SCRIPT_PLACEHOLDER})", allowed.name),
            ));
        }
        _ => {}
    }
    if !(1..=MAX_SANDBOX_MS).contains(&run.timeout_ms) {
        return Err(refuse(FailureCode::InvalidInput, format!("timeout must be 1 to {MAX_SANDBOX_MS} ms")));
    }
    if run.args.len() > MAX_SANDBOX_ARGS {
        return Err(refuse(FailureCode::InvalidInput, format!("more than {MAX_SANDBOX_ARGS} arguments")));
    }
    if let Some(a) = run.args.iter().find(|a| a.len() > MAX_SANDBOX_ARG_BYTES || a.contains('\0')) {
        return Err(refuse(
            FailureCode::InvalidInput,
            format!("an argument is longer than {MAX_SANDBOX_ARG_BYTES} bytes or holds a NUL ({} bytes)", a.len()),
        ));
    }
    if run.inputs.len() > MAX_SANDBOX_INPUTS {
        return Err(refuse(FailureCode::InvalidInput, format!("more than {MAX_SANDBOX_INPUTS} input files")));
    }
    let mut total = run.script.as_ref().map_or(0, String::len);
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::with_capacity(run.inputs.len());
    for input in run.inputs {
        if !safe_file_name(&input.name) {
            return Err(refuse(
                FailureCode::InvalidInput,
                format!("input file name {:?}: 1–80 of A-Z a-z 0-9 . _ -, not starting with a dot", input.name),
            ));
        }
        if inputs.iter().any(|(n, _)| *n == input.name) {
            return Err(refuse(FailureCode::InvalidInput, format!("input file {} is given twice", input.name)));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(input.data_b64.as_bytes())
            .map_err(|e| refuse(FailureCode::InvalidInput, format!("input file {}: not base64 ({e})", input.name)))?;
        total = total.saturating_add(bytes.len());
        if total > MAX_SANDBOX_INPUT_BYTES {
            return Err(refuse(
                FailureCode::InvalidInput,
                format!("the inputs and script exceed {} KiB, the most a run is given", MAX_SANDBOX_INPUT_BYTES >> 10),
            ));
        }
        inputs.push((input.name, bytes));
    }
    Ok(Checked {
        allowed: allowed.clone(),
        script: run.script,
        args: run.args,
        inputs,
        timeout: Duration::from_millis(run.timeout_ms),
    })
}

/// A run's directories on the host: `input/` and `script/`, removed when
/// dropped (`/work` is the run's own tmpfs).
struct RunDir {
    path: PathBuf,
}

impl RunDir {
    fn make(base: &Path, c: &Checked) -> std::io::Result<Self> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(base)?;
        let path = base.join(uuid::Uuid::new_v4().simple().to_string());
        // Modes are set after creation: `labfy up` runs with umask 077, which
        // would leave the run's uid unable to read its inputs.
        std::fs::DirBuilder::new().mode(0o711).create(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o711))?;
        let dir = Self { path };
        let input = dir.path.join("input");
        let script = dir.path.join("script");
        for d in [&input, &script] {
            std::fs::DirBuilder::new().mode(0o755).create(d)?;
        }
        for (name, bytes) in &c.inputs {
            write_read_only(&input.join(name), bytes)?;
        }
        if let Some(s) = &c.script {
            write_read_only(&script.join("main"), s.as_bytes())?;
        }
        for d in [&input, &script] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o555))?;
        }
        Ok(dir)
    }

    fn input(&self) -> PathBuf {
        self.path.join("input")
    }
    fn script(&self) -> PathBuf {
        self.path.join("script")
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        for d in ["input", "script"] {
            let _ = std::fs::set_permissions(self.path.join(d), std::fs::Permissions::from_mode(0o700));
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(dir = %self.path.display(), error = %e, "could not remove a sandbox run's directory");
        }
    }
}

fn write_read_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o444).open(path)?;
    std::io::Write::write_all(&mut f, bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o444))
}

/// One stream read to its end: the first bytes kept, all counted; past
/// [`STREAM_STOP_BYTES`] in all (both streams), `over` is raised.
fn drain(
    mut from: std::fs::File,
    total: Arc<AtomicU64>,
    over: Arc<AtomicBool>,
) -> std::thread::JoinHandle<SandboxStream> {
    std::thread::spawn(move || {
        let mut kept: Vec<u8> = Vec::new();
        let mut bytes = 0u64;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    bytes += n as u64;
                    let room = MAX_SANDBOX_STREAM_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    if total.fetch_add(n as u64, Ordering::Relaxed) + n as u64 > STREAM_STOP_BYTES {
                        over.store(true, Ordering::Relaxed);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        SandboxStream { text: String::from_utf8_lossy(&kept).into_owned(), bytes }
    })
}

fn spawn(
    c: &Checked,
    dir: &RunDir,
    procs: Vec<std::ffi::CString>,
    out: (i32, i32),
) -> Result<(ConfinedChild, labfy_sys::Confinement), SpawnError> {
    let as_root = cgroup::is_root();
    // SAFETY: geteuid/getegid take no argument and cannot fail.
    #[allow(unsafe_code)]
    let (uid, gid) = if as_root { (SANDBOX_UID, SANDBOX_UID) } else { unsafe { (libc::geteuid(), libc::getegid()) } };
    let mut root = Root::new();
    root.system()?.devices()?.proc()?.tmp(TMP_BYTES)?;
    root.read_only_at(&dir.input(), Path::new("/input"))?;
    root.read_only_at(&dir.script(), Path::new("/script"))?;
    root.tmpfs_at(Path::new("/work"), WORK_BYTES, WORK_FILES, uid, gid)?;
    let program_dir = c.allowed.program.parent().unwrap_or(Path::new("/"));
    root.read_only(program_dir)?;
    let mut jail = Jail::new(&c.allowed.program, root);
    let args: Vec<OsString> = c
        .allowed
        .args
        .iter()
        .map(|a| OsString::from(if a == SCRIPT_PLACEHOLDER { SCRIPT_PATH } else { a.as_str() }))
        .chain(c.args.iter().map(OsString::from))
        .collect();
    jail.args(args)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/work")
        .env("TMPDIR", "/tmp")
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .hostname("labfy-sandbox")?
        .no_network()
        .export_dir(Path::new("/work"))?
        .current_dir(Path::new("/work"))?
        .cgroup(procs)
        .may_write_at(Path::new("/work"))
        .limit(libc::RLIMIT_CORE, 0)
        .limit(libc::RLIMIT_NOFILE, NOFILE)
        .limit(libc::RLIMIT_FSIZE, WORK_BYTES)
        .seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false })
        .streams(out.0, out.1);
    if as_root {
        jail.run_as(SANDBOX_UID, SANDBOX_UID, &[]);
    }
    jail.spawn()
}

/// Kills everything in the run's cgroup, and its first process (the PID
/// namespace's init: the kernel then kills the rest) should the cgroup's
/// kill fall short.
fn stop_run(confinement: &Confinement, child: &ConfinedChild) {
    if let Err(e) = confinement.kill_all() {
        tracing::warn!(error = %e, "could not kill a sandbox run through its cgroup");
    }
    let _ = child.signal(libc::SIGKILL);
}

/// Admitted already: confines, runs and reads back one run. Blocking parts
/// (cgroup creation and removal, file reads) are short; the wait is async.
pub async fn run(
    settings: &SandboxSettings,
    c: Checked,
    reservation: &str,
    stop: &Stop,
) -> Result<SandboxReport, RunError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| refuse(FailureCode::Unavailable, format!("{what}: {e}"));
    let limits = Limits {
        memory_max: MEMORY_MAX,
        swap_max: None,
        cpu_quota_percent: Some(CPU_QUOTA_PERCENT),
        cpu_weight: None,
        pids_max: Some(PIDS_MAX),
    };
    let dir = RunDir::make(&settings.dir, &c).map_err(|e| fail("cannot prepare the run's directories", &e))?;
    let short = uuid::Uuid::new_v4().simple().to_string();
    let confinement = Confinement::create(&format!("sandbox-{}", &short[..12]), &limits)
        .map_err(|e| fail("cannot confine the run in a cgroup", &e))?;
    let before = confinement.usage();
    let (out_read, out_write) = labfy_sys::pipe().map_err(|e| fail("stdout pipe", &e))?;
    let (err_read, err_write) = labfy_sys::pipe().map_err(|e| fail("stderr pipe", &e))?;
    let started = Instant::now();
    let spawned = spawn(&c, &dir, confinement.procs_files(), (out_write.as_raw_fd(), err_write.as_raw_fd()));
    // Our copies of the write ends close here: EOF once the run's side is gone.
    drop(out_write);
    drop(err_write);
    let (mut child, applied, work) = match spawned {
        Ok((mut child, applied)) => {
            let work = child.take_exported();
            (child, applied, work)
        }
        Err(e) => {
            let _ = tokio::task::spawn_blocking(move || confinement.delete()).await;
            return Err(fail(&format!("cannot start {} confined", c.allowed.program.display()), &e));
        }
    };
    let total = Arc::new(AtomicU64::new(0));
    let over = Arc::new(AtomicBool::new(false));
    let readers = [drain(out_read, total.clone(), over.clone()), drain(err_read, total, over.clone())];
    let deadline = tokio::time::sleep(c.timeout);
    tokio::pin!(deadline);
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    let mut stopped: Option<String> = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            () = &mut deadline, if stopped.is_none() => {
                stopped = Some(format!("it ran past its {} s", c.timeout.as_millis().div_ceil(1000)));
                stop_run(&confinement, &child);
            }
            () = stop.notify.notified(), if stopped.is_none() => {
                stopped = Some(stop.reason());
                stop_run(&confinement, &child);
            }
            _ = poll.tick(), if stopped.is_none() => {
                if over.load(Ordering::Relaxed) {
                    stopped = Some(format!("it printed more than {} MiB", STREAM_STOP_BYTES >> 20));
                    stop_run(&confinement, &child);
                }
            }
        }
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    let after = confinement.usage();
    let cause = match &status {
        Ok(s) => cgroup::exit_cause(*s, &before, &after),
        Err(e) => ExitCause::Signal(-e.raw_os_error().unwrap_or(0)),
    };
    let end = match (stopped, cause) {
        (Some(reason), _) => SandboxEnd::Stopped { reason },
        (None, ExitCause::OomKilled) => SandboxEnd::Stopped {
            reason: format!("it reached its memory bound ({} MiB, /work and /tmp included)", MEMORY_MAX >> 20),
        },
        (None, ExitCause::Exited(code)) => SandboxEnd::Exited { code },
        (None, ExitCause::Signal(signal)) => SandboxEnd::Signalled { signal },
    };
    // The PID namespace died with its first process: every writer is gone.
    let streams = tokio::task::spawn_blocking(move || {
        let until = Instant::now() + DRAIN_WAIT;
        readers.map(|r| {
            while !r.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if r.is_finished() { r.join().unwrap_or_default() } else { SandboxStream::default() }
        })
    })
    .await
    .unwrap_or_default();
    let [stdout, stderr] = streams;
    // The run's /work, through the descriptor it handed over; the tmpfs
    // goes (its pages uncharged) when the descriptor does.
    let (files, files_unlisted) = match work {
        Some(work) => tokio::task::spawn_blocking(move || read_back(&work)).await.unwrap_or_else(|_| (Vec::new(), 0)),
        None => (Vec::new(), 0),
    };
    drop(dir);
    let limit_hits = after.pids_limit_hits.unwrap_or(0).saturating_sub(before.pids_limit_hits.unwrap_or(0));
    if limit_hits > 0 {
        tracing::info!(reservation, limit_hits, "a sandbox run hit its process bound");
    }
    if let Err(e) = tokio::task::spawn_blocking(move || confinement.delete()).await.unwrap_or(Ok(())) {
        tracing::warn!(error = %e, "could not remove a sandbox run's cgroup");
    }
    let mut lines = applied.applied;
    lines.push(format!(
        "cgroup: {} MiB memory, no swap, {PIDS_MAX} processes, one core; /work {} MiB and {WORK_FILES} files (tmpfs)",
        MEMORY_MAX >> 20,
        WORK_BYTES >> 20
    ));
    if limit_hits > 0 {
        lines.push(format!("the process bound refused {limit_hits} fork(s)"));
    }
    Ok(SandboxReport {
        program: c.allowed.name,
        reservation: reservation.to_owned(),
        end,
        stdout,
        stderr,
        files,
        files_unlisted,
        duration_ms,
        peak_memory_bytes: after.memory_peak.unwrap_or(0),
        cpu_ms: after.cpu_usage_ns.unwrap_or(0) / 1_000_000,
        confinement: lines,
        missing: applied.missing,
    })
}

/// The regular files left in `/work` (symbolic links and the rest are
/// skipped; nothing is followed), in name order: each listed with its size
/// and digest, its bytes carried while the report's bound allows. `work`
/// is the descriptor the run handed over, walked through `/proc/self/fd`.
fn read_back(work: &OwnedFd) -> (Vec<SandboxFile>, u32) {
    let top = PathBuf::from(format!("/proc/self/fd/{}", work.as_raw_fd()));
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    let mut stack = vec![(top, String::new(), 0usize)];
    let mut unlisted = 0u32;
    while let Some((dir, prefix, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            if kind.is_dir() && depth + 1 < WORK_DEPTH {
                stack.push((entry.path(), format!("{name}/"), depth + 1));
            } else if kind.is_file() {
                found.push((name, entry.path()));
            }
        }
    }
    found.sort();
    let mut files = Vec::new();
    let mut carried = 0usize;
    for (name, path) in found {
        if files.len() >= MAX_SANDBOX_FILES {
            unlisted += 1;
            continue;
        }
        // O_NOFOLLOW: the run cannot swap a link in (it has ended, and its
        // tmpfs holds only what it wrote).
        let Ok(mut f) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&path) else {
            continue;
        };
        let mut bytes = Vec::new();
        if f.by_ref().take(WORK_BYTES).read_to_end(&mut bytes).is_err() {
            continue;
        }
        let fits = carried + bytes.len() <= MAX_SANDBOX_FILE_BYTES;
        if fits {
            carried += bytes.len();
        }
        files.push(SandboxFile {
            name,
            size: bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(&bytes)),
            data_b64: fits.then(|| base64::engine::general_purpose::STANDARD.encode(&bytes)),
        });
    }
    (files, unlisted)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use labfy_ipc::messages::governor::SandboxInput;

    fn settings() -> SandboxSettings {
        SandboxSettings {
            programs: vec![
                Allowed::parse("python3=/usr/bin/python3 -I {script}").unwrap(),
                Allowed::parse("sort=/usr/bin/sort").unwrap(),
            ],
            none_because: String::new(),
            dir: PathBuf::from("/nonexistent"),
        }
    }

    fn ask(program: &str, script: Option<&str>) -> SandboxRun {
        SandboxRun {
            owner: "test".into(),
            program: program.into(),
            script: script.map(str::to_owned),
            args: vec![],
            inputs: vec![],
            timeout_ms: 1000,
        }
    }

    #[test]
    fn specs_parse_and_refuse() {
        let a = Allowed::parse("py=/usr/bin/python3 -I {script}").unwrap();
        assert_eq!(a.name, "py");
        assert!(a.takes_script());
        for bad in ["python3", "=/usr/bin/x", "Py=/usr/bin/x", "x=usr/bin/x", "x=", "-x=/bin/x"] {
            assert!(Allowed::parse(bad).is_err(), "{bad} accepted");
        }
        let off = SandboxSettings::from_specs(&["none".into()], PathBuf::from("/d")).unwrap();
        assert!(!off.status().ready && off.status().detail.contains("turned it off"));
        assert!(SandboxSettings::from_specs(&["none".into(), "a=/bin/true".into()], PathBuf::from("/d")).is_err());
        let missing = SandboxSettings::from_specs(&["a=/nonexistent/prog".into()], PathBuf::from("/d")).unwrap_err();
        assert!(missing.contains("not an executable file"), "{missing}");
    }

    #[test]
    fn run_directories_left_by_a_dead_governor_are_swept() {
        let base = tempfile::tempdir().unwrap();
        for name in ["a1", "b2"] {
            let run = base.path().join(name);
            for d in ["input", "script", "work"] {
                std::fs::create_dir_all(run.join(d)).unwrap();
            }
            std::fs::write(run.join("input/x.txt"), "x").unwrap();
            // As a run leaves them: its read-only directories.
            std::fs::set_permissions(run.join("input"), std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        let mut removed = sweep_stale(base.path());
        removed.sort();
        assert_eq!(removed, ["a1", "b2"]);
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
        assert!(sweep_stale(&base.path().join("absent")).is_empty());
    }

    #[test]
    fn requests_are_checked_against_the_list_and_bounds() {
        let s = settings();
        let e = check(&s, ask("bash", None)).unwrap_err();
        assert_eq!(e.code, FailureCode::Forbidden);
        assert!(e.message.contains("allow-list (python3, sort)"), "{}", e.message);
        assert_eq!(check(&s, ask("python3", None)).unwrap_err().code, FailureCode::InvalidInput);
        assert!(check(&s, ask("sort", Some("x"))).unwrap_err().message.contains("takes no script"));
        let mut long = ask("python3", Some("print(1)"));
        long.timeout_ms = MAX_SANDBOX_MS + 1;
        assert!(check(&s, long).is_err());
        let mut named = ask("python3", Some("print(1)"));
        named.inputs = vec![SandboxInput { name: "../etc".into(), data_b64: String::new() }];
        assert!(check(&s, named).unwrap_err().message.contains("input file name"));
        let mut big = ask("python3", Some("print(1)"));
        let chunk = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; MAX_SANDBOX_INPUT_BYTES / 2]);
        big.inputs = vec![
            SandboxInput { name: "a.txt".into(), data_b64: chunk.clone() },
            SandboxInput { name: "b.txt".into(), data_b64: chunk },
        ];
        assert!(check(&s, big).unwrap_err().message.contains("exceed"));
        let ok = check(&s, ask("python3", Some("print(1)"))).unwrap();
        assert_eq!(ok.allowed.name, "python3");
    }
}
