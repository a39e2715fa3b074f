//! Seccomp allow-lists (SPEC T1), compiled to BPF in the parent with
//! `seccompiler` and installed by the child as the last step before `execve`.
//!
//! Two programs are stacked. The first answers `ENOSYS` to `clone3`, whose
//! flags live in memory a filter cannot read, so that the C library falls
//! back to `clone`, whose flags it can: new threads yes, new namespaces no.
//! The second is the allow-list proper: whatever it does not name fails with
//! `EPERM` — among them `ptrace`, `mount`, `umount2`, `pivot_root`, `chroot`,
//! `setns`, `unshare`, `bpf`, `keyctl`, `add_key`, `perf_event_open`,
//! `process_vm_readv`, `init_module`, `kexec_load`, `reboot`, `io_uring_*`,
//! `userfaultfd`, `personality`, `memfd_create`, `setuid` and friends.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

use crate::error::SpawnError;

/// Which sockets a child may open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// `AF_UNIX` only (the governor's and egress's sockets).
    UnixOnly,
    /// `AF_UNIX`, and `AF_INET`/`AF_INET6` for a peer on the child's own
    /// loopback (the local model); its network namespace has nothing else.
    UnixAndLoopback,
}

/// The system-call policy of a confined child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Socket families.
    pub sockets: Sockets,
    /// Every `ioctl` request allowed: GPU drivers (`/dev/kfd`, render nodes,
    /// `/dev/nvidia*`) are driven through requests no list can name. Only for
    /// a child given such devices; Landlock (ABI 5) still limits device
    /// requests to the devices it names, and the child has no terminal.
    pub driver_ioctl: bool,
}

/// Namespace flags `clone` must not carry (`CLONE_NEWTIME` is clone3-only).
const CLONE_NAMESPACES: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

