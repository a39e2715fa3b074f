//! Benchmark of `labfy-egress` against a bare arti-client, on a private Tor
//! network (`tests/tor-network`). Figures are printed, never asserted; they
//! go to docs/PERFORMANCE.md ("Egress over Tor").
//!
//! ```text
//! cargo build --release -p labfy-egress --examples --bins
//! eval "$(tests/tor-network start /tmp/benchnet)"
//! target/release/examples/bench_egress --arti-config "$LABFY_TEST_ARTI_CONFIG"
//! tests/tor-network stop /tmp/benchnet
//! ```
//!
//! 1. **Bootstrap**, `--bootstraps` times: this program started again as a
//!    child (a fresh process, as egress is), bootstrapping arti with
//!    `TorClient::create_bootstrapped` on empty state and cache directories
//!    (cold), then once more on the same directories (warm).
//! 2. **The real daemon**: the `labfy-egress` binary (`--egress-bin`; by
//!    default next to this program's `examples/` directory) is started the
//!    way the supervisor starts it — private runtime directory, per-boot
//!    secret, cleared environment — and, as its parent, this program speaks
//!    on its control socket: `Health` until Tor is bootstrapped, then
//!    `SetPeers` naming this process, so that its service socket accepts us
//!    as it accepts the workspace server. The data directory holds a REAL
//!    workspace with research requests granted (scope `127.0.0.1`, a large
//!    budget) whose campaigns are admitted and started, one distinct URL per
//!    item (a campaign lists at most 32); each grant is proposed to egress
//!    on its service socket and approved on its operator socket, as the
//!    server and `labfy grant approve` do (SPEC T2).
//! 3. **A web server** on 127.0.0.1 answers every path with the same text
//!    page (`--body-bytes`, 8 KiB by default).
//! 4. **Pairs**: per campaign, `--warmups` untimed pairs, then timed ones, to
//!    `--pairs` in all. A pair is one fetch through egress — connect and
//!    authenticate on `egress.sock` as the server does for each call, `Fetch`,
//!    the outcome, base64 decoded, stored as evidence by
//!    `Store::record_fetch` — and one bare fetch of the same URL (a
//!    hand-written `GET` on a new Tor stream, code shared with `bare_fetch`).
//!    Both open a new stream per fetch on one isolated circuit: egress on the
//!    campaign's isolation token, the bare client on one `isolated_client()`
//!    per campaign. Which goes first alternates from pair to pair, so that
//!    half the egress fetches follow an egress fetch (as in a campaign, where
//!    items are fetched back to back) and half follow a bare one; the
//!    results are also given per order. `--gap-ms` pauses before each fetch.
//!
//! Printed: the machine and load average, versions, each bootstrap, each
//! pair (egress: total, IPC round trip, connecting, egress's own
//! `elapsed_ms`, the store write; bare: total and stream opening), then
//! p50 / min / max of each, the ratio of the p50s (target ≤ 1.10) and the
//! median of the per-pair ratios.
//!
//! This program runs on a current-thread tokio runtime, as the egress
//! daemon does; the web server has threads of its own.

mod common;

use std::fmt::Write as _;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arti_client::TorClient;
use base64::Engine as _;
use clap::Parser;
use common::{Result, Target, percentile};
use labfy_core::{CampaignRef, GrantRef};
use labfy_ipc::client::Client;
use labfy_ipc::daemon::{control_socket, operator_socket, service_socket};
use labfy_ipc::messages::control::{ControlRequest, ControlResponse};
use labfy_ipc::messages::egress::{
    DEFAULT_MAX_BODY_BYTES, EgressRequest, EgressResponse, FetchMethod, FetchRequest, FetchStatus, GrantPhase,
    GrantProposal,
};
use labfy_ipc::messages::{Boundary, Role};
use labfy_ipc::secret::{self, Secret};
use labfy_store::{
    FetchedBody, FetchedPage, GrantDecision, MAX_CAMPAIGN_URLS, MAX_GRANT_BYTES, MAX_GRANT_REQUESTS, NewNote,
    NewResearchRequest, ResearchBudget, ResearchScope, Store,
};
use tor_rtcompat::PreferredRuntime;
use uuid::Uuid;

