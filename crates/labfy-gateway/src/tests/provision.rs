//! The optional catalog (SPEC X2): off by default; on, its five tools with
//! pinned contracts; the pauses A, B, C1, C2 through the gateway, the
//! demo agent and a resume; a manifest changed after approval refused at
//! execution; bad manifests and bad inputs refused with their reason. The
//! scripts really run — with the host's python3 standing for the governor's
//! confined runs (the confinement itself is the governor's, tested there
//! and end to end in the browser suite).

use std::path::Path;
use std::sync::Mutex;

use labfy_store::{ToolDecision, ToolRequestKind};

use super::*;
use crate::capability::{Manifest, SHIPPED};
use crate::sandbox::{SandboxEnded, SandboxRan, SandboxStreamText};
use labfy_core::RiskLevel;

/// Pinned contract fingerprints of the optional tools (R5), and of
/// `tool.docs.read` and the catalog with them (its enum lists them).
const PINNED_OPTIONAL: [(&str, &str); 5] = [
    ("tool.provision.search", "f0741b97f3813582de425741492894b7f323a0c275035b451355becca12f96de"),
    ("tool.provision.propose", "c9477e95a4a92d54e09ff99a28b1f6aaa7b0594af93022ee1174f65486561462"),
    ("tool.integration.propose", "ae04acdfcaee8b51954c43a0a2ea6e6db4265f5ed71d5bd17c91f9ae217aff1f"),
    ("capability.execute", "5a637e6f0ff64e201f243bc8058650272a6b50995fae8ba7e9f22d8cd4f8a262"),
    ("code.change.propose", "7749c03da7eda0bae4b55c9d27f4c5df440567e9619581de0f869cc5cba12303"),
];
const PINNED_DOCS_READ_WITH_OPTIONAL: &str = "e47d9b3ca8b84257e764bcd291b5783f4b69078fdb74a4508cdfb9c12348aecf";
const PINNED_CATALOG_WITH_OPTIONAL: &str = "2a5f2af32b6811e9fb885e59c278ad0ff8b5823359d503151639ceb0c6fc26d7";

/// The governor's runs, stood for by the host's python3: each input file
/// in a folder given as the script's last argument (the shipped scripts
/// read `/input` unless told another folder).
struct HostPython {
    asked: Mutex<Vec<SandboxAsk>>,
}

impl Sandbox for HostPython {
    fn run(&self, ask: &SandboxAsk) -> Result<SandboxOutcome, String> {
        self.asked.lock().unwrap().push(ask.clone());
        if ask.program != "python3" {
            return Ok(SandboxOutcome::Refused(format!("{:?} is not on the operator's allow-list", ask.program)));
        }
        let dir = TempDir::new().map_err(|e| e.to_string())?;
        for f in &ask.inputs {
            std::fs::write(dir.path().join(&f.name), &f.text).map_err(|e| e.to_string())?;
        }
        let started = std::time::Instant::now();
        let out = std::process::Command::new("python3")
            .args(["-I", "-B", "-c", ask.script.as_deref().unwrap_or_default()])
            .args(&ask.args)
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        let stream = |b: &[u8]| SandboxStreamText {
            text: String::from_utf8_lossy(b).into_owned(),
            bytes: b.len() as u64,
            truncated: false,
        };
        Ok(SandboxOutcome::Ran(Box::new(SandboxRan {
            program: ask.program.clone(),
            end: SandboxEnded::Exited { code: out.status.code().unwrap_or(-1) },
            stdout: stream(&out.stdout),
            stderr: stream(&out.stderr),
            files: vec![],
            files_unlisted: 0,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(0),
            peak_memory_bytes: 0,
            cpu_ms: 0,
            reservation: "host-python-test".into(),
            confinement: vec![],
            missing: vec!["a test's stand-in: not confined".into()],
        })))
    }
}

fn has_python() -> bool {
    std::process::Command::new("python3").arg("-V").output().is_ok_and(|o| o.status.success())
}

fn ready() -> Environment {
    Environment {
        sandbox: Readiness { ready: true, detail: "python3 — no network".into() },
        sandbox_programs: vec!["python3".into()],
        ..Environment::offline("x")
    }
}

