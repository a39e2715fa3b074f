//! `labfy-bench soak`: the whole appliance under load, with faults, for a
//! bounded time (issue 19; SPEC M2, M9, P3, Q2).
//!
//! It starts `labfy up` on a fresh data directory (the default SPECIMEN)
//! and, for `--seconds`, runs at once:
//! - **readers**: the UI's reads (overview, search, lists, ego graph, jobs,
//!   egress, resources, events), each on a connection of its own;
//! - **a writer**: notes added as evidence; each acknowledged one (201) is
//!   remembered, to be found again at the end;
//! - **research cycles**: a demo agent turn that pauses on its research
//!   request, the human's grant (a SPECIMEN campaign: synthetic pages, no
//!   network), the turn resumed to its summary — the pages it names are
//!   acknowledged writes too;
//! - **faults**, one every `--fault-every` seconds, in turn: `kill -9` of
//!   the server, the governor and egress (the supervisor restarts each);
//!   the scratch directory filled up to what the governor would still admit
//!   (`fallocate`, held half a period); memory pressure (a block of RAM
//!   touched and held half a period);
//! - **a sampler**: every `--sample-every` seconds, each process's RSS and
//!   open descriptors, the database's size, the governor's reservations and
//!   egress's campaign slots — one row each, to see them stay flat.
//!
//! Then it stops by itself and checks, exiting non-zero when one fails:
//! every acknowledged write is there; no reservation is left; egress holds
//! no campaign slot; `labfy up` stops cleanly; `PRAGMA integrity_check` is
//! `ok`. Growth after warm-up is reported, not judged: a process killed
//! and restarted starts small again.
//!
//! With `--leak-check` (SPEC K5) the working set is fixed — no fault, no
//! research cycle, the writer replacing the investigation's summary — and
//! each process's RSS and descriptors must stay flat: the least-squares
//! slope after warm-up (the first third) under 64 KiB/s and one descriptor
//! every 20 s, unless what it adds up to over the span stays within
//! sampling noise (4 MiB, 8 descriptors). A debug build's server started
//! with `LABFY_TEST_LEAK_BYTES` leaks that much per request
//! (`labfy_core::leak`): `tests/run-all` checks that the leak check fails
//! on it.
//!
//! With `--tor-network DIR` (a private Tor network from
//! `tests/tor-network start DIR`), the appliance serves a REAL workspace
//! instead, egress on that network: each research cycle's grant names two
//! pages of a web server on 127.0.0.1, a human approves it on the terminal
//! (`labfy grant approve --yes`), and the campaign fetches them through
//! egress, arti and the network's exit relays; its evidence is an
//! acknowledged write. One more fault joins the rotation: every relay of
//! the network stopped (`SIGSTOP`) for half a period, then resumed — the
//! fetches in flight fail or wait, and the next campaigns must complete.
//!
//! With `--model GGUF --model-sha256 HEX` (and `LABFY_LLAMA_SERVER`, e.g.
//! from `tests/llama-fixture`), the agent runtime drives a real local model
//! that the governor runs (`labfy model start`): one more task starts
//! model turns narrowed to reading the overview and preparing research, and
//! one more fault kills the llama-server (the governor restarts it). The
//! model is stopped before the end's checks, so its reservation goes too.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use labfy::Failure;
use labfy_ipc::messages::governor::GovernorState;
use serde_json::{Value, json};

use crate::common::{fail, fetch_session, machine, request, sibling, stop_child};

/// Options of `labfy-bench soak`.
#[derive(clap::Args)]
pub struct SoakArgs {
    /// How long the load runs, in seconds; then it stops by itself.
    #[arg(long, default_value_t = 1800)]
    seconds: u64,
    /// A fault every this many seconds (0: none).
    #[arg(long, default_value_t = 60)]
    fault_every: u64,
    /// A sample row every this many seconds.
    #[arg(long, default_value_t = 30)]
    sample_every: u64,
    /// Concurrent readers.
    #[arg(long, default_value_t = 4)]
    readers: usize,
    /// MiB of RAM the memory-pressure fault holds (default: a quarter of
    /// the memory available at start, at most 4 GiB).
    #[arg(long)]
    pressure_mib: Option<u64>,
    /// Data directory (default: a fresh temporary one, removed at the end).
    /// It must not hold a running `labfy up`.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// A private Tor network (`tests/tor-network start DIR`): research
    /// campaigns of a REAL workspace run over it, and its relays are
    /// stopped and resumed as a fault.
    #[arg(long)]
    tor_network: Option<PathBuf>,
    /// A GGUF model the governor runs as the agent's local model
    /// (`labfy model start`; `LABFY_LLAMA_SERVER` names llama-server).
    #[arg(long, requires = "model_sha256")]
    model: Option<PathBuf>,
    /// The model file's SHA-256 (lower-case hex).
    #[arg(long)]
    model_sha256: Option<String>,
    /// The leak check (SPEC K5): a fixed working set — no faults, no
    /// research cycles, the writer replacing the investigation's summary
    /// instead of adding notes — and each process's RSS and descriptors
    /// must stay flat after warm-up (a least-squares slope under
    /// [`LEAK_RSS_SLOPE`] and [`LEAK_FD_SLOPE`]).
    #[arg(long)]
    leak_check: bool,
}

/// The RSS growth, in bytes a second after warm-up, above which a process
/// leaks (the leak check).
pub const LEAK_RSS_SLOPE: f64 = 64.0 * 1024.0;
/// The descriptors' growth a second after warm-up above which a process
/// leaks them (one every 20 s).
pub const LEAK_FD_SLOPE: f64 = 0.05;
/// Growth over the measured span that sampling noise alone can show — a
/// reader's connection open or not at the instant of a sample (a CI run
/// once fitted +0.1 descriptor/s to 28–32 descriptors over 30 s) — so a
/// slope fails only when it also adds up to more than this.
pub const LEAK_FD_NOISE: f64 = 8.0;
/// The same for the RSS, bytes.
pub const LEAK_RSS_NOISE: f64 = 4.0 * 1024.0 * 1024.0;

/// How long one model turn may take before it counts as unavailable.
const TURN_WAIT: Duration = Duration::from_secs(300);
/// The model's context, in tokens.
const MODEL_CTX: &str = "2048";

/// How long a Tor campaign may take before its cycle gives up waiting
/// (egress bounds one fetch at 120 s).
const CAMPAIGN_WAIT: Duration = Duration::from_secs(240);
/// How long the human tries to approve a grant egress has no record of yet.
const APPROVAL_PATIENCE: Duration = Duration::from_secs(30);
/// How long egress may take to bootstrap on the private network.
const BOOTSTRAP_WAIT: Duration = Duration::from_secs(180);

