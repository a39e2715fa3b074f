//! `labfy up` as a supervisor, for real (SPEC P1, P3): three separate
//! processes, restart after kill -9 within 5 s with the data intact, giving
//! up on a child that keeps crashing, orderly stop on SIGTERM with the
//! runtime directory removed, `labfy status`, and peers the supervisor did
//! not start refused on every socket.
//! (Attached to the `labfy` package; the other programs are its siblings in
//! the target directory, built by `cargo build --workspace`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

#[derive(Debug, Clone)]
struct Row {
    process: String,
    state: String,
    pid: Option<u32>,
    restarts: u32,
    detail: String,
}

fn status(run: &Path) -> Result<Vec<Row>, String> {
    let o = Command::new(BIN).args(["status", "--runtime-dir"]).arg(run).output().unwrap();
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    Ok(String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .skip(1)
        // An indented line continues the row above it (the server's confinement).
        .filter(|l| !l.starts_with(' '))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Row {
                process: f[0].into(),
                state: f[1].into(),
                pid: f[2].parse().ok(),
                restarts: f[3].parse().unwrap(),
                detail: f[4..].join(" "),
            }
        })
        .collect())
}

fn all_healthy(run: &Path) -> Option<Vec<Row>> {
    let rows = status(run).ok()?;
    (rows.len() == 3 && rows.iter().all(|r| r.state == "healthy")).then_some(rows)
}

fn siblings_built() {
    let dir = Path::new(BIN).parent().unwrap();
    for p in ["labfy-server", "labfy-governor", "labfy-egress"] {
        assert!(dir.join(p).is_file(), "{p} is not built; run `cargo build --workspace` first (tests/run-all does)");
    }
}

/// `labfy up` with its stderr kept for the test (the terminal's lines), and
/// `env` added; returns once it printed its URL.
fn up_with_stderr(data: &Path, run: &Path, env: &[(&str, &Path)]) -> Guard {
    let mut cmd = Command::new(BIN);
    cmd.env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(data)
        .arg("--runtime-dir")
        .arg(run)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut up = Guard(cmd.spawn().unwrap());
    // read_url fails the test if no URL comes within its bound.
    let _ = read_url(up.0.stdout.take().unwrap());
    up
}

/// Waits (5 s at most) for process `pid` to be gone, and fails if it is not.
fn assert_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "child {pid} survived the stop");
}