/// The fixture with the optional catalog on, `installed` as the operator's
/// folder, and the host's python3 as the sandbox.
fn optional(installed: Option<&Path>) -> (Fx, Arc<HostPython>) {
    let mut fx = Fx::new();
    fx.gw = AgentGateway::new(Arc::new(DirectBackend::new(fx.writer())))
        .unwrap()
        .with_optional_catalog(installed.map(Path::to_path_buf))
        .unwrap();
    fx.env = ready();
    let host = Arc::new(HostPython { asked: Mutex::new(vec![]) });
    assert!(fx.gw.set_sandbox(host.clone()));
    (fx, host)
}

/// The analyst's decision, as the server's route takes it: against the
/// contract and the registry as they are now.
fn decide(fx: &Fx, scope: Scope, request: ObjectRef, approve: bool) -> labfy_store::ToolRequest {
    let stored = fx.reads().reads().tool_request(scope.workspace, &request).unwrap();
    let tool = match stored.kind {
        ToolRequestKind::Install => ToolId::ToolProvisionPropose,
        ToolRequestKind::Integrate => ToolId::ToolIntegrationPropose,
        ToolRequestKind::Change | ToolRequestKind::Promote => ToolId::CodeChangePropose,
    };
    let manifest_now = fx.gw.capability_fingerprint(scope, &fx.env, &stored.capability_id).unwrap();
    let d = ToolDecision {
        approve,
        note: (!approve).then(|| "pas maintenant".to_owned()),
        decided_by: "analyst".into(),
        current_contract_fingerprint: fx.gw.catalog().get(tool).unwrap().fingerprint.clone(),
        current_manifest_fingerprint: manifest_now,
    };
    fx.writer().decide_tool_request(scope.workspace, &request, &d).unwrap()
}

fn paused_request(r: &ToolResult) -> ObjectRef {
    assert_eq!(r.status, ResultStatus::AuthorizationRequired, "{}: {:?}", r.tool_id, r.diagnostic);
    let first = r.object_refs[0];
    assert_eq!(first.kind(), RefKind::ToolRequest);
    first
}

fn call(fx: &Fx, scope: Scope, turn: Uuid, tool: &str, input: Value) -> Arc<ToolResult> {
    fx.gw.call(scope, &fx.env, req(turn, tool, input)).unwrap()
}

#[test]
fn the_optional_catalog_is_off_by_default_and_pinned_when_on() {
    let fx = Fx::new();
    assert!(!fx.gw.catalog().has_optional());
    assert_eq!(fx.gw.catalog().fingerprint(), PINNED_CATALOG_FINGERPRINT, "off: the base catalog, unchanged");
    let turn = fx.turn(fx.spec);
    for id in ToolId::OPTIONAL {
        assert!(fx.gw.catalog().get(id).is_none());
        let r = fx.call(fx.spec, req(turn, id.as_str(), json!({})));
        assert_refused(&r, ResultStatus::Denied, Stage::Capability, "unknown tool");
    }

    let (on, _) = optional(None);
    let cat = on.gw.catalog();
    assert!(cat.has_optional());
    assert_eq!(cat.tools().len(), 21);
    let now: Vec<(&str, String)> =
        ToolId::OPTIONAL.iter().map(|id| (id.as_str(), cat.get(*id).unwrap().fingerprint.clone())).collect();
    let pinned: Vec<(&str, String)> = PINNED_OPTIONAL.iter().map(|(n, f)| (*n, (*f).to_owned())).collect();
    assert_eq!(now, pinned, "an optional contract changed: pin the new fingerprints on purpose");
    assert_eq!(cat.tool(ToolId::ToolDocsRead).fingerprint, PINNED_DOCS_READ_WITH_OPTIONAL);
    assert_eq!(cat.fingerprint(), PINNED_CATALOG_WITH_OPTIONAL);
    // The base tools' contracts are the same with it on (but tool.docs.read,
    // whose enum names the tools).
    for (name, fp) in PINNED_TOOL_FINGERPRINTS.iter().filter(|(n, _)| *n != "tool.docs.read") {
        assert_eq!(cat.get(ToolId::from_name(name).unwrap()).unwrap().fingerprint, *fp, "{name}");
    }
    // No tool approves: the model cannot decide its own proposal.
    for t in cat.tools() {
        assert!(!t.id.as_str().contains("approve") && !t.id.as_str().contains("grant"), "{}", t.id.as_str());
    }
    let turn = on.turn(on.spec);
    let r = call(&on, on.spec, turn, "tool.request.approve", json!({}));
    assert_refused(&r, ResultStatus::Denied, Stage::Capability, "unknown tool");
    // Availability is real: no sandbox, no execution and no change.
    let offline = Environment::offline("x");
    for id in [ToolId::CapabilityExecute, ToolId::CodeChangePropose] {
        assert!(!cat.get(id).unwrap().availability(WorkspaceClass::Real, &offline).is_available());
        assert!(cat.get(id).unwrap().availability(WorkspaceClass::Real, &on.env).is_available());
    }
}

