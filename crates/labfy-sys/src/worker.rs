//! A parser worker confines itself (SPEC C2, T1): a short-lived child that
//! reads hostile bytes on one descriptor and writes its answer on another.
//! Before it reads anything it lowers its limits and installs a seccomp
//! allow-list of pure computation — read, write, memory, time, exit — so that
//! a parser an input has taken over can open no file, create no socket, start
//! no program and signal nothing. Under the workspace server it also keeps
//! every protection of the server's own jail (it is the server's child);
//! under `labfy import` this filter and these limits are its confinement.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, RawFd};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule, TargetArch,
};

use crate::error::SpawnError;

/// The limits a worker puts on itself.
#[derive(Debug, Clone, Copy)]
pub struct WorkerLimits {
    /// Address space, in bytes (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// CPU time, in seconds (`RLIMIT_CPU`: SIGXCPU, then SIGKILL).
    pub cpu_seconds: u64,
}

/// The system calls a worker may make: no `open`, no `socket`, no
/// `execve`, no `clone`, no `kill` of another process.
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
    // abort() after a failed allocation raises SIGABRT on itself.
    calls.push(libc::SYS_tgkill);
    #[cfg(target_arch = "x86_64")]
    calls.push(libc::SYS_poll);
    calls
}

fn compute_filter() -> Result<BpfProgram, SpawnError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = compute_calls().into_iter().map(|c| (c, vec![])).collect();
    // fcntl(fd, F_GETFD) only: the standard library checks a descriptor is
    // open when it closes it (debug builds).
    let getfd = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::F_GETFD as u64)
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| SpawnError::prepare(format!("seccomp rule: {e}")))?;
    rules.insert(libc::SYS_fcntl, vec![getfd]);
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

/// Confines the calling process for good: limits (memory, CPU, no file
/// written, no core dump, no new descriptor beyond a few), no new
/// privileges, then the compute-only seccomp filter (a call outside it
/// kills the process). Call it first thing, single-threaded, before reading
/// any input.
pub fn confine_self(limits: WorkerLimits) -> Result<(), SpawnError> {
    let program: Vec<libc::sock_filter> =
        compute_filter()?.into_iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect();
    let step = |what: &str, e: io::Error| SpawnError::prepare(format!("worker confinement, {what}: {e}"));
    set_limit(libc::RLIMIT_AS, limits.memory_bytes).map_err(|e| step("RLIMIT_AS", e))?;
    set_limit(libc::RLIMIT_CPU, limits.cpu_seconds).map_err(|e| step("RLIMIT_CPU", e))?;
    set_limit(libc::RLIMIT_FSIZE, 0).map_err(|e| step("RLIMIT_FSIZE", e))?;
    set_limit(libc::RLIMIT_CORE, 0).map_err(|e| step("RLIMIT_CORE", e))?;
    set_limit(libc::RLIMIT_NOFILE, 16).map_err(|e| step("RLIMIT_NOFILE", e))?;
    // Under the workspace server the flag is inherited, and its own filter
    // forbids setting it again: set it only where it is not yet.
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } != 1
        // SAFETY: prctl with integer arguments only.
        && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0
    {
        return Err(step("no_new_privs", io::Error::last_os_error()));
    }
    // The `seccomp` system call itself (which the server's filter allows for
    // adding a filter), not seccompiler's helper, which sets the flag again.
    crate::raw::install_seccomp(&program).map_err(|e| step("seccomp", e))?;
    Ok(())
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
        assert!(!compute_filter().expect("filter").is_empty());
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
}
