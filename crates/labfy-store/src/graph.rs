//! The ego graph (SPEC U1): an entity or a piece of evidence with the nodes
//! around it, bounded so that a browser can draw it, weighted by co-mention,
//! and honest about what it left out.
//!
//! Around an **entity** `E`:
//! - its typed relations (`works_for`, `owns_domain`, `linked_to`…), both
//!   directions;
//! - the entities mentioned in the same pieces as `E` (*co-mention*), weighed
//!   by how many pieces name both — counted over the [`CO_MENTION_BASIS`]
//!   pieces most recently linked to `E`, so a hub named in 50,000 pieces
//!   costs what one named in 2,000 does (the answer says how many were
//!   counted, out of how many);
//! - the pieces that mention `E`, most recently linked first.
//!
//! Around a **piece of evidence**: the entities it mentions (weighed by how
//! many times it names each), its `derived_from` links and any other
//! relation it has.
//!
//! The nodes are chosen in that order of groups with a share of `limit` each
//! (half, three tenths, one fifth; what one group does not use goes to the
//! next), so a hub's drawing shows some of everything. The edges between the
//! chosen nodes (a piece mentioning a co-mentioned entity, a person working
//! for an organisation drawn beside it) come with them. Whatever matched and
//! was not returned is counted per relation kind in `left_out`: a UI draws
//! those as one aggregated node with its count, never 50,000 of them.

use std::collections::{HashMap, HashSet};

use labfy_core::{ObjectRef, RefKind};
use serde::Serialize;
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::graph_edit::{ENTITY_KINDS, RELATION_KINDS};
use crate::reads::{Reads, check_limit, parse_any_ref, parse_ref};

/// Most nodes (besides the centre) one ego graph returns.
pub const MAX_EGO_NODES: u32 = 500;
/// Pieces of evidence over which an entity's co-mentions are counted: the
/// ones most recently linked to it.
pub const CO_MENTION_BASIS: u32 = 2_000;
/// Most typed relations of the centre read before choosing; beyond that,
/// the rest is only counted (in `left_out`).
pub const EGO_RELATION_SCAN: u32 = 10_000;
/// Most relations read per chosen node when looking for the edges between
/// chosen nodes.
const EDGES_PER_NODE: u32 = 1_000;
/// The synthetic relation kind of a co-mention edge.
pub const CO_MENTION: &str = "co_mention";
/// The node kind a filter names for evidence (entities are named by their
/// own kind: `person`, `domain`…).
pub const EVIDENCE_KIND: &str = "evidence";

/// What to draw around the centre.
#[derive(Debug, Clone, Default)]
pub struct EgoQuery {
    /// Most nodes besides the centre, 1–[`MAX_EGO_NODES`].
    pub limit: u32,
    /// Only nodes of these kinds (`evidence` or an entity kind); all when
    /// `None`.
    pub kinds: Option<Vec<String>>,
    /// Only edges of these relation kinds (or `co_mention`); all when `None`.
    pub relations: Option<Vec<String>>,
}

/// A node of an ego graph.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GraphNode {
    /// The node's reference.
    pub id: ObjectRef,
    /// `evidence` or `entity`.
    pub kind: String,
    /// The entity kind or the evidence's media type.
    pub subkind: Option<String>,
    /// Title or name.
    pub label: String,
    /// Relations touching it, all kinds (how much expanding it would add).
    pub degree: i64,
}

/// An edge of an ego graph.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GraphEdge {
    /// The stored relation; `None` for a co-mention (not a stored edge).
    pub id: Option<ObjectRef>,
    /// Relation kind, or `co_mention`.
    pub kind: String,
    /// Source node.
    pub source: ObjectRef,
    /// Target node.
    pub target: ObjectRef,
    /// The stored relation's confidence; `None` for a co-mention.
    pub confidence: Option<f64>,
    /// Edge weight (≥ 1): for an edge between the centre entity and another
    /// entity, the pieces naming both (within the basis); for a piece
    /// mentioning an entity, how many times it names it; otherwise 1.
    pub weight: u32,
}

