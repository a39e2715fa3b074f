//! The analyst's hand on the graph (SPEC C4): create, rename, merge and
//! delete entities; create and delete relations. Each is one transaction
//! with its audit row; what is created carries a provenance record whose
//! producer is the analyst. A value of a kind the extractors know (a domain,
//! an IBAN…) is normalised as they would, so a hand-made entity and an
//! extracted one meet; a name an entity loses (renamed, merged away) stays
//! among its `aliases`, where extraction finds it again.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::now_rfc3339;
use crate::primitives::{audit, check_text};
use crate::reads::Reads;

/// Entity kinds (the schema's list, SPECIMEN's and the extractors').
pub const ENTITY_KINDS: &[&str] = &[
    "person",
    "organisation",
    "location",
    "domain",
    "email",
    "phone",
    "url",
    "ipv4",
    "ipv6",
    "iban",
    "btc_address",
    "eth_address",
    "onion",
    "file_hash",
];

/// Relation kinds an analyst may draw (the schema's list).
pub const RELATION_KINDS: &[&str] = &[
    "mentions",
    "works_for",
    "owns_domain",
    "uses_email",
    "uses_phone",
    "located_in",
    "linked_to",
    "derived_from",
    "sent_by",
    "sent_to",
    "copied_to",
    "sent_from",
];

/// Longest entity name, in characters.
pub const MAX_ENTITY_NAME_CHARS: usize = 200;

/// Most aliases an entity shows in its attributes (older ones drop off
/// there; `entity_aliases` keeps them all for lookups).
pub const MAX_ALIASES: usize = 64;

/// A new entity drawn by the analyst.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEntity {
    /// One of [`ENTITY_KINDS`].
    pub kind: String,
    /// Its name (normalised for the extractors' kinds).
    pub name: String,
}

/// A name the analyst read in a piece and marks (SPEC A3): the entity it
/// names — made if the investigation has none of that kind and name — and
/// the mention, at its place in the piece's text.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMarked {
    /// One of [`ENTITY_KINDS`].
    pub kind: String,
    /// The entity's name (normalised for the extractors' kinds); the text
    /// selected, or what the analyst wrote for it.
    pub name: String,
    /// First character of the mention in the piece's text (Unicode scalar
    /// values, as the excerpts count).
    pub start: u64,
    /// Its length in characters (1 to [`MAX_MARKED_CHARS`]).
    pub length: u64,
}

/// Longest mention the analyst may mark, in characters.
pub const MAX_MARKED_CHARS: u64 = 1000;

/// What marking a mention did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// The entity named.
    pub entity: ObjectRef,
    /// Whether it was made now (else the investigation had it already).
    pub created: bool,
    /// The text at the marked place, as stored.
    pub text: String,
}

/// The extractor a mention marked by the analyst is stored with: extraction
/// never replaces it.
pub const ANALYST_EXTRACTOR: &str = "analyst";

/// A new relation drawn by the analyst.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRelation {
    /// One of [`RELATION_KINDS`].
    pub kind: String,
    /// Its source (`evidence:` or `entity:` of the same investigation).
    pub src: ObjectRef,
    /// Its target (likewise, not the source).
    pub dst: ObjectRef,
    /// 0.0–1.0; 1.0 when absent.
    #[serde(default)]
    pub confidence: Option<f64>,
}

/// The name an entity of `kind` gets: the extractors' normal form for their
/// kinds (`Exemple.FR.` → `exemple.fr`), refused when it is not one whole
/// value of that kind; trimmed text otherwise.
fn normal_name(kind: &str, name: &str) -> Result<String> {
    check_text("name", name, MAX_ENTITY_NAME_CHARS)?;
    if !ENTITY_KINDS.contains(&kind) {
        return Err(StoreError::Invalid(format!("unknown entity kind `{kind}` (one of {})", ENTITY_KINDS.join(", "))));
    }
    let name = name.trim();
    // A name (a person, an organisation) is kept as written, spaces
    // collapsed: the recognisers find names, they do not define them.
    let Some(k) = labfy_extract::Kind::parse(kind).filter(|k| k.is_selector()) else {
        return Ok(name.split_whitespace().collect::<Vec<_>>().join(" "));
    };
    // A trailing dot (a domain's root, or the sentence it was copied from)
    // is not part of the value.
    let name = name.trim_end_matches('.');
    let found = labfy_extract::extract(name);
    let whole = found.mentions.iter().find(|m| m.kind == k && m.start == 0 && m.len == name.chars().count());
    match whole {
        Some(m) => Ok(m.value.clone()),
        None => {
            Err(StoreError::Invalid(format!("`{name}` is not a valid {kind} (the extractors' rules: labfy-extract)")))
        }
    }
}

