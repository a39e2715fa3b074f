//! The confinement sequence for real (SPEC T1): a shell started in a `Jail`
//! is PID 1 of its own namespace, sees only its root, writes only where it
//! was told; a failing step is named and leaves no child behind.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::Path;
use std::time::Duration;

use labfy_sys::seccomp::{Policy, Sockets};
use labfy_sys::{Jail, Root, Step};

fn shell_jail(work: &Path, script: &str) -> Jail {
    let mut root = Root::new();
    root.system().unwrap().devices().unwrap().proc().unwrap().tmp(1 << 20).unwrap().writable(work).unwrap();
    let mut jail = Jail::new(Path::new("/bin/sh"), root);
    jail.arg("-c").arg(script).may_write(work).env("OUT", work);
    jail
}

fn run(jail: Jail) -> std::process::ExitStatus {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (mut child, _) = jail.spawn().expect("spawn");
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap() })
}

#[test]
fn a_confined_shell_is_alone_in_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    let marker = std::env::temp_dir().join(format!("labfy-sys-marker-{}", std::process::id()));
    std::fs::write(&marker, "host").unwrap();
    let script = format!(
        "echo $$ > \"$OUT/pid\"; echo /proc/[0-9]* > \"$OUT/procs\"; \
         hostname > \"$OUT/host\" 2>/dev/null || cat /proc/sys/kernel/hostname > \"$OUT/host\"; \
         ls / > \"$OUT/root\"; test -e {m} && echo seen > \"$OUT/marker\"; \
         touch /usr/labfy-escape 2> \"$OUT/usr\"; true",
        m = marker.display()
    );
    let mut jail = shell_jail(&work, &script);
    jail.hostname("jailed").unwrap().seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false });
    let status = run(jail);
    std::fs::remove_file(&marker).unwrap();
    assert!(status.success(), "{status}");
    let read = |f: &str| std::fs::read_to_string(work.join(f)).unwrap_or_default();
    assert_eq!(read("pid").trim(), "1", "not PID 1 of its own namespace");
    // A shell builtin's glob: no process of its own to count.
    assert_eq!(read("procs").trim(), "/proc/1", "it sees other processes");
    assert_eq!(read("host").trim(), "jailed");
    let top: Vec<String> = read("root").lines().map(str::to_owned).collect();
    for absent in ["etc", "home", "root", "run", "var", "sys"] {
        if absent == "etc" && Path::new("/etc/ld.so.cache").exists() {
            continue; // /etc holds the loader's cache alone
        }
        assert!(!top.contains(&absent.to_owned()), "/{absent} is in the child's root: {top:?}");
    }
    assert!(top.contains(&"usr".to_owned()), "{top:?}");
    assert_eq!(read("marker"), "", "a host file is visible");
    assert!(read("usr").contains("Read-only"), "{}", read("usr"));
    assert!(!Path::new("/usr/labfy-escape").exists());
}

#[test]
fn a_failing_step_is_named_and_leaves_no_child() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    let mut jail = shell_jail(&work, "touch \"$OUT/ran\"");
    // Raising a hard limit needs a capability over the host's user
    // namespace, which the child never has.
    jail.limit(libc::RLIMIT_NOFILE, u64::MAX - 1);
    let err = jail.spawn().expect_err("the limit step must fail");
    assert_eq!(err.step, Step::Limits, "{err}");
    assert_eq!(err.errno(), Some(libc::EPERM), "{err}");
    assert!(err.to_string().contains("resource limits"), "{err}");
    // Reaped (this thread has no child left, zombie or not), and it never
    // reached its program.
    let children = std::fs::read_to_string("/proc/thread-self/children").unwrap();
    assert_eq!(children.trim(), "", "a child is left behind");
    assert!(!work.join("ran").exists(), "the program ran after a failed step");
}

#[test]
fn a_bad_plan_is_refused_before_any_clone() {
    let err = Root::new().writable(Path::new("/nonexistent/labfy-sys")).unwrap_err();
    assert_eq!(err.step, Step::Prepare);
    let dir = tempfile::tempdir().unwrap();
    let err = Jail::new(Path::new("relative/program"), Root::new()).spawn().unwrap_err();
    assert_eq!(err.step, Step::Prepare, "{err}");
    let _ = dir;
}

#[test]
fn the_report_names_what_is_applied_and_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let mut jail = shell_jail(dir.path(), "true");
    jail.seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false });
    let c = jail.confinement();
    let text = c.to_string();
    assert!(text.contains("PID"), "{text}");
    assert!(text.contains("seccomp"), "{text}");
    match labfy_sys::landlock::abi() {
        Some(_) => assert!(text.contains("Landlock ABI"), "{text}"),
        None => assert!(c.missing.iter().any(|m| m.contains("Landlock")), "{text}"),
    }
    let unfiltered = shell_jail(dir.path(), "true").confinement();
    assert!(unfiltered.missing.iter().any(|m| m.contains("seccomp")), "{unfiltered}");
}

