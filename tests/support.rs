//! Helpers shared by the cross-process tests: spawn `labfy`, wait for its URL,
//! speak just enough HTTP/1.1 over a std socket, and always clean up.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// An arti configuration for a Tor network that does not exist (every
/// address is 127.0.0.1:1): tests that are not about Tor give it to egress so
/// that it never reaches for the public Tor network (tests/run-all also
/// exports it for every `labfy up` a test starts).
pub const OFFLINE_ARTI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/arti-offline.toml");

/// Longest any helper waits.
pub const WAIT: Duration = Duration::from_secs(120);

/// A child process stopped when dropped, whatever happened: SIGTERM (so a
/// supervisor stops its children in order), then SIGKILL after 10 s.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            signal(self.0.id(), libc::SIGTERM);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with plain integers; no memory is involved.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// The runtime directory the tests give `labfy up` for `data_dir`: inside it,
/// so parallel tests never share one and it goes with the test's temp dir.
pub fn runtime_dir(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join(".run")
}

/// Starts `labfy up` on `data_dir` with a free port; returns the guard and the
/// port once the URL line has been printed.
pub fn start_up(bin: &str, data_dir: &Path) -> (Guard, u16) {
    start_up_env(bin, data_dir, &[])
}

/// [`start_up`] with more variables in `labfy up`'s environment.
pub fn start_up_env(bin: &str, data_dir: &Path, env: &[(&str, &std::ffi::OsStr)]) -> (Guard, u16) {
    let mut child = Command::new(bin)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(data_dir)
        .arg("--runtime-dir")
        .arg(runtime_dir(data_dir))
        .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn labfy up");
    let stdout = child.stdout.take().expect("stdout");
    let guard = Guard(child);
    let (port, _) = read_url(stdout);
    (guard, port)
}

/// Reads `labfy up`'s stdout until its URL line (bounded by [`WAIT`]);
/// returns the port and every line printed up to it.
pub fn read_url(stdout: std::process::ChildStdout) -> (u16, String) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            seen.push_str(&line);
            seen.push('\n');
            if let Some(rest) = line.strip_prefix("Open http://127.0.0.1:") {
                let port: u16 = rest.split('/').next().unwrap_or_default().parse().expect("port");
                let _ = tx.send((port, seen.clone()));
            }
        }
    });
    rx.recv_timeout(WAIT).expect("labfy up printed no URL in time")
}

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One request on a fresh connection (`Connection: close`).
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> std::io::Result<Answer> {
    http_bytes(port, method, path, headers, body.as_bytes())
}

/// [`http`] with a body of any bytes (a file upload).
pub fn http_bytes(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect();
    Ok(Answer { status, headers, body: body.to_owned() })
}

/// A JSON POST with the session (`Authorization`), Origin and CSRF token: (status, body or `null`).
pub fn post(port: u16, cookie: &str, csrf: &str, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let origin = format!("http://127.0.0.1:{port}");
    let a = http(
        port,
        "POST",
        path,
        &[("Authorization", cookie), ("Origin", &origin), ("X-CSRF-Token", csrf), ("Content-Type", "application/json")],
        &body.to_string(),
    )
    .expect("POST");
    (a.status, serde_json::from_str(&a.body).unwrap_or(serde_json::Value::Null))
}

/// A GET with the session (`Authorization`): (status, body or `null`).
pub fn get(port: u16, cookie: &str, path: &str) -> (u16, serde_json::Value) {
    let a = http(port, "GET", path, &[("Authorization", cookie)], "").expect("GET");
    (a.status, serde_json::from_str(&a.body).unwrap_or(serde_json::Value::Null))
}

/// Logs in to the `labfy up` whose runtime directory is `run` (SPEC T4): a
/// fresh one-time code from its `login.json`, as `labfy open` mints it,
/// exchanged at `/login`; returns (the `Authorization` value, csrf token).
pub fn login(port: u16, run: &Path) -> (String, String) {
    let (_, key) = labfy_ipc::login::read_login_file(run).expect("login.json of the running labfy up");
    login_with(port, &key.mint_code(std::time::SystemTime::now()))
}

/// Exchanges a login `code` (or the `code=` of a printed link) for a
/// session; returns (the `Authorization` value, csrf token).
pub fn login_with(port: u16, code: &str) -> (String, String) {
    let code = code.rsplit("code=").next().unwrap_or(code);
    let a = http(port, "GET", &format!("/login?code={code}"), &[], "").expect("GET /login");
    assert_eq!(a.status, 200, "login refused: {}", a.body);
    assert!(a.header("set-cookie").is_none(), "the login set a cookie");
    let token = labfy_ipc::login::session_in_page(&a.body).expect("the login page hands over a session");
    let cookie = format!("Bearer {token}");
    let s = http(port, "GET", "/api/v1/session", &[("Authorization", &cookie)], "").expect("session");
    let v: serde_json::Value = serde_json::from_str(&s.body).expect("session JSON");
    (cookie, v["csrf_token"].as_str().unwrap_or_default().to_owned())
}

