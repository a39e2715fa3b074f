//! A confined child, prepared in the parent and started by one linear
//! sequence of named steps (SPEC T1, STYLE 9). See the crate's front page
//! for the order and why it is that order.

use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::child::ConfinedChild;
use crate::error::{SpawnError, Step};
use crate::landlock::Rules;
use crate::raw;
use crate::root::Root;
use crate::seccomp::Policy;

/// Namespaces every confined child gets at `clone3` (a cgroup namespace
/// too, at `clone3` or after the child has joined its cgroup; a network
/// one, and a user one unless it drops to an identity of the caller's
/// choosing).
const NAMESPACES: u64 = (libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS) as u64;
/// The namespaces of a child with its own network, for reports.
const OWN_NAMESPACES: &str = "user, mount, PID, network, IPC, UTS and cgroup namespaces";
/// Those of a child with no network at all.
const NO_NETWORK_NAMESPACES: &str =
    "mount, PID, IPC, UTS and cgroup namespaces; a network namespace of its own with no interface up (no loopback)";
/// Those of a child with no network at all and the caller's ids.
const NO_NETWORK_OWN_USER_NAMESPACES: &str = "user, mount, PID, IPC, UTS and cgroup namespaces; a network namespace \
                                              of its own with no interface up (no loopback)";
/// Most descriptors a child is given, numbered from 3.
pub const MAX_FDS: usize = 4;
/// Most arguments or environment variables a child is given.
pub const MAX_ARGS: usize = 64;
/// Lowest descriptor number of the report pipe (above fd 3, the listener).
const REPORT_FD_MIN: RawFd = 10;
/// A report record: kind (0 fatal, 1 warning), step, errno (LE).
const RECORD: usize = 6;

/// `struct clone_args` of `<linux/sched.h>` (version 2, 88 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// What protects a confined child, as applied — for `labfy status`, the
/// UI and the log. `missing` names each protection this kernel could not
/// give, loudly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// One line per protection in force.
    pub applied: Vec<String>,
    /// One line per protection this platform lacks.
    pub missing: Vec<String>,
    /// The same, as short codes for a UI to translate: `landlock`,
    /// `seccomp`, `proc`.
    pub missing_codes: Vec<&'static str>,
}

impl fmt::Display for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.applied.join("; "))?;
        if !self.missing.is_empty() {
            write!(f, "; MISSING: {}", self.missing.join("; "))?;
        }
        Ok(())
    }
}

/// Where a child's network comes from.
#[derive(Debug, Clone, Copy)]
enum Network {
    /// A new user namespace and a new network namespace (loopback only),
    /// both its own: the workspace server.
    Own,
    /// A new network namespace with no interface up, not even loopback: no
    /// network at all (a `sandbox.exec` run, SPEC X1; the local model,
    /// which listens on a Unix socket). With [`Jail::run_as`] (a privileged
    /// caller) the child drops to that identity; without it, it gets a user
    /// namespace of its own too, mapping the caller's ids to themselves, as
    /// [`Network::Own`] does — how an unprivileged caller confines.
    Nothing,
}

/// The unprivileged identity a child of a privileged caller runs as.
#[derive(Debug, Clone)]
struct Identity {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
}

/// Most supplementary groups of [`Jail::run_as`].
pub const MAX_GROUPS: usize = 8;

/// A child to confine: its program, arguments, environment, root, limits
/// and filters. Nothing is inherited that is not named here: the
/// environment starts empty, descriptors other than the listener close.
pub struct Jail {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    /// Descriptors passed, as (descriptor here, number in the child).
    fds: Vec<(RawFd, RawFd)>,
    hostname: CString,
    root: Root,
    writable: Vec<PathBuf>,
    /// Writable places of the new root named as they are inside.
    writable_inside: Vec<PathBuf>,
    limits: Vec<(u32, u64)>,
    landlock: bool,
    tcp_connect: bool,
    proc_writable: bool,
    seccomp: Option<Policy>,
    network: Network,
    identity: Option<Identity>,
    /// `cgroup.procs` files the child writes itself into, first thing.
    cgroup: Vec<CString>,
    /// Where stdout and stderr go (the caller's stderr, stdout to
    /// `/dev/null`, when `None`).
    output: Option<(RawFd, RawFd)>,
    /// Devices a driver is reached through (a GPU's), bound and allowed.
    driver_devices: Vec<PathBuf>,
    /// Passed descriptors (child numbering) readable again by path.
    readable_fds: Vec<RawFd>,
    /// The working directory, a path of the new root (`/` when `None`).
    current_dir: Option<CString>,
    /// The file mode creation mask the program starts with (the caller's
    /// when `None`).
    umask: Option<libc::mode_t>,
    /// A directory of the new root handed to the caller before `execve`.
    export: Option<CString>,
}

