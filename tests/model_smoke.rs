//! The real local-model smoke (SPEC M, issue "Local model agent runtime"):
//! `labfy up` with the agent in local-model mode; the governor starts the
//! real llama-server with the small real GGUF model (tests/llama-fixture)
//! beside the workspace server, on the fixed port the server is configured
//! with; a turn on the SPECIMEN workspace runs through the runtime, the
//! strict protocol and the gateway. The model is a 270M-parameter *base*
//! model: constrained decoding makes its answers reliable in shape, not in
//! meaning (it picks tools by imitation), so the analyst narrows the turn to
//! the investigation's overview and `research.prepare` — the `tools` of a
//! turn, an API feature any analyst has. The model reads the overview,
//! prepares research on objects it copies from the result, and the turn
//! pauses; then the human grant, the synthetic campaign, the resume and the
//! final summary. At temperature 0 the small model's answers are the same
//! from run to run on the same build.
//!
//! The same test runs a bigger model by pointing the variables at it, e.g.
//! the seed's `Huihui-Qwen3.5-9B-Q4_K_M.gguf` (docs/OPERATIONS.md).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

fn wait_turn(port: u16, cookie: &str, id: &str, limit: Duration) -> Value {
    let start = Instant::now();
    loop {
        let (s, t) = get(port, cookie, &format!("/api/v1/agent-runtime/turns/{id}"));
        assert_eq!(s, 200, "{t}");
        if !matches!(t["status"].as_str(), Some("QUEUED" | "RUNNING")) {
            return t;
        }
        assert!(start.elapsed() < limit, "the turn did not end within {limit:?}: {t}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_real_local_model_turn_through_the_runtime_the_protocol_and_the_gateway() {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (Some(llama), Some(gguf), Some(sha)) =
        (var("LABFY_LLAMA_SERVER"), var("LABFY_TEST_GGUF"), var("LABFY_TEST_GGUF_SHA256"))
    else {
        assert!(var("LABFY_REQUIRE_MODEL").is_none(), "LABFY_REQUIRE_MODEL is set but the fixture is not");
        eprintln!("skipped: no llama-server fixture (eval \"$(tests/llama-fixture)\")");
        return;
    };
    let model_id = "gemma-3-270m";
    let dir = TempDir::new().unwrap();
    let data = dir.path();
    let mut child = Command::new(BIN)
        .env("LABFY_ARTI_CONFIG", OFFLINE_ARTI)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(data)
        .arg("--runtime-dir")
        .arg(runtime_dir(data))
        .env("LABFY_LLAMA_SERVER", &llama)
        .env("LABFY_AGENT_MODE", "local-model")
        // The model `labfy model start` runs, on its socket (SPEC D1).
        .env("LABFY_AGENT_MODEL_ENDPOINT", "governed")
        .env("LABFY_AGENT_MODEL_ID", model_id)
        .env("LABFY_AGENT_MODEL_TIMEOUT_SECONDS", "180")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _up = Guard(child);
    let (port, _) = read_url(stdout);
    let (cookie, csrf) = login(port, &runtime_dir(data));
    let run = runtime_dir(data);

    // Before the model runs, the runtime says it is unavailable — never the demo agent.
    let (_, status) = get(port, &cookie, "/api/v1/agent-runtime/status");
    assert_eq!(status["driver"], "local_model", "{status}");
    assert_eq!(status["ready"], false, "{status}");

    let o = Command::new(BIN)
        .args(["model", "start", "--runtime-dir"])
        .arg(&run)
        .args(["--gguf", &gguf, "--sha256", &sha, "--ctx", "8192"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let (_, status) = get(port, &cookie, "/api/v1/agent-runtime/status");
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(status["label"], format!("Agent local · {model_id}"));

    let started = Instant::now();
    let (s, turn) = post(
        port,
        &cookie,
        &csrf,
        "/api/v1/agent-runtime/turns",
        &json!({
            "question": "Prépare une recherche web sur les sociétés les plus citées de cette enquête.",
            "idempotency_key": "smoke-1",
            // The analyst keeps the turn to reading the overview, then
            // preparing research (the small base model picks tools by
            // imitation, not by meaning; a bigger one needs no narrowing).
            "tools": ["investigation.get_overview", "research.prepare"],
        }),
    );
    assert_eq!(s, 202, "{turn}");
    let id = turn["turn_id"].as_str().unwrap().to_owned();
    let t = wait_turn(port, &cookie, &id, Duration::from_secs(600));
    let status = t["status"].as_str().unwrap().to_owned();
    println!(
        "turn ended {status} after {:.1} s: {} rounds, {} tool calls, {} repairs; error {:?}",
        started.elapsed().as_secs_f64(),
        t["rounds"],
        t["tool_calls"],
        t["repairs"],
        t["error"]
    );
    // What the runtime did, as the analyst's activity shows it.
    let (_, events) = get(port, &cookie, "/api/v1/agent-runtime/events?cursor=0&limit=128");
    for e in events["events"].as_array().unwrap() {
        println!("  {} {}", e["kind"].as_str().unwrap_or(""), e["detail"].as_str().unwrap_or(""));
    }
    // Every end state is one of M7's, reached through the pipeline; the
    // protocol held (a second bad answer would be MODEL_PROTOCOL_ERROR).
    assert!(["AUTHORIZATION_REQUIRED", "COMPLETED", "BUDGET_EXHAUSTED", "FAILED"].contains(&status.as_str()), "{t}");
    assert_ne!(status, "MODEL_UNAVAILABLE", "{t}");
    assert!(t["rounds"].as_u64().unwrap() >= 1);
    assert!(t["gateway_turn_id"].is_string(), "{t}");
    // What the gateway saw: every call of the turn went through it.
    let gw = t["gateway_turn_id"].as_str().unwrap();
    let (_, gw_turn) = get(port, &cookie, &format!("/api/v1/agent-tools/turns/{gw}"));
    assert_eq!(gw_turn["mode"], "local_model", "{gw_turn}");
    assert_eq!(gw_turn["calls"], t["tool_calls"], "{gw_turn}");

    // The turn was narrowed to the overview and research.prepare: the model
    // read, then prepared research, and the loop stopped with no network
    // and no further model call (M8).
    assert_eq!(status, "AUTHORIZATION_REQUIRED", "the model did not prepare research: {t}");
    assert_eq!((t["tool_calls"].as_u64(), t["research_request"].is_string()), (Some(2), true), "{t}");
    let request = t["research_request"].as_str().unwrap().to_owned();
    let (_, r) = get(port, &cookie, &format!("/api/v1/research/requests/{request}"));
    let selected = r["request"]["selection"].as_array().map_or(0, Vec::len);
    assert!(selected >= 1, "{r}");
    assert_eq!(r["request"]["requested_by"], "agent:local-model", "{r}");
    println!("prepared {request}: {selected} objects selected");

    // The human grant, the synthetic campaign, the resume, the summary.
    let (s, granted) = post(
        port,
        &cookie,
        &csrf,
        &format!("/api/v1/research/requests/{request}/grant"),
        &json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 2, "max_bytes": 65536}, "expires_in_minutes": 60}),
    );
    assert_eq!(s, 201, "{granted}");
    let (s, resumed) = post(port, &cookie, &csrf, &format!("/api/v1/agent-runtime/turns/{id}/resume"), &json!({}));
    assert_eq!(s, 202, "{resumed}");
    let t = wait_turn(port, &cookie, &id, Duration::from_secs(300));
    assert_eq!(t["status"], "COMPLETED", "{t}");
    let summary = t["summary"].as_str().unwrap();
    assert!(!summary.is_empty());
    // The synthetic campaign's evidence is what the summary points at.
    let fetched: Vec<&str> = t["summary_refs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_str().filter(|r| r.starts_with("evidence:")))
        .collect();
    assert_eq!(fetched.len(), 2, "the budget allowed two requests: {t}");
    for e in &fetched {
        let (s, _) = get(port, &cookie, &format!("/api/v1/evidence/{e}"));
        assert_eq!(s, 200, "{e}");
    }
    println!("resumed and completed; summary: {summary}");
    // The turn's events carry no prompt.
    let (_, events) = get(port, &cookie, "/api/v1/agent-runtime/events?cursor=0&limit=128");
    for e in events["events"].as_array().unwrap() {
        assert!(!e["detail"].as_str().unwrap().contains("Tu es l'agent"), "{e}");
    }
    let o = Command::new(BIN).args(["model", "stop", "--runtime-dir"]).arg(&run).output().unwrap();
    assert!(o.status.success());
}
