//! The lists behind the counts (SPEC U2): every page walk gives each item
//! once, in order; filters keep what they name; bad input is refused with
//! its reason; and every page is read from an index in its order (no sort
//! of the matches, whatever their number: the query plans say so).

use std::collections::HashSet;

use labfy_core::{ObjectRef, RefKind};
use rusqlite::params_from_iter;
use tempfile::TempDir;

use crate::lists::LAST_PAGE_SQL;
use crate::tests::specimen;
use crate::*;

/// Walks a list page by page; checks no page is longer than asked.
fn walk<T: Clone>(limit: u32, mut page: impl FnMut(Option<ObjectRef>) -> Result<ListPage<T>>) -> Vec<T> {
    let mut all = Vec::new();
    let mut after = None;
    for _ in 0..10_000 {
        let p = page(after).unwrap();
        assert!(p.items.len() <= limit as usize);
        all.extend(p.items.iter().cloned());
        match p.next {
            Some(n) => {
                assert_eq!(p.items.len(), limit as usize, "a page before the last is full");
                after = Some(n);
            }
            None => return all,
        }
    }
    panic!("the walk did not end");
}

fn q(limit: u32) -> ListQuery {
    ListQuery { limit, ..ListQuery::default() }
}

/// The query plan of the last page read: it must walk an index and sort
/// nothing.
fn assert_plan_sorts_nothing(store: &Store, what: &str) {
    let (sql, args) = LAST_PAGE_SQL.with(|l| l.borrow().clone()).expect("a page was read");
    let plan: Vec<String> = store
        .conn()
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap()
        .query_map(params_from_iter(args), |r| r.get::<_, String>(3))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let text = plan.join(" | ");
    assert!(!text.contains("TEMP B-TREE"), "{what}: the page sorts its matches: {text}\n{sql}");
    assert!(text.contains("USING INDEX") || text.contains("USING COVERING INDEX"), "{what}: no index walked: {text}");
}

#[test]
fn evidence_walks_every_item_once_in_each_order() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 3, 300);
    let r = store.reads();
    let total: i64 = store.conn().query_row("SELECT count(*) FROM evidence", [], |x| x.get(0)).unwrap();
    for (sort, order) in
        [(None, None), (Some("collected"), Some("asc")), (Some("title"), None), (Some("title"), Some("desc"))]
    {
        let rows = walk(37, |after| {
            r.list_evidence(
                ws,
                &inv,
                &ListQuery { sort: sort.map(str::to_owned), order: order.map(str::to_owned), after, ..q(37) },
            )
        });
        assert_eq!(rows.len() as i64, total, "{sort:?} {order:?}");
        assert_eq!(rows.iter().map(|e| e.id).collect::<HashSet<_>>().len(), rows.len(), "an item twice");
        let keys: Vec<String> = rows
            .iter()
            .map(|e| if sort == Some("title") { e.title.to_ascii_lowercase() } else { e.collected_at.clone() })
            .collect();
        let desc = order == Some("desc") || (sort.is_none() && order.is_none());
        assert!(
            keys.windows(2).all(|w| if desc { w[0] >= w[1] } else { w[0] <= w[1] }),
            "{sort:?} {order:?} out of order"
        );
        assert_plan_sorts_nothing(&store, &format!("evidence {sort:?} {order:?}"));
    }
    let first = r.list_evidence(ws, &inv, &q(5)).unwrap();
    assert_eq!((first.sort, first.order), ("collected", "desc"));
}