/// Everything the child touches, built before the clone.
struct Prepared {
    program: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp_ptrs: Vec<*const libc::c_char>,
    uid_map: CString,
    gid_map: CString,
    staging: CString,
    seccomp: Vec<Vec<libc::sock_filter>>,
    landlock: Option<Rules>,
}

fn cstring(s: &OsStr) -> Result<CString, SpawnError> {
    CString::new(s.as_bytes()).map_err(|_| SpawnError::prepare(format!("{} holds a NUL", s.to_string_lossy())))
}

impl Jail {
    /// A child running `program` (an absolute path, bound read-only into
    /// `root` at the same place) in `root`.
    pub fn new(program: &Path, root: Root) -> Self {
        Self {
            program: program.to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            fds: Vec::new(),
            hostname: c"labfy".to_owned(),
            root,
            writable: Vec::new(),
            writable_inside: Vec::new(),
            limits: Vec::new(),
            landlock: true,
            tcp_connect: false,
            proc_writable: false,
            seccomp: None,
            network: Network::Own,
            identity: None,
            cgroup: Vec::new(),
            output: None,
            driver_devices: Vec::new(),
            readable_fds: Vec::new(),
            current_dir: None,
            umask: None,
            export: None,
        }
    }

    /// No network at all (see [`Network::Nothing`]): a network namespace
    /// of its own where not even loopback is up. A privileged caller names
    /// the identity the child drops to ([`Jail::run_as`]); an unprivileged
    /// one does not, and the child keeps its ids in a user namespace of its
    /// own.
    pub fn no_network(&mut self) -> &mut Self {
        self.network = Network::Nothing;
        self
    }

    /// The file mode creation mask the program starts with (a socket it
    /// creates takes its mode from it).
    pub fn umask(&mut self, mask: u32) -> &mut Self {
        self.umask = Some(mask & 0o777);
        self
    }

    /// Hands the directory `inside` (a path of the new root: a
    /// [`Root::tmpfs_at`]) to the caller once the root is built, before
    /// `execve`, as a descriptor ([`ConfinedChild::take_exported`]): the
    /// caller reads what the run left there after its namespaces are gone
    /// (the descriptor keeps the mount alive), and needs no mount of its own.
    pub fn export_dir(&mut self, inside: &Path) -> Result<&mut Self, SpawnError> {
        if !inside.is_absolute() {
            return Err(SpawnError::prepare(format!("{} is not an absolute path", inside.display())));
        }
        self.export = Some(cstring(inside.as_os_str())?);
        Ok(self)
    }

    /// Whether the child gets a user namespace of its own.
    fn own_user_namespace(&self) -> bool {
        match self.network {
            Network::Own => true,
            Network::Nothing => self.identity.is_none(),
        }
    }

    /// The program starts in `dir`, a path of the new root (one the root
    /// binds or makes); `/` otherwise.
    pub fn current_dir(&mut self, dir: &Path) -> Result<&mut Self, SpawnError> {
        if !dir.is_absolute() {
            return Err(SpawnError::prepare(format!("{} is not an absolute path", dir.display())));
        }
        self.current_dir = Some(cstring(dir.as_os_str())?);
        Ok(self)
    }

    /// Runs the program as `uid`/`gid` with these supplementary groups
    /// (with [`Jail::no_network`] only, and a privileged caller: a child in
    /// its own user namespace keeps the caller's ids).
    pub fn run_as(&mut self, uid: u32, gid: u32, groups: &[u32]) -> &mut Self {
        self.identity = Some(Identity { uid, gid, groups: groups.to_vec() });
        self
    }

