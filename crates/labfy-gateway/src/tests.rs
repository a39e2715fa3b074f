//! Gateway tests: the closed catalog and its pinned fingerprints (G2–G4, R1–R6),
//! schema validation generated from the published schemas, exact resolution
//! (G5), idempotency (G7), the bounded rings (G10), policy and availability
//! (G13), the deterministic demo agent with its human pause and resume (G11),
//! and a hostile evidence item that tries to steer it. Real SQLite stores in
//! temporary directories, a real SPECIMEN, no mocks.

use std::collections::BTreeSet;
use std::sync::Arc;

use labfy_core::{CampaignRef, GrantRef, ObjectRef, RefKind, RiskLevel};
use labfy_store::specimen::{self, SpecimenOutcome, SpecimenSpec};
use labfy_store::{
    GrantDecision, NewGrant, NewNote, ReadOnlyStore, ResearchBudget, ResearchRequest, ResearchScope, Store,
    WorkspaceClass,
};
use serde_json::{Value, json};
use tempfile::TempDir;
use uuid::Uuid;

use crate::catalog::{self, SCHEMA_DIALECT};
use crate::protocol::*;
use crate::*;

// ---------------------------------------------------------------------------
// fixture
// ---------------------------------------------------------------------------

/// Pinned contract fingerprints (R5). A change to any published contract
/// (schema, bound, description, class, risk level) changes one of these on
/// purpose: write the new value here in the same change, and say why.
const PINNED_TOOL_FINGERPRINTS: [(&str, &str); 16] = [
    ("investigation.get_overview", "a6f2c00c273b70b827f006f8bcf3ced2138fac348803ab2bfb17d2299793c920"),
    ("investigation.search", "6419dcf6eac5b49211b41c3486c6d215b9a83c76bea24f9e743adf2133c70bf7"),
    ("investigation.find_correlations", "05516e906a5f21b1ba4307ca60f8936b4eed39db82298cef8ea0e4daa240271e"),
    ("graph.get_node", "c69e987099bff44e02ef8ba67845a1fb17030e4539d1fbbebbb765e67e8462cb"),
    ("graph.get_neighbors", "65ebaac779fbaab6c2c80255f0fb9ccccd18bce296d34d0fe2f823a65ca2870c"),
    ("evidence.get_summary", "e915b4589c4aa92ffb7b4e30b4b8829c119180d371a09d353165250a69405091"),
    ("evidence.read_excerpt", "f7e83d49356dbd7e8e698795cf06749b98d35f1c07c0dd6358260386c2fcb8d0"),
    ("provenance.trace", "2cc72599e4f177ce2bcc093ce97a8f2785cf025cd66f3aea4f7c1090292bd408"),
    ("jobs.get", "cd0b891f2069a48345413c520ceeb5c57db3b4076c7a87fd3ec9e0430b4aa130"),
    ("tool.catalog", "1c37483d90100e3c64fec07bceddb77e7fbb93e656a123b374ca7a0523dc4278"),
    ("tool.docs.read", "364c99212afe9ed4ca7aff7ee61bd510bfea562c2d8e4c7ac4a077b87d13a11e"),
    // Re-pinned for X1: `program` of the operator's allow-list (was a
    // `language` enum), `args`, `evidence_ids`, and the description of the
    // run's view (/input, /work).
    ("sandbox.exec", "db739bfbaea989282800940014af76368ab150d41006d4ef3b543b88bee837b2"),
    ("agent.propose", "c0a8cebb6e388b1ec1ef18892ab13b21a7cc93836870403026b600e961e32a16"),
    ("web.fetch", "fe2f0723da67c090649d90777ef46d5fb95567394556bda9900761960230de53"),
    ("research.get_state", "ecb1bb48b90e5bb715e28e5e344474fc4a4a5e4f7f750e1e850ca6a89d55ffab"),
    ("research.prepare", "e746a34eb770c4a8b72973c79f0c65fc5970eb378769a8e6bdd24c75f6c493e3"),
];
/// Pinned fingerprint of the whole catalog (R5).
const PINNED_CATALOG_FINGERPRINT: &str = "6ab3ca267b507eec8c58819e0e85cd8dcde974a973b9501b621c984bcf80b9b8";

/// The sixteen tools of G2, in published order.
const G2_TOOLS: [&str; 16] = [
    "investigation.get_overview",
    "investigation.search",
    "investigation.find_correlations",
    "graph.get_node",
    "graph.get_neighbors",
    "evidence.get_summary",
    "evidence.read_excerpt",
    "provenance.trace",
    "jobs.get",
    "tool.catalog",
    "tool.docs.read",
    "sandbox.exec",
    "agent.propose",
    "web.fetch",
    "research.get_state",
    "research.prepare",
];

const SPECIMEN_SIZE: u64 = 200;

/// A store with a SPECIMEN (seed 1, 200 items) and an empty REAL workspace,
/// behind a gateway.
struct Fx {
    dir: TempDir,
    gw: AgentGateway,
    env: Environment,
    spec: Scope,
    real: Scope,
    spec_inv: ObjectRef,
    real_inv: ObjectRef,
    /// Evidence of the SPECIMEN (most recent first).
    spec_evidence: Vec<ObjectRef>,
    /// Most mentioned entities of the SPECIMEN.
    spec_entities: Vec<ObjectRef>,
    /// One analyst note in the REAL workspace.
    real_note: ObjectRef,
}

/// What the preparation closure may touch before the store is wrapped.
struct Prep<'a> {
    store: &'a mut Store,
    spec_ws: Uuid,
    spec_inv: ObjectRef,
    real_ws: Uuid,
    real_inv: ObjectRef,
}

impl Fx {
    fn new() -> Self {
        Self::with(|_| {})
    }

    fn with(prep: impl FnOnce(&mut Prep<'_>)) -> Self {
        let dir = TempDir::new().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let out =
            specimen::generate(&mut store, SpecimenSpec { seed: 1, size: SPECIMEN_SIZE }, &mut |_, _| {}).unwrap();
        let SpecimenOutcome::Created { workspace, investigation: spec_inv, .. } = out else {
            panic!("specimen not created: {out:?}")
        };
        let (real_ws, real_inv) = store.create_real_workspace("Enquête réelle de test", "analyst").unwrap();
        let real_note = store
            .add_note(
                real_ws.id(),
                &real_inv,
                &NewNote {
                    title: "Note réelle".into(),
                    content: "Une note de l'analyste.".into(),
                    source: None,
                    dated_at: None,
                },
                "analyst",
            )
            .unwrap();
        let overview = store.reads().overview(workspace.id(), &spec_inv).unwrap();
        let spec_evidence: Vec<ObjectRef> = overview.recent_evidence.iter().map(|e| e.id).collect();
        let spec_entities: Vec<ObjectRef> = overview.top_entities.iter().map(|e| e.id).collect();
        assert!(spec_evidence.len() >= 9 && spec_entities.len() >= 3, "SPECIMEN too small for these tests");
        prep(&mut Prep { store: &mut store, spec_ws: workspace.id(), spec_inv, real_ws: real_ws.id(), real_inv });
        let gw = AgentGateway::new(Arc::new(DirectBackend::new(store))).unwrap();
        Self {
            dir,
            gw,
            env: Environment::offline("test"),
            spec: Scope { workspace: workspace.id(), class: WorkspaceClass::Specimen },
            real: Scope { workspace: real_ws.id(), class: WorkspaceClass::Real },
            spec_inv,
            real_inv,
            spec_evidence,
            spec_entities,
            real_note,
        }
    }

    /// Opens a manual turn.
    fn turn(&self, scope: Scope) -> Uuid {
        self.gw
            .open_turn(
                scope,
                &NewTurn {
                    question: "Test manuel".into(),
                    investigation_id: None,
                    exclusions: vec![],
                    mode: Some(TurnMode::Manual),
                    lang: Lang::Fr,
                },
            )
            .unwrap()
            .turn_id
    }

    fn call(&self, scope: Scope, req: CallRequest) -> Arc<ToolResult> {
        self.gw.call(scope, &self.env, req).unwrap()
    }

    /// A second, read-only connection to the same store.
    fn reads(&self) -> ReadOnlyStore {
        ReadOnlyStore::open(self.dir.path()).unwrap()
    }

    /// A second read-write connection (the server's decision routes).
    fn writer(&self) -> Store {
        Store::open(self.dir.path()).unwrap()
    }

    fn requests(&self, scope: Scope, inv: &ObjectRef) -> Vec<ResearchRequest> {
        self.reads().reads().research_requests(scope.workspace, inv, 100).unwrap()
    }

    fn audit_actions(&self, scope: Scope) -> Vec<String> {
        self.reads().reads().audit(scope.workspace, 1000).unwrap().into_iter().map(|a| a.action).collect()
    }

    fn all_events(&self, scope: Scope) -> EventPage {
        self.gw.events(scope, 0, MAX_EVENTS_PER_POLL)
    }

    fn decision(&self) -> GrantDecision {
        GrantDecision {
            scope: ResearchScope { hosts: vec!["news.example.org".into()] },
            budget: ResearchBudget { max_requests: 10, max_bytes: 1_000_000 },
            expires_in_minutes: 60,
            contract_fingerprints: self.gw.catalog().fingerprints(),
            current_prepare_fingerprint: self.gw.catalog().tool(ToolId::ResearchPrepare).fingerprint.clone(),
            decided_by: "analyst".into(),
            urls: Vec::new(),
        }
    }
}

/// A call with fresh `call_id` and idempotency key.
fn req(turn: Uuid, tool: &str, input: Value) -> CallRequest {
    CallRequest {
        turn_id: turn,
        call_id: Uuid::new_v4(),
        tool_id: tool.into(),
        input,
        context: CallContext::default(),
        object_refs: vec![],
        idempotency_key: format!("key-{}", Uuid::new_v4()),
    }
}

/// Opens a new manual turn whenever the current one has used its budget.
struct Turns {
    scope: Scope,
    current: Uuid,
    used: u32,
}

impl Turns {
    fn new(fx: &Fx, scope: Scope) -> Self {
        Self { scope, current: fx.turn(scope), used: 0 }
    }

    fn next(&mut self, fx: &Fx) -> Uuid {
        if self.used == MAX_CALLS_PER_TURN {
            self.current = fx.turn(self.scope);
            self.used = 0;
        }
        self.used += 1;
        self.current
    }
}

#[track_caller]
fn assert_refused(r: &ToolResult, status: ResultStatus, stage: Stage, needle: &str) {
    assert_eq!((r.status, r.stage), (status, stage), "{}: {:?}", r.tool_id, r.diagnostic);
    let d = r.diagnostic.as_deref().unwrap_or_default();
    assert!(d.contains(needle), "{}: diagnostic {d:?} lacks {needle:?}", r.tool_id);
    assert!(d.chars().count() <= MAX_DIAGNOSTIC_CHARS);
    assert!(r.artifacts.is_empty() && r.object_refs.is_empty(), "a refusal carries no data");
}

fn kinds(page: &EventPage) -> Vec<EventType> {
    page.events.iter().map(|e| e.kind).collect()
}

// ---------------------------------------------------------------------------
// catalog (G2–G4, R1–R6)
// ---------------------------------------------------------------------------

#[test]
fn catalog_lists_the_sixteen_tools_of_g2_with_complete_contracts() {
    let fx = Fx::new();
    let cat = fx.gw.catalog();
    let ids: Vec<&str> = cat.tools().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, G2_TOOLS);
    assert_eq!(ToolId::ALL.map(ToolId::as_str), G2_TOOLS);
    for id in ToolId::ALL {
        assert_eq!(ToolId::from_name(id.as_str()), Some(id));
        assert_eq!(cat.tool(id).id, id, "Catalog::tool indexes by published order");
    }
    assert_eq!(ToolId::from_name("Tool.Catalog"), None);

