//! Landlock (SPEC T1), through its three system calls: the ABI is probed in
//! the parent; the ruleset is created, filled and enforced in the child,
//! after `pivot_root`, on the paths of the new root.
//!
//! What it adds to the namespaces and the minimal root: file access by path
//! even inside the child's own tree (its root is read-only and executable,
//! only the paths it is given are writable), no TCP `bind` (and no TCP
//! `connect` unless asked), and — ABI 6 — abstract Unix sockets and signals
//! scoped to the child's own domain.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::SpawnError;
use crate::raw::{check, check_long};

/// `landlock_create_ruleset(2)`.
const SYS_LANDLOCK_CREATE_RULESET: libc::c_long = 444;
/// `landlock_add_rule(2)`.
const SYS_LANDLOCK_ADD_RULE: libc::c_long = 445;
/// `landlock_restrict_self(2)`.
const SYS_LANDLOCK_RESTRICT_SELF: libc::c_long = 446;
/// `LANDLOCK_CREATE_RULESET_VERSION`.
const CREATE_RULESET_VERSION: u32 = 1;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;
/// `LANDLOCK_RULE_NET_PORT` (ABI 4).
const RULE_NET_PORT: libc::c_int = 2;

/// `LANDLOCK_ACCESS_FS_*`, by ABI.
mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5.
    pub const IOCTL_DEV: u64 = 1 << 15;
}

/// `LANDLOCK_ACCESS_NET_*` (ABI 4).
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
/// `LANDLOCK_SCOPE_*` (ABI 6).
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// The Landlock ABI of the running kernel; `None` when it has none (or it
/// is disabled at boot).
pub fn abi() -> Option<u32> {
    // SAFETY: the documented probe: null attributes, size 0, the VERSION flag.
    let rc = unsafe {
        libc::syscall(SYS_LANDLOCK_CREATE_RULESET, std::ptr::null::<RulesetAttr>(), 0usize, CREATE_RULESET_VERSION)
    };
    (rc > 0).then_some(rc as u32)
}

/// Every file-system right the given ABI knows.
fn fs_all(abi: u32) -> u64 {
    let mut all = fs::EXECUTE
        | fs::WRITE_FILE
        | fs::READ_FILE
        | fs::READ_DIR
        | fs::REMOVE_DIR
        | fs::REMOVE_FILE
        | fs::MAKE_CHAR
        | fs::MAKE_DIR
        | fs::MAKE_REG
        | fs::MAKE_SOCK
        | fs::MAKE_FIFO
        | fs::MAKE_BLOCK
        | fs::MAKE_SYM;
    if abi >= 2 {
        all |= fs::REFER;
    }
    if abi >= 3 {
        all |= fs::TRUNCATE;
    }
    if abi >= 5 {
        all |= fs::IOCTL_DEV;
    }
    all
}

/// Rights on the read-only part of the tree.
const READ: u64 = fs::READ_FILE | fs::READ_DIR;

/// What a child may do, by path, once Landlock is enforced.
#[derive(Debug)]
pub struct Rules {
    abi: u32,
    /// Paths (inside the new root) and their rights.
    paths: Vec<(CString, u64)>,
    /// Descriptors of the child (a file passed open) and their rights.
    fds: Vec<(libc::c_int, u64)>,
    /// TCP ports the child may bind (ABI 4).
    bind_ports: Vec<u16>,
    allow_tcp_connect: bool,
}

/// Most paths one ruleset names.
pub const MAX_RULES: usize = 32;

impl Rules {
    /// Rules for `abi`: the whole tree readable, nothing executable or
    /// writable yet, no TCP bind, no TCP connect unless
    /// [`Rules::allow_tcp_connect`].
    pub fn new(abi: u32) -> Self {
        Self {
            abi,
            paths: vec![(c"/".to_owned(), READ)],
            fds: Vec::new(),
            bind_ports: Vec::new(),
            allow_tcp_connect: false,
        }
    }

