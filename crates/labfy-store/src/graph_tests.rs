//! The ego graph (SPEC U1): exact weights on a hand-made graph, the shares
//! and the counts of what was left out, filters, refusals, and a hub that
//! stays bounded.

use std::collections::{BTreeSet, HashMap};

use labfy_core::{ObjectRef, RefKind};
use tempfile::TempDir;

use crate::tests::specimen;
use crate::*;

struct Case {
    _dir: TempDir,
    store: Store,
    ws: uuid::Uuid,
    inv: ObjectRef,
}

impl Case {
    fn new() -> Case {
        let dir = TempDir::new().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let (ws, inv) = store.create_real_workspace("Affaire Kappa", "analyst").unwrap();
        Case { _dir: dir, store, ws: ws.id(), inv }
    }

    fn note(&mut self, title: &str, text: &str) -> ObjectRef {
        let n = NewNote { title: title.into(), content: text.into(), source: None, dated_at: None };
        self.store.add_note(self.ws, &self.inv, &n, "analyst").unwrap()
    }

    fn entity(&mut self, kind: &str, name: &str) -> ObjectRef {
        let e = NewEntity { kind: kind.into(), name: name.into() };
        self.store.create_entity(self.ws, &self.inv, &e, "analyst").unwrap()
    }

    fn relate(&mut self, kind: &str, src: ObjectRef, dst: ObjectRef, confidence: f64) -> ObjectRef {
        let r = NewRelation { kind: kind.into(), src, dst, confidence: Some(confidence) };
        self.store.create_relation(self.ws, &self.inv, &r, "analyst").unwrap()
    }

    fn ego(&self, center: ObjectRef, limit: u32) -> EgoGraph {
        self.store.reads().ego_graph(self.ws, &center, &EgoQuery { limit, ..EgoQuery::default() }).unwrap()
    }
}

/// Edges as (kind, source, target, weight), sorted.
fn edges(g: &EgoGraph) -> BTreeSet<(String, ObjectRef, ObjectRef, u32)> {
    g.edges.iter().map(|e| (e.kind.clone(), e.source, e.target, e.weight)).collect()
}

fn ids(g: &EgoGraph) -> BTreeSet<ObjectRef> {
    g.nodes.iter().map(|n| n.id).collect()
}

fn left(g: &EgoGraph) -> HashMap<&str, i64> {
    g.left_out.iter().map(|l| (l.relation.as_str(), l.count)).collect()
}

/// Alice works for Zeta, which owns zeta-kappa.fr; four notes name them.
struct Kappa {
    case: Case,
    alice: ObjectRef,
    zeta: ObjectRef,
    domain: ObjectRef,
    lyon: ObjectRef,
    notes: [ObjectRef; 4],
}

fn kappa() -> Kappa {
    let mut case = Case::new();
    // Plain words: nothing the extractors would add on their own.
    let n1 = case.note("Réunion de janvier", "Alice et Zeta se sont vus à Lyon.");
    let n2 = case.note("Contrat", "Alice signe pour Zeta.");
    let n3 = case.note("Site", "Alice gère le site de la société.");
    let n4 = case.note("Registre", "Zeta au registre du commerce.");
    let alice = case.entity("person", "Alice Kappa");
    let zeta = case.entity("organisation", "Zeta SAS");
    let domain = case.entity("domain", "zeta-kappa.fr");
    let lyon = case.entity("location", "Lyon");
    for (note, named) in
        [(n1, vec![alice, zeta, lyon]), (n2, vec![alice, zeta]), (n3, vec![alice, domain]), (n4, vec![zeta])]
    {
        for e in named {
            case.relate("mentions", note, e, 1.0);
        }
    }
    case.relate("works_for", alice, zeta, 0.9);
    case.relate("owns_domain", zeta, domain, 0.8);
    Kappa { case, alice, zeta, domain, lyon, notes: [n1, n2, n3, n4] }
}

