//! The optional catalog's services (SPEC X2, the seed's « outils
//! provisionnés et changement de code »): capabilities found
//! (`tool.provision.search`), proposed for installation (pause A) and
//! integration (pause B), executed in the sandbox (`capability.execute`),
//! and developed as a change tested in the sandbox (pause C1) then promoted
//! (pause C2).
//!
//! What this module never does is decide: every durable step is a tool
//! request the store keeps PENDING until the analyst's route decides it;
//! the model has no tool for that. What is installed or integrated is read
//! from the approved requests at each call, and `capability.execute` runs a
//! manifest only when its fingerprint *now* is the one a human approved —
//! a manifest changed on disk after approval is refused, like a changed
//! tool contract (R5).
//!
//! The registry is read afresh at each call (a few small files): the shipped
//! manifests, the operator's installed folder, and the workspace's promoted
//! ones, checked against the sandbox's allow-list as the governor offers it
//! now.

use labfy_core::ObjectRef;
use labfy_store::{NewToolRequest, StoreError, ToolRequest, ToolRequestKind};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::backend;
use crate::capability::{Capability, CapabilityTest, Origin, Registry, check_value};
use crate::catalog::{Environment, Tool, ToolId};
use crate::protocol::{CallRequest, ResultStatus, trust};
use crate::sandbox::{SandboxAsk, SandboxEnded, SandboxInputFile, SandboxOutcome, SandboxRan};
use crate::services::{
    CallOrigin, Outcome, Tools, evidence_inputs, number, optional_reference, reference, references, run_line, text,
};

/// Longest run of one capability test, seconds.
pub const TEST_TIMEOUT_SECONDS: u64 = 10;
/// Largest diff a change request keeps, bytes.
pub const MAX_DIFF_BYTES: usize = 64 * 1024;
/// Characters of a test's stdout (and stderr) a change request keeps.
pub const TEST_OUTPUT_CHARS: usize = 2_000;
/// Refused manifests a search names at most.
const REFUSED_SHOWN: usize = 8;

fn denied(why: String) -> Outcome {
    Outcome::with_status(ResultStatus::Denied, why)
}

fn allow_list(env: &Environment) -> Vec<&str> {
    env.sandbox_programs.iter().map(String::as_str).collect()
}

/// The registry this workspace sees now.
fn registry(gw: &Tools<'_>, ws: Uuid, env: &Environment) -> Result<Registry, StoreError> {
    let allowed = allow_list(env);
    let promoted = backend::read(gw.backend, |r| r.promoted_manifests(ws))?;
    Ok(Registry::load(gw.capability_dir, &allowed).with_promoted(promoted.iter().map(|p| &p.manifest), &allowed))
}

/// `installed` / `integrated` as a tool's answer shows them: the state for
/// this manifest, or that another one was approved.
fn stand(approved: Option<&str>, fingerprint: &str) -> Value {
    match approved {
        None => json!("no"),
        Some(fp) if fp == fingerprint => json!("yes"),
        Some(fp) => json!({"other_manifest": fp}),
    }
}

/// `tool.provision.search`.
pub(crate) fn search(gw: &Tools<'_>, ws: Uuid, env: &Environment, req: &CallRequest) -> Result<Outcome, StoreError> {
    let input = &req.input;
    let inv: ObjectRef = reference(input, "investigation_id")?;
    let limit = usize::try_from(number(input, "limit", 5)).unwrap_or(5);
    let registry = registry(gw, ws, env)?;
    let found = registry.search(text(input, "query"), limit);
    let mut caps = Vec::with_capacity(found.len());
    let mut refs = vec![inv];
    for c in &found {
        let standing = backend::read(gw.backend, |r| r.capability_standing(ws, &inv, &c.manifest.id))?;
        refs.extend(standing.pending.iter().copied());
        caps.push(json!({
            "capability_id": c.manifest.id,
            "version": c.manifest.version,
            "description": c.manifest.description,
            "risk_level": c.manifest.risk_level,
            "program": c.manifest.program,
            "input_schema": c.manifest.input_schema,
            "output": c.manifest.output,
            "tests": c.manifest.tests.len(),
            // A valid input (its first test's), for a caller to start from.
            "example_input": c.manifest.tests.first().map(|t| &t.input),
            "origin": c.origin,
            "fingerprint": c.fingerprint,
            "installed": stand(standing.installed.as_deref(), &c.fingerprint),
            "integrated": stand(standing.integrated.as_deref(), &c.fingerprint),
            "pending_requests": standing.pending,
        }));
    }
    let refused: Vec<String> = registry.refused().iter().take(REFUSED_SHOWN).map(ToString::to_string).collect();
    let line = format!(
        "{} capabilities found{}",
        caps.len(),
        if refused.is_empty() { String::new() } else { format!("; {} manifests left out", registry.refused().len()) }
    );
    let data = json!({"capabilities": caps, "left_out": refused, "allow_list": env.sandbox_programs});
    Ok(Outcome::completed("capabilities", trust::UNTRUSTED, data)?.refs(refs).observe(line))
}