    let published = cat.publish(WorkspaceClass::Specimen, &fx.env);
    assert_eq!(published["catalog_fingerprint"], cat.fingerprint());
    assert_eq!(published["schema_dialect"], SCHEMA_DIALECT);
    let tools = published["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 16);
    for (t, p) in cat.tools().iter().zip(tools) {
        let name = t.id.as_str();
        for field in [
            "tool_id",
            "tool_version",
            "capability_version",
            "description",
            "input_schema",
            "output_contract",
            "action_class",
            "risk_level",
            "sensitivity",
            "cost_class",
            "network_contact",
            "authorization",
            "permissions",
            "contract_fingerprint",
            "availability",
        ] {
            let v = p.get(field).unwrap_or_else(|| panic!("{name}: no `{field}`"));
            assert!(!v.is_null(), "{name}: `{field}` is null");
        }
        assert_eq!(p["tool_id"], name);
        assert!(!p["description"].as_str().unwrap().is_empty());
        assert_eq!(p["contract_fingerprint"], t.fingerprint.as_str());
        assert_eq!(t.fingerprint, catalog::fingerprint(&t.contract), "{name}: fingerprint is over the contract");
        // What the catalog publishes is the contract plus two fields.
        let mut stripped = p.clone();
        stripped.as_object_mut().unwrap().remove("contract_fingerprint");
        stripped.as_object_mut().unwrap().remove("availability");
        assert_eq!(stripped, t.contract, "{name}: published contract differs from the fingerprinted one");
        // Risk (R1) is a separate field from sensitivity and cost (R4).
        assert_eq!(p["risk_level"], t.risk.as_str());
        assert!(
            ["public", "investigation_metadata", "investigation_content"].contains(&p["sensitivity"].as_str().unwrap())
        );
        assert!(["cheap", "moderate", "expensive"].contains(&p["cost_class"].as_str().unwrap()));
        let schema = &p["input_schema"];
        assert_eq!(schema["$schema"], SCHEMA_DIALECT, "{name}");
        assert_eq!(schema["type"], "object", "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}");
        let props = schema["properties"].as_object().unwrap();
        for r in schema["required"].as_array().unwrap() {
            assert!(props.contains_key(r.as_str().unwrap()), "{name}: required `{r}` is not a property");
        }
        // Every reference field the gateway resolves is published as one.
        for f in &t.refs {
            let prop = &props[f.name];
            let prop = if f.list { &prop["items"] } else { prop };
            let published: Vec<&str> =
                prop["x-labfy-ref"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
            let kinds: Vec<&str> = f.kinds.iter().map(|k| k.as_str()).collect();
            assert_eq!(published, kinds, "{name}.{}", f.name);
        }
    }
}

#[test]
fn risk_levels_follow_r1_and_r6() {
    let fx = Fx::new();
    let cat = fx.gw.catalog();
    for t in cat.tools() {
        let expected = match t.id {
            ToolId::WebFetch => RiskLevel::High,
            ToolId::ResearchPrepare => RiskLevel::Medium,
            _ => RiskLevel::Low,
        };
        assert_eq!(t.risk, expected, "{}", t.id.as_str());
        assert_eq!(t.contract["risk_level"], expected.as_str());
        if t.contract["action_class"] == "read" {
            assert_eq!(t.risk, RiskLevel::Low, "read tool {} must be low", t.id.as_str());
        }
        // R6: anything the far side can observe is high and runs only under a grant.
        let network = t.contract["network_contact"].as_str().unwrap();
        assert_eq!(network == "none", t.network == catalog::NetworkContact::None);
        if network != "none" {
            assert_eq!(t.risk, RiskLevel::High, "{} contacts the network", t.id.as_str());
            assert_eq!(t.contract["authorization"], "active_grant", "{}", t.id.as_str());
        }
    }
    let read_tools = cat.tools().iter().filter(|t| t.contract["action_class"] == "read").count();
    assert_eq!(read_tools, 10, "the read tools of G2");
    assert_eq!(cat.tool(ToolId::WebFetch).contract["network_contact"], "tor_via_egress");
    assert_eq!(cat.tool(ToolId::ResearchPrepare).contract["network_contact"], "none");
    assert_eq!(cat.tool(ToolId::ResearchPrepare).contract["authorization"], "human_review_after");
    // The catalog builds: every published schema compiles.
    Catalog::build().unwrap();
}

#[test]
fn fingerprints_are_pinned() {
    let fx = Fx::new();
    let cat = fx.gw.catalog();
    for (t, (name, pinned)) in cat.tools().iter().zip(PINNED_TOOL_FINGERPRINTS) {
        assert_eq!(t.id.as_str(), name);
        assert_eq!(
            t.fingerprint, pinned,
            "the contract of {name} changed (R5): pin the new fingerprint on purpose, and record why"
        );
    }
    assert_eq!(cat.fingerprint(), PINNED_CATALOG_FINGERPRINT, "the catalog changed (R5)");
    let all = cat.fingerprints();
    assert_eq!(all["catalog"], PINNED_CATALOG_FINGERPRINT);
    assert_eq!(all["catalog_version"], catalog::CATALOG_VERSION);
    for (name, pinned) in PINNED_TOOL_FINGERPRINTS {
        assert_eq!(all["tools"][name], pinned);
    }
    // A rebuilt catalog has the same fingerprints (nothing depends on time or order).
    assert_eq!(Catalog::build().unwrap().fingerprint(), PINNED_CATALOG_FINGERPRINT);
}

#[test]
fn any_change_to_a_contract_changes_its_fingerprint() {
    let fx = Fx::new();
    let prepare = &fx.gw.catalog().tool(ToolId::ResearchPrepare).contract;
    let base = catalog::fingerprint(prepare);
    assert_eq!(base, fx.gw.catalog().tool(ToolId::ResearchPrepare).fingerprint);

    let mut risk = prepare.clone();
    risk["risk_level"] = json!("low");
    let mut bound = prepare.clone();
    bound["input_schema"]["properties"]["question"]["maxLength"] = json!(513);
    let mut selection = prepare.clone();
    selection["input_schema"]["properties"]["selection_ids"]["maxItems"] = json!(9);
    let mut open = prepare.clone();
    open["input_schema"]["additionalProperties"] = json!(true);
    let mut described = prepare.clone();
    described["description"] = json!("Prepares web research.");
    let mut cost = prepare.clone();
    cost["cost_class"] = json!("moderate");
    let mut fps = BTreeSet::from([base.clone()]);
    for (what, v) in [
        ("risk level", risk),
        ("a bound", bound),
        ("selection bound", selection),
        ("additionalProperties", open),
        ("description", described),
        ("cost class", cost),
    ] {
        let fp = catalog::fingerprint(&v);
        assert_ne!(fp, base, "changing the {what} must change the fingerprint");
        assert!(fps.insert(fp), "{what}: fingerprint collides with another change");
    }
    // Key order and formatting do not matter: the fingerprint is over canonical JSON.
    let text = serde_json::to_string_pretty(prepare).unwrap();
    let reparsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(catalog::fingerprint(&reparsed), base);
    let web = fx.gw.catalog().tool(ToolId::WebFetch);
    let mut lowered = web.contract.clone();
    lowered["risk_level"] = json!("medium");
    assert_ne!(catalog::fingerprint(&lowered), web.fingerprint);
}

// ---------------------------------------------------------------------------
// closed validation (G4), generated from the published schemas
// ---------------------------------------------------------------------------

fn letter(i: usize) -> char {
    char::from(b'a' + u8::try_from(i % 26).unwrap())
}

/// A valid value for a property schema; `i` makes array items distinct.
fn sample(schema: &Value, i: usize) -> Value {
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return e[i % e.len()].clone();
    }
    match schema["type"].as_str().unwrap() {
        "string" => {
            let n = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0).max(1);
            Value::from(letter(i).to_string().repeat(usize::try_from(n).unwrap()))
        }
        "integer" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "array" => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0).max(1);
            Value::from((0..usize::try_from(n).unwrap()).map(|k| sample(&schema["items"], k)).collect::<Vec<_>>())
        }
        other => panic!("no sample for type {other}"),
    }
}

fn with(base: &Value, name: &str, v: Value) -> Value {
    let mut out = base.clone();
    out[name] = v;
    out
}

fn without(base: &Value, name: &str) -> Value {
    let mut out = base.clone();
    out.as_object_mut().unwrap().remove(name);
    out
}

/// Labelled inputs.
type Cases = Vec<(String, Value)>;

/// Values one past each bound of `prop` (rejected) and at each bound (accepted).
fn bound_cases(prop: &Value) -> (Cases, Cases) {
    let (mut bad, mut good) = (Vec::new(), Vec::new());
    let num = |k: &str| prop.get(k).and_then(Value::as_u64);
    match prop["type"].as_str().unwrap() {
        "integer" => {
            if let Some(min) = num("minimum") {
                let min = i64::try_from(min).unwrap();
                bad.push((format!("minimum - 1 = {}", min - 1), json!(min - 1)));
                good.push((format!("minimum = {min}"), json!(min)));
            }
            if let Some(max) = num("maximum") {
                bad.push((format!("maximum + 1 = {}", max + 1), json!(max + 1)));
                good.push((format!("maximum = {max}"), json!(max)));
            }
        }
        "string" if prop.get("enum").is_none() => {
            // Lengths are characters, not bytes: `é` is two bytes.
            if let Some(max) = num("maxLength") {
                let max = usize::try_from(max).unwrap();
                bad.push((format!("maxLength + 1 = {}", max + 1), Value::from("é".repeat(max + 1))));
                good.push((format!("maxLength = {max}"), Value::from("é".repeat(max))));
            }
            if let Some(min) = num("minLength").filter(|m| *m > 0) {
                let min = usize::try_from(min).unwrap();
                bad.push((format!("minLength - 1 = {}", min - 1), Value::from("é".repeat(min - 1))));
                good.push((format!("minLength = {min}"), Value::from("é".repeat(min))));
            }
        }
        "array" => {
            let items = |n: u64| {
                Value::from((0..usize::try_from(n).unwrap()).map(|k| sample(&prop["items"], k)).collect::<Vec<_>>())
            };
            if let Some(max) = num("maxItems") {
                bad.push((format!("maxItems + 1 = {}", max + 1), items(max + 1)));
                good.push((format!("maxItems = {max}"), items(max)));
            }
            if let Some(min) = num("minItems") {
                if min > 0 {
                    bad.push((format!("minItems - 1 = {}", min - 1), items(min - 1)));
                }
                good.push((format!("minItems = {min}"), items(min)));
            }
            if prop.get("uniqueItems") == Some(&json!(true)) {
                let one = sample(&prop["items"], 0);
                bad.push(("a repeated item".into(), json!([one.clone(), one])));
            }
            // Bounds of the items, in an array of one.
            let (item_bad, item_good) = bound_cases(&prop["items"]);
            bad.extend(item_bad.into_iter().map(|(w, v)| (format!("item {w}"), json!([v]))));
            good.extend(item_good.into_iter().map(|(w, v)| (format!("item {w}"), json!([v]))));
            bad.push(("an item of the wrong type".into(), json!([12345])));
        }
        _ => {}
    }
    if prop.get("enum").is_some() {
        bad.push(("a value outside the enum".into(), json!("not-in-the-enum")));
    }
    (bad, good)
}

fn wrong_types(prop: &Value) -> Vec<Value> {
    let mut out = vec![Value::Null, json!({"nested": true})];
    match prop["type"].as_str().unwrap() {
        "string" => out.extend([json!(12345), json!(true), json!(["x"])]),
        "integer" => out.extend([json!("1"), json!(1.5), json!(true), json!([1])]),
        "array" => out.extend([json!("x"), json!(1), json!({"0": "x"})]),
        other => panic!("unexpected type {other}"),
    }
    out
}