#[test]
fn an_entity_is_drawn_with_its_relations_co_mentions_and_pieces_weighed_exactly() {
    let k = kappa();
    let [n1, n2, n3, n4] = k.notes;
    let g = k.case.ego(k.alice, 20);
    assert_eq!(g.center.id, k.alice);
    assert_eq!((g.center.label.as_str(), g.center.subkind.as_deref()), ("Alice Kappa", Some("person")));
    assert_eq!(g.center.degree, 4, "three pieces and one relation");
    assert_eq!(ids(&g), BTreeSet::from([k.zeta, k.domain, k.lyon, n1, n2, n3]), "n4 does not name Alice");
    assert!(g.left_out.is_empty(), "{:?}", g.left_out);
    assert_eq!(g.co_mention_basis, Some(CoMentionBasis { counted: 3, total: 3 }));
    // The typed relation comes first, weighed by the two pieces naming both.
    assert_eq!(g.nodes[0].id, k.zeta);
    let expected: BTreeSet<_> = [
        ("works_for", k.alice, k.zeta, 2),
        // Co-mentioned once each, no stored relation with Alice.
        ("co_mention", k.alice, k.domain, 1),
        ("co_mention", k.alice, k.lyon, 1),
        ("mentions", n1, k.alice, 1),
        ("mentions", n2, k.alice, 1),
        ("mentions", n3, k.alice, 1),
        // Between the chosen nodes.
        ("owns_domain", k.zeta, k.domain, 1),
        ("mentions", n1, k.zeta, 1),
        ("mentions", n1, k.lyon, 1),
        ("mentions", n2, k.zeta, 1),
        ("mentions", n3, k.domain, 1),
    ]
    .into_iter()
    .map(|(kind, s, t, w)| (kind.to_owned(), s, t, w))
    .collect();
    assert_eq!(edges(&g), expected);
    let works_for = g.edges.iter().find(|e| e.kind == "works_for").unwrap();
    assert_eq!((works_for.confidence, works_for.id.map(|r| r.kind())), (Some(0.9), Some(RefKind::Relation)));
    assert!(g.edges.iter().filter(|e| e.kind == CO_MENTION).all(|e| e.id.is_none() && e.confidence.is_none()));
    let zeta = g.nodes.iter().find(|n| n.id == k.zeta).unwrap();
    assert_eq!(zeta.degree, 5, "three pieces, two relations");
    assert!(g.nodes.iter().all(|n| n.id != n4));
}

#[test]
fn a_small_limit_shares_the_room_and_counts_what_it_left_out() {
    let k = kappa();
    // Two places: one for the typed relation (its half), the other goes to
    // the co-mentions; the three pieces are counted, not drawn.
    let g = k.case.ego(k.alice, 2);
    assert_eq!(g.nodes.len(), 2);
    assert_eq!(g.nodes[0].id, k.zeta);
    assert!([k.domain, k.lyon].contains(&g.nodes[1].id));
    assert_eq!(left(&g), HashMap::from([("co_mention", 1), ("mentions", 3)]));
    // Ten places: all six drawn, nothing left out.
    assert!(k.case.ego(k.alice, 10).left_out.is_empty());
    // Every neighbour is either drawn or counted.
    for limit in 1..=7 {
        let g = k.case.ego(k.alice, limit);
        let counted: i64 = g.left_out.iter().map(|l| l.count).sum();
        assert_eq!(g.nodes.len() as i64 + counted, 6, "limit {limit}");
        assert!(g.nodes.len() as u32 <= limit);
    }
}

