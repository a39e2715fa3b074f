//! `labfy-bench gateway`: the gateway's own cost (issue 4). In process: a
//! `graph.get_node` call through the whole pipeline (envelope, idempotency,
//! schema, resolution, policy, service, result and event rings) against the
//! bare read model on the same kind of connection; the difference of the
//! medians is the gateway's overhead; then the same calls each waiting for
//! the journal to hold them (SPEC K1), durability's cost. Over HTTP: `POST /calls` throughput
//! against `GET /api/v1/graph/nodes/{ref}` (the same read, same security
//! layers), on keep-alive connections.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{Request, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use labfy::Failure;
use labfy_core::ObjectRef;
use labfy_gateway::protocol::{CallContext, CallRequest, Lang, NewTurn, TurnMode};
use labfy_gateway::{AgentGateway, Environment, Scope};
use labfy_server::session::RateLimit;
use labfy_server::{AppState, db::Db, listener};
use labfy_store::{Store, WorkspaceClass};
use serde_json::json;
use uuid::Uuid;

use crate::common::{BenchSpecimen, SpecimenArgs, connect, fail, fetch_session, percentile};

/// Options of `labfy-bench gateway`.
#[derive(clap::Args)]
pub struct GatewayBenchArgs {
    #[command(flatten)]
    specimen: SpecimenArgs,
    /// In-process calls measured.
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
    /// Seconds of HTTP load per route.
    #[arg(long, default_value_t = 3)]
    http_seconds: u64,
    /// Concurrent HTTP connections.
    #[arg(long, default_value_t = 8)]
    connections: usize,
}

/// Runs the benchmark.
pub fn gateway(args: GatewayBenchArgs) -> Result<(), Failure> {
    let BenchSpecimen { _tmp, dir, store, workspace: ws, investigation: inv } =
        BenchSpecimen::open("gateway", &args.specimen)?;
    let evidence: Vec<ObjectRef> =
        store.reads().overview(ws.id(), &inv)?.recent_evidence.iter().map(|e| e.id).collect();
    let scope = Scope { workspace: ws.id(), class: WorkspaceClass::Specimen };
    let env = Environment::offline("benchmark");

    // Bare reference: the read model alone, on its own connection.
    let bare_store = Store::open(&dir)?;
    let reads = bare_store.reads();
    let mut bare = Vec::with_capacity(args.calls);
    for i in 0..args.calls {
        let ev = &evidence[i % evidence.len()];
        let t = Instant::now();
        reads.node(scope.workspace, ev)?;
        bare.push(t.elapsed());
    }
    // The server's backend: pooled read-only connections beside one writer
    // (the journal's, SPEC F4), as `labfy-server` lends it to the gateway.
    let db = labfy_server::db::Db::new(Store::open(&dir)?, dir.clone());
    let gw = AgentGateway::new(Arc::new(db)).map_err(fail)?.with_journal(labfy_store::JournalStore::open(&dir)?);
    let mut through = timed_calls(&gw, scope, &env, &evidence, args.calls, "bench", None)?;
    // The same calls, each answer waiting until the journal holds it (SPEC
    // K1: what the server does before it sends a call's result).
    let journal = gw.journal().ok_or_else(|| fail("the gateway has no journal"))?;
    let mut durable = timed_calls(&gw, scope, &env, &evidence, args.calls, "bench-durable", Some(&journal))?;
    bare.sort();
    through.sort();
    durable.sort();
    let (b50, b99) = (percentile(&bare, 0.50), percentile(&bare, 0.99));
    let (g50, g99) = (percentile(&through, 0.50), percentile(&through, 0.99));
    let (d50, d99) = (percentile(&durable, 0.50), percentile(&durable, 0.99));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("{:<44} p50 {:>8.1} µs  p99 {:>8.1} µs", "bare read model (graph node)", us(b50), us(b99));
    println!("{:<44} p50 {:>8.1} µs  p99 {:>8.1} µs", "gateway call graph.get_node (in process)", us(g50), us(g99));
    println!(
        "{:<44} {:>8.1} µs   ratio {:.2}",
        "gateway overhead (p50 difference)",
        us(g50.saturating_sub(b50)),
        us(g50) / us(b50).max(1e-9)
    );
    println!("{:<44} p50 {:>8.1} µs  p99 {:>8.1} µs", "the same call, answered once durable (K1)", us(d50), us(d99));
    println!(
        "{:<44} {:>8.1} µs   ratio {:.2}",
        "durability's cost (p50 difference)",
        us(d50.saturating_sub(g50)),
        us(d50) / us(g50).max(1e-9)
    );
    drop(journal);
    drop(gw);

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(http(store, dir.clone(), ws, evidence, &args))
}

/// `calls` timed `graph.get_node` calls through `gw`, a new manual turn
/// every 30; with `durable`, each timed until the journal holds it (K1).
fn timed_calls(
    gw: &AgentGateway,
    scope: Scope,
    env: &Environment,
    evidence: &[ObjectRef],
    calls: usize,
    key: &str,
    durable: Option<&labfy_gateway::journal::Journal>,
) -> Result<Vec<Duration>, Failure> {
    let wait = |j: &labfy_gateway::journal::Journal| j.wait_durable(j.ticket(), Duration::from_secs(10)).map_err(fail);
    let mut times = Vec::with_capacity(calls);
    let mut turn = Uuid::nil();
    for i in 0..calls {
        if i % 30 == 0 {
            let new = NewTurn {
                question: "bench".into(),
                investigation_id: None,
                exclusions: vec![],
                mode: Some(TurnMode::Manual),
                lang: Lang::Fr,
            };
            turn = gw.open_turn(scope, &new).map_err(fail)?.turn_id;
            durable.map(wait).transpose()?;
        }
        let req = CallRequest {
            turn_id: turn,
            call_id: Uuid::new_v4(),
            tool_id: "graph.get_node".into(),
            input: json!({"node_id": evidence[i % evidence.len()].to_string()}),
            context: CallContext::default(),
            object_refs: vec![],
            idempotency_key: format!("{key}-{i}"),
        };
        let t = Instant::now();
        let r = gw.call(scope, env, req).map_err(fail)?;
        durable.map(wait).transpose()?;
        times.push(t.elapsed());
        if r.status != labfy_gateway::protocol::ResultStatus::Completed {
            return Err(fail(format!("graph.get_node answered {:?}: {:?}", r.status, r.diagnostic)));
        }
    }
    Ok(times)
}

