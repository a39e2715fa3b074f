//! Proof that the workspace server is confined as if it were compromised
//! (SPEC T1, T3): `labfy-confinement-probe`, started by `labfy up` in the
//! server's place — the same program slot, the same `labfy-sys` sequence,
//! the same credentials — attempts each escape, and each must fail with the
//! expected errno; the same probe run directly (the control) must get a
//! different answer for every one of them, so no check passes vacuously.
//! The host listeners it aims at must see no connection.
//! (Attached to the `labfy` package.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");
const PROBE: &str = env!("CARGO_BIN_EXE_labfy-confinement-probe");

/// What one probe run printed: attempt → `ok` or `errno N`, plus its pid,
/// the processes it saw, and every other line (for failure messages).
#[derive(Debug, Default)]
struct Report {
    results: BTreeMap<String, String>,
    pid: u32,
    procs: usize,
    log: String,
}

impl Report {
    fn get(&self, name: &str) -> &str {
        self.results.get(name).map(String::as_str).unwrap_or_else(|| panic!("no result for {name}:\n{}", self.log))
    }
}

/// Reads `child`'s stderr until `PROBE-END` (bounded by [`WAIT`]).
fn read_report(child: &mut Child) -> Report {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = Report::default();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            r.log.push_str(&line);
            r.log.push('\n');
            // Under `labfy up` the server's lines reach the terminal marked
            // as its own (crates/labfy/src/logs.rs, SERVER_MARK).
            let line = line.strip_prefix("labfy: the workspace server says: ").unwrap_or(&line).to_owned();
            if let Some(rest) = line.strip_prefix("PROBE ") {
                let (name, result) = rest.split_once(' ').unwrap();
                r.results.insert(name.to_owned(), result.to_owned());
            } else if let Some(p) = line.strip_prefix("PROBE-PID ") {
                r.pid = p.parse().unwrap();
            } else if let Some(n) = line.strip_prefix("PROBE-PROCS ") {
                r.procs = n.parse().unwrap();
            } else if line == "PROBE-END" {
                let _ = tx.send(std::mem::take(&mut r));
            }
        }
    });
    rx.recv_timeout(WAIT).expect("the probe did not finish in time")
}

fn errno(n: i32) -> String {
    format!("errno {n}")
}