    /// Writes the child into these `cgroup.procs` files (one per controller
    /// hierarchy) before it runs anything, then gives it a cgroup namespace
    /// rooted there. A write that fails fails the spawn: never unconfined.
    pub fn cgroup(&mut self, procs: impl IntoIterator<Item = CString>) -> &mut Self {
        self.cgroup = procs.into_iter().collect();
        self
    }

    /// stdout and stderr both to `fd` (the caller's log pipe).
    pub fn output(&mut self, fd: RawFd) -> &mut Self {
        self.output = Some((fd, fd));
        self
    }

    /// Where stdout and stderr go, apart (descriptors of the caller).
    pub fn streams(&mut self, stdout: RawFd, stderr: RawFd) -> &mut Self {
        self.output = Some((stdout, stderr));
        self
    }

    /// A device a driver is reached through (a GPU's `/dev/kfd`, a render
    /// node, `/dev/nvidia0`): bound into the root, readable, writable and
    /// `ioctl`-able through Landlock.
    pub fn driver_device(&mut self, path: &Path) -> Result<&mut Self, SpawnError> {
        self.root.writable(path)?;
        self.driver_devices.push(path.to_path_buf());
        Ok(self)
    }

    /// The file passed as descriptor `target` may be reopened through
    /// `/proc/self/fd/<target>` (Landlock would otherwise refuse a file
    /// outside the new root).
    pub fn reopen_fd(&mut self, target: RawFd) -> &mut Self {
        self.readable_fds.push(target);
        self
    }

    /// One more argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// More arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&mut self, args: I) -> &mut Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// One environment variable (the environment starts empty).
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// A listening socket passed as fd 3 (`LISTEN_FDS=1` is the caller's to set).
    pub fn listener(&mut self, fd: RawFd) -> &mut Self {
        self.pass_fd(fd, 3)
    }

    /// `fd` passed to the child as descriptor `target` (3 to
    /// 3 + [`MAX_FDS`] − 1); every other descriptor closes at exec.
    pub fn pass_fd(&mut self, fd: RawFd, target: RawFd) -> &mut Self {
        self.fds.retain(|(_, t)| *t != target);
        self.fds.push((fd, target));
        self
    }

    /// The host name inside (default `labfy`).
    pub fn hostname(&mut self, name: &str) -> Result<&mut Self, SpawnError> {
        self.hostname = CString::new(name).map_err(|_| SpawnError::prepare("host name holds a NUL"))?;
        Ok(self)
    }

    /// A directory the child may write (it must also be bound writable in
    /// the root): Landlock names it.
    pub fn may_write(&mut self, path: &Path) -> &mut Self {
        self.writable.push(path.to_path_buf());
        self
    }

    /// A directory the child may write at `inside`, a place of its own
    /// root (bound there with `Root::writable_at`): Landlock names it as
    /// is, nothing resolved on the host.
    pub fn may_write_at(&mut self, inside: &Path) -> &mut Self {
        self.writable_inside.push(inside.to_path_buf());
        self
    }

    /// A resource limit (`libc::RLIMIT_*`), soft and hard alike.
    pub fn limit(&mut self, resource: u32, value: u64) -> &mut Self {
        self.limits.push((resource, value));
        self
    }

    /// TCP connections allowed through Landlock (the network namespace still
    /// has loopback only).
    pub fn tcp_connect(&mut self, allowed: bool) -> &mut Self {
        self.tcp_connect = allowed;
        self
    }

    /// Its own `/proc` writable through Landlock (files only: nothing is
    /// created or removed there). NVIDIA's driver (570 and later) names its
    /// threads at `cuInit` by writing `/proc/<pid>/task/<tid>/comm`, and
    /// fails with error 304 (« OS call failed ») when refused; Landlock
    /// cannot name that file ahead of the threads, only the tree above it.
    /// What the kernel itself lets a process write of its own stays the
    /// bound: the child's `/proc` is its own PID namespace's (no other
    /// process shows there), and without a capability and as an
    /// unprivileged user it writes no `/proc/sys` knob, only its own files
    /// (thread names, `oom_score_adj` upwards, `coredump_filter`…).
    pub fn proc_writable(&mut self) -> &mut Self {
        self.proc_writable = true;
        self
    }