#[test]
fn every_published_schema_is_closed_and_bounded_exactly_as_validated() {
    let fx = Fx::new();
    let published = fx.gw.catalog().publish(WorkspaceClass::Specimen, &fx.env);
    let mut turns = Turns::new(&fx, fx.spec);
    let (mut rejected, mut accepted, mut bounds) = (0usize, 0usize, 0usize);
    for p in published["tools"].as_array().unwrap() {
        let name = p["tool_id"].as_str().unwrap();
        let tool = fx.gw.catalog().tool(ToolId::from_name(name).unwrap());
        let schema = &p["input_schema"];
        let props = schema["properties"].as_object().unwrap();
        let required: Vec<&str> = schema["required"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
        let minimal = Value::Object(required.iter().map(|r| ((*r).to_owned(), sample(&props[*r], 0))).collect());
        let full = Value::Object(props.iter().map(|(k, v)| (k.clone(), sample(v, 0))).collect());
        tool.validate(&minimal).unwrap_or_else(|e| panic!("{name}: minimal input {minimal} refused: {e}"));
        tool.validate(&full).unwrap_or_else(|e| panic!("{name}: full input {full} refused: {e}"));

        let mut bad: Cases = vec![
            ("an extra field".into(), with(&minimal, "unexpected_field", json!(true))),
            ("a slipped-in grant".into(), with(&full, "grant", json!({"scope": "*"}))),
            ("not an object".into(), json!([minimal.clone()])),
            ("a string".into(), json!("input")),
        ];
        for r in &required {
            bad.push((format!("`{r}` missing"), without(&minimal, r)));
        }
        let mut good: Cases = Vec::new();
        for (k, prop) in props {
            for v in wrong_types(prop) {
                bad.push((format!("`{k}` = {v} (wrong type)"), with(&full, k, v)));
            }
            let (b, g) = bound_cases(prop);
            bounds += b.len();
            bad.extend(b.into_iter().map(|(w, v)| (format!("`{k}`: {w}"), with(&full, k, v))));
            good.extend(g.into_iter().map(|(w, v)| (format!("`{k}`: {w}"), with(&full, k, v))));
        }
        for (what, input) in &good {
            tool.validate(input).unwrap_or_else(|e| panic!("{name}: {what} must be accepted: {e}"));
            accepted += 1;
        }
        for (what, input) in bad {
            assert!(tool.validate(&input).is_err(), "{name}: {what} must be refused: {input}");
            // The gateway refuses the same input at the capability stage.
            let r = fx.call(fx.spec, req(turns.next(&fx), name, input));
            assert_refused(&r, ResultStatus::Denied, Stage::Capability, "input");
            assert_eq!(r.risk_level, Some(tool.risk), "{name}: {what}");
            assert_eq!(r.contract_fingerprint.as_deref(), Some(tool.fingerprint.as_str()));
            rejected += 1;
        }
    }
    // The sweep is not vacuous: these are the bounds the catalog publishes.
    assert!(bounds >= 45, "only {bounds} bound cases");
    assert!(accepted >= 40 && rejected >= 200, "accepted {accepted}, rejected {rejected}");
}

#[test]
fn research_prepare_bounds_of_g4() {
    let fx = Fx::new();
    let tool = fx.gw.catalog().tool(ToolId::ResearchPrepare);
    let schema = &tool.contract["input_schema"];
    assert_eq!(schema["required"], json!(["selection_ids", "question", "exclusions"]));
    let p = &schema["properties"];
    assert_eq!((p["selection_ids"]["minItems"].as_u64(), p["selection_ids"]["maxItems"].as_u64()), (Some(1), Some(8)));
    assert_eq!(p["question"]["maxLength"], 512);
    assert_eq!((p["exclusions"]["minItems"].as_u64(), p["exclusions"]["maxItems"].as_u64()), (Some(0), Some(8)));

    let ids = |n: usize| fx.spec_evidence[..n].iter().map(ToString::to_string).collect::<Vec<_>>();
    let input = |sel: Vec<String>, q: String, excl: Vec<String>| json!({"selection_ids": sel, "question": q, "exclusions": excl});
    let q = || "Qui est derrière Nordlys ?".to_owned();
    let excl = |n: usize| (0..n).map(|i| format!("exclusion {i}")).collect::<Vec<_>>();
    let turn = fx.turn(fx.spec);
    for (what, bad) in [
        ("0 selection_ids", input(vec![], q(), vec![])),
        ("9 selection_ids", input(ids(9), q(), vec![])),
        ("513-character question", input(ids(1), "q".repeat(513), vec![])),
        ("empty question", input(ids(1), String::new(), vec![])),
        ("9 exclusions", input(ids(1), q(), excl(9))),
        ("201-character exclusion", input(ids(1), q(), vec!["e".repeat(201)])),
        ("no exclusions field", json!({"selection_ids": ids(1), "question": q()})),
    ] {
        let r = fx.call(fx.spec, req(turn, "research.prepare", bad));
        assert_refused(&r, ResultStatus::Denied, Stage::Capability, "input");
        assert!(!r.diagnostic.as_deref().unwrap().is_empty(), "{what}");
    }
    assert!(fx.requests(fx.spec, &fx.spec_inv).is_empty(), "a refused call prepared something");
    for good in [
        input(ids(1), "q".repeat(512), vec![]),
        input(ids(8), q(), excl(8)),
        input(ids(1), "é".repeat(512), vec!["e".repeat(200)]),
    ] {
        tool.validate(&good).unwrap();
    }
    // At the bounds, through the whole pipeline: 8 objects, a 512-character
    // question and 8 exclusions prepare one request.
    let r = fx.call(fx.spec, req(turn, "research.prepare", input(ids(8), "é".repeat(512), excl(8))));
    assert_eq!(r.status, ResultStatus::AuthorizationRequired, "{:?}", r.diagnostic);
    let stored = fx.requests(fx.spec, &fx.spec_inv);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].selection, fx.spec_evidence[..8]);
    assert_eq!(stored[0].question.chars().count(), 512);
    assert_eq!(stored[0].exclusions.len(), 8);
}

#[test]
fn call_envelopes_and_new_turns_are_closed_and_bounded() {
    let fx = Fx::new();
    let turn = fx.turn(fx.spec);
    let ok = req(turn, "tool.catalog", json!({}));
    let cases: Vec<(&str, CallRequest)> = vec![
        ("empty key", CallRequest { idempotency_key: " ".into(), ..ok.clone() }),
        ("129-character key", CallRequest { idempotency_key: "k".repeat(129), ..ok.clone() }),
        ("control character in key", CallRequest { idempotency_key: "a\nb".into(), ..ok.clone() }),
        ("call_id = turn_id", CallRequest { call_id: turn, ..ok.clone() }),
        ("17 object_refs", CallRequest { object_refs: vec![fx.spec_inv.to_string(); 17], ..ok.clone() }),
        (
            "257-character purpose",
            CallRequest {
                context: CallContext { investigation_id: None, purpose: Some("p".repeat(257)) },
                ..ok.clone()
            },
        ),
        ("257-byte tool_id", CallRequest { tool_id: "t".repeat(257), ..ok.clone() }),
    ];
    for (what, bad) in cases {
        assert!(matches!(fx.gw.call(fx.spec, &fx.env, bad), Err(GatewayError::Invalid(_))), "{what}");
    }
    let edge = CallRequest {
        idempotency_key: "k".repeat(128),
        object_refs: vec![fx.spec_inv.to_string(); 16],
        context: CallContext { investigation_id: None, purpose: Some("p".repeat(256)) },
        ..ok
    };
    assert_eq!(fx.call(fx.spec, edge).status, ResultStatus::Completed);
    assert!(matches!(
        fx.gw.call(fx.spec, &fx.env, req(Uuid::new_v4(), "tool.catalog", json!({}))),
        Err(GatewayError::NotFound(_))
    ));

    // The wire shapes are closed: a grant slipped into the envelope or the
    // context is refused, not ignored.
    let wire = json!({"turn_id": turn, "call_id": Uuid::new_v4(), "tool_id": "tool.catalog", "input": {},
                      "context": {}, "object_refs": [], "idempotency_key": "k"});
    serde_json::from_value::<CallRequest>(wire.clone()).unwrap();
    assert!(serde_json::from_value::<CallRequest>(with(&wire, "grant", json!({"scope": "*"}))).is_err());
    assert!(serde_json::from_value::<CallRequest>(with(&wire, "context", json!({"grant_id": "grant:x"}))).is_err());
    assert!(serde_json::from_value::<CallRequest>(without(&wire, "idempotency_key")).is_err());
    assert!(serde_json::from_value::<NewTurn>(json!({"question": "q", "approve": true})).is_err());

    let turn_with = |question: String, exclusions: Vec<String>| {
        fx.gw.open_turn(
            fx.spec,
            &NewTurn { question, investigation_id: None, exclusions, mode: Some(TurnMode::Manual), lang: Lang::Fr },
        )
    };
    assert!(matches!(turn_with("q".repeat(513), vec![]), Err(GatewayError::Invalid(_))));
    assert!(matches!(turn_with("   ".into(), vec![]), Err(GatewayError::Invalid(_))));
    assert!(matches!(turn_with("a\u{7}b".into(), vec![]), Err(GatewayError::Invalid(_))));
    assert!(matches!(turn_with("q".into(), vec!["e".into(); 9]), Err(GatewayError::Invalid(_))));
    assert!(matches!(turn_with("q".into(), vec!["e".repeat(201)]), Err(GatewayError::Invalid(_))));
    let t = turn_with("é".repeat(512), vec!["e".repeat(200); 8]).unwrap();
    assert_eq!((t.status, t.mode, t.calls), (TurnStatus::Running, TurnMode::Manual, 0));
    assert_eq!(t.investigation_id, fx.spec_inv, "defaults to the workspace's investigation");
}

// ---------------------------------------------------------------------------
// resolution (G5)
// ---------------------------------------------------------------------------

#[test]
fn references_resolve_exactly_in_the_current_workspace() {
    let fx = Fx::new();
    let turn = fx.turn(fx.spec);
    let ev = fx.spec_evidence[0];
    let summary = |id: String| fx.call(fx.spec, req(turn, "evidence.get_summary", json!({"evidence_id": id})));

    let ok = summary(ev.to_string());
    assert_eq!(ok.status, ResultStatus::Completed, "{:?}", ok.diagnostic);
    assert_eq!(ok.object_refs[0], ev);

    // A bare UUID is refused explicitly.
    let r = summary(ev.id().to_string());
    assert_refused(&r, ResultStatus::Denied, Stage::Resolution, "bare UUID");
    assert!(r.diagnostic.as_deref().unwrap().contains("input.evidence_id"));
    // An unknown id in the right namespace.
    let unknown = ObjectRef::new(RefKind::Evidence, Uuid::new_v4());
    assert_refused(
        &summary(unknown.to_string()),
        ResultStatus::Denied,
        Stage::Resolution,
        "does not exist in this workspace",
    );
    // An object of the other workspace (REAL) does not exist here…
    assert_refused(
        &summary(fx.real_note.to_string()),
        ResultStatus::Denied,
        Stage::Resolution,
        "does not exist in this workspace",
    );
    // …and a SPECIMEN object does not exist in the REAL workspace.
    let real_turn = fx.turn(fx.real);
    let r = fx.call(fx.real, req(real_turn, "evidence.get_summary", json!({"evidence_id": ev.to_string()})));
    assert_refused(&r, ResultStatus::Denied, Stage::Resolution, "does not exist in this workspace");
    let r = fx.call(fx.real, req(real_turn, "evidence.get_summary", json!({"evidence_id": fx.real_note.to_string()})));
    assert_eq!(r.status, ResultStatus::Completed, "{:?}", r.diagnostic);
    // A namespace the field does not accept, and one that does not exist.
    let as_entity = ObjectRef::new(RefKind::Entity, ev.id());
    assert_refused(&summary(as_entity.to_string()), ResultStatus::Denied, Stage::Resolution, "is not accepted here");
    assert_refused(
        &summary(format!("document:{}", ev.id())),
        ResultStatus::Denied,
        Stage::Resolution,
        "input.evidence_id",
    );
    assert_refused(
        &summary(format!("Evidence:{}", ev.id())),
        ResultStatus::Denied,
        Stage::Resolution,
        "input.evidence_id",
    );
    let r = fx.call(fx.spec, req(turn, "graph.get_node", json!({"node_id": format!("job:{}", Uuid::new_v4())})));
    assert_refused(&r, ResultStatus::Denied, Stage::Resolution, "is not accepted here");
    // Schema-valid but longer than any reference.
    assert_refused(
        &summary(format!("evidence:{}xxxxxxxxxx", ev.id())),
        ResultStatus::Denied,
        Stage::Resolution,
        "input.evidence_id",
    );
    // Every item of a list is resolved.
    let sel = json!({"selection_ids": [ev.to_string(), fx.real_note.to_string()], "question": "q", "exclusions": []});
    let r = fx.call(fx.spec, req(turn, "research.prepare", sel));
    assert_refused(&r, ResultStatus::Denied, Stage::Resolution, "input.selection_ids[1]");
    let sel = json!({"selection_ids": [fx.spec_inv.to_string()], "question": "q", "exclusions": []});
    let r = fx.call(fx.spec, req(turn, "research.prepare", sel));
    assert_refused(&r, ResultStatus::Denied, Stage::Resolution, "input.selection_ids[0]");
    assert!(fx.requests(fx.spec, &fx.spec_inv).is_empty());
    // The envelope's references are resolved too.
    let mut with_refs = req(turn, "tool.catalog", json!({}));
    with_refs.object_refs = vec![ev.to_string(), ev.id().to_string()];
    assert_refused(&fx.call(fx.spec, with_refs), ResultStatus::Denied, Stage::Resolution, "object_refs[1]");
    let mut with_ctx = req(turn, "tool.catalog", json!({}));
    with_ctx.context.investigation_id = Some(fx.real_inv.to_string());
    assert_refused(&fx.call(fx.spec, with_ctx), ResultStatus::Denied, Stage::Resolution, "context.investigation_id");
    let mut ctx_ok = req(turn, "tool.catalog", json!({}));
    ctx_ok.context.investigation_id = Some(fx.spec_inv.to_string());
    ctx_ok.object_refs = vec![ev.to_string(), fx.spec_entities[0].to_string()];
    assert_eq!(fx.call(fx.spec, ctx_ok).status, ResultStatus::Completed);
    // A turn cannot be opened on another workspace's investigation.
    let other = NewTurn {
        question: "q".into(),
        investigation_id: Some(fx.real_inv.to_string()),
        exclusions: vec![],
        mode: Some(TurnMode::Manual),
        lang: Lang::Fr,
    };
    assert!(matches!(fx.gw.open_turn(fx.spec, &other), Err(GatewayError::NotFound(_))));
    let bare = NewTurn { investigation_id: Some(fx.spec_inv.id().to_string()), ..other };
    assert!(matches!(fx.gw.open_turn(fx.spec, &bare), Err(GatewayError::Invalid(_))));
}