#[test]
fn three_processes_restart_after_kill_9_and_stop_in_order() {
    siblings_built();
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let run = runtime_dir(&data);
    let (mut up, port) = start_up(BIN, &data);
    let rows = wait_for("all children healthy", || all_healthy(&run));
    let names: Vec<_> = rows.iter().map(|r| r.process.as_str()).collect();
    assert_eq!(names, ["governor", "egress", "server"]);
    // Egress through the host launcher (SPEC P4: the supervisor left the
    // host's network), the others directly.
    let mut launcher = None;
    for r in &rows {
        let mut parent = parent_of(r.pid.unwrap());
        if r.process == "egress" {
            let cmdline = std::fs::read_to_string(format!("/proc/{parent}/cmdline")).unwrap();
            assert!(cmdline.contains("__labfy-host-launcher"), "egress's parent is not the launcher: {cmdline:?}");
            launcher = Some(parent);
            parent = parent_of(parent);
        }
        assert_eq!(parent, up.0.id(), "{} is not a child of labfy up", r.process);
    }
    let launcher = launcher.unwrap();
    assert!(rows[1].detail.contains("not ready"), "egress must not claim readiness without Tor: {:?}", rows[1]);
    // The runtime directory is private.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&run).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(run.join("ipc.secret")).unwrap().permissions().mode() & 0o777, 0o600);

    // Write something, then kill -9 each child in turn.
    let (cookie, csrf) = login(port, &run);
    let origin = format!("http://127.0.0.1:{port}");
    let inv = first_investigation(port, &cookie);
    let note = http(
        port,
        "POST",
        &format!("/api/v1/investigations/{inv}/evidence"),
        &[
            ("Authorization", &cookie),
            ("Origin", &origin),
            ("X-CSRF-Token", &csrf),
            ("Content-Type", "application/json"),
        ],
        r#"{"title":"avant le kill","content":"doit survivre"}"#,
    )
    .unwrap();
    assert_eq!(note.status, 201);
    let note_id: serde_json::Value = serde_json::from_str(&note.body).unwrap();
    let note_id = note_id["id"].as_str().unwrap().to_owned();

    for (i, victim) in ["governor", "egress", "server"].into_iter().enumerate() {
        let before = all_healthy(&run).unwrap();
        let old = before[i].pid.unwrap();
        signal(old, libc::SIGKILL);
        let killed_at = Instant::now();
        let after = wait_for(&format!("{victim} back and healthy"), || {
            let rows = all_healthy(&run)?;
            (rows[i].pid != Some(old)).then_some(rows)
        });
        let took = killed_at.elapsed();
        assert!(took < Duration::from_secs(5), "{victim} took {took:?} to come back");
        assert_eq!(after[i].restarts, 1, "{:?}", after[i]);
    }
    // The UI answers again — a new server process, and the session of
    // before still holds (its cookie is MACed by the boot's login key, SPEC
    // T4) — and the note written before the kills is there.
    wait_for("the UI after the server restart", || {
        http(port, "GET", "/", &[("Authorization", &cookie)], "").ok().filter(|a| a.status == 200)
    });
    let ev = http(port, "GET", &format!("/api/v1/evidence/{note_id}"), &[("Authorization", &cookie)], "").unwrap();
    assert_eq!(ev.status, 200, "{}", ev.body);
    assert_eq!(integrity(&data), "ok");

    // SIGTERM: every child gone, runtime directory removed, exit 0.
    let pids: Vec<u32> = all_healthy(&run).unwrap().iter().map(|r| r.pid.unwrap()).collect();
    signal(up.0.id(), libc::SIGTERM);
    let code = wait_for("labfy up to stop", || up.0.try_wait().unwrap());
    assert!(code.success(), "{code:?}");
    for pid in pids.into_iter().chain([launcher]) {
        assert_gone(pid);
    }
    assert!(!run.exists(), "runtime directory left behind");
    let err = status(&run).unwrap_err();
    assert!(err.contains("not running"), "{err}");
}

/// SPEC K3: the host launcher cannot be started again once the supervisor
/// has left the host's network, and without it egress never comes back. Its
/// death stops `labfy up` with a failure (which its systemd unit restarts
/// whole, `Restart=on-failure`) instead of an appliance running on without
/// research; every other child goes with it.
#[test]
fn killing_the_host_launcher_stops_labfy_with_a_failure() {
    siblings_built();
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let run = runtime_dir(&data);
    let mut up = up_with_stderr(&data, &run, &[]);
    let rows = wait_for("all children healthy", || all_healthy(&run));
    let egress = rows.iter().find(|r| r.process == "egress").unwrap().pid.unwrap();
    let launcher = parent_of(egress);
    let cmdline = std::fs::read_to_string(format!("/proc/{launcher}/cmdline")).unwrap();
    assert!(cmdline.contains("__labfy-host-launcher"), "{cmdline:?}");
    let others: Vec<u32> = rows.iter().filter_map(|r| r.pid).collect();
    signal(launcher, libc::SIGKILL);
    let code = wait_for("labfy up to stop", || up.0.try_wait().unwrap());
    assert!(!code.success(), "labfy up must stop with a failure: {code:?}");
    let mut err = String::new();
    use std::io::Read;
    up.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("host launcher") && err.contains("egress cannot be started again"), "{err}");
    for pid in others {
        assert_gone(pid);
    }
    assert_eq!(integrity(&data), "ok");
}