/// Default size of the page the web server answers.
const BODY_BYTES: usize = 8 * 1024;
/// Longest wait for egress's control socket to answer.
const CONTROL_WAIT: Duration = Duration::from_secs(20);
/// Longest wait for egress to report Tor bootstrapped.
const READY_WAIT: Duration = Duration::from_secs(180);
/// Health polling period while waiting (the supervisor ticks every 100 ms).
const POLL: Duration = Duration::from_millis(20);
/// Deadline of one egress call, connection included (the server's).
const EGRESS_CALL_TIMEOUT: Duration = Duration::from_secs(150);
/// How long egress has to exit after `Shutdown`.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Log filter passed to egress (the supervisor's default is `warn`).
const EGRESS_LOG: &str = "warn,tor_netdir=error";
/// Lines of egress's log shown when it fails.
const LOG_TAIL_LINES: usize = 20;
/// Ledger checks timed in this process ([`grant_recheck`]).
const RECHECKS: usize = 100;
/// A fingerprint of `research.prepare` for the synthetic requests.
const FINGERPRINT: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "Fetch latency of labfy-egress against a bare arti-client, and arti's bootstrap time")]
struct Args {
    /// arti configuration of the network (`LABFY_TEST_ARTI_CONFIG` from tests/tor-network).
    #[arg(long)]
    arti_config: PathBuf,
    /// Timed pairs (one egress fetch, one bare fetch each).
    #[arg(long, default_value_t = 30)]
    pairs: usize,
    /// Untimed pairs at the start of each campaign (its circuit is built then).
    #[arg(long, default_value_t = 3)]
    warmups: usize,
    /// Size of the page, in bytes (at most egress's body bound).
    #[arg(long, default_value_t = BODY_BYTES)]
    body_bytes: usize,
    /// Pause before every fetch, untimed, in ms (0: back to back).
    #[arg(long, default_value_t = 0)]
    gap_ms: u64,
    /// Cold and warm bootstraps measured (0: none).
    #[arg(long, default_value_t = 3)]
    bootstraps: usize,
    /// The `labfy-egress` binary [default: `../labfy-egress` from this program's directory].
    #[arg(long)]
    egress_bin: Option<PathBuf>,
    /// Internal: bootstrap once with this state directory, print `bootstrap_ms=…`, exit.
    #[arg(long, hide = true)]
    bootstrap_once: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    common::init_logging();
    // arti-client with the `rustls` feature needs a process-wide provider.
    labfy_egress::install_crypto_provider();
    if let Some(dir) = &args.bootstrap_once {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return rt.block_on(async {
            let (_client, took) = common::bootstrap(&args.arti_config, dir).await?;
            println!("bootstrap_ms={:.1}", ms(took));
            Ok(())
        });
    }
    // Declared before the runtime, so removed after it: arti's tasks write
    // their state there until the runtime drops them.
    let scratch = tempfile::Builder::new().prefix("bench-egress-").tempdir()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(bench(&args, scratch.path()))
}

async fn bench(args: &Args, scratch: &Path) -> Result<()> {
    if args.pairs == 0 || args.warmups >= MAX_CAMPAIGN_URLS {
        return Err(format!("--pairs must be at least 1 and --warmups below {MAX_CAMPAIGN_URLS}").into());
    }
    if args.body_bytes == 0 || args.body_bytes as u64 > DEFAULT_MAX_BODY_BYTES {
        return Err(format!("--body-bytes must be 1 to {DEFAULT_MAX_BODY_BYTES}").into());
    }
    let me = std::env::current_exe()?;
    let egress_bin = match &args.egress_bin {
        Some(p) => p.clone(),
        None => me.parent().and_then(Path::parent).ok_or("no directory above this program")?.join("labfy-egress"),
    };
    if !egress_bin.is_file() {
        return Err(format!(
            "{} not found: build it (cargo build -p labfy-egress --bins) or name it with --egress-bin",
            egress_bin.display()
        )
        .into());
    }
    print_machine(&me, &egress_bin).await;

    if args.bootstraps > 0 {
        bootstraps(&me, &args.arti_config, args.bootstraps).await?;
    }
    fetch_pairs(args, &egress_bin, scratch).await?;
    println!("load average at the end: {}", load_average());
    Ok(())
}

// ---------------------------------------------------------------------------
// Machine and versions.