/// The outcome of a stored tool request: paused for the human.
fn paused(gw: &Tools<'_>, ws: Uuid, request: ObjectRef, created: bool) -> Result<Outcome, StoreError> {
    let stored = backend::read(gw.backend, |r| r.tool_request(ws, &request))?;
    let pause = stored.kind.pause();
    let line = if created {
        format!("tool request prepared (pause {pause}): {} {}", stored.kind.as_str(), stored.capability_id)
    } else {
        format!("tool request already prepared (replay, pause {pause})")
    };
    let mut o = Outcome::completed("tool_request", trust::UNTRUSTED, &stored)?
        .refs([request])
        .observe(line)
        .observe("nothing installed, integrated or run: a human decides".to_owned());
    o.status = ResultStatus::AuthorizationRequired;
    o.diagnostic = Some(format!("{request} waits for a human decision (approve or refuse) in the UI (pause {pause})"));
    Ok(o)
}

#[allow(clippy::too_many_arguments)]
fn store_request(
    gw: &Tools<'_>,
    ws: Uuid,
    tool: &Tool,
    req: &CallRequest,
    origin: CallOrigin<'_>,
    inv: ObjectRef,
    kind: ToolRequestKind,
    cap: &Capability,
    detail: Value,
) -> Result<Outcome, StoreError> {
    let new = NewToolRequest {
        investigation: inv,
        kind,
        capability_id: cap.manifest.id.clone(),
        capability_version: cap.manifest.version.clone(),
        manifest: cap.manifest_json(),
        manifest_fingerprint: cap.fingerprint.clone(),
        reason: text(&req.input, "reason").to_owned(),
        detail,
        turn_id: req.turn_id,
        call_id: req.call_id,
        idempotency_key: req.idempotency_key.clone(),
        requested_by: origin.actor.to_owned(),
        contract_fingerprint: tool.fingerprint.clone(),
    };
    let (request, created) = backend::write(gw.backend, |s| s.propose_tool_request(ws, &new))?;
    paused(gw, ws, request, created)
}

/// `tool.provision.propose` (pause A) and `tool.integration.propose` (B).
pub(crate) fn propose(
    gw: &Tools<'_>,
    ws: Uuid,
    env: &Environment,
    tool: &Tool,
    req: &CallRequest,
    origin: CallOrigin<'_>,
) -> Result<Outcome, StoreError> {
    let input = &req.input;
    let inv: ObjectRef = reference(input, "investigation_id")?;
    let id = text(input, "capability_id");
    let registry = registry(gw, ws, env)?;
    let Some(cap) = registry.get(id) else {
        let why = registry.refused().iter().find(|e| e.source_name.contains(id)).map(ToString::to_string);
        return Ok(denied(match why {
            Some(why) => format!("{id} is in the registry but refused: {why}"),
            None => format!("no capability {id} in the registry: tool.provision.search finds them"),
        }));
    };
    let standing = backend::read(gw.backend, |r| r.capability_standing(ws, &inv, id))?;
    let installed = standing.installed.as_deref() == Some(cap.fingerprint.as_str());
    let integrated = standing.integrated.as_deref() == Some(cap.fingerprint.as_str());
    let kind = if tool.id == ToolId::ToolProvisionPropose {
        if installed {
            let line = format!("{id} {} is already installed in this workspace", cap.manifest.version);
            return Ok(Outcome::completed(
                "tool_state",
                trust::LABFY,
                json!({"capability_id": id, "installed": true}),
            )?
            .refs([inv])
            .observe(line));
        }
        ToolRequestKind::Install
    } else {
        if !installed {
            return Ok(denied(format!(
                "{id} {} is not installed in this workspace{}: propose its installation first (tool.provision.propose)",
                cap.manifest.version,
                if standing.installed.is_some() { " with this manifest (another one was approved)" } else { "" }
            )));
        }
        if integrated {
            let line = format!("{id} is already callable in this investigation (capability.execute)");
            return Ok(Outcome::completed(
                "tool_state",
                trust::LABFY,
                json!({"capability_id": id, "installed": true, "integrated": true}),
            )?
            .refs([inv])
            .observe(line));
        }
        ToolRequestKind::Integrate
    };
    store_request(gw, ws, tool, req, origin, inv, kind, cap, json!({"origin": cap.origin}))
}

