//! Cross-process tests of the `labfy` command: real processes, a real SQLite
//! file, real signals. (Attached to the `labfy` package so Cargo builds the
//! binary and passes its path as `CARGO_BIN_EXE_labfy`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

fn run(args: &[&str], data_dir: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("LABFY_RUNTIME_DIR", runtime_dir(data_dir))
        .output()
        .expect("run labfy")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sigterm(pid: u32) {
    signal(pid, libc::SIGTERM);
}

#[test]
fn up_on_a_fresh_data_dir_creates_the_specimen_serves_and_stops_on_sigterm() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (mut guard, port) = start_up(BIN, &data);
    // Without a login, the page says how to log in and issues nothing (T4):
    // `/login` with no code (where the UI's page goes with no session), and
    // no session for the API.
    assert_eq!(http(port, "GET", "/api/v1/session", &[], "").unwrap().status, 401);
    let a = http(port, "GET", "/login", &[], "").unwrap();
    assert_eq!(a.status, 401);
    assert!(a.header("set-cookie").is_none());
    assert!(a.body.contains("labfy open"), "{}", a.body);
    assert!(a.header("content-security-policy").unwrap().contains("script-src 'self'"));
    // `labfy open` prints a one-time link that logs in, once.
    let o = Command::new(BIN).args(["open", "--runtime-dir"]).arg(runtime_dir(&data)).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let link = String::from_utf8(o.stdout).unwrap().trim().to_owned();
    assert!(link.starts_with(&format!("http://127.0.0.1:{port}/login?code=")), "{link}");
    let (cookie, _) = login_with(port, &link);
    let again = http(port, "GET", &format!("/login?{}", link.split_once('?').unwrap().1), &[], "").unwrap();
    assert_eq!(again.status, 403, "a login link works once");
    assert!(again.body.contains("déjà servi"), "{}", again.body);
    let ws = http(port, "GET", "/api/v1/workspaces", &[("Authorization", &cookie)], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&ws.body).unwrap();
    assert_eq!(v["workspaces"][0]["class"], "SPECIMEN");
    assert_eq!(v["workspaces"][0]["status"], "READY");
    // Wrong Host from a real socket is refused too.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"GET / HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 421"), "{out}");
    sigterm(guard.0.id());
    let status = wait_for("labfy up to exit", || guard.0.try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    assert_eq!(integrity(&data), "ok");
    // A second start reuses the data: no second SPECIMEN.
    let (_guard, port) = start_up(BIN, &data);
    let (cookie, _) = login(port, &runtime_dir(&data));
    let ws = http(port, "GET", "/api/v1/workspaces", &[("Authorization", &cookie)], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&ws.body).unwrap();
    assert_eq!(v["workspaces"].as_array().unwrap().len(), 1);
}

#[test]
fn a_port_in_use_is_a_clear_error_and_writes_nothing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let o = Command::new(BIN)
        .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .args(["up", "--port", &port, "--data-dir"])
        .arg(&data)
        .env("LABFY_RUNTIME_DIR", runtime_dir(&data))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("already in use"), "{}", stderr(&o));
    assert!(!data.exists(), "data dir was created although the port was taken");
}

#[test]
fn a_bad_agent_configuration_is_refused_before_anything_starts() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    for (vars, expected) in [
        (vec![("LABFY_AGENT_MODE", "bogus")], "unknown agent mode"),
        (vec![("LABFY_AGENT_MODE", "local-model")], "LABFY_AGENT_MODEL_ENDPOINT"),
        (
            vec![
                ("LABFY_AGENT_MODE", "local-model"),
                ("LABFY_AGENT_MODEL_ENDPOINT", "http://localhost:18090"),
                ("LABFY_AGENT_MODEL_ID", "m"),
            ],
            "localhost",
        ),
        (
            vec![
                ("LABFY_AGENT_MODE", "local-model"),
                ("LABFY_AGENT_MODEL_ENDPOINT", "http://127.0.0.1:8080"),
                ("LABFY_AGENT_MODEL_ID", "m"),
            ],
            "8080",
        ),
    ] {
        let o = Command::new(BIN)
            .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
            .args(["up", "--port", "0", "--data-dir"])
            .arg(&data)
            .env("LABFY_RUNTIME_DIR", runtime_dir(&data))
            .envs(vars.clone())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{vars:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("invalid agent configuration"), "{}", stderr(&o));
        assert!(stderr(&o).contains(expected), "{vars:?}: {}", stderr(&o));
        assert!(!data.exists(), "nothing is written when the configuration is refused");
    }
}