/// Neighbours of the centre that matched and were not returned.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LeftOut {
    /// Relation kind (or `co_mention`) linking them to the centre.
    pub relation: String,
    /// How many.
    pub count: i64,
}

/// The pieces an entity's co-mentions were counted over.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CoMentionBasis {
    /// Pieces counted (the most recently linked ones).
    pub counted: u32,
    /// Pieces mentioning the entity in all.
    pub total: i64,
}

/// An ego graph.
#[derive(Debug, Clone, Serialize)]
pub struct EgoGraph {
    /// The node it is drawn around.
    pub center: GraphNode,
    /// The chosen neighbours, in order of choice (strongest first per group).
    pub nodes: Vec<GraphNode>,
    /// Edges between the centre and the chosen nodes, and between chosen
    /// nodes.
    pub edges: Vec<GraphEdge>,
    /// What matched and was not returned, per relation kind; empty when
    /// nothing was left out.
    pub left_out: Vec<LeftOut>,
    /// For an entity: the pieces its co-mentions were counted over.
    pub co_mention_basis: Option<CoMentionBasis>,
}

/// One candidate neighbour while choosing.
struct Candidate {
    node: ObjectRef,
    /// The stored relations linking it to the centre (id, kind, outgoing
    /// from the centre, confidence).
    relations: Vec<(ObjectRef, String, bool, f64)>,
    /// Co-mention count with the centre, or occurrences in the centre piece.
    weight: u32,
}

/// The three groups of neighbours, in the order they are offered room.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    Related,
    CoMentioned,
    Mentioning,
}

impl Group {
    /// Share of `limit` offered first, in tenths.
    fn tenths(self) -> u32 {
        match self {
            Group::Related => 5,
            Group::CoMentioned => 3,
            Group::Mentioning => 2,
        }
    }
}

fn check_filter(name: &str, values: &Option<Vec<String>>, allowed: &[&str]) -> Result<()> {
    let Some(values) = values else { return Ok(()) };
    if values.is_empty() {
        return Err(StoreError::Invalid(format!("{name} names nothing (leave it out to keep everything)")));
    }
    if values.len() > allowed.len() {
        return Err(StoreError::Invalid(format!("{name} names {} values, at most {}", values.len(), allowed.len())));
    }
    for v in values {
        if !allowed.contains(&v.as_str()) {
            return Err(StoreError::Invalid(format!("{name}: unknown value `{v}` (one of {})", allowed.join(", "))));
        }
    }
    Ok(())
}

fn allows(filter: &Option<Vec<String>>, value: &str) -> bool {
    filter.as_ref().is_none_or(|f| f.iter().any(|v| v == value))
}