#[test]
fn a_compromised_server_reaches_no_host_service_process_or_file() {
    let root = nix_euid() == 0;
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let run = runtime_dir(&data);

    // Host services the probe aims at: Unix sockets by path (the host's
    // temporary directory, and /run when we may write there: stand-ins for
    // D-Bus, systemd, docker, an ssh agent), an abstract one, a TCP port.
    let mut unix_paths = vec![dir.path().join("host-service.sock")];
    let run_sock = Path::new("/run").join(format!("labfy-probe-{}.sock", std::process::id()));
    if root {
        unix_paths.push(run_sock.clone());
    }
    let unix: Vec<UnixListener> = unix_paths.iter().map(|p| UnixListener::bind(p).unwrap()).collect();
    let abstract_name = format!("labfy-probe-{}", std::process::id());
    let abs = UnixListener::bind_addr(&SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    for l in &unix {
        l.set_nonblocking(true).unwrap();
    }
    abs.set_nonblocking(true).unwrap();
    tcp.set_nonblocking(true).unwrap();
    // A host process, a host file of ours (0600), a directory to mount on.
    let sleeper = Guard(Command::new("sleep").arg("300").spawn().unwrap());
    let secret = dir.path().join("host-secret");
    std::fs::write(&secret, "host only").unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut targets = String::new();
    for p in &unix_paths {
        targets.push_str(&format!("unix={}\n", p.display()));
    }
    targets.push_str(&format!("abstract={abstract_name}\npid={}\n", sleeper.0.id()));
    targets.push_str(&format!("file={}\n", secret.display()));
    if root && Path::new("/etc/shadow").exists() {
        targets.push_str("file=/etc/shadow\n");
    }
    targets.push_str(&format!("tcp={}\nmount={}\n", tcp.local_addr().unwrap().port(), mnt.display()));
    std::fs::write(data.join("confinement-probe.targets"), &targets).unwrap();

    // 1. Confined: `labfy up` starts the probe as its workspace server.
    let mut up = Command::new(BIN)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(&data)
        .arg("--runtime-dir")
        .arg(&run)
        .env("LABFY_SERVER_BIN", PROBE)
        .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let jailed = read_report(&mut up);
    // What it printed reached the operator's terminal marked as its own,
    // the carriage return made visible: it cannot pass for the supervisor.
    assert!(
        jailed
            .log
            .lines()
            .any(|l| l == "labfy: the workspace server says: \u{FFFD}labfy: governor ready (forged by the probe)"),
        "the forged line is not marked:\n{}",
        jailed.log
    );
    assert!(
        !jailed.log.lines().any(|l| l.starts_with("labfy: governor ready (forged")),
        "a forged line passed:\n{}",
        jailed.log
    );
    let up = Guard(up);
    // `labfy status` says how the server is confined (T1: loudly).
    let status = wait_for("the server's confinement in labfy status", || {
        let o = Command::new(BIN).args(["status", "--runtime-dir"]).arg(&run).output().ok()?;
        Some(String::from_utf8_lossy(&o.stdout).into_owned()).filter(|s| s.contains("confinement:"))
    });
    assert!(status.contains("confinement: user, mount, PID, network"), "{status}");
    assert!(status.contains("seccomp allow-list (Unix sockets only)"), "{status}");
    // The runtime directory was read-only to it: the operator's sockets and
    // the secret are intact.
    assert!(run.join("supervisor.sock").exists());
    assert!(!run.join("probe-planted").exists());
    drop(up);

    // Nothing reached the host's listeners.
    for l in &unix {
        assert!(l.accept().is_err(), "a host Unix socket was reached from the confined server:\n{}", jailed.log);
    }
    assert!(abs.accept().is_err(), "the abstract socket was reached:\n{}", jailed.log);
    assert!(tcp.accept().is_err(), "the host TCP port was reached:\n{}", jailed.log);

    // 2. Control: the same probe, unconfined, against a runtime directory
    //    of its own (a copy's stand-ins).
    let ctl_run = dir.path().join("control-run");
    std::fs::create_dir_all(ctl_run.join("operator")).unwrap();
    let _operator = UnixListener::bind(ctl_run.join("operator").join("governor.operator.sock")).unwrap();
    std::fs::write(ctl_run.join("supervisor.sock"), "").unwrap();
    std::fs::write(ctl_run.join("ipc.secret"), "").unwrap();
    let mut ctl = Command::new(PROBE)
        .arg("--data-dir")
        .arg(&data)
        .arg("--runtime-dir")
        .arg(&ctl_run)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let control = read_report(&mut ctl);
    drop(Guard(ctl));
    std::fs::remove_file(&run_sock).ok();

    // Where it stood: PID 1, alone.
    assert_eq!(jailed.pid, 1, "{}", jailed.log);
    assert_eq!(jailed.procs, 1, "{}", jailed.log);
    assert!(control.procs > 1);

    // Every attempt: the confined answer, and a different control answer.
    let mut expected: Vec<(String, String)> = Vec::new();
    for i in 0..unix_paths.len() {
        expected.push((format!("unix_socket_{i}"), errno(libc::ENOENT)));
    }
    // The governor's operator socket (any pid with the secret) has no path.
    expected.push(("operator_socket".into(), errno(libc::ENOENT)));
    expected.push(("signal_host_process".into(), errno(libc::ESRCH)));
    expected.push(("proc_of_host_process".into(), errno(libc::ENOENT)));
    for i in 0..targets.lines().filter(|l| l.starts_with("file=")).count() {
        expected.push((format!("read_host_file_{i}"), errno(libc::ENOENT)));
    }
    expected.push(("read_log".into(), errno(libc::ENOENT)));
    // A mount point cannot be renamed (V5, the red team's F6).
    expected.push(("rename_scratch".into(), errno(libc::EBUSY)));
    for name in [
        "write_socket_dir",
        "replace_supervisor_socket",
        "rewrite_ipc_secret",
        "write_egress_state",
        "write_egress_bodies",
        "rewrite_log",
    ] {
        expected.push((name.into(), errno(libc::EROFS)));
    }
    for name in [
        "socket_inet",
        "socket_inet6",
        "socket_netlink",
        "tcp_connect_host",
        "unshare_user",
        "clone_new_namespace",
        "keyctl",
        "tiocsti",
    ] {
        expected.push((name.into(), errno(libc::EPERM)));
    }
    expected.push(("clone3".into(), errno(libc::ENOSYS)));
    if root {
        // Unprivileged, the control would be refused these too.
        for name in ["ptrace_host_process", "socket_packet", "mount_tmpfs", "setns", "bpf"] {
            expected.push((name.into(), errno(libc::EPERM)));
        }
    }
    let mut failures = Vec::new();
    for (name, want) in &expected {
        let (got, ctl) = (jailed.get(name), control.get(name));
        if got != want {
            failures.push(format!("{name}: confined {got}, expected {want}"));
        }
        if ctl == got {
            failures.push(format!("{name}: the control got the same answer ({ctl}): the check proves nothing"));
        }
    }
    // Abstract sockets: refused by the network namespace or Landlock's scope.
    let a = jailed.get("abstract_socket");
    if a != errno(libc::ECONNREFUSED) && a != errno(libc::EPERM) {
        failures.push(format!("abstract_socket: confined {a}"));
    }
    if control.get("abstract_socket") != "ok" {
        failures.push("abstract_socket: the control could not connect either".into());
    }
    // What it must still be able to do: write its data.
    for name in ["write_own_data"] {
        if jailed.get(name) != "ok" {
            failures.push(format!("{name}: confined {}, expected ok", jailed.get(name)));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n--- confined ---\n{}\n--- control ---\n{}",
        failures.join("\n"),
        jailed.log,
        control.log
    );
    // The host process it aimed at is alive.
    assert!(Path::new(&format!("/proc/{}", sleeper.0.id())).exists());
}

fn nix_euid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid()
    }
}