async fn print_machine(me: &Path, egress_bin: &Path) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_owned()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or_else(|| "?".into(), |kb| format!("{:.1}", kb / 1024.0 / 1024.0));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!("== Machine ==");
    println!("cpu: {model}; {cpus} CPU(s) available; {mem_gib} GiB RAM; Linux {}", kernel.trim());
    println!("load average at the start: {}", load_average());
    println!("== Versions ==");
    let profile = if cfg!(debug_assertions) { "dev (debug assertions on)" } else { "release" };
    println!("bench_egress {} ({profile}): {}", env!("CARGO_PKG_VERSION"), me.display());
    println!("labfy-egress: {} ({})", first_line(egress_bin, &["--version"]).await, egress_bin.display());
    println!("arti-client {} (Cargo.lock)", locked_version("arti-client"));
    println!("relays: {}", first_line(Path::new("tor"), &["--version"]).await);
    println!("toolchain: {}", first_line(Path::new("rustc"), &["--version"]).await);
}

/// `/proc/loadavg`'s three averages.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// First line of a program's output, or `unknown`.
async fn first_line(program: &Path, args: &[&str]) -> String {
    match tokio::process::Command::new(program).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().await {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("unknown")
            .trim()
            .trim_end_matches('.')
            .to_owned(),
        _ => format!("{} unknown", program.display()),
    }
}

/// Version of a package in the workspace's Cargo.lock.
fn locked_version(package: &str) -> String {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap_or_default();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{package}\"") {
            if let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = ")) {
                return v.trim_matches('"').to_owned();
            }
        }
    }
    "unknown".into()
}

// ---------------------------------------------------------------------------
// 1. Bootstrap, cold and warm.

async fn bootstraps(me: &Path, arti_config: &Path, n: usize) -> Result<()> {
    println!("== arti bootstrap (TorClient::create_bootstrapped, a fresh process each) ==");
    let (mut cold, mut warm) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 1..=n {
        let dir = tempfile::Builder::new().prefix("bench-boot-").tempdir()?;
        let c = bootstrap_child(me, arti_config, dir.path()).await?;
        let w = bootstrap_child(me, arti_config, dir.path()).await?;
        println!("bootstrap run={i} cold_ms={c:.1} warm_ms={w:.1}");
        cold.push(c);
        warm.push(w);
    }
    println!("{:<44} {:>9} {:>9} {:>9}", "(ms)", "median", "min", "max");
    summary_line("cold: empty state and cache directories", &mut cold);
    summary_line("warm: the same directories again", &mut warm);
    Ok(())
}

/// This program again, `--bootstrap-once dir`: the bootstrap's duration in ms.
async fn bootstrap_child(me: &Path, arti_config: &Path, dir: &Path) -> Result<f64> {
    let out = tokio::process::Command::new(me)
        .arg("--arti-config")
        .arg(arti_config)
        .arg("--bootstrap-once")
        .arg(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("bootstrap child failed ({}): {stdout}", out.status).into());
    }
    let value = stdout.lines().find_map(|l| l.strip_prefix("bootstrap_ms=")).ok_or("no bootstrap_ms line")?;
    Ok(value.trim().parse()?)
}

// ---------------------------------------------------------------------------
// 2. The web server.

/// An ASCII text page of `size` bytes behind a `200 OK` (`Connection: close`).
fn canned_response(size: usize) -> Vec<u8> {
    let mut body = String::with_capacity(size + 80);
    let mut n = 0;
    while body.len() < size {
        n += 1;
        let _ = writeln!(body, "Line {n:04} of the egress benchmark page: fixed text, the same for every fetch.");
    }
    body.truncate(size);
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    response.extend_from_slice(body.as_bytes());
    response
}

/// Serves [`canned_response`] on 127.0.0.1 (a thread per connection);
/// returns the port.
fn start_web(size: usize) -> Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    let port = listener.local_addr()?.port();
    let response = Arc::new(canned_response(size));
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(std::result::Result::ok) {
            let response = response.clone();
            std::thread::spawn(move || serve(stream, &response));
        }
    });
    Ok(port)
}

/// Reads the request head, answers, closes.
fn serve(mut s: TcpStream, response: &[u8]) {
    if common::request_head(&mut s).is_some() {
        let _ = s.write_all(response);
    }
}

// ---------------------------------------------------------------------------
// 3. The store: a REAL workspace with running campaigns.

/// One campaign to fetch, and its URLs by position.
struct Planned {
    grant: GrantRef,
    campaign: CampaignRef,
    urls: Vec<String>,
}