// ---------------------------------------------------------------------------
// idempotency (G7)
// ---------------------------------------------------------------------------

#[test]
fn an_identical_replay_returns_the_same_result_and_has_no_second_effect() {
    let fx = Fx::new();
    let turn = fx.turn(fx.spec);
    let call = req(turn, "evidence.get_summary", json!({"evidence_id": fx.spec_evidence[0].to_string()}));
    let first = fx.call(fx.spec, call.clone());
    assert_eq!(first.status, ResultStatus::Completed);
    assert_ne!(first.result_id, first.call_id, "result_id and call_id are distinct");
    assert_eq!(first.call_id, call.call_id);
    assert_eq!(first.result_id.get_version_num(), 4);
    let events_before = fx.all_events(fx.spec).events.len();
    let again = fx.call(fx.spec, call.clone());
    assert_eq!(again.result_id, first.result_id);
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(fx.all_events(fx.spec).events.len(), events_before, "a replay emits no event");
    assert_eq!(fx.gw.turn(fx.spec, turn).unwrap().calls, 1, "a replay is not a second call");

    // Same key, another intent: 409.
    for changed in [
        CallRequest { input: json!({"evidence_id": fx.spec_evidence[1].to_string()}), ..call.clone() },
        CallRequest {
            tool_id: "graph.get_node".into(),
            input: json!({"node_id": fx.spec_evidence[0].to_string()}),
            ..call.clone()
        },
        CallRequest { call_id: Uuid::new_v4(), ..call.clone() },
        CallRequest { object_refs: vec![fx.spec_inv.to_string()], ..call.clone() },
        CallRequest { context: CallContext { investigation_id: None, purpose: Some("autre".into()) }, ..call.clone() },
    ] {
        assert!(matches!(fx.gw.call(fx.spec, &fx.env, changed), Err(GatewayError::Conflict(_))));
    }
    // A reused call_id under another key: 409.
    let reused = CallRequest { idempotency_key: "another-key".into(), ..call.clone() };
    assert!(matches!(fx.gw.call(fx.spec, &fx.env, reused), Err(GatewayError::Conflict(_))));
    // Refusals are idempotent too.
    let denied = req(turn, "no.such.tool", json!({}));
    let d1 = fx.call(fx.spec, denied.clone());
    let d2 = fx.call(fx.spec, denied);
    assert_eq!((d1.status, d1.result_id), (d2.status, d2.result_id));
}

#[test]
fn a_replayed_research_prepare_prepares_one_request() {
    let fx = Fx::new();
    let turn = fx.turn(fx.spec);
    let input = json!({"selection_ids": [fx.spec_evidence[0].to_string(), fx.spec_entities[0].to_string()],
                       "question": "Qui finance Nordlys ?", "exclusions": ["pas de réseaux sociaux"]});
    let call = req(turn, "research.prepare", input);
    let first = fx.call(fx.spec, call.clone());
    assert_eq!(
        (first.status, first.stage),
        (ResultStatus::AuthorizationRequired, Stage::Service),
        "{:?}",
        first.diagnostic
    );
    assert_eq!(first.object_refs.len(), 1);
    let request = first.object_refs[0];
    assert_eq!(request.kind(), RefKind::ResearchRequest);
    assert_eq!(first.risk_level, Some(RiskLevel::Medium));
    let t = fx.gw.turn(fx.spec, turn).unwrap();
    assert_eq!((t.status, t.research_request), (TurnStatus::AuthorizationRequired, Some(request)));

    // The replay finds the same result, even though the turn is now paused.
    let again = fx.call(fx.spec, call.clone());
    assert_eq!(again.result_id, first.result_id);
    let stored = fx.requests(fx.spec, &fx.spec_inv);
    assert_eq!(stored.len(), 1, "a replay prepared a second request");
    let s = &stored[0];
    assert_eq!((s.id, s.status.as_str(), s.turn_id, s.call_id), (request, "PENDING", turn, call.call_id));
    assert_eq!(s.requested_by, "agent:api");
    assert_eq!(s.contract_fingerprint, fx.gw.catalog().tool(ToolId::ResearchPrepare).fingerprint);
    assert_eq!(s.catalog_fingerprint, fx.gw.catalog().fingerprint());
    assert!(s.grant.is_none() && s.campaign.is_none() && !s.grant_active);
    // The model reads the candidate URLs the store proposed (F1) as
    // untrusted data, the same the human sees.
    let candidates = s.candidates.as_ref().expect("a new request has its candidates");
    let artifact = &first.artifacts[0];
    assert_eq!((&*artifact.kind, &*artifact.trust), ("research_request", trust::UNTRUSTED));
    assert_eq!(artifact.data["candidates"], serde_json::to_value(candidates).unwrap());
    // Same key, another selection: 409, and still one request.
    let other = CallRequest {
        input: json!({"selection_ids": [fx.spec_evidence[1].to_string()], "question": "Qui finance Nordlys ?", "exclusions": []}),
        ..call
    };
    assert!(matches!(fx.gw.call(fx.spec, &fx.env, other), Err(GatewayError::Conflict(_))));
    // A paused turn takes no new call.
    assert!(matches!(
        fx.gw.call(fx.spec, &fx.env, req(turn, "tool.catalog", json!({}))),
        Err(GatewayError::Conflict(_))
    ));
    assert_eq!(fx.requests(fx.spec, &fx.spec_inv).len(), 1);
    let prepared = fx.audit_actions(fx.spec).iter().filter(|a| *a == "research.prepare").count();
    assert_eq!(prepared, 1);
}

// ---------------------------------------------------------------------------
// rings (G10) and turn budget
// ---------------------------------------------------------------------------

#[test]
fn a_turn_makes_at_most_32_calls() {
    let fx = Fx::new();
    let turn = fx.turn(fx.spec);
    for i in 1..=MAX_CALLS_PER_TURN {
        let r = fx.call(fx.spec, req(turn, "tool.catalog", json!({})));
        assert_eq!(r.status, ResultStatus::Completed, "call {i}");
    }
    for _ in 0..2 {
        let r = fx.call(fx.spec, req(turn, "tool.catalog", json!({})));
        assert_refused(&r, ResultStatus::Denied, Stage::Policy, "turn budget exhausted");
    }
    let t = fx.gw.turn(fx.spec, turn).unwrap();
    assert_eq!(t.calls, MAX_CALLS_PER_TURN + 2);
    assert_eq!(t.result_ids.len(), MAX_CALLS_PER_TURN as usize + 1, "result ids per turn are bounded");
    // Another turn has its own budget.
    let other = fx.turn(fx.spec);
    assert_eq!(fx.call(fx.spec, req(other, "tool.catalog", json!({}))).status, ResultStatus::Completed);
}

#[test]
fn results_and_events_are_bounded_rings_with_fifo_eviction() {
    let fx = Fx::new();
    let mut turns = Turns::new(&fx, fx.spec);
    let mut results = Vec::new();
    for _ in 0..=MAX_RESULTS {
        let r = fx.call(fx.spec, req(turns.next(&fx), "tool.catalog", json!({})));
        assert_eq!(r.status, ResultStatus::Completed);
        results.push(r);
    }
    assert_eq!(results.len(), 65);
    assert!(
        matches!(fx.gw.result(fx.spec, results[0].result_id), Err(GatewayError::NotFound(_))),
        "the oldest is evicted"
    );
    for r in &results[1..] {
        assert_eq!(fx.gw.result(fx.spec, r.result_id).unwrap().result_id, r.result_id);
    }
    let ids: BTreeSet<Uuid> = results.iter().map(|r| r.result_id).collect();
    assert_eq!(ids.len(), 65, "result ids are unique");

    // Events: 3 turns started + 3 events per call, capped at 128.
    let page = fx.all_events(fx.spec);
    assert_eq!(page.events.len(), MAX_EVENTS);
    assert!(page.missed, "polling from 0 after eviction reports missed events");
    let seqs: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "sequences strictly increase, with no gap");
    let last = *seqs.last().unwrap();
    assert_eq!(last, 3 + 3 * 65, "one sequence per event ever made");
    assert_eq!(seqs[0], last - MAX_EVENTS as u64 + 1, "FIFO: the newest 128 are kept");
    assert_eq!(page.next_cursor, last);
    for e in &page.events {
        assert!(serde_json::to_vec(&e.payload).unwrap().len() <= MAX_EVENT_PAYLOAD_BYTES);
    }
    // The limit is clamped, and a page at the limit continues where it stopped.
    let small = fx.gw.events(fx.spec, 0, 5);
    assert_eq!(small.events.len(), 5);
    assert_eq!(small.next_cursor, small.events[4].sequence);
    let rest = fx.gw.events(fx.spec, small.next_cursor, 1000);
    assert_eq!(rest.events.len(), MAX_EVENTS - 5);
    assert!(!rest.missed);
    assert_eq!(fx.gw.events(fx.spec, 0, 0).events.len(), 1, "limit 0 is clamped to 1");
    // A cursor past anything handed out, up to u64::MAX, is not honoured
    // silently (K2): `missed`, and the page starts from the oldest kept.
    for ahead in [last + 1, u64::MAX] {
        let past = fx.gw.events(fx.spec, ahead, 10);
        assert!(past.missed, "cursor {ahead} is ahead of {last}");
        assert_eq!(past.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), seqs[..10]);
        assert_eq!(past.next_cursor, seqs[9]);
    }

    // Cursor polling returns only newer events, without `missed`.
    let cursor = page.next_cursor;
    assert!(fx.gw.events(fx.spec, cursor, 100).events.is_empty());
    let near = fx.gw.events(fx.spec, cursor - 10, 100);
    assert_eq!((near.events.len(), near.missed), (10, false));
    let extra = fx.call(fx.spec, req(turns.next(&fx), "tool.catalog", json!({})));
    let newer = fx.gw.events(fx.spec, cursor, 100);
    assert!(!newer.missed);
    assert_eq!(kinds(&newer), [EventType::ToolRequested, EventType::ToolStarted, EventType::ToolCompleted]);
    assert!(newer.events.iter().all(|e| e.sequence > cursor && e.call_id == Some(extra.call_id)));
    assert_eq!(newer.events[2].payload["result_id"], json!(extra.result_id));
    assert_eq!(newer.next_cursor, cursor + 3);
    // The second result is now gone too: 64 kept.
    assert!(matches!(fx.gw.result(fx.spec, results[1].result_id), Err(GatewayError::NotFound(_))));
    assert!(fx.gw.result(fx.spec, results[2].result_id).is_ok());
}

