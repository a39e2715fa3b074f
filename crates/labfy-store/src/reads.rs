//! Read models ("projections"): everything the HTTP API and the gateway's read
//! tools need. Every read is scoped to one workspace: an object of another
//! workspace is reported `NotFound`, exactly like one that does not exist.

use std::collections::{HashSet, VecDeque};

use labfy_core::{GrantRef, ObjectRef, RefKind};
use rusqlite::{Connection, OptionalExtension, params};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::model::*;
use crate::search::{self, Candidate, QueryTerm};

/// Longest full-text query accepted, in characters.
pub const MAX_SEARCH_QUERY_CHARS: usize = 256;
/// Entity names weighed by a search (the first in the name index's order).
pub const SEARCH_ENTITY_WINDOW: u32 = 500;
/// Entities a search answers, the most mentioned first.
pub const SEARCH_ENTITIES_SHOWN: usize = 8;
/// Most words a full-text query may hold.
pub const MAX_SEARCH_TERMS: usize = 16;
/// Most hits one search returns.
pub const MAX_SEARCH_LIMIT: u32 = 100;
/// A query matching more of an investigation's items than this ranks only
/// this many of them, the most recent (SPEC C2's search targets at
/// 1,000,000 items): bm25 costs one score per match ranked.
pub const SEARCH_RANK_WINDOW: u32 = 2_000;
/// Most neighbours one call returns.
pub const MAX_NEIGHBORS_LIMIT: u32 = 500;
/// Longest excerpt, in characters.
pub const MAX_EXCERPT_CHARS: u32 = 16_000;
/// Deepest provenance walk.
pub const MAX_PROVENANCE_DEPTH: u32 = 16;
/// Most records one provenance trace returns.
pub const MAX_PROVENANCE_RECORDS: usize = 256;
/// Most correlations one call returns.
pub const MAX_CORRELATIONS_LIMIT: u32 = 100;
/// Entities listed in an evidence summary.
pub const MAX_SUMMARY_ENTITIES: u32 = 64;
/// Evidence samples listed per correlation.
pub const CORRELATION_SAMPLES: u32 = 5;

pub use crate::search::{SNIPPET_CLOSE, SNIPPET_OPEN};

/// Read models over one connection (read-write or read-only).
pub struct Reads<'c> {
    pub(crate) conn: &'c Connection,
}

pub(crate) fn parse_ref(kind: RefKind, id: &str) -> Result<ObjectRef> {
    let uuid =
        Uuid::try_parse(id).map_err(|_| StoreError::Internal(format!("stored {kind} id `{id}` is not a UUID")))?;
    Ok(ObjectRef::new(kind, uuid))
}

pub(crate) fn parse_any_ref(text: &str) -> Result<ObjectRef> {
    text.parse().map_err(|e| StoreError::Internal(format!("stored reference `{text}` is invalid: {e}")))
}

pub(crate) fn check_limit(name: &str, value: u32, max: u32) -> Result<u32> {
    if value == 0 || value > max {
        return Err(StoreError::Invalid(format!("{name} must be between 1 and {max}, got {value}")));
    }
    Ok(value)
}

/// The words of a search (runs of letters and digits; everything else,
/// FTS5's operators included, separates them), bounded in length and count.
/// Each becomes a quoted term, all required ([`QueryTerm`]).
/// A snippet of the text `around` a mention (the text from 59 characters
/// before it, or from the start), the mention wrapped in U+E000 … U+E001
/// like the full-text matches, with `…` where the text was cut.
fn mark_mention(around: &str, start: i64, len: i64) -> String {
    let before = usize::try_from(start.min(59)).unwrap_or(0);
    let len = usize::try_from(len).unwrap_or(0);
    let chars: Vec<char> = around.chars().collect();
    let (head, rest) = chars.split_at(before.min(chars.len()));
    let (mention, tail) = rest.split_at(len.min(rest.len()));
    let mut out = String::with_capacity(around.len() + 8);
    if start > 59 {
        out.push('…');
    }
    out.extend(head);
    out.push('\u{E000}');
    out.extend(mention);
    out.push('\u{E001}');
    out.extend(tail);
    if tail.len() >= 60 {
        out.push('…');
    }
    out
}

fn query_words(text: &str) -> Result<Vec<&str>> {
    let chars = text.chars().count();
    if chars > MAX_SEARCH_QUERY_CHARS {
        return Err(StoreError::Invalid(format!(
            "search query too long ({chars} characters, at most {MAX_SEARCH_QUERY_CHARS})"
        )));
    }
    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return Err(StoreError::Invalid("search query has no words to search for".into()));
    }
    if words.len() > MAX_SEARCH_TERMS {
        return Err(StoreError::Invalid(format!("search query has {} words, at most {MAX_SEARCH_TERMS}", words.len())));
    }
    Ok(words)
}