/// Creates the workspace and one granted, admitted and started campaign
/// per entry of `sizes` (its number of items), URLs distinct throughout.
fn plan_store(store: &mut Store, port: u16, sizes: &[usize]) -> Result<(Uuid, Vec<Planned>)> {
    let (ws, inv) = store.create_real_workspace("Egress benchmark", "bench")?;
    let ws = ws.id();
    let note = NewNote {
        title: "Benchmark".into(),
        content: "Pages fetched by bench_egress through labfy-egress.".into(),
        source: None,
        dated_at: None,
    };
    let note = store.add_note(ws, &inv, &note, "bench")?;
    let mut planned = Vec::with_capacity(sizes.len());
    let mut next = 0;
    for (c, &size) in sizes.iter().enumerate() {
        let request = NewResearchRequest {
            selection: vec![note],
            question: "How fast is egress against a bare Tor client?".into(),
            exclusions: Vec::new(),
            turn_id: Uuid::now_v7(),
            call_id: Uuid::now_v7(),
            idempotency_key: format!("bench-egress-{c}"),
            requested_by: "agent:bench".into(),
            contract_fingerprint: FINGERPRINT.into(),
            catalog_fingerprint: FINGERPRINT.into(),
        };
        let (request, _) = store.prepare_research(ws, &request)?;
        let urls = (next..next + size).map(|i| format!("http://127.0.0.1:{port}/page/{i}")).collect();
        next += size;
        let decision = GrantDecision {
            scope: ResearchScope { hosts: vec!["127.0.0.1".into()] },
            budget: ResearchBudget { max_requests: MAX_GRANT_REQUESTS, max_bytes: MAX_GRANT_BYTES },
            expires_in_minutes: 24 * 60,
            contract_fingerprints: serde_json::json!({ "research.prepare": FINGERPRINT }),
            current_prepare_fingerprint: FINGERPRINT.into(),
            decided_by: "bench".into(),
            urls,
        };
        let out = store.grant_research(ws, &request, &decision)?;
        let campaign = out.campaign;
        store.campaign_admitted(ws, &campaign, "admitted by bench_egress (no governor)")?;
        store.campaign_started(ws, &campaign)?;
        let mut items = store.reads().campaign(ws, &campaign)?.items;
        items.sort_by_key(|i| i.position);
        planned.push(Planned {
            grant: out.grant,
            campaign: out.campaign,
            urls: items.into_iter().map(|i| i.url).collect(),
        });
    }
    Ok((ws, planned))
}

/// Timed pairs per campaign: as even as possible, each at most what a
/// campaign holds beside its warm-ups.
fn split_pairs(pairs: usize, warmups: usize) -> Vec<usize> {
    let room = MAX_CAMPAIGN_URLS - warmups;
    let campaigns = pairs.div_ceil(room);
    (0..campaigns).map(|c| pairs / campaigns + usize::from(c < pairs % campaigns)).collect()
}

// ---------------------------------------------------------------------------
// 4. The egress daemon, as the supervisor runs it.

/// A running `labfy-egress` and how to talk to it.
struct Daemon {
    child: tokio::process::Child,
    control: Client<ControlRequest, ControlResponse>,
    socket: PathBuf,
    secret: Secret,
    log: PathBuf,
}

