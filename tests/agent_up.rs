//! The agent round trip through a running `labfy up` (SPEC G6–G11, G1, G10):
//! the server asks the real egress daemon over IPC for `web.fetch`'s
//! availability; the demo agent prepares research; a human grant over HTTP
//! runs the synthetic SPECIMEN campaign; the turn resumes with its summary.
//! Then the server is killed: the supervisor restarts it, the grant and the
//! synthetic evidence are still in the store, and the gateway's in-memory
//! turns and results are gone (G10).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use serde_json::json;
use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

#[test]
fn demo_agent_grant_and_resume_through_labfy_up() {
    let dir = TempDir::new().unwrap();
    let (mut up, port) = start_up(BIN, dir.path());
    let (cookie, csrf) = login(port, &runtime_dir(dir.path()));

    // Availability is real: egress answers over IPC that it is not ready.
    let (s, catalog) = get(port, &cookie, "/api/v1/agent-tools/catalog");
    assert_eq!(s, 200);
    let egress = &catalog["environment"]["egress"];
    assert_eq!(egress["ready"], false, "{egress}");
    let detail = egress["detail"].as_str().unwrap();
    assert!(!detail.contains("not started by"), "the server should have asked the egress daemon: {detail}");
    let fetch = catalog["tools"].as_array().unwrap().iter().find(|t| t["tool_id"] == "web.fetch").unwrap().clone();
    assert_eq!(fetch["availability"]["status"], "UNAVAILABLE");

    let (s, turn) = post(
        port,
        &cookie,
        &csrf,
        "/api/v1/agent-tools/turns",
        &json!({"question": "Quels liens entre les sociétés et les domaines ?"}),
    );
    assert_eq!(s, 201, "{turn}");
    assert_eq!(turn["status"], "AUTHORIZATION_REQUIRED");
    let turn_id = turn["turn_id"].as_str().unwrap().to_owned();
    let request = turn["research_request"].as_str().unwrap().to_owned();

    let grant_body = json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 2, "max_bytes": 65536},
                            "expires_in_minutes": 30});
    let (s, g) = post(port, &cookie, &csrf, &format!("/api/v1/research/requests/{request}/grant"), &grant_body);
    assert_eq!(s, 201, "{g}");
    let grant = g["grant"].as_str().unwrap().to_owned();
    let (s, done) = post(port, &cookie, &csrf, &format!("/api/v1/agent-tools/turns/{turn_id}/resume"), &json!({}));
    assert_eq!(s, 200, "{done}");
    assert_eq!(done["status"], "COMPLETED");
    let new_evidence: Vec<String> = done["summary_refs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_str().filter(|r| r.starts_with("evidence:")).map(str::to_owned))
        .collect();
    assert_eq!(new_evidence.len(), 2, "the budget allowed two requests: {done}");

    // Kill the server; the supervisor restarts it.
    let run = runtime_dir(dir.path());
    let old = server_pid(BIN, &run);
    signal(old, libc::SIGKILL);
    wait_for("a new server", || {
        let pid = server_pid(BIN, &run);
        (pid != old).then_some(pid)
    });
    let (cookie, _) =
        wait_for("the restarted server to answer", || std::panic::catch_unwind(|| login(port, &run)).ok());
    // Durable facts survived; transport memory did not.
    let (s, g) = get(port, &cookie, &format!("/api/v1/grants/{grant}"));
    assert_eq!(s, 200);
    assert_eq!(g["active"], true);
    let (s, _) = get(port, &cookie, &format!("/api/v1/evidence/{}", new_evidence[0]));
    assert_eq!(s, 200);
    let (s, _) = get(port, &cookie, &format!("/api/v1/agent-tools/turns/{turn_id}"));
    assert_eq!(s, 404);
    let (_, events) = get(port, &cookie, "/api/v1/agent-tools/events?cursor=0");
    assert!(events["events"].as_array().unwrap().is_empty());

    signal(up.0.id(), libc::SIGTERM);
    let status = up.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(integrity(dir.path()), "ok");
}
