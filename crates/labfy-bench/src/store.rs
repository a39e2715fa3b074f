//! `labfy-bench store`: figures, not assertions (docs/PERFORMANCE.md).
//!
//! 1. Time SPECIMEN generation of `--size` items.
//! 2. Time the read models on it (p50/p99): full-text search, neighbours,
//!    provenance trace, overview, evidence summary.
//! 3. HTTP throughput of one small read route (`GET /api/v1/jobs/{ref}`) with
//!    every security layer, against a bare axum route doing the same store read
//!    with no layer, in the same process and run; prints the ratio.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use labfy_core::ObjectRef;
use labfy_server::session::RateLimit;
use labfy_server::{AppState, db::Db, listener};
use labfy_store::{EgoQuery, ListQuery, MAX_EGO_NODES, ReadOnlyStore, Store};

use labfy::Failure;

use crate::common::{BenchSpecimen, SpecimenArgs, fail, fetch_session, load, report, time};

/// Options of `labfy-bench store`.
#[derive(clap::Args)]
pub struct StoreBenchArgs {
    #[command(flatten)]
    specimen: SpecimenArgs,
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

/// Runs the benchmark.
pub fn store(args: StoreBenchArgs) -> Result<(), Failure> {
    let BenchSpecimen { _tmp, dir, store, workspace: ws, investigation: inv } =
        BenchSpecimen::open("store", &args.specimen)?;
    let file_mib = std::fs::metadata(store.path()).map(|m| m.len() as f64 / 1048576.0).unwrap_or(0.0);
    println!("{:<28} {file_mib:.1} MiB", "database file");

    // Inputs drawn with a fixed stride so every run measures the same objects.
    let ro = ReadOnlyStore::open(&dir)?;
    let r = ro.reads();
    let ids = sample_refs(&dir, args.samples)?;
    let w = ws.id();
    // Twice over the same queries: the first pass counts each word's
    // documents once (a fresh process), the second finds them counted (an
    // analyst's session); the slowest of the first are named.
    for pass in ["first pass", "again"] {
        let mut s = Vec::new();
        let mut slowest = Vec::new();
        for q in &ids.queries {
            let (res, d) = time(|| r.search(w, &inv, q, 20));
            slowest.push((d, q.as_str(), res?.ranked_among.is_some()));
            s.push(d);
        }
        report(&format!("search (20 hits, BM25), {pass}"), s);
        if pass == "first pass" {
            slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
            for (d, q, windowed) in slowest.iter().take(5) {
                let note = if *windowed { " (more matches than the window)" } else { "" };
                println!("    {:>9.3} ms  {q:?}{note}", d.as_secs_f64() * 1e3);
            }
        }
    }
    // Typing: the first word of each name (six letters or more) cut to its
    // first four (« Garo » of Garonne): a prefix, unless the index holds
    // those four letters as a word of their own.
    let typed: Vec<String> = ids
        .queries
        .iter()
        .filter_map(|q| q.split(|c: char| !c.is_alphanumeric()).find(|w| w.chars().count() >= 6))
        .map(|w| w.chars().take(4).collect())
        .collect();
    let mut s = Vec::new();
    for q in &typed {
        let (res, d) = time(|| r.search(w, &inv, q, 20));
        res?;
        s.push(d);
    }
    report("search, a word being typed (4 letters)", s);
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
    let cookie = fetch_session(secured_addr, &code).await?;
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
