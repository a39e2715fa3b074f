//! The service stage (G13): each tool delegates to the store's read models
//! and command handlers (G1). Inputs are already validated against the
//! published schema and every reference is resolved, so the getters here only
//! apply the schema's defaults.

use std::str::FromStr;

use labfy_core::{ObjectRef, RefError, RefKind};
use labfy_store::MAX_EXCERPT_CHARS;
use labfy_store::{NewResearchRequest, StoreError, WorkspaceClass};
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::backend::{self, Backend};
use crate::catalog::{Catalog, Tool, ToolId};
use crate::fetch::{AgentFetch, FetchMethod, Fetched, Fetcher};
use crate::protocol::{Artifact, CallRequest, ResultStatus, trust};
use crate::sandbox::{Sandbox, SandboxAsk, SandboxInputFile, SandboxOutcome};

/// What a service produced.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) status: ResultStatus,
    pub(crate) object_refs: Vec<ObjectRef>,
    pub(crate) artifacts: Vec<Artifact>,
    pub(crate) observations: Vec<String>,
    pub(crate) provenance_refs: Vec<ObjectRef>,
    pub(crate) diagnostic: Option<String>,
}

impl Outcome {
    pub(crate) fn completed(kind: &'static str, trust: &'static str, data: impl Serialize) -> Result<Self, StoreError> {
        Ok(Self {
            status: ResultStatus::Completed,
            object_refs: vec![],
            artifacts: vec![Artifact {
                kind: kind.into(),
                trust: trust.into(),
                data: serde_json::to_value(data).map_err(|e| StoreError::Internal(e.to_string()))?,
            }],
            observations: vec![],
            provenance_refs: vec![],
            diagnostic: None,
        })
    }

    pub(crate) fn failed(diagnostic: String) -> Self {
        Self {
            status: ResultStatus::Failed,
            object_refs: vec![],
            artifacts: vec![],
            observations: vec![],
            provenance_refs: vec![],
            diagnostic: Some(diagnostic),
        }
    }

    pub(crate) fn with_status(status: ResultStatus, diagnostic: String) -> Self {
        Self { status, ..Self::failed(diagnostic) }
    }

    pub(crate) fn unavailable(diagnostic: String) -> Self {
        Self::with_status(ResultStatus::Unavailable, diagnostic)
    }

    pub(crate) fn refs(mut self, refs: impl IntoIterator<Item = ObjectRef>) -> Self {
        self.object_refs.extend(refs);
        self
    }

    pub(crate) fn observe(mut self, line: String) -> Self {
        self.observations.push(line);
        self
    }
}

/// The workspace a request acts in, as the server knows it.
#[derive(Debug, Clone, Copy)]
pub struct Scope {
    /// The session's workspace.
    pub workspace: Uuid,
    /// Its class.
    pub class: WorkspaceClass,
}

/// Who makes a call: the actor recorded with durable effects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallOrigin<'a> {
    pub(crate) actor: &'a str,
}

/// What a tool's service reaches, lent by the gateway for one call.
pub(crate) struct Tools<'a> {
    pub(crate) backend: &'a dyn Backend,
    pub(crate) catalog: &'a Catalog,
    pub(crate) fetcher: Option<&'a dyn Fetcher>,
    pub(crate) sandbox: Option<&'a dyn Sandbox>,
    /// The operator's installed capability manifests (X2).
    pub(crate) capability_dir: Option<&'a std::path::Path>,
}

/// A validated input that names an object; `T` says which kind may be named
/// (`ObjectRef`: any, `GrantRef`: a grant only).
pub(crate) fn reference<T: FromStr<Err = RefError>>(input: &Value, name: &str) -> Result<T, StoreError> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| StoreError::Internal(format!("validated input lacks `{name}`")))?
        .parse()
        .map_err(|e| StoreError::Internal(format!("validated `{name}` does not parse: {e}")))
}

pub(crate) fn optional_reference(input: &Value, name: &str) -> Result<Option<ObjectRef>, StoreError> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => reference(input, name).map(Some),
    }
}

pub(crate) fn references(input: &Value, name: &str) -> Result<Vec<ObjectRef>, StoreError> {
    input
        .get(name)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| {
                    v.as_str()
                        .unwrap_or_default()
                        .parse()
                        .map_err(|e| StoreError::Internal(format!("validated `{name}` does not parse: {e}")))
                })
                .collect()
        })
        .unwrap_or_else(|| Ok(vec![]))
}

