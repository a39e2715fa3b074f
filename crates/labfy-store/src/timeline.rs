//! An investigation's timeline (issue 44, item 6): its pieces in the order
//! of what they date — a note of an event by the date the analyst gave it,
//! a message by its `Date:`, a document by the date its file gives (a PDF's
//! creation date), anything else by when it was collected — oldest or newest first, and for one entity the pieces that
//! mention it. Keyset pages on (date, id): page 1,000 costs what page 1 does
//! once the dates are computed.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::reads::{Reads, check_limit};

/// Most items in one page of the timeline.
pub const MAX_TIMELINE_PAGE: u32 = 200;

/// One dated piece.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimelineItem {
    /// `evidence:<uuid>`.
    pub id: ObjectRef,
    /// Its title.
    pub title: String,
    /// Its media type.
    pub mime: String,
    /// Where it came from.
    pub source: String,
    /// The date it is placed at, `YYYY-MM-DD HH:MM:SS` in UTC.
    pub date: String,
    /// What that date is: `event` (when what it tells happened, as the
    /// analyst gave it), `document` (the piece's own: a message's `Date:`,
    /// a file's creation date) or `collected` (when Labfy got it).
    pub date_kind: &'static str,
}

/// A page of the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimelinePage {
    /// The items, in the order asked.
    pub items: Vec<TimelineItem>,
    /// The cursor of the next page (`date|id` of the last item), if any.
    pub next: Option<String>,
}

/// What a timeline page asks for.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TimelineQuery {
    /// Only the pieces that mention this entity.
    pub entity: Option<ObjectRef>,
    /// Newest first (`true`) or oldest first.
    pub newest_first: bool,
    /// The previous page's `next`.
    pub after: Option<String>,
    /// Items in the page (1 to [`MAX_TIMELINE_PAGE`]).
    pub limit: u32,
}

impl Reads<'_> {
    /// A page of investigation `inv`'s timeline.
    pub fn timeline(&self, ws: uuid::Uuid, inv: &ObjectRef, q: &TimelineQuery) -> Result<TimelinePage> {
        if inv.kind() != RefKind::Investigation {
            return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
        }
        self.require_in_workspace(ws, inv)?;
        let limit = check_limit("limit", q.limit, MAX_TIMELINE_PAGE)?;
        if let Some(e) = &q.entity {
            if e.kind() != RefKind::Entity {
                return Err(StoreError::Invalid(format!("entity: expected an `entity:` reference, got `{e}`")));
            }
            self.require_in_workspace(ws, e)?;
        }
        let (after_date, after_id) = match &q.after {
            None => (None, None),
            Some(c) => {
                let (d, id) =
                    c.rsplit_once('|').ok_or_else(|| StoreError::Invalid("after: not a timeline cursor".into()))?;
                (Some(d.to_owned()), Some(id.to_owned()))
            }
        };
        let (cmp, order) = if q.newest_first { ("<", "DESC") } else { (">", "ASC") };
        // A piece's own date: the first import's `date` (a message) or
        // `created` (a document), as SQLite reads an ISO 8601 date — any
        // other form is not a date here, and the collection date stands.
        let sql = format!(
            "WITH dated AS (
               SELECT e.id, e.title, e.mime, e.source, datetime(e.collected_at) AS collected,
                      coalesce(e.dated_at,
                               (SELECT coalesce(datetime(json_extract(i.metadata, '$.date')),
                                                datetime(json_extract(i.metadata, '$.created')))
                                  FROM imports i WHERE i.evidence_id = e.id ORDER BY i.imported_at LIMIT 1)) AS own,
                      e.dated_at IS NOT NULL AS event
                 FROM evidence e
                WHERE e.investigation_id = ?1
                  AND (?2 IS NULL OR EXISTS (SELECT 1 FROM relations r
                        WHERE r.dst = ?2 AND r.kind = 'mentions' AND r.src = 'evidence:' || e.id))
             )
             SELECT id, title, mime, source, coalesce(own, collected) AS at, own IS NOT NULL, event FROM dated
              WHERE ?3 IS NULL OR (coalesce(own, collected), id) {cmp} (?3, ?4)
              ORDER BY at {order}, id {order} LIMIT ?5"
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(
            params![inv.id().to_string(), q.entity.map(|e| e.to_string()), after_date, after_id, i64::from(limit) + 1],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, bool>(5)?,
                    r.get::<_, bool>(6)?,
                ))
            },
        )?;
        let mut items = Vec::new();
        let mut raw_ids = Vec::new();
        for row in rows {
            let (id, title, mime, source, at, own, event) = row?;
            let uuid = uuid::Uuid::try_parse(&id).map_err(|e| StoreError::Damaged(format!("evidence id {id}: {e}")))?;
            items.push(TimelineItem {
                id: ObjectRef::new(RefKind::Evidence, uuid),
                title,
                mime,
                source,
                date: at.unwrap_or_default(),
                date_kind: if event {
                    "event"
                } else if own {
                    "document"
                } else {
                    "collected"
                },
            });
            raw_ids.push(id);
        }
        let next = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|last| format!("{}|{}", last.date, raw_ids[limit as usize - 1]))
        } else {
            None
        };
        Ok(TimelinePage { items, next })
    }
}
