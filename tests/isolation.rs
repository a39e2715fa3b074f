//! Proof that the workspace server has no network (SPEC P2), for real: from
//! inside the running server's namespaces, TCP and UDP to the host fail and
//! nothing reaches host listeners; the server's namespaces cannot be left;
//! it holds no capability and no new privilege; the browser-side listener,
//! bound in the host namespace and inherited, still answers.
//! (Attached to the `labfy` package.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::net::{TcpListener, UdpSocket};
use std::process::Command;
use std::time::Duration;

use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

/// Runs `bash -c script` inside the server's user, network and mount namespaces.
fn inside(pid: u32, script: &str) -> std::process::Output {
    Command::new("timeout")
        .args([
            "10",
            "nsenter",
            "--target",
            &pid.to_string(),
            "--user",
            "--net",
            "--mount",
            "--preserve-credentials",
            "--",
        ])
        .args(["bash", "-c", script])
        .output()
        .unwrap()
}

#[test]
fn the_server_cannot_reach_the_network_nor_leave_its_namespaces() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let run = runtime_dir(&data);
    let (_up, port) = start_up(BIN, &data);
    let pid = server_pid(BIN, &run);

    // Its own namespaces, not ours.
    for ns in ["net", "user", "mnt", "pid", "ipc", "uts"] {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        assert_ne!(theirs, ours, "the server shares our {ns} namespace");
    }
    // Loopback is its only interface.
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
    let names: Vec<&str> = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
    assert_eq!(names, ["lo"]);

    // Host listeners that must hear nothing.
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let udp_port = udp.local_addr().unwrap().port();

    // Sanity: from the host, the same commands do reach them.
    let host = Command::new("bash").args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{tcp_port}")]).status().unwrap();
    assert!(host.success(), "the probe itself does not work on the host");
    let _ = tcp.accept().expect("the host probe connected");

    let o = inside(pid, &format!("exec 3<>/dev/tcp/127.0.0.1/{tcp_port}"));
    assert!(!o.status.success(), "TCP connect to a host listener succeeded from the server's namespace");
    let o = inside(pid, "exec 3<>/dev/tcp/192.0.2.1/80");
    assert!(!o.status.success(), "TCP connect to a remote address succeeded");
    assert!(String::from_utf8_lossy(&o.stderr).contains("unreachable"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = inside(pid, "echo x > /dev/udp/192.0.2.1/53");
    assert!(!o.status.success(), "UDP send to a remote address succeeded");
    let _ = inside(pid, &format!("echo x > /dev/udp/127.0.0.1/{udp_port}"));
    let mut buf = [0u8; 16];
    assert!(udp.recv_from(&mut buf).is_err(), "a UDP datagram from the server's namespace reached the host");
    assert!(tcp.accept().is_err(), "a TCP connection from the server's namespace reached the host");

    // No way back: the host's namespaces cannot even be named from inside —
    // its /proc is the server's own PID namespace, and setns is refused by
    // its seccomp filter (tests/confinement.rs proves that from the
    // server's own credentials).
    let o = inside(pid, "ls /proc | grep -c '^[0-9]'");
    let seen: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap_or(u32::MAX);
    assert!(seen <= 2, "host processes are visible in the server's /proc ({seen})");

    // The other Labfy processes run with the same uid but are not dumpable:
    // from the server's namespaces their memory and environment are closed.
    let o = Command::new(BIN).args(["status", "--runtime-dir"]).arg(&run).output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    let supervisor = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let supervisor: u32 = supervisor[supervisor.rfind(')').unwrap() + 2..].split(' ').nth(1).unwrap().parse().unwrap();
    let mut others = vec![supervisor];
    for l in text.lines().filter(|l| l.starts_with("governor ") || l.starts_with("egress ")) {
        others.push(l.split_whitespace().nth(2).unwrap().parse().unwrap());
    }
    for other in others {
        let o = inside(pid, &format!("cat /proc/{other}/environ > /dev/null"));
        assert!(!o.status.success(), "the server's namespace can read /proc/{other}/environ");
    }

    // Read-only everywhere but its data directory, its own socket directory
    // and a private /tmp: it cannot plant a file that another program would
    // run outside its namespaces.
    let o = inside(pid, "touch /tmp/labfy-escape");
    assert!(o.status.success(), "the server's private /tmp is not writable");
    assert!(!std::path::Path::new("/tmp/labfy-escape").exists(), "the server's /tmp is the host's");
    for path in ["/etc/labfy-escape", "/usr/local/bin/labfy-escape"] {
        let o = inside(pid, &format!("touch {path}"));
        assert!(!o.status.success(), "the server's namespaces can write {path}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("Read-only file system"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!std::path::Path::new(path).exists());
    }
    let probe = data.join("write-probe");
    let o = inside(pid, &format!("touch {} && rm {}", probe.display(), probe.display()));
    assert!(o.status.success(), "the data directory is not writable: {}", String::from_utf8_lossy(&o.stderr));

    // No capability, no new privileges, no core dumps.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    for (field, want) in [
        ("CapEff", "0000000000000000"),
        ("CapPrm", "0000000000000000"),
        ("CapBnd", "0000000000000000"),
        ("NoNewPrivs", "1"),
    ] {
        let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
        assert_eq!(line.split_whitespace().nth(1), Some(want), "{line}");
    }
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let core = limits.lines().find(|l| l.starts_with("Max core file size")).unwrap();
    assert!(core.split_whitespace().nth(4) == Some("0"), "{core}");

    // The browser side still answers, through the inherited socket, and the
    // server says it is isolated.
    let (cookie, _) = login(port, &run);
    let s = http(port, "GET", "/api/v1/session", &[("Authorization", &cookie)], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&s.body).unwrap();
    assert_eq!(v["isolation"]["isolated"], true, "{}", s.body);
}

#[test]
fn a_real_workspace_is_served_isolated_and_refused_by_a_server_that_is_not() {
    let dir = TempDir::new().unwrap();
    let o = Command::new(BIN)
        .args(["workspace", "create", "--name", "Dossier Sud", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    let real = String::from_utf8(o.stdout).unwrap().trim().to_owned();
    // Started by hand, in the host's network namespace: refused.
    let server = std::path::Path::new(BIN).parent().unwrap().join("labfy-server");
    let o = Command::new(&server)
        .args(["--port", "0", "--workspace", &real, "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not isolated") && err.contains("SPEC P2"), "{err}");
    // Under the supervisor, isolated: served.
    let child = Command::new(BIN)
        .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .args(["up", "--port", "0", "--workspace", &real, "--data-dir"])
        .arg(dir.path())
        .arg("--runtime-dir")
        .arg(runtime_dir(dir.path()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut up = Guard(child);
    let (port, first) = read_url(up.0.stdout.take().unwrap());
    assert!(first.contains("(REAL)"), "{first}");
    let (cookie, _) = login(port, &runtime_dir(dir.path()));
    let s = http(port, "GET", "/api/v1/session", &[("Authorization", &cookie)], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&s.body).unwrap();
    assert_eq!(v["workspace_id"], real);
    assert_eq!(v["isolation"]["isolated"], true);
}

/// The production path: Labfy run by an ordinary user (the systemd unit's
/// `User=labfy`), here uid 65534 with copies of the programs. Needs root to
/// switch user; skipped with a message otherwise (the test above still runs).
#[test]
fn an_ordinary_user_gets_the_same_isolation() {
    if !labfy_testkit::present(is_root(), "ROOT", "switching to another uid needs root") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let base = dir.path();
    let (bin_dir, arti) = programs_for_another_uid(base, BIN);
    let home = base.join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    let data = home.join("data");
    let run = home.join("run");
    let child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(bin_dir.join("labfy"))
        .env("LABFY_ARTI_CONFIG", &arti)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(&data)
        .arg("--runtime-dir")
        .arg(&run)
        .env("HOME", &home)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut up = Guard(child);
    let (port, printed) = read_url(up.0.stdout.take().unwrap());
    // Another local user (SPEC T4) cannot mint a login link: the runtime
    // directory is not theirs; and without one the UI issues no session.
    let o = Command::new("setpriv")
        .args(["--reuid=65533", "--regid=65533", "--clear-groups", "--"])
        .arg(bin_dir.join("labfy"))
        .args(["open", "--runtime-dir"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(!o.status.success(), "another uid minted a login link: {}", String::from_utf8_lossy(&o.stdout));
    assert!(o.stdout.is_empty());
    let anonymous = http(port, "GET", "/api/v1/session", &[], "").unwrap();
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.header("set-cookie").is_none());
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(bin_dir.join("labfy"))
        .args(["status", "--runtime-dir"])
        .arg(&run)
        .output()
        .unwrap();
    let status = String::from_utf8(o.stdout).unwrap();
    let line = status.lines().find(|l| l.starts_with("server ")).unwrap_or_else(|| panic!("{status}"));
    let pid: u32 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(uid.split_whitespace().nth(1), Some("65534"), "{uid}");
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
    let names: Vec<&str> = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
    assert_eq!(names, ["lo"], "the server of an ordinary user is not isolated");
    // The analyst — the link `labfy up` printed — gets in.
    let link = printed.lines().find_map(|l| l.strip_prefix("Open ")).unwrap();
    let (cookie, _) = login_with(port, link);
    let s = http(port, "GET", "/api/v1/session", &[("Authorization", &cookie)], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&s.body).unwrap();
    assert_eq!(v["isolation"]["isolated"], true, "{}", s.body);
}

/// SPEC P4 by the kernel (issue 18 D4): only egress has a network. The
/// governor (cgroups and Unix sockets) and the supervisor (it bound the UI's
/// socket first, and starts egress through a launcher left in the host's
/// namespace) each run in a network namespace of their own with nothing in
/// it — not even `lo` up. From there a TCP connect and a UDP send to host
/// listeners and to a remote address fail; egress and the launcher are in
/// the host's namespace; the Unix sockets (the operator's `labfy resources`)
/// answer. Needs root for `nsenter`; skipped with a message otherwise.
#[test]
fn only_egress_has_the_hosts_network() {
    if !labfy_testkit::present(is_root(), "ROOT", "entering the processes' namespaces needs root") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let run = runtime_dir(&data);
    let (up, _port) = start_up(BIN, &data);
    let governor = healthy_pid(BIN, &run, "governor");
    let egress = healthy_pid(BIN, &run, "egress");
    let supervisor = up.0.id();
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let net = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_eq!(net(egress), ours, "egress is not in the host's network namespace");
    let launcher = parent_of(egress);
    let cmdline = std::fs::read_to_string(format!("/proc/{launcher}/cmdline")).unwrap();
    assert!(cmdline.contains("__labfy-host-launcher"), "egress's parent is not the host launcher: {cmdline:?}");
    assert_eq!(net(launcher), ours, "the host launcher left the host's network");

    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    for (name, pid) in [("governor", governor), ("supervisor", supervisor)] {
        assert_ne!(net(pid), ours, "the {name} shares the host's network namespace");
        let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
        let names: Vec<&str> = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
        assert_eq!(names, ["lo"], "the {name} sees interfaces");
        let inside = |script: &str| {
            Command::new("timeout")
                .args(["10", "nsenter", "--target", &pid.to_string(), "--net", "--", "bash", "-c", script])
                .output()
                .unwrap()
        };
        let o = inside(&format!("exec 3<>/dev/tcp/127.0.0.1/{tcp_port}"));
        assert!(!o.status.success(), "TCP connect to a host listener succeeded from the {name}'s namespace");
        let o = inside("exec 3<>/dev/tcp/192.0.2.1/80");
        assert!(!o.status.success(), "TCP connect to a remote address succeeded from the {name}'s namespace");
        let o = inside("echo x > /dev/udp/192.0.2.1/53");
        assert!(!o.status.success(), "UDP send to a remote address succeeded from the {name}'s namespace");
        let _ = inside(&format!("echo x > /dev/udp/127.0.0.1/{udp_port}"));
        let mut buf = [0u8; 16];
        assert!(udp.recv_from(&mut buf).is_err(), "a UDP datagram from the {name}'s namespace reached the host");
        assert!(tcp.accept().is_err(), "a TCP connection from the {name}'s namespace reached the host");
    }
    // Its Unix sockets still serve the operator.
    let o = Command::new(BIN).args(["resources", "--runtime-dir"]).arg(&run).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("confinement:"), "{text}");
}
