//! Tool request tests (SPEC X2): proposing (bounds, idempotency, scoping),
//! the human decisions of the pauses A, B, C1, C2 (approve, refuse, void
//! when the contract or the manifest changed), the standing read from them,
//! and the database rule that keeps a decided request unchanged. Real
//! SQLite files.

use labfy_core::{ObjectRef, RefKind};
use serde_json::json;
use tempfile::TempDir;
use uuid::Uuid;

use crate::research_tests::{CALL, TURN, another_specimen, audit_actions, fp_a, fp_b, specimen_store};
use crate::*;

fn manifest_fp(n: char) -> String {
    n.to_string().repeat(64)
}

fn new_request(inv: ObjectRef, kind: ToolRequestKind, cap: &str, fp: &str, key: &str) -> NewToolRequest {
    NewToolRequest {
        investigation: inv,
        kind,
        capability_id: cap.into(),
        capability_version: "1.0.0".into(),
        manifest: json!({"id": cap, "version": "1.0.0"}),
        manifest_fingerprint: fp.into(),
        reason: "compter les mots des pièces".into(),
        detail: json!({}),
        turn_id: TURN,
        call_id: CALL,
        idempotency_key: key.into(),
        requested_by: "agent:demo".into(),
        contract_fingerprint: fp_a(),
    }
}

fn decision(approve: bool, manifest: Option<&str>) -> ToolDecision {
    ToolDecision {
        approve,
        note: (!approve).then(|| "pas utile ici".to_owned()),
        decided_by: "analyst".into(),
        current_contract_fingerprint: fp_a(),
        current_manifest_fingerprint: manifest.map(str::to_owned),
    }
}

#[test]
fn a_proposal_is_stored_pending_once_and_audited() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 20);
    let req = new_request(inv, ToolRequestKind::Install, "text.count_words", &manifest_fp('1'), "k1");
    let (r, created) = store.propose_tool_request(ws, &req).unwrap();
    assert!(created);
    assert_eq!(r.kind(), RefKind::ToolRequest);
    let got = store.reads().tool_request(ws, &r).unwrap();
    assert_eq!((got.status.as_str(), got.pause, got.kind), ("PENDING", "A", ToolRequestKind::Install));
    assert_eq!(got.investigation_id, inv);
    assert_eq!(got.manifest, req.manifest);
    assert_eq!(audit_actions(&store, ws, 1), ["tool_request.install"]);
    // The same call again: the same request, nothing new.
    let (again, created) = store.propose_tool_request(ws, &req).unwrap();
    assert_eq!((again, created), (r, false));
    // The same key for something else: refused.
    let other = new_request(inv, ToolRequestKind::Install, "text.find_duplicate_lines", &manifest_fp('1'), "k1");
    assert!(matches!(store.propose_tool_request(ws, &other), Err(StoreError::Conflict(_))));
    // Bad input: said, nothing stored.
    for (bad, why) in [
        (NewToolRequest { reason: " ".into(), ..req.clone() }, "reason"),
        (
            NewToolRequest { manifest_fingerprint: "XYZ".into(), idempotency_key: "k2".into(), ..req.clone() },
            "fingerprint",
        ),
        (NewToolRequest { capability_version: "1".into(), idempotency_key: "k3".into(), ..req.clone() }, "version"),
        (
            NewToolRequest {
                manifest: json!({"x": "y".repeat(MAX_TOOL_REQUEST_JSON_BYTES)}),
                idempotency_key: "k4".into(),
                ..req.clone()
            },
            "manifest of",
        ),
    ] {
        let e = store.propose_tool_request(ws, &bad).unwrap_err();
        assert!(e.to_string().contains(why), "{why}: {e}");
    }
    // Another workspace's investigation: not found from here.
    let (ws2, _) = another_specimen(&mut store, 2, 10);
    let e =
        store.propose_tool_request(ws2, &NewToolRequest { idempotency_key: "k5".into(), ..req.clone() }).unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e}");
    assert_eq!(store.reads().tool_requests(ws, &inv, 10).unwrap().len(), 1);
    assert_eq!(store.reads().pending_tool_requests(ws).unwrap().len(), 1);
}