/// A document tool taken over by a hostile PDF (SPEC A1: poppler and
/// Tesseract run on imported files) reads no data, writes, truncates or
/// removes nothing, opens no socket and signals no other process, once
/// `confine_tool` has run: `labfy-confinement-probe --tool` tries each in a
/// confined child; its control, unconfined, succeeds at each.
#[test]
fn a_confined_document_tool_reads_no_data_writes_nothing_and_opens_no_socket() {
    let dir = TempDir::new().unwrap();
    let probe = |mode: &str| {
        std::fs::write(dir.path().join("secret"), "the analyst's notes").unwrap();
        let _ = std::fs::remove_file(dir.path().join("written"));
        let out = Command::new(PROBE).arg(mode).arg(dir.path()).output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(log.contains("PROBE-END") && !log.contains("PROBE-ERROR"), "{log}");
        let answers: std::collections::BTreeMap<String, String> = log
            .lines()
            .filter_map(|l| l.strip_prefix("PROBE ")?.split_once(' '))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        (answers, log)
    };
    let (confined, log) = probe("--tool");
    let sigsys = format!("killed {}", libc::SIGSYS);
    let eacces = errno(libc::EACCES);
    for (name, want) in [
        ("tool_read_usr", "ok"),
        ("tool_read_data", eacces.as_str()),
        ("tool_write_data", eacces.as_str()),
        ("tool_truncate_data", eacces.as_str()),
        ("tool_unlink_data", eacces.as_str()),
        ("tool_socket", sigsys.as_str()),
        ("tool_signal_other", sigsys.as_str()),
    ] {
        assert_eq!(confined.get(name).map(String::as_str), Some(want), "{name}:\n{log}");
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("secret")).unwrap(), "the analyst's notes");
    assert!(!dir.path().join("written").exists());
    let (control, log) = probe("--tool-control");
    for (name, answer) in &control {
        assert_eq!(answer, "ok", "the control does {name}:\n{log}");
    }
    assert_eq!(control.len(), confined.len(), "{log}");
}

/// Ubuntu's rule, or any policy that denies user namespaces (issue 46 item
/// 4): `labfy up` run by an unprivileged user under a seccomp filter that
/// refuses `unshare(CLONE_NEWUSER)` stops before anything starts, naming
/// the step that failed, the cause and the fix. Its control, the same user
/// without the filter, passes the check (and stops later, on the data
/// directory it may not write).
#[test]
fn a_system_that_denies_user_namespaces_is_refused_with_the_reason_and_the_fix() {
    use std::os::unix::process::CommandExt;

    use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};

    if !labfy_testkit::present(nix_euid() == 0, "root", "the test runs labfy as another user (nobody)") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let newuser = libc::CLONE_NEWUSER as u64;
    let cond = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(newuser), newuser).unwrap();
    let rules = [(libc::SYS_unshare, vec![SeccompRule::new(vec![cond]).unwrap()])].into_iter().collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let program: seccompiler::BpfProgram = filter.try_into().unwrap();
    let run = |deny: bool| {
        let program = program.clone();
        let mut cmd = Command::new(BIN);
        cmd.args(["up", "--port", "0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--runtime-dir")
            .arg(dir.path().join("run"))
            .uid(65_534)
            .gid(65_534)
            .env_remove("LABFY_DATA_DIR")
            .stdin(Stdio::null());
        if deny {
            // SAFETY: after the fork, before the exec: two system calls on
            // memory prepared before the fork.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    seccompiler::apply_filter(&program).map_err(std::io::Error::other)
                });
            }
        }
        let out = cmd.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, said) = run(true);
    assert!(!ok, "{said}");
    assert!(
        said.contains("cannot start: this system does not let Labfy's user confine its processes in user namespaces")
            && said.contains("unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: Operation not permitted"),
        "{said}"
    );
    assert!(said.contains("seccomp") || said.contains("apparmor_parser") || said.contains("sysctl"), "the fix: {said}");
    let (ok, said) = run(false);
    assert!(!ok, "nobody cannot write the data directory: {said}");
    assert!(!said.contains("user namespaces"), "the control passes the check: {said}");
}