impl<'c> Reads<'c> {
    /// The workspace that owns `r`, if `r` exists.
    fn owner(&self, r: &ObjectRef) -> Result<Option<Uuid>> {
        let id = r.id().to_string();
        let sql = match r.kind() {
            RefKind::Workspace => "SELECT id FROM workspaces WHERE id = ?1",
            RefKind::Investigation => "SELECT workspace_id FROM investigations WHERE id = ?1",
            RefKind::Evidence => {
                "SELECT i.workspace_id FROM evidence x JOIN investigations i ON i.id = x.investigation_id WHERE x.id = ?1"
            }
            RefKind::Entity => {
                "SELECT i.workspace_id FROM entities x JOIN investigations i ON i.id = x.investigation_id WHERE x.id = ?1"
            }
            RefKind::Relation => {
                "SELECT i.workspace_id FROM relations x JOIN investigations i ON i.id = x.investigation_id WHERE x.id = ?1"
            }
            RefKind::Provenance => {
                "SELECT i.workspace_id FROM provenance x JOIN investigations i ON i.id = x.investigation_id WHERE x.id = ?1"
            }
            RefKind::Job => {
                "SELECT i.workspace_id FROM jobs x JOIN investigations i ON i.id = x.investigation_id WHERE x.id = ?1"
            }
            RefKind::Grant => "SELECT workspace_id FROM grants WHERE id = ?1",
            RefKind::Campaign => "SELECT workspace_id FROM campaigns WHERE id = ?1",
            RefKind::ResearchRequest => "SELECT workspace_id FROM research_requests WHERE id = ?1",
            RefKind::ToolRequest => "SELECT workspace_id FROM tool_requests WHERE id = ?1",
        };
        let ws: Option<String> = self.conn.prepare_cached(sql)?.query_row([id], |row| row.get(0)).optional()?;
        ws.map(|w| Uuid::try_parse(&w).map_err(|_| StoreError::Internal(format!("bad workspace id `{w}`")))).transpose()
    }

    /// The workspace that owns `r`; `NotFound` when `r` does not exist.
    pub fn workspace_of(&self, r: &ObjectRef) -> Result<Uuid> {
        self.owner(r)?.ok_or_else(|| StoreError::NotFound(r.to_string()))
    }

    /// Fails with `NotFound` unless `r` exists inside workspace `ws`.
    pub fn require_in_workspace(&self, ws: Uuid, r: &ObjectRef) -> Result<()> {
        match self.owner(r)? {
            Some(owner) if owner == ws => Ok(()),
            _ => Err(StoreError::NotFound(r.to_string())),
        }
    }