#[test]
fn install_then_integrate_is_read_as_the_standing_and_a_change_of_manifest_voids() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 20);
    let cap = "text.count_words";
    let fp = manifest_fp('1');
    let standing = |store: &Store| store.reads().capability_standing(ws, &inv, cap).unwrap();
    assert_eq!(standing(&store), CapabilityStanding::default());

    // A: approved while the registry holds the same manifest.
    let (a, _) = store.propose_tool_request(ws, &new_request(inv, ToolRequestKind::Install, cap, &fp, "a")).unwrap();
    assert_eq!(standing(&store).pending, vec![a]);
    let decided = store.decide_tool_request(ws, &a, &decision(true, Some(&fp))).unwrap();
    assert_eq!(decided.status, "APPROVED");
    assert_eq!(standing(&store).installed.as_deref(), Some(fp.as_str()));
    assert!(standing(&store).integrated.is_none());
    // Decided once.
    let e = store.decide_tool_request(ws, &a, &decision(false, None)).unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e}");

    // B under a manifest that changed since: void, with why; not integrated.
    let (b, _) = store.propose_tool_request(ws, &new_request(inv, ToolRequestKind::Integrate, cap, &fp, "b")).unwrap();
    let voided = store.decide_tool_request(ws, &b, &decision(true, Some(&manifest_fp('2')))).unwrap();
    assert_eq!(voided.status, "VOID");
    assert!(voided.decision_note.as_deref().unwrap().contains("changed since the proposal"), "{voided:?}");
    assert!(standing(&store).integrated.is_none());

    // B again, same manifest: integrated in this investigation only.
    let (b2, _) =
        store.propose_tool_request(ws, &new_request(inv, ToolRequestKind::Integrate, cap, &fp, "b2")).unwrap();
    assert_eq!(store.decide_tool_request(ws, &b2, &decision(true, Some(&fp))).unwrap().status, "APPROVED");
    assert_eq!(standing(&store).integrated.as_deref(), Some(fp.as_str()));
    let elsewhere = store.create_investigation(ws, "Autre dossier", "", "analyst").unwrap();
    assert!(store.reads().capability_standing(ws, &elsewhere, cap).unwrap().integrated.is_none());

    // Under another contract of the proposing tool: void (R5).
    let (c, _) =
        store.propose_tool_request(ws, &new_request(inv, ToolRequestKind::Install, "text.other", &fp, "c")).unwrap();
    let d = ToolDecision { current_contract_fingerprint: fp_b(), ..decision(true, Some(&fp)) };
    let v = store.decide_tool_request(ws, &c, &d).unwrap();
    assert_eq!(v.status, "VOID");
    assert!(v.decision_note.unwrap().contains("contract changed"));
    // A refusal needs its reason and keeps it.
    let (r, _) =
        store.propose_tool_request(ws, &new_request(inv, ToolRequestKind::Install, "text.third", &fp, "r")).unwrap();
    let no_reason = ToolDecision { note: None, ..decision(false, None) };
    assert!(store.decide_tool_request(ws, &r, &no_reason).unwrap_err().to_string().contains("reason"));
    let refused = store.decide_tool_request(ws, &r, &decision(false, None)).unwrap();
    assert_eq!((refused.status.as_str(), refused.decision_note.as_deref()), ("REFUSED", Some("pas utile ici")));
    let actions = audit_actions(&store, ws, 3);
    assert_eq!(actions[0], "tool_request.refused");
}

#[test]
fn a_promotion_needs_an_approved_trial_of_the_same_manifest_and_then_is_in_the_registry() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 20);
    let cap = "text.count_lines";
    let fp = manifest_fp('3');
    let (c1, _) = store.propose_tool_request(ws, &new_request(inv, ToolRequestKind::Change, cap, &fp, "c1")).unwrap();
    let mut promote = new_request(inv, ToolRequestKind::Promote, cap, &fp, "c2");
    promote.detail = json!({"change": c1.to_string()});
    // Promoting a trial no human approved: void.
    let (early, _) = store.propose_tool_request(ws, &promote).unwrap();
    assert_eq!(store.decide_tool_request(ws, &early, &decision(true, None)).unwrap().status, "VOID");
    assert_eq!(store.decide_tool_request(ws, &c1, &decision(true, None)).unwrap().status, "APPROVED");
    assert!(store.reads().promoted_manifests(ws).unwrap().is_empty());
    promote.idempotency_key = "c2-again".into();
    let (c2, _) = store.propose_tool_request(ws, &promote).unwrap();
    assert_eq!(store.decide_tool_request(ws, &c2, &decision(true, None)).unwrap().status, "APPROVED");
    let promoted = store.reads().promoted_manifests(ws).unwrap();
    assert_eq!(promoted.len(), 1);
    assert_eq!((promoted[0].fingerprint.as_str(), promoted[0].request), (fp.as_str(), c2));
    // Promoted is installed in the workspace; integration is still a human's (B).
    let standing = store.reads().capability_standing(ws, &inv, cap).unwrap();
    assert_eq!(standing.installed.as_deref(), Some(fp.as_str()));
    assert!(standing.integrated.is_none());
}

