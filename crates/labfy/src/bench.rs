//! `labfy bench store`: figures, not assertions (docs/PERFORMANCE.md).
//!
//! 1. Time SPECIMEN generation of `--size` items.
//! 2. Time the read models on it (p50/p99): full-text search, neighbours,
//!    provenance trace, overview, evidence summary.
//! 3. HTTP throughput of one small read route (`GET /api/v1/jobs/{ref}`) with
//!    every security layer, against a bare axum route doing the same store read
//!    with no layer, in the same process and run; prints the ratio.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{Request, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use labfy_core::ObjectRef;
use labfy_server::session::RateLimit;
use labfy_server::{AppState, db::Db, listener};
use labfy_store::specimen::{SpecimenOutcome, SpecimenSpec};
use labfy_store::{EgoQuery, ListQuery, MAX_EGO_NODES, ReadOnlyStore, Store};

use crate::cli::{Failure, generate_with_progress};

/// Options of `labfy bench store`.
#[derive(clap::Args)]
pub struct StoreBenchArgs {
    /// SPECIMEN size in evidence items.
    #[arg(long, default_value_t = 100_000)]
    size: u64,
    /// SPECIMEN seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write the SPECIMEN (default: a fresh temporary directory,
    /// removed at the end). An existing SPECIMEN of the same seed is reused and
    /// its generation is not timed.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Samples per read-model measurement.
    #[arg(long, default_value_t = 500)]
    samples: usize,
    /// Seconds of HTTP load per server and round.
    #[arg(long, default_value_t = 3)]
    http_seconds: u64,
    /// Rounds; each loads the bare server then the secured one, so drift in
    /// machine load hits both alike. The median ratio is reported.
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Concurrent HTTP connections.
    #[arg(long, default_value_t = 16)]
    connections: usize,
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<36} n={:<5} p50={:>9.3} ms  p99={:>9.3} ms  max={:>9.3} ms",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

pub(crate) fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// The SPECIMEN a benchmark runs on: generated (and timed) in `data_dir` or a
/// temporary directory removed at the end; an existing one of the same seed
/// is reused untimed.
pub(crate) struct BenchSpecimen {
    /// Keeps a temporary data directory alive.
    pub(crate) _tmp: Option<tempfile::TempDir>,
    /// The data directory.
    pub(crate) dir: PathBuf,
    /// The store, open read-write.
    pub(crate) store: Store,
    /// The SPECIMEN workspace.
    pub(crate) workspace: ObjectRef,
    /// Its investigation.
    pub(crate) investigation: ObjectRef,
}

impl BenchSpecimen {
    /// Opens or writes the SPECIMEN, printing the benchmark's header line.
    pub(crate) fn open(bench: &str, data_dir: Option<&Path>, size: u64, seed: u64) -> Result<Self, Failure> {
        let (tmp, dir) = match data_dir {
            Some(d) => (None, d.to_path_buf()),
            None => {
                let t = tempfile::TempDir::new()?;
                let d = t.path().to_path_buf();
                (Some(t), d)
            }
        };
        println!("# labfy bench {bench} — size {size} seed {seed} — data dir {}", dir.display());
        let mut store = Store::open(&dir)?;
        let (outcome, took) = time(|| generate_with_progress(&mut store, SpecimenSpec { seed, size }));
        let (workspace, investigation) = match outcome? {
            SpecimenOutcome::Created { workspace, investigation, .. } => {
                println!(
                    "{:<28} {size} items in {:.2} s ({:.0} items/s)",
                    "specimen generation",
                    took.as_secs_f64(),
                    size as f64 / took.as_secs_f64()
                );
                (workspace, investigation)
            }
            SpecimenOutcome::AlreadyPresent { workspace, investigation, .. } => {
                println!("{:<28} reused (not timed)", "specimen generation");
                (workspace, investigation)
            }
        };
        Ok(Self { _tmp: tmp, dir, store, workspace, investigation })
    }
}

