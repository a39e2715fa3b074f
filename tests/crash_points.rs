//! The crash-point harness (SPEC K4): for each named crash point, a
//! `labfy up` armed for it runs one scenario through every state machine —
//! a turn paused and resumed, a research request refused and another
//! granted (its SPECIMEN campaign), a tool request approved and another
//! refused, an import, an export, a workspace switch — until the process
//! that owns the point kills itself there (`SIGKILL`, `labfy_core::crash`).
//! Then the appliance is brought back (the supervisor restarts a server;
//! a dead supervisor is started again, as its unit would) and the
//! invariants are checked:
//! - the point fired (the scenario reaches every point it names);
//! - every state an answer acknowledged is there, or a later one;
//! - a refusal is not resurrected;
//! - no job is left `RUNNING`, no campaign unfinished;
//! - `PRAGMA integrity_check` is `ok`.
//!
//! Each point costs about a second: CI runs the whole matrix;
//! `LABFY_CRASH_POINTS=<point>,…` runs some (the names are printed).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use labfy_core::crash;
use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

/// The answer points of the routes the scenario calls, with their state
/// machine.
const ANSWER_POINTS: &[(&str, &str)] = &[
    ("turn", "POST /api/v1/agent-tools/turns"),
    ("research request", "POST /api/v1/research/requests/{request}/refuse"),
    ("grant", "POST /api/v1/research/requests/{request}/grant"),
    ("turn", "POST /api/v1/agent-tools/turns/{turn_id}/resume"),
    ("tool request", "POST /api/v1/tool-requests/{request}/approve"),
    ("tool request", "POST /api/v1/tool-requests/{request}/refuse"),
    ("import", "POST /api/v1/investigations/{investigation}/imports"),
    ("import", "POST /api/v1/imports/{job}/files"),
    ("import", "POST /api/v1/imports/{job}/finish"),
    ("export", "POST /api/v1/investigations/{investigation}/export"),
    ("workspace switch", "POST /api/v1/workspaces"),
    ("workspace switch", "POST /api/v1/workspaces/{workspace}/open"),
];

/// Points the SPECIMEN scenario cannot reach: a REAL campaign's admission
/// and end run through egress and Tor (tests/egress_up.rs drives them,
/// without a crash).
const NOT_IN_SCENARIO: &[&str] = &[crash::CAMPAIGN_ADMITTED, crash::CAMPAIGN_ENDED];

/// Every point of the scenario: the named transitions, and for each route
/// it calls the instant before its answer leaves (`answer:`, in the server)
/// and the instant after the harness read it (`after:`, a `kill -9` from
/// outside).
fn all_points() -> Vec<String> {
    let named = crash::POINTS.iter().map(|p| p.name).filter(|n| !NOT_IN_SCENARIO.contains(n)).map(str::to_owned);
    let answers = ANSWER_POINTS.iter().flat_map(|(_, r)| [format!("answer:{r}"), format!("after:{r}")]);
    named.chain(answers).collect()
}

/// `LABFY_CRASH_POINTS` (comma-separated) runs some; by default, all.
fn points() -> Vec<String> {
    match std::env::var("LABFY_CRASH_POINTS") {
        Ok(v) if !v.is_empty() => v.split(',').map(|s| s.trim().to_owned()).collect(),
        _ => all_points(),
    }
}

#[test]
fn every_state_machine_survives_a_kill_at_its_durable_transitions() {
    let points = points();
    let all = all_points();
    for p in &points {
        assert!(all.contains(p), "{p} is no crash point of the scenario (known: {all:?})");
    }
    let started = Instant::now();
    for p in &points {
        let t = Instant::now();
        crash_at(p);
        eprintln!("crash point {p}: killed, restarted, invariants hold ({} ms)", t.elapsed().as_millis());
    }
    eprintln!("crash-point matrix: {} points in {} s", points.len(), started.elapsed().as_secs());
}

/// The scenario stopped: the armed process crashed.
#[derive(Debug)]
struct Crashed;

