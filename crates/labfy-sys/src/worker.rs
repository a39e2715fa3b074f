//! A parser worker confines itself (SPEC C2, T1, V3): a short-lived child
//! that reads hostile bytes on one descriptor and writes its answer on
//! another. Before it reads anything it lowers its limits and installs a
//! seccomp allow-list of pure computation — read, write, memory, time, exit,
//! and a signal to itself (`abort()`) — so that a parser an input has taken
//! over can open no file, create no socket, start no program and signal no
//! other process. Under the workspace server it also keeps every protection
//! of the server's own jail (it is the server's child); a caller that is not
//! confined itself (`labfy import` on the host) starts it in a [`jail`] of
//! its own first: namespaces, a minimal root, no network, like every child.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::path::Path;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule, TargetArch,
};

use crate::error::SpawnError;
use crate::seccomp::{Policy, Sockets};
use crate::{Jail, Root};

/// The limits a worker puts on itself.
#[derive(Debug, Clone, Copy)]
pub struct WorkerLimits {
    /// Address space, in bytes (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// CPU time, in seconds (`RLIMIT_CPU`: SIGXCPU, then SIGKILL).
    pub cpu_seconds: u64,
}

/// The system calls a worker may make with any argument: no `open`, no
/// `socket`, no `execve`, no `clone`, and no signalling call (`kill`,
/// `tkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo`, `pidfd_send_signal`);
/// `tgkill` only to itself, in [`compute_filter`].
fn compute_calls() -> Vec<libc::c_long> {
    let mut calls = vec![
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_close,
        libc::SYS_fstat,
        libc::SYS_statx,
        libc::SYS_lseek,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        libc::SYS_sigaltstack,
        libc::SYS_clock_gettime,
        libc::SYS_getrandom,
        libc::SYS_sched_yield,
        libc::SYS_getpid,
        libc::SYS_gettid,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.push(libc::SYS_poll);
    calls
}

fn rule_eq(arg: u8, value: u64) -> Result<SeccompRule, SpawnError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| SpawnError::prepare(format!("seccomp rule: {e}")))
}

/// The worker's filter, for the process whose pid (as its own PID namespace
/// numbers it) is `pid`: built by that process, after the fork.
fn compute_filter(pid: libc::pid_t) -> Result<BpfProgram, SpawnError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = compute_calls().into_iter().map(|c| (c, vec![])).collect();
    // fcntl(fd, F_GETFD) only: the standard library checks a descriptor is
    // open when it closes it (debug builds).
    rules.insert(libc::SYS_fcntl, vec![rule_eq(1, libc::F_GETFD as u64)?]);
    // tgkill(own pid, …) only: abort() after a failed allocation raises
    // SIGABRT on its own thread. The kernel delivers tgkill only to a thread
    // of the group named by its first argument, so no other process is
    // reached (F4).
    let own = u64::try_from(pid).map_err(|_| SpawnError::prepare(format!("pid {pid}")))?;
    rules.insert(libc::SYS_tgkill, vec![rule_eq(0, own)?]);
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SpawnError::prepare(format!("no seccomp filter for {}", std::env::consts::ARCH)))?;
    let filter = seccompiler::SeccompFilter::new(rules, SeccompAction::KillProcess, SeccompAction::Allow, arch)
        .map_err(|e| SpawnError::prepare(format!("seccomp filter: {e}")))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| SpawnError::prepare(format!("seccomp filter: {e}")))
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: `lim` is a valid rlimit that outlives the call.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The limits a worker and a document tool put on themselves — memory,
/// CPU, no file written, no core dump, at most `files` descriptors — then
/// no new privileges; the step that failed on an error.
fn limit_self(limits: WorkerLimits, files: u64) -> Result<(), (&'static str, io::Error)> {
    set_limit(libc::RLIMIT_AS, limits.memory_bytes).map_err(|e| ("RLIMIT_AS", e))?;
    set_limit(libc::RLIMIT_CPU, limits.cpu_seconds).map_err(|e| ("RLIMIT_CPU", e))?;
    set_limit(libc::RLIMIT_FSIZE, 0).map_err(|e| ("RLIMIT_FSIZE", e))?;
    set_limit(libc::RLIMIT_CORE, 0).map_err(|e| ("RLIMIT_CORE", e))?;
    set_limit(libc::RLIMIT_NOFILE, files).map_err(|e| ("RLIMIT_NOFILE", e))?;
    // Under the workspace server the flag is inherited, and its own filter
    // forbids setting it again: set it only where it is not yet.
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } != 1
        // SAFETY: prctl with integer arguments only.
        && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0
    {
        return Err(("no_new_privs", io::Error::last_os_error()));
    }
    Ok(())
}

