//! Extraction fills the graph (SPEC C4): `labfy-extract` finds the selectors
//! in an evidence item's text; here each mention becomes a row with its
//! offset, length, extractor and version, the value an entity (found by kind
//! and name, or created with its provenance), and the pair a `mentions`
//! relation made by `labfy-extract`.
//!
//! Idempotent per evidence item: `extraction_state` records the version each
//! item was scanned with; scanning it again replaces its mentions and
//! removes the relations extraction made that no mention backs any more
//! (never those of SPECIMEN or of an analyst). New evidence (a note, a
//! fetched page) is scanned in the transaction that stores it; a job scans
//! a whole investigation in batches, resumable from its cursor.

use std::collections::{BTreeSet, HashMap, HashSet};

use labfy_core::{ObjectRef, RefKind};
use labfy_extract::{Kind, VERSION};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::now_rfc3339;
use crate::primitives::audit;
use crate::reads::Reads;

/// `jobs.kind` of an extraction over an investigation.
pub const EXTRACTION_JOB: &str = "extraction";

/// Evidence items scanned per transaction of a job: the writer is free again
/// within about 0.4 s (release build), and a commit's fsync is paid once per
/// thousand items (200 per batch took 63 s over 100,000 items, 1,000 took
/// 36 s: docs/PERFORMANCE.md).
pub const EXTRACTION_BATCH: u32 = 1000;

/// Who made a relation found by extraction (`relations.producer`).
pub const EXTRACTION_PRODUCER: &str = labfy_extract::PRODUCER;

/// What an extraction did, cumulative over a job (its `stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractionStats {
    /// Evidence items the job must scan (counted when it started).
    pub to_scan: u64,
    /// Evidence items scanned so far.
    pub scanned: u64,
    /// Mentions stored.
    pub mentions: u64,
    /// Mentions found beyond the per-text bound and not stored.
    pub dropped: u64,
    /// Entities created.
    pub entities_created: u64,
    /// Relations created: `mentions`, and those a message's structure
    /// states (SPEC A4).
    pub relations_created: u64,
    /// Relations removed (a new version no longer finds them; a message's
    /// structural relations made again).
    pub relations_removed: u64,
    /// Last `evidence.seq` scanned: the job resumes after it.
    pub cursor: i64,
}

impl ExtractionStats {
    fn add(&mut self, o: &ExtractionStats) {
        self.scanned += o.scanned;
        self.mentions += o.mentions;
        self.dropped += o.dropped;
        self.entities_created += o.entities_created;
        self.relations_created += o.relations_created;
        self.relations_removed += o.relations_removed;
    }

    /// The job's one-line detail.
    fn detail(&self) -> String {
        format!(
            "{}/{} evidence items scanned (labfy-extract/{VERSION}); {} mentions, {} new entities, {} new relations",
            self.scanned, self.to_scan, self.mentions, self.entities_created, self.relations_created
        )
    }
}

/// Where a job stands after one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExtractionStep {
    /// Its figures so far.
    pub stats: ExtractionStats,
    /// True once every item is scanned and the job `SUCCEEDED`.
    pub done: bool,
}

/// Entity ids already found in this transaction, by kind and value; and,
/// built at the first phone that matches no name, the investigation's phone
/// entities by their digits (one scan per transaction, not one per mention).
#[derive(Default)]
struct EntityCache {
    ids: HashMap<(Kind, String), String>,
    phones: Option<HashMap<String, String>>,
}

/// Counters an extraction moves, applied once per transaction: the change
/// of each entity's `mentions` relations, and the figures.
#[derive(Default)]
struct Touched {
    mentions: HashMap<String, i64>,
    stats: ExtractionStats,
    /// Provenance records written for relations from structure.
    provenance: i64,
}

/// `+33 6 12 34 56 78`, `+33.6.12.34.56.78` → `+33612345678`.
fn phone_digits(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_digit() || *c == '+').collect()
}

