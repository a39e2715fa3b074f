//! The governor under `labfy up` (SPEC P2, P5, M11, Q5): `labfy resources`
//! reads it; `labfy model start` runs the real llama-server inside the
//! workspace server's network namespace — reachable from there, not from the
//! host — and when the server is killed and restarted into a new namespace,
//! the model follows it. Needs the fixture of `tests/llama-fixture`
//! (`tests/run-all` sets it, with `LABFY_REQUIRE_MODEL=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

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

/// `curl` run inside the network namespace of `pid`.
fn curl_in(pid: u32, url: &str) -> String {
    let o = Command::new("nsenter")
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .args(["curl", "-s", "--max-time", "10", url])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn resources_and_a_model_beside_the_server_that_follows_its_restart() {
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
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let first_pid = m["pid"].as_u64().unwrap();

    // From the host's namespace: nothing listens there (SPEC P2/P5).
    assert!(
        TcpStream::connect_timeout(&format!("127.0.0.1:{port}").parse().unwrap(), Duration::from_secs(2)).is_err(),
        "the model must not be reachable from the host's namespace"
    );
    // From the workspace server's namespace: it answers.
    let server = server_pid(BIN, &run);
    assert!(curl_in(server, &format!("{endpoint}/health")).contains("ok"));

    // The server dies; the supervisor restarts it into a new namespace; the
    // model is moved there.
    signal(server, libc::SIGKILL);
    let new_server = wait_for("a new server", || {
        let p = server_pid(BIN, &run);
        (p != server).then_some(p)
    });
    let moved = wait_for("the model in the new namespace", || {
        let m = model_status(run_s)?;
        (m["state"] == "ready" && m["pid"].as_u64() != Some(first_pid)).then_some(m)
    });
    let endpoint = moved["endpoint"].as_str().unwrap().to_owned();
    let answer = wait_for("an answer in the new namespace", || {
        let a = curl_in(new_server, &format!("{endpoint}/health"));
        a.contains("ok").then_some(a)
    });
    assert!(answer.contains("ok"));

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
