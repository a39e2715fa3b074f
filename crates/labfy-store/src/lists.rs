//! The lists behind every count of the UI (SPEC U2): an investigation's
//! evidence, entities (all, or of one kind) and relations (all, or of one
//! kind), sorted, filtered and paginated by key — never by offset — so the
//! thousandth page of a 1,000,000-item investigation costs what the first
//! does.
//!
//! Every sort walks an index in the order it shows (schema V8), with the
//! item's rowid (the last column of every SQLite index) as the tie-break; `after` names the last item of the previous
//! page and its sort key is read back from the store, so a cursor is just a
//! reference and cannot point outside the investigation. A text filter is a
//! prefix of the title or name (ASCII letters in either case) and lists in
//! that order, as a phone book does.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params_from_iter};
use serde::Serialize;
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::graph_edit::{ENTITY_KINDS, RELATION_KINDS};
use crate::model::NodeBrief;
use crate::reads::{Reads, check_limit, parse_any_ref, parse_ref};

/// Most items one page holds.
pub const MAX_LIST_LIMIT: u32 = 200;
/// Longest text filter, in characters.
pub const MAX_LIST_PREFIX_CHARS: usize = 200;

/// What to list, in which order, from where.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// The sort key (per list; the first one named is the default).
    pub sort: Option<String>,
    /// `asc` or `desc`; each sort has its natural default.
    pub order: Option<String>,
    /// Only items of this kind (entities, relations).
    pub kind: Option<String>,
    /// Only items whose title or name starts with this (ASCII case folded);
    /// lists in title or name order.
    pub prefix: Option<String>,
    /// The last item of the previous page.
    pub after: Option<ObjectRef>,
    /// Items per page, 1–[`MAX_LIST_LIMIT`].
    pub limit: u32,
}

/// One page of a list.
#[derive(Debug, Clone, Serialize)]
pub struct ListPage<T> {
    /// The items, in order.
    pub items: Vec<T>,
    /// The `after` of the next page; `None` on the last one.
    pub next: Option<ObjectRef>,
    /// The sort applied.
    pub sort: &'static str,
    /// `asc` or `desc`.
    pub order: &'static str,
}

/// A piece of evidence in a list.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceRow {
    /// `evidence:<uuid>`.
    pub id: ObjectRef,
    /// Its title.
    pub title: String,
    /// Where it came from.
    pub source: String,
    /// Its media type.
    pub mime: String,
    /// Size of its bytes.
    pub byte_len: i64,
    /// When it was collected.
    pub collected_at: String,
}

/// An entity in a list.
#[derive(Debug, Clone, Serialize)]
pub struct EntityRow {
    /// `entity:<uuid>`.
    pub id: ObjectRef,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Pieces of evidence mentioning it.
    pub mention_count: i64,
}

/// A relation in a list.
#[derive(Debug, Clone, Serialize)]
pub struct RelationRow {
    /// `relation:<uuid>`.
    pub id: ObjectRef,
    /// Its kind.
    pub kind: String,
    /// Its source.
    pub src: NodeBrief,
    /// Its target.
    pub dst: NodeBrief,
    /// 0.0–1.0.
    pub confidence: f64,
    /// Who made it (`labfy-extract`, `analyst`; `None` before schema V4).
    pub producer: Option<String>,
    /// When.
    pub created_at: String,
}

/// One sort a list offers: its name, the SQL key (as the index holds it)
/// and its natural order.
struct Sort {
    name: &'static str,
    key: &'static str,
    desc: bool,
}

fn pick_sort(q: &ListQuery, sorts: &'static [Sort], text_sort: &'static str) -> Result<(&'static Sort, bool)> {
    let name = match (&q.prefix, &q.sort) {
        (Some(_), Some(s)) if s != text_sort => {
            return Err(StoreError::Invalid(format!("a text filter lists in `{text_sort}` order, not `{s}`")));
        }
        (Some(_), _) => text_sort,
        (None, Some(s)) => s.as_str(),
        (None, None) => sorts[0].name,
    };
    let sort = sorts.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = sorts.iter().map(|s| s.name).collect();
        StoreError::Invalid(format!("unknown sort `{name}` (one of {})", names.join(", ")))
    })?;
    let desc = match q.order.as_deref() {
        None => sort.desc,
        Some("asc") => false,
        Some("desc") => true,
        Some(other) => return Err(StoreError::Invalid(format!("unknown order `{other}` (asc or desc)"))),
    };
    Ok((sort, desc))
}

