//! `web.fetch` as the agent calls it, against a bare arti-client fetch of
//! the same page on the same private Tor network (issue 17's benchmark,
//! SPEC F2, F3).
//!
//! The whole appliance runs: `labfy up` on a REAL workspace with egress on
//! the network's arti configuration. The benchmark is the analyst and the
//! agent: it logs in with a one-time code, has the demo agent prepare a
//! research request, grants it (scope `127.0.0.1`, the URLs below),
//! approves the grant on the terminal (`labfy grant approve --yes`, the T2
//! confirmation), opens a manual turn and then calls `web.fetch` on
//! `POST /api/v1/agent-tools/calls` as a model's call arrives there:
//! session, CSRF and rate guard, the tool protocol's checks, the gateway's
//! grant and policy checks, egress over IPC (its ledger, arti, the exit),
//! the body into the blob store, the confined parser, the evidence and
//! provenance rows, the bounded excerpt returned. The campaign's first URL
//! is held open by the web server, so every other URL of the grant is
//! fetched by the agent's call, never by the campaign itself.
//!
//! Each timed pair is one such call and one bare arti-client `GET` of a
//! page of the same size (a new stream on one isolated circuit, as egress
//! uses one circuit per campaign), in alternating order. A pause between
//! pairs keeps the calls under the session's rate guard (2 per second).
//!
//! With `--onion NAME`, the same for a page of the network's onion service
//! (`tests/tor-network start DIR --onion 127.0.0.1:WEB_PORT`, the same
//! `--web-port` here): the first fetch of each side (descriptor, intro and
//! rendezvous circuits) is reported apart from the warm ones.
//!
//! ```text
//! cargo build --release -p labfy -p labfy-egress --bins --examples
//! eval "$(tests/tor-network start /tmp/net --onion 127.0.0.1:28080)"
//! target/release/examples/bench_web_fetch --arti-config "$LABFY_TEST_ARTI_CONFIG" \
//!     --labfy-bin target/release/labfy --web-port 28080 --onion "$LABFY_TEST_ONION"
//! tests/tor-network stop /tmp/net
//! ```
//!
//! Figures go to `docs/PERFORMANCE.md`; nothing here asserts a time.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arti_client::TorClient;
use clap::Parser;
use common::{Result, Target, percentile};
use serde_json::{Value, json};
use tor_rtcompat::PreferredRuntime;

/// Most URLs one grant lists (`labfy_store::MAX_CAMPAIGN_URLS`); the first
/// is the held one.
const URLS_PER_GRANT: usize = labfy_store::MAX_CAMPAIGN_URLS;
/// Untimed pairs before the timed ones of each grant (circuits built).
const WARMUPS: usize = 2;
/// Pause after each pair: the session's rate guard refills 2 tokens a second.
const PACE: Duration = Duration::from_millis(600);
/// Bound on `labfy up` printing its URL and on egress bootstrapping.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "web.fetch through labfy up vs a bare arti-client fetch of the same page")]
struct Args {
    /// arti configuration of the private network (`tests/tor-network`'s `arti.toml`).
    #[arg(long)]
    arti_config: PathBuf,
    /// The `labfy` binary (a release build for figures worth recording).
    #[arg(long)]
    labfy_bin: PathBuf,
    /// Timed pairs on clear-net pages (split over grants of 31 pages: each
    /// grant's pairs must end within egress's 120 s bound on the held page).
    #[arg(long, default_value_t = 30)]
    pairs: usize,
    /// Body size of each page, in bytes.
    #[arg(long, default_value_t = 8192)]
    body_bytes: usize,
    /// Port of the page server on 127.0.0.1 (0: any free port); the
    /// onion service, if any, must lead to it.
    #[arg(long, default_value_t = 0)]
    web_port: u16,
    /// The network's onion service (`<v3>.onion`), leading to `--web-port`.
    #[arg(long)]
    onion: Option<String>,
    /// Timed pairs on the onion service's pages.
    #[arg(long, default_value_t = 10)]
    onion_pairs: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    common::init_logging();
    labfy_egress::install_crypto_provider();
    let scratch = tempfile::tempdir()?;
    // Two workers: the UI calls below are blocking HTTP on loopback, and
    // arti's background tasks must not wait behind them.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(bench(&args, scratch.path()))
}