#[test]
fn a_decided_tool_request_never_changes_in_the_database() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 20);
    let fp = manifest_fp('1');
    let (a, _) =
        store.propose_tool_request(ws, &new_request(inv, ToolRequestKind::Install, "text.x", &fp, "a")).unwrap();
    // Even pending, its content is fixed.
    let e = store
        .conn()
        .execute("UPDATE tool_requests SET manifest = '{}' WHERE id = ?1", [a.id().to_string()])
        .unwrap_err();
    assert!(e.to_string().contains("decided once"), "{e}");
    store.decide_tool_request(ws, &a, &decision(true, Some(&fp))).unwrap();
    let e = store
        .conn()
        .execute("UPDATE tool_requests SET status = 'PENDING', decided_at = NULL WHERE id = ?1", [a.id().to_string()])
        .unwrap_err();
    assert!(e.to_string().contains("decided once"), "{e}");
    let unknown = ObjectRef::new(RefKind::ToolRequest, Uuid::now_v7());
    assert!(matches!(store.reads().tool_request(ws, &unknown), Err(StoreError::NotFound(_))));
    assert!(matches!(store.reads().tool_request(ws, &inv), Err(StoreError::Invalid(_))));
}

/// SPEC R5 (issue 45, L3): a contract change voids at once — at the
/// server's start, not when someone next decides — every pending research
/// and tool request proposed under the old contract, and revokes every
/// active grant made under it (its campaign stopped); each audited. What
/// the catalog still publishes unchanged, or does not publish at all, is
/// left alone; twice voids nothing more.
#[test]
fn a_contract_change_voids_pending_requests_and_revokes_grants_at_once() {
    use crate::research_tests::{decision as grant_decision, request};
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Dossier Omega", "analyst").unwrap();
    let ws = ws.id();
    let note = NewNote { title: "Piste".into(), content: "Le fil 8812.".into(), source: None, dated_at: None };
    let e = store.add_note(ws, &inv, &note, "analyst").unwrap();
    let (pending, _) = store.prepare_research(ws, &request(vec![e], "pending")).unwrap();
    let (granted, _) = store.prepare_research(ws, &request(vec![e], "granted")).unwrap();
    let d = crate::GrantDecision {
        urls: vec!["https://news.example.org/fil-8812".into()],
        contract_fingerprints: json!({"catalog": "c".repeat(64), "tools": {"research.prepare": fp_a(), "web.fetch": "d".repeat(64)}}),
        ..grant_decision()
    };
    let out = store.grant_research(ws, &granted, &d).unwrap();
    let (install, _) = store
        .propose_tool_request(
            ws,
            &new_request(inv, ToolRequestKind::Install, "text.count_words", &manifest_fp('1'), "t1"),
        )
        .unwrap();
    let (change, _) = store
        .propose_tool_request(
            ws,
            &new_request(inv, ToolRequestKind::Change, "text.count_words", &manifest_fp('2'), "t2"),
        )
        .unwrap();

    // Unchanged contracts: nothing voided.
    let same = |tool: &str| match tool {
        "web.fetch" => Some("d".repeat(64)),
        "code.change.propose" => None,
        _ => Some(fp_a()),
    };
    assert!(store.void_under_old_contracts(&same, "labfy-server").unwrap().is_empty());

    // research.prepare and tool.provision.propose changed; code.change.propose
    // is not published (the optional catalog off): its request waits.
    let changed = |tool: &str| match tool {
        "web.fetch" => Some("d".repeat(64)),
        "code.change.propose" => None,
        _ => Some(fp_b()),
    };
    let v = store.void_under_old_contracts(&changed, "labfy-server").unwrap();
    assert_eq!(v.research_requests, [pending]);
    assert_eq!(v.tool_requests, [install]);
    assert_eq!(v.grants, [out.grant.object_ref()]);
    let reads = store.reads();
    let r = reads.research_request(ws, &pending).unwrap();
    assert_eq!(r.status, "VOID");
    assert!(r.decision_note.as_deref().unwrap_or_default().contains("research.prepare changed"), "{r:?}");
    assert_eq!(reads.tool_request(ws, &install).unwrap().status, "VOID");
    assert_eq!(reads.tool_request(ws, &change).unwrap().status, "PENDING");
    let g = reads.research_request(ws, &granted).unwrap();
    assert!(!g.grant_active, "the grant made under the old contract is revoked");
    assert_eq!(g.campaign.unwrap().status, "STOPPED");
    let actions = audit_actions(&store, ws, 20);
    for a in ["research.void", "tool_request.void", "grant.revoke"] {
        assert!(actions.iter().any(|x| x == a), "{a} not audited: {actions:?}");
    }
    assert!(store.void_under_old_contracts(&changed, "labfy-server").unwrap().is_empty(), "twice voids nothing more");
}