/// Confines the calling process for good: limits (memory, CPU, no file
/// written, no core dump, no new descriptor beyond a few), no new
/// privileges, then the compute-only seccomp filter (a call outside it, or
/// a signal to any process but itself, kills the process). Call it first
/// thing, single-threaded, before reading any input.
pub fn confine_self(limits: WorkerLimits) -> Result<(), SpawnError> {
    // SAFETY: getpid takes no argument and cannot fail.
    let pid = unsafe { libc::getpid() };
    let program: Vec<libc::sock_filter> = compute_filter(pid)?
        .into_iter()
        .map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k })
        .collect();
    let step = |what: &str, e: io::Error| SpawnError::prepare(format!("worker confinement, {what}: {e}"));
    limit_self(limits, 16).map_err(|(what, e)| step(what, e))?;
    // The `seccomp` system call itself (which the server's filter allows for
    // adding a filter), not seccompiler's helper, which sets the flag again.
    crate::raw::install_seccomp(&program).map_err(|e| step("seccomp", e))?;
    Ok(())
}

/// CPU time this process has used, user and system (`clock_gettime` on
/// the process clock, allowed by the worker's filter): a worker serving
/// several documents retires before its `RLIMIT_CPU` could cut the next one
/// short.
pub fn cpu_time_used() -> std::time::Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec that outlives the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// System calls a document tool is killed for: it reads one document on
/// its standard input and writes text or an image on its standard output,
/// so it has no use for a socket, another process's memory or signals, a
/// namespace, a mount, a key ring, BPF, performance counters or io_uring.
fn tool_forbidden_calls() -> Vec<libc::c_long> {
    let mut calls = vec![
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_send_signal,
        libc::SYS_pidfd_getfd,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_personality,
        libc::SYS_setuid,
        libc::SYS_setgid,
        libc::SYS_setreuid,
        libc::SYS_setregid,
        libc::SYS_setresuid,
        libc::SYS_setresgid,
        libc::SYS_setgroups,
        libc::SYS_landlock_create_ruleset,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_fork, libc::SYS_vfork]);
    calls
}

fn tool_filter() -> Result<BpfProgram, SpawnError> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = tool_forbidden_calls().into_iter().map(|c| (c, vec![])).collect();
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SpawnError::prepare(format!("no seccomp filter for {}", std::env::consts::ARCH)))?;
    let filter = seccompiler::SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::KillProcess, arch)
        .map_err(|e| SpawnError::prepare(format!("seccomp filter: {e}")))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| SpawnError::prepare(format!("seccomp filter: {e}")))
}

/// What a document tool was confined with, for the import report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolConfinement {
    /// The Landlock ABI enforced, `None` where the kernel has none.
    pub landlock_abi: Option<u32>,
}

/// Confines the calling process for good before it becomes a document tool
/// (`pdftotext`, `pdftoppm`, `tesseract`: a Debian program, reached by
/// `execve` right after): the same limits as a worker (memory, CPU, no file
/// written, no core dump) but a few more descriptors, no new privileges,
/// Landlock on top of whatever domain the caller is in — `readable` (the
/// system's programs, libraries and data) may be read, `/usr` run, nothing
/// anywhere written, created or removed — and a seccomp filter that kills
/// the process on a socket, a signal to another process, a namespace, a
/// mount or a change of identity ([`tool_forbidden_calls`]). Within the
/// jail its caller is in (the server's, or [`jail`]'s: no network, a minimal
/// root). Paths in `readable` that do not exist are skipped. Call it
/// single-threaded, with the tool's input and output on descriptors 0
/// and 1 already.
pub fn confine_tool(limits: WorkerLimits, readable: &[&Path]) -> Result<ToolConfinement, SpawnError> {
    let step = |what: &str, e: io::Error| SpawnError::prepare(format!("tool confinement, {what}: {e}"));
    let program: Vec<libc::sock_filter> =
        tool_filter()?.into_iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect();
    let landlock = match crate::landlock::abi() {
        Some(abi) => {
            let mut rules = crate::landlock::Rules::nothing(abi);
            for path in readable.iter().filter(|p| p.exists()) {
                rules.readable(path)?;
            }
            rules.executable(Path::new("/usr"))?;
            Some(rules)
        }
        None => None,
    };
    limit_self(limits, 64).map_err(|(what, e)| step(what, e))?;
    if let Some(rules) = &landlock {
        rules.enforce().map_err(|e| step("Landlock", e))?;
    }
    crate::raw::install_seccomp(&program).map_err(|e| step("seccomp", e))?;
    Ok(ToolConfinement { landlock_abi: landlock.map(|r| r.abi()) })
}