/// The capability a `capability.execute` call may run now, or why not.
fn runnable(
    gw: &Tools<'_>,
    ws: Uuid,
    env: &Environment,
    inv: &ObjectRef,
    id: &str,
    trial: Option<ObjectRef>,
) -> Result<Result<(Capability, Option<ObjectRef>), String>, StoreError> {
    let allowed = allow_list(env);
    if let Some(t) = trial {
        let stored = backend::read(gw.backend, |r| r.tool_request(ws, &t))?;
        if stored.kind != ToolRequestKind::Change || stored.status != "APPROVED" {
            return Ok(Err(format!("{t} is not an approved trial (a change a human approved at pause C1)")));
        }
        if stored.investigation_id != *inv || stored.capability_id != id {
            return Ok(Err(format!(
                "{t} is a trial of {} in another investigation or of another capability",
                stored.capability_id
            )));
        }
        let cap = match check_value(&t.to_string(), &stored.manifest, &allowed, Origin::Trial) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if cap.fingerprint != stored.manifest_fingerprint {
            return Ok(Err(format!("{t}'s manifest does not match what a human approved")));
        }
        return Ok(Ok((cap, Some(t))));
    }
    let registry = registry(gw, ws, env)?;
    let Some(cap) = registry.get(id) else {
        return Ok(Err(format!("no capability {id} in the registry now")));
    };
    let standing = backend::read(gw.backend, |r| r.capability_standing(ws, inv, id))?;
    let changed = |approved: &str| {
        format!(
            "the manifest of {id} changed since a human approved it (fingerprint {} approved, {} now): \
             propose it again",
            &approved[..approved.len().min(12)],
            &cap.fingerprint[..12]
        )
    };
    match (standing.installed.as_deref(), standing.integrated.as_deref()) {
        (None, _) => Ok(Err(format!("{id} is not installed in this workspace (tool.provision.propose)"))),
        (Some(fp), _) if fp != cap.fingerprint => Ok(Err(changed(fp))),
        (Some(_), None) => Ok(Err(format!("{id} is not integrated in this investigation (tool.integration.propose)"))),
        (Some(_), Some(fp)) if fp != cap.fingerprint => Ok(Err(changed(fp))),
        _ => Ok(Ok((cap.clone(), None))),
    }
}