/// What the analyst was told, to be found again after the restart.
#[derive(Debug)]
enum Ack {
    /// A turn, in one of these states (or a later one of the list).
    Turn(String, &'static [&'static str]),
    /// A research request in one of these states.
    Request(String, &'static [&'static str]),
    /// An active grant.
    Grant(String),
    /// A tool request with this status.
    ToolRequest(String, &'static str),
    /// A piece of evidence.
    Evidence(String),
    /// A job that ended (or, acknowledged as started, must end).
    Job(String, Option<&'static str>),
    /// A workspace that exists.
    Workspace(String),
}

struct Appliance {
    dir: TempDir,
    data: PathBuf,
    mark: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
    up: Option<Guard>,
    port: u16,
    cookie: String,
    csrf: String,
    acked: Vec<Ack>,
    /// The workspace served at the start (SPECIMEN).
    home: String,
    /// The crash point armed.
    point: String,
}

impl Appliance {
    fn start(point: &str) -> Self {
        let dir = TempDir::new().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        // In the data directory: the confined server sees it at the same path.
        let mark = data.join("crash.fired");
        let manifests = dir.path().join("manifests");
        std::fs::create_dir(&manifests).unwrap();
        write_count_chars_manifest(&manifests);
        let env = vec![
            (crash::ENV_AT.to_owned(), point.into()),
            (crash::ENV_MARK.to_owned(), mark.clone().into_os_string()),
            ("LABFY_AGENT_OPTIONAL_CATALOG".to_owned(), "true".into()),
            ("LABFY_AGENT_CAPABILITIES_DIR".to_owned(), manifests.clone().into_os_string()),
        ];
        let mut a = Self {
            dir,
            data,
            mark,
            env,
            up: None,
            port: 0,
            cookie: String::new(),
            csrf: String::new(),
            acked: Vec::new(),
            home: String::new(),
            point: point.to_owned(),
        };
        a.up();
        a.home = a.get("/api/v1/session").unwrap().1["workspace_id"].as_str().unwrap().to_owned();
        a
    }

    fn up(&mut self) {
        let env: Vec<(&str, &std::ffi::OsStr)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_os_str())).collect();
        let (guard, port) = start_up_env(BIN, &self.data, &env);
        self.up = Some(guard);
        self.port = port;
        self.login();
    }

    fn login(&mut self) {
        let run = runtime_dir(&self.data);
        let (cookie, csrf) = login(self.port, &run);
        self.cookie = cookie;
        self.csrf = csrf;
    }

    fn fired(&self) -> bool {
        self.mark.exists()
    }

    /// A request; a transport failure is the crash (the mark shows up, at
    /// most a few seconds later) or a failure of the test.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), Crashed> {
        let origin = format!("http://127.0.0.1:{}", self.port);
        let text = body.map(Value::to_string).unwrap_or_default();
        let mut headers = vec![("Authorization", self.cookie.as_str())];
        if method == "POST" {
            headers.extend([("Origin", origin.as_str()), ("X-CSRF-Token", self.csrf.as_str())]);
            headers.push(("Content-Type", "application/json"));
        }
        self.answer(path, http(self.port, method, path, &headers, &text))
    }

    fn answer(&self, path: &str, a: std::io::Result<Answer>) -> Result<(u16, Value), Crashed> {
        match a {
            Ok(a) => Ok((a.status, serde_json::from_str(&a.body).unwrap_or(Value::Null))),
            Err(e) => {
                let deadline = Instant::now() + Duration::from_secs(5);
                while !self.fired() {
                    assert!(Instant::now() < deadline, "{path}: {e}, and no crash point fired");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(Crashed)
            }
        }
    }

    fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), Crashed> {
        self.call("POST", path, Some(body))
    }

    fn get(&self, path: &str) -> Result<(u16, Value), Crashed> {
        self.call("GET", path, None)
    }

    /// The answer to `route` was just read: armed with `after:<route>`, the
    /// harness kills the server now, from outside (`kill -9`, the answer's
    /// state is what it told).
    fn acknowledged(&self, route: &str) -> Result<(), Crashed> {
        if self.point.strip_prefix("after:") != Some(route) {
            return Ok(());
        }
        std::fs::write(&self.mark, format!("{}\n", self.point)).unwrap();
        signal(server_pid(BIN, &runtime_dir(&self.data)), libc::SIGKILL);
        Err(Crashed)
    }

    /// After a step: an asynchronous transition (a job's end) may have
    /// crashed the server meanwhile.
    fn check(&self) -> Result<(), Crashed> {
        if self.fired() { Err(Crashed) } else { Ok(()) }
    }

    /// Waits until `f` answers, the crash included.
    fn until(&self, what: &str, mut f: impl FnMut() -> Result<Option<Value>, Crashed>) -> Result<Value, Crashed> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(v) = f()? {
                return Ok(v);
            }
            self.check()?;
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One point: arm, run until the crash, restart, check.
fn crash_at(point: &str) {
    let mut a = Appliance::start(point);
    let run = runtime_dir(&a.data);
    let server = server_pid(BIN, &run);
    let ended = scenario(&mut a);
    assert!(ended.is_err(), "{point}: the scenario ended and the point never fired");
    assert_eq!(std::fs::read_to_string(&a.mark).unwrap().trim(), point);
    // Back to a whole appliance: the supervisor restarts its server; a dead
    // supervisor (its children die with it) is started again, as its unit
    // would.
    let owner = crash::POINTS.iter().find(|p| p.name == point).map_or("server", |p| p.process);
    if owner == "supervisor" {
        let up = a.up.as_mut().unwrap();
        wait_for("labfy up to be gone", || up.0.try_wait().unwrap().map(|_| ()));
        a.up = None;
        a.up();
    } else {
        wait_for("a new server", || {
            let pid = server_pid(BIN, &run);
            (pid != server).then_some(pid)
        });
        let port = a.port;
        let (cookie, csrf) =
            wait_for("the restarted server to answer", || std::panic::catch_unwind(|| login(port, &run)).ok());
        a.cookie = cookie;
        a.csrf = csrf;
    }
    // The acknowledged states are the first workspace's: back to it if the
    // switch went through.
    let (_, session) = a.get("/api/v1/session").unwrap();
    if session["workspace_id"] != a.home.as_str() {
        let home = a.home.clone();
        let (s, v) = a.post(&format!("/api/v1/workspaces/{home}/open"), &Value::Null).unwrap();
        assert_eq!(s, 202, "{v}");
        wait_for("the first workspace again", || {
            let (s, v) = a.get("/api/v1/session").ok()?;
            (s == 200 && v["workspace_id"] == home.as_str()).then_some(())
        });
    }
    invariants(&a, point);
    a.up = None; // SIGTERM: labfy up stops in order
    assert_eq!(integrity(&a.data), "ok", "{point}");
    let db = rusqlite::Connection::open(a.data.join("labfy.sqlite3")).unwrap();
    let running: i64 = db.query_row("SELECT count(*) FROM jobs WHERE status = 'RUNNING'", [], |r| r.get(0)).unwrap();
    assert_eq!(running, 0, "{point}: a job left RUNNING");
    let open: i64 = db
        .query_row("SELECT count(*) FROM campaigns WHERE status IN ('PENDING', 'ADMITTED', 'RUNNING')", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(open, 0, "{point}: a campaign left unfinished");
    drop(a.dir);
}

/// Every acknowledged state is there after the restart (or a later one).
fn invariants(a: &Appliance, point: &str) {
    let get = |path: &str| {
        let (s, v) = a.get(path).unwrap_or_else(|Crashed| panic!("{point}: crashed again on {path}"));
        assert_eq!(s, 200, "{point}: {path} after the restart: {v}");
        v
    };
    for ack in &a.acked {
        match ack {
            Ack::Turn(id, states) => {
                let v = get(&format!("/api/v1/agent-tools/turns/{id}"));
                let status = v["status"].as_str().unwrap_or_default();
                assert!(states.contains(&status), "{point}: turn {id} is {status}, acknowledged as {states:?}: {v}");
            }
            Ack::Request(id, states) => {
                let v = get(&format!("/api/v1/research/requests/{id}"));
                let status = v["request"]["status"].as_str().unwrap_or_default();
                assert!(states.contains(&status), "{point}: request {id} is {status}, acknowledged as {states:?}: {v}");
            }
            Ack::Grant(id) => {
                let v = get(&format!("/api/v1/grants/{id}"));
                assert_eq!(v["active"], true, "{point}: {v}");
            }
            Ack::ToolRequest(id, status) => {
                let v = get(&format!("/api/v1/tool-requests/{id}"));
                assert_eq!(v["request"]["status"], *status, "{point}: a decision taken back: {v}");
            }
            Ack::Evidence(id) => {
                get(&format!("/api/v1/evidence/{id}"));
            }
            Ack::Job(id, status) => {
                // Ended (by its own process, or settled at the restart with
                // the reason): never RUNNING for ever.
                let v = wait_for(&format!("{point}: job {id} to end"), || {
                    let v = get(&format!("/api/v1/jobs/{id}"));
                    (v["status"] != "RUNNING").then_some(v)
                });
                if let Some(s) = status {
                    assert_eq!(v["status"], *s, "{point}: {v}");
                } else {
                    assert!(v["status"] == "SUCCEEDED" || v["detail"].as_str().is_some_and(|d| !d.is_empty()), "{v}");
                }
            }
            Ack::Workspace(id) => {
                let v = get("/api/v1/workspaces");
                assert!(v.to_string().contains(id.as_str()), "{point}: workspace {id} lost: {v}");
            }
        }
    }
}

/// The scenario: every state machine in turn; each acknowledged state goes
/// into `a.acked`.
fn scenario(a: &mut Appliance) -> Result<(), Crashed> {
    let inv = first_investigation(a.port, &a.cookie);

    // A turn paused on its research request; another refused.
    let (s, t) = a.post("/api/v1/agent-tools/turns", &json!({"question": "Quels liens entre les sociétés ?"}))?;
    assert_eq!((s, t["status"].as_str()), (201, Some("AUTHORIZATION_REQUIRED")), "{t}");
    let turn = t["turn_id"].as_str().unwrap().to_owned();
    let request = t["research_request"].as_str().unwrap().to_owned();
    a.acked.push(Ack::Turn(turn.clone(), &["AUTHORIZATION_REQUIRED", "COMPLETED"]));
    a.acked.push(Ack::Request(request.clone(), &["PENDING", "GRANTED"]));
    a.acknowledged("POST /api/v1/agent-tools/turns")?;
    let (s, t) = a.post("/api/v1/agent-tools/turns", &json!({"question": "Quels domaines pour les sociétés ?"}))?;
    assert_eq!(s, 201, "{t}");
    let refused = t["research_request"].as_str().unwrap().to_owned();
    let (s, v) =
        a.post(&format!("/api/v1/research/requests/{refused}/refuse"), &json!({"reason": "hors du périmètre"}))?;
    assert_eq!(s, 200, "{v}");
    a.acked.push(Ack::Request(refused, &["REFUSED"]));
    a.acknowledged("POST /api/v1/research/requests/{request}/refuse")?;

    // The grant: its SPECIMEN campaign runs in the same transaction.
    let grant_body = json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 2, "max_bytes": 65536},
                            "expires_in_minutes": 30});
    let (s, g) = a.post(&format!("/api/v1/research/requests/{request}/grant"), &grant_body)?;
    assert_eq!(s, 201, "{g}");
    a.acked.retain(|k| !matches!(k, Ack::Request(id, _) if *id == request));
    a.acked.push(Ack::Request(request.clone(), &["GRANTED"]));
    a.acked.push(Ack::Grant(g["grant"].as_str().unwrap().to_owned()));
    a.acknowledged("POST /api/v1/research/requests/{request}/grant")?;

    // The turn resumes and ends.
    let (s, done) = a.post(&format!("/api/v1/agent-tools/turns/{turn}/resume"), &json!({}))?;
    assert_eq!((s, done["status"].as_str()), (200, Some("COMPLETED")), "{done}");
    a.acked.retain(|k| !matches!(k, Ack::Turn(id, _) if *id == turn));
    a.acked.push(Ack::Turn(turn, &["COMPLETED"]));
    a.acknowledged("POST /api/v1/agent-tools/turns/{turn_id}/resume")?;

    // Tool requests: one approved, one refused.
    let approved = propose(a, &inv, "tool.provision.propose")?;
    let (s, d) = a.post(&format!("/api/v1/tool-requests/{approved}/approve"), &json!({}))?;
    assert_eq!((s, d["request"]["status"].as_str()), (200, Some("APPROVED")), "{d:#}");
    a.acked.push(Ack::ToolRequest(approved, "APPROVED"));
    a.acknowledged("POST /api/v1/tool-requests/{request}/approve")?;
    let refused = propose(a, &inv, "tool.integration.propose")?;
    let (s, d) = a.post(&format!("/api/v1/tool-requests/{refused}/refuse"), &json!({"reason": "pas maintenant"}))?;
    assert_eq!((s, d["request"]["status"].as_str()), (200, Some("REFUSED")), "{d:#}");
    a.acked.push(Ack::ToolRequest(refused, "REFUSED"));
    a.acknowledged("POST /api/v1/tool-requests/{request}/refuse")?;

    // An import: a job, a file, its end.
    let (s, v) =
        a.post(&format!("/api/v1/investigations/{inv}/imports"), &json!({"expected": 1, "into_specimen": true}))?;
    assert_eq!(s, 201, "{v}");
    let job = v["job"].as_str().unwrap().to_owned();
    a.acked.push(Ack::Job(job.clone(), None));
    a.acknowledged("POST /api/v1/investigations/{investigation}/imports")?;
    let boundary = "labfy-k4";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dossier/note.txt\"\r\n\r\n\
         Serveur 203.0.113.77, contact@gamma.example\r\n--{boundary}--\r\n"
    );
    let origin = format!("http://127.0.0.1:{}", a.port);
    let ct = format!("multipart/form-data; boundary={boundary}");
    let headers =
        [("Authorization", a.cookie.as_str()), ("Origin", &origin), ("X-CSRF-Token", &a.csrf), ("Content-Type", &ct)];
    let path = format!("/api/v1/imports/{job}/files");
    let (s, v) = a.answer(&path, http(a.port, "POST", &path, &headers, &body))?;
    assert_eq!((s, v["files"][0]["outcome"].as_str()), (200, Some("imported")), "{v}");
    a.acked.push(Ack::Evidence(v["files"][0]["evidence"].as_str().unwrap().to_owned()));
    a.acknowledged("POST /api/v1/imports/{job}/files")?;
    let (s, v) = a.post(&format!("/api/v1/imports/{job}/finish"), &json!({}))?;
    assert_eq!(s, 200, "{v}");
    a.acked.retain(|k| !matches!(k, Ack::Job(id, _) if *id == job));
    a.acked.push(Ack::Job(job, Some("SUCCEEDED")));
    a.acknowledged("POST /api/v1/imports/{job}/finish")?;

    // An export: a job beside the requests.
    let (s, v) = a.post(&format!("/api/v1/investigations/{inv}/export"), &json!({}))?;
    assert_eq!(s, 202, "{v}");
    let job = v["job"].as_str().unwrap().to_owned();
    a.acked.push(Ack::Job(job.clone(), None));
    a.acknowledged("POST /api/v1/investigations/{investigation}/export")?;
    a.until("the export", || {
        let (_, v) = a.get(&format!("/api/v1/jobs/{job}"))?;
        Ok((v["status"] != "RUNNING").then_some(v))
    })?;
    a.check()?;
    a.acked.retain(|k| !matches!(k, Ack::Job(id, _) if *id == job));
    a.acked.push(Ack::Job(job, Some("SUCCEEDED")));

    // A workspace switch (the supervisor restarts the server on it).
    let (s, made) = a.post("/api/v1/workspaces", &json!({"name": "Dossier K4"}))?;
    assert_eq!(s, 201, "{made}");
    let real = made["workspace"].as_str().unwrap().to_owned();
    a.acked.push(Ack::Workspace(real.clone()));
    a.acknowledged("POST /api/v1/workspaces")?;
    let (s, v) = a.post(&format!("/api/v1/workspaces/{real}/open"), &Value::Null)?;
    assert_eq!(s, 202, "the switch needs a confined server (root): {v}");
    a.acknowledged("POST /api/v1/workspaces/{workspace}/open")?;
    a.until("the switch", || {
        let (s, v) = a.get("/api/v1/session")?;
        Ok((s == 200 && v["workspace_id"] == real.as_str()).then_some(v))
    })?;
    a.check()
}

/// A manual turn whose one call proposes a capability: the tool request it
/// paused on.
fn propose(a: &Appliance, inv: &str, tool: &str) -> Result<String, Crashed> {
    let (s, t) = a.post("/api/v1/agent-tools/turns", &json!({"question": "Compter", "mode": "manual"}))?;
    assert_eq!(s, 201, "{t}");
    let body = json!({"turn_id": t["turn_id"], "call_id": uuid::Uuid::new_v4(), "tool_id": tool,
                      "input": {"investigation_id": inv, "capability_id": "text.count_chars",
                                "reason": "compter les caractères"},
                      "context": {"purpose": "compter"}, "object_refs": [], "idempotency_key": tool});
    let (s, r) = a.post("/api/v1/agent-tools/calls", &body)?;
    assert_eq!((s, r["status"].as_str()), (200, Some("AUTHORIZATION_REQUIRED")), "{r:#}");
    Ok(r["object_refs"][0].as_str().unwrap().to_owned())
}