/// Longest one request may take before it counts as unavailable.
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);
/// How long the end waits for reservations to be released.
const SETTLE: Duration = Duration::from_secs(30);
/// The processes sampled, as `labfy status` names them.
const ROLES: [&str; 3] = ["server", "governor", "egress"];

/// Runs the soak; an error is a check that failed or a soak that could not run.
pub fn soak(args: SoakArgs) -> Result<(), Failure> {
    let tmp = tempfile::TempDir::new()?;
    let data = args.data_dir.clone().unwrap_or_else(|| tmp.path().join("data"));
    let run = tmp.path().join("run");
    let labfy = sibling("labfy")?;
    let terminal = tmp.path().join("terminal.log");
    println!(
        "# labfy-bench soak — {} s, {}, {} readers — data dir {}\n# {}",
        args.seconds,
        if args.leak_check {
            "leak check: a fixed working set, no fault".to_owned()
        } else {
            format!("a fault every {} s", args.fault_every)
        },
        args.readers,
        data.display(),
        machine()
    );
    let up = start_up(&labfy, &data, &run, &terminal, args.tor_network.as_deref(), args.model.is_some())?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let soak = Soak {
        labfy,
        data: data.clone(),
        run: run.clone(),
        up: Mutex::new(up.child),
        port: up.port,
        tor: args.tor_network.clone(),
        model: args.model.is_some(),
    };
    let outcome = rt.block_on(soak.run(&args));
    let stopped = soak.stop();
    let integrity = integrity(&data);
    let mut failures = outcome?;
    match stopped {
        Ok(true) => println!("labfy up stopped cleanly"),
        Ok(false) => failures.push("labfy up did not exit 0 on SIGTERM".into()),
        Err(e) => failures.push(format!("labfy up: {}", e.message())),
    }
    match integrity {
        Ok(r) if r == "ok" => println!("PRAGMA integrity_check: ok"),
        Ok(r) => failures.push(format!("PRAGMA integrity_check: {r}")),
        Err(e) => failures.push(format!("integrity_check: {e}")),
    }
    if failures.is_empty() {
        println!("soak: every check passed");
        Ok(())
    } else {
        for f in &failures {
            println!("soak: FAILED: {f}");
        }
        println!("(labfy up's terminal: {})", terminal.display());
        // Keep the evidence of a failure.
        let _ = tmp.keep();
        Err(fail(format!("{} check(s) failed", failures.len())))
    }
}

/// A running `labfy up` and its UI's port.
struct Up {
    child: Child,
    port: u16,
}

/// Starts `labfy up` (terminal lines to `terminal`) and waits for its login
/// link, which says every child is healthy.
///
/// With `tor` (a private network's directory), a REAL workspace is created
/// first and served, egress on that network.
/// With `model`, the agent runtime drives the governed local model.
fn start_up(
    labfy: &Path,
    data: &Path,
    run: &Path,
    terminal: &Path,
    tor: Option<&Path>,
    model: bool,
) -> Result<Up, Failure> {
    use std::io::{BufRead, BufReader};
    let log = std::fs::File::create(terminal)?;
    let mut up = Command::new(labfy);
    up.args(["up", "--port", "0", "--data-dir"]).arg(data).arg("--runtime-dir").arg(run);
    if let Some(net) = tor {
        std::fs::create_dir_all(data)?;
        let created =
            Command::new(labfy).args(["workspace", "create", "--name", "Soak Tor", "--data-dir"]).arg(data).output()?;
        if !created.status.success() {
            return Err(fail(format!("labfy workspace create: {}", String::from_utf8_lossy(&created.stderr).trim())));
        }
        let ws = String::from_utf8_lossy(&created.stdout).trim().to_owned();
        up.args(["--workspace", &ws, "--arti-config"])
            .arg(net.join("arti.toml"))
            .env("LABFY_LOG", "info,tor_netdir=error,tor_guardmgr=warn");
    }
    if model {
        up.env("LABFY_AGENT_MODE", "local-model")
            .env("LABFY_AGENT_MODEL_ENDPOINT", "governed")
            .env("LABFY_AGENT_MODEL_ID", "soak-model")
            .env("LABFY_AGENT_MODEL_TIMEOUT_SECONDS", "180");
    }
    let mut child = up.stdout(Stdio::piped()).stderr(log).spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let port = loop {
        let Some(line) = lines.next() else {
            let _ = child.wait();
            return Err(fail(format!("labfy up ended without a login link; see {}", terminal.display())));
        };
        if let Some(port) = line?.strip_prefix("Open http://127.0.0.1:").and_then(|r| r.split('/').next()?.parse().ok())
        {
            break port;
        }
    };
    // The rest of its stdout, drained so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Ok(Up { child, port })
}

/// What the workload counted: answered; paced by the server's rate limit
/// (429, SPEC S5: the client waits and goes on); refused by a restart or a
/// fault (no connection, 502–504); or wrong (any other status).
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    paced: AtomicU64,
    unavailable: AtomicU64,
    wrong: AtomicU64,
}