    /// The system-call allow-list; without one the child runs unfiltered.
    pub fn seccomp(&mut self, policy: Policy) -> &mut Self {
        self.seccomp = Some(policy);
        self
    }

    fn landlock_rules(&self, abi: u32) -> Result<Rules, SpawnError> {
        let mut rules = Rules::new(abi);
        let program = std::fs::canonicalize(&self.program).map_err(|e| SpawnError {
            step: Step::Prepare,
            source: e,
            detail: self.program.display().to_string(),
        })?;
        rules.executable(&program)?;
        for system in ["/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"] {
            let p = Path::new(system);
            if p.is_dir() && !p.is_symlink() {
                rules.executable(p)?;
            }
        }
        for w in &self.writable {
            let real = std::fs::canonicalize(w).map_err(|e| SpawnError {
                step: Step::Prepare,
                source: e,
                detail: w.display().to_string(),
            })?;
            rules.writable(&real)?;
        }
        for w in &self.writable_inside {
            rules.writable(w)?;
        }
        rules.writable(Path::new("/tmp"))?;
        for d in ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"] {
            if Path::new(d).exists() {
                rules.device(Path::new(d))?;
            }
        }
        for d in &self.driver_devices {
            rules.driver_device(d)?;
        }
        for fd in &self.readable_fds {
            rules.readable_fd(*fd)?;
        }
        if self.proc_writable {
            rules.writable_files(Path::new("/proc"))?;
        }
        if self.tcp_connect {
            rules.allow_tcp_connect();
        }
        Ok(rules)
    }

    /// What [`Jail::spawn`] will apply on this kernel.
    pub fn confinement(&self) -> Confinement {
        let namespaces = match self.network {
            Network::Own => OWN_NAMESPACES,
            Network::Nothing if self.identity.is_none() => NO_NETWORK_OWN_USER_NAMESPACES,
            Network::Nothing => NO_NETWORK_NAMESPACES,
        };
        let mut applied = vec![namespaces.to_owned(), "minimal root (pivot_root)".to_owned()];
        let (mut missing, mut missing_codes) = (Vec::new(), Vec::new());
        match crate::landlock::abi() {
            Some(abi) => match self.landlock_rules(abi) {
                Ok(r) if self.landlock => applied.push(r.describe()),
                _ => {
                    missing.push("Landlock (not requested)".into());
                    missing_codes.push("landlock");
                }
            },
            None => {
                missing.push("Landlock (this kernel has none, or it is disabled)".into());
                missing_codes.push("landlock");
            }
        }
        match &self.seccomp {
            Some(p) => applied.push(p.describe()),
            None => {
                missing.push("seccomp (not requested)".into());
                missing_codes.push("seccomp");
            }
        }
        applied.push("no capabilities, no_new_privs".into());
        if let Some(id) = &self.identity {
            applied.push(format!("uid {} gid {}", id.uid, id.gid));
        }
        Confinement { applied, missing, missing_codes }
    }

    fn prepare(&mut self) -> Result<Prepared, SpawnError> {
        let mut targets: Vec<RawFd> = self.fds.iter().map(|(_, t)| *t).collect();
        targets.sort_unstable();
        if self.fds.len() > MAX_FDS || targets.iter().zip(3..).any(|(t, want)| *t != want) {
            return Err(SpawnError::prepare(format!(
                "descriptors are passed as 3, 4… in a row, at most {MAX_FDS}: {targets:?}"
            )));
        }
        if self.args.len() > MAX_ARGS || self.env.len() > MAX_ARGS || self.cgroup.len() > MAX_ARGS {
            return Err(SpawnError::prepare(format!("more than {MAX_ARGS} arguments, variables or cgroups")));
        }
        match (&self.network, &self.identity) {
            (Network::Own, Some(_)) => {
                return Err(SpawnError::prepare(
                    "run_as needs no_network: in its own user namespace a child keeps the caller's ids",
                ));
            }
            (_, Some(id)) if id.groups.len() > MAX_GROUPS => {
                return Err(SpawnError::prepare(format!("more than {MAX_GROUPS} supplementary groups")));
            }
            _ => {}
        }
        if !self.program.is_absolute() {
            return Err(SpawnError::prepare(format!("{} is not an absolute path", self.program.display())));
        }
        let program_real = std::fs::canonicalize(&self.program).map_err(|e| SpawnError {
            step: Step::Prepare,
            source: e,
            detail: self.program.display().to_string(),
        })?;
        self.root.read_only(&program_real)?;
        let program = cstring(program_real.as_os_str())?;
        let mut argv = vec![cstring(self.program.as_os_str())?];
        for a in &self.args {
            argv.push(cstring(a)?);
        }
        let mut envp = Vec::new();
        for (k, v) in &self.env {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            envp.push(cstring(&kv)?);
        }
        let ptrs = |v: &[CString]| v.iter().map(|c| c.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
        // SAFETY: geteuid/getegid take no arguments and cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let map = |id: u32| CString::new(format!("{id} {id} 1\n")).map_err(|_| SpawnError::prepare("id map"));
        let seccomp = match &self.seccomp {
            Some(p) => p
                .compile()?
                .into_iter()
                .map(|prog| {
                    prog.into_iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect()
                })
                .collect(),
            None => Vec::new(),
        };
        let landlock = match crate::landlock::abi() {
            Some(abi) if self.landlock => Some(self.landlock_rules(abi)?),
            _ => None,
        };
        // The new root is assembled on a tmpfs mounted over this directory of
        // the child's private mount namespace (the host never sees it).
        let staging = ["/tmp", "/mnt", "/media", "/srv"]
            .into_iter()
            .find(|d| Path::new(d).is_dir())
            .ok_or_else(|| SpawnError::prepare("no directory to assemble the root on (/tmp, /mnt…)"))?;
        Ok(Prepared {
            argv_ptrs: ptrs(&argv),
            envp_ptrs: ptrs(&envp),
            _argv: argv,
            _envp: envp,
            program,
            uid_map: map(uid)?,
            gid_map: map(gid)?,
            staging: CString::new(staging).map_err(|_| SpawnError::prepare("staging"))?,
            seccomp,
            landlock,
        })
    }

    /// Starts the child. Returns once it has reached `execve` (or failed a
    /// step: then it has exited and been reaped, and the error names the
    /// step).
    pub fn spawn(mut self) -> Result<(ConfinedChild, Confinement), SpawnError> {
        let mut confinement = self.confinement();
        let plan = self.prepare()?;
        let (read_end, write_end) = report_pipe().map_err(|e| SpawnError::new(Step::Prepare, e))?;
        // The exported directory's way back: a datagram pair, both ends
        // above the passed descriptors, closed in the child at `execve`.
        let export_pair = match &self.export {
            Some(_) => Some(export_pair().map_err(|e| SpawnError::new(Step::Prepare, e))?),
            None => None,
        };
        let mut pidfd: libc::c_int = -1;
        let mut flags = NAMESPACES | libc::CLONE_PIDFD as u64;
        flags |= libc::CLONE_NEWNET as u64;
        if self.own_user_namespace() {
            flags |= libc::CLONE_NEWUSER as u64;
        }
        if self.cgroup.is_empty() {
            flags |= libc::CLONE_NEWCGROUP as u64;
        }
        let args = CloneArgs {
            flags,
            pidfd: &mut pidfd as *mut libc::c_int as u64,
            exit_signal: libc::SIGCHLD as u64,
            ..CloneArgs::default()
        };
        // SAFETY: clone3 with a clone_args of the size passed and no stack:
        // fork semantics. The child runs only `child_main`, which makes
        // async-signal-safe system calls on memory prepared above and never
        // returns.
        let pid =
            unsafe { libc::syscall(libc::SYS_clone3, &args as *const CloneArgs, std::mem::size_of::<CloneArgs>()) };
        if pid == 0 {
            // SAFETY: closing the parent's ends in the child's copy.
            unsafe { libc::close(read_end) };
            if let Some((ours, _)) = export_pair {
                // SAFETY: as above.
                unsafe { libc::close(ours) };
            }
            self.child_main(&plan, write_end, export_pair.map(|(_, theirs)| theirs));
        }
        // SAFETY: closing our copy of the child's ends.
        unsafe { libc::close(write_end) };
        if let Some((_, theirs)) = export_pair {
            // SAFETY: as above.
            unsafe { libc::close(theirs) };
        }
        // SAFETY: our end of the export pair, ours alone from here.
        let export_end = export_pair.map(|(ours, _)| unsafe { OwnedFd::from_raw_fd(ours) });
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: closing our own descriptor.
            unsafe { libc::close(read_end) };
            return Err(SpawnError::new(Step::Clone, e));
        }
        // SAFETY: clone3 wrote a fresh pidfd that nothing else owns.
        let mut child = ConfinedChild::new(pid as u32, unsafe { OwnedFd::from_raw_fd(pidfd) });
        let reports = read_reports(read_end);
        for (fatal, step, errno) in reports {
            let err = io::Error::from_raw_os_error(errno);
            if fatal {
                let mut child = child;
                // The child exits right after a fatal report.
                while let Ok(None) = child.try_wait() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                return Err(SpawnError::new(step, err));
            }
            confinement.missing.push(format!("{step}: {err}"));
            if step == Step::Proc {
                confinement.missing_codes.push("proc");
            }
        }
        // Sent before `execve`, which the reports' end has confirmed.
        if let Some(end) = export_end {
            match raw::recv_fd(std::os::fd::AsRawFd::as_raw_fd(&end)) {
                Ok(Some(dir)) => child.set_exported(dir),
                Ok(None) => {
                    return Err(SpawnError::new(Step::Root, io::Error::other("the exported directory never came")));
                }
                Err(e) => return Err(SpawnError::new(Step::Root, e)),
            }
        }
        Ok((child, confinement))
    }

    /// The child's side: every step in order, then `execve`; on a failure,
    /// a fatal report and `_exit(127)`. Never returns.
    fn child_main(&self, plan: &Prepared, report: RawFd, export: Option<RawFd>) -> ! {
        let failed = match self.child_steps(plan, report, export) {
            Ok(()) => (Step::Exec, io::Error::last_os_error()),
            Err(e) => e,
        };
        send(report, true, failed.0, failed.1.raw_os_error().unwrap_or(libc::EIO));
        // SAFETY: _exit is async-signal-safe and runs no destructor.
        unsafe { libc::_exit(127) }
    }

    /// Steps 2–15; returns only on failure (or if `execve` returns).
    fn child_steps(&self, plan: &Prepared, report: RawFd, export: Option<RawFd>) -> Result<(), (Step, io::Error)> {
        let at = |step: Step| move |e: io::Error| (step, e);

        // 2. Die with the parent. PID 1 of a namespace ignores signals it
        //    has no handler for, so SIGKILL. Dumpable again for the maps
        //    (the supervisor is not dumpable, and /proc/self would be root's).
        raw::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong).map_err(at(Step::ParentDeath))?;
        raw::prctl(libc::PR_SET_DUMPABLE, 1).map_err(at(Step::ParentDeath))?;

        // 3. Into the caller's cgroup before it runs anything of its own,
        //    then a cgroup namespace rooted there (it sees no other).
        if !self.cgroup.is_empty() {
            raw::join_cgroups(&self.cgroup).map_err(at(Step::Cgroup))?;
            raw::unshare(libc::CLONE_NEWCGROUP).map_err(at(Step::Cgroup))?;
        }

        // 4. Identity maps: the same ids inside as outside, so file access
        //    and the SO_PEERCRED seen by the other daemons are unchanged.
        if self.own_user_namespace() {
            raw::write_file(c"/proc/self/setgroups", b"deny").map_err(at(Step::IdMaps))?;
            raw::write_file(c"/proc/self/uid_map", plan.uid_map.as_bytes()).map_err(at(Step::IdMaps))?;
            raw::write_file(c"/proc/self/gid_map", plan.gid_map.as_bytes()).map_err(at(Step::IdMaps))?;
        }

        // 5. Its own host name.
        let name = self.hostname.as_bytes();
        // SAFETY: a buffer of the stated length.
        raw::check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map_err(at(Step::Hostname))?;

        // 6. A session of its own: no controlling terminal (nothing to type
        //    into with TIOCSTI), and a Ctrl-C in the operator's terminal
        //    reaches the supervisor only. stdin is /dev/null; stdout and
        //    stderr go to the caller's output when it names one, otherwise
        //    stdout is /dev/null and stderr stays the supervisor's (the log).
        //    The passed descriptors take their numbers (3, 4…); every
        //    descriptor above them is marked close-on-exec (the report pipe
        //    already is).
        // SAFETY: setsid and descriptor operations on integers and a constant path.
        unsafe {
            raw::check(libc::setsid()).map_err(at(Step::Descriptors))?;
            let null = raw::check(libc::open(c"/dev/null".as_ptr(), libc::O_RDWR)).map_err(at(Step::Descriptors))?;
            raw::check(libc::dup2(null, 0)).map_err(at(Step::Descriptors))?;
            match self.output {
                Some((out, err)) => {
                    raw::check(libc::dup2(out, 1)).map_err(at(Step::Descriptors))?;
                    raw::check(libc::dup2(err, 2)).map_err(at(Step::Descriptors))?;
                }
                None => {
                    raw::check(libc::dup2(null, 1)).map_err(at(Step::Descriptors))?;
                }
            }
            if null > 2 {
                libc::close(null);
            }
        }
        // Each passed descriptor is first copied above the range (one may sit
        // on another's target), then placed; dup2 clears close-on-exec.
        let mut high = [-1 as RawFd; MAX_FDS];
        for (i, (fd, _)) in self.fds.iter().enumerate() {
            // SAFETY: fcntl on a descriptor the caller passed.
            high[i] = raw::check(unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, REPORT_FD_MIN) })
                .map_err(at(Step::Descriptors))?;
        }
        for (i, (_, target)) in self.fds.iter().enumerate() {
            // SAFETY: descriptor operations on integers.
            raw::check(unsafe { libc::dup2(high[i], *target) }).map_err(at(Step::Descriptors))?;
        }
        let first_closed = 3 + self.fds.len() as libc::c_uint;
        // SAFETY: close_range with plain integers.
        raw::check(unsafe { libc::close_range(first_closed, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC as i32) })
            .map_err(at(Step::Descriptors))?;

        // 7. The minimal root: nothing propagates back to the host; the new
        //    root is a tmpfs holding only what `Root` names; a private /proc
        //    of the new PID namespace (mounted while the host's is still
        //    visible, which the kernel requires); pivot_root; the old root
        //    detached; the new root read-only.
        //    The root's own directories are made world-searchable whatever
        //    the caller's umask (a child that drops to another uid must
        //    reach its program); the caller's umask is restored after.
        raw::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(at(Step::Root))?;
        // SAFETY: umask takes and returns plain integers.
        let umask = unsafe { libc::umask(0o022) };
        self.root.build(&plan.staging).map_err(at(Step::Root))?;
        // SAFETY: as above.
        unsafe { libc::umask(umask) };
        if self.root.proc {
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            // A service manager may forbid it (a masked host /proc); then the
            // child runs without /proc, and the parent reports it.
            if let Err(e) = raw::mount(Some(c"proc"), c"proc", Some(c"proc"), flags, None) {
                send(report, false, Step::Proc, e.raw_os_error().unwrap_or(libc::EIO));
            }
        }
        raw::pivot_here().map_err(at(Step::PivotRoot))?;
        raw::set_readonly(c"/", true, false).map_err(at(Step::PivotRoot))?;
        if let Some(dir) = &self.current_dir {
            raw::chdir(dir).map_err(at(Step::PivotRoot))?;
        }
        //    The exported directory, handed over now that it is in place.
        if let (Some(dir), Some(sock)) = (&self.export, export) {
            let fd = raw::open_dir_path(dir).map_err(at(Step::Root))?;
            raw::send_fd(sock, fd).map_err(at(Step::Root))?;
            // SAFETY: our own descriptor, sent already.
            unsafe { libc::close(fd) };
        }

        // 8. Loopback, the only interface of its own network namespace (none
        //    at all for a child with no network).
        if let Network::Own = self.network {
            raw::loopback_up().map_err(at(Step::Loopback))?;
        }

        // 9. Limits (core dumps off, open files bounded…), and the mode
        //     mask the program starts with.
        for (resource, value) in &self.limits {
            raw::set_limit(*resource, *value).map_err(at(Step::Limits))?;
        }
        if let Some(mask) = self.umask {
            // SAFETY: umask takes and returns plain integers.
            unsafe { libc::umask(mask) };
        }

        // 10. Nothing exec'd from here on can gain a privilege (and Landlock
        //     and seccomp require it of an unprivileged caller).
        raw::prctl(libc::PR_SET_NO_NEW_PRIVS, 1).map_err(at(Step::NoNewPrivs))?;

        // 11. Landlock, on the paths of the new root.
        if let Some(rules) = &plan.landlock {
            rules.enforce().map_err(at(Step::Landlock))?;
        }

        // 12. No capability survives exec, not even inside the namespaces.
        raw::drop_capabilities().map_err(at(Step::Capabilities))?;

        // 13. The unprivileged identity, after the bounding set is emptied
        //     (that needs CAP_SETPCAP) and before seccomp (which forbids
        //     setuid): leaving uid 0 clears every remaining capability.
        //     A change of credentials clears the parent-death signal: armed
        //     again at once (a parent that died in between leaves the child
        //     to the cgroup its caller kills).
        if let Some(id) = &self.identity {
            raw::set_identity(id.uid, id.gid, &id.groups).map_err(at(Step::Identity))?;
            raw::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong).map_err(at(Step::Identity))?;
        }

        // 14. Seccomp last: it forbids mount, prctl and the rest used above.
        for program in &plan.seccomp {
            raw::install_seccomp(program).map_err(at(Step::Seccomp))?;
        }

        // 15. execve; it returns only on failure.
        // SAFETY: NUL-terminated program path and null-terminated arrays of
        // pointers into CStrings that live in `plan`.
        unsafe { libc::execve(plan.program.as_ptr(), plan.argv_ptrs.as_ptr(), plan.envp_ptrs.as_ptr()) };
        Err((Step::Exec, io::Error::last_os_error()))
    }
}