async fn http(
    store: Store,
    dir: PathBuf,
    ws: ObjectRef,
    evidence: Vec<ObjectRef>,
    args: &GatewayBenchArgs,
) -> Result<(), Failure> {
    let l = listener::bind_loopback(listener::loopback(0))?;
    let addr = l.local_addr()?;
    // The rate limiter would cap mutations at 2/s: lifted for the benchmark.
    let limit = RateLimit { burst: u32::MAX, per_second: 1e9 };
    let state = AppState::new(Db::new(store, dir), addr.port(), ws.id(), limit).map_err(fail)?;
    let code = state.mint_login_code();
    let stop = Arc::new(tokio::sync::Notify::new());
    let s1 = stop.clone();
    tokio::spawn(labfy_server::serve(l, state, async move { s1.notified().await }));
    let (cookie, csrf) = session(addr, &code).await?;
    let node = evidence[0];
    let get_rps = load(addr, &cookie, &csrf, args, Kind::Get(node)).await?;
    let post_rps = load(addr, &cookie, &csrf, args, Kind::Call(evidence)).await?;
    println!("{:<44} {:>8.0} req/s", "HTTP GET /api/v1/graph/nodes/{ref}", get_rps);
    println!(
        "{:<44} {:>8.0} calls/s   ratio {:.2}",
        "HTTP POST /api/v1/agent-tools/calls",
        post_rps,
        post_rps / get_rps.max(1e-9)
    );
    stop.notify_waiters();
    Ok(())
}

#[derive(Clone)]
enum Kind {
    Get(ObjectRef),
    Call(Vec<ObjectRef>),
}

async fn send(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    method: &str,
    path: &str,
    cookie: &str,
    csrf: &str,
    body: String,
) -> Result<serde_json::Value, Failure> {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, addr.to_string())
        .header(header::AUTHORIZATION, cookie)
        .header(header::ORIGIN, format!("http://{addr}"))
        .header("X-CSRF-Token", csrf)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(fail)?;
    let res = sender.send_request(req).await.map_err(fail)?;
    let status = res.status();
    let bytes = res.into_body().collect().await.map_err(fail)?.to_bytes();
    if !status.is_success() {
        return Err(fail(format!("HTTP {status} from {path}: {}", String::from_utf8_lossy(&bytes))));
    }
    serde_json::from_slice(&bytes).map_err(fail)
}

/// A session as a browser gets it: the cookie for a login link, then its
/// CSRF token.
async fn session(addr: SocketAddr, code: &str) -> Result<(String, String), Failure> {
    let cookie = fetch_session(addr, code).await?;
    let mut s = connect(addr).await?;
    let v = send(&mut s, addr, "GET", "/api/v1/session", &cookie, "", String::new()).await?;
    Ok((cookie, v["csrf_token"].as_str().unwrap_or_default().to_owned()))
}

async fn load(addr: SocketAddr, cookie: &str, csrf: &str, args: &GatewayBenchArgs, kind: Kind) -> Result<f64, Failure> {
    let count = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..args.connections {
        let mut sender = connect(addr).await?;
        let (count, done, kind) = (count.clone(), done.clone(), kind.clone());
        let (cookie, csrf) = (cookie.to_owned(), csrf.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut i = 0usize;
            let mut turn = String::new();
            while !done.load(Ordering::Relaxed) {
                match &kind {
                    Kind::Get(node) => {
                        send(
                            &mut sender,
                            addr,
                            "GET",
                            &format!("/api/v1/graph/nodes/{node}"),
                            &cookie,
                            &csrf,
                            String::new(),
                        )
                        .await?;
                    }
                    Kind::Call(evidence) => {
                        if i % 30 == 0 {
                            let t = send(
                                &mut sender,
                                addr,
                                "POST",
                                "/api/v1/agent-tools/turns",
                                &cookie,
                                &csrf,
                                json!({"question": "bench", "mode": "manual"}).to_string(),
                            )
                            .await?;
                            turn = t["turn_id"].as_str().unwrap_or_default().to_owned();
                        }
                        let body = json!({"turn_id": turn, "call_id": Uuid::new_v4(), "tool_id": "graph.get_node",
                            "input": {"node_id": evidence[i % evidence.len()].to_string()}, "context": {},
                            "object_refs": [], "idempotency_key": format!("c{c}-{i}")});
                        let r = send(
                            &mut sender,
                            addr,
                            "POST",
                            "/api/v1/agent-tools/calls",
                            &cookie,
                            &csrf,
                            body.to_string(),
                        )
                        .await?;
                        if r["status"] != "COMPLETED" {
                            return Err(fail(format!("call answered {}", r["status"])));
                        }
                    }
                }
                i += 1;
                count.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), Failure>(())
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.http_seconds)).await;
    done.store(true, Ordering::Relaxed);
    let n = count.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    for t in tasks {
        t.await.map_err(fail)??;
    }
    Ok(n as f64 / secs)
}