/// An integer field, or its default when absent. JSON Schema counts `40.0`
/// as an integer, so the schema accepts it: the service must use it too,
/// not fall back to the default.
pub(crate) fn number(input: &Value, name: &str, default: u64) -> u64 {
    input
        .get(name)
        .and_then(|v| {
            v.as_u64().or_else(|| {
                // Bounded by the schema (at most 10^7), so the cast is exact.
                v.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=9.0e15).contains(f)).map(|f| f as u64)
            })
        })
        .unwrap_or(default)
}

pub(crate) fn text<'v>(input: &'v Value, name: &str) -> &'v str {
    input.get(name).and_then(Value::as_str).unwrap_or_default()
}

fn strings(input: &Value, name: &str) -> Vec<String> {
    input
        .get(name)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Limits are bounded by the schema (at most 100), so they fit in `u32`.
fn small(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Runs the service of `tool`.
pub(crate) fn run(
    gw: &Tools<'_>,
    scope: Scope,
    env: &crate::catalog::Environment,
    tool: &Tool,
    req: &CallRequest,
    origin: CallOrigin<'_>,
) -> Result<Outcome, StoreError> {
    let ws = scope.workspace;
    let input = &req.input;
    let b = gw.backend;
    match tool.id {
        ToolId::InvestigationGetOverview => {
            let inv = reference(input, "investigation_id")?;
            let o = backend::read(b, |r| r.overview(ws, &inv))?;
            let refs: Vec<ObjectRef> = std::iter::once(inv)
                .chain(o.top_entities.iter().map(|e| e.id))
                .chain(o.recent_evidence.iter().map(|e| e.id))
                .collect();
            let line = format!(
                "{} evidence, {} entities, {} relations",
                o.counts.evidence, o.counts.entities, o.counts.relations
            );
            Ok(Outcome::completed("overview", trust::UNTRUSTED, o)?.refs(refs).observe(line))
        }
        ToolId::InvestigationSearch => {
            let inv = reference(input, "investigation_id")?;
            let query = text(input, "query").to_owned();
            let limit = small(number(input, "limit", 10));
            let s = backend::read(b, |r| r.search(ws, &inv, &query, limit))?;
            let refs: Vec<ObjectRef> = s.hits.iter().map(|h| h.id).collect();
            let line = format!("{} hits{}", s.hits.len(), if s.truncated { " (more exist)" } else { "" });
            Ok(Outcome::completed("search_result", trust::UNTRUSTED, s)?.refs(refs).observe(line))
        }
        ToolId::InvestigationFindCorrelations => {
            let inv = reference(input, "investigation_id")?;
            let focus = optional_reference(input, "focus_evidence_id")?;
            let limit = small(number(input, "limit", 10));
            let c = backend::read(b, |r| r.correlations(ws, &inv, focus.as_ref(), limit))?;
            let refs: Vec<ObjectRef> = c.iter().map(|x| x.entity.id).collect();
            let line = format!("{} shared entities", c.len());
            Ok(Outcome::completed("correlations", trust::UNTRUSTED, c)?.refs(refs).observe(line))
        }
        ToolId::GraphGetNode => {
            let node = reference(input, "node_id")?;
            let n = backend::read(b, |r| r.node(ws, &node))?;
            let line = format!("degree {}", n.degree);
            Ok(Outcome::completed("node", trust::UNTRUSTED, n)?.refs([node]).observe(line))
        }
        ToolId::GraphGetNeighbors => {
            let node = reference(input, "node_id")?;
            let limit = small(number(input, "limit", 20));
            let n = backend::read(b, |r| r.neighbors(ws, &node, limit))?;
            let refs: Vec<ObjectRef> = n.neighbors.iter().map(|x| x.node.id).collect();
            let line = format!("{} of {} neighbours", n.neighbors.len(), n.total);
            Ok(Outcome::completed("neighbors", trust::UNTRUSTED, n)?.refs(refs).observe(line))
        }
        ToolId::EvidenceGetSummary => {
            let ev = reference(input, "evidence_id")?;
            let s = backend::read(b, |r| r.evidence_summary(ws, &ev))?;
            let refs: Vec<ObjectRef> = std::iter::once(ev).chain(s.entities.iter().map(|e| e.id)).collect();
            let line = format!("{} bytes, {} entities mentioned", s.byte_len, s.entities.len());
            Ok(Outcome::completed("evidence_summary", trust::UNTRUSTED, s)?.refs(refs).observe(line))
        }
        ToolId::EvidenceReadExcerpt => {
            let ev = reference(input, "evidence_id")?;
            let (offset, length) = (number(input, "offset", 0), small(number(input, "length", 1000)));
            let x = backend::read(b, |r| r.excerpt(ws, &ev, offset, length))?;
            let line = format!("characters {}–{} of {}", x.offset, x.offset + x.length, x.total_chars);
            Ok(Outcome::completed("excerpt", trust::UNTRUSTED, x)?.refs([ev]).observe(line))
        }
        ToolId::ProvenanceTrace => {
            let obj = reference(input, "object_id")?;
            let depth = small(number(input, "depth", 4));
            let t = backend::read(b, |r| r.provenance_trace(ws, &obj, depth))?;
            let prov: Vec<ObjectRef> = t.records.iter().map(|p| p.id).collect();
            let line = format!("{} provenance records{}", prov.len(), if t.truncated { " (bounded)" } else { "" });
            let mut o = Outcome::completed("provenance_trace", trust::UNTRUSTED, t)?.refs([obj]).observe(line);
            o.provenance_refs = prov;
            Ok(o)
        }
        ToolId::JobsGet => {
            let job = reference(input, "job_id")?;
            let j = backend::read(b, |r| r.job(ws, &job))?;
            let line = format!("{} at {:.0} %", j.status, j.progress * 100.0);
            Ok(Outcome::completed("job", trust::LABFY, j)?.refs([job]).observe(line))
        }
        ToolId::ToolCatalog => {
            let tools: Vec<Value> = gw
                .catalog
                .tools()
                .iter()
                .map(|t| {
                    json!({"tool_id": t.id.as_str(), "risk_level": t.risk,
                           "contract_fingerprint": t.fingerprint,
                           "availability": t.availability(scope.class, env)})
                })
                .collect();
            Outcome::completed(
                "catalog",
                trust::LABFY,
                json!({"catalog_fingerprint": gw.catalog.fingerprint(), "tools": tools}),
            )
        }
        ToolId::ToolDocsRead => {
            let t = ToolId::from_name(text(input, "tool_id"))
                .and_then(|id| gw.catalog.get(id))
                .ok_or_else(|| StoreError::Internal("validated tool_id is not in the catalog".into()))?;
            Outcome::completed("tool_contract", trust::LABFY, gw.catalog.published(t, scope.class, env))
        }
        ToolId::SandboxExec => sandbox_exec(gw, ws, req),
        // The optional catalog's tools are served by `provision` (X2).
        ToolId::ToolProvisionSearch
        | ToolId::ToolProvisionPropose
        | ToolId::ToolIntegrationPropose
        | ToolId::CapabilityExecute
        | ToolId::CodeChangePropose => {
            Err(StoreError::Internal(format!("{} is served by the optional catalog", tool.id.as_str())))
        }
        ToolId::WebFetch => web_fetch(gw, ws, req, origin),
        ToolId::AgentPropose => {
            let refs = references(input, "object_ids")?;
            let proposal = json!({"kind": text(input, "kind"), "text": text(input, "text"), "object_ids": refs,
                                  "stored": false});
            Ok(Outcome::completed("proposal", trust::UNTRUSTED, proposal)?
                .refs(refs)
                .observe("proposal shown to the analyst; nothing stored".into()))
        }
        ToolId::ResearchGetState => {
            let inv = reference(input, "investigation_id")?;
            let one = optional_reference(input, "research_request_id")?;
            let requests = backend::read(b, |r| match &one {
                Some(req) => {
                    let x = r.research_request(ws, req)?;
                    if x.investigation_id != inv {
                        return Err(StoreError::Invalid(format!("{req} belongs to another investigation")));
                    }
                    Ok(vec![x])
                }
                None => r.research_requests(ws, &inv, 20),
            })?;
            let mut refs = Vec::new();
            let mut evidence = Vec::new();
            for x in &requests {
                refs.push(x.id);
                refs.extend(x.grant.as_ref().map(|g| g.id));
                if let Some(c) = &x.campaign {
                    refs.push(c.id.into());
                    evidence.extend(c.evidence.iter().copied());
                }
            }
            refs.extend(evidence.iter().copied());
            let line = format!("{} research requests", requests.len());
            Ok(Outcome::completed("research_state", trust::UNTRUSTED, requests)?.refs(refs).observe(line))
        }
        ToolId::ResearchPrepare => {
            let new = NewResearchRequest {
                selection: references(input, "selection_ids")?,
                question: text(input, "question").to_owned(),
                exclusions: strings(input, "exclusions"),
                turn_id: req.turn_id,
                call_id: req.call_id,
                idempotency_key: req.idempotency_key.clone(),
                requested_by: origin.actor.to_owned(),
                contract_fingerprint: tool.fingerprint.clone(),
                catalog_fingerprint: gw.catalog.fingerprint().to_owned(),
            };
            let (request, created) = backend::write(b, |s| s.prepare_research(ws, &new))?;
            let stored = backend::read(b, |r| r.research_request(ws, &request))?;
            let line = if created { "research request prepared" } else { "research request already prepared (replay)" };
            let mut o = Outcome::completed("research_request", trust::UNTRUSTED, stored)?
                .refs([request])
                .observe(line.to_owned())
                .observe("no grant, no campaign, no network: a human decides".to_owned());
            o.status = ResultStatus::AuthorizationRequired;
            o.diagnostic = Some(format!("{request} waits for a human decision (grant or refuse) in the UI"));
            debug_assert_eq!(request.kind(), RefKind::ResearchRequest);
            Ok(o)
        }
    }
}

/// Characters of a fetched page's text given to the model with the result
/// (the rest is read with `evidence.read_excerpt`).
pub(crate) const WEB_FETCH_EXCERPT_CHARS: u32 = 4_000;

/// `web.fetch` (SPEC F2): the server's campaign runner fetches one URL under
/// the grant's campaign, through egress, which checks it against what a
/// human confirmed (T2). The policy stage already checked that the grant is
/// active and that its scope holds the URL.
/// Most characters of evidence text one `sandbox.exec` run reads in all
/// (the governor takes 600 KiB of inputs; text is at most 4 bytes a
/// character, so this is checked again in bytes by the governor).
const SANDBOX_INPUT_CHARS: u32 = 600 * 1024;

/// The whole text of each evidence item, as a run's read-only input files
/// (`/input/<uuid>.txt`); a refusal when they hold more than a run reads.
pub(crate) fn evidence_inputs(
    gw: &Tools<'_>,
    ws: Uuid,
    evidence: &[ObjectRef],
) -> Result<Result<Vec<SandboxInputFile>, Outcome>, StoreError> {
    let b = gw.backend;
    let mut inputs = Vec::with_capacity(evidence.len());
    let mut left = SANDBOX_INPUT_CHARS;
    for ev in evidence {
        // The whole text, page by page (an excerpt is bounded).
        let mut text = String::new();
        loop {
            let offset = text.chars().count() as u64;
            let page = backend::read(b, |r| r.excerpt(ws, ev, offset, MAX_EXCERPT_CHARS))?;
            if page.total_chars > i64::from(left) {
                return Ok(Err(Outcome::with_status(
                    ResultStatus::Denied,
                    format!(
                        "the chosen evidence holds more text than a sandbox run reads ({SANDBOX_INPUT_CHARS} \
                         characters in all; {ev} alone holds {}): choose fewer or smaller items",
                        page.total_chars
                    ),
                )));
            }
            text.push_str(&page.text);
            if !page.truncated || page.length == 0 {
                break;
            }
        }
        left = left.saturating_sub(u32::try_from(text.chars().count()).unwrap_or(u32::MAX));
        inputs.push(SandboxInputFile { name: format!("{}.txt", ev.id()), evidence: Some(*ev), text });
    }
    Ok(Ok(inputs))
}

/// One line on how a run ended.
pub(crate) fn run_line(ran: &crate::sandbox::SandboxRan) -> String {
    format!(
        "{} ran confined with no network in {} ms under {}: {}",
        ran.program,
        ran.duration_ms,
        ran.reservation,
        match &ran.end {
            crate::sandbox::SandboxEnded::Exited { code } => format!("exit code {code}"),
            crate::sandbox::SandboxEnded::Signalled { signal } => format!("ended by signal {signal}"),
            crate::sandbox::SandboxEnded::Stopped { reason } => format!("stopped: {reason}"),
        }
    )
}

/// `sandbox.exec` (SPEC X1): the evidence's text read here, the run asked
/// of the governor through the lent [`crate::Sandbox`].
fn sandbox_exec(gw: &Tools<'_>, ws: Uuid, req: &CallRequest) -> Result<Outcome, StoreError> {
    let Some(sandbox) = gw.sandbox else {
        return Ok(Outcome::unavailable("sandbox.exec has no runner in this process".to_owned()));
    };
    let input = &req.input;
    let evidence = if input.get("evidence_ids").is_some() { references(input, "evidence_ids")? } else { Vec::new() };
    let inputs = match evidence_inputs(gw, ws, &evidence)? {
        Ok(inputs) => inputs,
        Err(refusal) => return Ok(refusal),
    };
    let code = input.get("code").and_then(Value::as_str).map(str::to_owned);
    let args = input
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let ask = SandboxAsk {
        workspace: ws,
        program: text(input, "program").to_owned(),
        script: code,
        args,
        inputs,
        timeout_seconds: input.get("timeout_seconds").and_then(Value::as_u64).unwrap_or(10),
        turn_id: req.turn_id,
        call_id: req.call_id,
    };
    Ok(match sandbox.run(&ask).map_err(StoreError::Internal)? {
        SandboxOutcome::Ran(ran) => {
            let line = run_line(&ran);
            let names: Vec<Value> = ask
                .inputs
                .iter()
                .map(|i| json!({"path": format!("/input/{}", i.name), "evidence_id": i.evidence}))
                .collect();
            let data = json!({"run": ran, "inputs": names, "stored": false});
            Outcome::completed("sandbox_output", trust::UNTRUSTED, data)?.refs(evidence).observe(line)
        }
        SandboxOutcome::Refused(why) => Outcome::with_status(ResultStatus::Denied, why),
        SandboxOutcome::Unavailable(why) => Outcome::unavailable(why),
        SandboxOutcome::Failed(why) => Outcome::failed(why),
    })
}

fn web_fetch(gw: &Tools<'_>, ws: Uuid, req: &CallRequest, origin: CallOrigin<'_>) -> Result<Outcome, StoreError> {
    let Some(fetcher) = gw.fetcher else {
        return Ok(Outcome::unavailable("web.fetch has no runner in this process".to_owned()));
    };
    let input = &req.input;
    let grant = reference(input, "grant_id")?;
    let method = if text(input, "method") == "HEAD" { FetchMethod::Head } else { FetchMethod::Get };
    let ask = AgentFetch {
        workspace: ws,
        grant,
        url: text(input, "url").to_owned(),
        method,
        turn_id: req.turn_id,
        call_id: req.call_id,
        actor: origin.actor.to_owned(),
    };
    let fetched = fetcher.fetch(&ask).map_err(StoreError::Internal)?;
    let b = gw.backend;
    Ok(match fetched {
        Fetched::Page(page) => {
            let excerpt = backend::read(b, |r| r.excerpt(ws, &page.evidence, 0, WEB_FETCH_EXCERPT_CHARS))?;
            let provenance = backend::read(b, |r| r.provenance_trace(ws, &page.evidence, 1))?;
            let line = if page.fetched_now {
                format!("fetched over Tor under {grant}, stored as {}", page.evidence)
            } else {
                format!("{} had already fetched it as {}: no new request", page.campaign, page.evidence)
            };
            let refs = [page.evidence, page.campaign.into()];
            let data = json!({"method": method, "page": page, "excerpt": excerpt});
            let mut o = Outcome::completed("fetch_result", trust::UNTRUSTED, data)?.refs(refs).observe(line);
            o.provenance_refs = provenance.records.iter().map(|p| p.id).collect();
            o
        }
        Fetched::Head(head) => {
            let line = format!("HEAD answered {} under {grant}; nothing stored", head.http_status);
            let campaign = head.campaign;
            let data = json!({"method": method, "head": head});
            Outcome::completed("fetch_result", trust::UNTRUSTED, data)?.refs([campaign.into()]).observe(line)
        }
        Fetched::Refused(why) => Outcome::with_status(ResultStatus::Denied, why),
        Fetched::Failed(why) => Outcome::failed(why),
        Fetched::Unavailable(why) => Outcome::unavailable(why),
        Fetched::GrantSpent(why) => Outcome::with_status(
            ResultStatus::AuthorizationRequired,
            format!("{why}; to fetch it again, prepare a new research request (research.prepare) that a human grants"),
        ),
    })
}