/// `capability.execute`: checked now against the approvals, the mission
/// (this investigation's evidence only), the capability's own schema and
/// the sandbox's bounds, then run through `sandbox.exec`'s machinery.
pub(crate) fn execute(gw: &Tools<'_>, ws: Uuid, env: &Environment, req: &CallRequest) -> Result<Outcome, StoreError> {
    let Some(sandbox) = gw.sandbox else {
        return Ok(Outcome::unavailable("capability.execute has no sandbox runner in this process".to_owned()));
    };
    let input = &req.input;
    let inv: ObjectRef = reference(input, "investigation_id")?;
    let id = text(input, "capability_id");
    let trial = optional_reference(input, "trial_request_id")?;
    let (cap, trial) = match runnable(gw, ws, env, &inv, id, trial)? {
        Ok(x) => x,
        Err(why) => return Ok(denied(why)),
    };
    if let Err(why) = within_published_risk(gw.catalog, &cap) {
        return Ok(denied(why));
    }
    let args = input.get("input").cloned().unwrap_or_else(|| json!({}));
    if let Err(why) = cap.validate_input(&args) {
        return Ok(denied(format!("{id}: {why}")));
    }
    let evidence = if input.get("evidence_ids").is_some() { references(input, "evidence_ids")? } else { Vec::new() };
    for ev in &evidence {
        let of = backend::read(gw.backend, |r| r.investigation_of_object(ev))?;
        if of != Some(inv.id()) {
            return Ok(denied(format!("{ev} is not evidence of {inv}: a capability reads its own investigation only")));
        }
    }
    let inputs = match evidence_inputs(gw, ws, &evidence)? {
        Ok(inputs) => inputs,
        Err(refusal) => return Ok(refusal),
    };
    let ask = SandboxAsk {
        workspace: ws,
        program: cap.manifest.program.clone(),
        script: Some(cap.manifest.script.clone()),
        args: vec![args.to_string()],
        inputs,
        timeout_seconds: input.get("timeout_seconds").and_then(Value::as_u64).unwrap_or(10),
        turn_id: req.turn_id,
        call_id: req.call_id,
    };
    Ok(match sandbox.run(&ask).map_err(StoreError::Internal)? {
        SandboxOutcome::Ran(ran) => {
            let line = format!("{id} {}: {}", cap.manifest.version, run_line(&ran));
            let output = output_of(&cap, &ran);
            let data = json!({
                "capability_id": id, "version": cap.manifest.version, "fingerprint": cap.fingerprint,
                "trial_request": trial, "output": output, "run": ran, "stored": false,
            });
            let mut refs = vec![inv];
            refs.extend(evidence);
            refs.extend(trial);
            Outcome::completed("capability_output", trust::UNTRUSTED, data)?.refs(refs).observe(line)
        }
        SandboxOutcome::Refused(why) => denied(why),
        SandboxOutcome::Unavailable(why) => Outcome::unavailable(why),
        SandboxOutcome::Failed(why) => Outcome::failed(why),
    })
}

/// SPEC R3, composite risk (mission audit 3, B2): a capability runs at the
/// highest of its own level and `capability.execute`'s. The tool is
/// published at its level, and a call of it is policed at that level, so a
/// manifest declaring more (a `high` capability through a `low` tool) is
/// refused, with the reason — never run below its level.
fn within_published_risk(catalog: &crate::Catalog, cap: &Capability) -> Result<(), String> {
    let Some(tool) = catalog.get(crate::catalog::ToolId::CapabilityExecute) else {
        return Err("capability.execute is not in this catalog (the optional catalog is off)".to_owned());
    };
    let published = tool.risk;
    let declared = cap.manifest.risk_level;
    if declared > published {
        return Err(format!(
            "{} declares risk level {}, above capability.execute's {}: a composite takes its highest level (R3), \
             and this tool runs {} capabilities only",
            cap.manifest.id,
            declared.as_str(),
            published.as_str(),
            published.as_str()
        ));
    }
    Ok(())
}

/// A run's stdout as the manifest's output contract reads it: bounded, and
/// parsed when it promises JSON.
fn output_of(cap: &Capability, ran: &SandboxRan) -> Value {
    let max = cap.manifest.output.max_bytes as usize;
    let out = &ran.stdout.text;
    let over = ran.stdout.bytes > max as u64 || ran.stdout.truncated;
    let exited = matches!(ran.end, SandboxEnded::Exited { code: 0 });
    match cap.manifest.output.kind {
        crate::capability::OutputKind::Json if exited && !over => match serde_json::from_str::<Value>(out) {
            Ok(v) => json!({"kind": "json", "value": v}),
            Err(e) => {
                json!({"kind": "json", "error": format!("the output is not the JSON the manifest promises: {e}")})
            }
        },
        _ => {
            let mut cut = out.len().min(max);
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            json!({"kind": "text", "text": &out[..cut], "truncated": over || cut < out.len(),
                   "exited": exited})
        }
    }
}

