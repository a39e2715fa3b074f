//! The governor under `labfy up` (SPEC P2, P5, M11, Q5, D1): `labfy
//! resources` reads it; `labfy model start` runs the real llama-server with
//! no network at all, listening on a Unix socket in the runtime directory —
//! where the confined workspace server finds it, through its read-only view
//! of that directory — and when the server is killed and restarted, the
//! model stays as it is. Needs the fixture of `tests/llama-fixture`
//! (`tests/run-all` sets it, with `LABFY_REQUIRE_MODEL=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::process::Command;

use serde_json::Value;
use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

fn labfy(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn model_status(run: &str) -> Option<Value> {
    let (ok, out, _) = labfy(&["model", "status", "--json", "--runtime-dir", run]);
    if ok { serde_json::from_str(&out).ok() } else { None }
}

/// `curl` of `path` on a Unix socket, run in the mount and network
/// namespaces of `pid` (its view of the file system, its network).
fn curl_as_seen_by(pid: u32, socket: &str, path: &str) -> String {
    let o = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "--mount", "--net", "--"])
        .args(["curl", "-s", "--max-time", "10", "--unix-socket", socket, &format!("http://localhost{path}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn resources_and_a_model_the_server_reaches_on_its_socket_across_its_restart() {
    let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (Some(_), Some(gguf), Some(sha)) =
        (get("LABFY_LLAMA_SERVER"), get("LABFY_TEST_GGUF"), get("LABFY_TEST_GGUF_SHA256"))
    else {
        assert!(get("LABFY_REQUIRE_MODEL").is_none(), "LABFY_REQUIRE_MODEL is set but the fixture is not");
        eprintln!("skipped: no llama-server fixture (eval \"$(tests/llama-fixture)\")");
        return;
    };
    let dir = TempDir::new().unwrap();
    let (_up, _port) = start_up(BIN, dir.path());
    let run = runtime_dir(dir.path());
    let run_s = run.to_str().unwrap();

    // `labfy resources`, human and JSON.
    let (ok, table, err) = labfy(&["resources", "--runtime-dir", run_s]);
    assert!(ok, "{err}");
    assert!(table.starts_with("resource"), "{table}");
    assert!(table.contains("RAM") && table.contains("admission log"), "{table}");
    let (ok, json, _) = labfy(&["resources", "--json", "--runtime-dir", run_s]);
    assert!(ok);
    let state: Value = serde_json::from_str(&json).unwrap();
    assert!(state["sample"]["host"]["ram_total"].as_u64().unwrap() > 0);
    assert!(state["model"].is_null());

    // Bad input through the command line: a clear refusal, exit code 2.
    let (ok, _, err) = labfy(&["model", "start", "--runtime-dir", run_s, "--gguf", &gguf, "--sha256", &"0".repeat(64)]);
    assert!(!ok && err.contains("SHA-256 mismatch"), "{err}");

    let (ok, out, err) =
        labfy(&["model", "start", "--runtime-dir", run_s, "--gguf", &gguf, "--sha256", &sha, "--ctx", "2048"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("ready"), "{out}");
    let m = model_status(run_s).unwrap();
    let endpoint = m["endpoint"].as_str().unwrap().to_owned();
    let socket = run.join("model").join("model.sock");
    assert_eq!(endpoint, format!("unix:{}", socket.display()));
    let socket = socket.to_str().unwrap().to_owned();
    let first_pid = m["pid"].as_u64().unwrap();
    // No network at all: its own namespace, where nothing is up.
    let net = |pid: u64| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    let server = server_pid(BIN, &run);
    assert_ne!(net(first_pid), net(u64::from(server)), "the model shares the server's network");
    assert_ne!(net(first_pid), net(u64::from(std::process::id())), "the model shares the host's network");
    // From the workspace server's view (its mount and network namespaces,
    // the runtime directory read-only): it answers.
    assert!(curl_as_seen_by(server, &socket, "/health").contains("ok"));

    // The server dies; the supervisor restarts it; the model is untouched
    // and the new server reaches the same socket.
    signal(server, libc::SIGKILL);
    let new_server = wait_for("a new server", || {
        let p = server_pid(BIN, &run);
        (p != server).then_some(p)
    });
    let answer = wait_for("an answer from the new server's view", || {
        let a = curl_as_seen_by(new_server, &socket, "/health");
        a.contains("ok").then_some(a)
    });
    assert!(answer.contains("ok"));
    let m = model_status(run_s).unwrap();
    assert_eq!((m["state"].as_str(), m["pid"].as_u64()), (Some("ready"), Some(first_pid)), "{m}");
    assert_eq!(m["restarts"], 0, "{m}");

    let (ok, out, err) = labfy(&["model", "stop", "--runtime-dir", run_s]);
    assert!(ok, "{out}{err}");
    let m = model_status(run_s).unwrap();
    assert_eq!(m["state"], "stopped");
    let (_, json, _) = labfy(&["resources", "--json", "--runtime-dir", run_s]);
    let state: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(state["reservations"].as_array().unwrap().len(), 0);
    let log = state["decisions"].as_array().unwrap();
    assert!(log.iter().any(|d| d["outcome"] == "admitted" && d["owner"].as_str().unwrap().starts_with("model:")));
}