#[test]
fn a_child_that_keeps_crashing_is_given_up_with_a_report() {
    siblings_built();
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let run = runtime_dir(&data);
    // A governor that logs a library warning (coloured, as a library may),
    // says one line to the operator, and fails.
    let broken = dir.path().join("broken-governor");
    std::fs::write(
        &broken,
        "#!/bin/sh\n\
         printf '2026-12-02T03:25:34.265709Z  \\033[33mWARN\\033[0m some_library: guard problem\\n' >&2\n\
         echo 'labfy-governor: error: the operator must see this' >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The URL is printed once the server is up, even with the governor broken.
    let mut up = up_with_stderr(&data, &run, &[("LABFY_GOVERNOR_BIN", &broken)]);
    let rows = wait_for("the governor given up", || {
        let rows = status(&run).ok()?;
        rows.iter().any(|r| r.process == "governor" && r.state == "failed").then_some(rows)
    });
    let gov = rows.iter().find(|r| r.process == "governor").unwrap();
    assert!(gov.detail.contains("gave up"), "{gov:?}");
    // The rest goes on.
    for other in ["egress", "server"] {
        let r = rows.iter().find(|r| r.process == other).unwrap();
        assert_eq!(r.state, "healthy", "{r:?}");
    }
    signal(up.0.id(), libc::SIGTERM);
    wait_for("labfy up to stop", || up.0.try_wait().unwrap());
    let mut err = String::new();
    use std::io::Read;
    up.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("governor exited 5 times within 60 s"), "{err}");
    assert!(err.contains("restarting in 100 ms") && err.contains("restarting in 800 ms"), "no backoff: {err}");

    // SPEC U8: the terminal gets the operator's lines, the state changes
    // (each exit naming what it logged) and one summary of the library
    // warnings — never the warnings themselves, never a colour code.
    assert_eq!(err.matches("labfy-governor: error: the operator must see this").count(), 5, "{err}");
    assert!(err.contains("last logged: guard problem"), "the exit does not say why: {err}");
    assert!(!err.contains("some_library"), "a library line reached the terminal: {err}");
    assert!(!err.contains('\u{1b}'), "colour codes on a terminal that is a pipe: {err}");
    let log = data.join("logs").join("labfy.log");
    assert!(
        err.contains(&format!(
            "labfy: governor: 5 warnings logged (last: guard problem); details in {}",
            log.display()
        )),
        "no summary: {err}"
    );
    // The log file has every line, marked, without colour codes, 0600.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged.matches("governor | 2026-12-02T03:25:34.265709Z  WARN some_library: guard problem").count(), 5);
    assert!(logged.contains("labfy    | "), "the supervisor's own lines are logged: {logged}");
    assert!(!logged.contains('\u{1b}'), "{logged}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&log).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn only_processes_the_supervisor_started_get_in_and_a_second_up_is_refused() {
    siblings_built();
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let run = runtime_dir(&data);
    let (_up, _port) = start_up(BIN, &data);
    wait_for("all children healthy", || all_healthy(&run));
    // This test process knows the secret (same uid) but was not started by
    // the supervisor: the governor's and egress's sockets refuse it. The
    // server has no socket to try: its control channel is a socket pair the
    // supervisor holds the other end of (SPEC T3).
    assert!(!run.join("server.control.sock").exists());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        use labfy_ipc::client::Client;
        use labfy_ipc::messages::Boundary;
        let secret = labfy_ipc::secret::read_secret(&run).unwrap();
        for (sock, boundary) in [
            ("governor.sock", Boundary::Governor),
            ("egress.sock", Boundary::Egress),
            ("governor.control.sock", Boundary::Control),
        ] {
            let r = Client::<labfy_ipc::messages::control::ControlRequest, labfy_ipc::messages::control::ControlResponse>::connect(
                &run.join(sock),
                boundary,
                &secret,
            )
            .await;
            let err = r.err().unwrap_or_else(|| panic!("{sock} let a stranger in"));
            assert!(err.to_string().contains("not a process Labfy started"), "{sock}: {err}");
        }
    });
    let second = Command::new(BIN)
        .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(&data)
        .arg("--runtime-dir")
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(4), "{}", String::from_utf8_lossy(&second.stderr));
    assert!(String::from_utf8_lossy(&second.stderr).contains("another labfy up is running"));
    assert!(all_healthy(&run).is_some(), "the second up disturbed the first");
}