#[test]
fn install_integrate_and_run_each_wait_for_a_human_and_the_run_is_checked_at_execution() {
    if !labfy_testkit::present(has_python(), "SANDBOX", "no python3") {
        return;
    }
    let installed = TempDir::new().unwrap();
    let mut lines: Manifest = serde_json::from_str(SHIPPED[0].1).unwrap();
    lines.id = "text.count_lines".into();
    lines.description = "Compte les lignes des pièces — counts lines.".into();
    lines.script = "import glob, json, sys\nbase = sys.argv[2] if len(sys.argv) > 2 else '/input'\nn = 0\nfor p in glob.glob(base + '/*.txt'):\n    n += len(open(p, encoding='utf-8').read().splitlines())\nprint(json.dumps({'lines': n, 'top': json.loads(sys.argv[1])['top']}))\n".into();
    for t in &mut lines.tests {
        t.stdout_contains = "\"lines\"".into();
    }
    let file = installed.path().join("lines.json");
    std::fs::write(&file, serde_json::to_string(&lines).unwrap()).unwrap();
    let (fx, host) = optional(Some(installed.path()));
    let (s, inv) = (fx.spec, fx.spec_inv);
    let turn = fx.turn(s);
    let inv_s = inv.to_string();

    // Found, with where it stands.
    let found =
        call(&fx, s, turn, "tool.provision.search", json!({"investigation_id": inv_s, "query": "compter les lignes"}));
    assert_eq!(found.status, ResultStatus::Completed, "{:?}", found.diagnostic);
    let cap = &found.artifacts[0].data["capabilities"][0];
    assert_eq!((cap["capability_id"].as_str(), cap["origin"].as_str()), (Some("text.count_lines"), Some("installed")));
    assert_eq!((cap["installed"].as_str(), cap["integrated"].as_str()), (Some("no"), Some("no")));

    // Not installed: not runnable, not integrable.
    let run = json!({"investigation_id": inv_s, "capability_id": "text.count_lines", "input": {"top": 1},
                     "evidence_ids": [fx.spec_evidence[0].to_string()]});
    let r = call(&fx, s, turn, "capability.execute", run.clone());
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "not installed");
    let integrate = json!({"investigation_id": inv_s, "capability_id": "text.count_lines", "reason": "pour compter"});
    let r = call(&fx, s, turn, "tool.integration.propose", integrate.clone());
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "propose its installation first");

    // A: the proposal pauses the turn; nothing is installed until a human approves.
    let propose = json!({"investigation_id": inv_s, "capability_id": "text.count_lines", "reason": "pour compter"});
    let a = paused_request(&call(&fx, s, turn, "tool.provision.propose", propose.clone()));
    let t = fx.gw.turn(s, turn).unwrap();
    assert_eq!((t.status, t.research_request), (TurnStatus::AuthorizationRequired, Some(a)));
    let events = fx.all_events(s);
    let paused = events.events.iter().rev().find(|e| e.kind == EventType::AuthorizationRequired).unwrap();
    assert_eq!(paused.payload["tool_request"], a.to_string());
    // No resume before a decision.
    assert!(matches!(fx.gw.resume(s, &fx.env, turn), Err(GatewayError::Forbidden(_))));
    assert_eq!(decide(&fx, s, a, true).status, "APPROVED");
    let resumed = fx.gw.resume(s, &fx.env, turn).unwrap();
    assert_eq!(resumed.status, TurnStatus::Completed, "{resumed:?}");
    assert!(resumed.summary.as_deref().unwrap().contains("pause B"), "{:?}", resumed.summary);

    // Installed, not integrated: still not runnable. B, approved.
    let turn = fx.turn(s);
    let r = call(&fx, s, turn, "capability.execute", run.clone());
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "not integrated");
    let b = paused_request(&call(&fx, s, turn, "tool.integration.propose", integrate.clone()));
    assert_eq!(decide(&fx, s, b, true).status, "APPROVED");
    fx.gw.resume(s, &fx.env, turn).unwrap();

    // Runs: in the sandbox, on the evidence's text, the input as its argument.
    let turn = fx.turn(s);
    let r = call(&fx, s, turn, "capability.execute", run.clone());
    assert_eq!(r.status, ResultStatus::Completed, "{:?}", r.diagnostic);
    let data = &r.artifacts[0].data;
    assert_eq!(r.artifacts[0].trust, "UNTRUSTED_DATA");
    assert!(data["output"]["value"]["lines"].as_u64().unwrap() >= 1, "{data}");
    assert_eq!(data["output"]["value"]["top"], 1);
    let asked = host.asked.lock().unwrap().last().cloned().unwrap();
    assert_eq!(asked.args, vec![json!({"top": 1}).to_string()]);
    assert_eq!(asked.inputs[0].evidence, Some(fx.spec_evidence[0]));

    // Checked at each run: an input outside its closed schema, evidence of
    // another investigation, a manifest changed on disk since approval.
    let mut bad = run.clone();
    bad["input"] = json!({"top": 1, "shell": "rm -rf /"});
    assert_refused(&call(&fx, s, turn, "capability.execute", bad), ResultStatus::Denied, Stage::Service, "input");
    let mut foreign = run.clone();
    foreign["evidence_ids"] = json!([fx.real_note.to_string()]);
    let r = call(&fx, s, turn, "capability.execute", foreign);
    assert_ne!(r.status, ResultStatus::Completed, "another workspace's evidence");
    let before = host.asked.lock().unwrap().len();
    lines.script.push_str("import os\n");
    std::fs::write(&file, serde_json::to_string(&lines).unwrap()).unwrap();
    let r = call(&fx, s, turn, "capability.execute", run);
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "changed since a human approved it");
    assert_eq!(host.asked.lock().unwrap().len(), before, "nothing ran");
    // And an approval of a proposal whose manifest changed since: void.
    let turn = fx.turn(s);
    let other = json!({"investigation_id": inv_s, "capability_id": "text.find_duplicate_lines", "reason": "doublons"});
    let c = paused_request(&call(&fx, s, turn, "tool.provision.propose", other));
    let mut stale = fx.writer();
    let d = ToolDecision {
        approve: true,
        note: None,
        decided_by: "analyst".into(),
        current_contract_fingerprint: fx.gw.catalog().get(ToolId::ToolProvisionPropose).unwrap().fingerprint.clone(),
        current_manifest_fingerprint: Some("f".repeat(64)),
    };
    assert_eq!(stale.decide_tool_request(s.workspace, &c, &d).unwrap().status, "VOID");
    let ended = fx.gw.resume(s, &fx.env, turn).unwrap();
    assert!(ended.summary.unwrap().contains("annulée"), "the turn says it was voided");
    let actions = fx.audit_actions(s);
    for a in ["tool_request.install", "tool_request.approved", "tool_request.integrate", "tool_request.void"] {
        assert!(actions.iter().any(|x| x == a), "{a} audited: {actions:?}");
    }
}