/// The system calls a tokio + SQLite + hyper server on glibc or musl needs,
/// with no argument condition.
fn plain_calls() -> Vec<libc::c_long> {
    let mut calls = vec![
        // Files and descriptors.
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_pread64,
        libc::SYS_pwrite64,
        libc::SYS_preadv,
        libc::SYS_pwritev,
        libc::SYS_openat,
        libc::SYS_close,
        libc::SYS_close_range,
        libc::SYS_fstat,
        libc::SYS_newfstatat,
        libc::SYS_statx,
        libc::SYS_statfs,
        libc::SYS_fstatfs,
        libc::SYS_lseek,
        libc::SYS_fcntl,
        libc::SYS_flock,
        libc::SYS_fsync,
        libc::SYS_fdatasync,
        libc::SYS_ftruncate,
        libc::SYS_fallocate,
        libc::SYS_fadvise64,
        libc::SYS_getdents64,
        libc::SYS_getcwd,
        libc::SYS_faccessat,
        libc::SYS_faccessat2,
        libc::SYS_readlinkat,
        libc::SYS_unlinkat,
        libc::SYS_mkdirat,
        libc::SYS_renameat,
        libc::SYS_renameat2,
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchmodat2,
        libc::SYS_fchown,
        libc::SYS_utimensat,
        libc::SYS_umask,
        libc::SYS_dup,
        libc::SYS_dup3,
        libc::SYS_pipe2,
        libc::SYS_eventfd2,
        libc::SYS_timerfd_create,
        libc::SYS_timerfd_settime,
        libc::SYS_timerfd_gettime,
        libc::SYS_epoll_create1,
        libc::SYS_epoll_ctl,
        libc::SYS_epoll_pwait,
        libc::SYS_epoll_pwait2,
        libc::SYS_ppoll,
        libc::SYS_pselect6,
        // Memory.
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mprotect,
        libc::SYS_mremap,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_msync,
        libc::SYS_mincore,
        // Threads, signals, time.
        libc::SYS_futex,
        libc::SYS_set_robust_list,
        libc::SYS_get_robust_list,
        libc::SYS_rseq,
        libc::SYS_set_tid_address,
        libc::SYS_sched_yield,
        libc::SYS_sched_getaffinity,
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigtimedwait,
        libc::SYS_sigaltstack,
        libc::SYS_restart_syscall,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_gettimeofday,
        libc::SYS_getrandom,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_wait4,
        libc::SYS_waitid,
        // Signals to any pid: a policy is installed only by `Jail`, whose
        // child is PID 1 of a PID namespace of its own (and Landlock scopes
        // signals to its domain, ABI 6), so they reach only its own
        // descendants — the server kills its parser workers, a sandbox run
        // its programs. (The parser worker's own filter, `worker`, allows a
        // signal to itself alone.)
        libc::SYS_kill,
        libc::SYS_tgkill,
        libc::SYS_tkill,
        // Identity.
        libc::SYS_getpid,
        libc::SYS_gettid,
        libc::SYS_getppid,
        libc::SYS_getuid,
        libc::SYS_geteuid,
        libc::SYS_getgid,
        libc::SYS_getegid,
        libc::SYS_getresuid,
        libc::SYS_getresgid,
        libc::SYS_getgroups,
        libc::SYS_uname,
        libc::SYS_sysinfo,
        libc::SYS_getrusage,
        libc::SYS_copy_file_range,
        libc::SYS_sendfile,
        libc::SYS_execve,
        // Landlock can only take rights away: a document tool the server
        // starts restricts itself further (`worker::confine_tool`).
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
        // Sockets already opened, or AF_UNIX ones (see `socket` below).
        libc::SYS_connect,
        libc::SYS_accept,
        libc::SYS_accept4,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_getsockname,
        libc::SYS_getpeername,
        libc::SYS_getsockopt,
        libc::SYS_setsockopt,
        libc::SYS_sendto,
        libc::SYS_recvfrom,
        libc::SYS_sendmsg,
        libc::SYS_recvmsg,
        libc::SYS_sendmmsg,
        libc::SYS_recvmmsg,
        libc::SYS_shutdown,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_open,
        libc::SYS_stat,
        libc::SYS_lstat,
        libc::SYS_access,
        libc::SYS_readlink,
        libc::SYS_unlink,
        libc::SYS_mkdir,
        libc::SYS_rmdir,
        libc::SYS_rename,
        libc::SYS_chmod,
        libc::SYS_dup2,
        libc::SYS_pipe,
        libc::SYS_poll,
        libc::SYS_select,
        libc::SYS_epoll_wait,
        libc::SYS_epoll_create,
        libc::SYS_time,
        libc::SYS_arch_prctl,
        libc::SYS_getpgrp,
        libc::SYS_getrlimit,
        // Plain process creation (shells use vfork): no namespace flag exists.
        libc::SYS_fork,
        libc::SYS_vfork,
    ]);
    calls
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SpawnError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| SpawnError::prepare(format!("seccomp condition: {e}")))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SpawnError> {
    SeccompRule::new(conds).map_err(|e| SpawnError::prepare(format!("seccomp rule: {e}")))
}

/// One rule per allowed value of argument `arg`.
fn one_of(arg: u8, values: &[u64]) -> Result<Vec<SeccompRule>, SpawnError> {
    values.iter().map(|v| rule(vec![cond(arg, SeccompCmpOp::Eq, *v)?])).collect()
}

fn arch() -> Result<TargetArch, SpawnError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SpawnError::prepare(format!("no seccomp filter for {}", std::env::consts::ARCH)))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    mismatch: SeccompAction,
    matched: SeccompAction,
) -> Result<BpfProgram, SpawnError> {
    let filter = SeccompFilter::new(rules, mismatch, matched, arch()?)
        .map_err(|e| SpawnError::prepare(format!("seccomp filter: {e}")))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| SpawnError::prepare(format!("seccomp filter: {e}")))
}

impl Policy {
    /// The BPF programs, in the order they are installed.
    pub fn compile(&self) -> Result<Vec<BpfProgram>, SpawnError> {
        // 1. clone3 → ENOSYS (its flags cannot be inspected; the C library
        //    falls back to clone).
        let mut first = BTreeMap::new();
        first.insert(libc::SYS_clone3, vec![]);
        let first = compile(first, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32))?;

