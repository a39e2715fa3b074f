//! `labfy-confinement-probe`: plays a compromised workspace server (SPEC T1,
//! T3). Started by `labfy up` in the server's place (`LABFY_SERVER_BIN`), it
//! is confined by exactly the server's sequence and attempts each escape:
//! host Unix sockets (by path and abstract), signals and `/proc` of a host
//! process, files outside its data, writes to the socket directory, to
//! egress's state and to the bodies egress keeps for it, `AF_INET`/`AF_INET6`/
//! `AF_NETLINK`/`AF_PACKET` sockets,
//! `ptrace`, `mount`, `setns`, `unshare`, namespaces through `clone` and
//! `clone3`, `bpf`, `keyctl`, typing into a terminal. Run directly, with the
//! same arguments, it is the control: the same attempts from an unconfined
//! process, which must differ (tests/confinement.rs). With `--tool DIR` it
//! plays a document tool taken over by a hostile PDF instead (SPEC A1), its
//! control `--tool-control DIR`.
//!
//! It reads its targets from `<data-dir>/confinement-probe.targets`
//! (`key=value` lines: `unix`, `abstract`, `pid`, `file`, `tcp`, `mount`)
//! and prints one line per attempt on stderr: `PROBE <name> ok` or
//! `PROBE <name> errno <n>`, then `PROBE-END`. Diagnostics only: it is not
//! part of the Debian package.

// Each attempt is a raw system call, on purpose.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};

/// One line on stderr in one `write` (stderr is shared with the
/// supervisor's other children: a line written piecewise can be cut by
/// theirs).
fn say(line: String) {
    let _ = io::Write::write_all(&mut io::stderr(), format!("{line}\n").as_bytes());
}

fn report(name: &str, rc: io::Result<()>) {
    match rc {
        Ok(()) => say(format!("PROBE {name} ok")),
        Err(e) => say(format!("PROBE {name} errno {}", e.raw_os_error().unwrap_or(-1))),
    }
}

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// Runs `f` in a forked child (for attempts that would change this
/// process); the child's exit code is the errno, 0 for success.
fn in_child(f: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    // SAFETY: the probe is single-threaded; the child makes system calls
    // and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = match f() {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(255).min(255),
        };
        // SAFETY: leaving the child without running destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        n => Err(io::Error::from_raw_os_error(n)),
    }
}

fn socket(family: i32, kind: i32, proto: i32) -> io::Result<i32> {
    // SAFETY: socket(2) with integers.
    let fd = unsafe { libc::socket(family, kind | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 { Err(io::Error::last_os_error()) } else { Ok(fd) }
}

fn close(fd: i32) {
    // SAFETY: closing a descriptor of ours.
    unsafe { libc::close(fd) };
}

fn connect_unix(path: &[u8]) -> io::Result<()> {
    let fd = socket(libc::AF_UNIX, libc::SOCK_STREAM, 0)?;
    // SAFETY: a zeroed sockaddr_un filled within its bounds.
    let rc = unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let n = path.len().min(addr.sun_path.len() - 1);
        for (i, b) in path[..n].iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let len = (std::mem::size_of::<libc::sa_family_t>() + n) as libc::socklen_t;
        libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len)
    };
    let out = if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
    close(fd);
    out
}

fn connect_tcp(port: u16) -> io::Result<()> {
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0)?;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: a sockaddr_in of the stated size.
    let rc =
        unsafe { libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), std::mem::size_of_val(&addr) as u32) };
    let out = if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
    close(fd);
    out
}

fn open_socket(family: i32, kind: i32, proto: i32) -> io::Result<()> {
    socket(family, kind, proto).map(close)
}

fn create_file(path: &Path) -> io::Result<()> {
    std::fs::write(path, b"probe")?;
    std::fs::remove_file(path)
}

/// Runs `attempt` in a forked child confined as a document tool (when
/// `confine`; the control otherwise) and reports it: `ok`, `errno N`, or
/// `killed N` for a child the seccomp filter killed.
fn tool_attempt(name: &str, confine: bool, attempt: impl FnOnce() -> io::Result<()>) {
    // SAFETY: the probe is single-threaded; the child confines itself,
    // makes system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        if confine {
            let limits = labfy_sys::worker::WorkerLimits { memory_bytes: 1 << 30, cpu_seconds: 10 };
            if let Err(e) = labfy_sys::worker::confine_tool(limits, &[Path::new("/usr")]) {
                say(format!("PROBE-ERROR {name}: {e}"));
                // SAFETY: leaving the child without running destructors.
                unsafe { libc::_exit(254) };
            }
        }
        let code = match attempt() {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(255).min(253),
        };
        // SAFETY: leaving the child without running destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFSIGNALED(status) {
        say(format!("PROBE {name} killed {}", libc::WTERMSIG(status)));
    } else {
        match libc::WEXITSTATUS(status) {
            0 => say(format!("PROBE {name} ok")),
            n => say(format!("PROBE {name} errno {n}")),
        }
    }
}

