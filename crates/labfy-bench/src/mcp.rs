//! `labfy-bench mcp` (SPEC L5): one `tools/call` of a low read tool
//! (`graph.get_node`) through `labfy mcp` on stdio, against the same gateway
//! call as `POST /api/v1/agent-tools/calls` over a kept-alive HTTP
//! connection (as `labfy mcp` keeps its own) — the bare reference — in the same run, on one `labfy up`
//! serving the default SPECIMEN. The two alternate, each paced under the
//! server's rate guard on writes (two a second per session), so neither
//! waits on it.

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use clap::Args;
use labfy::Failure;
use serde_json::{Value, json};

use http_body_util::Full;
use hyper::body::Bytes;

use crate::common::{connect, fail, fetch_session, machine, percentile, report, request, sibling, stop_child};

/// `labfy-bench mcp`.
#[derive(Args)]
pub struct McpBenchArgs {
    /// Calls measured on each side.
    #[arg(long, default_value_t = 60)]
    calls: usize,
}

/// Pause between two calls of one side (the rate guard allows two a second).
const PACE: Duration = Duration::from_millis(550);

pub fn mcp(args: McpBenchArgs) -> Result<(), Failure> {
    let tmp = tempfile::TempDir::new()?;
    let (data, run) = (tmp.path().join("data"), tmp.path().join("run"));
    let labfy = sibling("labfy")?;
    let mut up = std::process::Command::new(&labfy)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(&data)
        .arg("--runtime-dir")
        .arg(&run)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let result = bench(&args, &labfy, &run, &mut up);
    stop_child(&mut up, Duration::from_secs(10));
    result
}

fn bench(
    args: &McpBenchArgs,
    labfy: &std::path::Path,
    run: &std::path::Path,
    up: &mut std::process::Child,
) -> Result<(), Failure> {
    let stdout = up.stdout.take().ok_or_else(|| fail("no stdout from labfy up"))?;
    let mut link = None;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        if let Some(rest) = line.strip_prefix("Open http://127.0.0.1:") {
            link = rest.split_once("/login?code=").and_then(|(p, c)| Some((p.parse::<u16>().ok()?, c.to_owned())));
            break;
        }
    }
    let (port, code) = link.ok_or_else(|| fail("labfy up printed no login link"))?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (inv, entity, (auth, csrf)) = runtime.block_on(async {
        let auth = fetch_session(addr, &code).await?;
        let get = |path: String| {
            let auth = auth.clone();
            async move {
                let (_, body) = request(addr, "GET", &path, &[("Authorization", &auth)], None).await?;
                serde_json::from_slice::<Value>(&body).map_err(fail)
            }
        };
        let session = get("/api/v1/session".into()).await?;
        let csrf = session["csrf_token"].as_str().unwrap_or_default().to_owned();
        let ws = session["workspace_id"].as_str().unwrap_or_default().to_owned();
        let invs = get(format!("/api/v1/workspaces/{ws}/investigations")).await?;
        let inv = invs["investigations"][0]["id"].as_str().ok_or_else(|| fail("no investigation"))?.to_owned();
        let overview = get(format!("/api/v1/investigations/{inv}/overview")).await?;
        let entity = overview["top_entities"][0]["id"].as_str().ok_or_else(|| fail("no entity"))?.to_owned();
        Ok::<_, Failure>((inv, entity, (auth, csrf)))
    })?;
    let origin = format!("http://{addr}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("X-CSRF-Token", csrf.as_str()),
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    // The reference keeps its connection alive, as `labfy mcp` does.
    let sender = std::cell::RefCell::new(Some(runtime.block_on(connect::<Full<Bytes>>(addr))?));
    let post = |path: &str, body: &Value| -> Result<(u16, Value), Failure> {
        runtime.block_on(async {
            let mut b = axum::http::Request::builder().method("POST").uri(path).header("Host", addr.to_string());
            for (name, value) in headers {
                b = b.header(name, value);
            }
            let req = b.body(Full::new(Bytes::from(body.to_string()))).map_err(fail)?;
            let mut conn = sender.take().ok_or_else(|| fail("the reference's connection is gone"))?;
            let res = conn.send_request(req).await.map_err(fail);
            sender.replace(Some(conn));
            let res = res?;
            let status = res.status().as_u16();
            let bytes = http_body_util::BodyExt::collect(res.into_body()).await.map_err(fail)?.to_bytes();
            Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
        })
    };
    let new_turn = || -> Result<String, Failure> {
        let body = json!({"question": "labfy-bench mcp", "investigation_id": inv, "mode": "manual"});
        let (_, turn) = post("/api/v1/agent-tools/turns", &body)?;
        turn["turn_id"].as_str().map(str::to_owned).ok_or_else(|| fail(format!("no turn: {turn}")))
    };

    let mut server = std::process::Command::new(labfy)
        .args(["mcp", "--investigation", &inv, "--runtime-dir"])
        .arg(run)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let mut to = server.stdin.take().ok_or_else(|| fail("no stdin"))?;
    let mut from = BufReader::new(server.stdout.take().ok_or_else(|| fail("no stdout"))?);
    let mut rpc = |id: usize, method: &str, params: Value| -> Result<Value, Failure> {
        writeln!(to, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        to.flush()?;
        let mut line = String::new();
        from.read_line(&mut line)?;
        serde_json::from_str(&line).map_err(fail)
    };
    rpc(0, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}}))?;

    let (mut http, mut mcp) = (Vec::with_capacity(args.calls), Vec::with_capacity(args.calls));
    let mut turn = new_turn()?;
    for i in 0..args.calls {
        // A turn takes 32 calls (the gateway's budget): a fresh one first.
        if i > 0 && i % 30 == 0 {
            turn = new_turn()?;
        }
        let call = json!({
            "turn_id": turn,
            "call_id": uuid::Uuid::new_v4(),
            "tool_id": "graph.get_node",
            "input": {"node_id": entity},
            "context": {"investigation_id": inv},
            "object_refs": [inv, entity],
            "idempotency_key": uuid::Uuid::new_v4().to_string(),
        });
        let start = Instant::now();
        let (status, result) = post("/api/v1/agent-tools/calls", &call)?;
        http.push(start.elapsed());
        if status != 200 || result["status"] != "COMPLETED" {
            return Err(fail(format!("HTTP call {i}: {status} {result}")));
        }
        std::thread::sleep(PACE);
        let start = Instant::now();
        let answer = rpc(i + 1, "tools/call", json!({"name": "graph.get_node", "arguments": {"node_id": entity}}))?;
        mcp.push(start.elapsed());
        if answer["result"]["structuredContent"]["status"] != "COMPLETED" {
            return Err(fail(format!("MCP call {i}: {answer}")));
        }
        std::thread::sleep(PACE);
    }
    drop(to);
    let _ = server.wait();
    println!("# labfy-bench mcp — {} calls a side, alternating; {}", args.calls, machine());
    let (mut h, mut m) = (http.clone(), mcp.clone());
    h.sort();
    m.sort();
    report("HTTP POST /api/v1/agent-tools/calls", http);
    report("MCP tools/call through labfy mcp", mcp);
    let (hp, mp) = (percentile(&h, 0.5).as_secs_f64(), percentile(&m, 0.5).as_secs_f64());
    println!("{:<36} {:.2}", "p50 MCP / HTTP", mp / hp.max(1e-9));
    Ok(())
}