        // 2. The allow-list; anything else is EPERM.
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for call in plain_calls() {
            rules.insert(call, vec![]);
        }
        // clone3 passes here and is answered by the first program.
        rules.insert(libc::SYS_clone3, vec![]);
        // clone: threads (and plain forks), never a namespace.
        rules.insert(
            libc::SYS_clone,
            vec![rule(vec![
                SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(CLONE_NAMESPACES), 0)
                    .map_err(|e| SpawnError::prepare(format!("seccomp condition: {e}")))?,
            ])?],
        );
        // socket / socketpair: the families of the policy.
        let mut families = vec![libc::AF_UNIX as u64];
        if self.sockets == Sockets::UnixAndLoopback {
            families.extend([libc::AF_INET as u64, libc::AF_INET6 as u64]);
        }
        rules.insert(libc::SYS_socket, one_of(0, &families)?);
        rules.insert(libc::SYS_socketpair, one_of(0, &[libc::AF_UNIX as u64])?);
        // (The request constants are `c_ulong` on glibc, `c_int` elsewhere.)
        #[allow(clippy::unnecessary_cast)]
        let requests = [
            libc::FIONBIO as u64,
            libc::FIOCLEX as u64,
            libc::FIONCLEX as u64,
            libc::FIONREAD as u64,
            libc::TCGETS as u64,
            libc::TIOCGWINSZ as u64,
        ];
        // ioctl: non-blocking and close-on-exec flags, bytes readable, and
        // whether a descriptor is a terminal — never TIOCSTI (typing into
        // the operator's terminal) nor any other request.
        if self.driver_ioctl {
            rules.insert(libc::SYS_ioctl, vec![]);
            // GPU runtimes (CUDA's driver library, ROCm's HSA runtime) place
            // host memory by NUMA node, pin it, share it through anonymous
            // files and order it across threads: none of these reaches a
            // file, a socket or another process.
            for nr in [
                libc::SYS_get_mempolicy,
                libc::SYS_set_mempolicy,
                libc::SYS_mbind,
                libc::SYS_mlock,
                libc::SYS_munlock,
                libc::SYS_memfd_create,
                libc::SYS_membarrier,
                libc::SYS_sched_setaffinity,
            ] {
                rules.insert(nr, vec![]);
            }
        } else {
            rules.insert(libc::SYS_ioctl, one_of(1, &requests)?);
        }
        // prctl: thread names and reads of its own state only.
        rules.insert(
            libc::SYS_prctl,
            one_of(
                0,
                &[
                    libc::PR_SET_NAME as u64,
                    libc::PR_GET_NAME as u64,
                    libc::PR_GET_DUMPABLE as u64,
                    libc::PR_GET_NO_NEW_PRIVS as u64,
                    libc::PR_GET_SECCOMP as u64,
                    libc::PR_CAPBSET_READ as u64,
                    libc::PR_GET_SECUREBITS as u64,
                ],
            )?,
        );
        // prlimit64: reading (or setting) its own limits only (pid 0).
        rules.insert(libc::SYS_prlimit64, one_of(0, &[0])?);
        // seccomp: adding a filter only, which can only forbid more (a
        // parser worker stacks its compute-only filter on this one).
        rules.insert(libc::SYS_seccomp, one_of(0, &[libc::SECCOMP_SET_MODE_FILTER as u64])?);
        let allow = compile(rules, SeccompAction::Errno(libc::EPERM as u32), SeccompAction::Allow)?;
        Ok(vec![first, allow])
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        let sockets = match self.sockets {
            Sockets::UnixOnly => "Unix sockets only",
            Sockets::UnixAndLoopback => "Unix sockets; TCP on its own loopback",
        };
        let ioctl = if self.driver_ioctl { "; device ioctl for its GPU" } else { "" };
        format!("seccomp allow-list ({sockets}{ioctl})")
    }
}
