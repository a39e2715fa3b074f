//! `labfy mcp` as an MCP client drives it (SPEC L5): newline-delimited
//! JSON-RPC on its standard input and output, against a running `labfy up`.
//! The catalog listed with its annotations; a read tool answered; a bare
//! UUID refused by the gateway; `research.prepare` waiting for the analyst
//! in the UI (the request is there, pending; nothing approves it through
//! MCP) while the client goes on under another turn, past a turn's budget
//! too; malformed JSON, a batch, an unknown method, a notification — each a
//! JSON-RPC error or nothing, never a crash; a client gone mid-call ends the
//! server, the call recorded once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

struct Client {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Client {
    fn start(inv: &str, run: &std::path::Path) -> Self {
        let mut child = Command::new(BIN)
            .args(["mcp", "--investigation", inv, "--runtime-dir", run.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Self { child, out }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.out.read_line(&mut line).unwrap() > 0, "labfy mcp closed its output");
        serde_json::from_str(&line).unwrap()
    }

    fn ask(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        let answer = self.read();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        let a = self.ask(id, "tools/call", json!({"name": tool, "arguments": arguments}));
        assert!(a.get("result").is_some(), "{a}");
        a["result"].clone()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_mcp_client_lists_calls_and_waits_for_the_analyst() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (_up, port) = support::start_up(BIN, &data);
    let run = support::runtime_dir(&data);
    let (cookie, _) = support::login(port, &run);
    let inv = support::first_investigation(port, &cookie);
    let (_, overview) = support::get(port, &cookie, &format!("/api/v1/investigations/{inv}/overview"));
    let entity = overview["top_entities"][0]["id"].as_str().unwrap().to_owned();

    let mut c = Client::start(&inv, &run);
    let init = c.ask(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], false);
    assert_eq!(init["result"]["serverInfo"]["name"], "labfy");
    // A notification gets no answer: the next line answers the next request.
    c.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let older = c.ask(2, "initialize", json!({"protocolVersion": "1999-01-01"}));
    assert_eq!(older["result"]["protocolVersion"], "2025-06-18", "an unknown version gets the newest");

    let list = c.ask(3, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name}: {list}"));
    let node = tool("graph.get_node");
    assert_eq!(node["inputSchema"]["required"], json!(["node_id"]));
    assert_eq!(node["annotations"]["readOnlyHint"], true);
    assert_eq!(node["annotations"]["openWorldHint"], false);
    assert_eq!(tool("web.fetch")["annotations"]["openWorldHint"], true);
    assert!(tool("web.fetch")["description"].as_str().unwrap().contains("Unavailable now: SPECIMEN"), "{list}");
    assert_eq!(tool("research.prepare")["annotations"]["readOnlyHint"], false);
    assert!(tool("research.prepare")["description"].as_str().unwrap().contains("analyst's decision in Labfy's UI"));
    assert!(tools.iter().all(|t| t["annotations"]["destructiveHint"] == false));

    // A read tool, through the gateway.
    let read = c.call(4, "graph.get_node", json!({"node_id": entity}));
    assert_eq!(read["isError"], false, "{read}");
    assert_eq!(read["structuredContent"]["status"], "COMPLETED", "{read}");
    assert_eq!(read["structuredContent"]["tool_id"], "graph.get_node");
    // A bare UUID is not a reference: the gateway refuses it.
    let bare = entity.trim_start_matches("entity:");
    let refused = c.call(5, "graph.get_node", json!({"node_id": bare}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["structuredContent"]["status"], "DENIED", "{refused}");
    // Research waits for the analyst in the UI.
    let prep = c.call(
        6,
        "research.prepare",
        json!({"selection_ids": [entity], "question": "Qui possède cette société ?", "exclusions": []}),
    );
    assert_eq!(prep["isError"], false, "{prep}");
    assert_eq!(prep["structuredContent"]["status"], "AUTHORIZATION_REQUIRED", "{prep}");
    assert!(prep["content"][0]["text"].as_str().unwrap().starts_with("Waiting for the analyst"), "{prep}");
    let (_, requests) = support::get(port, &cookie, &format!("/api/v1/research/requests?investigation={inv}"));
    let listed = requests.to_string();
    assert!(listed.contains("Qui possède cette société ?"), "the request waits in the UI: {requests}");
    // While that turn waits for the analyst the client goes on, under
    // another; and past a turn's budget of calls (32), under another again.
    let during = c.call(7, "graph.get_node", json!({"node_id": entity}));
    assert_eq!(during["structuredContent"]["status"], "COMPLETED", "{during}");
    assert_ne!(during["structuredContent"]["turn_id"], prep["structuredContent"]["turn_id"]);
    for i in 0..40 {
        let r = c.call(100 + i, "graph.get_node", json!({"node_id": entity}));
        assert_eq!(r["structuredContent"]["status"], "COMPLETED", "call {i}: {r}");
    }

    // Bad input: each a JSON-RPC error, and the server goes on.
    c.send_raw("{not json");
    assert_eq!(c.read()["error"]["code"], -32700);
    c.send_raw(r#"[{"jsonrpc":"2.0","id":8,"method":"ping"}]"#);
    assert_eq!(c.read()["error"]["code"], -32600, "no batches");
    c.send_raw(r#"{"id":9,"method":"ping"}"#);
    assert_eq!(c.read()["error"]["code"], -32600, "not JSON-RPC 2.0");
    assert_eq!(c.ask(10, "resources/list", json!({}))["error"]["code"], -32601);
    assert_eq!(c.ask(11, "tools/call", json!({"arguments": {}}))["error"]["code"], -32602);
    assert_eq!(c.ask(12, "tools/call", json!({"name": "graph.get_node", "arguments": [1]}))["error"]["code"], -32602);
    assert_eq!(c.ask(13, "ping", json!({}))["result"], json!({}));

    drop(c);

    // Another client (its own turn) goes away right after a call: the
    // server ends cleanly, the call made once.
    let mut c = Client::start(&inv, &run);
    let first = c.call(1, "investigation.get_overview", json!({"investigation_id": inv}));
    let turn = first["structuredContent"]["turn_id"].as_str().unwrap().to_owned();
    let turn_calls = || -> u64 {
        support::get(port, &cookie, &format!("/api/v1/agent-tools/turns/{turn}")).1["calls"].as_u64().unwrap()
    };
    assert_eq!(turn_calls(), 1);
    c.send_raw(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "investigation.get_overview", "arguments": {"investigation_id": inv}}}).to_string());
    drop(c.child.stdin.take());
    let status = c.child.wait().unwrap();
    assert!(status.success(), "labfy mcp ends cleanly when its client goes: {status:?}");
    assert_eq!(turn_calls(), 2, "the last call made once");
}

/// An investigation of another workspace, or no `labfy up`: refused before
/// any message, with the reason.
#[test]
fn labfy_mcp_refuses_what_it_cannot_serve() {
    let dir = TempDir::new().unwrap();
    let o = Command::new(BIN)
        .args(["mcp", "--investigation", "investigation:0190f1a2-0000-7000-8000-000000000001", "--runtime-dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no running labfy up"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty(), "nothing on the protocol's output");
    let data = dir.path().join("data");
    let (_up, _port) = support::start_up(BIN, &data);
    let o = Command::new(BIN)
        .args(["mcp", "--investigation", "investigation:0190f1a2-0000-7000-8000-000000000001", "--runtime-dir"])
        .arg(support::runtime_dir(&data))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not an investigation of the workspace labfy up serves"), "{err}");
    let o =
        Command::new(BIN).args(["mcp", "--investigation", "0190f1a2-0000-7000-8000-000000000001"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("bare UUID refused"), "a bare UUID: {err}");
}