pub(crate) fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::from(std::io::Error::other(e.to_string()))
}

/// Runs the benchmark.
pub fn store(args: StoreBenchArgs) -> Result<(), Failure> {
    let BenchSpecimen { _tmp, dir, store, workspace: ws, investigation: inv } =
        BenchSpecimen::open("store", args.data_dir.as_deref(), args.size, args.seed)?;
    let file_mib = std::fs::metadata(store.path()).map(|m| m.len() as f64 / 1048576.0).unwrap_or(0.0);
    println!("{:<28} {file_mib:.1} MiB", "database file");

    // Inputs drawn with a fixed stride so every run measures the same objects.
    let ro = ReadOnlyStore::open(&dir)?;
    let r = ro.reads();
    let ids = sample_refs(&dir, args.samples)?;
    let w = ws.id();
    let mut s = Vec::new();
    for q in &ids.queries {
        let (res, d) = time(|| r.search(w, &inv, q, 20));
        res?;
        s.push(d);
    }
    report("search (20 hits, bm25)", s);
    let mut s = Vec::new();
    for n in ids.entities.iter().chain(&ids.evidence) {
        let (res, d) = time(|| r.neighbors(w, n, 50));
        res?;
        s.push(d);
    }
    report("neighbours (limit 50)", s);
    // The ego graph the UI draws (SPEC U1): its default size, then the
    // largest on the investigation's biggest hubs.
    let mut s = Vec::new();
    for n in ids.entities.iter().chain(&ids.evidence) {
        let (res, d) = time(|| r.ego_graph(w, n, &EgoQuery { limit: 150, ..EgoQuery::default() }));
        res?;
        s.push(d);
    }
    report("ego graph (150 nodes)", s);
    let hubs: Vec<ObjectRef> = r.overview(w, &inv)?.top_entities.iter().map(|e| e.id).collect();
    let mut s = Vec::new();
    let mut largest = 0;
    for n in hubs.iter().cycle().take(hubs.len() * 4) {
        let (res, d) = time(|| r.ego_graph(w, n, &EgoQuery { limit: MAX_EGO_NODES, ..EgoQuery::default() }));
        largest = largest.max(res?.nodes.len() + 1);
        s.push(d);
    }
    report(&format!("ego graph of a hub ({largest} nodes)"), s);
    // The lists behind the counts (SPEC U2): 100 pages of 50 walked by key
    // from the first, for each sort the UI offers.
    for (name, what, sort, kind) in [
        ("list evidence by date", "evidence", "collected", None),
        ("list evidence by title", "evidence", "title", None),
        ("list entities by mentions", "entities", "mentions", None),
        ("list people by name", "entities", "name", Some("person")),
        ("list relations", "relations", "created", None),
        ("list relations works_for", "relations", "created", Some("works_for")),
    ] {
        let mut s = Vec::new();
        let mut after = None;
        for _ in 0..100 {
            let q = ListQuery {
                sort: Some(sort.into()),
                kind: kind.map(str::to_owned),
                after,
                limit: 50,
                ..ListQuery::default()
            };
            let (next, d) = time(|| match what {
                "evidence" => r.list_evidence(w, &inv, &q).map(|p| p.next),
                "entities" => r.list_entities(w, &inv, &q).map(|p| p.next),
                _ => r.list_relations(w, &inv, &q).map(|p| p.next),
            });
            s.push(d);
            after = next?;
            if after.is_none() {
                break;
            }
        }
        report(&format!("{name} (page of 50)"), s);
    }
    let mut s = Vec::new();
    for n in &ids.evidence {
        let (res, d) = time(|| r.provenance_trace(w, n, 8));
        res?;
        s.push(d);
    }
    report("provenance trace (depth 8)", s);
    let mut s = Vec::new();
    for n in &ids.evidence {
        let (res, d) = time(|| r.evidence_summary(w, n));
        res?;
        s.push(d);
    }
    report("evidence summary", s);
    let mut s = Vec::new();
    for _ in 0..(args.samples / 10).max(10) {
        let (res, d) = time(|| r.overview(w, &inv));
        res?;
        s.push(d);
    }
    report("overview", s);
    let job = r.jobs(w, &inv)?.first().map(|j| j.id).ok_or_else(|| fail("no job in the SPECIMEN"))?;
    drop(ro);

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(http_bench(store, dir.clone(), ws, job, &args))?;
    Ok(())
}