impl Daemon {
    /// Starts `bin` like the supervisor does, waits until Tor is
    /// bootstrapped, names this process as its server peer. Returns it with
    /// the time from spawn to the first ready `Health`.
    async fn start(bin: &Path, root: &Path, data: &Path, arti_config: &Path) -> Result<(Self, Duration)> {
        let run = root.join("run");
        secret::create_private_dir(&run)?;
        let secret = secret::create_secret(&run)?;
        let log = root.join("egress.log");
        let spawned = Instant::now();
        let mut child = tokio::process::Command::new(bin)
            .env_clear()
            .env("LABFY_LOG", EGRESS_LOG)
            .arg("--runtime-dir")
            .arg(&run)
            .arg("--data-dir")
            .arg(data)
            .arg("--arti-config")
            .arg(arti_config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .kill_on_drop(true)
            .spawn()?;
        let control_path = control_socket(&run, Role::Egress);
        let mut control = loop {
            match Client::connect(&control_path, Boundary::Control, &secret).await {
                Ok(c) => break c.with_timeout(Duration::from_secs(5)),
                Err(e) => {
                    if let Some(status) = child.try_wait()? {
                        return Err(format!("labfy-egress exited ({status}):\n{}", tail(&log)).into());
                    }
                    if spawned.elapsed() > CONTROL_WAIT {
                        return Err(format!("no control socket after {CONTROL_WAIT:?}: {e}\n{}", tail(&log)).into());
                    }
                    tokio::time::sleep(POLL).await;
                }
            }
        };
        let ready = loop {
            match control.call(ControlRequest::Health {}).await? {
                ControlResponse::Health(h) if h.ready => break spawned.elapsed(),
                ControlResponse::Health(h) => {
                    if spawned.elapsed() > READY_WAIT {
                        return Err(
                            format!("egress not ready after {READY_WAIT:?}: {}\n{}", h.detail, tail(&log)).into()
                        );
                    }
                }
                other => return Err(format!("unexpected control answer {other:?}").into()),
            }
            tokio::time::sleep(POLL).await;
        };
        let pid = i32::try_from(std::process::id())?;
        match control.call(ControlRequest::SetPeers { pids: vec![pid] }).await? {
            ControlResponse::PeersSet {} => {}
            other => return Err(format!("SetPeers answered {other:?}").into()),
        }
        let socket = service_socket(&run, Boundary::Egress);
        Ok((Self { child, control, socket, secret, log }, ready))
    }

    /// Proposes a campaign's grant (as the server does) and approves it on
    /// the operator socket (as `labfy grant approve` does).
    async fn confirm(&self, ws: Uuid, c: &Planned) -> Result<()> {
        let proposal = GrantProposal {
            workspace_id: ws,
            grant_id: c.grant,
            campaign_id: c.campaign,
            urls: c.urls.clone(),
            hosts: vec!["127.0.0.1".into()],
            max_requests: MAX_GRANT_REQUESTS.into(),
            max_bytes: MAX_GRANT_BYTES,
            expires_in_minutes: 24 * 60,
            summary: "bench_egress".into(),
        };
        match self.call(EgressRequest::Propose(Box::new(proposal))).await?.0 {
            EgressResponse::Grant(r) if r.phase == GrantPhase::Proposed => {}
            other => return Err(format!("Propose answered {other:?}").into()),
        }
        let operator = operator_socket(self.socket.parent().unwrap_or(Path::new("/")), Boundary::Egress);
        let mut op: Client<EgressRequest, EgressResponse> =
            Client::connect(&operator, Boundary::Egress, &self.secret).await?;
        match op.call(EgressRequest::Decide { grant_id: c.grant, approve: true }).await? {
            EgressResponse::Grant(r) if r.phase == GrantPhase::Approved => Ok(()),
            other => Err(format!("Decide answered {other:?}").into()),
        }
    }

    /// One call on a new authenticated connection (as the server makes
    /// each call); also returns how long connecting took.
    async fn call(&self, request: EgressRequest) -> Result<(EgressResponse, Duration)> {
        let t0 = Instant::now();
        let asked = async {
            let client: Client<EgressRequest, EgressResponse> =
                Client::connect(&self.socket, Boundary::Egress, &self.secret).await?;
            let connected = t0.elapsed();
            let response = client.with_timeout(EGRESS_CALL_TIMEOUT).call(request).await?;
            Ok::<_, labfy_ipc::IpcError>((response, connected))
        };
        match tokio::time::timeout(EGRESS_CALL_TIMEOUT, asked).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(format!("egress call: {e}\n{}", tail(&self.log)).into()),
            Err(_) => Err(format!("egress call: no answer within {EGRESS_CALL_TIMEOUT:?}").into()),
        }
    }

    /// `Shutdown` over the control socket, then a kill if it lingers.
    async fn stop(mut self) -> Result<()> {
        let _ = self.control.call(ControlRequest::Shutdown {}).await;
        match tokio::time::timeout(STOP_GRACE, self.child.wait()).await {
            Ok(status) => println!("labfy-egress stopped: {}", status?),
            Err(_) => {
                self.child.kill().await?;
                println!("labfy-egress killed: no exit {STOP_GRACE:?} after Shutdown");
            }
        }
        Ok(())
    }
}

/// The end of egress's log.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

// ---------------------------------------------------------------------------
// 5. The pairs.

/// One fetch through egress, timed in parts (ms).
struct EgressFetch {
    /// Connect, authenticate, `Fetch`, outcome: what the server waits for.
    ipc: f64,
    /// Of which connecting and authenticating.
    connect: f64,
    /// Egress's own `elapsed_ms` (whole milliseconds): checks, stream, HTTP.
    inside: f64,
    /// base64 decoding and `Store::record_fetch`.
    store: f64,
    /// All of it.
    total: f64,
}