#[test]
fn a_change_is_tested_in_the_sandbox_tried_after_c1_and_promoted_after_c2() {
    if !labfy_testkit::present(has_python(), "SANDBOX", "no python3") {
        return;
    }
    let (fx, _host) = optional(None);
    let (s, inv) = (fx.spec, fx.spec_inv);
    let inv_s = inv.to_string();
    let mut changed: Manifest = serde_json::from_str(SHIPPED[0].1).unwrap();
    changed.version = "1.1.0".into();
    changed.description = "Compte les mots (en ignorant les chiffres) — counts words, digits aside.".into();
    changed.script = changed.script.replace("re.findall(r'\\w+'", "re.findall(r'[^\\W\\d]+'");
    assert!(changed.script.contains("[^\\W\\d]+"), "the change applies");

    // Failing tests: nothing proposed, the results say why.
    let mut broken = changed.clone();
    broken.tests[0].stdout_contains = "absent".into();
    let turn = fx.turn(s);
    let r = call(
        &fx,
        s,
        turn,
        "code.change.propose",
        json!({"investigation_id": inv_s, "reason": "ignorer les chiffres", "manifest": broken}),
    );
    assert_eq!(r.status, ResultStatus::Failed, "{:?}", r.diagnostic);
    assert!(r.diagnostic.as_deref().unwrap().contains("1 of 2 tests"), "{:?}", r.diagnostic);
    assert_eq!(r.artifacts[0].data["tests"][0]["passed"], false);
    assert!(fx.reads().reads().tool_requests(s.workspace, &inv, 10).unwrap().is_empty());
    // An open schema, a program off the allow-list: refused with the reason.
    let mut open = changed.clone();
    open.input_schema["additionalProperties"] = json!(true);
    let r =
        call(&fx, s, turn, "code.change.propose", json!({"investigation_id": inv_s, "reason": "x", "manifest": open}));
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "is open");
    let bash = Manifest { program: "bash".into(), ..changed.clone() };
    let r =
        call(&fx, s, turn, "code.change.propose", json!({"investigation_id": inv_s, "reason": "x", "manifest": bash}));
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "allow-list");

    // Passing tests: C1 with the diff and the results.
    let c1 = paused_request(&call(
        &fx,
        s,
        turn,
        "code.change.propose",
        json!({"investigation_id": inv_s, "reason": "ignorer les chiffres", "manifest": changed}),
    ));
    let stored = fx.reads().reads().tool_request(s.workspace, &c1).unwrap();
    assert_eq!(
        (stored.kind, stored.pause, stored.capability_version.as_str()),
        (ToolRequestKind::Change, "C1", "1.1.0")
    );
    let diff = stored.detail["diff"].as_str().unwrap();
    assert!(diff.contains("-  \"version\": \"1.0.0\"") && diff.contains("+  \"version\": \"1.1.0\""), "{diff}");
    assert!(diff.contains("+") && diff.contains("[^\\W\\d]+"), "{diff}");
    assert!(stored.detail["tests"].as_array().unwrap().iter().all(|t| t["passed"] == true));
    // The registry is untouched: the shipped 1.0.0 still.
    let turn = fx.turn(s);
    let found =
        call(&fx, s, turn, "tool.provision.search", json!({"investigation_id": inv_s, "query": "compter les mots"}));
    assert_eq!(found.artifacts[0].data["capabilities"][0]["version"], "1.0.0");

    // Before C1's approval no trial runs; after, the trial runs here.
    let turn = fx.turn(s);
    let trial = json!({"investigation_id": inv_s, "capability_id": "text.count_words", "input": {"top": 3},
                       "evidence_ids": [fx.spec_evidence[0].to_string()], "trial_request_id": c1.to_string()});
    let r = call(&fx, s, turn, "capability.execute", trial.clone());
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "not an approved trial");
    assert_eq!(decide(&fx, s, c1, true).status, "APPROVED");
    let r = call(&fx, s, turn, "capability.execute", trial);
    assert_eq!(r.status, ResultStatus::Completed, "{:?}", r.diagnostic);
    assert_eq!(r.artifacts[0].data["version"], "1.1.0");
    assert!(r.artifacts[0].data["output"]["value"].is_array(), "{}", r.artifacts[0].data);

    // C2: only an approved trial; then the registry holds 1.1.0, installed,
    // not integrated (B again for the new manifest).
    let r = call(
        &fx,
        s,
        turn,
        "code.change.propose",
        json!({"investigation_id": inv_s, "reason": "promouvoir", "promote_request_id": c1.to_string(),
                        "manifest": {}}),
    );
    assert_refused(&r, ResultStatus::Denied, Stage::Service, "either");
    let c2 = paused_request(&call(
        &fx,
        s,
        turn,
        "code.change.propose",
        json!({"investigation_id": inv_s, "reason": "promouvoir", "promote_request_id": c1.to_string()}),
    ));
    assert_eq!(fx.reads().reads().tool_request(s.workspace, &c2).unwrap().pause, "C2");
    assert_eq!(decide(&fx, s, c2, true).status, "APPROVED");
    let turn = fx.turn(s);
    let found =
        call(&fx, s, turn, "tool.provision.search", json!({"investigation_id": inv_s, "query": "compter les mots"}));
    let cap = &found.artifacts[0].data["capabilities"][0];
    assert_eq!((cap["version"].as_str(), cap["origin"].as_str()), (Some("1.1.0"), Some("promoted")));
    assert_eq!((cap["installed"].as_str(), cap["integrated"].as_str()), (Some("yes"), Some("no")));
}