/// The first investigation of the session's workspace (`investigation:…`).
pub fn first_investigation(port: u16, cookie: &str) -> String {
    let s = http(port, "GET", "/api/v1/session", &[("Authorization", cookie)], "").expect("session");
    let v: serde_json::Value = serde_json::from_str(&s.body).expect("session JSON");
    let ws = v["workspace_id"].as_str().unwrap_or_default().to_owned();
    let invs = http(port, "GET", &format!("/api/v1/workspaces/{ws}/investigations"), &[("Authorization", cookie)], "")
        .expect("investigations");
    let v: serde_json::Value = serde_json::from_str(&invs.body).expect("investigations JSON");
    v["investigations"][0]["id"].as_str().unwrap_or_default().to_owned()
}

/// The pid of the healthy workspace server of the `labfy up` whose runtime
/// directory is `run`, from `labfy status`.
pub fn server_pid(bin: &str, run: &Path) -> u32 {
    healthy_pid(bin, run, "server")
}

/// The pid of the healthy `role` (`server`, `governor`, `egress`) of the
/// `labfy up` whose runtime directory is `run`, from `labfy status`.
pub fn healthy_pid(bin: &str, run: &Path, role: &str) -> u32 {
    wait_for(&format!("a healthy {role}"), || {
        let o = Command::new(bin).args(["status", "--runtime-dir"]).arg(run).output().ok()?;
        let text = String::from_utf8(o.stdout).ok()?;
        let line = text.lines().find(|l| l.starts_with(&format!("{role} ")))?;
        let f: Vec<&str> = line.split_whitespace().collect();
        (f[1] == "healthy").then(|| f[2].parse().ok()).flatten()
    })
}

/// The parent of `pid`, from `/proc/<pid>/stat` (after the command name,
/// which may hold spaces and parentheses).
pub fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process is alive");
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .expect("a ppid")
}

/// Polls `f` until it returns `Some` or [`WAIT`] passes.
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `PRAGMA integrity_check` of a data directory's database, opened raw.
pub fn integrity(dir: &Path) -> String {
    let conn = rusqlite::Connection::open(dir.join("labfy.sqlite3")).expect("open");
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("integrity_check")
}

/// Whether this process runs as root (tests that switch uid, delegate
/// cgroups or enter namespaces need it, and say so when they skip).
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid() == 0
    }
}

/// For a `labfy up` run as another uid (the unit's `User=labfy`): `base`
/// made searchable, copies of the four programs beside `bin` in
/// `base/bin`, and the offline arti configuration readable by all. Returns
/// the programs' directory and the configuration's path.
pub fn programs_for_another_uid(base: &Path, bin: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o755)).expect("chmod base");
    let bin_dir = base.join("bin");
    std::fs::create_dir(&bin_dir).expect("bin dir");
    for p in ["labfy", "labfy-server", "labfy-governor", "labfy-egress"] {
        std::fs::copy(Path::new(bin).parent().expect("bin dir").join(p), bin_dir.join(p)).expect("copy program");
    }
    let arti = base.join("arti-offline.toml");
    std::fs::copy(OFFLINE_ARTI, &arti).expect("copy arti config");
    std::fs::set_permissions(&arti, std::fs::Permissions::from_mode(0o644)).expect("chmod arti config");
    (bin_dir, arti)
}

/// Writes into `dir` the operator's manifest of `text.count_chars` (a
/// python3 program counting the characters of the `.txt` pieces given),
/// for `LABFY_AGENT_CAPABILITIES_DIR`.
pub fn write_count_chars_manifest(dir: &Path) {
    let manifest = serde_json::json!({
        "id": "text.count_chars", "version": "1.0.0",
        "description": "Compte les caractères des pièces données — counts characters.",
        "input_schema": {"type": "object", "properties": {"label": {"type": "string", "maxLength": 20}},
                         "required": ["label"], "additionalProperties": false},
        "output": {"kind": "json", "max_bytes": 4096}, "risk_level": "low", "network": "none",
        "program": "python3",
        "script": "import glob, json, sys\nargs = json.loads(sys.argv[1])\nbase = sys.argv[2] if len(sys.argv) > 2 else '/input'\nn = sum(len(open(p, encoding='utf-8').read()) for p in glob.glob(base + '/*.txt'))\nprint(json.dumps({'label': args['label'], 'chars': n}))\n",
        "tests": [{"name": "deux fichiers", "input": {"label": "t"}, "files": {"a.txt": "abc", "b.txt": "de"},
                   "expect_exit": 0, "stdout_contains": "\"chars\": 5"}]
    });
    std::fs::write(dir.join("chars.json"), manifest.to_string()).unwrap();
}