pub(crate) fn insert_provenance(
    tx: &Connection,
    inv: &str,
    object: &str,
    actor: &str,
    activity: &str,
    inputs: &[String],
) -> Result<String> {
    let prov = Uuid::now_v7().to_string();
    tx.prepare_cached(
        "INSERT INTO provenance (id, investigation_id, object_ref, producer, activity, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![prov, inv, object, actor, activity, now_rfc3339()])?;
    for (pos, input) in inputs.iter().enumerate() {
        tx.prepare_cached("INSERT INTO provenance_inputs (provenance_id, position, input_ref) VALUES (?1, ?2, ?3)")?
            .execute(params![prov, pos as i64, input])?;
    }
    Ok(prov)
}

/// The investigation of an entity, relation or evidence item of `ws`.
fn investigation_of(tx: &Connection, ws: Uuid, r: &ObjectRef) -> Result<String> {
    Reads { conn: tx }.require_in_workspace(ws, r)?;
    let table = match r.kind() {
        RefKind::Entity => "entities",
        RefKind::Relation => "relations",
        RefKind::Evidence => "evidence",
        _ => {
            return Err(StoreError::Invalid(format!(
                "expected an `entity:`, `relation:` or `evidence:` reference, got `{r}`"
            )));
        }
    };
    Ok(tx.query_row(&format!("SELECT investigation_id FROM {table} WHERE id = ?1"), [r.id().to_string()], |x| {
        x.get(0)
    })?)
}

/// The one investigation of `a` and `b`; refused when they are in two.
fn investigation_of_both(tx: &Connection, ws: Uuid, a: &ObjectRef, b: &ObjectRef) -> Result<String> {
    let inv = investigation_of(tx, ws, a)?;
    if investigation_of(tx, ws, b)? != inv {
        return Err(StoreError::Invalid(format!("{a} and {b} belong to different investigations")));
    }
    Ok(inv)
}

fn require(r: &ObjectRef, kind: RefKind) -> Result<()> {
    if r.kind() == kind {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!("expected a `{kind}:` reference, got `{r}`")))
    }
}

fn recount_entity(tx: &Connection, id: &str) -> Result<()> {
    tx.prepare_cached(
        "UPDATE entities SET mention_count =
             (SELECT count(*) FROM relations r WHERE r.dst = 'entity:' || entities.id AND r.kind = 'mentions')
         WHERE id = ?1",
    )?
    .execute([id])?;
    Ok(())
}

fn bump(tx: &Connection, inv: &str, relations: i64, provenance: i64) -> Result<()> {
    tx.prepare_cached(
        "UPDATE investigations SET relation_count = relation_count + ?2, provenance_count = provenance_count + ?3 WHERE id = ?1",
    )?
    .execute(params![inv, relations, provenance])?;
    Ok(())
}