    /// Rules for `abi` that grant nothing: no path readable until
    /// [`Rules::readable`] or [`Rules::executable`] names it (a document
    /// tool, which reads its input on a descriptor, not by path).
    pub fn nothing(abi: u32) -> Self {
        Self { abi, paths: Vec::new(), fds: Vec::new(), bind_ports: Vec::new(), allow_tcp_connect: false }
    }

    /// `path` and everything below it readable, nothing written or run.
    pub fn readable(&mut self, path: &Path) -> Result<&mut Self, SpawnError> {
        let rights = if path.is_dir() { READ } else { fs::READ_FILE };
        self.push(path, rights)
    }

    fn count(&self) -> usize {
        self.paths.len() + self.fds.len() + self.bind_ports.len()
    }

    fn push(&mut self, path: &Path, rights: u64) -> Result<&mut Self, SpawnError> {
        if self.count() >= MAX_RULES {
            return Err(SpawnError::prepare(format!("more than {MAX_RULES} Landlock rules")));
        }
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| SpawnError::prepare("a path holds a NUL"))?;
        self.paths.push((c, rights));
        Ok(self)
    }

    /// Programs and libraries under `path` may be executed (`/usr`, the
    /// child's own program).
    pub fn executable(&mut self, path: &Path) -> Result<&mut Self, SpawnError> {
        let rights = if path.is_dir() { READ | fs::EXECUTE } else { fs::READ_FILE | fs::EXECUTE };
        self.push(path, rights)
    }

    /// `path` (inside the new root) and everything below it writable:
    /// files written, created, removed; directories and sockets made.
    pub fn writable(&mut self, path: &Path) -> Result<&mut Self, SpawnError> {
        let rights = fs_all(self.abi) & !(fs::MAKE_CHAR | fs::MAKE_BLOCK | fs::EXECUTE | fs::IOCTL_DEV);
        self.push(path, rights)
    }

    /// `path`, a device file, readable and writable (`/dev/null`).
    pub fn device(&mut self, path: &Path) -> Result<&mut Self, SpawnError> {
        let truncate = if self.abi >= 3 { fs::TRUNCATE } else { 0 };
        self.push(path, fs::READ_FILE | fs::WRITE_FILE | truncate)
    }

    /// `path`, a device a driver is reached through (a GPU's `/dev/kfd` or
    /// render node): read, written, and — ABI 5 — its `ioctl` requests.
    pub fn driver_device(&mut self, path: &Path) -> Result<&mut Self, SpawnError> {
        let extra = if self.abi >= 5 { fs::IOCTL_DEV } else { 0 };
        self.push(path, fs::READ_FILE | fs::WRITE_FILE | extra)
    }

    /// The file open on descriptor `fd` of the child readable again by path
    /// (`/proc/self/fd/N` reopens it; the file lies outside the new root, so
    /// no path rule covers it). The rule names that very file, not a path.
    pub fn readable_fd(&mut self, fd: libc::c_int) -> Result<&mut Self, SpawnError> {
        if self.count() >= MAX_RULES {
            return Err(SpawnError::prepare(format!("more than {MAX_RULES} Landlock rules")));
        }
        self.fds.push((fd, fs::READ_FILE));
        Ok(self)
    }

    /// TCP `bind` allowed on `port` (a server's one listening port); every
    /// other port stays forbidden.
    pub fn allow_tcp_bind(&mut self, port: u16) -> Result<&mut Self, SpawnError> {
        if self.count() >= MAX_RULES {
            return Err(SpawnError::prepare(format!("more than {MAX_RULES} Landlock rules")));
        }
        self.bind_ports.push(port);
        Ok(self)
    }

    /// The files under `path` (inside the new root) writable as they are,
    /// opened with `O_TRUNC` too (a shell's `>`, `fopen(…, "w")`): nothing
    /// created, removed or renamed ([`crate::Jail::proc_writable`]).
    pub fn writable_files(&mut self, path: &Path) -> Result<&mut Self, SpawnError> {
        let truncate = if self.abi >= 3 { fs::TRUNCATE } else { 0 };
        self.push(path, READ | fs::WRITE_FILE | truncate)
    }

    /// TCP connections allowed (the local model's loopback port, whose number
    /// is not known in advance); the network namespace still has loopback only.
    pub fn allow_tcp_connect(&mut self) -> &mut Self {
        self.allow_tcp_connect = true;
        self
    }

    /// The ABI these rules were written for.
    pub fn abi(&self) -> u32 {
        self.abi
    }

    /// What enforcement covers, for reports.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("Landlock ABI {}: file access by path", self.abi)];
        if self.abi >= 4 {
            let bind = match self.bind_ports.as_slice() {
                [] => "no TCP bind".to_owned(),
                ports => {
                    format!("TCP bind on port {} only", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", "))
                }
            };
            parts.push(if self.allow_tcp_connect { bind } else { format!("{bind}, no TCP connect") });
        }
        if self.abi >= 6 {
            parts.push("abstract Unix sockets and signals scoped".into());
        }
        parts.join(", ")
    }

    /// Creates, fills and enforces the ruleset on the calling (child)
    /// process. Async-signal-safe: system calls on memory prepared before.
    /// Stacks on a domain the process is in already: rights only shrink.
    pub(crate) fn enforce(&self) -> io::Result<()> {
        let mut net = 0;
        if self.abi >= 4 {
            net = NET_BIND_TCP | if self.allow_tcp_connect { 0 } else { NET_CONNECT_TCP };
        }
        let scoped = if self.abi >= 6 { SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL } else { 0 };
        let attr = RulesetAttr { handled_access_fs: fs_all(self.abi), handled_access_net: net, scoped };
        // Older ABIs read a shorter structure.
        let size = match self.abi {
            1..=3 => std::mem::size_of::<u64>(),
            4 | 5 => 2 * std::mem::size_of::<u64>(),
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        // SAFETY: a ruleset attribute of at least `size` bytes.
        let ruleset =
            check_long(unsafe { libc::syscall(SYS_LANDLOCK_CREATE_RULESET, &attr as *const RulesetAttr, size, 0u32) })?
                as libc::c_int;
        let outcome = self.fill(ruleset).and_then(|()| {
            // SAFETY: a ruleset descriptor of ours.
            check_long(unsafe { libc::syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0u32) }).map(drop)
        });
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(ruleset) };
        outcome
    }

    fn fill(&self, ruleset: libc::c_int) -> io::Result<()> {
        for (path, rights) in &self.paths {
            add_path(ruleset, path, *rights)?;
        }
        for (fd, rights) in &self.fds {
            add_fd(ruleset, *fd, *rights)?;
        }
        if self.abi >= 4 {
            for port in &self.bind_ports {
                let attr = NetPortAttr { allowed_access: NET_BIND_TCP, port: u64::from(*port) };
                // SAFETY: a net-port attribute on this stack frame.
                check_long(unsafe {
                    libc::syscall(SYS_LANDLOCK_ADD_RULE, ruleset, RULE_NET_PORT, &attr as *const NetPortAttr, 0u32)
                })?;
            }
        }
        Ok(())
    }
}

fn add_fd(ruleset: libc::c_int, fd: libc::c_int, rights: u64) -> io::Result<()> {
    let attr = PathBeneathAttr { allowed_access: rights, parent_fd: fd };
    // SAFETY: a path-beneath attribute on this stack frame, naming a
    // descriptor the child holds.
    check_long(unsafe {
        libc::syscall(SYS_LANDLOCK_ADD_RULE, ruleset, RULE_PATH_BENEATH, &attr as *const PathBeneathAttr, 0u32)
    })
    .map(drop)
}

fn add_path(ruleset: libc::c_int, path: &CStr, rights: u64) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; the O_PATH descriptor is closed below.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
    let attr = PathBeneathAttr { allowed_access: rights, parent_fd: fd };
    // SAFETY: a path-beneath attribute on this stack frame.
    let rc = check_long(unsafe {
        libc::syscall(SYS_LANDLOCK_ADD_RULE, ruleset, RULE_PATH_BENEATH, &attr as *const PathBeneathAttr, 0u32)
    });
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
    rc.map(drop)
}