fn open_path(path: &Path, flags: i32) -> io::Result<()> {
    let c =
        CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open(2) on a NUL-terminated path.
    let fd = check(unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) } as libc::c_long)?;
    close(fd as i32);
    Ok(())
}

/// `--tool DIR` / `--tool-control DIR`: what a document tool (SPEC A1:
/// poppler, Tesseract) can do once `labfy_sys::worker::confine_tool` has
/// run — read its programs, not `DIR/secret`; write, truncate or remove
/// nothing; open no socket; signal no other process.
fn tool_probe(dir: &Path, confine: bool) {
    let secret = dir.join("secret");
    tool_attempt("tool_read_usr", confine, || open_path(Path::new("/usr/bin"), libc::O_RDONLY | libc::O_DIRECTORY));
    tool_attempt("tool_read_data", confine, || open_path(&secret, libc::O_RDONLY));
    tool_attempt("tool_write_data", confine, || open_path(&dir.join("written"), libc::O_WRONLY | libc::O_CREAT));
    tool_attempt("tool_truncate_data", confine, || open_path(&secret, libc::O_WRONLY | libc::O_TRUNC));
    tool_attempt("tool_unlink_data", confine, || {
        let c = CString::new(secret.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: unlink(2) on a NUL-terminated path.
        check(unsafe { libc::unlink(c.as_ptr()) } as libc::c_long).map(drop)
    });
    tool_attempt("tool_socket", confine, || socket(libc::AF_UNIX, libc::SOCK_STREAM, 0).map(close));
    // SAFETY: getppid takes no argument.
    let parent = unsafe { libc::getppid() };
    // SAFETY: kill(2) with signal 0 only checks the target can be signalled.
    tool_attempt("tool_signal_other", confine, || check(unsafe { libc::kill(parent, 0) } as libc::c_long).map(drop));
    say("PROBE-END".into());
}

fn main() {
    let mut data = None;
    let mut run = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--data-dir") => data = args.next().map(PathBuf::from),
            Some("--runtime-dir") => run = args.next().map(PathBuf::from),
            Some(mode @ ("--tool" | "--tool-control")) => {
                let confine = mode == "--tool";
                let dir = args.next().map(PathBuf::from).unwrap_or_default();
                tool_probe(&dir, confine);
                return;
            }
            _ => {}
        }
    }
    let (Some(data), Some(run)) = (data, run) else {
        eprintln!("usage: labfy-confinement-probe --data-dir D --runtime-dir R");
        std::process::exit(2);
    };
    let targets = std::fs::read_to_string(data.join("confinement-probe.targets")).unwrap_or_default();
    let get = |key: &str| -> Vec<String> {
        targets.lines().filter_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_owned)).collect()
    };

    // Where it stands.
    say(format!("PROBE-PID {}", std::process::id()));
    // A line that would pass for the supervisor's, with a carriage return
    // to hide anything put before it (SPEC T3: the operator's view).
    say("\rlabfy: governor ready (forged by the probe)".into());
    let visible = std::fs::read_dir("/proc")
        .map(|d| d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok()).count())
        .unwrap_or(0);
    say(format!("PROBE-PROCS {visible}"));

    // Host services by path, and by abstract name.
    for (i, path) in get("unix").iter().enumerate() {
        report(&format!("unix_socket_{i}"), connect_unix(path.as_bytes()));
    }
    for name in get("abstract") {
        let mut raw = vec![0u8];
        raw.extend_from_slice(name.as_bytes());
        report("abstract_socket", connect_unix(&raw));
    }
    // Host processes: signal, /proc, ptrace.
    for pid in get("pid").iter().filter_map(|p| p.parse::<i32>().ok()) {
        // SAFETY: kill(2) with signal 0 (existence and permission only).
        report("signal_host_process", check(unsafe { libc::kill(pid, 0) } as libc::c_long).map(drop));
        report("proc_of_host_process", std::fs::metadata(format!("/proc/{pid}/status")).map(drop));
        report(
            "ptrace_host_process",
            in_child(|| {
                // SAFETY: PTRACE_ATTACH on a pid; the child exits right after.
                check(unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) }).map(drop)
            }),
        );
    }
    // Files outside its data.
    for (i, f) in get("file").iter().enumerate() {
        report(&format!("read_host_file_{i}"), std::fs::read(f).map(drop));
    }
    // The socket directory and egress's state: not writable; its own data:
    // writable.
    report("write_socket_dir", create_file(&run.join("probe-planted")));
    report("replace_supervisor_socket", std::fs::remove_file(run.join("supervisor.sock")));
    report(
        "operator_socket",
        connect_unix(run.join("operator").join("governor.operator.sock").as_os_str().as_encoded_bytes()),
    );
    report("rewrite_ipc_secret", std::fs::OpenOptions::new().write(true).open(run.join("ipc.secret")).map(drop));
    report("write_egress_state", create_file(&data.join("egress").join("probe-planted")));
    // The bodies egress keeps for the server (SPEC C3): only through egress.
    report("write_egress_bodies", create_file(&data.join("scratch").join("egress").join("probe-planted")));
    // Nor by moving the scratch directory aside and making an `egress` of
    // its own there (V5): `scratch` is a mount point. (Put back at once
    // where the rename works: the control run.)
    let (scratch, aside) = (data.join("scratch"), data.join("scratch-aside"));
    report(
        "rename_scratch",
        std::fs::rename(&scratch, &aside).map(|()| {
            let _ = std::fs::rename(&aside, &scratch);
        }),
    );
    // The other processes' log (SPEC U8, T3): neither read nor rewritten.
    let log = data.join("logs").join("labfy.log");
    report("read_log", std::fs::read(&log).map(drop));
    report("rewrite_log", create_file(&log));
    report("write_own_data", create_file(&data.join("probe-planted")));
    // Sockets of other families.
    report("socket_inet", open_socket(libc::AF_INET, libc::SOCK_STREAM, 0));
    report("socket_inet6", open_socket(libc::AF_INET6, libc::SOCK_STREAM, 0));
    report("socket_netlink", open_socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE));
    report("socket_packet", open_socket(libc::AF_PACKET, libc::SOCK_RAW, 0));
    for port in get("tcp").iter().filter_map(|p| p.parse::<u16>().ok()) {
        report("tcp_connect_host", connect_tcp(port));
    }
    // Privileged operations.
    for target in get("mount") {
        let t = CString::new(target).unwrap_or_default();
        report(
            "mount_tmpfs",
            in_child(|| {
                // SAFETY: mount(2) with NUL-terminated strings; undone at once.
                let rc = unsafe { libc::mount(c"tmpfs".as_ptr(), t.as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) };
                check(rc as libc::c_long)?;
                // SAFETY: same target.
                unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) };
                Ok(())
            }),
        );
    }
    report(
        "setns",
        in_child(|| {
            let ns = std::fs::File::open("/proc/self/ns/net")?;
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a namespace descriptor of ours.
            check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } as libc::c_long).map(drop)
        }),
    );
    report(
        "unshare_user",
        in_child(|| {
            // SAFETY: unshare(2) in a forked child.
            check(unsafe { libc::unshare(libc::CLONE_NEWUSER) } as libc::c_long).map(drop)
        }),
    );
    report(
        "clone_new_namespace",
        in_child(|| {
            // SAFETY: a fork-like clone whose child exits at once.
            let pid = check(unsafe {
                libc::syscall(libc::SYS_clone, (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong, 0, 0, 0, 0)
            })?;
            if pid == 0 {
                // SAFETY: leaving the grandchild.
                unsafe { libc::_exit(0) };
            }
            Ok(())
        }),
    );
    report(
        "clone3",
        in_child(|| {
            let args = [0u64; 11];
            let mut a = args;
            a[4] = libc::SIGCHLD as u64;
            // SAFETY: clone3 with a zeroed clone_args (fork semantics).
            let pid = check(unsafe { libc::syscall(libc::SYS_clone3, a.as_ptr(), std::mem::size_of_val(&a)) })?;
            if pid == 0 {
                // SAFETY: leaving the grandchild.
                unsafe { libc::_exit(0) };
            }
            Ok(())
        }),
    );
    // SAFETY: bpf(2) with a null attribute: refused one way or another.
    report("bpf", check(unsafe { libc::syscall(libc::SYS_bpf, 0, std::ptr::null::<u8>(), 0) }).map(drop));
    report(
        "keyctl",
        // SAFETY: keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0).
        check(unsafe { libc::syscall(libc::SYS_keyctl, 0, -3i64, 0) }).map(drop),
    );
    let c = b'x';
    // SAFETY: TIOCSTI with a pointer to one byte.
    report("tiocsti", check(unsafe { libc::ioctl(2, libc::TIOCSTI, &c) } as libc::c_long).map(drop));
    say("PROBE-END".into());
    // As the server would, stay up until stopped: the supervisor keeps us.
    std::thread::sleep(std::time::Duration::from_secs(3600));
}