/// Creates an entity; `Conflict` naming the existing one when the
/// investigation already has it (by name or alias).
pub(crate) fn create_entity(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    e: &NewEntity,
    actor: &str,
) -> Result<ObjectRef> {
    require(inv, RefKind::Investigation)?;
    let name = normal_name(&e.kind, &e.name)?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, inv)?;
    let inv_id = inv.id().to_string();
    if let Some(existing) = find_entity(&tx, &inv_id, &e.kind, &name)? {
        return Err(StoreError::Conflict(format!("entity:{existing} is already the {} `{name}`", e.kind)));
    }
    let id = Uuid::now_v7();
    let now = now_rfc3339();
    tx.execute(
        "INSERT INTO entities (id, investigation_id, kind, name, attributes, created_at) VALUES (?1, ?2, ?3, ?4, '{}', ?5)",
        params![id.to_string(), inv_id, e.kind, name, now],
    )?;
    let r = ObjectRef::new(RefKind::Entity, id);
    insert_provenance(&tx, &inv_id, &r.to_string(), actor, "analyst.create", &[])?;
    bump(&tx, &inv_id, 0, 1)?;
    audit(&tx, actor, "entity.create", Some(ws), Some(&r), &serde_json::json!({"kind": e.kind, "name": name}))?;
    tx.commit()?;
    Ok(r)
}