/// Adds a text filter on `column` (a prefix, ASCII case folded) to the
/// page's SQL, after checking it.
fn push_prefix(sql: &mut String, args: &mut Vec<Value>, column: &str, prefix: &Option<String>) -> Result<()> {
    let Some(p) = prefix else { return Ok(()) };
    if p.trim().is_empty() {
        return Err(StoreError::Invalid("the text filter is empty (leave it out to list everything)".into()));
    }
    let chars = p.chars().count();
    if chars > MAX_LIST_PREFIX_CHARS {
        return Err(StoreError::Invalid(format!(
            "text filter too long ({chars} characters, at most {MAX_LIST_PREFIX_CHARS})"
        )));
    }
    // Every string starting with `p` sorts in [p, p + U+10FFFF).
    args.push(Value::Text(p.clone()));
    args.push(Value::Text(format!("{p}\u{10FFFF}")));
    let (lo, hi) = (args.len() - 1, args.len());
    sql.push_str(&format!(" AND {column} COLLATE NOCASE >= ?{lo} AND {column} COLLATE NOCASE < ?{hi}"));
    Ok(())
}

fn check_kind(kind: &Option<String>, allowed: &[&str]) -> Result<()> {
    match kind {
        Some(k) if !allowed.contains(&k.as_str()) => {
            Err(StoreError::Invalid(format!("unknown kind `{k}` (one of {})", allowed.join(", "))))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
thread_local! {
    /// The last page's SQL and arguments, for the tests' query plans.
    pub(crate) static LAST_PAGE_SQL: std::cell::RefCell<Option<(String, Vec<Value>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Splits off the extra row: the page, and the `next` cursor when there is
/// one more.
fn paginate<T>(mut items: Vec<T>, limit: u32, id: impl Fn(&T) -> ObjectRef) -> (Vec<T>, Option<ObjectRef>) {
    if items.len() > limit as usize {
        items.truncate(limit as usize);
        let next = items.last().map(&id);
        (items, next)
    } else {
        (items, None)
    }
}

impl Reads<'_> {
    fn check_list(&self, ws: Uuid, inv: &ObjectRef, q: &ListQuery, item: RefKind) -> Result<u32> {
        self.require_kind(inv, RefKind::Investigation)?;
        self.require_in_workspace(ws, inv)?;
        if let Some(after) = &q.after
            && after.kind() != item
        {
            return Err(StoreError::Invalid(format!(
                "`after` must be a `{}:` reference, not `{after}`",
                item.as_str()
            )));
        }
        check_limit("limit", q.limit, MAX_LIST_LIMIT)
    }

    /// The cursor's sort key and rowid (every index's tie-break), read back from the store; an item of
    /// another investigation is not found.
    fn cursor(
        &self,
        table: &str,
        key: &str,
        inv: &ObjectRef,
        after: &Option<ObjectRef>,
    ) -> Result<Option<(Value, Value)>> {
        let Some(after) = after else { return Ok(None) };
        let sql = format!("SELECT {key}, rowid FROM {table} WHERE id = ?1 AND investigation_id = ?2");
        let row: Option<(Value, i64)> = self
            .conn
            .prepare_cached(&sql)?
            .query_row([after.id().to_string(), inv.id().to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        match row {
            Some((k, rowid)) => Ok(Some((k, Value::Integer(rowid)))),
            None => Err(StoreError::NotFound(after.to_string())),
        }
    }

    /// An investigation's evidence: by `collected` (newest first) or
    /// `title`.
    pub fn list_evidence(&self, ws: Uuid, inv: &ObjectRef, q: &ListQuery) -> Result<ListPage<EvidenceRow>> {
        const SORTS: &[Sort] = &[
            Sort { name: "collected", key: "collected_at", desc: true },
            Sort { name: "title", key: "title COLLATE NOCASE", desc: false },
        ];
        let limit = self.check_list(ws, inv, q, RefKind::Evidence)?;
        if q.kind.is_some() {
            return Err(StoreError::Invalid("evidence has no kind to filter by".into()));
        }
        let (sort, desc) = pick_sort(q, SORTS, "title")?;
        let mut sql = String::from(
            "SELECT id, title, source, mime, byte_len, collected_at FROM evidence WHERE investigation_id = ?1",
        );
        let mut args = vec![Value::Text(inv.id().to_string())];
        push_prefix(&mut sql, &mut args, "title", &q.prefix)?;
        let cursor = self.cursor("evidence", sort.key, inv, &q.after)?;
        self.page(
            sql,
            args,
            sort,
            desc,
            cursor,
            limit,
            |r| {
                Ok(EvidenceRow {
                    id: parse_ref(RefKind::Evidence, &r.get::<_, String>(0)?)?,
                    title: r.get(1)?,
                    source: r.get(2)?,
                    mime: r.get(3)?,
                    byte_len: r.get(4)?,
                    collected_at: r.get(5)?,
                })
            },
            |e| e.id,
        )
    }

    /// An investigation's entities, of one kind or all: by `mentions` (most
    /// first) or `name`.
    pub fn list_entities(&self, ws: Uuid, inv: &ObjectRef, q: &ListQuery) -> Result<ListPage<EntityRow>> {
        const SORTS: &[Sort] = &[
            Sort { name: "mentions", key: "mention_count", desc: true },
            Sort { name: "name", key: "name COLLATE NOCASE", desc: false },
        ];
        let limit = self.check_list(ws, inv, q, RefKind::Entity)?;
        check_kind(&q.kind, ENTITY_KINDS)?;
        let (sort, desc) = pick_sort(q, SORTS, "name")?;
        let mut sql = String::from("SELECT id, kind, name, mention_count FROM entities WHERE investigation_id = ?1");
        let mut args = vec![Value::Text(inv.id().to_string())];
        if let Some(kind) = &q.kind {
            args.push(Value::Text(kind.clone()));
            sql.push_str(&format!(" AND kind = ?{}", args.len()));
        }
        push_prefix(&mut sql, &mut args, "name", &q.prefix)?;
        let cursor = self.cursor("entities", sort.key, inv, &q.after)?;
        self.page(
            sql,
            args,
            sort,
            desc,
            cursor,
            limit,
            |r| {
                Ok(EntityRow {
                    id: parse_ref(RefKind::Entity, &r.get::<_, String>(0)?)?,
                    kind: r.get(1)?,
                    name: r.get(2)?,
                    mention_count: r.get(3)?,
                })
            },
            |e| e.id,
        )
    }

    /// An investigation's relations, of one kind or all: by `created`
    /// (newest first). A text filter does not apply (a relation has no name).
    pub fn list_relations(&self, ws: Uuid, inv: &ObjectRef, q: &ListQuery) -> Result<ListPage<RelationRow>> {
        // `rowid` is the insertion order, which the indexes carry.
        const SORTS: &[Sort] = &[Sort { name: "created", key: "rowid", desc: true }];
        let limit = self.check_list(ws, inv, q, RefKind::Relation)?;
        check_kind(&q.kind, RELATION_KINDS)?;
        if q.prefix.is_some() {
            return Err(StoreError::Invalid("relations have no name to filter by; filter by kind".into()));
        }
        let (sort, desc) = pick_sort(&ListQuery { prefix: None, ..q.clone() }, SORTS, "created")?;
        let mut sql = String::from(
            "SELECT id, kind, src, dst, confidence, producer, created_at FROM relations WHERE investigation_id = ?1",
        );
        let mut args = vec![Value::Text(inv.id().to_string())];
        if let Some(kind) = &q.kind {
            args.push(Value::Text(kind.clone()));
            sql.push_str(&format!(" AND kind = ?{}", args.len()));
            if kind != "mentions" {
                // Lets the planner take the partial index `relations_typed`.
                sql.push_str(" AND kind <> 'mentions'");
            }
        }
        let cursor = self.cursor("relations", sort.key, inv, &q.after)?;
        self.page(
            sql,
            args,
            sort,
            desc,
            cursor,
            limit,
            |r| {
                Ok(RelationRow {
                    id: parse_ref(RefKind::Relation, &r.get::<_, String>(0)?)?,
                    kind: r.get(1)?,
                    src: self.brief(parse_any_ref(&r.get::<_, String>(2)?)?)?,
                    dst: self.brief(parse_any_ref(&r.get::<_, String>(3)?)?)?,
                    confidence: r.get(4)?,
                    producer: r.get(5)?,
                    created_at: r.get(6)?,
                })
            },
            |x| x.id,
        )
    }

    /// Runs one page: the filter in `sql`, then the keyset tail.
    #[allow(clippy::too_many_arguments)]
    fn page<T>(
        &self,
        mut sql: String,
        mut args: Vec<Value>,
        sort: &'static Sort,
        desc: bool,
        cursor: Option<(Value, Value)>,
        limit: u32,
        read: impl Fn(&rusqlite::Row<'_>) -> Result<T>,
        id: impl Fn(&T) -> ObjectRef,
    ) -> Result<ListPage<T>> {
        // Ties are broken by rowid, in the key's direction: exactly the
        // order of the index (which ends with the rowid), walked forwards or
        // backwards, so SQLite reads one page of it and sorts nothing.
        let (cmp, dir) = if desc { ("<", "DESC") } else { (">", "ASC") };
        if let Some((key, at)) = cursor {
            if sort.key == "rowid" {
                args.push(at);
                sql.push_str(&format!(" AND rowid {cmp} ?{}", args.len()));
            } else {
                args.push(key);
                args.push(at);
                sql.push_str(&format!(" AND ({}, rowid) {cmp} (?{}, ?{})", sort.key, args.len() - 1, args.len()));
            }
        }
        if sort.key == "rowid" {
            sql.push_str(&format!(" ORDER BY rowid {dir} LIMIT {}", limit + 1));
        } else {
            sql.push_str(&format!(" ORDER BY {} {dir}, rowid {dir} LIMIT {}", sort.key, limit + 1));
        }
        #[cfg(test)]
        LAST_PAGE_SQL.with(|last| *last.borrow_mut() = Some((sql.clone(), args.clone())));
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(params_from_iter(args))?;
        let mut items = Vec::new();
        while let Some(row) = rows.next()? {
            items.push(read(row)?);
        }
        let (items, next) = paginate(items, limit, id);
        Ok(ListPage { items, next, sort: sort.name, order: if desc { "desc" } else { "asc" } })
    }
}