/// A close-on-exec datagram socket pair whose descriptors are above the
/// passed ones: (the parent's end, the child's end).
fn export_pair() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into `fds`.
    raw::check(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
    let high = |fd: RawFd| -> io::Result<RawFd> {
        // SAFETY: fcntl on a descriptor of ours; the original is closed.
        let h = raw::check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, REPORT_FD_MIN) });
        unsafe { libc::close(fd) };
        h
    };
    Ok((high(fds[0])?, high(fds[1])?))
}

/// A close-on-exec pipe whose descriptors are above fd 3.
fn report_pipe() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    raw::check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let high = |fd: RawFd| -> io::Result<RawFd> {
        // SAFETY: fcntl on a descriptor of ours; the original is closed.
        let h = raw::check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, REPORT_FD_MIN) });
        unsafe { libc::close(fd) };
        h
    };
    Ok((high(fds[0])?, high(fds[1])?))
}

/// A report record, ignoring write failures (the parent then sees EOF and
/// the exit status).
fn send(fd: RawFd, fatal: bool, step: Step, errno: i32) {
    let mut rec = [0u8; RECORD];
    rec[0] = u8::from(!fatal);
    rec[1] = step as u8;
    rec[2..].copy_from_slice(&errno.to_le_bytes());
    raw::write_all(fd, &rec);
}

/// Reads every record until EOF (the child's exec or exit closes its end).
fn read_reports(fd: RawFd) -> Vec<(bool, Step, i32)> {
    // SAFETY: we own `fd`; File closes it.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut buf = Vec::new();
    let _ = io::Read::read_to_end(&mut file, &mut buf);
    buf.chunks_exact(RECORD)
        .map(|r| (r[0] == 0, Step::from_u8(r[1]), i32::from_le_bytes([r[2], r[3], r[4], r[5]])))
        .collect()
}

impl fmt::Debug for Jail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jail").field("program", &self.program).field("args", &self.args).finish_non_exhaustive()
    }
}