async fn bench(args: &Args, scratch: &Path) -> Result<()> {
    let web = Web::start(args.web_port, args.body_bytes)?;
    println!(
        "# bench_web_fetch: labfy {}, {} pairs, body {} B, load average {}",
        args.labfy_bin.display(),
        args.pairs,
        args.body_bytes,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let up = Up::start(&args.labfy_bin, scratch, &args.arti_config)?;
    let result = run(args, &up, &web, scratch).await;
    up.stop();
    result
}

async fn run(args: &Args, up: &Up, web: &Web, scratch: &Path) -> Result<()> {
    let ui = up.login()?;
    // A note for the demo agent to select when it prepares research.
    let (_, session) = ui.get("/api/v1/session")?;
    let ws = session["workspace_id"].as_str().ok_or("no workspace in the session")?;
    let (_, invs) = ui.get(&format!("/api/v1/workspaces/{ws}/investigations"))?;
    let inv = invs["investigations"][0]["id"].as_str().ok_or("no investigation")?;
    let note = json!({"title": "Société Durand", "content": "La société Durand publie ses comptes sur son site."});
    let (st, v) = ui.post(&format!("/api/v1/investigations/{inv}/evidence"), &note)?;
    if st != 201 {
        return Err(format!("note: {st} {v}").into());
    }
    let started = Instant::now();
    loop {
        let (_, v) = ui.get("/api/v1/egress")?;
        if v["ready"] == true {
            break;
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(format!("egress not ready after {START_TIMEOUT:?}: {v}").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (bare, bootstrap) = common::bootstrap(&args.arti_config, &scratch.join("bare")).await?;
    println!(
        "# egress ready {:.1} s after login; bare client bootstrapped in {:.0} ms",
        started.elapsed().as_secs_f64(),
        ms(bootstrap)
    );

    let mut clear = Vec::new();
    let mut grants = 0;
    while clear.len() < args.pairs {
        let want = (args.pairs - clear.len()).min(URLS_PER_GRANT - 1 - WARMUPS);
        let host = format!("127.0.0.1:{}", web.port);
        let (pairs, first) =
            grant_and_fetch(&ui, up, web, &bare, "127.0.0.1", &host, grants, want + WARMUPS, args.body_bytes).await?;
        println!(
            "# grant {grants}: the campaign's first item reached the page server {first:.0} ms after the approval"
        );
        clear.extend(pairs.into_iter().skip(WARMUPS));
        grants += 1;
    }
    println!("\n## clear-net page: {} timed pairs over {grants} grant(s)", clear.len());
    report(&mut clear);

    if let Some(onion) = &args.onion {
        let (pairs, first) =
            grant_and_fetch(&ui, up, web, &bare, onion, onion, grants, args.onion_pairs + 1, args.body_bytes).await?;
        let (cold, warm) = pairs.split_first().ok_or("no onion pair")?;
        println!("\n## onion service {onion}");
        // The campaign's first item opened egress's connection to the
        // service; the agent's calls ride it, like the bare client's after
        // its own first fetch.
        println!("cold connection (descriptor, introduction, rendezvous):");
        println!("  appliance: approval → the campaign's first item at the page server  {first:.0} ms");
        println!("  bare arti-client: first fetch                                        {:.0} ms", cold.bare);
        let mut warm = warm.to_vec();
        report(&mut warm);
    }
    Ok(())
}

/// One pair: the agent's call and the bare fetch, in ms.
#[derive(Debug, Clone, Copy)]
struct Pair {
    call: f64,
    bare: f64,
    /// Of `bare`: until the stream was open.
    bare_open: f64,
}

fn report(pairs: &mut [Pair]) {
    if pairs.is_empty() {
        return;
    }
    let mut call: Vec<f64> = pairs.iter().map(|p| p.call).collect();
    let mut bare: Vec<f64> = pairs.iter().map(|p| p.bare).collect();
    let mut ratios: Vec<f64> = pairs.iter().map(|p| p.call / p.bare).collect();
    println!("{:<44} {:>9} {:>9} {:>9}", "(ms)", "p50", "min", "max");
    let c = summary_line("web.fetch call (HTTP → gateway → egress → store)", &mut call);
    let b = summary_line("bare arti-client, same GET", &mut bare);
    let mut open: Vec<f64> = pairs.iter().map(|p| p.bare_open).collect();
    summary_line("  of which stream open (bare)", &mut open);
    ratios.sort_by(f64::total_cmp);
    println!("p50(web.fetch) / p50(bare) (target ≤ 1.15)      {:.3}", c / b);
    println!("median of per-pair ratios                        {:.3}", percentile(&ratios, 50));
    println!("p50(web.fetch) − p50(bare)                       {:+.1} ms", c - b);
}

fn summary_line(label: &str, values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let (p50, min, max) = (percentile(values, 50), values[0], values[values.len() - 1]);
    println!("{label:<44} {p50:>9.2} {min:>9.2} {max:>9.2}");
    p50
}

/// A research request granted for `host` (scope `scope`) with a held page
/// first and `n` pages after it, approved on the terminal; then `n` pairs,
/// alternating which side goes first. The grant is revoked at the end,
/// which stops its campaign (and releases the held page).
#[allow(clippy::too_many_arguments)]
async fn grant_and_fetch(
    ui: &Ui,
    up: &Up,
    web: &Web,
    bare: &TorClient<PreferredRuntime>,
    scope: &str,
    host: &str,
    round: usize,
    n: usize,
    body_bytes: usize,
) -> Result<(Vec<Pair>, f64)> {
    let (st, turn) = ui.post("/api/v1/agent-tools/turns", &json!({"question": "Que publie la société Durand ?"}))?;
    let request = turn["research_request"].as_str().ok_or_else(|| format!("no research request ({st}): {turn}"))?;
    let url = |path: &str| format!("http://{host}{path}");
    let mut urls = vec![url(&format!("/hold/{round}"))];
    urls.extend((0..n).map(|i| url(&format!("/agent/{round}/{i}"))));
    let body = json!({"scope": {"hosts": [scope]}, "budget": {"max_requests": urls.len(), "max_bytes": 64 * 1024 * 1024},
                      "expires_in_minutes": 60, "urls": urls});
    let (st, g) = ui.post(&format!("/api/v1/research/requests/{request}/grant"), &body)?;
    let grant = g["grant"].as_str().ok_or_else(|| format!("grant refused ({st}): {g}"))?.to_owned();
    let held_before = web.held.load(Ordering::SeqCst);
    let approved = Instant::now();
    up.approve(&grant)?;
    let deadline = Instant::now() + START_TIMEOUT;
    while web.held.load(Ordering::SeqCst) == held_before {
        if Instant::now() > deadline {
            return Err("the campaign's held page was never asked for".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let first = ms(approved.elapsed());
    let (st, turn) = ui.post("/api/v1/agent-tools/turns", &json!({"question": "Lire les pages", "mode": "manual"}))?;
    let turn = turn["turn_id"].as_str().ok_or_else(|| format!("no manual turn ({st}): {turn}"))?.to_owned();
    let isolated = bare.isolated_client();
    let mut pairs = Vec::with_capacity(n);
    for (i, u) in urls.iter().skip(1).enumerate() {
        let bare_target = Target::from_url(&url::Url::parse(&url(&format!("/bare/{round}/{i}")))?)?;
        let call = async {
            let body = json!({"turn_id": turn, "call_id": uuid::Uuid::new_v4(), "tool_id": "web.fetch",
                              "input": {"url": u, "method": "GET", "grant_id": grant},
                              "context": {"purpose": "benchmark"}, "object_refs": [],
                              "idempotency_key": format!("bench-{round}-{i}")});
            let t = Instant::now();
            let (st, r) = ui.post("/api/v1/agent-tools/calls", &body)?;
            let took = ms(t.elapsed());
            if st != 200 || r["status"] != "COMPLETED" || r["artifacts"][0]["data"]["page"]["fetched_now"] != true {
                return Err(format!("web.fetch {u}: {st} {r}").into());
            }
            Ok::<f64, Box<dyn std::error::Error>>(took)
        };
        let bare_fetch = async {
            let t = Instant::now();
            let f = common::fetch(&isolated, &bare_target).await?;
            if f.status != 200 || f.bytes < body_bytes {
                return Err(format!("bare fetch: HTTP {}, {} bytes", f.status, f.bytes).into());
            }
            Ok::<(f64, f64), Box<dyn std::error::Error>>((ms(t.elapsed()), ms(f.connected)))
        };
        let (call, (bare, bare_open)) = if i % 2 == 0 {
            let c = call.await?;
            (c, bare_fetch.await?)
        } else {
            let b = bare_fetch.await?;
            (call.await?, b)
        };
        pairs.push(Pair { call, bare, bare_open });
        tokio::time::sleep(PACE).await;
    }
    let (st, r) = ui.post(&format!("/api/v1/grants/{grant}/revoke"), &json!({}))?;
    if st != 200 {
        return Err(format!("revoke: {st} {r}").into());
    }
    Ok((pairs, first))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ---------------------------------------------------------------------------
// The page server: `/hold/…` keeps the campaign's first item open (until the
// campaign is stopped), any other path answers the same page.

struct Web {
    port: u16,
    held: Arc<AtomicUsize>,
}

impl Web {
    fn start(port: u16, size: usize) -> Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let port = listener.local_addr()?.port();
        let mut body = String::with_capacity(size + 80);
        let mut n = 0;
        while body.len() < size {
            n += 1;
            body.push_str(&format!("Ligne {n:04} de la page du banc d'essai : texte fixe, le même à chaque fois.\n"));
        }
        body.truncate(size);
        let page = Arc::new(format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n{body}"
        ));
        let held = Arc::new(AtomicUsize::new(0));
        let counter = held.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(std::result::Result::ok) {
                let (page, held) = (page.clone(), counter.clone());
                std::thread::spawn(move || serve(stream, &page, &held));
            }
        });
        Ok(Self { port, held })
    }
}

fn serve(mut s: TcpStream, page: &str, held: &AtomicUsize) {
    let Some(head) = common::request_head(&mut s) else { return };
    if head.split_whitespace().nth(1).is_some_and(|p| p.starts_with("/hold/")) {
        held.fetch_add(1, Ordering::SeqCst);
        // Headers, then a byte a second (under egress's idle bound, within
        // its whole-fetch bound of 120 s): the campaign's item stays in
        // flight until the grant is revoked.
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000\r\n\r\n");
        while s.write_all(b".").and_then(|()| s.flush()).is_ok() {
            std::thread::sleep(Duration::from_secs(1));
        }
        return;
    }
    let _ = s.write_all(page.as_bytes());
}

// ---------------------------------------------------------------------------
// The appliance: `labfy up` on a REAL workspace, and its UI over loopback.

struct Up {
    bin: PathBuf,
    run: PathBuf,
    port: u16,
    child: Child,
}

impl Up {
    fn start(bin: &Path, scratch: &Path, arti: &Path) -> Result<Self> {
        let data = scratch.join("data");
        let run = scratch.join("run");
        std::fs::create_dir_all(&data)?;
        let o = Command::new(bin)
            .args(["workspace", "create", "--name", "Banc web.fetch", "--data-dir"])
            .arg(&data)
            .output()?;
        if !o.status.success() {
            return Err(format!("workspace create: {}", String::from_utf8_lossy(&o.stderr)).into());
        }
        let ws = String::from_utf8(o.stdout)?.trim().to_owned();
        let mut child = Command::new(bin)
            .args(["up", "--port", "0", "--workspace", &ws, "--data-dir"])
            .arg(&data)
            .arg("--runtime-dir")
            .arg(&run)
            .arg("--arti-config")
            .arg(arti)
            .env("LABFY_LOG", "warn,tor_netdir=error,tor_guardmgr=error")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(std::result::Result::ok) {
                if let Some(rest) = line.strip_prefix("Open http://127.0.0.1:") {
                    let _ = tx.send(rest.split('/').next().unwrap_or_default().parse::<u16>().ok());
                }
            }
        });
        let port = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(p)) => p,
            _ => {
                let _ = child.kill();
                return Err("labfy up printed no URL".into());
            }
        };
        Ok(Self { bin: bin.to_owned(), run, port, child })
    }

    /// A session from a fresh one-time code, as `labfy open` mints it.
    fn login(&self) -> Result<Ui> {
        let (_, key) = labfy_ipc::login::read_login_file(&self.run)?;
        let code = key.mint_code(std::time::SystemTime::now());
        let a = http(self.port, "GET", &format!("/login?code={code}"), &[], "")?;
        let cookie = a.header("set-cookie").ok_or("login refused")?.split(';').next().unwrap_or_default().to_owned();
        let s = http(self.port, "GET", "/api/v1/session", &[("Cookie", &cookie)], "")?;
        let v: Value = serde_json::from_str(&s.body)?;
        let csrf = v["csrf_token"].as_str().ok_or("no CSRF token")?.to_owned();
        Ok(Ui { port: self.port, cookie, csrf })
    }

    /// The human's confirmation on the terminal (SPEC T2).
    fn approve(&self, grant: &str) -> Result<()> {
        let o = Command::new(&self.bin)
            .args(["grant", "approve", grant, "--yes", "--runtime-dir"])
            .arg(&self.run)
            .stdin(Stdio::null())
            .output()?;
        if !o.status.success() {
            return Err(format!("grant approve: {}", String::from_utf8_lossy(&o.stderr)).into());
        }
        Ok(())
    }

    /// SIGTERM, as an operator stops it: the supervisor stops its children.
    fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

struct Ui {
    port: u16,
    cookie: String,
    csrf: String,
}

impl Ui {
    fn get(&self, path: &str) -> Result<(u16, Value)> {
        let a = http(self.port, "GET", path, &[("Cookie", &self.cookie)], "")?;
        Ok((a.status, serde_json::from_str(&a.body).unwrap_or(Value::Null)))
    }

    fn post(&self, path: &str, body: &Value) -> Result<(u16, Value)> {
        let origin = format!("http://127.0.0.1:{}", self.port);
        let h = [
            ("Cookie", self.cookie.as_str()),
            ("Origin", origin.as_str()),
            ("X-CSRF-Token", self.csrf.as_str()),
            ("Content-Type", "application/json"),
        ];
        let a = http(self.port, "POST", path, &h, &body.to_string())?;
        Ok((a.status, serde_json::from_str(&a.body).unwrap_or(Value::Null)))
    }
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 exchange with the UI on 127.0.0.1 (`Connection: close`):
/// what a browser's request costs, a new connection each.
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Result<Answer> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(180)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP head")?;
    let mut lines = head.lines();
    let status =
        lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|c| c.parse().ok()).ok_or("no status")?;
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect();
    Ok(Answer { status, headers, body: body.to_owned() })
}