/// What a test run showed.
fn test_result(t: &CapabilityTest, ran: &SandboxRan, json_out: bool) -> Value {
    let clip = |s: &str| labfy_core::bounded::truncate_chars(s, TEST_OUTPUT_CHARS);
    let (exit, ended) = match &ran.end {
        SandboxEnded::Exited { code } => (Some(*code), format!("exit code {code}")),
        SandboxEnded::Signalled { signal } => (None, format!("ended by signal {signal}")),
        SandboxEnded::Stopped { reason } => (None, format!("stopped: {reason}")),
    };
    let mut why = Vec::new();
    if exit != Some(t.expect_exit) {
        why.push(format!("{ended}, {} expected", t.expect_exit));
    }
    if !ran.stdout.text.contains(&t.stdout_contains) {
        why.push(format!("stdout does not hold {:?}", clip(&t.stdout_contains)));
    }
    if json_out && exit == Some(0) && serde_json::from_str::<Value>(&ran.stdout.text).is_err() {
        why.push("stdout is not JSON".to_owned());
    }
    json!({
        "name": t.name, "passed": why.is_empty(), "why": why, "ended": ended, "exit": exit,
        "stdout": clip(&ran.stdout.text), "stderr": clip(&ran.stderr.text), "duration_ms": ran.duration_ms,
    })
}

/// The manifest as a human reads a diff of it: its fields, then its script.
fn readable(m: &Value) -> String {
    let mut fields = m.clone();
    let script = fields.as_object_mut().and_then(|o| o.remove("script")).unwrap_or(Value::Null);
    format!(
        "{}\n--- script ---\n{}\n",
        serde_json::to_string_pretty(&fields).unwrap_or_default(),
        script.as_str().unwrap_or_default()
    )
}

fn diff(base: Option<&Capability>, new: &Capability) -> String {
    let before = base.map(|b| readable(&b.manifest_json())).unwrap_or_default();
    let after = readable(&new.manifest_json());
    // Headers as `diff` writes them, in no language: `a/` the registry's
    // version (`/dev/null` for a new capability), `b/` the proposed one.
    let from = base.map_or_else(|| "/dev/null".to_owned(), |b| format!("a/{} {}", b.manifest.id, b.manifest.version));
    let to = format!("b/{} {}", new.manifest.id, new.manifest.version);
    let text =
        similar::TextDiff::from_lines(&before, &after).unified_diff().context_radius(3).header(&from, &to).to_string();
    if text.len() <= MAX_DIFF_BYTES {
        return text;
    }
    let mut cut = MAX_DIFF_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}\n… (diff cut at {MAX_DIFF_BYTES} bytes)\n", &text[..cut])
}