/// Puts `input` on descriptor 0 and `output` on descriptor 1 of this
/// process, open across `execve` (a document tool about to become its
/// program).
pub fn onto_stdio(input: &File, output: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    for (file, target) in [(input, 0), (output, 1)] {
        let fd = file.as_raw_fd();
        if fd == target {
            // SAFETY: F_SETFD on an open descriptor of ours: it stays open
            // across the exec.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
                return Err(io::Error::last_os_error());
            }
        // SAFETY: dup2 between two descriptors of ours; the copy has no
        // close-on-exec flag.
        } else if unsafe { libc::dup2(fd, target) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The uid a worker runs as when its caller is root (`nobody`, as the
/// governor's sandbox runs); under any other caller it keeps the caller's
/// ids in a user namespace of its own.
pub const WORKER_UID: u32 = 65_534;
/// Open files of a jailed worker until it lowers the bound itself.
const JAIL_MAX_FILES: u64 = 64;
/// Size of a jailed worker's `/tmp` (it writes no file: `RLIMIT_FSIZE` 0).
const JAIL_TMP_BYTES: u64 = 1 << 20;

/// The jail of a worker whose caller is not confined itself (`labfy import`
/// on the host, SPEC V3): the sequence every child gets ([`Jail`]) — PID,
/// mount, IPC, UTS and cgroup namespaces and a network namespace with no
/// interface up; a user namespace of its own under an unprivileged caller,
/// [`WORKER_UID`] under root; a minimal root holding its program, the
/// system's libraries, the null and random devices and a small `/tmp`;
/// Landlock (signals scoped to itself where the kernel has ABI 6); no
/// capability; the children's seccomp policy (Unix sockets only), under
/// which the worker then stacks its compute-only filter ([`confine_self`]).
/// The caller adds the descriptors ([`Jail::pass_fd`], [`Jail::streams`])
/// and the worker's arguments. A caller that is confined already (the
/// workspace server, whose seccomp policy forbids new namespaces) starts
/// its worker as a plain child instead: the worker then shares that jail.
pub fn jail(program: &Path) -> Result<Jail, SpawnError> {
    jail_with_tmp(program, JAIL_TMP_BYTES)
}

/// [`jail`] with a `/tmp` of `tmp_bytes`: the document tools' runner writes
/// each document there for its tools to read (SPEC I1).
pub fn jail_with_tmp(program: &Path, tmp_bytes: u64) -> Result<Jail, SpawnError> {
    let mut root = Root::new();
    root.system()?.devices()?.tmp(tmp_bytes)?;
    let mut jail = Jail::new(program, root);
    jail.hostname("labfy-parser")?
        .no_network()
        .limit(libc::RLIMIT_CORE, 0)
        .limit(libc::RLIMIT_NOFILE, JAIL_MAX_FILES)
        .seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false });
    // SAFETY: geteuid takes no argument and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        jail.run_as(WORKER_UID, WORKER_UID, &[]);
    }
    Ok(jail)
}

