//! What the benchmarks share: percentiles, timing, the SPECIMEN they run
//! on, the programs beside this one, and an HTTP/1 load generator.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{Request, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use labfy::{Failure, generate_with_progress};
use labfy_core::ObjectRef;
use labfy_store::Store;
use labfy_store::specimen::{SpecimenOutcome, SpecimenSpec};

/// The `p` quantile (0..=1) of sorted samples.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Prints p50, p99 and the maximum of `samples`, one line.
pub(crate) fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<36} n={:<5} p50={:>9.3} ms  p99={:>9.3} ms  max={:>9.3} ms",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

/// Runs `f` and times it.
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

/// The SPECIMEN options of a benchmark that runs on one.
#[derive(clap::Args)]
pub(crate) struct SpecimenArgs {
    /// SPECIMEN size in evidence items.
    #[arg(long, default_value_t = 100_000)]
    size: u64,
    /// SPECIMEN seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write the SPECIMEN (default: a fresh temporary directory,
    /// removed at the end). An existing SPECIMEN of the same seed is reused
    /// and its generation is not timed (for `cases`, its extraction must not
    /// have run yet for the extraction figures to mean anything).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

impl BenchSpecimen {
    /// Opens or writes the SPECIMEN, printing the benchmark's header line.
    pub(crate) fn open(bench: &str, args: &SpecimenArgs) -> Result<Self, Failure> {
        let SpecimenArgs { size, seed, ref data_dir } = *args;
        let (tmp, dir) = match data_dir.as_deref() {
            Some(d) => (None, d.to_path_buf()),
            None => {
                let t = tempfile::TempDir::new()?;
                let d = t.path().to_path_buf();
                (Some(t), d)
            }
        };
        println!("# labfy-bench {bench} — size {size} seed {seed} — data dir {}", dir.display());
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

/// The `Authorization` value of the session a one-time login `code` is
/// exchanged for (SPEC T4, V1): the token the login page hands over.
pub(crate) async fn fetch_session(addr: SocketAddr, code: &str) -> Result<String, Failure> {
    let mut sender = connect::<Empty<Bytes>>(addr).await?;
    let req = Request::get(format!("/login?code={code}"))
        .header(header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .map_err(fail)?;
    let res = sender.send_request(req).await.map_err(fail)?;
    let body = http_body_util::BodyExt::collect(res.into_body()).await.map_err(fail)?.to_bytes();
    let page = String::from_utf8_lossy(&body);
    let token = labfy_ipc::login::session_in_page(&page)
        .ok_or_else(|| Failure::from(std::io::Error::other("no session from GET /login")))?;
    Ok(format!("Bearer {token}"))
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
                    b = b.header(header::AUTHORIZATION, c.as_str());
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

/// A Labfy program beside this one (`cargo build --bins` puts them all in
/// one folder): `labfy`, `labfy-server`, `labfy-governor`.
pub(crate) fn sibling(program: &str) -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()?;
    let path = exe.parent().unwrap_or(Path::new(".")).join(program);
    if path.is_file() {
        Ok(path)
    } else {
        Err(fail(format!(
            "{program} not found beside {}: build every program first (cargo build --bins)",
            exe.display()
        )))
    }
}

/// Stops a child we started: SIGTERM, then SIGKILL after `grace`; reaps it.
/// Does nothing to a child that has already exited.
pub(crate) fn stop_child(child: &mut std::process::Child, grace: Duration) {
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) on the pid of a child we hold and have not reaped.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// One request on a connection of its own (a server restarted between two
/// requests costs one refused connection, not a broken pool): its status and
/// body. No connection, or one dropped before the answer, is an error.
pub(crate) async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Result<(u16, Bytes), Failure> {
    let mut sender = connect::<http_body_util::Full<Bytes>>(addr).await?;
    let mut b = Request::builder().method(method).uri(path).header(header::HOST, addr.to_string());
    for (name, value) in headers {
        b = b.header(*name, *value);
    }
    let req = b.body(http_body_util::Full::new(Bytes::from(body.unwrap_or_default()))).map_err(fail)?;
    let res = sender.send_request(req).await.map_err(fail)?;
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.map_err(fail)?.to_bytes();
    Ok((status, body))
}

/// One line about the machine, the build and the load, for a benchmark's
/// header (its figures mean little without them).
pub(crate) fn machine() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let kernel = read("/proc/sys/kernel/osrelease");
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let load = read("/proc/loadavg");
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "{cores} CPUs ({cpu}), {:.1} GiB RAM, Linux {}, {profile} build, load average {}",
        mem_kib as f64 / (1024.0 * 1024.0),
        kernel.trim(),
        load.join(" ")
    )
}