/// What the pairs need.
struct Run<'a> {
    daemon: &'a Daemon,
    store: &'a mut Store,
    /// The store's blobs.
    blobs: labfy_store::blobs::BlobStore,
    ws: Uuid,
    /// The page's size.
    body_bytes: usize,
}

impl Run<'_> {
    /// Item `position` of `c` through egress, then into the store.
    async fn egress_fetch(&mut self, c: &Planned, position: usize) -> Result<EgressFetch> {
        let url = &c.urls[position];
        let request = EgressRequest::Fetch(FetchRequest {
            workspace_id: self.ws,
            campaign_id: c.campaign,
            grant_id: c.grant,
            url: url.clone(),
            method: FetchMethod::Get,
        });
        let t0 = Instant::now();
        let (response, connected) = self.daemon.call(request).await?;
        let ipc = t0.elapsed();
        let o = match response {
            EgressResponse::Fetched(o) => *o,
            other => return Err(format!("Fetch answered {other:?}").into()),
        };
        if o.status != FetchStatus::Fetched || o.http_status != Some(200) || o.body_bytes != self.body_bytes as u64 {
            return Err(format!(
                "egress fetch of {url}: {:?} HTTP {:?}, {} bytes: {}",
                o.status,
                o.http_status,
                o.body_bytes,
                o.reason.unwrap_or_default()
            )
            .into());
        }
        // The server's path (SPEC C3): the body read from egress's scratch
        // in chunks, released, kept as a blob, then parsed — here in
        // process (the server runs the confined worker).
        let t1 = Instant::now();
        let handle = o.body_handle.clone().ok_or("a page without a body handle")?;
        let mut bytes = Vec::new();
        loop {
            let read =
                EgressRequest::ReadBody { workspace_id: self.ws, handle: handle.clone(), offset: bytes.len() as u64 };
            match self.daemon.call(read).await?.0 {
                EgressResponse::BodyChunk { data_base64, eof } => {
                    bytes.extend(base64::engine::general_purpose::STANDARD.decode(data_base64)?);
                    if eof {
                        break;
                    }
                }
                other => return Err(format!("ReadBody answered {other:?}").into()),
            }
        }
        let release = EgressRequest::ReleaseBody { workspace_id: self.ws, handle };
        self.daemon.call(release).await?;
        let blob = self.blobs.put(&mut &bytes[..], bytes.len() as u64)?;
        let body = Some(FetchedBody { parsed: labfy_parse::parse(&bytes, "page.html"), blob });
        let page = FetchedPage {
            final_url: o.final_url.clone().unwrap_or_else(|| o.url.clone()),
            url: o.url,
            redirects: o.redirects,
            http_status: o.http_status.unwrap_or_default(),
            headers: o.headers,
            content_type: o.content_type,
            body_sha256: o.body_sha256.unwrap_or_default(),
            body,
            started_at: o.started_at,
            elapsed_ms: o.elapsed_ms,
            isolation: o.isolation,
            asked_by: None,
        };
        let position = u32::try_from(position)?;
        self.store.record_fetch(self.ws, &c.campaign, position, &page)?;
        let store = t1.elapsed();
        Ok(EgressFetch {
            ipc: ms(ipc),
            connect: ms(connected),
            inside: o.elapsed_ms as f64,
            store: ms(store),
            total: ms(t0.elapsed()),
        })
    }
}

/// One bare fetch, timed (ms).
struct BareFetch {
    /// All of it: stream, request, response read to the end.
    total: f64,
    /// Until the stream is open (the exit's `CONNECTED`).
    connect: f64,
}

/// The same URL through the bare client (a new stream).
async fn bare_fetch(client: &TorClient<PreferredRuntime>, url: &str, body_bytes: usize) -> Result<BareFetch> {
    let target = Target::from_url(&url::Url::parse(url)?)?;
    let t0 = Instant::now();
    let f = common::fetch(client, &target).await?;
    let total = ms(t0.elapsed());
    if f.status != 200 || f.bytes <= body_bytes {
        return Err(format!("bare fetch of {url}: HTTP {}, {} bytes", f.status, f.bytes).into());
    }
    Ok(BareFetch { total, connect: ms(f.connected) })
}