    /// Every workspace.
    pub fn workspaces(&self) -> Result<Vec<WorkspaceSummary>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT w.id, w.name, w.class, w.status, w.created_at,
                    (SELECT count(*) FROM investigations i WHERE i.workspace_id = w.id), w.archived_at
             FROM workspaces w ORDER BY w.created_at, w.id",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, i64>(5)?,
                row.get::<_, Option<String>>(6)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, name, class, status, created_at, investigation_count, archived_at) = row?;
            out.push(WorkspaceSummary {
                id: parse_ref(RefKind::Workspace, &id)?,
                name,
                class: WorkspaceClass::parse(&class)
                    .ok_or_else(|| StoreError::Internal(format!("unknown workspace class `{class}`")))?,
                status,
                created_at,
                investigation_count,
                archived_at,
            });
        }
        Ok(out)
    }

    /// One workspace.
    pub fn workspace(&self, ws: Uuid) -> Result<WorkspaceSummary> {
        self.workspaces()?
            .into_iter()
            .find(|w| w.id.id() == ws)
            .ok_or_else(|| StoreError::NotFound(ObjectRef::new(RefKind::Workspace, ws).to_string()))
    }

    /// Investigations of a workspace.
    pub fn investigations(&self, ws: Uuid) -> Result<Vec<InvestigationSummary>> {
        self.require_in_workspace(ws, &ObjectRef::new(RefKind::Workspace, ws))?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, title, summary, created_at, evidence_count, archived_at, received_fingerprint, received_at
             FROM investigations WHERE workspace_id = ?1 ORDER BY created_at, id",
        )?;
        let rows = stmt.query_map([ws.to_string()], |row| {
            Ok((
                (row.get::<_, String>(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?),
                ReceivedMark::of(row.get(6)?, row.get(7)?),
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let ((id, title, summary, created_at, evidence_count, archived_at), received) = row?;
            out.push(InvestigationSummary {
                id: parse_ref(RefKind::Investigation, &id)?,
                title,
                summary,
                created_at,
                evidence_count,
                archived_at,
                received,
            });
        }
        Ok(out)
    }

    fn count(&self, sql: &str, inv: &str) -> Result<i64> {
        Ok(self.conn.prepare_cached(sql)?.query_row([inv], |row| row.get(0))?)
    }

    /// The overview of an investigation: counts, kinds, top entities, recent
    /// evidence and jobs, read in one snapshot.
    pub fn overview(&self, ws: Uuid, inv: &ObjectRef) -> Result<Overview> {
        let inv = ObjectRef::parse_kind(&inv.to_string(), RefKind::Investigation)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        // One read transaction: every figure comes from the same snapshot.
        let _snapshot = self.conn.unchecked_transaction()?;
        self.require_in_workspace(ws, &inv)?;
        let inv_id = inv.id().to_string();
        type Head = ((String, String, String, i64, i64, i64), Option<ReceivedMark>);
        let ((title, summary, created_at, evidence, relations, provenance), received): Head = self
            .conn
            .prepare_cached(
                "SELECT title, summary, created_at, evidence_count, relation_count, provenance_count,
                        received_fingerprint, received_at
                 FROM investigations WHERE id = ?1",
            )?
            .query_row([&inv_id], |r| {
                Ok((
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
                    ReceivedMark::of(r.get(6)?, r.get(7)?),
                ))
            })?;
        let w = self.workspace(ws)?;
        let counts = Counts {
            evidence,
            entities: self.count("SELECT count(*) FROM entities WHERE investigation_id = ?1", &inv_id)?,
            relations,
            provenance,
            jobs: self.count("SELECT count(*) FROM jobs WHERE investigation_id = ?1", &inv_id)?,
        };
        let entity_kinds = self
            .conn
            .prepare_cached(
                "SELECT kind, count(*) FROM entities WHERE investigation_id = ?1 GROUP BY kind ORDER BY count(*) DESC, kind",
            )?
            .query_map([&inv_id], |r| Ok(KindCount { kind: r.get(0)?, count: r.get(1)? }))?
            .collect::<Result<Vec<_>, _>>()?;
        let top_entities = self.top_entities(&inv_id, 10, 1)?;
        let recent_evidence = {
            let mut stmt = self.conn.prepare_cached(
                "SELECT id, title, source, mime, collected_at FROM evidence
                 WHERE investigation_id = ?1 ORDER BY collected_at DESC, seq DESC LIMIT 10",
            )?;
            let rows = stmt
                .query_map([&inv_id], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
            let mut out = Vec::new();
            for row in rows {
                let (id, title, source, mime, collected_at) = row?;
                out.push(EvidenceBrief { id: parse_ref(RefKind::Evidence, &id)?, title, source, mime, collected_at });
            }
            out
        };
        let jobs = self.jobs_of(&inv_id, 10)?;
        Ok(Overview {
            investigation: InvestigationBrief { id: inv, title, summary, created_at, received },
            workspace: WorkspaceBrief { id: w.id, name: w.name, class: w.class },
            counts,
            entity_kinds,
            top_entities,
            recent_evidence,
            jobs,
        })
    }

    fn top_entities(&self, inv_id: &str, limit: u32, min_mentions: i64) -> Result<Vec<EntityBrief>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, kind, name, mention_count FROM entities
             WHERE investigation_id = ?1 AND mention_count >= ?2
             ORDER BY mention_count DESC, id LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![inv_id, min_mentions, limit], |r| {
            Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, kind, name, evidence_count) = row?;
            out.push(EntityBrief { id: parse_ref(RefKind::Entity, &id)?, kind, name, evidence_count });
        }
        Ok(out)
    }

    fn jobs_of(&self, inv_id: &str, limit: u32) -> Result<Vec<Job>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE investigation_id = ?1 ORDER BY created_at DESC, id LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![inv_id, limit], JobRow::read)?;
        rows.map(|row| row?.into_job()).collect()
    }

    /// Full-text search over the evidence of an investigation (FTS5, best
    /// first). A query matching more than [`SEARCH_RANK_WINDOW`] items ranks
    /// the most recent of them and says so (`ranked_among`).
    pub fn search(&self, ws: Uuid, inv: &ObjectRef, query: &str, limit: u32) -> Result<SearchResult> {
        self.search_within(ws, inv, query, limit, SEARCH_RANK_WINDOW)
    }

    pub(crate) fn search_within(
        &self,
        ws: Uuid,
        inv: &ObjectRef,
        query: &str,
        limit: u32,
        window: u32,
    ) -> Result<SearchResult> {
        let limit = check_limit("limit", limit, MAX_SEARCH_LIMIT)?;
        let words = query_words(query)?;
        self.require_kind(inv, RefKind::Investigation)?;
        self.require_in_workspace(ws, inv)?;
        // The newest evidence row: the document-frequency cache's generation.
        let generation: i64 =
            self.conn.prepare_cached("SELECT coalesce(max(seq), 0) FROM evidence")?.query_row([], |r| r.get(0))?;
        // Typing: the last word (3 characters or more) is a prefix while it
        // is not yet a whole word of the index (« Garo » → Garonne); a word
        // the index holds is searched whole (« SAS » does not bring
        // « Sasha »), which also spares FTS5 merging every term it begins.
        let last = words.len() - 1;
        let mut terms: Vec<QueryTerm> = words.iter().map(|w| QueryTerm::new(w, false)).collect();
        if words[last].chars().count() >= 3 && search::document_frequency(self.conn, &terms[last], generation)? == 0 {
            terms[last].prefix = true;
        }
        let fts = terms.iter().map(QueryTerm::expression).collect::<Vec<_>>().join(" ");
        // This investigation's matches, each with the text it is scored on,
        // oldest first: all of them when they fit in the window (FTS5 walks
        // its doclists forwards faster than backwards); past the window, a
        // second pass takes the newest, stopping past the window, so a query
        // matching half the corpus costs what one matching `window` costs.
        let pass = |newest_first: bool| -> Result<Vec<Candidate>> {
            let sql = if newest_first {
                "SELECT evidence_fts.rowid, e.title, substr(e.content, 1, ?4)
                 FROM evidence_fts JOIN evidence e ON e.seq = evidence_fts.rowid
                 WHERE evidence_fts MATCH ?1 AND e.investigation_id = ?2
                 ORDER BY evidence_fts.rowid DESC LIMIT ?3"
            } else {
                "SELECT evidence_fts.rowid, e.title, substr(e.content, 1, ?4)
                 FROM evidence_fts JOIN evidence e ON e.seq = evidence_fts.rowid
                 WHERE evidence_fts MATCH ?1 AND e.investigation_id = ?2
                 ORDER BY evidence_fts.rowid ASC LIMIT ?3"
            };
            Ok(self
                .conn
                .prepare_cached(sql)?
                .query_map(params![fts, inv.id().to_string(), i64::from(window) + 1, search::SCORED_CHARS], |r| {
                    Ok(Candidate { rowid: r.get(0)?, title: r.get(1)?, content: r.get(2)? })
                })?
                .collect::<std::result::Result<_, _>>()?)
        };
        let mut candidates = pass(false)?;
        if candidates.len() > window as usize {
            candidates = pass(true)?;
        }
        let ranked_among = (candidates.len() > window as usize).then_some(window);
        candidates.truncate(window as usize);
        let documents = self.evidence_total()?;
        // A word being typed is weighed by the matches found rather than
        // counted: counting it would merge every term it begins once more.
        let weights = terms
            .iter()
            .map(|t| {
                let holding = if t.prefix {
                    candidates.len() as u64
                } else {
                    search::document_frequency(self.conn, t, generation)?
                };
                Ok(search::idf(documents, holding))
            })
            .collect::<Result<Vec<f64>>>()?;
        let mut scored = search::scores(&terms, &weights, &candidates);
        // Best first; the newest among equals.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        let truncated = ranked_among.is_some() || scored.len() > limit as usize;
        scored.truncate(limit as usize);
        let mut hits = self.hits_of(&terms, &scored, &candidates)?;
        // SPEC A5: a query that is a selector finds every piece where the
        // extraction saw it, whatever its spelling there; those come first.
        let selector = match labfy_extract::selector(query) {
            Some(sel) => Some(self.selector_hits(inv, &sel, limit, &mut hits)?),
            None => None,
        };
        let truncated = truncated || selector.as_ref().is_some_and(|s| s.pieces > u64::from(limit));
        hits.truncate(limit as usize);
        let entities = self.entities_named(inv, query.trim())?;
        Ok(SearchResult { query: query.to_owned(), hits, truncated, ranked_among, selector, entities })
    }

    /// The entities whose name begins with `text` (ASCII case folded), the
    /// most mentioned first, and how many of each kind (SPEC A5: entities
    /// before pieces, facets by kind). Bounded: at most
    /// [`SEARCH_ENTITY_WINDOW`] names in the index's order are weighed, and
    /// `more` says when there were others.
    fn entities_named(&self, inv: &ObjectRef, text: &str) -> Result<EntityMatches> {
        let mut rows = self.conn.prepare_cached(
            "SELECT id, kind, name, mention_count FROM entities
             WHERE investigation_id = ?1 AND name COLLATE NOCASE >= ?2 AND name COLLATE NOCASE < ?3
             ORDER BY name COLLATE NOCASE LIMIT ?4",
        )?;
        let found: Vec<(String, String, String, i64)> = rows
            .query_map(
                params![inv.id().to_string(), text, format!("{text}\u{10FFFF}"), SEARCH_ENTITY_WINDOW + 1],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?
            .collect::<std::result::Result<_, _>>()?;
        let more = found.len() > SEARCH_ENTITY_WINDOW as usize;
        let mut kinds: Vec<KindCount> = Vec::new();
        for (_, kind, _, _) in found.iter().take(SEARCH_ENTITY_WINDOW as usize) {
            match kinds.iter_mut().find(|k| k.kind == *kind) {
                Some(k) => k.count += 1,
                None => kinds.push(KindCount { kind: kind.clone(), count: 1 }),
            }
        }
        kinds.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.kind.cmp(&b.kind)));
        let mut top: Vec<&(String, String, String, i64)> = found.iter().take(SEARCH_ENTITY_WINDOW as usize).collect();
        top.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| a.2.cmp(&b.2)));
        let items = top
            .into_iter()
            .take(SEARCH_ENTITIES_SHOWN)
            .map(|(id, kind, name, n)| {
                Ok(EntityBrief {
                    id: parse_ref(RefKind::Entity, id)?,
                    kind: kind.clone(),
                    name: name.clone(),
                    evidence_count: *n,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EntityMatches { items, kinds, more })
    }

    /// The pieces mentioning `sel`'s entities (merged ones included), newest
    /// first, put before `hits` (a piece in both comes once, here), its
    /// snippet marking the mention as written.
    fn selector_hits(
        &self,
        inv: &ObjectRef,
        sel: &labfy_extract::Selector,
        limit: u32,
        hits: &mut Vec<SearchHit>,
    ) -> Result<SelectorFound> {
        let inv_id = inv.id().to_string();
        let mut entities: Vec<String> = Vec::new();
        let mut by_name = self.conn.prepare_cached(
            "SELECT id FROM entities WHERE investigation_id = ?1 AND kind = ?2 AND name = ?3
             UNION SELECT entity_id FROM entity_aliases WHERE investigation_id = ?1 AND kind = ?2 AND name = ?3",
        )?;
        for value in &sel.values {
            for id in by_name.query_map(params![inv_id, sel.kind.as_str(), value], |r| r.get::<_, String>(0))? {
                let id = id?;
                if !entities.contains(&id) {
                    entities.push(id);
                }
            }
        }
        let mut pieces: Vec<(i64, String, i64, i64)> = Vec::new();
        let mut mentions = self.conn.prepare_cached(
            "SELECT e.seq, e.id, min(m.start), m.length FROM mentions m JOIN evidence e ON e.id = m.evidence_id
             WHERE m.entity_id = ?1 GROUP BY e.seq",
        )?;
        for id in &entities {
            for row in mentions.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))? {
                let row = row?;
                if !pieces.iter().any(|p| p.0 == row.0) {
                    pieces.push(row);
                }
            }
        }
        let total = pieces.len() as u64;
        pieces.sort_by_key(|p| std::cmp::Reverse(p.0));
        pieces.truncate(limit as usize);
        let mut row = self.conn.prepare_cached(
            "SELECT title, source, mime, collected_at, substr(content, max(1, ?2 - 59), ?3 + 120) FROM evidence
             WHERE seq = ?1",
        )?;
        let mut first = Vec::with_capacity(pieces.len());
        for (seq, id, start, len) in &pieces {
            let (title, source, mime, collected_at, around): (String, String, String, String, String) = row
                .query_row(params![seq, start + 1, len], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?;
            let id = parse_ref(RefKind::Evidence, id)?;
            hits.retain(|h| h.id != id);
            first.push(SearchHit {
                id,
                title,
                source,
                mime,
                collected_at,
                snippet: mark_mention(&around, *start, *len),
            });
        }
        first.append(hits);
        *hits = first;
        let entities = entities.iter().map(|e| parse_ref(RefKind::Entity, e)).collect::<Result<Vec<_>>>()?;
        Ok(SelectorFound { kind: sel.kind.as_str().to_owned(), value: sel.value.clone(), entities, pieces: total })
    }

    /// Evidence items of all investigations (the counts the commands keep).
    fn evidence_total(&self) -> Result<u64> {
        let n: i64 = self
            .conn
            .prepare_cached("SELECT coalesce(sum(evidence_count), 0) FROM investigations")?
            .query_row([], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The hits for scored rowids, best first: their evidence and a snippet
    /// made from the text they were scored on ([`search::snippet`]); FTS5's
    /// own `snippet()`, one indexed seek, only for a piece whose match lies
    /// past that text (a long piece, or a match in its title alone).
    fn hits_of(&self, terms: &[QueryTerm], scored: &[(i64, f64)], texts: &[Candidate]) -> Result<Vec<SearchHit>> {
        let by_rowid: std::collections::HashMap<i64, &Candidate> = texts.iter().map(|c| (c.rowid, c)).collect();
        let fts = terms.iter().map(QueryTerm::expression).collect::<Vec<_>>().join(" ");
        let mut row =
            self.conn.prepare_cached("SELECT id, title, source, mime, collected_at FROM evidence WHERE seq = ?1")?;
        let mut hits = Vec::with_capacity(scored.len());
        for (rowid, _) in scored {
            let (id, title, source, mime, collected_at): (String, String, String, String, String) =
                row.query_row([rowid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
            let made = by_rowid.get(rowid).and_then(|c| search::snippet(terms, &c.content));
            let snippet = match made {
                Some(s) => s,
                None => self
                    .conn
                    .prepare_cached(
                        "SELECT snippet(evidence_fts, 1, char(57344), char(57345), '…', 24) FROM evidence_fts
                         WHERE evidence_fts MATCH ?1 AND evidence_fts.rowid = ?2",
                    )?
                    .query_row(params![fts, rowid], |r| r.get(0))
                    .optional()?
                    .unwrap_or_default(),
            };
            hits.push(SearchHit { id: parse_ref(RefKind::Evidence, &id)?, title, source, mime, collected_at, snippet });
        }
        Ok(hits)
    }

    pub(crate) fn require_kind(&self, r: &ObjectRef, kind: RefKind) -> Result<()> {
        if r.kind() == kind {
            Ok(())
        } else {
            Err(StoreError::Invalid(format!("expected a `{kind}:` reference, got `{r}`")))
        }
    }

    /// Entities shared across evidence items, most shared first. With `focus`
    /// (an evidence item), only the entities it mentions that other evidence
    /// items mention too.
    pub fn correlations(
        &self,
        ws: Uuid,
        inv: &ObjectRef,
        focus: Option<&ObjectRef>,
        limit: u32,
    ) -> Result<Vec<Correlation>> {
        let limit = check_limit("limit", limit, MAX_CORRELATIONS_LIMIT)?;
        self.require_kind(inv, RefKind::Investigation)?;
        self.require_in_workspace(ws, inv)?;
        let entities: Vec<(String, String, String, i64)> = match focus {
            None => {
                let mut stmt = self.conn.prepare_cached(
                    "SELECT id, kind, name, mention_count FROM entities
                     WHERE investigation_id = ?1 AND mention_count >= 2
                     ORDER BY mention_count DESC, id LIMIT ?2",
                )?;
                stmt.query_map(params![inv.id().to_string(), limit], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<Result<_, _>>()?
            }
            Some(ev) => {
                self.require_kind(ev, RefKind::Evidence)?;
                self.require_in_workspace(ws, ev)?;
                let mut stmt = self.conn.prepare_cached(
                    "SELECT n.id, n.kind, n.name, n.mention_count FROM relations r
                     JOIN entities n ON n.id = substr(r.dst, 8)
                     WHERE r.src = ?1 AND r.kind = 'mentions' AND n.mention_count >= 2
                       AND n.investigation_id = ?2
                     ORDER BY n.mention_count DESC, n.id LIMIT ?3",
                )?;
                stmt.query_map(params![ev.to_string(), inv.id().to_string(), limit], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<Result<_, _>>()?
            }
        };
        let mut samples = self
            .conn
            .prepare_cached("SELECT src FROM relations WHERE dst = ?1 AND kind = 'mentions' AND src <> ?2 LIMIT ?3")?;
        let focus_text = focus.map(ToString::to_string).unwrap_or_default();
        let mut out = Vec::new();
        for (id, kind, name, evidence_count) in entities {
            let entity = parse_ref(RefKind::Entity, &id)?;
            let sample_evidence = samples
                .query_map(params![entity.to_string(), focus_text, CORRELATION_SAMPLES], |r| r.get::<_, String>(0))?
                .map(|s| parse_any_ref(&s?))
                .collect::<Result<Vec<_>>>()?;
            out.push(Correlation {
                entity: EntityRefBrief { id: entity, kind, name },
                evidence_count,
                sample_evidence,
            });
        }
        Ok(out)
    }

    /// Summary of an evidence item (everything but its content).
    pub fn evidence_summary(&self, ws: Uuid, ev: &ObjectRef) -> Result<EvidenceSummary> {
        self.require_kind(ev, RefKind::Evidence)?;
        self.require_in_workspace(ws, ev)?;
        let row = self
            .conn
            .prepare_cached(
                "SELECT investigation_id, title, source, mime, sha256, byte_len, char_len, collected_at, created_at
                 FROM evidence WHERE id = ?1",
            )?
            .query_row([ev.id().to_string()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ))
            })?;
        let (inv, title, source, mime, sha256, byte_len, char_len, collected_at, created_at) = row;
        let mut stmt = self.conn.prepare_cached(
            "SELECT n.id, n.kind, n.name, r.kind FROM relations r
             JOIN entities n ON n.id = substr(r.dst, 8)
             WHERE r.src = ?1 AND r.kind = 'mentions' ORDER BY n.kind, n.name LIMIT ?2",
        )?;
        let entities = stmt
            .query_map(params![ev.to_string(), MAX_SUMMARY_ENTITIES], |r| {
                Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .map(|row| {
                let (id, kind, name, relation) = row?;
                Ok(MentionedEntity { id: parse_ref(RefKind::Entity, &id)?, kind, name, relation })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EvidenceSummary {
            id: *ev,
            investigation_id: parse_ref(RefKind::Investigation, &inv)?,
            title,
            source,
            mime,
            sha256,
            byte_len,
            char_len,
            collected_at,
            created_at,
            entities,
            fetch: self.fetch_of_evidence(ev)?,
            imports: self.imports_of(ws, ev)?,
            original: self.blob_of(ws, ev)?.is_some(),
        })
    }

    /// A bounded slice of an evidence item's text, in characters.
    pub fn excerpt(&self, ws: Uuid, ev: &ObjectRef, offset: u64, length: u32) -> Result<Excerpt> {
        let length = check_limit("length", length, MAX_EXCERPT_CHARS)?;
        self.require_kind(ev, RefKind::Evidence)?;
        self.require_in_workspace(ws, ev)?;
        let offset = i64::try_from(offset).map_err(|_| StoreError::Invalid("offset too large".into()))?;
        // SQLite's substr() counts characters of TEXT values, so only the slice is read out.
        let (text, total_chars): (String, i64) = self
            .conn
            .prepare_cached("SELECT substr(content, ?2 + 1, ?3), char_len FROM evidence WHERE id = ?1")?
            .query_row(params![ev.id().to_string(), offset, length], |r| Ok((r.get(0)?, r.get(1)?)))?;
        if offset > total_chars {
            return Err(StoreError::Invalid(format!("offset {offset} is past the end ({total_chars} characters)")));
        }
        let returned = text.chars().count() as i64;
        Ok(Excerpt { id: *ev, offset, length: returned, total_chars, truncated: offset + returned < total_chars, text })
    }

    /// Label and finer kind of any reference (`None` when it does not exist).
    fn label(&self, r: &ObjectRef) -> Result<Option<(String, Option<String>)>> {
        let id = r.id().to_string();
        let sql = match r.kind() {
            RefKind::Workspace => "SELECT name, class FROM workspaces WHERE id = ?1",
            RefKind::Investigation => "SELECT title, NULL FROM investigations WHERE id = ?1",
            RefKind::Evidence => "SELECT title, mime FROM evidence WHERE id = ?1",
            RefKind::Entity => "SELECT name, kind FROM entities WHERE id = ?1",
            RefKind::Relation => "SELECT kind, NULL FROM relations WHERE id = ?1",
            RefKind::Provenance => "SELECT activity, producer FROM provenance WHERE id = ?1",
            RefKind::Job => "SELECT kind, status FROM jobs WHERE id = ?1",
            RefKind::Grant => "SELECT 'grant by ' || decided_by, NULL FROM grants WHERE id = ?1",
            RefKind::Campaign => "SELECT 'campaign', status FROM campaigns WHERE id = ?1",
            RefKind::ResearchRequest => "SELECT question, status FROM research_requests WHERE id = ?1",
            RefKind::ToolRequest => "SELECT kind || ' ' || capability_id, status FROM tool_requests WHERE id = ?1",
        };
        Ok(self.conn.prepare_cached(sql)?.query_row([id], |row| Ok((row.get(0)?, row.get(1)?))).optional()?)
    }

    pub(crate) fn brief(&self, r: ObjectRef) -> Result<NodeBrief> {
        let (label, subkind) = self.label(&r)?.unwrap_or_else(|| (r.to_string(), None));
        Ok(NodeBrief { id: r, kind: r.kind().as_str().to_owned(), label, subkind })
    }

    pub(crate) fn degree(&self, r: &ObjectRef) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT (SELECT count(*) FROM relations WHERE src = ?1) + (SELECT count(*) FROM relations WHERE dst = ?1)",
            )?
            .query_row([r.to_string()], |row| row.get(0))?)
    }

    /// A graph node with its kind-specific details.
    pub fn node(&self, ws: Uuid, r: &ObjectRef) -> Result<Node> {
        self.require_in_workspace(ws, r)?;
        let brief = self.brief(*r)?;
        let id = r.id().to_string();
        let mut details = serde_json::Map::new();
        match r.kind() {
            RefKind::Evidence => {
                let (source, sha256, byte_len, collected_at): (String, String, i64, String) = self
                    .conn
                    .prepare_cached("SELECT source, sha256, byte_len, collected_at FROM evidence WHERE id = ?1")?
                    .query_row([&id], |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?)))?;
                details.insert("source".into(), source.into());
                details.insert("sha256".into(), sha256.into());
                details.insert("byte_len".into(), byte_len.into());
                details.insert("collected_at".into(), collected_at.into());
            }
            RefKind::Entity => {
                let (attributes, mentions): (String, i64) = self
                    .conn
                    .prepare_cached("SELECT attributes, mention_count FROM entities WHERE id = ?1")?
                    .query_row([&id], |x| Ok((x.get(0)?, x.get(1)?)))?;
                if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(&attributes) {
                    details.extend(map);
                }
                details.insert("evidence_count".into(), mentions.into());
            }
            RefKind::Investigation => {
                let summary: String = self
                    .conn
                    .prepare_cached("SELECT summary FROM investigations WHERE id = ?1")?
                    .query_row([&id], |x| x.get(0))?;
                details.insert("summary".into(), summary.into());
            }
            _ => {}
        }
        Ok(Node {
            id: *r,
            kind: brief.kind,
            label: brief.label,
            subkind: brief.subkind,
            details,
            degree: self.degree(r)?,
        })
    }

    /// Neighbours of a node: outgoing relations first, then incoming (bounded).
    pub fn neighbors(&self, ws: Uuid, r: &ObjectRef, limit: u32) -> Result<Neighbors> {
        let limit = check_limit("limit", limit, MAX_NEIGHBORS_LIMIT)?;
        self.require_in_workspace(ws, r)?;
        let text = r.to_string();
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, kind, dst, confidence, 'out' FROM relations WHERE src = ?1
             UNION ALL
             SELECT id, kind, src, confidence, 'in' FROM relations WHERE dst = ?1
             LIMIT ?2",
        )?;
        let rows: Vec<(String, String, String, f64, String)> = stmt
            .query_map(params![text, limit], |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?, x.get(4)?)))?
            .collect::<Result<_, _>>()?;
        let mut neighbors = Vec::with_capacity(rows.len());
        for (id, kind, other, confidence, direction) in rows {
            neighbors.push(Neighbor {
                relation: RelationBrief {
                    id: parse_ref(RefKind::Relation, &id)?,
                    kind,
                    direction: if direction == "out" { "out" } else { "in" },
                    confidence,
                },
                node: self.brief(parse_any_ref(&other)?)?,
            });
        }
        Ok(Neighbors { node: self.brief(*r)?, total: self.degree(r)?, neighbors })
    }

    /// Provenance of an object: its own records, then those of their inputs,
    /// breadth first, up to `depth` steps and [`MAX_PROVENANCE_RECORDS`].
    pub fn provenance_trace(&self, ws: Uuid, r: &ObjectRef, depth: u32) -> Result<ProvenanceTrace> {
        let depth = check_limit("depth", depth, MAX_PROVENANCE_DEPTH)?;
        self.require_in_workspace(ws, r)?;
        let mut records_of = self.conn.prepare_cached(
            "SELECT id, producer, activity, created_at FROM provenance WHERE object_ref = ?1 ORDER BY created_at, id",
        )?;
        let mut inputs_of = self
            .conn
            .prepare_cached("SELECT input_ref FROM provenance_inputs WHERE provenance_id = ?1 ORDER BY position")?;
        let mut seen: HashSet<ObjectRef> = HashSet::from([*r]);
        let mut queue: VecDeque<(ObjectRef, u32)> = VecDeque::from([(*r, 0)]);
        let mut records = Vec::new();
        let mut truncated = false;
        while let Some((object, level)) = queue.pop_front() {
            let rows: Vec<(String, String, String, String)> = records_of
                .query_map([object.to_string()], |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?)))?
                .collect::<Result<_, _>>()?;
            for (id, producer, activity, created_at) in rows {
                if records.len() == MAX_PROVENANCE_RECORDS {
                    truncated = true;
                    break;
                }
                let input_refs: Vec<ObjectRef> = inputs_of
                    .query_map([&id], |x| x.get::<_, String>(0))?
                    .map(|s| parse_any_ref(&s?))
                    .collect::<Result<_>>()?;
                let mut inputs = Vec::with_capacity(input_refs.len());
                for input in input_refs {
                    inputs.push(self.brief(input)?);
                    if seen.insert(input) {
                        if level < depth {
                            queue.push_back((input, level + 1));
                        } else {
                            truncated = true;
                        }
                    }
                }
                records.push(ProvenanceRecord {
                    fetch: self.fetch_of_provenance(&id)?,
                    id: parse_ref(RefKind::Provenance, &id)?,
                    object: self.brief(object)?,
                    producer,
                    activity,
                    created_at,
                    depth: level,
                    inputs,
                });
            }
        }
        Ok(ProvenanceTrace { root: *r, records, truncated })
    }

    /// Latest jobs of an investigation.
    pub fn jobs(&self, ws: Uuid, inv: &ObjectRef) -> Result<Vec<Job>> {
        self.require_kind(inv, RefKind::Investigation)?;
        self.require_in_workspace(ws, inv)?;
        self.jobs_of(&inv.id().to_string(), 100)
    }

    /// One job.
    pub fn job(&self, ws: Uuid, job: &ObjectRef) -> Result<Job> {
        self.require_kind(job, RefKind::Job)?;
        self.require_in_workspace(ws, job)?;
        let mut stmt = self.conn.prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?;
        stmt.query_row([job.id().to_string()], JobRow::read)?.into_job()
    }

    /// A grant (for the egress re-check and the UI).
    pub fn grant(&self, ws: Uuid, grant: &GrantRef) -> Result<Grant> {
        let grant = &grant.object_ref();
        self.require_in_workspace(ws, grant)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT investigation_id, scope, budget, expires_at, contract_fingerprints, decided_by, decided_at,
                    revoked_at, revoked_by FROM grants WHERE id = ?1",
        )?;
        let row: (String, String, String, String, String, String, String, Option<String>, Option<String>) = stmt
            .query_row([grant.id().to_string()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?))
            })?;
        let json = |s: &str| {
            serde_json::from_str(s).map_err(|e| StoreError::Internal(format!("stored grant JSON invalid: {e}")))
        };
        // The terms a human decided, typed: a stored shape that is not one
        // is an error, never read by key name with a default.
        fn terms<T: serde::de::DeserializeOwned>(s: &str, what: &str) -> Result<T> {
            serde_json::from_str(s).map_err(|e| StoreError::Internal(format!("stored grant {what} is not one: {e}")))
        }
        Ok(Grant {
            id: *grant,
            workspace_id: ObjectRef::new(RefKind::Workspace, ws),
            investigation_id: parse_ref(RefKind::Investigation, &row.0)?,
            scope: terms(&row.1, "scope")?,
            budget: terms(&row.2, "budget")?,
            expires_at: row.3,
            contract_fingerprints: json(&row.4)?,
            decided_by: row.5,
            decided_at: row.6,
            revoked_at: row.7,
            revoked_by: row.8,
        })
    }

    /// The latest audit entries of a workspace, newest first.
    pub fn audit(&self, ws: Uuid, limit: u32) -> Result<Vec<AuditEntry>> {
        let limit = check_limit("limit", limit, 1000)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, at, actor, action, object_ref, detail FROM audit_log
             WHERE workspace_id = ?1 ORDER BY seq DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![ws.to_string(), limit], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get::<_, String>(5)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, at, actor, action, object_ref, detail) = row?;
            out.push(AuditEntry {
                seq,
                at,
                actor,
                action,
                object_ref,
                detail: serde_json::from_str(&detail).unwrap_or(serde_json::Value::Null),
            });
        }
        Ok(out)
    }
}

/// A JSON column as a value; the schema's `json_valid` checks make a failure
/// a damaged file.
fn json_column(name: &str, text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| StoreError::Damaged(format!("{name} is not JSON: {e}")))
}

/// The columns [`JobRow::read`] reads, in its order.
const JOB_COLUMNS: &str = "id, kind, status, progress, created_at, updated_at, detail, stats";

/// A `jobs` row as stored.
struct JobRow {
    id: String,
    kind: String,
    status: String,
    progress: f64,
    created_at: String,
    updated_at: String,
    detail: String,
    stats: String,
}

impl JobRow {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            kind: r.get(1)?,
            status: r.get(2)?,
            progress: r.get(3)?,
            created_at: r.get(4)?,
            updated_at: r.get(5)?,
            detail: r.get(6)?,
            stats: r.get(7)?,
        })
    }

    fn into_job(self) -> Result<Job> {
        Ok(Job {
            id: parse_ref(RefKind::Job, &self.id)?,
            kind: self.kind,
            status: self.status,
            progress: self.progress,
            created_at: self.created_at,
            updated_at: self.updated_at,
            detail: self.detail,
            stats: json_column("jobs.stats", &self.stats)?,
        })
    }
}