/// Scans one evidence item in the caller's transaction, replacing what an
/// earlier scan stored (not what the analyst marked).
fn scan(
    tx: &Connection,
    inv: &str,
    ev: &str,
    text: &str,
    now: &str,
    cache: &mut EntityCache,
    t: &mut Touched,
) -> Result<()> {
    let ev_ref = format!("evidence:{ev}");
    let before: BTreeSet<String> = tx
        .prepare_cached("SELECT DISTINCT entity_id FROM mentions WHERE evidence_id = ?1")?
        .query_map([ev], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    // What the analyst marked by hand stays (SPEC A3); the rest is the
    // extractors' and found again.
    tx.prepare_cached("DELETE FROM mentions WHERE evidence_id = ?1 AND extractor <> ?2")?
        .execute(params![ev, crate::graph_edit::ANALYST_EXTRACTOR])?;

    let found = labfy_extract::extract(text);
    let mut after = BTreeSet::new();
    // The relation's confidence: its most confident mention's (a selector
    // whose form holds is 1.0; a name found by a rule, that rule's).
    let mut confidence: HashMap<String, u8> = HashMap::new();
    for m in &found.mentions {
        let entity = entity_for(tx, inv, &ev_ref, m.kind, &m.value, now, cache, t)?;
        let n = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO mentions (evidence_id, start, length, entity_id, extractor, version)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![ev, m.start as i64, m.len as i64, entity, m.recogniser, VERSION])?;
        t.stats.mentions += n as u64;
        let c = confidence.entry(entity.clone()).or_default();
        *c = (*c).max(m.confidence);
        after.insert(entity);
    }
    // The item's `mentions` relations in one index range, not one probe
    // per entity (SPEC C4's 30 s over 100,000 items).
    let linked: HashSet<String> = tx
        .prepare_cached("SELECT dst FROM relations WHERE src = ?1 AND kind = 'mentions'")?
        .query_map([&ev_ref], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    for entity in &after {
        let dst = format!("entity:{entity}");
        if !linked.contains(&dst) {
            tx.prepare_cached(
                "INSERT INTO relations (id, investigation_id, kind, src, dst, confidence, created_at, producer)
                 VALUES (?1, ?2, 'mentions', ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                Uuid::now_v7().to_string(),
                inv,
                ev_ref,
                dst,
                f64::from(confidence.get(entity).copied().unwrap_or(100)) / 100.0,
                now,
                EXTRACTION_PRODUCER
            ])?;
            t.stats.relations_created += 1;
            *t.mentions.entry(entity.clone()).or_default() += 1;
        }
    }
    for gone in before.difference(&after) {
        let n = tx
            .prepare_cached(
                "DELETE FROM relations WHERE src = ?1 AND kind = 'mentions' AND dst = ?2 AND producer = ?3",
            )?
            .execute(params![ev_ref, format!("entity:{gone}"), EXTRACTION_PRODUCER])?;
        t.stats.relations_removed += n as u64;
        *t.mentions.entry(gone.clone()).or_default() -= n as i64;
    }
    structure(tx, inv, ev, &ev_ref, text, &found.mentions, now, cache, t)?;
    tx.prepare_cached(
        "INSERT INTO extraction_state (evidence_id, version, mentions, dropped, extracted_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (evidence_id) DO UPDATE SET version = excluded.version, mentions = excluded.mentions,
             dropped = excluded.dropped, extracted_at = excluded.extracted_at",
    )?
    .execute(params![ev, VERSION, found.mentions.len() as i64, found.dropped as i64, now])?;
    t.stats.dropped += found.dropped as u64;
    t.stats.scanned += 1;
    Ok(())
}

/// The relations a piece's structure states (SPEC A4), replacing those an
/// earlier scan made: for a message (`message/rfc822`, as Labfy's mail
/// reader wrote its text), the message `sent_by` its sender's address,
/// `sent_to` and `copied_to` its recipients', `sent_from` the address its
/// first relay saw it come from; the person whose display
/// name goes with an address `uses_email` it; in any piece, the signer of a
/// signature block `works_for` the organisation under the name (these two
/// made once, with provenance from the piece; kept).
#[allow(clippy::too_many_arguments)]
fn structure(
    tx: &Connection,
    inv: &str,
    ev: &str,
    ev_ref: &str,
    text: &str,
    mentions: &[labfy_extract::Mention],
    now: &str,
    cache: &mut EntityCache,
    t: &mut Touched,
) -> Result<()> {
    let removed = tx
        .prepare_cached(
            "DELETE FROM relations WHERE src = ?1 AND kind IN ('sent_by', 'sent_to', 'copied_to', 'sent_from')
             AND producer = ?2",
        )?
        .execute(params![ev_ref, EXTRACTION_PRODUCER])?;
    t.stats.relations_removed += removed as u64;
    let insert = |kind: &str, src: &str, dst: &str| -> Result<String> {
        let id = Uuid::now_v7().to_string();
        tx.prepare_cached(
            "INSERT INTO relations (id, investigation_id, kind, src, dst, confidence, created_at, producer)
             VALUES (?1, ?2, ?3, ?4, ?5, 1.0, ?6, ?7)",
        )?
        .execute(params![id, inv, kind, src, dst, now, EXTRACTION_PRODUCER])?;
        Ok(id)
    };
    // Between two entities, a relation is made once, by the first piece
    // that states it, with provenance from that piece; kept.
    let once = |kind: &str, src: &str, dst: &str, t: &mut Touched| -> Result<()> {
        let known: Option<String> = tx
            .prepare_cached("SELECT id FROM relations WHERE src = ?1 AND dst = ?2 AND kind = ?3 LIMIT 1")?
            .query_row(params![src, dst, kind], |r| r.get(0))
            .optional()?;
        if known.is_none() {
            let rel = insert(kind, src, dst)?;
            crate::graph_edit::insert_provenance(
                tx,
                inv,
                &format!("relation:{rel}"),
                &format!("{EXTRACTION_PRODUCER}/{VERSION}"),
                "extraction.structure",
                &[ev_ref.to_owned()],
            )?;
            t.stats.relations_created += 1;
            t.provenance += 1;
        }
        Ok(())
    };
    // A signature block, in any piece: the signer works for the company
    // named under the name.
    for s in labfy_extract::signatures(text, mentions) {
        let person = format!("entity:{}", entity_for(tx, inv, ev_ref, Kind::Person, &s.person, now, cache, t)?);
        let org =
            format!("entity:{}", entity_for(tx, inv, ev_ref, Kind::Organisation, &s.organisation, now, cache, t)?);
        once("works_for", &person, &org, t)?;
    }
    let mime: String = tx.prepare_cached("SELECT mime FROM evidence WHERE id = ?1")?.query_row([ev], |r| r.get(0))?;
    if mime != "message/rfc822" {
        return Ok(());
    }
    let mut made = HashSet::new();
    // Where the message was first handed over from: its first relay's
    // view of the sender's address.
    if let Some(m) = labfy_extract::message_origin(text, mentions) {
        let ip = entity_for(tx, inv, ev_ref, m.kind, &m.value, now, cache, t)?;
        insert("sent_from", ev_ref, &format!("entity:{ip}"))?;
        t.stats.relations_created += 1;
    }
    for a in labfy_extract::message_roles(text, mentions) {
        let email = entity_for(tx, inv, ev_ref, Kind::Email, &a.email, now, cache, t)?;
        let dst = format!("entity:{email}");
        let kind = match a.role {
            labfy_extract::Role::From => "sent_by",
            labfy_extract::Role::To => "sent_to",
            labfy_extract::Role::Cc => "copied_to",
        };
        if made.insert((kind, dst.clone())) {
            insert(kind, ev_ref, &dst)?;
            t.stats.relations_created += 1;
        }
        let Some(name) = a.person else { continue };
        let person = format!("entity:{}", entity_for(tx, inv, ev_ref, Kind::Person, &name, now, cache, t)?);
        once("uses_email", &person, &dst, t)?;
    }
    Ok(())
}

/// The entity an extracted value names in this investigation: the first of
/// that kind and name, or a new one with a provenance record whose input is
/// the evidence it was first found in.
#[allow(clippy::too_many_arguments)]
fn entity_for(
    tx: &Connection,
    inv: &str,
    ev_ref: &str,
    kind: Kind,
    value: &str,
    now: &str,
    cache: &mut EntityCache,
    t: &mut Touched,
) -> Result<String> {
    let key = (kind, value.to_owned());
    if let Some(id) = cache.ids.get(&key) {
        return Ok(id.clone());
    }
    // By name, or by an alias an analyst's rename or merge left.
    let mut found = crate::graph_edit::find_entity(tx, inv, kind.as_str(), value)?;
    if found.is_none() && kind == Kind::Phone {
        // A number written by hand or by SPECIMEN (`+33 6 12 34 56 78`) is
        // the same number as its E.164 form.
        if cache.phones.is_none() {
            let mut map = HashMap::new();
            let mut stmt =
                tx.prepare_cached("SELECT id, name FROM entities WHERE investigation_id = ?1 AND kind = 'phone'")?;
            let mut rows = stmt.query([inv])?;
            while let Some(r) = rows.next()? {
                map.entry(phone_digits(&r.get::<_, String>(1)?)).or_insert(r.get::<_, String>(0)?);
            }
            cache.phones = Some(map);
        }
        found = cache.phones.as_ref().and_then(|m| m.get(value)).cloned();
    }
    let id = match found {
        Some(id) => id,
        None => {
            let id = Uuid::now_v7().to_string();
            let attributes = serde_json::json!({"extractor": kind.extractor(), "version": VERSION});
            tx.prepare_cached(
                "INSERT INTO entities (id, investigation_id, kind, name, attributes, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![id, inv, kind.as_str(), value, attributes.to_string(), now])?;
            let prov = Uuid::now_v7().to_string();
            tx.prepare_cached(
                "INSERT INTO provenance (id, investigation_id, object_ref, producer, activity, created_at)
                 VALUES (?1, ?2, ?3, ?4, 'extraction', ?5)",
            )?
            .execute(params![
                prov,
                inv,
                format!("entity:{id}"),
                format!("{EXTRACTION_PRODUCER}/{VERSION}"),
                now
            ])?;
            tx.prepare_cached("INSERT INTO provenance_inputs (provenance_id, position, input_ref) VALUES (?1, 0, ?2)")?
                .execute(params![prov, ev_ref])?;
            t.stats.entities_created += 1;
            if let Some(phones) = cache.phones.as_mut() {
                phones.insert(phone_digits(value), id.clone());
            }
            id
        }
    };
    cache.ids.insert(key, id.clone());
    Ok(id)
}

/// Moves the derived figures for what a transaction's scans changed, by
/// exact increments: each entity's mention count by the `mentions` relations
/// it gained or lost, the investigation's relation and provenance counters.
fn settle(tx: &Connection, inv: &str, t: &Touched) -> Result<()> {
    let mut stmt = tx.prepare_cached("UPDATE entities SET mention_count = mention_count + ?2 WHERE id = ?1")?;
    for (e, delta) in t.mentions.iter().filter(|(_, d)| **d != 0) {
        stmt.execute(params![e, delta])?;
    }
    let relations = t.stats.relations_created as i64 - t.stats.relations_removed as i64;
    tx.prepare_cached(
        "UPDATE investigations SET relation_count = relation_count + ?2, provenance_count = provenance_count + ?3
         WHERE id = ?1",
    )?
    .execute(params![inv, relations, t.stats.entities_created as i64 + t.provenance])?;
    Ok(())
}

/// Scans one new evidence item in the transaction that stores it (a note, a
/// fetched page), so a REAL investigation's graph grows with its evidence.
pub(crate) fn scan_new_evidence(tx: &Connection, inv: &str, ev: &ObjectRef, text: &str, now: &str) -> Result<()> {
    let mut t = Touched::default();
    scan(tx, inv, &ev.id().to_string(), text, now, &mut EntityCache::default(), &mut t)?;
    settle(tx, inv, &t)
}

/// Starts an extraction job over an investigation, or finds the one already
/// running (`false`). It counts what it must scan: items never scanned or
/// scanned by another version.
pub(crate) fn start(conn: &mut Connection, ws: Uuid, inv: &ObjectRef, actor: &str) -> Result<(ObjectRef, bool)> {
    if inv.kind() != RefKind::Investigation {
        return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
    }
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, inv)?;
    let inv_id = inv.id().to_string();
    let running: Option<String> = tx
        .query_row(
            "SELECT id FROM jobs WHERE investigation_id = ?1 AND kind = ?2 AND status IN ('QUEUED', 'RUNNING')",
            params![inv_id, EXTRACTION_JOB],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(id) = running {
        let job = Uuid::parse_str(&id).map_err(|e| StoreError::Damaged(format!("job id {id}: {e}")))?;
        return Ok((ObjectRef::new(RefKind::Job, job), false));
    }
    let to_scan: i64 = tx.query_row(
        "SELECT count(*) FROM evidence e WHERE e.investigation_id = ?1
           AND NOT EXISTS (SELECT 1 FROM extraction_state s WHERE s.evidence_id = e.id AND s.version = ?2)",
        params![inv_id, VERSION],
        |r| r.get(0),
    )?;
    let stats = ExtractionStats { to_scan: to_scan as u64, ..ExtractionStats::default() };
    let job = Uuid::now_v7();
    let now = now_rfc3339();
    tx.execute(
        "INSERT INTO jobs (id, investigation_id, kind, status, progress, detail, created_at, updated_at, stats)
         VALUES (?1, ?2, ?3, 'RUNNING', 0, ?4, ?5, ?5, ?6)",
        params![job.to_string(), inv_id, EXTRACTION_JOB, stats.detail(), now, stats_json(&stats)?],
    )?;
    let job_ref = ObjectRef::new(RefKind::Job, job);
    audit(
        &tx,
        actor,
        "extraction.start",
        Some(ws),
        Some(&job_ref),
        &serde_json::json!({"investigation": inv, "to_scan": to_scan, "version": VERSION}),
    )?;
    tx.commit()?;
    Ok((job_ref, true))
}

fn stats_json(s: &ExtractionStats) -> Result<String> {
    serde_json::to_string(s).map_err(|e| StoreError::Invalid(format!("job stats: {e}")))
}

/// Scans the next `batch` items of a running extraction job in one
/// transaction and moves its progress; the job `SUCCEEDED` once none is left.
pub(crate) fn step(conn: &mut Connection, ws: Uuid, job: &ObjectRef, batch: u32) -> Result<ExtractionStep> {
    if job.kind() != RefKind::Job {
        return Err(StoreError::Invalid(format!("expected a `job:` reference, got `{job}`")));
    }
    let batch = batch.clamp(1, 10_000);
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, job)?;
    let (inv, kind, status, stats): (String, String, String, String) = tx.query_row(
        "SELECT investigation_id, kind, status, stats FROM jobs WHERE id = ?1",
        [job.id().to_string()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    if kind != EXTRACTION_JOB {
        return Err(StoreError::Invalid(format!("{job} is a `{kind}` job, not an extraction")));
    }
    let mut stats: ExtractionStats =
        serde_json::from_str(&stats).map_err(|e| StoreError::Damaged(format!("stats of {job}: {e}")))?;
    if status != "RUNNING" {
        return Ok(ExtractionStep { stats, done: true });
    }
    let rows: Vec<(i64, String, String)> = tx
        .prepare_cached(
            "SELECT e.seq, e.id, e.content FROM evidence e
             WHERE e.investigation_id = ?1 AND e.seq > ?2
               AND NOT EXISTS (SELECT 1 FROM extraction_state s WHERE s.evidence_id = e.id AND s.version = ?3)
             ORDER BY e.seq LIMIT ?4",
        )?
        .query_map(params![inv, stats.cursor, VERSION, batch], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<std::result::Result<_, _>>()?;
    let now = now_rfc3339();
    let mut t = Touched::default();
    let mut cache = EntityCache::default();
    for (seq, ev, text) in &rows {
        scan(&tx, &inv, ev, text, &now, &mut cache, &mut t)?;
        stats.cursor = *seq;
    }
    settle(&tx, &inv, &t)?;
    stats.add(&t.stats);
    // Items added while the job runs are scanned as they are stored, so the
    // count may pass what the job set out to do.
    stats.to_scan = stats.to_scan.max(stats.scanned);
    let done = (rows.len() as u32) < batch;
    let progress = if done || stats.to_scan == 0 { 1.0 } else { stats.scanned as f64 / stats.to_scan as f64 };
    tx.execute(
        "UPDATE jobs SET status = ?2, progress = ?3, detail = ?4, stats = ?5, updated_at = ?6 WHERE id = ?1",
        params![
            job.id().to_string(),
            if done { "SUCCEEDED" } else { "RUNNING" },
            progress,
            stats.detail(),
            stats_json(&stats)?,
            now
        ],
    )?;
    if done {
        audit(
            &tx,
            "labfy",
            "extraction.finish",
            Some(ws),
            Some(job),
            &serde_json::to_value(stats).unwrap_or_default(),
        )?;
    }
    tx.commit()?;
    Ok(ExtractionStep { stats, done })
}

/// Extraction jobs left `RUNNING` in a workspace (a server stopped mid-job):
/// the server resumes them from their cursor.
pub(crate) fn running(conn: &Connection, ws: Uuid) -> Result<Vec<ObjectRef>> {
    let ids: Vec<String> = conn
        .prepare_cached(
            "SELECT j.id FROM jobs j JOIN investigations i ON i.id = j.investigation_id
             WHERE i.workspace_id = ?1 AND j.kind = ?2 AND j.status = 'RUNNING' AND i.received_at IS NULL
             ORDER BY j.created_at",
        )?
        .query_map(params![ws.to_string(), EXTRACTION_JOB], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    ids.iter()
        .map(|id| {
            Uuid::parse_str(id)
                .map(|u| ObjectRef::new(RefKind::Job, u))
                .map_err(|e| StoreError::Damaged(format!("job id {id}: {e}")))
        })
        .collect()
}