/// Takes ownership of descriptor `fd`, passed by the parent for this
/// process alone; refused if it is not open.
pub fn inherited(fd: RawFd) -> io::Result<File> {
    if fd < 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("descriptor {fd}")));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("descriptor {fd} is not open")));
    }
    // SAFETY: `fd` is open, and the parent passed it to this process to be
    // owned once, here (the worker's arguments name each descriptor once).
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_architecture() {
        // SAFETY: getpid takes no argument and cannot fail.
        assert!(!compute_filter(unsafe { libc::getpid() }).expect("filter").is_empty());
    }

    /// The probe, run in a child (this test binary again): confined, it
    /// computes and writes, then tries to open a file.
    #[test]
    fn a_confined_worker_computes_but_is_killed_when_it_opens_a_file() {
        use std::os::unix::process::ExitStatusExt;
        if std::env::var_os("LABFY_WORKER_PROBE").is_some() {
            confine_self(WorkerLimits { memory_bytes: 1 << 30, cpu_seconds: 5 }).expect("confine");
            let v: Vec<u64> = (0..100_000).collect();
            println!("sum {}", v.iter().sum::<u64>());
            let _ = File::open("/etc/hostname");
            std::process::exit(0);
        }
        let exe = std::env::current_exe().expect("exe");
        let out = std::process::Command::new(exe)
            .args(["--exact", "worker::tests::a_confined_worker_computes_but_is_killed_when_it_opens_a_file"])
            .args(["--nocapture", "--test-threads=1"])
            .env("LABFY_WORKER_PROBE", "1")
            .output()
            .expect("probe");
        assert!(String::from_utf8_lossy(&out.stdout).contains("sum 4999950000"), "it computed and wrote");
        assert_eq!(out.status.signal(), Some(libc::SIGSYS), "killed at open: {:?}", out.status);
    }

    /// F4, reproduction P6 (SPEC V3): confined, a worker signals no other
    /// process. Each probe (this test binary again) confines itself, then
    /// sends SIGKILL to a live `sleep` of the same uid through one of the
    /// signalling calls: the filter kills the probe (SIGSYS) before the call
    /// is made, and the `sleep` lives on. A last probe aborts: `tgkill` to
    /// itself still raises SIGABRT, which a failed allocation needs.
    #[test]
    fn a_confined_worker_signals_no_other_process_but_still_aborts() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::Command;
        const NAME: &str = "worker::tests::a_confined_worker_signals_no_other_process_but_still_aborts";
        if let Some(probe) = std::env::var_os("LABFY_WORKER_SIGNAL_PROBE") {
            let probe = probe.to_string_lossy().into_owned();
            let (call, target) = probe.split_once(':').expect("call:pid");
            let pid: libc::pid_t = target.parse().unwrap_or(0);
            confine_self(WorkerLimits { memory_bytes: 1 << 30, cpu_seconds: 5 }).expect("confine");
            println!("confined");
            let (sig, null) = (libc::SIGKILL, std::ptr::null::<libc::siginfo_t>());
            // SAFETY: signalling calls with plain integers and a null siginfo
            // (the filter stops each before the kernel reads anything).
            let rc = unsafe {
                match call {
                    "abort" => std::process::abort(),
                    "tgkill" => libc::syscall(libc::SYS_tgkill, pid, pid, sig),
                    "kill" => libc::syscall(libc::SYS_kill, pid, sig),
                    "tkill" => libc::syscall(libc::SYS_tkill, pid, sig),
                    "rt_sigqueueinfo" => libc::syscall(libc::SYS_rt_sigqueueinfo, pid, sig, null),
                    "rt_tgsigqueueinfo" => libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, pid, sig, null),
                    _ => libc::syscall(libc::SYS_pidfd_send_signal, 0, sig, null, 0),
                }
            };
            println!("{call} returned {rc}");
            std::process::exit(0);
        }
        let exe = std::env::current_exe().expect("exe");
        let probe = |what: String| {
            Command::new(&exe)
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env("LABFY_WORKER_SIGNAL_PROBE", what)
                .output()
                .expect("probe")
        };
        let mut victim = Command::new("sleep").arg("60").spawn().expect("sleep");
        let pid = victim.id();
        for call in ["tgkill", "kill", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal"] {
            let out = probe(format!("{call}:{pid}"));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains("confined"), "{call}: the probe did not confine itself: {stdout}");
            assert!(!stdout.contains("returned"), "{call} was made: {stdout}");
            assert_eq!(out.status.signal(), Some(libc::SIGSYS), "{call}: {:?}", out.status);
            assert!(victim.try_wait().expect("try_wait").is_none(), "{call} killed another process");
        }
        let out = probe("abort:0".into());
        assert!(String::from_utf8_lossy(&out.stdout).contains("confined"));
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "abort() on itself: {:?}", out.status);
        victim.kill().expect("kill");
        assert_eq!(victim.wait().expect("wait").signal(), Some(libc::SIGKILL));
    }
}