/// `code.change.propose`: a whole manifest, checked, tested in the sandbox
/// and paused for a trial (C1); or an approved trial paused for promotion
/// (C2). The change lives in its tool request only — never in the registry
/// — until a human promotes it.
pub(crate) fn change(
    gw: &Tools<'_>,
    ws: Uuid,
    env: &Environment,
    tool: &Tool,
    req: &CallRequest,
    origin: CallOrigin<'_>,
) -> Result<Outcome, StoreError> {
    let input = &req.input;
    let inv: ObjectRef = reference(input, "investigation_id")?;
    let promote = optional_reference(input, "promote_request_id")?;
    match (input.get("manifest"), promote) {
        (Some(_), Some(_)) | (None, None) => Ok(denied(
            "give either `manifest` (a change to test and try, pause C1) or `promote_request_id` (an approved \
             trial to promote, pause C2)"
                .to_owned(),
        )),
        (None, Some(trial)) => {
            let stored: ToolRequest = backend::read(gw.backend, |r| r.tool_request(ws, &trial))?;
            if stored.kind != ToolRequestKind::Change || stored.status != "APPROVED" || stored.investigation_id != inv {
                return Ok(denied(format!(
                    "{trial} is not a trial a human approved (pause C1) in this investigation: only such a change \
                     can be proposed for promotion"
                )));
            }
            let cap = match check_value(&trial.to_string(), &stored.manifest, &allow_list(env), Origin::Trial) {
                Ok(c) if c.fingerprint == stored.manifest_fingerprint => c,
                Ok(_) => return Ok(denied(format!("{trial}'s manifest does not match what a human approved"))),
                Err(e) => return Ok(denied(e.to_string())),
            };
            let detail = json!({"change": trial, "diff": stored.detail.get("diff"),
                                "tests": stored.detail.get("tests"), "base": stored.detail.get("base")});
            store_request(gw, ws, tool, req, origin, inv, ToolRequestKind::Promote, &cap, detail)
        }
        (Some(manifest), None) => {
            let Some(sandbox) = gw.sandbox else {
                return Ok(Outcome::unavailable("code.change.propose has no sandbox to test the change in".to_owned()));
            };
            let cap = match check_value("the proposed manifest", manifest, &allow_list(env), Origin::Trial) {
                Ok(c) => c,
                Err(e) => return Ok(denied(e.to_string())),
            };
            let registry = registry(gw, ws, env)?;
            let base = registry.get(&cap.manifest.id);
            if base.is_some_and(|b| b.fingerprint == cap.fingerprint) {
                return Ok(denied(format!("{} is the registry's manifest unchanged: nothing to try", cap.manifest.id)));
            }
            let json_out = cap.manifest.output.kind == crate::capability::OutputKind::Json;
            let mut tests = Vec::with_capacity(cap.manifest.tests.len());
            for (i, t) in cap.manifest.tests.iter().enumerate() {
                let ask = SandboxAsk {
                    workspace: ws,
                    program: cap.manifest.program.clone(),
                    script: Some(cap.manifest.script.clone()),
                    args: vec![t.input.to_string()],
                    inputs: t
                        .files
                        .iter()
                        .map(|(name, text)| SandboxInputFile { name: name.clone(), evidence: None, text: text.clone() })
                        .collect(),
                    timeout_seconds: TEST_TIMEOUT_SECONDS,
                    turn_id: req.turn_id,
                    // One run per test, each its own owner at the governor.
                    call_id: Uuid::from_u128(req.call_id.as_u128() ^ (i as u128 + 1)),
                };
                match sandbox.run(&ask).map_err(StoreError::Internal)? {
                    SandboxOutcome::Ran(ran) => tests.push(test_result(t, &ran, json_out)),
                    SandboxOutcome::Refused(why) => return Ok(denied(format!("test {:?}: {why}", t.name))),
                    SandboxOutcome::Unavailable(why) => return Ok(Outcome::unavailable(why)),
                    SandboxOutcome::Failed(why) => return Ok(Outcome::failed(format!("test {:?}: {why}", t.name))),
                }
            }
            let failed = tests.iter().filter(|t| t["passed"] != true).count();
            let diff = diff(base, &cap);
            let detail = json!({
                "base": base.map(|b| json!({"version": b.manifest.version, "fingerprint": b.fingerprint, "origin": b.origin})),
                "diff": diff, "tests": tests,
            });
            if failed > 0 {
                let mut o = Outcome::completed("change_tests", trust::UNTRUSTED, &detail)?
                    .refs([inv])
                    .observe(format!("{failed} of {} tests failed: nothing proposed", cap.manifest.tests.len()));
                o.status = ResultStatus::Failed;
                o.diagnostic = Some(format!(
                    "{failed} of {} tests of {} failed in the sandbox: fix the manifest and propose it again",
                    cap.manifest.tests.len(),
                    cap.manifest.id
                ));
                return Ok(o);
            }
            store_request(gw, ws, tool, req, origin, inv, ToolRequestKind::Change, &cap, detail)
        }
    }
}

/// The fingerprint of the manifest the workspace's registry holds under
/// `capability` now (`None`: none, or refused), checked against the
/// sandbox's allow-list in `env`.
pub(crate) fn registry_fingerprint(
    gw: &Tools<'_>,
    ws: Uuid,
    env: &Environment,
    capability: &str,
) -> Result<Option<String>, StoreError> {
    Ok(registry(gw, ws, env)?.get(capability).map(|c| c.fingerprint.clone()))
}

/// Runs the service of an optional tool (X2); `None` for a base tool.
pub(crate) fn run(
    gw: &Tools<'_>,
    ws: Uuid,
    env: &Environment,
    tool: &Tool,
    req: &CallRequest,
    origin: CallOrigin<'_>,
) -> Option<Result<Outcome, StoreError>> {
    Some(match tool.id {
        ToolId::ToolProvisionSearch => search(gw, ws, env, req),
        ToolId::ToolProvisionPropose | ToolId::ToolIntegrationPropose => propose(gw, ws, env, tool, req, origin),
        ToolId::CapabilityExecute => execute(gw, ws, env, req),
        ToolId::CodeChangePropose => change(gw, ws, env, tool, req, origin),
        _ => return None,
    })
}