impl Counts {
    fn count(&self, status: Option<u16>) {
        let c = match status {
            Some(200..=299) => &self.ok,
            Some(429) => &self.paced,
            None | Some(502..=504) => &self.unavailable,
            Some(_) => &self.wrong,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> [u64; 4] {
        [&self.ok, &self.paced, &self.unavailable, &self.wrong].map(|c| c.load(Ordering::Relaxed))
    }
}

/// How long a client waits before its next request after `status`.
fn pause_after(status: Option<u16>, ok: Duration) -> Duration {
    match status {
        Some(200..=299) => ok,
        Some(429) => Duration::from_secs(1),
        _ => Duration::from_millis(300),
    }
}

/// The shared state of one soak.
struct Soak {
    labfy: PathBuf,
    data: PathBuf,
    run: PathBuf,
    up: Mutex<Child>,
    port: u16,
    /// The private Tor network, in `--tor-network` mode.
    tor: Option<PathBuf>,
    /// Whether the governed local model runs (`--model`).
    model: bool,
}

/// One browser session of the soak: the server paces changes per session
/// (SPEC S5), so the writer and the research cycles each have their own,
/// as two analysts would.
struct Session {
    port: u16,
    run: PathBuf,
    /// (cookie, CSRF token), renewed after a 401.
    keys: RwLock<(String, String)>,
}

/// What the tasks share while the load runs.
struct Load {
    port: u16,
    run: PathBuf,
    /// The readers' session.
    session: Session,
    investigation: String,
    terms: Vec<String>,
    /// In `--tor-network` mode: the web server the campaigns fetch and the
    /// network.
    tor: Option<TorLoad>,
    /// The `labfy` binary (for `labfy grant approve`, `labfy model start`).
    labfy: PathBuf,
    /// The governed local model's file and SHA-256 (`--model`).
    model_file: Option<(PathBuf, String)>,
    stop: AtomicBool,
    reads: Counts,
    writes: Counts,
    cycles: Counts,
    /// Model turns: ended in one of M7's states / MODEL_UNAVAILABLE or not
    /// ended in time.
    turns: Counts,
    /// Evidence acknowledged (201 or named by a completed turn): (ref, title).
    acked: Mutex<Vec<(String, Option<String>)>>,
    /// The last body of a wrong answer, for the report.
    last_wrong: Mutex<Option<String>>,
    /// The leak check's fixed working set: writes replace, nothing grows.
    fixed: bool,
}

/// What a research cycle over Tor needs.
struct TorLoad {
    web: Web,
    /// The network's directory (its relays' pids).
    net: PathBuf,
}

/// One sample row.
struct Sample {
    at: Duration,
    /// Per role: (pid, RSS bytes, open descriptors).
    procs: [Option<(u32, u64, u64)>; 3],
    db_bytes: u64,
    reservations: Option<usize>,
    /// Whether the governor refuses admissions for pressure now.
    pressure: Option<bool>,
    egress_campaigns: Option<u64>,
}

impl Soak {
    async fn run(&self, args: &SoakArgs) -> Result<Vec<String>, Failure> {
        if let (Some(gguf), Some(sha)) = (args.model.clone(), args.model_sha256.clone()) {
            let (labfy, run) = (self.labfy.clone(), self.run.clone());
            tokio::task::spawn_blocking(move || model_start(&labfy, &run, &gguf, &sha)).await.map_err(fail)??;
        }
        let (cookie, csrf) = login(self.port, &self.run).await?;
        let (_, session) = get_json(self.port, &cookie, "/api/v1/session").await?;
        let ws = session["workspace_id"].as_str().unwrap_or_default().to_owned();
        let (_, invs) = get_json(self.port, &cookie, &format!("/api/v1/workspaces/{ws}/investigations")).await?;
        let investigation =
            invs["investigations"][0]["id"].as_str().ok_or_else(|| fail("no investigation to soak"))?.to_owned();
        let (_, overview) =
            get_json(self.port, &cookie, &format!("/api/v1/investigations/{investigation}/overview")).await?;
        let terms: Vec<String> = overview["top_entities"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["label"].as_str().or(e["name"].as_str()).map(str::to_owned))
            .take(16)
            .collect();
        let tor = match &self.tor {
            Some(net) => {
                let t = Instant::now();
                loop {
                    let (_, v) = get_json(self.port, &cookie, "/api/v1/egress").await?;
                    if v["ready"] == true {
                        println!("# egress bootstrapped on the private network in {:.0} s", t.elapsed().as_secs_f64());
                        break;
                    }
                    if t.elapsed() > BOOTSTRAP_WAIT {
                        return Err(fail(format!(
                            "egress did not bootstrap within {} s: {v}",
                            BOOTSTRAP_WAIT.as_secs()
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Some(TorLoad { web: Web::start().await?, net: net.clone() })
            }
            None => None,
        };
        let load = Arc::new(Load {
            port: self.port,
            run: self.run.clone(),
            session: Session { port: self.port, run: self.run.clone(), keys: RwLock::new((cookie, csrf)) },
            investigation,
            terms: if terms.is_empty() { vec!["Soci".into()] } else { terms },
            tor,
            labfy: self.labfy.clone(),
            model_file: args.model.clone().zip(args.model_sha256.clone()),
            stop: AtomicBool::new(false),
            reads: Counts::default(),
            writes: Counts::default(),
            cycles: Counts::default(),
            turns: Counts::default(),
            acked: Mutex::new(Vec::new()),
            last_wrong: Mutex::new(None),
            fixed: args.leak_check,
        });
        let started = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..args.readers {
            tasks.push(tokio::spawn(reader(load.clone(), i)));
        }
        tasks.push(tokio::spawn(writer(load.clone())));
        if !args.leak_check {
            tasks.push(tokio::spawn(cycles(load.clone())));
        }
        if self.model {
            tasks.push(tokio::spawn(model_turns(load.clone())));
        }
        // A fault restarts a process: its RSS starts again from nothing.
        let faults = (args.fault_every > 0 && !args.leak_check).then(|| {
            let (load, labfy, data, run) = (load.clone(), self.labfy.clone(), self.data.clone(), self.run.clone());
            let (every, pressure) = (Duration::from_secs(args.fault_every), args.pressure_mib);
            tokio::spawn(async move { faults(&load, &labfy, &data, &run, every, pressure, started).await })
        });

        println!(
            "{:>6}  {:>22} {:>22} {:>22} {:>9} {:>5} {:>5} {:>5}  {:>24} {:>20} {:>16} {:>15}",
            "t (s)",
            "server rss/fds/pid",
            "governor rss/fds/pid",
            "egress rss/fds/pid",
            "db MiB",
            "resv",
            "press",
            "slots",
            "reads ok/429/unav/bad",
            "writes ok/429/unav/bad",
            "cycles ok/429/unav/bad",
            "turns ok/unav/bad"
        );
        let mut samples = Vec::new();
        let deadline = started + Duration::from_secs(args.seconds);
        let every = Duration::from_secs(args.sample_every.max(1));
        while Instant::now() < deadline {
            tokio::time::sleep(every.min(deadline.saturating_duration_since(Instant::now()))).await;
            let s = self.sample(&load, started).await;
            print_row(&s, &load);
            samples.push(s);
        }
        load.stop.store(true, Ordering::Relaxed);
        if let Some(f) = faults {
            f.abort();
            let _ = f.await;
        }
        // A Tor cycle waits for its campaign to end before it leaves.
        let join = if self.tor.is_some() {
            CAMPAIGN_WAIT + REQUEST_DEADLINE
        } else if self.model {
            TURN_WAIT + REQUEST_DEADLINE
        } else {
            REQUEST_DEADLINE * 2
        };
        for t in tasks {
            let _ = tokio::time::timeout(join, t).await;
        }
        if let Some(t) = &load.tor {
            println!("web server behind the exits: {} requests answered", t.web.hits.load(Ordering::Relaxed));
        }
        let _ = std::fs::remove_file(fill_path(&self.data));
        if self.model {
            let [ok, _, unavailable, wrong] = load.turns.get();
            println!("model turns: {ok} ended, {unavailable} unavailable, {wrong} wrong");
            let (labfy, run) = (self.labfy.clone(), self.run.clone());
            let stopped = tokio::task::spawn_blocking(move || {
                Command::new(labfy).args(["model", "stop", "--runtime-dir"]).arg(run).output()
            })
            .await;
            match stopped {
                Ok(Ok(o)) if o.status.success() => println!("the local model stopped"),
                _ => println!("the local model did not stop on request"),
            }
        }

        // The end: everything released, everything acknowledged present.
        let mut failures = Vec::new();
        let settle = Instant::now() + SETTLE;
        let last = loop {
            let s = self.sample(&load, started).await;
            if s.reservations == Some(0) || Instant::now() > settle {
                break s;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        print_row(&last, &load);
        match last.reservations {
            Some(0) => println!("reservations at the end: 0"),
            Some(n) => failures.push(format!("{n} reservation(s) left in the governor after {} s", SETTLE.as_secs())),
            None => failures.push("the governor did not say its reservations".into()),
        }
        match last.egress_campaigns {
            Some(0) => println!("egress campaign slots at the end: 0"),
            Some(n) => failures.push(format!("{n} campaign slot(s) left in egress")),
            None => failures.push("egress did not say its campaign slots".into()),
        }
        let acked = std::mem::take(&mut *load.acked.lock().unwrap_or_else(PoisonError::into_inner));
        let mut missing = Vec::new();
        for (id, title) in &acked {
            match load.session.get(&format!("/api/v1/evidence/{id}")).await {
                Ok((200, v)) if title.as_deref().is_none_or(|t| v["title"] == *t) => {}
                Ok((s, v)) => missing.push(format!("{id}: {s} {v}")),
                Err(e) => missing.push(format!("{id}: {}", e.message())),
            }
        }
        println!("acknowledged writes: {} checked, {} missing", acked.len(), missing.len());
        if let Some(first) = missing.first() {
            failures.push(format!("{} acknowledged write(s) missing, first {first}", missing.len()));
        }
        if let Some(body) = load.last_wrong.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            println!("last wrong answer: {body}");
        }
        growth(&samples, args.seconds);
        if args.leak_check {
            failures.extend(leaks(&samples, args.seconds));
        }
        Ok(failures)
    }

    async fn sample(&self, load: &Load, started: Instant) -> Sample {
        let labfy = self.labfy.clone();
        let run = self.run.clone();
        let (pids, state) = tokio::task::spawn_blocking(move || (pids(&labfy, &run), resources(&labfy, &run)))
            .await
            .unwrap_or_default();
        let procs = ROLES.map(|r| pids.iter().find(|(role, _)| role == r).map(|&(_, pid)| (pid, rss(pid), fds(pid))));
        let egress = load.session.get("/api/v1/egress").await.ok();
        Sample {
            at: started.elapsed(),
            procs,
            db_bytes: ["labfy.sqlite3", "labfy.sqlite3-wal"]
                .iter()
                .filter_map(|f| std::fs::metadata(self.data.join(f)).ok())
                .map(|m| m.len())
                .sum(),
            reservations: state.as_ref().map(|s| s.reservations.len()),
            pressure: state.as_ref().map(|s| s.pressure.is_some()),
            egress_campaigns: egress.and_then(|(_, v)| v["campaigns"].as_u64()),
        }
    }

    /// SIGTERM to `labfy up`; true when it exits 0.
    fn stop(&self) -> Result<bool, Failure> {
        let mut child = self.up.lock().unwrap_or_else(PoisonError::into_inner);
        stop_child(&mut child, Duration::from_secs(30));
        Ok(child.wait()?.success())
    }
}

fn print_row(s: &Sample, load: &Load) {
    let p = |i: usize| {
        s.procs[i]
            .map_or_else(|| "-".to_owned(), |(pid, rss, fds)| format!("{:.0}M/{fds}/{pid}", rss as f64 / 1048576.0))
    };
    let c = |c: &Counts| {
        let [a, p, b, d] = c.get();
        format!("{a}/{p}/{b}/{d}")
    };
    println!(
        "{:>6}  {:>22} {:>22} {:>22} {:>9.1} {:>5} {:>5} {:>5}  {:>24} {:>20} {:>16} {:>15}",
        s.at.as_secs(),
        p(0),
        p(1),
        p(2),
        s.db_bytes as f64 / 1048576.0,
        s.reservations.map_or("-".into(), |n| n.to_string()),
        match s.pressure {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        },
        s.egress_campaigns.map_or("-".into(), |n| n.to_string()),
        c(&load.reads),
        c(&load.writes),
        c(&load.cycles),
        {
            let [ok, _, unavailable, wrong] = load.turns.get();
            format!("{ok}/{unavailable}/{wrong}")
        },
    );
}

/// Per process, RSS and descriptors at the end of warm-up (the first
/// quarter) and at the end, same pid only (a restart starts afresh).
fn growth(samples: &[Sample], seconds: u64) {
    let warm = Duration::from_secs(seconds / 4);
    for (i, role) in ROLES.iter().enumerate() {
        let Some(last) = samples.iter().rev().find_map(|s| s.procs[i]) else { continue };
        let first = samples.iter().filter(|s| s.at >= warm).find_map(|s| s.procs[i].filter(|p| p.0 == last.0));
        match first {
            Some(f) => println!(
                "{role}: pid {} RSS {:.1} → {:.1} MiB, descriptors {} → {} after warm-up",
                last.0,
                f.1 as f64 / 1048576.0,
                last.1 as f64 / 1048576.0,
                f.2,
                last.2
            ),
            None => println!("{role}: pid {} restarted after warm-up; no span to compare", last.0),
        }
    }
}

/// The leak check's verdict: per process (the same pid throughout), the
/// least-squares slope of its RSS and descriptors over the samples after
/// warm-up (the first third); one failure per slope over its bound.
fn leaks(samples: &[Sample], seconds: u64) -> Vec<String> {
    let warm = Duration::from_secs(seconds / 3);
    let mut failures = Vec::new();
    for (i, role) in ROLES.iter().enumerate() {
        let Some(last) = samples.iter().rev().find_map(|s| s.procs[i]) else {
            failures.push(format!("{role}: never sampled"));
            continue;
        };
        let points: Vec<(f64, u64, u64)> = samples
            .iter()
            .filter(|s| s.at >= warm)
            .filter_map(|s| s.procs[i].filter(|p| p.0 == last.0).map(|p| (s.at.as_secs_f64(), p.1, p.2)))
            .collect();
        if points.len() < 5 {
            failures.push(format!("{role}: {} samples after warm-up, 5 needed (longer --seconds)", points.len()));
            continue;
        }
        let rss = slope(points.iter().map(|p| (p.0, p.1 as f64)));
        let fds = slope(points.iter().map(|p| (p.0, p.2 as f64)));
        println!(
            "{role}: after warm-up, RSS {:+.1} KiB/s (bound {:.0}), descriptors {:+.3}/s (bound {})",
            rss / 1024.0,
            LEAK_RSS_SLOPE / 1024.0,
            fds,
            LEAK_FD_SLOPE
        );
        let span = points.last().map_or(0.0, |p| p.0) - points[0].0;
        if rss > LEAK_RSS_SLOPE && rss * span > LEAK_RSS_NOISE {
            failures.push(format!(
                "{role} leaks memory: its RSS grows {:.1} KiB/s after warm-up (bound {:.0} KiB/s)",
                rss / 1024.0,
                LEAK_RSS_SLOPE / 1024.0
            ));
        }
        if fds > LEAK_FD_SLOPE && fds * span > LEAK_FD_NOISE {
            failures.push(format!(
                "{role} leaks descriptors: {fds:.3} more a second after warm-up (bound {LEAK_FD_SLOPE})"
            ));
        }
    }
    failures
}

/// The least-squares slope of `y` over `x`.
fn slope(points: impl Iterator<Item = (f64, f64)> + Clone) -> f64 {
    let n = points.clone().count() as f64;
    let (sx, sy) = points.clone().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.fold((0.0, 0.0), |(a, b), (x, y)| (a + (x - mx) * (y - my), b + (x - mx) * (x - mx)));
    if den == 0.0 { 0.0 } else { num / den }
}

// ---------------------------------------------------------------------------
// the workload
// ---------------------------------------------------------------------------

async fn reader(load: Arc<Load>, i: usize) {
    let inv = &load.investigation;
    let mut n = i;
    while !load.stop.load(Ordering::Relaxed) {
        n += 1;
        let term = &load.terms[n % load.terms.len()];
        let path = match n % 8 {
            0 => format!("/api/v1/investigations/{inv}/overview"),
            1 => format!("/api/v1/investigations/{inv}/search?q={}&limit=20", encode(term)),
            2 => format!("/api/v1/investigations/{inv}/lists/evidence?limit=50"),
            3 => format!("/api/v1/investigations/{inv}/lists/entities?sort=mentions&limit=50"),
            4 => format!("/api/v1/investigations/{inv}/jobs"),
            5 => "/api/v1/egress".to_owned(),
            6 => "/api/v1/resources".to_owned(),
            _ => "/api/v1/agent-runtime/events?cursor=0&limit=128".to_owned(),
        };
        let status = load.session.get(&path).await.ok().map(|(s, v)| {
            note_wrong(&load, s, &path, &v);
            s
        });
        load.reads.count(status);
        if !matches!(status, Some(200..=299)) {
            tokio::time::sleep(pause_after(status, Duration::ZERO)).await;
        }
    }
}

async fn writer(load: Arc<Load>) {
    let Ok(session) = Session::open(load.port, &load.run).await else {
        load.writes.count(None);
        return;
    };
    let path = format!("/api/v1/investigations/{}/evidence", load.investigation);
    let update = format!("/api/v1/investigations/{}/update", load.investigation);
    let mut n = 0u64;
    while !load.stop.load(Ordering::Relaxed) {
        n += 1;
        if load.fixed {
            // The leak check's write: the same row, replaced.
            let body = json!({"summary": format!("Résumé du soak, version {n}.")});
            let status = match session.post(&update, &body).await {
                Ok((204, _)) => Some(204),
                Ok((s, v)) => {
                    note_wrong(&load, s, &update, &v);
                    Some(s)
                }
                Err(_) => None,
            };
            load.writes.count(status);
            tokio::time::sleep(pause_after(status, Duration::from_millis(600))).await;
            continue;
        }
        let title = format!("Note de soak {n}");
        let body = json!({"title": title, "content": format!("Relevé {n} : la société Kestrel et le domaine kestrel-{n}.example.")});
        let status = match session.post(&path, &body).await {
            Ok((201, v)) => {
                if let Some(id) = v["id"].as_str() {
                    load.acked.lock().unwrap_or_else(PoisonError::into_inner).push((id.to_owned(), Some(title)));
                }
                Some(201)
            }
            Ok((s, v)) => {
                note_wrong(&load, s, &path, &v);
                Some(s)
            }
            Err(_) => None,
        };
        load.writes.count(status);
        // Under the session's pace of 2 changes a second.
        tokio::time::sleep(pause_after(status, Duration::from_millis(600))).await;
    }
}

/// A demo turn to its pause, the grant (a SPECIMEN campaign), the resume
/// to its summary; again until the end.
async fn cycles(load: Arc<Load>) {
    let Ok(session) = Session::open(load.port, &load.run).await else {
        load.cycles.count(None);
        return;
    };
    let mut n = 0u32;
    while !load.stop.load(Ordering::Relaxed) {
        n += 1;
        let done = match &load.tor {
            Some(tor) => tor_cycle(&load, &session, tor, n).await,
            None => cycle(&load, &session).await,
        };
        let status = match done {
            Ok(()) => Some(200),
            Err(s) => s,
        };
        load.cycles.count(status);
        // Three changes a cycle, under the session's pace; after a failed
        // one, a pause, as an analyst would take.
        let pause =
            if status == Some(200) { pause_after(status, Duration::from_millis(1500)) } else { Duration::from_secs(3) };
        tokio::time::sleep(pause).await;
    }
}

async fn cycle(load: &Load, session: &Session) -> Result<(), Option<u16>> {
    let check = |r, want, what: &str| expect(load, r, want, what);
    let body = json!({"question": "Quels liens entre les sociétés et les domaines ?",
                      "investigation_id": load.investigation, "mode": "demo"});
    let turn = check(session.post("/api/v1/agent-tools/turns", &body).await, 201, "turn")?;
    let (Some(turn_id), Some(request)) = (turn["turn_id"].as_str(), turn["research_request"].as_str()) else {
        note_wrong(load, 201, "turn", &turn);
        return Err(Some(201));
    };
    let grant = json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 2, "max_bytes": 65536},
                       "expires_in_minutes": 30});
    check(session.post(&format!("/api/v1/research/requests/{request}/grant"), &grant).await, 201, "grant")?;
    let done =
        check(session.post(&format!("/api/v1/agent-tools/turns/{turn_id}/resume"), &json!({})).await, 200, "resume")?;
    let pages = done["summary_refs"].as_array().into_iter().flatten().filter_map(Value::as_str);
    let mut acked = load.acked.lock().unwrap_or_else(PoisonError::into_inner);
    acked.extend(pages.filter(|r| r.starts_with("evidence:")).map(|r| (r.to_owned(), None)));
    Ok(())
}

/// A demo turn to its pause, the grant of two pages of the web server, a
/// human's approval on the terminal, the campaign over Tor to its end.
/// A campaign that fails (Tor stopped by a fault) counts as unavailable;
/// a completed one's evidence is acknowledged.
async fn tor_cycle(load: &Load, session: &Session, tor: &TorLoad, n: u32) -> Result<(), Option<u16>> {
    let check = |r, want, what: &str| expect(load, r, want, what);
    if n == 1 {
        // Something for the demo agent to select in the empty REAL case.
        let note = json!({"title": "Société Kestrel", "content": "La société Kestrel publie sur kestrel.example."});
        let path = format!("/api/v1/investigations/{}/evidence", load.investigation);
        check(session.post(&path, &note).await, 201, "note")?;
    }
    let body = json!({"question": "Que publie la société Kestrel ?", "investigation_id": load.investigation,
                      "mode": "demo"});
    let turn = check(session.post("/api/v1/agent-tools/turns", &body).await, 201, "turn")?;
    let (Some(turn_id), Some(request)) = (turn["turn_id"].as_str(), turn["research_request"].as_str()) else {
        note_wrong(load, 201, "turn", &turn);
        return Err(Some(201));
    };
    let urls = [tor.web.url(&format!("/page/{n}/a")), tor.web.url(&format!("/page/{n}/b"))];
    let grant = json!({"scope": {"hosts": ["127.0.0.1"]}, "budget": {"max_requests": 4, "max_bytes": 1_048_576},
                       "expires_in_minutes": 30, "urls": urls});
    let g = check(session.post(&format!("/api/v1/research/requests/{request}/grant"), &grant).await, 201, "grant")?;
    let Some(grant_id) = g["grant"].as_str().map(str::to_owned) else {
        note_wrong(load, 201, "grant", &g);
        return Err(Some(201));
    };
    // The human, on the operator's terminal (SPEC T2) — again a little
    // later while egress has no record of it yet (egress restarting: the
    // campaign runner proposes it again).
    let t = Instant::now();
    loop {
        let (labfy, run, grant_id) = (load.labfy.clone(), load.run.clone(), grant_id.clone());
        let approved = tokio::task::spawn_blocking(move || {
            Command::new(labfy)
                .args(["grant", "approve", &grant_id, "--yes", "--runtime-dir"])
                .arg(run)
                .stdin(Stdio::null())
                .output()
        })
        .await;
        let why = match approved {
            Ok(Ok(o)) if o.status.success() => break,
            Ok(Ok(o)) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        if t.elapsed() > APPROVAL_PATIENCE {
            note_wrong(load, 500, "labfy grant approve", &json!(why));
            return Err(None);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let t = Instant::now();
    let campaign = loop {
        match session.get(&format!("/api/v1/research/requests/{request}")).await {
            Ok((200, v)) => {
                let c = v["request"]["campaign"].clone();
                if matches!(c["status"].as_str(), Some("COMPLETED" | "FAILED" | "STOPPED")) {
                    break c;
                }
            }
            Ok((s, v)) => note_wrong(load, s, "campaign", &v),
            Err(_) => {}
        }
        if t.elapsed() > CAMPAIGN_WAIT {
            note_wrong(load, 504, "campaign", &json!(format!("not ended within {} s", CAMPAIGN_WAIT.as_secs())));
            return Err(Some(504));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if campaign["status"] != "COMPLETED" {
        // Tor stopped by a fault, or a restart: unavailable, said so.
        return Err(None);
    }
    let pages: Vec<String> =
        campaign["evidence"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect();
    load.acked.lock().unwrap_or_else(PoisonError::into_inner).extend(pages.into_iter().map(|r| (r, None)));
    // The turn goes on to its summary over what the campaign brought.
    check(session.post(&format!("/api/v1/agent-tools/turns/{turn_id}/resume"), &json!({})).await, 200, "resume")?;
    Ok(())
}

/// A web server on 127.0.0.1 for the campaigns: every path is a small page.
struct Web {
    port: u16,
    hits: Arc<AtomicU64>,
}

impl Web {
    async fn start() -> Result<Self, Failure> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let hits = Arc::new(AtomicU64::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = match tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await {
                        Ok(Ok(n)) => n,
                        _ => return,
                    };
                    let head = String::from_utf8_lossy(&buf[..n]);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    counted.fetch_add(1, Ordering::Relaxed);
                    let body = format!(
                        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Kestrel {path}</title></head>\
                         <body><p>Communiqué de la société Kestrel, page {path} : kestrel.example.</p></body></html>"
                    );
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
                         connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Ok(Self { port, hits })
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// Model turns, one after another: narrowed to reading the overview and
/// preparing research (the small model picks tools by imitation), each
/// waited for to its end state (SPEC M7).
async fn model_turns(load: Arc<Load>) {
    let Ok(session) = Session::open(load.port, &load.run).await else {
        load.turns.count(None);
        return;
    };
    let mut n = 0u64;
    while !load.stop.load(Ordering::Relaxed) {
        n += 1;
        let status = model_turn(&load, &session, n).await;
        load.turns.count(status);
        if status.is_none() {
            // The model is unavailable: after llama-server is killed the
            // governor restarts it; after the governor is killed, the new
            // governor starts it again (operator/governor.model.json). If
            // it has none all the same (that start refused), the analyst
            // starts it, and the line below says it happened.
            let (labfy, run) = (load.labfy.clone(), load.run.clone());
            let state = tokio::task::spawn_blocking({
                let (labfy, run) = (labfy.clone(), run.clone());
                move || resources(&labfy, &run)
            })
            .await
            .ok()
            .flatten();
            if state.is_some_and(|s| s.model.is_none()) {
                if let Some((gguf, sha)) = load.model_file.clone() {
                    let started = tokio::task::spawn_blocking(move || model_start(&labfy, &run, &gguf, &sha)).await;
                    println!("        model: the governor lost it; started again: {}", matches!(started, Ok(Ok(()))));
                }
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
        } else {
            tokio::time::sleep(pause_after(status, Duration::from_millis(500))).await;
        }
    }
}

async fn model_turn(load: &Load, session: &Session, n: u64) -> Option<u16> {
    let body = json!({"question": "Prépare une recherche web sur les sociétés les plus citées de cette enquête.",
                      "investigation_id": load.investigation, "idempotency_key": format!("soak-{n}"),
                      "tools": ["investigation.get_overview", "research.prepare"]});
    let turn = match session.post("/api/v1/agent-runtime/turns", &body).await {
        Ok((202, v)) => v,
        Ok((s, v)) => {
            note_wrong(load, s, "model turn", &v);
            return Some(s);
        }
        Err(_) => return None,
    };
    let id = turn["turn_id"].as_str()?.to_owned();
    let t = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        match session.get(&format!("/api/v1/agent-runtime/turns/{id}")).await {
            Ok((200, v)) => match v["status"].as_str() {
                Some("QUEUED" | "RUNNING") => {}
                // The model restarting (a fault) or gone: said, not wrong.
                Some("MODEL_UNAVAILABLE") => return None,
                Some("AUTHORIZATION_REQUIRED" | "COMPLETED" | "BUDGET_EXHAUSTED" | "FAILED" | "CANCELLED") => {
                    return Some(200);
                }
                _ => {
                    note_wrong(load, 200, "model turn", &v);
                    return Some(500);
                }
            },
            Ok((s, v)) => note_wrong(load, s, "model turn", &v),
            Err(_) => {}
        }
        if t.elapsed() > TURN_WAIT {
            return None;
        }
    }
}

/// `labfy model start`, asked again while the governor does not know the
/// workspace server yet.
fn model_start(labfy: &Path, run: &Path, gguf: &Path, sha256: &str) -> Result<(), Failure> {
    let t = Instant::now();
    loop {
        let o = Command::new(labfy)
            .args(["model", "start", "--runtime-dir"])
            .arg(run)
            .arg("--gguf")
            .arg(gguf)
            .args(["--sha256", sha256, "--ctx", MODEL_CTX])
            .output()?;
        if o.status.success() {
            println!("# the governor runs the local model ({} s to start)", t.elapsed().as_secs());
            return Ok(());
        }
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        if t.elapsed() > Duration::from_secs(120) || !out.contains("is running") {
            return Err(fail(format!("labfy model start: {}", out.trim())));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The body of an answer with status `want`; any other is noted as wrong
/// and is the cycle's outcome (`None`: no answer at all).
fn expect(load: &Load, r: Result<(u16, Value), Failure>, want: u16, what: &str) -> Result<Value, Option<u16>> {
    match r {
        Ok((s, v)) if s == want => Ok(v),
        Ok((s, v)) => {
            note_wrong(load, s, what, &v);
            Err(Some(s))
        }
        Err(_) => Err(None),
    }
}

fn note_wrong(load: &Load, status: u16, what: &str, v: &Value) {
    if !matches!(status, 200..=299 | 429 | 502..=504) {
        let line = format!("{what}: {status} {v}");
        *load.last_wrong.lock().unwrap_or_else(PoisonError::into_inner) = Some(line.chars().take(400).collect());
    }
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

// ---------------------------------------------------------------------------
// faults
// ---------------------------------------------------------------------------

async fn faults(
    load: &Load,
    labfy: &Path,
    data: &Path,
    run: &Path,
    every: Duration,
    pressure_mib: Option<u64>,
    started: Instant,
) {
    let mut n = 0usize;
    loop {
        tokio::time::sleep(every).await;
        if load.stop.load(Ordering::Relaxed) {
            return;
        }
        let t = started.elapsed().as_secs();
        let hold = every / 2;
        let mut rotation = if load.tor.is_some() { FAULTS_WITH_TOR.to_vec() } else { FAULTS.to_vec() };
        if load.model_file.is_some() {
            rotation.insert(3, Fault::Model);
        }
        match rotation[n % rotation.len()] {
            Fault::Kill(k) => {
                let role = ROLES[k];
                let (labfy, run) = (labfy.to_owned(), run.to_owned());
                let pid = tokio::task::spawn_blocking(move || pids(&labfy, &run)).await.unwrap_or_default();
                match pid.iter().find(|(r, _)| r == role) {
                    Some(&(_, pid)) => {
                        println!("{t:>6}  fault: kill -9 {role} (pid {pid})");
                        kill9(pid);
                    }
                    None => println!("{t:>6}  fault: no {role} to kill (restarting?)"),
                }
            }
            Fault::Scratch => {
                let (labfy, run) = (labfy.to_owned(), run.to_owned());
                let state = tokio::task::spawn_blocking(move || resources(&labfy, &run)).await.ok().flatten();
                let bytes = state.map_or(0, |s| s.admissible.scratch);
                match fill(&fill_path(data), bytes) {
                    Ok(()) => println!(
                        "{t:>6}  fault: scratch filled by {:.0} MiB (all the governor would admit), {} s",
                        bytes as f64 / 1048576.0,
                        hold.as_secs()
                    ),
                    Err(e) => println!("{t:>6}  fault: scratch fill failed: {e}"),
                }
                tokio::time::sleep(hold).await;
                let _ = std::fs::remove_file(fill_path(data));
            }
            Fault::Model => {
                let (labfy, run) = (labfy.to_owned(), run.to_owned());
                let state = tokio::task::spawn_blocking(move || resources(&labfy, &run)).await.ok().flatten();
                match state.and_then(|s| s.model).and_then(|m| m.pid) {
                    Some(pid) => {
                        println!("{t:>6}  fault: kill -9 llama-server (pid {pid}; the governor restarts it)");
                        kill9(pid);
                    }
                    None => println!("{t:>6}  fault: no llama-server to kill (restarting?)"),
                }
            }
            Fault::Tor => {
                let net = load.tor.as_ref().map(|t| t.net.clone()).unwrap_or_default();
                let relays = relay_pids(&net);
                println!("{t:>6}  fault: the Tor network's {} relays stopped for {} s", relays.len(), hold.as_secs());
                signal_all(&relays, libc::SIGSTOP);
                // Resumed when the hold ends — or when the soak ends first
                // and drops this task.
                let resume = Resume(relays);
                tokio::time::sleep(hold).await;
                drop(resume);
            }
            Fault::Memory => {
                let mib = pressure_mib.unwrap_or_else(|| (available_mib() / 4).min(4096));
                println!("{t:>6}  fault: {mib} MiB of RAM held for {} s", hold.as_secs());
                let _ = tokio::task::spawn_blocking(move || {
                    let mut block = vec![0u8; usize::try_from(mib << 20).unwrap_or(0)];
                    for i in (0..block.len()).step_by(4096) {
                        block[i] = 1;
                    }
                    std::thread::sleep(hold);
                    std::hint::black_box(&block);
                })
                .await;
            }
        }
        n += 1;
    }
}

/// One fault of the rotation.
#[derive(Clone, Copy)]
enum Fault {
    /// `kill -9` of `ROLES[i]`.
    Kill(usize),
    /// The scratch directory filled to what the governor would admit.
    Scratch,
    /// A block of RAM held.
    Memory,
    /// The private Tor network's relays stopped, then resumed.
    Tor,
    /// `kill -9` of the governed llama-server.
    Model,
}

/// The rotation, one fault a period.
const FAULTS: [Fault; 5] = [Fault::Kill(0), Fault::Kill(1), Fault::Kill(2), Fault::Scratch, Fault::Memory];
/// The rotation with `--tor-network`: Tor stopped right after egress is
/// killed, so that a short run sees both.
const FAULTS_WITH_TOR: [Fault; 6] =
    [Fault::Kill(0), Fault::Kill(1), Fault::Kill(2), Fault::Tor, Fault::Scratch, Fault::Memory];

fn fill_path(data: &Path) -> PathBuf {
    data.join("scratch").join("soak-fill")
}

/// Allocates `bytes` of real blocks (not a sparse file) at `path`.
fn fill(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::create(path)?;
    let len = libc::off_t::try_from(bytes).map_err(std::io::Error::other)?;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: fallocate(2) on a descriptor this function owns.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// The pids of a private Tor network's nodes (`DIR/pids`, one per line),
/// each checked to be a `tor` process still.
fn relay_pids(net: &Path) -> Vec<libc::pid_t> {
    std::fs::read_to_string(net.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "tor"))
        .collect()
}

/// Sends `SIGCONT` to stopped relays when dropped.
struct Resume(Vec<libc::pid_t>);

impl Drop for Resume {
    fn drop(&mut self) {
        signal_all(&self.0, libc::SIGCONT);
    }
}

fn signal_all(pids: &[libc::pid_t], signal: libc::c_int) {
    for &pid in pids {
        // SAFETY: kill(2) with a pid of a `tor` process of the network this
        // soak was given.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

fn kill9(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a pid `labfy status` just named.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

// ---------------------------------------------------------------------------
// what the sampler reads
// ---------------------------------------------------------------------------

/// Each healthy process's pid, from `labfy status`.
fn pids(labfy: &Path, run: &Path) -> Vec<(String, u32)> {
    let Ok(out) = Command::new(labfy).args(["status", "--runtime-dir"]).arg(run).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (role, state, pid) = (f.first()?, f.get(1)?, f.get(2)?);
            (ROLES.contains(role) && *state == "healthy").then(|| Some(((*role).to_owned(), pid.parse().ok()?)))?
        })
        .collect()
}

/// The governor's state, from `labfy resources --json`.
fn resources(labfy: &Path, run: &Path) -> Option<GovernorState> {
    let out = Command::new(labfy).args(["resources", "--json", "--runtime-dir"]).arg(run).output().ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// `VmRSS` of a process, bytes.
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").to_owned()))
        })
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Open descriptors of a process.
fn fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

fn available_mib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("MemAvailable:").map(|v| v.trim().trim_end_matches(" kB").trim().to_owned())
            })
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(1024, |kb| kb / 1024)
}

/// `PRAGMA integrity_check` of the stopped appliance's database, read-only.
fn integrity(data: &Path) -> Result<String, String> {
    let conn = rusqlite::Connection::open_with_flags(
        data.join(labfy_store::DB_FILE),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .map_err(|e| e.to_string())?;
    conn.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0)).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------

/// A session from a fresh one-time code minted from `login.json`.
async fn login(port: u16, run: &Path) -> Result<(String, String), Failure> {
    let (_, key) = labfy_ipc::login::read_login_file(run).map_err(fail)?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let cookie = fetch_session(addr, &key.mint_code(std::time::SystemTime::now())).await?;
    let (_, session) = get_json(port, &cookie, "/api/v1/session").await?;
    let csrf = session["csrf_token"].as_str().ok_or_else(|| fail("no CSRF token in the session"))?.to_owned();
    Ok((cookie, csrf))
}

async fn get_json(port: u16, cookie: &str, path: &str) -> Result<(u16, Value), Failure> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (s, body) =
        tokio::time::timeout(REQUEST_DEADLINE, request(addr, "GET", path, &[("authorization", cookie)], None))
            .await
            .map_err(fail)??;
    Ok((s, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

impl Session {
    async fn open(port: u16, run: &Path) -> Result<Self, Failure> {
        Ok(Self { port, run: run.to_owned(), keys: RwLock::new(login(port, run).await?) })
    }

    /// A GET, logging in again after a 401.
    async fn get(&self, path: &str) -> Result<(u16, Value), Failure> {
        let cookie = self.keys.read().unwrap_or_else(PoisonError::into_inner).0.clone();
        let r = get_json(self.port, &cookie, path).await?;
        if r.0 == 401 {
            self.relogin().await?;
        }
        Ok(r)
    }

    /// A POST with the CSRF token, logging in again after a 401.
    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), Failure> {
        let (cookie, csrf) = self.keys.read().unwrap_or_else(PoisonError::into_inner).clone();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        let origin = format!("http://127.0.0.1:{}", self.port);
        let headers = [
            ("authorization", cookie.as_str()),
            ("x-csrf-token", csrf.as_str()),
            ("content-type", "application/json"),
            ("origin", origin.as_str()),
        ];
        let bytes = serde_json::to_vec(body).map_err(fail)?;
        let (s, answer) = tokio::time::timeout(REQUEST_DEADLINE, request(addr, "POST", path, &headers, Some(bytes)))
            .await
            .map_err(fail)??;
        if s == 401 {
            self.relogin().await?;
        }
        Ok((s, serde_json::from_slice(&answer).unwrap_or(Value::Null)))
    }

    async fn relogin(&self) -> Result<(), Failure> {
        let fresh = login(self.port, &self.run).await?;
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }
}