struct Samples {
    queries: Vec<String>,
    entities: Vec<ObjectRef>,
    evidence: Vec<ObjectRef>,
}

/// Deterministic inputs: every k-th entity and evidence item; search queries
/// are entity names (people, organisations, places, domains), as an analyst
/// would type them.
fn sample_refs(dir: &std::path::Path, n: usize) -> Result<Samples, Failure> {
    let conn = rusqlite::Connection::open_with_flags(
        dir.join(labfy_store::DB_FILE),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .map_err(fail)?;
    let pick = |sql: &str| -> Result<Vec<String>, Failure> {
        let mut stmt = conn.prepare(sql).map_err(fail)?;
        let rows = stmt.query_map([n as i64], |r| r.get::<_, String>(0)).map_err(fail)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(fail)
    };
    let stride = "WITH t AS (SELECT {col} AS v, row_number() OVER (ORDER BY {order}) AS k, count(*) OVER () AS c FROM {table} {filter})
                  SELECT v FROM t WHERE k % max(1, c / ?1) = 0 LIMIT ?1";
    let q = |col: &str, order: &str, table: &str, filter: &str| {
        stride.replace("{col}", col).replace("{order}", order).replace("{table}", table).replace("{filter}", filter)
    };
    let queries = pick(&q("name", "id", "entities", "WHERE kind IN ('person', 'organisation', 'location', 'domain')"))?;
    let parse = |v: Vec<String>| v.iter().map(|s| s.parse::<ObjectRef>().map_err(fail)).collect::<Result<Vec<_>, _>>();
    let entities = parse(pick(&q("'entity:' || id", "id", "entities", ""))?)?;
    let evidence = parse(pick(&q("'evidence:' || id", "seq", "evidence", ""))?)?;
    Ok(Samples { queries, entities, evidence })
}

async fn http_bench(
    store: Store,
    dir: PathBuf,
    ws: ObjectRef,
    job: ObjectRef,
    args: &StoreBenchArgs,
) -> Result<(), Failure> {
    let db = Db::new(store, dir);
    // Secured: the real application with all its layers. Generous rate limit:
    // reads are not rate limited anyway.
    let secured_l = listener::bind_loopback(listener::loopback(0))?;
    let secured_addr = secured_l.local_addr()?;
    let state = AppState::new(db.clone(), secured_addr.port(), ws.id(), RateLimit::default())
        .map_err(|e| Failure::new(labfy_core::ErrorKind::Internal, e.to_string()))?;
    let code = state.mint_login_code();
    let stop = Arc::new(tokio::sync::Notify::new());
    let s1 = stop.clone();
    tokio::spawn(labfy_server::serve(secured_l, state, async move { s1.notified().await }));
    // Bare: the same store read, serialised the same way, with no layer at all.
    let bare_l = tokio::net::TcpListener::bind(listener::loopback(0)).await?;
    let bare_addr = bare_l.local_addr()?;
    let wsid = ws.id();
    let bare = Router::new()
        .route(
            "/job",
            axum::routing::get(move |State(db): State<Db>| async move {
                db.read(move |r| r.job(wsid, &job)).await.map(axum::Json)
            }),
        )
        .with_state(db);
    tokio::spawn(async move { axum::serve(bare_l, bare).await });

    // Session for the secured server, as a browser would get it.
    let cookie = fetch_cookie(secured_addr, &code).await?;
    let secured_path = format!("/api/v1/jobs/{job}");
    println!(
        "# HTTP: {} connections, keep-alive, {} rounds of {} s per server",
        args.connections, args.rounds, args.http_seconds
    );
    let (mut ratios, mut cpu_ratios) = (Vec::new(), Vec::new());
    for round in 1..=args.rounds.max(1) {
        let bare = load_from_own_thread(bare_addr, "/job".into(), None, args).await?;
        let secured = load_from_own_thread(secured_addr, secured_path.clone(), Some(cookie.clone()), args).await?;
        let ratio = secured.rps / bare.rps.max(1e-9);
        let cpu_ratio =
            bare.server_cpu_per_request.as_secs_f64() / secured.server_cpu_per_request.as_secs_f64().max(1e-12);
        println!(
            "round {round}: bare {:>7.0} req/s {:>6.1} µs/req   secured {:>7.0} req/s {:>6.1} µs/req   ratio {ratio:.3}  cpu ratio {cpu_ratio:.3}",
            bare.rps,
            bare.server_cpu_per_request.as_secs_f64() * 1e6,
            secured.rps,
            secured.server_cpu_per_request.as_secs_f64() * 1e6,
        );
        ratios.push(ratio);
        cpu_ratios.push(cpu_ratio);
    }
    ratios.sort_by(f64::total_cmp);
    cpu_ratios.sort_by(f64::total_cmp);
    println!("{:<40} {:>8.3}", "secured / bare throughput (median)", ratios[ratios.len() / 2]);
    println!("{:<40} {:>8.3}", "bare / secured server CPU per request (median)", cpu_ratios[cpu_ratios.len() / 2]);
    stop.notify_waiters();
    Ok(())
}

/// The session cookie a one-time login `code` is exchanged for (SPEC T4).
pub(crate) async fn fetch_cookie(addr: SocketAddr, code: &str) -> Result<String, Failure> {
    let mut sender = connect::<Empty<Bytes>>(addr).await?;
    let req = Request::get(format!("/login?code={code}"))
        .header(header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .map_err(fail)?;
    let res = sender.send_request(req).await.map_err(fail)?;
    let cookie = res
        .headers()
        .get(header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .ok_or_else(|| Failure::from(std::io::Error::other("no session cookie from GET /login")))?;
    Ok(cookie)
}

/// One keep-alive HTTP/1 connection to `addr`, sending bodies of type `B`.
pub(crate) async fn connect<B>(addr: SocketAddr) -> Result<hyper::client::conn::http1::SendRequest<B>, Failure>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.map_err(fail)?;
    tokio::spawn(conn);
    Ok(sender)
}

/// CPU time (user + system) of this process (`RUSAGE_SELF`) or of the
/// calling thread (`RUSAGE_THREAD`).
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: getrusage only writes the rusage struct we pass, which is a
    // plain-old-data value fully initialised by zeroed().
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// One load measurement.
struct Load {
    /// Requests per second.
    rps: f64,
    /// CPU spent by the server side (the process minus the load thread) per request.
    server_cpu_per_request: Duration,
}

/// Runs [`load`] on a thread of its own with a single-threaded runtime, so the
/// load generator does not share the server's scheduler, and accounts the CPU
/// the server side spent per request.
async fn load_from_own_thread(
    addr: SocketAddr,
    path: String,
    cookie: Option<String>,
    args: &StoreBenchArgs,
) -> Result<Load, Failure> {
    let (connections, seconds) = (args.connections, args.http_seconds);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let process_before = cpu_time(libc::RUSAGE_SELF);
    std::thread::spawn(move || {
        let thread_before = cpu_time(libc::RUSAGE_THREAD);
        let result = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Failure::from)
            .and_then(|rt| rt.block_on(load(addr, &path, cookie.as_deref(), connections, seconds)));
        let _ = tx.send(result.map(|(rps, n)| (rps, n, cpu_time(libc::RUSAGE_THREAD).saturating_sub(thread_before))));
    });
    let (rps, requests, client_cpu) = rx.await.map_err(fail)??;
    let server_cpu = cpu_time(libc::RUSAGE_SELF).saturating_sub(process_before).saturating_sub(client_cpu);
    Ok(Load { rps, server_cpu_per_request: server_cpu / u32::try_from(requests.max(1)).unwrap_or(u32::MAX) })
}

/// Requests per second over `connections` keep-alive connections.
pub(crate) async fn load(
    addr: SocketAddr,
    path: &str,
    cookie: Option<&str>,
    connections: usize,
    seconds: u64,
) -> Result<(f64, u64), Failure> {
    let count = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let mut sender = connect(addr).await?;
        let (count, done) = (count.clone(), done.clone());
        let (path, cookie, host) = (path.to_owned(), cookie.map(str::to_owned), addr.to_string());
        tasks.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let mut b = Request::get(path.as_str()).header(header::HOST, host.as_str());
                if let Some(c) = &cookie {
                    b = b.header(header::COOKIE, c.as_str());
                }
                let req = b.body(Empty::<Bytes>::new()).map_err(fail)?;
                let res = sender.send_request(req).await.map_err(fail)?;
                if !res.status().is_success() {
                    return Err(Failure::from(std::io::Error::other(format!("HTTP {} from {path}", res.status()))));
                }
                res.into_body().collect().await.map_err(fail)?;
                count.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), Failure>(())
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    done.store(true, Ordering::Relaxed);
    let n = count.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    for t in tasks {
        t.await.map_err(fail)??;
    }
    Ok((n as f64 / secs, n))
}