#[test]
fn filters_keep_the_kinds_and_relations_asked_for() {
    let k = kappa();
    let r = k.case.store.reads();
    let only = |kinds: Option<&[&str]>, relations: Option<&[&str]>| {
        let q = EgoQuery {
            limit: 50,
            kinds: kinds.map(|k| k.iter().map(|s| s.to_string()).collect()),
            relations: relations.map(|k| k.iter().map(|s| s.to_string()).collect()),
        };
        r.ego_graph(k.case.ws, &k.alice, &q).unwrap()
    };
    let pieces = only(Some(&["evidence"]), None);
    assert_eq!(ids(&pieces), BTreeSet::from([k.notes[0], k.notes[1], k.notes[2]]));
    assert!(pieces.edges.iter().all(|e| e.kind == "mentions"));
    // Without its `works_for` edge, Zeta is still named with Alice twice.
    let co = only(None, Some(&["co_mention"]));
    assert_eq!(ids(&co), BTreeSet::from([k.zeta, k.domain, k.lyon]));
    assert!(edges(&co).contains(&(CO_MENTION.into(), k.alice, k.zeta, 2)));
    let places = only(Some(&["location", "organisation"]), Some(&["co_mention", "works_for"]));
    assert_eq!(ids(&places), BTreeSet::from([k.zeta, k.lyon]));
    assert!(places.left_out.is_empty());

    for (q, said) in [
        (EgoQuery { limit: 0, ..EgoQuery::default() }, "limit must be between 1 and 500"),
        (EgoQuery { limit: MAX_EGO_NODES + 1, ..EgoQuery::default() }, "limit must be between"),
        (EgoQuery { limit: 5, kinds: Some(vec!["planet".into()]), relations: None }, "unknown value `planet`"),
        (EgoQuery { limit: 5, kinds: Some(vec![]), relations: None }, "kinds names nothing"),
        (EgoQuery { limit: 5, kinds: None, relations: Some(vec!["knows".into()]) }, "relations: unknown value `knows`"),
    ] {
        let err = r.ego_graph(k.case.ws, &k.alice, &q).unwrap_err();
        assert!(matches!(&err, StoreError::Invalid(m) if m.contains(said)), "{said}: {err}");
    }
    let err = r.ego_graph(k.case.ws, &k.case.inv, &EgoQuery { limit: 5, ..EgoQuery::default() }).unwrap_err();
    assert!(matches!(&err, StoreError::Invalid(m) if m.contains("only an entity or a piece of evidence")), "{err}");
    // Another workspace's node is not found, exactly like a missing one.
    let err = r.ego_graph(uuid::Uuid::now_v7(), &k.alice, &EgoQuery { limit: 5, ..EgoQuery::default() }).unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
}

#[test]
fn a_piece_is_drawn_with_what_it_names_weighed_by_occurrences() {
    let mut k = kappa();
    let g = k.case.ego(k.notes[0], 20);
    assert_eq!(ids(&g), BTreeSet::from([k.alice, k.zeta, k.lyon]));
    assert!(g.co_mention_basis.is_none());
    assert!(edges(&g).contains(&("works_for".into(), k.alice, k.zeta, 1)), "the edge between two named entities");

    // The extractors record each occurrence: three times the same domain
    // weighs three.
    let n = k.case.note("Relevé", "omega-trade.com, puis omega-trade.com et encore omega-trade.com.");
    let g = k.case.ego(n, 20);
    assert_eq!(g.nodes.len(), 1);
    assert_eq!((g.nodes[0].label.as_str(), g.nodes[0].subkind.as_deref()), ("omega-trade.com", Some("domain")));
    assert_eq!(g.edges.len(), 1);
    assert_eq!((g.edges[0].kind.as_str(), g.edges[0].weight), ("mentions", 3));
}

#[test]
fn a_hub_stays_bounded_and_every_neighbour_is_drawn_or_counted() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 4, 400);
    let r = store.reads();
    let hub = r.overview(ws, &inv).unwrap().top_entities[0].id;
    let mentions = r.node(ws, &hub).unwrap().details["evidence_count"].as_i64().unwrap();
    assert!(mentions > 30, "SPECIMEN's top entity is a hub ({mentions})");
    let g = r.ego_graph(ws, &hub, &EgoQuery { limit: 30, ..EgoQuery::default() }).unwrap();
    assert_eq!(g.nodes.len(), 30);
    assert_eq!(g.co_mention_basis.as_ref().map(|b| b.total), Some(mentions));
    let drawn_pieces = g.nodes.iter().filter(|n| n.kind == "evidence").count() as i64;
    assert_eq!(left(&g)["mentions"] + drawn_pieces, mentions, "pieces drawn or counted");
    // Co-mention weights are counts of pieces, never more than the basis,
    // strongest first.
    let weights: Vec<u32> = g.edges.iter().filter(|e| e.kind == CO_MENTION).map(|e| e.weight).collect();
    assert!(!weights.is_empty());
    assert!(weights.windows(2).all(|w| w[0] >= w[1]), "{weights:?}");
    assert!(weights.iter().all(|&w| w >= 1 && i64::from(w) <= mentions));
    // Every edge joins two drawn nodes.
    let mut drawn = ids(&g);
    drawn.insert(hub);
    assert!(g.edges.iter().all(|e| drawn.contains(&e.source) && drawn.contains(&e.target)));
    // The largest graph stays within its bound.
    let big = r.ego_graph(ws, &hub, &EgoQuery { limit: MAX_EGO_NODES, ..EgoQuery::default() }).unwrap();
    assert!(big.nodes.len() <= MAX_EGO_NODES as usize);
    assert!(big.nodes.len() > g.nodes.len());
}