/// SPEC C1: another workspace opened from the UI. The server only records
/// the wish; the supervisor checks it and restarts the server on it, on the
/// same port, and the session of before still holds. A wish the supervisor
/// refuses (an archived workspace, asked for behind the server's back is
/// covered by the unit tests of `check_switch`) leaves the server serving.
#[test]
fn the_analyst_opens_another_workspace_and_the_server_restarts_on_it() {
    siblings_built();
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let run = runtime_dir(&data);
    let (_up, port) = start_up(BIN, &data);
    wait_for("all children healthy", || all_healthy(&run));
    let (_, key) = labfy_ipc::login::read_login_file(&run).unwrap();
    let code = key.mint_code(std::time::SystemTime::now());
    let (cookie, csrf) = login_with(port, &code);
    let (_, session) = get(port, &cookie, "/api/v1/session");
    let specimen = session["workspace_id"].as_str().unwrap().to_owned();
    let isolated = session["isolation"]["isolated"].as_bool().unwrap();
    let (s, made) = post(port, &cookie, &csrf, "/api/v1/workspaces", &serde_json::json!({"name": "Dossier Martin"}));
    assert_eq!(s, 201, "{made}");
    let real = made["workspace"].as_str().unwrap().to_owned();
    let old_pid = server_pid(BIN, &run);

    let (s, v) = post(port, &cookie, &csrf, &format!("/api/v1/workspaces/{real}/open"), &serde_json::json!(null));
    if !isolated {
        // SPEC P2: no REAL workspace from a server the kernel does not isolate.
        assert_eq!(s, 403, "{v}");
        return;
    }
    assert_eq!(s, 202, "{v}");
    let serving = wait_for("the server on the REAL workspace", || {
        let (s, v) = get(port, &cookie, "/api/v1/session");
        (s == 200 && v["workspace_id"] == real.as_str()).then_some(v)
    });
    assert!(serving["isolation"]["isolated"].as_bool().unwrap(), "{serving}");
    let new_pid = server_pid(BIN, &run);
    assert_ne!(new_pid, old_pid, "the server was not restarted");
    // SPEC V7: the link used before the switch stays spent for the new
    // server (same boot's key): it opens no second session.
    let replay = http(port, "GET", &format!("/login?code={code}"), &[], "").unwrap();
    assert_eq!(replay.status, 403, "a used link after the switch: {}", replay.body);
    assert!(replay.body.contains("déjà servi"), "{}", replay.body);
    assert!(labfy_ipc::login::session_in_page(&replay.body).is_none());
    // The REAL workspace's first investigation, written through the new server.
    let inv = first_investigation(port, &cookie);
    let (s, v) = post(
        port,
        &cookie,
        &csrf,
        &format!("/api/v1/investigations/{inv}/evidence"),
        &serde_json::json!({"title": "Ouverture", "content": "écrit après le changement de dossier"}),
    );
    assert_eq!(s, 201, "{v}");
    let rows = all_healthy(&run).unwrap();
    assert!(rows.iter().all(|r| r.state == "healthy"), "{rows:?}");
    // A switch is not a crash: it is not counted as a restart.
    assert!(rows.iter().all(|r| r.restarts == 0), "{rows:?}");

    // Back to the SPECIMEN workspace the same way.
    let (s, v) = post(port, &cookie, &csrf, &format!("/api/v1/workspaces/{specimen}/open"), &serde_json::json!(null));
    assert_eq!(s, 202, "{v}");
    wait_for("the server on the SPECIMEN workspace again", || {
        let (s, v) = get(port, &cookie, "/api/v1/session");
        (s == 200 && v["workspace_id"] == specimen.as_str()).then_some(())
    });
    assert_eq!(integrity(&data), "ok");
}