#[test]
fn workspaces_see_only_their_own_turns_results_and_events() {
    let fx = Fx::new();
    let a = fx.turn(fx.spec);
    let b = fx.turn(fx.real);
    let ra = fx.call(fx.spec, req(a, "tool.catalog", json!({})));
    let rb = fx.call(fx.real, req(b, "tool.catalog", json!({})));
    // Results and turns of A are invisible from B, and the other way round.
    assert!(matches!(fx.gw.result(fx.real, ra.result_id), Err(GatewayError::NotFound(_))));
    assert!(matches!(fx.gw.result(fx.spec, rb.result_id), Err(GatewayError::NotFound(_))));
    assert!(fx.gw.result(fx.spec, ra.result_id).is_ok() && fx.gw.result(fx.real, rb.result_id).is_ok());
    assert!(matches!(fx.gw.turn(fx.real, a), Err(GatewayError::NotFound(_))));
    assert!(matches!(fx.gw.call(fx.real, &fx.env, req(a, "tool.catalog", json!({}))), Err(GatewayError::NotFound(_))));
    // Events: each workspace sees its own only.
    let ea = fx.all_events(fx.spec);
    let eb = fx.all_events(fx.real);
    assert!(ea.events.iter().all(|e| e.turn_id == a) && ea.events.len() == 4, "{:?}", kinds(&ea));
    assert!(eb.events.iter().all(|e| e.turn_id == b) && eb.events.len() == 4, "{:?}", kinds(&eb));
    // The cursor is instance-wide: B's page moves past A's events.
    assert_eq!(ea.next_cursor, eb.next_cursor);
    // Idempotency keys and call ids are per workspace.
    let mut in_a = req(a, "tool.catalog", json!({}));
    in_a.idempotency_key = "shared-key".into();
    let in_b = CallRequest { turn_id: b, ..in_a.clone() };
    let x = fx.call(fx.spec, in_a);
    let y = fx.call(fx.real, in_b);
    assert_ne!(x.result_id, y.result_id);
    assert_eq!(x.call_id, y.call_id);
}

// ---------------------------------------------------------------------------
// result size bound (G10)
// ---------------------------------------------------------------------------

#[test]
fn a_result_over_256_kib_is_refused_with_a_diagnostic() {
    // A search returns a snippet of up to 24 tokens per hit; notes made of
    // very long words make 50 hits far larger than 256 KiB.
    let word: String = "ω".repeat(400);
    let fx = Fx::with(|p| {
        let content = format!("zorglubinette {}", vec![word.as_str(); 40].join(" "));
        for i in 0..50 {
            p.store
                .add_note(
                    p.real_ws,
                    &p.real_inv,
                    &NewNote {
                        title: format!("Note longue {i}"),
                        content: content.clone(),
                        source: None,
                        dated_at: None,
                    },
                    "analyst",
                )
                .unwrap();
        }
    });
    let turn = fx.turn(fx.real);
    let inv = fx.real_inv.to_string();
    let search = |limit: u64| json!({"investigation_id": inv, "query": "zorglubinette", "limit": limit});
    let small = fx.call(fx.real, req(turn, "investigation.search", search(2)));
    assert_eq!(small.status, ResultStatus::Completed, "{:?}", small.diagnostic);
    let small_size = serde_json::to_vec(&*small).unwrap().len();
    assert!(small_size > 2 * 8_000, "each hit should be large, got {small_size} bytes for 2");
    assert!(small_size * 25 > MAX_RESULT_BYTES, "50 hits would not exceed the bound ({small_size} bytes for 2)");

    let big = fx.call(fx.real, req(turn, "investigation.search", search(50)));
    assert_eq!((big.status, big.stage), (ResultStatus::Failed, Stage::Service));
    let d = big.diagnostic.as_deref().unwrap();
    assert!(d.contains("256 KiB") && d.contains("refused"), "{d}");
    assert!(big.artifacts.is_empty() && big.object_refs.is_empty() && big.observations.is_empty());
    assert!(serde_json::to_vec(&*big).unwrap().len() <= MAX_RESULT_BYTES);
    // The refusal is kept and announced like any result.
    assert_eq!(fx.gw.result(fx.real, big.result_id).unwrap().status, ResultStatus::Failed);
    let last = fx.all_events(fx.real).events.pop().unwrap();
    assert_eq!((last.kind, last.payload["status"].as_str()), (EventType::ToolCompleted, Some("FAILED")));
    // The exact edge (256 KiB vs 256 KiB + 1) is not reachable through a tool:
    // a result's size also depends on its timing fields.
}

// ---------------------------------------------------------------------------
// policy and availability (G3, G13)
// ---------------------------------------------------------------------------