/// Marks a mention in evidence `ev` (SPEC A3): finds or makes the entity,
/// stores the mention at its offsets (extractor `analyst`, kept by later
/// extractions) and the piece's `mentions` relation to it, with provenance
/// whose input is the piece. The place must lie in the piece's text and
/// hold more than spaces.
pub(crate) fn mark_mention(
    conn: &mut Connection,
    ws: Uuid,
    ev: &ObjectRef,
    m: &NewMarked,
    actor: &str,
) -> Result<Marked> {
    require(ev, RefKind::Evidence)?;
    let name = normal_name(&m.kind, &m.name)?;
    if !(1..=MAX_MARKED_CHARS).contains(&m.length) {
        return Err(StoreError::Invalid(format!("a mention is 1 to {MAX_MARKED_CHARS} characters long")));
    }
    let (start, length) = (
        i64::try_from(m.start).map_err(|_| StoreError::Invalid("start too large".into()))?,
        i64::try_from(m.length).unwrap_or(i64::MAX),
    );
    let tx = conn.transaction()?;
    let inv_id = investigation_of(&tx, ws, ev)?;
    let ev_id = ev.id().to_string();
    let (marked, total): (String, i64) = tx.query_row(
        "SELECT substr(content, ?2 + 1, ?3), char_len FROM evidence WHERE id = ?1",
        params![ev_id, start, length],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if start.saturating_add(length) > total {
        return Err(StoreError::Invalid(format!(
            "characters {start} to {} are past the end of {ev}'s text ({total} characters)",
            start.saturating_add(length)
        )));
    }
    if marked.trim().is_empty() {
        return Err(StoreError::Invalid("the marked place holds only spaces".into()));
    }
    let now = now_rfc3339();
    let ev_ref = ev.to_string();
    let (id, created) = match find_entity(&tx, &inv_id, &m.kind, &name)? {
        Some(existing) => (existing, false),
        None => {
            let id = Uuid::now_v7().to_string();
            tx.execute(
                "INSERT INTO entities (id, investigation_id, kind, name, attributes, created_at) VALUES (?1, ?2, ?3, ?4, '{}', ?5)",
                params![id, inv_id, m.kind, name, now],
            )?;
            insert_provenance(
                &tx,
                &inv_id,
                &format!("entity:{id}"),
                actor,
                "analyst.mark",
                std::slice::from_ref(&ev_ref),
            )?;
            bump(&tx, &inv_id, 0, 1)?;
            (id, true)
        }
    };
    // A mention the extractors found at that place becomes the analyst's
    // (kept from then on); one the analyst marked already is a conflict.
    let n = tx.execute(
        "INSERT INTO mentions (evidence_id, start, length, entity_id, extractor, version) VALUES (?1, ?2, ?3, ?4, ?5, 1)
         ON CONFLICT (evidence_id, start, entity_id) DO UPDATE
             SET length = excluded.length, extractor = excluded.extractor, version = 1
             WHERE extractor <> excluded.extractor",
        params![ev_id, start, length, id, ANALYST_EXTRACTOR],
    )?;
    if n == 0 {
        return Err(StoreError::Conflict(format!("entity:{id} is already mentioned at character {start} of {ev}")));
    }
    let dst = format!("entity:{id}");
    let linked: Option<String> = tx
        .query_row(
            "SELECT id FROM relations WHERE src = ?1 AND dst = ?2 AND kind = 'mentions'",
            params![ev_ref, dst],
            |r| r.get(0),
        )
        .optional()?;
    if linked.is_none() {
        let rel = Uuid::now_v7().to_string();
        tx.execute(
            "INSERT INTO relations (id, investigation_id, kind, src, dst, confidence, created_at, producer)
             VALUES (?1, ?2, 'mentions', ?3, ?4, 1.0, ?5, 'analyst')",
            params![rel, inv_id, ev_ref, dst, now],
        )?;
        insert_provenance(
            &tx,
            &inv_id,
            &format!("relation:{rel}"),
            actor,
            "analyst.mark",
            std::slice::from_ref(&ev_ref),
        )?;
        bump(&tx, &inv_id, 1, 1)?;
        recount_entity(&tx, &id)?;
    }
    let entity: ObjectRef = dst.parse().map_err(|e: labfy_core::RefError| StoreError::Internal(e.to_string()))?;
    audit(
        &tx,
        actor,
        "mention.mark",
        Some(ws),
        Some(&entity),
        &serde_json::json!({"evidence": ev_ref, "start": start, "length": length, "kind": m.kind, "name": name, "created": created}),
    )?;
    tx.commit()?;
    Ok(Marked { entity, created, text: marked })
}

/// The entity of this kind whose name or one of whose aliases is `name`.
pub(crate) fn find_entity(tx: &Connection, inv: &str, kind: &str, name: &str) -> Result<Option<String>> {
    let by_name: Option<String> = tx
        .prepare_cached("SELECT id FROM entities WHERE investigation_id = ?1 AND kind = ?2 AND name = ?3 LIMIT 1")?
        .query_row(params![inv, kind, name], |r| r.get(0))
        .optional()?;
    if by_name.is_some() {
        return Ok(by_name);
    }
    Ok(tx
        .prepare_cached("SELECT entity_id FROM entity_aliases WHERE investigation_id = ?1 AND kind = ?2 AND name = ?3")?
        .query_row(params![inv, kind, name], |r| r.get(0))
        .optional()?)
}

/// Adds `names` to an entity's aliases (bounded, no duplicates, not its own name).
fn add_aliases(tx: &Connection, id: &str, names: &[String]) -> Result<()> {
    let (name, attributes): (String, String) =
        tx.query_row("SELECT name, attributes FROM entities WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let mut attrs: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&attributes).unwrap_or_default();
    let mut aliases: Vec<String> = attrs
        .get("aliases")
        .and_then(|a| a.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    for n in names {
        if *n != name && !aliases.contains(n) {
            aliases.push(n.clone());
        }
    }
    let (inv, kind): (String, String) =
        tx.query_row("SELECT investigation_id, kind FROM entities WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    for n in names.iter().filter(|n| **n != name) {
        // The latest entity to lose a name is the one it finds.
        tx.prepare_cached(
            "INSERT OR REPLACE INTO entity_aliases (investigation_id, kind, name, entity_id) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![inv, kind, n, id])?;
    }
    let skip = aliases.len().saturating_sub(MAX_ALIASES);
    attrs.insert("aliases".into(), serde_json::json!(aliases[skip..]));
    tx.execute(
        "UPDATE entities SET attributes = ?2 WHERE id = ?1",
        params![id, serde_json::Value::Object(attrs).to_string()],
    )?;
    Ok(())
}

/// Renames an entity; its former name becomes an alias.
pub(crate) fn rename_entity(conn: &mut Connection, ws: Uuid, ent: &ObjectRef, name: &str, actor: &str) -> Result<()> {
    require(ent, RefKind::Entity)?;
    let tx = conn.transaction()?;
    let inv = investigation_of(&tx, ws, ent)?;
    let id = ent.id().to_string();
    let (kind, old): (String, String) =
        tx.query_row("SELECT kind, name FROM entities WHERE id = ?1", [&id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let name = normal_name(&kind, name)?;
    if name == old {
        return Ok(());
    }
    if let Some(other) = find_entity(&tx, &inv, &kind, &name)?.filter(|o| *o != id) {
        return Err(StoreError::Conflict(format!("entity:{other} is already the {kind} `{name}`; merge them instead")));
    }
    tx.execute("UPDATE entities SET name = ?2 WHERE id = ?1", params![id, name])?;
    add_aliases(&tx, &id, std::slice::from_ref(&old))?;
    audit(&tx, actor, "entity.rename", Some(ws), Some(ent), &serde_json::json!({"from": old, "to": name}))?;
    tx.commit()?;
    Ok(())
}

/// Merges `gone` into `keep` (same investigation, same kind): its relations
/// and mentions move over (a relation that would repeat one of `keep`'s or
/// join `keep` to itself is dropped), its name and aliases become `keep`'s
/// aliases, and it is deleted. `keep` gets a provenance record of the merge.
/// Most entities one entity is recorded apart from.
pub const MAX_DISTINCT: usize = 256;

/// Records that two entities of one investigation are two, not one (SPEC
/// A3): the analyst's « not the same » on a proposed merge. Kept in both
/// entities' attributes (`distinct_from`), so the pair is never proposed
/// again; audited.
pub(crate) fn set_apart(conn: &mut Connection, ws: Uuid, a: &ObjectRef, b: &ObjectRef, actor: &str) -> Result<()> {
    require(a, RefKind::Entity)?;
    require(b, RefKind::Entity)?;
    if a == b {
        return Err(StoreError::Invalid("an entity cannot be set apart from itself".into()));
    }
    let tx = conn.transaction()?;
    investigation_of_both(&tx, ws, a, b)?;
    for (me, other) in [(a, b), (b, a)] {
        let attributes: String =
            tx.query_row("SELECT attributes FROM entities WHERE id = ?1", [me.id().to_string()], |r| r.get(0))?;
        let mut attrs: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&attributes).unwrap_or_default();
        let mut apart: Vec<String> = attrs
            .get("distinct_from")
            .and_then(|v| v.as_array())
            .map(|v| v.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let other = other.to_string();
        if apart.contains(&other) {
            continue;
        }
        if apart.len() >= MAX_DISTINCT {
            return Err(StoreError::Invalid(format!("{me} is set apart from {MAX_DISTINCT} entities already")));
        }
        apart.push(other);
        attrs.insert("distinct_from".into(), serde_json::json!(apart));
        tx.execute(
            "UPDATE entities SET attributes = ?2 WHERE id = ?1",
            params![me.id().to_string(), serde_json::Value::Object(attrs).to_string()],
        )?;
    }
    audit(&tx, actor, "entity.set_apart", Some(ws), Some(a), &serde_json::json!({"from": b.to_string()}))?;
    tx.commit()?;
    Ok(())
}

pub(crate) fn merge_entities(
    conn: &mut Connection,
    ws: Uuid,
    gone: &ObjectRef,
    keep: &ObjectRef,
    actor: &str,
) -> Result<()> {
    require(gone, RefKind::Entity)?;
    require(keep, RefKind::Entity)?;
    if gone == keep {
        return Err(StoreError::Invalid("an entity cannot be merged into itself".into()));
    }
    let tx = conn.transaction()?;
    let inv = investigation_of_both(&tx, ws, gone, keep)?;
    let (g, k) = (gone.id().to_string(), keep.id().to_string());
    let kind_of = |id: &str| -> Result<(String, String, String)> {
        Ok(tx.query_row("SELECT kind, name, attributes FROM entities WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?)
    };
    let (gk, gname, gattrs) = kind_of(&g)?;
    let (kk, _, _) = kind_of(&k)?;
    if gk != kk {
        return Err(StoreError::Invalid(format!(
            "{gone} is a {gk} and {keep} a {kk}: only entities of one kind merge"
        )));
    }
    let (gr, kr) = (gone.to_string(), keep.to_string());
    // Relations: repoint, unless that repeats one of keep's or loops.
    let before: i64 =
        tx.query_row("SELECT count(*) FROM relations WHERE investigation_id = ?1", [&inv], |r| r.get(0))?;
    let dropped: Vec<String> = tx
        .prepare(
            "SELECT id FROM relations WHERE
                (src = ?1 AND (dst = ?2 OR EXISTS (SELECT 1 FROM relations o
                                                    WHERE o.src = ?2 AND o.dst = relations.dst AND o.kind = relations.kind)))
             OR (dst = ?1 AND (src = ?2 OR EXISTS (SELECT 1 FROM relations o
                                                    WHERE o.dst = ?2 AND o.src = relations.src AND o.kind = relations.kind)))",
        )?
        .query_map(params![gr, kr], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let mut prov = 0i64;
    for id in &dropped {
        tx.execute("DELETE FROM relations WHERE id = ?1", [id])?;
        prov += tx.execute("DELETE FROM provenance WHERE object_ref = ?1", [format!("relation:{id}")])? as i64;
    }
    tx.execute("UPDATE relations SET src = ?2 WHERE src = ?1", params![gr, kr])?;
    tx.execute("UPDATE relations SET dst = ?2 WHERE dst = ?1", params![gr, kr])?;
    let after: i64 =
        tx.query_row("SELECT count(*) FROM relations WHERE investigation_id = ?1", [&inv], |r| r.get(0))?;
    tx.execute("UPDATE OR IGNORE mentions SET entity_id = ?2 WHERE entity_id = ?1", params![g, k])?;
    let mut names = vec![gname.clone()];
    if let Ok(serde_json::Value::Object(a)) = serde_json::from_str::<serde_json::Value>(&gattrs) {
        if let Some(serde_json::Value::Array(xs)) = a.get("aliases") {
            names.extend(xs.iter().filter_map(|v| v.as_str().map(str::to_owned)));
        }
    }
    tx.execute("UPDATE OR REPLACE entity_aliases SET entity_id = ?2 WHERE entity_id = ?1", params![g, k])?;
    add_aliases(&tx, &k, &names)?;
    prov += tx.execute("DELETE FROM provenance WHERE object_ref = ?1", [&gr])? as i64;
    tx.execute("DELETE FROM entities WHERE id = ?1", [&g])?;
    insert_provenance(&tx, &inv, &kr, actor, "analyst.merge", std::slice::from_ref(&gr))?;
    recount_entity(&tx, &k)?;
    bump(&tx, &inv, after - before, 1 - prov)?;
    audit(&tx, actor, "entity.merge", Some(ws), Some(keep), &serde_json::json!({"merged": gr, "name": gname}))?;
    tx.commit()?;
    Ok(())
}

/// Deletes an entity with its relations, mentions and provenance records.
pub(crate) fn delete_entity(conn: &mut Connection, ws: Uuid, ent: &ObjectRef, actor: &str) -> Result<()> {
    require(ent, RefKind::Entity)?;
    let tx = conn.transaction()?;
    let inv = investigation_of(&tx, ws, ent)?;
    let (id, r) = (ent.id().to_string(), ent.to_string());
    let (kind, name): (String, String) =
        tx.query_row("SELECT kind, name FROM entities WHERE id = ?1", [&id], |x| Ok((x.get(0)?, x.get(1)?)))?;
    let others: Vec<String> = tx
        .prepare("SELECT substr(dst, 8) FROM relations WHERE src = ?1 AND dst LIKE 'entity:%'")?
        .query_map([&r], |x| x.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let rel_ids: Vec<String> = tx
        .prepare("SELECT 'relation:' || id FROM relations WHERE src = ?1 OR dst = ?1")?
        .query_map([&r], |x| x.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let rels = tx.execute("DELETE FROM relations WHERE src = ?1 OR dst = ?1", [&r])? as i64;
    let mut prov = tx.execute("DELETE FROM provenance WHERE object_ref = ?1", [&r])? as i64;
    for rel in &rel_ids {
        prov += tx.execute("DELETE FROM provenance WHERE object_ref = ?1", [rel])? as i64;
    }
    tx.execute("DELETE FROM entities WHERE id = ?1", [&id])?;
    for o in &others {
        recount_entity(&tx, o)?;
    }
    bump(&tx, &inv, -rels, -prov)?;
    audit(
        &tx,
        actor,
        "entity.delete",
        Some(ws),
        Some(ent),
        &serde_json::json!({"kind": kind, "name": name, "relations": rels}),
    )?;
    tx.commit()?;
    Ok(())
}

/// Draws a relation between two objects of one investigation.
pub(crate) fn create_relation(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    rel: &NewRelation,
    actor: &str,
) -> Result<ObjectRef> {
    require(inv, RefKind::Investigation)?;
    if !RELATION_KINDS.contains(&rel.kind.as_str()) {
        return Err(StoreError::Invalid(format!(
            "unknown relation kind `{}` (one of {})",
            rel.kind,
            RELATION_KINDS.join(", ")
        )));
    }
    let confidence = rel.confidence.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&confidence) {
        return Err(StoreError::Invalid(format!("confidence {confidence} is not between 0 and 1")));
    }
    if rel.src == rel.dst {
        return Err(StoreError::Invalid("a relation joins two different objects".into()));
    }
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, inv)?;
    let inv_id = inv.id().to_string();
    for end in [&rel.src, &rel.dst] {
        if !matches!(end.kind(), RefKind::Entity | RefKind::Evidence) {
            return Err(StoreError::Invalid(format!("a relation joins entities and evidence items, not `{end}`")));
        }
        if investigation_of(&tx, ws, end)? != inv_id {
            return Err(StoreError::Invalid(format!("{end} belongs to another investigation")));
        }
    }
    let (src, dst) = (rel.src.to_string(), rel.dst.to_string());
    let exists: Option<String> = tx
        .query_row(
            "SELECT id FROM relations WHERE src = ?1 AND dst = ?2 AND kind = ?3",
            params![src, dst, rel.kind],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(id) = exists {
        return Err(StoreError::Conflict(format!("relation:{id} already joins {src} to {dst} as {}", rel.kind)));
    }
    let id = Uuid::now_v7();
    tx.execute(
        "INSERT INTO relations (id, investigation_id, kind, src, dst, confidence, created_at, producer)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'analyst')",
        params![id.to_string(), inv_id, rel.kind, src, dst, confidence, now_rfc3339()],
    )?;
    let r = ObjectRef::new(RefKind::Relation, id);
    insert_provenance(&tx, &inv_id, &r.to_string(), actor, "analyst.create", &[])?;
    if rel.dst.kind() == RefKind::Entity {
        recount_entity(&tx, &rel.dst.id().to_string())?;
    }
    bump(&tx, &inv_id, 1, 1)?;
    audit(
        &tx,
        actor,
        "relation.create",
        Some(ws),
        Some(&r),
        &serde_json::json!({"kind": rel.kind, "src": src, "dst": dst}),
    )?;
    tx.commit()?;
    Ok(r)
}

/// Deletes a relation (any: SPECIMEN's, extraction's, an analyst's) with its
/// provenance records. Extraction does not draw it again for the same items
/// unless the extractors' version changes.
pub(crate) fn delete_relation(conn: &mut Connection, ws: Uuid, rel: &ObjectRef, actor: &str) -> Result<()> {
    require(rel, RefKind::Relation)?;
    let tx = conn.transaction()?;
    let inv = investigation_of(&tx, ws, rel)?;
    let (kind, src, dst): (String, String, String) =
        tx.query_row("SELECT kind, src, dst FROM relations WHERE id = ?1", [rel.id().to_string()], |x| {
            Ok((x.get(0)?, x.get(1)?, x.get(2)?))
        })?;
    tx.execute("DELETE FROM relations WHERE id = ?1", [rel.id().to_string()])?;
    let prov = tx.execute("DELETE FROM provenance WHERE object_ref = ?1", [rel.to_string()])? as i64;
    if let Some(e) = dst.strip_prefix("entity:") {
        recount_entity(&tx, e)?;
    }
    bump(&tx, &inv, -1, -prov)?;
    audit(
        &tx,
        actor,
        "relation.delete",
        Some(ws),
        Some(rel),
        &serde_json::json!({"kind": kind, "src": src, "dst": dst}),
    )?;
    tx.commit()?;
    Ok(())
}