/// Options of `labfy bench ipc`.
#[derive(clap::Args)]
pub struct IpcBenchArgs {
    /// Round trips measured (after 1,000 warm-up ones).
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
}

/// Round trip of a `Health` request to an authenticated IPC daemon, against
/// a bare Unix-socket echo of frames of the same size, on one runtime.
pub fn ipc(args: IpcBenchArgs) -> Result<(), Failure> {
    use labfy_ipc::auth::PeerPolicy;
    use labfy_ipc::client::Client;
    use labfy_ipc::messages::control::{ControlRequest, ControlResponse};
    use labfy_ipc::messages::{Boundary, Health, Role};
    use labfy_ipc::{secret, server};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let tmp = tempfile::TempDir::new()?;
        let run = tmp.path().join("run");
        secret::create_private_dir(&run).map_err(fail)?;
        let secret = secret::create_secret(&run).map_err(fail)?;
        let path = run.join("control.sock");
        let listener = server::bind(&path).map_err(fail)?;
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&run)?);
        let policy = PeerPolicy {
            boundary: Boundary::Control,
            uid,
            pids: None,
            secret: secret.clone(),
            handshake_timeout: labfy_ipc::auth::HANDSHAKE_TIMEOUT,
        };
        let started = Instant::now();
        tokio::spawn(server::serve(listener, policy, Arc::default(), move |_req: ControlRequest, _peer| async move {
            ControlResponse::Health(Health {
                role: Role::Governor,
                pid: std::process::id(),
                uptime_ms: started.elapsed().as_millis() as u64,
                ready: true,
                detail: "ok".into(),
                switch_to: None,
            })
        }));
        let mut client: Client<ControlRequest, ControlResponse> =
            Client::connect(&path, Boundary::Control, &secret).await.map_err(fail)?;
        let mut samples = Vec::with_capacity(args.calls);
        for i in 0..args.calls + 1000 {
            let t = Instant::now();
            client.call(ControlRequest::Health {}).await.map_err(fail)?;
            if i >= 1000 {
                samples.push(t.elapsed());
            }
        }
        // Bare reference: the same frame sizes echoed over a Unix socket,
        // no authentication, no JSON.
        let bare_path = run.join("bare.sock");
        let bare = tokio::net::UnixListener::bind(&bare_path)?;
        tokio::spawn(async move {
            if let Ok((mut s, _)) = bare.accept().await {
                let mut buf = vec![0u8; 4096];
                let reply = vec![b'x'; 140];
                loop {
                    let mut len = [0u8; 4];
                    if s.read_exact(&mut len).await.is_err() {
                        break;
                    }
                    let n = u32::from_be_bytes(len) as usize;
                    if s.read_exact(&mut buf[..n.min(4096)]).await.is_err() {
                        break;
                    }
                    let _ = s.write_all(&(reply.len() as u32).to_be_bytes()).await;
                    let _ = s.write_all(&reply).await;
                }
            }
        });
        let mut s = tokio::net::UnixStream::connect(&bare_path).await?;
        let request = vec![b'x'; 40];
        let mut bare_samples = Vec::with_capacity(args.calls);
        let mut buf = vec![0u8; 4096];
        for i in 0..args.calls + 1000 {
            let t = Instant::now();
            s.write_all(&(request.len() as u32).to_be_bytes()).await?;
            s.write_all(&request).await?;
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await?;
            let n = u32::from_be_bytes(len) as usize;
            s.read_exact(&mut buf[..n]).await?;
            if i >= 1000 {
                bare_samples.push(t.elapsed());
            }
        }
        println!("# labfy bench ipc — {} round trips each, one connection", args.calls);
        let p50 = |v: &mut Vec<Duration>| {
            v.sort();
            percentile(v, 0.5)
        };
        let (mut a, mut b) = (samples.clone(), bare_samples.clone());
        let (ipc_p50, bare_p50) = (p50(&mut a), p50(&mut b));
        report("IPC Health round trip", samples);
        report("bare Unix echo round trip", bare_samples);
        println!("{:<28} {:>9.2}", "IPC / bare p50", ipc_p50.as_secs_f64() / bare_p50.as_secs_f64().max(1e-12));
        Ok::<(), Failure>(())
    })
}

