//! The analyst's hand on the graph (SPEC C4): create, rename, merge, delete;
//! extraction meets what the analyst made; counters stay exact; a bundle of
//! the edited investigation still verifies.

use labfy_core::{ObjectRef, RefKind};
use tempfile::TempDir;

use crate::bundle::{BundleWriter, verify};
use crate::tests::assert_derived_consistent;
use crate::*;

fn note(store: &mut Store, ws: uuid::Uuid, inv: &ObjectRef, text: &str) -> ObjectRef {
    store
        .add_note(
            ws,
            inv,
            &NewNote { title: "Note".into(), content: text.into(), source: None, dated_at: None },
            "analyst",
        )
        .unwrap()
}

fn entity(kind: &str, name: &str) -> NewEntity {
    NewEntity { kind: kind.into(), name: name.into() }
}

fn mentioned(store: &Store, ev: &ObjectRef) -> Vec<(String, String)> {
    store
        .conn()
        .prepare(
            "SELECT e.kind, e.name FROM relations r JOIN entities e ON 'entity:' || e.id = r.dst
             WHERE r.src = ?1 AND r.kind = 'mentions' ORDER BY e.kind, e.name",
        )
        .unwrap()
        .query_map([ev.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn real() -> (TempDir, Store, uuid::Uuid, ObjectRef) {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Zêta", "analyst").unwrap();
    (dir, store, ws.id(), inv)
}

#[test]
fn entities_are_drawn_by_hand_normalised_as_the_extractors_would() {
    let (_d, mut store, ws, inv) = real();
    let d = store.create_entity(ws, &inv, &entity("domain", " Zeta-Holding.FR. "), "analyst").unwrap();
    assert_eq!(store.reads().node(ws, &d).unwrap().label, "zeta-holding.fr");
    let err = store.create_entity(ws, &inv, &entity("domain", "zeta-holding.fr"), "analyst").unwrap_err();
    assert!(matches!(&err, StoreError::Conflict(m) if m.contains(&d.to_string())), "{err}");
    for (kind, name, said) in [
        ("iban", "FR76 3000 6000 0112 3456 7890 188", "not a valid iban"),
        ("domain", "rapport.pdf", "not a valid domain"),
        ("planet", "Mars", "unknown entity kind"),
        ("person", "  ", "must not be empty"),
    ] {
        let err = store.create_entity(ws, &inv, &entity(kind, name), "analyst").unwrap_err();
        assert!(matches!(&err, StoreError::Invalid(m) if m.contains(said)), "{kind} {name}: {err}");
    }
    let p = store.create_entity(ws, &inv, &entity("person", "Zoé Martin"), "analyst").unwrap();
    let trace = store.reads().provenance_trace(ws, &p, 1).unwrap();
    assert_eq!((trace.records[0].producer.as_str(), trace.records[0].activity.as_str()), ("analyst", "analyst.create"));
    // A note naming the domain meets the hand-made entity.
    let ev = note(&mut store, ws, &inv, "site zeta-holding.fr");
    assert_eq!(mentioned(&store, &ev), [("domain".to_owned(), "zeta-holding.fr".to_owned())]);
    assert_derived_consistent(store.conn());
}

#[test]
fn relations_are_drawn_and_deleted_by_hand() {
    let (_d, mut store, ws, inv) = real();
    let ev = note(&mut store, ws, &inv, "Rencontre à Lyon");
    let p = store.create_entity(ws, &inv, &entity("person", "Zoé Martin"), "analyst").unwrap();
    let o = store.create_entity(ws, &inv, &entity("organisation", "Zêta Holding"), "analyst").unwrap();
    let works = NewRelation { kind: "works_for".into(), src: p, dst: o, confidence: Some(0.7) };
    let r = store.create_relation(ws, &inv, &works, "analyst").unwrap();
    assert!(matches!(store.create_relation(ws, &inv, &works, "analyst"), Err(StoreError::Conflict(_))));
    let mention = NewRelation { kind: "mentions".into(), src: ev, dst: p, confidence: None };
    store.create_relation(ws, &inv, &mention, "analyst").unwrap();
    assert_eq!(store.reads().node(ws, &p).unwrap().details["evidence_count"], 1);
    let near = store.reads().neighbors(ws, &p, 10).unwrap();
    assert_eq!(near.total, 2);
    // Refused: unknown kind, a loop, another investigation's object, a grant.
    let (other_ws, other_inv) = store.create_real_workspace("Autre", "analyst").unwrap();
    let stranger = store.create_entity(other_ws.id(), &other_inv, &entity("person", "X"), "analyst").unwrap();
    for (rel, said) in [
        (NewRelation { kind: "loves".into(), src: p, dst: o, confidence: None }, "unknown relation kind"),
        (NewRelation { kind: "linked_to".into(), src: p, dst: p, confidence: None }, "two different objects"),
        (NewRelation { kind: "linked_to".into(), src: p, dst: o, confidence: Some(1.5) }, "between 0 and 1"),
        (NewRelation { kind: "linked_to".into(), src: p, dst: inv, confidence: None }, "not `investigation:"),
    ] {
        let err = store.create_relation(ws, &inv, &rel, "analyst").unwrap_err();
        assert!(err.to_string().contains(said), "{err}");
    }
    let cross = NewRelation { kind: "linked_to".into(), src: p, dst: stranger, confidence: None };
    assert!(matches!(store.create_relation(ws, &inv, &cross, "analyst"), Err(StoreError::NotFound(_))));
    store.delete_relation(ws, &r, "analyst").unwrap();
    assert!(matches!(store.reads().node(ws, &r), Err(StoreError::NotFound(_))));
    assert_eq!(store.reads().neighbors(ws, &p, 10).unwrap().total, 1);
    assert_derived_consistent(store.conn());
}

#[test]
fn rename_merge_and_delete_keep_the_graph_and_its_counts_exact() {
    let (dir, mut store, ws, inv) = real();
    let a = note(&mut store, ws, &inv, "vu sur zeta.fr et zeta-holding.fr, IP 203.0.113.9");
    let b = note(&mut store, ws, &inv, "seulement zeta-holding.fr et 203.0.113.9");
    let id_of = |store: &Store, name: &str| -> ObjectRef {
        let id: String =
            store.conn().query_row("SELECT id FROM entities WHERE name = ?1", [name], |r| r.get(0)).unwrap();
        ObjectRef::new(RefKind::Entity, id.parse().unwrap())
    };
    let short = id_of(&store, "zeta.fr");
    let long = id_of(&store, "zeta-holding.fr");
    // Merge zeta.fr into zeta-holding.fr: a's two mentions become one relation.
    store.merge_entities(ws, &short, &long, "analyst").unwrap();
    assert!(matches!(store.reads().node(ws, &short), Err(StoreError::NotFound(_))));
    let kept = store.reads().node(ws, &long).unwrap();
    assert_eq!(kept.details["aliases"], serde_json::json!(["zeta.fr"]));
    assert_eq!(kept.details["evidence_count"], 2);
    assert_eq!(
        mentioned(&store, &a),
        [("domain".into(), "zeta-holding.fr".into()), ("ipv4".into(), "203.0.113.9".into())]
    );
    let moved: i64 = store
        .conn()
        .query_row("SELECT count(*) FROM mentions WHERE entity_id = ?1", [long.id().to_string()], |r| r.get(0))
        .unwrap();
    assert_eq!(moved, 3, "the merged entity's mentions moved over");
    // A new note naming the merged-away value meets the kept entity.
    let c = note(&mut store, ws, &inv, "ancien site zeta.fr");
    assert_eq!(mentioned(&store, &c), [("domain".into(), "zeta-holding.fr".into())]);
    // Rename: the old name is an alias extraction still finds.
    store.rename_entity(ws, &long, "zeta-group.fr", "analyst").unwrap();
    let d = note(&mut store, ws, &inv, "zeta-holding.fr encore");
    assert_eq!(mentioned(&store, &d), [("domain".into(), "zeta-group.fr".into())]);
    let err = store.rename_entity(ws, &long, "pas un domaine", "analyst").unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    let ip = id_of(&store, "203.0.113.9");
    assert!(
        matches!(store.merge_entities(ws, &ip, &long, "analyst"), Err(StoreError::Invalid(m)) if m.contains("one kind"))
    );
    // Delete the address: its relations and mentions go with it.
    store.delete_entity(ws, &ip, "analyst").unwrap();
    assert_eq!(mentioned(&store, &b), [("domain".into(), "zeta-group.fr".into())]);
    let left: i64 = store
        .conn()
        .query_row("SELECT count(*) FROM mentions WHERE entity_id = ?1", [ip.id().to_string()], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0);
    assert_derived_consistent(store.conn());
    let audit: Vec<String> = store.reads().audit(ws, 50).unwrap().into_iter().map(|e| e.action).collect();
    for action in ["entity.merge", "entity.rename", "entity.delete"] {
        assert!(audit.contains(&action.to_owned()), "{action} missing from {audit:?}");
    }
    // The edited investigation still exports as a bundle that verifies.
    let out = dir.path().join("bundle");
    let ro = ReadOnlyStore::open(dir.path()).unwrap();
    let mut w = BundleWriter::create(&out).unwrap();
    let header = ro.export(&inv, &mut w).unwrap();
    let done = w.finish(header).unwrap();
    verify(&out, Some(&done.fingerprint)).unwrap();
}

/// SPEC A3: a name the analyst reads in a piece is marked where it is — the
/// entity made (or found: the same name twice is one entity), the mention
/// at its offsets, the `mentions` relation and its provenance from the
/// piece — and a later extraction keeps it.
#[test]
fn a_name_read_in_a_piece_is_marked_where_it_is_and_extraction_keeps_it() {
    let (_d, mut store, ws, inv) = real();
    let text = "Rencontre avec Maître Lucien Ferrand, notaire à Lyon, le 3 mars.";
    let ev = note(&mut store, ws, &inv, text);
    let at = |needle: &str| text[..text.find(needle).unwrap()].chars().count() as u64;
    let mark = |kind: &str, name: &str, start: u64, length: u64| NewMarked {
        kind: kind.into(),
        name: name.into(),
        start,
        length,
    };
    // A place no extractor names: made, with its mention.
    let lyon = store.mark_mention(ws, &ev, &mark("location", " Lyon ", at("Lyon"), 4), "analyst").unwrap();
    assert!(lyon.created);
    assert_eq!(lyon.text, "Lyon");
    assert_eq!(store.reads().node(ws, &lyon.entity).unwrap().label, "Lyon");
    let trace = store.reads().provenance_trace(ws, &lyon.entity, 1).unwrap();
    assert_eq!(trace.records[0].activity, "analyst.mark");
    assert_eq!(trace.records[0].inputs.iter().map(|i| i.id).collect::<Vec<_>>(), [ev], "{trace:?}");
    // A name the extractors found already (after « Maître »): the same
    // entity, its mention the analyst's from now on.
    let m = store.mark_mention(ws, &ev, &mark("person", "Lucien  Ferrand", at("Lucien"), 14), "analyst").unwrap();
    assert!(!m.created);
    assert_eq!(store.reads().node(ws, &m.entity).unwrap().label, "Lucien Ferrand");
    let mentions: Vec<(i64, i64, String)> = store
        .conn()
        .prepare("SELECT start, length, extractor FROM mentions WHERE entity_id = ?1")
        .unwrap()
        .query_map([m.entity.id().to_string()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(mentions, [(at("Lucien") as i64, 14, "analyst".to_owned())]);
    assert!(mentioned(&store, &ev).contains(&("person".to_owned(), "Lucien Ferrand".to_owned())));
    // The same name at another place: the same entity, a second mention.
    let same = store.mark_mention(ws, &ev, &mark("person", "Lucien Ferrand", at("Maître"), 21), "analyst").unwrap();
    assert_eq!((same.entity, same.created), (m.entity, false));
    // Refused: past the end, spaces only, empty, the same place twice, a
    // reference that is no piece.
    for (bad, said) in [
        (mark("person", "X", 60, 10), "past the end"),
        (mark("person", "X", at(",") + 1, 1), "only spaces"),
        (mark("person", "X", 0, 0), "1 to 1000"),
        (mark("person", "Lucien Ferrand", at("Lucien"), 14), "already mentioned"),
    ] {
        let err = store.mark_mention(ws, &ev, &bad, "analyst").unwrap_err();
        assert!(err.to_string().contains(said), "{bad:?}: {err}");
    }
    assert!(store.mark_mention(ws, &inv, &mark("person", "X", 0, 1), "analyst").is_err());
    assert_derived_consistent(store.conn());

    // A new extraction of every piece keeps what the analyst marked.
    store.conn().execute("UPDATE extraction_state SET version = 1", []).unwrap();
    let (job, _) = store.start_extraction(ws, &inv, "analyst").unwrap();
    while !store.extraction_step(ws, &job, 10).unwrap().done {}
    let kept: i64 =
        store.conn().query_row("SELECT count(*) FROM mentions WHERE extractor = 'analyst'", [], |r| r.get(0)).unwrap();
    assert_eq!(kept, 3);
    assert!(mentioned(&store, &ev).contains(&("location".to_owned(), "Lyon".to_owned())));
    assert_derived_consistent(store.conn());
}