#[test]
fn entities_of_a_kind_by_mentions_or_name_and_a_prefix() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 3, 300);
    let r = store.reads();
    let people: i64 =
        store.conn().query_row("SELECT count(*) FROM entities WHERE kind = 'person'", [], |x| x.get(0)).unwrap();
    let all: i64 = store.conn().query_row("SELECT count(*) FROM entities", [], |x| x.get(0)).unwrap();
    for kind in [Some("person"), None] {
        for (sort, order) in
            [(None, None), (Some("mentions"), Some("asc")), (Some("name"), None), (Some("name"), Some("desc"))]
        {
            let rows = walk(23, |after| {
                r.list_entities(
                    ws,
                    &inv,
                    &ListQuery {
                        sort: sort.map(str::to_owned),
                        order: order.map(str::to_owned),
                        kind: kind.map(str::to_owned),
                        after,
                        ..q(23)
                    },
                )
            });
            assert_eq!(rows.len() as i64, if kind.is_some() { people } else { all }, "{kind:?} {sort:?} {order:?}");
            assert!(kind.is_none() || rows.iter().all(|e| e.kind == "person"));
            assert_eq!(rows.iter().map(|e| e.id).collect::<HashSet<_>>().len(), rows.len());
            if sort == Some("name") {
                let names: Vec<String> = rows.iter().map(|e| e.name.to_ascii_lowercase()).collect();
                let desc = order == Some("desc");
                assert!(names.windows(2).all(|w| if desc { w[0] >= w[1] } else { w[0] <= w[1] }));
            } else {
                let counts: Vec<i64> = rows.iter().map(|e| e.mention_count).collect();
                let asc = order == Some("asc");
                assert!(counts.windows(2).all(|w| if asc { w[0] <= w[1] } else { w[0] >= w[1] }), "{counts:?}");
            }
            assert_plan_sorts_nothing(&store, &format!("entities {kind:?} {sort:?} {order:?}"));
        }
    }
    // A prefix, in either case, lists in name order what starts with it.
    let some = r.list_entities(ws, &inv, &ListQuery { kind: Some("person".into()), ..q(1) }).unwrap().items[0].clone();
    let stem: String = some.name.chars().take(3).collect();
    let expected: i64 = store
        .conn()
        .query_row(
            "SELECT count(*) FROM entities WHERE kind = 'person' AND lower(substr(name, 1, 3)) = lower(?1)",
            [&stem],
            |x| x.get(0),
        )
        .unwrap();
    let prefixed = walk(4, |after| {
        r.list_entities(
            ws,
            &inv,
            &ListQuery { kind: Some("person".into()), prefix: Some(stem.to_ascii_uppercase()), after, ..q(4) },
        )
    });
    assert_eq!(prefixed.len() as i64, expected, "prefix `{stem}`");
    assert!(prefixed.iter().any(|e| e.id == some.id));
    assert_plan_sorts_nothing(&store, "entities by prefix");
    let none = r.list_entities(ws, &inv, &ListQuery { prefix: Some("Zzzqx".into()), ..q(10) }).unwrap();
    assert!(none.items.is_empty() && none.next.is_none(), "a filter that matches nothing is an empty last page");
}

#[test]
fn relations_of_a_kind_newest_first() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 3, 300);
    let r = store.reads();
    for kind in [Some("works_for"), Some("mentions"), None] {
        let expected: i64 = store
            .conn()
            .query_row("SELECT count(*) FROM relations WHERE ?1 IS NULL OR kind = ?1", [kind], |x| x.get(0))
            .unwrap();
        let rows =
            walk(50, |after| r.list_relations(ws, &inv, &ListQuery { kind: kind.map(str::to_owned), after, ..q(50) }));
        assert_eq!(rows.len() as i64, expected, "{kind:?}");
        assert!(kind.is_none() || rows.iter().all(|x| Some(x.kind.as_str()) == kind));
        assert!(rows.iter().all(|x| x.src.label != x.src.id.to_string()), "unlabelled end");
        assert_plan_sorts_nothing(&store, &format!("relations {kind:?}"));
    }
}

#[test]
fn bad_list_queries_are_refused_with_their_reason() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 3, 60);
    let r = store.reads();
    let ev = r.list_evidence(ws, &inv, &q(1)).unwrap().items[0].id;
    let cases: Vec<(ListQuery, &str)> = vec![
        (q(0), "limit must be between 1 and 200"),
        (q(MAX_LIST_LIMIT + 1), "limit must be between"),
        (ListQuery { sort: Some("size".into()), ..q(5) }, "unknown sort `size`"),
        (ListQuery { order: Some("up".into()), ..q(5) }, "unknown order `up`"),
        (ListQuery { kind: Some("person".into()), ..q(5) }, "evidence has no kind"),
        (ListQuery { prefix: Some("  ".into()), ..q(5) }, "text filter is empty"),
        (ListQuery { prefix: Some("x".repeat(201)), ..q(5) }, "text filter too long"),
        (ListQuery { prefix: Some("a".into()), sort: Some("collected".into()), ..q(5) }, "lists in `title` order"),
        (
            ListQuery { after: Some(ObjectRef::new(RefKind::Entity, uuid::Uuid::now_v7())), ..q(5) },
            "must be a `evidence:`",
        ),
    ];
    for (query, said) in cases {
        let err = r.list_evidence(ws, &inv, &query).unwrap_err();
        assert!(matches!(&err, StoreError::Invalid(m) if m.contains(said)), "{said}: {err}");
    }
    let err = r.list_entities(ws, &inv, &ListQuery { kind: Some("planet".into()), ..q(5) }).unwrap_err();
    assert!(matches!(&err, StoreError::Invalid(m) if m.contains("unknown kind `planet`")), "{err}");
    let err = r.list_relations(ws, &inv, &ListQuery { prefix: Some("a".into()), ..q(5) }).unwrap_err();
    assert!(matches!(&err, StoreError::Invalid(m) if m.contains("filter by kind")), "{err}");
    // A cursor that is not in this investigation is not found.
    let err = r
        .list_evidence(
            ws,
            &inv,
            &ListQuery { after: Some(ObjectRef::new(RefKind::Evidence, uuid::Uuid::now_v7())), ..q(5) },
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    // Another workspace sees nothing.
    let err = r.list_evidence(uuid::Uuid::now_v7(), &inv, &q(5)).unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = r.list_evidence(ws, &ev, &q(5)).unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
}