/// Options of `labfy bench up`.
#[derive(clap::Args)]
pub struct UpBenchArgs {
    /// Starts measured.
    #[arg(long, default_value_t = 10)]
    runs: usize,
}

/// Time from starting `labfy up` (data directory already holding the default
/// SPECIMEN) to "every child healthy" (the URL line) and to the first 200 from
/// the UI; each run is then stopped with SIGTERM.
pub fn up(args: UpBenchArgs) -> Result<(), Failure> {
    use std::io::{BufRead, BufReader, Read, Write};
    let tmp = tempfile::TempDir::new()?;
    let data = tmp.path().join("data");
    let mut store = Store::open(&data)?;
    generate_with_progress(&mut store, SpecimenSpec::default())?;
    drop(store);
    let exe = std::env::current_exe()?;
    let (mut healthy, mut answering) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        let start = Instant::now();
        let mut child = std::process::Command::new(&exe)
            .args(["up", "--port", "0", "--data-dir"])
            .arg(&data)
            .arg("--runtime-dir")
            .arg(tmp.path().join("run"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let mut link = None;
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            if let Some(rest) = line.strip_prefix("Open http://127.0.0.1:") {
                link = rest.split_once('/').and_then(|(p, path)| Some((p.parse::<u16>().ok()?, format!("/{path}"))));
                break;
            }
        }
        let (port, path) = link.ok_or_else(|| fail("labfy up printed no login link"))?;
        healthy.push(start.elapsed());
        // The printed one-time link, as the analyst opens it: 303 to the UI.
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head)?;
        if &head[9..12] != b"303" {
            return Err(fail(format!("the login link answered {}", String::from_utf8_lossy(&head))));
        }
        answering.push(start.elapsed());
        // SAFETY: kill(2) on the pid of a child we hold and have not reaped.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        child.wait()?;
    }
    println!("# labfy bench up — {} starts on a data dir holding the default SPECIMEN", args.runs);
    report("up → all children healthy", healthy);
    report("up → login link answered (303)", answering);
    Ok(())
}