/// Runs `jail` with its output on a pipe; the exit status and the output.
fn run_output(mut jail: Jail) -> (std::process::ExitStatus, String) {
    let (mut read, write) = labfy_sys::pipe().unwrap();
    jail.output(std::os::fd::AsRawFd::as_raw_fd(&write));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (mut child, _) = jail.spawn().expect("spawn");
    drop(write);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut read, &mut out).unwrap();
    let status =
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap() });
    (status, out)
}

fn root_caller() -> bool {
    // SAFETY: geteuid takes no argument and cannot fail.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: joining a network namespace needs root");
    }
    root
}

/// The local model's case (SPEC T1, P5): a child that joins another confined
/// child's network namespace (to listen on its loopback) gets every other
/// namespace of its own, runs as the unprivileged identity it was given with
/// no capability, and binds only the port Landlock allows.
#[test]
fn a_child_joining_a_network_namespace_runs_unprivileged_beside_it() {
    if !root_caller() {
        return;
    }
    // The "server": a confined child in a network namespace of its own.
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    let (server, _) = shell_jail(&work, "exec sleep 60").spawn().expect("server");
    let server_pid = server.id().unwrap();
    let ns = std::fs::File::open(format!("/proc/{server_pid}/ns/net")).unwrap();
    let server_net = std::fs::read_link(format!("/proc/{server_pid}/ns/net")).unwrap();

    let script = "grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; \
                  echo \"pid $$\"; echo /proc/[0-9]*; ls /; cat /proc/self/cgroup; readlink /proc/self/ns/net; \
                  : > /dev/null && echo 'dev reachable'; \
                  : >> /dev/full && echo 'driver device reachable'";
    let mut root = Root::new();
    root.system().unwrap().devices().unwrap().proc().unwrap().tmp(1 << 20).unwrap();
    let mut jail = Jail::new(Path::new("/bin/sh"), root);
    jail.arg("-c").arg(script);
    jail.join_network(std::os::fd::AsRawFd::as_raw_fd(&ns))
        .run_as(65_534, 65_534, &[65_533])
        // A device given as a driver's (a GPU's, on the appliance): bound,
        // and open for writing through Landlock.
        .driver_device(Path::new("/dev/full"))
        .unwrap()
        .seccomp(Policy { sockets: Sockets::UnixAndLoopback, driver_ioctl: false });
    let report = jail.confinement().to_string();
    assert!(report.contains("the network namespace it was given"), "{report}");
    assert!(report.contains("uid 65534"), "{report}");
    // Under `labfy up` the caller's umask is 077: the root's directories
    // must still let the unprivileged child reach its program.
    // SAFETY: umask takes and returns plain integers.
    #[allow(unsafe_code)]
    let umask = unsafe { libc::umask(0o077) };
    let (status, out) = run_output(jail);
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        libc::umask(umask)
    };
    assert!(status.success(), "{status}: {out}");
    let field = |name: &str| {
        out.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or_else(|| panic!("{name}: {out}"))
    };
    assert_eq!(field("Uid:"), "65534\t65534\t65534\t65534", "{out}");
    assert_eq!(field("Gid:"), "65534\t65534\t65534\t65534", "{out}");
    assert_eq!(field("Groups:"), "65533", "{out}");
    assert_eq!(field("CapEff:"), "0000000000000000", "{out}");
    assert_eq!(field("CapBnd:"), "0000000000000000", "{out}");
    assert_eq!(field("NoNewPrivs:"), "1", "{out}");
    assert_eq!(field("Seccomp:"), "2", "{out}");
    assert_eq!(field("pid"), "1", "not PID 1 of its own namespace: {out}");
    assert!(out.lines().any(|l| l == "/proc/1"), "it sees other processes: {out}");
    assert!(!out.lines().any(|l| l == "home" || l == "root" || l == "var"), "host tree visible: {out}");
    // Its cgroup namespace is rooted at its own cgroup.
    assert!(out.lines().any(|l| l.ends_with(":/")), "{out}");
    assert!(out.lines().any(|l| l == "dev reachable"), "/dev/null out of reach: {out}");
    assert!(out.lines().any(|l| l == "driver device reachable"), "/dev/full out of reach: {out}");
    // In the server's network namespace, not a new one.
    assert!(out.lines().any(|l| Path::new(l) == server_net), "{server_net:?} not in {out}");
    drop(server);
}

/// A plan that would leave the child root, or unconfined by a user
/// namespace, is refused before any clone.
#[test]
fn joining_a_network_namespace_needs_an_unprivileged_identity() {
    let ns = std::fs::File::open("/proc/self/ns/net").unwrap();
    let mut jail = Jail::new(Path::new("/bin/true"), Root::new());
    jail.join_network(std::os::fd::AsRawFd::as_raw_fd(&ns));
    let err = jail.spawn().unwrap_err();
    assert_eq!(err.step, Step::Prepare, "{err}");
    assert!(err.to_string().contains("run_as"), "{err}");
    let mut jail = Jail::new(Path::new("/bin/true"), Root::new());
    jail.run_as(65_534, 65_534, &[]);
    let err = jail.spawn().unwrap_err();
    assert!(err.to_string().contains("join_network"), "{err}");
}