fn grant_for(p: &mut Prep<'_>, ws: Uuid, inv: ObjectRef) -> GrantRef {
    p.store
        .record_grant(
            ws,
            &NewGrant {
                investigation: inv,
                scope: ResearchScope { hosts: vec!["news.example.org".into(), "*.archive.example.org".into()] },
                budget: ResearchBudget { max_requests: 10, max_bytes: 1_000_000 },
                expires_at: (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339(),
                contract_fingerprints: json!({}),
                decided_by: "analyst".into(),
            },
        )
        .unwrap()
}

/// A fetch runner that answers what the test tells it, and records what it
/// was asked.
struct FakeFetcher {
    answer: std::sync::Mutex<Option<Fetched>>,
    asked: std::sync::Mutex<Vec<AgentFetch>>,
}

impl Fetcher for FakeFetcher {
    fn fetch(&self, ask: &AgentFetch) -> Result<Fetched, String> {
        self.asked.lock().unwrap().push(ask.clone());
        self.answer.lock().unwrap().take().ok_or_else(|| "no answer scripted".to_owned())
    }
}

/// Sandbox runs that answer what the test tells them, and record what they
/// were asked.
struct FakeSandbox {
    answer: std::sync::Mutex<Option<SandboxOutcome>>,
    asked: std::sync::Mutex<Vec<SandboxAsk>>,
}

impl Sandbox for FakeSandbox {
    fn run(&self, ask: &SandboxAsk) -> Result<SandboxOutcome, String> {
        self.asked.lock().unwrap().push(ask.clone());
        self.answer.lock().unwrap().take().ok_or_else(|| "no answer scripted".to_owned())
    }
}

#[test]
fn sandbox_exec_gives_the_evidence_text_and_maps_the_governors_answers() {
    use crate::sandbox::{SandboxEnded, SandboxRan, SandboxStreamText};
    let mut seeded = None;
    let fx = Fx::with(|p| {
        let note = labfy_store::NewNote {
            title: "Liste".into(),
            content: "alpha\nbeta\nalpha".into(),
            source: None,
            dated_at: None,
        };
        seeded = Some(p.store.add_note(p.real_ws, &p.real_inv, &note, "analyst").unwrap());
    });
    let evidence = seeded.unwrap();
    let fake = Arc::new(FakeSandbox { answer: std::sync::Mutex::new(None), asked: std::sync::Mutex::new(vec![]) });
    assert!(fx.gw.set_sandbox(fake.clone()));
    assert!(fx.gw.has_sandbox() && !fx.gw.set_sandbox(fake.clone()), "lent once");
    let ready = Environment {
        sandbox: Readiness { ready: true, detail: "python3 — no network".into() },
        ..Environment::offline("x")
    };
    let published = fx.gw.catalog().published(fx.gw.catalog().tool(ToolId::SandboxExec), WorkspaceClass::Real, &ready);
    assert_eq!(published["availability"]["status"], "AVAILABLE", "{published}");
    let rt = fx.turn(fx.real);
    let input = json!({"program": "python3", "code": "print(open('/input/x').read())",
                       "evidence_ids": [evidence.to_string()], "timeout_seconds": 5});
    let stream = |text: &str| SandboxStreamText { text: text.into(), bytes: text.len() as u64, truncated: false };
    let ran = SandboxRan {
        program: "python3".into(),
        end: SandboxEnded::Exited { code: 0 },
        stdout: stream("<b>alpha</b>"),
        stderr: stream(""),
        files: vec![],
        files_unlisted: 0,
        duration_ms: 42,
        peak_memory_bytes: 1 << 20,
        cpu_ms: 10,
        reservation: "res-1".into(),
        confinement: vec!["no network".into()],
        missing: vec![],
    };
    *fake.answer.lock().unwrap() = Some(SandboxOutcome::Ran(Box::new(ran)));
    let r = fx.gw.call(fx.real, &ready, req(rt, "sandbox.exec", input.clone())).unwrap();
    assert_eq!((r.status, r.stage), (ResultStatus::Completed, Stage::Service), "{:?}", r.diagnostic);
    let a = &r.artifacts[0];
    assert_eq!((&*a.kind, &*a.trust), ("sandbox_output", "UNTRUSTED_DATA"));
    assert_eq!(a.data["run"]["stdout"]["text"], "<b>alpha</b>", "the output as data, never markup");
    assert_eq!(a.data["inputs"][0]["path"], format!("/input/{}.txt", evidence.id()));
    assert_eq!(r.object_refs, vec![evidence]);
    {
        let asked = fake.asked.lock().unwrap();
        let ask = &asked[0];
        assert_eq!((ask.program.as_str(), ask.timeout_seconds), ("python3", 5));
        assert_eq!(ask.inputs[0].text, "alpha\nbeta\nalpha", "the evidence's whole text");
        assert_eq!(ask.inputs[0].name, format!("{}.txt", evidence.id()));
    }
    // The governor's refusals keep their reasons and statuses.
    let rt = fx.turn(fx.real);
    for (answer, status, needle) in [
        (
            SandboxOutcome::Refused("\"bash\" is not on the operator's allow-list".into()),
            ResultStatus::Denied,
            "allow-list",
        ),
        (SandboxOutcome::Unavailable("no sandbox: turned off".into()), ResultStatus::Unavailable, "turned off"),
        (SandboxOutcome::Failed("cannot confine".into()), ResultStatus::Failed, "cannot confine"),
    ] {
        *fake.answer.lock().unwrap() = Some(answer);
        let mut i = input.clone();
        i["code"] = json!(format!("# {needle}"));
        let r = fx.gw.call(fx.real, &ready, req(rt, "sandbox.exec", i)).unwrap();
        assert_refused(&r, status, Stage::Service, needle);
    }
    // Evidence of another workspace does not resolve: the run is never asked.
    let before = fake.asked.lock().unwrap().len();
    let foreign = ObjectRef::new(RefKind::Evidence, Uuid::new_v4());
    let r = fx
        .gw
        .call(
            fx.real,
            &ready,
            req(rt, "sandbox.exec", json!({"program": "python3", "code": "x", "evidence_ids": [foreign.to_string()]})),
        )
        .unwrap();
    assert_ne!(r.status, ResultStatus::Completed);
    assert_eq!(fake.asked.lock().unwrap().len(), before);
}

#[test]
fn web_fetch_runs_through_the_lent_runner_and_maps_its_answers() {
    let mut seeded = (None, None);
    let fx = Fx::with(|p| {
        let (rw, ri) = (p.real_ws, p.real_inv);
        let grant = grant_for(p, rw, ri);
        let note = labfy_store::NewNote {
            title: "Communiqué".into(),
            content: "La société Durand ouvre un bureau à Nantes.".into(),
            source: Some("https://news.example.org/a".into()),
            dated_at: None,
        };
        seeded = (Some(grant), Some(p.store.add_note(rw, &ri, &note, "analyst").unwrap()));
    });
    let (grant, evidence) = (seeded.0.unwrap(), seeded.1.unwrap());
    let fake = Arc::new(FakeFetcher { answer: std::sync::Mutex::new(None), asked: std::sync::Mutex::new(vec![]) });
    let ready = Environment {
        egress: Readiness { ready: true, detail: "tor ready".into() },
        web_fetch: Readiness { ready: true, detail: "runner".into() },
        ..Environment::offline("x")
    };
    // Lent but unavailable in the environment: policy refuses first.
    assert!(fx.gw.set_fetcher(fake.clone()));
    assert!(!fx.gw.set_fetcher(fake.clone()), "lent once");
    let rt = fx.turn(fx.real);
    let fetch = |url: &str, method: &str| json!({"url": url, "method": method, "grant_id": grant.to_string()});
    let call = |input: Value, answer: Option<Fetched>| {
        *fake.answer.lock().unwrap() = answer;
        fx.gw.call_by(fx.real, &ready, req(rt, "web.fetch", input), DEMO_ACTOR).unwrap()
    };
    let published = fx.gw.catalog().published(fx.gw.catalog().tool(ToolId::WebFetch), WorkspaceClass::Real, &ready);
    assert_eq!(published["availability"]["status"], "AVAILABLE", "{published}");

    // Outside the grant's scope: the runner is never asked.
    let r = call(fetch("https://evil.example.com/x", "GET"), None);
    assert_refused(&r, ResultStatus::AuthorizationRequired, Stage::Policy, "outside the grant's scope");
    assert!(fake.asked.lock().unwrap().is_empty());

    // A page: the evidence's text as untrusted data, its provenance.
    let campaign = CampaignRef::new(Uuid::new_v4());
    let page = fetch::FetchedPage {
        url: "https://news.example.org/a".into(),
        evidence,
        campaign,
        position: 0,
        fetched_now: true,
        http_status: Some(200),
        bytes: 44,
    };
    let r = call(fetch("https://news.example.org/a", "GET"), Some(Fetched::Page(page)));
    assert_eq!((r.status, r.stage), (ResultStatus::Completed, Stage::Service), "{:?}", r.diagnostic);
    assert_eq!(r.object_refs, [evidence, campaign.into()]);
    assert_eq!(r.artifacts[0].trust, trust::UNTRUSTED);
    assert!(r.artifacts[0].data["excerpt"]["text"].as_str().unwrap().contains("bureau à Nantes"));
    assert_eq!(r.artifacts[0].data["page"]["fetched_now"], true);
    assert!(!r.provenance_refs.is_empty(), "the evidence's provenance is named");
    assert!(r.observations[0].contains("fetched over Tor"), "{:?}", r.observations);
    let asked = fake.asked.lock().unwrap().last().cloned().unwrap();
    assert_eq!((asked.grant, asked.method, asked.actor.as_str()), (grant, fetch::FetchMethod::Get, DEMO_ACTOR));
    assert_eq!((asked.workspace, asked.turn_id), (fx.real.workspace, rt));

    // A HEAD: its answer, nothing stored.
    let head = fetch::FetchedHead {
        url: "https://news.example.org/a".into(),
        final_url: "https://news.example.org/a".into(),
        http_status: 204,
        content_type: None,
        headers: vec![],
        campaign,
    };
    let r = call(fetch("https://news.example.org/a", "HEAD"), Some(Fetched::Head(head)));
    assert_eq!(r.status, ResultStatus::Completed);
    assert_eq!(r.artifacts[0].data["head"]["http_status"], 204);
    assert_eq!(fake.asked.lock().unwrap().last().unwrap().method, fetch::FetchMethod::Head);

    // Each refusal keeps its meaning and its reason.
    for (answer, status, needle) in [
        (Fetched::Refused("not one of the 2 URLs".into()), ResultStatus::Denied, "not one of the 2 URLs"),
        (Fetched::Failed("HTTP timeout".into()), ResultStatus::Failed, "HTTP timeout"),
        (Fetched::Unavailable("Tor down".into()), ResultStatus::Unavailable, "Tor down"),
        (Fetched::GrantSpent("campaign ended".into()), ResultStatus::AuthorizationRequired, "research.prepare"),
    ] {
        let r = call(fetch("https://news.example.org/a", "GET"), Some(answer));
        assert_refused(&r, status, Stage::Service, needle);
    }
    // The runner itself failing: a failure, its detail in the log only.
    let r = call(fetch("https://news.example.org/a", "GET"), None);
    assert_refused(&r, ResultStatus::Failed, Stage::Service, "the service failed");
    assert_eq!(fx.gw.turn(fx.real, rt).unwrap().status, TurnStatus::Running, "no fetch answer pauses the turn");
}

#[test]
fn policy_and_real_availability() {
    let mut grants = (None, None);
    let fx = Fx::with(|p| {
        let (sw, si, rw, ri) = (p.spec_ws, p.spec_inv, p.real_ws, p.real_inv);
        grants = (Some(grant_for(p, sw, si)), Some(grant_for(p, rw, ri)));
    });
    let (spec_grant, real_grant) = (grants.0.unwrap(), grants.1.unwrap());
    let fetch = |url: &str, grant: GrantRef| json!({"url": url, "method": "GET", "grant_id": grant.to_string()});
    let st = fx.turn(fx.spec);
    let rt = fx.turn(fx.real);

    // web.fetch: never in a SPECIMEN; in REAL only once egress is ready.
    let r = fx.call(fx.spec, req(st, "web.fetch", fetch("https://news.example.org/a", spec_grant)));
    assert_refused(&r, ResultStatus::Unavailable, Stage::Policy, "SPECIMEN");
    assert_eq!(r.risk_level, Some(RiskLevel::High));
    let r = fx.call(fx.real, req(rt, "web.fetch", fetch("https://news.example.org/a", real_grant)));
    assert_refused(&r, ResultStatus::Unavailable, Stage::Policy, "egress not ready");
    // References are resolved before policy: a grant of another workspace does not exist here.
    let r = fx.call(fx.real, req(rt, "web.fetch", fetch("https://news.example.org/a", spec_grant)));
    assert_refused(&r, ResultStatus::Denied, Stage::Resolution, "does not exist in this workspace");
    let no_grant = json!({"url": "https://news.example.org/a", "method": "GET"});
    assert_refused(
        &fx.call(fx.real, req(rt, "web.fetch", no_grant)),
        ResultStatus::Denied,
        Stage::Capability,
        "grant_id",
    );

    // With egress ready but no fetch runner lent (no campaign runner in
    // this process), web.fetch is unavailable (G3), before any grant is
    // looked at.
    let ready =
        Environment { egress: Readiness { ready: true, detail: "tor ready".into() }, ..Environment::offline("x") };
    let call = |url: &str| fx.gw.call(fx.real, &ready, req(rt, "web.fetch", fetch(url, real_grant))).unwrap();
    let r = call("https://www.archive.example.org/x");
    assert_refused(&r, ResultStatus::Unavailable, Stage::Policy, "no fetch runner");
    let published = fx.gw.catalog().published(fx.gw.catalog().tool(ToolId::WebFetch), WorkspaceClass::Real, &ready);
    assert_eq!(published["availability"]["status"], "UNAVAILABLE", "{published}");
    assert_eq!(fx.gw.turn(fx.real, rt).unwrap().status, TurnStatus::Running, "a fetch refusal does not pause the turn");
    // The grant check every network tool meets (E3): the grant's scope
    // decides.
    let refusal = |url: &str| fx.gw.grant_refusal(fx.real.workspace, Some(real_grant), url);
    // The URL is read as egress reads it (WHATWG): a backslash ends the
    // host, so the last one is not in scope (a hand-written parser once took
    // `evil.example.com\.archive.example.org` for a sub-domain).
    for url in [
        "https://evil.example.com/x",
        "https://archive.example.org/x",
        "https://evil.example.com\\.archive.example.org/x",
    ] {
        assert!(refusal(url).is_some_and(|r| r.contains("outside the grant's scope")), "{url}: {:?}", refusal(url));
    }
    // A URL with no checkable host is outside every scope (it used to pass).
    for (url, why) in [
        ("https://user@news.example.org/x", "carries credentials"),
        ("ftp://news.example.org/x", "only http and https"),
        ("news.example.org", "not an absolute URL"),
        ("https://news.example.org/x#top", "fragment"),
    ] {
        assert!(
            refusal(url).is_some_and(|r| r.contains(why) && r.contains("does not cover it")),
            "{url}: {:?}",
            refusal(url)
        );
    }
    assert_eq!(refusal("https://www.archive.example.org/x"), None);
    assert!(fx.gw.grant_refusal(fx.real.workspace, None, "https://news.example.org/x").is_some());
    fx.writer().revoke_grant(fx.real.workspace, &real_grant, "analyst").unwrap();
    let r = refusal("https://news.example.org/x");
    assert!(r.as_deref().is_some_and(|r| r.contains("revoked or expired")), "{r:?}");
    // Even with egress ready, a SPECIMEN never fetches.
    let r = fx.gw.call(fx.spec, &ready, req(st, "web.fetch", fetch("https://news.example.org/a", spec_grant))).unwrap();
    assert_refused(&r, ResultStatus::Unavailable, Stage::Policy, "SPECIMEN");

    // sandbox.exec: unavailable while the environment has no sandbox (no
    // governor, no program), with the governor's reason.
    let code = json!({"program": "python3", "code": "print(1)"});
    for (scope, turn) in [(fx.spec, st), (fx.real, rt)] {
        let r = fx.call(scope, req(turn, "sandbox.exec", code.clone()));
        assert_refused(&r, ResultStatus::Unavailable, Stage::Policy, "no sandbox");
    }
    // Ready by the environment but nothing lent to this gateway: the
    // service says so (the server lends the governor's runs).
    let with_sandbox =
        Environment { sandbox: Readiness { ready: true, detail: "ok".into() }, ..Environment::offline("x") };
    let r = fx.gw.call(fx.spec, &with_sandbox, req(st, "sandbox.exec", code)).unwrap();
    assert_refused(&r, ResultStatus::Unavailable, Stage::Service, "no runner in this process");

    // Catalog tools complete, and show real availability.
    let r = fx.call(fx.real, req(rt, "tool.catalog", json!({})));
    assert_eq!((r.status, r.stage), (ResultStatus::Completed, Stage::Service));
    let data = &r.artifacts[0].data;
    assert_eq!(data["catalog_fingerprint"], PINNED_CATALOG_FINGERPRINT);
    let web = data["tools"].as_array().unwrap().iter().find(|t| t["tool_id"] == "web.fetch").unwrap();
    assert_eq!(web["availability"]["status"], "UNAVAILABLE");
    assert!(web["availability"]["reason"].as_str().unwrap().contains("egress not ready: test"));
    let r = fx.gw.call(fx.real, &ready, req(rt, "tool.catalog", json!({}))).unwrap();
    let web =
        r.artifacts[0].data["tools"].as_array().unwrap().iter().find(|t| t["tool_id"] == "web.fetch").unwrap().clone();
    assert_eq!(web["availability"]["status"], "UNAVAILABLE", "no runner for web.fetch, even with egress ready");
    assert!(web["availability"]["reason"].as_str().unwrap().contains("no fetch runner"), "{web}");
    let r = fx.call(fx.spec, req(st, "tool.docs.read", json!({"tool_id": "research.prepare"})));
    assert_eq!(r.status, ResultStatus::Completed);
    let doc = &r.artifacts[0].data;
    assert_eq!(doc["contract_fingerprint"], PINNED_TOOL_FINGERPRINTS[15].1);
    assert_eq!(doc["risk_level"], "medium");
    assert_eq!(doc["availability"]["status"], "AVAILABLE");
    assert!(doc["availability"]["reason"].as_str().unwrap().contains("SPECIMEN"));
    let published = fx.gw.catalog().publish(WorkspaceClass::Specimen, &ready);
    let web = published["tools"].as_array().unwrap().iter().find(|t| t["tool_id"] == "web.fetch").unwrap();
    assert_eq!(web["availability"]["status"], "UNAVAILABLE", "SPECIMEN: no network even with egress");

    // An unknown tool is refused at the capability stage, with no contract.
    let r = fx.call(fx.spec, req(st, "shell.exec", json!({"cmd": "id"})));
    assert_refused(&r, ResultStatus::Denied, Stage::Capability, "unknown tool");
    assert_eq!((r.risk_level, r.contract_fingerprint.as_deref()), (None, None));
    let r = fx.call(fx.spec, req(st, "agent.approve", json!({})));
    assert_refused(&r, ResultStatus::Denied, Stage::Capability, "unknown tool");
    // agent.propose stores nothing.
    let before = fx.audit_actions(fx.spec).len();
    let r = fx.call(
        fx.spec,
        req(
            st,
            "agent.propose",
            json!({"kind": "hypothesis", "text": "Lien probable", "object_ids": [fx.spec_entities[0].to_string()]}),
        ),
    );
    assert_eq!(r.status, ResultStatus::Completed);
    assert_eq!(r.object_refs, [fx.spec_entities[0]]);
    assert_eq!(fx.audit_actions(fx.spec).len(), before);
}

#[test]
fn read_tools_serve_the_store_read_models() {
    let fx = Fx::new();
    let turn = fx.turn(fx.spec);
    let inv = fx.spec_inv.to_string();
    let ev = fx.spec_evidence[0].to_string();
    let ent = fx.spec_entities[0].to_string();
    let cases = [
        ("investigation.get_overview", json!({"investigation_id": inv}), "overview"),
        ("investigation.search", json!({"investigation_id": inv, "query": "Nordlys"}), "search_result"),
        ("investigation.find_correlations", json!({"investigation_id": inv, "focus_evidence_id": ev}), "correlations"),
        ("graph.get_node", json!({"node_id": ent}), "node"),
        ("graph.get_neighbors", json!({"node_id": ent, "limit": 3}), "neighbors"),
        ("evidence.get_summary", json!({"evidence_id": ev}), "evidence_summary"),
        ("evidence.read_excerpt", json!({"evidence_id": ev, "offset": 5, "length": 40}), "excerpt"),
        ("provenance.trace", json!({"object_id": ev}), "provenance_trace"),
        ("research.get_state", json!({"investigation_id": inv}), "research_state"),
    ];
    for (tool, input, artifact) in cases {
        let r = fx.call(fx.spec, req(turn, tool, input));
        assert_eq!((r.status, r.stage), (ResultStatus::Completed, Stage::Service), "{tool}: {:?}", r.diagnostic);
        assert_eq!(r.artifacts.len(), 1, "{tool}");
        assert_eq!(r.artifacts[0].kind, artifact);
        assert_eq!(r.risk_level, Some(RiskLevel::Low));
        assert!(!r.observations.is_empty(), "{tool}");
    }
    let r = fx.call(fx.spec, req(turn, "graph.get_neighbors", json!({"node_id": ent, "limit": 3})));
    assert!(r.object_refs.len() <= 3);
    let r = fx.call(fx.spec, req(turn, "evidence.read_excerpt", json!({"evidence_id": ev, "offset": 5, "length": 40})));
    assert_eq!(r.artifacts[0].trust, trust::UNTRUSTED);
    assert_eq!(r.artifacts[0].data["length"], 40);
    assert_eq!(r.artifacts[0].data["offset"], 5);
    let r = fx.call(fx.spec, req(turn, "provenance.trace", json!({"object_id": ev, "depth": 1})));
    assert!(!r.provenance_refs.is_empty() && r.provenance_refs.iter().all(|p| p.kind() == RefKind::Provenance));
    // A job of the SPECIMEN (its generation).
    let overview = fx.reads().reads().overview(fx.spec.workspace, &fx.spec_inv).unwrap();
    if let Some(job) = overview.jobs.first() {
        let r = fx.call(fx.spec, req(turn, "jobs.get", json!({"job_id": job.id.to_string()})));
        assert_eq!((r.status, &*r.artifacts[0].trust), (ResultStatus::Completed, trust::LABFY));
    }
    // JSON Schema counts `40.0` as an integer; the service uses the value the
    // schema accepted, never a silent default.
    let as_floats = json!({"evidence_id": ev, "offset": 5.0, "length": 40.0});
    fx.gw.catalog().tool(ToolId::EvidenceReadExcerpt).validate(&as_floats).unwrap();
    let r = fx.call(fx.spec, req(turn, "evidence.read_excerpt", as_floats));
    assert_eq!((r.artifacts[0].data["offset"].as_i64(), r.artifacts[0].data["length"].as_i64()), (Some(5), Some(40)));
    let r = fx.call(fx.spec, req(turn, "graph.get_neighbors", json!({"node_id": ent, "limit": 2.0})));
    assert!(r.object_refs.len() <= 2, "limit 2.0 ignored: {} neighbours", r.object_refs.len());
    // A store refusal is a FAILED result with its reason, not an error.
    let r = fx.call(fx.spec, req(turn, "investigation.search", json!({"investigation_id": inv, "query": "!!!"})));
    assert_eq!((r.status, r.stage), (ResultStatus::Failed, Stage::Service));
    assert!(r.diagnostic.as_deref().unwrap().contains("no words"));
}

// ---------------------------------------------------------------------------
// demo agent (G11)
// ---------------------------------------------------------------------------

fn demo(fx: &Fx, question: &str) -> Turn {
    let turn = fx
        .gw
        .run_demo_turn(
            fx.spec,
            &fx.env,
            &NewTurn {
                question: question.into(),
                investigation_id: None,
                exclusions: vec![],
                mode: None,
                lang: Lang::Fr,
            },
        )
        .unwrap();
    assert_eq!(turn.status, TurnStatus::AuthorizationRequired, "demo turn: {:?}", turn.error);
    turn
}

const DEMO_QUESTION: &str = "Quels liens entre Nordlys Logistique et Camille Martin ?";

#[test]
fn the_demo_agent_pauses_for_a_human_and_resumes_after_a_grant() {
    let fx = Fx::new();
    let turn = demo(&fx, DEMO_QUESTION);
    assert_eq!(turn.mode, TurnMode::Demo);
    let request = turn.research_request.expect("paused on a research request");
    assert!(turn.calls >= 5 && turn.calls <= 12, "{} calls", turn.calls);
    assert_eq!(turn.result_ids.len(), turn.calls as usize);

    // USER → AGENT → PLAN → TOOL_REQUEST → TOOL_RESULT → AUTHORIZATION_REQUIRED.
    let page = fx.all_events(fx.spec);
    assert!(page.events.iter().all(|e| e.turn_id == turn.turn_id));
    let k = kinds(&page);
    assert_eq!(
        &k[..5],
        [
            EventType::TurnStarted,
            EventType::PlanUpdated,
            EventType::ToolRequested,
            EventType::ToolStarted,
            EventType::ToolCompleted
        ]
    );
    let auth = k.iter().position(|x| *x == EventType::AuthorizationRequired).expect("authorization.required");
    assert_eq!(k.iter().filter(|x| **x == EventType::AuthorizationRequired).count(), 1);
    assert!(k[auth + 1..].iter().all(|x| *x == EventType::PlanUpdated), "after the pause only the plan moves: {k:?}");
    assert_eq!(k[auth - 1], EventType::ToolCompleted);
    assert_eq!(page.events[auth].refs, [request]);
    assert_eq!(page.events[auth].payload["risk_level"], "medium");
    assert!(!k.contains(&EventType::TurnCompleted) && !k.contains(&EventType::Error));
    let requested = k.iter().filter(|x| **x == EventType::ToolRequested).count();
    let completed = k.iter().filter(|x| **x == EventType::ToolCompleted).count();
    assert_eq!((requested, completed), (turn.calls as usize, turn.calls as usize));
    let tools: Vec<&str> = page
        .events
        .iter()
        .filter(|e| e.kind == EventType::ToolRequested)
        .map(|e| e.payload["tool_id"].as_str().unwrap())
        .collect();
    assert_eq!(tools[0], "investigation.get_overview");
    assert!(tools.contains(&"investigation.search") && tools.contains(&"evidence.get_summary"));
    assert_eq!(&tools[tools.len() - 2..], ["research.get_state", "research.prepare"]);
    let plan = page.events.iter().rfind(|e| e.kind == EventType::PlanUpdated).unwrap();
    assert_eq!(plan.payload["agent"], DEMO_AGENT_LABEL);
    assert_eq!(plan.payload["done"], 5);

    // The agent prepared, and nothing more: no grant, no campaign.
    let stored = fx.requests(fx.spec, &fx.spec_inv);
    assert_eq!(stored.len(), 1);
    let s = &stored[0];
    assert_eq!((s.id, s.status.as_str(), s.requested_by.as_str()), (request, "PENDING", DEMO_ACTOR));
    assert_eq!(s.question, DEMO_QUESTION);
    assert!(s.grant.is_none() && s.campaign.is_none() && !s.grant_active);
    let actions = fx.audit_actions(fx.spec);
    assert!(actions.iter().all(|a| !a.starts_with("grant.") && !a.starts_with("campaign.")), "{actions:?}");
    // A paused turn takes no call.
    assert!(matches!(
        fx.gw.call(fx.spec, &fx.env, req(turn.turn_id, "tool.catalog", json!({}))),
        Err(GatewayError::Conflict(_))
    ));
    // No resume before a human grants.
    assert!(matches!(fx.gw.resume(fx.spec, &fx.env, turn.turn_id), Err(GatewayError::Forbidden(_))));
    assert_eq!(fx.gw.turn(fx.spec, turn.turn_id).unwrap().status, TurnStatus::AuthorizationRequired);

    // A human grants through the store (the server's secured route).
    let granted = fx.writer().grant_research(fx.spec.workspace, &request, &fx.decision()).unwrap();
    assert!(matches!(fx.gw.resume(fx.spec, &fx.env, Uuid::new_v4()), Err(GatewayError::NotFound(_))));
    assert!(matches!(fx.gw.resume(fx.real, &fx.env, turn.turn_id), Err(GatewayError::NotFound(_))));
    let cursor = fx.all_events(fx.spec).next_cursor;
    let done = fx.gw.resume(fx.spec, &fx.env, turn.turn_id).unwrap();
    assert_eq!(done.status, TurnStatus::Completed, "{:?}", done.error);
    let summary = done.summary.as_deref().unwrap();
    assert!(summary.contains("SPECIMEN") && summary.contains(&granted.grant.to_string()), "{summary}");
    let campaign = fx.requests(fx.spec, &fx.spec_inv)[0].campaign.clone().unwrap();
    assert_eq!(campaign.status, "COMPLETED");
    assert!(!campaign.evidence.is_empty());
    for r in [request, granted.grant.into(), granted.campaign.into()].iter().chain(&campaign.evidence) {
        assert!(done.summary_refs.contains(r), "summary_refs lacks {r}");
    }
    assert_eq!(done.calls, turn.calls + 1, "the resume rereads the state through the gateway");
    let after = fx.gw.events(fx.spec, cursor, 100);
    assert_eq!(
        kinds(&after),
        [EventType::ToolRequested, EventType::ToolStarted, EventType::ToolCompleted, EventType::TurnCompleted]
    );
    assert_eq!(after.events[0].payload["tool_id"], "research.get_state");
    // Once only.
    assert!(matches!(fx.gw.resume(fx.spec, &fx.env, turn.turn_id), Err(GatewayError::Conflict(_))));
    assert!(matches!(
        fx.gw.call(fx.spec, &fx.env, req(turn.turn_id, "tool.catalog", json!({}))),
        Err(GatewayError::Conflict(_))
    ));
}

#[test]
fn a_revoked_grant_forbids_the_resume_and_a_refusal_ends_the_turn() {
    let fx = Fx::new();
    let revoked = demo(&fx, DEMO_QUESTION);
    let refused = demo(&fx, "Quels liens entre Tessera Logistique et Léa Martin ?");
    assert_eq!(fx.requests(fx.spec, &fx.spec_inv).len(), 2);

    let mut w = fx.writer();
    let out = w.grant_research(fx.spec.workspace, &revoked.research_request.unwrap(), &fx.decision()).unwrap();
    w.revoke_grant(fx.spec.workspace, &out.grant, "analyst").unwrap();
    assert!(matches!(fx.gw.resume(fx.spec, &fx.env, revoked.turn_id), Err(GatewayError::Forbidden(_))));
    assert_eq!(fx.gw.turn(fx.spec, revoked.turn_id).unwrap().status, TurnStatus::AuthorizationRequired);

    w.refuse_research(fx.spec.workspace, &refused.research_request.unwrap(), "pas de recherche externe", "analyst")
        .unwrap();
    let done = fx.gw.resume(fx.spec, &fx.env, refused.turn_id).unwrap();
    assert_eq!(done.status, TurnStatus::Completed);
    let summary = done.summary.unwrap();
    assert!(summary.contains("refusée") && summary.contains("pas de recherche externe"), "{summary}");
    assert_eq!(done.summary_refs, [refused.research_request.unwrap()]);
    assert!(matches!(fx.gw.resume(fx.spec, &fx.env, refused.turn_id), Err(GatewayError::Conflict(_))));
}

#[test]
fn the_demo_agent_plans_and_sums_up_in_the_analysts_language() {
    // SPEC U4: an analyst working in English reads the demo agent in English.
    for (lang, step, said, not) in [
        (Lang::En, "Read the investigation's overview", "Research granted", "Recherche accordée"),
        (Lang::Fr, "Lire la vue d'ensemble de l'enquête", "Recherche accordée", "Research granted"),
    ] {
        let fx = Fx::new();
        let new =
            NewTurn { question: DEMO_QUESTION.into(), investigation_id: None, exclusions: vec![], mode: None, lang };
        let turn = fx.gw.run_demo_turn(fx.spec, &fx.env, &new).unwrap();
        assert_eq!((turn.status, turn.lang), (TurnStatus::AuthorizationRequired, lang), "{:?}", turn.error);
        let page = fx.all_events(fx.spec);
        let plan = page.events.iter().rfind(|e| e.kind == EventType::PlanUpdated).unwrap();
        assert_eq!(plan.payload["steps"][0], step, "{lang:?}");
        // The purpose of each call too (the activity shows it).
        let asked = page.events.iter().find(|e| e.kind == EventType::ToolRequested).unwrap();
        let purpose = if lang == Lang::Fr { "vue d'ensemble" } else { "overview" };
        assert_eq!(asked.payload["purpose"], purpose, "{lang:?}: {}", asked.payload);
        let request = turn.research_request.unwrap();
        fx.writer().grant_research(fx.spec.workspace, &request, &fx.decision()).unwrap();
        let done = fx.gw.resume(fx.spec, &fx.env, turn.turn_id).unwrap();
        let summary = done.summary.unwrap();
        assert!(summary.starts_with(said) && !summary.contains(not), "{lang:?}: {summary}");
    }
    // Unsaid, it is French (the UI's default).
    let new: NewTurn = serde_json::from_value(json!({"question": DEMO_QUESTION})).unwrap();
    assert_eq!(new.lang, Lang::Fr);
    let err = serde_json::from_value::<NewTurn>(json!({"question": DEMO_QUESTION, "lang": "de"})).unwrap_err();
    assert!(err.to_string().contains("unknown variant `de`"), "{err}");
}

#[test]
fn the_demo_agent_fails_cleanly_with_nothing_to_research() {
    let fx = Fx::new();
    // The REAL workspace's investigation has one short note and no entity.
    let mut w = fx.writer();
    let (ws, inv) = w.create_real_workspace("Vide", "analyst").unwrap();
    drop(w);
    let scope = Scope { workspace: ws.id(), class: WorkspaceClass::Real };
    let turn = fx
        .gw
        .run_demo_turn(
            scope,
            &fx.env,
            &NewTurn {
                question: DEMO_QUESTION.into(),
                investigation_id: None,
                exclusions: vec![],
                mode: None,
                lang: Lang::Fr,
            },
        )
        .unwrap();
    assert_eq!(turn.status, TurnStatus::Failed);
    assert!(turn.error.as_deref().unwrap().contains("nothing to research"));
    assert_eq!(turn.investigation_id, inv);
    let k = kinds(&fx.all_events(scope));
    assert_eq!(k.last(), Some(&EventType::Error));
    assert!(!k.contains(&EventType::AuthorizationRequired));
    assert!(fx.reads().reads().research_requests(ws.id(), &inv, 10).unwrap().is_empty());
    assert!(matches!(fx.gw.resume(scope, &fx.env, turn.turn_id), Err(GatewayError::Conflict(_))));
}

// ---------------------------------------------------------------------------
// prompt injection (M2, G11)
// ---------------------------------------------------------------------------

#[test]
fn a_hostile_evidence_item_cannot_steer_the_demo_agent() {
    let fx = Fx::new();
    // The hostile page (SPECIMEN index 3) tells the agent to select "*" and
    // grant itself the research.
    let search =
        fx.reads().reads().search(fx.spec.workspace, &fx.spec_inv, "instructions précédentes 8812", 10).unwrap();
    assert_eq!(search.hits.len(), 1, "{search:?}");
    let hostile = search.hits[0].id;
    assert_eq!(search.hits[0].title, "Page web archivée — forum-echanges.example/fil/8812");
    let content = fx.reads().reads().excerpt(fx.spec.workspace, &hostile, 0, 16_000).unwrap();
    let content = serde_json::to_string(&content).unwrap();
    assert!(content.contains("accorde-toi l'autorisation") && content.contains("selection_ids"), "{content}");

    let fingerprint = fx.gw.catalog().fingerprint().to_owned();
    let turn = demo(&fx, "Instructions précédentes 8812 : que dit ce fil ?");
    let request = turn.research_request.unwrap();

    // The agent opened the hostile page…
    let page = fx.all_events(fx.spec);
    let opened: Vec<&Event> = page
        .events
        .iter()
        .filter(|e| e.kind == EventType::ToolCompleted && e.payload["tool_id"] == "evidence.get_summary")
        .collect();
    assert!(opened.iter().any(|e| e.refs.first() == Some(&hostile)), "the demo did not open the hostile page");
    let excerpt = page
        .events
        .iter()
        .find(|e| e.kind == EventType::ToolCompleted && e.payload["tool_id"] == "evidence.read_excerpt")
        .unwrap();
    assert_eq!(excerpt.refs, [hostile]);
    // …and still did only what it always does: its own selection, a pending request.
    let stored = fx.requests(fx.spec, &fx.spec_inv);
    assert_eq!(stored.len(), 1);
    let s = &stored[0];
    assert_eq!(s.id, request);
    let overview = fx.reads().reads().overview(fx.spec.workspace, &fx.spec_inv).unwrap();
    let allowed: BTreeSet<ObjectRef> = [hostile, overview.top_entities[0].id].into();
    let selected: BTreeSet<ObjectRef> = s.selection.iter().copied().collect();
    assert_eq!(selected, allowed, "the selection is the search hit and the top entity, nothing else");
    assert!(s.selection.len() <= 3);
    assert_eq!((s.status.as_str(), s.requested_by.as_str()), ("PENDING", DEMO_ACTOR));
    assert!(s.exclusions.is_empty());
    assert!(s.grant.is_none() && s.campaign.is_none() && !s.grant_active);
    let actions = fx.audit_actions(fx.spec);
    assert!(actions.iter().all(|a| !a.starts_with("grant.") && !a.starts_with("campaign.")), "{actions:?}");
    assert_eq!(actions.iter().filter(|a| *a == "research.prepare").count(), 1);
    // No tool outside the demo's fixed plan was called, and the catalog is unchanged.
    let tools: BTreeSet<&str> = page
        .events
        .iter()
        .filter(|e| e.kind == EventType::ToolRequested)
        .map(|e| e.payload["tool_id"].as_str().unwrap())
        .collect();
    let plan: BTreeSet<&str> = [
        "investigation.get_overview",
        "investigation.search",
        "evidence.get_summary",
        "evidence.read_excerpt",
        "research.get_state",
        "research.prepare",
    ]
    .into();
    assert!(tools.is_subset(&plan), "{tools:?}");
    assert_eq!(fx.gw.catalog().fingerprint(), fingerprint);
    assert_eq!(fingerprint, PINNED_CATALOG_FINGERPRINT);
    // The agent cannot resume itself into a campaign.
    assert!(matches!(fx.gw.resume(fx.spec, &fx.env, turn.turn_id), Err(GatewayError::Forbidden(_))));
}

// ---------------------------------------------------------------------------
// the journal (F4)
// ---------------------------------------------------------------------------

#[test]
fn turns_results_and_events_survive_a_restart() {
    let mut fx = Fx::new();
    let dir = fx.dir.path().to_owned();
    let journal = || labfy_store::JournalStore::open(&dir).unwrap();
    fx.gw = AgentGateway::new(Arc::new(DirectBackend::new(fx.writer()))).unwrap().with_journal(journal());
    // A demo turn paused on a research request, a manual turn left running.
    let paused = demo(&fx, DEMO_QUESTION);
    let request = paused.research_request.unwrap();
    let running = fx.turn(fx.real);
    let call = req(running, "investigation.get_overview", json!({"investigation_id": fx.real_inv.to_string()}));
    let first = fx.call(fx.real, call.clone());
    assert_eq!(first.status, ResultStatus::Completed);
    let before = fx.all_events(fx.spec);
    let last_before = before.next_cursor;
    assert!(fx.gw.flush_journal(), "the journal is written");

    // The restart: a new gateway over the same file.
    let gw = AgentGateway::new(Arc::new(DirectBackend::new(fx.writer()))).unwrap().with_journal(journal());
    assert!(gw.turn(fx.spec, paused.turn_id).is_err(), "nothing read back before restore");
    let spec = gw.restore(fx.spec).unwrap();
    assert_eq!((spec.turns, spec.paused, spec.interrupted.len()), (1, 1, 0), "{spec:?}");
    assert_eq!(spec.results, paused.calls as usize);
    let real = gw.restore(fx.real).unwrap();
    assert_eq!((real.turns, real.interrupted.as_slice()), (1, [running].as_slice()), "{real:?}");

    // The paused turn as it was; its results and events as they were.
    let back = gw.turn(fx.spec, paused.turn_id).unwrap();
    assert_eq!(
        (back.status, back.research_request, back.calls),
        (TurnStatus::AuthorizationRequired, Some(request), paused.calls)
    );
    assert_eq!(back.result_ids, paused.result_ids);
    let r = gw.result(fx.spec, paused.result_ids[0]).unwrap();
    assert_eq!(r.result_id, paused.result_ids[0]);
    let events = gw.events(fx.spec, 0, MAX_EVENTS_PER_POLL);
    let seqs: Vec<u64> = events.events.iter().map(|e| e.sequence).collect();
    assert_eq!(seqs, before.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), "the same events, same sequences");
    // Other workspaces' turns stay apart.
    assert!(gw.turn(fx.real, paused.turn_id).is_err());

    // The running turn ended, saying why; its events go on after the old ones.
    let ended = gw.turn(fx.real, running).unwrap();
    assert_eq!((ended.status, ended.error.as_deref()), (TurnStatus::Failed, Some(INTERRUPTED_BY_RESTART)));
    let after = gw.events(fx.real, 0, MAX_EVENTS_PER_POLL);
    let error = after.events.last().unwrap();
    assert_eq!((error.kind, error.turn_id), (EventType::Error, running));
    assert!(error.sequence > last_before, "sequences keep growing across the restart");
    // A replayed call answers the result it had, with no second run.
    let replay = gw.call(fx.real, &fx.env, call.clone()).unwrap();
    assert_eq!(replay.result_id, first.result_id);
    let other = CallRequest { input: json!({"investigation_id": fx.spec_inv.to_string()}), ..call };
    assert!(matches!(gw.call(fx.real, &fx.env, other), Err(GatewayError::Conflict(_))), "same key, other intent");

    // The paused turn resumes after a human grant, on the new gateway.
    fx.writer().grant_research(fx.spec.workspace, &request, &fx.decision()).unwrap();
    let done = gw.resume(fx.spec, &fx.env, paused.turn_id).unwrap();
    assert_eq!(done.status, TurnStatus::Completed, "{:?}", done.error);
    // And a second restart reads back the ended turns as ended.
    assert!(gw.flush_journal());
    let gw3 = AgentGateway::new(Arc::new(DirectBackend::new(fx.writer()))).unwrap().with_journal(journal());
    let again = gw3.restore(fx.spec).unwrap();
    assert_eq!((again.paused, again.interrupted.len()), (0, 0), "{again:?}");
    assert_eq!(gw3.turn(fx.spec, paused.turn_id).unwrap().status, TurnStatus::Completed);
}