#[test]
fn the_demo_agent_pauses_at_a_then_b_then_runs_the_capability_in_one_turn() {
    if !labfy_testkit::present(has_python(), "SANDBOX", "no python3") {
        return;
    }
    let (fx, _host) = optional(None);
    let s = fx.spec;
    let new = NewTurn {
        question: "Compte les mots les plus fréquents des pièces".into(),
        investigation_id: None,
        exclusions: vec![],
        mode: None,
        lang: Lang::Fr,
    };
    let turn = fx.gw.run_demo_turn(s, &fx.env, &new).unwrap();
    assert_eq!(turn.status, TurnStatus::AuthorizationRequired, "{turn:?}");
    let a = turn.research_request.unwrap();
    let stored = fx.reads().reads().tool_request(s.workspace, &a).unwrap();
    assert_eq!((stored.pause, stored.capability_id.as_str()), ("A", "text.count_words"));
    assert_eq!(stored.requested_by, DEMO_ACTOR);
    decide(&fx, s, a, true);
    let t = fx.gw.resume(s, &fx.env, turn.turn_id).unwrap();
    assert_eq!(t.status, TurnStatus::AuthorizationRequired, "paused again, at B: {t:?}");
    let b = t.research_request.unwrap();
    assert_ne!(a, b);
    assert_eq!(fx.reads().reads().tool_request(s.workspace, &b).unwrap().pause, "B");
    decide(&fx, s, b, true);
    let t = fx.gw.resume(s, &fx.env, turn.turn_id).unwrap();
    assert_eq!(t.status, TurnStatus::Completed, "{t:?}");
    let summary = t.summary.unwrap();
    assert!(summary.contains("text.count_words") && summary.contains("sans réseau"), "{summary}");
    assert!(!t.summary_refs.is_empty(), "the evidence it ran on");
    // A refusal ends the next such turn, saying nothing ran.
    let t2 =
        fx.gw.run_demo_turn(s, &fx.env, &NewTurn { question: "Trouve les lignes en doublon".into(), ..new }).unwrap();
    let r = t2.research_request.unwrap();
    decide(&fx, s, r, false);
    let ended = fx.gw.resume(s, &fx.env, t2.turn_id).unwrap();
    assert_eq!(ended.status, TurnStatus::Completed);
    assert!(ended.summary.unwrap().contains("refusée par l'analyste"));
}

