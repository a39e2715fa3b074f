//! Names that may be one person or one organisation (SPEC A2): variants the
//! recognisers (or the analyst) wrote apart — accents and case (« Hélène
//! MARCHETTI », « Helene Marchetti »), word order (« Kowalczyk Sabine »), a
//! legal form or none (« Fleuve Logistique », « Fleuve Logistique SAS »), a
//! surname alone (« Mme Kowalczyk »), an initial (« Marc D. »). They are
//! proposed, never merged: the analyst merges with the graph's own merge
//! (an alias keeps the old name) or leaves them apart.

use std::collections::{BTreeMap, HashMap, HashSet};

use labfy_core::{ObjectRef, RefKind};
use rusqlite::params;
use serde::Serialize;
use unicode_normalization::UnicodeNormalization;
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::model::EntityBrief;
use crate::reads::Reads;

/// Most people and organisations read for one proposal (the most
/// mentioned first).
pub const MAX_VARIANT_NAMES: u32 = 20_000;

/// One group of names that may be one entity.
#[derive(Debug, Clone, Serialize)]
pub struct NameVariants {
    /// `person` or `organisation`.
    pub kind: String,
    /// Why they are grouped: `same_letters` (accents, case, word order or a
    /// legal form apart), `surname` (a surname alone beside full names),
    /// `initial` (a given name and an initial beside a full name).
    pub reason: &'static str,
    /// The names, the most mentioned first.
    pub entities: Vec<EntityBrief>,
}

/// The proposals of an investigation.
#[derive(Debug, Clone, Serialize)]
pub struct NameVariantList {
    /// The groups, the most mentioned first.
    pub groups: Vec<NameVariants>,
    /// Whether more names exist than were read ([`MAX_VARIANT_NAMES`]).
    pub partial: bool,
}

/// Lower case, without accents (« Hélène » → « helene »).
fn fold(s: &str) -> String {
    s.nfd().filter(|c| !unicode_normalization::char::is_combining_mark(*c)).flat_map(char::to_lowercase).collect()
}

/// The words of a name, folded; an organisation's without its legal form.
fn words(kind: &str, name: &str) -> Vec<String> {
    name.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .filter(|w| kind != "organisation" || !labfy_extract::is_legal_form(w))
        .map(|w| fold(w).trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

impl Reads<'_> {
    /// People and organisations of `inv` whose names may be one entity's,
    /// grouped with the reason; at most `limit` groups, the most mentioned
    /// first. Reads at most [`MAX_VARIANT_NAMES`] names.
    pub fn name_variants(&self, ws: Uuid, inv: &ObjectRef, limit: u32) -> Result<NameVariantList> {
        if inv.kind() != RefKind::Investigation {
            return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
        }
        self.require_in_workspace(ws, inv)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, kind, name, mention_count, json_extract(attributes, '$.distinct_from') FROM entities
             WHERE investigation_id = ?1 AND kind IN ('person', 'organisation')
             ORDER BY mention_count DESC, id LIMIT ?2",
        )?;
        let rows: Vec<(String, String, String, i64, Option<String>)> = stmt
            .query_map(params![inv.id().to_string(), MAX_VARIANT_NAMES + 1], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let partial = rows.len() > MAX_VARIANT_NAMES as usize;
        let mut names = Vec::with_capacity(rows.len().min(MAX_VARIANT_NAMES as usize));
        // Pairs the analyst said are two (SPEC A3): never proposed again.
        let mut distinct: HashSet<(ObjectRef, ObjectRef)> = HashSet::new();
        for (id, kind, name, count, apart) in rows.into_iter().take(MAX_VARIANT_NAMES as usize) {
            let id = Uuid::try_parse(&id).map_err(|e| StoreError::Damaged(format!("entity id {id}: {e}")))?;
            let me = ObjectRef::new(RefKind::Entity, id);
            let others: Vec<String> = apart.and_then(|a| serde_json::from_str(&a).ok()).unwrap_or_default();
            for other in others.iter().filter_map(|o| o.parse::<ObjectRef>().ok()) {
                distinct.insert((me, other));
                distinct.insert((other, me));
            }
            let w = words(&kind, &name);
            names.push((EntityBrief { id: me, kind, name, evidence_count: count }, w));
        }

        // Same letters: accents, case, word order, a legal form apart.
        let mut by_letters: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
        for (i, (e, w)) in names.iter().enumerate() {
            if w.is_empty() {
                continue;
            }
            let mut sorted = w.clone();
            sorted.sort();
            by_letters.entry((e.kind.clone(), sorted.join(" "))).or_default().push(i);
        }
        let mut groups: Vec<(&'static str, Vec<usize>)> =
            by_letters.into_values().filter(|g| g.len() > 1).map(|g| ("same_letters", g)).collect();

        // People: a surname alone beside full names; a given name and an
        // initial beside the full name.
        let mut by_surname: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut by_given: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, (e, w)) in names.iter().enumerate() {
            if e.kind == "person" && w.len() >= 2 {
                if let Some(last) = w.last() {
                    by_surname.entry(last.as_str()).or_default().push(i);
                }
                by_given.entry(w[0].as_str()).or_default().push(i);
            }
        }
        for (i, (e, w)) in names.iter().enumerate() {
            if e.kind != "person" {
                continue;
            }
            match w.as_slice() {
                [surname] => {
                    if let Some(full) = by_surname.get(surname.as_str()) {
                        let mut g = vec![i];
                        g.extend(full.iter().copied());
                        groups.push(("surname", g));
                    }
                }
                [given, initial] if initial.chars().count() == 1 => {
                    let full: Vec<usize> = by_given
                        .get(given.as_str())
                        .into_iter()
                        .flatten()
                        .copied()
                        .filter(|&j| {
                            names[j].1.last().is_some_and(|s| s.starts_with(initial.as_str()) && s.chars().count() > 1)
                        })
                        .collect();
                    if !full.is_empty() {
                        let mut g = vec![i];
                        g.extend(full);
                        groups.push(("initial", g));
                    }
                }
                _ => {}
            }
        }
        let weight = |g: &[usize]| g.iter().map(|i| names[*i].0.evidence_count).sum::<i64>();
        groups.sort_by_key(|g| std::cmp::Reverse(weight(&g.1)));
        let groups = groups
            .into_iter()
            .filter_map(|(reason, mut g)| {
                g.sort_by(|a, b| names[*b].0.evidence_count.cmp(&names[*a].0.evidence_count).then(a.cmp(b)));
                g.dedup();
                // Each name is proposed beside the first; one the analyst
                // set apart from it is not.
                let keep = names[g[0]].0.id;
                g.retain(|&i| !distinct.contains(&(keep, names[i].0.id)));
                (g.len() > 1).then(|| NameVariants {
                    kind: names[g[0]].0.kind.clone(),
                    reason,
                    entities: g.into_iter().map(|i| names[i].0.clone()).collect(),
                })
            })
            .take(limit.clamp(1, 500) as usize)
            .collect();
        Ok(NameVariantList { groups, partial })
    }
}
