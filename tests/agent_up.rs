//! The agent round trip through a running `labfy up` (SPEC G6–G11, G1, G10):
//! the server asks the real egress daemon over IPC for `web.fetch`'s
//! availability; the demo agent prepares research; a human grant over HTTP
//! runs the synthetic SPECIMEN campaign; the turn resumes with its summary.
//! Then the server is killed (`kill -9`): the supervisor restarts it, the
//! grant and the synthetic evidence are still in the store, and so are the
//! agent's turns, results and events, read back from the journal (SPEC F4):
//! the finished turn with its summary, a paused turn that still resumes
//! after a grant, and a turn that was running, now `FAILED` "interrupted by
//! restart".

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

    // A second turn paused on its request, and a manual turn left running.
    let (s, paused) = post(
        port,
        &cookie,
        &csrf,
        "/api/v1/agent-tools/turns",
        &json!({"question": "Quels domaines pour les sociétés ?"}),
    );
    assert_eq!(s, 201, "{paused}");
    let paused_id = paused["turn_id"].as_str().unwrap().to_owned();
    let paused_request = paused["research_request"].as_str().unwrap().to_owned();
    let (s, manual) = post(
        port,
        &cookie,
        &csrf,
        "/api/v1/agent-tools/turns",
        &json!({"question": "Appels à la main", "mode": "manual"}),
    );
    assert_eq!(s, 201, "{manual}");
    let manual_id = manual["turn_id"].as_str().unwrap().to_owned();
    // An upload under way when the server dies (K3): its job is ended at
    // the next start, with the reason, not left running for ever.
    let inv = first_investigation(port, &cookie);
    let (s, import) = post(
        port,
        &cookie,
        &csrf,
        &format!("/api/v1/investigations/{inv}/imports"),
        &json!({"expected": 3, "into_specimen": true}),
    );
    assert_eq!(s, 201, "{import}");
    let import = import["job"].as_str().unwrap().to_owned();
    // What a client was shown before the kill: its cursor over the events.
    let (s, seen) = get(port, &cookie, "/api/v1/agent-tools/events?cursor=0&limit=1000");
    assert_eq!(s, 200, "{seen}");
    let cursor = seen["next_cursor"].as_u64().unwrap();

    // Kill the server at once, the answers just given (SPEC K1: no wait for
    // the journal here — an answer is not sent before what it says is on
    // disk).
    // Kill the server; the supervisor restarts it.
    let run = runtime_dir(dir.path());
    let old = server_pid(BIN, &run);
    signal(old, libc::SIGKILL);
    wait_for("a new server", || {
        let pid = server_pid(BIN, &run);
        (pid != old).then_some(pid)
    });
    let (cookie, csrf) =
        wait_for("the restarted server to answer", || std::panic::catch_unwind(|| login(port, &run)).ok());
    // Durable facts survived, and the agent's turns with them (F4).
    let (s, g) = get(port, &cookie, &format!("/api/v1/grants/{grant}"));
    assert_eq!(s, 200);
    assert_eq!(g["active"], true);
    let (s, _) = get(port, &cookie, &format!("/api/v1/evidence/{}", new_evidence[0]));
    assert_eq!(s, 200);
    let (s, t) = get(port, &cookie, &format!("/api/v1/agent-tools/turns/{turn_id}"));
    assert_eq!((s, &t["status"], &t["summary"]), (200, &done["status"], &done["summary"]), "{t}");
    let first_result = t["result_ids"][0].as_str().unwrap();
    let (s, _) = get(port, &cookie, &format!("/api/v1/agent-tools/results/{first_result}"));
    assert_eq!(s, 200);
    let (s, t) = get(port, &cookie, &format!("/api/v1/agent-tools/turns/{manual_id}"));
    assert_eq!((s, t["status"].as_str(), t["error"].as_str()), (200, Some("FAILED"), Some("interrupted by restart")));
    let (s, job) = get(port, &cookie, &format!("/api/v1/jobs/{import}"));
    assert_eq!((s, job["status"].as_str()), (200, Some("FAILED")), "{job}");
    assert!(job["detail"].as_str().unwrap().contains("interrupted"), "{job}");
    // K2: the cursor held from before the kill goes on; the restart's own
    // event (the manual turn interrupted) comes after it, not hidden below.
    let (s, after) = get(port, &cookie, &format!("/api/v1/agent-tools/events?cursor={cursor}"));
    assert_eq!(s, 200, "{after}");
    assert_eq!(after["missed"], false, "{after}");
    assert!(
        after["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["turn_id"] == manual_id.as_str() && e["type"] == "agent.error"),
        "the interruption comes after cursor {cursor}: {after}"
    );
    let (_, events) = get(port, &cookie, "/api/v1/agent-tools/events?cursor=0");
    let events = events["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["turn_id"] == turn_id.as_str() && e["type"] == "agent.turn.completed"));
    let last = events.last().unwrap();
    assert_eq!((last["turn_id"].as_str(), last["type"].as_str()), (Some(manual_id.as_str()), Some("agent.error")));
    // The paused turn resumes after a grant, on the new server.
    let (s, g) = post(port, &cookie, &csrf, &format!("/api/v1/research/requests/{paused_request}/grant"), &grant_body);
    assert_eq!(s, 201, "{g}");
    let (s, done) = post(port, &cookie, &csrf, &format!("/api/v1/agent-tools/turns/{paused_id}/resume"), &json!({}));
    assert_eq!((s, done["status"].as_str()), (200, Some("COMPLETED")), "{done}");

    signal(up.0.id(), libc::SIGTERM);
    let status = up.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(integrity(dir.path()), "ok");
}

/// `sandbox.exec` for real under `labfy up` (SPEC X1): the catalog says it
/// is available with the governor's allow-list; a manual turn's call runs
/// python3 in the governor's sandbox over an evidence item's text, and its
/// output and written file come back as untrusted data; a program off the
/// list is refused by the governor; the admission log shows the run.
#[test]
fn sandbox_exec_runs_in_the_governors_sandbox() {
    if !labfy_testkit::present(std::path::Path::new("/usr/bin/python3").exists(), "SANDBOX", "no /usr/bin/python3") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let (_up, port) = start_up(BIN, dir.path());
    let (cookie, csrf) = login(port, &runtime_dir(dir.path()));
    let (s, catalog) = get(port, &cookie, "/api/v1/agent-tools/catalog");
    assert_eq!(s, 200);
    let tool = catalog["tools"].as_array().unwrap().iter().find(|t| t["tool_id"] == "sandbox.exec").unwrap().clone();
    assert_eq!(tool["availability"]["status"], "AVAILABLE", "{tool}");
    assert!(tool["availability"]["reason"].as_str().is_some_and(|r| r.contains("python3")), "{tool}");

    let inv = first_investigation(port, &cookie);
    let (s, listed) = get(port, &cookie, &format!("/api/v1/investigations/{inv}/lists/evidence?limit=1"));
    assert_eq!(s, 200, "{listed}");
    let evidence = listed["items"][0]["id"].as_str().unwrap().to_owned();
    let uuid = evidence.strip_prefix("evidence:").unwrap().to_owned();
    let (s, turn) =
        post(port, &cookie, &csrf, "/api/v1/agent-tools/turns", &json!({"question": "Compter", "mode": "manual"}));
    assert_eq!(s, 201, "{turn}");
    let turn = turn["turn_id"].as_str().unwrap().to_owned();
    let call = |key: &str, input: serde_json::Value| {
        let body = json!({"turn_id": turn, "call_id": uuid::Uuid::new_v4(), "tool_id": "sandbox.exec",
                          "input": input, "context": {"purpose": "compter les lignes"}, "object_refs": [],
                          "idempotency_key": key});
        let (s, r) = post(port, &cookie, &csrf, "/api/v1/agent-tools/calls", &body);
        assert_eq!(s, 200, "{r}");
        r
    };
    let script = format!(
        "text = open('/input/{uuid}.txt').read()\nprint('chars', len(text))\nopen('words.txt', 'w').write(str(len(text.split())))\n"
    );
    let r =
        call("s1", json!({"program": "python3", "code": script, "evidence_ids": [evidence], "timeout_seconds": 20}));
    assert_eq!(r["status"], "COMPLETED", "{r:#}");
    let a = &r["artifacts"][0];
    assert_eq!((a["kind"].as_str(), a["trust"].as_str()), (Some("sandbox_output"), Some("UNTRUSTED_DATA")), "{r:#}");
    let run = &a["data"]["run"];
    assert_eq!(run["end"], json!({"kind": "exited", "code": 0}), "{r:#}");
    assert!(run["stdout"]["text"].as_str().unwrap().starts_with("chars "), "{r:#}");
    assert_eq!(run["files"][0]["name"], "words.txt", "{r:#}");
    assert!(run["files"][0]["text"].as_str().unwrap().parse::<u64>().is_ok(), "{r:#}");
    assert_eq!(a["data"]["stored"], false);

    // Off the operator's list: the governor refuses, with its list.
    let r = call("s2", json!({"program": "bash", "code": "echo hi"}));
    assert_eq!(r["status"], "DENIED", "{r:#}");
    assert!(r["diagnostic"].as_str().unwrap().contains("allow-list"), "{r:#}");

    // The run in the governor's admission log, released with how it ended
    // (the server reuses the governor's state for up to a second).
    wait_for("the sandbox run in the admission log", || {
        let (s, res) = get(port, &cookie, "/api/v1/resources");
        assert_eq!(s, 200);
        res["state"]["decisions"]
            .as_array()?
            .iter()
            .any(|d| {
                d["kind"] == "sandbox"
                    && d["outcome"] == "released"
                    && d["reason"].as_str().is_some_and(|r| r.contains("exited (code 0)"))
            })
            .then_some(())
    });
}

/// SPEC X2 end to end on a real `labfy up`: the operator turns the optional
/// catalog on and names a folder of manifests (the supervisor binds it
/// read-only into the server's root); the agent finds the operator's
/// capability, proposes its installation and integration, the analyst
/// approves each through the guarded routes (against the governor's
/// allow-list), and `capability.execute` runs it in the governor's sandbox
/// on the investigation's evidence.
#[test]
fn the_optional_catalog_runs_an_approved_capability_in_the_governors_sandbox() {
    if !labfy_testkit::present(std::path::Path::new("/usr/bin/python3").exists(), "SANDBOX", "no /usr/bin/python3") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let manifests = TempDir::new().unwrap();
    write_count_chars_manifest(manifests.path());
    let env = [
        ("LABFY_AGENT_OPTIONAL_CATALOG", std::ffi::OsStr::new("true")),
        ("LABFY_AGENT_CAPABILITIES_DIR", manifests.path().as_os_str()),
    ];
    let (_up, port) = start_up_env(BIN, dir.path(), &env);
    let (cookie, csrf) = login(port, &runtime_dir(dir.path()));
    let (s, catalog) = get(port, &cookie, "/api/v1/agent-tools/catalog");
    assert_eq!(s, 200);
    assert_eq!(catalog["tools"].as_array().unwrap().len(), 21, "the optional catalog is on");

    let inv = first_investigation(port, &cookie);
    let (_, listed) = get(port, &cookie, &format!("/api/v1/investigations/{inv}/lists/evidence?limit=1"));
    let evidence = listed["items"][0]["id"].as_str().unwrap().to_owned();
    let new_turn = || {
        let (s, turn) =
            post(port, &cookie, &csrf, "/api/v1/agent-tools/turns", &json!({"question": "Compter", "mode": "manual"}));
        assert_eq!(s, 201, "{turn}");
        turn["turn_id"].as_str().unwrap().to_owned()
    };
    let call = |turn: &str, key: &str, tool: &str, input: serde_json::Value| {
        let body = json!({"turn_id": turn, "call_id": uuid::Uuid::new_v4(), "tool_id": tool, "input": input,
                          "context": {"purpose": "compter"}, "object_refs": [], "idempotency_key": key});
        let (s, r) = post(port, &cookie, &csrf, "/api/v1/agent-tools/calls", &body);
        assert_eq!(s, 200, "{r}");
        r
    };
    // The operator's manifest, read through the server's confinement.
    let turn = new_turn();
    let found = call(&turn, "f", "tool.provision.search", json!({"investigation_id": inv, "query": "caractères"}));
    assert_eq!(found["status"], "COMPLETED", "{found:#}");
    let cap = &found["artifacts"][0]["data"]["capabilities"][0];
    assert_eq!(
        (cap["capability_id"].as_str(), cap["origin"].as_str()),
        (Some("text.count_chars"), Some("installed")),
        "{found:#}"
    );
    let decide = |r: &serde_json::Value| {
        let id = r["object_refs"][0].as_str().unwrap().to_owned();
        assert!(id.starts_with("tool_request:"), "{r:#}");
        let (s, d) = post(port, &cookie, &csrf, &format!("/api/v1/tool-requests/{id}/approve"), &json!({}));
        assert_eq!((s, d["request"]["status"].as_str()), (200, Some("APPROVED")), "{d:#}");
    };
    let reason = "compter les caractères";
    let a = call(
        &turn,
        "a",
        "tool.provision.propose",
        json!({"investigation_id": inv, "capability_id": "text.count_chars", "reason": reason}),
    );
    assert_eq!(a["status"], "AUTHORIZATION_REQUIRED", "{a:#}");
    decide(&a);
    let turn = new_turn();
    let b = call(
        &turn,
        "b",
        "tool.integration.propose",
        json!({"investigation_id": inv, "capability_id": "text.count_chars", "reason": reason}),
    );
    assert_eq!(b["status"], "AUTHORIZATION_REQUIRED", "{b:#}");
    decide(&b);
    let turn = new_turn();
    let r = call(
        &turn,
        "x",
        "capability.execute",
        json!({"investigation_id": inv, "capability_id": "text.count_chars", "input": {"label": "pièce"},
                        "evidence_ids": [evidence], "timeout_seconds": 20}),
    );
    assert_eq!(r["status"], "COMPLETED", "{r:#}");
    let data = &r["artifacts"][0]["data"];
    assert_eq!(data["output"]["value"]["label"], "pièce", "{r:#}");
    assert!(data["output"]["value"]["chars"].as_u64().unwrap() > 0, "{r:#}");
    assert_eq!(data["run"]["end"], json!({"kind": "exited", "code": 0}), "{r:#}");
    assert!(
        data["run"]["confinement"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().contains("network")),
        "{r:#}"
    );
}