async fn fetch_pairs(args: &Args, egress_bin: &Path, root: &Path) -> Result<()> {
    let port = start_web(args.body_bytes)?;
    let data = root.join("data");
    std::fs::create_dir(&data)?;
    let split = split_pairs(args.pairs, args.warmups);
    let sizes: Vec<usize> = split.iter().map(|n| n + args.warmups).collect();
    let mut store = Store::open(&data)?;
    let (ws, planned) = plan_store(&mut store, port, &sizes)?;

    println!("== labfy-egress, started as the supervisor does (fresh data directory: cold cache) ==");
    let (daemon, ready) = Daemon::start(egress_bin, root, &data, &args.arti_config).await?;
    for c in &planned {
        daemon.confirm(ws, c).await?;
    }
    let own = match daemon.call(EgressRequest::Status {}).await?.0 {
        EgressResponse::Status(s) => s.bootstrap_ms.map_or_else(|| "?".into(), |v| v.to_string()),
        other => format!("(unexpected answer {other:?})"),
    };
    println!(
        "spawn → Health ready: {:.0} ms (polled every {} ms); egress's own bootstrap_ms: {own}",
        ms(ready),
        POLL.as_millis()
    );
    let (bare, took) = common::bootstrap(&args.arti_config, &root.join("bare")).await?;
    println!("bare client in this process, cold bootstrap: {:.0} ms", ms(took));

    println!(
        "== Fetch pairs: {} timed, {} campaign(s) of {:?} items ({} untimed warm-up pair(s) each), {}-byte page ==",
        args.pairs,
        planned.len(),
        sizes,
        args.warmups,
        args.body_bytes
    );
    println!(
        "Each fetch opens a new Tor stream on one isolated circuit per campaign: egress on the campaign's \
         isolation token, the bare client on one isolated_client() per campaign. The order alternates per pair."
    );
    let blobs = labfy_store::blobs::BlobStore::open(&data)?;
    let mut run = Run { daemon: &daemon, store: &mut store, blobs, ws, body_bytes: args.body_bytes };
    let mut timed: Vec<Pair> = Vec::with_capacity(args.pairs);
    let gap = Duration::from_millis(args.gap_ms);
    let mut k = 0usize;
    for (c, campaign) in planned.iter().enumerate() {
        let iso = bare.isolated_client();
        for (position, url) in campaign.urls.iter().enumerate() {
            let egress_first = k % 2 == 0;
            k += 1;
            let (e, b) = if egress_first {
                tokio::time::sleep(gap).await;
                let e = run.egress_fetch(campaign, position).await?;
                tokio::time::sleep(gap).await;
                (e, bare_fetch(&iso, url, args.body_bytes).await?)
            } else {
                tokio::time::sleep(gap).await;
                let b = bare_fetch(&iso, url, args.body_bytes).await?;
                tokio::time::sleep(gap).await;
                (run.egress_fetch(campaign, position).await?, b)
            };
            let first = if egress_first { "egress" } else { "bare" };
            if position < args.warmups {
                println!(
                    "campaign={c} warm-up={position} first={first} egress_ms={:.1} bare_ms={:.1}",
                    e.total, b.total
                );
                continue;
            }
            println!(
                "pair={} first={first} egress_ms={:.2} (ipc {:.2}, connect {:.2}, inside {:.0}, store {:.2}) \
                 bare_ms={:.2} (stream open {:.2}) ratio={:.3}",
                timed.len() + 1,
                e.total,
                e.ipc,
                e.connect,
                e.inside,
                e.store,
                b.total,
                b.connect,
                e.total / b.total
            );
            timed.push(Pair { egress: e, bare: b, egress_first });
        }
    }
    daemon.stop().await?;
    let mut recheck = grant_recheck(&data, ws, &planned[0])?;

    println!("== Results ({} pairs, pause {} ms; nearest-rank p50) ==", timed.len(), args.gap_ms);
    println!("{:<44} {:>9} {:>9} {:>9}", "(ms)", "p50", "min", "max");
    let col = |f: fn(&EgressFetch) -> f64| timed.iter().map(|p| f(&p.egress)).collect::<Vec<f64>>();
    let mut total = col(|e| e.total);
    let mut ipc = col(|e| e.ipc);
    let mut connect = col(|e| e.connect);
    let mut inside = col(|e| e.inside);
    let mut store_ms = col(|e| e.store);
    let mut bare_ms: Vec<f64> = timed.iter().map(|p| p.bare.total).collect();
    let mut bare_open: Vec<f64> = timed.iter().map(|p| p.bare.connect).collect();
    let mut ratios: Vec<f64> = timed.iter().map(|p| p.egress.total / p.bare.total).collect();
    let mut ipc_ratios: Vec<f64> = timed.iter().map(|p| p.egress.ipc / p.bare.total).collect();
    let p50_total = summary_line("egress: IPC + checks + Tor + store", &mut total);
    let p50_ipc = summary_line("  IPC round trip (connect, Fetch, outcome)", &mut ipc);
    summary_line("    of which connect + authenticate", &mut connect);
    summary_line("    egress's own elapsed_ms (whole ms)", &mut inside);
    summary_line("  base64 decode + Store::record_fetch", &mut store_ms);
    summary_line("  (ledger check + count as egress makes it, here)", &mut recheck);
    let p50_bare = summary_line("bare arti-client (new stream, same GET)", &mut bare_ms);
    summary_line("  of which stream open (BEGIN → CONNECTED)", &mut bare_open);
    summary_line("per-pair ratio egress / bare", &mut ratios);
    summary_line("per-pair ratio egress IPC only / bare", &mut ipc_ratios);
    let p50_ratio = p50_total / p50_bare;
    println!(
        "RATIO p50(egress) / p50(bare) = {p50_ratio:.3} (target ≤ 1.10: {}); median of per-pair ratios = {:.3}",
        if p50_ratio <= 1.10 { "met" } else { "NOT met" },
        percentile(&ratios, 50)
    );
    println!(
        "without the store write: p50(IPC round trip) / p50(bare) = {:.3}; egress minus bare at p50: {:.2} ms",
        p50_ipc / p50_bare,
        p50_total - p50_bare
    );
    // With the order alternating, an egress-first pair's egress fetch follows
    // the previous pair's egress fetch (its circuit was used a moment ago),
    // and a bare-first pair's bare fetch follows the previous bare one.
    println!("By order within the pair (each fetch's predecessor on its own client):");
    for (egress_first, what) in [
        (true, "egress first: egress after egress, bare after egress"),
        (false, "bare first:   egress after bare,   bare after bare"),
    ] {
        let group: Vec<&Pair> = timed.iter().filter(|p| p.egress_first == egress_first).collect();
        if group.is_empty() {
            continue;
        }
        let mut e: Vec<f64> = group.iter().map(|p| p.egress.total).collect();
        let mut b: Vec<f64> = group.iter().map(|p| p.bare.total).collect();
        e.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        let (pe, pb) = (percentile(&e, 50), percentile(&b, 50));
        println!("  {what} ({} pairs): egress p50 {pe:.2} ms, bare p50 {pb:.2} ms, ratio {:.3}", group.len(), pe / pb);
    }
    Ok(())
}