/// SPEC R3, composite risk (mission audit 3, B2): a capability whose
/// manifest declares `medium` or `high` is refused by `capability.execute`,
/// published `low`, with the reason — even installed and integrated by a
/// human — and never reaches the sandbox.
#[test]
fn a_capability_above_the_tools_risk_level_is_refused_not_run_below_it() {
    if !labfy_testkit::present(has_python(), "SANDBOX", "no python3") {
        return;
    }
    for level in [RiskLevel::Medium, RiskLevel::High] {
        let installed = TempDir::new().unwrap();
        let mut m: Manifest = serde_json::from_str(SHIPPED[0].1).unwrap();
        m.id = format!("text.count_{}", level.as_str());
        m.risk_level = level;
        std::fs::write(installed.path().join("m.json"), serde_json::to_string(&m).unwrap()).unwrap();
        let (fx, host) = optional(Some(installed.path()));
        let (s, inv) = (fx.spec, fx.spec_inv.to_string());
        for tool in ["tool.provision.propose", "tool.integration.propose"] {
            let turn = fx.turn(s);
            let ask = json!({"investigation_id": inv, "capability_id": m.id, "reason": "pour compter"});
            let request = paused_request(&call(&fx, s, turn, tool, ask));
            assert_eq!(decide(&fx, s, request, true).status, "APPROVED");
            fx.gw.resume(s, &fx.env, turn).unwrap();
        }
        let turn = fx.turn(s);
        let input = m.tests[0].input.clone();
        let run = json!({"investigation_id": inv, "capability_id": m.id, "input": input});
        let r = call(&fx, s, turn, "capability.execute", run);
        assert_refused(&r, ResultStatus::Denied, Stage::Service, "above capability.execute's low");
        assert!(r.diagnostic.as_deref().unwrap().contains(&format!("risk level {}", level.as_str())), "{r:?}");
        assert!(host.asked.lock().unwrap().is_empty(), "{}: the sandbox was asked", level.as_str());
    }
}