/// SPEC U8 (issue 46, the new-user walk: 367 lines in 8 minutes, 342 of
/// them « Attempt N » continuations): with Tor unable to connect for two
/// minutes, `labfy up`'s terminal keeps its start lines, a summary per child
/// at most once a minute, and its stop — never a library's continuation
/// lines. The log file has arti's multi-line records whole, one line each.
#[test]
fn with_tor_unreachable_the_terminal_stays_short() {
    siblings_built();
    let dir = TempDir::new().unwrap();
    let (data, run) = (dir.path().join("data"), dir.path().join("run"));
    let mut up = up_with_stderr(&data, &run, &[]);
    let stderr = up.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stderr).lines().map_while(Result::ok).collect::<Vec<String>>()
    });
    std::thread::sleep(Duration::from_secs(130));
    drop(up); // SIGTERM: labfy up stops in order, its stderr closes
    let lines = reader.join().unwrap();
    let shown = lines.join("\n");
    assert!(!lines.iter().any(|l| l.starts_with("Attempt ")), "a library's continuation on the terminal:\n{shown}");
    assert!(lines.len() <= 25, "{} terminal lines in 130 s:\n{shown}", lines.len());
    assert!(lines.iter().any(|l| l.starts_with("labfy: egress: ") && l.contains("warnings logged")), "{shown}");
    let log = std::fs::read_to_string(data.join("logs/labfy.log")).unwrap();
    assert!(
        log.lines().any(|l| l.starts_with("egress") && l.contains(labfy_core::one_line::BREAK)),
        "no multi-line record from arti in 130 s: the test saw nothing to fold"
    );
}

/// SPEC U8: on a terminal (a pseudo-terminal from `script`), while Tor
/// cannot bootstrap, its progress is one status line redrawn in place under
/// the state changes, and erased before the stop's lines — not a line per
/// health check.
#[test]
fn on_a_terminal_tors_bootstrap_is_one_line_redrawn_in_place() {
    siblings_built();
    let dir = TempDir::new().unwrap();
    let (data, run) = (dir.path().join("data"), dir.path().join("run"));
    let up = format!(
        "LABFY_ARTI_CONFIG={OFFLINE_ARTI} timeout -s INT 25 {BIN} up --port 0 --data-dir {} --runtime-dir {}",
        data.display(),
        run.display()
    );
    let o = Command::new("script").args(["-q", "-e", "-c", &up, "/dev/null"]).output().unwrap();
    let screen = String::from_utf8_lossy(&o.stdout);
    let erase = "\r\u{1b}[2K";
    let redrawn = screen.matches(&format!("{erase}labfy: egress: not ready")).count();
    assert!(redrawn >= 1, "no status line in place:\n{screen:?}");
    // Each line of the screen once its redraws are applied: the status
    // line is never one of its own among the lines kept.
    // (A terminal ends its lines with \r\n.)
    let lines: Vec<&str> = screen
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .map(|l| l.rsplit('\r').next().unwrap_or(l))
        .map(|l| l.strip_prefix("\u{1b}[2K").unwrap_or(l))
        .collect();
    let status_lines = lines.iter().filter(|l| l.starts_with("labfy: egress: not ready")).count();
    assert!(status_lines <= 1, "the status became lines of their own:\n{}", lines.join("\n"));
    assert!(
        lines.iter().all(|l| !l.contains('…') || l.starts_with("labfy: egress: not ready")),
        "another line written after the status line:\n{}",
        lines.join("\n")
    );
    assert!(lines.iter().any(|l| l.starts_with("Labfy is serving ")), "{}", lines.join("\n"));
    assert!(
        lines.iter().any(|l| l.trim_end() == "labfy: stopped"),
        "the stop is a line of its own:\n{}",
        lines.join("\n")
    );
    assert!(lines.len() < 30, "{} lines:\n{}", lines.len(), lines.join("\n"));
}