#[test]
fn a_corrupt_or_foreign_database_is_refused_and_kept_byte_for_byte() {
    let dir = TempDir::new().unwrap();
    let garbage = b"SQLite format 3\0 but then nothing sensible".repeat(100);
    std::fs::write(dir.path().join("labfy.sqlite3"), &garbage).unwrap();
    let o = run(&["up", "--port", "0"], dir.path());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a SQLite database"), "{}", stderr(&o));
    assert_eq!(std::fs::read(dir.path().join("labfy.sqlite3")).unwrap(), garbage);

    let foreign = TempDir::new().unwrap();
    let conn = rusqlite::Connection::open(foreign.path().join("labfy.sqlite3")).unwrap();
    conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (42);").unwrap();
    drop(conn);
    let before = std::fs::read(foreign.path().join("labfy.sqlite3")).unwrap();
    let o = run(&["specimen", "--size", "5"], foreign.path());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not belong to Labfy"), "{}", stderr(&o));
    assert_eq!(std::fs::read(foreign.path().join("labfy.sqlite3")).unwrap(), before);
}

#[test]
fn bad_arguments_are_refused_with_usage_errors() {
    let dir = TempDir::new().unwrap();
    for (args, needle) in [
        (vec!["specimen", "--size", "0"], "between 1 and 1000000"),
        (vec!["specimen", "--size", "1000001"], "between 1 and 1000000"),
        (vec!["up", "--port", "0", "--workspace", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"], "bare UUID"),
        (
            vec!["up", "--port", "0", "--workspace", "evidence:1b4e28ba-2fa1-11d2-883f-0016d3cca427"],
            "expected a `workspace:`",
        ),
    ] {
        let o = run(&args, dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    let o = Command::new(BIN).args(["specimen", "--size", "many"]).arg("--data-dir").arg(dir.path()).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_read_only_data_dir_is_a_clear_error_and_loses_nothing() {
    let dir = TempDir::new().unwrap();
    let src = dir.path().join("src");
    let o = run(&["specimen", "--size", "50", "--seed", "3"], &src);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(src.join("labfy.sqlite3")).unwrap();
    // Root ignores permission bits, so the read-only case is a read-only mount.
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let is_root = unsafe_geteuid() == 0;
    if is_root {
        let ok = Command::new("mount").args(["--bind"]).arg(&src).arg(&ro).status().unwrap().success()
            && Command::new("mount").args(["-o", "remount,ro,bind"]).arg(&ro).status().unwrap().success();
        assert!(ok, "could not make a read-only bind mount as root");
    } else {
        for f in std::fs::read_dir(&src).unwrap() {
            std::fs::copy(f.as_ref().unwrap().path(), ro.join(f.unwrap().file_name())).unwrap();
        }
        Command::new("chmod").args(["-R", "a-w"]).arg(&ro).status().unwrap();
    }
    let o = run(&["up", "--port", "0"], &ro);
    if is_root {
        let _ = Command::new("umount").arg(&ro).status();
    } else {
        Command::new("chmod").args(["-R", "u+w"]).arg(&ro).status().unwrap();
    }
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be written"), "{}", stderr(&o));
    assert_eq!(std::fs::read(src.join("labfy.sqlite3")).unwrap(), before);
    assert_eq!(integrity(&src), "ok");
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid()
    }
}

#[test]
fn sigkill_during_specimen_generation_leaves_a_sound_database() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_path_buf();
    let child = Command::new(BIN)
        .args(["specimen", "--size", "400000", "--seed", "77", "--data-dir"])
        .arg(&data)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut guard = Guard(child);
    // Wait until several batches are committed, then kill mid-batch.
    wait_for("a few committed batches", || {
        let conn = rusqlite::Connection::open_with_flags(
            data.join("labfy.sqlite3"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .ok()?;
        let n: i64 = conn.query_row("SELECT count(*) FROM evidence", [], |r| r.get(0)).ok()?;
        (n >= 10_000).then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
    guard.0.kill().unwrap();
    guard.0.wait().unwrap();
    assert_eq!(integrity(&data), "ok");
    let conn = rusqlite::Connection::open(data.join("labfy.sqlite3")).unwrap();
    let (status, n): (String, i64) = conn
        .query_row("SELECT status, (SELECT count(*) FROM evidence) FROM workspaces", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_eq!(status, "GENERATING");
    assert_eq!(n % labfy_store::specimen::BATCH as i64, 0, "a batch was half written: {n} items");
    // The index and the table agree after the kill.
    conn.execute("INSERT INTO evidence_fts(evidence_fts, rank) VALUES ('integrity-check', 1)", [])
        .expect("FTS index matches its table");
    let indexed: i64 =
        conn.query_row("SELECT count(*) FROM evidence_fts WHERE evidence_fts MATCH 'de'", [], |r| r.get(0)).unwrap();
    assert!(indexed > 0);
    drop(conn);
    // The interrupted workspace is never served; `up` writes its own SPECIMEN.
    let (_g, port) = start_up(BIN, &data);
    let (cookie, _) = login(port, &runtime_dir(&data));
    let ws = http(port, "GET", "/api/v1/session", &[("Authorization", &cookie)], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&ws.body).unwrap();
    let served = v["workspace_id"].as_str().unwrap().to_owned();
    let all = http(port, "GET", "/api/v1/workspaces", &[("Authorization", &cookie)], "").unwrap();
    let all: serde_json::Value = serde_json::from_str(&all.body).unwrap();
    let served_status =
        all["workspaces"].as_array().unwrap().iter().find(|w| w["id"] == served).unwrap()["status"].clone();
    assert_eq!(served_status, "READY");
}

#[test]
fn sigkill_during_writes_keeps_every_acknowledged_note() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (mut guard, port) = start_up(BIN, &data);
    let (cookie, csrf) = login(port, &runtime_dir(&data));
    let origin = format!("http://127.0.0.1:{port}");
    let inv = first_investigation(port, &cookie);
    let path = format!("/api/v1/investigations/{inv}/evidence");
    // Large notes from several threads; the server process (not the
    // supervisor) is SIGKILLed while they flow.
    let server = server_pid(BIN, &runtime_dir(&data));
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut threads = Vec::new();
    for t in 0..4 {
        let (cookie, csrf, origin, path, acked) =
            (cookie.clone(), csrf.clone(), origin.clone(), path.clone(), acked.clone());
        threads.push(std::thread::spawn(move || {
            for i in 0..5 {
                let body =
                    serde_json::json!({"title": format!("note {t}-{i}"), "content": "x".repeat(900_000)}).to_string();
                let h = [
                    ("Authorization", cookie.as_str()),
                    ("Origin", origin.as_str()),
                    ("X-CSRF-Token", csrf.as_str()),
                    ("Content-Type", "application/json"),
                ];
                match http(port, "POST", &path, &h, &body) {
                    Ok(a) if a.status == 201 => {
                        let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
                        acked.lock().unwrap().push(v["id"].as_str().unwrap().to_owned());
                    }
                    _ => return,
                }
            }
        }));
    }
    wait_for("a first acknowledged note", || (!acked.lock().unwrap().is_empty()).then_some(()));
    signal(server, libc::SIGKILL);
    for t in threads {
        t.join().unwrap();
    }
    // Stop everything before reading the file.
    signal(guard.0.id(), libc::SIGTERM);
    wait_for("labfy up to stop", || guard.0.try_wait().unwrap());
    assert_eq!(integrity(&data), "ok");
    let acked = acked.lock().unwrap().clone();
    assert!(!acked.is_empty());
    let conn = rusqlite::Connection::open(data.join("labfy.sqlite3")).unwrap();
    for id in &acked {
        let uuid = id.trim_start_matches("evidence:");
        let n: i64 = conn.query_row("SELECT count(*) FROM evidence WHERE id = ?1", [uuid], |r| r.get(0)).unwrap();
        assert_eq!(n, 1, "acknowledged {id} lost");
    }
}

#[test]
fn real_workspaces_are_created_and_listed_and_up_prefers_specimen() {
    let dir = TempDir::new().unwrap();
    let o = run(&["workspace", "create", "--name", "Dossier Nord"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let real = String::from_utf8(o.stdout).unwrap().trim().to_owned();
    assert!(real.starts_with("workspace:"), "{real}");
    let o = run(&["workspace", "create", "--name", "  "], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["workspace", "list"], dir.path());
    let list = String::from_utf8(o.stdout).unwrap();
    assert!(list.contains(&format!("{real}\tREAL\tREADY\tDossier Nord")), "{list}");
    // Without --workspace, `up` adds and serves the SPECIMEN beside it.
    let child = Command::new(BIN)
        .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(dir.path())
        .env("LABFY_RUNTIME_DIR", runtime_dir(dir.path()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard(child);
    let stdout = guard.0.stdout.take().unwrap();
    let (port, _) = read_url(stdout);
    let (cookie, _) = login(port, &runtime_dir(dir.path()));
    let all = http(port, "GET", "/api/v1/workspaces", &[("Authorization", &cookie)], "").unwrap();
    let all: serde_json::Value = serde_json::from_str(&all.body).unwrap();
    let mut classes: Vec<String> =
        all["workspaces"].as_array().unwrap().iter().map(|w| w["class"].as_str().unwrap().to_owned()).collect();
    classes.sort();
    assert_eq!(classes, ["REAL", "SPECIMEN"]);
    let s = http(port, "GET", "/api/v1/session", &[("Authorization", &cookie)], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&s.body).unwrap();
    assert_ne!(v["workspace_id"], real);
}

/// SPEC C4: `labfy extract` scans a workspace's evidence, once; a second run
/// finds nothing to do; a reference of the wrong kind is a usage error.
#[test]
fn extract_fills_the_graph_once_and_refuses_what_is_not_a_case() {
    let dir = TempDir::new().unwrap();
    let o = run(&["specimen", "--size", "300"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let ws = String::from_utf8(o.stdout).unwrap().trim().to_owned();
    let o = run(&["extract", &ws], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stderr(&o);
    assert!(said.contains("300 evidence items scanned"), "{said}");
    assert!(String::from_utf8(o.stdout).unwrap().trim().starts_with("job:"));
    let conn = rusqlite::Connection::open(dir.path().join("labfy.sqlite3")).unwrap();
    let mentions: i64 = conn.query_row("SELECT count(*) FROM mentions", [], |r| r.get(0)).unwrap();
    assert!(mentions > 300, "SPECIMEN pages name addresses and domains: {mentions}");
    // The listing names the investigation; a second run over it scans nothing.
    let o = run(&["workspace", "list"], dir.path());
    let list = String::from_utf8(o.stdout).unwrap();
    let inv = list.lines().nth(1).unwrap().trim().split('\t').next().unwrap().to_owned();
    assert!(inv.starts_with("investigation:") && list.contains("300 evidence items"), "{list}");
    let o = run(&["extract", &inv], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(": 0 evidence items scanned"), "{}", stderr(&o));
    let again: i64 = conn.query_row("SELECT count(*) FROM mentions", [], |r| r.get(0)).unwrap();
    assert_eq!(again, mentions);
    for (target, said) in [
        ("evidence:1b4e28ba-2fa1-11d2-883f-0016d3cca427", "expected an `investigation:` or `workspace:`"),
        ("investigation:1b4e28ba-2fa1-11d2-883f-0016d3cca427", "not found"),
        ("nonsense", "nonsense"),
    ] {
        let o = run(&["extract", target], dir.path());
        assert!(!o.status.success());
        assert!(stderr(&o).contains(said), "{target}: {}", stderr(&o));
    }
}

/// SPEC C5: `labfy export` writes a bundle and prints its fingerprint;
/// `labfy verify` passes on it, and fails — naming the file and the hash
/// expected — once a byte of an item's text changes.
#[test]
fn export_then_verify_and_a_tampered_bundle_fails() {
    let dir = TempDir::new().unwrap();
    let o = run(&["specimen", "--size", "120"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["workspace", "list"], dir.path());
    let list = String::from_utf8(o.stdout).unwrap();
    let inv = list.lines().nth(1).unwrap().trim().split('\t').next().unwrap().to_owned();
    assert!(run(&["extract", &inv], dir.path()).status.success());
    let out = dir.path().join("bundle");
    let o = run(&["export", &inv, out.to_str().unwrap()], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let fingerprint = String::from_utf8(o.stdout.clone()).unwrap().trim().to_owned();
    assert_eq!(fingerprint.len(), 64, "{fingerprint}");
    assert!(stderr(&o).contains(&format!("--fingerprint {fingerprint}")), "{}", stderr(&o));
    // Twice into the same place: refused, the first bundle untouched.
    let o = run(&["export", &inv, out.to_str().unwrap()], dir.path());
    assert!(!o.status.success() && stderr(&o).contains("already exists"), "{}", stderr(&o));

    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        Command::new(BIN).args(&args).output().unwrap()
    };
    let o = verify(&["--fingerprint", &fingerprint]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8(o.stdout).unwrap().trim(), fingerprint);
    let o = verify(&["--fingerprint", &"0".repeat(64)]);
    assert!(!o.status.success() && stderr(&o).contains("fingerprint"), "{}", stderr(&o));

    let text = std::fs::read_dir(out.join("evidence")).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&text).unwrap();
    bytes.push(b'!');
    std::fs::write(&text, bytes).unwrap();
    let o = verify(&[]);
    assert!(!o.status.success());
    let said = stderr(&o);
    let name = text.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        said.contains("verification FAILED") && said.contains(&name) && said.contains("the manifest says"),
        "{said}"
    );
}