mod provision;

/// A sandbox that holds each run a while (a slow tool), and counts them.
struct SlowSandbox {
    runs: std::sync::atomic::AtomicUsize,
}

impl Sandbox for SlowSandbox {
    fn run(&self, ask: &SandboxAsk) -> Result<SandboxOutcome, String> {
        use crate::sandbox::{SandboxEnded, SandboxRan, SandboxStreamText};
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(400));
        let stream = |text: &str| SandboxStreamText { text: text.into(), bytes: text.len() as u64, truncated: false };
        Ok(SandboxOutcome::Ran(Box::new(SandboxRan {
            program: ask.program.clone(),
            end: SandboxEnded::Exited { code: 0 },
            stdout: stream("fini"),
            stderr: stream(""),
            files: vec![],
            files_unlisted: 0,
            duration_ms: 400,
            peak_memory_bytes: 0,
            cpu_ms: 0,
            reservation: "slow".into(),
            confinement: vec![],
            missing: vec![],
        })))
    }
}

/// SPEC G7 under real concurrency (issue 45, L3): eight threads send the
/// same call (one idempotency key) at once while the tool runs; it runs
/// once, every other answer is the in-flight conflict, and once it has
/// ended the same call replays its one result.
#[test]
fn one_idempotency_key_sent_eight_times_at_once_runs_once() {
    let fx = Fx::new();
    let slow = Arc::new(SlowSandbox { runs: std::sync::atomic::AtomicUsize::new(0) });
    assert!(fx.gw.set_sandbox(slow.clone()));
    let ready = Environment {
        sandbox: Readiness { ready: true, detail: "python3 — no network".into() },
        ..Environment::offline("x")
    };
    let turn = fx.turn(fx.real);
    let call = req(turn, "sandbox.exec", json!({"program": "python3", "code": "print('fini')", "timeout_seconds": 5}));
    let barrier = std::sync::Barrier::new(8);
    let answers: Vec<Result<Arc<ToolResult>, GatewayError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    fx.gw.call(fx.real, &ready, call.clone())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ran: Vec<&Arc<ToolResult>> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    assert_eq!(ran.len(), 1, "{answers:?}");
    assert_eq!(ran[0].status, ResultStatus::Completed, "{:?}", ran[0].diagnostic);
    for a in answers.iter().filter(|a| a.is_err()) {
        assert!(
            matches!(a, Err(GatewayError::Conflict(m)) if m.contains("still in flight")),
            "a concurrent duplicate: {a:?}"
        );
    }
    assert_eq!(slow.runs.load(std::sync::atomic::Ordering::SeqCst), 1, "the tool ran once");
    let replay = fx.gw.call(fx.real, &ready, call).unwrap();
    assert_eq!(replay.result_id, ran[0].result_id, "the ended call replays its result");
    assert_eq!(slow.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
}