impl Reads<'_> {
    /// The ego graph of an entity or a piece of evidence (module docs).
    pub fn ego_graph(&self, ws: Uuid, center: &ObjectRef, q: &EgoQuery) -> Result<EgoGraph> {
        let limit = check_limit("limit", q.limit, MAX_EGO_NODES)?;
        let node_kinds: Vec<&str> = std::iter::once(EVIDENCE_KIND).chain(ENTITY_KINDS.iter().copied()).collect();
        check_filter("kinds", &q.kinds, &node_kinds)?;
        let relation_kinds: Vec<&str> = RELATION_KINDS.iter().copied().chain(std::iter::once(CO_MENTION)).collect();
        check_filter("relations", &q.relations, &relation_kinds)?;
        if !matches!(center.kind(), RefKind::Entity | RefKind::Evidence) {
            return Err(StoreError::Invalid(format!(
                "only an entity or a piece of evidence has a graph, not a {}",
                center.kind()
            )));
        }
        self.require_in_workspace(ws, center)?;
        let text = center.to_string();
        let entity_center = center.kind() == RefKind::Entity;

        // Entity kinds met, read once each (only with a `kinds` filter).
        let mut kinds = HashMap::new();

        // 1. Typed relations of the centre (for an entity: all but the
        //    pieces mentioning it, which are group 3).
        let mut related: Vec<Candidate> = Vec::new();
        let mut left: HashMap<String, i64> = HashMap::new();
        {
            let mut stmt = self.conn.prepare_cached(
                "SELECT id, kind, dst, confidence, 1 FROM relations WHERE src = ?1 AND (?2 = 0 OR kind <> 'mentions')
                 UNION ALL
                 SELECT id, kind, src, confidence, 0 FROM relations WHERE dst = ?1 AND (?2 = 0 OR kind <> 'mentions')
                 LIMIT ?3",
            )?;
            let rows: Vec<(String, String, String, f64, bool)> = stmt
                .query_map(rusqlite::params![text, entity_center, EGO_RELATION_SCAN], |x| {
                    Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?, x.get(4)?))
                })?
                .collect::<std::result::Result<_, _>>()?;
            if rows.len() as u32 == EGO_RELATION_SCAN {
                // Beyond the scan: counted per kind, never read.
                let mut count = self.conn.prepare_cached(
                    "SELECT kind, count(*) FROM (
                        SELECT kind FROM relations WHERE src = ?1 AND (?2 = 0 OR kind <> 'mentions')
                        UNION ALL SELECT kind FROM relations WHERE dst = ?1 AND (?2 = 0 OR kind <> 'mentions'))
                     GROUP BY kind",
                )?;
                let totals: Vec<(String, i64)> = count
                    .query_map(rusqlite::params![text, entity_center], |x| Ok((x.get(0)?, x.get(1)?)))?
                    .collect::<std::result::Result<_, _>>()?;
                let mut read: HashMap<&str, i64> = HashMap::new();
                for r in &rows {
                    *read.entry(r.1.as_str()).or_default() += 1;
                }
                for (kind, total) in totals {
                    let unread = total - read.get(kind.as_str()).copied().unwrap_or(0);
                    if unread > 0 && allows(&q.relations, &kind) {
                        *left.entry(kind).or_default() += unread;
                    }
                }
            }
            let mut by_node: HashMap<ObjectRef, usize> = HashMap::new();
            for (id, kind, other, confidence, out) in rows {
                let other = parse_any_ref(&other)?;
                if !allows(&q.relations, &kind) || !self.kind_allowed(q, other, &mut kinds)? {
                    continue;
                }
                let rel = (parse_ref(RefKind::Relation, &id)?, kind, out, confidence);
                match by_node.get(&other) {
                    Some(&i) => related[i].relations.push(rel),
                    None => {
                        by_node.insert(other, related.len());
                        related.push(Candidate { node: other, relations: vec![rel], weight: 1 });
                    }
                }
            }
        }

        // 2 and 3 (entity centre): the pieces mentioning it, and the
        //    entities those pieces also mention.
        let mut co_mentioned: Vec<Candidate> = Vec::new();
        let mut mentioning: Vec<Candidate> = Vec::new();
        let mut basis = None;
        if entity_center {
            let total: i64 = self
                .conn
                .prepare_cached("SELECT count(*) FROM relations WHERE dst = ?1 AND kind = 'mentions'")?
                .query_row([&text], |x| x.get(0))?;
            let pieces: Vec<(String, String, f64)> = self
                .conn
                .prepare_cached(
                    "SELECT id, src, confidence FROM relations WHERE dst = ?1 AND kind = 'mentions'
                     ORDER BY rowid DESC LIMIT ?2",
                )?
                .query_map(rusqlite::params![text, CO_MENTION_BASIS], |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?)))?
                .collect::<std::result::Result<_, _>>()?;
            basis = Some(CoMentionBasis { counted: pieces.len() as u32, total });
            let mut counts: HashMap<String, u32> = HashMap::new();
            {
                let mut also = self
                    .conn
                    .prepare_cached("SELECT dst FROM relations WHERE src = ?1 AND kind = 'mentions' AND dst <> ?2")?;
                for (_, piece, _) in &pieces {
                    for dst in also.query_map([piece, &text], |x| x.get::<_, String>(0))? {
                        *counts.entry(dst?).or_default() += 1;
                    }
                }
            }
            // The co-mention weight also weighs typed edges to the centre.
            for c in &mut related {
                if let Some(&w) = counts.get(&c.node.to_string()) {
                    c.weight = w.max(1);
                }
            }
            if allows(&q.relations, CO_MENTION) {
                let typed: HashSet<ObjectRef> = related.iter().map(|c| c.node).collect();
                let mut ranked: Vec<(String, u32)> = counts.into_iter().collect();
                // Strongest first; ties by reference, so the answer is stable.
                ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                for (other, weight) in ranked {
                    let other = parse_any_ref(&other)?;
                    if typed.contains(&other) || !self.kind_allowed(q, other, &mut kinds)? {
                        continue;
                    }
                    co_mentioned.push(Candidate { node: other, relations: Vec::new(), weight });
                }
            }
            if allows(&q.relations, "mentions") && allows(&q.kinds, EVIDENCE_KIND) {
                // Only the most recent ones can be chosen; all are counted.
                for (id, piece, confidence) in pieces.iter().take(MAX_EGO_NODES as usize) {
                    mentioning.push(Candidate {
                        node: parse_any_ref(piece)?,
                        relations: vec![(parse_ref(RefKind::Relation, id)?, "mentions".into(), false, *confidence)],
                        weight: 1,
                    });
                }
                let unread = total - mentioning.len() as i64;
                if unread > 0 {
                    *left.entry("mentions".into()).or_default() += unread;
                }
            }
        } else {
            // A piece: how many times it names each entity it mentions.
            let mut occurrences = self
                .conn
                .prepare_cached("SELECT entity_id, count(*) FROM mentions WHERE evidence_id = ?1 GROUP BY entity_id")?;
            let counts: HashMap<String, u32> = occurrences
                .query_map([center.id().to_string()], |x| Ok((x.get::<_, String>(0)?, x.get::<_, u32>(1)?)))?
                .collect::<std::result::Result<_, _>>()?;
            for c in &mut related {
                if c.node.kind() == RefKind::Entity
                    && let Some(&w) = counts.get(&c.node.id().to_string())
                {
                    c.weight = w.max(1);
                }
            }
        }
        related.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| best_confidence(b).total_cmp(&best_confidence(a)))
                .then_with(|| a.node.cmp(&b.node))
        });

        // Choose: each group its share, what one leaves goes to the next.
        let groups = [(Group::Related, related), (Group::CoMentioned, co_mentioned), (Group::Mentioning, mentioning)];
        let mut quota: Vec<u32> = groups.iter().map(|(g, _)| limit * g.tenths() / 10).collect();
        quota[0] += limit - quota.iter().sum::<u32>();
        let mut room = limit;
        let mut take = [0usize; 3];
        for (i, (_, list)) in groups.iter().enumerate() {
            take[i] = list.len().min(quota[i] as usize);
            room -= take[i] as u32;
        }
        for (i, (_, list)) in groups.iter().enumerate() {
            let more = (list.len() - take[i]).min(room as usize);
            take[i] += more;
            room -= more as u32;
        }

        let mut edges = Vec::new();
        let mut chosen: Vec<ObjectRef> = Vec::new();
        for (i, (group, list)) in groups.into_iter().enumerate() {
            for (n, c) in list.into_iter().enumerate() {
                if n >= take[i] {
                    // Not returned: counted under the kind of its (first)
                    // link to the centre.
                    let kind = c.relations.first().map_or(CO_MENTION, |r| r.1.as_str());
                    *left.entry(kind.to_owned()).or_default() += 1;
                    continue;
                }
                debug_assert!(group != Group::CoMentioned || c.relations.is_empty());
                if c.relations.is_empty() {
                    edges.push(GraphEdge {
                        id: None,
                        kind: CO_MENTION.into(),
                        source: *center,
                        target: c.node,
                        confidence: None,
                        weight: c.weight,
                    });
                }
                for (id, kind, out, confidence) in c.relations {
                    let (source, target) = if out { (*center, c.node) } else { (c.node, *center) };
                    edges.push(GraphEdge {
                        id: Some(id),
                        kind,
                        source,
                        target,
                        confidence: Some(confidence),
                        weight: c.weight,
                    });
                }
                chosen.push(c.node);
            }
        }

        // The edges between chosen nodes: each one's outgoing relations
        // that end at another chosen node (the centre's are all in already).
        let set: HashSet<ObjectRef> = chosen.iter().copied().collect();
        let mut out_of = self
            .conn
            .prepare_cached("SELECT id, kind, dst, confidence FROM relations WHERE src = ?1 AND dst <> ?2 LIMIT ?3")?;
        for node in &chosen {
            let rows: Vec<(String, String, String, f64)> = out_of
                .query_map(rusqlite::params![node.to_string(), text, EDGES_PER_NODE], |x| {
                    Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?))
                })?
                .collect::<std::result::Result<_, _>>()?;
            for (id, kind, dst, confidence) in rows {
                let dst = parse_any_ref(&dst)?;
                if set.contains(&dst) && allows(&q.relations, &kind) {
                    edges.push(GraphEdge {
                        id: Some(parse_ref(RefKind::Relation, &id)?),
                        kind,
                        source: *node,
                        target: dst,
                        confidence: Some(confidence),
                        weight: 1,
                    });
                }
            }
        }

        let mut nodes = Vec::with_capacity(chosen.len());
        for node in chosen {
            nodes.push(self.graph_node(node)?);
        }
        let mut left_out: Vec<LeftOut> =
            left.into_iter().filter(|(_, n)| *n > 0).map(|(relation, count)| LeftOut { relation, count }).collect();
        left_out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.relation.cmp(&b.relation)));
        Ok(EgoGraph { center: self.graph_node(*center)?, nodes, edges, left_out, co_mention_basis: basis })
    }

    /// A node with its label, kind and degree.
    fn graph_node(&self, r: ObjectRef) -> Result<GraphNode> {
        let brief = self.brief(r)?;
        Ok(GraphNode { id: r, kind: brief.kind, subkind: brief.subkind, label: brief.label, degree: self.degree(&r)? })
    }

    /// The kind a `kinds` filter names a node by: `evidence`, or the
    /// entity's own kind.
    fn filter_kind(&self, r: ObjectRef, cache: &mut HashMap<ObjectRef, String>) -> Result<String> {
        if r.kind() != RefKind::Entity {
            return Ok(r.kind().as_str().to_owned());
        }
        if let Some(k) = cache.get(&r) {
            return Ok(k.clone());
        }
        let kind: String = self
            .conn
            .prepare_cached("SELECT kind FROM entities WHERE id = ?1")?
            .query_row([r.id().to_string()], |x| x.get(0))?;
        cache.insert(r, kind.clone());
        Ok(kind)
    }

    /// Whether a node passes the `kinds` filter (no read without one).
    fn kind_allowed(&self, q: &EgoQuery, r: ObjectRef, cache: &mut HashMap<ObjectRef, String>) -> Result<bool> {
        match &q.kinds {
            None => Ok(true),
            Some(_) => Ok(allows(&q.kinds, &self.filter_kind(r, cache)?)),
        }
    }
}

fn best_confidence(c: &Candidate) -> f64 {
    c.relations.iter().map(|r| r.3).fold(0.0, f64::max)
}