/// One timed pair.
struct Pair {
    egress: EgressFetch,
    /// The bare fetch.
    bare: BareFetch,
    /// Whether egress fetched first.
    egress_first: bool,
}

/// Times, [`RECHECKS`] times in this process (egress stopped), what egress
/// does before each stream (`Ledger::start_request`: the grant's record,
/// every check, the request counted, one committed transaction) on the
/// ledger the daemon wrote. An estimate of that share of egress's
/// `elapsed_ms` (egress runs it on its blocking pool); ms.
fn grant_recheck(data: &Path, ws: Uuid, c: &Planned) -> Result<Vec<f64>> {
    let ledger = labfy_egress::Ledger::open(&data.join("egress"))?;
    let ids = labfy_egress::FetchIds { workspace: ws, campaign: c.campaign, grant: c.grant };
    let target = labfy_egress::check_url(&c.urls[0])?;
    let mut out = Vec::with_capacity(RECHECKS);
    for _ in 0..RECHECKS {
        let t0 = Instant::now();
        ledger.start_request(&ids, &target, true, chrono::Utc::now())?;
        out.push(ms(t0.elapsed()));
    }
    Ok(out)
}

/// Sorts `values`, prints one row (p50, min, max) and returns the p50.
fn summary_line(label: &str, values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let (p50, min, max) = (percentile(values, 50), values[0], values[values.len() - 1]);
    println!("{label:<44} {p50:>9.3} {min:>9.3} {max:>9.3}");
    p50
}

/// Milliseconds of a duration.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
